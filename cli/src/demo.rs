//! `walfetch demo`: the whole story on a real broker. Writes a WAL of many
//! regions into one partition (building the index while writing), then
//! replays one region four ways — a full scan, GreptimeDB's estimate
//! strategy, walfetch with offsets only, walfetch with the writer's hints —
//! and recovers every region from its own checkpoint as a restarting node
//! does, four ways — the estimate strategy and walfetch region by region, a
//! full scan split by region, walfetch's one pass — checks each against what
//! was written, and prints what each cost.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context as _;
use bytes::Bytes;
use futures::StreamExt;
use rand::rngs::StdRng;
use rand::{RngExt as _, SeedableRng};
use walfetch::cluster::{Cluster, NewTopic};
use walfetch::codec::Compression;
use walfetch::consumer::{
    Consumer, Recovery, ReplayOptions, ReplayRange, ReplayStats, StrategyKind,
};
use walfetch::index::{RegionId, WalIndex};
use walfetch::local_broker::{find_tansu, install_tansu, LocalBroker, TANSU_VERSION};
use walfetch::writer::{WalEntry, WalWriter, WriterConfig};

use crate::connect::connect;
use crate::output::outln;

/// The most `--regions`.
const MAX_REGIONS: u64 = 100_000;
/// The most `--entries`: the demo keeps what it wrote in memory to check
/// every replay against it (entries average about 4 KiB).
const MAX_ENTRIES: u64 = 200_000;

#[derive(Debug, clap::Args)]
#[command(
    after_help = "What it installs: without -b, the Tansu broker, if it is not installed
yet (`cargo install tansu` into ~/.cargo/bin, about 10 minutes on 2 cores).
It runs Tansu with in-memory storage on a free loopback port and stops it at
the end: only the installed binary stays.

What it leaves behind: with -b, the topic it wrote, walfetch-demo-<pid> (one
partition, about 75 MiB at the default --entries); delete it with your Kafka
tools.

Examples:
  walfetch demo
  walfetch demo -b 127.0.0.1:9092 --entries 5000 --regions 16 --compression zstd

What to run next: index and replay a topic of your own,
  walfetch index build -b 127.0.0.1:9092 -t wal --out wal.idx
  walfetch replay -b 127.0.0.1:9092 -t wal --index wal.idx --region 7"
)]
pub(crate) struct Args {
    /// Use this Kafka cluster instead of starting a local Tansu broker.
    #[arg(short = 'b', long = "brokers")]
    brokers: Option<String>,
    /// Regions sharing the partition (1 to 100000).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=MAX_REGIONS))]
    regions: u64,
    /// WAL entries to write (1 to 200000).
    #[arg(long, default_value_t = 20_000,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=MAX_ENTRIES))]
    entries: usize,
    /// Compression of the WAL's batches: none, gzip, snappy, lz4, zstd.
    #[arg(long, default_value = "none")]
    compression: Compression,
    /// The region to replay (default: the one of median activity).
    #[arg(long)]
    region: Option<u64>,
}

/// Region by a Zipf law with exponent 1 over `regions` regions (hot few,
/// long cold tail), drawn by inverting the cumulative weights.
fn zipf_cdf(regions: u64) -> Vec<f64> {
    let weights: Vec<f64> = (1..=regions).map(|k| 1.0 / k as f64).collect();
    let total: f64 = weights.iter().sum();
    let mut acc = 0.0;
    weights
        .iter()
        .map(|w| {
            acc += w / total;
            acc
        })
        .collect()
}

/// Entry sizes: mostly 200 B – 4 KiB, one in twenty up to 64 KiB.
fn entry_size(rng: &mut StdRng) -> usize {
    if rng.random_ratio(1, 20) {
        rng.random_range(4096..4096 + (60 << 10))
    } else {
        rng.random_range(200..4100)
    }
}

