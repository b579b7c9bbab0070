//! Cursor pagination: `limit` and an opaque, signed `cursor`; lists answer
//! `{"items": [...], "next_cursor": "…" | null}`.

use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use hmac::{Hmac, KeyInit, Mac};
use rand::RngCore;
use serde::Serialize;
use sha2::Sha256;
use subtle::ConstantTimeEq;
use utoipa::ToSchema;

use super::error::AppError;
use crate::domain::Timestamp;
use crate::store::{SharedStore, StoreError};

/// Items per page when `limit` is absent.
pub const DEFAULT_LIMIT: u32 = 100;
/// Most items per page.
pub const MAX_LIMIT: u32 = 1000;

/// One page of a listing.
#[derive(Debug, Serialize, ToSchema)]
pub struct Page<T: ToSchema> {
    /// The items of this page.
    pub items: Vec<T>,
    /// Pass as `cursor` to get the next page; `null` on the last page.
    pub next_cursor: Option<String>,
}

/// `limit` from the query: 1 to [`MAX_LIMIT`], [`DEFAULT_LIMIT`] when absent.
pub fn limit(raw: Option<&str>) -> Result<u32, AppError> {
    let Some(raw) = raw else {
        return Ok(DEFAULT_LIMIT);
    };
    raw.parse::<u32>()
        .ok()
        .filter(|n| (1..=MAX_LIMIT).contains(n))
        .ok_or_else(|| {
            AppError::invalid("limit", format!("must be an integer from 1 to {MAX_LIMIT}"))
        })
}

/// The listing a cursor belongs to: its tag is part of the cursor, so a cursor of one
/// listing is refused by every other (two listings may share a key's shape, e.g. the
/// UUIDv7 ids of jobs, events, replays and audit entries).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Listing {
    /// `GET /v1/jobs`.
    Jobs,
    /// `GET /v1/subscribers` in id order.
    Subscribers,
    /// `GET /v1/subscribers?health=…`.
    SubscribersByHealth,
    /// `GET /v1/destinations`.
    Destinations,
    /// `GET /v1/events`.
    Events,
    /// `GET /v1/replays`.
    Replays,
    /// `GET /v1/audit`.
    Audit,
    /// `GET /v1/schedules`.
    Schedules,
}

impl Listing {
    fn tag(self) -> &'static str {
        match self {
            Listing::Jobs => "j",
            Listing::Subscribers => "s",
            Listing::SubscribersByHealth => "h",
            Listing::Destinations => "d",
            Listing::Events => "e",
            Listing::Replays => "r",
            Listing::Audit => "a",
            Listing::Schedules => "p",
        }
    }
}

/// Bytes of a cursor's check: HMAC-SHA256 truncated to 80 bits (RFC 2104 §5 allows
/// truncation to at least half the hash and 80 bits), 14 base64url characters.
pub const CHECK_BYTES: usize = 10;

/// The name of the page cursors' key among the server's keys
/// ([`crate::store::Store::server_key`]).
pub const CURSOR_KEY_NAME: &str = "cursor";

/// Signs and checks page cursors (docs/DESIGN.md §5.1): a cursor is base64url (no
/// padding) of `<listing tag>/<last key>` followed by [`CHECK_BYTES`] of HMAC-SHA256
/// over those bytes, keyed by the deployment's cursor key, so only a cursor a listing
/// issued is accepted: a tampered or truncated one, or another listing's, is a 422
/// naming `cursor` (issue #34 item 5.4: a cursor with its last character changed
/// answered another page).
#[derive(Clone)]
pub struct Cursors {
    key: Arc<[u8; 32]>,
}

impl std::fmt::Debug for Cursors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Cursors([redacted])")
    }
}

impl Cursors {
    /// Cursors signed with `key`.
    pub fn new(key: [u8; 32]) -> Self {
        Cursors { key: Arc::new(key) }
    }

