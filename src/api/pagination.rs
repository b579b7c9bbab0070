//! Cursor pagination: `limit` and an opaque `cursor`; lists answer
//! `{"items": [...], "next_cursor": "…" | null}`.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::Serialize;
use utoipa::ToSchema;

use super::problem::ApiError;

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
pub fn limit(raw: Option<&str>) -> Result<u32, ApiError> {
    let Some(raw) = raw else {
        return Ok(DEFAULT_LIMIT);
    };
    raw.parse::<u32>()
        .ok()
        .filter(|n| (1..=MAX_LIMIT).contains(n))
        .ok_or_else(|| {
            ApiError::invalid("limit", format!("must be an integer from 1 to {MAX_LIMIT}"))
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

/// Encodes the last key of a page of `listing` as an opaque cursor.
pub fn encode_cursor(listing: Listing, key: &str) -> String {
    URL_SAFE_NO_PAD.encode(format!("{}/{key}", listing.tag()))
}

/// Decodes a cursor [`encode_cursor`] made for `listing` and parses its key with
/// `parse`; a cursor of another listing, or garbage, is a 422 naming `cursor`.
pub fn decode_cursor<K>(
    listing: Listing,
    raw: Option<&str>,
    parse: impl Fn(&str) -> Option<K>,
) -> Result<Option<K>, ApiError> {
    let Some(raw) = raw else { return Ok(None) };
    URL_SAFE_NO_PAD
        .decode(raw)
        .ok()
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .and_then(|text| {
            let key = text.strip_prefix(listing.tag())?.strip_prefix('/')?;
            parse(key)
        })
        .map(Some)
        .ok_or_else(|| ApiError::invalid("cursor", "is not a cursor this listing returned"))
}

/// Splits up to `limit + 1` fetched items into this page's items and the cursor of the
/// next page: the extra item only proves that a next page exists.
pub fn split<R>(
    listing: Listing,
    mut fetched: Vec<R>,
    limit: u32,
    key: impl Fn(&R) -> String,
) -> (Vec<R>, Option<String>) {
    let more = fetched.len() > limit as usize;
    fetched.truncate(limit as usize);
    let next_cursor = more
        .then(|| {
            fetched
                .last()
                .map(|last| encode_cursor(listing, &key(last)))
        })
        .flatten();
    (fetched, next_cursor)
}

/// A page from up to `limit + 1` fetched items (see [`split`]), each shown by `view`.
pub fn page<R, T: ToSchema>(
    listing: Listing,
    fetched: Vec<R>,
    limit: u32,
    key: impl Fn(&R) -> String,
    view: impl Fn(R) -> T,
) -> Page<T> {
    let (items, next_cursor) = split(listing, fetched, limit, key);
    Page {
        items: items.into_iter().map(view).collect(),
        next_cursor,
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

    #[test]
    fn cursors_round_trip_and_reject_garbage() {
        let any = |k: &str| Some(k.to_owned());
        let cursor = encode_cursor(Listing::Subscribers, "sub-1");
        assert_eq!(
            decode_cursor(Listing::Subscribers, Some(&cursor), any).unwrap(),
            Some("sub-1".to_owned())
        );
        assert!(decode_cursor(Listing::Subscribers, Some("!!"), any).is_err());
        assert!(decode_cursor(Listing::Subscribers, Some(&cursor), |_| None::<String>).is_err());
        assert_eq!(
            decode_cursor(Listing::Subscribers, None, any).unwrap(),
            None
        );
        // Another listing's cursor, whatever its key looks like.
        for other in [Listing::SubscribersByHealth, Listing::Jobs, Listing::Audit] {
            assert!(
                decode_cursor(other, Some(&cursor), any).is_err(),
                "{other:?}"
            );
        }
        let uuid = "01a232f4-82ce-7119-b4a0-6bfea368a337";
        let audit = encode_cursor(Listing::Audit, uuid);
        assert!(decode_cursor(Listing::Events, Some(&audit), any).is_err());
        assert!(decode_cursor(Listing::Audit, Some(&audit), any).is_ok());
    }
}
