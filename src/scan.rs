//! Building an index from an existing topic: one scan of a partition that
//! assigns each record to a region by a [`RegionRule`] and records its
//! offset with exact hints (batch base, batch length, record end). The only
//! part of indexing that does IO; the index itself ([`crate::index`]) is
//! pure data.

use bytes::Bytes;
use walfetch_codec::{Batches, DecodeOptions};

use crate::cluster::{ClientError, Cluster, FetchParams};
use crate::index::{Hint, IndexEntry, RegionRule, WalIndex};

/// What can go wrong while building an index from a topic.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// The cluster client failed (after its retries).
    #[error(transparent)]
    Client(#[from] ClientError),
    /// A fetch response held a corrupt batch or record.
    #[error("topic {topic:?} partition {partition}, fetch at offset {fetch_offset}: {source}")]
    Decode {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
        /// The fetch offset of the response.
        fetch_offset: i64,
        /// What the codec found.
        #[source]
        source: walfetch_codec::Error,
    },
}

/// What a build saw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BuildReport {
    /// Records indexed.
    pub indexed: u64,
    /// Records whose region the rule could not find (not indexed).
    pub unassigned: u64,
    /// Control records skipped.
    pub control: u64,
    /// Fetches made.
    pub fetches: u64,
    /// Wire bytes received.
    pub wire_bytes: u64,
}

/// Scans `topic`/`partition` over `from..to` (`to`: the high watermark when
/// `None`) and indexes every record by `rule`. The index's `last_index` is
/// the last offset scanned. Starts at a batch boundary: `from` should be the
/// log start or an offset where a batch starts.
pub async fn build_index(
    cluster: &Cluster,
    topic: &str,
    partition: i32,
    rule: &RegionRule,
    from: i64,
    to: Option<i64>,
    fetch_bytes: i32,
) -> Result<(WalIndex, BuildReport), BuildError> {
    let mut index = WalIndex::new();
    let mut report = BuildReport::default();
    let mut next = from;
    let mut end = to;
    loop {
        if end.is_some_and(|e| next >= e) {
            break;
        }
        let params = FetchParams::new(topic, partition, next)
            .with_max_bytes(fetch_bytes.max(1))
            .with_max_wait(std::time::Duration::ZERO);
        let fetched = cluster.fetch(&params).await?;
        report.fetches += 1;
        report.wire_bytes += fetched.wire_bytes as u64;
        let end_now = *end.get_or_insert(fetched.high_watermark);
        let before = next;
        next = index_response(
            &mut index,
            &mut report,
            rule,
            fetched.records,
            next,
            end_now,
        )
        .map_err(|source| BuildError::Decode {
            topic: topic.to_string(),
            partition,
            fetch_offset: before,
            source,
        })?;
        if next == before {
            // Nothing complete came back: the log ends here.
            break;
        }
    }
    index.set_last_index(end.unwrap_or(next).min(next) - 1);
    Ok((index, report))
}

/// Indexes the complete batches of one response; returns the next offset.
fn index_response(
    index: &mut WalIndex,
    report: &mut BuildReport,
    rule: &RegionRule,
    records: Bytes,
    from: i64,
    end: i64,
) -> Result<i64, walfetch_codec::Error> {
    let mut next = from;
    for batch in Batches::new(records, DecodeOptions::default()) {
        let batch = batch?;
        let h = *batch.header();
        if h.is_control() {
            report.control += u64::from(h.record_count.max(0) as u32);
            next = next.max(h.next_offset());
            continue;
        }
        let batch_len = h.total_len() as u32;
        for record in batch.records_in(from..end)? {
            let record = record?;
            let Some(region) = rule.region(&record) else {
                report.unassigned += 1;
                continue;
            };
            let record_end = record.batch_range().map_or(batch_len, |r| r.end as u32);
            let hint = Hint {
                batch_base: h.base_offset,
                batch_len,
                record_end,
            };
            // Offsets only grow within a partition, so this cannot fail
            // unless the broker sent them out of order.
            if index
                .push(
                    region,
                    IndexEntry {
                        offset: record.offset(),
                        hint: Some(hint),
                    },
                )
                .is_ok()
            {
                report.indexed += 1;
            }
        }
        next = next.max(h.next_offset());
    }
    Ok(next)
}
