//! Figures, targets and two of the three outputs: a markdown table and a
//! JSON file of every figure (the SVG plot is `svg.rs`'s).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;

use crate::contenders::{Contender, RunResult, Scenario};
use crate::floor::Floor;

/// What a row ran over besides the broker: the round trip the proxy added
/// and what the scripted broker charged per Fetch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub(crate) struct Conditions {
    /// The link's added round trip (`--link-rtt-us`), 0 on loopback.
    pub(crate) link_rtt_us: u64,
    /// How long the scripted broker held each Fetch answer
    /// (`--fetch-cost-us`).
    pub(crate) fetch_cost_us: u64,
}

impl Conditions {
    /// Its name in the tables: `loopback`, `1 ms`, `250 µs`, and `, fetch
    /// cost 1 ms` when fetches cost.
    pub(crate) fn label(self) -> String {
        let link = match self.link_rtt_us {
            0 => "loopback".to_owned(),
            us => micros(us),
        };
        match self.fetch_cost_us {
            0 => link,
            us => format!("{link}, fetch cost {}", micros(us)),
        }
    }
}

/// `us` µs as the tables say it: `250 µs`, `1 ms`, `1.5 ms`.
pub(crate) fn micros(us: u64) -> String {
    match us {
        us if us < 1000 => format!("{us} µs"),
        us if us % 1000 == 0 => format!("{} ms", us / 1000),
        us => format!("{:.1} ms", us as f64 / 1e3),
    }
}

/// Every figure of one contender on one scenario.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Row {
    pub(crate) broker: String,
    pub(crate) workload: String,
    /// The link and fetch cost it ran over.
    #[serde(flatten)]
    pub(crate) conditions: Conditions,
    pub(crate) class: String,
    pub(crate) index_mode: String,
    pub(crate) region: u64,
    pub(crate) from: i64,
    pub(crate) to: i64,
    pub(crate) last_index: i64,
    pub(crate) contender: String,
    #[serde(skip)]
    pub(crate) contender_kind: Option<Contender>,
    /// The region's entries yielded (checked equal to the written ones).
    pub(crate) entries: usize,
    /// Other regions' records yielded (scans).
    pub(crate) other_records: usize,
    /// Median over the measured runs of the bytes the proxy carried from
    /// the broker to the contender; with min and max.
    pub(crate) wire_bytes: u64,
    pub(crate) wire_bytes_min: u64,
    pub(crate) wire_bytes_max: u64,
    /// Median bytes from the contender to the broker (requests).
    pub(crate) request_bytes: u64,
    /// walfetch's own count of Fetch response bytes, median.
    pub(crate) consumer_wire_bytes: Option<u64>,
    pub(crate) floor: Floor,
    /// Wire bytes over the Kafka-rules floor.
    pub(crate) amp_floor: f64,
    /// Wire bytes over the region's own record bytes.
    pub(crate) amp_own: f64,
    /// Median fetch requests.
    pub(crate) fetches: u64,
    pub(crate) fetches_min: u64,
    pub(crate) fetches_max: u64,
    /// Median round trips on the critical path (fetches sent together
    /// share one; see `walfetch::consumer::ReplayStats::round_trips`).
    pub(crate) round_trips: u64,
    pub(crate) wall_ms: f64,
    pub(crate) wall_ms_min: f64,
    pub(crate) wall_ms_max: f64,
    /// The wall time median over the scan's on the same scenario, for
    /// walfetch with offsets and with hints ([`set_over_scan`]).
    pub(crate) wall_over_scan: Option<f64>,
    /// Median time to the region's first entry.
    pub(crate) time_to_first_ms: Option<f64>,
    /// Median peak buffered bytes.
    pub(crate) peak_buffered_bytes: u64,
    /// Measured runs (each also checked).
    pub(crate) runs: usize,
    /// Connections opened during the measured runs, all together.
    pub(crate) new_connections: u64,
}

/// The median of `v` (of an even count, the higher of the middle two).
pub(crate) fn median<T: Copy + Ord>(mut v: Vec<T>) -> T {
    v.sort_unstable();
    v[v.len() / 2]
}

/// `d` in milliseconds.
pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// A figure over the measured runs: its median and its range.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct Spread<T> {
    pub(crate) median: T,
    pub(crate) min: T,
    pub(crate) max: T,
}

