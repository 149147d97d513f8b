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
//! the same way for all. The proxy can stand for links with a round trip
//! (`--link-rtt-us`, a list): each workload is written once, then every
//! scenario runs once per link. The scripted broker can be made to charge
//! a fixed time per Fetch answer (`--fetch-cost-us`). Every walfetch row
//! says its wall time over the scan's, and `--gate-scan R` fails the bench
//! where walfetch's one pass (restart) or its replay with hints (single
//! region) takes over R times the scan's. Every replay's output is checked against the
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
//! cargo bench --bench replay -- --link-rtt-us 0,1000,10000   # every scenario over three links
//! cargo bench --bench replay -- --quick --broker scripted --fetch-cost-us 1000 --gate-scan 1.05   # fails if walfetch is slower than the scan
//! cargo bench --bench replay -- --help       # every option
//! ```
//!
//! Run without `--bench` (as `cargo test --benches` does), it runs the
//! quick profile.

mod common;
mod restart;
mod single;

use common::{contenders, floor, harness, proxy, report, svg, workload};

use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rskafka::client::partition::OffsetAt;
use walfetch::calibrate::measure_link;
use walfetch::cluster::NewTopic;
use walfetch::codec::Compression;
use walfetch::plan::PlanConfig;

use contenders::Clients;
use harness::{BrokerKind, Listener, Running};
use report::{Conditions, Row};
use workload::WorkloadSpec;

/// The replay bench's command line: the flags both benches take, and its
/// own.
#[derive(Debug, Clone, clap::Parser)]
#[command(
    name = "replay",
    about = "replay benchmark: walfetch vs scan, estimate (walfetch and rskafka), offsets-only",
    override_usage = "cargo bench --bench replay -- [options]"
)]
struct Flags {
    #[command(flatten)]
    common: harness::CommonFlags,
    /// Run only scenario S: replay (one region at a time) or restart (every
    /// region at once); default both
    #[arg(long, value_name = "S", value_parser = ["replay", "restart"])]
    only: Option<String>,
    /// Comma-separated <compression>-<writers>w[-pure], compression
    /// none|lz4|zstd, writers 1|2; -pure writes one region per batch
    /// (GreptimeDB's layout, batches <= 1 MiB), otherwise regions interleave
    /// in every batch
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        action = clap::ArgAction::Set,
        value_parser = parse_workload,
        default_value = "lz4-1w-pure,none-1w,lz4-2w,zstd-1w"
    )]
    workloads: Vec<(Compression, usize, bool)>,
    /// Zipf exponent of region activity
    #[arg(long, value_name = "S", default_value_t = 1.0)]
    zipf: f64,
    /// Restart: comma-separated partition counts the regions are split over
    /// (default 1,4; at most --regions)
    #[arg(long, value_name = "LIST", value_delimiter = ',', action = clap::ArgAction::Set)]
    partitions: Option<Vec<usize>>,
    /// walfetch planner's cost model: round trip in µs (default: the
    /// planner's own, 150); 0 never merges runs
    #[arg(long = "round-trip-us", value_name = "N")]
    round_trip_us: Option<u64>,
    /// Stand for network links: comma-separated round trips in µs, the
    /// proxy holding bytes N/2 µs each way (0: loopback as it is); every
    /// scenario runs once per link, on the same written data
    #[arg(
        long = "link-rtt-us",
        value_name = "LIST",
        value_delimiter = ',',
        action = clap::ArgAction::Set,
        default_value = "0"
    )]
    link_rtt_us: Vec<u64>,
    /// Scripted broker only: hold every Fetch answer N µs (a broker whose
    /// fetches are dear; tokio's timer rounds the hold up to the next
    /// millisecond, so 1000 holds 1–2 ms)
    #[arg(long = "fetch-cost-us", value_name = "N", default_value_t = 0)]
    fetch_cost_us: u64,
    /// Fail (exit non-zero) when a `walfetch, one pass` restart row or a
    /// `walfetch hints` single-region row has a wall time median over R
    /// times the scan's on the same scenario and link
    #[arg(long = "gate-scan", value_name = "R")]
    gate_scan: Option<f64>,
    /// Restart: the index walfetch recovers with, hints (the writer's, with
    /// batch positions) or offsets (offsets only, as GreptimeDB's index
    /// files)
    #[arg(long = "restart-index", value_name = "I", value_parser = ["hints", "offsets"], default_value = "hints")]
    restart_index: String,
}

