//! Writer benchmark: the WAL writer's throughput and append latency in
//! each mode, and what its layouts cost a replay, in one run.
//!
//! The entries are the replay bench's workload (`replay/workload.rs`: R
//! regions with Zipf-skewed activity, entry sizes mostly 200 B – 4 KiB with
//! a tail to 256 KiB, Poisson arrivals at `rate`), appended to a fresh
//! topic by one [`walfetch::writer::WalWriter`] per configuration:
//!
//! - mode: interleaved or clustered;
//! - requests in flight: 1 or 5 (idempotent producer in both);
//! - pace: at the workload's arrival times (the replay bench's rate) or
//!   flat out (every entry appended as soon as `append` takes it).
//!
//! Each run reports entries/s and MB/s of payload (from the first append to
//! the last acknowledgement) and the append latency p50/p99 (from the call
//! to `append` to the entry's offset). Flat out, each configuration runs
//! eleven rounds and its row is the median by throughput; at the rate,
//! three runs and the median by p99 on the scripted broker (one on Tansu,
//! whose log cannot be trimmed between runs). The round trip of the link is
//! measured in the same run (`walfetch::calibrate::measure_link`).
//!
//! Beside them, GreptimeDB's producer as its Kafka log store runs it (a
//! request a region write, one after another, on rskafka 0.6:
//! `writer/greptime.rs`) writes the first tenth of the same entries, once
//! flat out and once at the rate.
//!
//! Then the replay cost of the hot, a median and a cold region on three
//! layouts — the interleaved writer's and the clustered writer's (5 in
//! flight, at the workload's rate), and the replay bench's region-pure
//! layout (GreptimeDB's: one batch per region write request, flushed one by
//! one) — replayed from the replay bench's checkpoint with the writer's
//! hints and a complete index, by the replay bench's own machinery
//! (`replay/contenders.rs`, `replay/floor.rs`): `×own` is the bytes the
//! proxy carried to the consumer over the region's own record bytes.
//! Every replay is checked against the written entries.
//!
//! Everything goes through the replay bench's byte-counting proxy, in
//! front of the in-process scripted broker (Kafka's rules) and, with
//! `--broker tansu|both`, Tansu 0.6.
//!
//! ```text
//! cargo bench --bench writer              # full: 20000 entries, 64 regions, a few minutes on 2 cores
//! cargo bench --bench writer -- --quick   # smoke: seconds
//! cargo bench --bench writer -- --help
//! ```
//!
//! Run without `--bench` (as `cargo test --benches` does), it runs the
//! quick profile.

#[path = "writer/greptime.rs"]
mod greptime;

// Shared with the replay bench; each bench uses part of them.
#[allow(dead_code)]
#[path = "replay/contenders.rs"]
mod contenders;
#[allow(dead_code)]
#[path = "replay/floor.rs"]
mod floor;
#[path = "replay/harness.rs"]
mod harness;
#[allow(dead_code)]
#[path = "replay/proxy.rs"]
mod proxy;
#[allow(dead_code)]
#[path = "replay/report.rs"]
mod report;
#[allow(dead_code)]
#[path = "replay/workload.rs"]
mod workload;

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::future::Future;
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::stream::FuturesUnordered;
use futures::StreamExt;
use rskafka::client::partition::{OffsetAt, UnknownTopicHandling};
use tokio::sync::mpsc;
use walfetch::calibrate::measure_link;
use walfetch::cluster::{Cluster, ClusterConfig, FetchParams, NewTopic};
use walfetch::codec::Compression;
use walfetch::index::{IndexEntry, WalIndex};
use walfetch::plan::PlanConfig;
use walfetch::writer::{WalEntry, WalWriter, WriterConfig, WriterMode};

use contenders::{Clients, Contender};
use greptime::GreptimeProducer;
use harness::{BrokerKind, Listener, Running};
use proxy::Proxy;
use report::Row;
use workload::{Arrival, WorkloadSpec, Written, WrittenEntry};

const USAGE: &str = "\
writer benchmark: interleaved vs clustered, 1 vs 5 in flight, paced vs flat out; replay cost per layout

