//! `walfetch replay`: one region's entries, from the index.

use std::io::{self, BufWriter, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures::StreamExt;
use indicatif::{ProgressBar, ProgressStyle};
use walfetch::cluster::IsolationLevel;
use walfetch::consumer::{
    Consumer, ConsumerOptions, LostPolicy, ReplayRange, ReplayStats, StrategyKind,
};
use walfetch::index::{read_index_file, RegionRule};
use walfetch::plan::PlanConfig;

use super::connect::{check_partition, connect, Target};
use super::index::RuleArgs;
use super::output::RecordLine;

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum Format {
    /// One JSON object per entry (the shape `walfetch dump` prints).
    Jsonl,
    /// Each entry's value bytes followed by a newline.
    Raw,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum Strategy {
    /// walfetch's planner.
    Index,
    /// GreptimeDB's estimate strategy, for comparison.
    Estimate,
    /// A full scan of the range, filtered by region.
    Scan,
}

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    target: Target,
    /// The index file (`walfetch index build` or `import-greptime`).
    #[arg(long)]
    index: PathBuf,
    /// The region to replay.
    #[arg(long)]
    region: u64,
    /// First offset (a checkpoint).
    #[arg(long, default_value_t = 0)]
    from: i64,
    /// End offset, exclusive (default: the high watermark).
    #[arg(long)]
    to: Option<i64>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Jsonl)]
    format: Format,
    /// Fetch strategy.
    #[arg(long, value_enum, default_value_t = Strategy::Index)]
    strategy: Strategy,
    /// Read only committed transactions.
    #[arg(long)]
    read_committed: bool,
    /// Skip indexed offsets that no longer exist (and list them in the
    /// stats) instead of failing.
    #[arg(long)]
    skip_lost: bool,
    /// The planner's round trip, in µs (see `walfetch calibrate`; default:
    /// a loopback figure).
    #[arg(long)]
    round_trip_us: Option<u64>,
    /// The planner's bandwidth, in bytes per second (see `walfetch
    /// calibrate`).
    #[arg(long)]
    bytes_per_second: Option<f64>,
    #[command(flatten)]
    rule: RuleArgs,
}

pub(crate) async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let index = read_index_file(&args.index)?;
    let cluster = connect(&args.target.brokers).await?;
    check_partition(&cluster, &args.target).await?;
    let rule: RegionRule = args.rule.rule()?;
    let mut plan = PlanConfig::default();
    if let Some(us) = args.round_trip_us {
        plan.cost.round_trip = Duration::from_micros(us);
    }
    if let Some(bps) = args.bytes_per_second {
        anyhow::ensure!(
            bps.is_finite() && bps > 0.0,
            "--bytes-per-second must be a positive number, not {bps}"
        );
        plan.cost.bytes_per_second = bps;
    }
    let options = ConsumerOptions {
        plan,
        strategy: match args.strategy {
            Strategy::Index => StrategyKind::Index,
            Strategy::Estimate => StrategyKind::Estimate,
            Strategy::Scan => StrategyKind::Scan,
        },
        isolation: if args.read_committed {
            IsolationLevel::ReadCommitted
        } else {
            IsolationLevel::ReadUncommitted
        },
        on_lost: if args.skip_lost {
            LostPolicy::Skip
        } else {
            LostPolicy::Error
        },
        ..ConsumerOptions::default()
    };
    let range = ReplayRange {
        topic: args.target.topic.clone(),
        partition: args.target.partition,
        region: args.region,
        from: args.from,
        to: args.to,
    };
    let started = Instant::now();
    let mut consumer = Consumer::new(cluster, &index, range, options).await?;
    // Indexed entries are exactly the region's; a scan, and the tail past
    // `last_index`, yield every record: keep the region's.
    let filter_from = match args.strategy {
        Strategy::Scan => i64::MIN,
        _ => index.last_index().map_or(i64::MIN, |l| l + 1),
    };
    let progress = progress_bar(consumer.end_offset() - args.from);
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let mut result = Ok(());
    while let Some(record) = consumer.next().await {
        let record = match record {
            Ok(r) => r,
            Err(e) => {
                result = Err(anyhow::Error::new(e));
                break;
            }
        };
        if let Some(p) = &progress {
            p.set_position((record.offset() - args.from).max(0) as u64);
        }
        if record.offset() >= filter_from && rule.region(&record) != Some(args.region) {
            continue;
        }
        let written = match args.format {
            Format::Jsonl => serde_json::to_writer(&mut out, &RecordLine::new(&record))
                .map_err(io::Error::from)
                .and_then(|()| out.write_all(b"\n")),
            Format::Raw => out
                .write_all(record.value().unwrap_or_default())
                .and_then(|()| out.write_all(b"\n")),
        };
        match written {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => break,
            Err(e) => return Err(e).context("writing to stdout"),
        }
    }
    if let Some(p) = progress {
        p.finish_and_clear();
    }
    let _ = out.flush();
    eprintln!(
        "{}",
        stats_json(
            consumer.strategy_name(),
            &consumer.stats(),
            started.elapsed()
        )
    );
    result.map(|()| ExitCode::SUCCESS)
}

fn progress_bar(len: i64) -> Option<ProgressBar> {
    if !io::stderr().is_terminal() {
        return None;
    }
    let bar = ProgressBar::new(len.max(0) as u64);
    let style = ProgressStyle::with_template("{bar:40} {pos}/{len} offsets  {elapsed}").ok()?;
    bar.set_style(style);
    Some(bar)
}

/// The replay's figures as one JSON line.
pub(crate) fn stats_json(strategy: &str, stats: &ReplayStats, elapsed: Duration) -> String {
    serde_json::json!({
        "strategy": strategy,
        "entries": stats.entries,
        "tail_records": stats.tail_records,
        "fetches": stats.fetches,
        "round_trips": stats.round_trips,
        "wire_bytes": stats.wire_bytes,
        "records_bytes": stats.records_bytes,
        "yielded_bytes": stats.yielded_bytes,
        "read_amplification": stats.read_amplification(),
        "floor_bytes": stats.floor_bytes,
        "floor_amplification": stats.floor_amplification(),
        "lost": stats.lost,
        "time_to_first_ms": stats.time_to_first.map(|d| d.as_secs_f64() * 1e3),
        "elapsed_ms": elapsed.as_secs_f64() * 1e3,
        "peak_buffered_bytes": stats.peak_buffered_bytes,
    })
    .to_string()
}
