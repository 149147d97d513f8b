//! The writer bench's rows and its markdown table.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use crate::harness::Listener;
use crate::report::{Row, Table};
use crate::*;

/// One writer configuration's run.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct WriteRow {
    pub(crate) broker: String,
    pub(crate) mode: String,
    pub(crate) in_flight: usize,
    /// `rate` (the workload's arrival times) or `flat out`.
    pub(crate) pace: String,
    pub(crate) entries: usize,
    pub(crate) batches: usize,
    pub(crate) seconds: f64,
    pub(crate) entries_per_s: f64,
    pub(crate) mb_per_s: f64,
    pub(crate) p50_ms: f64,
    pub(crate) p99_ms: f64,
    pub(crate) max_ms: f64,
    /// CPU time this process used from the first append to the last
    /// acknowledgement: the writer, the bench's appender, the proxy and,
    /// on the scripted broker, the broker ([`harness::cpu_time`]).
    pub(crate) cpu_ms: Option<f64>,
    /// Runs of this configuration; the row is the median by throughput
    /// (flat out) or by append p99 (at the rate).
    pub(crate) runs: usize,
    /// Each run's entries/s, in the order the rounds ran.
    pub(crate) round_entries_per_s: Vec<f64>,
    /// Each run's append p99, in the order the rounds ran.
    pub(crate) round_p99_ms: Vec<f64>,
}

/// One layout's replay of one region.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct ReplayRow {
    pub(crate) broker: String,
    pub(crate) layout: String,
    pub(crate) batches: usize,
    pub(crate) row: Row,
}

/// ` (median of N <what>, lowest–highest<unit>)` for two or more values
/// sorted; nothing for fewer.
fn range_note(sorted: &[f64], what: &str, unit: &str) -> String {
    match sorted {
        [] | [_] => String::new(),
        [lo, .., hi] => format!(
            " (median of {} {what}, {lo:.2}–{hi:.2}{unit})",
            sorted.len()
        ),
    }
}

/// The row of `broker`'s writer `mode` with `in_flight` requests in
/// flight at `pace`, if it ran.
fn write_row<'a>(
    writes: &'a [WriteRow],
    broker: &str,
    (mode, in_flight, pace): (&str, usize, &str),
) -> Option<&'a WriteRow> {
    writes.iter().find(|w| {
        w.broker == broker && w.mode == mode && w.in_flight == in_flight && w.pace == pace
    })
}

