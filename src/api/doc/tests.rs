//! The document against the server (issue #15): what the document calls valid, the
//! server accepts, and the other way round where a pattern can say it exactly.

use proptest::prelude::*;
use regex::Regex;
use serde_json::Value;

use super::rules::{
    CURSOR_PATTERN, EVENT_ID_PATTERN, EVENT_TYPE_PATTERN, SUBSCRIBER_ID_PATTERN,
    destination_pattern,
};
use crate::app::pagination::{self, MAX_LIMIT};
use crate::domain::destination::Destination;
use crate::domain::secret::{self, SigningSecret};
use crate::domain::validate;

fn document() -> Value {
    serde_json::to_value(crate::api::openapi()).unwrap()
}

fn schema<'a>(document: &'a Value, name: &str) -> &'a Value {
    &document["components"]["schemas"][name]
}

/// Every operation of the document as (`METHOD path`, operation).
fn operations(document: &Value) -> Vec<(String, &Value)> {
    let mut all = Vec::new();
    for (path, item) in document["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            all.push((format!("{} {path}", method.to_uppercase()), operation));
        }
    }
    all
}

/// Every parameter named `name`, with its operation.
fn parameters<'a>(document: &'a Value, name: &str) -> Vec<(String, &'a Value)> {
    operations(document)
        .into_iter()
        .flat_map(|(label, operation)| {
            operation["parameters"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|p| p["name"] == name)
                .map(move |p| (label.clone(), p))
        })
        .collect()
}

/// The component names of the JSON request bodies.
fn request_bodies(document: &Value) -> Vec<String> {
    operations(document)
        .into_iter()
        .filter_map(|(_, operation)| {
            let reference =
                operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
                    .as_str()?;
            Some(reference.rsplit('/').next()?.to_owned())
        })
        .collect()
}

fn full_match(pattern: &str) -> Regex {
    assert!(
        pattern.starts_with('^') && pattern.ends_with('$'),
        "{pattern}"
    );
    Regex::new(pattern).unwrap()
}

#[test]
fn pages_refer_to_their_item_schemas() {
    let document = document();
    let pages: Vec<_> = document["components"]["schemas"]
        .as_object()
        .unwrap()
        .keys()
        .filter(|name| name.starts_with("Page_"))
        .cloned()
        .collect();
    assert_eq!(
        pages,
        [
            "Page_AffectedEventView",
            "Page_AuditEntryView",
            "Page_DestinationView",
            "Page_JobView",
            "Page_ReplayView",
            "Page_ScheduleView",
        ]
    );
    // The subscriber listing is a page with the causes of `?health=failing` besides.
    assert_eq!(
        schema(&document, "SubscriberListing")["properties"]["items"]["items"],
        serde_json::json!({ "$ref": "#/components/schemas/SubscriberView" })
    );
    for page in pages {
        let item = page.strip_prefix("Page_").unwrap();
        assert_eq!(
            schema(&document, &page)["properties"]["items"]["items"],
            serde_json::json!({ "$ref": format!("#/components/schemas/{item}") }),
            "{page}"
        );
    }
}

#[test]
fn a_payload_is_any_json_value_but_null() {
    let document = document();
    for request in ["CreateJobRequest", "FanOutRequest", "PutScheduleRequest"] {
        let payload = &schema(&document, request)["properties"]["payload"];
        assert_eq!(
            payload["not"],
            serde_json::json!({ "type": "null" }),
            "{request}"
        );
        assert!(payload.get("type").is_none(), "{request}: {payload}");
        assert!(
            schema(&document, request)["required"]
                .as_array()
                .unwrap()
                .contains(&"payload".into())
        );
    }
}

