//! Bootstrapping against addresses that lead nowhere: each failure is
//! classified, says which it is, and comes within seconds with the default
//! settings (before, each took the 30 s deadline: 24 retries of a closed
//! port, 25 of a malformed address, one 30 s wait on a silent port).
//!
//! Everything runs on loopback with real time; the time bounds are
//! behaviour bounds (seconds, not the 30 s deadline) generous enough for a
//! loaded 2-core machine, not performance figures.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use walfetch::cluster::{ClientError, Cluster, ClusterConfig};
use walfetch::connection::{AddressError, ConnectionError};

/// What every case must stay under with the default settings.
const BOUND: Duration = Duration::from_secs(10);

/// A loopback port nothing listens on (bound, then released).
async fn closed_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    port
}

/// Bootstraps from `bootstrap` with the default settings; the error and
/// how long it took.
async fn bootstrap(bootstrap: &[&str]) -> (ClientError, Duration) {
    let started = Instant::now();
    let result = tokio::time::timeout(
        Duration::from_secs(60),
        Cluster::connect(ClusterConfig::new(bootstrap.iter().copied())),
    )
    .await
    .expect("bootstrap ends");
    let elapsed = started.elapsed();
    match result {
        Ok(_) => panic!("bootstrap from {bootstrap:?} succeeded"),
        Err(e) => (e, elapsed),
    }
}

/// The connection error inside a bootstrap failure (after retries, or
/// among the addresses tried).
fn connection_error(error: &ClientError) -> &ConnectionError {
    match error {
        ClientError::Connection(e) => e,
        ClientError::NoBrokerAnswered { last, .. } => connection_error(last),
        ClientError::RetriesExhausted {
            last: Some(last), ..
        } => connection_error(last),
        other => panic!("not a connection error: {other:?}"),
    }
}

