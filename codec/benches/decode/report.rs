//! The ratio tables: this run's criterion medians and paired ratios, and
//! the targets' verdicts.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use walfetch_codec::Compression;

use crate::contenders::{BORROWED, BORROWED_LABEL, CRC, DECOMPRESS, KAFKA, OURS};
use crate::paired::{paired, PAIRED_BUDGET, PAIRED_ROUNDS};
use crate::workload::Case;

/// Target: uncompressed decode with CRC at this share of bare CRC32C throughput.
const CRC_TARGET: f64 = 0.8;
/// Target: uncompressed decode of 100 B records at this multiple of kafka-protocol.
const KAFKA_TARGET: f64 = 3.0;
/// Target: compressed decode takes at most 10% longer than the bare decompressor.
const DECOMPRESS_TARGET: f64 = 1.0 / 1.1;

/// A value for each of walfetch's two walks: owned records and borrowed ones.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Walks<T> {
    pub(crate) owned: T,
    pub(crate) borrowed: T,
}

impl Walks<Option<f64>> {
    /// "owned / borrowed", as ratios.
    fn show(self) -> String {
        format!("{} / {}", fmt_ratio(self.owned), fmt_ratio(self.borrowed))
    }
}

/// The walk the targets judge: the faster of the two (times in any unit),
/// the borrowed one on a tie.
fn judged(owned: Option<f64>, borrowed: Option<f64>) -> Walk {
    match (owned, borrowed) {
        (Some(o), Some(b)) if o < b => Walk::Owned,
        (Some(_), None) => Walk::Owned,
        _ => Walk::Borrowed,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Walk {
    Owned,
    Borrowed,
}

impl Walk {
    fn pick<T>(self, walks: Walks<T>) -> T {
        match self {
            Walk::Owned => walks.owned,
            Walk::Borrowed => walks.borrowed,
        }
    }

    fn label(self) -> &'static str {
        match self {
            Walk::Owned => OURS,
            Walk::Borrowed => BORROWED_LABEL,
        }
    }
}

/// Where criterion writes its results, found the way criterion finds it.
fn criterion_dir() -> PathBuf {
    if let Some(home) = std::env::var_os("CRITERION_HOME") {
        return home.into();
    }
    target_dir().join("criterion")
}

pub(crate) fn target_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR") {
        return dir.into();
    }
    // The workspace's default target directory, next to this package.
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(manifest).join("target")
}

/// The median (ns) criterion wrote for `group/id`, if written since `since`.
fn median_ns(dir: &Path, group: &str, id: &str, since: SystemTime) -> Option<f64> {
    let path = dir.join(group).join(id).join("new").join("estimates.json");
    let written = std::fs::metadata(&path).and_then(|m| m.modified()).ok()?;
    if written < since {
        return None; // Left over from an earlier run.
    }
    let json = std::fs::read_to_string(&path).ok()?;
    let median = &json[json.find("\"median\"")?..];
    let point = &median[median.find("\"point_estimate\"")? + "\"point_estimate\"".len()..];
    let number = point.trim_start_matches([':', ' ']);
    let end = number
        .find(|ch: char| !(ch.is_ascii_digit() || "+-.eE".contains(ch)))
        .unwrap_or(number.len());
    number[..end].parse().ok()
}

/// `ours` throughput over `alt` throughput (= alt time / ours time).
pub(crate) fn ratio(ours: Option<f64>, alt: Option<f64>) -> Option<f64> {
    Some(alt? / ours?)
}

fn fmt_ratio(r: Option<f64>) -> String {
    r.map_or_else(|| "—".into(), |r| format!("{r:.2}×"))
}

fn fmt_us(ns: Option<f64>) -> String {
    ns.map_or_else(|| "—".into(), |ns| format!("{:.1}", ns / 1e3))
}

/// GiB/s for `bytes` in `ns` nanoseconds, as criterion prints it.
fn fmt_rate(bytes: usize, ns: Option<f64>) -> String {
    ns.map_or_else(
        || "—".into(),
        |ns| format!("{:.2}", bytes as f64 / ns * 1e9 / (1u64 << 30) as f64),
    )
}

