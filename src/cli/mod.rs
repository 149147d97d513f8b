//! Command-line parsing and dispatch. Each subcommand lives in its own file.

mod demo;
mod dump;
mod output;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Replays one region of a shared Kafka write-ahead-log partition, reading
/// only what the writer's index says belongs to it.
#[derive(Debug, Parser)]
#[command(name = "walfetch", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Decode a file of raw record batches (a Kafka `.log` segment, or the
    /// `records` bytes of a Fetch response) and print one JSON object per
    /// record, like Kafka's kafka-dump-log.
    Dump(dump::Args),
    /// Show what walfetch does, end to end, on sample data.
    Demo(demo::Args),
}

pub(crate) fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Dump(args) => dump::run(args),
        Command::Demo(args) => demo::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("walfetch: error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