/// The replay bench's defaults for the common flags, and its words for them.
const DEFAULTS: harness::Defaults = harness::Defaults {
    brokers: &[BrokerKind::Kafka, BrokerKind::Scripted, BrokerKind::Tansu],
    entries: (20_000, 2_500),
    runs: (5, 1),
    help: &[
        (
            "quick",
            "Small data, one run: checks every contender (< 2 min); also the profile without --bench",
        ),
        (
            "broker",
            "Comma-separated: kafka, scripted, tansu; or all (default: all; Kafka is started from the cached install, see scripts/setup-kafka.sh)",
        ),
        ("entries", "Entries per workload (default 20000; quick 2500)"),
        ("rate", "Entries per second, all writers"),
        (
            "runs",
            "Measured runs per contender and scenario (default 5; quick 1)",
        ),
    ],
};

/// Reads a `--workloads` item: `<compression>-<N>w[-pure]`.
fn parse_workload(w: &str) -> Result<(Compression, usize, bool), String> {
    let (w, pure) = match w.strip_suffix("-pure") {
        Some(w) => (w, true),
        None => (w, false),
    };
    let (c, n) = w
        .split_once('-')
        .ok_or_else(|| format!("{w:?} is not <compression>-<N>w[-pure]"))?;
    let codec = harness::parse_compression(c)?;
    match n {
        "1w" => Ok((codec, 1, pure)),
        "2w" => Ok((codec, 2, pure)),
        _ => Err(format!("writers {n:?} must be 1w or 2w")),
    }
}

#[derive(Debug, Clone)]
struct Args {
    common: harness::Common,
    /// Compression, writers, region-pure.
    workloads: Vec<(Compression, usize, bool)>,
    zipf: f64,
    round_trip: Option<Duration>,
    /// The round trips the proxy adds, half each way, one run of every
    /// scenario each (`--link-rtt-us`).
    links: Vec<Duration>,
    /// What the scripted broker charges per Fetch (`--fetch-cost-us`).
    fetch_cost: Duration,
    /// The most walfetch's wall time may be over the scan's
    /// (`--gate-scan`).
    gate_scan: Option<f64>,
    /// Restart: walfetch recovers with an index of offsets only.
    restart_offsets_only: bool,
    /// Run only this scenario: `replay` or `restart`.
    only: Option<String>,
    /// Restart: the partition counts the regions are split over.
    partitions: Vec<usize>,
}

impl Args {
    /// Whether scenario `name` (`replay` or `restart`) runs.
    fn runs_scenario(&self, name: &str) -> bool {
        self.only.as_deref().is_none_or(|only| only == name)
    }

    /// The arguments `flags` give, with the bench's defaults.
    fn new(flags: Flags) -> Result<Self, String> {
        let common = flags.common.resolve(&DEFAULTS)?;
        let mut partitions = flags.partitions.unwrap_or(restart::LAYOUTS.to_vec());
        partitions.sort_unstable();
        partitions.dedup();
        if partitions
            .iter()
            .any(|&p| p == 0 || p as u64 > common.regions)
        {
            return Err(harness::see_help(format!(
                "--partitions: each count must be 1 to --regions ({})",
                common.regions
            )));
        }
        let mut links = Vec::new();
        for us in flags.link_rtt_us {
            let link = Duration::from_micros(us);
            if !links.contains(&link) {
                links.push(link);
            }
        }
        let fetch_cost = Duration::from_micros(flags.fetch_cost_us);
        harness::check_fetch_cost(fetch_cost, &common.brokers).map_err(harness::see_help)?;
        if flags.gate_scan.is_some_and(|r| !(r.is_finite() && r > 0.0)) {
            return Err(harness::see_help("--gate-scan must be a positive ratio"));
        }
        Ok(Self {
            common,
            workloads: flags.workloads,
            zipf: flags.zipf,
            round_trip: flags.round_trip_us.map(Duration::from_micros),
            links,
            fetch_cost,
            gate_scan: flags.gate_scan,
            restart_offsets_only: flags.restart_index == "offsets",
            only: flags.only,
            partitions,
        })
    }

    /// The conditions of a run over `link`.
    fn conditions(&self, link: Duration) -> Conditions {
        Conditions {
            link_rtt_us: link.as_micros() as u64,
            fetch_cost_us: self.fetch_cost.as_micros() as u64,
        }
    }

