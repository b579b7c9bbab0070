//! Opening and ending console sessions: `GET /console/login` asks for an API token,
//! `POST /console/login` checks it and sets the session cookie, `POST /console/logout`
//! ends the session on every instance (docs/DESIGN.md §5.12).
//!
//! The login form carries a nonce that must match its cookie (a CSRF token before
//! there is a session), so another site cannot sign a browser in with its own token.

use askama::Template;
use axum::Extension;
use axum::body::Bytes;
use std::net::SocketAddr;

use axum::extract::{ConnectInfo, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;
use serde_json::json;

use super::access::{LOGIN_COOKIE, LOGIN_NONCE_TTL_S, SESSION_COOKIE, SESSION_TTL_MS, Session};
use super::actions::{self, Action};
use super::chrome::{Chrome, local_page};
use super::gate::{FormFields, cookie, cross_site, foreign_origin, set_cookie};
use super::{ConsoleError, ConsoleState, render};
use crate::api::guesses::Verdict;
use crate::api::request_id::RequestIds;
use crate::app::actions as names;

/// The login page.
#[derive(Template)]
#[template(path = "console/login.html")]
struct LoginPage {
    chrome: Chrome,
    nonce: String,
    next: String,
    error: Option<String>,
}

/// Where to go after logging in: `next` when it is a console page of this server
/// ([`local_page`]), else the overview (never another site).
pub fn next_page(next: Option<&str>) -> String {
    next.and_then(|next| local_page(next, "/console/"))
        .unwrap_or("/console/")
        .to_owned()
}

/// `?next=` of the login form.
#[derive(Debug, Deserialize)]
pub struct LoginQuery {
    next: Option<String>,
}

fn login_page(
    state: &ConsoleState,
    headers: &HeaderMap,
    next: String,
    error: Option<String>,
    status: StatusCode,
) -> Response {
    let nonce = super::access::random_text(16);
    let page = LoginPage {
        chrome: Chrome::bare("Log in"),
        nonce: nonce.clone(),
        next,
        error,
    };
    let mut response = (status, render(&page)).into_response();
    let cookie = set_cookie(
        state.public_https,
        headers,
        LOGIN_COOKIE,
        &nonce,
        LOGIN_NONCE_TTL_S,
    );
    response.headers_mut().append(header::SET_COOKIE, cookie);
    response
}

/// `GET /console/login`: the form (without tokens there is nothing to log in to: the
/// overview).
pub async fn form(
    State(state): State<ConsoleState>,
    headers: HeaderMap,
    Query(query): Query<LoginQuery>,
) -> Response {
    let next = next_page(query.next.as_deref());
    if !state.access.needs_login() {
        return Redirect::to(&next).into_response();
    }
    login_page(&state, &headers, next, None, StatusCode::OK)
}

/// `POST /console/login`: with one of the API tokens and the form's nonce, opens a
/// session (its cookie set) and goes on to `next`; a wrong token answers the form again
/// with 401, a missing or wrong nonce 403, and a client address that has used up its
/// failed guesses 429 with `Retry-After`, the token unchecked ([`crate::api::guesses`],
/// one budget with the API's bearer tokens). Recorded in the audit trail as
/// `console.login` with the token's fingerprint, or `console.login_failed` without
/// one; both with the client's address.
pub async fn submit(
    State(state): State<ConsoleState>,
    client: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
    request_ids: RequestIds,
    body: Bytes,
) -> Response {
    if !state.access.needs_login() {
        return Redirect::to("/console/").into_response();
    }
    let client = client.map(|Extension(ConnectInfo(peer))| peer.ip());
    let fields = FormFields::parse(&body);
    let next = next_page(fields.get("next"));
    let nonce_ok = match (cookie(&headers, LOGIN_COOKIE), fields.get("nonce")) {
        (Some(expected), Some(given)) if !given.is_empty() => super::access::same(expected, given),
        _ => false,
    };
    if !nonce_ok || cross_site(&headers) || foreign_origin(&headers) {
        return login_page(
            &state,
            &headers,
            next,
            Some("The login form expired or came from another page: log in again.".into()),
            StatusCode::FORBIDDEN,
        );
    }
    if let Some(client) = client
        && let Verdict::LockedOut { retry_after_s } = state.guesses.verdict(client)
    {
        crate::metrics::credential_locked_out("console");
        let mut response = login_page(
            &state,
            &headers,
            next,
            Some(format!(
                "Too many logins from your address used a token that is not valid. Try \
                 again in {retry_after_s} s; the token was not checked."
            )),
            StatusCode::TOO_MANY_REQUESTS,
        );
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(retry_after_s));
        return response;
    }
    let from = json!({ "client_address": client.map(|ip| ip.to_string()) });
    let Some(actor) = fields
        .get("token")
        .and_then(|t| state.access.accepts(t.trim()))
    else {
        crate::metrics::credential_failed("console");
        let locked = client.is_some_and(|client| state.guesses.failed(client));
        tracing::warn!(
            client = %client.map_or("-".to_owned(), |ip| ip.to_string()),
            locked_out = locked,
            "console login refused: not one of the API tokens"
        );
        actions::record_as(
            &state,
            None,
            &request_ids,
            Action::new(names::CONSOLE_LOGIN_FAILED, None)
                .with(from)
                .answered(401),
        )
        .await;
        return login_page(
            &state,
            &headers,
            next,
            Some("That is not one of this server's API tokens.".into()),
            StatusCode::UNAUTHORIZED,
        );
    };
    let now = state.app.clock.now();
    let Some((session, value)) = state.access.open(Some(&actor), now) else {
        return ConsoleError::new(StatusCode::INTERNAL_SERVER_ERROR, "no session key")
            .into_response();
    };
    // The session is only a signed cookie: it exists once the answer carries it, so
    // its entry is settled before the answer goes out.
    let login = Action::new(names::CONSOLE_LOGIN, None).with(from);
    if let Err(error) =
        actions::audited(&state, &session, &request_ids, login, async { Ok(()) }).await
    {
        return error.into_response();
    }
    let mut response = Redirect::to(&next).into_response();
    let headers_out = response.headers_mut();
    headers_out.append(
        header::SET_COOKIE,
        set_cookie(
            state.public_https,
            &headers,
            SESSION_COOKIE,
            &value,
            SESSION_TTL_MS / 1000,
        ),
    );
    headers_out.append(
        header::SET_COOKIE,
        set_cookie(state.public_https, &headers, LOGIN_COOKIE, "", 0),
    );
    response
}

