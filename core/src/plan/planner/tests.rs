//! Single planned fetches. Whole replays — fetch counts and bytes
//! against the floor, offsets only, wrong hints, brokers' habits — run
//! through the replay core against a simulated partition
//! (`tests/planner_sim.rs`, `tests/replay_sim.rs`).

use std::time::Duration;

use super::*;
use crate::index::{Hint, IndexEntry, WalIndex};
use crate::plan::{Layout, SeenBatch};

/// An uncompressed batch of `n` records of `record` bytes at `base`:
/// record `i` ends `61 + (i + 1) × record` bytes into it.
#[derive(Debug, Clone, Copy)]
struct Batch {
    base: i64,
    n: usize,
    record: u32,
}

impl Batch {
    fn end(self, i: usize) -> u32 {
        61 + (i as u32 + 1) * self.record
    }

    fn len(self) -> u32 {
        self.end(self.n - 1)
    }

    /// The entry at `offset` in this batch, with the writer's hints.
    fn entry(self, offset: i64) -> IndexEntry {
        IndexEntry {
            offset,
            hint: Some(Hint {
                batch_base: self.base,
                batch_len: self.len(),
                record_end: self.end((offset - self.base) as usize),
            }),
        }
    }
}

/// Adjacent batches of `sizes[i]` records of `record` bytes each.
fn log(sizes: &[usize], record: u32) -> Vec<Batch> {
    let mut base = 0;
    sizes
        .iter()
        .map(|&n| {
            let b = Batch { base, n, record };
            base += n as i64;
            b
        })
        .collect()
}

/// Hinted entries at `offsets` of `log`.
fn hinted(log: &[Batch], offsets: &[i64]) -> Vec<IndexEntry> {
    offsets
        .iter()
        .map(|&o| {
            let b = log
                .iter()
                .find(|b| b.base <= o && o < b.base + b.n as i64)
                .unwrap();
            b.entry(o)
        })
        .collect()
}

/// The layout the writer's index of every record of `log` gives.
fn layout(log: &[Batch]) -> Layout {
    let mut index = WalIndex::new();
    for b in log {
        for o in b.base..b.base + b.n as i64 {
            index.push(1000, b.entry(o)).unwrap();
        }
    }
    Layout::from_index(&index)
}

/// The fetches planned one after another for `wanted` of `log` (with
/// the writer's hints), each for the entries the last did not claim.
fn plan_all(log: &[Batch], wanted: &[i64], config: PlanConfig) -> Vec<PlannedFetch> {
    let entries = hinted(log, wanted);
    let layout = layout(log);
    plan_entries_in(&entries, &layout, config)
}

fn plan_entries_in(
    entries: &[IndexEntry],
    layout: &Layout,
    config: PlanConfig,
) -> Vec<PlannedFetch> {
    let mut planner = Planner::new(config);
    let mut fetches = Vec::new();
    let mut start = 0;
    while start < entries.len() {
        let fetch = planner.plan_entries(&PlanView::of(entries, layout), start..entries.len(), 0);
        let FetchKind::Indexed { entries: claimed } = &fetch.kind else {
            panic!("an indexed run planned as {fetch:?}");
        };
        assert_eq!(claimed.start, start);
        assert!(claimed.end > start);
        start = claimed.end;
        fetches.push(fetch);
    }
    fetches
}

#[test]
fn a_precise_limit_stops_mid_batch() {
    let log = log(&[10, 10, 10], 100);
    let fetches = plan_all(&log, &[5, 12], PlanConfig::default());
    // From batch 0's start to the end of offset 12's record in batch 1.
    assert_eq!(
        fetches,
        [PlannedFetch {
            offset: 0,
            max_bytes: log[0].len() + log[1].end(2),
            kind: FetchKind::Indexed { entries: 0..2 }
        }]
    );
}

