//! The floor of a replay: the fewest record bytes any consumer must receive
//! to get the records it wants, under a broker's fetch rules.
//!
//! # Under Kafka's rules
//! A fetch names an offset; the broker answers from the start of the batch
//! containing it, the first batch whole (KIP-74), cut at the byte limit,
//! possibly mid-batch. So every fetch reads a byte interval
//! `[start(b), e)` of the log with `b` a batch and `e ≥ end(b)`, and it
//! delivers the records of `b` and every record of a later batch that ends
//! by `e` (for a compressed batch: the whole batch must end by `e`, a cut
//! compressed batch being useless). Call `need(w)` the position right after
//! the last wanted record of batch `w` (`end(w)` when compressed).
//!
//! The floor is the least total length of a set of such intervals that
//! delivers every wanted record. It is computed exactly:
//! - Two intervals that overlap or touch can be replaced by their union
//!   (still an interval starting at a batch, still delivering both), which
//!   costs no more; so some optimum uses disjoint intervals, each delivering
//!   a run `a..=j` of consecutive *wanted* batches.
//! - For a run with `j > a`, an interval starting at `a` costs
//!   `need(j) - start(a)`; starting at an earlier batch only adds bytes.
//! - For a single wanted batch `a`, starting at `a` costs its whole length
//!   `end(a) - start(a)`; starting at the batch `p` right before it costs
//!   `need(a) - start(p)`: `p` comes whole, then `a` is cut right after the
//!   wanted record. That is cheaper when `p` is small and `a` is large and
//!   its wanted records sit early. Starting further back only adds bytes.
//! - A one-pass dynamic program over the wanted batches then takes the best
//!   split into runs.
//!
//! Round trips and response headers are free here: the floor bounds bytes,
//! not time.
//!
//! # With each response's framing
//! A response carries more than records: its size, header and the
//! partition's own fields, at least some fixed number of bytes for every
//! fetch ([`floor_bytes_framed`]'s `per_fetch`, e.g. the smallest Fetch
//! response the broker could send). Any set of fetches then moves at least
//! its intervals' lengths plus that for each fetch, and the same argument
//! holds: merging two overlapping intervals saves a fetch and adds no byte,
//! a run reads across whatever lies between its wanted batches, and the
//! program weighs each fetch at its framing too. With framing, a consumer
//! may read across a gap shorter than a response's framing, so the program
//! applies under "never cut" rules as well, without the cut.
//!
//! # Under "never cut" rules
//! Brokers that return whole batches only (Tansu 0.6) must send every
//! wanted batch whole, and gain nothing from reading between them: the
//! floor is the sum of the wanted batches' lengths.
//!
//! # What the layout must show
//! The floor is a lower bound for the log it is given. Computed from what
//! is known of a log ([`floor_from_layout`]), it is the floor of that log
//! as far as it is known: a batch nobody described (before a wanted batch,
//! or between two) cannot be started at or read across, so the figure can
//! only be higher than the true floor there.

use std::ops::Range;

use super::Layout;

/// One batch of the log, in byte positions of the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogBatch {
    /// Position of the batch's first byte.
    pub start: u64,
    /// Position right after the batch.
    pub end: u64,
    /// For a batch holding wanted records: the position right after the
    /// last of them (the batch's end when it is compressed).
    pub wanted_end: Option<u64>,
}

/// Which fetch rules the floor is computed under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum FetchRules {
    /// Kafka's: the first batch whole, the rest cut at the byte limit.
    #[default]
    Kafka,
    /// Whole batches only (Tansu 0.6).
    NeverCut,
}

/// The fewest bytes any consumer must receive under `rules` to get the
/// wanted records of `log` (batches in log order, positions increasing),
/// and the fetches that achieve it: each as the byte range it reads.
pub fn floor_bytes(log: &[LogBatch], rules: FetchRules) -> (u64, Vec<Range<u64>>) {
    floor_bytes_framed(log, rules, 0)
}