    /// Cursors signed with the deployment's cursor key: the one `store` keeps, made
    /// (32 random bytes) by the first instance that asks, so every instance on the
    /// database, and a restarted one, accepts the cursors of the others.
    ///
    /// # Errors
    /// The store's error; a stored key that is not 32 bytes of base64 is
    /// [`StoreError::Internal`].
    pub async fn of_deployment(store: &SharedStore, now: Timestamp) -> Result<Self, StoreError> {
        let mut candidate = [0u8; 32];
        rand::rng().fill_bytes(&mut candidate);
        let stored = store
            .server_key(CURSOR_KEY_NAME, STANDARD.encode(candidate), now)
            .await?;
        let key = STANDARD
            .decode(stored.trim())
            .ok()
            .and_then(|bytes| <[u8; 32]>::try_from(bytes).ok())
            .ok_or_else(|| StoreError::Internal("the stored cursor key is not 32 bytes".into()))?;
        Ok(Cursors::new(key))
    }

    /// The check of `payload`: the first [`CHECK_BYTES`] of its HMAC-SHA256.
    fn check(&self, payload: &[u8]) -> [u8; CHECK_BYTES] {
        let mut mac =
            Hmac::<Sha256>::new_from_slice(self.key.as_slice()).expect("HMAC takes any key");
        mac.update(payload);
        let full = mac.finalize().into_bytes();
        let mut check = [0u8; CHECK_BYTES];
        check.copy_from_slice(&full[..CHECK_BYTES]);
        check
    }

    /// Encodes the last key of a page of `listing` as an opaque, signed cursor.
    pub fn encode(&self, listing: Listing, key: &str) -> String {
        let mut bytes = format!("{}/{key}", listing.tag()).into_bytes();
        let check = self.check(&bytes);
        bytes.extend_from_slice(&check);
        URL_SAFE_NO_PAD.encode(bytes)
    }

    /// Decodes a cursor [`Cursors::encode`] made for `listing` and parses its key with
    /// `parse`; a cursor whose check fails (tampered, truncated, made with another
    /// key), another listing's, or garbage, is a 422 naming `cursor`.
    pub fn decode<K>(
        &self,
        listing: Listing,
        raw: Option<&str>,
        parse: impl Fn(&str) -> Option<K>,
    ) -> Result<Option<K>, AppError> {
        let Some(raw) = raw else { return Ok(None) };
        URL_SAFE_NO_PAD
            .decode(raw)
            .ok()
            .and_then(|bytes| {
                let at = bytes.len().checked_sub(CHECK_BYTES)?;
                let (payload, check) = bytes.split_at(at);
                bool::from(self.check(payload).ct_eq(check)).then(|| payload.to_vec())
            })
            .and_then(|payload| String::from_utf8(payload).ok())
            .and_then(|text| {
                let key = text.strip_prefix(listing.tag())?.strip_prefix('/')?;
                parse(key)
            })
            .map(Some)
            .ok_or_else(|| AppError::invalid("cursor", "is not a cursor this listing returned"))
    }

    /// Splits up to `limit + 1` fetched items into this page's items and the cursor of
    /// the next page: the extra item only proves that a next page exists.
    pub fn split<R>(
        &self,
        listing: Listing,
        mut fetched: Vec<R>,
        limit: u32,
        key: impl Fn(&R) -> String,
    ) -> (Vec<R>, Option<String>) {
        let more = fetched.len() > limit as usize;
        fetched.truncate(limit as usize);
        let next_cursor = more
            .then(|| fetched.last().map(|last| self.encode(listing, &key(last))))
            .flatten();
        (fetched, next_cursor)
    }