#[test]
fn every_limit_is_what_the_server_accepts() {
    let document = document();
    let limits = parameters(&document, "limit");
    let labels: Vec<_> = limits.iter().map(|(label, _)| label.as_str()).collect();
    assert_eq!(
        labels,
        [
            "GET /v1/audit",
            "GET /v1/destinations",
            "GET /v1/events",
            "GET /v1/jobs",
            "GET /v1/replays",
            "GET /v1/schedules",
            "GET /v1/subscribers"
        ]
    );
    for (label, parameter) in limits {
        let minimum = parameter["schema"]["minimum"].as_u64().expect(&label);
        let maximum = parameter["schema"]["maximum"].as_u64().expect(&label);
        assert_eq!((minimum, maximum), (1, u64::from(MAX_LIMIT)), "{label}");
        for accepted in [minimum, maximum] {
            assert!(pagination::limit(Some(&accepted.to_string())).is_ok());
        }
        for refused in [minimum - 1, maximum + 1] {
            assert!(pagination::limit(Some(&refused.to_string())).is_err());
        }
    }
}

#[test]
fn both_secret_fields_carry_the_servers_pattern() {
    let document = document();
    for request in ["PutSubscriberRequest", "RotateSecretRequest"] {
        let secret = &schema(&document, request)["properties"]["secret"];
        assert_eq!(secret["pattern"], secret::PATTERN, "{request}");
    }
    let pattern = full_match(secret::PATTERN);
    for form in [
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        "whsec_BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBw==",
        "whsec_BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBw",
    ] {
        assert!(pattern.is_match(form), "{form}");
        assert!(SigningSecret::parse(form).is_ok(), "{form}");
    }
}

/// Each request field or query parameter that takes an instant says `date-time`, as
/// the responses do.
#[test]
fn request_instants_are_date_times() {
    let document = document();
    let mut instants = Vec::new();
    for request in request_bodies(&document) {
        for (field, property) in schema(&document, &request)["properties"]
            .as_object()
            .unwrap()
        {
            if property["description"]
                .as_str()
                .is_some_and(|d| d.contains("RFC 3339"))
            {
                assert_eq!(property["format"], "date-time", "{request}.{field}");
                instants.push(format!("{request}.{field}"));
            }
        }
    }
    instants.sort();
    instants.dedup();
    assert_eq!(
        instants,
        [
            "CreateJobRequest.deadline",
            "CreateJobRequest.deliver_at",
            "CreateReplayRequest.dead_after",
            "CreateReplayRequest.dead_before",
            "FanOutRequest.deadline",
            "FanOutRequest.deliver_at",
            "PutScheduleRequest.anchor",
            "RescheduleRequest.deadline",
            "RescheduleRequest.deliver_at",
        ]
    );
    for name in [
        "created_after",
        "created_before",
        "dead_after",
        "dead_before",
    ] {
        for (label, parameter) in parameters(&document, name) {
            assert_eq!(parameter["schema"]["format"], "date-time", "{label} {name}");
        }
    }
}

/// The pattern, `minLength` and `maxLength` of a schema as one check.
fn admits(schema: &Value, text: &str) -> bool {
    let length = text.chars().count() as u64;
    full_match(schema["pattern"].as_str().unwrap()).is_match(text)
        && schema["minLength"].as_u64().is_none_or(|min| length >= min)
        && schema["maxLength"].as_u64().is_none_or(|max| length <= max)
        && schema["not"]["enum"]
            .as_array()
            .is_none_or(|refused| !refused.contains(&text.into()))
}