/// `POST /console/logout`: ends the session on every instance (recorded in the store
/// until it would have expired), clears its cookie and shows the login form. Recorded
/// as `console.logout`.
pub async fn logout(
    State(state): State<ConsoleState>,
    Extension(session): Extension<Session>,
    headers: HeaderMap,
    request_ids: RequestIds,
) -> Result<Response, ConsoleError> {
    let now = state.app.clock.now();
    let logout = Action::new(names::CONSOLE_LOGOUT, None);
    actions::audited(&state, &session, &request_ids, logout, async {
        Ok(state
            .app
            .store
            .end_console_session(&session.id, session.expires_at, now)
            .await?)
    })
    .await?;
    let mut response = Redirect::to("/console/login").into_response();
    response.headers_mut().append(
        header::SET_COOKIE,
        set_cookie(state.public_https, &headers, SESSION_COOKIE, "", 0),
    );
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::next_page;

    #[test]
    fn only_console_pages_are_gone_to_after_login() {
        assert_eq!(
            next_page(Some("/console/jobs/x?y=1")),
            "/console/jobs/x?y=1"
        );
        for outside in [
            "https://evil.example/",
            "//evil.example/console/",
            "/console//evil.example",
            "/console/\\evil",
            "/v1/jobs",
            "/console/login?next=/x",
            "/console/\u{7f}",
        ] {
            assert_eq!(next_page(Some(outside)), "/console/", "{outside}");
        }
        assert_eq!(next_page(None), "/console/");
    }
}
