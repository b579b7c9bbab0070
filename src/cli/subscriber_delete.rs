//! `deferhook subscribers delete ID`: deletes a subscriber (docs/DESIGN.md §5.3) and
//! says how many of its waiting jobs ended dead.

use serde::Deserialize;

use super::args::SubscriberArg;
use super::client::{ApiClient, CliError, decode};
use super::render;

/// What `DELETE /v1/subscribers/{id}` answers.
#[derive(Debug, Deserialize)]
pub struct Deleted {
    /// The deleted subscriber's id.
    pub deleted: String,
    /// Its waiting jobs now dead with reason `subscriber_deleted`.
    pub jobs_dead: u64,
    /// When it was deleted.
    pub deleted_at: String,
}

/// The text `subscribers delete` prints.
pub(crate) async fn delete_subscriber(
    client: &ApiClient,
    args: &SubscriberArg,
    json: bool,
) -> Result<String, CliError> {
    let value = client
        .delete(&["v1", "subscribers", &args.subscriber_id])
        .await?;
    if json {
        return Ok(format!("{}\n", render::json(&value)));
    }
    let deleted: Deleted = decode(&value, "the deletion")?;
    Ok(format!(
        "Deleted subscriber {} at {}: {} waiting job(s) now dead (subscriber_deleted).\n",
        deleted.deleted, deleted.deleted_at, deleted.jobs_dead
    ))
}
