//! The console's gate: every page and form needs a session, every form its CSRF token
//! (see [`super::access`]), and every answer carries headers that keep pages out of
//! caches, frames and other origins' scripts.

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};

use super::access::{SESSION_COOKIE, SESSION_TTL_MS, Session};
use super::{ConsoleError, ConsoleState, chrome};

/// The largest form body the console reads, in bytes: a bulk resume of 1,000
/// subscriber ids of up to 128 characters, percent-encoded.
pub const MAX_FORM_BYTES: usize = 1024 * 1024;

/// What a POST's form said, parsed once by the gate (`application/x-www-form-urlencoded`,
/// names repeated for a list).
#[derive(Clone, Debug, Default)]
pub struct FormFields(pub Vec<(String, String)>);

impl FormFields {
    /// Parses a form body.
    pub fn parse(body: &[u8]) -> Self {
        FormFields(
            url::form_urlencoded::parse(body)
                .map(|(name, value)| (name.into_owned(), value.into_owned()))
                .collect(),
        )
    }

    /// The first value of `name`, if given.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The first value of `name`, trimmed, when given and not empty.
    pub fn text(&self, name: &str) -> Option<&str> {
        self.get(name).map(str::trim).filter(|v| !v.is_empty())
    }

    /// Every value of `name`, in order.
    pub fn all(&self, name: &str) -> Vec<String> {
        self.0
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
            .collect()
    }
}

/// Every value of cookie `name` in `headers`, in the order sent (a browser sends one
/// per path and domain that matches).
pub fn cookies<'a>(headers: &'a HeaderMap, name: &'a str) -> impl Iterator<Item = &'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .filter(move |(n, _)| *n == name)
        .map(|(_, v)| v.trim())
}

/// The first value of cookie `name` in `headers`, if sent.
pub fn cookie<'a>(headers: &'a HeaderMap, name: &'a str) -> Option<&'a str> {
    cookies(headers, name).next()
}

/// True when the request names an `Origin` that is not this server as the request
/// addressed it (`Host`): a form of another origin, a sandboxed page (`null`), or a
/// page on another port of the same host (which `Sec-Fetch-Site` calls same-site).
pub fn foreign_origin(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return false;
    };
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    let origin = origin.to_str().ok();
    match (origin, host) {
        (Some(origin), Some(host)) => {
            let authority = origin
                .strip_prefix("http://")
                .or_else(|| origin.strip_prefix("https://"));
            authority != Some(host)
        }
        _ => true,
    }
}

/// True when the browser says the request comes from another site (`Sec-Fetch-Site:
/// cross-site`): a form of another site's page, or a link followed from it.
pub fn cross_site(headers: &HeaderMap) -> bool {
    headers
        .get("sec-fetch-site")
        .is_some_and(|v| v.as_bytes() == b"cross-site")
}

/// A `Set-Cookie` value for `name`: HttpOnly, SameSite=Strict, for `/console`, lasting
/// `max_age_s` seconds (0 deletes it); `Secure` when `public_https` (`--public-url` is
/// an `https` URL: every browser reaches the console over HTTPS, whatever the proxy in
/// front says) or when the request came over HTTPS (a proxy in front says so with
/// `X-Forwarded-Proto: https`).
pub fn set_cookie(
    public_https: bool,
    request: &HeaderMap,
    name: &str,
    value: &str,
    max_age_s: u64,
) -> HeaderValue {
    let secure = public_https
        || request
            .get("x-forwarded-proto")
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"https"));
    let text = format!(
        "{name}={value}; Path=/console; Max-Age={max_age_s}; HttpOnly; SameSite=Strict{}",
        if secure { "; Secure" } else { "" }
    );
    // Names and values are base64url, digits and dots: always a valid header value.
    HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// The session of the request's cookie, when valid at `now` and not ended by a logout.
pub async fn current_session(
    state: &ConsoleState,
    headers: &HeaderMap,
) -> Result<Option<Session>, ConsoleError> {
    let now = state.app.clock.now();
    // A cookie planted under a narrower path comes first: the first one that verifies.
    let Some(session) = cookies(headers, SESSION_COOKIE).find_map(|c| state.access.verify(c, now))
    else {
        return Ok(None);
    };
    if state.app.store.console_session_ended(&session.id).await? {
        return Ok(None);
    }
    Ok(Some(session))
}