/// [`floor_bytes`] where every fetch also moves `per_fetch` bytes of
/// response framing (see the module docs): the fewest bytes any consumer
/// must receive, framing included, and the fetches that achieve it (their
/// ranges, without the framing).
pub fn floor_bytes_framed(
    log: &[LogBatch],
    rules: FetchRules,
    per_fetch: u64,
) -> (u64, Vec<Range<u64>>) {
    let wanted: Vec<usize> = (0..log.len())
        .filter(|&k| log[k].wanted_end.is_some())
        .collect();
    let cuts = rules == FetchRules::Kafka;
    let need = |k: usize| {
        let b = &log[k];
        match cuts {
            true => b.wanted_end.unwrap_or(b.end),
            false => b.end,
        }
        .clamp(b.start, b.end.max(b.start))
    };
    if !cuts && per_fetch == 0 {
        let fetches: Vec<Range<u64>> = wanted.iter().map(|&k| log[k].start..log[k].end).collect();
        let bytes = fetches.iter().map(|r| r.end - r.start).sum();
        return (bytes, fetches);
    }
    let m = wanted.len();
    // f[i]: fewest bytes for the first i wanted batches; via[i]: the fetch
    // that ends that optimum (its first wanted batch, its byte range).
    let mut f = vec![0u64; m + 1];
    let mut via: Vec<(usize, Range<u64>)> = vec![(0, 0..0); m + 1];
    // The best run start so far: min over a of f[a] - start(wanted[a]).
    let mut best: Option<(i128, usize)> = None;
    for (i, &k) in wanted.iter().enumerate() {
        let b = &log[k];
        // This batch alone, whole...
        let mut value = f[i] + (b.end - b.start) + per_fetch;
        let mut fetch = (i, b.start..b.end);
        // ...or alone, starting at the batch before it and cut after the
        // wanted record (that batch is not wanted, or it would belong to a
        // run through this one)...
        if let Some(p) = k.checked_sub(1).map(|p| &log[p]) {
            let before = i.checked_sub(1).map(|j| wanted[j]);
            if before != Some(k - 1) && p.start <= b.start {
                let cut = f[i] + (need(k) - p.start) + per_fetch;
                if cut < value {
                    (value, fetch) = (cut, (i, p.start..need(k)));
                }
            }
        }
        // ...or the end of a run started at an earlier wanted batch (on a
        // tie, the fewer fetches).
        if let Some((v, a)) = best {
            let run =
                u64::try_from(v + i128::from(need(k)) + i128::from(per_fetch)).unwrap_or(u64::MAX);
            if run <= value {
                (value, fetch) = (run, (a, log[wanted[a]].start..need(k)));
            }
        }
        f[i + 1] = value;
        via[i + 1] = fetch;
        let candidate = i128::from(f[i]) - i128::from(b.start);
        if best.is_none_or(|(v, _)| candidate < v) {
            best = Some((candidate, i));
        }
    }
    let mut fetches = Vec::new();
    let mut i = m;
    while i > 0 {
        let (from, range) = via[i].clone();
        fetches.push(range);
        i = from;
    }
    fetches.reverse();
    (f[m], fetches)
}

/// The floor as far as `layout` shows the log: `wanted` gives each wanted
/// record's offset and, in an uncompressed batch, where it ends in the
/// batch. Wanted records in batches the layout does not know are left out;
/// a stretch of unknown bytes is never read across or started before.
pub fn floor_from_layout(
    layout: &Layout,
    wanted: impl IntoIterator<Item = (i64, Option<u32>)>,
    rules: FetchRules,
) -> u64 {
    // The wanted records in offset order (a replay yields them so), matched
    // to their batches in one walk beside the layout's: a record belongs to
    // the batch with the highest base at or below it, if that batch's known
    // offsets reach it.
    let mut wanted: Vec<(i64, Option<u32>)> = wanted.into_iter().collect();
    if !wanted.is_sorted_by_key(|&(offset, _)| offset) {
        wanted.sort_unstable_by_key(|&(offset, _)| offset);
    }
    let mut wanted = wanted.into_iter().peekable();
    // Byte positions: exact along chains of adjacent known batches; an
    // unknown stretch counts as a gap too large to ever read through.
    const UNKNOWN_GAP: u64 = 1 << 50;
    let mut log = Vec::with_capacity(layout.len());
    let mut position = 0u64;
    let mut previous_last: Option<i64> = None;
    let mut batches = layout.batches().peekable();
    while let Some((base, extent)) = batches.next() {
        if previous_last.is_some_and(|last| last.checked_add(1) != Some(base)) {
            position += UNKNOWN_GAP;
        }
        let next_base = batches.peek().map_or(i64::MAX, |&(next, _)| next);
        let mut wanted_end: Option<u32> = None;
        while let Some(&(offset, end)) = wanted.peek() {
            if offset >= next_base {
                break;
            }
            wanted.next();
            if offset >= base && offset <= extent.last_known {
                let end = end.unwrap_or(extent.len).min(extent.len);
                wanted_end = Some(wanted_end.map_or(end, |w| w.max(end)));
            }
        }
        let end = position + u64::from(extent.len);
        log.push(LogBatch {
            start: position,
            end,
            wanted_end: wanted_end.map(|e| position + u64::from(e)),
        });
        previous_last = Some(extent.last_known);
        position = end;
    }
    floor_bytes(&log, rules).0
}

#[cfg(test)]
#[allow(clippy::single_range_in_vec_init)]
mod tests {
    use super::*;

