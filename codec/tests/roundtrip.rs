//! Encode → decode round trips under proptest, for every codec and
//! attribute combination, and prefix (partial batch) behaviour.
#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use bytes::Bytes;
use proptest::prelude::*;
use walfetch_codec::{
    BatchBuilder, Batches, Compression, DecodeOptions, EncodedBatch, NewRecord, TimestampType,
};

mod common;

use common::{compression, Shape};

/// Records of up to 300-byte keys, values and header values, 1-39 a batch.
fn records() -> impl Strategy<Value = Vec<NewRecord>> {
    common::records(Shape {
        key: 300,
        value: 300,
        header_value: 300,
        records: 40,
    })
}

fn builder() -> impl Strategy<Value = BatchBuilder> {
    (
        0..i64::MAX / 2,
        compression(),
        any::<bool>(),
        any::<bool>(),
        any::<(i64, i16, i32, i32)>(),
    )
        .prop_map(
            |(base, (codec, framing), log_append, transactional, (pid, epoch, seq, ple))| {
                BatchBuilder::new(base)
                    .compression(codec)
                    .snappy_framing(framing)
                    .timestamp_type(if log_append {
                        TimestampType::LogAppendTime
                    } else {
                        TimestampType::CreateTime
                    })
                    .transactional(transactional)
                    .producer(pid, epoch, seq)
                    .partition_leader_epoch(ple)
            },
        )
}

fn assert_decodes_to(encoded: &EncodedBatch, records: &[NewRecord]) -> Result<(), TestCaseError> {
    let mut batches = Batches::new(encoded.bytes.clone(), DecodeOptions::default());
    let batch = batches.next().expect("one batch").expect("valid batch");
    prop_assert!(batches.next().is_none());
    prop_assert!(batches.partial().is_none());
    prop_assert_eq!(batch.header(), &encoded.header);
    let decoded: Vec<_> = batch
        .records()
        .expect("records")
        .collect::<Result<_, _>>()
        .expect("decode");
    prop_assert_eq!(decoded.len(), records.len());
    let h = encoded.header;
    let uncompressed = h.compression() == Some(Compression::None);
    for (i, (got, want)) in decoded.iter().zip(records).enumerate() {
        let range = uncompressed.then(|| encoded.record_ranges[i].clone());
        prop_assert_eq!(got.batch_range(), range);
        prop_assert_eq!(got.offset(), h.base_offset + i64::from(want.offset_delta));
        let ts = if h.attributes.timestamp_type() == TimestampType::LogAppendTime {
            h.max_timestamp
        } else {
            want.timestamp
        };
        prop_assert_eq!(got.timestamp(), ts);
        prop_assert_eq!(got.key(), want.key.as_deref());
        prop_assert_eq!(got.value(), want.value.as_deref());
        prop_assert_eq!(got.key_bytes(), want.key.clone());
        let headers: Vec<_> = got
            .headers()
            .map(|h| (Bytes::copy_from_slice(h.key), h.value_bytes()))
            .collect();
        prop_assert_eq!(&headers, &want.headers);
    }
    Ok(())
}

proptest! {
    #[test]
    fn encode_then_decode(builder in builder(), records in records()) {
        let encoded = builder.encode(&records).expect("encode");
        assert_decodes_to(&encoded, &records)?;
    }

    #[test]
    fn bounded_iteration_yields_exactly_the_range(records in records(), codec in compression(), a in 0..120i64, b in 0..120i64) {
        let encoded = BatchBuilder::new(1000).compression(codec.0).snappy_framing(codec.1).encode(&records).expect("encode");
        let (lo, hi) = (1000 + a.min(b), 1000 + a.max(b));
        let batch = Batches::new(encoded.bytes.clone(), DecodeOptions::default()).next().unwrap().unwrap();
        let got: Vec<i64> = batch.records_in(lo..=hi).unwrap().map(|r| r.unwrap().offset()).collect();
        let want: Vec<i64> = records.iter().map(|r| 1000 + i64::from(r.offset_delta)).filter(|o| (lo..=hi).contains(o)).collect();
        prop_assert_eq!(got, want);
    }
}

proptest! {
    // Each case decodes every prefix of the buffer: fewer cases, same reach.
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Every prefix of a multi-batch buffer decodes to exactly its complete
    /// batches plus one partial-batch report.
    #[test]
    fn every_prefix_is_complete_batches_plus_one_partial(
        batches in prop::collection::vec((records(), compression()), 1..4),
    ) {
        let mut buf = Vec::new();
        let mut ends = Vec::new();
        let mut base = 0i64;
        let mut encoded_all = Vec::new();
        for (records, (codec, framing)) in &batches {
            let e = BatchBuilder::new(base).compression(*codec).snappy_framing(*framing).encode(records).unwrap();
            base = e.header.next_offset();
            buf.extend_from_slice(&e.bytes);
            ends.push(buf.len());
            encoded_all.push(e);
        }
        let buf = Bytes::from(buf);
        for cut in 0..=buf.len() {
            let mut it = Batches::new(buf.slice(..cut), DecodeOptions::default());
            let complete: Vec<_> = it.by_ref().collect::<Result<_, _>>().expect("no error on a prefix");
            let want = ends.iter().filter(|&&e| e <= cut).count();
            prop_assert_eq!(complete.len(), want);
            let at_boundary = cut == 0 || ends.contains(&cut);
            match it.partial() {
                None => prop_assert!(at_boundary, "cut {} lost a partial report", cut),
                Some(p) => {
                    prop_assert!(!at_boundary);
                    let start = if want == 0 { 0 } else { ends[want - 1] };
                    prop_assert_eq!(p.position(), start);
                    prop_assert_eq!(p.present(), cut - start);
                    if p.present() >= 12 {
                        prop_assert_eq!(p.needed(), Some(ends[want] - start));
                    }
                    if p.present() >= 8 {
                        prop_assert_eq!(p.base_offset(), Some(encoded_all[want].header.base_offset));
                    }
                    // Records in an uncompressed prefix are exactly those whose bytes are all present.
                    if let Some(records) = p.records_unverified() {
                        let e = &encoded_all[want];
                        let got = records.map(|r| r.map(|r| r.offset())).collect::<Result<Vec<_>, _>>().expect("prefix records");
                        let whole = e.record_ranges.iter().filter(|r| r.end <= p.present()).count();
                        prop_assert_eq!(got.len(), whole);
                    }
                }
            }
        }
    }
}
