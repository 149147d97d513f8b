//! Bad input gets a clear error naming the batch and byte position, never a
//! panic; flags and transactions behave as Kafka's consumer does.
#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use bytes::Bytes;
use walfetch_codec::{
    AbortedTransaction, BatchBuilder, Batches, Compression, ControlType, DecodeOptions, Error,
    NewRecord, RecordBatch, RecordsBuffer, TimestampType, TransactionFilter,
};

fn values(n: i32, size: usize) -> Vec<NewRecord> {
    (0..n)
        .map(|i| NewRecord::value(i, vec![b'a' + (i % 26) as u8; size]))
        .collect()
}

fn decode_all(buf: Bytes, opts: DecodeOptions) -> Result<Vec<RecordBatch>, Error> {
    Batches::new(buf, opts).collect()
}

fn only_batch(buf: Bytes) -> RecordBatch {
    let mut batches = decode_all(buf, DecodeOptions::default()).expect("valid");
    assert_eq!(batches.len(), 1);
    batches.remove(0)
}

/// Decoding that does not check CRCs: damage reaches the decoder.
fn no_crc() -> DecodeOptions {
    DecodeOptions {
        verify_crc: false,
        ..DecodeOptions::default()
    }
}

/// `batch` with the bytes `from_end.start..from_end.end` before its end
/// garbled (its CRC left as it was).
fn damaged(batch: &[u8], from_end: std::ops::Range<usize>) -> Vec<u8> {
    let mut buf = batch.to_vec();
    let n = buf.len();
    for b in &mut buf[n - from_end.end..n - from_end.start] {
        *b ^= 0x5a;
    }
    buf
}

/// Rewrites the CRC after the test changed bytes it covers.
fn fix_crc(buf: &mut [u8]) {
    let crc = crc32c::crc32c(&buf[21..]);
    buf[17..21].copy_from_slice(&crc.to_be_bytes());
}

#[test]
fn crc_mismatch_names_offset_and_position_and_can_be_turned_off() {
    let first = BatchBuilder::new(10).encode(&values(3, 10)).unwrap();
    let second = BatchBuilder::new(13).encode(&values(3, 10)).unwrap();
    let mut buf = [first.bytes.to_vec(), second.bytes.to_vec()].concat();
    let last = buf.len() - 1;
    buf[last] ^= 0xff;
    let buf = Bytes::from(buf);

    let mut it = Batches::new(buf.clone(), DecodeOptions::default());
    assert_eq!(
        it.next().unwrap().unwrap().base_offset(),
        10,
        "the good batch before the bad one is yielded"
    );
    let err = it.next().unwrap().unwrap_err();
    assert!(
        matches!(err, Error::CrcMismatch { base_offset: 13, position, .. } if position == first.bytes.len())
    );
    assert!(err.to_string().contains("offset 13"), "{err}");
    assert!(it.next().is_none(), "iteration ends after an error");

    assert_eq!(decode_all(buf, no_crc()).unwrap().len(), 2);
}

#[test]
fn legacy_magic_is_unsupported_with_offset() {
    let mut buf = BatchBuilder::new(77)
        .encode(&values(1, 4))
        .unwrap()
        .bytes
        .to_vec();
    for magic in [0u8, 1] {
        buf[16] = magic;
        let err = decode_all(Bytes::from(buf.clone()), DecodeOptions::default()).unwrap_err();
        assert!(
            matches!(err, Error::UnsupportedMagic { base_offset: 77, magic: m, .. } if m as u8 == magic)
        );
        assert!(err.to_string().contains("offset 77"));
        // Even a short prefix that reaches the magic byte is refused, not reported partial.
        let err =
            decode_all(Bytes::from(buf[..20].to_vec()), DecodeOptions::default()).unwrap_err();
        assert!(matches!(err, Error::UnsupportedMagic { .. }));
    }
}

