//! The log as the broker stores it, and the *floor* of a replay: the fewest
//! bytes any consumer must receive under Kafka's fetch rules to see the
//! records it needs.
//!
//! The layout is read back from the broker itself (a scan with fetches at
//! batch boundaries), so the floor is computed from the batches that broker
//! really serves, not from what the writer meant to write.
//!
//! # The floor
//! Under Kafka's rules ([`walfetch_testkit::fetch_rules`]) a fetch returns
//! bytes from the start of the batch containing its offset, the first batch
//! whole, cut at the byte limit. So a consumer that wants records in batches
//! `a..=b` can get them with one fetch of
//! `max(end(a), wanted_end(b)) - start(a)` bytes, where `wanted_end(b)` is
//! the end of the last wanted record of batch `b` (the batch's end when it
//! is compressed: a partial compressed batch is useless). Several fetches
//! split the wanted batches into groups; merging two groups costs the bytes
//! between them. The floor is the minimum over all groupings (round trips
//! and response headers are free): a dynamic program in one pass, since
//! for `a < b` a group costs `wanted_end(b) - start(a)`. Every chosen
//! group's cost is checked against [`kafka_fetch`].
//!
//! What a replay needs: the region's indexed entries in the range, and,
//! past `last_index`, every record to the end (the consumer cannot know
//! whose they are without reading them).
//!
//! Not a strict lower bound: groups start only at wanted batches. A fetch
//! may also start at the batch before a wanted one; that batch comes
//! whole, and the wanted batch behind it, when uncompressed, can be cut
//! right after its last wanted record, which is cheaper when a small batch
//! precedes a large one whose wanted records come first.

use std::ops::Range;

use walfetch::cluster::{Cluster, FetchParams};
use walfetch::codec::{Batches, Compression, DecodeOptions};
use walfetch_testkit::fetch_rules::{kafka_fetch, BatchExtent};

/// One record of the log.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LogRecord {
    pub(crate) offset: i64,
    /// The key as a region id (8 bytes, big-endian).
    pub(crate) region: Option<u64>,
    /// Where the record ends, in bytes from its batch's start, when the
    /// batch is uncompressed.
    pub(crate) end_in_batch: Option<u32>,
    /// Encoded size of the record (inside its batch, uncompressed).
    pub(crate) wire_len: u32,
}

/// One batch of the log.
#[derive(Debug, Clone)]
pub(crate) struct LogBatch {
    pub(crate) extent: BatchExtent,
    pub(crate) compressed: bool,
    pub(crate) records: Vec<LogRecord>,
}

/// The partition's batches, back to back.
#[derive(Debug, Clone, Default)]
pub(crate) struct LogLayout {
    pub(crate) batches: Vec<LogBatch>,
}

impl LogLayout {
    pub(crate) fn extents(&self) -> Vec<BatchExtent> {
        self.batches.iter().map(|b| b.extent).collect()
    }

    /// Total bytes of the batches.
    pub(crate) fn bytes(&self) -> usize {
        self.batches.last().map_or(0, |b| b.extent.end())
    }
}

/// Reads every batch of `topic`/`partition` below `end` with fetches at
/// batch boundaries, and lays them out back to back.
pub(crate) async fn scan(
    cluster: &Cluster,
    topic: &str,
    partition: i32,
    end: i64,
) -> Result<LogLayout, String> {
    let mut layout = LogLayout::default();
    let mut offset = 0i64;
    let mut position = 0usize;
    while offset < end {
        let params = FetchParams::new(topic, partition, offset)
            .with_max_bytes(8 << 20)
            .with_max_wait(std::time::Duration::ZERO);
        let fetched = cluster
            .fetch(&params)
            .await
            .map_err(|e| format!("scan {topic} at {offset}: {e}"))?;
        let mut progressed = false;
        for batch in Batches::new(fetched.records.clone(), DecodeOptions::default()) {
            let batch = batch.map_err(|e| format!("scan {topic} at {offset}: {e}"))?;
            let h = *batch.header();
            if h.last_offset() < offset {
                continue;
            }
            if h.base_offset != offset {
                return Err(format!(
                    "scan {topic}: expected a batch at {offset}, got one at {}",
                    h.base_offset
                ));
            }
            let mut records = Vec::new();
            for record in batch
                .records()
                .map_err(|e| format!("scan {topic} at {offset}: {e}"))?
            {
                let record = record.map_err(|e| format!("scan {topic}: {e}"))?;
                let region = record
                    .key()
                    .and_then(|k| <[u8; 8]>::try_from(k).ok())
                    .map(u64::from_be_bytes);
                records.push(LogRecord {
                    offset: record.offset(),
                    region,
                    end_in_batch: record.batch_range().map(|r| r.end as u32),
                    wire_len: record.wire_len() as u32,
                });
            }
            let extent = BatchExtent::from_header(&h, position);
            position = extent.end();
            offset = extent.next_offset();
            layout.batches.push(LogBatch {
                extent,
                compressed: batch.compression() != Compression::None,
                records,
            });
            progressed = true;
        }
        if !progressed {
            return Err(format!(
                "scan {topic}: no batch at {offset} (end {end}, {} bytes answered)",
                fetched.records.len()
            ));
        }
    }
    Ok(layout)
}

