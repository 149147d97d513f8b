//! Checking one fetch response against what was asked, and taking from it
//! exactly the wanted records. Pure: bytes and plan in, decisions out.
//!
//! Nothing here trusts the plan's hints or the broker's habits:
//! - the response must cover the first wanted offset (Kafka answers from the
//!   batch containing the fetch offset; some brokers skip that batch);
//! - a wanted offset inside a batch or prefix the response carried whole,
//!   yet absent from it, no longer exists (compaction, an aborted
//!   transaction): it is reported lost, never silently dropped;
//! - wanted offsets past what the response covered go back to the planner;
//! - entries past those the fetch asked for are taken too when the response
//!   happens to carry them (every record is matched against the whole
//!   index), but never reported lost or handed back on its account;
//! - a response that starts above the first wanted offset skipped a batch
//!   (some brokers skip the one containing a mid-batch fetch offset) unless
//!   the fetch offset is known not to fall inside a batch: then the offsets
//!   below the response's first batch do not exist. Otherwise the entries
//!   below its first batch go back to the planner, and the batches it
//!   carried are read as any others (their records are what they are,
//!   whichever batch the broker left out before them); a scan fetch takes
//!   nothing from such a response, since its records must come in order,
//!   and nor does a `read_committed` one where an aborted transaction
//!   began below its first batch (its marker may be the batch left out).

use std::ops::Range;

use bytes::Bytes;
use walfetch_codec::{
    AbortedTransaction, BatchHeader, Batches, DecodeOptions, Error as CodecError, Record,
    RecordCheck, TransactionFilter,
};

use crate::fetch::FetchedPartition;
use crate::index::IndexEntry;
use crate::plan::{FetchKind, PlannedFetch, SeenBatch};
use crate::replay::CutRecords;

/// One partition's part of a Fetch response, as absorb needs it.
#[derive(Debug, Clone)]
pub(crate) struct Response<'a> {
    pub(crate) records: Bytes,
    pub(crate) aborted: &'a [AbortedTransaction],
    /// The fetch offset is known not to fall inside a batch (a batch seen
    /// starts there or ends right before it, or nothing below it can be
    /// fetched): a response that starts above the first wanted offset then
    /// shows offsets that do not exist, not a batch the broker skipped.
    pub(crate) aligned: bool,
}

impl<'a> Response<'a> {
    /// The records of `fetched`, its aborted transactions, and whether the
    /// fetch offset is known to be `aligned`.
    pub(crate) fn of(fetched: &'a FetchedPartition, aligned: bool) -> Self {
        Self {
            records: fetched.records.clone(),
            aborted: &fetched.aborted_transactions,
            aligned,
        }
    }
}

/// How to read responses.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AbsorbOptions {
    pub(crate) decode: DecodeOptions,
    pub(crate) read_committed: bool,
    /// Which complete records of the uncompressed prefix of a batch the
    /// broker cut may be taken (the batch's CRC cannot be checked).
    pub(crate) cut_records: CutRecords,
    /// Tail records at or above this offset are not wanted.
    pub(crate) tail_end: i64,
}

