//! Scans: from offsets that do not exist, over only the regions' ranges, a long walk toward an unknown batch.

use crate::common::*;

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
