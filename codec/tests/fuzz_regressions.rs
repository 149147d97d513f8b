//! Inputs the cargo-fuzz targets in `fuzz/` found crashing the codec, kept
//! inline with what was wrong. Each test failed (panicked) before its fix.
#![allow(clippy::unwrap_used)]

use bytes::Bytes;
use walfetch_codec::{BatchBuilder, Batches, DecodeOptions, Error, NewRecord};

/// Found by `encode_decode` (base offset `i64::MAX`, one record at offset
/// delta 12): `Records` computed a record's offset as `base_offset + delta`
/// and overflowed — a panic in debug builds, a wrapped negative offset in
/// release. The CRC does not cover the base offset, so a batch with a valid
/// CRC reaches it through the default options. This is the smallest such
/// batch: uncompressed, base offset `i64::MAX`, one record at delta 1.
#[test]
fn record_offset_overflowing_i64_is_corrupt_not_a_panic() {
    #[rustfmt::skip]
    let batch: &[u8] = &[
        0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // baseOffset: i64::MAX
        0x00, 0x00, 0x00, 0x39,                         // batchLength: 57
        0x00, 0x00, 0x00, 0x00,                         // partitionLeaderEpoch: 0
        0x02,                                           // magic: 2
        0x88, 0xe3, 0x96, 0xf1,                         // crc (valid)
        0x00, 0x00,                                     // attributes: none
        0x00, 0x00, 0x00, 0x01,                         // lastOffsetDelta: 1
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // baseTimestamp: 0
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // maxTimestamp: 0
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // producerId: -1
        0xff, 0xff,                                     // producerEpoch: -1
        0xff, 0xff, 0xff, 0xff,                         // baseSequence: -1
        0x00, 0x00, 0x00, 0x01,                         // recordCount: 1
        // record: length 7, attributes 0, timestampDelta 0, offsetDelta 1,
        // key null, value "x", no headers
        0x0e, 0x00, 0x00, 0x02, 0x01, 0x02, 0x78, 0x00,
    ];
    let mut batches = Batches::new(Bytes::from_static(batch), DecodeOptions::default());
    let batch = batches
        .next()
        .expect("one batch")
        .expect("the header and CRC are valid");
    assert_eq!(batch.last_offset(), i64::MAX, "last offset saturates");
    let mut records = batch.records().expect("uncompressed");
    match records.next() {
        Some(Err(Error::CorruptRecord { index: 0, what, .. })) => {
            assert!(what.contains("overflows"), "{what}")
        }
        other => panic!("expected a corrupt-record error, got {other:?}"),
    }
    assert!(records.next().is_none());
    assert!(batches.next().is_none());

    // The encoder refuses to write such a batch.
    let err = BatchBuilder::new(i64::MAX)
        .encode(&[NewRecord::value(1, "x")])
        .expect_err("offsets past i64::MAX");
    assert!(matches!(err, Error::InvalidInput { .. }), "{err}");
    BatchBuilder::new(i64::MAX)
        .encode(&[NewRecord::value(0, "x")])
        .expect("offset i64::MAX itself is fine");
}
