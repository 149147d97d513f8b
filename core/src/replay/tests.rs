//! The replay core's unit tests: single answers taken, decoded elsewhere,
//! held against the memory cap, and a reading of another answer refused.

use std::time::Instant;

use bytes::Bytes;
use walfetch_codec::{BatchBuilder, NewRecord, Record};

use super::*;
use crate::error_code::ErrorCode;
use crate::fetch::FetchedPartition;
use crate::index::{IndexEntry, RegionId, WalIndex};

const REGION: RegionId = 7;

/// A batch of `REGION`'s records at `base..base + 5`.
fn batch(base: i64) -> Bytes {
    let records: Vec<NewRecord> = (0..5)
        .map(|i| NewRecord {
            key: Some(Bytes::copy_from_slice(&REGION.to_be_bytes())),
            ..NewRecord::value(i, format!("record {}", base + i64::from(i)))
        })
        .collect();
    BatchBuilder::new(base)
        .encode(&records)
        .expect("encode")
        .bytes
}

fn answer(records: Bytes) -> FetchAnswer {
    FetchAnswer::Fetched(FetchedPartition {
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
    })
}

/// A core replaying `REGION`'s offsets 0..10, and its first fetch.
fn core() -> (ReplayCore, OutgoingFetch) {
    core_of(&(0..10).collect::<Vec<_>>())
}

/// A core replaying `REGION`'s `offsets` (offsets only, the index
/// complete to the last), and its first fetch.
fn core_of(offsets: &[i64]) -> (ReplayCore, OutgoingFetch) {
    core_with(offsets, ReplayOptions::default())
}

/// [`core_of`] with `options`.
fn core_with(offsets: &[i64], options: ReplayOptions) -> (ReplayCore, OutgoingFetch) {
    let mut index = WalIndex::new();
    for &offset in offsets {
        index
            .push(REGION, IndexEntry::offset_only(offset))
            .expect("push");
    }
    let last = offsets.last().copied().unwrap_or(0);
    index.set_last_index(last);
    let range = RegionRange {
        region: REGION,
        from: 0,
        to: last + 1,
    };
    let mut core =
        ReplayCore::new("t", 0, &index, &[range], options, Instant::now()).expect("core");
    let fetch = core.poll_fetch(Room::UNLIMITED, 0).expect("a first fetch");
    (core, fetch)
}

fn yielded(core: &mut ReplayCore) -> Vec<i64> {
    std::iter::from_fn(|| core.poll_entry(Instant::now()))
        .map(|e| e.expect("an entry").record.offset())
        .collect()
}

#[test]
fn a_decoded_answer_is_taken_as_the_core_would_take_it() {
    let both: Bytes = [batch(0), batch(5)].concat().into();
    let (mut direct, fetch) = core();
    direct.handle_response(fetch.id, answer(both.clone()));
    let (mut apart, fetch) = core();
    let reply = answer(both);
    let decoded = apart.decoder(fetch.id).and_then(|d| d.decode(&reply));
    assert!(decoded.is_some());
    apart.handle_decoded(fetch.id, reply, decoded);
    assert_eq!(yielded(&mut apart), (0..10).collect::<Vec<_>>());
    assert_eq!(yielded(&mut direct), (0..10).collect::<Vec<_>>());
}

/// The first batch (offsets 0..5) shows the layout that each of
/// entries 0..4 has its next entry in its batch, and entry 4 not
/// (entry 5 starts the next batch), whether or not the answer carried
/// that batch.
#[test]
fn an_answer_teaches_which_wanted_entries_share_a_batch() {
    let (mut core, fetch) = core();
    core.handle_response(fetch.id, answer(batch(0)));
    // Four pairs one offset apart in one batch, one not: 4 of 5 seen,
    // after a prior worth two pairs (here 0).
    let n = core.layout.neighbours();
    assert!((n.together(1, true, 0.0) - 4.0 / 7.0).abs() < 1e-9, "{n:?}");
}

