//! Reading a cursor-paginated listing: one page, or every page with `--all`.

use serde::Deserialize;
use serde_json::{Value, json};

use super::args::PageArgs;
use super::client::{ApiClient, CliError, decode};
use super::render;

/// One page of a listing, its items left as JSON.
#[derive(Debug, Deserialize)]
struct RawPage {
    items: Vec<Value>,
    next_cursor: Option<String>,
    #[serde(default)]
    causes: Option<Value>,
}

/// What a listing read: its items and the cursor of the page after them (`None` on
/// the last page).
#[derive(Debug)]
pub struct Listed {
    /// The items, in the server's order.
    pub items: Vec<Value>,
    /// The next page's cursor, if there is one.
    pub next_cursor: Option<String>,
    /// What the first page led with besides its items (the causes of
    /// `GET /v1/subscribers?health=failing`), when it did.
    pub causes: Option<Value>,
}

impl Listed {
    /// The pretty-printed `{items, next_cursor}` of `--json`: one page holding every
    /// item read.
    pub fn json(&self) -> String {
        let mut page = json!({ "items": self.items, "next_cursor": self.next_cursor });
        if let Some(causes) = &self.causes {
            page["causes"] = causes.clone();
        }
        format!("{}\n", render::json(&page))
    }
}

/// `GET`s `segments` with `query` and `page.limit`, from `page.cursor` on: one page, or
/// with `page.all` every page until the last. `what` names the listing in errors (`the
/// job list`).
pub async fn read(
    client: &ApiClient,
    segments: &[&str],
    query: &[(&'static str, String)],
    page: &PageArgs,
    what: &str,
) -> Result<Listed, CliError> {
    let (mut cursor, all) = (page.cursor.clone(), page.all);
    let mut query = query.to_vec();
    if let Some(limit) = page.limit {
        query.push(("limit", limit.to_string()));
    }
    let mut items = Vec::new();
    let mut causes = None;
    loop {
        let mut page_query = query.clone();
        if let Some(cursor) = &cursor {
            page_query.push(("cursor", cursor.clone()));
        }
        let page: RawPage = decode(&client.get(segments, &page_query).await?, what)?;
        items.extend(page.items);
        causes = causes.or(page.causes);
        match page.next_cursor {
            Some(next) if all => {
                if cursor.as_deref() == Some(next.as_str()) {
                    return Err(CliError::Unexpected {
                        url: what.to_owned(),
                        cause: "the server repeated its cursor".into(),
                    });
                }
                cursor = Some(next);
            }
            next_cursor => {
                return Ok(Listed {
                    items,
                    next_cursor,
                    causes,
                });
            }
        }
    }
}
