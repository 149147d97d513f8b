//! The log as the broker stores it, and the *floor* of a replay: the fewest
//! bytes any consumer must receive under Kafka's fetch rules to see the
//! records it needs.
//!
//! The layout is read back from the broker itself (a scan with fetches at
//! batch boundaries), so the floor is computed from the batches that broker
//! really serves, not from what the writer meant to write.
//!
//! # The floor
//! The library's [`walfetch::plan::floor_bytes`], over every batch of the
//! log as the broker serves it: the fewest bytes any consumer must receive
//! under Kafka's fetch rules (a proven minimum: see that module), and the
//! fewest from a broker that never cuts a batch (Tansu 0.6), which the
//! Tansu rows are judged against. Every fetch of the Kafka-rules optimum is
//! checked against testkit's [`kafka_fetch`].
//!
//! What a replay needs: the region's indexed entries in the range, and,
//! past `last_index`, every record to the end (the consumer cannot know
//! whose they are without reading them).

use std::ops::Range;

use kafka_protocol::messages::fetch_response::{
    FetchResponse, FetchableTopicResponse, PartitionData,
};
use kafka_protocol::messages::{ApiKey, ResponseHeader, TopicName};
use kafka_protocol::protocol::{Encodable, HeaderVersion, StrBytes};
use walfetch::cluster::Cluster;
use walfetch::codec::RecordCheck;
use walfetch::plan::{floor_bytes, floor_bytes_framed, FetchRules, LogBatch as FloorBatch};
use walfetch_support::partition_log::{read_batches, LogBatch, LogRecord, Until};
use walfetch_testkit::fetch_rules::{kafka_fetch, BatchExtent};
use walfetch_testkit::served_versions;

/// The partition's batches, back to back: as [`read_batches`] reads them,
/// without their records' keys, values and headers (the floor needs none
/// of them).
#[derive(Debug, Clone, Default)]
pub(crate) struct LogLayout {
    pub(crate) batches: Vec<LogBatch>,
    /// The fewest bytes a Fetch response for the partition carries besides
    /// its records ([`response_framing`]).
    pub(crate) framing: u64,
}

impl LogLayout {
    /// Where each batch lies, the batches laid out back to back from byte 0.
    pub(crate) fn extents(&self) -> Vec<BatchExtent> {
        let mut position = 0;
        self.batches
            .iter()
            .map(|b| {
                let extent = BatchExtent::from_header(&b.header, position);
                position = extent.end();
                extent
            })
            .collect()
    }