/// A fetch asking for one byte gets its first batch whole (KIP-74):
/// the bytes counted in flight for it are those of a batch as seen.
#[test]
fn a_fetch_of_one_byte_counts_a_batch_in_flight() {
    // Not a run to the log's end, which would be claimed whole.
    let (mut core, fetch) = core_of(&[0, 500, 5_000_000]);
    core.handle_response(fetch.id, answer(batch(0)));
    let next = core
        .poll_fetch(Room::UNLIMITED, 1)
        .expect("a fetch for 500");
    assert_eq!((next.offset, next.max_bytes), (500, 1));
    assert_eq!(
        core.in_flight_bytes(),
        batch(0).len() as u64,
        "one batch as large as the one seen"
    );
}

/// A fetch asks for no more memory than is left under the cap, nor
/// more than its share of it, and waits for room where little is left;
/// with too little, only a partition that can yield nothing and has
/// nothing in flight sends one, of one byte. The in-flight limit only
/// paces.
#[test]
fn a_fetch_asks_for_no_more_than_the_memory_left() {
    // Offsets 0..5 answered, 5..10 (the log's end) still wanted, under
    // a cap of 1600 bytes: fetches are cut to no less than 100.
    let answered = || {
        let options = ReplayOptions::default().with_max_buffered_bytes(1600);
        let (mut core, fetch) = core_with(&(0..10).collect::<Vec<_>>(), options);
        core.handle_response(fetch.id, answer(batch(0)));
        core
    };
    let planned = answered()
        .poll_fetch(Room::UNLIMITED, 1)
        .expect("a fetch for 5..10")
        .max_bytes;
    assert!(planned > 100, "{planned}");
    let mut core = answered();
    let fetch = core.poll_fetch(Room::of_memory(100), 1).expect("a fetch");
    assert_eq!((fetch.offset, fetch.max_bytes), (5, 100));
    // Less left, or none: entries 0..5 wait to be yielded, no fetch.
    let mut core = answered();
    assert_eq!(core.poll_fetch(Room::of_memory(99), 1), None);
    assert_eq!(core.poll_fetch(Room::of_memory(0), 1), None);
    // Once they are yielded the partition can yield nothing more: one
    // fetch of one byte (its first batch whole) keeps it going.
    assert_eq!(yielded(&mut core), (0..5).collect::<Vec<_>>());
    let fetch = core
        .poll_fetch(Room::of_memory(0), 1)
        .expect("a fetch to go on");
    assert_eq!((fetch.offset, fetch.max_bytes), (5, 1));
    // The in-flight limit reached: that fetch goes as planned.
    let mut core = answered();
    yielded(&mut core);
    let paced = Room {
        in_flight: 0,
        ..Room::UNLIMITED
    };
    let fetch = core.poll_fetch(paced, 1).expect("a fetch to go on");
    assert_eq!((fetch.offset, fetch.max_bytes), (5, planned));
    // The cap split over partitions: a fetch asks for its share.
    let shared = Room {
        share: 120,
        ..Room::UNLIMITED
    };
    let fetch = answered().poll_fetch(shared, 1).expect("a fetch");
    assert_eq!((fetch.offset, fetch.max_bytes), (5, 120));
}