/// What one response gave and taught.
#[derive(Debug, Default)]
pub(crate) struct Absorbed {
    /// Wanted entries found: (entry index, record).
    pub(crate) delivered: Vec<(usize, Taken)>,
    /// Tail records, in offset order.
    pub(crate) tail: Vec<Record>,
    /// For each compressed batch whose records are in `tail`: where they
    /// are there, and the bytes of the batch's decompressed records they
    /// are slices of (see [`hold`]); the other records of `tail` are
    /// slices of the answer's records.
    pub(crate) tail_batches: Vec<(Range<usize>, usize)>,
    /// Entry indices the response shows no longer exist.
    pub(crate) lost: Vec<usize>,
    /// Entries to fetch again.
    pub(crate) requeue: Option<Range<usize>>,
    /// For a tail fetch: where the next one starts.
    pub(crate) tail_next: Option<i64>,
    /// The response did not cover the first wanted offset.
    pub(crate) misaligned: bool,
    /// Of a misaligned response: the asked-for entries below its first
    /// batch, to fetch again (a try that missed, see
    /// `crate::plan::PlanView::start_for`).
    pub(crate) skipped: Option<Range<usize>>,
    /// The response's first batch starts above the first wanted offset:
    /// misaligned unless [`Response::aligned`], the only way that flag
    /// counts.
    pub(crate) starts_above: bool,
    /// Every batch the response showed.
    pub(crate) batches: Vec<SeenBatch>,
    /// Records the response held at or above the fetch offset (the
    /// estimate strategy's average is taken over them).
    pub(crate) at_or_above: usize,
    /// Records taken from a cut batch that no checksum covered
    /// ([`CutRecords::Trusted`]).
    pub(crate) unverified: u64,
    /// A record of a cut batch was wanted but carried no per-record
    /// checksum ([`CutRecords::Checked`]): it and what follows it in that
    /// batch were left for a fetch that reads the batch whole.
    pub(crate) unchecked_cut: bool,
    /// The response carried whole batches past the fetch's byte limit:
    /// more than one, together over the limit. Kafka never does (it cuts
    /// the batch the limit falls in; only a lone first batch may be larger,
    /// KIP-74); some brokers add a batch while the bytes they counted are
    /// below the limit.
    pub(crate) overshot: bool,
}

/// A record taken from a response, and the bytes it keeps alive: what it
/// is charged against the memory cap
/// ([`crate::replay::ReplayOptions::max_buffered_bytes`]) until it is
/// yielded.
#[derive(Debug, Clone)]
pub(crate) struct Taken {
    pub(crate) record: Record,
    pub(crate) held: u64,
}

impl Taken {
    /// `record`, charged its own size (see [`hold`]).
    pub(crate) fn own(record: Record) -> Self {
        let held = record.wire_len() as u64;
        Self { record, held }
    }
}

/// Holds `taken`, the records taken together from one buffer of `buffer`
/// bytes, each charged its own bytes so far; what they hold. The buffer is
/// the decompressed records of a compressed batch, or, for records of
/// uncompressed batches, the answer's records as the broker sent them.
/// Each record is a slice of its buffer and keeps the whole of it alive
/// until the last of them is dropped: under a cold region's entries in
/// batches of many regions, a few hundred bytes wanted can hold a
/// mebibyte. Where the records taken are less than half of the buffer they
/// are copied out, and the buffer is freed as soon as it is read (a
/// compressed batch's before the next batch is decompressed): the one
/// place a replay copies records (a small copy costs less than the
/// decompression or the transfer that came before it, and far less than
/// holding the rest). Otherwise they keep it, and it is charged to them in
/// shares by their sizes that add up to the buffer: what they are charged
/// is the buffer, once.
pub(crate) fn hold<'t>(taken: impl IntoIterator<Item = &'t mut Taken>, buffer: usize) -> u64 {
    let mut taken: Vec<&mut Taken> = taken.into_iter().collect();
    let own: u64 = taken.iter().map(|t| t.held).sum();
    let buffer = buffer as u64;
    if own == 0 || buffer <= own {
        return own;
    }
    if buffer / 2 > own {
        for t in &mut taken {
            t.record = t.record.detached();
        }
        return own;
    }
    // Each record's share: the buffer's part up to its end, by the
    // records' sizes so far, less the part up to its start.
    let part = |upto: u64| {
        u64::try_from(u128::from(upto) * u128::from(buffer) / u128::from(own)).unwrap_or(u64::MAX)
    };
    let (mut upto, mut charged) = (0, 0);
    for t in &mut taken {
        upto += t.held;
        let share = part(upto) - charged;
        charged += share;
        t.held = share;
    }
    buffer
}

