//! The simulated scenarios (log layouts, regions, indexes, habits) and what an exact replay of one is.

pub(crate) use proptest::prelude::*;
pub(crate) use proptest::test_runner::FileFailurePersistence;
pub(crate) use walfetch::codec::Compression;
pub(crate) use walfetch::error::Error;
pub(crate) use walfetch::index::{Hint, IndexEntry, RegionId, WalIndex};
pub(crate) use walfetch::plan::{CostModel, PlanConfig};
pub(crate) use walfetch::replay::{
    CutRecords, LostPolicy, RegionRange, ReplayOptions, StrategyKind,
};
pub(crate) use walfetch_testkit::Habits;

pub(crate) use walfetch_support::sim::{
    injected_error, BatchSpec, Faults, IndexSpec, Outcome, Sim, SimLog,
};

/// Regions records are written for; one more is asked for that has none.
pub(crate) const REGIONS: RegionId = 5;

/// A position in a collection of any size, as `proptest::sample::Index`
/// (which tests cannot construct): `size × pick / 2⁶⁴`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pick(u64);

impl Pick {
    pub(crate) fn index(self, size: usize) -> usize {
        ((u128::from(self.0) * size as u128) >> 64) as usize
    }
}

pub(crate) fn pick() -> impl Strategy<Value = Pick> {
    any::<u64>().prop_map(Pick)
}

/// Where the index stops.
#[derive(Debug, Clone, Copy)]
pub(crate) enum LastIndex {
    /// Every record indexed.
    Complete,
    /// No `last_index`: a replay scans.
    Missing,
    /// Somewhere in (or just past) the log: the rest is scanned.
    At(Pick),
}

/// One generated replay.
#[derive(Debug, Clone)]
pub(crate) struct Scenario {
    pub(crate) batches: Vec<BatchSpec>,
    pub(crate) compression: Compression,
    pub(crate) value_len: usize,
    pub(crate) value_spread: usize,
    /// Region, checkpoint, and where its range ends (`None`: the log's end).
    pub(crate) regions: Vec<(RegionId, Pick, Option<Pick>)>,
    pub(crate) last_index: LastIndex,
    pub(crate) hints: bool,
    pub(crate) habits: Habits,
    pub(crate) in_flight: usize,
    /// A small byte cap on fetches (max, probe), so that fetches are cut
    /// and scans take several; `None`: the defaults.
    pub(crate) small_fetches: Option<(u32, u32)>,
    /// Whether records carry per-record checksums, and which cut records
    /// the replay uses.
    pub(crate) checksums: bool,
    pub(crate) cut_records: CutRecords,
    pub(crate) seed: u64,
}

impl Scenario {
    pub(crate) fn log(&self) -> SimLog {
        let (len, spread) = (self.value_len, self.value_spread);
        SimLog::build_with(
            &self.batches,
            self.compression,
            |offset| len + (offset as usize).wrapping_mul(7919) % (spread + 1),
            self.checksums,
        )
    }

    /// The regions' ranges in `log`.
    pub(crate) fn ranges(&self, log: &SimLog) -> Vec<RegionRange> {
        let end = log.end();
        let mut out: Vec<RegionRange> = Vec::new();
        for &(region, from, to) in &self.regions {
            if out.iter().any(|r| r.region == region) {
                continue;
            }
            let from = from.index(end as usize + 1) as i64;
            let to = to.map_or(end, |to| from + to.index((end - from) as usize + 1) as i64);
            out.push(RegionRange { region, from, to });
        }
        out
    }

    pub(crate) fn index_spec(&self, log: &SimLog) -> IndexSpec {
        let last_index = match self.last_index {
            LastIndex::Complete => Some(log.end() - 1),
            LastIndex::Missing => None,
            LastIndex::At(i) => Some(i.index(log.end() as usize + 3) as i64 - 1),
        };
        IndexSpec {
            hints: self.hints,
            last_index,
            writer: None,
        }
    }

    pub(crate) fn options(&self) -> ReplayOptions {
        let mut plan = PlanConfig::default();
        if let Some((max, probe)) = self.small_fetches {
            plan.max_fetch_bytes = max;
            plan.probe_bytes = probe.min(max);
        }
        ReplayOptions::default()
            .with_plan(plan)
            .with_max_in_flight(self.in_flight)
            .with_cut_records(self.cut_records)
    }

    pub(crate) fn sim(&self, log: &SimLog) -> Sim {
        Sim::new(log, self.habits, self.seed).in_flight(self.in_flight)
    }
}

pub(crate) fn batches() -> impl Strategy<Value = Vec<BatchSpec>> {
    let batch = (
        prop::collection::vec(0..REGIONS, 1..14),
        prop_oneof![6 => Just(0u32), 1 => 1u32..4],
    );
    // Region-pure (one region per batch, as GreptimeDB writes) or mixed.
    (prop::collection::vec(batch, 1..18), any::<bool>()).prop_map(|(raw, pure)| {
        raw.into_iter()
            .map(|(mut regions, gap)| {
                if pure {
                    let first = regions[0];
                    regions.fill(first);
                }
                BatchSpec {
                    regions,
                    gap,
                    writer: 0,
                }
            })
            .collect()
    })
}

