//! Subscriber secrets at rest: sealed with ChaCha20-Poly1305 (RFC 8439) when the server
//! has a secret key, stored as they are otherwise.
//!
//! A sealed value is text, so both schemas keep their `TEXT` columns:
//! `enc:v1:<standard base64 of nonce (12 bytes) || ciphertext || tag (16 bytes)>`. The
//! nonce is 96 random bits from the OS generator, fresh for every value written; the
//! associated data is the subscriber id, so a sealed value copied to another subscriber
//! does not open. The plaintext is the `whsec_…` text.
//!
//! A value without the `enc:` prefix is a plaintext secret written before a key was
//! configured: it stays readable (with or without a key) and is sealed the next time it
//! is written (see [`Sealer::reseal`]). Nothing here ever puts a secret or the key in an
//! error or in `Debug` output.

use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use chacha20poly1305::aead::{Aead, Generate, KeyInit, Payload};
use chacha20poly1305::{ChaCha20Poly1305, Nonce};
use zeroize::Zeroize;

use crate::domain::Timestamp;
use crate::domain::secret::{PreviousSecret, SigningSecret, SigningSecrets};

/// The prefix of every sealed value, naming the format's version.
pub const SEALED_PREFIX: &str = "enc:v1:";
/// Bytes of a secret key (256 bits, the ChaCha20 key size of RFC 8439 §2.3).
pub const KEY_BYTES: usize = 32;
/// Bytes of a nonce (96 bits, RFC 8439 §2.8).
const NONCE_BYTES: usize = 12;
/// Bytes of the Poly1305 tag after the ciphertext (RFC 8439 §2.8).
const TAG_BYTES: usize = 16;

/// A subscriber's stored secrets to write again sealed (see [`Sealer::check_stored`]):
/// written only if `secret` is still `old_secret`.
#[derive(Clone, PartialEq, Eq)]
pub struct Reseal {
    /// Which subscriber.
    pub subscriber_id: String,
    /// The stored `secret` the new values replace.
    pub old_secret: String,
    /// The sealed `secret`.
    pub new_secret: String,
    /// The sealed `previous_secret`, when there is one.
    pub new_previous: Option<String>,
}

impl std::fmt::Debug for Reseal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Reseal({})", self.subscriber_id)
    }
}

/// Why a text is not a secret key. Never contains the text itself.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretKeyError {
    /// Not standard base64.
    #[error("the secret key must be standard base64 (the value is not shown)")]
    NotBase64,
    /// Decodes to the wrong number of bytes.
    #[error("the secret key must decode to 32 bytes, found {0} (the value is not shown)")]
    Length(usize),
}

/// Why a stored secret could not be read. Never contains the value or the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum UnsealError {
    /// The value is sealed but this server has no secret key.
    #[error("it is encrypted and this server has no --secret-key")]
    NoKey,
    /// The tag does not verify: another key sealed it, it belongs to another
    /// subscriber, or it was altered.
    #[error(
        "it does not decrypt with the configured --secret-key (sealed with another key, \
         or altered)"
    )]
    WrongKey,
    /// `enc:` followed by something other than the `enc:v1:<base64>` format.
    #[error("the stored value is not in the enc:v1 format")]
    Malformed,
    /// The plaintext is not a `whsec_` secret.
    #[error("the stored value is not a whsec_ secret")]
    NotASecret,
}

/// A subscriber's stored signing secret that could not be read, so its jobs cannot be
/// signed. Names the subscriber, never the secret or the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot read the signing secret of subscriber `{subscriber_id}`: {reason}")]
pub struct UnreadableSecret {
    /// Whose secret.
    pub subscriber_id: String,
    /// Why.
    pub reason: UnsealError,
}

/// Writes and reads subscriber secrets: sealed with a key, as plaintext without one.
/// Cheap to clone (the cipher is shared); its key is zeroed when the last clone drops.
#[derive(Clone, Default)]
pub struct Sealer {
    cipher: Option<Arc<ChaCha20Poly1305>>,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.cipher {
            Some(_) => f.write_str("Sealer(chacha20-poly1305, key [redacted])"),
            None => f.write_str("Sealer(plaintext)"),
        }
    }
}

