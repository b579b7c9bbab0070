//! `deferhook-bench`: drives a real `deferhook` process with load and measures it
//! (issue #8, BENCHMARKS.md): flags, then one scenario against freshly started servers
//! (`incident`: two runs, each on its own), then the report. A crate of its own in the
//! workspace (issue #35), depending on the `deferhook` library, so the product crate
//! does not carry it.

mod args;
mod arrivals;
mod ceilings;
mod chaos;
mod clock;
mod console;
mod database;
mod db_usage;
mod incident;
mod incident_report;
mod load;
mod on_call;
mod on_call_report;
mod receiver;
mod report;
mod scenario;
mod server;
mod stats;

use clap::Parser;

pub use args::Args;

/// Parses the flags, runs the scenario, prints the table and writes the JSON.
#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    args.check()?;
    // reqwest is built without a default crypto provider; use ring's.
    let _ = rustls::crypto::ring::default_provider().install_default();
    match args.scenario {
        args::Scenario::Ceilings => return ceilings::run(&args).await,
        args::Scenario::Incident => return incident::run(&args).await,
        args::Scenario::OnCall => return on_call::run(&args).await,
        args::Scenario::Chaos => return chaos::run(&args).await,
        args::Scenario::Console => return console::run(&args).await,
        _ => {}
    }
    let outcome = scenario::run(&args).await?;
    let report = report::Report::new(&args, &outcome);
    report::publish(
        &args,
        report.table().to_string(),
        report.json(),
        report.failure(),
    )
}