    /// Total bytes of the batches.
    pub(crate) fn bytes(&self) -> usize {
        self.extents().last().map_or(0, BatchExtent::end)
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
    let mut batches = read_batches(cluster, topic, partition, Until::Offset(end))
        .await
        .map_err(|e| format!("scan {e}"))?;
    let mut offset = 0;
    for batch in &mut batches {
        if batch.header.base_offset != offset {
            return Err(format!(
                "scan {topic}: expected a batch at {offset}, got one at {}",
                batch.header.base_offset
            ));
        }
        offset = batch.header.last_offset() + 1;
        for record in &mut batch.records {
            record.key = None;
            record.value = None;
            record.headers = Vec::new();
        }
    }
    Ok(LogLayout {
        batches,
        framing: response_framing(topic, partition)?,
    })
}

/// Where `record` ends in its batch, in bytes from the batch's start, when
/// a replay may use it from a cut batch: the batch is uncompressed and the
/// record's per-record checksum verified (the default policy uses a cut
/// batch's record only under it; without one, the floor reads its batch
/// whole too).
fn end_in_batch(batch: &LogBatch, record: &LogRecord) -> Option<usize> {
    record
        .end
        .filter(|_| !batch.compressed() && record.checksum == RecordCheck::Verified)
}

/// The fewest bytes a Fetch response for `topic`/`partition` carries
/// besides the partition's records, at any Fetch version the Kafka-rules
/// broker (testkit) serves: the size prefix, the response header and every
/// field of a response naming that one partition, with no aborted
/// transactions and the shortest length prefix of the records. Every fetch
/// of a replay of one partition gets a response of its own (a request
/// names a partition once), so any replay moves at least this for each
/// fetch beyond the records' bytes.
pub(crate) fn response_framing(topic: &str, partition: i32) -> Result<u64, String> {
    let versions = served_versions(ApiKey::Fetch).ok_or("the broker serves no Fetch")?;
    let response = FetchResponse::default().with_responses(vec![FetchableTopicResponse::default()
        .with_topic(TopicName(StrBytes::from_string(topic.to_owned())))
        .with_partitions(vec![PartitionData::default()
            .with_partition_index(partition)
            .with_aborted_transactions(None)
            .with_records(Some(bytes::Bytes::new()))])]);
    (versions.min..=versions.max)
        .map(|version| {
            let mut frame = bytes::BytesMut::new();
            ResponseHeader::default()
                .encode(&mut frame, FetchResponse::header_version(version))
                .and_then(|()| response.encode(&mut frame, version))
                .map(|()| 4 + frame.len() as u64)
                .map_err(|e| format!("encoding a Fetch v{version} response: {e}"))
        })
        .try_fold(u64::MAX, |least, size| size.map(|s| least.min(s)))
}

/// What a replay must receive at the least, and the shape of what it wants.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub(crate) struct Floor {
    /// Fewest bytes under Kafka's rules (partial batches allowed).
    pub(crate) kafka_bytes: u64,
    /// Fewest bytes under Kafka's rules with each fetch's response framing
    /// counted ([`LogLayout::framing`]): a bound on wire bytes no client
    /// can go below, where `kafka_bytes` bounds the records' bytes.
    pub(crate) kafka_framed_bytes: u64,
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

impl Floor {
    /// The floor a replay on `broker` is judged against: the never-cut
    /// floor on Tansu (which never cuts a batch), Kafka's elsewhere.
    pub(crate) fn bytes_for(&self, broker: &str) -> u64 {
        if !kafka_rules(broker) {
            self.whole_batch_bytes
        } else {
            self.kafka_bytes
        }
    }
}

impl Floor {
    /// The least wire bytes (responses) a replay on `broker` can move: the
    /// framed Kafka-rules floor, or on Tansu the never-cut floor.
    pub(crate) fn wire_bytes_for(&self, broker: &str) -> u64 {
        if !kafka_rules(broker) {
            self.whole_batch_bytes
        } else {
            self.kafka_framed_bytes
        }
    }
}

/// Checks that a run moved no fewer response bytes than `floor`: the floor
/// is a proven lower bound under the broker's rules, so a run below it
/// means the broker does not follow those rules (or the count is wrong),
/// and every figure judged against it would be void.
pub(crate) fn check_above(context: &str, wire_bytes: u64, floor: u64) -> Result<(), String> {
    if wire_bytes < floor {
        return Err(format!(
            "{context}: moved {wire_bytes} response bytes, below the floor of {floor}: the broker does not follow the rules the floor assumes"
        ));
    }
    Ok(())
}

/// Whether `broker` (a bench broker's name) follows Kafka's fetch rules;
/// Tansu 0.6 never cuts a batch and skips the batch holding a mid-batch
/// offset.
pub(crate) fn kafka_rules(broker: &str) -> bool {
    !broker.starts_with("tansu")
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
    // Every batch of the log, with where its wanted records end, if any.
    let extents = layout.extents();
    let mut log = Vec::with_capacity(layout.batches.len());
    let mut out = Floor::default();
    for (b, extent) in layout.batches.iter().zip(&extents) {
        let mut wanted_end = None;
        for r in &b.records {
            let want = want(r);
            if want == Want::Own {
                out.region_records += 1;
                out.region_record_bytes += r.wire_len as u64;
            }
            if want != Want::No {
                let end = end_in_batch(b, r).unwrap_or(extent.len) as u64;
                wanted_end = Some(wanted_end.unwrap_or(0).max(end));
            }
        }
        let start = extent.position as u64;
        log.push(FloorBatch {
            start,
            end: start + extent.len as u64,
            wanted_end: wanted_end.map(|e| start + e),
        });
    }
    let wanted: Vec<usize> = (0..log.len())
        .filter(|&k| log[k].wanted_end.is_some())
        .collect();
    out.wanted_batches = wanted.len();
    out.runs = wanted
        .iter()
        .enumerate()
        .filter(|&(k, &w)| k == 0 || wanted[k - 1] + 1 != w)
        .count();
    // One floor, the library's (`walfetch::plan::floor_bytes`), under both
    // brokers' rules.
    out.whole_batch_bytes = floor_bytes(&log, FetchRules::NeverCut).0;
    let (kafka_bytes, fetches) = floor_bytes(&log, FetchRules::Kafka);
    out.kafka_bytes = kafka_bytes;
    out.kafka_framed_bytes = floor_bytes_framed(&log, FetchRules::Kafka, layout.framing).0;
    // Check every fetch of the optimum against the rules themselves.
    for fetch in &fetches {
        let Some(extent) = extents.iter().find(|e| e.position as u64 == fetch.start) else {
            return Err(format!(
                "floor: a fetch starts at byte {} where no batch does",
                fetch.start
            ));
        };
        let base = extent.base_offset;
        let limit = (fetch.end - fetch.start) as usize;
        let got = kafka_fetch(&extents, base, limit)
            .map_err(|e| format!("floor: fetch at {base}: {e}"))?;
        if got.len() != limit || got.start as u64 != fetch.start {
            return Err(format!(
                "floor: a fetch at {base} of {limit} bytes returns {got:?}, the plan counted {fetch:?}"
            ));
        }
        out.kafka_fetches += 1;
    }
    Ok(out)
}
