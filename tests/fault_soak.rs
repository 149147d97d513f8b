//! The fault soak, short: a few hundred faults against the scripted
//! broker, for CI (`support/src/soak/mod.rs` says what it does and checks). The
//! long soak is `cargo run --release --example soak -- --faults 10000`.
//! `SOAK_FAULTS` and `SOAK_SEED` change the length and the seed here too.
#![allow(clippy::unwrap_used)]

use walfetch_support::soak;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_fault_soak_loses_duplicates_and_mixes_up_nothing() {
    let mut config = soak::SoakConfig::default();
    if let Some(n) = std::env::var("SOAK_FAULTS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        config.faults = n;
    }
    if let Some(seed) = std::env::var("SOAK_SEED").ok().and_then(|v| v.parse().ok()) {
        config.seed = seed;
    }
    let report = soak::run(config).await;
    println!("{}", report.to_json());
    assert!(
        report.violations.is_empty(),
        "{:#}",
        serde_json::json!(report.violations)
    );
    assert!(
        report.faults_fired() >= config.faults,
        "{}",
        report.to_json()
    );
    assert!(report.entries_checked > 0);
}

/// The soak's `PatchFrame` faults aim at fields of a Fetch v11 response of
/// one topic "wal" (the version walfetch negotiates with the scripted
/// broker): check the offsets they use against the encoding.
#[test]
fn the_patched_offsets_are_the_fields_they_claim() {
    use bytes::{BufMut, Bytes, BytesMut};
    use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
    use kafka_protocol::messages::{FetchResponse, TopicName};
    use kafka_protocol::protocol::{Encodable, StrBytes};

    let records = Bytes::from_static(&[0xAB; 80]);
    let mut partition = PartitionData::default();
    partition.partition_index = 0x0102_0304;
    partition.aborted_transactions = None;
    partition.records = Some(records);
    let mut topic = FetchableTopicResponse::default();
    topic.topic = TopicName(StrBytes::from_static_str("wal"));
    topic.partitions = vec![partition];
    let mut response = FetchResponse::default();
    response.responses = vec![topic];
    let mut frame = BytesMut::new();
    frame.put_i32(0); // length
    frame.put_i32(7); // correlation id (header v0)
    response.encode(&mut frame, 11).unwrap();
    let at = |i: usize, n: usize| frame[i..i + n].to_vec();
    assert_eq!(at(18, 4), 1i32.to_be_bytes(), "responses count");
    assert_eq!(at(22, 2), 3i16.to_be_bytes(), "topic name length");
    assert_eq!(at(27, 4), 1i32.to_be_bytes(), "partitions count");
    assert_eq!(at(31, 4), 0x0102_0304i32.to_be_bytes(), "partition index");
    assert_eq!(
        at(61, 4),
        (-1i32).to_be_bytes(),
        "aborted transactions count"
    );
    assert_eq!(at(69, 4), 80i32.to_be_bytes(), "records length");
    assert_eq!(at(73, 1), [0xAB], "records");
    // 81 is the first batch's batchLength (records + 8).
}
