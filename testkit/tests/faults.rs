//! Every scripted fault over loopback TCP: the fault happens, then the next
//! request (on a new connection when the fault closed one) works normally.
//! Also: malformed requests close the connection without harming the broker.
#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, FetchRequest, FetchResponse, MetadataRequest, ProduceResponse,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use support::*;
use uuid::Uuid;
use walfetch_testkit::{Fault, FaultAction, ScriptedCluster};

const V: i16 = 12;

struct Setup {
    cluster: ScriptedCluster,
    id: Uuid,
}

/// Two brokers; `wal` partition 0 led by broker 1 holds offsets 0..=4 in two
/// batches.
async fn setup() -> Setup {
    let (cluster, id) = wal_cluster(2, 2, &[(3, 50), (2, 50)]).await;
    Setup { cluster, id }
}

impl Setup {
    /// Scripts `action` for the next `api` request.
    fn fault(&self, api: ApiKey, action: FaultAction) {
        self.cluster.script(Fault::on(api).then(action));
    }

    /// One record produced to `wal` partition 0 on a fresh connection to
    /// broker 1.
    async fn produce_one(&self) -> Result<ProduceResponse, ClientError> {
        let mut client = self.client(1).await;
        client
            .call(9, &produce_request("wal", 0, batch(1, 10, 0).bytes, -1))
            .await
    }

    /// A fetch from offset 0 on a fresh connection to broker 1.
    async fn fetch_fresh(&self) -> Result<FetchResponse, ClientError> {
        self.client(1).await.call(V, &self.fetch(0)).await
    }

    async fn client(&self, node_id: i32) -> RawClient {
        RawClient::connect(self.cluster.addr(node_id).expect("broker")).await
    }

    fn fetch(&self, offset: i64) -> FetchRequest {
        fetch_request(
            V,
            &[Want::new("wal", self.id, 0, offset, 1 << 20)],
            1 << 20,
            0,
        )
    }

    /// A normal fetch from offset 0 on a fresh connection to broker 1 works.
    async fn works(&self) {
        let mut client = self.client(1).await;
        let response = client
            .call(V, &self.fetch(0))
            .await
            .expect("a normal fetch");
        let p = only_partition(&response);
        assert_eq!(p.error_code, 0);
        let fetched = decode_records(p.records.as_ref().expect("records"));
        assert_eq!(fetched.offsets.len() as i64, p.high_watermark);
        assert!(
            self.cluster.pending_faults().is_empty(),
            "every fault fired"
        );
    }
}

/// A [`setup`] whose next Produce met `action`: the connection closed with
/// no answer, and `wal` partition 0 ends at `high_watermark` (`what` says
/// why).
async fn produce_closed_by(action: FaultAction, high_watermark: i64, what: &str) -> Setup {
    let s = setup().await;
    s.fault(ApiKey::Produce, action);
    let result = s.produce_one().await;
    assert!(matches!(result, Err(ClientError::Closed)), "{result:?}");
    assert_eq!(
        s.cluster.high_watermark("wal", 0).ok(),
        Some(high_watermark),
        "{what}"
    );
    s
}

#[tokio::test]
async fn drop_request_closes_without_handling() {
    let s = produce_closed_by(FaultAction::DropRequest, 5, "not appended").await;
    let response = s.produce_one().await.expect("Produce");
    assert_eq!(response.responses[0].partition_responses[0].base_offset, 5);
    s.works().await;
}

#[tokio::test]
async fn cut_before_response_handles_then_closes() {
    let s = produce_closed_by(FaultAction::CutBeforeResponse, 6, "appended, answer lost").await;
    s.works().await;
}

#[tokio::test]
async fn cut_during_response_leaves_a_truncated_frame() {
    let s = setup().await;
    s.fault(
        ApiKey::Fetch,
        FaultAction::CutDuringResponse { bytes: None },
    );
    s.fault(
        ApiKey::Fetch,
        FaultAction::CutDuringResponse { bytes: Some(2) },
    );
    let result = s.fetch_fresh().await;
    assert!(
        matches!(result, Err(ClientError::Truncated { expected, got }) if got > 0 && got < expected),
        "{result:?}"
    );
    // Cut inside the size prefix.
    let result = s.fetch_fresh().await;
    assert!(
        matches!(
            result,
            Err(ClientError::Truncated {
                expected: 4,
                got: 2
            })
        ),
        "{result:?}"
    );
    s.works().await;
}

