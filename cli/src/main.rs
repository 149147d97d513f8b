//! The `walfetch` command line: parsing and dispatch. Each subcommand
//! lives in its own file.

/// `eprintln!` that leaves a closed stderr alone: a reader gone from
/// `walfetch … 2>&1 | head -1` ends the command cleanly, where
/// `eprintln!` panics.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

mod calibrate;
mod capture;
mod connect;
mod demo;
mod dump;
mod index;
mod output;
mod properties;
mod replay;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Replays regions of shared Kafka write-ahead-log partitions, reading only
/// what the writer's index says belongs to them.
#[derive(Debug, Parser)]
#[command(name = "walfetch", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Write a WAL of many regions to a broker (walfetch's in-process one
    /// unless -b or --broker says otherwise), replay one region four ways,
    /// recover every region from its own checkpoint four ways, and compare
    /// what each cost.
    Demo(demo::Args),
    /// Replay regions' entries using the partitions' indexes, many regions
    /// over many partitions in one pass: JSON lines (or raw values) on
    /// stdout, stats as one JSON line on stderr.
    Replay(replay::Args),
    /// Build, inspect or import WAL index files.
    #[command(subcommand)]
    Index(index::Command),
    /// Decode a file of raw record batches (a Kafka `.log` segment, or the
    /// `records` bytes of a Fetch response) and print one JSON object per
    /// record, like Kafka's kafka-dump-log.
    Dump(dump::Args),
    /// Save a partition's raw record batches, as Fetch returns them, to a file.
    Capture(capture::Args),
    /// Measure the round trip and bandwidth to a partition's leader: the
    /// planner's cost model for `replay --round-trip-us --bytes-per-second`.
    Calibrate(calibrate::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Dump(args) => dump::run(args),
        Command::Demo(args) => block_on(demo::run(args)),
        Command::Replay(args) => block_on(replay::run(args)),
        Command::Index(command) => block_on(index::run(command)),
        Command::Capture(args) => block_on(capture::run(args)),
        Command::Calibrate(args) => block_on(calibrate::run(args)),
    };
    match result {
        Ok(code) => code,
        // `walfetch … | head`: the reader has what it wanted.
        Err(err) if err.downcast_ref::<output::ClosedStdout>().is_some() => ExitCode::SUCCESS,
        Err(err) => {
            output::print_error(&err);
            ExitCode::FAILURE
        }
    }
}

/// Runs a command that talks to Kafka on a tokio runtime.
fn block_on(
    command: impl std::future::Future<Output = anyhow::Result<ExitCode>>,
) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| anyhow::Error::new(e).context("starting the async runtime"))?;
    runtime.block_on(command)
}