/// A small batch before a large one holding an early wanted record:
/// start at the small one (it comes whole) and cut the large one, as
/// the floor does; not when cut records cannot be used, nor when the
/// batch before is as large.
#[test]
fn a_small_batch_before_a_large_one_lets_the_fetch_cut_it() {
    let log = vec![
        Batch {
            base: 0,
            n: 1,
            record: 100,
        },
        Batch {
            base: 1,
            n: 50,
            record: 100,
        },
    ];
    let fetches = plan_all(&log, &[2], PlanConfig::default());
    assert_eq!(
        fetches,
        [PlannedFetch {
            offset: 0,
            max_bytes: log[0].len() + log[1].end(1),
            kind: FetchKind::Indexed { entries: 0..1 }
        }]
    );
    // Cut records unusable: the large batch whole.
    let entries = hinted(&log, &[2]);
    let layout = layout(&log);
    let whole = PlanView {
        cut_records: false,
        ..PlanView::of(&entries, &layout)
    };
    let fetch = Planner::new(PlanConfig::default()).plan_entries(&whole, 0..1, 0);
    assert_eq!((fetch.offset, fetch.max_bytes), (1, log[1].len()));
    // A wanted record late in the large batch: cutting saves less than
    // the batch before costs.
    let fetch = plan_all(&log, &[50], PlanConfig::default()).remove(0);
    assert_eq!((fetch.offset, fetch.max_bytes), (1, log[1].len()));
}

/// On a broker seen adding whole batches while it has counted less than
/// the limit, a fetch's limit reaches one byte into its last wanted
/// batch: a limit at that batch's end would get the next one too.
#[test]
fn a_broker_that_overshoots_gets_a_limit_within_the_last_wanted_batch() {
    // Fetches free: no gap is read through.
    let log = log(&[10, 10, 10, 1, 50], 100);
    let entries = hinted(&log, &[5, 12, 32]);
    let config = PlanConfig {
        cost: CostModel {
            round_trip: Duration::ZERO,
            ..CostModel::default()
        },
        ..PlanConfig::default()
    };
    let layout = layout(&log);
    // Such a broker does not cut batches either: the core plans whole
    // ones.
    let overshoots = PlanView {
        overshoots: true,
        cut_records: false,
        ..PlanView::of(&entries, &layout)
    };
    let mut planner = Planner::new(config);
    let fetch = planner.plan_entries(&overshoots, 0..3, 0);
    assert_eq!(
        fetch,
        PlannedFetch {
            offset: 0,
            max_bytes: log[0].len() + 1,
            kind: FetchKind::Indexed { entries: 0..2 }
        }
    );
    // One batch: a limit of one byte, which any broker answers with
    // that batch alone. Not from the small batch before it.
    let fetch = planner.plan_entries(&overshoots, 2..3, 0);
    assert_eq!((fetch.offset, fetch.max_bytes), (31, 1));
    // On Kafka's rules, reading through batches 2 and 3 to cut batch 4
    // after its wanted record costs less than batch 4 whole.
    let fetch = planner.plan_entries(&PlanView::of(&entries, &layout), 0..3, 0);
    let through: u32 = log[..4].iter().map(|b| b.len()).sum();
    assert_eq!(
        (fetch.max_bytes, fetch.kind),
        (
            through + log[4].end(1),
            FetchKind::Indexed { entries: 0..3 }
        )
    );
    // And from the small batch before, alone.
    let fetch = planner.plan_entries(&PlanView::of(&entries, &layout), 2..3, 0);
    assert_eq!(
        (fetch.offset, fetch.max_bytes),
        (30, log[3].len() + log[4].end(1))
    );
}

/// Regression: entries past the cap in a first batch larger than the
/// cap were left to later fetches, each getting that batch whole again.
#[test]
fn a_first_batch_larger_than_the_cap_gives_all_its_entries_to_one_fetch() {
    let log = log(&[10, 10, 10], 100);
    let config = PlanConfig {
        max_fetch_bytes: 500,
        ..PlanConfig::default()
    };
    let wanted: Vec<i64> = (10..20).collect();
    let fetch = plan_all(&log, &wanted, config).remove(0);
    assert_eq!(
        (fetch.offset, fetch.kind),
        (10, FetchKind::Indexed { entries: 0..10 })
    );
}

