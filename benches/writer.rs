//! Writer benchmark: the WAL writer's throughput and append latency in
//! each mode, and what its layouts cost a replay, in one run.
//!
//! The entries are the replay bench's workload (`common/workload.rs`: R
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
//! (`common/contenders.rs`, `common/floor.rs`): `×own` is the bytes the
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

// Shared with the replay bench, of which this bench uses part.
#[allow(dead_code)]
mod common;
mod writing;

use common::{contenders, floor, harness, proxy, report, workload};

use std::collections::{BTreeMap, HashMap};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use walfetch::calibrate::measure_link;
use walfetch::cluster::{Cluster, NewTopic};
use walfetch::codec::Compression;
use walfetch::plan::PlanConfig;
use walfetch::writer::WriterMode;

use contenders::{Clients, Contender};
use harness::{BrokerKind, Running};
use proxy::Proxy;
use report::Row;
use workload::{WorkloadSpec, Written};
use writing::producers::*;
use writing::table::*;

/// The writer bench's command line: the flags both benches take, and its
/// own.
#[derive(Debug, Clone, clap::Parser)]
#[command(
    name = "writer",
    about = "writer benchmark: interleaved vs clustered, 1 vs 5 in flight, paced vs flat out; replay cost per layout",
    override_usage = "cargo bench --bench writer -- [options]"
)]
struct Flags {
    #[command(flatten)]
    common: harness::CommonFlags,
    /// none | lz4 | zstd
    #[arg(long, value_name = "C", value_parser = harness::parse_compression, default_value = "lz4")]
    compression: Compression,
}

/// The writer bench's defaults for the common flags, and its words for them.
const DEFAULTS: harness::Defaults = harness::Defaults {
    brokers: &[BrokerKind::Scripted],
    entries: (20_000, 1_500),
    runs: (3, 1),
    help: &[
        (
            "quick",
            "Small workload, one replay run (seconds); also the profile without --bench",
        ),
        (
            "broker",
            "Comma-separated: scripted, kafka, tansu; or all (default scripted)",
        ),
        ("entries", "Entries per run (default 20000; quick 1500)"),
        ("rate", "Entries per second when paced (the replay bench's)"),
        (
            "runs",
            "Measured replay runs per region (default 3; quick 1)",
        ),
    ],
};

#[derive(Debug, Clone)]
struct Args {
    common: harness::Common,
    compression: Compression,
}

impl Args {
    /// The arguments `flags` give, with the bench's defaults.
    fn new(flags: Flags) -> Result<Self, String> {
        Ok(Self {
            common: flags.common.resolve(&DEFAULTS)?,
            compression: flags.compression,
        })
    }

    /// The replay bench's workload with these settings; `region_pure` as
    /// its `-pure` workloads (1 MiB batches, GreptimeDB's cap).
    fn spec(&self, region_pure: bool) -> WorkloadSpec {
        self.common.spec(self.compression, 1, region_pure, 1.0)
    }
}

fn main() -> ExitCode {
    harness::bench_main("writer", &DEFAULTS, Args::new, run)
}

fn run(args: Args) -> Result<(), String> {
    let common = &args.common;
    let started = Instant::now();
    eprintln!(
        "writer bench, {} profile: {} regions, {} entries per run, rate {}/s",
        if common.quick { "quick" } else { "full" },
        common.regions,
        common.entries,
        common.rate
    );
    let mut writes = Vec::new();
    let mut replays = Vec::new();
    let mut round_trips = BTreeMap::new();
    let per_broker = harness::on_each_broker(
        &common.brokers,
        common.listener,
        |clients, broker, running| {
            let (w, r, rt) = clients.block_on(bench_broker(broker, running, &args))?;
            Ok((broker, w, r, rt))
        },
    )?;
    for (broker, w, r, rt) in per_broker {
        writes.extend(w);
        replays.extend(r);
        round_trips.insert(broker.name().to_owned(), rt);
    }
    let md = markdown(&args, &writes, &replays, &round_trips, started.elapsed());
    println!("{md}");
    let json = serde_json::json!({
        "profile": if common.quick { "quick" } else { "full" },
        "writes": writes,
        "replays": replays,
        "round_trip_us": round_trips.iter().map(|(b, rt)| (b.clone(), rt.as_micros() as u64)).collect::<BTreeMap<_, _>>(),
        "seconds": started.elapsed().as_secs_f64(),
    });
    harness::write_report("writer-bench", &md, &json, Vec::new(), started)
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
    contenders::warm_up(cluster, topic, broker).await?;
    let clients = Clients {
        walfetch: Arc::clone(cluster),
        rskafka: HashMap::new(),
        plan: PlanConfig::default(),
    };
    let mut out = Vec::new();
    for scenario in contenders::scenarios(topic, written, args.common.checkpoint)? {
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
            for run in 0..args.common.runs + usize::from(!args.common.quick) {
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
                if run > 0 || args.common.quick {
                    runs.push(result);
                }
            }
            let row = Row::new(
                broker,
                report::Conditions::default(),
                layout_name,
                &scenario,
                contender,
                floor,
                &runs,
            );
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
    let cluster = running.connect(name).await?;
    let rskafka = running.rskafka(name).await?;
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
        let reps = match (args.common.quick, paced, scripted.is_some()) {
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
