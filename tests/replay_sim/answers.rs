//! Answers: out of order with many in flight, the same records from every strategy, entries beyond a fetch, overshoots, waits.

use crate::common::*;

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
    let ranges = ranges_from(&log, &[0, 2, 3], 20, 13);
    let halfway = index_to_halfway(&log);
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
