//! Bearer-token authentication of `/v1/*` (RFC 6750). With tokens configured
//! (`--api-token`, `DEFERHOOK_API_TOKENS`), every `/v1/*` request needs
//! `Authorization: Bearer <token>`; `/healthz`, `/readyz`, `/metrics`, `/openapi.json`
//! and `/docs` stay open. Without tokens the API is open, `serve` listens only on
//! loopback addresses, and a request addressed to any other host is refused (421, see
//! [`super::loopback_host`]: a DNS-rebinding page in the operator's browser).
//!
//! Tokens are compared in constant time: the presented value and every configured token
//! are hashed (SHA-256) and all digests are compared with `subtle`, so neither the
//! length nor the first differing byte of a token shows in the answer's timing.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::guesses::{Guesses, Verdict};
use super::problem::{AppError, Problem, problem_response};

/// Which API token made a request: its [`fingerprint`], put in the request's
/// extensions by [`require_token`] when the token is accepted (absent when the API
/// runs without tokens). The audit trail records it (docs/DESIGN.md §5.11).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiActor(pub String);

/// A token's fingerprint: `sha256:` and the first 16 hex digits of the SHA-256 of the
/// token. It names the token in the audit trail without showing it, and cannot be
/// presented in its place.
pub fn fingerprint(token: &str) -> String {
    fingerprint_of_digest(&digest(token.as_bytes()))
}

/// [`fingerprint`] of the token whose SHA-256 is `digest`.
fn fingerprint_of_digest(digest: &[u8; 32]) -> String {
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// Shortest accepted token, in characters.
pub const MIN_TOKEN_LEN: usize = 16;
/// Longest accepted token, in characters.
pub const MAX_TOKEN_LEN: usize = 512;

/// A configured API token. Its `Debug` output never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiToken(String);

impl std::fmt::Debug for ApiToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiToken(<redacted>)")
    }
}

impl std::str::FromStr for ApiToken {
    type Err = std::convert::Infallible;

    /// Keeps the text as given; [`ApiTokens::new`] checks it (so that no error message
    /// ever repeats a token).
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Ok(ApiToken(text.to_owned()))
    }
}

/// The tokens `/v1/*` accepts; empty: the API is open.
#[derive(Clone, Default)]
pub struct ApiTokens {
    digests: Arc<Vec<[u8; 32]>>,
}

impl std::fmt::Debug for ApiTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ApiTokens({} configured)", self.digests.len())
    }
}

fn digest(text: &[u8]) -> [u8; 32] {
    Sha256::digest(text).into()
}

impl ApiTokens {
    /// Checks and keeps `tokens` (as digests). Each must be 16–512 visible ASCII
    /// characters (RFC 6750 `b64token` characters and more, no spaces or commas); the
    /// error names the token by its position, never by its value.
    pub fn new(tokens: &[ApiToken]) -> Result<Self, String> {
        let mut digests = Vec::with_capacity(tokens.len());
        for (n, ApiToken(token)) in tokens.iter().enumerate() {
            let position = n + 1;
            if !(MIN_TOKEN_LEN..=MAX_TOKEN_LEN).contains(&token.len()) {
                return Err(format!(
                    "API token #{position} must be {MIN_TOKEN_LEN} to {MAX_TOKEN_LEN} \
                     characters long (e.g. `openssl rand -hex 32`)"
                ));
            }
            if !token.bytes().all(|b| b.is_ascii_graphic() && b != b',') {
                return Err(format!(
                    "API token #{position} must be visible ASCII characters without \
                     spaces or commas"
                ));
            }
            digests.push(digest(token.as_bytes()));
        }
        Ok(ApiTokens {
            digests: Arc::new(digests),
        })
    }

    /// True when no token is configured (the API is open).
    pub fn is_empty(&self) -> bool {
        self.digests.is_empty()
    }

    /// A key per token, with the token's [`fingerprint`]: HMAC-SHA256 (RFC 2104) keyed
    /// by the token's SHA-256, over `label`. Every instance configured with a token
    /// derives the same key from it, and no key reveals its token; the console signs
    /// its sessions with them.
    pub fn derived_keys(&self, label: &[u8]) -> Vec<(String, [u8; 32])> {
        use hmac::{Hmac, KeyInit, Mac};
        self.digests
            .iter()
            .map(|digest| {
                let mut mac =
                    Hmac::<Sha256>::new_from_slice(digest).expect("HMAC accepts any key length");
                mac.update(label);
                (
                    fingerprint_of_digest(digest),
                    mac.finalize().into_bytes().into(),
                )
            })
            .collect()
    }

    /// True when `presented` is one of the tokens; takes the same time whichever it
    /// matches, or none.
    pub fn accepts(&self, presented: &str) -> bool {
        let presented = digest(presented.as_bytes());
        let mut matched = subtle::Choice::from(0);
        for token in self.digests.iter() {
            matched |= token.ct_eq(&presented);
        }
        matched.into()
    }
}

/// True for the paths that need a token.
fn protected(path: &str) -> bool {
    path == "/v1" || path.starts_with("/v1/")
}

/// What [`require_token`] needs: the tokens, and the failed guesses of each client
/// address ([`Guesses`], shared with the console's login).
#[derive(Clone, Debug)]
pub struct Access {
    /// The tokens `/v1/*` accepts; empty: open.
    pub tokens: ApiTokens,
    /// Failed guesses per client address.
    pub guesses: Guesses,
}

