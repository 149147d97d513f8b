//! Where entries sit in the response of a fetch being planned: what the
//! layout knows of an entry's batch, and byte positions, exact through
//! known adjacent batches or estimated from the bytes per offset seen.

use super::run::Plan;

/// Where an entry is known to sit.
#[derive(Debug, Clone, Copy)]
pub(super) struct Located {
    /// Its batch's base offset.
    pub(super) base: i64,
    /// Its batch's encoded length.
    pub(super) batch_len: u32,
    /// Where its record ends in the batch, never past `batch_len` (the
    /// batch's end when that is unknown or the batch is compressed).
    pub(super) record_end: u32,
}

/// A known batch within a fetch's response.
#[derive(Debug, Clone, Copy)]
pub(super) struct BatchAt {
    /// Its base offset.
    pub(super) base: i64,
    /// Where it starts, in bytes from the start of the response.
    pub(super) start: f64,
}

/// How far a fetch being planned reaches, in bytes from the start of its
/// response, as of its latest entry.
#[derive(Debug, Clone, Copy)]
pub(super) struct Position {
    /// The latest entry's batch, if known.
    pub(super) batch: Option<BatchAt>,
    /// Where the latest entry's bytes begin: its batch's start if known,
    /// else its record's.
    pub(super) start: f64,
    /// Where the bytes the fetch needs end.
    pub(super) end: f64,
    /// Whether any of it is estimated.
    pub(super) estimated: bool,
}

impl Position {
    /// An entry in the batch at `base` starting at byte `pos`, its record
    /// ending `record_end` bytes into the batch.
    pub(super) fn in_batch(base: i64, pos: f64, record_end: u32, estimated: bool) -> Self {
        Self {
            batch: Some(BatchAt { base, start: pos }),
            start: pos,
            end: pos + f64::from(record_end),
            estimated,
        }
    }

    /// An entry in an unknown batch, its record estimated at `pos`.
    pub(super) fn record(pos: f64, per_offset: f64) -> Self {
        Self {
            batch: None,
            start: pos,
            end: pos + per_offset,
            estimated: true,
        }
    }
}

impl Plan<'_> {
    /// Where entry `i` is known to sit.
    pub(super) fn locate(&self, i: usize) -> Option<Located> {
        let entry = self.view.entries[i];
        if let Some((base, extent)) = self.view.layout.containing(entry.offset) {
            // A hint for this very batch also knows where the record ends;
            // a compressed batch or an observed-only one is read whole, and
            // so is every batch when cut records cannot be used.
            let end = entry
                .hint
                .filter(|h| {
                    self.view.cut_records && h.batch_base == base && h.batch_len == extent.len
                })
                .map_or(extent.len, |h| h.record_end.min(extent.len));
            return Some(Located {
                base,
                batch_len: extent.len,
                record_end: end,
            });
        }
        None
    }

    /// Bytes of entry `i`'s batch, when it is known and not `current`, past
    /// the last entry below `end` it holds: what a fetch split off at `i`
    /// would read of it (its first batch comes whole, KIP-74) and a fetch
    /// reaching on from before it would not (it is cut there).
    pub(super) fn unread_rest(&self, i: usize, end: usize, current: Option<i64>) -> f64 {
        let Some(l) = self.locate(i) else {
            return 0.0;
        };
        if current == Some(l.base) {
            return 0.0;
        }
        let mut record_end = l.record_end;
        for j in i + 1..end {
            match self.locate(j) {
                Some(m) if m.base == l.base => record_end = record_end.max(m.record_end),
                _ => break,
            }
        }
        f64::from(l.batch_len - record_end)
    }

    /// Where entry `i` sits in the response of a fetch whose previous entry
    /// sits at `at`: in `at`'s batch; exactly, in a known batch reached from
    /// an exact `at` through known adjacent batches within `limit` bytes;
    /// or estimated. `None` ends the fetch: a known batch not reached from
    /// an exact `at` (another writer's batches lie between, of unknown
    /// size; splitting there costs nothing but the round trip, both ends
    /// being exact), or nothing to estimate from.
    pub(super) fn position(&self, i: usize, at: &Position, limit: f64) -> Option<Position> {
        let located = self.locate(i);
        if let (Some(at_batch), Some(l)) = (at.batch, located) {
            if l.base == at_batch.base {
                return Some(Position::in_batch(
                    l.base,
                    at_batch.start,
                    l.record_end,
                    at.estimated,
                ));
            }
            if !at.estimated {
                let p = self.walk(at_batch.base, at_batch.start as u64, l.base, limit as u64)?;
                return Some(Position::in_batch(l.base, p as f64, l.record_end, false));
            }
        }
        // Count bytes per offset from the end of the last known batch, or
        // from the end of the previous entry's record.
        let per_offset = self.observed.bytes_per_offset()?;
        let (from, from_pos) = match at.batch {
            Some(b) => {
                let (_, extent) = self.view.layout.containing(b.base)?;
                (extent.last_known + 1, b.start + f64::from(extent.len))
            }
            None => (self.view.entries[i - 1].offset + 1, at.end),
        };
        let at_offset = |o: i64| from_pos + (o - from).max(0) as f64 * per_offset;
        Some(match located {
            // Its batch is known: only the bytes before it are estimated.
            Some(l) => Position::in_batch(l.base, at_offset(l.base), l.record_end, true),
            None => Position::record(at_offset(self.view.entries[i].offset), per_offset),
        })
    }

    /// Follows known adjacent batches from `from` (at byte `pos`) to the
    /// batch at `to`; its position, unless the chain breaks or passes `limit`.
    fn walk(&self, from: i64, mut pos: u64, to: i64, limit: u64) -> Option<u64> {
        let mut base = from;
        let mut len = u64::from(self.view.layout.containing(from)?.1.len);
        while base < to {
            let (next, extent) = self.view.layout.next_adjacent(base)?;
            pos += len;
            if pos > limit {
                return None;
            }
            base = next;
            len = u64::from(extent.len);
        }
        (base == to).then_some(pos)
    }

    /// How many entries from `start` a fetch of `bytes` might reach, given
    /// `per_offset` bytes per offset; at least one.
    pub(super) fn entries_within(
        &self,
        start: usize,
        end: usize,
        bytes: u64,
        per_offset: f64,
    ) -> usize {
        let first = self.view.entries[start].offset;
        let reach = first.saturating_add((bytes as f64 / per_offset.max(1.0)) as i64);
        let n = self.view.entries[start..end].partition_point(|e| e.offset <= reach);
        start + n.max(1)
    }
}