/// Every place a request names a subscriber or an event carries the id's rule.
#[test]
fn every_id_in_a_request_carries_its_rule() {
    let document = document();
    let mut places = Vec::new();
    for (name, pattern) in [
        ("subscriber_id", SUBSCRIBER_ID_PATTERN),
        ("event_id", EVENT_ID_PATTERN),
        ("schedule_id", SUBSCRIBER_ID_PATTERN),
        ("event_type", EVENT_TYPE_PATTERN),
    ] {
        for (label, parameter) in parameters(&document, name) {
            assert_eq!(parameter["schema"]["pattern"], pattern, "{label}");
            places.push(format!("{label} {name}"));
        }
        for request in request_bodies(&document) {
            if let Some(property) = schema(&document, &request)["properties"].get(name) {
                assert_eq!(property["pattern"], pattern, "{request}.{name}");
                places.push(format!("{request}.{name}"));
            }
        }
    }
    for request in ["FanOutRequest", "ResumeSubscribersRequest"] {
        let ids = &schema(&document, request)["properties"]["subscriber_ids"];
        assert_eq!(ids["items"]["pattern"], SUBSCRIBER_ID_PATTERN, "{request}");
        assert_eq!(ids["uniqueItems"], true, "{request}");
    }
    places.sort();
    assert_eq!(
        places,
        [
            "CreateJobRequest.event_id",
            "CreateJobRequest.event_type",
            "CreateJobRequest.subscriber_id",
            "CreateReplayRequest.event_id",
            "CreateReplayRequest.subscriber_id",
            "DELETE /v1/schedules/{schedule_id} schedule_id",
            "DELETE /v1/subscribers/{subscriber_id} subscriber_id",
            "FanOutRequest.event_id",
            "FanOutRequest.event_type",
            "GET /v1/events/{event_id} event_id",
            "GET /v1/jobs event_id",
            "GET /v1/jobs event_type",
            "GET /v1/jobs schedule_id",
            "GET /v1/jobs subscriber_id",
            "GET /v1/schedules/{schedule_id} schedule_id",
            "GET /v1/subscribers/{subscriber_id} subscriber_id",
            "GET /v1/subscribers/{subscriber_id}/stats subscriber_id",
            "PATCH /v1/subscribers/{subscriber_id} subscriber_id",
            "POST /v1/schedules/{schedule_id}/run schedule_id",
            "POST /v1/subscribers/{subscriber_id}/secret/rotate subscriber_id",
            "PUT /v1/schedules/{schedule_id} schedule_id",
            "PUT /v1/subscribers/{subscriber_id} subscriber_id",
            "PutScheduleRequest.event_id",
            "PutScheduleRequest.event_type",
            "PutScheduleRequest.subscriber_id",
        ]
    );
}

