//! The borrowed path (`Records::next_ref`, `RecordRef`) yields exactly what
//! the owned path (`Records` as an `Iterator` of `Record`s) does: the same
//! records field by field, the same bounds, the same error (kind and message)
//! at the same record index, and the same end; also when the two are mixed.
//! Each walk opens the batch and its records itself: where one fails to
//! open, every walk fails to open with the same error. A valid batch must
//! open. Batches of every codec, bounded iterations (a bounded compressed batch
//! decompresses as a stream), truncated prefixes and corrupt records.
#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::io::Write as _;
use std::mem::discriminant;

use bytes::Bytes;
use proptest::prelude::*;
use walfetch_codec::{
    BatchBuilder, Batches, Compression, DecodeOptions, Error, NewRecord, PartialBatch, Record,
    RecordRef, Records, HEADER_LEN,
};

/// An error as the comparison sees it: its kind and its message.
type Fault = (std::mem::Discriminant<Error>, String);

fn fault(err: &Error) -> Fault {
    (discriminant(err), err.to_string())
}

mod common;

use common::{compression, Shape};

/// Records with up to 40-byte keys, 20-byte header values, values under
/// `max_value` bytes and fewer than `max_records` a batch.
fn records(max_value: usize, max_records: usize) -> impl Strategy<Value = Vec<NewRecord>> {
    common::records(Shape {
        key: 40,
        value: max_value,
        header_value: 20,
        records: max_records,
    })
}

/// Asserts that `borrowed` is `owned`, field by field and as a whole.
fn assert_same(borrowed: &RecordRef<'_>, owned: &Record, i: usize) {
    assert_eq!(borrowed.offset(), owned.offset(), "record {i}: offset");
    assert_eq!(
        borrowed.timestamp(),
        owned.timestamp(),
        "record {i}: timestamp"
    );
    assert_eq!(borrowed.key(), owned.key(), "record {i}: key");
    assert_eq!(borrowed.value(), owned.value(), "record {i}: value");
    assert_eq!(
        borrowed.wire_len(),
        owned.wire_len(),
        "record {i}: wire_len"
    );
    assert_eq!(
        borrowed.batch_range(),
        owned.batch_range(),
        "record {i}: batch_range"
    );
    assert_eq!(
        borrowed.header_count(),
        owned.header_count(),
        "record {i}: header_count"
    );
    let headers = |h: walfetch_codec::Headers<'_>| {
        h.map(|h| (h.key.to_vec(), h.value.map(<[u8]>::to_vec), h.value_bytes()))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        headers(borrowed.headers()),
        headers(owned.headers()),
        "record {i}: headers"
    );
    let converted = borrowed.to_record();
    assert_eq!(&converted, owned, "record {i}: to_record");
    assert_eq!(
        converted.key_bytes(),
        owned.key_bytes(),
        "record {i}: key_bytes"
    );
    assert_eq!(
        converted.value_bytes(),
        owned.value_bytes(),
        "record {i}: value_bytes"
    );
}

/// Walks `records` as an iterator of owned records, to its end or first
/// error; checks that it stays ended.
fn walk_owned(mut records: Records) -> Vec<Result<Record, Fault>> {
    let mut out = Vec::new();
    for record in records.by_ref() {
        let failed = record.is_err();
        out.push(record.map_err(|e| fault(&e)));
        if failed {
            break;
        }
    }
    assert!(records.next().is_none(), "owned: yielded after its end");
    assert!(records.next_ref().is_none(), "owned: lent after its end");
    out
}

