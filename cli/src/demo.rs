//! `walfetch demo`: the whole story, on an embedded Kafka-rules broker by
//! default (nothing to install), on Apache Kafka with `--broker kafka`, on a
//! local Tansu with `--broker tansu`, or
//! on any cluster with `-b`. Writes a WAL of many regions into one
//! partition the way GreptimeDB does by default (one region per batch, lz4;
//! `--layout interleaved` mixes regions in every batch), building the index
//! while writing, measures the link, then
//! replays one region four ways — a full scan, GreptimeDB's estimate
//! strategy, walfetch with offsets only, walfetch with the writer's hints —
//! and recovers every region from its own checkpoint as a restarting node
//! does, five ways — the estimate strategy region by region, one after
//! another and 16 at a time (as GreptimeDB opens its regions), walfetch
//! region by region, a full scan split by region, walfetch's one pass —
//! checks each against what was written, and prints what each cost.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use bytes::Bytes;
use futures::StreamExt;
use rand::rngs::StdRng;
use rand::{RngExt as _, SeedableRng};
use walfetch::calibrate::{measure_link, LinkMeasurement};
use walfetch::cluster::{Cluster, NewTopic};
use walfetch::codec::Compression;
use walfetch::consumer::{
    Consumer, Recovery, ReplayOptions, ReplayRange, ReplayStats, StrategyKind,
};
use walfetch::index::{RegionId, WalIndex};
use walfetch::plan::PlanConfig;
use walfetch::writer::{WalEntry, WalWriter, WriterConfig, WriterMode};
use walfetch_brokers::kafka::{
    find_kafka, find_or_install_kafka, KafkaCluster, KafkaConfig, KAFKA_VERSION,
};
use walfetch_brokers::tansu::{find_tansu, install_tansu, TansuBroker, TANSU_VERSION};

use crate::connect::connect;
use crate::output::outln;

/// How many regions GreptimeDB opens, and so replays, at once when a
/// datanode starts: its `init_regions_parallelism` option, 16 by default.
const GREPTIMEDB_PARALLELISM: usize = 16;

/// The most `--regions`.
const MAX_REGIONS: u64 = 100_000;
/// The most `--entries`: the demo keeps what it wrote in memory to check
/// every replay against it (entries average about 4 KiB).
const MAX_ENTRIES: u64 = 200_000;

#[derive(Debug, clap::Args)]
#[command(
    after_help = "What it installs: nothing by default: the broker is walfetch's embedded
one, in process, which follows Kafka's fetch rules. With --broker kafka,
Apache Kafka 4.4.0 if it is not installed yet (scripts/setup-kafka.sh: its
jars from Maven Central with Maven, into ~/.cache/walfetch; run on the
machine's JDK 17+), one KRaft node with its own temporary directory on a
free loopback port, stopped and removed at the end. With --broker tansu, the
Tansu broker if it is not installed yet (`cargo install tansu` into
~/.cargo/bin, about 10 minutes on 2 cores), run with in-memory storage on a
free loopback port and stopped at the end: only the installed binary stays.

What it leaves behind: with -b, the topic it wrote, walfetch-demo-<pid> (one
partition, about 75 MiB at the default --entries); delete it with your Kafka
tools.

Examples:
  walfetch demo
  walfetch demo --broker kafka
  walfetch demo --broker tansu --layout interleaved
  walfetch demo -b 127.0.0.1:9092 --entries 5000 --regions 16 --compression zstd

What to run next: index and replay a topic of your own,
  walfetch index build -b 127.0.0.1:9092 -t wal --out wal.idx
  walfetch replay -b 127.0.0.1:9092 -t wal --index wal.idx --region 7"
)]
pub(crate) struct Args {
    /// Use this Kafka cluster instead of starting a broker.
    #[arg(short = 'b', long = "brokers")]
    brokers: Option<String>,
    /// Client properties and timeout (for the broker given with -b).
    #[command(flatten)]
    client: crate::connect::ClientArgs,
    /// The broker to start when -b is not given: embedded (in process,
    /// Kafka's fetch rules, nothing to install), kafka (Apache Kafka, one
    /// local KRaft node, installed if missing) or tansu (a local Tansu,
    /// installed if missing).
    #[arg(long, value_enum, default_value_t = DemoBroker::Embedded, conflicts_with = "brokers")]
    broker: DemoBroker,
    /// How the WAL's batches are laid out: region-pure (one region per
    /// batch, as GreptimeDB writes: each region's write request is its own
    /// produce request) or interleaved (many regions in every batch).
    #[arg(long, value_enum, default_value_t = Layout::RegionPure)]
    layout: Layout,
    /// Regions sharing the partition (1 to 100000).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=MAX_REGIONS))]
    regions: u64,
    /// WAL entries to write (1 to 200000).
    #[arg(long, default_value_t = 20_000,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=MAX_ENTRIES))]
    entries: usize,
    /// Compression of the WAL's batches: none, gzip, snappy, lz4 (as
    /// GreptimeDB writes), zstd.
    #[arg(long, default_value = "lz4")]
    compression: Compression,
    /// The region to replay, below --regions (default: the one of median
    /// activity).
    #[arg(long)]
    region: Option<u64>,
}

