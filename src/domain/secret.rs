//! Signing secrets in the Standard Webhooks form `whsec_<base64 of 24–64 bytes>`.
//!
//! The HMAC-SHA256 key (RFC 2104) is the decoded bytes. A secret is write-only: its
//! `Debug` output is redacted and it has no `Display`, so it cannot slip into a log.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
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
    /// What follows the prefix is not standard base64.
    #[error("must be `whsec_` followed by standard base64")]
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

    /// Parses `whsec_<base64>`; the key must be 24 to 64 bytes.
    pub fn parse(text: &str) -> Result<Self, SecretError> {
        let encoded = text
            .strip_prefix(PREFIX)
            .ok_or(SecretError::MissingPrefix)?;
        let key = STANDARD
            .decode(encoded)
            .map_err(|_| SecretError::NotBase64)?;
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
