//! Building an index from an existing topic: one scan of a partition that
//! assigns each record to a region by a [`RegionRule`] and records its
//! offset with exact hints (batch base, batch length, record end). The only
//! part of indexing that does IO; the index itself ([`crate::index`]) is
//! pure data.
//!
//! The index holds what a `read_committed` consumer sees: records of
//! aborted transactions are not entries (KIP-98; Kafka's consumer drops
//! them by the fetch response's aborted transactions, as
//! [`TransactionFilter`] does), and it ends below the last stable offset.

use bytes::Bytes;
use walfetch_codec::{AbortedTransaction, Batches, DecodeOptions, TransactionFilter};

use crate::cluster::{ClientError, Cluster, FetchParams, IsolationLevel};
use crate::index::{
    is_greptime_meta, Hint, IdFormat, IndexEntry, IndexSource, RegionRule, WalIndex,
};

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
    /// The answers to a fetch held part of a batch and no complete one, even
    /// when asked again with a limit of the whole batch: the index cannot
    /// go past that batch. Kafka returns the first batch whole however
    /// large (KIP-74); a broker that cuts it, or truncates what it sends,
    /// answers so.
    #[error(
        "topic {topic:?} partition {partition}: the answers to a fetch at offset {offset} \
         held no complete batch, only the first {present} bytes of one{}, also with a limit \
         of {max_bytes} bytes: the index cannot go past offset {offset}",
        .needed.map(|n| format!(" of {n} bytes")).unwrap_or_default()
    )]
    NoCompleteBatch {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
        /// The fetch offset.
        offset: i64,
        /// The bytes of the batch the last answer held.
        present: usize,
        /// The whole batch's size, when its length field arrived.
        needed: Option<usize>,
        /// The byte limit of the last fetch.
        max_bytes: i32,
    },
    /// Answers to a fetch held no records and no error although the
    /// partition's readable end lay past the fetch offset, also when asked
    /// again allowing longer and longer waits: the broker could not read
    /// the records (a storage too slow; Kafka answers so when a read from
    /// tiered storage outlasts its `remote.fetch.max.wait.ms`). The index
    /// cannot go past that offset.
    #[error(
        "topic {topic:?} partition {partition}: {answers} answers in a row to a fetch at \
         offset {offset} held no records although the readable end is {readable_end} (the \
         last allowed to wait {last_wait:?}): the broker did not read them, and the index \
         cannot go past offset {offset}"
    )]
    NoRecords {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
        /// The fetch offset.
        offset: i64,
        /// The readable end (last stable offset) the last answer gave.
        readable_end: i64,
        /// How many answers in a row held nothing.
        answers: u32,
        /// The `max_wait_ms` of the last fetch.
        last_wait: std::time::Duration,
    },
}

/// Answers in a row with no records below the readable end after which
/// [`build_index`] fails with [`BuildError::NoRecords`].
const MAX_EMPTY_ANSWERS: u32 = 10;

/// What a build saw. More counts may be added: it is `#[non_exhaustive]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BuildReport {
    /// Records indexed.
    pub indexed: u64,
    /// Records whose region the rule could not find (not indexed).
    pub unassigned: u64,
    /// No-op records, which carry no entry ([`RegionRule::is_noop`]: e.g.
    /// the one GreptimeDB writes at the start of every topic): not
    /// indexed, and not counted in [`BuildReport::records`].
    pub noop: u64,
    /// Control records skipped.
    pub control: u64,
    /// Records of aborted transactions skipped (not indexed).
    pub aborted: u64,
    /// Fetches made.
    pub fetches: u64,
    /// Wire bytes received.
    pub wire_bytes: u64,
    /// Data records whose region id field (the key, or the rule's header)
    /// is present and all ASCII digits.
    pub decimal_ids: u64,
    /// Data records whose region id field is GreptimeDB's record meta
    /// (JSON with `ns.region_id`), counted while the rule reads ids another
    /// way (for the warning that it should not).
    pub greptime_ids: u64,
    /// Fetches made again from a lower offset because the broker answered a
    /// fetch at `from` from the batch after the one containing it (Tansu
    /// 0.6 does, for an offset inside a batch).
    pub realigned: u64,
}

impl BuildReport {
    /// Data records seen (indexed or not), no-op records aside.
    pub fn records(&self) -> u64 {
        self.indexed + self.unassigned
    }

