//! A log that lost entries: retention and truncation below or across the index, a log written again.

use crate::common::*;

/// Retention on partition 0 of [`TOPIC`]: the log start moves to the first
/// batch boundary past `offset`, which it returns.
fn retention_moves_the_log_start_past(broker: &ScriptedCluster, offset: i64) -> i64 {
    let log = broker.log(TOPIC, 0).unwrap();
    let start = log
        .extents()
        .iter()
        .map(|e| e.base_offset)
        .find(|&b| b > offset)
        .unwrap();
    broker.advance_log_start(TOPIC, 0, start).unwrap();
    start
}

/// Retention that removes records past `last_index` a region still had to
/// scan: those records cannot be named (no index lists them), but they are
/// gone, and the recovery must say so rather than end well without them.
/// Found by the fault soak (seed 22, round 195: an entry at 215 in the scan
/// past `last_index`, the log start moved to 219, the recovery ended well
/// without it).
#[tokio::test]
async fn retention_inside_the_scan_past_last_index_is_an_error_not_a_silent_gap() {
    let (broker, cluster, written, full) = setup(300, Compression::None).await;
    let indexes = halfway(&full, &written);
    let last_index = indexes[0].last_index().unwrap();
    // A region of partition 0 with an entry past `last_index`, and a batch
    // boundary past that entry for the new log start.
    let (region, entry) = written[&0]
        .iter()
        .find_map(|(&r, entries)| {
            let e = entries.iter().find(|(o, _)| *o > last_index)?;
            Some((r, e.0))
        })
        .unwrap();
    let start = retention_moves_the_log_start_past(&broker, entry);
    let checkpoints = [((0, region), entry)].into_iter().collect();
    let err = recover_with_defaults(&cluster, TOPIC, &indexes, &checkpoints)
        .await
        .map(|(got, _)| got)
        .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains(&format!("{entry}")) && msg.contains(&format!("{start}")),
        "{msg}"
    );
    assert!(msg.contains("no longer exist"), "{msg}");
    // Skipping lost offsets, the recovery goes on from the log start and
    // lists the range it could not read.
    let (got, stats) = recover(
        &cluster,
        TOPIC,
        &indexes,
        &checkpoints,
        ReplayOptions::default().with_on_lost(walfetch::consumer::LostPolicy::Skip),
    )
    .await
    .unwrap();
    let want: Vec<i64> = written[&0][&region]
        .iter()
        .map(|(o, _)| *o)
        .filter(|&o| o >= start)
        .collect();
    let got: Vec<i64> = got[&0][&region].iter().map(|(o, _)| *o).collect();
    assert_eq!(got, want);
    assert_eq!(stats.lost_ranges, vec![entry..start], "{stats:?}");
}

/// An unclean leader election after the recovery looked up the logs'
/// ends: partition 0's log is truncated below entries the index lists.
/// Each fetch of them is answered OFFSET_OUT_OF_RANGE with a log end below
/// them; the recovery once took that for a replica whose high watermark
/// lags, asked again and again, and after 17 fetches ended stalled, naming
/// no region and not saying the entries were gone, with
/// `LostPolicy::Skip` too. They are lost, as retention's are: an error
/// naming the region, its offsets and the truncation, at once; or, with
/// `Skip`, listed in the stats while every entry still in the log comes,
/// partition 1's untouched.
#[tokio::test]
async fn a_log_truncated_below_indexed_entries_loses_them_by_the_lost_policy() {
    use walfetch::consumer::LostPolicy;
    use walfetch::error::Error;
    for policy in [LostPolicy::Error, LostPolicy::Skip] {
        let (broker, cluster, written, indexes) = setup(300, Compression::None).await;
        let (hot, other) = (region_of(0, 0), region_of(1, 0));
        let mut recovery = Recovery::builder(Arc::clone(&cluster))
            .options(ReplayOptions::default().with_on_lost(policy))
            .index(TOPIC, 0, &indexes[0])
            .index(TOPIC, 1, &indexes[1])
            .region(TOPIC, 0, hot, 0)
            .region(TOPIC, 1, other, 0)
            .build()
            .await
            .unwrap();
        let offsets =
            |p: i32, region| -> Vec<i64> { written[&p][&region].iter().map(|(o, _)| *o).collect() };
        let want = offsets(0, hot);
        broker.truncate(TOPIC, 0, want[want.len() / 2]).unwrap();
        let end = broker.high_watermark(TOPIC, 0).unwrap();
        let (kept, gone): (Vec<i64>, Vec<i64>) = want.iter().partition(|&&o| o < end);
        assert!(!gone.is_empty());
        let started = std::time::Instant::now();
        let mut got: BTreeMap<RegionId, Vec<i64>> = BTreeMap::new();
        let mut error = None;
        while let Some(entry) = recovery.next().await {
            match entry {
                Ok(e) => got.entry(e.region).or_default().push(e.record.offset()),
                Err(e) => {
                    error = Some(e);
                    break;
                }
            }
        }
        // Not a stall: a few fetches, not 17 with waits.
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{policy:?}: {error:?}"
        );
        assert_eq!(
            got.get(&hot).cloned().unwrap_or_default(),
            kept,
            "{policy:?}"
        );
        match policy {
            LostPolicy::Error => {
                let error = error.expect("the truncated entries are an error");
                let message = error.to_string();
                match error {
                    Error::LostOffsets {
                        partition,
                        region,
                        offsets,
                        truncated_to,
                        ..
                    } => {
                        assert_eq!((partition, region), (0, hot));
                        assert_eq!(offsets, gone);
                        assert_eq!(truncated_to, Some(end));
                        assert!(message.contains("truncated"), "{message}");
                    }
                    other => panic!("not LostOffsets: {other}"),
                }
            }
            _ => {
                assert!(error.is_none(), "{error:?}");
                assert_eq!(got[&other], offsets(1, other));
                let stats = recovery.stats();
                assert_eq!(stats.lost, gone);
                assert_eq!(stats.regions[&hot].lost, gone);
            }
        }
    }
}