/// Regression: a run the cap cut inside a batch read that batch's
/// first records, then fetched the batch again from its start for the
/// rest.
#[test]
fn a_fetch_stops_before_a_batch_the_cap_would_cut_short_of_its_entries() {
    let log = log(&[10, 10, 10], 100);
    let config = PlanConfig {
        max_fetch_bytes: log[0].len() + log[1].end(4),
        ..PlanConfig::default()
    };
    let mut fetches = plan_all(&log, &[5, 12, 18], config).into_iter();
    let first = fetches.next().unwrap();
    assert_eq!(
        (first.offset, first.max_bytes, first.kind),
        (0, log[0].len(), FetchKind::Indexed { entries: 0..1 })
    );
    let second = fetches.next().unwrap();
    assert_eq!(
        (second.offset, second.kind),
        (10, FetchKind::Indexed { entries: 1..3 })
    );
}

/// Regression: a fetch split off at a batch gets it whole (KIP-74);
/// the planner weighed only the gap before it against a round trip.
#[test]
fn reaching_into_a_batch_beats_a_fetch_that_would_get_it_whole() {
    // Batch 0, a small batch of others' records, batch 2; fetches free.
    let log = log(&[10, 1, 10], 100);
    let config = PlanConfig {
        cost: CostModel {
            round_trip: Duration::ZERO,
            ..CostModel::default()
        },
        ..PlanConfig::default()
    };
    // The first record of batch 2 only: reaching over batch 1 (161 B)
    // and cutting batch 2 after its record beats getting it whole.
    let fetch = plan_all(&log, &[9, 11], config).remove(0);
    assert_eq!(
        (fetch.max_bytes, fetch.kind),
        (
            log[0].len() + log[1].len() + log[2].end(0),
            FetchKind::Indexed { entries: 0..2 }
        )
    );
    // Its last record too: the split fetch reads no more of batch 2,
    // and saves batch 1.
    let fetch = plan_all(&log, &[9, 11, 20], config).remove(0);
    assert_eq!(fetch.kind, FetchKind::Indexed { entries: 0..1 });
}

/// `batches` observed batches of ten offsets from offset 0, `len`
/// bytes each, compressed or not.
fn observed(batches: i64, len: u32, compressed: bool) -> Layout {
    let mut layout = Layout::new();
    for b in 0..batches {
        layout.observe_batch(&SeenBatch {
            base: b * 10,
            last: b * 10 + 9,
            len,
            compressed,
        });
    }
    layout
}

#[test]
fn an_estimated_end_leaves_a_whole_batch_when_batches_are_compressed() {
    let limit = |compressed: bool| {
        // 150 offsets apart: in different batches of 10 offsets.
        let entries = [IndexEntry::offset_only(500), IndexEntry::offset_only(650)];
        let fetches = plan_entries_in(
            &entries,
            &observed(10, 1000, compressed),
            PlanConfig::default(),
        );
        assert_eq!(fetches[0].kind, FetchKind::Indexed { entries: 0..2 });
        fetches[0].max_bytes
    };
    // Half a batch before the first record (the batch holding it
    // starts there on average), that record (100 B per offset), the
    // 149 offsets to the second and its record, then half a batch of
    // room, or a whole one when compressed.
    assert_eq!(limit(false), 500 + 100 + 149 * 100 + 100 + 500);
    assert_eq!(limit(true), 500 + 100 + 149 * 100 + 100 + 1000);
}