#[test]
fn impossible_lengths_and_counts_are_corrupt() {
    let good = BatchBuilder::new(0)
        .encode(&values(3, 10))
        .unwrap()
        .bytes
        .to_vec();

    let mut short = good.clone();
    short[8..12].copy_from_slice(&10i32.to_be_bytes());
    let err = decode_all(Bytes::from(short), DecodeOptions::default()).unwrap_err();
    assert!(matches!(err, Error::CorruptBatch { .. }), "{err}");

    // A record count above the records present.
    let mut more = good.clone();
    more[57..61].copy_from_slice(&4i32.to_be_bytes());
    fix_crc(&mut more);
    let batch = only_batch(Bytes::from(more));
    let results: Vec<_> = batch.records().unwrap().collect();
    assert_eq!(results.len(), 4);
    assert!(
        matches!(results[3], Err(Error::CorruptRecord { index: 3, .. })),
        "{:?}",
        results[3]
    );

    // A record count below the records present: the leftover bytes are an error.
    let mut fewer = good.clone();
    fewer[57..61].copy_from_slice(&2i32.to_be_bytes());
    fix_crc(&mut fewer);
    let batch = only_batch(Bytes::from(fewer));
    let results: Vec<_> = batch.records().unwrap().collect();
    assert!(
        matches!(results.last(), Some(Err(Error::CorruptBatch { .. }))),
        "{results:?}"
    );

    // A negative record count.
    let mut negative = good;
    negative[57..61].copy_from_slice(&(-5i32).to_be_bytes());
    fix_crc(&mut negative);
    assert!(decode_all(Bytes::from(negative), DecodeOptions::default()).is_err());
}

