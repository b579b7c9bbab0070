//! Who may use the console (docs/DESIGN.md §5.12): sessions and CSRF tokens.
//!
//! With API tokens configured, the console asks for one once (`/console/login`) and
//! keeps a session in a cookie: `v1.<session id>.<expiry ms>.<token fingerprint
//! digits>.<MAC>`, the MAC an HMAC-SHA256 (RFC 2104) over the rest, keyed by a key
//! derived from the token ([`ApiTokens::derived_keys`]). Every instance configured
//! with that token accepts the cookie, none can be forged without the token, and one
//! stops working at once when its token is removed from the configuration. A session
//! expires after [`SESSION_TTL_MS`]; a logout records its id in the store, so every
//! instance refuses it from then on. Without tokens the server is loopback-only (as the
//! API) and the console needs no login; it still keeps an anonymous session, signed
//! with a key of this process, for the CSRF tokens.
//!
//! Every state-changing form carries a CSRF token, HMAC-SHA256 of its session's id: a
//! page of another site can neither read it nor send the `SameSite=Strict` cookie.

use std::collections::HashMap;
use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, KeyInit, Mac};
use rand::RngCore;
use sha2::Sha256;
use subtle::ConstantTimeEq;

use crate::api::auth::{ApiTokens, fingerprint};
use crate::domain::Timestamp;

/// The session cookie's name.
pub const SESSION_COOKIE: &str = "deferhook_session";
/// The login form's nonce cookie (a CSRF token before there is a session).
pub const LOGIN_COOKIE: &str = "deferhook_login";
/// How long a session lasts, in milliseconds: 12 hours, an on-call shift.
pub const SESSION_TTL_MS: u64 = 12 * 3_600_000;
/// How long the login form's nonce lasts, in seconds.
pub const LOGIN_NONCE_TTL_S: u64 = 3_600;
/// What a session key is derived over (with the token's digest as the HMAC key).
const SESSION_KEY_LABEL: &[u8] = b"deferhook console session v1";
/// What the fingerprint part of an anonymous session says.
const OPEN: &str = "open";

type HmacSha256 = Hmac<Sha256>;

/// A signed-in (or, without tokens, anonymous) console session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Session {
    /// Its random id (22 base64url characters).
    pub id: String,
    /// When it expires.
    pub expires_at: Timestamp,
    /// The fingerprint of the token it was opened with (`sha256:…`), which the audit
    /// trail records; `None` without tokens.
    pub actor: Option<String>,
    /// The CSRF token its forms carry.
    pub csrf: String,
}

/// How sessions are signed: per token, or with this process's key when the console
/// runs without tokens.
#[derive(Clone)]
pub struct Access {
    tokens: ApiTokens,
    /// Token fingerprint digits (16 hex) → its session key; empty without tokens.
    keys: Arc<HashMap<String, [u8; 32]>>,
    /// The key of anonymous sessions (only without tokens).
    open_key: [u8; 32],
}

impl std::fmt::Debug for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Access({} token keys)", self.keys.len())
    }
}

fn digits(fingerprint: &str) -> &str {
    fingerprint.strip_prefix("sha256:").unwrap_or(fingerprint)
}

fn mac(key: &[u8; 32], parts: &[&str]) -> [u8; 32] {
    let mut mac = HmacSha256::new_from_slice(key).expect("HMAC accepts any key length");
    for (n, part) in parts.iter().enumerate() {
        if n > 0 {
            mac.update(b"|");
        }
        mac.update(part.as_bytes());
    }
    mac.finalize().into_bytes().into()
}

/// `n` random bytes, base64url without padding.
pub fn random_text(n: usize) -> String {
    let mut bytes = vec![0u8; n];
    rand::rng().fill_bytes(&mut bytes);
    URL_SAFE_NO_PAD.encode(bytes)
}

/// True when `a` and `b` are equal, compared in constant time.
pub fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

impl Access {
    /// Sessions for `tokens` (none: anonymous sessions, with a fresh key).
    pub fn new(tokens: &ApiTokens) -> Self {
        let keys = tokens
            .derived_keys(SESSION_KEY_LABEL)
            .into_iter()
            .map(|(fingerprint, key)| (digits(&fingerprint).to_owned(), key))
            .collect();
        let mut open_key = [0u8; 32];
        if tokens.is_empty() {
            rand::rng().fill_bytes(&mut open_key);
        }
        Access {
            tokens: tokens.clone(),
            keys: Arc::new(keys),
            open_key,
        }
    }

    /// True when a session needs a token (tokens are configured).
    pub fn needs_login(&self) -> bool {
        !self.tokens.is_empty()
    }

    /// The token's fingerprint when `presented` is one of the API tokens (compared in
    /// constant time, as the API does).
    pub fn accepts(&self, presented: &str) -> Option<String> {
        self.tokens
            .accepts(presented)
            .then(|| fingerprint(presented))
    }

    fn key(&self, fingerprint_digits: &str) -> Option<&[u8; 32]> {
        if fingerprint_digits == OPEN {
            return (!self.needs_login()).then_some(&self.open_key);
        }
        self.keys.get(fingerprint_digits)
    }