/// Middleware of every console page and form: puts the [`Session`] in the request's
/// extensions, and for a POST the parsed [`FormFields`] once the CSRF token in them
/// matched the session's (a POST must be a form, `application/x-www-form-urlencoded`,
/// else 415, from this server's own origin when the browser names one).
///
/// Without a session: with tokens, a GET goes to the login form (a link followed
/// from another site first reloads itself once, so the `SameSite=Strict` cookie is
/// sent) and a POST is refused (403); without tokens an anonymous session is opened.
/// A POST from another site, or without the session's CSRF token, is refused (403)
/// and changes nothing.
pub async fn require_session(
    State(state): State<ConsoleState>,
    request: Request,
    next: Next,
) -> Response {
    let (mut parts, body) = request.into_parts();
    let session = match current_session(&state, &parts.headers).await {
        Ok(session) => session,
        Err(error) => return error.into_response(),
    };
    let reading = parts.method == Method::GET || parts.method == Method::HEAD;
    let mut opened = None;
    let session = match session {
        Some(session) => session,
        None if !state.access.needs_login() => {
            let Some((session, value)) = state.access.open(None, state.app.clock.now()) else {
                return ConsoleError::new(StatusCode::INTERNAL_SERVER_ERROR, "no session key")
                    .into_response();
            };
            opened = Some(value);
            session
        }
        None if reading && cross_site(&parts.headers) => {
            return super::render(&chrome::Reload {
                chrome: chrome::Chrome::bare("Opening"),
            });
        }
        None if reading => {
            let wanted = parts
                .uri
                .path_and_query()
                .map_or("/console/", |p| p.as_str());
            let next_page =
                url::form_urlencoded::byte_serialize(wanted.as_bytes()).collect::<String>();
            return Redirect::to(&format!("/console/login?next={next_page}")).into_response();
        }
        None => {
            return ConsoleError::new(
                StatusCode::FORBIDDEN,
                "your console session has ended (logged out or expired): log in again, then \
                 repeat the action; nothing was changed",
            )
            .into_response();
        }
    };
    let headers = parts.headers.clone();
    if !reading {
        if cross_site(&parts.headers) || foreign_origin(&parts.headers) {
            return forbidden_form();
        }
        let form = parts
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"));
        if !form {
            return ConsoleError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "a console form is sent as application/x-www-form-urlencoded; nothing was \
                 changed",
            )
            .into_response();
        }
        let bytes = match axum::body::to_bytes(body, MAX_FORM_BYTES).await {
            Ok(bytes) => bytes,
            Err(_) => {
                return ConsoleError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "the form is too large (at most 1 MiB); nothing was changed",
                )
                .into_response();
            }
        };
        let fields = FormFields::parse(&bytes);
        let matches = fields
            .get("csrf")
            .is_some_and(|token| super::access::same(token, &session.csrf));
        if !matches {
            return forbidden_form();
        }
        parts.extensions.insert(fields);
        parts.extensions.insert(session);
        let response = next.run(Request::from_parts(parts, Body::empty())).await;
        return with_cookie(state.public_https, response, &headers, opened);
    }
    parts.extensions.insert(session);
    let response = next.run(Request::from_parts(parts, body)).await;
    with_cookie(state.public_https, response, &headers, opened)
}

fn forbidden_form() -> Response {
    ConsoleError::new(
        StatusCode::FORBIDDEN,
        "this form did not carry this session's CSRF token (it came from another page or \
         site, or from before a restart or logout): reload the page and try again; nothing \
         was changed",
    )
    .into_response()
}

/// `response`, setting the cookie of a session opened for it.
fn with_cookie(
    public_https: bool,
    mut response: Response,
    request: &HeaderMap,
    opened: Option<String>,
) -> Response {
    if let Some(value) = opened {
        let cookie = set_cookie(
            public_https,
            request,
            SESSION_COOKIE,
            &value,
            SESSION_TTL_MS / 1000,
        );
        response.headers_mut().append(header::SET_COOKIE, cookie);
    }
    response
}

/// The Content-Security-Policy of every console answer: its own scripts, styles and
/// images only, no frames, forms posting only to itself.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
    connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// Middleware of every console answer: not stored by caches (pages show live figures
/// and, once, a secret), never framed, scripts and styles only from the console.
pub async fn page_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    if !headers.contains_key(header::CACHE_CONTROL) {
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    response
}

/// What an error the console's handlers did not make says (a route that does not
/// exist, a method it does not take, a path that is not UTF-8, the API's checks).
fn bare_detail(status: StatusCode) -> &'static str {
    match status {
        StatusCode::NOT_FOUND => "there is no such console page",
        StatusCode::METHOD_NOT_ALLOWED => "this page does not take that method",
        StatusCode::BAD_REQUEST => "the address could not be read (it is not valid UTF-8)",
        StatusCode::MISDIRECTED_REQUEST => {
            "without API tokens this server answers only requests addressed to a loopback \
             address (127.0.0.1, [::1] or localhost)"
        }
        StatusCode::FORBIDDEN => "this request came from another site",
        StatusCode::PAYLOAD_TOO_LARGE => "the request is too large",
        StatusCode::REQUEST_TIMEOUT => "the request took too long",
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE => "the request's headers are too large",
        _ => "the request could not be answered",
    }
}

/// [`bare_errors_as_pages`] as the API's middleware stack takes it
/// ([`crate::api::Beside::error_pages`]).
pub fn error_pages(
    request: Request,
    next: Next,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Response> + Send>> {
    Box::pin(bare_errors_as_pages(request, next))
}

/// Middleware of the whole server: an error answer to a `/console` address that is not
/// a console page yet (from routing or the server's own checks) becomes one, its
/// status kept; every other answer passes untouched.
pub async fn bare_errors_as_pages(request: Request, next: Next) -> Response {
    let console = request.uri().path().starts_with("/console");
    let response = next.run(request).await;
    let status = response.status();
    let page = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/html"));
    if !console || page || !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let mut answer = ConsoleError::new(status, bare_detail(status)).into_response();
    for (name, value) in response.headers() {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            answer.headers_mut().insert(name.clone(), value.clone());
        }
    }
    answer
}