/// Reads `response` to `fetch`, which asked for some of `entries` (the
/// replay's) or for the scan past `last_index`.
pub(crate) fn absorb(
    entries: &[IndexEntry],
    fetch: &PlannedFetch,
    response: &Response<'_>,
    opts: &AbsorbOptions,
) -> Result<Absorbed, CodecError> {
    // The entries the fetch asked for (`wanted[..asked]`), then every
    // entry after them.
    let (range, wanted, asked): (Range<usize>, &[IndexEntry], usize) = match &fetch.kind {
        FetchKind::Indexed { entries: asked } if asked.end <= entries.len() => (
            asked.clone(),
            &entries[asked.start.min(asked.end)..],
            asked.len(),
        ),
        _ => (0..0, &[], 0),
    };
    let wanted = Wanted {
        entries: wanted,
        asked,
    };
    let tail_from = match fetch.kind {
        FetchKind::Tail { from } => Some(from),
        FetchKind::Indexed { .. } => None,
    };
    let first_wanted = wanted
        .entries
        .first()
        .map(|e| e.offset)
        .or(tail_from)
        .unwrap_or(fetch.offset);

    let mut out = Absorbed::default();
    let mut filter = opts
        .read_committed
        .then(|| TransactionFilter::new(response.aborted.iter().copied()));
    // Every offset up to `covered` is accounted for: delivered or absent.
    let mut covered = first_wanted - 1;
    let mut cursor = 0usize;
    let mut at_or_above = 0usize;
    let mut batches = Batches::new(response.records.clone(), opts.decode);
    let mut first = true;
    // The response is misaligned and nothing of it can be taken: a scan
    // fetch's, one whose only batch is cut, or one an aborted transaction
    // may reach into from the batch left out.
    let mut discard = false;

    // The highest last offset of the batches read so far.
    let mut seen_last: Option<i64> = None;
    // The complete batches read so far (repeats aside), and their bytes.
    let (mut complete, mut complete_bytes) = (0u32, 0usize);

    for batch in &mut batches {
        let batch = batch?;
        let h = *batch.header();
        // A batch that ends at or below one this response already carried
        // is a repeat (Tansu 0.6 sends the log's last batch twice): nothing
        // in it is new.
        if seen_last.is_some_and(|last| h.last_offset() <= last) {
            continue;
        }
        seen_last = Some(h.last_offset());
        complete += 1;
        complete_bytes = complete_bytes.saturating_add(h.total_len());
        out.batches.extend(seen(&h));
        // Saturating: a base offset is not covered by the CRC, and a
        // corrupt one may be anything.
        let from = h.base_offset.max(fetch.offset);
        let here = h
            .last_offset()
            .saturating_sub(from)
            .saturating_add(1)
            .max(0);
        at_or_above = at_or_above.saturating_add(usize::try_from(here).unwrap_or(usize::MAX));
        if first {
            first = false;
            out.starts_above = h.base_offset > first_wanted;
            out.misaligned = out.starts_above && !response.aligned;
            // Under read_committed, an aborted transaction that began
            // below this batch may have its marker in the batch left out:
            // whether its producer's batches here are aborted is unknown.
            let unsure = filter.is_some()
                && response
                    .aborted
                    .iter()
                    .any(|t| t.first_offset < h.base_offset);
            discard = out.misaligned && (tail_from.is_some() || unsure);
            if out.misaligned && !discard {
                // The entries below this batch are left for another fetch;
                // from here on the response is read as any other.
                cursor = wanted.end_at_or_below(h.base_offset - 1);
                out.skipped = Some(range.start..range.start + cursor.min(wanted.asked));
                covered = h.base_offset - 1;
            }
        }
        // A response that skipped the first wanted offset and cannot be
        // read past it delivers nothing, but its batches still teach the
        // layout and count toward the records it returned (the estimate
        // strategy's average).
        if discard {
            continue;
        }
        // Every batch goes through the transaction filter, in order, those
        // below the first wanted offset too, as Kafka's consumer feeds it
        // every batch of a response (KIP-98): an abort marker there ends
        // its producer's aborted transaction, and that producer's later
        // batches are then committed data, not aborted.
        let admitted = match filter.as_mut() {
            Some(f) => f.admit(&batch)?,
            None => !h.is_control(),
        };
        if h.last_offset() <= covered {
            continue;
        }
        if admitted {
            if let Some(from) = tail_from {
                let end = opts.tail_end;
                let start = out.tail.len();
                let mut records = batch.records_in(from.max(covered + 1)..end)?;
                for record in &mut records {
                    out.tail.push(record?);
                }
                let buffer = records.decompressed_len();
                if buffer > 0 {
                    out.tail_batches.push((start..out.tail.len(), buffer));
                }
            } else {
                let hi_index = wanted.end_at_or_below(h.last_offset());
                if cursor < hi_index {
                    let (lo, hi) = (wanted.offset(cursor), wanted.offset(hi_index - 1));
                    let first = out.delivered.len();
                    let mut records = batch.records_in(lo..=hi)?;
                    for record in &mut records {
                        take(&wanted, &range, &mut cursor, &mut out, record?);
                    }
                    // Before the next batch is decompressed: few records
                    // of this one are copied out and its buffer freed.
                    // (Those of an uncompressed batch are slices of the
                    // answer, held once it is read.)
                    let buffer = records.decompressed_len();
                    if buffer > 0 {
                        hold(out.delivered[first..].iter_mut().map(|(_, t)| t), buffer);
                    }
                }
            }
        }
        covered = covered.max(h.last_offset());
        mark_lost(&wanted, &range, &mut cursor, covered, &mut out);
    }

    // A batch the broker cut at the byte limit: its header still teaches the
    // layout, and its complete uncompressed records can be used.
    if let (false, Some(partial)) = (discard, batches.partial()) {
        if let Some(h) = partial.header() {
            out.batches.extend(seen(&h));
            if first && h.base_offset > first_wanted {
                out.starts_above = true;
                out.misaligned = !response.aligned;
                discard = out.misaligned;
            }
            let usable = opts.cut_records != CutRecords::Never
                && !discard
                && !h.is_control()
                && (!opts.read_committed || !h.is_transactional())
                && (h.base_offset <= first_wanted.max(covered + 1) || first);
            if let (true, Some(records)) = (usable, partial.records_unverified()) {
                let mut last_seen = None;
                for record in records {
                    let record = record?;
                    let wanted_here = match tail_from {
                        Some(from) => {
                            record.offset() >= from.max(covered + 1)
                                && record.offset() < opts.tail_end
                        }
                        None => cursor < wanted.len() && record.offset() == wanted.offset(cursor),
                    };
                    // A record that would be taken must be covered by its
                    // own checksum; past one that is not, nothing of this
                    // batch counts as seen.
                    if wanted_here {
                        match (record.check_checksum(), opts.cut_records) {
                            (RecordCheck::Mismatch, _) => {
                                return Err(CodecError::RecordChecksumMismatch {
                                    offset: record.offset(),
                                })
                            }
                            (RecordCheck::Missing, CutRecords::Trusted) => out.unverified += 1,
                            (RecordCheck::Missing, _) => {
                                out.unchecked_cut = true;
                                break;
                            }
                            (RecordCheck::Verified, _) => {}
                        }
                    }
                    last_seen = Some(record.offset());
                    if tail_from.is_some() {
                        if wanted_here {
                            out.tail.push(record);
                        }
                    } else if cursor < wanted.len() && record.offset() >= wanted.offset(cursor) {
                        take(&wanted, &range, &mut cursor, &mut out, record);
                    }
                }
                if let Some(last) = last_seen {
                    covered = covered.max(last);
                    mark_lost(&wanted, &range, &mut cursor, covered, &mut out);
                }
            }
        }
    }

    out.at_or_above = at_or_above;
    out.overshot = complete > 1 && complete_bytes > fetch.max_bytes as usize;
    if discard {
        out.skipped = None;
        out.unverified = 0;
        out.delivered.clear();
        out.tail.clear();
        out.tail_batches.clear();
        out.lost.clear();
        cursor = 0;
        covered = first_wanted - 1;
    }
    // The records of uncompressed batches taken (a compressed batch's have
    // no place in a batch) are slices of the answer's records: held for
    // what they keep alive of them.
    hold(
        out.delivered
            .iter_mut()
            .map(|(_, t)| t)
            .filter(|t| t.record.batch_range().is_some()),
        response.records.len(),
    );
    if cursor < wanted.asked {
        out.requeue = Some(range.start + cursor..range.end);
    }
    if tail_from.is_some() {
        out.tail_next = Some((covered + 1).max(first_wanted));
    }
    Ok(out)
}