pub(crate) async fn run(args: Args) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(
        args.regions > 0 && args.entries > 0,
        "--regions and --entries must be positive"
    );
    let (_local, brokers) = match &args.brokers {
        Some(b) => (None, b.clone()),
        None => {
            let binary = match find_tansu() {
                Ok(b) => b,
                Err(_) => {
                    eprintln!("walfetch demo: the Tansu {TANSU_VERSION} broker is not installed; installing it with `cargo install tansu` (about 10 minutes on 2 cores) ...");
                    install_tansu()?
                }
            };
            let broker = LocalBroker::start(&binary, None).await?;
            outln!(
                "started a local Tansu broker ({}) at {}",
                binary.display(),
                broker.address()
            )?;
            let address = broker.address();
            (Some(broker), address)
        }
    };
    let cluster = connect(&brokers).await?;
    let topic = format!("walfetch-demo-{}", std::process::id());
    cluster
        .create_topics(&[NewTopic::new(&topic, 1)])
        .await
        .with_context(|| format!("creating topic {topic}"))?;

    // Write.
    let started = Instant::now();
    let (written, index) = write_wal(&cluster, &topic, &args).await?;
    let total_bytes: usize = written.values().flatten().map(|(_, p)| p.len()).sum();
    outln!(
        "wrote {} entries ({:.1} MiB) of {} regions to {topic} partition 0 in {:.2?}, index: {} entries, last_index {}",
        args.entries,
        total_bytes as f64 / (1 << 20) as f64,
        written.len(),
        started.elapsed(),
        index.len(),
        index.last_index().unwrap_or(-1)
    )?;

    // Replay one region four ways.
    let region = match args.region {
        Some(r) => r,
        None => {
            let mut by_count: Vec<(usize, RegionId)> =
                written.iter().map(|(r, v)| (v.len(), *r)).collect();
            by_count.sort_unstable();
            by_count[by_count.len() / 2].1
        }
    };
    let want = written
        .get(&region)
        .with_context(|| format!("region {region} has no entries"))?;
    let region_bytes: usize = want.iter().map(|(_, p)| p.len()).sum();
    outln!(
        "replaying region {region}: {} entries, {region_bytes} payload bytes\n",
        want.len()
    )?;
    let offsets_only = index.without_hints();
    let runs: [(&str, StrategyKind, &WalIndex); 4] = [
        ("full scan", StrategyKind::Scan, &index),
        (ESTIMATE, StrategyKind::Estimate, &offsets_only),
        ("walfetch, offsets only", StrategyKind::Index, &offsets_only),
        ("walfetch, with hints", StrategyKind::Index, &index),
    ];
    print_header()?;
    let mut wire = Vec::new();
    for (name, strategy, idx) in runs {
        let options = options(strategy);
        let range = ReplayRange {
            topic: topic.clone(),
            partition: 0,
            region,
            from: 0,
            to: None,
        };
        let started = Instant::now();
        let mut consumer = Consumer::new(Arc::clone(&cluster), idx, range, options).await?;
        let mut got = Vec::new();
        while let Some(record) = consumer.next().await {
            let record = record?;
            got.push((record.offset(), record.value_bytes().unwrap_or_default()));
        }
        let elapsed = started.elapsed();
        anyhow::ensure!(
            &got == want,
            "{name}: the replay differs from what was written ({} of {} entries)",
            got.len(),
            want.len()
        );
        let stats = consumer.stats();
        print_row(name, &stats, region_bytes, elapsed)?;
        wire.push(stats.wire_bytes.max(1));
    }
    outln!(
        "\nEvery strategy returned exactly the region's {} entries, in order. With the writer's hints walfetch moved {:.1}x fewer bytes than a full scan and {:.1}x fewer than the estimate strategy.",
        want.len(),
        wire[0] as f64 / wire[3] as f64,
        wire[1] as f64 / wire[3] as f64
    )?;
    restart(&cluster, &topic, &written, &index).await?;
    outln!("\n{ESTIMATE_NOTE}")?;
    outln!("walfetch's rows learn the link's cost per fetch as they go (replay --learn-link): fewer, larger fetches where fetches are dear, as on Tansu; without it they read fewer bytes and send more fetches.")?;
    Ok(ExitCode::SUCCESS)
}

/// The demo's options: walfetch learns what a fetch costs on the link as
/// it goes (`--learn-link`), since a local Tansu answers a fetch in about
/// 1.5 ms, ten times the loopback default the planner otherwise assumes.
fn options(strategy: StrategyKind) -> ReplayOptions {
    ReplayOptions::default()
        .with_strategy(strategy)
        .with_learn_link(strategy == StrategyKind::Index)
}

/// The estimate strategy's label: on brokers that skip the batch holding a
/// mid-batch offset (Tansu 0.6) GreptimeDB's algorithm would fetch the same
/// offset forever; the back-off that lets it finish is walfetch's.
const ESTIMATE: &str = "estimate + back-off";
const ESTIMATE_NOTE: &str = "\"estimate + back-off\" is GreptimeDB's estimate strategy with a back-off walfetch added so that it finishes on brokers that skip the batch holding a mid-batch offset (Tansu 0.6); without it, it would not finish there.";

fn print_header() -> anyhow::Result<()> {
    outln!(
        "| {:<28} | {:>8} | {:>12} | {:>8} | {:>8} | {:>11} | {:>8} | {:>9} |",
        "strategy",
        "entries",
        "wire bytes",
        "fetches",
        "requests",
        "round trips",
        "x own",
        "time ms"
    )?;
    outln!(
        "|{:-<30}|{:->10}|{:->14}|{:->10}|{:->10}|{:->13}|{:->10}|{:->11}|",
        "",
        "",
        "",
        "",
        "",
        "",
        "",
        ""
    )
}

/// One row: what a replay cost, `own` the payload bytes it recovered.
fn print_row(
    name: &str,
    stats: &ReplayStats,
    own: usize,
    elapsed: std::time::Duration,
) -> anyhow::Result<()> {
    outln!(
        "| {:<28} | {:>8} | {:>12} | {:>8} | {:>8} | {:>11} | {:>7.1}x | {:>9.1} |",
        name,
        stats.entries + stats.tail_records,
        stats.wire_bytes,
        stats.fetches,
        stats.requests,
        stats.round_trips,
        stats.wire_bytes as f64 / own.max(1) as f64,
        elapsed.as_secs_f64() * 1e3
    )
}

