//! Unit tests of a connection: closing or dropping one whose frame is
//! stuck half written to a broker that stopped reading, and decoding a
//! response frame.

use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, MetadataRequest, MetadataResponse, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Encodable, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use super::guard::GuardError;
use super::*;

/// A broker that answers ApiVersions (v3) and then never reads again,
/// as a hung broker (stopped process, stalled disk, frozen VM) does:
/// its receive window fills and stays full. The socket stays open.
async fn broker_that_stops_reading() -> (String, JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address").to_string();
    let task = tokio::spawn(async move {
        let Ok((mut socket, _)) = listener.accept().await else {
            return;
        };
        let Ok(len) = socket.read_i32().await else {
            return;
        };
        let mut request = vec![0u8; usize::try_from(len).unwrap_or(0)];
        if socket.read_exact(&mut request).await.is_err() || request.len() < 8 {
            return;
        }
        let correlation_id = (&request[4..8]).get_i32();
        let range = |key: ApiKey, max| {
            ApiVersion::default()
                .with_api_key(key as i16)
                .with_min_version(0)
                .with_max_version(max)
        };
        let body = ApiVersionsResponse::default().with_api_keys(vec![
            range(ApiKey::ApiVersions, 3),
            range(ApiKey::Metadata, 12),
        ]);
        let mut payload = BytesMut::new();
        ResponseHeader::default()
            .with_correlation_id(correlation_id)
            .encode(&mut payload, 0)
            .expect("encodes");
        body.encode(&mut payload, 3).expect("encodes");
        let mut frame = BytesMut::new();
        frame.put_i32(i32::try_from(payload.len()).expect("small"));
        frame.extend_from_slice(&payload);
        let _ = socket.write_all(&frame).await;
        std::future::pending::<()>().await;
        drop::<TcpStream>(socket);
    });
    (address, task)
}

/// Connects to a broker that stops reading and leaves a request frame
/// stuck half written (32 MiB of topic names, far more than the socket
/// buffers hold), timed out.
async fn connection_with_a_frame_stuck_half_written() -> (Connection, JoinHandle<()>) {
    let (address, broker) = broker_that_stops_reading().await;
    let config = ConnectionConfig {
        request_timeout: Duration::from_millis(300),
        ..ConnectionConfig::default()
    };
    let connection = Connection::connect(address, config)
        .await
        .expect("connects");
    let name = TopicName(StrBytes::from_string("t".repeat(200)));
    let topics = (0..160_000)
        .map(|_| MetadataRequestTopic::default().with_name(Some(name.clone())))
        .collect();
    let request = MetadataRequest::default().with_topics(Some(topics));
    let options = RequestOptions {
        version: Some(9),
        timeout: None,
    };
    let err = connection
        .request_with(&request, options)
        .await
        .expect_err("the broker does not read");
    assert!(
        matches!(err, ConnectionError::RequestTimeout { .. }),
        "{err:?}"
    );
    (connection, broker)
}

/// Closing or dropping a connection ends its reader and writer tasks
/// (which closes the socket), also while the writer is blocked writing
/// to a broker that stopped reading. Drop once aborted only the reader
/// and left the writer to notice the closed queue, which a writer
/// stuck in `write_all` never does.
#[tokio::test]
async fn closing_or_dropping_a_connection_ends_its_tasks_when_the_broker_stopped_reading() {
    let metrics = tokio::runtime::Handle::current().metrics();
    let settle = || tokio::time::sleep(Duration::from_millis(500));

    let baseline = metrics.num_alive_tasks();
    let (connection, broker) = connection_with_a_frame_stuck_half_written().await;
    drop(connection);
    settle().await;
    assert_eq!(
        metrics.num_alive_tasks(),
        baseline + 1,
        "tasks of the dropped connection still alive (its socket still open)"
    );
    broker.abort();
    settle().await;

    let baseline = metrics.num_alive_tasks();
    let (connection, broker) = connection_with_a_frame_stuck_half_written().await;
    connection.close();
    settle().await;
    assert_eq!(
        metrics.num_alive_tasks(),
        baseline + 1,
        "tasks of the closed connection still alive (its socket still open)"
    );
    assert!(connection.is_closed());
    broker.abort();
}

/// Metadata v12's response header (v1: correlation id, tagged fields)
/// followed by `body`.
fn metadata_v12_frame(body: &[u8]) -> Bytes {
    let mut payload = BytesMut::new();
    ResponseHeader::default()
        .with_correlation_id(7)
        .encode(&mut payload, 1)
        .expect("encodes");
    payload.extend_from_slice(body);
    payload.freeze()
}

#[test]
fn a_response_frame_is_its_header_then_its_checked_body() {
    let mut body = BytesMut::new();
    MetadataResponse::default()
        .with_throttle_time_ms(5)
        .encode(&mut body, 12)
        .expect("encodes");
    let decoded =
        decode_response_frame::<MetadataRequest>(12, metadata_v12_frame(&body)).expect("decodes");
    assert_eq!(decoded.throttle_time_ms, 5);

    // The frame ends inside the header's tagged fields.
    let err = decode_response_frame::<MetadataRequest>(12, Bytes::from_static(&[0, 0, 0, 7]))
        .expect_err("no header");
    assert!(matches!(err, GuardError::Header { .. }), "{err:?}");
    assert!(err.to_string().starts_with("response header: "), "{err}");

    // A broker array claiming u32::MAX - 1 entries never reaches the
    // decoder.
    let frame = metadata_v12_frame(&[0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f]);
    let err = decode_response_frame::<MetadataRequest>(12, frame).expect_err("refused");
    assert!(
        matches!(
            err,
            GuardError::CountTooLarge {
                field: "brokers",
                ..
            }
        ),
        "{err:?}"
    );
}