/// The writer bench's report: its tables and targets.
pub(crate) fn markdown(
    args: &Args,
    writes: &[WriteRow],
    replays: &[ReplayRow],
    round_trips: &BTreeMap<String, Duration>,
    elapsed: Duration,
) -> String {
    let common = &args.common;
    let mut md = String::new();
    let _ = writeln!(
        md,
        "## Writer benchmark\n\n`cargo bench --bench writer{}{}` — the replay bench's workload: {} regions (Zipf 1), {} entries per run, {} compression, linger {:?}, batch cap {} KiB, paced runs at {}/s, seed {}; replays from {:.0} % of the log with hints and a complete index, median of {} run(s); idempotent producer throughout; {:.0} s in all.\n",
        common.quick_flag(),
        match common.listener {
            Listener::Plaintext => String::new(),
            l => format!(" (over {})", l.name()),
        },
        common.regions,
        common.entries,
        args.compression.name(),
        common.linger,
        common.batch_bytes >> 10,
        common.rate,
        common.seed,
        common.checkpoint * 100.0,
        common.runs,
        elapsed.as_secs_f64()
    );
    for (broker, rt) in round_trips {
        let _ = writeln!(
            md,
            "{broker}: round trip through the proxy {} µs (median of 20 fetches, same run).\n",
            rt.as_micros()
        );
    }
    md.push_str("### Writing\n\nFlat-out rows: the median of their runs by throughput; rows at the rate: the median of their runs by append p99. `CPU ms`: CPU time this process used from the first append to the last acknowledgement (the writer, the bench's appender, the proxy and, on the scripted broker's rows, the broker; Tansu runs in its own process).\n\n");
    let mut table = Table::new("broker | mode | in flight: | pace | entries/s: | MB/s: | append p50: | append p99: | max: | batches: | CPU ms: | runs:");
    for w in writes {
        table.row([
            w.broker.clone(),
            w.mode.clone(),
            w.in_flight.to_string(),
            w.pace.clone(),
            format!("{:.0}", w.entries_per_s),
            format!("{:.1}", w.mb_per_s),
            format!("{:.2} ms", w.p50_ms),
            format!("{:.2} ms", w.p99_ms),
            format!("{:.1} ms", w.max_ms),
            w.batches.to_string(),
            w.cpu_ms.map_or("–".to_owned(), |cpu| format!("{cpu:.0}")),
            w.runs.to_string(),
        ]);
    }
    md.push_str(&table.to_string());
    md.push_str("\n### Side by side with GreptimeDB's producer (same run)\n\nGreptimeDB's Kafka log store as it runs today (`greptime.rs`: a request a region write, produced one after another, no linger) on stock rskafka 0.6 from crates.io, against walfetch's clustered writer, 5 in flight, on the same workload and broker. GreptimeDB's producer writes the first tenth of the entries, once (it falls behind the rate). rskafka 0.6 sets no `TCP_NODELAY`: a request larger than its 8 KiB write buffer goes out in two writes, and the second waits for the broker's delayed acknowledgement (about 40 ms on Linux); GreptimeDB builds on its own fork of rskafka, not checked here.\n\n");
    let mut table = Table::new("broker | pace | walfetch clustered, 5 in flight | GreptimeDB's producer | walfetch ÷ GreptimeDB");
    for broker in round_trips.keys() {
        let with_greptime = |pace| {
            let ours = write_row(writes, broker, ("clustered", 5, pace));
            ours.zip(write_row(writes, broker, (GREPTIME_MODE, 1, pace)))
        };
        if let Some((w, g)) = with_greptime("flat out") {
            table.row([
                broker.clone(),
                "flat out".to_owned(),
                format!("{:.0} entries/s, {} batches", w.entries_per_s, w.batches),
                format!(
                    "{:.0} entries/s, {} batches ({} entries)",
                    g.entries_per_s, g.batches, g.entries
                ),
                format!("{:.1}× the entries/s", w.entries_per_s / g.entries_per_s),
            ]);
        }
        if let Some((w, g)) = with_greptime("rate") {
            table.row([
                broker.clone(),
                "rate".to_owned(),
                format!(
                    "append p50 {:.2} ms, p99 {:.2} ms, {} batches",
                    w.p50_ms, w.p99_ms, w.batches
                ),
                format!(
                    "append p50 {:.2} ms, p99 {:.2} ms, {} batches ({} entries)",
                    g.p50_ms, g.p99_ms, g.batches, g.entries
                ),
                format!("{:.3}× the p99", w.p99_ms / g.p99_ms),
            ]);
        }
    }
    md.push_str(&table.to_string());
    md.push_str("\n### Replay cost of each layout (walfetch with the writer's hints, complete index)\n\n`walfetch hints` plans with the library's default cost model (it may read other regions' batches to save a fetch); `fewest bytes` plans with a per-fetch cost of zero (runs never merge).\n\n");
    let mut table = Table::new("broker | layout | batches: | region | plan | entries: | own bytes: | wire bytes: | ×own: | ×floor: | fetches: | round trips:");
    for r in replays {
        let row = &r.row;
        table.row([
            r.broker.clone(),
            r.layout.clone(),
            r.batches.to_string(),
            format!("{} ({})", row.class, row.region),
            row.contender
                .trim_start_matches("walfetch hints, ")
                .to_owned(),
            row.entries.to_string(),
            report::bytes(row.floor.region_record_bytes),
            report::bytes(row.wire_bytes),
            format!("{:.3}", row.amp_own),
            format!("{:.3}", row.amp_floor),
            row.fetches.to_string(),
            row.round_trips.to_string(),
        ]);
    }
    md.push_str(&table.to_string());
    md.push_str("\n### Targets (same run)\n\n");
    let mut table = Table::new("broker | target | measured | met");
    let yes = |ok: bool| if ok { "yes" } else { "**no**" }.to_owned();
    for (broker, rt) in round_trips {
        let find = |mode: &str, in_flight: usize, pace: &str| {
            write_row(writes, broker, (mode, in_flight, pace))
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
                let spread = range_note(&ratios, "rounds", "");
                // What each took of this process's CPU, and in how many
                // Produce requests (one per batch).
                let cost = match (c.cpu_ms, i.cpu_ms) {
                    (Some(cc), Some(ic)) => format!(
                        "; {} vs {} batches, {cc:.0} vs {ic:.0} ms CPU",
                        c.batches, i.batches
                    ),
                    _ => format!("; {} vs {} batches", c.batches, i.batches),
                };
                table.row([
                    broker.clone(),
                    format!("clustered writes ≥ interleaved's throughput (flat out, {in_flight} in flight)"),
                    format!(
                        "{:.0} vs {:.0} entries/s; each round: {ratio:.2}×{spread}{cost}",
                        c.entries_per_s, i.entries_per_s
                    ),
                    yes(ratio >= 1.0),
                ]);
            }
        }
        for pure in [CLUSTERED_LAYOUT, PURE_LAYOUT] {
            for r in replays
                .iter()
                .filter(|r| &r.broker == broker && r.layout == pure && r.row.class == "median")
            {
                table.row([
                    broker.clone(),
                    format!(
                        "median region, {}: ≤ 1.1× own on the {pure} layout",
                        r.row.contender
                    ),
                    format!("{:.3}× own", r.row.amp_own),
                    yes(r.row.amp_own <= 1.1),
                ]);
            }
        }
        let bound = common.linger + 2 * *rt;
        for mode in ["clustered", "interleaved"] {
            for in_flight in [5, 1] {
                if let Some(w) = find(mode, in_flight, "rate") {
                    let bound_ms = bound.as_secs_f64() * 1e3;
                    let mut p99s = w.round_p99_ms.clone();
                    p99s.sort_by(f64::total_cmp);
                    let spread = range_note(&p99s, "runs", " ms");
                    table.row([
                        broker.clone(),
                        format!("append p99 ≤ linger + 2 round trips ({bound_ms:.2} ms), {mode}, {in_flight} in flight, at the rate"),
                        format!(
                            "{:.2} ms{spread}: {:.2}× the bound",
                            w.p99_ms,
                            w.p99_ms / bound_ms
                        ),
                        yes(w.p99_ms <= bound_ms),
                    ]);
                }
            }
        }
    }
    md.push_str(&table.to_string());
    md
}
