//! `walfetch replay`: the entries of one or many regions, over one or many
//! partitions, read in one pass using the partitions' indexes.

use std::collections::btree_map::Entry;
use std::collections::BTreeMap;
use std::io::{self, BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures::StreamExt;
use indicatif::{ProgressBar, ProgressStyle};
use walfetch::cluster::IsolationLevel;
use walfetch::consumer::{
    CutRecords, LostPolicy, Recovery, ReplayOptions, ReplayStats, StrategyKind,
};
use walfetch::index::{RegionId, WalIndex};
use walfetch::plan::PlanConfig;

use crate::connect::{check_partition, connect, offset, Target};
use crate::index::RuleArgs;
use crate::output::{print_error, stdout_error, RecordLine};
use crate::properties::Settings;

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum Format {
    /// One JSON object per entry (the shape `walfetch dump` prints, with
    /// the entry's region, topic and partition).
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
    /// A full scan of the range, split by the region rule (no `--index`
    /// needed).
    Scan,
}
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  walfetch replay -b 127.0.0.1:9092 -t wal -p 0 --index wal.idx --region 7 --from 1200
  walfetch replay -b 127.0.0.1:9092 -t wal:0 -t wal:1 --index wal-0.idx --index wal-1.idx \\
      --checkpoints checkpoints.json
  walfetch replay -b 127.0.0.1:9092 -t wal --strategy scan --region 7   # no index")]
pub(crate) struct Args {
    /// Bootstrap brokers, `host:port[,host:port...]`.
    #[arg(short = 'b', long = "brokers")]
    brokers: String,
    /// Client properties and timeout.
    #[command(flatten)]
    client: crate::connect::ClientArgs,
    /// A partition to read: `TOPIC` (with `-p`) or `TOPIC:PARTITION`.
    /// Repeat for a recovery across partitions.
    #[arg(short = 't', long = "topic", required = true)]
    topics: Vec<String>,
    /// The partition of a `-t TOPIC` given without one.
    #[arg(short = 'p', long = "partition", default_value_t = 0,
          value_parser = crate::connect::partition, allow_hyphen_values = true)]
    partition: i32,
    /// The index file of each partition, in the order of the `-t`s
    /// (`walfetch index build` or `import-greptime`; `-` for stdin, for one
    /// of them: stdin can be read once); none with `--strategy scan`.
    #[arg(long = "index")]
    indexes: Vec<PathBuf>,
    /// A region to replay, from `--from` (or its checkpoint in
    /// `--checkpoints`). Repeat for many (a region given twice is replayed
    /// once).
    #[arg(long = "region")]
    regions: Vec<RegionId>,
    /// A JSON object of checkpoints, `{"<region id>": <from offset>, ...}`.
    /// Without `--region`, every region in it is replayed. Two checkpoints
    /// for one region (`"7"` and `"07"`, or a key given twice) that differ
    /// are refused.
    #[arg(long)]
    checkpoints: Option<PathBuf>,
    /// First offset of a region given with `--region` and absent from
    /// `--checkpoints`.
    #[arg(long, default_value_t = 0, value_parser = offset, allow_hyphen_values = true)]
    from: i64,
    /// End offset, exclusive (default: the high watermark).
    #[arg(long, value_parser = offset, allow_hyphen_values = true)]
    to: Option<i64>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Jsonl)]
    format: Format,
    /// Fetch strategy.
    #[arg(long, value_enum, default_value_t = Strategy::Index)]
    strategy: Strategy,
    /// Leave out records of aborted transactions and stop at the last
    /// stable offset: the default (`-X isolation.level=read_committed`),
    /// kept for the scripts that give it.
    #[arg(long, conflicts_with = "read_uncommitted")]
    read_committed: bool,
    /// Replay records of aborted transactions too, up to the high
    /// watermark (`-X isolation.level=read_uncommitted`); not for a WAL
    /// whose writer may abort.
    #[arg(long)]
    read_uncommitted: bool,
    /// Skip indexed offsets that no longer exist (and list them in the
    /// stats) instead of failing.
    #[arg(long)]
    skip_lost: bool,
    /// The planner's round trip, in µs, up to 60000000 (see `walfetch
    /// calibrate`; default: a loopback figure).
    #[arg(long, value_parser = clap::value_parser!(u64).range(0..=60_000_000))]
    round_trip_us: Option<u64>,
    /// The planner's bandwidth, in bytes per second (see `walfetch
    /// calibrate`).
    #[arg(long)]
    bytes_per_second: Option<f64>,
    /// Do not learn what a fetch costs from the replay's own fetches: plan
    /// with the default cost model, or the one given by `--round-trip-us`
    /// and `--bytes-per-second`, throughout. Learning, the default, starts
    /// from that model (with the link's round trip as the first answer
    /// shows it) and keeps it unless fetches prove dear (a broker that
    /// takes longer to serve one, pipeline full, than its share of the
    /// round trip among the fetches in flight); then it merges runs across
    /// other regions' batches at what a fetch was measured to cost.
    #[arg(long)]
    no_learn_link: bool,
    #[command(flatten)]
    rule: RuleArgs,
    /// Use the region rule given (`--region-header`, `--region-format`)
    /// even where it differs from the rule an index was built with
    /// (without it, that is an error).
    #[arg(long)]
    force_rule: bool,
    /// Use the complete records of a batch the broker cut at the byte limit
    /// even when no per-record checksum covers them (their batch's CRC
    /// cannot be checked); they are counted as `unverified_records`.
    /// Without it, such a batch is read whole.
    #[arg(long)]
    trust_cut_batches: bool,
}

