//! The WAL index: per region, the offsets of its entries, optionally with
//! hints the writer knew exactly, plus `last_index`, the offset up to which
//! the index is complete.
//!
//! An index is a promise about one log: it records what it indexes (an
//! [`IndexSource`]: topic, partition, topic id, the first offset it covers
//! and the region rule), and a replay checks those against the partition it
//! reads before trusting the offsets.
//!
//! The index is what lets a replay skip other regions' data: the planner
//! starts fetches at the region's offsets and sizes them from the hints.
//! Hints only ever save bytes; a wrong or stale hint costs bytes or a round
//! trip, never a record, because the consumer checks what the broker sent.

mod file;
mod greptime;
mod rule;

use std::collections::BTreeMap;

use uuid::Uuid;

pub use file::{
    decode_index, encode_index, read_index, read_index_file, temp_path, write_index_file,
    INDEX_FILE_VERSION, MAX_INDEX_FILE_BYTES,
};
pub use greptime::{import_greptime, GREPTIMEDB_PARTITION};
#[doc(hidden)]
pub use rule::is_greptime_meta;
pub use rule::{IdFormat, RegionRule};

/// A region (shard) of the database: entries are grouped by it.
pub type RegionId = u64;

/// What the writer knew exactly about an entry when it produced it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Hint {
    /// Base offset of the batch holding the entry.
    pub batch_base: i64,
    /// The batch's whole encoded length in bytes.
    pub batch_len: u32,
    /// Where the entry's record ends inside the batch, in bytes from the
    /// batch's first byte (for a compressed batch, the batch length: a
    /// compressed batch cannot be read in part).
    pub record_end: u32,
}

/// One indexed entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IndexEntry {
    /// The entry's offset in the partition.
    pub offset: i64,
    /// Exact hints, when the writer recorded them.
    pub hint: Option<Hint>,
}

impl IndexEntry {
    /// An entry with no hints (as from a GreptimeDB index file).
    pub fn offset_only(offset: i64) -> Self {
        Self { offset, hint: None }
    }
}

/// Why an index could not be built, read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IndexError {
    /// Offsets must be added in strictly increasing order.
    #[error("region {region}: offset {offset} is not above the previous offset {previous}")]
    OutOfOrder {
        /// The region.
        region: RegionId,
        /// The offset that was added.
        offset: i64,
        /// The last offset already indexed.
        previous: i64,
    },
    /// An offset or hint is impossible (negative, or a hint that does not
    /// contain its entry).
    #[error("region {region}: invalid entry at offset {offset}: {what}")]
    InvalidEntry {
        /// The region.
        region: RegionId,
        /// The entry's offset.
        offset: i64,
        /// What was wrong.
        what: &'static str,
    },
    /// An index file is damaged, truncated or of an unknown format.
    #[error("corrupt index file {path}: {what}")]
    Corrupt {
        /// The file.
        path: String,
        /// What was wrong, with the byte position where known.
        what: String,
    },
    /// Two indexes to merge are of different logs or rules.
    #[error("the indexes do not describe the same log: {0}")]
    SourceConflict(String),
    /// One offset is given to two regions (by two indexes to merge, or
    /// within an index file read or imported): a record has one region, so
    /// the index cannot be of a log.
    #[error("offset {offset} is given to both region {region} and region {other}")]
    SharedOffset {
        /// The offset.
        offset: i64,
        /// The region one index gives it to.
        region: RegionId,
        /// The other region it is given to.
        other: RegionId,
    },
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// What an index indexes. Each part is `None` when unknown (an index file
/// of format version 1, a GreptimeDB index); a replay checks the parts that
/// are known (see [`crate::error::Mismatch`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct IndexSource {
    /// The topic.
    pub topic: Option<String>,
    /// The partition.
    pub partition: Option<i32>,
    /// The topic's id (Metadata v10+, KIP-516): tells a topic deleted and
    /// recreated under the same name from the one indexed.
    pub topic_id: Option<Uuid>,
    /// The first offset the index covers: every entry from it up to
    /// `last_index` is indexed; below it, nothing is known.
    pub first_offset: Option<i64>,
    /// The region rule that assigned records to regions.
    pub rule: Option<RegionRule>,
}

