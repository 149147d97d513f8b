//! Decode throughput of `walfetch-codec`, with its alternatives in the same run.
//!
//! Every case is one buffer of record batches, like the `records` field of a
//! Fetch response at the default 1 MiB `max.partition.fetch.bytes`: about
//! 1 MiB of records (measured uncompressed) split into batches of 16 KiB or
//! 1 MiB, for each codec and for records of 100 B, 1 KiB and 16 KiB (key plus
//! value). Payloads are seeded, deterministic, JSON-like WAL entries with a
//! share of random characters, so they compress partly (about 2:1 with gzip).
//!
//! Each case is a criterion group with up to five benchmarks on the same bytes:
//! - `walfetch`: our decoder, CRC on, every record's key and value touched,
//!   iterating owned `Record`s (`Records` as an `Iterator`);
//! - `walfetch-borrowed` ("walfetch (borrowed)" in the tables): the same,
//!   iterating borrowed `RecordRef`s with `Records::next_ref`;
//! - `kafka-protocol`: `RecordBatchDecoder::decode_all` on the same buffer;
//! - `crc32c`: bare `crc32c::crc32c` over the whole buffer;
//! - `decompress` (compressed cases): the bare decompressor on each batch's
//!   records section, into a `Vec` of the known decompressed size.
//!
//! Throughput is the size of the same records encoded uncompressed (for an
//! uncompressed case, the buffer itself), so every benchmark of a case uses
//! the same byte count and throughput ratios are inverse time ratios.
//!
//! After the groups, the medians of this run are read back from criterion's
//! `estimates.json` files (only files written by this run are used) and a
//! ratio table is printed and written to `<target>/codec-bench.md`. Both
//! walfetch contenders appear in it; the targets judge the faster of the two.
//!
//! Full run: `cargo bench -p walfetch-codec --bench decode`; smoke run:
//! `cargo bench -p walfetch-codec --bench decode -- --test`.

use std::fmt::Write as _;
use std::hint::black_box;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use criterion::{Criterion, Throughput};
use kafka_protocol::records::RecordBatchDecoder;
use rand::rngs::StdRng;
use rand::{RngExt as _, SeedableRng};
use walfetch_codec::{BatchBuilder, Batches, Compression, DecodeOptions, NewRecord, HEADER_LEN};

/// Uncompressed record bytes in every case's buffer.
const BUFFER_RECORD_BYTES: usize = 1 << 20;
const RECORD_SIZES: [usize; 3] = [100, 1 << 10, 16 << 10];
const BATCH_SIZES: [usize; 2] = [16 << 10, 1 << 20];

const OURS: &str = "walfetch";
/// Criterion's id of the borrowed walk; the tables call it [`BORROWED_LABEL`].
const BORROWED: &str = "walfetch-borrowed";
const BORROWED_LABEL: &str = "walfetch (borrowed)";
const KAFKA: &str = "kafka-protocol";
const CRC: &str = "crc32c";
const DECOMPRESS: &str = "decompress";

/// Target: uncompressed decode with CRC at this share of bare CRC32C throughput.
const CRC_TARGET: f64 = 0.8;
/// Target: uncompressed decode of 100 B records at this multiple of kafka-protocol.
const KAFKA_TARGET: f64 = 3.0;
/// Target: compressed decode takes at most 10% longer than the bare decompressor.
const DECOMPRESS_TARGET: f64 = 1.0 / 1.1;

/// One benchmark case: a buffer of batches and what decoding it must yield.
struct Case {
    codec: Compression,
    record_size: usize,
    batch_size: usize,
    /// The buffer every benchmark of the case reads.
    buf: Bytes,
    /// Each batch's records section (compressed) and its decompressed length.
    payloads: Vec<(Bytes, usize)>,
    records: usize,
    batches: usize,
    /// Size of the same batches uncompressed: the throughput byte count.
    logical_len: usize,
    /// Sum of key and value lengths, to check every decoder saw everything.
    key_value_bytes: usize,
}

impl Case {
    fn group_name(&self) -> String {
        format!(
            "decode-{}-r{}-b{}",
            self.codec.name(),
            size_name(self.record_size),
            size_name(self.batch_size)
        )
    }
}

fn size_name(n: usize) -> String {
    match n {
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{}m", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{}k", n >> 10),
        n => n.to_string(),
    }
}