impl<T: Copy + Ord + Default> Spread<T> {
    /// The spread of `values` (of none, the default).
    pub(crate) fn of(values: Vec<T>) -> Self {
        Spread {
            min: values.iter().copied().min().unwrap_or_default(),
            max: values.iter().copied().max().unwrap_or_default(),
            median: if values.is_empty() {
                T::default()
            } else {
                median(values)
            },
        }
    }

    /// Each figure through `f`.
    pub(crate) fn map<U>(self, f: impl Fn(T) -> U) -> Spread<U> {
        Spread {
            median: f(self.median),
            min: f(self.min),
            max: f(self.max),
        }
    }
}

impl Spread<f64> {
    /// A table cell: `median (min–max)`, each with `decimals` decimals.
    pub(crate) fn cell(&self, decimals: usize) -> String {
        let Spread { median, min, max } = *self;
        format!("{median:.decimals$} ({min:.decimals$}–{max:.decimals$})")
    }
}

/// A markdown table: its head, then a line a row.
#[derive(Debug, Clone)]
pub(crate) struct Table {
    text: String,
}

impl Table {
    /// A table of `columns`, no rows yet: their names between ` | `, a
    /// right-aligned column's followed by `:` (as markdown marks it,
    /// `---:`): `"broker | entries: | wire:"`.
    pub(crate) fn new(columns: &str) -> Self {
        let (names, rules): (Vec<&str>, Vec<&str>) = columns
            .split(" | ")
            .map(|c| match c.strip_suffix(':') {
                Some(name) => (name, "---:"),
                None => (c, "---"),
            })
            .unzip();
        let mut text = String::new();
        let _ = writeln!(text, "| {} |\n|{}|", names.join(" | "), rules.join("|"));
        Table { text }
    }

    /// Adds a row of `cells`, one a column.
    pub(crate) fn row(&mut self, cells: impl IntoIterator<Item = String>) {
        let cells: Vec<String> = cells.into_iter().collect();
        let _ = writeln!(self.text, "| {} |", cells.join(" | "));
    }
}

impl std::fmt::Display for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl Row {
    /// Summarises the measured runs of `contender` on `scenario`, run
    /// over `conditions`.
    pub(crate) fn new(
        broker: &str,
        conditions: Conditions,
        workload: &str,
        scenario: &Scenario,
        contender: Contender,
        floor: Floor,
        runs: &[RunResult],
    ) -> Self {
        let wire = Spread::of(runs.iter().map(|r| r.wire_bytes).collect());
        let fetches = Spread::of(runs.iter().map(|r| r.fetches).collect());
        let wall = Spread::of(runs.iter().map(|r| r.wall).collect()).map(ms);
        let ttfe: Vec<Duration> = runs.iter().filter_map(|r| r.time_to_first).collect();
        let wire_bytes = wire.median;
        let last = runs.last().cloned().unwrap_or_default();
        Row {
            broker: broker.into(),
            conditions,
            workload: workload.into(),
            class: scenario.class.into(),
            index_mode: scenario.index_mode.into(),
            region: scenario.region,
            from: scenario.range.start,
            to: scenario.range.end,
            last_index: scenario.last_index,
            contender: contender.label(crate::floor::kafka_rules(broker)),
            contender_kind: Some(contender),
            entries: last.entries,
            other_records: last.other_records,
            wire_bytes,
            wire_bytes_min: wire.min,
            wire_bytes_max: wire.max,
            request_bytes: median(runs.iter().map(|r| r.request_bytes).collect()),
            consumer_wire_bytes: runs
                .iter()
                .map(|r| r.consumer_wire_bytes)
                .collect::<Option<Vec<u64>>>()
                .map(median),
            floor,
            amp_floor: wire_bytes as f64 / floor.bytes_for(broker).max(1) as f64,
            amp_own: wire_bytes as f64 / floor.region_record_bytes.max(1) as f64,
            fetches: fetches.median,
            fetches_min: fetches.min,
            fetches_max: fetches.max,
            round_trips: median(runs.iter().map(|r| r.round_trips).collect()),
            wall_ms: wall.median,
            wall_ms_min: wall.min,
            wall_ms_max: wall.max,
            wall_over_scan: None,
            time_to_first_ms: (!ttfe.is_empty()).then(|| ms(median(ttfe))),
            peak_buffered_bytes: median(runs.iter().map(|r| r.peak_buffered).collect()),
            runs: runs.len(),
            new_connections: runs.iter().map(|r| r.new_connections).sum(),
        }
    }

    /// The scenario it ran: broker, conditions, workload, class, index mode.
    pub(crate) fn scenario_key(&self) -> (String, Conditions, String, String, String) {
        (
            self.broker.clone(),
            self.conditions,
            self.workload.clone(),
            self.class.clone(),
            self.index_mode.clone(),
        )
    }
}