impl IndexSource {
    /// The source `topic`/`partition`, the rest unknown.
    pub fn new(topic: impl Into<String>, partition: i32) -> Self {
        Self {
            topic: Some(topic.into()),
            partition: Some(partition),
            ..Self::default()
        }
    }

    /// Sets [`IndexSource::topic_id`] (a nil id means unknown).
    pub fn with_topic_id(mut self, id: Uuid) -> Self {
        self.topic_id = (!id.is_nil()).then_some(id);
        self
    }

    /// Sets [`IndexSource::first_offset`].
    pub fn with_first_offset(mut self, offset: i64) -> Self {
        self.first_offset = Some(offset);
        self
    }

    /// Sets [`IndexSource::rule`].
    pub fn with_rule(mut self, rule: RegionRule) -> Self {
        self.rule = Some(rule);
        self
    }

    /// Whether nothing is known.
    pub fn is_unknown(&self) -> bool {
        *self == Self::default()
    }

    /// Joins the source of another index of the same log: parts known to
    /// one are kept, the first offset is the higher (both are complete from
    /// there), and parts both know must agree.
    fn merge(&mut self, other: &IndexSource) -> Result<(), IndexError> {
        fn join<T: PartialEq + Clone + std::fmt::Debug>(
            mine: &mut Option<T>,
            theirs: &Option<T>,
            what: &str,
        ) -> Result<(), IndexError> {
            match (mine.as_ref(), theirs) {
                (Some(a), Some(b)) if a != b => Err(IndexError::SourceConflict(format!(
                    "one index is of {what} {a:?}, the other of {b:?}"
                ))),
                (None, Some(b)) => {
                    *mine = Some(b.clone());
                    Ok(())
                }
                _ => Ok(()),
            }
        }
        join(&mut self.topic, &other.topic, "topic")?;
        join(&mut self.partition, &other.partition, "partition")?;
        join(&mut self.topic_id, &other.topic_id, "topic id")?;
        join(&mut self.rule, &other.rule, "region rule")?;
        self.first_offset = match (self.first_offset, other.first_offset) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        Ok(())
    }
}

/// One region's sorted entries. A region may be listed with none: the
/// index knows it and it has nothing indexed up to `last_index` (as a
/// GreptimeDB index lists a region whose entries were all flushed,
/// `"7": []`); a replay of it reads only the log past `last_index`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RegionIndex {
    entries: Vec<IndexEntry>,
}

impl RegionIndex {
    /// The entries, in offset order.
    pub fn entries(&self) -> &[IndexEntry] {
        &self.entries
    }

    /// The entries' offsets, in order.
    pub fn offsets(&self) -> impl Iterator<Item = i64> + '_ {
        self.entries.iter().map(|e| e.offset)
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the region has no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entries with offsets in `from..to`.
    pub fn range(&self, from: i64, to: i64) -> &[IndexEntry] {
        let lo = self.entries.partition_point(|e| e.offset < from);
        let hi = self.entries.partition_point(|e| e.offset < to).max(lo);
        &self.entries[lo..hi]
    }

    fn push(&mut self, region: RegionId, entry: IndexEntry) -> Result<(), IndexError> {
        let invalid = |what| IndexError::InvalidEntry {
            region,
            offset: entry.offset,
            what,
        };
        if entry.offset < 0 {
            return Err(invalid("negative offset"));
        }
        if let Some(h) = entry.hint {
            if h.batch_base > entry.offset || h.batch_base < 0 {
                return Err(invalid("the hinted batch starts after the entry"));
            }
            if h.record_end > h.batch_len || (h.record_end as usize) < walfetch_codec::HEADER_LEN {
                return Err(invalid("the hinted record end is outside the batch"));
            }
        }
        if let Some(last) = self.entries.last() {
            if entry.offset <= last.offset {
                return Err(IndexError::OutOfOrder {
                    region,
                    offset: entry.offset,
                    previous: last.offset,
                });
            }
        }
        self.entries.push(entry);
        Ok(())
    }
}

