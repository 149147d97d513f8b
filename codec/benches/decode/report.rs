//! The ratio tables: this run's criterion medians and paired ratios, and
//! the targets' verdicts.
//!
//! The headline is like for like: walfetch's owned walk (`Records` as an
//! `Iterator` of owned `Record`s) against kafka-protocol's decoder, which
//! builds a `Vec<Record>` of owned records. The borrowed walk
//! (`Records::next_ref`) is shown beside it in its own columns and judged by
//! no target. A compressed case is judged against decompress + CRC32C of the
//! same bytes, the least a decoder that checks CRCs can take; the bare
//! decompressor is shown beside it.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use walfetch_codec::Compression;

use crate::contenders::{BORROWED, CRC, DECOMPRESS, KAFKA, OURS};
use crate::paired::{paired, PAIRED_BUDGET, PAIRED_QUANTILE, PAIRED_ROUNDS};
use crate::workload::Case;

/// Target: uncompressed decode at this share of bare CRC32C throughput.
const CRC_TARGET: f64 = 0.8;
/// Target: uncompressed decode of 100 B records at this multiple of
/// kafka-protocol's throughput.
const KAFKA_TARGET: f64 = 3.0;
/// Target: compressed decode takes at most 10% longer than decompress +
/// CRC32C of the same bytes.
const DECOMPRESS_CRC_TARGET: f64 = 1.0 / 1.1;

/// Each contender's time on one case, in one unit (criterion's median in
/// ns, or the paired quantile in s); `None` where it did not run.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Times {
    /// walfetch, owned records (`Records::next`).
    pub(crate) owned: Option<f64>,
    /// walfetch, borrowed records (`Records::next_ref`).
    pub(crate) borrowed: Option<f64>,
    pub(crate) kafka: Option<f64>,
    pub(crate) crc: Option<f64>,
    /// The bare decompressor (compressed cases).
    pub(crate) decompress: Option<f64>,
}

impl Times {
    /// Decompress + CRC32C of the same bytes.
    fn decompress_crc(&self) -> Option<f64> {
        Some(self.decompress? + self.crc?)
    }

    /// The owned walk's throughput over the alternative taking `alt`.
    fn owned_vs(&self, alt: Option<f64>) -> Option<f64> {
        ratio(self.owned, alt)
    }

    /// The table's ratio cells, in the order of [`RATIO_COLUMNS`].
    fn ratio_cells(&self) -> String {
        [
            self.owned_vs(self.kafka),
            self.owned_vs(self.crc),
            self.owned_vs(self.decompress_crc()),
            self.owned_vs(self.decompress),
            ratio(self.borrowed, self.kafka),
            ratio(self.borrowed, self.owned),
        ]
        .map(fmt_ratio)
        .join(" | ")
    }
}

/// The ratio columns both tables end with (header cells, alignments).
const RATIO_COLUMNS: (&str, &str) = (
    "vs kafka-protocol | vs crc32c | vs decompress+crc | vs decompress | \
     borrowed vs kafka-protocol | borrowed vs owned",
    "---:|---:|---:|---:|---:|---:",
);

/// A target: the owned walk's throughput over an alternative's must be at
/// least `min`.
struct Target {
    what: &'static str,
    alt: fn(&Times) -> Option<f64>,
    min: f64,
}

impl Target {
    fn met(&self, times: &Times) -> Option<bool> {
        Some(times.owned_vs((self.alt)(times))? >= self.min)
    }
}