    /// The links, as the tables name them: `loopback, 1 ms, 10 ms`.
    fn links_label(&self) -> String {
        let links: Vec<String> = self
            .links
            .iter()
            .map(|&l| {
                Conditions {
                    link_rtt_us: l.as_micros() as u64,
                    fetch_cost_us: 0,
                }
                .label()
            })
            .collect();
        links.join(", ")
    }

    fn specs(&self) -> Vec<WorkloadSpec> {
        self.workloads
            .iter()
            .map(|&(compression, writers, region_pure)| {
                self.common
                    .spec(compression, writers, region_pure, self.zipf)
            })
            .collect()
    }
}

fn main() -> ExitCode {
    harness::bench_main("replay", &DEFAULTS, Args::new, run)
}

fn run(args: Args) -> Result<(), String> {
    let common = &args.common;
    let started = Instant::now();
    eprintln!(
        "replay bench, {} profile: {} regions, {} entries per workload, {} measured run(s) per contender, over {}",
        if common.quick { "quick" } else { "default" },
        common.regions,
        common.entries,
        common.runs,
        args.links_label()
    );
    let mut rows = Vec::new();
    let mut restart_rows = Vec::new();
    let datasets: Vec<String> = harness::on_each_broker(
        &common.brokers,
        common.listener,
        |clients, broker, running| {
            clients.block_on(bench_broker(
                broker,
                running,
                &args,
                &mut rows,
                &mut restart_rows,
            ))
        },
    )?
    .into_iter()
    .flatten()
    .collect();

    let targets = report::check_targets(&rows, BrokerKind::Scripted.name());
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let restart_targets = restart::check_targets(&restart_rows, BrokerKind::Scripted.name(), cores);
    let header = format!(
        "## Replay benchmark\n\n`cargo bench --bench replay{}{}{}{}{}{}{}` — {} regions (Zipf {}), {} entries per workload, checkpoint at {:.0} % of the log, rate {}/s, linger {:?}, batch cap {} KiB, seed {}, {} measured run(s) per contender and scenario (each run checked against the written entries); {:.0} s in all.",
        common.quick_flag(),
        args.only.as_ref().map_or_else(String::new, |o| format!(" (--only {o})")),
        args.round_trip.map_or_else(String::new, |rt| format!(" (planner round trip {} µs)", rt.as_micros())),
        if args.restart_offsets_only { " (--restart-index offsets)" } else { "" },
        if args.links == [Duration::ZERO] { String::new() } else { format!(" (links: {}; the proxy adds the round trip)", args.links_label()) },
        if args.fetch_cost.is_zero() { String::new() } else { format!(" (the scripted broker holds every Fetch answer {} µs, tokio's timer rounding up to the next millisecond)", args.fetch_cost.as_micros()) },
        match common.listener { Listener::Plaintext => String::new(), l => format!(" (over {}; wire bytes are what the proxy forwards, TLS records included)", l.name()) },
        common.regions,
        args.zipf,
        common.entries,
        common.checkpoint * 100.0,
        common.rate,
        common.linger,
        common.batch_bytes >> 10,
        common.seed,
        common.runs,
        started.elapsed().as_secs_f64(),
    );
    let md = report::markdown(&rows, &targets, &header, &datasets)
        + &restart::markdown(&restart_rows, &restart_targets);
    println!("{md}");
    let json = serde_json::json!({
        "profile": if common.quick { "quick" } else { "default" },
        "config": {
            "regions": common.regions, "zipf": args.zipf, "entries": common.entries,
            "rate": common.rate, "linger_ms": common.linger.as_millis() as u64,
            "batch_bytes": common.batch_bytes, "checkpoint": common.checkpoint,
            "runs": common.runs, "seed": common.seed, "only": args.only,
            "link_rtt_us": args.links.iter().map(|l| l.as_micros() as u64).collect::<Vec<_>>(),
            "fetch_cost_us": args.fetch_cost.as_micros() as u64,
            "gate_scan": args.gate_scan,
            "security": common.listener.name(),
        },
        "datasets": datasets,
        "rows": rows,
        "targets": targets,
        "restart": { "rows": restart_rows, "targets": restart_targets },
        "seconds": started.elapsed().as_secs_f64(),
    });
    let svg = (!rows.is_empty()).then(|| ("replay.svg", svg::svg(&rows)));
    harness::write_report(
        "replay-bench",
        &md,
        &json,
        svg.into_iter().collect(),
        started,
    )?;
    let Some(limit) = args.gate_scan else {
        return Ok(());
    };
    let slower: Vec<String> = restart::slower_than_scan(&restart_rows, limit)
        .into_iter()
        .chain(report::slower_than_scan(&rows, limit))
        .collect();
    if slower.is_empty() {
        eprintln!("--gate-scan {limit}: no walfetch row is over {limit}x the scan's wall time");
        return Ok(());
    }
    Err(format!(
        "--gate-scan {limit}: {} walfetch row(s) slower than the scan beyond the margin:\n  {}",
        slower.len(),
        slower.join("\n  ")
    ))
}

