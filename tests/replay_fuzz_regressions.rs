//! Answers fed to the replay core directly, each of which once crashed it
//! or broke what must hold for any answer: what the `replay_core` fuzz
//! target (`fuzz/`) found or was seeded with, and what a review found (a
//! corrupt base offset; a replica whose high watermark lags).
#![allow(clippy::unwrap_used)]

use std::time::Instant;

use bytes::{Bytes, BytesMut};
use walfetch::cluster::FetchedPartition;
use walfetch::codec::{BatchBuilder, NewRecord};
use walfetch::error_code::ErrorCode;
use walfetch::index::{IndexEntry, RegionId, WalIndex};
use walfetch::replay::{
    FetchAnswer, LostPolicy, RegionRange, ReplayCore, ReplayOptions, Room, LAGGING_WAIT,
};

const REGION: RegionId = 1;

/// Two batches of `REGION`'s records, offsets 0..=4 and 5..=9.
fn log() -> Vec<Bytes> {
    [0i64, 5]
        .iter()
        .map(|&base| {
            let records: Vec<NewRecord> = (0..5)
                .map(|i| NewRecord {
                    offset_delta: i,
                    key: Some(Bytes::copy_from_slice(&REGION.to_be_bytes())),
                    value: Some(Bytes::from(format!("record {}", base + i64::from(i)))),
                    ..NewRecord::default()
                })
                .collect();
            BatchBuilder::new(base).encode(&records).unwrap().bytes
        })
        .collect()
}

/// The first 61 bytes of a batch header at `base` claiming 1000 bytes and
/// a last offset delta of `delta`, then a few bytes of records: a batch cut
/// short, whose header no CRC covers.
fn cut_batch(base: i64, delta: i32) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&base.to_be_bytes());
    out.extend_from_slice(&1000i32.to_be_bytes()); // batch length
    out.extend_from_slice(&(-1i32).to_be_bytes()); // leader epoch
    out.push(2); // magic
    out.extend_from_slice(&0u32.to_be_bytes()); // CRC
    out.extend_from_slice(&0i16.to_be_bytes()); // attributes
    out.extend_from_slice(&delta.to_be_bytes());
    out.extend_from_slice(&[0; 8 + 8]); // timestamps
    out.extend_from_slice(&(-1i64).to_be_bytes()); // producer id
    out.extend_from_slice(&(-1i16).to_be_bytes()); // producer epoch
    out.extend_from_slice(&(-1i32).to_be_bytes()); // base sequence
    out.extend_from_slice(&5i32.to_be_bytes()); // record count
    out.extend_from_slice(&[0x10, 0x00, 0x02]);
    out
}

/// An answer carrying `records`, from a replica whose high watermark is
/// `high_watermark` (10: the log's end).
fn fetched(records: Bytes, high_watermark: i64) -> FetchedPartition {
    FetchedPartition {
        wire_bytes: records.len(),
        records,
        high_watermark,
        last_stable_offset: high_watermark,
        log_start_offset: 0,
        aborted_transactions: Vec::new(),
        error_code: ErrorCode::None,
        broker: "test:9092".to_owned(),
        version: 12,
        throttle_time_ms: 0,
        preferred_read_replica: -1,
    }
}

