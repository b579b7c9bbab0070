//! Who may use the console (issue #19): with API tokens, a login opens a session kept
//! in an HttpOnly, SameSite=Strict cookie that a logout ends; every form needs the
//! session's CSRF token; without tokens, anonymous sessions on loopback only.

use crate::console_support::{Browser, expect_redirect, set_cookie_line};
use crate::support::{TestApp, app_with};

const TOKEN: &str = "console-token-7f3a9c2e51";
const OTHER: &str = "other-token-0b6d4e8a22";

async fn tokened() -> TestApp {
    app_with()
        .flag("--api-token", TOKEN)
        .flag("--api-token", OTHER)
        .start()
        .await
}

#[tokio::test]
async fn without_a_session_pages_go_to_the_login_and_forms_are_refused() {
    let app = tokened().await;
    let mut browser = Browser::new(&app);
    for page in [
        "/console/",
        "/console/subscribers?health=failing",
        "/console/destinations",
        "/console/events/e1",
        "/console/jobs/01937c5e-0000-7000-8000-000000000000",
        "/console/dead-letters",
        "/console/replays",
    ] {
        let reply = browser.get(page).await;
        assert_eq!(reply.status, 303, "{page}");
        let location = reply.header("location").unwrap();
        let encoded: String = url::form_urlencoded::byte_serialize(page.as_bytes()).collect();
        assert_eq!(location, format!("/console/login?next={encoded}"), "{page}");
    }
    let refused = browser
        .post_exactly(
            "/console/subscribers/resume",
            &[("subscriber_id", "a")],
            &[],
        )
        .await;
    assert_eq!(refused.status, 403, "{}", refused.text);
    assert!(
        refused.text.contains("session has ended"),
        "{}",
        refused.text
    );
    // A link followed from another site (no SameSite=Strict cookie) reloads itself
    // once instead of asking for a login.
    let request = reqwest::Client::new()
        .get(app.url("/console/"))
        .header("sec-fetch-site", "cross-site");
    let reloading = browser.send(request).await;
    assert_eq!(reloading.status, 200);
    assert!(
        reloading.text.contains("http-equiv=\"refresh\""),
        "{}",
        reloading.text
    );
}