/// Sets `wall_over_scan` on the walfetch rows (offsets and hints) of
/// `rows`, one scenario's, against its scan row.
pub(crate) fn set_over_scan(rows: &mut [Row]) {
    let Some(scan) = rows
        .iter()
        .find(|r| r.contender_kind == Some(Contender::Scan))
        .map(|r| r.wall_ms)
    else {
        return;
    };
    for r in rows.iter_mut().filter(|r| {
        matches!(
            r.contender_kind,
            Some(Contender::OffsetsOnly | Contender::Hints)
        )
    }) {
        r.wall_over_scan = Some(r.wall_ms / scan.max(1e-9));
    }
}

/// The walfetch hints rows whose wall time median is over `limit` times
/// the scan's on the same scenario (`--gate-scan`), each said with both
/// medians.
pub(crate) fn slower_than_scan(rows: &[Row], limit: f64) -> Vec<String> {
    rows.iter()
        .filter(|r| r.contender_kind == Some(Contender::Hints))
        .filter_map(|r| {
            let ratio = r.wall_over_scan.filter(|&ratio| ratio > limit)?;
            Some(format!(
                "{}, {}, {} {} {} (r{}): walfetch hints {:.1} ms (median) against the scan's {:.1} ms: {ratio:.3}x > {limit}",
                r.broker,
                r.conditions.label(),
                r.workload,
                r.class,
                r.index_mode,
                r.region,
                r.wall_ms,
                r.wall_ms / ratio,
            ))
        })
        .collect()
}

/// Where one target stands on one scenario.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct TargetCheck {
    pub(crate) target: &'static str,
    pub(crate) broker: String,
    /// The link and fetch cost it ran over.
    #[serde(flatten)]
    pub(crate) conditions: Conditions,
    pub(crate) workload: String,
    pub(crate) scenario: String,
    /// The measured ratio.
    pub(crate) value: f64,
    /// The ratio the target allows (met when `value <= limit`).
    pub(crate) limit: f64,
    pub(crate) met: bool,
    /// The ratio the floor alone gives, for a target on bytes whose
    /// numerator no client can bring below the floor: above `limit`, the
    /// target cannot be met on this layout under Kafka's rules.
    pub(crate) floor: Option<f64>,
    /// For a target on wall time: the ratio the run's own CPU time gives,
    /// spread over every core (its wall time can be no less). Above
    /// `limit`, this implementation cannot meet the target on this machine
    /// without using less CPU; it is not a floor for other clients.
    pub(crate) cpu_bound: Option<f64>,
}

/// The targets of the issue, checked on every scenario they apply to.
pub(crate) const TARGETS: [&str; 13] = [
    "hints: wire bytes <= 1.02x floor (Kafka-rules broker)",
    "hints: fetches <= 1.1x runs of wanted batches",
    "offsets only: wire bytes <= 1.3x floor (Kafka-rules broker)",
    "offsets only: fewer wire bytes than estimate",
    "offsets only: fewer fetches than estimate",
    "offsets only: fewer round trips than estimate",
    "offsets only: fewer wire bytes than estimate/rskafka",
    "offsets only: fewer fetches than estimate/rskafka",
    "offsets only: fewer round trips than estimate/rskafka",
    "wall time: walfetch (hints and offsets) <= estimate/rskafka",
    "wall time: walfetch hints <= the fastest other contender",
    "walfetch hints ÷ scan, wall time: <= 1.05",
    "walfetch offsets ÷ scan, wall time: <= 1.05",
];

