//! Broker habits: skipped containing batches, hurried fetches answered with nothing, segment ends, wrong hints.

use crate::common::*;

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
    let ranges = ranges_from(&log, &[0, 1, 2], 7, 5);
    let halfway = index_to_halfway(&log);
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
    let ranges = ranges_from(&log, &[1, 4], 33, 7);
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
    let ranges = ranges_from(&log, &[0, 2, 3], 20, 13);
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