/// What a batch header teaches the layout; nothing when the header is
/// inconsistent (a cut batch's header is not covered by its CRC, and may
/// claim a last offset below its base or a length past `u32`).
fn seen(h: &BatchHeader) -> Option<SeenBatch> {
    let last = h.last_offset();
    let len = u32::try_from(h.total_len()).ok()?;
    (last >= h.base_offset).then(|| SeenBatch {
        base: h.base_offset,
        last,
        len,
        compressed: h.attributes.compression_id() != 0,
    })
}

/// The entries a response is matched against: those its fetch asked for
/// (`entries[..asked]`), then every later one.
struct Wanted<'a> {
    entries: &'a [IndexEntry],
    asked: usize,
}

impl Wanted<'_> {
    fn len(&self) -> usize {
        self.entries.len()
    }

    fn offset(&self, i: usize) -> i64 {
        self.entries[i].offset
    }

    /// How many entries sit at or below `offset`.
    fn end_at_or_below(&self, offset: i64) -> usize {
        self.entries.partition_point(|e| e.offset <= offset)
    }
}

/// Delivers `record` if it is the entry at `cursor`; asked-for entries it
/// passed are lost (later ones were only hoped for).
fn take(
    wanted: &Wanted<'_>,
    range: &Range<usize>,
    cursor: &mut usize,
    out: &mut Absorbed,
    record: Record,
) {
    while *cursor < wanted.len() && wanted.offset(*cursor) < record.offset() {
        if *cursor < wanted.asked {
            out.lost.push(range.start + *cursor);
        }
        *cursor += 1;
    }
    if *cursor < wanted.len() && wanted.offset(*cursor) == record.offset() {
        out.delivered
            .push((range.start + *cursor, Taken::own(record)));
        *cursor += 1;
    }
}