/// Evaluates [`TARGETS`] over `rows`.
pub(crate) fn check_targets(rows: &[Row], kafka_rules_broker: &str) -> Vec<TargetCheck> {
    let mut by_scenario: BTreeMap<_, BTreeMap<Contender, &Row>> = BTreeMap::new();
    for row in rows {
        if let Some(c) = row.contender_kind {
            by_scenario
                .entry(row.scenario_key())
                .or_default()
                .insert(c, row);
        }
    }
    let mut out = Vec::new();
    for ((broker, conditions, workload, class, mode), rows) in &by_scenario {
        // What no client can go below on the wire, against the floor: the
        // floor with each fetch's response framing; it bounds the targets
        // on wire bytes over the floor.
        let framed = rows
            .get(&Contender::Hints)
            .map(|r| r.floor.kafka_framed_bytes as f64 / r.floor.kafka_bytes.max(1) as f64);
        let mut push = |target: &'static str, value: f64, limit: f64| {
            out.push(TargetCheck {
                target,
                broker: broker.clone(),
                conditions: *conditions,
                workload: workload.clone(),
                scenario: format!("{class} {mode}"),
                value,
                limit,
                met: value <= limit,
                floor: framed.filter(|_| target == TARGETS[0] || target == TARGETS[2]),
                cpu_bound: None,
            });
        };
        let kafka = broker == kafka_rules_broker;
        let (Some(hints), Some(offsets)) = (
            rows.get(&Contender::Hints),
            rows.get(&Contender::OffsetsOnly),
        ) else {
            continue;
        };
        if kafka {
            push(TARGETS[0], hints.amp_floor, 1.02);
            push(TARGETS[2], offsets.amp_floor, 1.3);
        }
        push(
            TARGETS[1],
            hints.fetches as f64 / hints.floor.runs.max(1) as f64,
            1.1,
        );
        // "Fewer": a ratio strictly below 1; reported against a limit of 1.
        // Against GreptimeDB's algorithm only where it runs as it is: on a
        // broker that skips the batch holding a mid-batch offset it runs
        // with walfetch's back-off, and no win over it counts.
        let fewer = |a: u64, b: u64| a as f64 / b.max(1) as f64;
        let estimate = |c: Contender| rows.get(&c).filter(|_| kafka);
        if let Some(est) = estimate(Contender::Estimate) {
            push(TARGETS[3], fewer(offsets.wire_bytes, est.wire_bytes), 1.0);
            push(TARGETS[4], fewer(offsets.fetches, est.fetches), 1.0);
            push(TARGETS[5], fewer(offsets.round_trips, est.round_trips), 1.0);
        }
        if let Some(rs) = estimate(Contender::EstimateRskafka) {
            push(TARGETS[6], fewer(offsets.wire_bytes, rs.wire_bytes), 1.0);
            push(TARGETS[7], fewer(offsets.fetches, rs.fetches), 1.0);
            push(TARGETS[8], fewer(offsets.round_trips, rs.round_trips), 1.0);
            let worst = hints.wall_ms.max(offsets.wall_ms);
            push(TARGETS[9], worst / rs.wall_ms.max(1e-9), 1.0);
        }
        let fastest_other = rows
            .iter()
            .filter(|(c, _)| {
                !matches!(
                    c,
                    Contender::Hints | Contender::OffsetsOnly | Contender::HintsFewestBytes
                ) && (kafka || !c.is_estimate())
            })
            .map(|(_, r)| r.wall_ms)
            .fold(f64::INFINITY, f64::min);
        if fastest_other.is_finite() {
            push(TARGETS[10], hints.wall_ms / fastest_other.max(1e-9), 1.0);
        }
        if let Some(scan) = rows.get(&Contender::Scan) {
            push(TARGETS[11], hints.wall_ms / scan.wall_ms.max(1e-9), 1.05);
            push(TARGETS[12], offsets.wall_ms / scan.wall_ms.max(1e-9), 1.05);
        }
    }
    // "Fewer" is strict: equal is not met.
    for t in &mut out {
        if t.target.contains("fewer") && t.value >= 1.0 {
            t.met = false;
        }
    }
    out
}

pub(crate) fn bytes(n: u64) -> String {
    let n = n as f64;
    if n >= 1024.0 * 1024.0 {
        format!("{:.2} MiB", n / 1024.0 / 1024.0)
    } else if n >= 1024.0 {
        format!("{:.1} KiB", n / 1024.0)
    } else {
        format!("{n} B")
    }
}

/// Writes one markdown table of `columns` per broker, in the order the
/// brokers first appear in `rows`: `cells` gives a row's.
pub(crate) fn broker_tables<R>(
    s: &mut String,
    rows: &[R],
    broker: impl Fn(&R) -> &str,
    columns: &str,
    cells: impl Fn(&R) -> Vec<String>,
) {
    let mut brokers: Vec<&str> = rows.iter().map(&broker).collect();
    brokers.dedup();
    for name in brokers {
        let mut table = Table::new(columns);
        for r in rows.iter().filter(|r| broker(r) == name) {
            table.row(cells(r));
        }
        let _ = write!(s, "\n### {name}\n\n{table}");
    }
}