#[test]
fn a_corrupt_record_names_its_index_and_byte() {
    let encoded = BatchBuilder::new(0).encode(&values(3, 10)).unwrap();
    let mut buf = encoded.bytes.to_vec();
    // Make the second record's key length -7 (zig-zag 13).
    let second = encoded.record_ranges[1].start;
    // length varint (1 byte), attributes, timestamp delta (1), offset delta (1), key length.
    buf[second + 4] = 13;
    fix_crc(&mut buf);
    let batch = only_batch(Bytes::from(buf));
    let results: Vec<_> = batch.records().unwrap().collect();
    assert!(results[0].is_ok());
    let err = results[1].as_ref().unwrap_err();
    assert!(
        matches!(err, Error::CorruptRecord { index: 1, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("record #1"), "{err}");
}

#[test]
fn a_header_count_cut_short_is_reported_where_the_record_ends() {
    let encoded = BatchBuilder::new(0).encode(&values(1, 10)).unwrap();
    let record = encoded.record_ranges[0].clone();
    let mut buf = encoded.bytes.to_vec();
    // The header count is the record's last byte: make it a varint that
    // goes on past the record.
    buf[record.end - 1] = 0x80;
    fix_crc(&mut buf);
    let batch = only_batch(Bytes::from(buf));
    let err = batch.records().unwrap().next().unwrap().unwrap_err();
    assert!(
        matches!(err, Error::CorruptRecord { index: 0, position, .. } if position == record.end),
        "{err:?}, record at {record:?}"
    );
    assert!(err.to_string().contains("runs past"), "{err}");
}

#[test]
fn decompression_bombs_hit_the_cap() {
    // 1 MiB of one byte compresses to almost nothing with every codec.
    let bomb = vec![NewRecord::value(0, vec![0u8; 1 << 20])];
    let opts = DecodeOptions {
        max_decompressed_bytes: 64 << 10,
        ..DecodeOptions::default()
    };
    for codec in [
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        for framing in [
            walfetch_codec::SnappyFraming::Xerial,
            walfetch_codec::SnappyFraming::Raw,
        ] {
            let encoded = BatchBuilder::new(5)
                .compression(codec)
                .snappy_framing(framing)
                .encode(&bomb)
                .unwrap();
            assert!(
                encoded.bytes.len() < 64 << 10,
                "{codec}: {}",
                encoded.bytes.len()
            );
            let batch = decode_all(encoded.bytes.clone(), opts).unwrap().remove(0);
            let err = match batch.records() {
                Err(e) => e,
                Ok(mut records) => records.next().unwrap().unwrap_err(),
            };
            assert!(
                matches!(err, Error::DecompressedTooLarge { base_offset: 5, .. })
                    || matches!(&err, Error::Decompress { source, .. } if source.to_string().contains("cap")),
                "{codec}: {err}"
            );
            // Under the default cap the same batch decodes.
            let batch = only_batch(encoded.bytes);
            assert_eq!(
                batch
                    .records()
                    .unwrap()
                    .next()
                    .unwrap()
                    .unwrap()
                    .value()
                    .unwrap()
                    .len(),
                1 << 20
            );
        }
    }
}

#[test]
fn bounded_iteration_of_a_compressed_batch_stops_decompressing() {
    // A gzip batch whose compressed stream is damaged near its end (CRC
    // checking off, as if the damage were undetected): reading all records
    // fails, reading only the first ones does not touch the damage.
    let records: Vec<_> = (0..2000)
        .map(|i| {
            NewRecord::value(
                i,
                format!("entry {i} {}", "x".repeat((i as usize * 7919) % 300)),
            )
        })
        .collect();
    let encoded = BatchBuilder::new(0)
        .compression(Compression::Gzip)
        .encode(&records)
        .unwrap();
    let buf = damaged(&encoded.bytes, 20..40);
    let batch = decode_all(Bytes::from(buf), no_crc()).unwrap().remove(0);
    let first: Vec<_> = batch
        .records_in(0..=10)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(first.len(), 11);
    assert!(batch.records().unwrap().any(|r| r.is_err()));
}

#[test]
fn a_failed_decompression_leaves_nothing_behind_for_the_next_batch() {
    // LZ4 and zstd keep a decoder per thread between batches: a batch whose
    // compressed records are damaged (CRC checking off), or over the cap,
    // fails on its own and the same good batch decodes the same before and
    // after it.
    let good = values(50, 300);
    for codec in [Compression::Lz4, Compression::Zstd] {
        let encoded = BatchBuilder::new(0)
            .compression(codec)
            .encode(&good)
            .unwrap();
        let broken = damaged(&encoded.bytes, 10..30);
        let capped = DecodeOptions {
            max_decompressed_bytes: 1000,
            ..DecodeOptions::default()
        };
        let read = |buf: &Bytes, opts| -> Result<Vec<_>, Error> {
            decode_all(buf.clone(), opts)?
                .remove(0)
                .records()?
                .map(|r| r.map(|r| r.value().map(<[u8]>::to_vec)))
                .collect()
        };
        let before = read(&encoded.bytes, DecodeOptions::default()).unwrap();
        assert_eq!(before.len(), good.len(), "{codec}");
        assert!(read(&Bytes::from(broken), no_crc()).is_err(), "{codec}");
        assert!(matches!(
            read(&encoded.bytes, capped),
            Err(Error::DecompressedTooLarge { .. })
        ));
        assert_eq!(
            read(&encoded.bytes, DecodeOptions::default()).unwrap(),
            before,
            "{codec}"
        );
    }
}

#[test]
fn control_batches_and_read_committed() {
    let pid_committed = 1;
    let pid_aborted = 2;
    let data = |base, pid| {
        BatchBuilder::new(base)
            .producer(pid, 0, 0)
            .transactional(true)
            .encode(&values(2, 8))
            .unwrap()
            .bytes
    };
    let marker = |base, pid, kind| {
        BatchBuilder::new(base)
            .producer(pid, 0, 0)
            .encode_marker(kind, 4, 0)
            .unwrap()
            .bytes
    };
    let plain = BatchBuilder::new(6).encode(&values(1, 8)).unwrap().bytes;
    let buf = [
        data(0, pid_committed),
        data(2, pid_aborted),
        marker(4, pid_committed, ControlType::Commit),
        marker(5, pid_aborted, ControlType::Abort),
        plain,
        data(7, pid_aborted), // a later transaction of the same producer, not aborted
    ]
    .concat();
    let batches = decode_all(Bytes::from(buf), DecodeOptions::default()).unwrap();
    let controls: Vec<_> = batches
        .iter()
        .map(|b| b.control_record().unwrap().map(|c| c.kind))
        .collect();
    assert_eq!(
        controls,
        [
            None,
            None,
            Some(ControlType::Commit),
            Some(ControlType::Abort),
            None,
            None
        ]
    );

    let mut filter = TransactionFilter::new([AbortedTransaction {
        producer_id: pid_aborted,
        first_offset: 2,
    }]);
    let kept: Vec<i64> = batches
        .iter()
        .filter(|b| filter.admit(b).unwrap())
        .flat_map(|b| b.records().unwrap().map(|r| r.unwrap().offset()))
        .collect();
    assert_eq!(kept, [0, 1, 6, 7, 8]);

    // read_uncommitted: everything but the control batches.
    let mut all = TransactionFilter::new([]);
    assert_eq!(batches.iter().filter(|b| all.admit(b).unwrap()).count(), 4);
}

/// Kafka's log cleaner keeps a producer's last transaction marker, once
/// its delete horizon has passed, as an empty control batch: the header
/// alone, record count 0 (`DefaultRecordBatch.writeEmptyHeader`). It marks
/// nothing: no control record, not admitted, and, as in Java's consumer
/// (`containsAbortMarker` is false without a record), it does not end an
/// aborted transaction of its producer.
#[test]
fn an_empty_control_batch_marks_nothing() {
    let mut empty = BatchBuilder::new(10)
        .producer(2, 0, 0)
        .encode_marker(ControlType::Abort, 0, 0)
        .unwrap()
        .bytes[..61]
        .to_vec();
    empty[8..12].copy_from_slice(&49i32.to_be_bytes());
    empty[57..61].copy_from_slice(&0i32.to_be_bytes());
    fix_crc(&mut empty);
    let data = |base| {
        BatchBuilder::new(base)
            .producer(2, 0, 0)
            .transactional(true)
            .encode(&values(2, 8))
            .unwrap()
            .bytes
    };
    let buf = [data(8), Bytes::from(empty), data(11)].concat();
    let batches = decode_all(Bytes::from(buf), DecodeOptions::default()).unwrap();
    let empty = &batches[1];
    assert!(empty.header().is_control() && empty.header().is_transactional());
    assert_eq!(empty.records().unwrap().count(), 0);
    assert_eq!(empty.control_record().unwrap(), None);

    let mut filter = TransactionFilter::new([AbortedTransaction {
        producer_id: 2,
        first_offset: 8,
    }]);
    let admitted: Vec<bool> = batches.iter().map(|b| filter.admit(b).unwrap()).collect();
    assert_eq!(admitted, [false, false, false], "still aborted after it");
    let mut none_aborted = TransactionFilter::new([]);
    let admitted: Vec<bool> = batches
        .iter()
        .map(|b| none_aborted.admit(b).unwrap())
        .collect();
    assert_eq!(admitted, [true, false, true]);
}

#[test]
fn log_append_time_and_empty_batches() {
    let records = vec![
        NewRecord {
            timestamp: 5,
            ..NewRecord::value(0, "a")
        },
        NewRecord {
            timestamp: 9,
            ..NewRecord::value(1, "b")
        },
    ];
    let encoded = BatchBuilder::new(0)
        .timestamp_type(TimestampType::LogAppendTime)
        .encode(&records)
        .unwrap();
    let batch = only_batch(encoded.bytes);
    let ts: Vec<_> = batch
        .records()
        .unwrap()
        .map(|r| r.unwrap().timestamp())
        .collect();
    assert_eq!(ts, [9, 9]);

    // Compaction can leave a batch with no records but a last offset delta.
    let mut empty = BatchBuilder::new(100).encode(&values(1, 1)).unwrap().bytes[..61].to_vec();
    empty[8..12].copy_from_slice(&49i32.to_be_bytes());
    empty[23..27].copy_from_slice(&4i32.to_be_bytes());
    empty[57..61].copy_from_slice(&0i32.to_be_bytes());
    fix_crc(&mut empty);
    let batch = only_batch(Bytes::from(empty));
    assert_eq!(batch.records().unwrap().count(), 0);
    assert_eq!(batch.header().next_offset(), 105);
}

#[test]
fn encoder_rejects_what_kafka_cannot_hold() {
    assert!(matches!(
        BatchBuilder::new(0).encode(&[]),
        Err(Error::InvalidInput { .. })
    ));
    let unordered = [NewRecord::value(1, "a"), NewRecord::value(1, "b")];
    assert!(matches!(
        BatchBuilder::new(0).encode(&unordered),
        Err(Error::InvalidInput { .. })
    ));
    assert!(BatchBuilder::new(0)
        .encode(&[NewRecord::value(-1, "a")])
        .is_err());
}

#[test]
fn record_ranges_point_at_each_record() {
    let encoded = BatchBuilder::new(0).encode(&values(5, 33)).unwrap();
    for (i, range) in encoded.record_ranges.iter().enumerate() {
        assert_eq!(encoded.record_end_in_batch(i), Some(range.end));
        if range.end == encoded.bytes.len() {
            continue;
        }
        // Cutting the batch right after record i leaves exactly records 0..=i.
        let cut = encoded.bytes.slice(..range.end);
        let mut it = Batches::new(cut, DecodeOptions::default());
        assert!(it.next().is_none());
        let got = it.partial().unwrap().records_unverified().unwrap().count();
        assert_eq!(got, i + 1);
    }
    assert_eq!(
        encoded.record_ranges.last().unwrap().end,
        encoded.bytes.len()
    );
    let compressed = BatchBuilder::new(0)
        .compression(Compression::Lz4)
        .encode(&values(2, 3))
        .unwrap();
    assert_eq!(compressed.record_end_in_batch(0), None);
}

/// A producer writes records into a batch as they come: a record the
/// batch cannot take leaves what was written untouched, and the batch's
/// timestamps run from its first record's.
#[test]
fn a_records_buffer_refuses_a_record_alone_and_stamps_from_the_first() {
    let mut buffer = RecordsBuffer::default();
    assert!(matches!(
        BatchBuilder::new(0).encode_records(&buffer),
        Err(Error::InvalidInput { .. })
    ));
    assert!(buffer.push(&NewRecord::value(-1, "negative")).is_err());
    let first = NewRecord {
        timestamp: 1_000,
        ..NewRecord::value(0, "a")
    };
    buffer.push(&first).unwrap();
    let written = buffer.clone();
    assert!(buffer.push(&NewRecord::value(0, "again")).is_err());
    assert_eq!(buffer, written, "a refused record leaves no trace");
    let earlier = NewRecord {
        timestamp: 940,
        ..NewRecord::value(2, "b")
    };
    let later = NewRecord {
        timestamp: 1_070,
        ..NewRecord::value(5, "c")
    };
    buffer.push(&earlier).unwrap();
    buffer.push(&later).unwrap();
    assert_eq!(buffer.len(), 3);
    for compression in [Compression::None, Compression::Lz4] {
        let encoded = BatchBuilder::new(10)
            .compression(compression)
            .encode_records(&buffer)
            .unwrap();
        let same = BatchBuilder::new(10)
            .compression(compression)
            .encode(&[first.clone(), earlier.clone(), later.clone()])
            .unwrap();
        assert_eq!(encoded, same);
        let batch = only_batch(encoded.bytes);
        assert_eq!(batch.header().base_timestamp, 1_000);
        assert_eq!(batch.header().max_timestamp, 1_070);
        assert_eq!(batch.last_offset(), 15);
        let got: Vec<(i64, i64)> = batch
            .records()
            .unwrap()
            .map(|r| r.map(|r| (r.offset(), r.timestamp())).unwrap())
            .collect();
        assert_eq!(got, [(10, 1_000), (12, 940), (15, 1_070)]);
    }
}
