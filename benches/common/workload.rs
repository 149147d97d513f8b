//! The seeded WAL workload: which region writes what, when, and how the
//! writers group entries into batches.
//!
//! - `regions` regions share one partition; each entry's region is drawn
//!   from a Zipf distribution over the regions' ranks (rank 1 is the
//!   hottest; exponent `zipf`).
//! - Entry sizes: 97 % log-uniform in 200 B – 4 KiB, 3 % log-uniform in
//!   4 KiB – 256 KiB. Payloads are JSON-like text with a random body from a
//!   16-letter alphabet, so they compress about 2:1; one entry in ten
//!   carries two record headers.
//! - Entries arrive as a Poisson process (`rate` per second, all writers
//!   together). With two writers, each owns half of the regions (odd and
//!   even ranks) and both append to the same partition.
//! - Each writer forms batches as a real one does: a batch closes when its
//!   first entry has waited `linger`, or when the next entry would push it
//!   past `max_batch_bytes` (measured as [`WalWriter`](walfetch::writer::WalWriter) measures an entry).
//!   Batches are produced in the order they close, so the two writers'
//!   batches interleave.
//! - Layout: *interleaved* (one open batch per writer, so a batch holds
//!   entries of many regions), or *region-pure*, as GreptimeDB writes
//!   (each region's write request becomes its own produce request, so a
//!   batch holds one region: one open batch per region, same linger and
//!   size cap).
//!
//! The timing is simulated on a virtual clock and every draw comes from one
//! `StdRng` seeded with the spec's seed, so the same seed always gives the
//! same batches (and the same floor) with the locked `rand` version;
//! [`write`] then drives the real [`WalWriter`](walfetch::writer::WalWriter)s (with
//! [`walfetch_support::writers`]), flushing each at the simulated batch
//! boundaries, so the writer encodes, produces and indexes exactly those
//! batches.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use rand::rngs::StdRng;
use rand::{Rng as _, RngExt as _, SeedableRng};
use walfetch::cluster::Cluster;
use walfetch::codec::{record_checksum_header, Compression, RECORD_CHECKSUM_HEADER};
use walfetch::index::{RegionId, WalIndex};
use walfetch::writer::{WalEntry, WriterConfig, WriterMode};
use walfetch_support::writers::{write_rounds, Round, Rounds};

/// Log-uniform in `[lo, hi)`.
fn log_uniform(rng: &mut StdRng, lo: f64, hi: f64) -> f64 {
    rng.random_range(lo.ln()..hi.ln()).exp()
}

/// What to write; see the module docs.
#[derive(Debug, Clone)]
pub(crate) struct WorkloadSpec {
    /// Short name for tables: `<compression>-<writers>w`.
    pub(crate) name: String,
    pub(crate) regions: u64,
    pub(crate) zipf: f64,
    pub(crate) entries: usize,
    /// Entries per second, all writers together.
    pub(crate) rate: f64,
    pub(crate) linger: Duration,
    pub(crate) max_batch_bytes: usize,
    pub(crate) writers: usize,
    pub(crate) compression: Compression,
    /// One region per batch (GreptimeDB's layout) rather than interleaved.
    pub(crate) region_pure: bool,
    pub(crate) seed: u64,
}

/// One entry as generated.
/// A batch as the simulated writer closes it.
#[derive(Debug, Clone)]
pub(crate) struct PlannedBatch {
    pub(crate) writer: usize,
    pub(crate) entries: Vec<WalEntry>,
}

/// An entry as written: its offset and content.
#[derive(Debug, Clone)]
pub(crate) struct WrittenEntry {
    pub(crate) offset: i64,
    pub(crate) region: RegionId,
    pub(crate) payload: Bytes,
    pub(crate) headers: Vec<(Bytes, Option<Bytes>)>,
}

/// What [`write`] left in the partition.
#[derive(Debug)]
pub(crate) struct Written {
    /// Every entry, in offset order.
    pub(crate) entries: Vec<WrittenEntry>,
    /// The writers' indexes, merged (hints included).
    pub(crate) index: WalIndex,
    /// The log end offset.
    pub(crate) end: i64,
    /// Batches produced.
    pub(crate) batches: usize,
}

const ALPHABET: &[u8; 16] = b"abcdefghijklmnop";