/// Walks `records` with `next_ref`, or with `next` where `owned_at(i)` says
/// so (mixing both), comparing each record with `want[i]`.
fn walk_borrowed(
    mut records: Records,
    want: &[Result<Record, Fault>],
    owned_at: impl Fn(usize) -> bool,
) -> Result<(), TestCaseError> {
    let mut i = 0;
    loop {
        let got: Option<Result<Record, Fault>> = if owned_at(i) {
            records.next().map(|r| r.map_err(|e| fault(&e)))
        } else {
            match records.next_ref() {
                None => None,
                Some(Err(e)) => Some(Err(fault(&e))),
                Some(Ok(r)) => {
                    let Some(Ok(owned)) = want.get(i) else {
                        return Err(TestCaseError::fail(format!(
                            "borrowed record {i} ({r:?}) where the owned walk has {:?}",
                            want.get(i)
                        )));
                    };
                    assert_same(&r, owned, i);
                    Some(Ok(r.to_record()))
                }
            }
        };
        let Some(got) = got else { break };
        prop_assert_eq!(Some(&got), want.get(i), "record {}", i);
        i += 1;
        if got.is_err() {
            break;
        }
    }
    prop_assert_eq!(i, want.len(), "the borrowed walk ended early");
    prop_assert!(records.next_ref().is_none(), "borrowed: lent after its end");
    prop_assert!(records.next().is_none(), "borrowed: yielded after its end");
    Ok(())
}

/// Records as a walk opens them, or the error opening them failed with (the
/// batch's, or its records section's).
type Opened = Result<Records, Fault>;

fn opened(records: Result<Records, Error>) -> Opened {
    records.map_err(|e| fault(&e))
}

/// Compares the owned walk with the borrowed one and with one mixing both by
/// `mix`. `open` is called once per walk, so each walk opens the records
/// itself: where the owned walk's fail to open, each other walk's must fail
/// with the same error (and the other way round); where they open, the
/// walks yield the same records and errors. Returns whether they opened.
fn compare(open: impl Fn() -> Opened, mix: u64) -> Result<bool, TestCaseError> {
    let want = open().map(walk_owned);
    let all_borrowed = |_: usize| false;
    let mixed = |i: usize| mix >> (i % 64) & 1 == 1;
    let walks: [(&str, &dyn Fn(usize) -> bool); 2] =
        [("borrowed", &all_borrowed), ("mixed", &mixed)];
    for (walk, owned_at) in walks {
        match (open(), &want) {
            (Ok(records), Ok(want)) => walk_borrowed(records, want, owned_at)?,
            (Err(got), Err(want)) => prop_assert_eq!(&got, want, "{} walk: open error", walk),
            (got, want) => {
                return Err(TestCaseError::fail(format!(
                    "the {walk} walk opened to {:?}, the owned walk to {:?}",
                    got.err(),
                    want.as_ref().err()
                )))
            }
        }
    }
    Ok(want.is_ok())
}

/// The only batch in `buf`, or the error it fails with.
fn first_batch(buf: &Bytes, opts: DecodeOptions) -> Result<walfetch_codec::RecordBatch, Fault> {
    let batch = Batches::new(buf.clone(), opts).next();
    batch
        .expect("the buffer holds a complete batch")
        .map_err(|e| fault(&e))
}

/// Compares the walks of the only batch in `buf` (each walk decoding the
/// batch itself): unbounded, with `records_in(lo..=hi)` and `records_in(lo..)`
/// (offsets relative to the base offset), and with `.bounded`. Returns
/// whether the unbounded walks opened.
fn compare_batch(
    buf: &Bytes,
    opts: DecodeOptions,
    lo: i64,
    hi: i64,
    mix: u64,
) -> Result<bool, TestCaseError> {
    let base = i64::from_be_bytes(buf[..8].try_into().unwrap());
    let (lo, hi) = (base + lo.min(hi), base + lo.max(hi));
    let batch = || first_batch(buf, opts);
    let all = compare(|| opened(batch()?.records()), mix)?;
    compare(|| opened(batch()?.records_in(lo..=hi)), mix)?;
    compare(|| opened(batch()?.records_in(lo..)), mix)?;
    compare(
        || Ok(opened(batch()?.records())?.bounded(i64::MIN, hi)),
        mix,
    )?;
    Ok(all)
}

