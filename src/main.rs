//! The `deferhook` command: `serve`, `migrate`, `openapi`, and the operator commands
//! `jobs`, `replay` and `destinations`.

use std::process::ExitCode;

use clap::Parser;
use deferhook::cli::command::{Cli, Command};
use deferhook::server::{Server, ShutdownSignals};
use deferhook::{api, cli, store, telemetry};

fn main() -> ExitCode {
    let cli = Cli::parse();
    telemetry::init_logging(cli.log_format);
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("deferhook: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli.command)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            // One line: the error and its causes.
            eprintln!("deferhook: {error:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Serve(args) => {
            let mut signals = ShutdownSignals::register()?;
            // A start can wait (for the database's clock, §12): a signal meanwhile ends it.
            let server = tokio::select! {
                server = Server::start(&args) => server?,
                () = signals.recv() => {
                    tracing::info!("stopped before the server started");
                    return Ok(());
                }
            };
            let stop = server.shutdown_token();
            tokio::spawn(async move {
                signals.recv().await;
                stop.cancel();
            });
            server.wait().await?;
            tracing::info!("deferhook stopped");
            Ok(())
        }
        Command::Migrate(args) => {
            store::open(&args.database_url).await?;
            tracing::info!("the database schema is up to date");
            Ok(())
        }
        Command::Openapi => {
            println!("{}", serde_json::to_string_pretty(&api::openapi())?);
            Ok(())
        }
        Command::Jobs(args) => cli::jobs::run(args).await,
        Command::Replay(args) => cli::replay::run(args).await,
        Command::Destinations(args) => cli::destinations::run(args).await,
        Command::Events(args) => cli::events::run(args).await,
        Command::Subscribers(args) => cli::subscribers::run(args).await,
        Command::Audit(args) => cli::audit::run(args).await,
        Command::Schedules(args) => cli::schedules::run(args).await,
    }
}