fn entry_size(rng: &mut StdRng) -> usize {
    if rng.random_bool(0.97) {
        log_uniform(rng, 200.0, 4096.0) as usize
    } else {
        log_uniform(rng, 4096.0, 262_144.0) as usize
    }
}

fn payload(rng: &mut StdRng, region: RegionId, seq: usize, micros: u64, size: usize) -> Bytes {
    let mut out =
        format!("{{\"region\":{region},\"seq\":{seq},\"ts\":{micros},\"rows\":\"").into_bytes();
    let head = out.len();
    let body = size.saturating_sub(head + 2).max(1);
    out.resize(head + body, 0);
    // Random bytes, four bits of each kept: a letter of the alphabet.
    rng.fill_bytes(&mut out[head..]);
    for byte in &mut out[head..] {
        *byte = ALPHABET[usize::from(*byte & 15)];
    }
    out.extend_from_slice(b"\"}");
    out.into()
}

/// Cumulative Zipf weights over ranks `1..=regions`.
fn zipf_cdf(regions: u64, exponent: f64) -> Vec<f64> {
    let mut acc = 0.0;
    let mut cdf: Vec<f64> = (1..=regions)
        .map(|k| {
            acc += 1.0 / (k as f64).powf(exponent);
            acc
        })
        .collect();
    for c in &mut cdf {
        *c /= acc;
    }
    cdf
}

/// One entry as it arrives: when (µs on the virtual clock), from which
/// writer, and what.
#[derive(Debug, Clone)]
pub(crate) struct Arrival {
    pub(crate) at_micros: u64,
    pub(crate) writer: usize,
    pub(crate) entry: WalEntry,
}

/// The workload's entries in arrival order (the writer bench appends them
/// at these times; [`generate`] batches them as the simulated writers do).
pub(crate) fn arrivals(spec: &WorkloadSpec) -> Vec<Arrival> {
    let mut rng = StdRng::seed_from_u64(spec.seed);
    let cdf = zipf_cdf(spec.regions.max(1), spec.zipf);
    let writers = spec.writers.max(1);
    let mut now = 0u64;
    let mut out = Vec::with_capacity(spec.entries);
    for seq in 0..spec.entries {
        now += (-rng.random::<f64>().max(1e-12).ln() / spec.rate * 1e6) as u64;
        let u = rng.random::<f64>();
        let rank = cdf.partition_point(|&c| c < u) as u64 + 1;
        let region = rank.min(spec.regions.max(1));
        let writer = ((rank - 1) % writers as u64) as usize;
        let size = entry_size(&mut rng);
        let headers = if seq % 10 == 0 {
            vec![
                (
                    Bytes::from_static(b"seq"),
                    Some(Bytes::from(seq.to_string())),
                ),
                (
                    Bytes::from_static(b"trace"),
                    Some(Bytes::from(format!("{:016x}", rng.random::<u64>()))),
                ),
            ]
        } else {
            Vec::new()
        };
        let entry = WalEntry {
            region,
            payload: payload(&mut rng, region, seq, now, size),
            headers,
        };
        out.push(Arrival {
            at_micros: now,
            writer,
            entry,
        });
    }
    out
}

/// The batches of the workload, in the order they are produced.
pub(crate) fn generate(spec: &WorkloadSpec) -> Vec<PlannedBatch> {
    struct Open {
        writer: usize,
        deadline: u64,
        size: usize,
        entries: Vec<WalEntry>,
    }
    let linger = spec.linger.as_micros() as u64;
    // Open batches by key: the writer, or the region when region-pure.
    let mut open: BTreeMap<u64, Open> = BTreeMap::new();
    let mut out = Vec::new();
    let close = |open: &mut BTreeMap<u64, Open>, key: u64, out: &mut Vec<PlannedBatch>| {
        if let Some(o) = open.remove(&key) {
            out.push(PlannedBatch {
                writer: o.writer,
                entries: o.entries,
            });
        }
    };
    for Arrival {
        at_micros: now,
        writer,
        entry,
    } in arrivals(spec)
    {
        // Batches whose linger ran out before this arrival close first, in
        // deadline order.
        loop {
            let due = open
                .iter()
                .map(|(&k, o)| (o.deadline, k))
                .filter(|&(d, _)| d <= now)
                .min();
            match due {
                Some((_, k)) => close(&mut open, k, &mut out),
                None => break,
            }
        }
        let esize = entry.batch_bytes();
        let key = if spec.region_pure {
            entry.region
        } else {
            writer as u64
        };
        if open
            .get(&key)
            .is_some_and(|o| o.size + esize > spec.max_batch_bytes)
        {
            close(&mut open, key, &mut out);
        }
        let o = open.entry(key).or_insert_with(|| Open {
            writer,
            deadline: now + linger,
            size: 0,
            entries: Vec::new(),
        });
        o.size += esize;
        o.entries.push(entry);
        if o.size >= spec.max_batch_bytes {
            close(&mut open, key, &mut out);
        }
    }
    let mut rest: Vec<(u64, u64)> = open.iter().map(|(&k, o)| (o.deadline, k)).collect();
    rest.sort_unstable();
    for (_, k) in rest {
        close(&mut open, k, &mut out);
    }
    out
}