/// Compresses `records` (an uncompressed records section) as Kafka does.
fn compress(codec: Compression, records: &[u8]) -> Vec<u8> {
    match codec {
        Compression::None => records.to_vec(),
        Compression::Gzip => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(records).unwrap();
            e.finish().unwrap()
        }
        Compression::Snappy => snap::raw::Encoder::new().compress_vec(records).unwrap(),
        Compression::Lz4 => {
            let mut e = lz4_flex::frame::FrameEncoder::new(Vec::new());
            e.write_all(records).unwrap();
            e.finish().unwrap()
        }
        Compression::Zstd => zstd::bulk::compress(records, 1).unwrap(),
    }
}

/// A batch of `codec` whose decompressed records section is `section` (and
/// whose header is `header`'s, with the compression bits of `codec`), with
/// its length and CRC rewritten.
fn rebuild(codec: Compression, header: &[u8], section: &[u8]) -> Bytes {
    let mut buf = header[..HEADER_LEN].to_vec();
    // Attributes: the low three bits are the codec.
    let attributes = i16::from_be_bytes([buf[21], buf[22]]);
    let id = Compression::ALL.iter().position(|&c| c == codec).unwrap() as i16;
    buf[21..23].copy_from_slice(&((attributes & !7) | id).to_be_bytes());
    buf.extend_from_slice(&compress(codec, section));
    let batch_length = (buf.len() - 12) as i32;
    buf[8..12].copy_from_slice(&batch_length.to_be_bytes());
    let crc = crc32c::crc32c(&buf[21..]);
    buf[17..21].copy_from_slice(&crc.to_be_bytes());
    buf.into()
}