impl Sealer {
    /// Stores secrets as they are (no key configured).
    pub fn plaintext() -> Self {
        Sealer::default()
    }

    /// Seals with the key that `text` encodes: standard base64 of exactly
    /// [`KEY_BYTES`] bytes (surrounding whitespace ignored, e.g. `openssl rand -base64
    /// 32`).
    pub fn from_base64_key(text: &str) -> Result<Self, SecretKeyError> {
        let mut key = STANDARD
            .decode(text.trim())
            .map_err(|_| SecretKeyError::NotBase64)?;
        let cipher = ChaCha20Poly1305::new_from_slice(&key);
        let length = key.len();
        key.zeroize();
        let cipher = cipher.map_err(|_| SecretKeyError::Length(length))?;
        Ok(Sealer {
            cipher: Some(Arc::new(cipher)),
        })
    }

    /// Whether secrets are written sealed.
    pub fn is_sealing(&self) -> bool {
        self.cipher.is_some()
    }

    /// The column value for `secret` of subscriber `subscriber_id`: sealed with a key
    /// (a fresh nonce each call), the `whsec_…` text without one.
    pub fn seal(&self, subscriber_id: &str, secret: &SigningSecret) -> String {
        self.seal_text(subscriber_id, secret.expose())
    }

    /// The value to write again for a stored value (a rotation moves the current secret
    /// to `previous_secret`): a sealed value as it is (it need not be opened, so a
    /// rotation works whatever key sealed it); a plaintext one sealed when a key is
    /// configured.
    pub fn reseal(&self, subscriber_id: &str, stored: &str) -> String {
        if stored.starts_with("enc:") {
            stored.to_owned()
        } else {
            self.seal_text(subscriber_id, stored)
        }
    }

    /// Reads a stored value of subscriber `subscriber_id`: opens a sealed one, parses a
    /// plaintext one.
    pub fn open(&self, subscriber_id: &str, stored: &str) -> Result<SigningSecret, UnsealError> {
        let Some(rest) = stored.strip_prefix("enc:") else {
            return SigningSecret::parse(stored).map_err(|_| UnsealError::NotASecret);
        };
        let encoded = rest.strip_prefix("v1:").ok_or(UnsealError::Malformed)?;
        let cipher = self.cipher.as_ref().ok_or(UnsealError::NoKey)?;
        let sealed = STANDARD
            .decode(encoded)
            .map_err(|_| UnsealError::Malformed)?;
        if sealed.len() < NONCE_BYTES + TAG_BYTES {
            return Err(UnsealError::Malformed);
        }
        let (nonce, ciphertext) = sealed.split_at(NONCE_BYTES);
        let nonce = Nonce::try_from(nonce).map_err(|_| UnsealError::Malformed)?;
        let payload = Payload {
            msg: ciphertext,
            aad: subscriber_id.as_bytes(),
        };
        let mut plain = cipher
            .decrypt(&nonce, payload)
            .map_err(|_| UnsealError::WrongKey)?;
        let secret = std::str::from_utf8(&plain)
            .map_err(|_| UnsealError::NotASecret)
            .and_then(|text| SigningSecret::parse(text).map_err(|_| UnsealError::NotASecret));
        plain.zeroize();
        secret
    }

