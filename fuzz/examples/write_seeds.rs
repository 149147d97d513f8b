//! Writes the seed corpora the fuzz targets start from, under `seeds/<target>/`:
//! a few small encoded batches for the decode targets (every codec, a
//! transaction with its markers, several batches in one buffer, a buffer cut
//! short, records keyed as GreptimeDB keys them), inputs for `encode_decode` that decode to non-empty batches, and
//! inputs for `replay_core` that replay something, index files of both
//! format versions and a GreptimeDB `index.json` for `index_file`, and a
//! well-formed response of every API for `decode_responses`, and RFC 7677's
//! SCRAM exchange for `sasl_scram`.
//!
//! Run from `fuzz/`: `cargo +nightly run --example write_seeds`.

use std::fs;
use std::path::Path;

use arbitrary::{Arbitrary, Unstructured};
use bytes::Bytes;
use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng};
use walfetch_codec::{
    BatchBuilder, Compression, ControlType, NewRecord, SnappyFraming, TimestampType,
};
use walfetch_codec_fuzz::replay;
use walfetch_codec_fuzz::roundtrip::Input;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn records(n: i32) -> Vec<NewRecord> {
    (0..n)
        .map(|i| NewRecord {
            offset_delta: i * 2, // gaps, as after compaction
            timestamp: 1_700_000_000_000 + i64::from(i),
            key: (i % 3 != 0).then(|| Bytes::from(format!("key-{i}"))),
            value: (i % 4 != 3).then(|| Bytes::from(format!("value {i} ").repeat(3))),
            headers: (0..i % 3)
                .map(|h| {
                    (
                        Bytes::from(format!("h{h}")),
                        (h == 0).then(|| Bytes::from_static(b"hv")),
                    )
                })
                .collect(),
        })
        .collect()
}

fn decode_seeds() -> Result<Vec<(String, Vec<u8>)>> {
    let mut seeds = Vec::new();
    for codec in Compression::ALL {
        let framings: &[SnappyFraming] = if codec == Compression::Snappy {
            &[SnappyFraming::Xerial, SnappyFraming::Raw]
        } else {
            &[SnappyFraming::Xerial]
        };
        for &framing in framings {
            let batch = BatchBuilder::new(100)
                .compression(codec)
                .snappy_framing(framing)
                .encode(&records(5))?;
            let name = match (codec, framing) {
                (Compression::Snappy, SnappyFraming::Raw) => "snappy-raw".to_string(),
                _ => codec.name().to_string(),
            };
            seeds.push((name, batch.bytes.to_vec()));
        }
    }

    // A transaction: data, abort marker, data, commit marker.
    let txn = BatchBuilder::new(0).producer(7, 1, 0).transactional(true);
    let mut buf = Vec::new();
    buf.extend_from_slice(&txn.encode(&records(2))?.bytes);
    let abort = BatchBuilder::new(3).producer(7, 1, 2);
    buf.extend_from_slice(&abort.encode_marker(ControlType::Abort, 5, 1)?.bytes);
    let txn = BatchBuilder::new(4)
        .producer(7, 1, 3)
        .transactional(true)
        .compression(Compression::Lz4);
    buf.extend_from_slice(&txn.encode(&records(2))?.bytes);
    let commit = BatchBuilder::new(7).producer(7, 1, 5);
    buf.extend_from_slice(&commit.encode_marker(ControlType::Commit, 5, 2)?.bytes);
    seeds.push(("transaction".into(), buf));

    // Several batches (log-append time, zstd), the last cut short mid-record.
    let mut buf = Vec::new();
    buf.extend_from_slice(&BatchBuilder::new(10).encode(&records(3))?.bytes);
    let log_append = BatchBuilder::new(15)
        .timestamp_type(TimestampType::LogAppendTime)
        .compression(Compression::Zstd);
    buf.extend_from_slice(&log_append.encode(&records(3))?.bytes);
    let last = BatchBuilder::new(20).encode(&records(4))?;
    let cut = last.record_ranges[2].start + 3;
    buf.extend_from_slice(&last.bytes[..cut]);
    seeds.push(("multi-partial".into(), buf));

    // Records as GreptimeDB writes them: its record meta (JSON) as the key,
    // the region rule's `greptime` format (uncompressed, so that mutations
    // reach the JSON).
    let greptime: Vec<NewRecord> = ["\"Full\"", "\"First\"", "{\"Middle\":1}", "\"Last\""]
        .iter()
        .enumerate()
        .map(|(i, tp)| NewRecord {
            offset_delta: i as i32,
            timestamp: 1_700_000_000_000,
            key: Some(Bytes::from(format!(
                r#"{{"version":0,"tp":{tp},"entry_id":{i},"ns":{{"region_id":4398046511104,"topic":"wal"}}}}"#
            ))),
            value: Some(Bytes::from(format!("entry {i}"))),
            headers: Vec::new(),
        })
        .collect();
    seeds.push((
        "greptime".into(),
        BatchBuilder::new(40).encode(&greptime)?.bytes.to_vec(),
    ));

    // zstd as streaming compressors write it (the Java client, rskafka,
    // kafka-protocol): the frame does not state its content size.
    let plain = BatchBuilder::new(30).encode(&records(6))?.bytes;
    seeds.push(("zstd-streamed".into(), restream_zstd(&plain)?));
    Ok(seeds)
}

