//! Failed credential guesses are limited per client address (issue #34 part 4.1): ten
//! API tokens or console logins that are not valid lock the address out; while locked
//! out every credential it presents is answered 429 with `Retry-After`, unchecked (the
//! right token too, so a guess then tells nothing); one more is allowed every 6 s;
//! other addresses go on; a failed console login is audited with the client's address.
//! The clock is the test's: no test waits for the lockout to pass.

use std::net::IpAddr;

use serde_json::Value;

use crate::console_support::Browser;
use crate::support::{TestApp, app_with};

const TOKEN: &str = "guesses-token-5c1e7a9d03";

async fn app() -> TestApp {
    app_with()
        .manual_clock()
        .flag("--api-token", TOKEN)
        .start()
        .await
}

/// A client whose connections come from `address` (any of 127.0.0.0/8 on loopback).
fn client_from(address: &str) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(address.parse::<IpAddr>().unwrap())
        .build()
        .unwrap()
}

/// `GET path` with bearer `token`.
async fn get(
    client: &reqwest::Client,
    app: &TestApp,
    path: &str,
    token: &str,
) -> reqwest::Response {
    client
        .get(app.url(path))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
}

async fn list(client: &reqwest::Client, app: &TestApp, token: &str) -> reqwest::Response {
    get(client, app, "/v1/subscribers", token).await
}

/// The audit listing at `path`, read from 127.0.0.1 with the token.
async fn audit(app: &TestApp, path: &str) -> Value {
    let client = client_from("127.0.0.1");
    get(&client, app, path, TOKEN).await.json().await.unwrap()
}

#[tokio::test]
async fn ten_wrong_tokens_lock_the_address_out_even_for_the_right_one() {
    let app = app().await;
    let client = client_from("127.0.0.1");
    for n in 0..10 {
        let guess = format!("wrong-token-{n:012}");
        assert_eq!(list(&client, &app, &guess).await.status(), 401, "guess {n}");
    }
    let refused = list(&client, &app, TOKEN).await;
    assert_eq!(refused.status(), 429, "the right token, unchecked");
    assert_eq!(refused.headers()["retry-after"], "6");
    let body: Value = refused.json().await.unwrap();
    assert!(
        body["detail"].as_str().unwrap().contains("not checked"),
        "{body}"
    );
    // A request without a credential is no guess: the usual 401.
    let bare = client.get(app.url("/v1/subscribers")).send().await.unwrap();
    assert_eq!(bare.status(), 401);
    // Another address goes on.
    assert_eq!(
        list(&client_from("127.0.0.2"), &app, TOKEN).await.status(),
        200
    );
    // The console's login shares the budget: the right token, unchecked.
    let mut browser = Browser::new(&app);
    let login = browser.login(TOKEN).await;
    assert_eq!(login.status, 429, "{}", login.text);
    assert_eq!(login.headers["retry-after"], "6");
    assert!(login.text.contains("not checked"), "{}", login.text);

    // One more check every 6 s.
    app.advance(5_999);
    assert_eq!(list(&client, &app, TOKEN).await.status(), 429);
    app.advance(1);
    assert_eq!(list(&client, &app, TOKEN).await.status(), 200);
    assert_eq!(
        list(&client, &app, "wrong-token-again-0001").await.status(),
        401
    );
    assert_eq!(list(&client, &app, TOKEN).await.status(), 429);

    let metrics = client
        .get(app.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    // The counters are the process's (other tests run beside this one): at least these.
    for (series, least) in [
        ("deferhook_credential_failures_total{surface=\"api\"} ", 11),
        ("deferhook_credential_lockouts_total{surface=\"api\"} ", 3),
        (
            "deferhook_credential_lockouts_total{surface=\"console\"} ",
            1,
        ),
    ] {
        let value = metrics
            .lines()
            .find_map(|l| l.strip_prefix(series))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or_else(|| panic!("{series} in:\n{metrics}"));
        assert!(value >= least, "{series}{value}");
    }
}

#[tokio::test]
async fn console_logins_count_against_the_same_budget() {
    let app = app().await;
    let mut browser = Browser::new(&app);
    for n in 0..10 {
        let refused = browser.login(&format!("not-the-token-{n:08}")).await;
        assert_eq!(refused.status, 401, "login {n}");
    }
    let locked = browser.login(TOKEN).await;
    assert_eq!(locked.status, 429);
    let client = client_from("127.0.0.1");
    assert_eq!(
        list(&client, &app, TOKEN).await.status(),
        429,
        "the API too"
    );
    app.advance(6_000);
    let login = browser.login(TOKEN).await;
    assert_eq!(login.status, 303, "{}", login.text);
}

#[tokio::test]
async fn a_failed_login_is_audited_with_the_clients_address() {
    let app = app().await;
    let mut browser = Browser::new(&app);
    let guess = "not-the-token-4d2e9b";
    assert_eq!(browser.login(guess).await.status, 401);
    assert_eq!(browser.login(TOKEN).await.status, 303);
    let entries = audit(&app, "/v1/audit").await;
    let items = entries["items"].as_array().unwrap();
    let actions: Vec<&str> = items
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions,
        ["console.login", "console.login_failed"],
        "{entries}"
    );
    let failed = &items[1];
    assert_eq!(failed["status"], 401);
    assert!(failed["actor"].is_null(), "{failed}");
    assert_eq!(failed["parameters"]["client_address"], "127.0.0.1");
    assert_eq!(failed["parameters"]["via"], "console");
    assert!(!failed.to_string().contains(guess), "the guess is not kept");
    assert_eq!(items[0]["parameters"]["client_address"], "127.0.0.1");
    let filtered = audit(&app, "/v1/audit?action=console.login_failed").await;
    assert_eq!(filtered["items"].as_array().unwrap().len(), 1, "{filtered}");
}

#[tokio::test]
async fn the_number_of_failures_allowed_at_once_is_a_setting() {
    let app = app_with()
        .manual_clock()
        .flag("--api-token", TOKEN)
        .flag("--max-failed-credentials", 3)
        .start()
        .await;
    let client = client_from("127.0.0.1");
    for n in 0..3 {
        let guess = format!("wrong-token-{n:012}");
        assert_eq!(list(&client, &app, &guess).await.status(), 401, "guess {n}");
    }
    assert_eq!(list(&client, &app, TOKEN).await.status(), 429);
}