/// The same after the indexed part of the recovery met the new log start
/// first: the planner then starts the scan at the log start, and the
/// records between `last_index` and it are gone all the same. Found by
/// the long fault soak (seed 20646, round 2534: several regions of one
/// partition, `LostPolicy::Skip`, the scan's lost records neither yielded
/// nor listed).
#[tokio::test]
async fn retention_across_last_index_lists_the_scan_range_it_removed() {
    let (broker, cluster, written, full) = setup(300, Compression::None).await;
    let indexes = halfway(&full, &written);
    let last_index = indexes[0].last_index().unwrap();
    // The first batch that starts past some entry of the scan.
    let first_tail = written[&0]
        .values()
        .flatten()
        .map(|(o, _)| *o)
        .filter(|&o| o > last_index)
        .min()
        .unwrap();
    let start = retention_moves_the_log_start_past(&broker, first_tail);
    // Every region of partition 0 from its first entry: indexed entries
    // below the new start are lost, and so is the scan up to it.
    let checkpoints = written[&0]
        .iter()
        .map(|(&r, entries)| ((0, r), entries[0].0))
        .collect();
    // One fetch at a time: the scan is planned after the indexed part
    // learned where the log starts.
    let options = ReplayOptions::default()
        .with_max_in_flight(1)
        .with_on_lost(walfetch::consumer::LostPolicy::Skip);
    let (got, stats) = recover(&cluster, TOPIC, &indexes, &checkpoints, options)
        .await
        .unwrap();
    for (region, entries) in &written[&0] {
        let want: Vec<i64> = entries
            .iter()
            .map(|(o, _)| *o)
            .filter(|&o| o >= start)
            .collect();
        let got: Vec<i64> = got[&0][region].iter().map(|(o, _)| *o).collect();
        assert_eq!(got, want, "region {region}");
        for (o, _) in entries.iter().filter(|(o, _)| *o < start) {
            let listed = if *o <= last_index {
                stats.lost.contains(o)
            } else {
                stats.lost_ranges.iter().any(|r| r.contains(o))
            };
            assert!(listed, "region {region} offset {o}: {stats:?}");
        }
    }
    assert!(
        stats.lost_ranges.iter().all(|r| r.end <= start),
        "{stats:?}"
    );
    // Without skipping, the loss is an error.
    let err = recover_with_defaults(&cluster, TOPIC, &indexes, &checkpoints)
        .await
        .map(|(got, _)| got)
        .unwrap_err();
    assert!(err.to_string().contains("no longer exist"), "{err}");
}

/// An unclean leader election before the recovery starts, and writes
/// since: partition 0's log was truncated in the middle of the indexed
/// entries and written again past `last_index` with other regions'
/// entries (`rewrite` picks each new entry's region), at the offsets the
/// index gives to the hot region. What the index lists at those offsets is
/// not there: the recovery yields the hot region's entries below the
/// truncation, exactly, then ends with an error naming the first offset
/// that is not the hot region's (`IndexMismatch`), whatever the lost
/// policy; never another region's record as the hot region's, never a
/// silent gap.
#[tokio::test]
async fn a_log_truncated_and_written_again_before_the_recovery_is_a_mismatch() {
    use walfetch::consumer::LostPolicy;
    use walfetch::error::{Error, Mismatch};
    for policy in [LostPolicy::Error, LostPolicy::Skip] {
        for compression in [Compression::None, Compression::Lz4] {
            let (broker, cluster, written, indexes) = setup(300, compression).await;
            let hot = region_of(0, 0);
            let want: Vec<i64> = written[&0][&hot].iter().map(|(o, _)| *o).collect();
            broker.truncate(TOPIC, 0, want[want.len() / 2]).unwrap();
            let end = broker.high_watermark(TOPIC, 0).unwrap();
            let last_index = indexes[0].last_index().unwrap();
            let mut config = WriterConfig::new(TOPIC, 0);
            config.compression = compression;
            config.mode = WriterMode::Interleaved;
            let others = (0..usize::try_from(last_index - end + 50).unwrap()).map(|n| {
                let region = region_of(0, 1 + (n as u64 % 3));
                (
                    region,
                    Bytes::from(format!("rewritten {n} {}", "y".repeat(n % 300))),
                )
            });
            let mut rewritten = Written::new();
            write_partition(&cluster, config, others, &mut rewritten).await;
            assert!(broker.high_watermark(TOPIC, 0).unwrap() > last_index);
            let mut recovery = Recovery::builder(Arc::clone(&cluster))
                .options(ReplayOptions::default().with_on_lost(policy))
                .index(TOPIC, 0, &indexes[0])
                .region(TOPIC, 0, hot, 0)
                .build()
                .await
                .unwrap();
            let (got, error) = entries_until_its_error(&mut recovery).await;
            let case = format!("{policy:?} {compression:?}");
            let kept: Vec<(i64, Bytes)> = written[&0][&hot]
                .iter()
                .filter(|(o, _)| *o < end)
                .cloned()
                .collect();
            assert_eq!(got, kept, "{case}");
            let first_gone = want.iter().copied().find(|&o| o >= end).unwrap();
            match error {
                Some(Error::IndexMismatch {
                    mismatch: Mismatch::Entry { offset, region, .. },
                    ..
                }) => assert_eq!((offset, region), (first_gone, hot), "{case}"),
                other => panic!("{case}: not a mismatch at {first_gone}: {other:?}"),
            }
        }
    }
}