/// Asked-for entries at or below `covered` that were not delivered are
/// lost.
fn mark_lost(
    wanted: &Wanted<'_>,
    range: &Range<usize>,
    cursor: &mut usize,
    covered: i64,
    out: &mut Absorbed,
) {
    while *cursor < wanted.len() && wanted.offset(*cursor) <= covered {
        if *cursor < wanted.asked {
            out.lost.push(range.start + *cursor);
        }
        *cursor += 1;
    }
}

#[cfg(test)]
mod tests {
    use walfetch_codec::{
        record_checksum_header, BatchBuilder, Error as CodecError, NewRecord,
        RECORD_CHECKSUM_HEADER,
    };

    use super::*;

    /// Four records at offsets 0..4, with per-record checksums or not,
    /// cut right after the third (a response cut at its byte limit), the
    /// third's value changed after it was written when `flip`.
    fn cut_batch(checksums: bool, flip: bool) -> Bytes {
        let records: Vec<NewRecord> = (0..4)
            .map(|i| {
                let value = vec![b'a' + i as u8; 20];
                let headers = checksums
                    .then(|| {
                        let sum = record_checksum_header(None, Some(&value));
                        (
                            Bytes::from_static(RECORD_CHECKSUM_HEADER.as_bytes()),
                            Some(Bytes::copy_from_slice(&sum)),
                        )
                    })
                    .into_iter()
                    .collect();
                NewRecord {
                    headers,
                    ..NewRecord::value(i, value)
                }
            })
            .collect();
        let batch = BatchBuilder::new(0).encode(&records).expect("encode");
        let cut = batch.record_end_in_batch(2).expect("uncompressed");
        let mut bytes = batch.bytes[..cut].to_vec();
        if flip {
            // The third record's last value byte sits right before its
            // headers (a count, then each header).
            let header_len = if checksums {
                1 + 1 + RECORD_CHECKSUM_HEADER.len() + 1 + 4
            } else {
                1
            };
            bytes[cut - header_len - 1] ^= 0x20;
        }
        Bytes::from(bytes)
    }

    fn absorb_cut(bytes: Bytes, cut_records: CutRecords) -> Result<Absorbed, CodecError> {
        let entries: Vec<IndexEntry> = (0..4).map(IndexEntry::offset_only).collect();
        let fetch = PlannedFetch {
            offset: 0,
            max_bytes: bytes.len() as u32,
            kind: FetchKind::Indexed { entries: 0..4 },
        };
        let response = Response {
            records: bytes,
            aborted: &[],
            aligned: true,
        };
        let opts = AbsorbOptions {
            decode: DecodeOptions::default(),
            read_committed: false,
            cut_records,
            tail_end: i64::MAX,
        };
        absorb(&entries, &fetch, &response, &opts)
    }