#[tokio::test]
async fn a_token_opens_a_session_that_logout_ends_for_good() {
    let app = tokened().await;
    let mut browser = Browser::new(&app);

    let wrong = browser.login("not-one-of-the-tokens").await;
    assert_eq!(wrong.status, 401);
    assert!(
        wrong.text.contains("not one of this server"),
        "{}",
        wrong.text
    );
    assert!(
        !wrong.text.contains("not-one-of-the-tokens"),
        "the token is not echoed"
    );
    assert!(!browser.cookies.contains_key("deferhook_session"));

    let login = browser.login(TOKEN).await;
    expect_redirect(&login, "/console/subscribers");
    let set = set_cookie_line(&login, "deferhook_session");
    for attribute in [
        "HttpOnly",
        "SameSite=Strict",
        "Path=/console",
        "Max-Age=43200",
    ] {
        assert!(set.contains(attribute), "{set}");
    }
    assert!(!set.contains(TOKEN), "the cookie does not carry the token");
    assert!(!set.contains("Secure"), "plain HTTP: no Secure attribute");
    let page = browser.page("/console/").await;
    assert!(
        page.contains("sha256:"),
        "the session's token fingerprint is shown"
    );
    assert!(!page.contains(TOKEN));

    let session = browser.cookies["deferhook_session"].clone();
    let logout = browser.post("/console/logout", &[]).await;
    expect_redirect(&logout, "/console/login");
    assert!(!browser.cookies.contains_key("deferhook_session"));
    // The old cookie, sent again, is refused: the logout ended it in the store.
    browser.cookies.insert("deferhook_session".into(), session);
    let after = browser.get("/console/").await;
    assert_eq!(after.status, 303, "an ended session is refused");

    let audit = app
        .send(
            app.request(reqwest::Method::GET, "/v1/audit")
                .bearer_auth(OTHER),
        )
        .await;
    let entries = audit.json();
    let actions: Vec<&str> = entries["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    // The refused login first (issue #34 part 4.1).
    assert_eq!(
        actions,
        ["console.logout", "console.login", "console.login_failed"]
    );
    let actor = entries["items"][0]["actor"].as_str().unwrap();
    assert_eq!(actor, deferhook::api::auth::fingerprint(TOKEN));
}

#[tokio::test]
async fn behind_a_tls_proxy_the_session_cookie_is_secure() {
    let app = tokened().await;
    let mut browser = Browser::new(&app);
    let proxied = [("x-forwarded-proto", "https")];
    let login = browser.login_with("/console/login", TOKEN, &proxied).await;
    let cookie = set_cookie_line(&login, "deferhook_session");
    assert!(cookie.ends_with("; Secure"), "{cookie}");
}

/// With an `https` `--public-url`, every cookie is `Secure`, whatever the proxy in front
/// says (issue #34 part 4.3); without one, plain HTTP sets none.
#[tokio::test]
async fn with_an_https_public_url_every_cookie_is_secure() {
    let app = app_with()
        .flag("--api-token", TOKEN)
        .flag("--public-url", "https://deferhook.example.com")
        .start()
        .await;
    let mut browser = Browser::new(&app);
    let form = browser.get("/console/login").await;
    let nonce = set_cookie_line(&form, "deferhook_login");
    assert!(nonce.ends_with("; Secure"), "{nonce}");
    let login = browser.login(TOKEN).await;
    for name in ["deferhook_session", "deferhook_login"] {
        let cookie = set_cookie_line(&login, name);
        assert!(cookie.ends_with("; Secure"), "{cookie}");
    }
}

#[tokio::test]
async fn a_login_form_must_carry_its_nonce() {
    let app = tokened().await;
    let mut browser = Browser::new(&app);
    browser.page("/console/login").await;
    // An empty nonce matches an empty cookie planted by a page of another port.
    let mut planted = Browser::new(&app);
    planted
        .cookies
        .insert("deferhook_login".into(), String::new());
    let empty = planted
        .post_exactly("/console/login", &[("token", TOKEN), ("nonce", "")], &[])
        .await;
    assert_eq!(empty.status, 403);
    assert!(!planted.cookies.contains_key("deferhook_session"));
    // A form of another origin (another port of this host is same-site) is refused.
    let other_port = [("origin", "http://127.0.0.1:1")];
    let reply = browser
        .login_with("/console/login", TOKEN, &other_port)
        .await;
    assert_eq!(reply.status, 403);
    assert!(!browser.cookies.contains_key("deferhook_session"));
    // A `next` with a control character goes to the overview (no broken Location).
    let login = browser
        .login_with("/console/login?next=/console/%7F", TOKEN, &[])
        .await;
    expect_redirect(&login, "/console/");
    let mut browser = Browser::new(&app);
    browser.page("/console/login").await;
    let forged = browser
        .post_exactly(
            "/console/login",
            &[("token", TOKEN), ("nonce", "guessed")],
            &[],
        )
        .await;
    assert_eq!(forged.status, 403);
    assert!(!browser.cookies.contains_key("deferhook_session"));
    // A login from another site's page, with the right nonce, is refused too.
    let cross_site = [("sec-fetch-site", "cross-site")];
    let cross = browser
        .login_with("/console/login", TOKEN, &cross_site)
        .await;
    assert_eq!(cross.status, 403);
    // After a login, `next` never leads off the console.
    let evil = "/console/login?next=https://evil.example/";
    let login = browser.login_with(evil, OTHER, &[]).await;
    expect_redirect(&login, "/console/");
}

#[tokio::test]
async fn forms_without_the_session_s_csrf_token_change_nothing() {
    let app = app_with().start().await;
    app.create_subscriber("acme").await;
    let mut browser = Browser::new(&app);
    browser.page("/console/subscribers/acme").await;
    let csrf = browser.csrf.clone().unwrap();
    for (fields, headers, why) in [
        (vec![("enabled", "false")], vec![], "no token"),
        (
            vec![("enabled", "false"), ("csrf", "forged")],
            vec![],
            "a wrong token",
        ),
        (
            vec![("enabled", "false"), ("csrf", csrf.as_str())],
            vec![("sec-fetch-site", "cross-site")],
            "another site's form",
        ),
    ] {
        let reply = browser
            .post_exactly("/console/subscribers/acme/enabled", &fields, &headers)
            .await;
        assert_eq!(reply.status, 403, "{why}: {}", reply.text);
        assert!(reply.text.contains("nothing was changed"), "{why}");
    }
    // Another browser's session has another token.
    let mut other = Browser::new(&app);
    other.page("/console/").await;
    let reply = other
        .post_exactly(
            "/console/subscribers/acme/enabled",
            &[("enabled", "false"), ("csrf", &csrf)],
            &[],
        )
        .await;
    assert_eq!(reply.status, 403, "{}", reply.text);
    let acme = app.get_json("/v1/subscribers/acme").await;
    assert_eq!(acme["enabled"], true, "nothing was paused");

    let csrf = browser.csrf.clone().unwrap();
    let other_origin = browser
        .post_exactly(
            "/console/subscribers/acme/enabled",
            &[("enabled", "false"), ("csrf", &csrf)],
            &[("origin", "http://127.0.0.1:1")],
        )
        .await;
    assert_eq!(other_origin.status, 403, "{}", other_origin.text);
    let not_a_form = browser
        .send(
            reqwest::Client::new()
                .post(app.url("/console/subscribers/acme/enabled"))
                .header("content-type", "text/plain")
                .body(format!("enabled=false&csrf={csrf}")),
        )
        .await;
    assert_eq!(not_a_form.status, 415, "{}", not_a_form.text);
    let acme = app.get_json("/v1/subscribers/acme").await;
    assert_eq!(acme["enabled"], true, "nothing was paused");

    let paused = browser
        .post("/console/subscribers/acme/enabled", &[("enabled", "false")])
        .await;
    expect_redirect(&paused, "/console/subscribers/acme?done=paused");
    // A `back` that is not a plain console path goes to the subscriber's page.
    let odd = browser
        .post(
            "/console/subscribers/acme/enabled",
            &[("enabled", "true"), ("back", "/console/subscribers\u{7f}")],
        )
        .await;
    expect_redirect(&odd, "/console/subscribers/acme?done=resumed");
    let paused = browser
        .post("/console/subscribers/acme/enabled", &[("enabled", "false")])
        .await;
    expect_redirect(&paused, "/console/subscribers/acme?done=paused");
    let acme = app.get_json("/v1/subscribers/acme").await;
    assert_eq!(acme["enabled"], false);
}

#[tokio::test]
async fn without_tokens_the_console_is_loopback_only_and_kept_out_of_frames_and_caches() {
    let app = app_with().start().await;
    let mut browser = Browser::new(&app);
    let reply = browser.get("/console/").await;
    assert_eq!(reply.status, 200, "no login without tokens");
    assert!(
        browser.cookies.contains_key("deferhook_session"),
        "an anonymous session"
    );
    assert_eq!(reply.header("cache-control"), Some("no-store"));
    assert_eq!(reply.header("x-frame-options"), Some("DENY"));
    let csp = reply.header("content-security-policy").unwrap();
    assert!(
        csp.contains("frame-ancestors 'none'") && csp.contains("script-src 'self'"),
        "{csp}"
    );
    assert!(!reply.text.contains("Log out"), "no logout without tokens");

    let rebinding = browser
        .send(
            reqwest::Client::new()
                .get(app.url("/console/"))
                .header("host", "attacker.example"),
        )
        .await;
    assert_eq!(rebinding.status, 421, "{}", rebinding.text);
    let login = browser.get("/console/login").await;
    expect_redirect(&login, "/console/");
    for (path, status) in [("/console/nope", 404), ("/console/subscribers/resume", 405)] {
        let reply = browser.get(path).await;
        assert_eq!(reply.status, status, "{path}");
        let kind = reply.header("content-type").unwrap();
        assert!(
            kind.starts_with("text/html"),
            "{path}: an HTML page, not {kind}"
        );
    }
    let long = format!("/console/subscribers/{}", "x".repeat(5_000));
    let reply = browser.get(&long).await;
    assert_eq!(reply.status, 422);
    assert!(reply.text.len() < 5_000, "the id is not repeated back");
    // Logout ends even an anonymous session.
    app.create_subscriber("a").await;
    browser.page("/console/subscribers/a").await;
    let session = browser.cookies["deferhook_session"].clone();
    let logout = browser.post("/console/logout", &[]).await;
    expect_redirect(&logout, "/console/login");
    let mut replayed = Browser::new(&app);
    replayed.cookies.insert("deferhook_session".into(), session);
    replayed.csrf = browser.csrf.clone();
    let reply = replayed
        .post("/console/subscribers/resume", &[("subscriber_id", "a")])
        .await;
    assert_eq!(reply.status, 403, "an ended session's token is refused");
    let asset = browser.get("/console/assets/htmx.min.js").await;
    assert_eq!(asset.status, 200);
    assert!(asset.text.starts_with("var htmx"), "the vendored htmx");
    assert_eq!(browser.get("/console/assets/other.js").await.status, 404);
}