/// A partition to replay and its index.
struct Partition {
    topic: String,
    partition: i32,
    index: WalIndex,
}

/// The exit status of a replay ended by Ctrl-C: 128 + SIGINT, what a shell
/// reports for a command the signal killed.
const INTERRUPTED: u8 = 130;

pub(crate) async fn run(args: Args) -> anyhow::Result<ExitCode> {
    stdin_read_once(&args)?;
    let partitions = partitions(&args)?;
    let checkpoints = checkpoints(&args)?;
    anyhow::ensure!(
        args.from >= 0,
        "--from {}: offsets start at 0 (a checkpoint is an offset in the partition)",
        args.from
    );
    let settings = args.client.settings()?;
    let options = options(&args, &settings)?;
    let cluster = connect(&args.brokers, &settings).await?;
    for p in &partitions {
        let target = Target {
            brokers: args.brokers.clone(),
            topic: p.topic.clone(),
            partition: p.partition,
            client: args.client.clone(),
        };
        check_partition(&cluster, &target).await?;
    }
    let mut builder = Recovery::builder(cluster).options(options);
    for p in &partitions {
        builder = builder.index(p.topic.as_str(), p.partition, &p.index);
        // A region goes to the partitions whose index lists it; one that no
        // index lists can only be past `last_index`: every partition's scan.
        let listed: Vec<_> = checkpoints
            .iter()
            .filter(|(r, _)| {
                p.index.region(**r).is_some()
                    || partitions.iter().all(|q| q.index.region(**r).is_none())
            })
            .collect();
        for (&region, &from) in listed {
            builder = builder.region_until(p.topic.as_str(), p.partition, region, from, args.to);
        }
    }
    let started = Instant::now();
    let mut recovery = builder.build().await?;
    if !matches!(args.strategy, Strategy::Scan) {
        absent_notes(&partitions, &checkpoints);
    }
    let low = checkpoints.values().copied().min().unwrap_or(0);
    let progress = progress_bar(partitions.len());
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let mut result = Ok(());
    let mut printed = Printed::default();
    let mut interrupt = interrupt();
    let mut interrupted = false;
    loop {
        // Between two entries: what was written is whole lines, and the
        // flush below ends the output at a line boundary.
        let entry = tokio::select! {
            biased;
            Ok(()) = &mut interrupt => {
                interrupted = true;
                result = Err(anyhow::anyhow!(
                    "interrupted (Ctrl-C): the entries printed are a part of the recovery"
                ));
                break;
            }
            entry = recovery.next() => entry,
        };
        let Some(entry) = entry else { break };
        let entry = match entry {
            Ok(e) => e,
            Err(e) => {
                result = Err(anyhow::Error::new(e));
                break;
            }
        };
        if let Some(p) = &progress {
            p.set_position((entry.record.offset() - low).max(0) as u64);
        }
        let written = match args.format {
            Format::Jsonl => serde_json::to_writer(
                &mut out,
                &RecordLine::new(&entry.record).in_region(
                    entry.region,
                    &entry.topic,
                    entry.partition,
                ),
            )
            .map_err(io::Error::from)
            .and_then(|()| out.write_all(b"\n")),
            Format::Raw => out
                .write_all(entry.record.value().unwrap_or_default())
                .and_then(|()| out.write_all(b"\n")),
        };
        match written {
            Ok(()) => printed.count(entry.region),
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => break,
            Err(e) => {
                result = Err(stdout_error(e));
                break;
            }
        }
    }
    if let Some(p) = progress {
        p.finish_and_clear();
    }
    // What the buffer still holds is lost if this fails (a full disk):
    // an error, as for any other write; a reader gone is not.
    match out.flush() {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe && result.is_ok() => {
            result = Err(stdout_error(e));
        }
        _ => {}
    }
    let strategy = strategy_kind(args.strategy);
    let stats = recovery.stats();
    let partition_stats = recovery.partition_stats();
    if stats.tail_unassigned > 0 {
        say!(
            "walfetch: note: the region rule found no region id in {} of the {} records the \
             scan read (past last_index, or all with --strategy scan): if the ids are written \
             otherwise (--region-format, --region-header), those regions' entries there were \
             not printed",
            stats.tail_unassigned,
            stats.tail_records + stats.tail_skipped
        );
    }
    // The error that ended the replay, then the stats line, last: what a
    // script reads with `tail -1` (its `error` says the same).
    let error = result.err().map(|e| print_error(&e));
    say!(
        "{}",
        stats_json(
            strategy_name(strategy),
            &stats,
            &partition_stats,
            &printed,
            started.elapsed(),
            error.as_deref()
        )
    );
    Ok(match error {
        Some(_) if interrupted => ExitCode::from(INTERRUPTED),
        Some(_) => ExitCode::FAILURE,
        None => ExitCode::SUCCESS,
    })
}

