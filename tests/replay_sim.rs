//! The replay core against a simulated partition (`support::sim`): any log
//! layout, any regions with any checkpoints, the index complete, partial or
//! absent, hints or none, any broker habit, answers out of order — every
//! region gets exactly its records from its checkpoint on, in order, and
//! nothing else; under Kafka's rules with the writer's hints, one pass over
//! several regions costs no more than replaying them one by one. Under
//! faults (responses cut short, spurious `OFFSET_OUT_OF_RANGE`, a failed
//! fetch, retention) nothing is lost silently.
#![allow(clippy::unwrap_used)]

mod support;

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use walfetch::codec::Compression;
use walfetch::error::Error;
use walfetch::index::{Hint, IndexEntry, RegionId, WalIndex};
use walfetch::plan::{CostModel, PlanConfig};
use walfetch::replay::{CutRecords, LostPolicy, RegionRange, ReplayOptions, StrategyKind};
use walfetch_testkit::Habits;

use support::sim::{injected_error, BatchSpec, Faults, IndexSpec, Outcome, Sim, SimLog};

/// Regions records are written for; one more is asked for that has none.
const REGIONS: RegionId = 5;

/// A position in a collection of any size, as `proptest::sample::Index`
/// (which tests cannot construct): `size × pick / 2⁶⁴`.
#[derive(Debug, Clone, Copy)]
struct Pick(u64);

impl Pick {
    fn index(self, size: usize) -> usize {
        ((u128::from(self.0) * size as u128) >> 64) as usize
    }
}

fn pick() -> impl Strategy<Value = Pick> {
    any::<u64>().prop_map(Pick)
}

/// Where the index stops.
#[derive(Debug, Clone, Copy)]
enum LastIndex {
    /// Every record indexed.
    Complete,
    /// No `last_index`: a replay scans.
    Missing,
    /// Somewhere in (or just past) the log: the rest is scanned.
    At(Pick),
}

/// One generated replay.
#[derive(Debug, Clone)]
struct Scenario {
    batches: Vec<BatchSpec>,
    compression: Compression,
    value_len: usize,
    value_spread: usize,
    /// Region, checkpoint, and where its range ends (`None`: the log's end).
    regions: Vec<(RegionId, Pick, Option<Pick>)>,
    last_index: LastIndex,
    hints: bool,
    habits: Habits,
    in_flight: usize,
    /// A small byte cap on fetches (max, probe), so that fetches are cut
    /// and scans take several; `None`: the defaults.
    small_fetches: Option<(u32, u32)>,
    /// Whether records carry per-record checksums, and which cut records
    /// the replay uses.
    checksums: bool,
    cut_records: CutRecords,
    seed: u64,
}

impl Scenario {
    fn log(&self) -> SimLog {
        let (len, spread) = (self.value_len, self.value_spread);
        SimLog::build_with(
            &self.batches,
            self.compression,
            |offset| len + (offset as usize).wrapping_mul(7919) % (spread + 1),
            self.checksums,
        )
    }