    fn session(&self, id: String, expires_at: Timestamp, who: &str) -> Option<Session> {
        let key = self.key(who)?;
        let csrf = URL_SAFE_NO_PAD.encode(mac(key, &["csrf", &id]));
        Some(Session {
            actor: (who != OPEN).then(|| format!("sha256:{who}")),
            id,
            expires_at,
            csrf,
        })
    }

    /// A new session opened at `now` by the token of fingerprint `actor` (`None`:
    /// anonymous, only without tokens), and its cookie value; `None` when no key
    /// signs for `actor`.
    pub fn open(&self, actor: Option<&str>, now: Timestamp) -> Option<(Session, String)> {
        let who = actor.map_or(OPEN, digits).to_owned();
        let id = random_text(16);
        let expires_at = now.plus_ms(SESSION_TTL_MS);
        let expiry = expires_at.as_millis().to_string();
        let signature = mac(self.key(&who)?, &["v1", &id, &expiry, &who]);
        let cookie = format!(
            "v1.{id}.{expiry}.{who}.{}",
            URL_SAFE_NO_PAD.encode(signature)
        );
        Some((self.session(id, expires_at, &who)?, cookie))
    }

    /// The session a cookie value names, when its MAC is right and it has not expired
    /// at `now` (whether it was ended by a logout is the store's to say).
    pub fn verify(&self, cookie: &str, now: Timestamp) -> Option<Session> {
        let mut parts = cookie.split('.');
        let (version, id, expiry, who, signature) = (
            parts.next()?,
            parts.next()?,
            parts.next()?,
            parts.next()?,
            parts.next()?,
        );
        if version != "v1" || parts.next().is_some() {
            return None;
        }
        let expected = URL_SAFE_NO_PAD.encode(mac(self.key(who)?, &["v1", id, expiry, who]));
        if !same(&expected, signature) {
            return None;
        }
        let expires_at = Timestamp::from_millis(expiry.parse().ok()?);
        if expires_at <= now {
            return None;
        }
        self.session(id.to_owned(), expires_at, who)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::auth::ApiToken;

    const TOKEN: &str = "console-token-0123456789";

    fn with_tokens(list: &[&str]) -> Access {
        let list: Vec<ApiToken> = list.iter().map(|t| t.parse().unwrap()).collect();
        Access::new(&ApiTokens::new(&list).unwrap())
    }

    fn at(ms: i64) -> Timestamp {
        Timestamp::from_millis(ms)
    }

    #[test]
    fn a_session_is_accepted_by_every_instance_with_its_token_until_it_expires() {
        let access = with_tokens(&[TOKEN]);
        let actor = access.accepts(TOKEN).unwrap();
        let (session, cookie) = access.open(Some(&actor), at(1_000)).unwrap();
        assert_eq!(session.actor.as_deref(), Some(actor.as_str()));
        // Another instance with the same token (and another one besides).
        let other = with_tokens(&["another-token-0123456789", TOKEN]);
        assert_eq!(other.verify(&cookie, at(2_000)), Some(session.clone()));
        let expiry = 1_000 + SESSION_TTL_MS as i64;
        assert_eq!(other.verify(&cookie, at(expiry - 1)), Some(session));
        assert_eq!(other.verify(&cookie, at(expiry)), None, "expired");
        // An instance without that token refuses it.
        let without = with_tokens(&["another-token-0123456789"]);
        assert_eq!(without.verify(&cookie, at(2_000)), None);
        assert_eq!(access.accepts("console-token-012345678"), None);
    }

    #[test]
    fn a_changed_cookie_is_refused() {
        let access = with_tokens(&[TOKEN]);
        let actor = access.accepts(TOKEN).unwrap();
        let (_, cookie) = access.open(Some(&actor), at(0)).unwrap();
        let parts: Vec<&str> = cookie.split('.').collect();
        let later = format!("v1.{}.{}.{}.{}", parts[1], i64::MAX, parts[3], parts[4]);
        assert_eq!(access.verify(&later, at(1)), None, "a longer expiry");
        let open = format!("v1.{}.{}.open.{}", parts[1], parts[2], parts[4]);
        assert_eq!(access.verify(&open, at(1)), None, "anonymous with tokens");
        assert_eq!(access.verify(&format!("{cookie}.x"), at(1)), None);
        assert_eq!(access.verify("", at(1)), None);
        assert!(access.open(None, at(0)).is_none(), "no anonymous session");
    }

    #[test]
    fn without_tokens_sessions_are_anonymous_and_this_process_s() {
        let access = Access::new(&ApiTokens::default());
        let (session, cookie) = access.open(None, at(0)).unwrap();
        assert_eq!(session.actor, None);
        assert_eq!(access.verify(&cookie, at(1)), Some(session.clone()));
        let restarted = Access::new(&ApiTokens::default());
        assert_eq!(restarted.verify(&cookie, at(1)), None);
        let (again, _) = access.open(None, at(0)).unwrap();
        assert_ne!(again.id, session.id);
        assert_ne!(again.csrf, session.csrf, "a CSRF token per session");
    }
}