#[tokio::test]
async fn a_closed_port_is_refused_within_seconds() {
    let address = format!("127.0.0.1:{}", closed_port().await);
    let (error, elapsed) = bootstrap(&[&address]).await;
    assert!(elapsed < BOUND, "{elapsed:?}: {error}");
    assert!(
        matches!(error, ClientError::RetriesExhausted { attempts, .. } if attempts > 1),
        "retried, then gave up: {error:?}"
    );
    assert!(
        matches!(connection_error(&error), ConnectionError::Refused { broker, .. } if *broker == address),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(message.contains("refused the connection"), "{message}");
    assert!(message.contains(&address), "{message}");
    assert!(message.contains("gave up on bootstrap"), "{message}");
}

#[tokio::test]
async fn malformed_addresses_fail_at_once_naming_the_address() {
    let port = closed_port().await;
    let good = format!("127.0.0.1:{port}");
    type Kind = fn(&AddressError) -> bool;
    // The kind of address error a case must be.
    macro_rules! is {
        ($variant:ident) => {
            (|e| matches!(e, AddressError::$variant { .. })) as Kind
        };
    }
    let cases: [(&str, Kind); 10] = [
        ("127.0.0.1:0", is!(InvalidPort)),
        ("127.0.0.1:65536", is!(InvalidPort)),
        ("127.0.0.1:kafka", is!(InvalidPort)),
        (":9092", is!(EmptyHost)),
        ("tcp://", is!(EmptyHost)),
        ("http://127.0.0.1:9092", is!(UnknownScheme)),
        ("tcp://127.0.0.1:9092/wal", is!(TrailingPath)),
        ("::1", is!(UnbracketedIpv6)),
        ("[broker]:9092", is!(InvalidIpv6)),
        ("bro ker:9092", is!(InvalidHost)),
    ];
    for (bad, kind) in cases {
        // A valid address first: the bad one is still found before any
        // connection is tried.
        let (error, elapsed) = bootstrap(&[&good, bad]).await;
        assert!(elapsed < Duration::from_millis(500), "{bad}: {elapsed:?}");
        match &error {
            ClientError::Connection(ConnectionError::InvalidAddress { broker, source }) => {
                assert_eq!(broker, &bad);
                assert!(kind(source), "{bad}: {source:?}");
            }
            other => panic!("{bad}: {other:?}"),
        }
        let message = error.to_string();
        assert!(message.starts_with("invalid broker address: "), "{message}");
        assert!(message.contains(&format!("{:?}", bad.trim())), "{message}");
    }
}

/// The forms people paste reach the broker: a scheme, any case, and a
/// missing port (9092).
#[tokio::test]
async fn schemes_and_a_missing_port_are_understood() {
    let port = closed_port().await;
    for written in [
        format!("tcp://127.0.0.1:{port}"),
        format!("PLAINTEXT://127.0.0.1:{port}"),
        format!(" SASL_PLAINTEXT://127.0.0.1:{port} "),
        format!("[::ffff:127.0.0.1]:{port}"),
    ] {
        let (error, elapsed) = bootstrap(&[&written]).await;
        assert!(elapsed < BOUND, "{written}: {elapsed:?}");
        match connection_error(&error) {
            ConnectionError::Refused { broker, .. } => {
                assert!(broker.ends_with(&format!(":{port}")), "{written}: {broker}");
                assert!(!broker.contains("://"), "kept as host:port: {broker}");
            }
            other => panic!("{written}: {other:?}"),
        }
    }
    // No port: 9092, as Kafka clients assume. Whether something listens
    // there or not, the address tried is 127.0.0.1:9092.
    let started = Instant::now();
    match Cluster::connect(ClusterConfig::new(["127.0.0.1"])).await {
        Ok(cluster) => assert_eq!(cluster.config().bootstrap, ["127.0.0.1:9092"]),
        Err(error) => {
            assert!(started.elapsed() < BOUND, "{error}");
            assert_eq!(
                connection_error(&error).broker(),
                "127.0.0.1:9092",
                "{error}"
            );
        }
    }
}

#[tokio::test]
async fn an_unresolvable_name_fails_at_once() {
    let (error, elapsed) = bootstrap(&["nonexistent.invalid:9092"]).await;
    assert!(elapsed < BOUND, "{elapsed:?}: {error}");
    assert!(
        matches!(
            error,
            ClientError::NoBrokerAnswered { .. } | ClientError::Connection(_)
        ),
        "not retried: {error:?}"
    );
    match connection_error(&error) {
        ConnectionError::Unresolvable { broker, host, .. } => {
            assert_eq!(
                (broker.as_str(), host.as_str()),
                ("nonexistent.invalid:9092", "nonexistent.invalid")
            );
        }
        other => panic!("{other:?}"),
    }
    let message = error.to_string();
    assert!(
        message.contains("cannot resolve the host \"nonexistent.invalid\""),
        "{message}"
    );
}

/// With another bootstrap address that may come up, an unresolvable one
/// does not end the bootstrap: the other is retried, and both failures
/// are reported.
#[tokio::test]
async fn an_unresolvable_name_beside_a_closed_port_reports_both() {
    let closed = format!("127.0.0.1:{}", closed_port().await);
    let (error, elapsed) = bootstrap(&["nonexistent.invalid", &closed]).await;
    assert!(elapsed < BOUND, "{elapsed:?}: {error}");
    let message = error.to_string();
    assert!(message.contains("gave up on bootstrap"), "{message}");
    assert!(message.contains("nonexistent.invalid:9092"), "{message}");
    assert!(message.contains("cannot resolve"), "{message}");
    assert!(
        message.contains(&format!("broker {closed} refused")),
        "{message}"
    );
}

#[tokio::test]
async fn a_port_that_accepts_and_never_answers_times_out_saying_so() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let holder = tokio::spawn(async move {
        let mut held = Vec::new();
        loop {
            let (socket, _) = listener.accept().await.unwrap();
            held.push(socket);
        }
    });
    let (error, elapsed) = bootstrap(&[&address]).await;
    holder.abort();
    assert!(elapsed < BOUND, "{elapsed:?}: {error}");
    // The 5 s connect timeout bounds the wait for the ApiVersions answer.
    assert!(elapsed >= Duration::from_secs(5), "{elapsed:?}: {error}");
    assert!(
        matches!(connection_error(&error), ConnectionError::HandshakeTimeout { broker, timeout }
            if *broker == address && *timeout == Duration::from_secs(5)),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(
        message.contains("accepted the connection but did not answer ApiVersions within 5000 ms"),
        "{message}"
    );
    assert!(message.contains("--timeout"), "{message}");
}

#[tokio::test]
async fn a_server_that_is_not_kafka_is_named_at_once() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let server = tokio::spawn(async move {
        let mut accepted = 0u32;
        loop {
            let (mut socket, _) = listener.accept().await.unwrap();
            accepted += 1;
            let mut request = [0u8; 256];
            let _ = socket.read(&mut request).await;
            let _ = socket
                .write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
                .await;
            let _ = socket.shutdown().await;
            if accepted == u32::MAX {
                break accepted;
            }
        }
    });
    let (error, elapsed) = bootstrap(&[&address]).await;
    server.abort();
    assert!(elapsed < Duration::from_secs(3), "{elapsed:?}: {error}");
    match connection_error(&error) {
        ConnectionError::NotKafka { broker, answered } => {
            assert_eq!(broker, &address);
            assert_eq!(answered, "\"HTTP/1.1 400 Bad Request\" (an HTTP server)");
        }
        other => panic!("{other:?}"),
    }
    assert!(
        !matches!(error, ClientError::RetriesExhausted { .. }),
        "not retried: {error}"
    );
    let message = error.to_string();
    assert!(
        message.contains(&format!(
            "{address} is not a Kafka broker: it answered ApiVersions with \"HTTP/1.1 400 Bad Request\""
        )),
        "{message}"
    );
}