/// From an entry whose batch is unknown, that batch comes first and
/// whole whatever the limit (KIP-74): a fetch of it alone asks for one
/// byte, and so does one whose later entries were mostly seen sharing
/// a batch with the entry before them.
#[test]
fn a_fetch_of_an_unknown_batch_alone_asks_for_one_byte() {
    // The last far past the cost model's merge gap (56 KB).
    let entries: Vec<IndexEntry> = [500, 501, 502, 5000]
        .into_iter()
        .map(IndexEntry::offset_only)
        .collect();
    let plan = |layout: &Layout, run: Range<usize>| {
        Planner::new(PlanConfig::default()).plan_entries(&PlanView::of(&entries, layout), run, 0)
    };
    let mut layout = observed(10, 1000, true);
    let alone = plan(&layout, 3..4);
    assert_eq!(
        (alone.offset, alone.max_bytes, alone.kind),
        (5000, 1, FetchKind::Indexed { entries: 3..4 })
    );
    // The next offset is taken to share the batch before any pair was
    // seen: the run to 502, one byte.
    let run = plan(&layout, 0..4);
    assert_eq!(
        (run.offset, run.max_bytes, run.kind),
        (500, 1, FetchKind::Indexed { entries: 0..3 })
    );
    // And after pairs one offset apart were seen in one batch.
    for _ in 0..10 {
        layout.observe_neighbours(1, true, true);
    }
    let run = plan(&layout, 0..4);
    assert_eq!(
        (run.offset, run.max_bytes, run.kind),
        (500, 1, FetchKind::Indexed { entries: 0..3 })
    );
    // Seen apart: the limit reaches for the next entries by estimate.
    let mut apart = observed(10, 1000, true);
    for _ in 0..10 {
        apart.observe_neighbours(1, true, false);
    }
    let run = plan(&apart, 0..4);
    assert!(run.max_bytes > 1000, "{run:?}");
    // Not on a second attempt (a broker may have skipped the batch).
    let again =
        Planner::new(PlanConfig::default()).plan_entries(&PlanView::of(&entries, &layout), 3..4, 1);
    assert!(again.max_bytes > 1, "{again:?}");
}

/// A recovery's entries are several regions'. Where answers showed two
/// regions' adjacent entries never sharing a batch (a region per
/// batch), a fetch of the first region's entries stops at the next
/// region's: it asks for one byte and gets that batch exactly, rather
/// than reading on with an estimated end and a compressed batch of
/// slack, more than a fetch costs at 64 in flight.
#[test]
fn a_fetch_stops_where_another_region_begins_on_a_region_per_batch() {
    let entries: Vec<IndexEntry> = [500, 501, 502, 503, 504]
        .into_iter()
        .map(IndexEntry::offset_only)
        .collect();
    let regions = [7, 7, 7, 9, 9];
    let mut layout = observed(10, 10_000, true);
    for _ in 0..40 {
        layout.observe_neighbours(1, true, true);
        layout.observe_neighbours(1, false, false);
    }
    let mut config = PlanConfig::default();
    config.cost.in_flight = 64;
    let plan = |regions: &[usize]| {
        let view = PlanView {
            regions,
            ..PlanView::of(&entries, &layout)
        };
        Planner::new(config).plan_entries(&view, 0..entries.len(), 0)
    };
    let fetch = plan(&regions);
    assert_eq!(
        (fetch.offset, fetch.max_bytes, fetch.kind),
        (500, 1, FetchKind::Indexed { entries: 0..3 })
    );
    // Not told the regions, the pairs look like one region's, which
    // share batches: the fetch claims them all in its first batch.
    let fetch = plan(&[]);
    assert_eq!(
        (fetch.offset, fetch.max_bytes, fetch.kind),
        (500, 1, FetchKind::Indexed { entries: 0..5 })
    );
}

