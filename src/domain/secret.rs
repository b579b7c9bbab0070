//! Signing secrets in the Standard Webhooks form `whsec_<base64 of 24–64 bytes>`.
//!
//! The base64 is the standard alphabet (RFC 4648 §4), with its `=` padding or without
//! it, as the official Standard Webhooks libraries accept both. The HMAC-SHA256 key
//! (RFC 2104) is the decoded bytes. A secret is write-only: its
//! `Debug` output is redacted and it has no `Display`, so it cannot slip into a log.

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};
use rand::RngCore;

use crate::domain::Timestamp;

/// The prefix every secret carries.
pub const PREFIX: &str = "whsec_";
/// Fewest key bytes accepted (192 bits).
pub const MIN_KEY_BYTES: usize = 24;
/// Most key bytes accepted (512 bits, the SHA-256 block size).
pub const MAX_KEY_BYTES: usize = 64;
/// Key bytes in a generated secret (256 bits).
pub const GENERATED_KEY_BYTES: usize = 32;

/// The texts [`SigningSecret::parse`] accepts, as a regular expression (ECMA-262, for
/// the OpenAPI document's `pattern`): `whsec_` and the canonical base64 of 24 to 64
/// bytes, padded or not. The base64 is whole groups of four characters (three bytes
/// each), then optionally a tail of two characters (one more byte, its last character
/// one whose low four bits are zero, then `==` or nothing) or three characters (two
/// more bytes, the last character's low two bits zero, then `=` or nothing): 8 to 20
/// groups take either tail, 21 groups (63 bytes) only the one-byte tail.
pub const PATTERN: &str = concat!(
    "^whsec_(?:",
    "(?:[A-Za-z0-9+/]{4}){8,20}",
    "(?:[A-Za-z0-9+/][AQgw](?:==)?|[A-Za-z0-9+/]{2}[AEIMQUYcgkosw048]=?)?",
    "|(?:[A-Za-z0-9+/]{4}){21}(?:[A-Za-z0-9+/][AQgw](?:==)?)?",
    ")$"
);

/// A subscriber's signing secret.
#[derive(Clone, PartialEq, Eq)]
pub struct SigningSecret {
    text: String,
    key: Vec<u8>,
}

/// Why a text is not a signing secret. Never contains the text itself.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    /// It does not start with `whsec_`.
    #[error("must start with `whsec_`")]
    MissingPrefix,
    /// What follows the prefix is not standard base64 (padded or not).
    #[error("must be `whsec_` followed by standard base64, with or without `=` padding")]
    NotBase64,
    /// The key is shorter or longer than allowed.
    #[error("the key must decode to 24 to 64 bytes, found {0}")]
    KeyLength(usize),
}

impl SigningSecret {
    /// A fresh secret of [`GENERATED_KEY_BYTES`] random bytes from the OS-seeded CSPRNG.
    pub fn generate() -> Self {
        let mut key = vec![0u8; GENERATED_KEY_BYTES];
        rand::rng().fill_bytes(&mut key);
        let text = format!("{PREFIX}{}", STANDARD.encode(&key));
        SigningSecret { text, key }
    }

    /// Parses `whsec_<base64>`: standard base64 (RFC 4648 §4), canonical (unused
    /// trailing bits zero), either with its full `=` padding or with none; the key must
    /// be 24 to 64 bytes. Exactly the texts that [`PATTERN`] matches.
    pub fn parse(text: &str) -> Result<Self, SecretError> {
        let encoded = text
            .strip_prefix(PREFIX)
            .ok_or(SecretError::MissingPrefix)?;
        // Padding is all or nothing: `=` present means the padded form.
        let engine = if encoded.ends_with('=') {
            &STANDARD
        } else {
            &STANDARD_NO_PAD
        };
        let key = engine.decode(encoded).map_err(|_| SecretError::NotBase64)?;
        if !(MIN_KEY_BYTES..=MAX_KEY_BYTES).contains(&key.len()) {
            return Err(SecretError::KeyLength(key.len()));
        }
        Ok(SigningSecret {
            text: text.to_owned(),
            key,
        })
    }

    /// The HMAC key: the decoded bytes.
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// The `whsec_…` text, for storing it and for the one response that creates it.
    pub fn expose(&self) -> &str {
        &self.text
    }
}

impl std::fmt::Debug for SigningSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SigningSecret([redacted])")
    }
}

/// The secret that a rotation replaced, still signing until `expires_at`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PreviousSecret {
    /// The secret that was current before the last rotation.
    pub secret: SigningSecret,
    /// The end of the rotation's grace period (exclusive): from this instant on, only
    /// the current secret signs.
    pub expires_at: Timestamp,
}