/// A size as a reader writes it: 100 B, 1 KiB, 1 MiB.
fn size_label(n: usize) -> String {
    match n {
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{} MiB", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{} KiB", n >> 10),
        n => format!("{n} B"),
    }
}

/// A target's verdict on the paired ratios and on the criterion medians.
type Verdicts = (Option<bool>, Option<bool>);

fn verdict(r: Option<f64>, target: f64) -> Option<bool> {
    Some(r? >= target)
}

fn fmt_verdict(paired: Option<bool>, criterion: Option<bool>, what: &str) -> Option<String> {
    let word = |met: bool| if met { "met" } else { "MISSED" };
    let paired = paired?;
    let criterion = criterion.map_or("—", word);
    Some(format!("{what}: {} (criterion: {criterion})", word(paired)))
}

/// Builds the ratio tables from this run's medians and paired ratios; `None`
/// if criterion wrote no estimates in this run.
pub(crate) fn report(cases: &[Case], since: SystemTime) -> Option<String> {
    let dir = criterion_dir();
    let mut medians = String::new();
    let mut pairs = String::new();
    let (mut met, mut missed, mut met_criterion) = (0, 0, 0);
    for case in cases {
        let group = case.group_name();
        let ours = median_ns(&dir, &group, OURS, since);
        let borrowed = median_ns(&dir, &group, BORROWED, since);
        if ours.is_none() && borrowed.is_none() {
            continue; // Filtered out, or a run without analysis (--test).
        }
        let kafka = median_ns(&dir, &group, KAFKA, since);
        let crc = median_ns(&dir, &group, CRC, since);
        let bare = median_ns(&dir, &group, DECOMPRESS, since);
        // The decoder must also check the CRC, which the bare decompressor does not.
        let bare_crc = bare.zip(crc).map(|(b, c)| b + c);
        let vs = |alt: Option<f64>| Walks {
            owned: ratio(ours, alt),
            borrowed: ratio(borrowed, alt),
        };
        let (vs_kafka, vs_crc) = (vs(kafka), vs(crc));
        let (vs_bare, vs_bare_crc) = (vs(bare), vs(bare_crc));
        let label = format!(
            "| {} | {} | {} ×{} |",
            case.codec.name(),
            size_label(case.record_size),
            size_label(case.batch_size),
            case.batches
        );
        let _ = writeln!(
            medians,
            "{label} {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            case.records,
            case.buf.len(),
            fmt_us(ours),
            fmt_rate(case.logical_len, ours),
            fmt_us(borrowed),
            fmt_rate(case.logical_len, borrowed),
            fmt_ratio(ratio(borrowed, ours)),
            fmt_us(kafka),
            vs_kafka.show(),
            fmt_us(crc),
            vs_crc.show(),
            fmt_us(bare),
            vs_bare.show(),
            fmt_us(bare_crc),
            vs_bare_crc.show(),
            judged(ours, borrowed).label(),
        );

        let p = paired(case);
        let walk = judged(Some(p.owned), Some(p.borrowed));
        let criterion_walk = judged(ours, borrowed);
        let (p_kafka, p_crc) = (p.vs(Some(p.kafka)), p.vs(Some(p.crc)));
        let p_bare = p.vs(p.decompress);
        let p_bare_crc = p.vs(p.decompress.map(|d| d + p.crc));
        let check = |paired: Walks<Option<f64>>, medians: Walks<Option<f64>>, target: f64| {
            (
                verdict(walk.pick(paired), target),
                verdict(criterion_walk.pick(medians), target),
            )
        };
        let checks: Vec<(Verdicts, &str)> = match case.codec {
            Compression::None if case.record_size == 100 => vec![
                (check(p_crc, vs_crc, CRC_TARGET), "≥0.8× crc32c"),
                (check(p_kafka, vs_kafka, KAFKA_TARGET), "≥3× kafka-protocol"),
            ],
            Compression::None => vec![(check(p_crc, vs_crc, CRC_TARGET), "≥0.8× crc32c")],
            _ => vec![(
                check(p_bare, vs_bare, DECOMPRESS_TARGET),
                "within 10% of decompress",
            )],
        };
        let mut targets = Vec::new();
        for ((paired_met, criterion_met), what) in checks {
            match paired_met {
                Some(true) => met += 1,
                Some(false) => missed += 1,
                None => {}
            }
            met_criterion += usize::from(criterion_met == Some(true));
            targets.extend(fmt_verdict(paired_met, criterion_met, what));
        }
        let _ = writeln!(
            pairs,
            "{label} {} | {} | {} | {} | {} | {} | {} |",
            fmt_ratio(Some(p.owned / p.borrowed)),
            p_kafka.show(),
            p_crc.show(),
            p_bare.show(),
            p_bare_crc.show(),
            walk.label(),
            targets.join("; "),
        );
    }
    if medians.is_empty() {
        return None;
    }
    let mut out = String::new();
    let _ = writeln!(out, "## walfetch-codec decode benchmark\n");
    let _ = writeln!(
        out,
        "One `cargo bench -p walfetch-codec --bench decode` run. Each case is a buffer of about \
         1 MiB of records (uncompressed) in batches of the given size. walfetch runs two ways: \
         `walfetch` iterates owned `Record`s (a reference-counted `Bytes` slice each), \
         `{BORROWED_LABEL}` lends `RecordRef`s with `Records::next_ref` (no reference count); \
         both check CRCs and touch every key and value. A ratio is walfetch's throughput over \
         the alternative's, i.e. the alternative's time over walfetch's (> 1: walfetch is \
         faster), written `owned / borrowed`; `borrowed vs owned` is the borrowed walk's \
         throughput over the owned walk's. `decompress` is the bare decompressor on each \
         batch's records section; `decompress+crc` adds crc32c over the buffer, work a decoder \
         that checks CRCs cannot skip. walfetch GiB/s counts the records' uncompressed size. \
         The targets judge the faster of the two walks (column `judged`): the borrowed one \
         wherever it is faster, as a consumer that needs no owned record would use it.\n"
    );
    let _ = writeln!(out, "### Criterion medians\n");
    let _ = writeln!(
        out,
        "| codec | record | batch ×count | records | buffer B | walfetch µs | walfetch GiB/s | \
         {BORROWED_LABEL} µs | {BORROWED_LABEL} GiB/s | borrowed vs owned | kafka-protocol µs | \
         vs kafka-protocol | crc32c µs | vs crc32c | decompress µs | vs decompress | \
         decompress+crc µs | vs decompress+crc | judged |"
    );
    let _ = writeln!(
        out,
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    );
    out.push_str(&medians);
    let _ = writeln!(out, "\n### Paired ratios and targets\n");
    let _ = writeln!(
        out,
        "Each contender's 20th percentile of per-iteration times, the contenders interleaved \
         iteration by iteration ({}–{} rounds, about {} s a case) after the criterion groups, on \
         the same buffers: on a shared machine, milliseconds-long preemptions land on whichever \
         iteration runs, and a low quantile of interleaved iterations drops them for every \
         contender alike, where sequential criterion groups each see a different share. Ratios \
         are `owned / borrowed`. Targets are judged on these, for the faster walk (`judged`); \
         the verdict on the criterion medians (for the walk faster there) is in brackets. \
         Targets: `none` at ≥ {CRC_TARGET}× bare crc32c, and ≥ {KAFKA_TARGET}× kafka-protocol \
         with 100 B records; compressed within 10% of the bare decompressor's time (ratio ≥ \
         {DECOMPRESS_TARGET:.3}).\n",
        PAIRED_ROUNDS.0,
        PAIRED_ROUNDS.1,
        PAIRED_BUDGET.as_secs_f64()
    );
    let _ = writeln!(
        out,
        "| codec | record | batch ×count | borrowed vs owned | vs kafka-protocol | vs crc32c | \
         vs decompress | vs decompress+crc | judged | targets |"
    );
    let _ = writeln!(out, "|---|---|---|---:|---:|---:|---:|---:|---|---|");
    out.push_str(&pairs);
    let _ = writeln!(
        out,
        "\nTargets met (paired): {met}; missed: {missed}. Met on criterion medians: \
         {met_criterion} of {}.",
        met + missed
    );
    Some(out)
}