/// What a replay must receive at the least, and the shape of what it wants.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub(crate) struct Floor {
    /// Fewest bytes under Kafka's rules (partial batches allowed).
    pub(crate) kafka_bytes: u64,
    /// Fewest bytes from a broker that never cuts a batch (Tansu 0.6).
    pub(crate) whole_batch_bytes: u64,
    /// Fetches the Kafka-rules floor uses.
    pub(crate) kafka_fetches: usize,
    /// Batches holding wanted records.
    pub(crate) wanted_batches: usize,
    /// Maximal runs of adjacent wanted batches.
    pub(crate) runs: usize,
    /// The region's own records in the range: count and encoded bytes.
    pub(crate) region_records: usize,
    pub(crate) region_record_bytes: u64,
}

/// What a replay wants of one record of the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Want {
    /// Nothing.
    No,
    /// The record: it is a replayed region's own.
    Own,
    /// The record, though it is not a replayed region's (a tail scan must
    /// read it to find out).
    Read,
}

/// The floor of a replay of `region` over `range`, where the index covers
/// offsets below `indexed_end` and every record from there on is wanted.
pub(crate) fn floor(
    layout: &LogLayout,
    region: u64,
    range: Range<i64>,
    indexed_end: i64,
) -> Result<Floor, String> {
    floor_of(layout, |r| {
        if r.offset < range.start || r.offset >= range.end {
            Want::No
        } else if r.region == Some(region) {
            Want::Own
        } else if r.offset >= indexed_end {
            Want::Read
        } else {
            Want::No
        }
    })
}

/// The floor of a replay that wants what `want` says of each record: any
/// set of records, such as the union of many regions' ranges (a recovery).
pub(crate) fn floor_of(
    layout: &LogLayout,
    mut want: impl FnMut(&LogRecord) -> Want,
) -> Result<Floor, String> {
    // (batch index, start, end, wanted end) of every wanted batch.
    let mut wanted: Vec<(usize, u64, u64, u64, u64)> = Vec::new();
    let mut out = Floor::default();
    for (i, b) in layout.batches.iter().enumerate() {
        let mut wanted_end = None;
        for r in &b.records {
            let want = want(r);
            if want == Want::Own {
                out.region_records += 1;
                out.region_record_bytes += u64::from(r.wire_len);
            }
            if want != Want::No {
                let end = match (b.compressed, r.end_in_batch) {
                    (false, Some(e)) => u64::from(e),
                    _ => b.extent.len as u64,
                };
                wanted_end = Some(wanted_end.unwrap_or(0).max(end));
            }
        }
        if let Some(end) = wanted_end {
            let start = b.extent.position as u64;
            wanted.push((
                i,
                start,
                start + b.extent.len as u64,
                start + end,
                b.extent.len as u64,
            ));
        }
    }
    out.wanted_batches = wanted.len();
    out.runs = wanted
        .iter()
        .enumerate()
        .filter(|(k, w)| *k == 0 || wanted[k - 1].0 + 1 != w.0)
        .count();
    // A broker that never cuts: every wanted batch whole, gaps merged or not
    // at no difference in the minimum (whole batches only ever add).
    out.whole_batch_bytes = wanted.iter().map(|w| w.4).sum();

    // f[j]: fewest bytes for the first j wanted batches; best[j]: where the
    // last group of that optimum starts.
    let m = wanted.len();
    let mut f = vec![0u64; m + 1];
    let mut start_of = vec![0usize; m + 1];
    // min over a < current of f[a] - start(a), with its a.
    let mut run_min: Option<(i128, usize)> = None;
    for j in 0..m {
        let (_, s, e, u, _) = wanted[j];
        // A group of this batch alone: the first batch comes whole.
        let alone = f[j] + (e.max(u) - s);
        let mut best = (alone, j);
        if let Some((v, a)) = run_min {
            let merged = (v + i128::from(u)) as u64;
            if merged < best.0 {
                best = (merged, a);
            }
        }
        f[j + 1] = best.0;
        start_of[j + 1] = best.1;
        let candidate = i128::from(f[j]) - i128::from(s);
        if run_min.is_none_or(|(v, _)| candidate < v) {
            run_min = Some((candidate, j));
        }
    }
    out.kafka_bytes = f[m];
    // Check every group of the optimum against the rules themselves.
    let extents = layout.extents();
    let mut j = m;
    while j > 0 {
        let a = start_of[j];
        let (ia, s, _, _, _) = wanted[a];
        let (_, _, _, u, _) = wanted[j - 1];
        let base = layout.batches[ia].extent.base_offset;
        let limit = (u - s) as usize;
        let got = kafka_fetch(&extents, base, limit)
            .map_err(|e| format!("floor: fetch at {base}: {e}"))?;
        let want = f[j] - f[a];
        if got.len() as u64 != want || got.start as u64 != s {
            return Err(format!(
                "floor: a fetch at {base} of {limit} bytes returns {got:?}, the plan counted {want} bytes from {s}"
            ));
        }
        out.kafka_fetches += 1;
        j = a;
    }
    Ok(out)
}
