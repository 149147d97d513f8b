//! The floor of a replay: the fewest bytes any consumer must receive under
//! Kafka's fetch rules to get the records it wants.
//!
//! A fetch returns bytes from the start of the batch containing its offset,
//! the first batch whole, cut at the byte limit. So the records wanted in
//! batches `a..=b` (in log order) can come in one fetch of
//! `max(end(a), wanted_end(b)) - start(a)` bytes, where `wanted_end(b)` is
//! where the last wanted record of `b` ends (the batch's end when it is
//! compressed: part of a compressed batch is useless). Several fetches split
//! the wanted batches into groups; the floor is the minimum over all
//! groupings, round trips being free: a one-pass dynamic program.

/// One batch holding wanted records, in log byte positions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WantedBatch {
    /// Byte position of the batch's first byte in the log.
    pub start: u64,
    /// Byte position right after the batch.
    pub end: u64,
    /// Byte position right after the last wanted record in it.
    pub wanted_end: u64,
}

/// The floor's bytes and the groups (fetches) it uses, as index ranges
/// into `wanted`. `wanted` must be in log order, positions consistent.
pub fn floor_bytes(wanted: &[WantedBatch]) -> (u64, Vec<std::ops::Range<usize>>) {
    let m = wanted.len();
    // f[j]: fewest bytes for the first j wanted batches; from[j]: where the
    // last group of that optimum starts.
    let mut f = vec![0u64; m + 1];
    let mut from = vec![0usize; m + 1];
    // min over a < j of f[a] - start(a), with its a.
    let mut best_start: Option<(i128, usize)> = None;
    for (j, w) in wanted.iter().enumerate() {
        // A group starting at this batch gets it whole...
        let (mut value, mut start) = (f[j] + (w.end.max(w.wanted_end) - w.start), j);
        // ...or it continues a group started at an earlier batch `a`, which
        // then reads everything from start(a) to this batch's wanted end.
        if let Some((v, a)) = best_start {
            let merged = u64::try_from(v + i128::from(w.wanted_end)).unwrap_or(u64::MAX);
            if merged < value {
                (value, start) = (merged, a);
            }
        }
        f[j + 1] = value;
        from[j + 1] = start;
        let candidate = i128::from(f[j]) - i128::from(w.start);
        if best_start.is_none_or(|(v, _)| candidate < v) {
            best_start = Some((candidate, j));
        }
    }
    let mut groups = Vec::new();
    let mut j = m;
    while j > 0 {
        groups.push(from[j]..j);
        j = from[j];
    }
    groups.reverse();
    (f[m], groups)
}

/// The floor as far as `layout` shows the log: `wanted` gives each wanted
/// record's offset and, in an uncompressed batch, where it ends in the
/// batch. Wanted records in batches the layout does not know are left out;
/// batches whose neighbourhood is unknown are never merged (the bytes
/// between them are unknown).
pub fn floor_from_layout(
    layout: &super::Layout,
    wanted: impl IntoIterator<Item = (i64, Option<u32>)>,
) -> u64 {
    // Wanted end per batch base.
    let mut ends: std::collections::BTreeMap<i64, u32> = std::collections::BTreeMap::new();
    for (offset, end) in wanted {
        if let Some((base, extent)) = layout.containing(offset) {
            let end = end.unwrap_or(extent.len).min(extent.len);
            let e = ends.entry(base).or_insert(0);
            *e = (*e).max(end);
        }
    }
    // Byte positions: exact along chains of adjacent known batches; an
    // unknown stretch counts as a gap too large to ever read through.
    const UNKNOWN_GAP: u64 = 1 << 50;
    let mut batches = Vec::with_capacity(ends.len());
    let mut position = 0u64;
    let mut previous: Option<(i64, u32)> = None;
    for (&base, &wanted_end) in &ends {
        let Some((_, extent)) = layout.containing(base) else {
            continue;
        };
        if let Some((prev_base, prev_len)) = previous {
            position += u64::from(prev_len);
            let mut at = prev_base;
            let mut chained = false;
            while let Some((next, next_extent)) = layout.next_adjacent(at) {
                if next == base {
                    chained = true;
                    break;
                }
                if next > base {
                    break;
                }
                position += u64::from(next_extent.len);
                at = next;
            }
            if !chained {
                position += UNKNOWN_GAP;
            }
        }
        batches.push(WantedBatch {
            start: position,
            end: position + u64::from(extent.len),
            wanted_end: position + u64::from(wanted_end),
        });
        previous = Some((base, extent.len));
    }
    floor_bytes(&batches).0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(start: u64, len: u64, wanted: u64) -> WantedBatch {
        WantedBatch {
            start,
            end: start + len,
            wanted_end: start + wanted,
        }
    }

    #[test]
    fn adjacent_batches_merge_and_cut_the_last_one() {
        // Two adjacent 1000-byte batches, wanted up to byte 100 of each.
        let (bytes, groups) = floor_bytes(&[batch(0, 1000, 100), batch(1000, 1000, 100)]);
        assert_eq!(bytes, 1100);
        assert_eq!(groups.len(), 1, "one fetch");
        assert_eq!(groups[0], 0..2);
    }

    #[test]
    fn far_batches_are_fetched_apart_and_whole() {
        let (bytes, groups) = floor_bytes(&[batch(0, 1000, 100), batch(50_000, 1000, 100)]);
        assert_eq!((bytes, groups), (2000, vec![0..1, 1..2]));
    }

    #[test]
    fn from_a_layout() {
        let mut layout = crate::plan::Layout::new();
        layout.observe(0, 9, 1000);
        layout.observe(10, 19, 1000);
        layout.observe(20, 29, 1000);
        layout.observe(100, 109, 1000); // after an unknown stretch
                                        // Wanted: offset 5 (ends at byte 300), 25 (ends at 200), 105 (compressed: whole).
        let floor = floor_from_layout(&layout, [(5, Some(300)), (25, Some(200)), (105, None)]);
        // Batches 0 and 20 whole (2000 bytes) beat one fetch reading through
        // batch 10 (2200); batch 100 whole.
        assert_eq!(floor, 1000 + 1000 + 1000);
        // Wanted records in adjacent batches 10 and 20: one fetch, cut.
        let floor = floor_from_layout(&layout, [(15, Some(300)), (25, Some(50))]);
        assert_eq!(floor, 1050);
    }

    #[test]
    fn a_small_gap_is_worth_reading_to_cut_the_next_batch() {
        // Gap of 100 bytes; reading it lets the 2nd batch be cut at 10.
        let (bytes, groups) = floor_bytes(&[batch(0, 1000, 1000), batch(1100, 1000, 10)]);
        assert_eq!(bytes, 1110);
        assert_eq!(groups.len(), 1, "one fetch");
        assert_eq!(groups[0], 0..2);
        assert_eq!(floor_bytes(&[]), (0, vec![]));
    }
}