    /// What looks wrong with the rule, judging by what the build saw: the
    /// rule found no region in most records, or it reads big-endian ids
    /// where every id is written in decimal digits (a key "7" read
    /// big-endian is region 55). One sentence each; empty when nothing
    /// looks wrong.
    pub fn warnings(&self, rule: &RegionRule) -> Vec<String> {
        let mut out = Vec::new();
        let records = self.records();
        if records > 0 && self.unassigned * 2 > records {
            out.push(format!(
                "the region rule ({rule}) found no region in {} of {records} records: \
                 is the region id somewhere else (--region-header) or written otherwise \
                 (--region-format)?",
                self.unassigned
            ));
        }
        if records > 0 && rule.format() != IdFormat::GreptimeMeta && self.greptime_ids == records {
            out.push(format!(
                "every region id field of the {records} records is GreptimeDB's record meta \
                 (JSON with ns.region_id): use --region-format greptime"
            ));
        }
        if records > 0 && rule.format() == IdFormat::BigEndian && self.decimal_ids == records {
            out.push(format!(
                "every region id of the {records} records is ASCII digits, read as \
                 big-endian bytes (\"7\" is region 55): if the ids are decimal numbers, \
                 use --region-format decimal"
            ));
        }
        out
    }
}

/// Scans `topic`/`partition` over `from..to` (`to`: the last stable offset
/// when `None`) and indexes every record by `rule`, but those of aborted
/// transactions. The index's `last_index` is the last offset scanned (never
/// past the last stable offset: the fate of an open transaction is not
/// known yet), and it records what it indexes: the topic, the partition,
/// the topic id (when the broker's Metadata gives one), `from` as its
/// first offset, and `rule`. Every fetch is bound to that topic id (see
/// [`FetchParams::topic_id`]): a topic deleted and recreated during the
/// scan fails it ([`ClientError::TopicIdChanged`]) rather than indexing
/// two logs as one.
///
/// `from` may fall inside a batch: a broker that answers such a fetch from
/// the next batch (Tansu 0.6) is asked again from lower offsets until the
/// answer starts at or below `from`, so every record from `from` on is
/// indexed.
///
/// Each fetch asks for `fetch_bytes`. An answer that holds no complete
/// batch, only the start of one (Kafka returns a first batch whole however
/// large, KIP-74; a broker that does not cuts it at the limit), is asked
/// again once with a limit of that batch's whole size; if that answer holds
/// no complete batch either, the build fails with
/// [`BuildError::NoCompleteBatch`] rather than end the index early. An
/// answer with no records at all below the readable end (a broker that
/// could not read them within the fetch's wait) is asked again allowing a
/// wait, doubled each time; after ten such answers in a row the build
/// fails with [`BuildError::NoRecords`], never ends the index
/// early.
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
    let topic_id = cluster.leader_retrying(topic, partition).await?.topic_id;
    index.set_source(
        IndexSource::new(topic, partition)
            .with_topic_id(topic_id)
            .with_first_offset(from)
            .with_rule(rule.clone()),
    );
    let mut report = BuildReport::default();
    let mut next = from;
    let mut end = to;
    // Until an answer starts at or below `from`, the broker may have
    // skipped the batch holding it; `back` is how far below `from` the next
    // try starts.
    let mut aligned = false;
    let mut back = 1i64;
    let mut limit = fetch_bytes.max(1);
    // The last answer held only the start of the batch at `next`.
    let mut cut_before = false;
    // Answers in a row with no records below the readable end.
    let mut empty = 0u32;
    loop {
        if end.is_some_and(|e| next >= e) {
            break;
        }
        // read_committed: Kafka lists a partition's aborted transactions
        // only in answers to read_committed fetches, and without that list
        // a record of a transaction cannot be told aborted before its
        // marker, which may come much later (or past the scan's end). Such
        // a fetch stops at the last stable offset, and so does the index:
        // past it, transactions are still open and any record may yet be
        // aborted, so it is left to a replay's scan past `last_index` (and
        // that replay's own isolation) rather than indexed as data.
        let wait = crate::replay::unready_wait(empty);
        let params = FetchParams::new(topic, partition, next)
            .with_max_bytes(limit)
            .with_max_wait(wait)
            .with_isolation(IsolationLevel::ReadCommitted)
            .with_topic_id(topic_id);
        let fetched = cluster.fetch(&params).await?;
        report.fetches += 1;
        report.wire_bytes += fetched.wire_bytes as u64;
        let readable = fetched.readable_end(IsolationLevel::ReadCommitted);
        let end_now = *end.get_or_insert(readable);
        // Nothing at all although records lie at `next`: not read within
        // the wait (or, before the build is aligned, the batch holding
        // `from` skipped). The next fetch may wait, longer each time.
        let unready = fetched.records.is_empty() && next < readable.min(end_now);
        if unready {
            empty += 1;
            if empty >= MAX_EMPTY_ANSWERS {
                return Err(BuildError::NoRecords {
                    topic: topic.to_string(),
                    partition,
                    offset: next,
                    readable_end: readable,
                    answers: empty,
                    last_wait: wait,
                });
            }
        } else {
            empty = 0;
        }
        if !aligned {
            let mut batches = Batches::new(fetched.records.clone(), DecodeOptions::default());
            let first_base = match batches.next() {
                Some(first) => first.ok().map(|b| b.header().base_offset),
                // Only the start of a batch: where it starts still tells.
                None => batches.partial().and_then(|p| p.base_offset()),
            };
            let skipped = match first_base {
                Some(base) => base > next && base > from,
                // Nothing below the readable end: the batch holding
                // `next` was the last, and skipped.
                None => next < readable.min(end_now),
            };
            let floor = fetched.log_start_offset.max(0);
            if skipped && next > floor {
                next = from.saturating_sub(back).max(floor);
                back = back.saturating_mul(2);
                report.realigned += 1;
                continue;
            }
            aligned = true;
        }
        if unready {
            continue;
        }
        let before = next;
        let indexed = index_response(
            &mut index,
            &mut report,
            rule,
            (fetched.records, &fetched.aborted_transactions),
            (next, from),
            end_now,
        )
        .map_err(|source| BuildError::Decode {
            topic: topic.to_string(),
            partition,
            fetch_offset: before,
            source,
        })?;
        next = indexed.next;
        if next > before {
            limit = fetch_bytes.max(1);
            cut_before = false;
            continue;
        }
        match indexed.cut {
            // Nothing came back: the log ends here.
            None => break,
            // Only the start of the batch at `next`: ask once more, for
            // the whole batch.
            Some(cut) if !cut_before => {
                let whole = cut
                    .needed
                    .map_or(limit, |n| i32::try_from(n).unwrap_or(i32::MAX));
                limit = limit.max(whole);
                cut_before = true;
            }
            Some(cut) => {
                return Err(BuildError::NoCompleteBatch {
                    topic: topic.to_string(),
                    partition,
                    offset: next,
                    present: cut.present,
                    needed: cut.needed,
                    max_bytes: limit,
                })
            }
        }
    }
    index.set_last_index(end.unwrap_or(next).min(next) - 1);
    // A fetch naming the topic (below Fetch v13) read whatever had the
    // name: the topic still having the id the build started with says
    // they all read its log.
    cluster.confirm_topic_id(topic, partition, topic_id).await?;
    Ok((index, report))
}