/// The index of one topic partition: every region's entries plus
/// `last_index`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WalIndex {
    regions: BTreeMap<RegionId, RegionIndex>,
    last_index: Option<i64>,
    source: IndexSource,
}

impl WalIndex {
    /// An empty index.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an entry of `region`; offsets of a region must increase. An
    /// entry refused leaves the index as it was (a new region is not
    /// added). An offset must not be given to two regions (a record has
    /// one); checking that on every push would cost a look into every
    /// region, so it is the caller's to keep, and it is checked where an
    /// index comes from outside: [`decode_index`], [`import_greptime`] and
    /// [`WalIndex::merge`] refuse it ([`IndexError::SharedOffset`]).
    pub fn push(&mut self, region: RegionId, entry: IndexEntry) -> Result<(), IndexError> {
        match self.regions.get_mut(&region) {
            Some(known) => known.push(region, entry),
            None => {
                let mut new = RegionIndex::default();
                new.push(region, entry)?;
                self.regions.insert(region, new);
                Ok(())
            }
        }
    }

    /// Lists `region` with no entries, if the index does not list it yet:
    /// a region known to have nothing indexed up to `last_index` (a replay
    /// of it reads the log past `last_index` only), not one the index knows
    /// nothing of ([`crate::error::Mismatch::RegionAbsent`]).
    pub fn add_region(&mut self, region: RegionId) {
        self.regions.entry(region).or_default();
    }

    /// The last offset the index covers (inclusive): every entry of every
    /// region at or below it is indexed. Past it, a replay must scan.
    pub fn last_index(&self) -> Option<i64> {
        self.last_index
    }

    /// Sets `last_index`. It never moves backwards; an offset below 0
    /// (nothing indexed: an empty log) leaves it as it is.
    pub fn set_last_index(&mut self, offset: i64) {
        if offset < 0 {
            return;
        }
        self.last_index = Some(self.last_index.map_or(offset, |l| l.max(offset)));
    }

    /// What the index indexes, as far as known.
    pub fn source(&self) -> &IndexSource {
        &self.source
    }

    /// Records what the index indexes.
    pub fn set_source(&mut self, source: IndexSource) {
        self.source = source;
    }

    /// The region's entries, if the index lists the region (possibly with
    /// none, [`WalIndex::add_region`]).
    pub fn region(&self, region: RegionId) -> Option<&RegionIndex> {
        self.regions.get(&region)
    }

    /// Every region listed, in id order (those with no entries included).
    pub fn regions(&self) -> impl Iterator<Item = (RegionId, &RegionIndex)> {
        self.regions.iter().map(|(id, r)| (*id, r))
    }

    /// Drops every entry below `checkpoint` (what regions have already
    /// flushed). A region left with no entries stays listed, with nothing
    /// to replay (as GreptimeDB keeps a region it truncated): dropped, a
    /// replay of it up to `last_index` would be refused as a region the
    /// index does not know. The index then covers nothing below
    /// `checkpoint`: its first offset rises to it.
    pub fn truncate_below(&mut self, checkpoint: i64) {
        self.source.first_offset = Some(
            self.source
                .first_offset
                .map_or(checkpoint, |f| f.max(checkpoint)),
        );
        for region in self.regions.values_mut() {
            let keep = region.entries.partition_point(|e| e.offset < checkpoint);
            region.entries.drain(..keep);
        }
    }