/// The markdown report: one table per broker, then the targets.
pub(crate) fn markdown(
    rows: &[Row],
    targets: &[TargetCheck],
    header: &str,
    datasets: &[String],
) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{header}\n");
    for d in datasets {
        let _ = writeln!(s, "- {d}");
    }
    if rows.is_empty() {
        return s;
    }
    broker_tables(
        &mut s,
        rows,
        |r| &r.broker,
        "workload | scenario | link | contender | entries: | wire: | floor: | ×floor: | ×own: | fetches: | round trips: | runs / floor fetches: | wall ms median (min–max): | ÷ scan wall: | first entry ms: | peak buffered:",
        |r| {
            let wall = Spread {
                median: r.wall_ms,
                min: r.wall_ms_min,
                max: r.wall_ms_max,
            };
            vec![
                r.workload.clone(),
                format!("{} {} (r{})", r.class, r.index_mode, r.region),
                r.conditions.label(),
                r.contender.clone(),
                r.entries.to_string(),
                bytes(r.wire_bytes),
                bytes(r.floor.kafka_bytes),
                format!("{:.3}", r.amp_floor),
                format!("{:.2}", r.amp_own),
                r.fetches.to_string(),
                r.round_trips.to_string(),
                format!("{} / {}", r.floor.runs, r.floor.kafka_fetches),
                wall.cell(1),
                r.wall_over_scan
                    .map_or_else(|| "—".into(), |x| format!("{x:.3}")),
                r.time_to_first_ms
                    .map_or_else(|| "—".into(), |t| format!("{t:.1}")),
                bytes(r.peak_buffered_bytes),
            ]
        },
    );
    let _ = writeln!(
        s,
        "\n`wire`: bytes the proxy carried from the broker to the contender (median of the runs). `floor`: fewest bytes any consumer must receive under Kafka's cutting rules for the region's indexed entries and, past `last_index`, every record (computed from the broker's own batches). `×own`: wire over the region's own record bytes. `link`: the round trip the proxy added (`--link-rtt-us`; `loopback`: none) and, where set, what the scripted broker charged per Fetch answer (`--fetch-cost-us`). `÷ scan wall`: the row's wall time median over the scan's on the same scenario and link (walfetch rows). `round trips`: fetches on the critical path — fetches sent before any of them was answered share one (walfetch keeps up to 4 in flight; the estimate strategy and the scan send one at a time, so theirs equal their fetches). `runs`: maximal runs of adjacent wanted batches; `floor fetches`: the fetches the floor's own plan uses (it splits wherever that saves a byte, ignoring round trips). Medians of the measured runs; every run of every contender was checked against the written entries. The floor counts record bytes only; a miss of a target on wire bytes over the floor says when the floor with each fetch's response framing (the fewest bytes a Fetch response for the partition takes at any version the broker serves, `floor.rs`) is already over the limit: no client can meet it there.\n"
    );
    let _ = writeln!(s, "### Targets\n");
    let mut table = Table::new("target | met: | worst case | worst value: | limit:");
    for target in TARGETS {
        let all: Vec<&TargetCheck> = targets.iter().filter(|t| t.target == target).collect();
        if all.is_empty() {
            continue;
        }
        let met = all.iter().filter(|t| t.met).count();
        let worst = all
            .iter()
            .max_by(|a, b| a.value.total_cmp(&b.value))
            .copied();
        if let Some(w) = worst {
            table.row([
                target.to_owned(),
                format!(
                    "{} (met in {met} of {})",
                    if met == all.len() { "MET" } else { "NOT MET" },
                    all.len()
                ),
                format!(
                    "{} {} {} {}",
                    w.broker,
                    w.conditions.label(),
                    w.workload,
                    w.scenario
                ),
                format!("{:.3}", w.value),
                format!("{:.2}", w.limit),
            ]);
        }
    }
    s.push_str(&table.to_string());
    let missed: Vec<&TargetCheck> = targets.iter().filter(|t| !t.met).collect();
    if !missed.is_empty() {
        let _ = writeln!(s, "\nMissed, by how much (value / limit):\n");
        for t in missed {
            let bound = match t.floor {
                Some(f) if f > t.limit => format!(
                    "; cannot be met here by any client: with each fetch's response framing, the fewest bytes on the wire are {f:.3}x the floor"
                ),
                _ => String::new(),
            };
            let _ = writeln!(
                s,
                "- {}: {} {} {} {}: {:.3} vs {:.2} ({:+.1} %){bound}",
                t.target,
                t.broker,
                t.conditions.label(),
                t.workload,
                t.scenario,
                t.value,
                t.limit,
                (t.value / t.limit - 1.0) * 100.0
            );
        }
    }
    s
}