/// Resolves at the first Ctrl-C (SIGINT), which from then on no longer
/// kills the process: the replay stops between two entries, flushes whole
/// lines and prints its stats line. A second Ctrl-C exits at once (status
/// 130), for a replay stuck writing to a reader that does not read.
fn interrupt() -> tokio::sync::oneshot::Receiver<()> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_err() {
            // No handler could be installed: Ctrl-C kills as before. The
            // sender is kept: dropped, it would end the receiver, which
            // may not be polled again.
            let _kept = tx;
            return std::future::pending().await;
        }
        let _ = tx.send(());
        if tokio::signal::ctrl_c().await.is_ok() {
            std::process::exit(i32::from(INTERRUPTED));
        }
    });
    rx
}

/// stdin can be read once: refuses more than one reader of it among
/// `--index`, `--checkpoints` and `-F` (the second would read nothing, and
/// fail as a file that is not an index, an empty JSON document, or
/// settings missing).
fn stdin_read_once(args: &Args) -> anyhow::Result<()> {
    let mut readers: Vec<String> = args
        .indexes
        .iter()
        .filter(|p| reads_stdin(p))
        .map(|p| format!("--index {}", p.display()))
        .collect();
    if let Some(p) = args.checkpoints.as_deref().filter(|p| reads_stdin(p)) {
        readers.push(format!("--checkpoints {}", p.display()));
    }
    // `-F -` names a file called `-`: only descriptor 0's names read stdin.
    if let Some(p) =
        (args.client.properties_file.as_deref()).filter(|p| p.as_os_str() != "-" && reads_stdin(p))
    {
        readers.push(format!("-F {}", p.display()));
    }
    anyhow::ensure!(
        readers.len() <= 1,
        "{} are given: stdin can be read once, so at most one of them may read it (give the \
         others as files)",
        readers.join(" and ")
    );
    Ok(())
}

/// Whether reading `path` reads this process's stdin: `-` (for
/// `--index` and `--checkpoints`) or a name of descriptor 0.
fn reads_stdin(path: &Path) -> bool {
    ["-", "/dev/stdin", "/dev/fd/0", "/proc/self/fd/0"]
        .iter()
        .any(|s| path.as_os_str() == *s)
}

/// The entries written to stdout, in all and per region: what the stats
/// line reports as `entries` (a replay stopped by a closed pipe or an error
/// yielded more than it printed).
#[derive(Debug, Default)]
pub(crate) struct Printed {
    entries: u64,
    regions: BTreeMap<RegionId, u64>,
}

