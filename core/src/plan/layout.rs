//! What is known of the log's byte layout: batches by base offset, with
//! their lengths and the offsets they are known to hold.
//!
//! Two sources fill it: the index's hints (every region's, so batches that
//! hold none of the replayed region's entries are known too), and the
//! batches each fetch response actually carried. What a response showed
//! replaces what a hint claimed.

use std::collections::BTreeMap;

use super::Neighbours;
use crate::index::WalIndex;

/// One batch as far as it is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    /// Encoded length in bytes.
    pub len: u32,
    /// The highest offset known to be in the batch.
    pub last_known: i64,
    /// Whether `last_known` is the batch's real last offset (seen in a
    /// response) rather than the highest indexed entry in it.
    pub exact: bool,
}

/// A batch a fetch response carried, complete or cut: what it teaches the
/// layout and the planner's estimates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeenBatch {
    /// Its base offset.
    pub base: i64,
    /// Its last offset (at least `base`).
    pub last: i64,
    /// Its encoded length in bytes.
    pub len: u32,
    /// Whether its records are compressed.
    pub compressed: bool,
}

/// Totals of the batches responses carried (hints not counted): what
/// estimates for batches nobody described are made from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Observed {
    /// Their encoded bytes.
    pub bytes: u64,
    /// The offsets they span.
    pub offsets: u64,
    /// How many.
    pub batches: u64,
    /// How many were compressed.
    pub compressed: u64,
    /// The most offsets one of them spanned.
    pub widest: u64,
}

impl Observed {
    /// Average encoded bytes per offset, once any batch was seen.
    pub fn bytes_per_offset(&self) -> Option<f64> {
        (self.offsets > 0).then(|| self.bytes as f64 / self.offsets as f64)
    }

    /// Average encoded length of a batch (0 before any).
    pub fn average_batch(&self) -> f64 {
        self.bytes as f64 / self.batches.max(1) as f64
    }

    /// Average offsets a batch spans (at least 1).
    pub fn offsets_per_batch(&self) -> i64 {
        i64::try_from(self.offsets / self.batches.max(1))
            .unwrap_or(i64::MAX)
            .max(1)
    }

    /// Whether most batches were compressed.
    pub fn mostly_compressed(&self) -> bool {
        self.compressed * 2 > self.batches
    }
}

/// Known batches of one partition, by base offset.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Layout {
    batches: BTreeMap<i64, Extent>,
    observed: Observed,
    neighbours: Neighbours,
}

impl Layout {
    /// An empty layout: nothing known.
    pub fn new() -> Self {
        Self::default()
    }

    /// The batches the index's hints describe, across all regions. A
    /// batch's length is the one its first hinted entry states (in the
    /// index's order: region by region, each in offset order).
    pub fn from_index(index: &WalIndex) -> Self {
        // Every hinted entry sorted by its batch's base (stably, so the
        // first entry of a batch stays first), then one extent per base:
        // built in one pass rather than looked up in the map per entry.
        let mut hinted: Vec<(i64, u32, i64)> = index
            .regions()
            .flat_map(|(_, region)| region.entries())
            .filter_map(|e| e.hint.map(|h| (h.batch_base, h.batch_len, e.offset)))
            .collect();
        hinted.sort_by_key(|&(base, _, _)| base);
        let mut extents: Vec<(i64, Extent)> = Vec::new();
        for (base, len, offset) in hinted {
            match extents.last_mut() {
                Some((b, e)) if *b == base => e.last_known = e.last_known.max(offset),
                _ => extents.push((
                    base,
                    Extent {
                        len,
                        last_known: offset,
                        exact: false,
                    },
                )),
            }
        }
        Self {
            batches: extents.into_iter().collect(),
            ..Self::default()
        }
    }

    /// Records a batch a response carried, complete or cut: its extent,
    /// and its share of [`Layout::observed`].
    pub fn observe_batch(&mut self, batch: &SeenBatch) {
        self.observe(batch.base, batch.last, batch.len);
        let o = &mut self.observed;
        let span = batch
            .last
            .saturating_sub(batch.base)
            .saturating_add(1)
            .max(1) as u64;
        o.bytes += u64::from(batch.len);
        o.offsets += span;
        o.widest = o.widest.max(span);
        o.batches += 1;
        o.compressed += u64::from(batch.compressed);
    }

    /// Totals of the batches responses carried.
    pub fn observed(&self) -> Observed {
        self.observed
    }

    /// Records a pair of wanted entries `d` offsets apart, of one region
    /// (`one_region`) or two, that a response showed in one batch (`same`)
    /// or not.
    pub fn observe_neighbours(&mut self, d: i64, one_region: bool, same: bool) {
        self.neighbours.observe(d, one_region, same);
    }

    /// How often wanted entries were seen sharing a batch.
    pub fn neighbours(&self) -> &Neighbours {
        &self.neighbours
    }