usage: cargo bench --bench writer -- [options]

  --quick              small workload, one replay run (seconds)
  --broker B           comma-separated: scripted, kafka, tansu; or all
                       (default scripted)
  --regions N          regions sharing the partition (default 64; quick 16)
  --entries N          entries per run (default 20000; quick 1500)
  --rate N             entries per second when paced (default 5000, the replay bench's)
  --linger-ms N        writer linger (default 5)
  --batch-kib N        writer batch size cap (default 256)
  --compression C      none | lz4 | zstd (default lz4)
  --checkpoint F       replay from this fraction of the log (default 0.25)
  --runs N             measured replay runs per region (default 3; quick 1)
  --seed N             workload seed (default 42)
  --security P         PLAINTEXT (default), SSL or SASL_SSL (TLS, then
                       SCRAM-SHA-512), as librdkafka's security.protocol;
                       not PLAINTEXT: the scripted broker only
";

#[derive(Debug, Clone)]
struct Args {
    quick: bool,
    brokers: Vec<BrokerKind>,
    regions: u64,
    entries: usize,
    rate: f64,
    linger: Duration,
    batch_bytes: usize,
    compression: Compression,
    checkpoint: f64,
    runs: usize,
    seed: u64,
    /// How clients reach the broker (`--security`).
    listener: Listener,
}

impl Args {
    fn parse(args: impl IntoIterator<Item = String>) -> Result<Option<Self>, String> {
        let args: Vec<String> = args.into_iter().collect();
        let quick = args.iter().any(|a| a == "--quick") || !args.iter().any(|a| a == "--bench");
        let mut out = Self {
            quick,
            brokers: vec![BrokerKind::Scripted],
            regions: if quick { 16 } else { 64 },
            entries: if quick { 1_500 } else { 20_000 },
            rate: 5_000.0,
            linger: Duration::from_millis(5),
            batch_bytes: 256 << 10,
            compression: Compression::Lz4,
            checkpoint: 0.25,
            runs: if quick { 1 } else { 3 },
            seed: 42,
            listener: Listener::Plaintext,
        };
        let mut it = args.into_iter();
        while let Some(arg) = it.next() {
            let mut value = |name: &str| {
                it.next()
                    .ok_or_else(|| format!("{name} needs a value\n\n{USAGE}"))
            };
            fn num<T: std::str::FromStr>(name: &str, v: String) -> Result<T, String> {
                v.parse()
                    .map_err(|_| format!("{name}: cannot read {v:?}\n\n{USAGE}"))
            }
            match arg.as_str() {
                "--bench" | "--quick" => {}
                "--help" | "-h" => return Ok(None),
                "--broker" => {
                    out.brokers = BrokerKind::parse_list(&value("--broker")?)
                        .map_err(|e| format!("{e}\n\n{USAGE}"))?;
                }
                "--regions" => out.regions = num("--regions", value("--regions")?)?,
                "--entries" => out.entries = num("--entries", value("--entries")?)?,
                "--rate" => out.rate = num("--rate", value("--rate")?)?,
                "--linger-ms" => {
                    out.linger = Duration::from_millis(num("--linger-ms", value("--linger-ms")?)?)
                }
                "--batch-kib" => {
                    out.batch_bytes = num::<usize>("--batch-kib", value("--batch-kib")?)? << 10
                }
                "--compression" => {
                    out.compression = match value("--compression")?.as_str() {
                        "none" => Compression::None,
                        "lz4" => Compression::Lz4,
                        "zstd" => Compression::Zstd,
                        other => return Err(format!("--compression: unknown {other:?}")),
                    }
                }
                "--checkpoint" => out.checkpoint = num("--checkpoint", value("--checkpoint")?)?,
                "--runs" => out.runs = num("--runs", value("--runs")?)?,
                "--seed" => out.seed = num("--seed", value("--seed")?)?,
                "--security" => {
                    let name = value("--security")?;
                    out.listener = Listener::parse(&name)
                        .ok_or_else(|| format!("--security: unknown {name:?}\n\n{USAGE}"))?;
                }
                flag if flag.starts_with('-') => {
                    return Err(format!("unknown option {flag:?}\n\n{USAGE}"))
                }
                free => eprintln!("note: ignoring the argument {free:?} (no filters here)"),
            }
        }
        if out.regions == 0 || out.entries == 0 || out.runs == 0 || out.rate <= 0.0 {
            return Err(format!(
                "--regions, --entries, --runs and --rate must be positive\n\n{USAGE}"
            ));
        }
        if !(0.0..1.0).contains(&out.checkpoint) {
            return Err(format!("--checkpoint must be in [0, 1)\n\n{USAGE}"));
        }
        harness::check_listener(out.listener, &out.brokers)
            .map_err(|e| format!("{e}\n\n{USAGE}"))?;
        Ok(Some(out))
    }

    /// The replay bench's workload with these settings; `region_pure` as
    /// its `-pure` workloads (1 MiB batches, GreptimeDB's cap).
    fn spec(&self, region_pure: bool) -> WorkloadSpec {
        WorkloadSpec {
            name: format!(
                "{}-1w{}",
                self.compression.name(),
                if region_pure { "-pure" } else { "" }
            ),
            regions: self.regions,
            zipf: 1.0,
            entries: self.entries,
            rate: self.rate,
            linger: self.linger,
            max_batch_bytes: if region_pure {
                1 << 20
            } else {
                self.batch_bytes
            },
            writers: 1,
            compression: self.compression,
            region_pure,
            seed: self.seed,
        }
    }
}

/// One writer configuration's run.
#[derive(Debug, Clone, serde::Serialize)]
struct WriteRow {
    broker: String,
    mode: String,
    in_flight: usize,
    /// `rate` (the workload's arrival times) or `flat out`.
    pace: String,
    entries: usize,
    batches: usize,
    seconds: f64,
    entries_per_s: f64,
    mb_per_s: f64,
    p50_ms: f64,
    p99_ms: f64,
    max_ms: f64,
    /// CPU time this process used from the first append to the last
    /// acknowledgement: the writer, the bench's appender, the proxy and,
    /// on the scripted broker, the broker ([`harness::cpu_time`]).
    cpu_ms: Option<f64>,
    /// Runs of this configuration; the row is the median by throughput
    /// (flat out) or by append p99 (at the rate).
    runs: usize,
    /// Each run's entries/s, in the order the rounds ran.
    round_entries_per_s: Vec<f64>,
    /// Each run's append p99, in the order the rounds ran.
    round_p99_ms: Vec<f64>,
}

/// One layout's replay of one region.
#[derive(Debug, Clone, serde::Serialize)]
struct ReplayRow {
    broker: String,
    layout: String,
    batches: usize,
    row: Row,
}

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(why) => {
            eprintln!("\nwriter bench FAILED: {why}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<ExitCode, String> {
    let Some(args) = Args::parse(std::env::args().skip(1))? else {
        print!("{USAGE}");
        return Ok(ExitCode::SUCCESS);
    };
    let started = Instant::now();
    let infra = harness::runtime("broker")?;
    let clients = harness::runtime("client")?;
    eprintln!(
        "writer bench, {} profile: {} regions, {} entries per run, rate {}/s",
        if args.quick { "quick" } else { "full" },
        args.regions,
        args.entries,
        args.rate
    );
    let mut writes = Vec::new();
    let mut replays = Vec::new();
    let mut round_trips = BTreeMap::new();
    for &broker in &args.brokers {
        // The broker is kept alive until its figures are in.
        let running = harness::start(broker, &infra, &clients, Duration::ZERO, args.listener)?;
        let result = clients.block_on(bench_broker(broker, &running, &args));
        drop(running);
        let (w, r, rt) = result?;
        writes.extend(w);
        replays.extend(r);
        round_trips.insert(broker.name().to_owned(), rt);
    }
    let md = markdown(&args, &writes, &replays, &round_trips, started.elapsed());
    println!("{md}");
    let dir = harness::out_dir("writer-bench");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let json = serde_json::json!({
        "profile": if args.quick { "quick" } else { "full" },
        "writes": writes,
        "replays": replays,
        "round_trip_us": round_trips.iter().map(|(b, rt)| (b.clone(), rt.as_micros() as u64)).collect::<BTreeMap<_, _>>(),
        "seconds": started.elapsed().as_secs_f64(),
    });
    for (name, text) in [
        ("report.md", md),
        (
            "report.json",
            serde_json::to_string_pretty(&json).map_err(|e| e.to_string())?,
        ),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    eprintln!(
        "wrote {0}/report.md and {0}/report.json in {1:.0} s",
        dir.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(ExitCode::SUCCESS)
}

/// What one writer run wrote, and its figures.
struct WriteRun {
    written: Written,
    row: WriteRow,
}

/// The record headers the writer wrote for an entry: the checksum header,
/// then the entry's own.
fn quantile(sorted: &[Duration], q: f64) -> f64 {
    let i = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len().max(1)) - 1;
    sorted.get(i).map_or(0.0, |d| d.as_secs_f64() * 1e3)
}

/// A run's writer: walfetch's in a mode with so many requests in flight,
/// or GreptimeDB's producer on rskafka (`greptime.rs`).
#[derive(Debug, Clone, Copy)]
enum Config {
    Walfetch(WriterMode, usize),
    Greptime,
}

/// The mode column of GreptimeDB's producer.
const GREPTIME_MODE: &str = "GreptimeDB's producer (rskafka 0.6)";

impl Config {
    fn name(self) -> &'static str {
        match self {
            Config::Walfetch(mode, _) => mode.name(),
            Config::Greptime => GREPTIME_MODE,
        }
    }

    fn in_flight(self) -> usize {
        match self {
            Config::Walfetch(_, in_flight) => in_flight,
            Config::Greptime => 1,
        }
    }
}

/// A running writer of a run.
enum Producer {
    Walfetch(WalWriter),
    Greptime(GreptimeProducer),
}

/// An appended entry's offset to come.
type Pending = Pin<Box<dyn Future<Output = Result<i64, String>> + Send>>;

impl Producer {
    /// Starts `config`'s writer on `topic`.
    async fn start(
        config: Config,
        (cluster, rskafka): (&Arc<Cluster>, &rskafka::client::Client),
        args: &Args,
        topic: &str,
    ) -> Result<Self, String> {
        Ok(match config {
            Config::Walfetch(mode, in_flight) => Producer::Walfetch(WalWriter::new(
                Arc::clone(cluster),
                WriterConfig::new(topic.to_owned(), 0)
                    .with_mode(mode)
                    .with_max_in_flight(in_flight)
                    .with_compression(args.compression)
                    .with_max_batch_bytes(args.batch_bytes)
                    .with_linger(args.linger),
            )),
            Config::Greptime => {
                let client = rskafka
                    .partition_client(topic.to_owned(), 0, UnknownTopicHandling::Retry)
                    .await
                    .map_err(|e| format!("{topic}: rskafka partition client: {e}"))?;
                // Warmed up, as a running database's client is: the
                // partition's leader known, its connection open.
                client
                    .get_offset(OffsetAt::Latest)
                    .await
                    .map_err(|e| format!("{topic}: rskafka warm-up: {e}"))?;
                Producer::Greptime(GreptimeProducer::new(Arc::new(client), args.compression))
            }
        })
    }

    async fn append(&self, entry: WalEntry) -> Result<Pending, String> {
        Ok(match self {
            Producer::Walfetch(writer) => {
                let appended = writer.append(entry).await.map_err(|e| e.to_string())?;
                Box::pin(async move { appended.await.map_err(|e| e.to_string()) })
            }
            Producer::Greptime(producer) => {
                let answer = producer.produce(entry).await?;
                Box::pin(async move {
                    answer
                        .await
                        .map_err(|_| "the request was dropped".to_owned())?
                })
            }
        })
    }

    /// Flat out, the last entries go when they are appended rather than
    /// after a linger, as a producer's benchmark flushes (or closes) it
    /// after its last send: the linger would otherwise end every run.
    /// GreptimeDB's producer has no linger.
    async fn flush(&self) -> Result<(), String> {
        match self {
            Producer::Walfetch(writer) => writer.flush().await.map_err(|e| e.to_string()),
            Producer::Greptime(_) => Ok(()),
        }
    }

    /// Stops the writer; the index of what it wrote (GreptimeDB's: the
    /// offsets of `entries`, sorted by offset, no hints).
    async fn close(self, entries: &[WrittenEntry]) -> Result<WalIndex, String> {
        match self {
            Producer::Walfetch(writer) => writer.close().await.map_err(|e| e.to_string()),
            Producer::Greptime(producer) => {
                producer.close().await?;
                let mut index = WalIndex::new();
                for e in entries {
                    let entry = IndexEntry {
                        offset: e.offset,
                        hint: None,
                    };
                    index.push(e.region, entry).map_err(|e| e.to_string())?;
                }
                if let Some(last) = entries.last() {
                    index.set_last_index(last.offset);
                }
                Ok(index)
            }
        }
    }
}

/// Appends `arrivals` to `topic` with `producer`, `config`'s writer, at
/// their arrival times when `paced`, and measures it.
async fn write_run(
    (cluster, broker): (&Arc<Cluster>, &str),
    arrivals: &[Arrival],
    (producer, config): (Producer, Config),
    topic: &str,
    paced: bool,
) -> Result<WriteRun, String> {
    let writer = producer;
    // Acknowledgements are collected as they come, whatever their order.
    let (tx, mut rx) = mpsc::unbounded_channel::<(usize, Instant, Pending)>();
    let n = arrivals.len();
    let collector = tokio::spawn(async move {
        let mut pending = FuturesUnordered::new();
        let mut out: Vec<Option<(Result<i64, String>, Duration)>> = vec![None; n];
        let mut open = true;
        loop {
            tokio::select! {
                next = rx.recv(), if open => match next {
                    Some((i, at, appended)) => pending.push(async move {
                        let r = appended.await;
                        (i, r, at.elapsed())
                    }),
                    None => open = false,
                },
                Some((i, r, latency)) = pending.next(), if !pending.is_empty() => {
                    out[i] = Some((r, latency));
                }
                else => break,
            }
        }
        (out, Instant::now())
    });
    let cpu_before = harness::cpu_time();
    let start = Instant::now();
    for (i, a) in arrivals.iter().enumerate() {
        if paced {
            tokio::time::sleep_until((start + Duration::from_micros(a.at_micros)).into()).await;
        }
        let at = Instant::now();
        let appended = writer
            .append(a.entry.clone())
            .await
            .map_err(|e| format!("{topic}: append: {e}"))?;
        tx.send((i, at, appended))
            .map_err(|_| format!("{topic}: the collector stopped"))?;
    }
    drop(tx);
    if !paced {
        writer
            .flush()
            .await
            .map_err(|e| format!("{topic}: flush: {e}"))?;
    }
    let (acks, last_ack) = collector
        .await
        .map_err(|e| format!("{topic}: collector: {e}"))?;
    let seconds = (last_ack - start).as_secs_f64();
    let cpu_ms = harness::cpu_time()
        .zip(cpu_before)
        .map(|(after, before)| after.saturating_sub(before).as_secs_f64() * 1e3);
    let checksums = matches!(config, Config::Walfetch(..));
    let mut latencies = Vec::with_capacity(n);
    let mut entries = Vec::with_capacity(n);
    for (a, ack) in arrivals.iter().zip(acks) {
        let (offset, latency) = ack.ok_or_else(|| format!("{topic}: an entry was not answered"))?;
        let offset = offset.map_err(|e| format!("{topic}: an entry was not written: {e}"))?;
        latencies.push(latency);
        entries.push(WrittenEntry {
            offset,
            region: a.entry.region,
            payload: a.entry.payload.clone(),
            headers: workload::written_headers(&a.entry, checksums),
        });
    }
    latencies.sort_unstable();
    entries.sort_by_key(|e| e.offset);
    let index = writer
        .close(&entries)
        .await
        .map_err(|e| format!("{topic}: close: {e}"))?;
    let end = entries.last().map_or(0, |e| e.offset + 1);
    let layout = floor::scan(cluster, topic, 0, end).await?;
    let payload: usize = entries.iter().map(|e| e.payload.len()).sum();
    let p99 = quantile(&latencies, 0.99);
    let row = WriteRow {
        broker: broker.to_owned(),
        mode: config.name().to_owned(),
        in_flight: config.in_flight(),
        pace: if paced { "rate" } else { "flat out" }.to_owned(),
        entries: n,
        batches: layout.batches.len(),
        seconds,
        entries_per_s: n as f64 / seconds,
        mb_per_s: payload as f64 / seconds / 1e6,
        p50_ms: quantile(&latencies, 0.5),
        p99_ms: p99,
        max_ms: quantile(&latencies, 1.0),
        cpu_ms,
        runs: 1,
        round_entries_per_s: vec![n as f64 / seconds],
        round_p99_ms: vec![p99],
    };
    eprintln!(
        "  {broker} {:<11} {} in flight {:<8}: {:>7.0} entries/s {:>6.1} MB/s, p50 {:.2} ms p99 {:.2} ms, {} batches",
        row.mode, row.in_flight, row.pace, row.entries_per_s, row.mb_per_s, row.p50_ms, row.p99_ms, row.batches
    );
    Ok(WriteRun {
        written: Written {
            entries,
            index,
            end,
            batches: layout.batches.len(),
        },
        row,
    })
}

async fn create(cluster: &Cluster, topic: &str) -> Result<(), String> {
    cluster
        .create_topics(&[NewTopic::new(topic, 1)])
        .await
        .map_err(|e| format!("create {topic}: {e}"))
}

/// The hot, median and cold regions of `written` replayed with hints and a
/// complete index.
async fn replay_costs(
    broker: &str,
    layout_name: &str,
    cluster: &Arc<Cluster>,
    proxy: &Proxy,
    topic: &str,
    written: &Written,
    args: &Args,
) -> Result<Vec<ReplayRow>, String> {
    let layout = floor::scan(cluster, topic, 0, written.end).await?;
    cluster
        .fetch(&FetchParams::new(topic, 0, 0).with_max_bytes(1))
        .await
        .map_err(|e| format!("{broker}: warm-up fetch: {e}"))?;
    let clients = Clients {
        walfetch: Arc::clone(cluster),
        rskafka: HashMap::new(),
        plan: PlanConfig::default(),
    };
    let mut out = Vec::new();
    for scenario in contenders::scenarios(topic, written, args.checkpoint)? {
        if scenario.index_mode != "complete" {
            continue;
        }
        let floor = floor::floor(
            &layout,
            scenario.region,
            scenario.range.clone(),
            scenario.indexed_end(),
        )?;
        for contender in [Contender::Hints, Contender::HintsFewestBytes] {
            let mut runs = Vec::new();
            for run in 0..args.runs + usize::from(!args.quick) {
                let result = contenders::run(contender, &clients, proxy, &scenario)
                    .await
                    .map_err(|e| {
                        format!(
                            "{broker} {layout_name} {} region {} {}: {e}",
                            scenario.class,
                            scenario.region,
                            contender.name()
                        )
                    })?;
                // A first, unmeasured run warms caches (not when quick).
                if run > 0 || args.quick {
                    runs.push(result);
                }
            }
            let row = Row::new(broker, layout_name, &scenario, contender, floor, &runs);
            eprintln!(
                "  {broker} {layout_name:<38} {:<6} region {:>3} {:<28}: {:.3}x own, {} fetches, {} round trips",
                row.class, row.region, row.contender, row.amp_own, row.fetches, row.round_trips
            );
            out.push(ReplayRow {
                broker: broker.to_owned(),
                layout: layout_name.to_owned(),
                batches: layout.batches.len(),
                row,
            });
        }
    }
    Ok(out)
}

const INTERLEAVED_LAYOUT: &str = "interleaved writer (5 in flight)";
const CLUSTERED_LAYOUT: &str = "clustered writer (5 in flight)";
const PURE_LAYOUT: &str = "region-pure (replay bench lz4-1w-pure)";

/// Every writer run and replay on one broker, reached through `running`'s
/// proxy with its security; its round trip.
async fn bench_broker(
    broker: BrokerKind,
    running: &Running,
    args: &Args,
) -> Result<(Vec<WriteRow>, Vec<ReplayRow>, Duration), String> {
    let name = broker.name();
    let (proxy, scripted) = (&running.proxy, running.scripted());
    let mut config = ClusterConfig::new([proxy.addr().to_string()]);
    config.connection.request_timeout = Duration::from_secs(30);
    config.connection.security = running.security.clone();
    let cluster = Arc::new(
        Cluster::connect(config)
            .await
            .map_err(|e| format!("{name}: connect through the proxy: {e}"))?,
    );
    let rskafka = running
        .rskafka_client()?
        .build()
        .await
        .map_err(|e| format!("{name}: rskafka: {e}"))?;
    let spec = args.spec(false);
    let arrivals = workload::arrivals(&spec);
    let mut writes = Vec::new();
    let mut replays = Vec::new();
    let mut layouts: Vec<(&str, String, Written)> = Vec::new();
    for paced in [true, false] {
        // Flat-out runs are short (a tenth of a second or two) and vary
        // by a fifth from run to run: the median of eleven (of one when
        // quick) by throughput, the configurations taking turns so that a
        // change in the machine's load falls on all of them alike, and
        // the modes compared round by round (`Targets`). A paced run's
        // p99 is its 1 % slowest appends, which one pause of the machine
        // can fill: the median of three by p99, where the runs not
        // replayed can be dropped. On Tansu they cannot (walfetch has no
        // DeleteTopics), and Tansu slows down as its in-memory log grows:
        // with three paced runs a configuration, the flat-out runs after
        // them went at half the rate. One paced run each there.
        let reps = match (args.quick, paced, scripted.is_some()) {
            (true, _, _) => 1,
            (false, true, true) => 3,
            (false, true, false) => 1,
            (false, false, _) => 11,
        };
        let configs: Vec<Config> = [WriterMode::Interleaved, WriterMode::Clustered]
            .into_iter()
            .flat_map(|mode| [1, 5].map(|in_flight| Config::Walfetch(mode, in_flight)))
            .chain([Config::Greptime])
            .collect();
        let mut runs: Vec<Vec<(String, WriteRun)>> = configs.iter().map(|_| Vec::new()).collect();
        for rep in 0..reps {
            for (&config, runs) in configs.iter().zip(&mut runs) {
                // GreptimeDB's producer sends a request an entry, one at
                // a time, and falls behind the rate: one run of the first
                // tenth of the entries.
                let arrivals = match config {
                    Config::Greptime if rep > 0 => continue,
                    Config::Greptime => &arrivals[..arrivals.len().div_ceil(10)],
                    Config::Walfetch(..) => &arrivals[..],
                };
                let topic = format!(
                    "w-{}-{}-{}-{rep}",
                    match config {
                        Config::Walfetch(mode, _) => mode.name(),
                        Config::Greptime => "greptimedb",
                    },
                    config.in_flight(),
                    if paced { "rate" } else { "flat" }
                );
                create(&cluster, &topic).await?;
                let producer = Producer::start(config, (&cluster, &rskafka), args, &topic).await?;
                let run = write_run(
                    (&cluster, name),
                    arrivals,
                    (producer, config),
                    &topic,
                    paced,
                )
                .await?;
                // A flat-out run's log is not replayed: the in-process
                // broker drops it, or every run would find the broker
                // holding all the runs before it, and run slower.
                if let Some(broker) = scripted.filter(|_| !paced) {
                    broker
                        .advance_log_start(&topic, 0, run.written.end)
                        .map_err(|e| format!("{name}: drop {topic}: {e}"))?;
                }
                runs.push((topic, run));
            }
        }
        for (&config, mut runs) in configs.iter().zip(runs) {
            let rounds: Vec<f64> = runs.iter().map(|(_, r)| r.row.entries_per_s).collect();
            let p99s: Vec<f64> = runs.iter().map(|(_, r)| r.row.p99_ms).collect();
            let key = |r: &WriteRun| match paced {
                true => r.row.p99_ms,
                false => r.row.entries_per_s,
            };
            runs.sort_by(|a, b| key(&a.1).total_cmp(&key(&b.1)));
            let (topic, mut run) = runs.swap_remove(runs.len() / 2);
            run.row.runs = runs.len() + 1;
            run.row.round_entries_per_s = rounds;
            run.row.round_p99_ms = p99s;
            // The other paced runs are not replayed either.
            if let Some(broker) = scripted.filter(|_| paced) {
                for (topic, other) in &runs {
                    broker
                        .advance_log_start(topic, 0, other.written.end)
                        .map_err(|e| format!("{name}: drop {topic}: {e}"))?;
                }
            }
            writes.push(run.row);
            let layout = match config {
                Config::Walfetch(WriterMode::Clustered, 5) => Some(CLUSTERED_LAYOUT),
                Config::Walfetch(WriterMode::Interleaved, 5) => Some(INTERLEAVED_LAYOUT),
                _ => None,
            };
            if let Some(layout) = layout.filter(|_| paced) {
                layouts.push((layout, topic, run.written));
            }
        }
    }
    let link = measure_link(&cluster, &layouts[0].1, 0, 20)
        .await
        .map_err(|e| format!("{name}: measuring the link: {e}"))?;
    eprintln!(
        "  {name}: round trip {} µs (median of {})",
        link.round_trip.as_micros(),
        link.samples
    );
    // The replay bench's region-pure layout, written as it writes it.
    let pure = args.spec(true);
    let topic = format!("w-{}", pure.name);
    create(&cluster, &topic).await?;
    let planned = workload::generate(&pure);
    let written = workload::write(&cluster, &topic, &pure, &planned).await?;
    layouts.push((PURE_LAYOUT, topic, written));
    for (layout, topic, written) in &layouts {
        replays.extend(replay_costs(name, layout, &cluster, proxy, topic, written, args).await?);
    }
    Ok((writes, replays, link.round_trip))
}

/// ` (median of N <what>, lowest–highest<unit>)` for two or more values
/// sorted; nothing for fewer.
fn spread(sorted: &[f64], what: &str, unit: &str) -> String {
    match sorted {
        [] | [_] => String::new(),
        [lo, .., hi] => format!(
            " (median of {} {what}, {lo:.2}–{hi:.2}{unit})",
            sorted.len()
        ),
    }
}

fn markdown(
    args: &Args,
    writes: &[WriteRow],
    replays: &[ReplayRow],
    round_trips: &BTreeMap<String, Duration>,
    elapsed: Duration,
) -> String {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "## Writer benchmark\n\n`cargo bench --bench writer{}{}` — the replay bench's workload: {} regions (Zipf 1), {} entries per run, {} compression, linger {:?}, batch cap {} KiB, paced runs at {}/s, seed {}; replays from {:.0} % of the log with hints and a complete index, median of {} run(s); idempotent producer throughout; {:.0} s in all.\n",
        if args.quick { " -- --quick" } else { "" },
        match args.listener {
            Listener::Plaintext => String::new(),
            l => format!(" (over {})", l.name()),
        },
        args.regions,
        args.entries,
        args.compression.name(),
        args.linger,
        args.batch_bytes >> 10,
        args.rate,
        args.seed,
        args.checkpoint * 100.0,
        args.runs,
        elapsed.as_secs_f64()
    );
    for (broker, rt) in round_trips {
        let _ = writeln!(
            md,
            "{broker}: round trip through the proxy {} µs (median of 20 fetches, same run).\n",
            rt.as_micros()
        );
    }
    md.push_str("### Writing\n\nFlat-out rows: the median of their runs by throughput; rows at the rate: the median of their runs by append p99. `CPU ms`: CPU time this process used from the first append to the last acknowledgement (the writer, the bench's appender, the proxy and, on the scripted broker's rows, the broker; Tansu runs in its own process).\n\n| broker | mode | in flight | pace | entries/s | MB/s | append p50 | append p99 | max | batches | CPU ms | runs |\n|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for w in writes {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {:.0} | {:.1} | {:.2} ms | {:.2} ms | {:.1} ms | {} | {} | {} |",
            w.broker,
            w.mode,
            w.in_flight,
            w.pace,
            w.entries_per_s,
            w.mb_per_s,
            w.p50_ms,
            w.p99_ms,
            w.max_ms,
            w.batches,
            w.cpu_ms.map_or("–".to_owned(), |cpu| format!("{cpu:.0}")),
            w.runs
        );
    }
    md.push_str("\n### Side by side with GreptimeDB's producer (same run)\n\nGreptimeDB's Kafka log store as it runs today (`greptime.rs`: a request a region write, produced one after another, no linger) on stock rskafka 0.6 from crates.io, against walfetch's clustered writer, 5 in flight, on the same workload and broker. GreptimeDB's producer writes the first tenth of the entries, once (it falls behind the rate). rskafka 0.6 sets no `TCP_NODELAY`: a request larger than its 8 KiB write buffer goes out in two writes, and the second waits for the broker's delayed acknowledgement (about 40 ms on Linux); GreptimeDB builds on its own fork of rskafka, not checked here.\n\n| broker | pace | walfetch clustered, 5 in flight | GreptimeDB's producer | walfetch ÷ GreptimeDB |\n|---|---|---|---|---|\n");
    for broker in round_trips.keys() {
        let find = |mode: &str, in_flight: usize, pace: &str| {
            writes.iter().find(|w| {
                &w.broker == broker && w.mode == mode && w.in_flight == in_flight && w.pace == pace
            })
        };
        if let (Some(w), Some(g)) = (
            find("clustered", 5, "flat out"),
            find(GREPTIME_MODE, 1, "flat out"),
        ) {
            let _ = writeln!(
                md,
                "| {broker} | flat out | {:.0} entries/s, {} batches | {:.0} entries/s, {} batches ({} entries) | {:.1}× the entries/s |",
                w.entries_per_s,
                w.batches,
                g.entries_per_s,
                g.batches,
                g.entries,
                w.entries_per_s / g.entries_per_s
            );
        }
        if let (Some(w), Some(g)) = (find("clustered", 5, "rate"), find(GREPTIME_MODE, 1, "rate")) {
            let _ = writeln!(
                md,
                "| {broker} | rate | append p50 {:.2} ms, p99 {:.2} ms, {} batches | append p50 {:.2} ms, p99 {:.2} ms, {} batches ({} entries) | {:.3}× the p99 |",
                w.p50_ms,
                w.p99_ms,
                w.batches,
                g.p50_ms,
                g.p99_ms,
                g.batches,
                g.entries,
                w.p99_ms / g.p99_ms
            );
        }
    }
    md.push_str("\n### Replay cost of each layout (walfetch with the writer's hints, complete index)\n\n`walfetch hints` plans with the library's default cost model (it may read other regions' batches to save a fetch); `fewest bytes` plans with a per-fetch cost of zero (runs never merge).\n\n| broker | layout | batches | region | plan | entries | own bytes | wire bytes | ×own | ×floor | fetches | round trips |\n|---|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for r in replays {
        let row = &r.row;
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} ({}) | {} | {} | {} | {} | {:.3} | {:.3} | {} | {} |",
            r.broker,
            r.layout,
            r.batches,
            row.class,
            row.region,
            row.contender.trim_start_matches("walfetch hints, "),
            row.entries,
            report::bytes(row.floor.region_record_bytes),
            report::bytes(row.wire_bytes),
            row.amp_own,
            row.amp_floor,
            row.fetches,
            row.round_trips
        );
    }
    md.push_str(
        "\n### Targets (same run)\n\n| broker | target | measured | met |\n|---|---|---|---|\n",
    );
    let yes = |ok: bool| if ok { "yes" } else { "**no**" };
    for (broker, rt) in round_trips {
        let find = |mode: &str, in_flight: usize, pace: &str| {
            writes.iter().find(|w| {
                &w.broker == broker && w.mode == mode && w.in_flight == in_flight && w.pace == pace
            })
        };
        for in_flight in [5, 1] {
            if let (Some(c), Some(i)) = (
                find("clustered", in_flight, "flat out"),
                find("interleaved", in_flight, "flat out"),
            ) {
                // Each round's clustered run over its interleaved run:
                // a round's runs follow one another, so a change in the
                // machine's load between rounds cancels out.
                let mut ratios: Vec<f64> = c
                    .round_entries_per_s
                    .iter()
                    .zip(&i.round_entries_per_s)
                    .map(|(c, i)| c / i)
                    .collect();
                ratios.sort_by(f64::total_cmp);
                let ratio = ratios.get(ratios.len() / 2).copied().unwrap_or(f64::NAN);
                let spread = spread(&ratios, "rounds", "");
                // What each took of this process's CPU, and in how many
                // Produce requests (one per batch).
                let cost = match (c.cpu_ms, i.cpu_ms) {
                    (Some(cc), Some(ic)) => format!(
                        "; {} vs {} batches, {cc:.0} vs {ic:.0} ms CPU",
                        c.batches, i.batches
                    ),
                    _ => format!("; {} vs {} batches", c.batches, i.batches),
                };
                let _ = writeln!(
                    md,
                    "| {broker} | clustered writes ≥ interleaved's throughput (flat out, {in_flight} in flight) | {:.0} vs {:.0} entries/s; each round: {ratio:.2}×{spread}{cost} | {} |",
                    c.entries_per_s,
                    i.entries_per_s,
                    yes(ratio >= 1.0)
                );
            }
        }
        for pure in [CLUSTERED_LAYOUT, PURE_LAYOUT] {
            for r in replays
                .iter()
                .filter(|r| &r.broker == broker && r.layout == pure && r.row.class == "median")
            {
                let _ = writeln!(
                    md,
                    "| {broker} | median region, {}: ≤ 1.1× own on the {pure} layout | {:.3}× own | {} |",
                    r.row.contender,
                    r.row.amp_own,
                    yes(r.row.amp_own <= 1.1)
                );
            }
        }
        let bound = args.linger + 2 * *rt;
        for mode in ["clustered", "interleaved"] {
            for in_flight in [5, 1] {
                if let Some(w) = find(mode, in_flight, "rate") {
                    let bound_ms = bound.as_secs_f64() * 1e3;
                    let mut p99s = w.round_p99_ms.clone();
                    p99s.sort_by(f64::total_cmp);
                    let spread = spread(&p99s, "runs", " ms");
                    let _ = writeln!(
                        md,
                        "| {broker} | append p99 ≤ linger + 2 round trips ({bound_ms:.2} ms), {mode}, {in_flight} in flight, at the rate | {:.2} ms{spread}: {:.2}× the bound | {} |",
                        w.p99_ms,
                        w.p99_ms / bound_ms,
                        yes(w.p99_ms <= bound_ms)
                    );
                }
            }
        }
    }
    md
}
