//! End-to-end replay benchmark: walfetch side by side with what users run
//! today, on the same broker and data, in one run.
//!
//! For each broker — Apache Kafka (one KRaft node of the cached install,
//! default settings), the scripted one that follows Kafka's fetch rules
//! (`walfetch-testkit`, checked against Kafka by
//! `tests/fetch_rules_kafka.rs`) and the real Tansu 0.6 — and each workload (see
//! `common/workload.rs`: R regions with Zipf-skewed activity, entry sizes
//! mostly 200 B – 4 KiB with a tail to 256 KiB, linger- and size-capped
//! batches from one or two interleaving [`walfetch::writer::WalWriter`]s,
//! compression none / lz4 / zstd), the hottest, a median and a cold region
//! are replayed from a checkpoint to the end, with a complete index and with
//! the index stopping halfway (`last_index`, tail scan), by five contenders:
//!
//! 1. `scan`: a full scan of the range on walfetch's connection layer;
//! 2. `estimate`: GreptimeDB's estimate strategy on walfetch's connection
//!    layer;
//! 3. `estimate/rskafka`: the same strategy on rskafka 0.6, as GreptimeDB
//!    runs it;
//! 4. `walfetch offsets`: walfetch's planner with an index of offsets only
//!    (as from a GreptimeDB index file);
//! 5. `walfetch hints`: walfetch's planner with the writer's hints.
//!
//! Then the restart scenario (`restart/`): every region at once,
//! each from its own checkpoint, on one partition and on four (or the
//! partition counts `--partitions` lists), region by
//! region (walfetch, the estimate strategy) and in one pass (a scan split
//! by region, walfetch's `Recovery`).
//!
//! Every contender connects through a byte-counting TCP proxy on loopback
//! (the broker advertises the proxy's address), so wire bytes are counted
//! the same way for all. Every replay's output is checked against the
//! written entries, and its wire bytes against the floor (no client can
//! move fewer under the broker's rules); a wrong contender, or a floor
//! that is not one, fails the bench.
//!
//! Output: a markdown table on stdout and in
//! `target/replay-bench/report.md`, every figure in
//! `target/replay-bench/report.json`, and a plot in
//! `target/replay-bench/replay.svg`.
//!
//! ```text
//! cargo bench --bench replay                 # default profile, < 10 min on 2 cores
//! cargo bench --bench replay -- --quick      # correctness of every contender, < 2 min
//! cargo bench --bench replay -- --only restart   # the restart scenario alone
//! cargo bench --bench replay -- --only restart --restart-index offsets   # with GreptimeDB's index
//! cargo bench --bench replay -- --help       # every option
//! ```
//!
//! Run without `--bench` (as `cargo test --benches` does), it runs the
//! quick profile.

mod common;
mod restart;

use common::{contenders, floor, harness, proxy, report, workload};

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rskafka::client::partition::{OffsetAt, UnknownTopicHandling};
use walfetch::calibrate::measure_link;
use walfetch::cluster::{Cluster, ClusterConfig, FetchParams, NewTopic};
use walfetch::codec::Compression;
use walfetch::connection::Security;
use walfetch::plan::PlanConfig;

use contenders::{Clients, Contender, RunResult};
use harness::{BrokerKind, Listener, Running};
use report::Row;
use workload::WorkloadSpec;

const USAGE: &str = "\
replay benchmark: walfetch vs scan, estimate (walfetch and rskafka), offsets-only