pub(crate) fn habits() -> impl Strategy<Value = Habits> {
    prop_oneof![
        Just(Habits::KAFKA),
        Just(Habits {
            never_cut: true,
            ..Habits::KAFKA
        }),
        Just(Habits {
            skip_containing_batch: true,
            ..Habits::KAFKA
        }),
        Just(Habits::TANSU_0_6),
        Just(Habits::EMPTY_WHEN_HURRIED),
        // Kafka reads one segment a response: segments of a few batches,
        // and of one batch each.
        Just(Habits {
            segment_bytes: 3000,
            ..Habits::KAFKA
        }),
        Just(Habits {
            segment_bytes: 1,
            ..Habits::KAFKA
        }),
    ]
}

pub(crate) fn scenario() -> impl Strategy<Value = Scenario> {
    (
        batches(),
        prop_oneof![
            4 => Just(Compression::None),
            1 => Just(Compression::Lz4),
            1 => Just(Compression::Zstd),
            1 => Just(Compression::Snappy),
            1 => Just(Compression::Gzip),
        ],
        (0usize..400, 0usize..300),
        prop::collection::vec((0..=REGIONS, pick(), prop::option::of(pick())), 1..5),
        prop_oneof![
            Just(LastIndex::Complete),
            Just(LastIndex::Missing),
            pick().prop_map(LastIndex::At),
        ],
        (any::<bool>(), habits(), 1usize..5),
        prop::option::of((200u32..8000, 100u32..4000)),
        (
            any::<bool>(),
            prop_oneof![
                3 => Just(CutRecords::Checked),
                1 => Just(CutRecords::Trusted),
                1 => Just(CutRecords::Never),
            ],
            any::<u64>(),
        ),
    )
        .prop_map(
            |(
                batches,
                compression,
                (value_len, value_spread),
                regions,
                last_index,
                (hints, habits, in_flight),
                small_fetches,
                (checksums, cut_records, seed),
            )| Scenario {
                batches,
                compression,
                value_len,
                value_spread,
                regions,
                last_index,
                hints,
                habits,
                in_flight,
                small_fetches,
                checksums,
                cut_records,
                seed,
            },
        )
}

/// Every region got exactly its records, in order, and the counters agree.
pub(crate) fn assert_exact(
    log: &SimLog,
    ranges: &[RegionRange],
    out: &Outcome,
) -> Result<(), TestCaseError> {
    prop_assert!(out.error.is_none(), "the replay failed: {:?}", out.error);
    let mut total = 0;
    for r in ranges {
        let want = log.expected(r);
        prop_assert_eq!(&out.regions[&r.region], &want, "region {:?}", r);
        let stats = &out.stats.regions[&r.region];
        prop_assert_eq!(stats.entries + stats.tail_records, want.len() as u64);
        total += want.len() as u64;
    }
    prop_assert_eq!(out.stats.entries + out.stats.tail_records, total);
    Ok(())
}

pub(crate) fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "proptest-regressions/replay_sim.txt",
        ))),
        ..ProptestConfig::default()
    }
}

/// The cost model's price of a fetch in bytes, for a replay with
/// `in_flight` fetches in flight (see `CostModel::merge_gap_bytes`).
pub(crate) fn fetch_price(in_flight: usize) -> u64 {
    CostModel {
        in_flight,
        ..CostModel::default()
    }
    .merge_gap_bytes()
}

/// The scenarios the byte comparison holds for: Kafka's own fetch rules,
/// the writer's exact hints, the default fetch cap (larger than these
/// logs), gaps in the log only where the index is complete. Elsewhere the
/// bytes depend on guesses and habits, not only on the regions: sizes
/// estimated without hints; whether a fetch offset in a gap of a scanned
/// tail fell in a batch the broker skipped; a broker's habits; and where
/// the planner, left to right, ends a run the cap cuts (it does not look
/// ahead for a split that would let the next fetch cut its first batch);
/// and where a replay that checks cut records learns only from a response
/// that the records carry no checksums (one pass and region by region may
/// each pay for a cut they cannot use, at different points).
pub(crate) fn planned_for() -> impl Strategy<Value = Scenario> {
    scenario().prop_map(|mut s| {
        s.checksums |= s.cut_records == CutRecords::Checked;
        s.habits = Habits::KAFKA;
        s.hints = true;
        s.small_fetches = None;
        if !matches!(s.last_index, LastIndex::Complete) {
            for b in &mut s.batches {
                b.gap = 0;
            }
        }
        s
    })
}

/// A region-pure log of `regions` regions taking turns, `per_batch`
/// records a batch.
pub(crate) fn pure_log(batches: usize, regions: RegionId, per_batch: usize) -> SimLog {
    let specs: Vec<BatchSpec> = (0..batches)
        .map(|b| BatchSpec {
            regions: vec![b as RegionId % regions; per_batch],
            ..BatchSpec::default()
        })
        .collect();
    SimLog::build(&specs, Compression::None, |o| 50 + (o as usize % 7) * 30)
}

/// The ranges of `regions` of `log`, region `r` from offset
/// `first + r * step` to its end.
pub(crate) fn ranges_from(
    log: &SimLog,
    regions: &[RegionId],
    first: i64,
    step: i64,
) -> Vec<RegionRange> {
    regions
        .iter()
        .map(|&r| RegionRange {
            from: first + r as i64 * step,
            ..log.whole(r)
        })
        .collect()
}

/// An index of `log` without hints, complete up to half its length.
pub(crate) fn index_to_halfway(log: &SimLog) -> WalIndex {
    log.index(IndexSpec {
        hints: false,
        last_index: Some(log.end() / 2),
        writer: None,
    })
}