/// The targets of `case`.
fn targets(case: &Case) -> Vec<Target> {
    let crc = Target {
        what: "≥0.8× crc32c",
        alt: |t| t.crc,
        min: CRC_TARGET,
    };
    match case.codec {
        Compression::None if case.record_size == 100 => vec![
            crc,
            Target {
                what: "≥3× kafka-protocol",
                alt: |t| t.kafka,
                min: KAFKA_TARGET,
            },
        ],
        Compression::None => vec![crc],
        _ => vec![Target {
            what: "within 10% of decompress+crc",
            alt: Times::decompress_crc,
            min: DECOMPRESS_CRC_TARGET,
        }],
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
fn ratio(ours: Option<f64>, alt: Option<f64>) -> Option<f64> {
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

/// Builds the ratio tables from this run's medians and paired ratios; `None`
/// if criterion wrote no estimates in this run.
pub(crate) fn report(cases: &[Case], since: SystemTime) -> Option<String> {
    let dir = criterion_dir();
    let mut medians = String::new();
    let mut pairs = String::new();
    let (mut met, mut missed, mut met_criterion) = (0, 0, 0);
    for case in cases {
        let group = case.group_name();
        let median = |id: &str| median_ns(&dir, &group, id, since);
        let m = Times {
            owned: median(OURS),
            borrowed: median(BORROWED),
            kafka: median(KAFKA),
            crc: median(CRC),
            decompress: median(DECOMPRESS),
        };
        if m.owned.is_none() && m.borrowed.is_none() {
            continue; // Filtered out, or a run without analysis (--test).
        }
        let label = format!(
            "| {} | {} | {} ×{} |",
            case.codec_label(),
            size_label(case.record_size),
            size_label(case.batch_size),
            case.batches
        );
        let _ = writeln!(
            medians,
            "{label} {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            case.records,
            case.buf.len(),
            fmt_us(m.owned),
            fmt_rate(case.logical_len, m.owned),
            fmt_us(m.borrowed),
            fmt_us(m.kafka),
            fmt_us(m.crc),
            fmt_us(m.decompress),
            m.ratio_cells(),
        );

        let p = paired(case);
        let mut verdicts = Vec::new();
        for target in targets(case) {
            let (paired_met, criterion_met) = (target.met(&p), target.met(&m));
            let Some(paired_met) = paired_met else {
                continue;
            };
            if paired_met {
                met += 1;
            } else {
                missed += 1;
            }
            met_criterion += usize::from(criterion_met == Some(true));
            let word = |met: bool| if met { "met" } else { "MISSED" };
            verdicts.push(format!(
                "{}: {} (criterion: {})",
                target.what,
                word(paired_met),
                criterion_met.map_or("—", word)
            ));
        }
        let _ = writeln!(
            pairs,
            "{label} {} | {} |",
            p.ratio_cells(),
            verdicts.join("; ")
        );
    }
    if medians.is_empty() {
        return None;
    }
    let (ratio_head, ratio_align) = RATIO_COLUMNS;
    let mut out = String::new();
    let _ = writeln!(out, "## walfetch-codec decode benchmark\n");
    let _ = writeln!(
        out,
        "One `cargo bench -p walfetch-codec --bench decode` run. Each case is a buffer of about \
         1 MiB of records (uncompressed) in batches of the given size. `walfetch` is the owned \
         walk: `Records` as an `Iterator` of owned `Record`s (a reference-counted `Bytes` slice \
         each), like for like with kafka-protocol's decoder, which builds a `Vec<Record>` of \
         owned records; both check CRCs, and every key and value is touched. A ratio is the \
         owned walk's throughput over the alternative's, i.e. the alternative's time over \
         walfetch's (> 1: walfetch is faster). `decompress` is the bare decompressor on each \
         batch's records section; `decompress+crc` adds crc32c over the buffer, work a decoder \
         that checks CRCs cannot skip, and is what compressed cases are judged against. The \
         borrowed walk (`Records::next_ref`, lending `RecordRef`s without a reference count) \
         is shown in its own columns: `borrowed vs kafka-protocol`, and `borrowed vs owned` (its \
         throughput over the owned walk's); no target judges it. walfetch GiB/s counts the \
         records' uncompressed size.\n"
    );
    let _ = writeln!(out, "### Criterion medians\n");
    let _ = writeln!(
        out,
        "| codec | record | batch ×count | records | buffer B | walfetch µs | walfetch GiB/s | \
         borrowed µs | kafka-protocol µs | crc32c µs | decompress µs | {ratio_head} |"
    );
    let _ = writeln!(
        out,
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|{ratio_align}|"
    );
    out.push_str(&medians);
    let _ = writeln!(out, "\n### Paired ratios and targets\n");
    let _ = writeln!(
        out,
        "Each contender's {:.0}th percentile of per-iteration times, the contenders interleaved \
         iteration by iteration ({}–{} rounds, about {} s a case) after the criterion groups, on \
         the same buffers: on a shared machine, milliseconds-long preemptions land on whichever \
         iteration runs, and a low quantile of interleaved iterations drops them for every \
         contender alike, where sequential criterion groups each see a different share. Targets \
         are judged on these, for the owned walk; the verdict on the criterion medians is in \
         parentheses. Targets: `none` at ≥ {CRC_TARGET}× bare crc32c, and ≥ {KAFKA_TARGET}× \
         kafka-protocol with 100 B records; compressed within 10% of decompress + crc32c's time \
         (ratio ≥ {DECOMPRESS_CRC_TARGET:.3}).\n",
        PAIRED_QUANTILE * 100.0,
        PAIRED_ROUNDS.0,
        PAIRED_ROUNDS.1,
        PAIRED_BUDGET.as_secs_f64()
    );
    let _ = writeln!(
        out,
        "| codec | record | batch ×count | {ratio_head} | targets |"
    );
    let _ = writeln!(out, "|---|---|---|{ratio_align}|---|");
    out.push_str(&pairs);
    let _ = writeln!(
        out,
        "\nTargets met (paired, owned walk): {met}; missed: {missed}. Met on criterion medians: \
         {met_criterion} of {}.",
        met + missed
    );
    Some(out)
}