impl Printed {
    fn count(&mut self, region: RegionId) {
        self.entries += 1;
        *self.regions.entry(region).or_default() += 1;
    }
}

/// A note on stderr for each region asked of a partition whose index does
/// not list it: only the log past `last_index` can hold its entries. (A
/// region whose range ends within the index is an error from the library.)
fn absent_notes(partitions: &[Partition], checkpoints: &BTreeMap<RegionId, i64>) {
    let listed_nowhere = |r: RegionId| partitions.iter().all(|p| p.index.region(r).is_none());
    for p in partitions {
        for region in checkpoints.keys().filter(|r| listed_nowhere(**r)) {
            let past = p
                .index
                .last_index()
                .map_or_else(|| "any offset".to_owned(), |l| format!("offset {l}"));
            say!(
                "note: region {region} is not in the index of {}:{}: only the records past {past} \
                 are read for it",
                p.topic,
                p.partition
            );
        }
    }
}

/// The `-t`s, each with its index (`--index` in the same order).
fn partitions(args: &Args) -> anyhow::Result<Vec<Partition>> {
    let mut seen = std::collections::BTreeSet::new();
    let targets: Vec<(String, i32)> = args
        .topics
        .iter()
        .map(|t| match t.rsplit_once(':') {
            Some((topic, p)) if !topic.is_empty() => {
                let partition = crate::connect::partition(p)
                    .map_err(|why| anyhow::anyhow!("-t {t}: the partition after ':': {why}"))?;
                Ok((topic.to_owned(), partition))
            }
            _ => Ok((t.clone(), args.partition)),
        })
        .collect::<anyhow::Result<_>>()?;
    for t in &targets {
        anyhow::ensure!(seen.insert(t.clone()), "-t {}:{} is given twice", t.0, t.1);
    }
    let scan = matches!(args.strategy, Strategy::Scan);
    anyhow::ensure!(
        args.indexes.len() == targets.len() || (scan && args.indexes.is_empty()),
        "{} partition(s) given with -t but {} --index file(s): give one index per partition, \
         in the same order{}",
        targets.len(),
        args.indexes.len(),
        if scan { " (or none, to scan)" } else { "" }
    );
    targets
        .into_iter()
        .enumerate()
        .map(|(i, (topic, partition))| {
            let index = match args.indexes.get(i) {
                Some(path) => crate::index::read_index(path)?,
                None => WalIndex::new(),
            };
            Ok(Partition {
                topic,
                partition,
                index,
            })
        })
        .collect()
}

/// Every region to replay and where it starts: `--checkpoints`, then the
/// `--region`s (from `--from` unless the file has them; a region given
/// twice is one region, from its checkpoint either way).
fn checkpoints(args: &Args) -> anyhow::Result<BTreeMap<RegionId, i64>> {
    let from_file = match &args.checkpoints {
        Some(path) => read_checkpoints(path)?,
        None => BTreeMap::new(),
    };
    if args.regions.is_empty() {
        return match &args.checkpoints {
            None => {
                anyhow::bail!(
                    "no region to replay: give --region R (repeatable) or --checkpoints FILE"
                )
            }
            Some(path) if from_file.is_empty() => anyhow::bail!(
                "{}: the checkpoints file lists no regions: nothing to replay (give --region R \
                 to replay a region from --from)",
                path.display()
            ),
            Some(_) => Ok(from_file),
        };
    }
    Ok(args
        .regions
        .iter()
        .map(|&r| (r, from_file.get(&r).copied().unwrap_or(args.from)))
        .collect())
}

