//! Page cursors are accepted only as issued (issue #34 item 5.4, docs/DESIGN.md §5.1): a
//! real `next_cursor` with its last character changed, cut short or used on another
//! listing is a 422 naming `cursor`; as issued it gives the next page, on this
//! instance and on another one started on the same database.

use crate::app::Db;
use crate::support::{TestApp, app_with, expect_fields, expect_json};

/// The base64url alphabet (RFC 4648 §5), in order.
const ALPHABET: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// The ids of a page of subscribers.
fn ids(page: &serde_json::Value) -> Vec<&str> {
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect()
}

async fn page_after(app: &TestApp, cursor: &str) -> crate::app::Reply {
    app.get(&format!("/v1/subscribers?limit=1&cursor={cursor}"))
        .await
}

async fn a_cursor_is_accepted_only_as_issued(db: Db) {
    let mut app = app_with().backend(db).start().await;
    for id in ["a", "b", "c"] {
        app.create_subscriber(id).await;
    }
    let first = expect_json(&app.get("/v1/subscribers?limit=1").await, 200);
    assert_eq!(ids(&first), ["a"]);
    let cursor = first["next_cursor"].as_str().unwrap().to_owned();
    // The last character moved to the next of the base64url alphabet: an unsigned
    // cursor of `a` became one of `b`, and answered the page after `b`.
    let (kept, last) = cursor.split_at(cursor.len() - 1);
    let at = ALPHABET.find(last).unwrap();
    let next = (at + 1) % ALPHABET.len();
    let tampered = format!("{kept}{}", &ALPHABET[next..=next]);
    expect_fields(&page_after(&app, &tampered).await, 422, &["cursor"]);
    expect_fields(&page_after(&app, kept).await, 422, &["cursor"]);
    expect_fields(
        &app.get(&format!("/v1/schedules?cursor={cursor}")).await,
        422,
        &["cursor"],
    );
    let second = expect_json(&page_after(&app, &cursor).await, 200);
    assert_eq!(ids(&second), ["b"]);

    // Another instance on the same database, started after this one stopped, takes
    // the cursor this one issued: the key is the deployment's.
    let _database = app.keep_database();
    let url = app.database_url.clone();
    app.stop().await;
    let other = app_with().on(&url).start().await;
    let again = expect_json(&page_after(&other, &cursor).await, 200);
    assert_eq!(ids(&again), ["b"]);
    expect_fields(&page_after(&other, &tampered).await, 422, &["cursor"]);
}

crate::on_both_backends!(a_cursor_is_accepted_only_as_issued);