const TABLES: [&str; 6] = [
    "orders",
    "customers",
    "shipments",
    "invoices",
    "payments",
    "stock",
];
const OPS: [&str; 3] = ["INSERT", "UPDATE", "DELETE"];
const WORDS: [&str; 16] = [
    "pending",
    "shipped",
    "delivered",
    "cancelled",
    "warehouse",
    "priority",
    "standard",
    "express",
    "refund",
    "customer",
    "address",
    "quantity",
    "discount",
    "currency",
    "EUR",
    "notes",
];
const BASE64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// One WAL entry of exactly `size` bytes (key plus value), as key and value.
fn wal_entry(rng: &mut StdRng, lsn: u64, size: usize) -> (Bytes, Bytes) {
    let table = TABLES[rng.random_range(0..TABLES.len())];
    let row = rng.random_range(0..1_000_000);
    let key = format!("{table}:{row:08}");
    let value_len = size.saturating_sub(key.len()).max(2);
    let mut value = format!(
        r#"{{"lsn":{lsn},"ts":{},"op":"{}","tx":{},"row":{{"id":{row},"d":""#,
        1_700_000_000_000u64 + lsn * 3 + rng.random_range(0..3),
        OPS[rng.random_range(0..OPS.len())],
        lsn / 7,
    )
    .into_bytes();
    // The rest: runs of vocabulary words (compressible) and of random base64
    // characters (6 bits of entropy a byte), about 3:2.
    while value.len() + 3 < value_len {
        if rng.random_ratio(3, 5) {
            value.extend_from_slice(WORDS[rng.random_range(0..WORDS.len())].as_bytes());
            value.push(b' ');
        } else {
            for _ in 0..rng.random_range(8..32) {
                value.push(BASE64[rng.random_range(0..64)]);
            }
        }
    }
    value.truncate(value_len - 3);
    value.extend_from_slice(br#""}}"#);
    value.truncate(value_len);
    (key.into(), value.into())
}

fn build_case(codec: Compression, record_size: usize, batch_size: usize) -> Case {
    let mut rng =
        StdRng::seed_from_u64(0x5eed ^ ((record_size as u64) << 8) ^ ((batch_size as u64) << 32));
    let batches = (BUFFER_RECORD_BYTES / batch_size).max(1);
    let per_batch = (batch_size / record_size).max(1);
    let mut buf = Vec::new();
    let mut payloads = Vec::new();
    let (mut records, mut logical_len, mut key_value_bytes) = (0, 0, 0);
    let mut lsn = 0u64;
    for _ in 0..batches {
        let new_records: Vec<NewRecord> = (0..per_batch)
            .map(|i| {
                let (key, value) = wal_entry(&mut rng, lsn, record_size);
                key_value_bytes += key.len() + value.len();
                lsn += 1;
                NewRecord {
                    offset_delta: i as i32,
                    timestamp: 1_700_000_000_000 + lsn as i64 * 3,
                    key: Some(key),
                    value: Some(value),
                    headers: Vec::new(),
                }
            })
            .collect();
        let encoded = BatchBuilder::new(records as i64)
            .compression(codec)
            .encode(&new_records)
            .expect("benchmark records encode");
        let decompressed_len = encoded.record_ranges.last().map_or(0, |r| match codec {
            Compression::None => r.end - HEADER_LEN,
            _ => r.end,
        });
        records += per_batch;
        logical_len += HEADER_LEN + decompressed_len;
        payloads.push((encoded.bytes.slice(HEADER_LEN..), decompressed_len));
        buf.extend_from_slice(&encoded.bytes);
    }
    let case = Case {
        codec,
        record_size,
        batch_size,
        buf: buf.into(),
        payloads,
        records,
        batches,
        logical_len,
        key_value_bytes,
    };
    // Every contender must see the same records before any is timed.
    assert_eq!(
        decode_ours(&case.buf),
        case.key_value_bytes,
        "{}: walfetch",
        case.group_name()
    );
    assert_eq!(
        decode_borrowed(&case.buf),
        case.key_value_bytes,
        "{}: walfetch (borrowed)",
        case.group_name()
    );
    assert_eq!(
        decode_kafka(&case.buf),
        case.key_value_bytes,
        "{}: kafka-protocol",
        case.group_name()
    );
    if codec != Compression::None {
        let expected: usize = case.payloads.iter().map(|(_, n)| n).sum();
        assert_eq!(
            decompress_bare(codec, &case.payloads),
            expected,
            "{}: decompress",
            case.group_name()
        );
    }
    case
}

/// Our decoder: every batch (CRC checked), every record, key and value touched.
fn decode_ours(buf: &Bytes) -> usize {
    let mut sum = 0;
    for batch in Batches::new(buf.clone(), DecodeOptions::default()) {
        let batch = batch.expect("walfetch decodes the batch");
        for record in batch.records().expect("walfetch opens the records") {
            let record = record.expect("walfetch decodes the record");
            let key = black_box(record.key());
            let value = black_box(record.value());
            sum += key.map_or(0, <[u8]>::len) + value.map_or(0, <[u8]>::len);
        }
    }
    sum
}

/// Our decoder as [`decode_ours`], but lending each record with
/// `Records::next_ref` (no reference count per record).
fn decode_borrowed(buf: &Bytes) -> usize {
    let mut sum = 0;
    for batch in Batches::new(buf.clone(), DecodeOptions::default()) {
        let batch = batch.expect("walfetch decodes the batch");
        let mut records = batch.records().expect("walfetch opens the records");
        while let Some(record) = records.next_ref() {
            let record = record.expect("walfetch decodes the record");
            let key = black_box(record.key());
            let value = black_box(record.value());
            sum += key.map_or(0, <[u8]>::len) + value.map_or(0, <[u8]>::len);
        }
    }
    sum
}

/// kafka-protocol's decoder (it checks the CRC too) on the same buffer.
fn decode_kafka(buf: &Bytes) -> usize {
    let mut input = buf.clone();
    let sets =
        RecordBatchDecoder::decode_all(&mut input).expect("kafka-protocol decodes the buffer");
    let mut sum = 0;
    for record in sets.iter().flat_map(|set| &set.records) {
        let key = black_box(record.key.as_deref());
        let value = black_box(record.value.as_deref());
        sum += key.map_or(0, <[u8]>::len) + value.map_or(0, <[u8]>::len);
    }
    sum
}

/// The bare decompressor on each batch's records section, into a `Vec` sized
/// for the known output. Returns the bytes produced.
fn decompress_bare(codec: Compression, payloads: &[(Bytes, usize)]) -> usize {
    let mut total = 0;
    for (payload, len) in payloads {
        let out = match codec {
            Compression::None => payload.to_vec(),
            Compression::Gzip => {
                let mut out = Vec::with_capacity(*len);
                flate2::read::MultiGzDecoder::new(&payload[..])
                    .read_to_end(&mut out)
                    .expect("gzip decompresses");
                out
            }
            Compression::Snappy => xerial_snappy(payload, *len),
            Compression::Lz4 => {
                let mut out = Vec::with_capacity(*len);
                lz4_flex::frame::FrameDecoder::new(&payload[..])
                    .read_to_end(&mut out)
                    .expect("lz4 decompresses");
                out
            }
            Compression::Zstd => zstd::bulk::decompress(payload, *len).expect("zstd decompresses"),
        };
        total += black_box(out).len();
    }
    total
}

/// Decompresses an xerial-framed snappy payload (16-byte header, then blocks
/// of a big-endian `u32` length and a raw snappy block) into one `Vec`.
fn xerial_snappy(payload: &[u8], len: usize) -> Vec<u8> {
    let mut out = vec![0; len];
    let mut decoder = snap::raw::Decoder::new();
    let (mut pos, mut filled) = (16, 0);
    while pos < payload.len() {
        let block_len =
            u32::from_be_bytes(payload[pos..pos + 4].try_into().expect("4 bytes")) as usize;
        let block = &payload[pos + 4..pos + 4 + block_len];
        filled += decoder
            .decompress(block, &mut out[filled..])
            .expect("snappy decompresses");
        pos += 4 + block_len;
    }
    out.truncate(filled);
    out
}

fn bench_case(c: &mut Criterion, case: &Case) {
    let mut group = c.benchmark_group(case.group_name());
    group.throughput(Throughput::Bytes(case.logical_len as u64));
    group.bench_function(OURS, |b| b.iter(|| decode_ours(black_box(&case.buf))));
    group.bench_function(BORROWED, |b| {
        b.iter(|| decode_borrowed(black_box(&case.buf)))
    });
    group.bench_function(KAFKA, |b| b.iter(|| decode_kafka(black_box(&case.buf))));
    group.bench_function(CRC, |b| b.iter(|| crc32c::crc32c(black_box(&case.buf))));
    if case.codec != Compression::None {
        group.bench_function(DECOMPRESS, |b| {
            b.iter(|| decompress_bare(case.codec, black_box(&case.payloads)))
        });
    }
    group.finish();
}

/// Time budget of the paired measurement of one case, and its round limits.
const PAIRED_BUDGET: Duration = Duration::from_millis(1500);
const PAIRED_ROUNDS: (u32, u32) = (15, 300);
/// The quantile of per-iteration times the paired measurement reports.
const PAIRED_QUANTILE: f64 = 0.2;

/// Ratios measured by interleaving the contenders iteration by iteration (in
/// alternating order) on the same buffer, each contender's time being the
/// 20th percentile of its iteration times. On a shared machine a process
/// loses the CPU for milliseconds at a time; that lands on whichever
/// iteration is running, and sequential criterion groups see different
/// amounts of it. A low quantile of interleaved iterations drops those
/// preempted iterations for every contender alike.
#[derive(Debug, Default, Clone, Copy)]
struct Paired {
    /// Each contender's time (s): walfetch owned, walfetch borrowed,
    /// kafka-protocol, crc32c, the bare decompressor.
    owned: f64,
    borrowed: f64,
    kafka: f64,
    crc: f64,
    decompress: Option<f64>,
}

impl Paired {
    /// The ratios of both walfetch walks over the alternative taking `alt`.
    fn vs(&self, alt: Option<f64>) -> Walks<Option<f64>> {
        Walks {
            owned: ratio(Some(self.owned), alt),
            borrowed: ratio(Some(self.borrowed), alt),
        }
    }
}

fn paired(case: &Case) -> Paired {
    let codec = case.codec;
    let mut contenders: Vec<Box<dyn Fn() -> usize + '_>> = vec![
        Box::new(|| decode_ours(black_box(&case.buf))),
        Box::new(|| decode_borrowed(black_box(&case.buf))),
        Box::new(|| decode_kafka(black_box(&case.buf))),
        Box::new(|| crc32c::crc32c(black_box(&case.buf)) as usize),
    ];
    if codec != Compression::None {
        contenders.push(Box::new(|| {
            decompress_bare(codec, black_box(&case.payloads))
        }));
    }
    // Rounds that fit the budget, from one warm round.
    let round_start = Instant::now();
    for run in &contenders {
        black_box(run());
    }
    let one_round = round_start.elapsed().max(Duration::from_micros(1));
    let rounds = (PAIRED_BUDGET.as_nanos() / one_round.as_nanos())
        .clamp(u128::from(PAIRED_ROUNDS.0), u128::from(PAIRED_ROUNDS.1)) as u32;
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); contenders.len()];
    for round in 0..rounds {
        for step in 0..contenders.len() {
            let i = if round % 2 == 0 {
                step
            } else {
                contenders.len() - 1 - step
            };
            let start = Instant::now();
            black_box(contenders[i]());
            times[i].push(start.elapsed().as_secs_f64());
        }
    }
    let quantiles: Vec<f64> = times
        .iter_mut()
        .map(|t| {
            t.sort_by(f64::total_cmp);
            t[((t.len() - 1) as f64 * PAIRED_QUANTILE) as usize]
        })
        .collect();
    Paired {
        owned: quantiles[0],
        borrowed: quantiles[1],
        kafka: quantiles[2],
        crc: quantiles[3],
        decompress: quantiles.get(4).copied(),
    }
}

