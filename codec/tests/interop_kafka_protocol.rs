//! Cross-checks against an independent implementation: the `kafka-protocol`
//! crate's record batch encoder and decoder, for every compression.
//! Batches it writes must decode with ours; batches we write must decode
//! with it, record for record.
#![allow(clippy::unwrap_used)]

use bytes::{Bytes, BytesMut};
use indexmap::IndexMap;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression as KpCompression, Record as KpRecord, RecordBatchDecoder, RecordBatchEncoder,
    RecordEncodeOptions, TimestampType as KpTimestampType,
};
use proptest::prelude::*;
use walfetch_codec::{BatchBuilder, Batches, Compression, DecodeOptions, NewRecord, SnappyFraming};

// Only its record spacing: its strategies make records kafka-protocol's
// headers (a map of strings) cannot hold.
#[allow(dead_code)]
mod common;

use common::spaced;

fn theirs(c: Compression) -> KpCompression {
    match c {
        Compression::None => KpCompression::None,
        Compression::Gzip => KpCompression::Gzip,
        Compression::Snappy => KpCompression::Snappy,
        Compression::Lz4 => KpCompression::Lz4,
        Compression::Zstd => KpCompression::Zstd,
    }
}

/// A record both sides can express: unique header keys that are UTF-8
/// (their headers are a map of strings).
#[derive(Debug, Clone)]
struct Sample {
    offset_delta: i32,
    timestamp: i64,
    key: Option<Bytes>,
    value: Option<Bytes>,
    headers: Vec<(String, Option<Bytes>)>,
}

fn samples() -> impl Strategy<Value = Vec<Sample>> {
    let bytes =
        || prop::option::of(prop::collection::vec(any::<u8>(), 0..200).prop_map(Bytes::from));
    let record = (
        1..3i32,
        0i64..100_000,
        (
            bytes(),
            bytes(),
            prop::collection::btree_map("[a-z]{1,8}", bytes(), 0..3),
        ),
    );
    prop::collection::vec(record, 1..30).prop_map(|rs| {
        spaced(rs, |offset_delta, timestamp, (key, value, headers)| {
            Sample {
                offset_delta,
                timestamp,
                key,
                value,
                headers: headers.into_iter().collect(),
            }
        })
    })
}

fn codecs() -> impl Strategy<Value = Compression> {
    prop::sample::select(Compression::ALL.to_vec())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn theirs_decode_with_ours(samples in samples(), codec in codecs(), base in 0i64..1 << 40) {
        let records: Vec<KpRecord> = samples.iter().map(|s| KpRecord {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 7,
            producer_id: 99,
            producer_epoch: 3,
            timestamp_type: KpTimestampType::Creation,
            offset: base + i64::from(s.offset_delta),
            sequence: s.offset_delta,
            timestamp: s.timestamp,
            key: s.key.clone(),
            value: s.value.clone(),
            headers: s.headers.iter().map(|(k, v)| (StrBytes::from_string(k.clone()), v.clone())).collect::<IndexMap<_, _>>(),
        }).collect();
        let mut buf = BytesMut::new();
        RecordBatchEncoder::encode(&mut buf, &records, &RecordEncodeOptions { version: 2, compression: theirs(codec) })
            .expect("their encoder");
        let mut batches = Batches::new(buf.freeze(), DecodeOptions::default());
        let batch = batches.next().expect("a batch").expect("decodes");
        prop_assert!(batches.next().is_none());
        prop_assert_eq!(batch.compression(), codec);
        prop_assert_eq!(batch.header().producer_id, 99);
        let got: Vec<_> = batch.records().expect("records").collect::<Result<_, _>>().expect("decode");
        prop_assert_eq!(got.len(), samples.len());
        for (g, s) in got.iter().zip(&samples) {
            prop_assert_eq!(g.offset(), base + i64::from(s.offset_delta));
            prop_assert_eq!(g.timestamp(), s.timestamp);
            prop_assert_eq!(g.key(), s.key.as_deref());
            prop_assert_eq!(g.value(), s.value.as_deref());
            let headers: Vec<_> = g.headers().map(|h| (String::from_utf8(h.key.to_vec()).expect("utf8"), h.value_bytes())).collect();
            prop_assert_eq!(&headers, &s.headers);
        }
    }

    #[test]
    fn ours_decode_with_theirs(samples in samples(), codec in codecs(), raw_snappy: bool, base in 0i64..1 << 40) {
        let records: Vec<NewRecord> = samples.iter().map(|s| NewRecord {
            offset_delta: s.offset_delta,
            timestamp: s.timestamp,
            key: s.key.clone(),
            value: s.value.clone(),
            headers: s.headers.iter().map(|(k, v)| (Bytes::from(k.clone()), v.clone())).collect(),
        }).collect();
        let framing = if raw_snappy { SnappyFraming::Raw } else { SnappyFraming::Xerial };
        let encoded = BatchBuilder::new(base).compression(codec).snappy_framing(framing).producer(5, 1, 0)
            .encode(&records).expect("encode");
        let mut bytes = encoded.bytes.clone();
        let sets = RecordBatchDecoder::decode_all(&mut bytes).expect("their decoder");
        prop_assert_eq!(sets.len(), 1);
        let got = &sets[0].records;
        prop_assert_eq!(got.len(), samples.len());
        for (g, s) in got.iter().zip(&samples) {
            prop_assert_eq!(g.offset, base + i64::from(s.offset_delta));
            prop_assert_eq!(g.timestamp, s.timestamp);
            prop_assert_eq!(&g.key, &s.key);
            prop_assert_eq!(&g.value, &s.value);
            prop_assert_eq!(g.producer_id, 5);
            let headers: Vec<_> = g.headers.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
            prop_assert_eq!(&headers, &s.headers);
        }
    }
}
