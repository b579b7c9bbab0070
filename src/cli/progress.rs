//! Following a replay until it ends: a progress bar on a terminal, plain lines
//! otherwise, JSON lines with `--json`.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use serde_json::Value;

use super::client::{ApiClient, CliError, decode};
use super::render;
use super::replay::Replay;

/// How often a watched replay is read.
pub const POLL_INTERVAL: Duration = Duration::from_millis(500);

/// Reads in a row that may fail transiently (server restarting, store unavailable)
/// before watching gives up: about ten seconds.
pub const MAX_FAILED_READS: u32 = 20;

/// Reads the replay every [`POLL_INTERVAL`] and shows its progress (requeued + skipped
/// of matched) until its state is no longer `running`; prints a summary line at the end
/// (not with `json`, whose last line is the final view). `first` is the replay's JSON
/// as last read. A transient failure is retried, up to [`MAX_FAILED_READS`] in a row.
pub async fn watch(client: &ApiClient, first: Value, json: bool) -> Result<Replay, CliError> {
    let mut replay: Replay = decode(&first, "the replay")?;
    let mut display = Display::new(json, &replay);
    let mut value = first;
    let mut failed_reads = 0;
    loop {
        display.show(&replay, &value)?;
        if !replay.is_running() {
            break;
        }
        tokio::time::sleep(POLL_INTERVAL).await;
        match client.get(&["v1", "replays", &replay.id], &[]).await {
            Ok(fresh) => {
                failed_reads = 0;
                replay = decode(&fresh, "the replay")?;
                value = fresh;
            }
            Err(error) if is_transient(&error) && failed_reads + 1 < MAX_FAILED_READS => {
                failed_reads += 1;
            }
            Err(error) => return Err(error),
        }
    }
    display.finish(&replay)?;
    Ok(replay)
}

/// Whether a later read may succeed: no connection, a timeout, or a 5xx answer.
fn is_transient(error: &CliError) -> bool {
    match error {
        CliError::Unreachable { .. } | CliError::Transport { .. } => true,
        CliError::Problem(problem) => problem.status >= 500,
        CliError::Status { status, .. } => status.is_server_error(),
        _ => false,
    }
}

/// Where progress goes.
enum Display {
    /// A bar redrawn on standard error (a terminal).
    Bar(ProgressBar),
    /// A line on standard output each time the counts change.
    Lines { last: Option<(String, u64, u64)> },
    /// The replay's JSON, one line each time it changes.
    Json { last: Option<Value> },
}

impl Display {
    fn new(json: bool, first: &Replay) -> Self {
        if json {
            Display::Json { last: None }
        } else if std::io::stderr().is_terminal() {
            let style = ProgressStyle::with_template("[{bar:40}] {msg} ({elapsed})")
                .map(|s| s.progress_chars("=> "))
                .unwrap_or_else(|_| ProgressStyle::default_bar());
            Display::Bar(
                ProgressBar::new(first.matched)
                    .with_style(style)
                    .with_message(progress_message(first)),
            )
        } else {
            Display::Lines { last: None }
        }
    }

    /// Shows the replay; `value` is its JSON.
    fn show(&mut self, replay: &Replay, value: &Value) -> Result<(), CliError> {
        match self {
            Display::Bar(bar) => {
                bar.set_message(progress_message(replay));
                bar.set_length(replay.matched);
                bar.set_position(replay.done());
            }
            Display::Lines { last } => {
                let now = (replay.state.clone(), replay.requeued, replay.skipped);
                if last.as_ref() != Some(&now) {
                    render::line(format!("{}: {}", replay.state, progress_message(replay)))?;
                    *last = Some(now);
                }
            }
            Display::Json { last } => {
                if last.as_ref() != Some(value) {
                    render::line(value)?;
                    *last = Some(value.clone());
                }
            }
        }
        Ok(())
    }

    fn finish(self, replay: &Replay) -> Result<(), CliError> {
        match self {
            Display::Bar(bar) => {
                // The summary line replaces the bar.
                bar.finish_and_clear();
                render::line(replay.summary())
            }
            Display::Lines { .. } => render::line(replay.summary()),
            Display::Json { .. } => Ok(()),
        }
    }
}

/// The bar's text: all counts in one message, so a redraw never shows them half
/// updated.
fn progress_message(replay: &Replay) -> String {
    format!(
        "{}/{} ({} requeued, {} skipped)",
        replay.done(),
        replay.matched,
        replay.requeued,
        replay.skipped
    )
}