/// A TLS listener answering a plaintext client with an alert is not
/// Kafka over plain TCP, and the message says to use TLS.
#[tokio::test]
async fn a_tls_listener_is_named_as_such() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let server = tokio::spawn(async move {
        loop {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut request = [0u8; 256];
            let _ = socket.read(&mut request).await;
            // A TLS 1.2 fatal alert record: handshake_failure.
            let _ = socket
                .write_all(&[0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28])
                .await;
            let _ = socket.shutdown().await;
        }
    });
    let (error, elapsed) = bootstrap(&[&address]).await;
    server.abort();
    assert!(elapsed < Duration::from_secs(3), "{elapsed:?}: {error}");
    assert!(
        matches!(connection_error(&error), ConnectionError::NotKafka { .. }),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(message.contains("a TLS record"), "{message}");
    assert!(message.contains("security.protocol=SSL"), "{message}");
}

/// `with_timeout` sets the connect timeout and the bootstrap's deadline
/// too: shorter fails faster.
#[tokio::test]
async fn with_timeout_shortens_every_wait() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let holder = tokio::spawn(async move {
        let mut held = Vec::new();
        loop {
            held.push(listener.accept().await.unwrap().0);
        }
    });
    let started = Instant::now();
    let config = ClusterConfig::new([address.as_str()]).with_timeout(Duration::from_millis(300));
    let error = Cluster::connect(config).await.expect_err("silent port");
    let elapsed = started.elapsed();
    holder.abort();
    assert!(elapsed < Duration::from_secs(3), "{elapsed:?}: {error}");
    assert!(
        matches!(connection_error(&error), ConnectionError::HandshakeTimeout { timeout, .. }
            if *timeout == Duration::from_millis(300)),
        "{error:?}"
    );
}

/// A broker before Kafka 2.4 (KIP-511) answers an ApiVersions version it
/// does not know with `UNSUPPORTED_VERSION` and no API ranges at all, not
/// even its own ApiVersions range. walfetch once took that for "no common
/// version" and refused the broker; it asks again at v0, as the Java
/// client does, and connects.
#[tokio::test]
async fn a_broker_before_kip_511_is_asked_again_at_v0() {
    use bytes::{BufMut, BytesMut};
    use kafka_protocol::messages::api_versions_response::ApiVersion;
    use kafka_protocol::messages::{ApiVersionsResponse, ResponseHeader};
    use kafka_protocol::protocol::Encodable;
    use walfetch::connection::{Connection, ConnectionConfig};

    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let broker = tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        let mut versions_asked = Vec::new();
        loop {
            let mut len = [0u8; 4];
            if s.read_exact(&mut len).await.is_err() {
                return versions_asked;
            }
            let mut request = vec![0u8; i32::from_be_bytes(len) as usize];
            s.read_exact(&mut request).await.unwrap();
            let key = i16::from_be_bytes([request[0], request[1]]);
            let version = i16::from_be_bytes([request[2], request[3]]);
            let correlation = i32::from_be_bytes([request[4], request[5], request[6], request[7]]);
            assert_eq!(
                key, 18,
                "only ApiVersions is sent before the handshake ends"
            );
            versions_asked.push(version);
            let mut body = BytesMut::new();
            ResponseHeader::default()
                .with_correlation_id(correlation)
                .encode(&mut body, 0)
                .unwrap();
            if version > 2 {
                // Kafka 2.0–2.3: UNSUPPORTED_VERSION, no ranges, a v0 body.
                ApiVersionsResponse::default()
                    .with_error_code(35)
                    .encode(&mut body, 0)
                    .unwrap();
            } else {
                let keys = [(0, 3, 7), (1, 4, 10), (2, 1, 4), (3, 1, 7), (18, 0, 2)];
                let ranges = keys
                    .iter()
                    .map(|&(key, min, max)| {
                        ApiVersion::default()
                            .with_api_key(key)
                            .with_min_version(min)
                            .with_max_version(max)
                    })
                    .collect();
                ApiVersionsResponse::default()
                    .with_api_keys(ranges)
                    .encode(&mut body, version)
                    .unwrap();
            }
            let mut frame = BytesMut::new();
            frame.put_i32(i32::try_from(body.len()).unwrap());
            frame.extend_from_slice(&body);
            s.write_all(&frame).await.unwrap();
        }
    });
    let connected = Connection::connect(addr.to_string(), ConnectionConfig::default()).await;
    let outcome = connected.as_ref().map(|_| ()).map_err(ToString::to_string);
    drop(connected);
    let asked = broker.await.unwrap();
    assert!(outcome.is_ok(), "{outcome:?}");
    assert_eq!(asked, [3, 0]);
}