    /// Records a batch a response carried: its real extent. An extent
    /// whose last offset is below its base says nothing and is ignored.
    pub fn observe(&mut self, base: i64, last: i64, len: u32) {
        if last < base {
            return;
        }
        // A batch seen on the wire overrides hints overlapping it.
        let stale: Vec<i64> = self
            .batches
            .range(base..=last)
            .filter(|(&b, e)| b != base && !e.exact)
            .map(|(&b, _)| b)
            .collect();
        for b in stale {
            self.batches.remove(&b);
        }
        self.batches.insert(
            base,
            Extent {
                len,
                last_known: last,
                exact: true,
            },
        );
    }

    /// Drops the batch start at `base` that only the index's hints claim:
    /// a fetch from it was answered from a later batch, so no batch the
    /// broker serves starts there (a wrong hint, or its batch is gone). A
    /// batch seen in a response stays.
    pub fn forget_hint(&mut self, base: i64) {
        if self.batches.get(&base).is_some_and(|e| !e.exact) {
            self.batches.remove(&base);
        }
    }

    /// The known batch that holds `offset`, as `(base, extent)`.
    pub fn containing(&self, offset: i64) -> Option<(i64, Extent)> {
        // Past the highest offset known in a batch, the offset may be in a
        // batch nobody described (another writer's): unknown.
        let (&base, &e) = self.batches.range(..=offset).next_back()?;
        (offset <= e.last_known).then_some((base, e))
    }

    /// The batch known to start right after the batch at `base` ends.
    pub fn next_adjacent(&self, base: i64) -> Option<(i64, Extent)> {
        let e = self.batches.get(&base)?;
        let next = e.last_known.checked_add(1)?;
        self.batches.get(&next).map(|n| (next, *n))
    }

    /// Batch boundaries known at or below `offset`: the highest offset at
    /// or below it where a batch is known to start.
    pub fn boundary_at_or_below(&self, offset: i64) -> Option<i64> {
        let below = self.batches.range(..=offset).next_back();
        below.map(|(&base, e)| {
            if e.exact && e.last_known < offset {
                e.last_known + 1
            } else {
                base
            }
        })
    }

    /// Whether a fetch from `offset` is known not to fall inside a batch:
    /// a batch seen in a response starts there or ends right before it,
    /// or it is at or below the log start (below which nothing can be
    /// fetched, so a batch holding it that a broker skipped could not be
    /// read from lower down either). A broker cannot skip the batch
    /// holding such an offset (a habit of some brokers, see
    /// [`super::PlanView::misaligned`]). A batch start the index's hints
    /// claim does not count: a wrong hint must cost a fetch, never a
    /// record, and an answer starting past a fetch taken as aligned marks
    /// the entries below it lost.
    pub fn starts_batch(&self, offset: i64, log_start: i64) -> bool {
        if offset <= log_start {
            return true;
        }
        match self.batches.range(..=offset).next_back() {
            Some((&base, e)) if e.exact => {
                base == offset || e.last_known.checked_add(1) == Some(offset)
            }
            _ => false,
        }
    }

    /// The known batches in offset order, as `(base, extent)`.
    pub fn batches(&self) -> impl Iterator<Item = (i64, Extent)> + '_ {
        self.batches.iter().map(|(&b, &e)| (b, e))
    }

    /// Number of known batches.
    pub fn len(&self) -> usize {
        self.batches.len()
    }

    /// Whether nothing is known.
    pub fn is_empty(&self) -> bool {
        self.batches.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_inverted_extent_is_ignored_not_a_panic() {
        // A cut batch's header is not covered by a CRC: a negative last
        // offset delta once reached `BTreeMap::range` with start > end.
        let mut layout = Layout::new();
        layout.observe(10, 19, 100);
        layout.observe(30, 5, 100);
        assert_eq!(layout.len(), 1);
        assert!(layout.containing(12).is_some());
    }

    proptest::proptest! {
        /// The index's batches come out as looking each hinted entry up in
        /// the map would make them, whatever the hints claim (batches
        /// shared by regions, lengths that disagree, entries past a batch).
        #[test]
        fn from_index_is_the_map_of_every_hint(
            entries in proptest::collection::vec(
                (1u64..5, 0i64..50, proptest::option::of((0i64..6, 0u32..3))),
                0..40,
            ),
        ) {
            let mut index = WalIndex::new();
            let mut expected: BTreeMap<i64, Extent> = BTreeMap::new();
            for (region, offset, hint) in entries {
                // A hint the index takes: its batch starts at or before the
                // entry, and is at least a header long.
                let hint = hint.map(|(back, extra)| {
                    let len = walfetch_codec::HEADER_LEN as u32 + extra;
                    crate::index::Hint {
                        batch_base: (offset - back).max(0),
                        batch_len: len,
                        record_end: len,
                    }
                });
                // An offset not above its region's last is refused; skip it.
                let _ = index.push(region, crate::index::IndexEntry { offset, hint });
            }
            for (_, region) in index.regions() {
                for e in region.entries() {
                    if let Some(h) = e.hint {
                        let x = expected.entry(h.batch_base).or_insert(Extent {
                            len: h.batch_len,
                            last_known: e.offset,
                            exact: false,
                        });
                        x.last_known = x.last_known.max(e.offset);
                    }
                }
            }
            let layout = Layout::from_index(&index);
            proptest::prop_assert_eq!(layout.batches().collect::<Vec<_>>(), expected.into_iter().collect::<Vec<_>>());
        }
    }
}