    /// The regions' ranges in `log`.
    fn ranges(&self, log: &SimLog) -> Vec<RegionRange> {
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

    fn index_spec(&self, log: &SimLog) -> IndexSpec {
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

    fn options(&self) -> ReplayOptions {
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

    fn sim(&self, log: &SimLog) -> Sim {
        Sim::new(log, self.habits, self.seed).in_flight(self.in_flight)
    }
}

fn batches() -> impl Strategy<Value = Vec<BatchSpec>> {
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

fn habits() -> impl Strategy<Value = Habits> {
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

fn scenario() -> impl Strategy<Value = Scenario> {
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
fn assert_exact(log: &SimLog, ranges: &[RegionRange], out: &Outcome) -> Result<(), TestCaseError> {
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

fn config(cases: u32) -> ProptestConfig {
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
fn fetch_price(in_flight: usize) -> u64 {
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
fn planned_for() -> impl Strategy<Value = Scenario> {
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

proptest! {
    #![proptest_config(config(768))]

    /// Every region gets exactly its records, in one pass and alone.
    #[test]
    fn every_region_gets_exactly_its_records(s in scenario()) {
        let log = s.log();
        let ranges = s.ranges(&log);
        let index = log.index(s.index_spec(&log));
        let one_pass = s.sim(&log).run(&index, &ranges, s.options());
        assert_exact(&log, &ranges, &one_pass)?;
        for r in &ranges {
            let alone = s.sim(&log).run(&index, std::slice::from_ref(r), s.options());
            assert_exact(&log, std::slice::from_ref(r), &alone)?;
            if matches!(s.last_index, LastIndex::Complete) {
                let entries = log.expected(r).len() as u64;
                prop_assert!(
                    alone.stats.fetches <= 4 * entries + 20,
                    "{} fetches for {} entries",
                    alone.stats.fetches,
                    entries
                );
            }
        }
    }

    /// One pass costs no more than replaying each region alone, at the
    /// price the planner puts on a fetch: record bytes, plus the fetches
    /// times the bytes the cost model trades one for. (Not bytes alone:
    /// the planner reads a few bytes of another region's batch to save a
    /// fetch, which a region alone does not; and with fetches free, its
    /// runs are built left to right, not searched for the cheapest split.)
    #[test]
    fn one_pass_costs_no_more_than_region_by_region(s in planned_for()) {
        let log = s.log();
        let ranges = s.ranges(&log);
        let index = log.index(s.index_spec(&log));
        let price = fetch_price(s.in_flight);
        let cost = |o: &Outcome| o.stats.records_bytes + o.stats.fetches * price;
        let one_pass = s.sim(&log).run(&index, &ranges, s.options());
        assert_exact(&log, &ranges, &one_pass)?;
        let mut alone_cost = 0;
        for r in &ranges {
            let alone = s.sim(&log).run(&index, std::slice::from_ref(r), s.options());
            alone_cost += cost(&alone);
        }
        prop_assert!(
            cost(&one_pass) <= alone_cost,
            "one pass {} bytes in {} fetches, region by region {} at {} a fetch",
            one_pass.stats.records_bytes,
            one_pass.stats.fetches,
            alone_cost,
            price
        );
    }

    /// Responses cut at any byte, spurious `OFFSET_OUT_OF_RANGE` answers
    /// and answers from replicas whose high watermark lags cost fetches,
    /// never records.
    #[test]
    fn cut_responses_spurious_out_of_range_and_lagging_replicas_lose_nothing(
        s in scenario(),
        truncate in 0.0f64..0.3,
        spurious in 0.0f64..0.2,
        lagging in 0.0f64..0.3,
    ) {
        let log = s.log();
        let ranges = s.ranges(&log);
        let index = log.index(s.index_spec(&log));
        let faults = Faults {
            truncate,
            spurious_out_of_range: spurious,
            lagging,
            ..Faults::NONE
        };
        let out = s.sim(&log).faults(faults).run(&index, &ranges, s.options());
        assert_exact(&log, &ranges, &out)?;
    }

    /// A fetch that fails ends the replay with its error, after a prefix
    /// of each region's records and nothing else.
    #[test]
    fn a_failed_fetch_ends_the_replay_with_its_error(s in scenario(), at in 0usize..12) {
        let log = s.log();
        let ranges = s.ranges(&log);
        let index = log.index(s.index_spec(&log));
        let faults = Faults { error_at: Some(at), ..Faults::NONE };
        let out = s.sim(&log).faults(faults).run(&index, &ranges, s.options());
        for r in &ranges {
            let got = &out.regions[&r.region];
            let want = log.expected(r);
            prop_assert!(want.starts_with(got), "region {:?}: not a prefix", r);
        }
        if out.answers > at {
            match &out.error {
                Some(Error::Client(e)) => {
                    prop_assert_eq!(e.to_string(), injected_error().to_string());
                }
                other => prop_assert!(false, "ended with {:?}", other),
            }
        } else {
            assert_exact(&log, &ranges, &out)?;
        }
    }
}

/// A region-pure log of `regions` regions taking turns, `per_batch`
/// records a batch.
fn pure_log(batches: usize, regions: RegionId, per_batch: usize) -> SimLog {
    let specs: Vec<BatchSpec> = (0..batches)
        .map(|b| BatchSpec {
            regions: vec![b as RegionId % regions; per_batch],
            ..BatchSpec::default()
        })
        .collect();
    SimLog::build(&specs, Compression::None, |o| 50 + (o as usize % 7) * 30)
}

#[test]
fn retention_past_a_checkpoint_is_an_error_or_a_list_of_lost_offsets() {
    let log = pure_log(30, 3, 4);
    let index = log.full_index();
    let ranges: Vec<RegionRange> = (0..3).map(|r| log.whole(r)).collect();
    // Before the first answer, the log start moves to offset 50: every
    // region's entries below it are gone.
    let faults = Faults {
        log_start: Some((0, 50)),
        ..Faults::NONE
    };
    let run = |policy| {
        Sim::new(&log, Habits::KAFKA, 1).faults(faults).run(
            &index,
            &ranges,
            ReplayOptions::default().with_on_lost(policy),
        )
    };
    let failed = run(LostPolicy::Error);
    match &failed.error {
        Some(Error::LostOffsets {
            region, offsets, ..
        }) => {
            let below: Vec<i64> = log
                .offsets_of(*region)
                .into_iter()
                .filter(|&o| o < 50)
                .collect();
            assert_eq!(offsets, &below, "every lost offset of the region");
        }
        other => panic!("ended with {other:?}"),
    }
    assert!(failed.regions.values().all(Vec::is_empty));

    let skipped = run(LostPolicy::Skip);
    assert!(skipped.error.is_none(), "{:?}", skipped.error);
    for r in &ranges {
        let kept = RegionRange { from: 50, ..*r };
        assert_eq!(skipped.regions[&r.region], log.expected(&kept));
        let lost: Vec<i64> = log
            .offsets_of(r.region)
            .into_iter()
            .filter(|&o| o < 50)
            .collect();
        assert_eq!(skipped.stats.regions[&r.region].lost, lost);
    }
}

#[test]
fn out_of_order_answers_with_many_in_flight_still_yield_in_order() {
    let log = pure_log(60, 4, 3);
    let index = log.full_index();
    let ranges: Vec<RegionRange> = (0..4)
        .map(|r| RegionRange {
            from: 7 * (r as i64 + 1),
            ..log.whole(r)
        })
        .collect();
    // Small fetches so that many are planned, and sent, at once.
    let plan = PlanConfig {
        max_fetch_bytes: 400,
        ..PlanConfig::default()
    };
    for seed in 0..20 {
        let out = Sim::new(&log, Habits::KAFKA, seed).in_flight(4).run(
            &index,
            &ranges,
            ReplayOptions::default()
                .with_plan(plan)
                .with_max_in_flight(4),
        );
        assert!(out.error.is_none(), "seed {seed}: {:?}", out.error);
        for r in &ranges {
            assert_eq!(out.regions[&r.region], log.expected(r), "seed {seed}");
        }
        assert!(
            out.stats.round_trips < out.stats.fetches,
            "seed {seed}: pipelined"
        );
    }
}

#[test]
fn every_strategy_gives_the_same_records() {
    let log = pure_log(40, 5, 5);
    let ranges: Vec<RegionRange> = [0, 2, 3]
        .map(|r| RegionRange {
            from: 20 + r as i64 * 13,
            ..log.whole(r)
        })
        .to_vec();
    let halfway = log.index(IndexSpec {
        hints: false,
        last_index: Some(log.end() / 2),
        writer: None,
    });
    for index in [log.full_index(), halfway] {
        for strategy in [
            StrategyKind::Index,
            StrategyKind::Estimate,
            StrategyKind::Scan,
        ] {
            for habits in [Habits::KAFKA, Habits::TANSU_0_6] {
                let out = Sim::new(&log, habits, 3).in_flight(2).run(
                    &index,
                    &ranges,
                    ReplayOptions::default().with_strategy(strategy),
                );
                assert!(out.error.is_none(), "{strategy:?}: {:?}", out.error);
                for r in &ranges {
                    assert_eq!(out.regions[&r.region], log.expected(r), "{strategy:?}");
                }
            }
        }
    }
}

/// Regression: on a broker that skips the batch containing a mid-batch
/// fetch offset, a checkpoint inside the log's last batch got empty
/// answers forever (the core took an empty answer below the log's end for
/// "nothing there") and the replay stalled.
#[test]
fn a_checkpoint_inside_the_last_batch_on_a_broker_that_skips_it() {
    let log = pure_log(1, 1, 4);
    let index = log.offsets_index();
    let range = RegionRange {
        from: 1,
        ..log.whole(0)
    };
    for habits in [
        Habits {
            skip_containing_batch: true,
            ..Habits::KAFKA
        },
        Habits::TANSU_0_6,
    ] {
        let out = Sim::new(&log, habits, 0).run(&index, &[range], ReplayOptions::default());
        assert!(out.error.is_none(), "{habits:?}: {:?}", out.error);
        assert_eq!(out.regions[&0], log.expected(&range), "{habits:?}");
    }
}

/// A broker that answers a fetch that may not wait with no records and
/// no error, its high watermark past the fetch offset (storage slower than
/// the wait; Kafka answers so when a read from tiered storage outlasts its
/// `remote.fetch.max.wait.ms`): the replay asks again allowing a wait, and
/// every region gets its records, indexed or scanned. Before, every fetch
/// went out with `max_wait_ms` 0, each answer was a fetch without
/// progress, and the replay ended stalled.
#[test]
fn a_broker_that_answers_hurried_fetches_with_no_records_loses_nothing() {
    let log = pure_log(30, 3, 4);
    let ranges: Vec<RegionRange> = [0, 1, 2]
        .map(|r| RegionRange {
            from: 7 + r as i64 * 5,
            ..log.whole(r)
        })
        .to_vec();
    let halfway = log.index(IndexSpec {
        hints: false,
        last_index: Some(log.end() / 2),
        writer: None,
    });
    for index in [log.full_index(), log.offsets_index(), halfway] {
        for strategy in [
            StrategyKind::Index,
            StrategyKind::Estimate,
            StrategyKind::Scan,
        ] {
            for habits in [
                Habits::EMPTY_WHEN_HURRIED,
                Habits {
                    empty_below_wait_ms: 50,
                    ..Habits::TANSU_0_6
                },
            ] {
                let out = Sim::new(&log, habits, 5).in_flight(2).run(
                    &index,
                    &ranges,
                    ReplayOptions::default().with_strategy(strategy),
                );
                assert!(
                    out.error.is_none(),
                    "{strategy:?} {habits:?}: {:?}",
                    out.error
                );
                for r in &ranges {
                    assert_eq!(out.regions[&r.region], log.expected(r), "{strategy:?}");
                }
                assert!(
                    out.fetches.iter().any(|f| !f.max_wait.is_zero()),
                    "{strategy:?}: asked again allowing a wait"
                );
            }
        }
    }
}

/// A broker that could not read a partition in time is not taken for one
/// that skips the batch holding a mid-batch fetch offset for the rest of
/// the replay: once an answer comes from the batch holding its fetch
/// offset, the replay reads what Kafka's rules give again. Before, the
/// first empty answers had every later fetch of an index without hints
/// start below its offset, for the rest of the replay.
#[test]
fn a_broker_that_could_not_read_in_time_is_not_taken_for_one_that_skips_batches() {
    let log = pure_log(60, 6, 5);
    let ranges: Vec<RegionRange> = [1, 4]
        .map(|r| RegionRange {
            from: 33 + r as i64 * 7,
            ..log.whole(r)
        })
        .to_vec();
    let index = log.offsets_index();
    let options = ReplayOptions::default();
    let kafka = Sim::new(&log, Habits::KAFKA, 3).run(&index, &ranges, options.clone());
    let hurried = Sim::new(&log, Habits::EMPTY_WHEN_HURRIED, 3).run(&index, &ranges, options);
    for out in [&kafka, &hurried] {
        assert!(out.error.is_none(), "{:?}", out.error);
        for r in &ranges {
            assert_eq!(out.regions[&r.region], log.expected(r));
        }
    }
    // The fetches that waited too little look like a skip, and one goes
    // lower; the plan after it differs a little: a few batches more, not a
    // batch more for every fetch after (8 batches more here, before).
    let batch = log.batches().iter().map(|b| u64::from(b.len)).max();
    assert!(
        hurried.stats.records_bytes <= kafka.stats.records_bytes + 3 * batch.unwrap_or(0),
        "{} bytes after empty answers, {} on Kafka's rules",
        hurried.stats.records_bytes,
        kafka.stats.records_bytes
    );
}

/// Kafka reads one log segment a response: a response ends at its
/// segment's end, whole batches, with fewer bytes than asked although the
/// log goes on. Every region still gets exactly its records, with no byte
/// read twice: what a response did not reach is asked for from there.
#[test]
fn a_response_that_ends_at_a_segment_end_loses_nothing() {
    let log = pure_log(40, 5, 5);
    let ranges: Vec<RegionRange> = [0, 2, 3]
        .map(|r| RegionRange {
            from: 20 + r as i64 * 13,
            ..log.whole(r)
        })
        .to_vec();
    for index in [log.full_index(), log.offsets_index()] {
        for strategy in [
            StrategyKind::Index,
            StrategyKind::Estimate,
            StrategyKind::Scan,
        ] {
            let options = ReplayOptions::default().with_strategy(strategy);
            let whole = Sim::new(&log, Habits::KAFKA, 3).run(&index, &ranges, options.clone());
            for segment_bytes in [1, 1500, 4000] {
                let habits = Habits {
                    segment_bytes,
                    ..Habits::KAFKA
                };
                let out =
                    Sim::new(&log, habits, 3)
                        .in_flight(2)
                        .run(&index, &ranges, options.clone());
                assert!(
                    out.error.is_none(),
                    "{strategy:?} {segment_bytes}: {:?}",
                    out.error
                );
                for r in &ranges {
                    assert_eq!(out.regions[&r.region], log.expected(r), "{strategy:?}");
                }
                assert!(
                    out.stats.records_bytes <= whole.stats.records_bytes,
                    "{strategy:?} {segment_bytes}: {} bytes, {} in one segment",
                    out.stats.records_bytes,
                    whole.stats.records_bytes
                );
            }
        }
    }
}

/// Regression: a scan from offsets that do not exist (compacted away, or
/// below the first batch) took the response that starts above them for a
/// batch the broker skipped, fetched the same offset again and stalled.
#[test]
fn a_scan_from_offsets_that_do_not_exist_goes_on_from_the_next_batch() {
    let specs = [
        BatchSpec {
            regions: vec![0, 1, 0],
            gap: 2,
            writer: 0,
        },
        BatchSpec {
            regions: vec![1, 1],
            gap: 3,
            writer: 0,
        },
    ];
    let log = SimLog::build(&specs, Compression::None, |_| 40);
    let ranges = [log.whole(0), log.whole(1)];
    for last_index in [None, Some(0), Some(5)] {
        let index = log.index(IndexSpec {
            hints: true,
            last_index,
            writer: None,
        });
        for strategy in [
            StrategyKind::Index,
            StrategyKind::Estimate,
            StrategyKind::Scan,
        ] {
            let options = ReplayOptions::default().with_strategy(strategy);
            let out = Sim::new(&log, Habits::KAFKA, 0).run(&index, &ranges, options);
            assert!(
                out.error.is_none(),
                "{last_index:?} {strategy:?}: {:?}",
                out.error
            );
            for r in &ranges {
                assert_eq!(out.regions[&r.region], log.expected(r), "{strategy:?}");
            }
        }
    }
}

/// Regression: the scan past `last_index` read from the lowest region's
/// start to the end, through offsets between the regions' ranges that no
/// region wants.
#[test]
fn the_scan_reads_only_the_regions_ranges() {
    let log = pure_log(6, 1, 10);
    let index = WalIndex::new();
    let ranges = [
        RegionRange {
            region: 0,
            from: 0,
            to: 5,
        },
        RegionRange {
            region: 1,
            from: 40,
            to: log.end(),
        },
    ];
    // Region 1 holds nothing: the scan must still read its range to know.
    let plan = PlanConfig {
        max_fetch_bytes: 100,
        ..PlanConfig::default()
    };
    let out = Sim::new(&log, Habits::KAFKA, 0).run(
        &index,
        &ranges,
        ReplayOptions::default().with_plan(plan),
    );
    assert!(out.error.is_none(), "{:?}", out.error);
    assert_eq!(out.regions[&0], log.expected(&ranges[0]));
    let offsets: Vec<i64> = out.fetches.iter().map(|f| f.offset).collect();
    assert_eq!(offsets, [0, 40, 50], "one batch a fetch, none in 10..40");
}

/// Regression: walking a log toward an entry whose batch is unknown, one
/// small batch a response, counted every response that delivered nothing
/// as a fetch without progress, and gave up half way.
#[test]
fn a_long_walk_toward_an_unknown_batch_is_progress() {
    // Big batches first (the planner learns ~100 offsets a batch), then
    // small ones; the entry deep among the small ones.
    let mut specs = vec![
        BatchSpec {
            regions: vec![1; 100],
            ..BatchSpec::default()
        };
        3
    ];
    specs[0].regions[5] = 0;
    specs.extend((0..60).map(|_| BatchSpec {
        regions: vec![1, 1],
        ..BatchSpec::default()
    }));
    specs[50].regions[1] = 0;
    let log = SimLog::build(&specs, Compression::None, |_| 40);
    let index = log.offsets_index();
    let plan = PlanConfig {
        max_fetch_bytes: 200,
        probe_bytes: 100,
        ..PlanConfig::default()
    };
    let habits = Habits {
        repeat_last_batch: false,
        ..Habits::TANSU_0_6
    };
    let out = Sim::new(&log, habits, 0).run(
        &index,
        &[log.whole(0)],
        ReplayOptions::default().with_plan(plan),
    );
    assert!(out.error.is_none(), "{:?}", out.error);
    assert_eq!(out.regions[&0], log.expected(&log.whole(0)));
    assert!(
        out.stats.fetches > 17,
        "{} fetches: not a long walk",
        out.stats.fetches
    );
}

/// A response is matched against the whole index, not only the entries its
/// fetch was sized for: the estimate strategy's first fetch (256 KiB per
/// record assumed) asks for offset 0 only, and the batch it gets whole
/// also holds offset 150 of the same region, which then needs no fetch of
/// its own.
#[test]
fn entries_a_response_carries_beyond_its_fetch_are_taken() {
    let mut regions = vec![2; 200];
    regions[0] = 1;
    regions[150] = 1;
    let specs = [BatchSpec {
        regions,
        ..BatchSpec::default()
    }];
    let log = SimLog::build(&specs, Compression::None, |_| 20);
    let range = log.whole(1);
    let out = Sim::new(&log, Habits::KAFKA, 0).run(
        &log.offsets_index(),
        &[range],
        ReplayOptions::default().with_strategy(StrategyKind::Estimate),
    );
    assert!(out.error.is_none(), "{:?}", out.error);
    assert_eq!(out.regions[&1], log.expected(&range));
    assert_eq!(out.stats.fetches, 1, "{:?}", out.fetches);
}

/// A broker that adds whole batches while the bytes it counted (without
/// batch headers, Tansu 0.6) are below the limit: once the core has seen it
/// overshoot, each fetch's limit reaches one byte into its last wanted
/// batch, so the broker stops there. Before, every fetch of this layout (the
/// region's batches apart, one fetch each) got the next region's batch too.
#[test]
fn a_broker_that_overshoots_the_limit_sends_only_the_wanted_batches_once_seen() {
    let log = pure_log(60, 4, 3);
    let index = log.full_index();
    let range = log.whole(1);
    // Fetches free: no gap is read through on purpose.
    let plan = PlanConfig {
        cost: CostModel {
            round_trip: std::time::Duration::ZERO,
            ..CostModel::default()
        },
        ..PlanConfig::default()
    };
    // Many in flight: the first fetch still goes alone, so the others are
    // sized knowing the habit.
    let out = Sim::new(&log, Habits::TANSU_0_6, 0).in_flight(16).run(
        &index,
        &[range],
        ReplayOptions::default()
            .with_plan(plan)
            .with_learn_link(false),
    );
    assert!(out.error.is_none(), "{:?}", out.error);
    assert_eq!(out.regions[&1], log.expected(&range));
    let batches = log.batches();
    let wanted: u64 = batches
        .iter()
        .skip(1)
        .step_by(4)
        .map(|b| u64::from(b.len))
        .sum();
    // The first fetch, sized before the habit was seen, may get one more.
    let largest = batches.iter().map(|b| u64::from(b.len)).max().unwrap();
    assert!(
        out.stats.records_bytes <= wanted + largest,
        "{} bytes for {wanted} wanted",
        out.stats.records_bytes
    );
    assert_eq!(out.stats.fetches, 15, "one fetch a wanted batch");
}

/// A wrong hint (the batch holding 7 claimed to start at 6, inside it) on
/// a broker that skips the batch containing a mid-batch fetch offset
/// (Tansu 0.6): the fetch goes to the hinted start, the broker answers
/// from the next batch, and the replay once took the hinted start for a
/// known batch boundary, read the answer as aligned, and called 7 lost (an
/// error, or silently skipped). A wrong hint costs a fetch, never a record.
#[test]
fn a_wrong_hint_on_a_broker_that_skips_the_containing_batch_loses_nothing() {
    // Batches 0..=4, 5..=9, 10..=14: region 1 at 7 and 12, region 2 elsewhere.
    let spec = |base: i64| BatchSpec {
        regions: (base..base + 5)
            .map(|o| if o == 7 || o == 12 { 1 } else { 2 })
            .collect(),
        ..BatchSpec::default()
    };
    let log = SimLog::build(&[spec(0), spec(5), spec(10)], Compression::None, |_| 40);
    let mut index = WalIndex::new();
    for (offset, batch) in [(7i64, 1usize), (12, 2)] {
        let b = &log.batches()[batch];
        let hint = (offset == 7).then_some(Hint {
            batch_base: 6,
            batch_len: b.len,
            record_end: b.len,
        });
        index.push(1, IndexEntry { offset, hint }).unwrap();
    }
    index.set_last_index(log.end() - 1);
    let range = RegionRange {
        region: 1,
        from: 0,
        to: log.end(),
    };
    let habits = Habits {
        skip_containing_batch: true,
        ..Habits::KAFKA
    };
    for on_lost in [LostPolicy::Skip, LostPolicy::Error] {
        let out = Sim::new(&log, habits, 1).run(
            &index,
            &[range],
            ReplayOptions::default().with_on_lost(on_lost),
        );
        assert!(out.error.is_none(), "{on_lost:?}: {:?}", out.error);
        assert_eq!(out.regions[&1], log.expected(&range), "{on_lost:?}");
    }
}

/// A fetch allowed to wait at the broker goes in a request of its own: a
/// request shared by several partitions' fetches takes its wait from its
/// first fetch, so a waiting fetch in it could go out with none while the
/// core believes it waited, and take an empty answer for a stall (or a
/// skip). Before, once a wait was learned (on a broker that answers
/// hurried fetches with no records), the fetches after it carried it and
/// could still be shared.
#[test]
fn a_fetch_allowed_to_wait_is_not_shared() {
    let log = pure_log(30, 3, 4);
    let ranges: Vec<RegionRange> = (0..3).map(|r| log.whole(r)).collect();
    // Small fetches: many of them, after the wait is learned.
    let plan = PlanConfig {
        max_fetch_bytes: 2000,
        probe_bytes: 1000,
        ..PlanConfig::default()
    };
    for strategy in [StrategyKind::Index, StrategyKind::Estimate] {
        let out = Sim::new(&log, Habits::EMPTY_WHEN_HURRIED, 5)
            .in_flight(2)
            .run(
                &log.full_index(),
                &ranges,
                ReplayOptions::default()
                    .with_strategy(strategy)
                    .with_plan(plan),
            );
        assert!(out.error.is_none(), "{strategy:?}: {:?}", out.error);
        for r in &ranges {
            assert_eq!(out.regions[&r.region], log.expected(r), "{strategy:?}");
        }
        assert!(
            out.fetches.iter().any(|f| !f.max_wait.is_zero()),
            "{strategy:?}: no fetch waited"
        );
        for f in &out.fetches {
            assert!(
                !f.shareable || f.max_wait.is_zero(),
                "{strategy:?}: a shareable fetch allowed to wait: {f:?}"
            );
        }
    }
}