    /// The signing secrets of subscriber `subscriber_id` from its columns, as of `now`
    /// (a claim): `current` (`secret`) always, `previous` (`previous_secret`) only while
    /// its grace period runs (`now < previous_expires_at`); an expired one is not even
    /// opened, and an unreadable one is left out (logged) rather than failing the
    /// current one.
    pub fn open_secrets(
        &self,
        subscriber_id: &str,
        current: &str,
        previous: Option<&str>,
        previous_expires_at: Option<Timestamp>,
        now: Timestamp,
    ) -> Result<SigningSecrets, UnreadableSecret> {
        let unreadable = |reason| UnreadableSecret {
            subscriber_id: subscriber_id.to_owned(),
            reason,
        };
        let current = self.open(subscriber_id, current).map_err(unreadable)?;
        let previous = match (previous, previous_expires_at) {
            (Some(stored), Some(expires_at)) if now < expires_at => {
                match self.open(subscriber_id, stored) {
                    Ok(secret) => Some(PreviousSecret { secret, expires_at }),
                    // The current secret still signs: a receiver that has the new one
                    // verifies, so an unreadable old one must not block deliveries.
                    Err(reason) => {
                        tracing::warn!(%subscriber_id, %reason,
                            "the previous signing secret cannot be read; signing with the \
                             current one only");
                        None
                    }
                }
            }
            _ => None,
        };
        Ok(SigningSecrets { current, previous })
    }

    /// Checks the secrets a database holds before a server uses them, and says what to
    /// write back. `rows` are `(subscriber id, secret, previous secret)`.
    ///
    /// Fails (naming the subscriber, never a value) when a sealed value does not open:
    /// the database was sealed with a key this server lacks or does not have, and
    /// serving would fail every delivery and mix keys or plaintext into it. With a key,
    /// returns the plaintext values sealed (rows to write, as `(id, old secret, new
    /// secret, old previous, new previous)`), so enabling `--secret-key` encrypts what
    /// is already stored.
    pub fn check_stored(
        &self,
        rows: &[(String, String, Option<String>)],
    ) -> Result<Vec<Reseal>, String> {
        let mut reseal = Vec::new();
        for (id, secret, previous) in rows {
            for stored in std::iter::once(secret).chain(previous) {
                if !stored.starts_with("enc:") {
                    continue;
                }
                if let Err(error) = self.open(id, stored) {
                    let fix = match error {
                        UnsealError::NoKey => {
                            "start it with the secret key that sealed them (--secret-key-file or DEFERHOOK_SECRET_KEY)"
                        }
                        _ => "start it with the secret key that sealed them (this one does not)",
                    };
                    return Err(format!(
                        "the database holds encrypted signing secrets (subscriber `{id}`: \
                         {error}); {fix}"
                    ));
                }
            }
            let plaintext = !secret.starts_with("enc:")
                || previous.as_ref().is_some_and(|p| !p.starts_with("enc:"));
            if self.is_sealing() && plaintext {
                reseal.push(Reseal {
                    subscriber_id: id.clone(),
                    old_secret: secret.clone(),
                    new_secret: self.reseal(id, secret),
                    new_previous: previous.as_ref().map(|p| self.reseal(id, p)),
                });
            }
        }
        Ok(reseal)
    }

