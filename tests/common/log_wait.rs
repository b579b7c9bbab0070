//! Starting the real binary and waiting for a line of its log (shared by the `cli` and
//! `delivery` test binaries through `#[path]`).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How long a child may take to print the awaited line before it is killed.
const PATIENCE: Duration = Duration::from_secs(30);

/// Spawns `command` with its standard error piped, reads its log until a line contains
/// `marker`, and returns the child and the text after the marker. The rest of the log is
/// drained in the background so the child never blocks on a full pipe. A child that
/// does not print the marker within 30 s is killed, so the test fails instead of
/// hanging.
pub fn spawn_until(command: Command, marker: &str) -> (Child, String) {
    let (child, after, _) = spawn_until_logged(command, marker);
    (child, after)
}

/// [`spawn_until`], also returning the lines logged before the marker's.
pub fn spawn_until_logged(mut command: Command, marker: &str) -> (Child, String, Vec<String>) {
    let mut child = command
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    let found = Arc::new(AtomicBool::new(false));
    let watchdog = (found.clone(), child.id().to_string());
    std::thread::spawn(move || {
        std::thread::sleep(PATIENCE);
        if !watchdog.0.load(Ordering::SeqCst) {
            let _ = Command::new("kill").args(["-KILL", &watchdog.1]).status();
        }
    });
    let mut lines = BufReader::new(child.stderr.take().expect("piped")).lines();
    let mut before = Vec::new();
    let after = loop {
        let line = lines
            .next()
            .unwrap_or_else(|| panic!("the process exited before logging `{marker}`"))
            .expect("a log line");
        if let Some(at) = line.find(marker) {
            found.store(true, Ordering::SeqCst);
            break line[at + marker.len()..].to_owned();
        }
        before.push(line);
    };
    std::thread::spawn(move || for _ in lines {});
    (child, after, before)
}