/// A response ending in a cut batch whose header claims a negative last
/// offset delta: its extent, the last offset below the base, once reached
/// `Layout::observe` and panicked (`BTreeMap::range` with start > end).
/// It teaches nothing now, and the replay goes on to every record.
#[test]
fn a_cut_batch_with_a_negative_last_offset_delta() {
    let log = log();
    let now = Instant::now();
    for indexed in [true, false] {
        // Before the cut batch: the first batch, or nothing.
        for whole_before in [1usize, 0] {
            for delta in [-1, -5, i32::MIN] {
                let mut index = WalIndex::new();
                if indexed {
                    for o in 0..10 {
                        index.push(REGION, IndexEntry::offset_only(o)).unwrap();
                    }
                    index.set_last_index(9);
                }
                let range = RegionRange {
                    region: REGION,
                    from: 0,
                    to: 10,
                };
                let mut core = ReplayCore::new(
                    "t",
                    0,
                    &index,
                    &[range],
                    ReplayOptions::default().with_max_in_flight(1),
                    now,
                )
                .unwrap();
                let first = core.poll_fetch(Room::UNLIMITED, 0).unwrap();
                let mut records = BytesMut::new();
                for batch in &log[..whole_before] {
                    records.extend_from_slice(batch);
                }
                let base = 5 * whole_before as i64;
                records.extend_from_slice(&cut_batch(base, delta));
                core.handle_response(
                    first.id,
                    FetchAnswer::Fetched(fetched(records.freeze(), 10)),
                );
                let _ = core.stats();
                // The rest from the log as it is.
                let mut got = Vec::new();
                for round in 0..50 {
                    while let Some(entry) = core.poll_entry(now) {
                        got.push(entry.unwrap().record.offset());
                    }
                    let Some(fetch) = core.poll_fetch(Room::UNLIMITED, round) else {
                        break;
                    };
                    let mut records = BytesMut::new();
                    for batch in &log[(fetch.offset.clamp(0, 9) / 5) as usize..] {
                        records.extend_from_slice(batch);
                    }
                    core.handle_response(
                        fetch.id,
                        FetchAnswer::Fetched(fetched(records.freeze(), 10)),
                    );
                }
                while let Some(entry) = core.poll_entry(now) {
                    got.push(entry.unwrap().record.offset());
                }
                assert!(core.is_finished(), "indexed {indexed}, delta {delta}");
                assert_eq!(
                    got,
                    (0..10).collect::<Vec<i64>>(),
                    "indexed {indexed}, delta {delta}"
                );
            }
        }
    }
}

/// The log as Kafka serves it from `offset`: every batch from the one
/// holding it.
fn from(log: &[Bytes], offset: i64) -> Bytes {
    let mut records = BytesMut::new();
    for batch in &log[(offset.clamp(0, 9) / 5) as usize..] {
        records.extend_from_slice(batch);
    }
    records.freeze()
}

/// An index of `REGION`'s offsets `0..=last_index`, complete to it.
fn index_to(last_index: i64) -> WalIndex {
    let mut index = WalIndex::new();
    for o in 0..=last_index {
        index.push(REGION, IndexEntry::offset_only(o)).unwrap();
    }
    index.set_last_index(last_index);
    index
}

/// A replay of `REGION` from `from` to the log's end (10), one fetch at a
/// time, told the log's end as `Recovery` tells it.
fn replay_from(index: &WalIndex, from: i64, on_lost: LostPolicy) -> ReplayCore {
    let range = RegionRange {
        region: REGION,
        from,
        to: 10,
    };
    let options = ReplayOptions::default()
        .with_max_in_flight(1)
        .with_on_lost(on_lost);
    let mut core = ReplayCore::new("t", 0, index, &[range], options, Instant::now()).unwrap();
    core.note_log_end(10);
    core
}

/// Runs `core` to its end: the first fetch at or above `lagging` is
/// answered by a replica whose high watermark is `lagging` (no records),
/// every other one as the log is. Returns the offsets yielded, the error
/// that ended the replay, and the waits the fetches asked for.
fn run_with_a_lagging_answer(
    mut core: ReplayCore,
    lagging: i64,
) -> (Vec<i64>, Option<String>, Vec<std::time::Duration>) {
    let now = Instant::now();
    let log = log();
    let mut lagged = false;
    let (mut got, mut waits) = (Vec::new(), Vec::new());
    for round in 0..100 {
        while let Some(entry) = core.poll_entry(now) {
            match entry {
                Ok(e) => got.push(e.record.offset()),
                Err(e) => return (got, Some(e.to_string()), waits),
            }
        }
        if core.is_finished() {
            break;
        }
        let Some(fetch) = core.poll_fetch(Room::UNLIMITED, round) else {
            break;
        };
        waits.push(fetch.max_wait);
        let answer = if !lagged && fetch.offset >= lagging {
            lagged = true;
            fetched(Bytes::new(), lagging)
        } else {
            fetched(from(&log, fetch.offset), 10)
        };
        core.handle_response(fetch.id, FetchAnswer::Fetched(answer));
    }
    (got, None, waits)
}