    fn seal_text(&self, subscriber_id: &str, text: &str) -> String {
        let Some(cipher) = &self.cipher else {
            return text.to_owned();
        };
        let nonce = Nonce::generate();
        let payload = Payload {
            msg: text.as_bytes(),
            aad: subscriber_id.as_bytes(),
        };
        let ciphertext = cipher
            .encrypt(&nonce, payload)
            .expect("ChaCha20-Poly1305 seals any message shorter than 256 GiB");
        let mut sealed = Vec::with_capacity(NONCE_BYTES + ciphertext.len());
        sealed.extend_from_slice(&nonce);
        sealed.extend_from_slice(&ciphertext);
        format!("{SEALED_PREFIX}{}", STANDARD.encode(sealed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="; // 32 bytes
    const OTHER_KEY: &str = "ZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4NzY1NDMyMTA=";

    fn sealer(key: &str) -> Sealer {
        Sealer::from_base64_key(key).unwrap()
    }

    #[test]
    fn a_database_sealed_with_another_key_or_none_is_refused() {
        let secret = SigningSecret::generate();
        let stored = sealer(KEY).seal("orders", &secret);
        let rows = vec![("orders".to_owned(), stored.clone(), None)];
        for refusing in [sealer(OTHER_KEY), Sealer::plaintext()] {
            let error = refusing.check_stored(&rows).unwrap_err();
            assert!(error.contains("subscriber `orders`"), "{error}");
            assert!(
                !error.contains(secret.expose()) && !error.contains(KEY),
                "{error}"
            );
        }
        assert_eq!(sealer(KEY).check_stored(&rows).unwrap(), Vec::new());
        // An unreadable previous secret refuses too.
        let previous = vec![(
            "orders".to_owned(),
            secret.expose().to_owned(),
            Some(stored),
        )];
        assert!(sealer(OTHER_KEY).check_stored(&previous).is_err());
    }

    #[test]
    fn with_a_key_plaintext_secrets_are_resealed() {
        let current = SigningSecret::generate();
        let old = SigningSecret::generate();
        let rows = vec![(
            "billing".to_owned(),
            current.expose().to_owned(),
            Some(old.expose().to_owned()),
        )];
        assert!(Sealer::plaintext().check_stored(&rows).unwrap().is_empty());
        let key = sealer(KEY);
        let reseal = key.check_stored(&rows).unwrap();
        assert_eq!(reseal.len(), 1);
        let row = &reseal[0];
        assert_eq!(row.old_secret, current.expose());
        assert_eq!(key.open("billing", &row.new_secret), Ok(current));
        let previous = row.new_previous.as_deref().unwrap();
        assert_eq!(key.open("billing", previous), Ok(old));
        assert!(!format!("{row:?}").contains("whsec_"));
    }

    #[test]
    fn a_sealed_secret_opens_with_the_same_key_and_subscriber() {
        let secret = SigningSecret::generate();
        let sealer = sealer(KEY);
        let stored = sealer.seal("orders", &secret);
        assert!(stored.starts_with(SEALED_PREFIX), "{stored}");
        assert!(!stored.contains(secret.expose()));
        assert_eq!(sealer.open("orders", &stored), Ok(secret.clone()));
        // A fresh nonce each time: the same secret never seals to the same text.
        let again = sealer.seal("orders", &secret);
        assert_ne!(stored, again);
        assert_eq!(sealer.open("orders", &again), Ok(secret));
    }

    #[test]
    fn another_key_does_not_open_it() {
        let stored = sealer(KEY).seal("orders", &SigningSecret::generate());
        assert_eq!(
            sealer(OTHER_KEY).open("orders", &stored),
            Err(UnsealError::WrongKey)
        );
        assert_eq!(
            Sealer::plaintext().open("orders", &stored),
            Err(UnsealError::NoKey)
        );
    }

    #[test]
    fn a_tampered_value_does_not_open() {
        let sealer = sealer(KEY);
        let stored = sealer.seal("orders", &SigningSecret::generate());
        let mut bytes = STANDARD
            .decode(stored.strip_prefix(SEALED_PREFIX).unwrap())
            .unwrap();
        for position in [0, NONCE_BYTES, bytes.len() - 1] {
            bytes[position] ^= 0x01;
            let tampered = format!("{SEALED_PREFIX}{}", STANDARD.encode(&bytes));
            assert_eq!(
                sealer.open("orders", &tampered),
                Err(UnsealError::WrongKey),
                "byte {position}"
            );
            bytes[position] ^= 0x01;
        }
        let truncated = format!("{SEALED_PREFIX}{}", STANDARD.encode(&bytes[..20]));
        assert_eq!(
            sealer.open("orders", &truncated),
            Err(UnsealError::Malformed)
        );
        for malformed in ["enc:v1:not base64!", "enc:v2:AAAA", "enc:"] {
            assert_eq!(
                sealer.open("orders", malformed),
                Err(UnsealError::Malformed),
                "{malformed}"
            );
        }
    }

    #[test]
    fn the_subscriber_id_is_bound_to_the_value() {
        let sealer = sealer(KEY);
        let stored = sealer.seal("orders", &SigningSecret::generate());
        assert_eq!(sealer.open("billing", &stored), Err(UnsealError::WrongKey));
        assert_eq!(sealer.open("orders ", &stored), Err(UnsealError::WrongKey));
    }

    #[test]
    fn plaintext_values_pass_through() {
        let secret = SigningSecret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let plaintext = Sealer::plaintext();
        assert!(!plaintext.is_sealing());
        assert_eq!(plaintext.seal("orders", &secret), secret.expose());
        assert_eq!(
            plaintext.open("orders", secret.expose()),
            Ok(secret.clone())
        );
        // A value written before the key was configured still reads with the key.
        let sealing = sealer(KEY);
        assert!(sealing.is_sealing());
        assert_eq!(sealing.open("orders", secret.expose()), Ok(secret.clone()));
        assert_eq!(
            sealing.open("orders", "not a secret"),
            Err(UnsealError::NotASecret)
        );
    }

    #[test]
    fn reseal_seals_plaintext_and_keeps_sealed_values() {
        let secret = SigningSecret::generate();
        let sealing = sealer(KEY);
        let resealed = sealing.reseal("orders", secret.expose());
        assert!(resealed.starts_with(SEALED_PREFIX));
        assert_eq!(sealing.open("orders", &resealed), Ok(secret.clone()));
        // Sealed by another key: moved as it is, still readable by that key.
        let foreign = sealer(OTHER_KEY).seal("orders", &secret);
        assert_eq!(sealing.reseal("orders", &foreign), foreign);
        // No key: plaintext stays plaintext.
        assert_eq!(
            Sealer::plaintext().reseal("orders", secret.expose()),
            secret.expose()
        );
    }

    #[test]
    fn bad_keys_are_refused_without_echoing_them() {
        let short = STANDARD.encode([7u8; 16]);
        assert_eq!(
            Sealer::from_base64_key(&short).unwrap_err(),
            SecretKeyError::Length(16)
        );
        let error = Sealer::from_base64_key("not base64 at all!").unwrap_err();
        assert_eq!(error, SecretKeyError::NotBase64);
        assert!(!error.to_string().contains("not base64 at all"));
        assert!(!SecretKeyError::Length(16).to_string().contains(&short));
        // Surrounding whitespace (a key file's newline) is ignored.
        assert!(Sealer::from_base64_key(&format!("  {KEY}\n")).is_ok());
    }

    #[test]
    fn the_previous_secret_is_read_only_during_its_grace_period() {
        let sealer = sealer(KEY);
        let current = SigningSecret::generate();
        let old = SigningSecret::generate();
        let stored_current = sealer.seal("orders", &current);
        let stored_old = sealer.seal("orders", &old);
        let until = Timestamp::from_millis(5_000);
        let read = |now| {
            sealer.open_secrets(
                "orders",
                &stored_current,
                Some(&stored_old),
                Some(until),
                Timestamp::from_millis(now),
            )
        };
        let during = read(4_999).unwrap();
        assert_eq!(during.current, current);
        assert_eq!(during.previous.unwrap().secret, old);
        assert_eq!(
            read(5_000).unwrap(),
            SigningSecrets::single(current.clone())
        );

        let wrong = Sealer::from_base64_key(OTHER_KEY)
            .unwrap()
            .open_secrets("orders", &stored_current, None, None, until)
            .unwrap_err();
        assert_eq!(wrong.reason, UnsealError::WrongKey);
        let message = wrong.to_string();
        assert!(message.contains("`orders`"), "{message}");
        assert!(!message.contains(current.expose()) && !message.contains(&stored_current));
        assert!(!message.contains(KEY) && !message.contains(OTHER_KEY));
    }

    #[test]
    fn debug_output_never_shows_the_key() {
        let shown = format!("{:?}", sealer(KEY));
        assert!(!shown.contains(KEY), "{shown}");
        assert!(!shown.contains("MDEy"), "{shown}");
        assert_eq!(format!("{:?}", Sealer::plaintext()), "Sealer(plaintext)");
    }
}