usage: cargo bench --bench replay -- [options]

  --quick              small data, one run: checks every contender (< 2 min)
  --only S             run only scenario S: replay (one region at a time) or
                       restart (every region at once); default both
  --broker B           comma-separated: kafka, scripted, tansu; or all
                       (default: all; Kafka is started from the cached
                       install, see scripts/setup-kafka.sh)
  --workloads LIST     comma-separated <compression>-<writers>w[-pure],
                       compression none|lz4|zstd, writers 1|2; -pure writes one
                       region per batch (GreptimeDB's layout, batches <= 1 MiB),
                       otherwise regions interleave in every batch
                       (default lz4-1w-pure,none-1w,lz4-2w,zstd-1w)
  --regions N          regions sharing the partition (default 64)
  --zipf S             Zipf exponent of region activity (default 1.0)
  --entries N          entries per workload (default 20000)
  --rate N             entries per second, all writers (default 5000)
  --linger-ms N        writer linger (default 5)
  --batch-kib N        writer batch size cap (default 256)
  --checkpoint F       replay from this fraction of the log (default 0.25)
  --partitions LIST    restart: comma-separated partition counts the regions
                       are split over (default 1,4; at most --regions)
  --runs N             measured runs per contender and scenario (default 5)
  --seed N             workload seed (default 42)
  --round-trip-us N    walfetch planner's cost model: round trip in µs
                       (default: the planner's own, 150); 0 never merges runs
  --link-rtt-us N      stand for a network link: the proxy holds bytes N/2 µs
                       each way (default 0, loopback as it is)
  --restart-index I    restart: the index walfetch recovers with, hints
                       (default: the writer's, with batch positions) or
                       offsets (offsets only, as GreptimeDB's index files)
  --security P         how clients reach the broker: PLAINTEXT (default),
                       SSL or SASL_SSL (TLS, then SCRAM-SHA-512), as
                       librdkafka's security.protocol, for every contender
                       (rskafka's too); not PLAINTEXT: the scripted broker
                       only (--broker scripted)
";

#[derive(Debug, Clone)]
struct Args {
    quick: bool,
    brokers: Vec<BrokerKind>,
    /// Compression, writers, region-pure.
    workloads: Vec<(Compression, usize, bool)>,
    regions: u64,
    zipf: f64,
    entries: usize,
    rate: f64,
    linger: Duration,
    batch_bytes: usize,
    checkpoint: f64,
    runs: usize,
    seed: u64,
    round_trip: Option<Duration>,
    /// The round trip the proxy adds, half each way (`--link-rtt-us`).
    link_rtt: Duration,
    /// Restart: walfetch recovers with an index of offsets only.
    restart_offsets_only: bool,
    /// Run only this scenario: `replay` or `restart`.
    only: Option<String>,
    /// Restart: the partition counts the regions are split over.
    partitions: Vec<usize>,
    /// How clients reach the broker (`--security`).
    listener: Listener,
}

impl Args {
    fn defaults(quick: bool) -> Self {
        Self {
            quick,
            brokers: vec![BrokerKind::Kafka, BrokerKind::Scripted, BrokerKind::Tansu],
            workloads: vec![
                (Compression::Lz4, 1, true),
                (Compression::None, 1, false),
                (Compression::Lz4, 2, false),
                (Compression::Zstd, 1, false),
            ],
            regions: if quick { 16 } else { 64 },
            zipf: 1.0,
            entries: if quick { 2_500 } else { 20_000 },
            rate: 5_000.0,
            linger: Duration::from_millis(5),
            batch_bytes: 256 << 10,
            checkpoint: 0.25,
            runs: if quick { 1 } else { 5 },
            seed: 42,
            round_trip: None,
            link_rtt: Duration::ZERO,
            restart_offsets_only: false,
            only: None,
            partitions: restart::LAYOUTS.to_vec(),
            listener: Listener::Plaintext,
        }
    }

    /// Whether scenario `name` (`replay` or `restart`) runs.
    fn runs_scenario(&self, name: &str) -> bool {
        self.only.as_deref().is_none_or(|only| only == name)
    }

    /// Parses the bench's arguments. `--bench` (added by `cargo bench`) is
    /// accepted; without it the quick profile runs, as a smoke test. Free
    /// arguments (a criterion-style filter) are ignored with a note.
    fn parse(args: impl IntoIterator<Item = String>) -> Result<Option<Self>, String> {
        let args: Vec<String> = args.into_iter().collect();
        let quick = args.iter().any(|a| a == "--quick") || !args.iter().any(|a| a == "--bench");
        let mut out = Self::defaults(quick);
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
                "--workloads" => {
                    out.workloads = value("--workloads")?
                        .split(',')
                        .map(|w| {
                            let (w, pure) = match w.strip_suffix("-pure") {
                                Some(w) => (w, true),
                                None => (w, false),
                            };
                            let (c, n) = w.split_once('-').ok_or_else(|| {
                                format!("--workloads: {w:?} is not <compression>-<N>w[-pure]")
                            })?;
                            let codec = match c {
                                "none" => Compression::None,
                                "lz4" => Compression::Lz4,
                                "zstd" => Compression::Zstd,
                                _ => return Err(format!("--workloads: unknown compression {c:?}")),
                            };
                            match n {
                                "1w" => Ok((codec, 1, pure)),
                                "2w" => Ok((codec, 2, pure)),
                                _ => Err(format!("--workloads: writers {n:?} must be 1w or 2w")),
                            }
                        })
                        .collect::<Result<_, _>>()?;
                }
                "--regions" => out.regions = num("--regions", value("--regions")?)?,
                "--zipf" => out.zipf = num("--zipf", value("--zipf")?)?,
                "--entries" => out.entries = num("--entries", value("--entries")?)?,
                "--rate" => out.rate = num("--rate", value("--rate")?)?,
                "--linger-ms" => {
                    out.linger = Duration::from_millis(num("--linger-ms", value("--linger-ms")?)?)
                }
                "--batch-kib" => {
                    out.batch_bytes = num::<usize>("--batch-kib", value("--batch-kib")?)? << 10
                }
                "--checkpoint" => out.checkpoint = num("--checkpoint", value("--checkpoint")?)?,
                "--runs" => out.runs = num("--runs", value("--runs")?)?,
                "--seed" => out.seed = num("--seed", value("--seed")?)?,
                "--only" => match value("--only")?.as_str() {
                    only @ ("replay" | "restart") => out.only = Some(only.to_owned()),
                    other => return Err(format!("--only: unknown {other:?}\n\n{USAGE}")),
                },
                "--partitions" => {
                    out.partitions = value("--partitions")?
                        .split(',')
                        .map(|n| num("--partitions", n.to_owned()))
                        .collect::<Result<_, _>>()?;
                    out.partitions.sort_unstable();
                    out.partitions.dedup();
                }
                "--restart-index" => {
                    out.restart_offsets_only = match value("--restart-index")?.as_str() {
                        "hints" => false,
                        "offsets" => true,
                        other => {
                            return Err(format!("--restart-index: unknown {other:?}\n\n{USAGE}"))
                        }
                    }
                }
                "--round-trip-us" => {
                    let us: u64 = num("--round-trip-us", value("--round-trip-us")?)?;
                    out.round_trip = Some(Duration::from_micros(us));
                }
                "--link-rtt-us" => {
                    let us: u64 = num("--link-rtt-us", value("--link-rtt-us")?)?;
                    out.link_rtt = Duration::from_micros(us);
                }
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
        if out.regions == 0 || out.entries == 0 || out.runs == 0 || out.workloads.is_empty() {
            return Err(format!(
                "--regions, --entries, --runs and --workloads must not be zero or empty\n\n{USAGE}"
            ));
        }
        if out.partitions.is_empty()
            || out
                .partitions
                .iter()
                .any(|&p| p == 0 || p as u64 > out.regions)
        {
            return Err(format!(
                "--partitions: each count must be 1 to --regions ({})\n\n{USAGE}",
                out.regions
            ));
        }
        harness::check_listener(out.listener, &out.brokers)
            .map_err(|e| format!("{e}\n\n{USAGE}"))?;
        if !(0.0..1.0).contains(&out.checkpoint) || out.rate <= 0.0 {
            return Err(format!(
                "--checkpoint must be in [0, 1) and --rate positive\n\n{USAGE}"
            ));
        }
        Ok(Some(out))
    }

    fn specs(&self) -> Vec<WorkloadSpec> {
        self.workloads
            .iter()
            .map(|&(compression, writers, region_pure)| WorkloadSpec {
                name: format!(
                    "{}-{writers}w{}",
                    compression.name(),
                    if region_pure { "-pure" } else { "" }
                ),
                regions: self.regions,
                zipf: self.zipf,
                entries: self.entries,
                rate: self.rate,
                linger: self.linger,
                // GreptimeDB's `max_batch_bytes` default for its own layout.
                max_batch_bytes: if region_pure {
                    1 << 20
                } else {
                    self.batch_bytes
                },
                writers,
                compression,
                region_pure,
                seed: self.seed,
            })
            .collect()
    }
}

fn main() -> ExitCode {
    harness::bench_main("replay", run)
}

fn run() -> Result<ExitCode, String> {
    let Some(args) = Args::parse(std::env::args().skip(1))? else {
        print!("{USAGE}");
        return Ok(ExitCode::SUCCESS);
    };
    let started = Instant::now();
    let (infra, clients) = harness::runtimes()?;
    eprintln!(
        "replay bench, {} profile: {} regions, {} entries per workload, {} measured run(s) per contender",
        if args.quick { "quick" } else { "default" },
        args.regions,
        args.entries,
        args.runs
    );
    let mut rows = Vec::new();
    let mut restart_rows = Vec::new();
    let mut datasets = Vec::new();
    for &broker in &args.brokers {
        // The broker is kept alive until its figures are in.
        let running = harness::start(broker, &infra, &clients, args.link_rtt / 2, args.listener)?;
        let result = clients.block_on(bench_broker(
            broker,
            &running,
            &args,
            &mut rows,
            &mut restart_rows,
        ));
        drop(running);
        datasets.extend(result?);
    }

    let targets = report::check_targets(&rows, BrokerKind::Scripted.name());
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let restart_targets = restart::check_targets(&restart_rows, BrokerKind::Scripted.name(), cores);
    let header = format!(
        "## Replay benchmark\n\n`cargo bench --bench replay{}{}{}{}{}{}` — {} regions (Zipf {}), {} entries per workload, checkpoint at {:.0} % of the log, rate {}/s, linger {:?}, batch cap {} KiB, seed {}, {} measured run(s) per contender and scenario (each run checked against the written entries); {:.0} s in all.",
        if args.quick { " -- --quick" } else { "" },
        args.only.as_ref().map_or_else(String::new, |o| format!(" (--only {o})")),
        args.round_trip.map_or_else(String::new, |rt| format!(" (planner round trip {} µs)", rt.as_micros())),
        if args.restart_offsets_only { " (--restart-index offsets)" } else { "" },
        if args.link_rtt.is_zero() { String::new() } else { format!(" (link round trip {} µs added by the proxy)", args.link_rtt.as_micros()) },
        match args.listener { Listener::Plaintext => String::new(), l => format!(" (over {}; wire bytes are what the proxy forwards, TLS records included)", l.name()) },
        args.regions,
        args.zipf,
        args.entries,
        args.checkpoint * 100.0,
        args.rate,
        args.linger,
        args.batch_bytes >> 10,
        args.seed,
        args.runs,
        started.elapsed().as_secs_f64(),
    );
    let md = report::markdown(&rows, &targets, &header, &datasets)
        + &restart::markdown(&restart_rows, &restart_targets);
    println!("{md}");
    let dir = harness::out_dir("replay-bench");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let json = serde_json::json!({
        "profile": if args.quick { "quick" } else { "default" },
        "config": {
            "regions": args.regions, "zipf": args.zipf, "entries": args.entries,
            "rate": args.rate, "linger_ms": args.linger.as_millis() as u64,
            "batch_bytes": args.batch_bytes, "checkpoint": args.checkpoint,
            "runs": args.runs, "seed": args.seed, "only": args.only,
            "link_rtt_us": args.link_rtt.as_micros() as u64,
            "security": args.listener.name(),
        },
        "datasets": datasets,
        "rows": rows,
        "targets": targets,
        "restart": { "rows": restart_rows, "targets": restart_targets },
        "seconds": started.elapsed().as_secs_f64(),
    });
    let write = |name: &str, text: String| {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))
    };
    write("report.md", md.clone())?;
    write(
        "report.json",
        serde_json::to_string_pretty(&json).map_err(|e| e.to_string())?,
    )?;
    if !rows.is_empty() {
        write("replay.svg", report::svg(&rows))?;
    }
    eprintln!(
        "wrote {0}/report.md, {0}/report.json{2} in {1:.0} s",
        dir.display(),
        started.elapsed().as_secs_f64(),
        if rows.is_empty() {
            String::new()
        } else {
            format!(" and {}/replay.svg", dir.display())
        }
    );
    Ok(ExitCode::SUCCESS)
}

fn cluster_config(addr: SocketAddr, security: &Security) -> ClusterConfig {
    let mut config = ClusterConfig::new([addr.to_string()]);
    config.connection.request_timeout = Duration::from_secs(30);
    config.connection.security = security.clone();
    config
}

/// Writes every workload to `broker`, reached through `running`'s proxy
/// with its security, and runs every scenario on it.
async fn bench_broker(
    broker: BrokerKind,
    running: &Running,
    args: &Args,
    rows: &mut Vec<Row>,
    restart_rows: &mut Vec<restart::RestartRow>,
) -> Result<Vec<String>, String> {
    let name = broker.name();
    let proxy = &running.proxy;
    let cluster = Arc::new(
        Cluster::connect(cluster_config(proxy.addr(), &running.security))
            .await
            .map_err(|e| format!("{name}: connect through the proxy: {e}"))?,
    );
    let mut datasets = Vec::new();
    for spec in args.specs() {
        let topic = format!("wal-{}", spec.name);
        cluster
            .create_topics(&[NewTopic::new(&topic, 1)])
            .await
            .map_err(|e| format!("{name}: create {topic}: {e}"))?;
        let t = Instant::now();
        let planned = workload::generate(&spec);
        let written = workload::write(&cluster, &topic, &spec, &planned).await?;
        let layout = floor::scan(&cluster, &topic, 0, written.end).await?;
        if layout.batches.len() != written.batches {
            return Err(format!(
                "{name} {topic}: wrote {} batches, the broker serves {}",
                written.batches,
                layout.batches.len()
            ));
        }
        let payload: usize = written.entries.iter().map(|e| e.payload.len()).sum();
        let info = format!(
            "{name}, {}: {} entries ({:.1} MiB of payload) in {} batches, {:.1} MiB on the broker; written in {:.1} s",
            spec.name,
            written.entries.len(),
            payload as f64 / 1048576.0,
            layout.batches.len(),
            layout.bytes() as f64 / 1048576.0,
            t.elapsed().as_secs_f64()
        );
        eprintln!("{info}");
        datasets.push(info);
        // The link as the planner's cost model sees it (through the proxy).
        let link = measure_link(&cluster, &topic, 0, 20)
            .await
            .map_err(|e| format!("{name}: measuring the link: {e}"))?;
        let link_info = format!(
            "{name}, {}: link through the proxy: round trip {} µs (median of {}), bandwidth {}; the planner's default model: {} µs, {:.0} MB/s",
            spec.name,
            link.round_trip.as_micros(),
            link.samples,
            link.bytes_per_second
                .map_or_else(|| "not measured".into(), |b| format!("{:.0} MB/s", b / 1e6)),
            PlanConfig::default().cost.round_trip.as_micros(),
            PlanConfig::default().cost.bytes_per_second / 1e6,
        );
        eprintln!("{link_info}");
        datasets.push(link_info);

        // Clients for the replays, warmed up (connections open, metadata
        // known) so that no replay pays for setup. rskafka only for the
        // single-region scenarios, its only ones.
        let mut rskafka = HashMap::new();
        if args.runs_scenario("replay") {
            let rs = running
                .rskafka_client()?
                .build()
                .await
                .map_err(|e| format!("{name}: rskafka: {e}"))?;
            let partition = rs
                .partition_client(topic.clone(), 0, UnknownTopicHandling::Retry)
                .await
                .map_err(|e| format!("{name}: rskafka partition client: {e}"))?;
            partition
                .get_offset(OffsetAt::Earliest)
                .await
                .map_err(|e| format!("{name}: rskafka warm-up: {e}"))?;
            rskafka.insert(topic.clone(), Arc::new(partition));
        }
        cluster
            .fetch(&FetchParams::new(topic.clone(), 0, 0).with_max_bytes(1))
            .await
            .map_err(|e| format!("{name}: warm-up fetch: {e}"))?;
        let clients = Clients {
            walfetch: Arc::clone(&cluster),
            rskafka,
            plan: {
                let mut plan = PlanConfig::default();
                if let Some(rt) = args.round_trip {
                    plan.cost.round_trip = rt;
                }
                plan
            },
        };

        let picked = if args.runs_scenario("replay") {
            contenders::scenarios(&topic, &written, args.checkpoint)?
        } else {
            Vec::new()
        };
        // A first, unmeasured run per contender (checked like the others)
        // warms caches on both sides, except in the quick profile.
        let warmups = usize::from(!args.quick);
        for scenario in picked {
            let floor = floor::floor(
                &layout,
                scenario.region,
                scenario.range.clone(),
                scenario.indexed_end(),
            )?;
            let t = Instant::now();
            let mut results: BTreeMap<Contender, Vec<RunResult>> = BTreeMap::new();
            let context = |c: Contender| {
                format!(
                    "{name} {} {} (region {}, offsets {:?}, last_index {}) {}",
                    spec.name,
                    scenario.label(),
                    scenario.region,
                    scenario.range,
                    scenario.last_index,
                    c.name()
                )
            };
            for run in 0..warmups + args.runs {
                for k in 0..Contender::ALL.len() {
                    // Rotate the order so no contender always runs first.
                    let c = Contender::ALL[(k + run) % Contender::ALL.len()];
                    let result = contenders::run(c, &clients, proxy, &scenario)
                        .await
                        .map_err(|e| format!("{}: {e}", context(c)))?;
                    if let Some(own) = result.consumer_wire_bytes {
                        if own > result.wire_bytes {
                            return Err(format!(
                                "{}: the consumer counted {own} response bytes, the proxy only {}",
                                context(c),
                                result.wire_bytes
                            ));
                        }
                    }
                    floor::check_above(&context(c), result.wire_bytes, floor.wire_bytes_for(name))?;
                    if run >= warmups {
                        results.entry(c).or_default().push(result);
                    }
                }
            }
            for c in Contender::ALL {
                rows.push(Row::new(
                    name,
                    &spec.name,
                    &scenario,
                    c,
                    floor,
                    &results[&c],
                ));
            }
            let hints = rows.last().map(|r| (r.amp_floor, r.fetches));
            eprintln!(
                "  {} {:<16} region {:>3}: {} entries, floor {} B; hints {:.3}x floor, {} fetches; {:.1} s",
                spec.name,
                scenario.label(),
                scenario.region,
                scenario.expected.len(),
                floor.kafka_bytes,
                hints.map_or(0.0, |h| h.0),
                hints.map_or(0, |h| h.1),
                t.elapsed().as_secs_f64()
            );
        }
        if args.runs_scenario("restart") {
            let setup = restart::Setup {
                broker: name,
                cluster: &cluster,
                proxy,
                plan: clients.plan,
                runs: args.runs,
                warmups,
                seed: args.seed,
                partitions: &args.partitions,
                offsets_only: args.restart_offsets_only,
            };
            let workload = restart::Workload {
                spec: &spec,
                planned: &planned,
                topic: &topic,
                written: &written,
                layout: &layout,
            };
            restart::bench(&setup, &workload, restart_rows, &mut datasets).await?;
        }
    }
    Ok(datasets)
}
