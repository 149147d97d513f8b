//! Batches walfetch's codec encodes, with every compression (and both
//! snappy framings), decode in an independent client: librdkafka 2.16.0
//! through the confluent-kafka Python package, reading them back from the
//! real brokers (Apache Kafka and Tansu) with CRC checks on.
//!
//! Needs `python3` with `confluent-kafka` at the version pinned in
//! `scripts/requirements-test.txt` (`scripts/setup-python.sh` installs it;
//! scripts/test.sh runs that).
#![allow(clippy::unwrap_used)]

use walfetch_support::broker::TestBroker;
use walfetch_support::librdkafka::require_confluent_kafka;
use walfetch_support::on_brokers;
use walfetch_support::EVERY_CODEC;

use std::process::Command;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use bytes::Bytes;
use serde_json::{json, Value};
use walfetch::codec::{BatchBuilder, NewRecord};

fn records(seed: usize) -> Vec<NewRecord> {
    (0..25)
        .map(|i| NewRecord {
            offset_delta: i,
            timestamp: 1_700_000_000_000 + i64::from(i),
            key: (i % 4 != 1).then(|| Bytes::from(format!("key-{seed}-{i}"))),
            value: (i % 9 != 4)
                .then(|| Bytes::from(format!("value {seed} {i} {}", "z".repeat(i as usize * 37)))),
            headers: if i % 3 == 0 {
                vec![
                    (Bytes::from_static(b"h"), Some(Bytes::from(i.to_string()))),
                    (Bytes::from_static(b"null"), None),
                ]
            } else {
                vec![]
            },
        })
        .collect()
}

fn as_json(base: i64, r: &NewRecord) -> Value {
    let b64 = |v: &Option<Bytes>| {
        v.as_ref()
            .map_or(Value::Null, |b| Value::String(BASE64.encode(b)))
    };
    json!({
        "offset": base + i64::from(r.offset_delta),
        "timestamp": r.timestamp,
        "key": b64(&r.key),
        "value": b64(&r.value),
        "headers": r.headers.iter().map(|(k, v)| json!([String::from_utf8_lossy(k), b64(v)])).collect::<Vec<_>>(),
    })
}

async fn librdkafka_reads_what_walfetch_encodes(broker: &TestBroker) {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/scripts/fixtures/librdkafka_consume.py"
    );
    require_confluent_kafka();
    for (i, (codec, framing)) in EVERY_CODEC.into_iter().enumerate() {
        let topic = broker.topic(&format!("ours-{codec}-{i}"));
        let cluster = broker.cluster_with_topic(&topic, 1).await;
        let mut want = Vec::new();
        for b in 0..3 {
            let batch = records(b);
            let encoded = BatchBuilder::new(0)
                .compression(codec)
                .snappy_framing(framing)
                .encode(&batch)
                .expect("encode");
            let base = cluster
                .produce(&topic, 0, encoded.bytes)
                .await
                .expect("produce");
            want.extend(batch.iter().map(|r| as_json(base, r)));
        }
        let out = Command::new("python3")
            .args([script, &broker.address(), &topic, &want.len().to_string()])
            .output()
            .expect("run python3");
        assert!(
            out.status.success(),
            "{codec} {framing:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let got: Vec<Value> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).expect("JSON line"))
            .collect();
        assert_eq!(got, want, "{codec} {framing:?}");
    }
}

on_brokers!(librdkafka_reads_what_walfetch_encodes);