/// The job a restarting node runs: every region from its own checkpoint
/// (seeded, spread over each region's entries), four ways, each checked
/// against what was written.
async fn restart(
    cluster: &Arc<Cluster>,
    topic: &str,
    written: &Written,
    index: &WalIndex,
) -> anyhow::Result<()> {
    let mut rng = StdRng::seed_from_u64(0xc0ff_ee00);
    let checkpoints: Vec<(RegionId, i64)> = written
        .iter()
        .map(|(&r, entries)| (r, entries[rng.random_range(0..entries.len())].0))
        .collect();
    let want: Written = checkpoints
        .iter()
        .map(|&(r, from)| {
            (
                r,
                written[&r]
                    .iter()
                    .filter(|(o, _)| *o >= from)
                    .cloned()
                    .collect(),
            )
        })
        .collect();
    let own: usize = want.values().flatten().map(|(_, p)| p.len()).sum();
    outln!(
        "\nrestart: all {} regions, each from its own checkpoint, {} entries\n",
        checkpoints.len(),
        want.values().map(Vec::len).sum::<usize>()
    )?;
    print_header()?;
    let offsets_only = index.without_hints();
    let by_region: [(&str, StrategyKind, &WalIndex); 2] = [
        (
            "estimate + back-off, 1 by 1",
            StrategyKind::Estimate,
            &offsets_only,
        ),
        ("walfetch, region by region", StrategyKind::Index, index),
    ];
    for (name, strategy, idx) in by_region {
        let started = Instant::now();
        let mut total = ReplayStats::default();
        let mut got = Written::new();
        for &(region, from) in &checkpoints {
            let range = ReplayRange {
                topic: topic.to_owned(),
                partition: 0,
                region,
                from,
                to: None,
            };
            let options = options(strategy);
            let mut consumer = Consumer::new(Arc::clone(cluster), idx, range, options).await?;
            let entries = got.entry(region).or_default();
            while let Some(record) = consumer.next().await {
                let record = record?;
                entries.push((record.offset(), record.value_bytes().unwrap_or_default()));
            }
            total.add(&consumer.stats());
        }
        anyhow::ensure!(
            got == want,
            "{name}: the recovery differs from what was written"
        );
        print_row(name, &total, own, started.elapsed())?;
    }
    let one_pass: [(&str, StrategyKind); 2] = [
        ("full scan, split by region", StrategyKind::Scan),
        ("walfetch, one pass", StrategyKind::Index),
    ];
    for (name, strategy) in one_pass {
        let started = Instant::now();
        let mut builder = Recovery::builder(Arc::clone(cluster))
            .index(topic, 0, index)
            .options(options(strategy));
        for &(region, from) in &checkpoints {
            builder = builder.region(topic, 0, region, from);
        }
        let mut recovery = builder.build().await?;
        let mut got: Written = checkpoints.iter().map(|&(r, _)| (r, Vec::new())).collect();
        while let Some(entry) = recovery.next().await {
            let entry = entry?;
            let record = entry.record;
            if let Some(entries) = got.get_mut(&entry.region) {
                entries.push((record.offset(), record.value_bytes().unwrap_or_default()));
            }
        }
        anyhow::ensure!(
            got == want,
            "{name}: the recovery differs from what was written"
        );
        print_row(name, &recovery.stats(), own, started.elapsed())?;
    }
    Ok(())
}

type Written = std::collections::BTreeMap<RegionId, Vec<(i64, Bytes)>>;

async fn write_wal(
    cluster: &Arc<Cluster>,
    topic: &str,
    args: &Args,
) -> anyhow::Result<(Written, WalIndex)> {
    let mut config = WriterConfig::new(topic, 0);
    config.compression = args.compression;
    config.max_batch_bytes = 64 << 10;
    let writer = WalWriter::new(Arc::clone(cluster), config);
    let cdf = zipf_cdf(args.regions);
    // Seeded: the same arguments write the same WAL.
    let mut rng = StdRng::seed_from_u64(0x5eed_0fa1_fe7c_4a11 ^ args.regions);
    let mut pending = Vec::with_capacity(args.entries);
    for n in 0..args.entries {
        let u = rng.random::<f64>();
        let region = cdf.partition_point(|&c| c < u).min(cdf.len() - 1) as RegionId;
        let size = entry_size(&mut rng);
        let mut payload = format!("{{\"region\":{region},\"seq\":{n},\"rows\":\"").into_bytes();
        payload.extend((0..size).map(|i| b'a' + ((n + i) % 26) as u8));
        payload.extend_from_slice(b"\"}");
        let payload = Bytes::from(payload);
        let appended = writer
            .append(WalEntry::new(region, payload.clone()))
            .await?;
        pending.push((region, payload, appended));
    }
    let mut written = Written::new();
    for (region, payload, appended) in pending {
        written
            .entry(region)
            .or_default()
            .push((appended.await?, payload));
    }
    Ok((written, writer.close().await?))
}