/// A replica whose high watermark lags (a follower under KIP-392, a leader
/// just elected) answers a fetch past it, within its log, with no records
/// (Kafka's `LocalLog.read`), not `OFFSET_OUT_OF_RANGE`. Such an answer
/// for indexed entries (the index complete to 9) once marked them lost;
/// now the next fetch waits at the broker for the high watermark.
#[test]
fn an_empty_answer_from_a_lagging_replica_loses_no_indexed_entry() {
    for on_lost in [LostPolicy::Error, LostPolicy::Skip] {
        let core = replay_from(&index_to(9), 5, on_lost);
        let (got, error, waits) = run_with_a_lagging_answer(core, 5);
        assert_eq!(error, None, "{on_lost:?}");
        assert_eq!(got, (5..10).collect::<Vec<_>>(), "{on_lost:?}");
        assert_eq!(
            waits,
            [std::time::Duration::ZERO, LAGGING_WAIT],
            "{on_lost:?}"
        );
    }
}

/// The same past `last_index` (4): the empty answer once ended the scan
/// there, without 5..10 and without an error.
#[test]
fn an_empty_answer_from_a_lagging_replica_does_not_end_the_scan() {
    let core = replay_from(&index_to(4), 0, LostPolicy::Error);
    let (got, error, _) = run_with_a_lagging_answer(core, 5);
    assert_eq!(error, None);
    assert_eq!(got, (0..10).collect::<Vec<_>>());
}

/// A replica that keeps lagging ends the replay stalled, with an error,
/// after `max_attempts` answers in a row, each fetch waiting at the broker.
#[test]
fn a_replica_that_keeps_lagging_ends_the_replay_with_an_error() {
    let mut core = replay_from(&index_to(9), 5, LostPolicy::Skip);
    let now = Instant::now();
    let mut waits = 0;
    for round in 0..100 {
        if let Some(entry) = core.poll_entry(now) {
            let error = entry.unwrap_err().to_string();
            assert!(
                error.contains("stalled") || error.contains("no progress"),
                "{error}"
            );
            assert!(waits >= 16, "{waits}");
            return;
        }
        let Some(fetch) = core.poll_fetch(Room::UNLIMITED, round) else {
            continue;
        };
        waits += usize::from(fetch.max_wait == LAGGING_WAIT);
        core.handle_response(fetch.id, FetchAnswer::Fetched(fetched(Bytes::new(), 5)));
    }
    panic!("the replay did not end");
}

/// A complete batch whose base offset (not covered by the CRC) reads
/// hugely negative, answering a fetch at 5: working out how many of its
/// offsets are at or above the fetch's overflowed (a panic with overflow
/// checks, as in tests and the fuzz targets' builds).
#[test]
fn a_batch_with_a_hugely_negative_base_offset() {
    let now = Instant::now();
    let log = log();
    let mut core = replay_from(&index_to(9), 0, LostPolicy::Error);
    let first = core.poll_fetch(Room::UNLIMITED, 0).unwrap();
    core.handle_response(first.id, FetchAnswer::Fetched(fetched(log[0].clone(), 10)));
    while let Some(e) = core.poll_entry(now) {
        e.unwrap();
    }
    let next = core.poll_fetch(Room::UNLIMITED, 1).unwrap();
    assert_eq!(next.offset, 5);
    let mut corrupt = BytesMut::from(&log[1][..]);
    corrupt[..8].copy_from_slice(&i64::MIN.to_be_bytes());
    core.handle_response(next.id, FetchAnswer::Fetched(fetched(corrupt.freeze(), 10)));
    // An error or another fetch, not a panic.
    let _ = core.poll_entry(now);
}
