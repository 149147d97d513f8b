//! What the `replay_core` fuzz target (`fuzz/`) found, or was seeded with,
//! fed to the replay core directly: each once crashed it or broke what
//! must hold for any answer.
#![allow(clippy::unwrap_used)]

use std::time::Instant;

use bytes::{Bytes, BytesMut};
use walfetch::cluster::FetchedPartition;
use walfetch::codec::{BatchBuilder, NewRecord};
use walfetch::error_code::ErrorCode;
use walfetch::index::{IndexEntry, RegionId, WalIndex};
use walfetch::replay::{FetchAnswer, RegionRange, ReplayCore, ReplayOptions, Room};

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

fn fetched(records: Bytes) -> FetchedPartition {
    FetchedPartition {
        wire_bytes: records.len(),
        records,
        high_watermark: 10,
        last_stable_offset: 10,
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
                core.handle_response(first.id, FetchAnswer::Fetched(fetched(records.freeze())));
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
                    core.handle_response(fetch.id, FetchAnswer::Fetched(fetched(records.freeze())));
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