/// Reads `{"<region id>": <from offset>, ...}`. Two checkpoints for one
/// region that differ (`"7"` and `"07"`, or a key given twice) are an
/// error naming both: which one the region was flushed to is not known,
/// and the wrong one loses entries or replays them twice.
fn read_checkpoints(path: &Path) -> anyhow::Result<BTreeMap<RegionId, i64>> {
    // Bounded: a checkpoint is a few dozen bytes, 64 MiB is a million regions.
    let text = crate::index::read_bounded(path, 64 << 20, "a checkpoints file")?;
    let Members(members) = serde_json::from_slice(&text).with_context(|| {
        format!(
            "{}: expected a JSON object of region id to offset, like {{\"7\": 1200}}",
            path.display()
        )
    })?;
    let mut checkpoints: BTreeMap<RegionId, (String, i64)> = BTreeMap::new();
    for (region, from) in members {
        let id = region.trim().parse().with_context(|| {
            format!(
                "{}: {region:?} is not a region id (a number)",
                path.display()
            )
        })?;
        anyhow::ensure!(
            from >= 0,
            "{}: region {region}: checkpoint {from} is negative",
            path.display()
        );
        match checkpoints.entry(id) {
            Entry::Vacant(e) => {
                e.insert((region, from));
            }
            Entry::Occupied(e) => {
                let (first_key, first) = e.get();
                anyhow::ensure!(
                    *first == from,
                    "{}: region {id} has two checkpoints, {first} (as {first_key:?}) and {from} \
                     (as {region:?}): keep the one the region was flushed to",
                    path.display()
                );
            }
        }
    }
    Ok(checkpoints
        .into_iter()
        .map(|(id, (_, from))| (id, from))
        .collect())
}

/// A JSON object's members in the order written, a key given twice kept
/// twice (a map keeps only the last, hiding the conflict).
struct Members(Vec<(String, i64)>);

impl<'de> serde::Deserialize<'de> for Members {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Members;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object of region id to offset")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Members, A::Error> {
                let mut members = Vec::new();
                while let Some(member) = map.next_entry()? {
                    members.push(member);
                }
                Ok(Members(members))
            }
        }
        deserializer.deserialize_map(Visitor)
    }
}

fn options(args: &Args, settings: &Settings) -> anyhow::Result<ReplayOptions> {
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
    let options = ReplayOptions::default()
        .with_plan(plan)
        .with_learn_link(!args.no_learn_link)
        .with_strategy(strategy_kind(args.strategy))
        .with_isolation(isolation(args, settings))
        .with_on_lost(if args.skip_lost {
            LostPolicy::Skip
        } else {
            LostPolicy::Error
        })
        .with_force_rule(args.force_rule)
        .with_cut_records(if args.trust_cut_batches {
            CutRecords::Trusted
        } else {
            CutRecords::Checked
        });
    // Without a rule given, each partition's index's own rule.
    Ok(match args.rule.rule()? {
        Some(rule) => options.with_region_rule(rule),
        None => options,
    })
}

/// `--read-uncommitted` or `--read-committed`, else `-X isolation.level`,
/// else read_committed: a WAL never replays an aborted write unless asked.
fn isolation(args: &Args, settings: &Settings) -> IsolationLevel {
    if args.read_uncommitted {
        IsolationLevel::ReadUncommitted
    } else if args.read_committed {
        IsolationLevel::ReadCommitted
    } else {
        settings
            .isolation()
            .unwrap_or(IsolationLevel::ReadCommitted)
    }
}

fn strategy_kind(strategy: Strategy) -> StrategyKind {
    match strategy {
        Strategy::Index => StrategyKind::Index,
        Strategy::Estimate => StrategyKind::Estimate,
        Strategy::Scan => StrategyKind::Scan,
    }
}

/// The name the stats line gives a strategy.
pub(crate) fn strategy_name(strategy: StrategyKind) -> &'static str {
    match strategy {
        StrategyKind::Estimate => "estimate",
        StrategyKind::Scan => "scan",
        _ => "walfetch",
    }
}

/// On a terminal, a spinner with the offset reached (of the partition read
/// last) and the time.
fn progress_bar(partitions: usize) -> Option<ProgressBar> {
    if !io::stderr().is_terminal() {
        return None;
    }
    let bar = ProgressBar::new_spinner();
    let template = format!("{{spinner}} offset {{pos}} ({partitions} partition(s))  {{elapsed}}");
    let style = ProgressStyle::with_template(&template).ok()?;
    bar.set_style(style);
    Some(bar)
}

/// The most offsets the stats line lists in `lost`; as many again in all
/// the regions' `lost` together, and in all the partitions' together: a
/// recovery that lost millions of indexed offsets (`--skip-lost`) still
/// prints one short line. `lost_count` says how many there were, and the
/// lowest are listed (retention takes a log's oldest first).
const LOST_LISTED: usize = 1000;

/// Up to `budget` of `offsets`, lowest first, each once (offsets of
/// several partitions may be the same number); what it lists is taken from
/// the budget.
fn listed(offsets: &[i64], budget: &mut usize) -> Vec<i64> {
    let mut sorted = offsets.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    sorted.truncate(*budget);
    *budget -= sorted.len();
    sorted
}