/// A value for each of walfetch's two walks: owned records and borrowed ones.
#[derive(Debug, Clone, Copy)]
struct Walks<T> {
    owned: T,
    borrowed: T,
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

fn target_dir() -> PathBuf {
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
fn report(cases: &[Case], since: SystemTime) -> Option<String> {
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

fn main() {
    let started = SystemTime::now();
    let args: Vec<String> = std::env::args().collect();
    let analysing = !args
        .iter()
        .any(|a| a == "--test" || a == "--list" || a == "--profile-time");

    let mut criterion = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_millis(1500))
        .nresamples(10_000)
        .configure_from_args();

    let mut cases = Vec::new();
    for codec in Compression::ALL {
        for record_size in RECORD_SIZES {
            for batch_size in BATCH_SIZES {
                let case = build_case(codec, record_size, batch_size);
                bench_case(&mut criterion, &case);
                cases.push(case);
            }
        }
    }
    criterion.final_summary();

    if !analysing {
        return;
    }
    println!("\nPaired, interleaved measurement of the cases criterion ran...");
    let Some(table) = report(&cases, started) else {
        println!("\nNo criterion estimates were written by this run: no ratio table.");
        return;
    };
    println!("\n{table}");
    let path = target_dir().join("codec-bench.md");
    match std::fs::write(&path, &table) {
        Ok(()) => println!("Wrote {}", path.display()),
        Err(err) => eprintln!("Could not write {}: {err}", path.display()),
    }
}
