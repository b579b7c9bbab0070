//! `deferhook audit list`: the trail of operator actions (docs/DESIGN.md §5.11), newest
//! first.

use serde::Deserialize;
use serde_json::Value;

use super::args::{AuditArgs, AuditCommand, ListAuditArgs};
use super::client::{ApiClient, CliError, decode, quiet_when_closed};
use super::pages;
use super::render::{self, or_none};

/// An audit entry as the API shows it (the fields this command prints).
#[derive(Debug, Deserialize)]
pub struct Entry {
    /// When the action was answered.
    pub at: String,
    /// What was done.
    pub action: String,
    /// What it was done to.
    pub target: Option<String>,
    /// The token's fingerprint; none without tokens.
    pub actor: Option<String>,
    /// The answer's status; `None` when its answer was never recorded (still running,
    /// or the server stopped between the action's start and its answer).
    pub status: Option<u16>,
    /// The request's `x-request-id` (the client's, or the server's when it sent none).
    pub request_id: Option<String>,
    /// The server's own id of the request; none for entries recorded before the server
    /// kept it.
    pub server_request_id: Option<String>,
    /// The request's parameters (no secrets).
    pub parameters: Option<Value>,
}

/// Runs an `audit` subcommand.
pub async fn run(args: AuditArgs) -> anyhow::Result<()> {
    let client = ApiClient::new(&args.client)?;
    let json = args.client.json;
    let text = match args.command {
        AuditCommand::List(list) => list_audit(&client, &list, json).await?,
    };
    Ok(quiet_when_closed(render::emit(&text))?)
}

/// The query of `audit list`.
fn query(args: &ListAuditArgs) -> Vec<(&'static str, String)> {
    let mut query = Vec::new();
    if let Some(action) = &args.action {
        query.push(("action", action.clone()));
    }
    if let Some(target) = &args.target {
        query.push(("target", target.clone()));
    }
    query
}

/// The text `audit list` prints.
async fn list_audit(
    client: &ApiClient,
    args: &ListAuditArgs,
    json: bool,
) -> Result<String, CliError> {
    let listed = pages::read(
        client,
        &["v1", "audit"],
        &query(args),
        &args.page,
        "the audit trail",
    )
    .await?;
    if json {
        return Ok(listed.json());
    }
    let entries: Vec<Entry> = listed
        .items
        .iter()
        .map(|e| decode(e, "an audit entry"))
        .collect::<Result<_, _>>()?;
    let mut text = if entries.is_empty() {
        "No operator actions recorded.\n".to_owned()
    } else {
        format!("{}\n", audit_table(&entries))
    };
    if let Some(next) = listed.next_cursor {
        text.push_str(&format!("More entries: add --cursor {next} (or --all)\n"));
    }
    Ok(text)
}

/// Entries as a table, one row each.
pub fn audit_table(entries: &[Entry]) -> String {
    let rows = entries.iter().map(|e| {
        vec![
            e.at.clone(),
            e.action.clone(),
            or_none(e.target.as_ref()),
            e.actor.clone().unwrap_or_else(|| "local".to_owned()),
            e.status
                .map_or_else(|| "unanswered".to_owned(), |status| status.to_string()),
            or_none(e.request_id.as_ref()),
            or_none(e.server_request_id.as_ref()),
            or_none(e.parameters.as_ref().map(Value::to_string)),
        ]
    });
    render::table(
        &[
            "at",
            "action",
            "target",
            "actor",
            "status",
            "request_id",
            "server_request_id",
            "parameters",
        ],
        rows,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_whose_answer_was_never_recorded_reads_unanswered() {
        let entry: Entry = serde_json::from_value(serde_json::json!({
            "at": "2026-12-07T10:00:00.000Z",
            "action": "job.cancel",
            "target": "0193",
            "actor": null,
            "status": null,
            "request_id": "r-1",
            "server_request_id": null,
            "parameters": null
        }))
        .unwrap();
        let table = audit_table(&[entry]);
        let row = table.lines().find(|line| line.contains("job.cancel"));
        assert!(row.is_some_and(|row| row.contains("unanswered")), "{table}");
    }
}