    fn offsets(out: &Absorbed) -> Vec<i64> {
        out.delivered
            .iter()
            .map(|(_, t)| t.record.offset())
            .collect()
    }

    /// A batch of records at offsets `base..base + 5`.
    fn whole_batch(base: i64) -> Bytes {
        let records: Vec<NewRecord> = (0..5)
            .map(|i| NewRecord::value(i, vec![b'v'; 10]))
            .collect();
        BatchBuilder::new(base)
            .encode(&records)
            .expect("encode")
            .bytes
    }

    /// [`absorb`] of `records`, which start above offset 2, to a fetch of
    /// `kind` from 2; `read_committed` with `aborted` where given.
    fn absorb_misaligned(
        records: Bytes,
        kind: FetchKind,
        aborted: Option<&[AbortedTransaction]>,
    ) -> Absorbed {
        let entries: Vec<IndexEntry> = [2, 3, 6, 7, 12, 20]
            .into_iter()
            .map(IndexEntry::offset_only)
            .collect();
        let fetch = PlannedFetch {
            offset: 2,
            max_bytes: 1 << 20,
            kind,
        };
        let response = Response {
            records,
            aborted: aborted.unwrap_or_default(),
            aligned: false,
        };
        let opts = AbsorbOptions {
            decode: DecodeOptions::default(),
            read_committed: aborted.is_some(),
            cut_records: CutRecords::Checked,
            tail_end: i64::MAX,
        };
        absorb(&entries, &fetch, &response, &opts).expect("absorbed")
    }

    /// A broker that skipped the batch holding the fetch offset (offsets
    /// 0..5) sent the two after it: their records are taken, an asked-for
    /// offset they cover but do not hold is lost, and only the entries
    /// below them go back, as a try that missed.
    #[test]
    fn a_misaligned_answer_keeps_the_batches_it_carried() {
        let both: Bytes = [whole_batch(5), whole_batch(10)].concat().into();
        let out = absorb_misaligned(both.clone(), FetchKind::Indexed { entries: 0..6 }, None);
        assert!(out.misaligned);
        assert_eq!(offsets(&out), [6, 7, 12]);
        assert_eq!(out.skipped, Some(0..2));
        assert_eq!(out.requeue, Some(5..6));
        assert!(out.lost.is_empty());
        // Asked for 3..5 only (6 and 7 are a bonus): 3 goes back, nothing
        // is requeued past it.
        let out = absorb_misaligned(both.clone(), FetchKind::Indexed { entries: 1..3 }, None);
        assert_eq!(out.skipped, Some(1..2));
        assert_eq!(out.requeue, None);
        assert_eq!(offsets(&out), [6, 7, 12]);
        // A scan takes nothing from it: its records must come in order.
        let out = absorb_misaligned(both.clone(), FetchKind::Tail { from: 2 }, None);
        assert!(out.misaligned && out.tail.is_empty() && out.skipped.is_none());
        assert_eq!(out.tail_next, Some(2));
        // Its only batch cut: nothing of it is taken either.
        let cut = whole_batch(5).slice(..80);
        let out = absorb_misaligned(cut, FetchKind::Indexed { entries: 0..6 }, None);
        assert!(out.misaligned && out.delivered.is_empty() && out.skipped.is_none());
        assert_eq!(out.requeue, Some(0..6));
        // read_committed, with a transaction aborted that began below the
        // first batch: its marker may be in the batch left out, so whether
        // the batches here are aborted is unknown; nothing is taken. One
        // that began in them is decided by the batches themselves.
        let below = [AbortedTransaction {
            first_offset: 4,
            producer_id: 7,
        }];
        let kind = || FetchKind::Indexed { entries: 0..6 };
        let out = absorb_misaligned(both.clone(), kind(), Some(&below));
        assert!(out.misaligned && out.delivered.is_empty() && out.skipped.is_none());
        assert_eq!(out.requeue, Some(0..6));
        let within = [AbortedTransaction {
            first_offset: 5,
            producer_id: 7,
        }];
        let out = absorb_misaligned(both, kind(), Some(&within));
        assert_eq!(offsets(&out), [6, 7, 12]);
    }