/// What a record of a compressed batch holds: a slice of the batch's
/// decompressed records, it keeps them all alive. A few records of a
/// batch are copied out and held for their own bytes; most of one
/// keep the batch, held for all of it (once charged only for their
/// own bytes, however much more they kept).
#[test]
fn records_of_a_compressed_batch_are_held_for_what_they_keep_alive() {
    let records: Vec<NewRecord> = (0..100)
        .map(|i| NewRecord {
            key: Some(Bytes::copy_from_slice(&REGION.to_be_bytes())),
            ..NewRecord::value(i, vec![b'x'; 1000])
        })
        .collect();
    let encoded = BatchBuilder::new(0)
        .compression(walfetch_codec::Compression::Lz4)
        .encode(&records)
        .expect("encode");
    let whole: u64 = walfetch_codec::Batches::new(encoded.bytes.clone(), Default::default())
        .flat_map(|b| b.expect("batch").records().expect("records"))
        .map(|r| r.expect("record").wire_len() as u64)
        .sum();
    let answer = FetchAnswer::Fetched(FetchedPartition {
        high_watermark: 100,
        last_stable_offset: 100,
        ..match answer(encoded.bytes.clone()) {
            FetchAnswer::Fetched(f) => f,
            FetchAnswer::OutOfRange { .. } => unreachable!(),
        }
    });
    let held = |wanted: &[i64]| {
        let (mut core, fetch) = core_of(wanted);
        core.handle_response(fetch.id, answer.clone());
        let held = core.held_bytes();
        let own: u64 = std::iter::from_fn(|| core.poll_entry(Instant::now()))
            .map(|e| e.expect("an entry").record.wire_len() as u64)
            .sum();
        (held, own, core.held_bytes())
    };
    // Two records of a hundred: copied out, held for their own bytes.
    let (few, own, after) = held(&[10, 90]);
    assert_eq!((few, after), (own, 0));
    // Sixty: they keep the batch, held for all of it (their shares
    // add up to it), and nothing once yielded.
    let most: Vec<i64> = (0..60).collect();
    let (held_most, own, after) = held(&most);
    assert!(own < whole, "{own} {whole}");
    assert!(
        (whole..whole + 60).contains(&held_most),
        "{held_most} {whole}"
    );
    assert_eq!(after, 0);
}

/// A record of an uncompressed batch is a slice of the answer's
/// records, and keeps all of them alive (the response buffer): a few
/// wanted records of a large answer were charged their own bytes only,
/// while they held the answer. They are copied out, held for their own
/// bytes, and the answer is freed; most of an answer keep it, held for
/// all of it (as records of a compressed batch are).
#[test]
fn records_of_an_uncompressed_answer_are_held_for_what_they_keep_alive() {
    let records: Vec<NewRecord> = (0..100)
        .map(|i| NewRecord {
            key: Some(Bytes::copy_from_slice(&REGION.to_be_bytes())),
            ..NewRecord::value(i, vec![b'x'; 1000])
        })
        .collect();
    let encoded = BatchBuilder::new(0).encode(&records).expect("encode");
    let buffer = encoded.bytes.clone();
    let inside = |record: &Record| {
        let at = record.value().map_or(0, |v| v.as_ptr() as usize);
        (buffer.as_ptr() as usize..buffer.as_ptr() as usize + buffer.len()).contains(&at)
    };
    let answer = FetchAnswer::Fetched(FetchedPartition {
        high_watermark: 100,
        last_stable_offset: 100,
        ..match answer(encoded.bytes.clone()) {
            FetchAnswer::Fetched(f) => f,
            FetchAnswer::OutOfRange { .. } => unreachable!(),
        }
    });
    let held = |wanted: &[i64]| {
        let (mut core, fetch) = core_of(wanted);
        core.handle_response(fetch.id, answer.clone());
        let held = core.held_bytes();
        let yielded: Vec<Record> = std::iter::from_fn(|| core.poll_entry(Instant::now()))
            .map(|e| e.expect("an entry").record)
            .collect();
        let own: u64 = yielded.iter().map(|r| r.wire_len() as u64).sum();
        let keep = yielded.iter().any(inside);
        (held, own, keep, core.held_bytes())
    };
    let whole = buffer.len() as u64;
    // Two records of a hundred: copied out, held for their own bytes.
    let (few, own, keep, after) = held(&[10, 90]);
    assert!(!keep, "two records keep an answer of {whole} bytes alive");
    assert_eq!((few, after), (own, 0));
    // Sixty: they keep the answer, held for all of it.
    let most: Vec<i64> = (0..60).collect();
    let (held_most, own, keep, after) = held(&most);
    assert!(keep && own < whole, "{own} {whole}");
    assert!(
        (whole..whole + 60).contains(&held_most),
        "{held_most} {whole}"
    );
    assert_eq!(after, 0);
}