proptest! {
    /// Valid batches of every codec, any bounds: identical walks.
    #[test]
    fn borrowed_walk_is_the_owned_walk(
        records in records(300, 40),
        (codec, framing) in compression(),
        base in 0..i64::MAX / 2,
        lo in -2..130i64,
        hi in -2..130i64,
        mix: u64,
    ) {
        let encoded = BatchBuilder::new(base).compression(codec).snappy_framing(framing).encode(&records).unwrap();
        let opened = compare_batch(&encoded.bytes, DecodeOptions::default(), lo, hi, mix)?;
        prop_assert!(opened, "a valid batch opens");
    }

    /// Corrupt records (bytes overwritten, the section cut or extended, the
    /// header's record count or last offset delta changed), compressed
    /// again with every codec: the same error at the same record index, or
    /// the same error opening the batch or its records.
    #[test]
    fn borrowed_walk_fails_where_the_owned_walk_does(
        records in records(100, 20),
        codec in prop::sample::select(Compression::ALL.to_vec()),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
        cut in prop::option::of(any::<prop::sample::Index>()),
        extra in prop::collection::vec(any::<u8>(), 0..3),
        count_change in prop::sample::select(vec![0i32, 0, -1, 1]),
        delta_change in prop::sample::select(vec![0i32, 0, -1, 1]),
        lo in -2..70i64,
        hi in -2..70i64,
        mix: u64,
    ) {
        let plain = BatchBuilder::new(1000).encode(&records).unwrap();
        let mut header = plain.bytes[..HEADER_LEN].to_vec();
        let mut section = plain.bytes[HEADER_LEN..].to_vec();
        for (at, byte) in &edits {
            let at = at.index(section.len());
            section[at] = *byte;
        }
        if let Some(cut) = cut {
            section.truncate(cut.index(section.len() + 1));
        }
        section.extend_from_slice(&extra);
        let count = i32::from_be_bytes(header[57..61].try_into().unwrap()) + count_change;
        header[57..61].copy_from_slice(&count.to_be_bytes());
        let delta = i32::from_be_bytes(header[23..27].try_into().unwrap()) + delta_change;
        header[23..27].copy_from_slice(&delta.to_be_bytes());
        let buf = rebuild(codec, &header, &section);
        compare_batch(&buf, DecodeOptions::default(), lo, hi, mix)?;
        // The same bytes without the CRC check, the CRC now wrong.
        let mut unchecked = buf.to_vec();
        unchecked[17] ^= 1;
        let opts = DecodeOptions { verify_crc: false, ..DecodeOptions::default() };
        compare_batch(&Bytes::from(unchecked), opts, lo, hi, mix)?;
    }

    /// Every prefix of an uncompressed batch: past the header, the
    /// unverified records of the partial batch walk the same both ways.
    #[test]
    fn borrowed_walk_of_a_prefix_is_the_owned_walk(
        records in records(100, 20),
        cut in any::<prop::sample::Index>(),
        mix: u64,
    ) {
        let encoded = BatchBuilder::new(7).encode(&records).unwrap();
        let cut = cut.index(encoded.bytes.len());
        let mut batches = Batches::new(encoded.bytes.slice(..cut), DecodeOptions::default());
        prop_assert!(batches.next().is_none());
        let unverified = || batches.partial().and_then(PartialBatch::records_unverified);
        if cut < HEADER_LEN {
            // No complete header: no records section to walk either way.
            prop_assert!(unverified().is_none(), "records in a {}-byte prefix", cut);
        } else {
            let open = || Ok(unverified().expect("a prefix past its header has records"));
            prop_assert!(compare(open, mix)?);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Larger compressed batches, bounded below their last offset: the
    /// records are decompressed as a stream, in several chunks.
    #[test]
    fn borrowed_walk_of_a_streamed_batch_is_the_owned_walk(
        records in records(6000, 40),
        (codec, framing) in compression(),
        lo in 0..40i64,
        hi in 0..130i64,
        mix: u64,
    ) {
        let encoded = BatchBuilder::new(0).compression(codec).snappy_framing(framing).encode(&records).unwrap();
        let opened = compare_batch(&encoded.bytes, DecodeOptions::default(), lo, hi, mix)?;
        prop_assert!(opened, "a valid batch opens");
        // A decompression cap the records may exceed part way.
        let opts = DecodeOptions { max_decompressed_bytes: 20 << 10, ..DecodeOptions::default() };
        compare_batch(&encoded.bytes, opts, lo, hi, mix)?;
    }
}

#[test]
fn a_borrowed_record_outlives_nothing_but_converts_to_an_owned_one() {
    let records: Vec<NewRecord> = (0..5)
        .map(|i| NewRecord {
            offset_delta: i,
            timestamp: 1_700_000_000_000 + i64::from(i),
            key: Some(Bytes::from(format!("k{i}"))),
            value: (i != 2).then(|| Bytes::from(format!("value {i}"))),
            headers: vec![(Bytes::from_static(b"h"), Some(Bytes::from(vec![i as u8])))],
        })
        .collect();
    for codec in Compression::ALL {
        let encoded = BatchBuilder::new(40)
            .compression(codec)
            .encode(&records)
            .unwrap();
        let batch = first_batch(&encoded.bytes, DecodeOptions::default()).unwrap();
        let mut kept = Vec::new();
        let mut it = batch.records_in(41..=43).unwrap();
        while let Some(record) = it.next_ref() {
            let record = record.unwrap();
            let want = &records[(record.offset() - 40) as usize];
            assert_eq!(record.key(), want.key.as_deref(), "{codec:?}");
            assert_eq!(record.value(), want.value.as_deref(), "{codec:?}");
            let header = record.headers().next().unwrap();
            assert_eq!(header.value_bytes(), want.headers[0].1, "{codec:?}");
            kept.push(record.to_record());
        }
        let offsets: Vec<i64> = kept.iter().map(Record::offset).collect();
        assert_eq!(offsets, [41, 42, 43], "{codec:?}");
        // The owned records share the batch's (or decompressed) buffer.
        if codec == Compression::None {
            let key = kept[0].key_bytes().unwrap();
            let in_batch = encoded.bytes.as_ptr_range();
            assert!(in_batch.contains(&key.as_ptr()), "a copy, not a slice");
        }
    }
}