    /// A page from up to `limit + 1` fetched items (see [`Cursors::split`]), each shown
    /// by `view`.
    pub fn page<R, T: ToSchema>(
        &self,
        listing: Listing,
        fetched: Vec<R>,
        limit: u32,
        key: impl Fn(&R) -> String,
        view: impl Fn(R) -> T,
    ) -> Page<T> {
        let (items, next_cursor) = self.split(listing, fetched, limit, key);
        Page {
            items: items.into_iter().map(view).collect(),
            next_cursor,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits() {
        assert_eq!(limit(None).unwrap(), DEFAULT_LIMIT);
        assert_eq!(limit(Some("1")).unwrap(), 1);
        assert_eq!(limit(Some("1000")).unwrap(), 1000);
        for bad in ["0", "1001", "-1", "ten", ""] {
            assert!(limit(Some(bad)).is_err(), "{bad}");
        }
    }

    fn cursors() -> Cursors {
        Cursors::new([7; 32])
    }

    const ALPHABET: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

    #[test]
    fn cursors_round_trip_and_reject_garbage() {
        let any = |k: &str| Some(k.to_owned());
        let cursors = cursors();
        let cursor = cursors.encode(Listing::Subscribers, "sub-1");
        assert_eq!(
            cursors
                .decode(Listing::Subscribers, Some(&cursor), any)
                .unwrap(),
            Some("sub-1".to_owned())
        );
        for garbage in ["!!", "", "AAAA"] {
            assert!(
                cursors
                    .decode(Listing::Subscribers, Some(garbage), any)
                    .is_err(),
                "{garbage}"
            );
        }
        assert!(
            cursors
                .decode(Listing::Subscribers, Some(&cursor), |_| None::<String>)
                .is_err()
        );
        assert_eq!(
            cursors.decode(Listing::Subscribers, None, any).unwrap(),
            None
        );
    }

    /// A cursor with any one character changed, to any other of the alphabet, is
    /// refused (issue #34 item 5.4: its last character changed gave another page).
    #[test]
    fn a_cursor_changed_at_any_position_is_refused() {
        let any = |k: &str| Some(k.to_owned());
        let cursors = cursors();
        for key in ["sub-1", "01a232f4-82ce-7119-b4a0-6bfea368a337", "a"] {
            let cursor = cursors.encode(Listing::Jobs, key);
            for (at, original) in cursor.char_indices() {
                for other in ALPHABET.chars().filter(|&c| c != original) {
                    let mut tampered = cursor.clone();
                    tampered.replace_range(at..=at, &other.to_string());
                    let error = cursors
                        .decode(Listing::Jobs, Some(&tampered), any)
                        .unwrap_err();
                    let AppError::Invalid(fields) = error else {
                        panic!("{tampered}: {error:?}")
                    };
                    assert_eq!(fields[0].field, "cursor");
                }
            }
        }
    }

    #[test]
    fn a_truncated_or_lengthened_cursor_is_refused() {
        let any = |k: &str| Some(k.to_owned());
        let cursors = cursors();
        let cursor = cursors.encode(Listing::Audit, "01a232f4-82ce-7119-b4a0-6bfea368a337");
        for cut in 1..cursor.len() {
            let short = &cursor[..cursor.len() - cut];
            assert!(
                cursors.decode(Listing::Audit, Some(short), any).is_err(),
                "{short}"
            );
        }
        for extra in ["A", "AA", "AAAA"] {
            let long = format!("{cursor}{extra}");
            assert!(
                cursors.decode(Listing::Audit, Some(&long), any).is_err(),
                "{long}"
            );
        }
    }

    /// Another listing's cursor, whatever its key looks like, and one signed with
    /// another key (another deployment's) are refused.
    #[test]
    fn another_listings_or_deployments_cursor_is_refused() {
        let any = |k: &str| Some(k.to_owned());
        let cursors = cursors();
        let cursor = cursors.encode(Listing::Subscribers, "sub-1");
        for other in [Listing::SubscribersByHealth, Listing::Jobs, Listing::Audit] {
            assert!(
                cursors.decode(other, Some(&cursor), any).is_err(),
                "{other:?}"
            );
        }
        let uuid = "01a232f4-82ce-7119-b4a0-6bfea368a337";
        let audit = cursors.encode(Listing::Audit, uuid);
        assert!(cursors.decode(Listing::Events, Some(&audit), any).is_err());
        assert!(cursors.decode(Listing::Audit, Some(&audit), any).is_ok());
        let elsewhere = Cursors::new([8; 32]).encode(Listing::Audit, uuid);
        assert!(
            cursors
                .decode(Listing::Audit, Some(&elsewhere), any)
                .is_err()
        );
        // An unsigned cursor of the old form is refused too.
        let unsigned = URL_SAFE_NO_PAD.encode(format!("a/{uuid}"));
        assert!(
            cursors
                .decode(Listing::Audit, Some(&unsigned), any)
                .is_err()
        );
    }
}
