//! Batches written by independent clients decode to exactly what those
//! clients read back, and the codec's own batches decode in them.
//!
//! - librdkafka 2.16.0, every compression codec, written through a real
//!   broker (`tests/fixtures/librdkafka/README.md` says how).
//! - kafka-python 3.0, a pure-Python encoder with its own framing of every
//!   codec, offset gaps as compaction leaves them, producer state and
//!   transactional batches (`tests/fixtures/kafka-python/README.md`); and
//!   kafka-python's decoder reading the codec's batches, CRCs checked.
//!
//! The kafka-python round trip needs `python3` with the packages pinned in
//! `scripts/requirements-test.txt` (`scripts/setup-python.sh` installs them;
//! scripts/test.sh runs it).
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use bytes::Bytes;
use serde_json::{json, Value};
use walfetch_codec::{
    BatchBuilder, BatchHeader, Batches, Compression, DecodeOptions, NewRecord, SnappyFraming,
};

fn b64(v: Option<&[u8]>) -> Value {
    v.map_or(Value::Null, |b| Value::String(BASE64.encode(b)))
}

fn fixtures(writer: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(writer)
}

fn read_jsonl(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON"))
        .collect()
}

/// Every record of `records` in the JSON shape `walfetch dump` prints, and
/// every batch's header, with CRCs checked and no partial batch left over.
fn decode(records: Vec<u8>, what: &str) -> (Vec<Value>, Vec<BatchHeader>) {
    let mut batches = Batches::new(Bytes::from(records), DecodeOptions::default());
    let mut got = Vec::new();
    let mut headers = Vec::new();
    for batch in &mut batches {
        let batch = batch.unwrap_or_else(|e| panic!("{what}: {e}"));
        headers.push(*batch.header());
        for record in batch.records().expect("records") {
            let r = record.unwrap_or_else(|e| panic!("{what}: {e}"));
            let headers: Vec<Value> = r
                .headers()
                .map(|h| json!([String::from_utf8_lossy(h.key), b64(h.value)]))
                .collect();
            got.push(json!({
                "offset": r.offset(),
                "timestamp": r.timestamp(),
                "key": b64(r.key()),
                "value": b64(r.value()),
                "headers": headers,
            }));
        }
    }
    assert!(batches.partial().is_none(), "{what}: a partial batch");
    (got, headers)
}

/// A batch header's fields in the shape the kafka-python script prints.
fn header_json(h: &BatchHeader) -> Value {
    json!({
        "base_offset": h.base_offset,
        "last_offset": h.last_offset(),
        "compression": h.attributes.compression_id(),
        "transactional": h.is_transactional(),
        "control": h.is_control(),
        "producer_id": h.producer_id,
        "producer_epoch": h.producer_epoch,
        "base_sequence": h.base_sequence,
        "record_count": h.record_count,
        "first_timestamp": h.base_timestamp,
        "max_timestamp": h.max_timestamp,
    })
}

/// `writer`'s fixture for `codec`: its records as decoded here, its
/// batches' headers, and the records as `writer` read them back.
fn decode_fixture(writer: &str, codec: Compression) -> (Vec<Value>, Vec<BatchHeader>, Vec<Value>) {
    let dir = fixtures(writer);
    let records = std::fs::read(dir.join(format!("{codec}.records"))).expect("fixture");
    let expected = read_jsonl(&dir.join(format!("{codec}.expected.jsonl")));
    let (got, headers) = decode(records, &format!("{writer} {codec}"));
    (got, headers, expected)
}

#[test]
fn every_codec_decodes_to_what_librdkafka_read() {
    for codec in Compression::ALL {
        let (got, headers, expected) = decode_fixture("librdkafka", codec);
        assert_eq!(headers.len(), 7, "{codec}: batch shapes");
        assert!(
            headers.iter().all(|h| h.compression() == Some(codec)),
            "{codec}: {headers:?}"
        );
        assert_eq!(got.len(), 47, "{codec}");
        assert_eq!(got, expected, "{codec}");
    }
}

