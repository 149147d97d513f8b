//! Produce: every version fetched back, and its errors.

use crate::common::*;

#[tokio::test]
async fn produce_every_version_then_fetch_back() {
    let cluster = ScriptedCluster::start(1).await.expect("start");
    let topic_id = cluster.create_topic("wal", 1).expect("create");
    let mut client = RawClient::connect(cluster.addr(1).expect("addr")).await;
    let mut expected_base = 0;
    let mut written = Vec::new();
    for (i, version) in (3..=9).enumerate() {
        let compression = Compression::ALL[i % Compression::ALL.len()];
        let batch = batch_with(3, 20, 1000, compression);
        let response = client
            .call(version, &produce_request("wal", 0, batch.bytes.clone(), -1))
            .await
            .unwrap_or_else(|e| panic!("Produce v{version}: {e:?}"));
        let p = &response.responses[0].partition_responses[0];
        assert_eq!(
            (p.error_code, p.base_offset),
            (0, expected_base),
            "v{version}"
        );
        if version >= 5 {
            assert_eq!(p.log_start_offset, 0);
        }
        written.extend(expected_base..expected_base + 3);
        expected_base += 3;
    }
    // Two uncompressed batches in one request: consecutive offsets.
    let mut two = batch(2, 10, 0).bytes.to_vec();
    two.extend_from_slice(&batch(1, 10, 0).bytes);
    let response = client
        .call(9, &produce_request("wal", 0, two.into(), 1))
        .await
        .expect("Produce");
    assert_eq!(response.responses[0].partition_responses[0].base_offset, 21);
    written.extend(21..24);
    assert_eq!(cluster.high_watermark("wal", 0).ok(), Some(24));

    // acks = 0: no response; the next request's response comes next.
    let id = client
        .send(7, &produce_request("wal", 0, batch(1, 10, 0).bytes, 0))
        .await
        .expect("send");
    let meta = client.call(9, &MetadataRequest::default()).await;
    assert!(meta.is_ok(), "the acks=0 produce got no response: {meta:?}");
    assert!(id > 0);
    written.push(24);

    for version in [4, 11, 12, 13, 17] {
        let request = fetch_request(
            version,
            &[Want::new("wal", topic_id, 0, 0, 1 << 20)],
            1 << 20,
            0,
        );
        let response = client.call(version, &request).await.expect("Fetch");
        let p = only_partition(&response);
        assert_eq!(p.error_code, 0);
        assert_eq!(p.high_watermark, 25);
        let fetched = decode_records(p.records.as_ref().expect("records"));
        assert_eq!(fetched.offsets, written, "Fetch v{version}");
        assert_eq!(fetched.partial, None);
    }
}

#[tokio::test]
async fn produce_errors() {
    let cluster = ScriptedCluster::start(2).await.expect("start");
    cluster.create_topic("wal", 2).expect("create");
    let mut client = RawClient::connect(cluster.addr(1).expect("addr")).await;
    let good = batch(2, 10, 0).bytes;
    let mut corrupt = good.to_vec();
    let last = corrupt.len() - 1;
    corrupt[last] ^= 1;
    let marker = BatchBuilder::new(0)
        .producer(5, 0, -1)
        .encode_marker(ControlType::Commit, 0, 0)
        .expect("marker")
        .bytes;
    let mut two_compressed = batch_with(2, 10, 0, Compression::Lz4).bytes.to_vec();
    two_compressed.extend_from_slice(&batch_with(2, 10, 0, Compression::Lz4).bytes);
    let cases: Vec<(&str, ProduceRequest, i16)> = vec![
        (
            "not the leader",
            produce_request("wal", 1, good.clone(), -1),
            code(ResponseError::NotLeaderOrFollower),
        ),
        (
            "unknown partition",
            produce_request("wal", 7, good.clone(), -1),
            code(ResponseError::UnknownTopicOrPartition),
        ),
        (
            "unknown topic",
            produce_request("nope", 0, good.clone(), -1),
            code(ResponseError::UnknownTopicOrPartition),
        ),
        (
            "bad CRC",
            produce_request("wal", 0, corrupt.into(), -1),
            code(ResponseError::CorruptMessage),
        ),
        (
            "partial batch",
            produce_request("wal", 0, good.slice(..good.len() - 3), -1),
            code(ResponseError::CorruptMessage),
        ),
        (
            "control batch",
            produce_request("wal", 0, marker, -1),
            code(ResponseError::InvalidRecord),
        ),
        (
            "two compressed batches",
            produce_request("wal", 0, two_compressed.into(), -1),
            code(ResponseError::InvalidRecord),
        ),
        (
            "empty records",
            produce_request("wal", 0, Bytes::new(), -1),
            code(ResponseError::InvalidRecord),
        ),
        (
            "acks = 2",
            produce_request("wal", 0, good.clone(), 2),
            code(ResponseError::InvalidRequiredAcks),
        ),
    ];
    for (what, request, expected) in cases {
        let response = client.call(9, &request).await.expect("Produce");
        let p = &response.responses[0].partition_responses[0];
        assert_eq!((p.error_code, p.base_offset), (expected, -1), "{what}");
    }
    assert_eq!(
        cluster.high_watermark("wal", 0).ok(),
        Some(0),
        "nothing appended"
    );
}