/// The client address of `request`: its connection's peer (absent when the router is
/// called without a listener, as unit tests do).
pub fn client_address(extensions: &axum::http::Extensions) -> Option<IpAddr> {
    extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|info| info.0.ip())
}

/// Answers 401 problem+json (with `WWW-Authenticate: Bearer`) to a `/v1/*` request
/// without one of the tokens, and 429 with `Retry-After`, the token unchecked, to one
/// with a token from a client address locked out by its failed guesses
/// ([`super::guesses`]); without tokens, 421 problem+json to any request addressed to
/// a host that is not loopback (or 403 from a page of another origin); passes
/// everything else on.
pub async fn require_token(
    State(access): State<Access>,
    mut request: Request,
    next: Next,
) -> Response {
    if access.tokens.is_empty() {
        return match super::loopback_host::refuse_unless_loopback(&request) {
            Some(refusal) => refusal,
            None => next.run(request).await,
        };
    }
    if !protected(request.uri().path()) {
        return next.run(request).await;
    }
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| {
            let (scheme, token) = value.split_once(' ')?;
            scheme
                .eq_ignore_ascii_case("bearer")
                .then_some(token.trim())
        });
    let Some(token) = presented else {
        return unauthorized(
            "send `Authorization: Bearer <token>` with one of the server's API tokens",
            "invalid_request",
        );
    };
    let client = client_address(request.extensions());
    if let Some(client) = client
        && let Verdict::LockedOut { retry_after_s } = access.guesses.verdict(client)
    {
        crate::metrics::credential_locked_out("api");
        return locked_out(retry_after_s);
    }
    if access.tokens.accepts(token) {
        let actor = ApiActor(fingerprint(token));
        request.extensions_mut().insert(actor);
        return next.run(request).await;
    }
    crate::metrics::credential_failed("api");
    if let Some(client) = client
        && access.guesses.failed(client)
    {
        tracing::warn!(
            client = %client,
            "API token guesses from this address locked out: too many were not valid"
        );
    }
    unauthorized("the bearer token is not valid", "invalid_token")
}

/// 429 problem+json with `Retry-After` (RFC 6585 §4): the address's guesses are used up.
fn locked_out(retry_after_s: u64) -> Response {
    let mut problem = Problem::from_status(StatusCode::TOO_MANY_REQUESTS);
    problem.detail = Some(format!(
        "too many requests from this address carried a token that is not valid; the \
         token was not checked: retry in {retry_after_s} s"
    ));
    let mut response = problem_response(problem);
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(retry_after_s));
    response
}

fn unauthorized(detail: &str, error: &str) -> Response {
    let mut response = AppError::Unauthorized(detail.to_owned()).into_response();
    let challenge = format!("Bearer realm=\"deferhook\", error=\"{error}\"");
    if let Ok(value) = HeaderValue::from_str(&challenge) {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, value);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(list: &[&str]) -> Result<ApiTokens, String> {
        let list: Vec<ApiToken> = list.iter().map(|t| t.parse().unwrap()).collect();
        ApiTokens::new(&list)
    }

    #[test]
    fn accepts_only_configured_tokens() {
        let tokens = tokens(&["first-token-0123456789", "second-token-0123456789"]).unwrap();
        assert!(tokens.accepts("first-token-0123456789"));
        assert!(tokens.accepts("second-token-0123456789"));
        assert!(!tokens.accepts("first-token-012345678"));
        assert!(!tokens.accepts("first-token-0123456789x"));
        assert!(!tokens.accepts(""));
    }

    #[test]
    fn bad_tokens_are_refused_without_echoing_them() {
        let error = tokens(&["ok-token-0123456789", "short"]).unwrap_err();
        assert!(error.contains("#2"), "{error}");
        assert!(!error.contains("short"), "{error}");
        let error = tokens(&["has a space 0123456789"]).unwrap_err();
        assert!(!error.contains("space 0123"), "{error}");
        assert!(tokens(&["comma,0123456789abcdef"]).is_err());
        assert!(tokens(&[]).unwrap().is_empty());
    }

    #[test]
    fn debug_output_never_shows_a_token() {
        let token: ApiToken = "secret-token-0123456789".parse().unwrap();
        assert!(!format!("{token:?}").contains("secret-token"));
        let tokens = ApiTokens::new(&[token]).unwrap();
        assert_eq!(format!("{tokens:?}"), "ApiTokens(1 configured)");
    }

    #[test]
    fn a_fingerprint_names_a_token_without_showing_it() {
        let token = "secret-token-0123456789";
        let shown = fingerprint(token);
        assert_eq!(shown.len(), "sha256:".len() + 16);
        assert!(shown.starts_with("sha256:"));
        assert_eq!(shown, fingerprint(token));
        assert_ne!(shown, fingerprint("secret-token-0123456788"));
        assert!(!shown.contains("secret-token"));
        // the first 8 bytes of SHA-256("abc")
        assert_eq!(fingerprint("abc"), "sha256:ba7816bf8f01cfea");
    }

    #[test]
    fn only_v1_paths_are_protected() {
        assert!(protected("/v1/jobs"));
        assert!(protected("/v1"));
        assert!(!protected("/v1jobs"));
        assert!(!protected("/healthz"));
        assert!(!protected("/metrics"));
        assert!(!protected("/openapi.json"));
    }
}