    /// Joins the index of another writer of the same partition: entries of
    /// both, every region either lists (those with no entries too), and a
    /// `last_index` up to which both are complete (the lower). Their
    /// sources must agree where both are known, a region's offset may not
    /// be in both, and an offset may not be in two regions
    /// ([`IndexError::SharedOffset`]). A merge refused leaves the index as
    /// it was.
    pub fn merge(&mut self, other: &WalIndex) -> Result<(), IndexError> {
        let mut source = self.source.clone();
        source.merge(&other.source)?;
        // Merged into a copy of the regions, swapped in once all is well.
        let mut regions = self.regions.clone();
        for (id, region) in other.regions() {
            let mine = regions.entry(id).or_default();
            let mut merged = Vec::with_capacity(mine.len() + region.len());
            let (mut a, mut b) = (
                mine.entries.iter().peekable(),
                region.entries.iter().peekable(),
            );
            loop {
                let next = match (a.peek(), b.peek()) {
                    (Some(x), Some(y)) if x.offset <= y.offset => a.next(),
                    (Some(_), Some(_)) | (None, Some(_)) => b.next(),
                    (Some(_), None) => a.next(),
                    (None, None) => break,
                };
                if let Some(&e) = next {
                    if merged
                        .last()
                        .is_some_and(|l: &IndexEntry| l.offset == e.offset)
                    {
                        return Err(IndexError::OutOfOrder {
                            region: id,
                            offset: e.offset,
                            previous: e.offset,
                        });
                    }
                    merged.push(e);
                }
            }
            mine.entries = merged;
        }
        check_one_region_an_offset(&regions)?;
        self.regions = regions;
        self.last_index = match (self.last_index, other.last_index) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.source = source;
        Ok(())
    }

    /// The same index without hints: offsets only, as a GreptimeDB index
    /// file gives them.
    pub fn without_hints(&self) -> WalIndex {
        let regions = self
            .regions
            .iter()
            .map(|(id, r)| {
                let entries = r
                    .entries
                    .iter()
                    .map(|e| IndexEntry::offset_only(e.offset))
                    .collect();
                (*id, RegionIndex { entries })
            })
            .collect();
        WalIndex {
            regions,
            last_index: self.last_index,
            source: self.source.clone(),
        }
    }

    /// Total number of entries.
    pub fn len(&self) -> usize {
        self.regions.values().map(RegionIndex::len).sum()
    }

    /// Whether no region has entries (regions may be listed with none).
    pub fn is_empty(&self) -> bool {
        self.regions.values().all(RegionIndex::is_empty)
    }
}

