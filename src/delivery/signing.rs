//! Standard Webhooks signatures: `v1,<base64 HMAC-SHA256(key, "{id}.{timestamp}.{body}")>`
//! (HMAC per RFC 2104, the Standard Webhooks spec §"Signature scheme").

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use crate::domain::secret::SigningSecret;

/// The `webhook-signature` value for one secret: `v1,<base64 of the 32-byte MAC>`.
pub fn sign(secret: &SigningSecret, msg_id: &str, timestamp_s: i64, body: &[u8]) -> String {
    let mut mac =
        Hmac::<Sha256>::new_from_slice(secret.key()).expect("HMAC accepts any key length");
    mac.update(msg_id.as_bytes());
    mac.update(b".");
    mac.update(timestamp_s.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
}

/// The `webhook-signature` header: one signature per active secret, space-separated
/// (during a secret rotation the receiver accepts either).
pub fn signature_header(
    secrets: &[SigningSecret],
    msg_id: &str,
    timestamp_s: i64,
    body: &[u8],
) -> String {
    secrets
        .iter()
        .map(|secret| sign(secret, msg_id, timestamp_s, body))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of the Standard Webhooks specification.
    #[test]
    fn matches_the_specification_example() {
        let secret = SigningSecret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let signature = sign(
            &secret,
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1_614_265_330,
            br#"{"test": 2432232314}"#,
        );
        assert_eq!(signature, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }

    #[test]
    fn one_signature_per_secret() {
        let a = SigningSecret::generate();
        let b = SigningSecret::generate();
        let header = signature_header(&[a.clone(), b.clone()], "e", 1, b"{}");
        let parts: Vec<&str> = header.split(' ').collect();
        assert_eq!(parts, [sign(&a, "e", 1, b"{}"), sign(&b, "e", 1, b"{}")]);
    }

    #[test]
    fn any_change_changes_the_signature() {
        let secret = SigningSecret::generate();
        let base = sign(&secret, "e", 1, b"{}");
        assert_ne!(base, sign(&secret, "f", 1, b"{}"));
        assert_ne!(base, sign(&secret, "e", 2, b"{}"));
        assert_ne!(base, sign(&secret, "e", 1, b"{ }"));
    }
}