#[test]
fn every_codec_decodes_to_what_kafka_python_read() {
    for codec in Compression::ALL {
        let (got, headers, expected) = decode_fixture("kafka-python", codec);
        let expected_batches =
            read_jsonl(&fixtures("kafka-python").join(format!("{codec}.batches.jsonl")));
        assert_eq!(got.len(), 33, "{codec}");
        assert_eq!(got, expected, "{codec}");
        let headers: Vec<Value> = headers.iter().map(header_json).collect();
        assert_eq!(headers, expected_batches, "{codec}");
        // kafka-python sends a batch uncompressed where compressing does
        // not make it smaller; the three larger batches are compressed.
        let compressed = headers
            .iter()
            .filter(|h| h["compression"] == json!(codec.id()))
            .count();
        assert!(codec == Compression::None || compressed == 3, "{codec}");
    }
}

/// Batches of every shape the codec writes: offset gaps, null keys, values
/// and header values, producer state, a transactional batch, and a large
/// batch spanning several compression blocks.
fn our_batches(codec: Compression, framing: SnappyFraming) -> (Vec<u8>, Vec<Value>) {
    let mut out = Vec::new();
    let mut want = Vec::new();
    let mut base = 0i64;
    for b in 0..4u8 {
        let (count, size) = if b == 3 { (3, 150_000) } else { (25, 40) };
        let records: Vec<NewRecord> = (0..count)
            .map(|i| NewRecord {
                offset_delta: i * if b == 1 { 3 } else { 1 },
                timestamp: 1_700_000_000_000 + i64::from(i) * if b == 2 { -1 } else { 1 },
                key: (i % 4 != 1).then(|| Bytes::from(format!("key-{b}-{i}"))),
                value: (i % 9 != 4).then(|| {
                    let text = format!("value {b} {i} ").repeat(size / 10);
                    Bytes::from(text)
                }),
                headers: if i % 3 == 0 {
                    vec![
                        (Bytes::from_static(b"h"), Some(Bytes::from(i.to_string()))),
                        (Bytes::from_static(b"null"), None),
                    ]
                } else {
                    vec![]
                },
            })
            .collect();
        let mut builder = BatchBuilder::new(base)
            .compression(codec)
            .snappy_framing(framing);
        if b >= 1 {
            builder = builder.producer(9000, 2, i32::from(b) * 100);
        }
        let encoded = builder
            .transactional(b == 2)
            .encode(&records)
            .expect("encode");
        out.extend_from_slice(&encoded.bytes);
        for r in &records {
            want.push(json!({
                "offset": base + i64::from(r.offset_delta),
                "timestamp": r.timestamp,
                "key": b64(r.key.as_deref()),
                "value": b64(r.value.as_deref()),
                "headers": r.headers.iter()
                    .map(|(k, v)| json!([String::from_utf8_lossy(k), b64(v.as_deref())]))
                    .collect::<Vec<_>>(),
            }));
        }
        base += i64::from(records.last().expect("records").offset_delta) + 1;
    }
    (out, want)
}

#[test]
fn kafka_python_reads_what_the_codec_encodes() {
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/fixtures/kafka_python_batches.py");
    let probe = Command::new("python3")
        .args(["-c", "import kafka, lz4, snappy, zstandard"])
        .status();
    assert!(
        probe.is_ok_and(|s| s.success()),
        "this test needs python3 with kafka-python and its codecs: `scripts/setup-python.sh` installs the pinned versions (scripts/test.sh runs it)"
    );
    let dir = std::env::temp_dir().join(format!("walfetch-kafka-python-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    // Every codec, and snappy in both framings.
    let cases = Compression::ALL
        .into_iter()
        .map(|codec| (codec, SnappyFraming::Xerial))
        .chain([(Compression::Snappy, SnappyFraming::Raw)]);
    for (codec, framing) in cases {
        let (bytes, want) = our_batches(codec, framing);
        let file = dir.join(format!("{codec}-{framing:?}.records"));
        std::fs::write(&file, &bytes).expect("write batches");
        let out = Command::new("python3")
            .arg(&script)
            .arg("--read")
            .arg(&file)
            .output()
            .expect("run python3");
        assert!(
            out.status.success(),
            "{codec} {framing:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let read: Value = serde_json::from_slice(&out.stdout).expect("JSON");
        assert_eq!(read["records"], Value::Array(want), "{codec} {framing:?}");
        let (_, ours) = decode(bytes, &format!("ours {codec}"));
        let ours: Vec<Value> = ours.iter().map(header_json).collect();
        assert_eq!(read["batches"], Value::Array(ours), "{codec} {framing:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