    /// Batches back to back with these lengths; `wanted[k]`: the wanted end
    /// within batch k, if any.
    fn log(lens: &[u64], wanted: &[Option<u64>]) -> Vec<LogBatch> {
        let mut at = 0;
        lens.iter()
            .zip(wanted)
            .map(|(&len, &w)| {
                let b = LogBatch {
                    start: at,
                    end: at + len,
                    wanted_end: w.map(|w| at + w),
                };
                at += len;
                b
            })
            .collect()
    }

    #[test]
    fn adjacent_batches_merge_and_cut_the_last_one() {
        let (bytes, fetches) = floor_bytes(
            &log(&[1000, 1000], &[Some(100), Some(100)]),
            FetchRules::Kafka,
        );
        assert_eq!((bytes, fetches), (1100, vec![0..1100]));
    }

    #[test]
    fn far_batches_are_fetched_apart_and_whole() {
        let (bytes, fetches) = floor_bytes(
            &log(&[1000, 50_000, 1000], &[Some(100), None, Some(100)]),
            FetchRules::Kafka,
        );
        // Starting the second at the 50 000-byte batch before it would
        // cost more than reading it whole.
        assert_eq!((bytes, fetches), (2000, vec![0..1000, 51_000..52_000]));
    }

    #[test]
    fn a_small_batch_before_a_large_one_lets_it_be_cut() {
        // A 100-byte unwanted batch, then a 10 000-byte batch wanted up to
        // byte 200: start at the small one, cut the large one.
        let (bytes, fetches) =
            floor_bytes(&log(&[100, 10_000], &[None, Some(200)]), FetchRules::Kafka);
        assert_eq!((bytes, fetches), (300, vec![0..300]));
        // Under never-cut rules the large batch comes whole.
        let (bytes, _) = floor_bytes(
            &log(&[100, 10_000], &[None, Some(200)]),
            FetchRules::NeverCut,
        );
        assert_eq!(bytes, 10_000);
    }

    #[test]
    fn a_small_gap_is_worth_reading_to_cut_the_next_batch() {
        let (bytes, fetches) = floor_bytes(
            &log(&[1000, 100, 1000], &[Some(1000), None, Some(10)]),
            FetchRules::Kafka,
        );
        assert_eq!((bytes, fetches), (1110, vec![0..1110]));
        assert_eq!(floor_bytes(&[], FetchRules::Kafka), (0, vec![]));
    }

    /// Every set of fetches a consumer could make, for a tiny log: the
    /// least bytes that deliver every wanted record. Each fetch reads
    /// `[start(b), e)` with `e ≥ end(b)`; only `e` at a wanted end or a
    /// batch end matters.
    /// With `rules` never cutting, a fetch ends at a batch end and
    /// delivers the batches it holds whole; every fetch costs `per_fetch`
    /// more.
    fn brute_force(log: &[LogBatch], rules: FetchRules, per_fetch: u64) -> u64 {
        let wanted: Vec<usize> = (0..log.len())
            .filter(|&k| log[k].wanted_end.is_some())
            .collect();
        let cuts = rules == FetchRules::Kafka;
        let mut options: Vec<(u64, Vec<usize>)> = Vec::new();
        for (b, first) in log.iter().enumerate() {
            let mut ends: Vec<u64> = log.iter().map(|x| x.end).collect();
            if cuts {
                ends.extend(log.iter().filter_map(|x| x.wanted_end));
            }
            for e in ends.into_iter().filter(|&e| e >= first.end) {
                let delivered = |k: usize| match cuts {
                    true => log[k].wanted_end.unwrap() <= e,
                    false => log[k].end <= e,
                };
                let covered = wanted
                    .iter()
                    .copied()
                    .filter(|&k| k == b || (k > b && delivered(k)))
                    .collect();
                options.push((e - first.start + per_fetch, covered));
            }
        }
        // Least cost to cover `wanted` with any subset of options.
        let full = (1u32 << wanted.len()) - 1;
        let mut best = vec![u64::MAX; (full + 1) as usize];
        best[0] = 0;
        for mask in 0..=full {
            if best[mask as usize] == u64::MAX {
                continue;
            }
            for (cost, covered) in &options {
                let mut m = mask;
                for k in covered {
                    m |= 1 << wanted.iter().position(|w| w == k).unwrap();
                }
                let v = best[mask as usize] + cost;
                if v < best[m as usize] {
                    best[m as usize] = v;
                }
            }
        }
        best[full as usize]
    }