#[tokio::test]
async fn cut_after_response_delivers_then_closes() {
    let s = setup().await;
    s.fault(ApiKey::Fetch, FaultAction::CutAfterResponse);
    let mut client = s.client(1).await;
    let response = client
        .call(V, &s.fetch(0))
        .await
        .expect("the whole response");
    assert_eq!(only_records(&response).offsets.len(), 5);
    assert!(client.is_closed().await);
    s.works().await;
}

#[tokio::test]
async fn pipelined_requests_behind_a_cut_are_lost_with_the_connection() {
    let s = setup().await;
    s.fault(ApiKey::Fetch, FaultAction::CutAfterResponse);
    let mut client = s.client(1).await;
    let first = client.send(V, &s.fetch(0)).await.expect("send");
    let second = client.send(V, &s.fetch(3)).await.expect("send");
    assert!(client.recv::<FetchRequest>(V, first).await.is_ok());
    let result = client.recv::<FetchRequest>(V, second).await;
    assert!(
        matches!(result, Err(ClientError::Closed) | Err(ClientError::Io(_))),
        "{result:?}"
    );
    s.works().await;
}

#[tokio::test]
async fn partition_errors_on_fetch_list_offsets_and_produce() {
    let s = setup().await;
    let stale = ResponseError::NotLeaderOrFollower.code();
    s.cluster.script(
        Fault::on(ApiKey::Fetch)
            .partition(0)
            .then(FaultAction::PartitionError(stale)),
    );
    s.cluster
        .script(
            Fault::on(ApiKey::ListOffsets)
                .topic("wal")
                .then(FaultAction::PartitionError(
                    ResponseError::LeaderNotAvailable.code(),
                )),
        );
    s.fault(
        ApiKey::Produce,
        FaultAction::PartitionError(ResponseError::NotEnoughReplicas.code()),
    );
    let mut client = s.client(1).await;
    let p = client.call(V, &s.fetch(0)).await.expect("Fetch");
    let p = only_partition(&p);
    assert_eq!((p.error_code, p.high_watermark), (stale, -1));
    assert_eq!(p.records.as_ref().map(Bytes::len), Some(0));

    let mut request = kafka_protocol::messages::ListOffsetsRequest::default();
    let mut t = kafka_protocol::messages::list_offsets_request::ListOffsetsTopic::default();
    t.name = TopicName(StrBytes::from_static_str("wal"));
    let mut part = kafka_protocol::messages::list_offsets_request::ListOffsetsPartition::default();
    part.timestamp = -1;
    t.partitions = vec![part];
    request.topics = vec![t];
    let response = client.call(7, &request).await.expect("ListOffsets");
    assert_eq!(
        response.topics[0].partitions[0].error_code,
        ResponseError::LeaderNotAvailable.code()
    );
    let response = client
        .call(9, &produce_request("wal", 0, batch(1, 10, 0).bytes, -1))
        .await
        .expect("Produce");
    let p = &response.responses[0].partition_responses[0];
    assert_eq!(
        (p.error_code, p.base_offset),
        (ResponseError::NotEnoughReplicas.code(), -1)
    );
    assert_eq!(
        s.cluster.high_watermark("wal", 0).ok(),
        Some(5),
        "not appended"
    );
    // The same connection goes on normally.
    let response = client.call(7, &request).await.expect("ListOffsets");
    assert_eq!(response.topics[0].partitions[0].offset, 5);
    s.works().await;
}