    #[test]
    fn checksummed_cut_records_are_used_and_a_flipped_byte_is_caught() {
        for policy in [CutRecords::Checked, CutRecords::Trusted] {
            let out = absorb_cut(cut_batch(true, false), policy).expect("absorbed");
            assert_eq!(offsets(&out), [0, 1, 2], "{policy:?}");
            assert_eq!((out.unverified, out.unchecked_cut), (0, false));
            assert_eq!(out.requeue, Some(3..4));
            let error = absorb_cut(cut_batch(true, true), policy).expect_err("corrupt");
            assert!(
                matches!(error, CodecError::RecordChecksumMismatch { offset: 2 }),
                "{policy:?}: {error}"
            );
            assert!(error.to_string().contains("offset 2"), "{error}");
        }
    }

    #[test]
    fn unchecksummed_cut_records_are_left_unless_trusted_and_then_counted() {
        // Checked: nothing of the cut batch is taken; it is fetched again.
        let out = absorb_cut(cut_batch(false, true), CutRecords::Checked).expect("absorbed");
        assert!(out.delivered.is_empty());
        assert!(out.unchecked_cut);
        assert_eq!(out.requeue, Some(0..4));
        // Trusted: taken, the flipped byte and all, and counted.
        let out = absorb_cut(cut_batch(false, true), CutRecords::Trusted).expect("absorbed");
        assert_eq!(offsets(&out), [0, 1, 2]);
        assert_eq!(out.unverified, 3);
        let mut flipped = [b'c'; 20];
        flipped[19] = b'C';
        assert_eq!(out.delivered[2].1.record.value(), Some(&flipped[..]));
        // Never: not even checksummed records.
        let out = absorb_cut(cut_batch(true, false), CutRecords::Never).expect("absorbed");
        assert!(out.delivered.is_empty());
        assert_eq!(out.requeue, Some(0..4));
    }

    /// A read_committed fetch from below the first wanted offset (as after
    /// a back-off): producer 2's transaction at 0..=2 was aborted by its
    /// marker at 3, and its next transaction, 4..=6, committed at 7. The
    /// response lists the aborted one, and the marker below the wanted
    /// offsets must still end it: the committed records are delivered, not
    /// reported lost.
    #[test]
    fn an_abort_marker_below_the_wanted_offsets_ends_its_transaction() {
        use walfetch_codec::ControlType;
        let data = |base, sequence| {
            let records: Vec<NewRecord> = (0..3).map(|i| NewRecord::value(i, "t")).collect();
            BatchBuilder::new(base)
                .producer(2, 0, sequence)
                .transactional(true)
                .encode(&records)
                .expect("encode")
                .bytes
        };
        let marker = |base, kind| {
            BatchBuilder::new(base)
                .producer(2, 0, -1)
                .encode_marker(kind, 0, 0)
                .expect("encode")
                .bytes
        };
        let records: Bytes = [
            data(0, 0),
            marker(3, ControlType::Abort),
            data(4, 3),
            marker(7, ControlType::Commit),
        ]
        .concat()
        .into();
        let entries: Vec<IndexEntry> = (4..7).map(IndexEntry::offset_only).collect();
        let fetch = PlannedFetch {
            offset: 0,
            max_bytes: 1 << 20,
            kind: FetchKind::Indexed { entries: 0..3 },
        };
        let aborted = [AbortedTransaction {
            first_offset: 0,
            producer_id: 2,
        }];
        let response = Response {
            records,
            aborted: &aborted,
            aligned: true,
        };
        let opts = AbsorbOptions {
            decode: DecodeOptions::default(),
            read_committed: true,
            cut_records: CutRecords::Checked,
            tail_end: i64::MAX,
        };
        let out = absorb(&entries, &fetch, &response, &opts).expect("absorbed");
        assert_eq!(offsets(&out), [4, 5, 6]);
        assert!(out.lost.is_empty() && out.requeue.is_none(), "{out:?}");
    }
}