/// Texts on both sides of the id rules.
fn id_edges() -> Vec<String> {
    let mut texts: Vec<String> = [
        "",
        ".",
        "..",
        "...",
        "a",
        "A-z_0.9:x",
        "a b",
        "a/b",
        "a%2Fb",
        "é",
        "a\n",
        "~!",
        "\"",
        "\\",
        "\u{7f}",
        "\u{0}",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    for len in [127, 128, 129, 255, 256, 257] {
        texts.push("x".repeat(len));
        texts.push("~".repeat(len));
    }
    texts
}

#[test]
fn the_id_schemas_admit_exactly_what_the_server_accepts() {
    let document = document();
    let subscriber = &schema(&document, "CreateJobRequest")["properties"]["subscriber_id"];
    let event = &schema(&document, "CreateJobRequest")["properties"]["event_id"];
    for text in id_edges() {
        assert_eq!(
            admits(subscriber, &text),
            validate::subscriber_id(&text).is_ok(),
            "subscriber id {text:?}"
        );
        assert_eq!(
            admits(event, &text),
            validate::event_id(&text).is_ok(),
            "event id {text:?}"
        );
    }
}

proptest! {
    #[test]
    fn the_id_schemas_agree_with_the_server_on_random_texts(
        text in "[ -~é\u{0}\n]{0,3}|[.:_A-Za-z0-9-]{1,130}|[!-~]{250,260}"
    ) {
        let document = document();
        let job = &schema(&document, "CreateJobRequest")["properties"];
        prop_assert_eq!(
            admits(&job["subscriber_id"], &text),
            validate::subscriber_id(&text).is_ok()
        );
        prop_assert_eq!(admits(&job["event_id"], &text), validate::event_id(&text).is_ok());
    }

    /// Every `host:port` the destination pattern admits, the server reads, but for
    /// names with an ACE (`xn--`) label, which must also be valid Punycode: the rule a
    /// pattern cannot state ([`destination_pattern`]; cases in
    /// `an_ace_label_is_read_only_when_it_is_valid_punycode`).
    #[test]
    fn every_destination_the_pattern_admits_is_accepted(
        text in proptest::string::string_regex(
            destination_pattern().trim_start_matches('^').trim_end_matches('$')
        ).unwrap()
    ) {
        prop_assert!(full_match(&destination_pattern()).is_match(&text));
        if !has_ace_label(&text) {
            prop_assert!(Destination::parse(&text).is_ok(), "{}", text);
        }
    }

    /// A cursor the server made matches the cursor pattern.
    #[test]
    fn every_cursor_matches_the_pattern(key in "[ -~é]{1,40}") {
        let cursors = pagination::Cursors::new([7; 32]);
        prop_assert!(full_match(CURSOR_PATTERN).is_match(&cursors.encode(pagination::Listing::Jobs, &key)));
    }
}

/// Whether a name has a label beginning with the ACE prefix `xn--` (RFC 5890 §2.3.2.5),
/// in any case.
fn has_ace_label(text: &str) -> bool {
    let host = text.rsplit_once(':').map_or(text, |(host, _)| host);
    host.split('.')
        .any(|label| label.to_ascii_lowercase().starts_with("xn--"))
}

/// The pattern admits every ACE label; the server reads those that are valid Punycode
/// (shown lower-cased, as the listing shows them) and refuses the rest as malformed,
/// never as anything but the client's mistake.
#[test]
fn an_ace_label_is_read_only_when_it_is_valid_punycode() {
    let pattern = full_match(&destination_pattern());
    for (valid, shown) in [
        ("xn--bcher-kva.example:443", "xn--bcher-kva.example:443"),
        ("XN--BCHER-KVA.example:443", "xn--bcher-kva.example:443"),
        ("hooks.xn--p1ai:8443", "hooks.xn--p1ai:8443"),
    ] {
        assert!(pattern.is_match(valid), "{valid}");
        assert!(has_ace_label(valid), "{valid}");
        assert_eq!(Destination::parse(valid).unwrap().as_str(), shown);
    }
    for invalid in ["Xn--a00AA.A:1", "xn--a00aa.example:443", "a.xn--zz9:80"] {
        assert!(pattern.is_match(invalid), "{invalid}");
        assert!(has_ace_label(invalid), "{invalid}");
        assert!(
            matches!(
                Destination::parse(invalid),
                Err(crate::domain::destination::DestinationParseError::Malformed)
            ),
            "{invalid}"
        );
    }
    assert!(!has_ace_label("axn--b.example:443"));
}

#[test]
fn the_destination_parameters_carry_the_pattern() {
    let document = document();
    let destinations = parameters(&document, "destination");
    assert_eq!(destinations.len(), 2);
    for (label, parameter) in destinations {
        assert_eq!(
            parameter["schema"]["pattern"],
            destination_pattern(),
            "{label}"
        );
    }
    let pattern = full_match(&destination_pattern());
    for admitted in [
        "hooks.example.com:443",
        "Example.COM.:8080",
        "a:1",
        "127.0.0.1:9000",
        "[::1]:65535",
        "[2001:db8::1]:443",
        "[1:2:3:4:5:6:7:8]:80",
    ] {
        assert!(pattern.is_match(admitted), "{admitted}");
        assert!(Destination::parse(admitted).is_ok(), "{admitted}");
    }
    for refused in [
        "example.com",
        "example.com:0",
        "example.com:65536",
        "a.1:80",
        "256.1.1.1:80",
        "[::1:80",
        "a b:80",
        "a/b:80",
    ] {
        assert!(!pattern.is_match(refused), "{refused}");
        assert!(Destination::parse(refused).is_err(), "{refused}");
    }
}

#[test]
fn every_cursor_parameter_carries_the_pattern() {
    let document = document();
    let cursors = parameters(&document, "cursor");
    // Every paginated list (each takes a `limit`, listed above) takes a cursor.
    let paginated: Vec<String> = parameters(&document, "limit")
        .into_iter()
        .map(|(label, _)| label)
        .collect();
    let labels: Vec<String> = cursors.iter().map(|(label, _)| label.clone()).collect();
    assert_eq!(labels, paginated);
    for (label, parameter) in cursors {
        assert_eq!(parameter["schema"]["pattern"], CURSOR_PATTERN, "{label}");
        assert_eq!(parameter["schema"]["minLength"], 1, "{label}");
    }
    let subscriber_key = |key: &str| validate::subscriber_id(key).ok().map(|()| key.to_owned());
    assert!(
        pagination::Cursors::new([7; 32])
            .decode(pagination::Listing::Subscribers, Some(""), subscriber_key)
            .is_err()
    );
}