/// Writes `batches` with `spec.writers` [`WalWriter`](walfetch::writer::WalWriter)s on `cluster`, one
/// batch per flush, and returns what was written with the merged index.
pub(crate) async fn write(
    cluster: &Arc<Cluster>,
    topic: &str,
    spec: &WorkloadSpec,
    batches: &[PlannedBatch],
) -> Result<Written, String> {
    write_partition(cluster, topic, 0, spec, batches).await
}

/// [`write`] to partition `partition` of `topic`.
pub(crate) async fn write_partition(
    cluster: &Arc<Cluster>,
    topic: &str,
    partition: i32,
    spec: &WorkloadSpec,
    batches: &[PlannedBatch],
) -> Result<Written, String> {
    // Batches are closed by the flushes of the rounds, at the simulated
    // boundaries: the writer's own triggers must never fire, and a flushed
    // batch stays one batch (interleaved mode). The interleaved layouts are
    // walfetch's writer's, with its per-record checksums; the region-pure
    // one is GreptimeDB's, which writes none (so a replay reads its batches
    // whole).
    let config = WriterConfig::new(topic, partition)
        .with_compression(spec.compression)
        .with_mode(WriterMode::Interleaved)
        .with_record_checksums(!spec.region_pure)
        .with_max_batch_bytes(usize::MAX / 4)
        .with_linger(Duration::from_secs(3600));
    let configs = vec![config; spec.writers.max(1)];
    let rounds = batches.iter().map(|batch| Round {
        writer: batch.writer,
        entries: batch.entries.clone(),
        flush: true,
    });
    let Rounds { offsets, index } = write_rounds(cluster, configs, rounds).await?;
    let mut entries = Vec::new();
    for (batch, offsets) in batches.iter().zip(offsets) {
        let mut first = None;
        for (i, (e, offset)) in batch.entries.iter().zip(offsets).enumerate() {
            // One flush, one batch: its offsets follow each other.
            let base = *first.get_or_insert(offset);
            if offset != base + i as i64 {
                return Err(format!(
                    "{topic}: a simulated batch was split (entry {i} at offset {offset}, batch base {base})"
                ));
            }
            entries.push(WrittenEntry {
                offset,
                region: e.region,
                payload: e.payload.clone(),
                headers: written_headers(e, !spec.region_pure),
            });
        }
    }
    entries.sort_by_key(|e| e.offset);
    for pair in entries.windows(2) {
        if pair[1].offset != pair[0].offset + 1 {
            return Err(format!(
                "{topic}: offsets {} and {} are not consecutive",
                pair[0].offset, pair[1].offset
            ));
        }
    }
    let end = entries.last().map_or(0, |e| e.offset + 1);
    Ok(Written {
        entries,
        index,
        end,
        batches: batches.len(),
    })
}

/// The headers `WalWriter` writes on `entry`'s record: its per-record
/// checksum first when `checksums`, then the entry's own.
pub(crate) fn written_headers(entry: &WalEntry, checksums: bool) -> Vec<(Bytes, Option<Bytes>)> {
    let mut headers = Vec::with_capacity(entry.headers.len() + 1);
    if checksums {
        let sum = record_checksum_header(Some(&entry.region.to_be_bytes()), Some(&entry.payload));
        headers.push((
            Bytes::from_static(RECORD_CHECKSUM_HEADER.as_bytes()),
            Some(Bytes::copy_from_slice(&sum)),
        ));
    }
    headers.extend(entry.headers.iter().cloned());
    headers
}
