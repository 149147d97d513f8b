//! Unit tests of Fetch: the request built, the records as views of the
//! frame, each partition's answer, waits after omissions, errors.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::TopicName;

use crate::error_code::ErrorCode;
use kafka_protocol::messages::fetch_response::{self, FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::{FetchRequest, ProducerId};
use kafka_protocol::protocol::Encodable;
use walfetch_codec::AbortedTransaction;

use super::*;
use crate::connection::guard::decode_response;

fn response(records: &'static [u8], error: i16) -> FetchResponse {
    FetchResponse::default().with_responses(vec![FetchableTopicResponse::default()
        .with_topic(TopicName(StrBytes::from_static_str("t")))
        .with_partitions(vec![PartitionData::default()
            .with_partition_index(3)
            .with_error_code(error)
            .with_high_watermark(100)
            .with_aborted_transactions(Some(vec![fetch_response::AbortedTransaction::default()
                .with_producer_id(ProducerId(9))
                .with_first_offset(40)]))
            .with_records(Some(Bytes::from_static(records)))])])
}

#[test]
fn request_names_partition_and_limits() {
    let params = FetchParams::new("t", 3, 42)
        .with_max_bytes(300)
        .with_isolation(IsolationLevel::ReadCommitted);
    let r = fetch_request(&params, 5, Uuid::nil(), 11);
    assert_eq!(
        (r.max_bytes, r.isolation_level, r.session_epoch),
        (300, 1, -1)
    );
    let p = &r.topics[0].partitions[0];
    assert_eq!(
        (
            p.partition,
            p.fetch_offset,
            p.partition_max_bytes,
            p.current_leader_epoch
        ),
        (3, 42, 300, 5)
    );
    assert_eq!(
        fetch_request(&params, 5, Uuid::nil(), 8).topics[0].partitions[0].current_leader_epoch,
        -1
    );
    let id = Uuid::from_u128(7);
    let r13 = fetch_request(&params, 5, id, 13);
    assert_eq!(r13.topics[0].topic_id, id);
}

/// The records handed out are a view of the decoded frame, not a copy.
#[test]
fn records_are_a_view_of_the_frame() {
    let mut buf = BytesMut::new();
    response(b"batch bytes", 0)
        .encode(&mut buf, 11)
        .expect("encodes");
    let frame = buf.freeze();
    let range = frame.as_ptr() as usize..frame.as_ptr() as usize + frame.len();
    let decoded = decode_response::<FetchRequest>(11, frame.clone()).expect("decodes");
    let fetched = read_fetch_response(
        &FetchParams::new("t", 3, 0),
        Uuid::nil(),
        "b:1",
        Response {
            body: decoded,
            version: 11,
            correlation_id: 1,
            wire_bytes: frame.len() + 4,
        },
    )
    .expect("partition");
    assert_eq!(&fetched.records[..], b"batch bytes");
    assert!(range.contains(&(fetched.records.as_ptr() as usize)));
    assert_eq!(
        fetched.aborted_transactions,
        vec![AbortedTransaction {
            first_offset: 40,
            producer_id: 9
        }]
    );
    assert_eq!(fetched.high_watermark, 100);
}

/// A broker may order a response's partitions otherwise than the
/// request, split a topic over two entries, or add a partition not
/// asked for: each partition asked for gets its own answer, by topic
/// and partition, never by position.
#[test]
fn each_partition_gets_its_own_answer_whatever_the_order() {
    let part = |index: i32, hw: i64| {
        PartitionData::default()
            .with_partition_index(index)
            .with_high_watermark(hw)
            .with_records(Some(Bytes::from(format!("records of {index}"))))
    };
    let topic = |name: &'static str, partitions| {
        FetchableTopicResponse::default()
            .with_topic(TopicName(StrBytes::from_static_str(name)))
            .with_partitions(partitions)
    };
    let body = FetchResponse::default().with_responses(vec![
        topic("t", vec![part(9, 900), part(2, 200)]),
        topic("u", vec![part(1, 10)]),
        topic("t", vec![part(1, 100)]),
    ]);
    let params = [
        FetchParams::new("t", 1, 0),
        FetchParams::new("u", 1, 0),
        FetchParams::new("t", 2, 0),
    ];
    let targets: Vec<FetchTarget<'_>> = params
        .iter()
        .map(|params| FetchTarget {
            params,
            leader_epoch: -1,
            topic_id: Uuid::nil(),
        })
        .collect();
    let response = Response {
        body,
        version: 11,
        correlation_id: 1,
        wire_bytes: 0,
    };
    let picked = read_fetch_response_for(&targets, "b:1", response).expect("response");
    let got: Vec<(i64, Bytes)> = picked
        .into_iter()
        .map(|p| p.map(|f| (f.high_watermark, f.records)).expect("answered"))
        .collect();
    assert_eq!(
        got,
        vec![
            (100, Bytes::from_static(b"records of 1")),
            (10, Bytes::from_static(b"records of 1")),
            (200, Bytes::from_static(b"records of 2")),
        ]
    );
}

#[test]
fn waits_after_omissions_double_from_10_ms_up_to_500_ms() {
    let waits: Vec<u128> = (1..=MAX_CONSECUTIVE_OMISSIONS)
        .map(|n| wait_after_omissions(n).as_millis())
        .collect();
    assert_eq!(waits, [10, 20, 40, 80, 160, 320, 500, 500, 500, 500]);
    assert_eq!(wait_after_omissions(u32::MAX), OMITTED_WAIT_CAP);
}

#[test]
fn missing_partition_and_errors() {
    let wrap = |body| Response {
        body,
        version: 11,
        correlation_id: 1,
        wire_bytes: 0,
    };
    let err = read_fetch_response(
        &FetchParams::new("t", 4, 0),
        Uuid::nil(),
        "b:1",
        wrap(response(b"", 0)),
    )
    .expect_err("missing");
    assert!(
        matches!(err, ClientError::MissingInResponse { partition: 4, .. }),
        "{err}"
    );
    let fetched = read_fetch_response(
        &FetchParams::new("t", 3, 0),
        Uuid::nil(),
        "b:1",
        wrap(response(b"", 1)),
    )
    .expect("partition");
    assert_eq!(fetched.error_code, ErrorCode::OffsetOutOfRange);
    let err = read_fetch_response(
        &FetchParams::new("t", 3, 0),
        Uuid::nil(),
        "b:1",
        wrap(response(b"", 0).with_error_code(70)),
    )
    .expect_err("top-level error");
    assert_eq!(err.code(), Some(ErrorCode::FetchSessionIdNotFound));
    assert!(err.to_string().contains("b:1"), "{err}");
}
