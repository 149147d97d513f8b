//! Retention past a checkpoint: an error, or the list of offsets lost.

use crate::common::*;

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