/// `batch` (uncompressed) with its records section compressed by zstd's
/// streaming encoder, its attributes saying zstd, length and CRC updated.
fn restream_zstd(batch: &[u8]) -> Result<Vec<u8>> {
    const HEADER_LEN: usize = 61;
    let mut out = batch[..HEADER_LEN].to_vec();
    out.extend(zstd::stream::encode_all(&batch[HEADER_LEN..], 3)?);
    // Attributes (bytes 21..23): the codec in the low three bits, 4 = zstd.
    out[22] = (out[22] & !0x07) | 4;
    let batch_length = i32::try_from(out.len() - 12)?;
    out[8..12].copy_from_slice(&batch_length.to_be_bytes());
    let crc = crc32c::crc32c(&out[21..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    Ok(out)
}

/// Pseudo-random byte strings (a `StdRng` with a fixed seed) that
/// `arbitrary` turns into an input with at least two records.
fn encode_decode_seeds() -> Vec<(String, Vec<u8>)> {
    let mut rng = StdRng::seed_from_u64(0x9e37_79b9_7f4a_7c15);
    let mut seeds = Vec::new();
    for size in [64usize, 128, 256, 512, 1024, 2048] {
        loop {
            let mut bytes = vec![0; size];
            rng.fill_bytes(&mut bytes);
            let Ok(input) = Input::arbitrary_take_rest(Unstructured::new(&bytes)) else {
                continue;
            };
            if input.records.len() >= 2 {
                seeds.push((format!("random-{size}"), bytes));
                break;
            }
        }
    }
    seeds
}

/// Pseudo-random byte strings (a `StdRng` with a fixed seed) whose input replays
/// something (answers applied, entries yielded), and one whose answers
/// include a cut batch with a negative last offset delta (its header once
/// reached `Layout::observe` inverted, a panic).
fn replay_core_seeds() -> Vec<(String, Vec<u8>)> {
    let mut rng = StdRng::seed_from_u64(0x9e37_79b9_7f4a_7c15);
    let mut seeds = Vec::new();
    type Keep = fn(&replay::Summary) -> bool;
    let mut wanted: Vec<(String, Keep)> = vec![
        ("negative-delta".into(), |s| {
            s.negative_deltas > 0 && s.entries > 0
        }),
        ("failed".into(), |s| s.failed && s.entries > 0),
    ];
    for size in [512usize, 1024, 2048, 4096] {
        wanted.push((format!("random-{size}"), |s| {
            s.entries >= 2 && s.answers >= 3
        }));
    }
    for (name, keep) in wanted {
        let size = name
            .strip_prefix("random-")
            .and_then(|n| n.parse().ok())
            .unwrap_or(2048);
        for _ in 0..1_000_000 {
            let mut bytes = vec![0; size];
            rng.fill_bytes(&mut bytes);
            let Ok(input) = replay::Input::arbitrary_take_rest(Unstructured::new(&bytes)) else {
                continue;
            };
            if keep(&replay::run(&input)) {
                seeds.push((name, bytes));
                break;
            }
        }
    }
    seeds
}

/// Index files: an empty one, one knowing its whole source with hinted and
/// bare entries and a region listed with none, and one of format version 1
/// (no source).
fn index_file_seeds() -> Vec<(String, Vec<u8>)> {
    use walfetch_core::index::{
        encode_index, Hint, IdFormat, IndexEntry, IndexSource, RegionRule, WalIndex,
    };
    let mut full = WalIndex::new();
    for o in 0..20i64 {
        let hint = (o % 3 != 0).then_some(Hint {
            batch_base: o - o % 5,
            batch_len: 400,
            record_end: 61 + (o % 5) as u32 * 60,
        });
        let _ = full.push((o % 4) as u64, IndexEntry { offset: o, hint });
    }
    full.add_region(9);
    full.set_last_index(19);
    full.set_source(
        IndexSource::new("wal", 2)
            .with_topic_id(uuid_like())
            .with_first_offset(0)
            .with_rule(RegionRule::Header("region".into(), IdFormat::Decimal)),
    );
    // Version 1: the same body without the source, flags 0.
    let mut bare = full.without_hints();
    bare.set_source(IndexSource::default());
    let mut v1 = encode_index(&bare);
    v1[4] = 1;
    let n = v1.len();
    let crc = crc32c::crc32c(&v1[..n - 4]);
    v1[n - 4..].copy_from_slice(&crc.to_be_bytes());
    let greptime = br#"{"wal_topic_0": {"regions": {"4398046511104": [0, 3, 1, 7], "1": [2], "9": []}, "last_index": 12}}"#;
    vec![
        ("empty".into(), encode_index(&WalIndex::new())),
        ("full".into(), encode_index(&full)),
        ("version-1".into(), v1),
        ("greptime-json".into(), greptime.to_vec()),
    ]
}

/// One response of each API `decode_response` picks, at its highest
/// version, as `decode_response` reads them: the API's position, the
/// version's offset from the lowest it picks, then the frame's payload
/// (response header and body). The Fetch response carries a batch.
fn decode_responses_seeds() -> Result<Vec<(String, Vec<u8>)>> {
    use bytes::BytesMut;
    use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
    use kafka_protocol::messages::{
        ApiKey, ApiVersionsResponse, CreateTopicsResponse, FetchResponse, InitProducerIdResponse,
        ListOffsetsResponse, MetadataResponse, ProduceResponse, ResponseHeader,
        SaslAuthenticateResponse, SaslHandshakeResponse, TopicName,
    };
    use kafka_protocol::protocol::{Encodable, HeaderVersion, StrBytes};

    fn frame<T: Encodable + HeaderVersion>(
        pick: u8,
        api: ApiKey,
        message: &T,
    ) -> Result<(String, Vec<u8>)> {
        let (min, version) = walfetch_codec_fuzz::response_versions(api);
        let mut out = BytesMut::new();
        ResponseHeader::default()
            .with_correlation_id(1)
            .encode(&mut out, T::header_version(version))?;
        message.encode(&mut out, version)?;
        let mut seed = vec![pick, u8::try_from(version - min)?];
        seed.extend_from_slice(&out);
        Ok((format!("{api:?}-v{version}").to_lowercase(), seed))
    }
    let batch = BatchBuilder::new(100)
        .compression(Compression::Lz4)
        .encode(&records(3))?
        .bytes;
    let fetch = FetchResponse::default().with_responses(vec![FetchableTopicResponse::default()
        .with_topic(TopicName(StrBytes::from_static_str("wal")))
        .with_partitions(vec![PartitionData::default()
            .with_high_watermark(103)
            .with_records(Some(batch))])]);
    // In the order of `decode_response`'s list.
    Ok(vec![
        frame(0, ApiKey::Fetch, &fetch)?,
        frame(1, ApiKey::Metadata, &MetadataResponse::default())?,
        frame(2, ApiKey::ListOffsets, &ListOffsetsResponse::default())?,
        frame(3, ApiKey::ApiVersions, &ApiVersionsResponse::default())?,
        frame(4, ApiKey::Produce, &ProduceResponse::default())?,
        frame(
            5,
            ApiKey::InitProducerId,
            &InitProducerIdResponse::default(),
        )?,
        frame(6, ApiKey::CreateTopics, &CreateTopicsResponse::default())?,
        frame(7, ApiKey::SaslHandshake, &SaslHandshakeResponse::default())?,
        frame(
            8,
            ApiKey::SaslAuthenticate,
            &SaslAuthenticateResponse::default(),
        )?,
    ])
}

/// A fixed, non-nil topic id.
fn uuid_like() -> uuid::Uuid {
    uuid::Uuid::from_u128(0x7761_6c66_6574_6368_0000_0000_0000_0001)
}

/// RFC 7677's SCRAM-SHA-256 example (user "user", password "pencil"), as
/// `sasl_scram` reads it: the hash, server-first, a NUL, server-final; and
/// the same server refusing the proof.
fn sasl_scram_seeds() -> Vec<(String, Vec<u8>)> {
    let first = format!(
        "r={}%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
        walfetch_codec_fuzz::SCRAM_NONCE
    );
    let seed = |last: &str| [&[0u8][..], first.as_bytes(), &[0], last.as_bytes()].concat();
    vec![
        (
            "rfc7677".into(),
            seed("v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="),
        ),
        ("refused".into(), seed("e=invalid-proof")),
    ]
}

fn write(dir: &Path, seeds: &[(String, Vec<u8>)]) -> Result<()> {
    fs::create_dir_all(dir)?;
    for (name, bytes) in seeds {
        fs::write(dir.join(name), bytes)?;
    }
    println!("{}: {} seeds", dir.display(), seeds.len());
    Ok(())
}

fn main() -> Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("seeds");
    let decode = decode_seeds()?;
    write(&root.join("decode_batches"), &decode)?;
    write(&root.join("decode_batches_nocrc"), &decode)?;
    write(&root.join("encode_decode"), &encode_decode_seeds())?;
    write(&root.join("replay_core"), &replay_core_seeds())?;
    write(&root.join("index_file"), &index_file_seeds())?;
    write(&root.join("decode_responses"), &decode_responses_seeds()?)?;
    write(&root.join("sasl_scram"), &sasl_scram_seeds())?;
    Ok(())
}