/// Writes every workload to `broker`, reached through `running`'s proxy
/// with its security, and runs every scenario on it once per link.
async fn bench_broker(
    broker: BrokerKind,
    running: &Running,
    args: &Args,
    rows: &mut Vec<Row>,
    restart_rows: &mut Vec<restart::RestartRow>,
) -> Result<Vec<String>, String> {
    let name = broker.name();
    let proxy = &running.proxy;
    proxy.set_link_rtt(Duration::ZERO);
    running.set_fetch_cost(Duration::ZERO)?;
    let cluster = running.connect(name).await?;
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

        // Clients for the replays, warmed up (connections open, metadata
        // known) so that no replay pays for setup. rskafka only for the
        // single-region scenarios, its only ones.
        let mut rskafka = HashMap::new();
        if args.runs_scenario("replay") {
            let rs = running.rskafka(name).await?;
            let partition = harness::rskafka_partition(&rs, &topic, OffsetAt::Earliest)
                .await
                .map_err(|e| format!("{name}: {e}"))?;
            rskafka.insert(topic.clone(), Arc::new(partition));
        }
        contenders::warm_up(&cluster, &topic, name).await?;
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
        // A first, unmeasured run per contender (checked like the others)
        // warms caches on both sides, except in the quick profile.
        let warmups = usize::from(!args.common.quick);

        // Everything is written before the first measurement: each link
        // then replays the same data.
        let picked = if args.runs_scenario("replay") {
            single::pick(&topic, &written, &layout, args.common.checkpoint)?
        } else {
            Vec::new()
        };
        let restart_setup = restart::Setup {
            broker: name,
            cluster: &cluster,
            proxy,
            plan: clients.plan,
            runs: args.common.runs,
            warmups,
            seed: args.common.seed,
            partitions: &args.partitions,
            offsets_only: args.restart_offsets_only,
        };
        let restarts = if args.runs_scenario("restart") {
            let workload = restart::Workload {
                spec: &spec,
                planned: &planned,
                topic: &topic,
                written: &written,
                layout: &layout,
            };
            restart::prepare(&restart_setup, &workload, &mut datasets).await?
        } else {
            Vec::new()
        };
        let single_setup = single::Setup {
            broker: name,
            workload: &spec.name,
            clients: &clients,
            proxy,
            runs: args.common.runs,
            warmups,
        };

        running.set_fetch_cost(args.fetch_cost)?;
        for &link in &args.links {
            proxy.set_link_rtt(link);
            let conditions = args.conditions(link);
            // The link as the planner's cost model sees it (through the
            // proxy, the fetch cost included).
            let measured = measure_link(&cluster, &topic, 0, 20)
                .await
                .map_err(|e| format!("{name}, {}: measuring the link: {e}", conditions.label()))?;
            let link_info = format!(
                "{name}, {}, {}: link through the proxy: round trip {} µs (median of {}), bandwidth {}; the planner's default model: {} µs, {:.0} MB/s",
                spec.name,
                conditions.label(),
                measured.round_trip.as_micros(),
                measured.samples,
                measured
                    .bytes_per_second
                    .map_or_else(|| "not measured".into(), |b| format!("{:.0} MB/s", b / 1e6)),
                PlanConfig::default().cost.round_trip.as_micros(),
                PlanConfig::default().cost.bytes_per_second / 1e6,
            );
            eprintln!("{link_info}");
            datasets.push(link_info);
            single::bench(&single_setup, &picked, conditions, rows).await?;
            restart::bench(&restart_setup, &spec, &restarts, conditions, restart_rows).await?;
        }
        if let Some(held) = running.fetch_cost_fired() {
            let info = format!(
                "{name}, {}: the fetch cost held {held} Fetch answers {} µs each",
                spec.name,
                args.fetch_cost.as_micros()
            );
            eprintln!("{info}");
            datasets.push(info);
        }
        running.set_fetch_cost(Duration::ZERO)?;
        proxy.set_link_rtt(Duration::ZERO);
    }
    Ok(datasets)
}