#[tokio::test]
async fn metadata_topic_and_partition_errors() {
    let s = setup().await;
    s.cluster
        .script(Fault::on(ApiKey::Metadata).topic("wal").partition(1).then(
            FaultAction::PartitionError(ResponseError::LeaderNotAvailable.code()),
        ));
    s.fault(
        ApiKey::Metadata,
        FaultAction::TopicError(ResponseError::TopicAuthorizationFailed.code()),
    );
    let mut client = s.client(2).await;
    let mut request = MetadataRequest::default();
    let mut wanted = MetadataRequestTopic::default();
    wanted.name = Some(TopicName(StrBytes::from_static_str("wal")));
    request.topics = Some(vec![wanted]);
    let response = client.call(12, &request).await.expect("Metadata");
    let parts: Vec<_> = response.topics[0]
        .partitions
        .iter()
        .map(|p| (p.error_code, p.leader_id.0))
        .collect();
    assert_eq!(
        parts,
        vec![(0, 1), (ResponseError::LeaderNotAvailable.code(), -1)]
    );
    let response = client.call(12, &request).await.expect("Metadata");
    assert_eq!(
        response.topics[0].error_code,
        ResponseError::TopicAuthorizationFailed.code()
    );
    assert!(response.topics[0].partitions.is_empty());
    let response = client.call(12, &request).await.expect("Metadata");
    assert_eq!(response.topics[0].error_code, 0);
    assert_eq!(response.topics[0].partitions.len(), 2);
    s.works().await;
}

#[tokio::test]
async fn response_errors_at_the_top_level_where_there_is_one() {
    let s = setup().await;
    let code = ResponseError::UnknownServerError.code();
    s.fault(ApiKey::ApiVersions, FaultAction::ResponseError(code));
    s.cluster.script(
        Fault::on(ApiKey::Fetch)
            .times(2)
            .then(FaultAction::ResponseError(code)),
    );
    let mut client = s.client(1).await;
    let response = client
        .call(3, &ApiVersionsRequest::default())
        .await
        .expect("ApiVersions");
    assert_eq!(response.error_code, code);
    // Fetch v12 has a top-level error code.
    let response = client.call(V, &s.fetch(0)).await.expect("Fetch");
    assert_eq!(response.error_code, code);
    assert!(response.responses.is_empty());
    // Fetch v4 has none: every partition gets it.
    let request = fetch_request(4, &[Want::new("wal", s.id, 0, 0, 1 << 20)], 1 << 20, 0);
    let response = client.call(4, &request).await.expect("Fetch");
    assert_eq!(only_partition(&response).error_code, code);
    s.works().await;
}

#[tokio::test]
async fn move_leader_then_old_leader_refuses() {
    let s = setup().await;
    s.cluster.script(
        Fault::on(ApiKey::Fetch)
            .broker(1)
            .then(FaultAction::MoveLeader { to: 2 }),
    );
    let mut one = s.client(1).await;
    let response = one.call(V, &s.fetch(0)).await.expect("Fetch");
    assert_eq!(
        only_partition(&response).error_code,
        ResponseError::NotLeaderOrFollower.code()
    );
    let leader = s.cluster.leader("wal", 0).expect("leader");
    assert_eq!((leader.node_id, leader.epoch), (2, 1));
    assert_eq!(
        s.cluster.leader("wal", 1).map(|l| l.epoch).ok(),
        Some(0),
        "only the named partition moved"
    );
    // The new leader serves; Metadata says so.
    let mut two = s.client(2).await;
    let response = two.call(V, &s.fetch(0)).await.expect("Fetch");
    assert_eq!(only_records(&response).offsets.len(), 5);
    let meta = two.call(12, &MetadataRequest::default()).await;
    assert!(meta.is_ok());
    let mut request = MetadataRequest::default();
    request.topics = None;
    let meta = two.call(12, &request).await.expect("Metadata");
    let p0 = &meta.topics[0].partitions[0];
    assert_eq!((p0.leader_id.0, p0.leader_epoch), (2, 1));
    // Move it back and broker 1 works again.
    s.cluster.move_leader("wal", 0, 1).expect("move back");
    s.works().await;
}

