//! Extractors whose rejections are the API's own problem+json errors, naming the field
//! at fault.

use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use bytes::Bytes;
use serde::de::DeserializeOwned;

use super::problem::{AppError, FieldError};

/// A JSON body. Rejects a non-JSON content type (415), a body over the limit (413),
/// malformed JSON (400) and JSON of the wrong shape (422), each naming the field.
#[derive(Debug, Clone)]
pub struct AppJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for AppJson<T> {
    type Rejection = AppError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        if !is_json(request.headers().get(header::CONTENT_TYPE)) {
            return Err(AppError::UnsupportedMediaType);
        }
        let body = Bytes::from_request(request, state)
            .await
            .map_err(|rejection| {
                if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                    AppError::TooLarge(FieldError::new("body", "the request body is too large"))
                } else {
                    AppError::Malformed(FieldError::new("body", rejection.body_text()))
                }
            })?;
        parse_json(&body).map(AppJson)
    }
}

/// `application/json`, or any `+json` type, with any parameters.
fn is_json(content_type: Option<&axum::http::HeaderValue>) -> bool {
    let Some(Ok(value)) = content_type.map(|v| v.to_str()) else {
        return false;
    };
    let essence = value
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// Parses a JSON document, mapping serde's error to the field it concerns: syntax
/// errors are 400, shape errors (missing, unknown or mistyped fields) 422.
pub fn parse_json<T: DeserializeOwned>(body: &[u8]) -> Result<T, AppError> {
    // serde fills a struct from an array too, by position: every body is an object.
    if body.trim_ascii_start().starts_with(b"[") {
        return Err(AppError::invalid("body", "must be a JSON object"));
    }
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    let value = serde_path_to_error::deserialize(&mut deserializer).map_err(|error| {
        let path = error.path().to_string();
        let inner = error.into_inner();
        let field = field_name(&path, &inner.to_string());
        let message = strip_position(&inner.to_string());
        match inner.classify() {
            serde_json::error::Category::Data => {
                AppError::Invalid(vec![FieldError::new(field, message)])
            }
            _ => AppError::Malformed(FieldError::new(
                if path == "." || path == "?" {
                    "body".to_owned()
                } else {
                    field
                },
                format!(
                    "{message} (line {}, column {})",
                    inner.line(),
                    inner.column()
                ),
            )),
        }
    })?;
    deserializer.end().map_err(|e| {
        let message = strip_position(&e.to_string());
        let at = format!("(line {}, column {})", e.line(), e.column());
        AppError::Malformed(FieldError::new("body", format!("{message} {at}")))
    })?;
    Ok(value)
}

/// Query parameters. Unknown or repeated parameters are a 422 naming them.
#[derive(Debug, Clone)]
pub struct AppQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for AppQuery<T> {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let query = parts.uri.query().unwrap_or("");
        serde_urlencoded::from_str(query)
            .map(AppQuery)
            .map_err(|e| {
                let message = e.to_string();
                AppError::invalid(field_name(".", &message), message)
            })
    }
}

/// The field an error is about: the path serde reached, or, for a missing or unknown
/// field (reported at the parent), the name serde quotes in backticks.
fn field_name(path: &str, message: &str) -> String {
    let quoted = ["missing field `", "unknown field `", "duplicate field `"]
        .iter()
        .find_map(|prefix| message.split_once(prefix))
        .and_then(|(_, rest)| rest.split_once('`'))
        .map(|(name, _)| name);
    match (path, quoted) {
        (".", Some(name)) => name.to_owned(),
        (".", None) | ("?", _) => "body".to_owned(),
        (path, Some(name)) if path == name || path.ends_with(&format!(".{name}")) => {
            path.to_owned()
        }
        (parent, Some(name)) => format!("{parent}.{name}"),
        (path, None) => path.to_owned(),
    }
}

/// serde_json appends " at line L column C"; the field already says where.
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(at) => message[..at].to_owned(),
        None => message.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Shape {
        name: String,
        inner: Option<Inner>,
    }

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Inner {
        count: u32,
    }

    fn fields(error: AppError) -> (u16, Vec<String>) {
        let status = error.status().as_u16();
        let fields = match error {
            AppError::Invalid(errors) => errors.into_iter().map(|e| e.field).collect(),
            AppError::Malformed(e) => vec![e.field],
            other => panic!("unexpected {other:?}"),
        };
        (status, fields)
    }

    #[test]
    fn names_the_field_at_fault() {
        let cases: [(&str, u16, &str); 6] = [
            ("{}", 422, "name"),
            (r#"{"name": 5}"#, 422, "name"),
            (r#"{"name": "a", "extra": 1}"#, 422, "extra"),
            (
                r#"{"name": "a", "inner": {"count": "x"}}"#,
                422,
                "inner.count",
            ),
            (r#"{"name": "a", "inner": {}}"#, 422, "inner.count"),
            (r#"{"name": "a""#, 400, "body"),
        ];
        for (body, status, field) in cases {
            let error = parse_json::<Shape>(body.as_bytes()).unwrap_err();
            assert_eq!(fields(error), (status, vec![field.to_owned()]), "{body}");
        }
    }

    #[test]
    fn trailing_garbage_is_malformed() {
        let error = parse_json::<Shape>(br#"{"name": "a"} x"#).unwrap_err();
        assert_eq!(error.status(), StatusCode::BAD_REQUEST);
    }

    #[test]
    fn json_media_types() {
        let ok = |v: &'static str| is_json(Some(&axum::http::HeaderValue::from_static(v)));
        assert!(ok("application/json"));
        assert!(ok("Application/JSON; charset=utf-8"));
        assert!(ok("application/merge-patch+json"));
        assert!(!ok("text/plain"));
        assert!(!is_json(None));
    }
}