/// The same for the scan past `last_index`: two records of the region
/// among a hundred of others in an uncompressed answer are copied out
/// of it and held for their own bytes.
#[test]
fn records_of_the_scan_in_an_uncompressed_answer_are_copied_out() {
    let records: Vec<NewRecord> = (0..100)
        .map(|i| {
            let region = if i == 10 || i == 90 { REGION } else { 8 };
            NewRecord {
                key: Some(Bytes::copy_from_slice(&region.to_be_bytes())),
                ..NewRecord::value(i, vec![b'x'; 1000])
            }
        })
        .collect();
    let encoded = BatchBuilder::new(0).encode(&records).expect("encode");
    let buffer = encoded.bytes.clone();
    let range = RegionRange {
        region: REGION,
        from: 0,
        to: 100,
    };
    let mut core: ReplayCore = ReplayCore::new(
        "t",
        0,
        &WalIndex::new(),
        &[range],
        ReplayOptions::default(),
        Instant::now(),
    )
    .expect("core");
    let fetch = core.poll_fetch(Room::UNLIMITED, 0).expect("a fetch");
    core.handle_response(
        fetch.id,
        FetchAnswer::Fetched(FetchedPartition {
            high_watermark: 100,
            last_stable_offset: 100,
            ..match answer(encoded.bytes.clone()) {
                FetchAnswer::Fetched(f) => f,
                FetchAnswer::OutOfRange { .. } => unreachable!(),
            }
        }),
    );
    let held = core.held_bytes();
    let yielded: Vec<Record> = std::iter::from_fn(|| core.poll_entry(Instant::now()))
        .map(|e| e.expect("an entry").record)
        .collect();
    assert_eq!(
        yielded.iter().map(Record::offset).collect::<Vec<_>>(),
        [10, 90]
    );
    let own: u64 = yielded.iter().map(|r| r.wire_len() as u64).sum();
    assert_eq!(held, own);
    let start = buffer.as_ptr() as usize;
    assert!(yielded.iter().all(|r| {
        let at = r.value().map_or(0, |v| v.as_ptr() as usize);
        !(start..start + buffer.len()).contains(&at)
    }));
}

#[test]
fn a_reading_of_another_answer_is_not_used() {
    let (mut core, fetch) = core();
    let decoder = core.decoder(fetch.id).expect("in flight");
    // Read from an answer holding the first batch only...
    let first_only = decoder.decode(&answer(batch(0)));
    // ...handed over with one holding both: the core reads that one.
    // (Taken, the reading would give offsets 0..5 only.)
    core.handle_decoded(
        fetch.id,
        answer([batch(0), batch(5)].concat().into()),
        first_only,
    );
    assert_eq!(yielded(&mut core), (0..10).collect::<Vec<_>>());
}

#[test]
fn before_the_first_answer_one_burst_goes_out_or_with_no_learning_one_fetch() {
    // Runs far apart: a fetch each.
    let offsets: Vec<i64> = (0..40).map(|i| i * 10_000).collect();
    let (mut core, _first) = core_of(&offsets);
    let mut sent = 1;
    while core.poll_fetch(Room::UNLIMITED, 0).is_some() {
        sent += 1;
    }
    // Waiting for the first answer would cost every replay a round trip;
    // the burst is what the link's learning allows in flight anyway.
    assert_eq!(sent, LEARNING_IN_FLIGHT);

    let (mut core, _first) = core_with(&offsets, ReplayOptions::default().with_learn_link(false));
    assert!(
        core.poll_fetch(Room::UNLIMITED, 0).is_none(),
        "with no burst to learn from, the first fetch goes alone"
    );
}