#[tokio::test(start_paused = true)]
async fn delay_uses_tokio_time() {
    let s = setup().await;
    let delay = Duration::from_secs(3600);
    s.fault(ApiKey::Fetch, FaultAction::Delay(delay));
    let mut client = s.client(1).await;
    let started = tokio::time::Instant::now();
    let response = client.call(V, &s.fetch(0)).await.expect("Fetch");
    assert!(
        started.elapsed() >= delay,
        "paused time advanced past the delay"
    );
    assert_eq!(only_partition(&response).error_code, 0);
    // A client-side timeout shorter than the delay fires first.
    s.fault(ApiKey::Fetch, FaultAction::Delay(delay));
    let timed = tokio::time::timeout(Duration::from_secs(5), client.call(V, &s.fetch(0))).await;
    assert!(timed.is_err(), "the client's deadline wins");
    s.works().await;
}

#[tokio::test]
async fn truncated_frame_claims_more_than_it_sends() {
    let s = setup().await;
    s.fault(
        ApiKey::Metadata,
        FaultAction::TruncatedFrame { missing: 100 },
    );
    let mut client = s.client(1).await;
    let result = client.call(12, &MetadataRequest::default()).await;
    assert!(
        matches!(result, Err(ClientError::Truncated { expected, got }) if expected == got + 100),
        "{result:?}"
    );
    s.works().await;
}

#[tokio::test]
async fn oversized_frames_two_gib_negative_and_one_gib() {
    let s = setup().await;
    for length in [0x8000_0000u32, 0xFFFF_FFFF, 0x4000_0000] {
        s.fault(ApiKey::Fetch, FaultAction::OversizedFrame { length });
        let result = s.fetch_fresh().await;
        assert!(
            matches!(result, Err(ClientError::BadSize(l)) if l == length),
            "{result:?}"
        );
    }
    s.works().await;
}

#[tokio::test]
async fn faults_fire_n_times_on_the_matching_broker_only() {
    let s = setup().await;
    s.cluster.move_leader("wal", 1, 2).expect("noop move"); // partition 1: broker 2, epoch 1
    s.cluster.script(
        Fault::on(ApiKey::Metadata)
            .broker(2)
            .times(2)
            .then(FaultAction::CutBeforeResponse),
    );
    let mut one = s.client(1).await;
    for _ in 0..3 {
        assert!(
            one.call(12, &MetadataRequest::default()).await.is_ok(),
            "broker 1 untouched"
        );
    }
    for _ in 0..2 {
        let mut two = s.client(2).await;
        assert!(two.call(12, &MetadataRequest::default()).await.is_err());
    }
    let mut two = s.client(2).await;
    assert!(two.call(12, &MetadataRequest::default()).await.is_ok());
    assert_eq!(s.cluster.stats(2).map(|st| st.connections), Some(3));
    s.fault(ApiKey::Fetch, FaultAction::DropRequest);
    assert_eq!(s.cluster.pending_faults().len(), 1);
    s.cluster.clear_faults();
    s.works().await;
}

#[tokio::test]
async fn malformed_requests_close_the_connection_only() {
    let s = setup().await;
    let garbage: Vec<Vec<u8>> = vec![
        // Negative size prefix.
        vec![0xff, 0xff, 0xff, 0xfe],
        // Size larger than the broker accepts.
        0x7fff_ffffu32.to_be_bytes().to_vec(),
        // A frame shorter than a request header.
        vec![0, 0, 0, 3, 0, 1, 0],
        // Unknown API key 999.
        vec![0, 0, 0, 10, 0x03, 0xe7, 0, 0, 0, 0, 0, 1, 0xff, 0xff],
        // Fetch v3: not served.
        vec![0, 0, 0, 10, 0, 1, 0, 3, 0, 0, 0, 1, 0xff, 0xff],
        // Fetch v12 with a body of garbage.
        vec![
            0, 0, 0, 14, 0, 1, 0, 12, 0, 0, 0, 1, 0xff, 0xff, 0, 0x7f, 0x7f, 0x7f,
        ],
        // Metadata v1 whose topic array claims 16 million topics.
        vec![
            0, 0, 0, 14, 0, 3, 0, 1, 0, 0, 0, 1, 0xff, 0xff, 0x00, 0xff, 0xff, 0xff,
        ],
    ];
    for bytes in garbage {
        let mut client = s.client(1).await;
        client.send_raw(&bytes).await.expect("send");
        assert!(client.is_closed().await, "closed after {bytes:?}");
    }
    s.works().await;
    assert_eq!(
        s.cluster.stats(1).map(|st| st.total_requests()),
        Some(1),
        "only the good fetch counted"
    );
}