/// What [`index_response`] read of one response.
#[derive(Debug)]
struct Indexed {
    /// The next offset to fetch.
    next: i64,
    /// The response ended inside a batch (cut at the byte limit).
    cut: Option<Cut>,
}

/// The start of a batch a response ended in.
#[derive(Debug, Clone, Copy)]
struct Cut {
    /// Bytes present.
    present: usize,
    /// The whole batch's size, when its length field is present.
    needed: Option<usize>,
}

/// Indexes the records at or past `from` of the complete batches of one
/// response to a fetch at `fetched_at`, but those of the response's
/// `aborted` transactions.
fn index_response(
    index: &mut WalIndex,
    report: &mut BuildReport,
    rule: &RegionRule,
    (records, aborted): (Bytes, &[AbortedTransaction]),
    (fetched_at, from): (i64, i64),
    end: i64,
) -> Result<Indexed, walfetch_codec::Error> {
    let mut next = fetched_at;
    let mut transactions = TransactionFilter::new(aborted.iter().copied());
    let mut batches = Batches::new(records, DecodeOptions::default());
    for batch in &mut batches {
        let batch = batch?;
        let h = *batch.header();
        if !transactions.admit(&batch)? {
            let count = u64::from(h.record_count.max(0) as u32);
            if h.is_control() {
                report.control += count;
            } else {
                report.aborted += count;
            }
            next = next.max(h.next_offset());
            continue;
        }
        let batch_len = h.total_len() as u32;
        for record in batch.records_in(from..end)? {
            let record = record?;
            // No entry of any region (GreptimeDB starts every topic with
            // one): counted apart, so that it does not hide what the
            // records say about the rule.
            if rule.is_noop(&record) {
                report.noop += 1;
                continue;
            }
            let id = rule.id_bytes(&record);
            let digits = id.is_some_and(|b| !b.is_empty() && b.iter().all(u8::is_ascii_digit));
            report.decimal_ids += u64::from(digits);
            if rule.format() != IdFormat::GreptimeMeta {
                report.greptime_ids += u64::from(id.is_some_and(is_greptime_meta));
            }
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
    let cut = batches.partial().map(|p| Cut {
        present: p.present(),
        needed: p.needed(),
    });
    Ok(Indexed { next, cut })
}

#[cfg(test)]
mod tests {
    use super::*;
    use walfetch_codec::{BatchBuilder, ControlType, NewRecord};

    /// Records of an aborted transaction (offsets 0 and 1, its marker at 2)
    /// are not indexed, and counted; a plain batch after them (3 and 4)
    /// is. Without the response's aborted transactions, nothing tells them
    /// apart.
    #[test]
    fn records_of_aborted_transactions_are_not_indexed() {
        let key = Bytes::copy_from_slice(&5u64.to_be_bytes());
        let recs = || -> Vec<NewRecord> {
            (0..2)
                .map(|i| NewRecord {
                    offset_delta: i,
                    key: Some(key.clone()),
                    ..NewRecord::default()
                })
                .collect()
        };
        let log: Bytes = [
            BatchBuilder::new(0)
                .producer(2, 0, 0)
                .transactional(true)
                .encode(&recs())
                .unwrap()
                .bytes,
            BatchBuilder::new(2)
                .producer(2, 0, 2)
                .encode_marker(ControlType::Abort, 0, 0)
                .unwrap()
                .bytes,
            BatchBuilder::new(3).encode(&recs()).unwrap().bytes,
        ]
        .concat()
        .into();
        let rule = RegionRule::Key(IdFormat::BigEndian);
        let aborted = [AbortedTransaction {
            first_offset: 0,
            producer_id: 2,
        }];
        let index_with = |aborted: &[AbortedTransaction]| {
            let mut index = WalIndex::new();
            let mut report = BuildReport::default();
            let next = index_response(
                &mut index,
                &mut report,
                &rule,
                (log.clone(), aborted),
                (0, 0),
                i64::MAX,
            )
            .unwrap()
            .next;
            assert_eq!(next, 5);
            let offsets: Vec<i64> = index.region(5).unwrap().offsets().collect();
            (offsets, report)
        };
        let (offsets, report) = index_with(&aborted);
        assert_eq!(offsets, [3, 4]);
        assert_eq!((report.indexed, report.aborted, report.control), (2, 2, 1));
        // No aborted transaction listed (a committed one): all indexed.
        let (offsets, report) = index_with(&[]);
        assert_eq!(offsets, [0, 1, 3, 4]);
        assert_eq!(report.aborted, 0);
    }

    #[test]
    fn warnings_name_a_rule_that_finds_little_and_decimal_ids_read_big_endian() {
        let be = RegionRule::Key(IdFormat::BigEndian);
        let fine = BuildReport {
            indexed: 90,
            unassigned: 10,
            ..BuildReport::default()
        };
        assert!(fine.warnings(&be).is_empty());
        let empty = BuildReport::default();
        assert!(empty.warnings(&be).is_empty(), "no record, nothing to say");
        let missing = BuildReport {
            indexed: 4,
            unassigned: 6,
            ..BuildReport::default()
        };
        let w = missing.warnings(&be);
        assert!(
            w.len() == 1 && w[0].contains("no region in 6 of 10"),
            "{w:?}"
        );
        let digits = BuildReport {
            indexed: 10,
            decimal_ids: 10,
            ..BuildReport::default()
        };
        let w = digits.warnings(&be);
        assert!(
            w.len() == 1 && w[0].contains("--region-format decimal"),
            "{w:?}"
        );
        assert!(digits
            .warnings(&RegionRule::Key(IdFormat::Decimal))
            .is_empty());
        let some_digits = BuildReport {
            decimal_ids: 9,
            ..digits
        };
        assert!(some_digits.warnings(&be).is_empty());
        let greptime = BuildReport {
            unassigned: 10,
            greptime_ids: 10,
            ..BuildReport::default()
        };
        let w = greptime.warnings(&be);
        assert!(
            w.len() == 2 && w[1].contains("--region-format greptime"),
            "{w:?}"
        );
        assert!(greptime
            .warnings(&RegionRule::Key(IdFormat::Decimal))
            .iter()
            .any(|w| w.contains("--region-format greptime")));
        let read = BuildReport {
            indexed: 10,
            greptime_ids: 10,
            ..BuildReport::default()
        };
        assert!(read.warnings(&RegionRule::GREPTIMEDB).is_empty());
    }
}
