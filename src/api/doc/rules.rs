//! The server's rules for what a request carries, written as JSON Schema for the
//! OpenAPI document: patterns of ids, destinations and cursors (added by name, see
//! [`constrain`]); the schemas that utoipa's attributes cannot write, for
//! `#[schema(schema_with = …)]`, are beside the rules they state (a payload's:
//! `crate::domain::job_template::payload_schema`; a signing secret's:
//! `crate::domain::secret::schema`). Patterns are ECMA-262
//! regular expressions, as JSON Schema's `pattern` is; the tests hold each to the
//! server's own check.

use serde_json::json;
use utoipa::openapi::RefOr;
use utoipa::openapi::extensions::Extensions;
use utoipa::openapi::schema::{ArrayItems, Object, Schema};

use crate::domain::event_type::MAX_EVENT_TYPE_LEN;
use crate::domain::validate::{self, MAX_EVENT_ID_LEN, MAX_SUBSCRIBER_ID_LEN};

/// Subscriber ids as [`crate::domain::validate::subscriber_id`] accepts them (ECMA-262,
/// as JSON Schema's `pattern`): `A–Z a–z 0–9 . _ : -`; the length is `minLength` /
/// `maxLength`.
pub const SUBSCRIBER_ID_PATTERN: &str = "^[A-Za-z0-9._:-]+$";
/// Event ids as [`crate::domain::validate::event_id`] accepts them: visible ASCII,
/// 0x21–0x7E (they are sent as the `webhook-id` header).
pub const EVENT_ID_PATTERN: &str = "^[!-~]+$";
/// Event type names as [`crate::domain::event_type::event_type`] accepts them.
pub const EVENT_TYPE_PATTERN: &str = "^[A-Za-z0-9._:-]+$";
/// Cursors are unpadded base64url (RFC 4648 §5) of the last key of a page.
pub const CURSOR_PATTERN: &str = "^[A-Za-z0-9_-]+$";
/// Adds the rule of what a parameter or request field named `name` carries, as the
/// server checks it: `subscriber_id` and `event_id` their pattern and lengths;
/// `subscriber_ids` (a fan-out) the subscriber id's rule on each item, which must be
/// distinct; `destination` the `host:port` forms of [`destination_pattern`]; `cursor`
/// its alphabet (a cursor is opaque: only one a listing returned is valid).
pub(super) fn constrain(name: &str, schema: &mut Schema) {
    match (name, schema) {
        ("subscriber_id", Schema::Object(id)) => path_id_rule(id, validate::subscriber_id),
        ("schedule_id", Schema::Object(id)) => path_id_rule(id, validate::schedule_id),
        ("event_type", Schema::Object(name)) => {
            string_rule(name, EVENT_TYPE_PATTERN, MAX_EVENT_TYPE_LEN);
        }
        ("event_id", Schema::Object(id)) => {
            string_rule(id, EVENT_ID_PATTERN, MAX_EVENT_ID_LEN);
        }
        ("subscriber_ids", Schema::Array(ids)) => {
            if let ArrayItems::RefOrSchema(item) = &mut ids.items
                && let RefOr::T(Schema::Object(id)) = item.as_mut()
            {
                path_id_rule(id, validate::subscriber_id);
            }
            ids.unique_items = true;
        }
        ("destination", Schema::Object(destination)) => {
            destination.pattern = Some(destination_pattern());
        }
        ("cursor", Schema::Object(cursor)) => {
            cursor.pattern = Some(CURSOR_PATTERN.to_owned());
            cursor.min_length = Some(1);
        }
        _ => {}
    }
}

fn string_rule(schema: &mut Object, pattern: &str, max_length: usize) {
    schema.pattern = Some(pattern.to_owned());
    schema.min_length = Some(1);
    schema.max_length = Some(max_length);
}

/// [`SUBSCRIBER_ID_PATTERN`] and the length, and `not` the ids among `.` and `..`
/// (dot segments, which clients resolve in a URL path) that `rule`
/// ([`crate::domain::validate::subscriber_id`], [`crate::domain::validate::schedule_id`])
/// refuses: the document follows the server's own rule.
fn path_id_rule(schema: &mut Object, rule: fn(&str) -> Result<(), String>) {
    string_rule(schema, SUBSCRIBER_ID_PATTERN, MAX_SUBSCRIBER_ID_LEN);
    let refused: Vec<&str> = [".", ".."]
        .into_iter()
        .filter(|id| rule(id).is_err())
        .collect();
    if !refused.is_empty() {
        let not: Extensions = [("not", json!({ "enum": refused }))].into_iter().collect();
        schema
            .extensions
            .get_or_insert_with(Default::default)
            .merge(not);
    }
}

/// The `host:port` forms a destination path parameter takes (ECMA-262):
/// - a DNS name of letters, digits and hyphens (labels of 1–63, not starting or ending
///   with a hyphen, the last starting with a letter, as a name whose last label is a
///   number is read as an IPv4 address), an optional trailing dot; any case;
/// - a dotted-quad IPv4 address;
/// - an IPv6 address in brackets (RFC 4291 §2.2 forms 1 and 2, hexadecimal);
///
/// then `:` and a port from 1 to 65535 without leading zeros. Each is a form that
/// [`crate::domain::destination::Destination::parse`] accepts, but for one rule no
/// pattern can state: a label that begins with the ACE prefix `xn--` (any case) must be
/// valid Punycode (RFC 3492, IDNA 2008 RFC 5891 §4.4), else the server answers 422
/// naming the destination. The server also accepts other spellings (an
/// internationalised name, an IPv4-embedding IPv6 address) that the listing shows in
/// one of these forms (IDNA-encoded).
pub fn destination_pattern() -> String {
    let label = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?";
    let last_label = "[A-Za-z](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?";
    let name = format!("(?:{label}\\.)*{last_label}\\.?");
    let octet = "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])";
    let ipv4 = format!("(?:{octet}\\.){{3}}{octet}");
    let h = "[0-9A-Fa-f]{1,4}";
    let ipv6 = [
        format!("(?:{h}:){{7}}{h}"),
        format!("(?:{h}:){{1,7}}:"),
        format!("(?:{h}:){{1,6}}:{h}"),
        format!("(?:{h}:){{1,5}}(?::{h}){{1,2}}"),
        format!("(?:{h}:){{1,4}}(?::{h}){{1,3}}"),
        format!("(?:{h}:){{1,3}}(?::{h}){{1,4}}"),
        format!("(?:{h}:){{1,2}}(?::{h}){{1,5}}"),
        format!("{h}:(?::{h}){{1,6}}"),
        format!(":(?:(?::{h}){{1,7}}|:)"),
    ]
    .join("|");
    let port =
        "(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])";
    format!("^(?:{name}|{ipv4}|\\[(?:{ipv6})\\]):{port}$")
}