#[test]
fn a_run_at_every_offset_to_the_logs_end_is_one_fetch_from_its_first_entry() {
    // Offsets only, a batch seen ending at 99: entries 100..200 of a
    // log ending at 200 are one fetch, claiming them all.
    let entries: Vec<IndexEntry> = (100..200).map(IndexEntry::offset_only).collect();
    let mut layout = Layout::new();
    layout.observe_batch(&SeenBatch {
        base: 90,
        last: 99,
        len: 1000,
        compressed: true,
    });
    let config = PlanConfig::default();
    let plan = |log_end: i64, entries: &[IndexEntry], layout: &Layout| {
        let view = PlanView {
            log_end,
            ..PlanView::of(entries, layout)
        };
        Planner::new(config).plan_entries(&view, 0..entries.len(), 0)
    };
    // 100 offsets of 100 bytes each seen: four times that and four
    // batches.
    let all = PlannedFetch {
        offset: 100,
        max_bytes: 4 * (100 * 100 + 1000),
        kind: FetchKind::Indexed { entries: 0..100 },
    };
    assert_eq!(plan(200, &entries, &layout), all);
    // A record after the last entry, or a gap between two: what
    // follows the run, or lies within it, may not be wanted.
    assert_ne!(plan(201, &entries, &layout), all);
    let gapped: Vec<IndexEntry> = (100..200)
        .filter(|&o| o != 150)
        .map(IndexEntry::offset_only)
        .collect();
    assert_ne!(plan(200, &gapped, &layout).max_bytes, all.max_bytes);
    // The last entry's batch known: the usual plan knows where the
    // run ends.
    let mut known_end = layout.clone();
    known_end.observe_batch(&SeenBatch {
        base: 190,
        last: 199,
        len: 1000,
        compressed: true,
    });
    assert_ne!(plan(200, &entries, &known_end), all);
    // Nothing seen: one fetch from the first entry, as large as a
    // fetch may be (the budget, here the configured most).
    let unseen = PlannedFetch {
        max_bytes: config.max_fetch_bytes,
        ..all.clone()
    };
    assert_eq!(plan(200, &entries, &Layout::new()), unseen);
    // On a broker seen to skip the batch holding a mid-batch offset,
    // from a little lower: it sends the batch after the one it skips.
    let mut far = Layout::new();
    far.observe_batch(&SeenBatch {
        base: 0,
        last: 9,
        len: 1000,
        compressed: true,
    });
    let skipping = PlanView {
        log_end: 200,
        misaligned: Some(0),
        ..PlanView::of(&entries, &far)
    };
    let fetch = Planner::new(config).plan_entries(&skipping, 0..entries.len(), 0);
    assert_eq!(fetch.kind, all.kind);
    assert!(fetch.offset < 100, "{fetch:?}");
}

#[test]
fn a_zero_fetch_limit_or_budget_plans_one_byte_fetches() {
    let entries: Vec<IndexEntry> = (0..50).map(IndexEntry::offset_only).collect();
    let layout = observed(10, 1000, false);
    let config = PlanConfig {
        max_fetch_bytes: 0,
        ..PlanConfig::default()
    };
    let fetch = Planner::new(config).plan_entries(&PlanView::of(&entries, &layout), 0..50, 0);
    assert_eq!(fetch.max_bytes, 1);
    let no_budget = PlanView {
        budget: 0,
        ..PlanView::of(&entries, &layout)
    };
    let fetch = Planner::new(PlanConfig::default()).plan_entries(&no_budget, 0..50, 0);
    assert_eq!(fetch.max_bytes, 1);
}

#[test]
fn a_full_estimated_fetch_claims_every_entry() {
    // 1000 B per offset seen; 19 MB of wanted offsets: more than one
    // fetch can take.
    let entries: Vec<IndexEntry> = (1000..20_000).map(IndexEntry::offset_only).collect();
    let mut layout = observed(100, 10_000, false);
    // As the answers that showed those batches would have: every
    // wanted offset's next in its batch but the last.
    for k in 0..1000 {
        layout.observe_neighbours(1, true, k % 10 < 9);
    }
    let first = Planner::new(PlanConfig::default()).plan_entries(
        &PlanView::of(&entries, &layout),
        0..entries.len(),
        0,
    );
    assert_eq!(first.max_bytes, PlanConfig::default().max_fetch_bytes);
    assert_eq!(
        first.kind,
        FetchKind::Indexed {
            entries: 0..entries.len()
        },
        "where its response ends is unknown: it claims every entry, and \
         the core hands back what it did not deliver"
    );
}

#[test]
fn a_scan_fetch_starts_at_the_known_batch_below_and_takes_the_most() {
    let log = log(&[10, 10], 100);
    let layout = layout(&log);
    let mut planner = Planner::new(PlanConfig::default());
    let tail = planner.plan_tail(&PlanView::of(&[], &layout), 14, 300, 0);
    assert_eq!((tail.offset, tail.kind), (10, FetchKind::Tail { from: 14 }));
    assert_eq!(tail.max_bytes, PlanConfig::default().max_fetch_bytes);
    // Past the known batches: from the offset itself.
    assert_eq!(
        planner
            .plan_tail(&PlanView::of(&[], &layout), 25, 300, 0)
            .offset,
        25
    );
}