/// The broker the demo starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum DemoBroker {
    /// walfetch's in-process broker (Kafka's fetch rules).
    Embedded,
    /// Apache Kafka: one local KRaft node of the cached install.
    Kafka,
    /// A local Tansu.
    Tansu,
}

/// How the demo lays regions out in batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Layout {
    /// One region per batch.
    RegionPure,
    /// Many regions in every batch.
    Interleaved,
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
    // Checked before a broker is started or a topic written (with -b, on
    // the user's cluster): the WAL has regions 0 to --regions - 1 only.
    if let Some(region) = args.region {
        anyhow::ensure!(
            region < args.regions,
            "--region {region}: the demo writes regions 0 to {} (--regions {})",
            args.regions - 1,
            args.regions
        );
    }
    let (_running, brokers, broker_name) = start_broker(&args).await?;
    let cluster = connect(&brokers, &args.client.settings()?).await?;
    let topic = format!("walfetch-demo-{}", std::process::id());
    cluster
        .create_topics(&[NewTopic::new(&topic, 1)])
        .await
        .with_context(|| format!("creating topic {topic}"))?;
    outln!("broker: {broker_name}")?;

    // Write.
    let started = Instant::now();
    let (written, index) = write_wal(&cluster, &topic, &args).await?;
    let total_bytes: usize = written.values().flatten().map(|(_, p)| p.len()).sum();
    outln!(
        "wrote {} entries ({:.1} MiB) of {} regions to {topic} partition 0 in {:.2?}, {}, {}; index: {} entries, last_index {}",
        args.entries,
        total_bytes as f64 / (1 << 20) as f64,
        written.len(),
        started.elapsed(),
        match args.layout {
            Layout::RegionPure => "one region per batch (GreptimeDB's layout)",
            Layout::Interleaved => "regions interleaved in every batch",
        },
        args.compression.name(),
        index.len(),
        index.last_index().unwrap_or(-1)
    )?;

    // The link, measured as `walfetch calibrate` does: the planner's cost
    // model for every walfetch row below.
    let link = measure_link(&cluster, &topic, 0, 20).await?;
    let cost = link.cost_model(ReplayOptions::default().max_in_flight);
    let plan = PlanConfig {
        cost,
        ..PlanConfig::default()
    };
    outln!(
        "link: {} µs a round trip, {:.0} MB/s (measured; walfetch plans with it: with fetches side by side, runs closer than {} bytes share a fetch, more where fetches prove dear)",
        link.round_trip.as_micros(),
        cost.bytes_per_second / 1e6,
        cost.merge_gap_bytes()
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
    let region_bytes = own_bytes(&index, &[(region, 0)]);
    outln!(
        "replaying region {region}: {} entries, {region_bytes} bytes of its own in the broker's batches (x own below is wire bytes over these)\n",
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
    let mut times = Vec::new();
    let mut fetches = Vec::new();
    for (name, strategy, idx) in runs {
        let options = options(strategy, plan);
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
        times.push(elapsed);
        fetches.push(stats.fetches);
    }
    explain_if_slower(
        "walfetch, with hints",
        times[3],
        fetches[3],
        times[0],
        &link,
    )?;
    outln!(
        "\nEvery strategy returned exactly the region's {} entries, in order. With the writer's hints walfetch moved {:.1}x fewer bytes than a full scan and {:.1}x fewer than the estimate strategy.",
        want.len(),
        wire[0] as f64 / wire[3] as f64,
        wire[1] as f64 / wire[3] as f64
    )?;
    restart(&cluster, &topic, &written, &index, plan, &link).await?;
    outln!("\n{ESTIMATE_NOTE}")?;
    Ok(ExitCode::SUCCESS)
}

/// The demo's options: walfetch plans with the link as measured before
/// the replays (`walfetch calibrate`; a local Tansu answers a fetch in
/// about 1.5 ms, ten times the loopback default the planner otherwise
/// assumes).
fn options(strategy: StrategyKind, plan: PlanConfig) -> ReplayOptions {
    ReplayOptions::default()
        .with_strategy(strategy)
        .with_plan(plan)
}

/// The estimate strategy's label: on brokers that skip the batch holding a
/// mid-batch offset (Tansu 0.6) GreptimeDB's algorithm would fetch the same
/// offset forever; the back-off that lets it finish is walfetch's.
const ESTIMATE: &str = "estimate + back-off";
const ESTIMATE_NOTE: &str = "\"estimate + back-off\" is GreptimeDB's estimate strategy with a back-off walfetch added so that it finishes on brokers that skip the batch holding a mid-batch offset (Tansu 0.6); without it, it would not finish there.";

fn print_header() -> anyhow::Result<()> {
    outln!(
        "| {:<31} | {:>8} | {:>12} | {:>8} | {:>8} | {:>11} | {:>8} | {:>9} |",
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
        "|{:-<33}|{:->10}|{:->14}|{:->10}|{:->10}|{:->13}|{:->10}|{:->11}|",
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
    own: u64,
    elapsed: std::time::Duration,
) -> anyhow::Result<()> {
    outln!(
        "| {:<31} | {:>8} | {:>12} | {:>8} | {:>8} | {:>11} | {:>7.1}x | {:>9.1} |",
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
/// (seeded, spread over each region's entries), five ways, each checked
/// against what was written.
async fn restart(
    cluster: &Arc<Cluster>,
    topic: &str,
    written: &Written,
    index: &WalIndex,
    plan: PlanConfig,
    link: &LinkMeasurement,
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
    let own = own_bytes(index, &checkpoints);
    outln!(
        "\nrestart: all {} regions, each from its own checkpoint, {} entries\n",
        checkpoints.len(),
        want.values().map(Vec::len).sum::<usize>()
    )?;
    print_header()?;
    let offsets_only = index.without_hints();
    let by_region: [(&str, StrategyKind, &WalIndex, usize); 3] = [
        (
            "estimate + back-off, 1 by 1",
            StrategyKind::Estimate,
            &offsets_only,
            1,
        ),
        (
            "estimate + back-off, 16 at once",
            StrategyKind::Estimate,
            &offsets_only,
            GREPTIMEDB_PARALLELISM,
        ),
        ("walfetch, region by region", StrategyKind::Index, index, 1),
    ];
    for (name, strategy, idx, at_once) in by_region {
        let started = Instant::now();
        let replays = checkpoints.iter().map(|&(region, from)| async move {
            let range = ReplayRange {
                topic: topic.to_owned(),
                partition: 0,
                region,
                from,
                to: None,
            };
            let options = options(strategy, plan);
            let mut consumer = Consumer::new(Arc::clone(cluster), idx, range, options).await?;
            let mut entries = Vec::new();
            while let Some(record) = consumer.next().await {
                let record = record?;
                entries.push((record.offset(), record.value_bytes().unwrap_or_default()));
            }
            anyhow::Ok((region, entries, consumer.stats()))
        });
        let mut replays = futures::stream::iter(replays).buffer_unordered(at_once);
        let mut total = ReplayStats::default();
        let mut got = Written::new();
        while let Some(replay) = replays.next().await {
            let (region, entries, stats) = replay?;
            got.insert(region, entries);
            total.add(&stats);
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
    let mut times = Vec::new();
    let mut fetches = Vec::new();
    // What walfetch's one pass learned of the link.
    let mut learned = ReplayStats::default();
    for (name, strategy) in one_pass {
        let started = Instant::now();
        let mut builder = Recovery::builder(Arc::clone(cluster))
            .index(topic, 0, index)
            .options(options(strategy, plan));
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
        let stats = recovery.stats();
        print_row(name, &stats, own, started.elapsed())?;
        times.push(started.elapsed());
        fetches.push(stats.fetches);
        if strategy == StrategyKind::Index {
            learned = stats;
        }
    }
    if let Some(note) = learned_link(&learned) {
        outln!("\n{note}")?;
    }
    explain_if_slower("walfetch, one pass", times[1], fetches[1], times[0], link)
}

/// What the one pass learned a fetch costs on the broker, and what its
/// plan did with that (`ReplayStats::links`); `None` where it did not
/// learn the link.
fn learned_link(stats: &ReplayStats) -> Option<String> {
    let (broker, link) = stats
        .links
        .iter()
        .max_by_key(|(_, l)| l.dearest_per_fetch)?;
    let dearest = link.dearest_per_fetch?.as_secs_f64() * 1e6;
    Some(if link.dear_answers > 0 {
        format!(
            "The one pass measured up to {dearest:.0} µs a fetch beyond its bytes at {broker}; it judged fetches dear after {} of its {} answers, and then read what lies between runs closer than {} bytes rather than send another fetch.",
            link.dear_answers, link.answers, link.widest_merge_gap_bytes
        )
    } else {
        // The estimator's least figure is 1 µs.
        let dearest = if dearest < 1.5 {
            "under 1 µs".to_owned()
        } else {
            format!("at most {dearest:.0} µs")
        };
        format!(
            "The one pass measured {dearest} a fetch beyond its bytes at {broker}: cheap throughout, so it sent a fetch per run of the regions' batches (runs closer than {} bytes shared one).",
            link.widest_merge_gap_bytes
        )
    })
}

/// The bytes of the regions' records from their checkpoints as the broker
/// stores them: each batch holding some of them counted by their share of
/// its records (from the writer's hints; every record is indexed). With
/// one region per batch, the region's own batches.
fn own_bytes(index: &WalIndex, from: &[(RegionId, i64)]) -> u64 {
    use std::collections::BTreeMap;
    // Per batch: its length, its records, and the wanted ones among them.
    let mut batches: BTreeMap<i64, (u32, u64, u64)> = BTreeMap::new();
    for (region, entries) in index.regions() {
        let checkpoint = from.iter().find(|(r, _)| *r == region).map(|(_, f)| *f);
        for e in entries.entries() {
            let Some(h) = e.hint else { continue };
            let b = batches.entry(h.batch_base).or_insert((h.batch_len, 0, 0));
            b.1 += 1;
            b.2 += u64::from(checkpoint.is_some_and(|f| e.offset >= f));
        }
    }
    batches
        .values()
        .map(|&(len, records, wanted)| u64::from(len) * wanted / records.max(1))
        .sum()
}

/// Says why when walfetch's row took longer than the full scan's.
fn explain_if_slower(
    name: &str,
    took: Duration,
    fetches: u64,
    scan: Duration,
    link: &LinkMeasurement,
) -> anyhow::Result<()> {
    if took <= scan {
        return Ok(());
    }
    outln!(
        "\nnote: \"{name}\" took {:.1} ms against the full scan's {:.1} ms: it sent {fetches} fetches on a link measured at {} µs a round trip, where reading what lies between its runs would have cost less time; it still moved the fewest bytes.",
        took.as_secs_f64() * 1e3,
        scan.as_secs_f64() * 1e3,
        link.round_trip.as_micros()
    )
}

type Written = std::collections::BTreeMap<RegionId, Vec<(i64, Bytes)>>;

/// A running broker the demo started, stopped when dropped.
#[expect(
    dead_code,
    reason = "held only to keep the broker running until the demo ends"
)]
enum Running {
    Embedded(walfetch_testkit::ScriptedCluster),
    Kafka(Box<KafkaCluster>),
    Tansu(TansuBroker),
}

/// The broker to run on: `-b`, or one the demo starts; its address and a
/// name for the output.
async fn start_broker(args: &Args) -> anyhow::Result<(Option<Running>, String, String)> {
    if let Some(b) = &args.brokers {
        return Ok((None, b.clone(), format!("{b} (given with -b)")));
    }
    match args.broker {
        DemoBroker::Embedded => {
            let broker = walfetch_testkit::ScriptedCluster::start(1)
                .await
                .context("starting the embedded broker")?;
            let address = broker.bootstrap();
            let name = format!("embedded, in process, Kafka's fetch rules, at {address}");
            Ok((Some(Running::Embedded(broker)), address, name))
        }
        DemoBroker::Kafka => {
            let install = match find_kafka() {
                Ok(install) => install,
                Err(_) => {
                    say!("walfetch demo: Apache Kafka {KAFKA_VERSION} is not installed; installing it with scripts/setup-kafka.sh (its jars from Maven Central, about a minute) ...");
                    find_or_install_kafka()?
                }
            };
            let broker = KafkaCluster::start(&install, KafkaConfig::nodes(1)).await?;
            let address = broker.address(0);
            let name = format!(
                "Apache Kafka {KAFKA_VERSION} (one KRaft node, default settings, {}) at {address}",
                install.home.display()
            );
            Ok((Some(Running::Kafka(Box::new(broker))), address, name))
        }
        DemoBroker::Tansu => {
            let binary = match find_tansu() {
                Ok(b) => b,
                Err(_) => {
                    say!("walfetch demo: the Tansu {TANSU_VERSION} broker is not installed; installing it with `cargo install tansu` (about 10 minutes on 2 cores) ...");
                    install_tansu()?
                }
            };
            let broker = TansuBroker::start(&binary, None).await?;
            let address = broker.address();
            let name = format!("Tansu {TANSU_VERSION} ({}) at {address}", binary.display());
            Ok((Some(Running::Tansu(broker)), address, name))
        }
    }
}

/// Appends the demo's entries: regions drawn by a Zipf law, in write
/// requests of 1 to 8 entries of one region. Region-pure: each request
/// is flushed as its own batch (GreptimeDB's layout). Interleaved: the
/// writer batches requests of many regions together.
async fn write_wal(
    cluster: &Arc<Cluster>,
    topic: &str,
    args: &Args,
) -> anyhow::Result<(Written, WalIndex)> {
    let mut config = WriterConfig::new(topic, 0);
    config.compression = args.compression;
    (config.max_batch_bytes, config.mode) = match args.layout {
        // GreptimeDB's default cap; each request is flushed on its own.
        Layout::RegionPure => (1 << 20, WriterMode::Clustered),
        Layout::Interleaved => (64 << 10, WriterMode::Interleaved),
    };
    let writer = WalWriter::new(Arc::clone(cluster), config);
    let cdf = zipf_cdf(args.regions);
    // Seeded: the same arguments write the same WAL.
    let mut rng = StdRng::seed_from_u64(0x5eed_0fa1_fe7c_4a11 ^ args.regions);
    let mut pending = Vec::with_capacity(args.entries);
    let mut request_left = 0usize;
    let mut region: RegionId = 0;
    for n in 0..args.entries {
        if request_left == 0 {
            if args.layout == Layout::RegionPure && n > 0 {
                writer.flush().await?;
            }
            let u = rng.random::<f64>();
            region = cdf.partition_point(|&c| c < u).min(cdf.len() - 1) as RegionId;
            request_left = rng.random_range(1..=8);
        }
        request_left -= 1;
        let size = entry_size(&mut rng);
        let mut payload = format!("{{\"region\":{region},\"seq\":{n},\"rows\":\"").into_bytes();
        // Random letters of a 16-letter alphabet: about 2:1 under lz4,
        // like text.
        payload.extend((0..size).map(|_| b'a' + rng.random_range(0..16u8)));
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