/// Ranges lost past `last_index`, as `[from, to]` pairs in order, each
/// once, at most [`LOST_LISTED`] of them.
fn listed_ranges(ranges: &[std::ops::Range<i64>]) -> Vec<[i64; 2]> {
    let mut pairs: Vec<[i64; 2]> = ranges.iter().map(|r| [r.start, r.end]).collect();
    pairs.sort_unstable();
    pairs.dedup();
    pairs.truncate(LOST_LISTED);
    pairs
}

/// The replay's figures as one JSON line. `entries` is what was printed:
/// indexed entries and records found past `last_index` (or by a full scan)
/// alike; `indexed_entries` and `tail_records` split what was yielded.
/// `error` is the message of the error that ended the replay, or null.
/// `partitions` (each partition's `(topic, partition, stats)`) says which
/// partition lost what.
pub(crate) fn stats_json(
    strategy: &str,
    stats: &ReplayStats,
    partitions: &[(String, i32, ReplayStats)],
    printed: &Printed,
    elapsed: Duration,
    error: Option<&str>,
) -> String {
    let mut regions_budget = LOST_LISTED;
    let mut partitions_budget = LOST_LISTED;
    serde_json::json!({
        "strategy": strategy,
        "error": error,
        "entries": printed.entries,
        "yielded": stats.records(),
        "indexed_entries": stats.entries,
        "tail_records": stats.tail_records,
        "tail_skipped": stats.tail_skipped,
        "tail_unassigned": stats.tail_unassigned,
        "fetches": stats.fetches,
        "requests": stats.requests,
        "omitted": stats.omitted,
        "throttle_time_ms": stats.throttle_time.as_secs_f64() * 1e3,
        "round_trips": stats.round_trips,
        "wire_bytes": stats.wire_bytes,
        "records_bytes": stats.records_bytes,
        "yielded_bytes": stats.yielded_bytes,
        "unverified_records": stats.unverified_records,
        "read_amplification": stats.read_amplification(),
        "floor_bytes": stats.floor_bytes,
        "floor_amplification": stats.floor_amplification(),
        "lost_count": stats.lost.len(),
        "lost": listed(&stats.lost, &mut { LOST_LISTED }),
        "lost_ranges": listed_ranges(&stats.lost_ranges),
        "time_to_first_ms": stats.time_to_first.map(|d| d.as_secs_f64() * 1e3),
        "elapsed_ms": elapsed.as_secs_f64() * 1e3,
        "peak_buffered_bytes": stats.peak_buffered_bytes,
        "regions": stats
            .regions
            .iter()
            .map(|(id, r)| {
                (
                    id.to_string(),
                    serde_json::json!({
                        "entries": printed.regions.get(id).copied().unwrap_or(0),
                        "indexed_entries": r.entries,
                        "tail_records": r.tail_records,
                        "yielded_bytes": r.yielded_bytes,
                        "lost_count": r.lost.len(),
                        "lost": listed(&r.lost, &mut regions_budget),
                    }),
                )
            })
            .collect::<serde_json::Map<_, _>>(),
        "partitions": partitions
            .iter()
            .map(|(topic, partition, p)| {
                (
                    format!("{topic}:{partition}"),
                    serde_json::json!({
                        "lost_count": p.lost.len(),
                        "lost": listed(&p.lost, &mut partitions_budget),
                        "lost_ranges": listed_ranges(&p.lost_ranges),
                    }),
                )
            })
            .collect::<serde_json::Map<_, _>>(),
        "links": stats
            .links
            .iter()
            .map(|(broker, link)| {
                (
                    broker.clone(),
                    serde_json::json!({
                        "answers": link.answers,
                        "measured_per_fetch_us": link
                            .measured_per_fetch
                            .map(|d| d.as_secs_f64() * 1e6),
                        "dearest_per_fetch_us": link
                            .dearest_per_fetch
                            .map(|d| d.as_secs_f64() * 1e6),
                        "dear_answers": link.dear_answers,
                        "widest_merge_gap_bytes": link.widest_merge_gap_bytes,
                    }),
                )
            })
            .collect::<serde_json::Map<_, _>>(),
    })
    .to_string()
}

#[cfg(test)]
mod tests;