/// The secrets a subscriber's requests are signed with: the current one and, during a
/// rotation's grace period, the one it replaced (docs/DESIGN.md §4, §5). Only one previous
/// secret is kept: a second rotation during a grace period replaces it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SigningSecrets {
    /// The current secret: it always signs.
    pub current: SigningSecret,
    /// The secret the last rotation replaced, with the end of its grace period.
    pub previous: Option<PreviousSecret>,
}

impl SigningSecrets {
    /// Only `current`, no grace period.
    pub fn single(current: SigningSecret) -> Self {
        SigningSecrets {
            current,
            previous: None,
        }
    }

    /// The secrets that sign a request signed at `now`, current first: the previous
    /// secret too while `now < expires_at`. Each gives one `v1,<signature>` in
    /// `webhook-signature` (Standard Webhooks: receivers accept any one that verifies).
    pub fn active_at(&self, now: Timestamp) -> Vec<SigningSecret> {
        let mut active = vec![self.current.clone()];
        if let Some(previous) = self.previous.as_ref().filter(|p| now < p.expires_at) {
            active.push(previous.secret.clone());
        }
        active
    }
}

/// The JSON Schema of a chosen signing secret in a request, for the OpenAPI document
/// (`#[schema(schema_with = …)]`): [`PATTERN`] (`whsec_` and the canonical base64 of
/// 24–64 bytes, padded or not); `null` or absent: generated.
pub fn schema() -> utoipa::openapi::schema::Object {
    utoipa::openapi::schema::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::SchemaType::from_iter([
            utoipa::openapi::schema::Type::String,
            utoipa::openapi::schema::Type::Null,
        ]))
        .pattern(Some(PATTERN))
        .description(Some(
            "`whsec_` and the standard base64 (with or without `=` padding) of 24–64 \
             random bytes; generated (32 bytes) when absent or null. Write-only: never \
             shown again after the response that creates it.",
        ))
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_secrets_parse_back_and_differ() {
        let a = SigningSecret::generate();
        let b = SigningSecret::generate();
        assert_ne!(a, b);
        assert_eq!(a.key().len(), GENERATED_KEY_BYTES);
        assert_eq!(SigningSecret::parse(a.expose()).unwrap(), a);
    }

    #[test]
    fn the_standard_webhooks_example_secret_parses() {
        let secret = SigningSecret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        assert_eq!(secret.key().len(), 24);
    }

    #[test]
    fn unpadded_base64_gives_the_same_key_as_padded() {
        // 25 bytes: the padded form ends in `==`, the unpadded one does not.
        let key: Vec<u8> = (1..=25).collect();
        let padded = format!("{PREFIX}{}", STANDARD.encode(&key));
        let unpadded = format!("{PREFIX}{}", STANDARD_NO_PAD.encode(&key));
        assert!(padded.ends_with("==") && !unpadded.ends_with('='));
        assert_eq!(SigningSecret::parse(&padded).unwrap().key(), key);
        let secret = SigningSecret::parse(&unpadded).unwrap();
        assert_eq!(secret.key(), key);
        // The text is kept as given.
        assert_eq!(secret.expose(), unpadded);
        // 26 bytes: one `=`.
        let key: Vec<u8> = (1..=26).collect();
        let unpadded = format!("{PREFIX}{}", STANDARD_NO_PAD.encode(&key));
        assert_eq!(SigningSecret::parse(&unpadded).unwrap().key(), key);
    }

    #[test]
    fn padding_is_all_or_nothing_and_trailing_bits_are_zero() {
        let key: Vec<u8> = (1..=25).collect();
        let padded = format!("{PREFIX}{}", STANDARD.encode(&key));
        let partial = padded.strip_suffix('=').unwrap();
        assert_eq!(SigningSecret::parse(partial), Err(SecretError::NotBase64));
        assert_eq!(
            SigningSecret::parse(&format!("{padded}=")),
            Err(SecretError::NotBase64)
        );
        // The last byte's two characters carry 12 bits, 8 used: the last character
        // must be one of `AQgw` (low four bits zero); `B` sets an unused bit.
        let unpadded = format!("{PREFIX}{}", STANDARD_NO_PAD.encode(&key));
        assert!(unpadded.ends_with(['A', 'Q', 'g', 'w']), "{unpadded}");
        let noncanonical = format!("{}B", &unpadded[..unpadded.len() - 1]);
        assert_eq!(
            SigningSecret::parse(&noncanonical),
            Err(SecretError::NotBase64)
        );
    }

    /// Texts on both sides of every rule: each key length around the limits, padded
    /// and not, with partial or extra padding, a non-canonical last character, a
    /// character outside the alphabet, the URL-safe alphabet, no prefix.
    fn edge_texts() -> Vec<String> {
        let mut texts = Vec::new();
        for len in 0..=70u8 {
            let key: Vec<u8> = (0..len)
                .map(|i| i.wrapping_mul(37).wrapping_add(250))
                .collect();
            let padded = STANDARD.encode(&key);
            let unpadded = STANDARD_NO_PAD.encode(&key);
            for body in [&padded, &unpadded] {
                texts.push(format!("{PREFIX}{body}"));
                texts.push(format!("{PREFIX}{body}="));
                texts.push(format!("{PREFIX}{body}A"));
                texts.push(body.to_string());
                texts.push(format!(
                    "{PREFIX}{}",
                    body.replace('+', "-").replace('/', "_")
                ));
                if let Some(stripped) = body.strip_suffix('=') {
                    texts.push(format!("{PREFIX}{stripped}"));
                }
                let unpadded_body = body.trim_end_matches('=');
                if let Some(last) = unpadded_body.chars().last() {
                    for swap in ['B', 'f', '9', '/', '!', ' ', 'é'] {
                        if swap != last {
                            let head = &unpadded_body[..unpadded_body.len() - 1];
                            let tail = &body[unpadded_body.len()..];
                            texts.push(format!("{PREFIX}{head}{swap}{tail}"));
                        }
                    }
                }
            }
        }
        texts.push(PREFIX.to_owned());
        texts.push("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".to_owned());
        texts.push("WHSEC_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".to_owned());
        texts.push("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n".to_owned());
        texts
    }

    #[test]
    fn the_pattern_matches_exactly_what_parse_accepts() {
        let pattern = regex::Regex::new(PATTERN).unwrap();
        let mut accepted = 0;
        for text in edge_texts() {
            let parsed = SigningSecret::parse(&text).is_ok();
            assert_eq!(pattern.is_match(&text), parsed, "{text:?}");
            accepted += usize::from(parsed);
        }
        // Both forms of each of the 41 allowed lengths (one form when no padding is
        // needed), and the spec's example.
        assert!(accepted > 60, "{accepted}");
    }

    proptest::proptest! {
        #[test]
        fn the_pattern_agrees_with_parse_on_random_texts(
            text in "whsec_[A-Za-z0-9+/]{30,90}={0,3}"
        ) {
            let pattern = regex::Regex::new(PATTERN).unwrap();
            proptest::prop_assert_eq!(pattern.is_match(&text), SigningSecret::parse(&text).is_ok());
        }
    }

    #[test]
    fn bad_secrets_are_refused_without_echoing_them() {
        assert_eq!(
            SigningSecret::parse("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"),
            Err(SecretError::MissingPrefix)
        );
        assert_eq!(
            SigningSecret::parse("whsec_not base64!"),
            Err(SecretError::NotBase64)
        );
        assert_eq!(
            SigningSecret::parse("whsec_c2hvcnQ="),
            Err(SecretError::KeyLength(5))
        );
    }

    #[test]
    fn the_previous_secret_signs_until_its_grace_period_ends() {
        let current = SigningSecret::generate();
        let old = SigningSecret::generate();
        let expires_at = Timestamp::from_millis(10_000);
        let secrets = SigningSecrets {
            current: current.clone(),
            previous: Some(PreviousSecret {
                secret: old.clone(),
                expires_at,
            }),
        };
        assert_eq!(
            secrets.active_at(Timestamp::from_millis(9_999)),
            [current.clone(), old]
        );
        // The end is exclusive.
        assert_eq!(
            secrets.active_at(expires_at),
            std::slice::from_ref(&current)
        );
        assert_eq!(
            secrets.active_at(Timestamp::from_millis(20_000)),
            std::slice::from_ref(&current)
        );
        assert_eq!(
            SigningSecrets::single(current.clone()).active_at(Timestamp::from_millis(0)),
            [current]
        );
    }

    #[test]
    fn debug_output_of_the_secrets_is_redacted() {
        let secrets = SigningSecrets {
            current: SigningSecret::generate(),
            previous: Some(PreviousSecret {
                secret: SigningSecret::generate(),
                expires_at: Timestamp::from_millis(1),
            }),
        };
        let shown = format!("{secrets:?}");
        assert!(!shown.contains(secrets.current.expose()));
        assert!(!shown.contains(PREFIX), "{shown}");
    }

    #[test]
    fn debug_output_is_redacted() {
        let secret = SigningSecret::generate();
        let shown = format!("{secret:?}");
        assert!(!shown.contains(secret.expose()));
        assert!(!shown.contains(PREFIX));
    }
}
