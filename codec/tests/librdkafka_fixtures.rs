//! Batches written by an independent client, librdkafka 2.16.0, with every
//! compression codec decode to exactly what librdkafka itself read back.
//! See `tests/fixtures/librdkafka/README.md` for how they were made.
#![allow(clippy::unwrap_used)]

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use bytes::Bytes;
use serde_json::{json, Value};
use walfetch_codec::{Batches, Compression, DecodeOptions};

fn b64(v: Option<&[u8]>) -> Value {
    v.map_or(Value::Null, |b| Value::String(BASE64.encode(b)))
}

#[test]
fn every_codec_decodes_to_what_librdkafka_read() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/librdkafka");
    for codec in Compression::ALL {
        let records = std::fs::read(dir.join(format!("{codec}.records"))).expect("fixture");
        let expected: Vec<Value> =
            std::fs::read_to_string(dir.join(format!("{codec}.expected.jsonl")))
                .expect("expected")
                .lines()
                .map(|l| serde_json::from_str(l).expect("JSON"))
                .collect();
        let mut batches = Batches::new(Bytes::from(records), DecodeOptions::default());
        let mut got = Vec::new();
        let mut codecs = Vec::new();
        for batch in &mut batches {
            let batch = batch.unwrap_or_else(|e| panic!("{codec}: {e}"));
            codecs.push(batch.compression());
            for record in batch.records().expect("records") {
                let r = record.unwrap_or_else(|e| panic!("{codec}: {e}"));
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
        assert!(batches.partial().is_none(), "{codec}");
        assert_eq!(codecs.len(), 7, "{codec}: batch shapes");
        assert!(codecs.iter().all(|&c| c == codec), "{codec}: {codecs:?}");
        assert_eq!(got.len(), 47, "{codec}");
        assert_eq!(got, expected, "{codec}");
    }
}