/// Refuses an offset given to two regions, naming it and both: a record
/// has one region. Each region's entries are sorted, so a merge of the
/// regions' heads finds it holding one head per region, not a copy of
/// every entry (an index file may hold a hundred million).
pub(crate) fn check_one_region_an_offset(
    regions: &BTreeMap<RegionId, RegionIndex>,
) -> Result<(), IndexError> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    if regions.len() < 2 {
        return Ok(());
    }
    let lists: Vec<(RegionId, &[IndexEntry])> = regions
        .iter()
        .map(|(id, r)| (*id, r.entries.as_slice()))
        .collect();
    // (offset, which list, position in it): the smallest offset first.
    let mut heads: BinaryHeap<Reverse<(i64, usize, usize)>> = lists
        .iter()
        .enumerate()
        .filter_map(|(k, (_, entries))| entries.first().map(|e| Reverse((e.offset, k, 0))))
        .collect();
    let mut previous: Option<(i64, usize)> = None;
    while let Some(Reverse((offset, k, at))) = heads.pop() {
        if let Some((before, other)) = previous.filter(|(o, _)| *o == offset) {
            return Err(IndexError::SharedOffset {
                offset: before,
                region: lists[other].0,
                other: lists[k].0,
            });
        }
        previous = Some((offset, k));
        if let Some(next) = lists[k].1.get(at + 1) {
            heads.push(Reverse((next.offset, k, at + 1)));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hinted(offset: i64, base: i64) -> IndexEntry {
        IndexEntry {
            offset,
            hint: Some(Hint {
                batch_base: base,
                batch_len: 500,
                record_end: 100,
            }),
        }
    }

    #[test]
    fn offsets_must_increase_and_hints_must_hold_their_entry() {
        let mut index = WalIndex::new();
        index.push(1, IndexEntry::offset_only(5)).unwrap();
        assert!(matches!(
            index.push(1, IndexEntry::offset_only(5)),
            Err(IndexError::OutOfOrder {
                region: 1,
                offset: 5,
                previous: 5
            })
        ));
        index.push(2, IndexEntry::offset_only(1)).unwrap();
        assert!(
            index.push(1, hinted(9, 10)).is_err(),
            "batch after the entry"
        );
        assert!(index.push(1, IndexEntry::offset_only(-1)).is_err());
        let bad_end = IndexEntry {
            offset: 20,
            hint: Some(Hint {
                batch_base: 20,
                batch_len: 100,
                record_end: 101,
            }),
        };
        assert!(index.push(1, bad_end).is_err());
    }

    #[test]
    fn merging_two_writers() {
        let mut a = WalIndex::new();
        let mut b = WalIndex::new();
        for o in [1, 5, 9] {
            a.push(1, IndexEntry::offset_only(o)).unwrap();
        }
        for o in [2, 6] {
            b.push(1, IndexEntry::offset_only(o)).unwrap();
            b.push(2, IndexEntry::offset_only(o + 1)).unwrap();
        }
        a.set_last_index(9);
        b.set_last_index(7);
        a.merge(&b).unwrap();
        let offsets: Vec<i64> = a.region(1).unwrap().offsets().collect();
        assert_eq!(offsets, [1, 2, 5, 6, 9]);
        assert_eq!(a.region(2).unwrap().len(), 2);
        assert_eq!(a.last_index(), Some(7));
        assert!(a.clone().merge(&b).is_err(), "the same entry twice");
    }

    /// A merge refused for a repeated entry leaves the index as it was:
    /// region 0 of `b` comes before region 1's repeat is found.
    #[test]
    fn a_refused_merge_leaves_the_index_as_it_was() {
        let mut a = WalIndex::new();
        a.push(1, IndexEntry::offset_only(5)).unwrap();
        a.set_last_index(9);
        let mut b = WalIndex::new();
        b.push(0, IndexEntry::offset_only(1)).unwrap();
        b.push(1, IndexEntry::offset_only(5)).unwrap();
        b.push(2, IndexEntry::offset_only(7)).unwrap();
        b.set_last_index(8);
        let before = a.clone();
        assert!(a.merge(&b).is_err());
        assert_eq!(a, before, "a refused merge changed the index");
    }

    /// One offset in two regions: no record has two regions, so the two
    /// indexes are not of one log. Refused, naming the offset and both
    /// regions, and nothing merged.
    #[test]
    fn a_merge_refuses_one_offset_in_two_regions() {
        let mut a = WalIndex::new();
        a.push(1, IndexEntry::offset_only(5)).unwrap();
        let mut b = WalIndex::new();
        b.push(3, IndexEntry::offset_only(4)).unwrap();
        b.push(2, IndexEntry::offset_only(5)).unwrap();
        let before = a.clone();
        let err = a.merge(&b).unwrap_err();
        assert!(
            matches!(
                err,
                IndexError::SharedOffset {
                    offset: 5,
                    region: 1,
                    other: 2
                }
            ),
            "{err:?}"
        );
        let text = err.to_string();
        assert!(
            text.contains("offset 5") && text.contains("region 1") && text.contains("region 2"),
            "{text}"
        );
        assert_eq!(a, before);
    }

    /// A region listed with no entries is kept by a merge, from either
    /// side, and stays listed when the other index has entries of it.
    #[test]
    fn regions_with_no_entries_are_listed_and_merged() {
        let mut a = WalIndex::new();
        a.add_region(7);
        assert!(a.region(7).is_some_and(RegionIndex::is_empty));
        assert!(a.is_empty(), "no entries");
        a.push(8, IndexEntry::offset_only(2)).unwrap();
        a.add_region(8);
        assert_eq!(a.region(8).map(RegionIndex::len), Some(1), "kept its entry");
        let mut b = WalIndex::new();
        b.add_region(9);
        b.push(7, IndexEntry::offset_only(4)).unwrap();
        a.merge(&b).unwrap();
        let listed: Vec<(RegionId, usize)> = a.regions().map(|(id, r)| (id, r.len())).collect();
        assert_eq!(listed, [(7, 1), (8, 1), (9, 0)]);
        assert_eq!(a.without_hints().regions().count(), 3);
    }

    #[test]
    fn merging_keeps_the_source_and_refuses_another_log() {
        let mut a = WalIndex::new();
        let mut b = WalIndex::new();
        a.set_source(IndexSource::new("wal", 0).with_first_offset(10));
        b.set_source(
            IndexSource::new("wal", 0)
                .with_first_offset(40)
                .with_rule(RegionRule::Key(IdFormat::BigEndian)),
        );
        a.merge(&b).unwrap();
        assert_eq!(a.source().first_offset, Some(40), "complete from the later");
        assert_eq!(a.source().rule, Some(RegionRule::Key(IdFormat::BigEndian)));
        let mut other = WalIndex::new();
        other.set_source(IndexSource::new("wal", 1));
        other.push(1, IndexEntry::offset_only(3)).unwrap();
        let err = a.merge(&other).unwrap_err().to_string();
        assert!(err.contains("partition 0") && err.contains("1"), "{err}");
        assert!(a.region(1).is_none(), "nothing merged on a conflict");
        // Truncating raises the first offset.
        a.truncate_below(70);
        assert_eq!(a.source().first_offset, Some(70));
    }

    #[test]
    fn range_and_truncation() {
        let mut index = WalIndex::new();
        for o in [1, 4, 9, 16] {
            index.push(7, IndexEntry::offset_only(o)).unwrap();
        }
        index.push(8, IndexEntry::offset_only(2)).unwrap();
        let r = index.region(7).unwrap();
        let offsets = |s: &[IndexEntry]| s.iter().map(|e| e.offset).collect::<Vec<_>>();
        assert_eq!(offsets(r.range(4, 16)), [4, 9]);
        assert_eq!(offsets(r.range(0, 100)), [1, 4, 9, 16]);
        assert!(r.range(10, 5).is_empty());
        index.truncate_below(5);
        assert_eq!(offsets(index.region(7).unwrap().entries()), [9, 16]);
        assert!(
            index.region(8).is_some_and(RegionIndex::is_empty),
            "a region truncated to nothing stays listed"
        );
        index.set_last_index(20);
        index.set_last_index(10);
        assert_eq!(index.last_index(), Some(20));
    }

    #[test]
    fn a_refused_entry_or_a_negative_last_index_leaves_the_index_as_it_was() {
        let mut index = WalIndex::new();
        let hint = Hint {
            batch_base: 5,
            batch_len: 10,
            record_end: 20,
        };
        // A hint whose record ends past its batch is refused: region 9
        // was once added all the same, empty.
        assert!(index
            .push(
                9,
                IndexEntry {
                    offset: 5,
                    hint: Some(hint)
                }
            )
            .is_err());
        assert!(index.region(9).is_none());
        assert!(index.is_empty());
        // An empty log's scan ends at offset -1: nothing indexed, and the
        // file round-trips (the encoder once overflowed on -1).
        index.set_last_index(-1);
        assert_eq!(index.last_index(), None);
        assert_eq!(decode_index(&encode_index(&index), "t").unwrap(), index);
    }
}