    proptest::proptest! {
        /// The dynamic program finds the least bytes of any set of fetches
        /// Kafka's rules allow.
        #[test]
        fn the_floor_is_the_minimum_over_every_way_to_fetch(
            batches in proptest::collection::vec((1u64..400, proptest::option::of(0u64..400)), 1..7),
        ) {
            let lens: Vec<u64> = batches.iter().map(|b| b.0).collect();
            let wanted: Vec<Option<u64>> = batches.iter().map(|&(len, w)| w.map(|w| 1 + w % len)).collect();
            let log = log(&lens, &wanted);
            let (bytes, fetches) = floor_bytes(&log, FetchRules::Kafka);
            proptest::prop_assert_eq!(bytes, brute_force(&log, FetchRules::Kafka, 0));
            proptest::prop_assert_eq!(bytes, fetches.iter().map(|r| r.end - r.start).sum::<u64>());
        }

        /// So does it with each response's framing, under both rules.
        #[test]
        fn the_framed_floor_is_the_minimum_over_every_way_to_fetch(
            batches in proptest::collection::vec((1u64..400, proptest::option::of(0u64..400)), 1..7),
            per_fetch in 0u64..300,
        ) {
            let lens: Vec<u64> = batches.iter().map(|b| b.0).collect();
            let wanted: Vec<Option<u64>> = batches.iter().map(|&(len, w)| w.map(|w| 1 + w % len)).collect();
            let log = log(&lens, &wanted);
            for rules in [FetchRules::Kafka, FetchRules::NeverCut] {
                let (bytes, fetches) = floor_bytes_framed(&log, rules, per_fetch);
                proptest::prop_assert_eq!(bytes, brute_force(&log, rules, per_fetch));
                let framed = fetches.iter().map(|r| r.end - r.start + per_fetch).sum::<u64>();
                proptest::prop_assert_eq!(bytes, framed);
            }
        }
    }

    /// [`floor_from_layout`] as it was first written: each wanted record
    /// looked up in the layout, adjacency asked of the layout.
    fn floor_by_lookup(layout: &Layout, wanted: &[(i64, Option<u32>)], rules: FetchRules) -> u64 {
        let mut ends = std::collections::BTreeMap::new();
        for &(offset, end) in wanted {
            if let Some((base, extent)) = layout.containing(offset) {
                let end = end.unwrap_or(extent.len).min(extent.len);
                let e = ends.entry(base).or_insert(0);
                *e = (*e).max(end);
            }
        }
        let mut log = Vec::new();
        let mut position = 0u64;
        let mut previous: Option<(i64, u64)> = None;
        for (base, extent) in layout.batches() {
            if let Some((prev_base, prev_end)) = previous {
                let adjacent = layout.next_adjacent(prev_base).map(|(b, _)| b) == Some(base);
                position = prev_end + if adjacent { 0 } else { 1 << 50 };
            }
            let end = position + u64::from(extent.len);
            log.push(LogBatch {
                start: position,
                end,
                wanted_end: ends.get(&base).map(|&e| position + u64::from(e)),
            });
            previous = Some((base, end));
            position = end;
        }
        floor_bytes(&log, rules).0
    }

    proptest::proptest! {
        /// Matching the wanted records to batches in one walk gives what
        /// looking each one up gives, on any layout (batches overlapping,
        /// apart or adjacent) and any wanted records, in any order.
        #[test]
        fn the_walk_matches_the_lookups(
            batches in proptest::collection::vec((0i64..60, 0i64..12, 1u32..500), 0..12),
            wanted in proptest::collection::vec((-5i64..80, proptest::option::of(0u32..600)), 0..30),
        ) {
            let mut layout = Layout::new();
            for &(base, span, len) in &batches {
                layout.observe(base, base + span, len);
            }
            for rules in [FetchRules::Kafka, FetchRules::NeverCut] {
                proptest::prop_assert_eq!(
                    floor_from_layout(&layout, wanted.iter().copied(), rules),
                    floor_by_lookup(&layout, &wanted, rules)
                );
            }
        }
    }

    #[test]
    fn from_a_layout() {
        let mut layout = Layout::new();
        layout.observe(0, 9, 1000);
        layout.observe(10, 19, 1000);
        layout.observe(20, 29, 1000);
        layout.observe(100, 109, 1000); // after an unknown stretch
                                        // Wanted: offset 5 (ends at byte 300), 25 (ends at 200), 105
                                        // (compressed: whole). Batches 0 and 20 whole (2000 bytes) beat one
                                        // fetch reading through batch 10 (2200) and batch 20 started at
                                        // batch 10 (1200); batch 100 whole.
        let wanted = [(5, Some(300)), (25, Some(200)), (105, None)];
        assert_eq!(floor_from_layout(&layout, wanted, FetchRules::Kafka), 3000);
        assert_eq!(
            floor_from_layout(&layout, wanted, FetchRules::NeverCut),
            3000
        );
        // Wanted records in adjacent batches 10 and 20: one fetch, cut.
        let floor = floor_from_layout(
            &layout,
            [(15, Some(300)), (25, Some(50))],
            FetchRules::Kafka,
        );
        assert_eq!(floor, 1050);
    }
}