#[tokio::test(start_paused = true)]
async fn throttle_delays_and_sets_throttle_time() {
    let s = setup().await;
    let delay = Duration::from_millis(250);
    s.fault(ApiKey::Fetch, FaultAction::Throttle(delay));
    let mut client = s.client(1).await;
    let started = tokio::time::Instant::now();
    let response = client.call(V, &s.fetch(0)).await.expect("Fetch");
    assert!(started.elapsed() >= delay);
    assert_eq!(response.throttle_time_ms, 250);
    assert_eq!(only_records(&response).batches, vec![0, 3]);
    s.works().await;
}

#[tokio::test(start_paused = true)]
async fn throttle_time_answers_at_once_with_the_throttle_time_set() {
    let s = setup().await;
    s.cluster.script(
        Fault::on(ApiKey::Fetch).then(FaultAction::ThrottleTime(Duration::from_millis(400))),
    );
    let mut client = s.client(1).await;
    let started = tokio::time::Instant::now();
    let response = client.call(V, &s.fetch(0)).await.expect("Fetch");
    assert_eq!(
        started.elapsed(),
        Duration::ZERO,
        "answered at once (KIP-219)"
    );
    assert_eq!(response.throttle_time_ms, 400);
    assert_eq!(only_records(&response).batches, vec![0, 3]);
    // The connection is not muted: the next request is answered at once.
    let response = client.call(V, &s.fetch(0)).await.expect("Fetch");
    assert_eq!(response.throttle_time_ms, 0);
    assert_eq!(started.elapsed(), Duration::ZERO);
    s.works().await;
}

#[tokio::test]
async fn corrupt_records_fail_their_crc_and_truncated_records_end_early() {
    let s = setup().await;
    s.fault(ApiKey::Fetch, FaultAction::CorruptRecords);
    let mut client = s.client(1).await;
    let response = client.call(V, &s.fetch(0)).await.expect("Fetch");
    let records = only_partition(&response).records.clone().unwrap();
    let first = walfetch_codec::Batches::new(records, walfetch_codec::DecodeOptions::default())
        .next()
        .expect("a batch");
    assert!(first.is_err(), "the CRC no longer matches");

    s.fault(ApiKey::Fetch, FaultAction::TruncateRecords { keep: 70 });
    let response = client.call(V, &s.fetch(0)).await.expect("Fetch");
    let fetched = only_records(&response);
    assert_eq!((fetched.len, fetched.batches.len()), (70, 0));
    assert_eq!(fetched.partial.map(|p| p.1), Some(70));
    s.works().await;
}

#[tokio::test]
async fn patch_frame_overwrites_the_response_where_told() {
    let s = setup().await;
    // Fetch v12 is flexible: length, correlation id, tagged fields, then
    // throttle_time_ms at byte 9.
    s.fault(
        ApiKey::Fetch,
        FaultAction::PatchFrame {
            at: 9,
            bytes: 77i32.to_be_bytes().to_vec(),
        },
    );
    let mut client = s.client(1).await;
    let response = client.call(V, &s.fetch(0)).await.expect("Fetch");
    assert_eq!(response.throttle_time_ms, 77);
    // Past the frame's end: nothing happens.
    s.fault(
        ApiKey::Fetch,
        FaultAction::PatchFrame {
            at: usize::MAX - 1,
            bytes: vec![1, 2, 3],
        },
    );
    let response = client.call(V, &s.fetch(0)).await.expect("Fetch");
    assert_eq!(response.throttle_time_ms, 0);
    s.works().await;
}
