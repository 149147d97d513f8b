//! Fault tests: the cluster client against the scripted broker
//! (`walfetch-testkit`), with every fault the broker can be scripted to
//! make, on each API the fault applies to: ApiVersions (at connect),
//! Metadata, ListOffsets, Fetch and Produce.
//!
//! What the tests pin down:
//! - a retriable fault (a connection lost before, during or after a
//!   response, a dropped request, a retriable error code, a leader moved to
//!   another broker, a reply slower than the request timeout, a truncated or
//!   oversized frame) ends in the right result, and the broker's counters
//!   show exactly the retry it took;
//! - a non-retriable error code ends the operation at once, naming the
//!   topic, partition and broker;
//! - a fault that never stops ends in `RetriesExhausted` by the deadline;
//! - Produce never writes a batch twice: after a connection lost
//!   mid-request it returns the error rather than resending, and a retry
//!   after an error code (batch not written) writes the batch once;
//! - when a connection breaks, every request in flight on it fails at once
//!   with the connection's error, and a request past its own timeout fails
//!   alone.
//!
//! Tests whose outcome depends on timers run on tokio's paused clock (the
//! scripted broker's `Delay` is a tokio sleep on the same runtime), so the
//! times they assert are exact and cost no real time. The others run on
//! real time; none of them waits out a timeout, and each operation is
//! bounded by [`within`] so that a hang fails the test instead of stalling
//! it.
#![allow(clippy::unwrap_used)]

use std::future::Future;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, MetadataRequest};
use tokio::time::Instant;
use walfetch::cluster::{
    fetch_on, ClientError, Cluster, ClusterConfig, FetchParams, FetchedPartition, IsolationLevel,
    OffsetSpec, RetryPolicy,
};
use walfetch::codec::{BatchBuilder, Batches, DecodeOptions, NewRecord};
use walfetch::connection::frame::DEFAULT_MAX_FRAME_BYTES;
use walfetch::connection::{Connection, ConnectionConfig, ConnectionError, RequestOptions};
use walfetch::error_code::ErrorCode;
use walfetch_testkit::{BrokerStats, Fault, FaultAction, ScriptedCluster};

const TOPIC: &str = "wal";
/// Records appended to partition 0 by [`setup`]: offsets 0 to 8.
const RECORDS: i64 = 9;
/// The clients' request (and connect) timeout.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(1);
/// The fetches' `max_wait`, added to the request timeout of a Fetch.
const MAX_WAIT: Duration = Duration::from_millis(100);
/// The clients' overall deadline per operation.
const DEADLINE: Duration = Duration::from_secs(3);
/// How long any single operation of a real-time test may take before the
/// test calls it a hang.
const HANG: Duration = Duration::from_secs(10);
/// A delay far past every timeout here.
const FOREVER: Duration = Duration::from_secs(3600);

/// Backoff 10, 20, 40, 80, then 100 ms, without jitter, so retry timing is
/// exact.
fn retry_policy(deadline: Duration) -> RetryPolicy {
    RetryPolicy {
        initial_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_millis(100),
        multiplier: 2.0,
        jitter: 0.0,
        deadline,
    }
}

fn client_config(scripted: &ScriptedCluster) -> ClusterConfig {
    let mut config = ClusterConfig::new([scripted.bootstrap()]);
    config.retry = retry_policy(DEADLINE);
    config.connection.connect_timeout = REQUEST_TIMEOUT;
    config.connection.request_timeout = REQUEST_TIMEOUT;
    config.produce_timeout = Duration::from_millis(500);
    config
}

/// Runs `operation`, failing the test if it has not ended after `limit`.
async fn within<T>(limit: Duration, what: &str, operation: impl Future<Output = T>) -> T {
    tokio::time::timeout(limit, operation)
        .await
        .unwrap_or_else(|_| panic!("{what}: still running after {limit:?}"))
}

/// One uncompressed batch holding `values`.
fn batch(values: &[Bytes]) -> Bytes {
    let records: Vec<NewRecord> = values
        .iter()
        .enumerate()
        .map(|(i, v)| NewRecord::value(i32::try_from(i).expect("small"), v.clone()))
        .collect();
    BatchBuilder::new(0)
        .encode(&records)
        .expect("batch encodes")
        .bytes
}

/// `(offset, value)` of every record in `records`, which must hold only
/// complete, valid batches.
fn decode(records: &Bytes) -> Vec<(i64, Bytes)> {
    let mut batches = Batches::new(records.clone(), DecodeOptions::default());
    let mut out = Vec::new();
    for batch in batches.by_ref() {
        let batch = batch.expect("valid batch");
        for record in batch.records().expect("records") {
            let record = record.expect("valid record");
            out.push((record.offset(), record.value_bytes().expect("value")));
        }
    }
    assert!(batches.partial().is_none(), "a partial batch");
    out
}

/// The records of a partition's log on the scripted broker.
fn log_records(scripted: &ScriptedCluster, partition: i32) -> Vec<(i64, Bytes)> {
    let log = scripted.log(TOPIC, partition).expect("partition");
    log.batches()
        .iter()
        .flat_map(|b| decode(&b.bytes))
        .collect()
}

/// Two brokers; topic [`TOPIC`] with partition 0 led by broker 1 and
/// partition 1 by broker 2; partition 0 holds three batches of three
/// records; a client bootstrapped from broker 1.
struct Setup {
    scripted: ScriptedCluster,
    cluster: Cluster,
    /// The records of partition 0.
    records: Vec<(i64, Bytes)>,
}

async fn setup() -> Setup {
    let scripted = ScriptedCluster::start(2)
        .await
        .expect("the scripted cluster starts");
    scripted.create_topic(TOPIC, 2).expect("topic created");
    let mut records = Vec::new();
    for b in 0..3 {
        let values: Vec<Bytes> = (0..3)
            .map(|r| Bytes::from(format!("batch {b} record {r}")))
            .collect();
        let base = scripted.append(TOPIC, 0, batch(&values)).expect("appended");
        records.extend((base..).zip(values));
    }
    let cluster = within(HANG, "connect", Cluster::connect(client_config(&scripted)))
        .await
        .expect("the client connects");
    let s = Setup {
        scripted,
        cluster,
        records,
    };
    // Warm up, so that each test counts only what its fault causes: the
    // leader of partition 0 is cached and the connection to it open.
    let fetched = s.fetch().await.expect("warm-up fetch");
    assert_eq!(decode(&fetched.records), s.records);
    s.scripted.reset_stats();
    s
}

fn fetch_params(partition: i32) -> FetchParams {
    FetchParams::new(TOPIC, partition, 0).with_max_wait(MAX_WAIT)
}

impl Setup {
    fn addr(&self, node_id: i32) -> String {
        self.scripted
            .addr(node_id)
            .expect("known broker")
            .to_string()
    }

    fn stats(&self, node_id: i32) -> BrokerStats {
        self.scripted.stats(node_id).expect("known broker")
    }

    /// Requests of `api` received by all brokers.
    fn requests(&self, api: ApiKey) -> u64 {
        self.scripted
            .node_ids()
            .into_iter()
            .map(|n| self.stats(n).requests_of(api))
            .sum()
    }

    async fn fetch(&self) -> Result<FetchedPartition, ClientError> {
        within(HANG, "fetch", self.cluster.fetch(&fetch_params(0))).await
    }

    async fn latest(&self, partition: i32) -> Result<Option<i64>, ClientError> {
        within(
            HANG,
            "list_offsets",
            self.cluster.list_offsets(
                TOPIC,
                partition,
                OffsetSpec::Latest,
                IsolationLevel::ReadUncommitted,
            ),
        )
        .await
        .map(|listed| listed.offset)
    }

    async fn produce(&self, partition: i32, records: Bytes) -> Result<i64, ClientError> {
        within(
            HANG,
            "produce",
            self.cluster.produce(TOPIC, partition, records),
        )
        .await
    }

    fn assert_fault_fired(&self, what: &dyn std::fmt::Debug) {
        assert!(
            self.scripted.pending_faults().is_empty(),
            "{what:?}: the fault did not fire"
        );
    }
}

/// Faults that lose the connection after the broker read the request and
/// before the client has a whole response.
fn connection_faults() -> Vec<FaultAction> {
    vec![
        FaultAction::DropRequest,
        FaultAction::CutBeforeResponse,
        // Inside the length prefix, inside the response header, halfway.
        FaultAction::CutDuringResponse { bytes: Some(2) },
        FaultAction::CutDuringResponse { bytes: Some(6) },
        FaultAction::CutDuringResponse { bytes: None },
        FaultAction::TruncatedFrame { missing: 100 },
        // Negative as an i32 (-2^31 and -1), over the client's frame limit,
        // and a plausible length whose bytes never come.
        FaultAction::OversizedFrame {
            length: 0x8000_0000,
        },
        FaultAction::OversizedFrame {
            length: 0xFFFF_FFFF,
        },
        FaultAction::OversizedFrame {
            length: 0x4000_0000,
        },
        FaultAction::OversizedFrame { length: 1000 },
    ]
}

/// Whether `error` is the one [`connection_faults`]' `action` must cause.
fn is_error_of(action: &FaultAction, error: &ConnectionError) -> bool {
    use ConnectionError as E;
    match (action, error) {
        (FaultAction::DropRequest | FaultAction::CutBeforeResponse, E::ClosedByPeer { .. }) => true,
        (
            FaultAction::CutDuringResponse { bytes: Some(2) },
            E::TruncatedFrame {
                received: 2,
                expected: None,
                ..
            },
        ) => true,
        (
            FaultAction::CutDuringResponse { bytes: Some(6) },
            E::TruncatedFrame {
                received: 6,
                expected: Some(expected),
                ..
            },
        ) => *expected > 6,
        (
            FaultAction::CutDuringResponse { bytes: None },
            E::TruncatedFrame {
                received,
                expected: Some(expected),
                ..
            },
        ) => *received == expected / 2,
        (
            FaultAction::TruncatedFrame { missing },
            E::TruncatedFrame {
                received,
                expected: Some(expected),
                ..
            },
        ) => *expected == received + *missing as usize,
        (FaultAction::OversizedFrame { length }, E::NegativeFrameLength { length: got, .. }) => {
            *got == *length as i32
        }
        (
            FaultAction::OversizedFrame { length },
            E::FrameTooLarge {
                length: got, max, ..
            },
        ) => *got == *length as usize && *max == DEFAULT_MAX_FRAME_BYTES,
        (
            FaultAction::OversizedFrame { length },
            E::TruncatedFrame {
                received: 8,
                expected: Some(expected),
                ..
            },
        ) => *expected == *length as usize + 4,
        _ => false,
    }
}

// ---------------------------------------------------------------------------
// The connection layer: each fault's error, in-flight requests, timeouts.

async fn connection_to(scripted: &ScriptedCluster, request_timeout: Duration) -> Connection {
    let config = ConnectionConfig {
        request_timeout,
        ..ConnectionConfig::default()
    };
    within(
        HANG,
        "Connection::connect",
        Connection::connect(scripted.bootstrap(), config),
    )
    .await
    .expect("connects")
}

#[tokio::test]
async fn each_broken_response_breaks_the_connection_with_its_own_error() {
    let s = setup().await;
    let topic_id = s.scripted.topic_id(TOPIC).expect("topic id");
    for action in connection_faults() {
        // A long request timeout: every failure below is the connection's.
        let connection = connection_to(&s.scripted, Duration::from_secs(60)).await;
        s.scripted
            .script(Fault::on(ApiKey::Fetch).then(action.clone()));
        let result = within(
            HANG,
            "fetch_on",
            fetch_on(&connection, &fetch_params(0), -1, topic_id, None),
        )
        .await;
        let error = match result {
            Err(ClientError::Connection(e)) => e,
            other => panic!("{action:?}: {other:?}"),
        };
        assert!(is_error_of(&action, &error), "{action:?}: {error:?}");
        assert!(error.is_connection_lost(), "{action:?}: {error}");
        assert!(!error.is_before_send(), "{action:?}: {error}");
        assert_eq!(error.broker(), s.addr(1));
        assert!(
            error.to_string().contains(&s.addr(1)),
            "{action:?}: {error}"
        );
        // The connection is broken for good: the next request fails at
        // once with the same error, without reaching the broker.
        assert!(connection.is_closed(), "{action:?}");
        let failure = connection.failure().expect("failure kept");
        assert_eq!(failure.to_string(), error.to_string());
        let fetches = s.stats(1).requests_of(ApiKey::Fetch);
        let again = fetch_on(&connection, &fetch_params(0), -1, topic_id, None)
            .await
            .expect_err("broken connection");
        assert_eq!(again.to_string(), error.to_string(), "{action:?}");
        assert_eq!(s.stats(1).requests_of(ApiKey::Fetch), fetches);
        s.assert_fault_fired(&action);
    }
}

#[tokio::test]
async fn a_connection_cut_after_a_response_delivers_it_then_fails_what_follows() {
    let s = setup().await;
    let topic_id = s.scripted.topic_id(TOPIC).expect("topic id");
    let connection = connection_to(&s.scripted, Duration::from_secs(60)).await;
    s.scripted
        .script(Fault::on(ApiKey::Fetch).then(FaultAction::CutAfterResponse));
    let fetched = within(
        HANG,
        "fetch_on",
        fetch_on(&connection, &fetch_params(0), -1, topic_id, None),
    )
    .await
    .expect("the response before the cut is delivered");
    assert_eq!(decode(&fetched.records), s.records);
    // Whether or not the client saw the close before sending it, the next
    // request fails with the peer's close, promptly.
    let error = within(
        HANG,
        "fetch_on after the cut",
        fetch_on(&connection, &fetch_params(0), -1, topic_id, None),
    )
    .await
    .expect_err("the connection is closed");
    assert!(
        matches!(
            error,
            ClientError::Connection(ConnectionError::ClosedByPeer { .. })
        ),
        "{error:?}"
    );
    assert!(connection.is_closed());
}

/// Six fetches in flight on one connection: the broker holds the first for
/// a second, answers the second, and cuts the connection in the third's
/// response. The first two complete; the other four fail at that moment
/// with the connection's error, not at their (minute-long) timeouts.
#[tokio::test(start_paused = true)]
async fn pipelined_fetches_in_flight_all_fail_at_once_with_the_connections_error() {
    let scripted = ScriptedCluster::start(1).await.expect("scripted cluster");
    scripted.create_topic(TOPIC, 6).expect("topic");
    let topic_id = scripted.topic_id(TOPIC).expect("topic id");
    let mut expected = Vec::new();
    for p in 0..6 {
        let values = [Bytes::from(format!("partition {p}"))];
        scripted.append(TOPIC, p, batch(&values)).expect("append");
        expected.push(vec![(0, values[0].clone())]);
    }
    let cuts = [
        FaultAction::CutBeforeResponse,
        FaultAction::CutDuringResponse { bytes: None },
    ];
    for cut in cuts {
        let connection = connection_to(&scripted, Duration::from_secs(60)).await;
        scripted.script(
            Fault::on(ApiKey::Fetch)
                .partition(0)
                .then(FaultAction::Delay(Duration::from_secs(1))),
        );
        scripted.script(Fault::on(ApiKey::Fetch).partition(2).then(cut.clone()));
        let params: Vec<FetchParams> = (0..6)
            .map(|p| FetchParams::new(TOPIC, p, 0).with_max_wait(MAX_WAIT))
            .collect();
        let started = Instant::now();
        let all = futures::future::join_all(
            params
                .iter()
                .map(|p| fetch_on(&connection, p, -1, topic_id, None)),
        );
        tokio::pin!(all);
        tokio::select! {
            _ = &mut all => panic!("{cut:?}: done before the delayed answer"),
            () = tokio::time::sleep(Duration::from_millis(500)) => {}
        }
        assert_eq!(connection.stats().in_flight, 6, "{cut:?}: all in flight");
        let results = all.await;
        assert_eq!(
            started.elapsed(),
            Duration::from_secs(1),
            "{cut:?}: the failures come with the cut"
        );
        for (p, result) in results.iter().enumerate().take(2) {
            let fetched = result
                .as_ref()
                .unwrap_or_else(|e| panic!("{cut:?}: partition {p}: {e}"));
            assert_eq!(decode(&fetched.records), expected[p], "{cut:?}");
        }
        let failure = connection.failure().expect("the connection failed");
        match (&cut, &failure) {
            (FaultAction::CutBeforeResponse, ConnectionError::ClosedByPeer { .. })
            | (FaultAction::CutDuringResponse { .. }, ConnectionError::TruncatedFrame { .. }) => {}
            other => panic!("{other:?}"),
        }
        for (p, result) in results.iter().enumerate().skip(2) {
            match result {
                Err(ClientError::Connection(e)) => {
                    assert_eq!(e.to_string(), failure.to_string(), "{cut:?}: partition {p}");
                }
                other => panic!("{cut:?}: partition {p}: {other:?}"),
            }
        }
        assert_eq!(connection.stats().in_flight, 0, "{cut:?}");
        assert!(scripted.pending_faults().is_empty(), "{cut:?}");
    }
}

/// A request past its own timeout fails alone with `RequestTimeout`; the
/// connection stays up, the broker's late answer to it is dropped, and the
/// next request on the connection gets its own answer.
#[tokio::test(start_paused = true)]
async fn a_request_past_its_timeout_fails_alone_and_its_late_answer_is_dropped() {
    let s = setup().await;
    let topic_id = s.scripted.topic_id(TOPIC).expect("topic id");
    let connection = connection_to(&s.scripted, REQUEST_TIMEOUT).await;
    // Past the first request's timeout (1.1 s), within the second's (2.2 s).
    let delay = Duration::from_secs(2);
    s.scripted
        .script(Fault::on(ApiKey::Fetch).then(FaultAction::Delay(delay)));
    let started = Instant::now();
    let error = fetch_on(&connection, &fetch_params(0), -1, topic_id, None)
        .await
        .expect_err("timed out");
    // A Fetch may take the request timeout plus its max_wait.
    let timeout = REQUEST_TIMEOUT + MAX_WAIT;
    assert_eq!(started.elapsed(), timeout);
    match &error {
        ClientError::Connection(ConnectionError::RequestTimeout {
            api: ApiKey::Fetch,
            timeout: t,
            broker,
            ..
        }) => assert_eq!((*t, broker.as_str()), (timeout, s.addr(1).as_str())),
        other => panic!("{other:?}"),
    }
    assert!(!connection.is_closed(), "a timeout breaks nothing");
    // The broker answers in order: the next request's answer comes after
    // the delayed one, which the client drops.
    let fetched = fetch_on(&connection, &fetch_params(0), -1, topic_id, None)
        .await
        .expect("the next request is answered");
    assert_eq!(started.elapsed(), delay);
    assert_eq!(decode(&fetched.records), s.records);
    let stats = connection.stats();
    assert_eq!((stats.in_flight, stats.responses), (0, 2), "{stats:?}");
    // A per-request timeout overrides the connection's.
    s.scripted
        .script(Fault::on(ApiKey::Metadata).then(FaultAction::Delay(Duration::from_millis(500))));
    let started = Instant::now();
    let options = RequestOptions {
        version: None,
        timeout: Some(Duration::from_millis(200)),
    };
    let error = connection
        .request_with(&MetadataRequest::default(), options)
        .await
        .expect_err("timed out");
    assert!(
        matches!(
            error,
            ConnectionError::RequestTimeout { api: ApiKey::Metadata, timeout, .. }
                if timeout == Duration::from_millis(200)
        ),
        "{error:?}"
    );
    assert_eq!(started.elapsed(), Duration::from_millis(200));
    assert!(!connection.is_closed());
}

// ---------------------------------------------------------------------------
// Lost connections: retried to the right result.

#[tokio::test]
async fn fetch_retries_every_lost_connection_and_returns_the_appended_records() {
    let s = setup().await;
    for action in connection_faults() {
        s.scripted.reset_stats();
        s.scripted
            .script(Fault::on(ApiKey::Fetch).broker(1).then(action.clone()));
        let fetched = s
            .fetch()
            .await
            .unwrap_or_else(|e| panic!("{action:?}: {e}"));
        assert_eq!(decode(&fetched.records), s.records, "{action:?}");
        assert_eq!(fetched.broker, s.addr(1));
        let stats = s.stats(1);
        assert_eq!(
            (
                stats.requests_of(ApiKey::Fetch),
                stats.connections,
                stats.requests_of(ApiKey::ApiVersions),
            ),
            (2, 1, 1),
            "{action:?}: one retry, on one new connection"
        );
        assert_eq!(s.requests(ApiKey::Metadata), 1, "{action:?}: one refresh");
        s.assert_fault_fired(&action);
    }
}

#[tokio::test]
async fn list_offsets_retries_every_lost_connection_and_returns_the_offset() {
    let s = setup().await;
    for action in connection_faults() {
        s.scripted.reset_stats();
        s.scripted.script(
            Fault::on(ApiKey::ListOffsets)
                .broker(1)
                .then(action.clone()),
        );
        let latest = s
            .latest(0)
            .await
            .unwrap_or_else(|e| panic!("{action:?}: {e}"));
        assert_eq!(latest, Some(RECORDS), "{action:?}");
        let stats = s.stats(1);
        assert_eq!(
            (stats.requests_of(ApiKey::ListOffsets), stats.connections),
            (2, 1),
            "{action:?}: one retry, on one new connection"
        );
        s.assert_fault_fired(&action);
    }
}

/// A Metadata request that loses its connection while the client looks a
/// leader up is sent again (to the next broker it knows), and the
/// operation then goes to the leader.
#[tokio::test]
async fn leader_lookup_retries_every_lost_connection_on_metadata() {
    let s = setup().await;
    for action in connection_faults() {
        s.cluster.invalidate(TOPIC);
        s.scripted.reset_stats();
        s.scripted.script(
            Fault::on(ApiKey::Metadata)
                .topic(TOPIC)
                .then(action.clone()),
        );
        let fetched = s
            .fetch()
            .await
            .unwrap_or_else(|e| panic!("{action:?}: {e}"));
        assert_eq!(decode(&fetched.records), s.records, "{action:?}");
        assert_eq!(fetched.broker, s.addr(1));
        assert_eq!(
            (s.requests(ApiKey::Metadata), s.requests(ApiKey::Fetch)),
            (2, 1),
            "{action:?}"
        );
        s.assert_fault_fired(&action);
    }
}

/// Whether `action` on the first response of a connection (the
/// ApiVersions answer) makes the peer not a Kafka broker: a length prefix
/// that is negative or past any ApiVersions answer (1 MiB).
fn garbles_the_first_frame(action: &FaultAction) -> bool {
    matches!(action, FaultAction::OversizedFrame { length } if *length > 1 << 20)
}

/// Bootstrap survives every lost connection on its ApiVersions handshake
/// and on its first Metadata request.
#[tokio::test]
async fn bootstrap_retries_every_lost_connection_on_api_versions_and_metadata() {
    for api in [ApiKey::ApiVersions, ApiKey::Metadata] {
        for action in connection_faults() {
            if api == ApiKey::ApiVersions && garbles_the_first_frame(&action) {
                continue;
            }
            let scripted = ScriptedCluster::start(1).await.expect("scripted cluster");
            scripted.script(Fault::on(api).then(action.clone()));
            let cluster = within(HANG, "connect", Cluster::connect(client_config(&scripted)))
                .await
                .unwrap_or_else(|e| panic!("{api:?} {action:?}: {e}"));
            let stats = scripted.stats(1).expect("broker");
            assert_eq!(
                (stats.requests_of(api), stats.connections),
                (2, 2),
                "{api:?} {action:?}: one retry, on a new connection"
            );
            assert!(scripted.pending_faults().is_empty());
            assert_eq!(
                cluster.cached_metadata().brokers.len(),
                1,
                "{api:?} {action:?}"
            );
        }
    }
}

/// An absurd or negative length prefix as the answer to ApiVersions, the
/// first frame of a connection, is a peer that is not a Kafka broker: the
/// bootstrap fails at once with [`ConnectionError::NotKafka`] showing the
/// bytes, and is not retried.
#[tokio::test]
async fn a_garbled_first_frame_is_not_a_kafka_broker_and_not_retried() {
    for action in connection_faults()
        .into_iter()
        .filter(garbles_the_first_frame)
    {
        let scripted = ScriptedCluster::start(1).await.expect("scripted cluster");
        scripted.script(Fault::on(ApiKey::ApiVersions).then(action.clone()));
        let error = within(HANG, "connect", Cluster::connect(client_config(&scripted)))
            .await
            .expect_err("not Kafka");
        let inner = match &error {
            ClientError::NoBrokerAnswered { last, .. } => last.as_ref(),
            other => panic!("{action:?}: {other:?}"),
        };
        let FaultAction::OversizedFrame { length } = action else {
            unreachable!()
        };
        let prefix: Vec<String> = length
            .to_be_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        match inner {
            ClientError::Connection(ConnectionError::NotKafka { broker, answered }) => {
                assert_eq!(broker, &scripted.bootstrap());
                assert!(
                    answered.starts_with(&format!("bytes {}", prefix.join(" "))),
                    "{answered}"
                );
            }
            other => panic!("{action:?}: {other:?}"),
        }
        assert!(
            error.to_string().contains("is not a Kafka broker"),
            "{error}"
        );
        let stats = scripted.stats(1).expect("broker");
        assert_eq!(
            stats.requests_of(ApiKey::ApiVersions),
            1,
            "{action:?}: not retried"
        );
    }
}

/// The same garbled first frame from a broker the cluster already talks
/// to, on a new connection after the last was cut, is a stream corrupted on
/// the way, not a wrong address: the operation is retried on another
/// connection and succeeds (found by the fault soak, where a recovery
/// ended with "is not a Kafka broker").
#[tokio::test]
async fn a_garbled_first_frame_on_a_new_connection_to_a_known_broker_is_retried() {
    let s = setup().await;
    let fetched = s.fetch().await.expect("fetch");
    assert_eq!(decode(&fetched.records), s.records);
    s.scripted.reset_stats();
    s.scripted.script(
        Fault::on(ApiKey::Fetch)
            .broker(1)
            .then(FaultAction::CutAfterResponse),
    );
    s.scripted.script(
        Fault::on(ApiKey::ApiVersions)
            .broker(1)
            .then(FaultAction::OversizedFrame {
                length: 0x7fff_ffff,
            }),
    );
    for _ in 0..2 {
        let fetched = s.fetch().await.expect("fetch");
        assert_eq!(decode(&fetched.records), s.records);
    }
    s.assert_fault_fired(&"a cut, then a garbled ApiVersions answer");
    assert_eq!(s.stats(1).requests_of(ApiKey::ApiVersions), 2, "retried");
}

/// A connection cut right after a complete response: the response counts,
/// and the next operation finds the connection gone (the broker's close
/// follows the response at once, so the client's reader sees it before
/// the test's next request) and opens a new one — a Produce too, which
/// could not be resent had it gone out on the closing connection.
#[tokio::test]
async fn a_connection_cut_after_a_response_is_replaced_by_the_next_operation() {
    let s = setup().await;
    for api in [
        ApiKey::Metadata,
        ApiKey::ListOffsets,
        ApiKey::Fetch,
        ApiKey::Produce,
    ] {
        s.cluster.invalidate(TOPIC);
        s.scripted.reset_stats();
        s.scripted
            .script(Fault::on(api).broker(1).then(FaultAction::CutAfterResponse));
        let written = log_records(&s.scripted, 0);
        let next = i64::try_from(written.len()).expect("small");
        // The faulted operation, then one more of the same.
        for round in 0..2 {
            match api {
                ApiKey::Metadata => {
                    let fetched = s.fetch().await.expect("fetch");
                    assert_eq!(decode(&fetched.records), s.records);
                }
                ApiKey::ListOffsets => {
                    assert_eq!(s.latest(0).await.expect("list_offsets"), Some(next));
                }
                ApiKey::Fetch => {
                    let fetched = s.fetch().await.expect("fetch");
                    assert_eq!(decode(&fetched.records), s.records);
                }
                _ => {
                    let value = Bytes::from(format!("after cut {round}"));
                    let base = s.produce(0, batch(&[value])).await.expect("produce");
                    assert_eq!(base, next + round);
                }
            }
        }
        s.assert_fault_fired(&api);
        assert_eq!(s.stats(1).connections, 1, "{api:?}: one new connection");
        if api == ApiKey::Produce {
            let log = log_records(&s.scripted, 0);
            assert_eq!(log.len(), written.len() + 2, "each batch written once");
        }
    }
}

// ---------------------------------------------------------------------------
// Error codes.

/// The retriable codes, each with whether it makes the client re-read
/// metadata.
const RETRIABLE: [(i16, bool); 6] = [
    (6, true),  // NOT_LEADER_OR_FOLLOWER
    (5, true),  // LEADER_NOT_AVAILABLE
    (74, true), // FENCED_LEADER_EPOCH
    (75, true), // UNKNOWN_LEADER_EPOCH
    (3, true),  // UNKNOWN_TOPIC_OR_PARTITION
    (7, false), // REQUEST_TIMED_OUT
];

#[tokio::test]
async fn fetch_retries_retriable_error_codes_and_returns_the_appended_records() {
    let s = setup().await;
    let mut cases: Vec<(FaultAction, bool)> = RETRIABLE
        .iter()
        .map(|&(code, refresh)| (FaultAction::PartitionError(code), refresh))
        .collect();
    cases.push((FaultAction::TopicError(6), true));
    // Fetch v7+ has a top-level code: a fetch session error.
    cases.push((FaultAction::ResponseError(70), false));
    for (action, refreshes) in cases {
        s.scripted.reset_stats();
        s.scripted.script(
            Fault::on(ApiKey::Fetch)
                .broker(1)
                .times(2)
                .then(action.clone()),
        );
        let fetched = s
            .fetch()
            .await
            .unwrap_or_else(|e| panic!("{action:?}: {e}"));
        assert_eq!(decode(&fetched.records), s.records, "{action:?}");
        assert_eq!(
            (
                s.requests(ApiKey::Fetch),
                s.requests(ApiKey::Metadata),
                s.stats(1).connections,
            ),
            (3, if refreshes { 2 } else { 0 }, 0),
            "{action:?}: two retries on the same connection"
        );
        s.assert_fault_fired(&action);
    }
}

#[tokio::test]
async fn list_offsets_retries_retriable_error_codes_and_returns_the_offset() {
    let s = setup().await;
    let mut cases: Vec<(FaultAction, bool)> = RETRIABLE
        .iter()
        .map(|&(code, refresh)| (FaultAction::PartitionError(code), refresh))
        .collect();
    cases.push((FaultAction::TopicError(5), true));
    for (action, refreshes) in cases {
        s.scripted.reset_stats();
        s.scripted.script(
            Fault::on(ApiKey::ListOffsets)
                .broker(1)
                .times(2)
                .then(action.clone()),
        );
        let latest = s
            .latest(0)
            .await
            .unwrap_or_else(|e| panic!("{action:?}: {e}"));
        assert_eq!(latest, Some(RECORDS), "{action:?}");
        assert_eq!(
            (
                s.requests(ApiKey::ListOffsets),
                s.requests(ApiKey::Metadata)
            ),
            (3, if refreshes { 2 } else { 0 }),
            "{action:?}"
        );
        s.assert_fault_fired(&action);
    }
}

/// Metadata that names no leader (a partition error), or a topic error,
/// is read again until it names one.
#[tokio::test]
async fn leader_lookup_retries_retriable_metadata_error_codes() {
    let s = setup().await;
    let cases = [
        FaultAction::PartitionError(5),
        FaultAction::PartitionError(6),
        FaultAction::TopicError(5),
        FaultAction::TopicError(3),
        FaultAction::ResponseError(5),
    ];
    for action in cases {
        s.cluster.invalidate(TOPIC);
        s.scripted.reset_stats();
        s.scripted.script(
            Fault::on(ApiKey::Metadata)
                .topic(TOPIC)
                .times(2)
                .then(action.clone()),
        );
        let fetched = s
            .fetch()
            .await
            .unwrap_or_else(|e| panic!("{action:?}: {e}"));
        assert_eq!(decode(&fetched.records), s.records, "{action:?}");
        assert_eq!(
            (s.requests(ApiKey::Metadata), s.requests(ApiKey::Fetch)),
            (3, 1),
            "{action:?}"
        );
        s.assert_fault_fired(&action);
    }
}

/// A leader epoch bump the client has not seen: the broker fences the
/// client's epoch, the client re-reads metadata and retries with the new
/// epoch.
#[tokio::test]
async fn a_stale_leader_epoch_is_fenced_and_retried_with_the_new_one() {
    let s = setup().await;
    let before = s.cluster.leader(TOPIC, 0).await.expect("leader");
    // Same leader, next epoch.
    let now = s.scripted.move_leader(TOPIC, 0, 1).expect("epoch bump");
    assert_eq!(now.epoch, before.leader_epoch + 1);
    let fetched = s.fetch().await.expect("fetch");
    assert_eq!(decode(&fetched.records), s.records);
    assert_eq!(
        (s.requests(ApiKey::Fetch), s.requests(ApiKey::Metadata)),
        (2, 1)
    );
    let leader = s.cluster.leader(TOPIC, 0).await.expect("leader");
    assert_eq!(leader.leader_epoch, now.epoch);

    s.scripted.move_leader(TOPIC, 0, 1).expect("epoch bump");
    s.scripted.reset_stats();
    assert_eq!(s.latest(0).await.expect("list_offsets"), Some(RECORDS));
    assert_eq!(
        (
            s.requests(ApiKey::ListOffsets),
            s.requests(ApiKey::Metadata)
        ),
        (2, 1)
    );
}

/// Asserts `error` is the broker's `code` for `api` on partition 0 of
/// [`TOPIC`] at broker 1, and says so in its message.
fn assert_kafka_error(s: &Setup, error: &ClientError, api: ApiKey, code: i16) {
    match error {
        ClientError::Kafka {
            api: got_api,
            code: got_code,
            topic,
            partition,
            broker,
            ..
        } => {
            assert_eq!(
                (*got_api, *got_code, topic.as_deref(), *partition),
                (api, ErrorCode::from(code), Some(TOPIC), Some(0)),
                "{error}"
            );
            assert_eq!(*broker, s.addr(1), "{error}");
        }
        other => panic!("{api:?} {code}: {other:?}"),
    }
    let message = error.to_string();
    for part in [
        format!("topic {TOPIC:?} partition 0"),
        s.addr(1),
        ErrorCode::from(code).to_string(),
    ] {
        assert!(message.contains(&part), "{part:?} missing in: {message}");
    }
}

/// Non-retriable codes end the operation after one request, though the
/// fault would go on forever.
#[tokio::test]
async fn non_retriable_error_codes_surface_at_once_naming_topic_partition_and_broker() {
    let s = setup().await;
    let cases = [
        (ApiKey::Fetch, FaultAction::PartitionError(29), 29),
        (ApiKey::Fetch, FaultAction::TopicError(29), 29),
        (ApiKey::Fetch, FaultAction::ResponseError(29), 29),
        (ApiKey::Fetch, FaultAction::PartitionError(-1), -1),
        (ApiKey::ListOffsets, FaultAction::PartitionError(29), 29),
        (ApiKey::ListOffsets, FaultAction::PartitionError(-1), -1),
        (ApiKey::Produce, FaultAction::PartitionError(29), 29),
        (ApiKey::Produce, FaultAction::PartitionError(87), 87),
        (ApiKey::Metadata, FaultAction::TopicError(29), 29),
        (ApiKey::Metadata, FaultAction::PartitionError(29), 29),
    ];
    for (api, action, code) in cases {
        s.cluster.invalidate(TOPIC);
        s.scripted.reset_stats();
        let mut fault = Fault::on(api).times(u32::MAX).then(action.clone());
        if api == ApiKey::Metadata {
            fault = fault.topic(TOPIC);
        }
        s.scripted.script(fault);
        let written = log_records(&s.scripted, 0);
        let error = match api {
            ApiKey::ListOffsets => s.latest(0).await.map(|_| ()),
            ApiKey::Produce => s
                .produce(0, batch(&[Bytes::from_static(b"refused")]))
                .await
                .map(|_| ()),
            _ => s.fetch().await.map(|_| ()),
        }
        .expect_err("a non-retriable error");
        // A Metadata error is reported as Metadata's.
        assert_kafka_error(&s, &error, api, code);
        assert_eq!(s.requests(api), 1, "{api:?} {action:?}: not retried");
        assert_eq!(log_records(&s.scripted, 0), written, "nothing written");
        s.scripted.clear_faults();
    }
    // Without a script: a fetch past the end of the log.
    s.scripted.reset_stats();
    let error = within(
        HANG,
        "fetch",
        s.cluster
            .fetch(&FetchParams::new(TOPIC, 0, 100).with_max_wait(MAX_WAIT)),
    )
    .await
    .expect_err("out of range");
    assert_kafka_error(&s, &error, ApiKey::Fetch, 1);
    assert!(error.to_string().contains("offset 100"), "{error}");
    assert_eq!(s.requests(ApiKey::Fetch), 1);
}

// ---------------------------------------------------------------------------
// Leadership moves.

#[tokio::test]
async fn every_operation_follows_leadership_moved_to_another_broker() {
    for api in [
        ApiKey::Metadata,
        ApiKey::ListOffsets,
        ApiKey::Fetch,
        ApiKey::Produce,
    ] {
        let s = setup().await;
        if api == ApiKey::Metadata {
            s.cluster.invalidate(TOPIC);
        }
        // Broker 1 hands partition 0 to broker 2 as it gets the request,
        // then handles it: as the old leader, except Metadata, which
        // already names the new one.
        s.scripted.script(
            Fault::on(api)
                .broker(1)
                .topic(TOPIC)
                .partition(0)
                .then(FaultAction::MoveLeader { to: 2 }),
        );
        let value = Bytes::from_static(b"after the move");
        match api {
            ApiKey::ListOffsets => {
                assert_eq!(s.latest(0).await.expect("list_offsets"), Some(RECORDS));
            }
            ApiKey::Produce => {
                let base = s
                    .produce(0, batch(std::slice::from_ref(&value)))
                    .await
                    .expect("produce");
                assert_eq!(base, RECORDS);
            }
            _ => {
                let fetched = s.fetch().await.expect("fetch");
                assert_eq!(decode(&fetched.records), s.records, "{api:?}");
                assert_eq!(fetched.broker, s.addr(2), "{api:?}");
            }
        }
        s.assert_fault_fired(&api);
        let leader = s.scripted.leader(TOPIC, 0).expect("leader");
        assert_eq!((leader.node_id, leader.epoch), (2, 1), "{api:?}");
        let cached = s.cluster.leader(TOPIC, 0).await.expect("cached leader");
        assert_eq!(
            (cached.broker_id, cached.leader_epoch, cached.address),
            (2, 1, s.addr(2)),
            "{api:?}"
        );
        let (old, new) = (s.stats(1).requests_of(api), s.stats(2).requests_of(api));
        if api == ApiKey::Metadata {
            assert_eq!(s.requests(ApiKey::Fetch), 1);
            assert_eq!(s.stats(2).requests_of(ApiKey::Fetch), 1, "straight there");
        } else {
            assert_eq!((old, new), (1, 1), "{api:?}: refused by 1, done by 2");
        }
        if api == ApiKey::Produce {
            let mut expected = s.records.clone();
            expected.push((RECORDS, value));
            assert_eq!(log_records(&s.scripted, 0), expected, "written once");
        }
    }
}

/// Leadership moved behind the client's back (no fault on the request):
/// the old leader's refusal sends the client to the new one.
#[tokio::test]
async fn fetch_follows_a_leader_that_moved_between_requests() {
    let s = setup().await;
    for to in [2, 1] {
        s.scripted.move_leader(TOPIC, 0, to).expect("move");
        s.scripted.reset_stats();
        let fetched = s.fetch().await.expect("fetch");
        assert_eq!(decode(&fetched.records), s.records);
        assert_eq!(fetched.broker, s.addr(to));
        let from = 3 - to;
        assert_eq!(
            (
                s.stats(from).requests_of(ApiKey::Fetch),
                s.stats(to).requests_of(ApiKey::Fetch)
            ),
            (1, 1)
        );
    }
}

// ---------------------------------------------------------------------------
// Produce: never written twice.

/// After a connection lost with the Produce on the wire, the client cannot
/// know whether the batch was written, so it returns the error and does
/// not send the batch again. The log shows what the broker did: nothing
/// for a dropped request, the batch once for every other fault.
#[tokio::test(start_paused = true)]
async fn produce_is_not_resent_after_a_connection_lost_mid_request() {
    let s = setup().await;
    let mut actions = connection_faults();
    actions.push(FaultAction::Delay(FOREVER));
    let mut expected = s.records.clone();
    for (n, action) in actions.into_iter().enumerate() {
        s.scripted.reset_stats();
        s.scripted
            .script(Fault::on(ApiKey::Produce).broker(1).then(action.clone()));
        let value = Bytes::from(format!("produce {n}"));
        let started = Instant::now();
        let error = s
            .produce(0, batch(std::slice::from_ref(&value)))
            .await
            .expect_err("not retried");
        let lost = match &error {
            ClientError::Connection(e) => e.clone(),
            other => panic!("{action:?}: {other:?}"),
        };
        if let FaultAction::Delay(_) = action {
            assert!(
                matches!(
                    lost,
                    ConnectionError::RequestTimeout {
                        api: ApiKey::Produce,
                        ..
                    }
                ),
                "{lost:?}"
            );
            // The request timeout plus the Produce timeout.
            assert_eq!(
                started.elapsed(),
                REQUEST_TIMEOUT + Duration::from_millis(500)
            );
        } else {
            assert!(is_error_of(&action, &lost), "{action:?}: {lost:?}");
        }
        assert_eq!(s.requests(ApiKey::Produce), 1, "{action:?}: sent once");
        if action != FaultAction::DropRequest {
            let offset = i64::try_from(expected.len()).expect("small");
            expected.push((offset, value));
        }
        assert_eq!(log_records(&s.scripted, 0), expected, "{action:?}");
        s.assert_fault_fired(&action);
        // The client carries on, on a new connection.
        let value = Bytes::from(format!("produce {n} again"));
        let base = s
            .produce(0, batch(std::slice::from_ref(&value)))
            .await
            .unwrap_or_else(|e| panic!("{action:?}: {e}"));
        assert_eq!(base, i64::try_from(expected.len()).expect("small"));
        expected.push((base, value));
        assert_eq!(log_records(&s.scripted, 0), expected, "{action:?}");
    }
}

/// A retriable error code means the broker did not write the batch, so the
/// client sends it again; the log holds it once.
#[tokio::test]
async fn produce_retried_after_an_error_code_writes_the_batch_once() {
    let s = setup().await;
    // REQUEST_TIMED_OUT is left out: on Produce it may mean written (see
    // below).
    let mut cases: Vec<FaultAction> = RETRIABLE
        .iter()
        .filter(|&&(code, _)| code != 7)
        .map(|&(code, _)| FaultAction::PartitionError(code))
        .collect();
    cases.push(FaultAction::TopicError(6));
    let mut expected = s.records.clone();
    for (n, action) in cases.into_iter().enumerate() {
        s.scripted.reset_stats();
        s.scripted.script(
            Fault::on(ApiKey::Produce)
                .broker(1)
                .times(2)
                .then(action.clone()),
        );
        let value = Bytes::from(format!("produce {n}"));
        let base = s
            .produce(0, batch(std::slice::from_ref(&value)))
            .await
            .unwrap_or_else(|e| panic!("{action:?}: {e}"));
        assert_eq!(base, i64::try_from(expected.len()).expect("small"));
        expected.push((base, value));
        assert_eq!(log_records(&s.scripted, 0), expected, "{action:?}");
        assert_eq!(s.requests(ApiKey::Produce), 3, "{action:?}");
        s.assert_fault_fired(&action);
    }
}

/// Two retriable codes say the leader may have written the batch:
/// REQUEST_TIMED_OUT (the replicas did not acknowledge in time) and
/// NOT_ENOUGH_REPLICAS_AFTER_APPEND. Like a lost connection, they end a
/// Produce with the error instead of a resend that could write it twice.
#[tokio::test]
async fn produce_is_not_resent_after_an_error_code_that_may_mean_written() {
    let s = setup().await;
    for code in [7, 20] {
        s.scripted.reset_stats();
        s.scripted.script(
            Fault::on(ApiKey::Produce)
                .times(u32::MAX)
                .then(FaultAction::PartitionError(code)),
        );
        let error = s
            .produce(0, batch(&[Bytes::from_static(b"maybe written")]))
            .await
            .expect_err("not resent");
        assert_kafka_error(&s, &error, ApiKey::Produce, code);
        assert_eq!(s.requests(ApiKey::Produce), 1, "{code}: sent once");
        s.scripted.clear_faults();
        // Fetch retries the same codes.
        s.scripted
            .script(Fault::on(ApiKey::Fetch).then(FaultAction::PartitionError(code)));
        let fetched = s.fetch().await.expect("fetch retried");
        assert_eq!(decode(&fetched.records), s.records);
        assert_eq!(s.requests(ApiKey::Fetch), 2, "{code}");
    }
}

/// Failures before the Produce is sent — the leader lookup's Metadata
/// request lost, or the new connection to the leader failing its
/// ApiVersions handshake — are retried: the batch cannot have been written.
#[tokio::test]
async fn produce_is_retried_after_failures_before_it_was_sent() {
    let cases = [
        (ApiKey::ApiVersions, FaultAction::CutBeforeResponse),
        (ApiKey::ApiVersions, FaultAction::DropRequest),
        (
            ApiKey::ApiVersions,
            FaultAction::TruncatedFrame { missing: 10 },
        ),
        (ApiKey::Metadata, FaultAction::CutBeforeResponse),
        (ApiKey::Metadata, FaultAction::DropRequest),
    ];
    for (api, action) in cases {
        // Partition 1's leader is broker 2, which the client has not
        // connected to yet; the leader is looked up again, and every
        // broker's Metadata fails once.
        let s = setup().await;
        s.cluster.invalidate(TOPIC);
        let times = if api == ApiKey::Metadata { 2 } else { 1 };
        s.scripted
            .script(Fault::on(api).times(times).then(action.clone()));
        let value = Bytes::from_static(b"to partition 1");
        let base = s
            .produce(1, batch(std::slice::from_ref(&value)))
            .await
            .unwrap_or_else(|e| panic!("{api:?} {action:?}: {e}"));
        assert_eq!(base, 0);
        assert_eq!(log_records(&s.scripted, 1), vec![(0, value)]);
        assert_eq!(s.requests(ApiKey::Produce), 1, "{api:?} {action:?}");
        s.assert_fault_fired(&action);
    }
}

// ---------------------------------------------------------------------------
// Timers: delays, deadlines.

/// A reply within the request timeout is waited for. A reply slower than
/// the request timeout: the request times out, its connection is dropped,
/// and the retry on a new connection succeeds, after the timeout plus one
/// backoff — or, for Metadata, at once from the next broker the client
/// knows. The same holds for the ApiVersions handshake at bootstrap.
#[tokio::test(start_paused = true)]
async fn a_reply_slower_than_the_request_timeout_is_retried_and_a_faster_one_awaited() {
    let s = setup().await;
    let backoff = Duration::from_millis(10);
    for api in [ApiKey::Metadata, ApiKey::ListOffsets, ApiKey::Fetch] {
        let timeout = if api == ApiKey::Fetch {
            REQUEST_TIMEOUT + MAX_WAIT
        } else {
            REQUEST_TIMEOUT
        };
        for delay in [REQUEST_TIMEOUT / 2, FOREVER] {
            s.cluster.invalidate(TOPIC);
            // Look the leader up first unless Metadata is the one delayed.
            if api != ApiKey::Metadata {
                s.cluster.leader(TOPIC, 0).await.expect("leader");
            }
            s.scripted.reset_stats();
            let mut fault = Fault::on(api).broker(1).then(FaultAction::Delay(delay));
            if api == ApiKey::Metadata {
                fault = fault.topic(TOPIC);
            }
            s.scripted.script(fault);
            let started = Instant::now();
            if api == ApiKey::ListOffsets {
                assert_eq!(s.latest(0).await.expect("list_offsets"), Some(RECORDS));
            } else {
                let fetched = s.fetch().await.expect("fetch");
                assert_eq!(decode(&fetched.records), s.records);
            }
            let (elapsed, requests, connections) = match (delay, api) {
                (FOREVER, ApiKey::Metadata) => (timeout, 2, 1),
                (FOREVER, _) => (timeout + backoff, 2, 1),
                _ => (delay, 1, 0),
            };
            assert_eq!(started.elapsed(), elapsed, "{api:?} {delay:?}");
            assert_eq!(s.requests(api), requests, "{api:?} {delay:?}");
            assert_eq!(
                s.stats(1).connections,
                connections,
                "{api:?} {delay:?}: new connections to broker 1"
            );
            s.assert_fault_fired(&api);
        }
    }
    // The ApiVersions handshake that opens a connection, at bootstrap.
    let scripted = ScriptedCluster::start(1).await.expect("scripted cluster");
    scripted.script(Fault::on(ApiKey::ApiVersions).then(FaultAction::Delay(FOREVER)));
    let started = Instant::now();
    Cluster::connect(client_config(&scripted))
        .await
        .expect("connects on the retry");
    assert_eq!(started.elapsed(), REQUEST_TIMEOUT + backoff);
    let stats = scripted.stats(1).expect("broker");
    assert_eq!(
        (stats.requests_of(ApiKey::ApiVersions), stats.connections),
        (2, 2)
    );
}

/// Asserts that `error` is `RetriesExhausted` after more than one attempt
/// within [`DEADLINE`], and returns its last failure.
fn exhausted(what: &str, error: &ClientError, elapsed: Duration) -> Option<ClientError> {
    assert!(elapsed <= DEADLINE, "{what}: took {elapsed:?}");
    match error {
        ClientError::RetriesExhausted {
            attempts,
            elapsed: reported,
            deadline,
            last,
            ..
        } => {
            assert!(*attempts > 1, "{what}: {error}");
            assert!(*reported <= DEADLINE, "{what}: {error}");
            assert_eq!(*deadline, DEADLINE);
            last.as_deref().cloned()
        }
        other => panic!("{what}: {other:?}"),
    }
}

/// Faults that never stop end every operation in `RetriesExhausted` by
/// the deadline, whose message says what was tried and the last failure.
#[tokio::test(start_paused = true)]
async fn a_fault_that_never_stops_ends_in_retries_exhausted_by_the_deadline() {
    type Check = fn(&ClientError) -> bool;
    let lost: Check = |e| matches!(e, ClientError::Connection(e) if e.is_connection_lost());
    let timed_out: Check = |e| {
        matches!(
            e,
            ClientError::Connection(ConnectionError::RequestTimeout { .. })
        )
    };
    let not_leader: Check = |e| e.code() == Some(ErrorCode::NotLeaderOrFollower);
    let metadata_lost: Check = |e| {
        matches!(e, ClientError::NoBrokerAnswered { last, .. }
            if matches!(**last, ClientError::Connection(ref c) if c.is_connection_lost()))
    };
    let leader_unknown: Check = |e| {
        matches!(
            e,
            ClientError::Kafka {
                api: ApiKey::Metadata,
                code: ErrorCode::LeaderNotAvailable,
                ..
            }
        )
    };
    let cases: Vec<(ApiKey, FaultAction, Check)> = vec![
        (ApiKey::Fetch, FaultAction::PartitionError(6), not_leader),
        (ApiKey::Fetch, FaultAction::CutBeforeResponse, lost),
        (
            ApiKey::Fetch,
            FaultAction::OversizedFrame {
                length: 0xFFFF_FFFF,
            },
            lost,
        ),
        // Each attempt waits out its request timeout (1.1 s): the deadline
        // strikes in the third, which reports the second's timeout.
        (ApiKey::Fetch, FaultAction::Delay(FOREVER), timed_out),
        (
            ApiKey::ListOffsets,
            FaultAction::PartitionError(6),
            not_leader,
        ),
        (ApiKey::ListOffsets, FaultAction::DropRequest, lost),
        (ApiKey::Metadata, FaultAction::TopicError(5), leader_unknown),
        (ApiKey::Metadata, FaultAction::DropRequest, metadata_lost),
        (ApiKey::Produce, FaultAction::PartitionError(6), not_leader),
    ];
    for (api, action, check) in cases {
        let what = format!("{api:?} {action:?}");
        let s = setup().await;
        s.cluster.invalidate(TOPIC);
        let mut fault = Fault::on(api).times(u32::MAX).then(action.clone());
        if api == ApiKey::Metadata {
            fault = fault.topic(TOPIC);
        }
        s.scripted.script(fault);
        let started = Instant::now();
        let result = match api {
            ApiKey::ListOffsets => s.latest(0).await.map(|_| ()),
            ApiKey::Produce => s
                .produce(0, batch(&[Bytes::from_static(b"never")]))
                .await
                .map(|_| ()),
            _ => s.fetch().await.map(|_| ()),
        };
        let error = result.expect_err(&what);
        let last = exhausted(&what, &error, started.elapsed());
        match last {
            Some(last) => assert!(check(&last), "{what}: {last:?}"),
            None => panic!("{what}: no last failure in {error:?}"),
        }
        if matches!(action, FaultAction::Delay(_)) {
            assert_eq!(started.elapsed(), DEADLINE, "{what}");
            assert!(
                matches!(error, ClientError::RetriesExhausted { attempts: 3, .. }),
                "{what}: {error}"
            );
        }
        let message = error.to_string();
        assert!(message.starts_with("gave up on "), "{message}");
        assert!(
            message.contains(&format!("topic {TOPIC:?} partition 0")),
            "{message}"
        );
        assert_eq!(
            log_records(&s.scripted, 0),
            s.records,
            "{what}: nothing written"
        );
    }
}

/// Bootstrap against a broker whose handshake or Metadata always fails
/// gives up by the deadline, naming the broker.
#[tokio::test(start_paused = true)]
async fn bootstrap_against_a_broker_that_always_fails_gives_up_by_the_deadline() {
    let cases = [
        (ApiKey::ApiVersions, FaultAction::CutBeforeResponse),
        (ApiKey::ApiVersions, FaultAction::Delay(FOREVER)),
        (
            ApiKey::Metadata,
            FaultAction::CutDuringResponse { bytes: None },
        ),
    ];
    for (api, action) in cases {
        let what = format!("{api:?} {action:?}");
        let scripted = ScriptedCluster::start(1).await.expect("scripted cluster");
        scripted.script(Fault::on(api).times(u32::MAX).then(action));
        let started = Instant::now();
        let mut config = client_config(&scripted);
        config.bootstrap_deadline = DEADLINE;
        let error = Cluster::connect(config).await.expect_err(&what);
        exhausted(&what, &error, started.elapsed());
        let message = error.to_string();
        assert!(message.contains("gave up on bootstrap"), "{message}");
        assert!(message.contains(&scripted.bootstrap()), "{message}");
    }
}

/// An ApiVersions answer with an error code is not a lost connection: it
/// fails the handshake at once, naming the broker.
#[tokio::test]
async fn a_handshake_answered_with_an_error_code_fails_at_once() {
    for code in [35, -1] {
        let scripted = ScriptedCluster::start(1).await.expect("scripted cluster");
        scripted.script(
            Fault::on(ApiKey::ApiVersions)
                .times(u32::MAX)
                .then(FaultAction::ResponseError(code)),
        );
        let error = within(HANG, "connect", Cluster::connect(client_config(&scripted)))
            .await
            .expect_err("handshake refused");
        let inner = match &error {
            ClientError::NoBrokerAnswered { last, .. } => match last.as_ref() {
                ClientError::Connection(e) => e.clone(),
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        };
        match (code, &inner) {
            (
                35,
                ConnectionError::NoCommonVersion {
                    api: ApiKey::ApiVersions,
                    ..
                },
            ) => {}
            (
                -1,
                ConnectionError::Handshake {
                    code: ErrorCode::UnknownServerError,
                    ..
                },
            ) => {}
            other => panic!("{other:?}"),
        }
        assert!(error.to_string().contains(&scripted.bootstrap()), "{error}");
        let stats = scripted.stats(1).expect("broker");
        assert_eq!(stats.requests_of(ApiKey::ApiVersions), 1, "not retried");
    }
}

/// Three partitions on one broker and one on the other: `fetch_many`
/// sends one request per leader, and what a shared request could not
/// answer cleanly (an error code, a moved leader) is fetched again on its
/// own, so each result is what `fetch` gives.
#[tokio::test]
async fn fetch_many_shares_a_request_per_leader_and_retries_partitions_alone() {
    let scripted = ScriptedCluster::start(2).await.expect("scripted cluster");
    scripted.create_topic(TOPIC, 4).expect("topic");
    let mut written = Vec::new();
    for p in 0..4 {
        let value = Bytes::from(format!("partition {p}"));
        scripted
            .append(TOPIC, p, batch(std::slice::from_ref(&value)))
            .expect("appended");
        written.push(value);
    }
    let cluster = within(HANG, "connect", Cluster::connect(client_config(&scripted)))
        .await
        .expect("connects");
    let params: Vec<FetchParams> = (0..4)
        .map(|p| FetchParams::new(TOPIC, p, 0).with_max_wait(MAX_WAIT))
        .collect();
    let leaders: Vec<i32> = (0..4)
        .map(|p| scripted.leader(TOPIC, p).expect("leader").node_id)
        .collect();
    let brokers: std::collections::BTreeSet<i32> = leaders.iter().copied().collect();
    let check = |many: walfetch::cluster::FetchedMany| {
        for (p, result) in many.partitions.into_iter().enumerate() {
            let fetched = result.unwrap_or_else(|e| panic!("partition {p}: {e}"));
            assert_eq!(decode(&fetched.records), vec![(0, written[p].clone())]);
        }
        many.requests
    };
    // Warm the leaders' metadata, then count requests per broker.
    check(within(HANG, "warm-up", cluster.fetch_many(&params)).await);
    scripted.reset_stats();
    let requests = check(within(HANG, "fetch_many", cluster.fetch_many(&params)).await);
    assert_eq!(requests, brokers.len(), "one request per leader");
    for node in &brokers {
        let stats = scripted.stats(*node).expect("stats");
        assert_eq!(stats.requests_of(ApiKey::Fetch), 1, "broker {node}");
    }
    // A retriable error code on one partition: it alone is fetched again.
    scripted.script(Fault::on(ApiKey::Fetch).topic(TOPIC).partition(1).then(
        FaultAction::PartitionError(ErrorCode::NotLeaderOrFollower.code()),
    ));
    let requests = check(within(HANG, "error code", cluster.fetch_many(&params)).await);
    assert_eq!(requests, brokers.len() + 1);
    // A leader moved away: the old leader answers NOT_LEADER_OR_FOLLOWER,
    // and the partition follows its leader on its own.
    let other = *scripted
        .node_ids()
        .iter()
        .find(|&&n| n != leaders[2])
        .expect("two brokers");
    scripted.script(
        Fault::on(ApiKey::Fetch)
            .topic(TOPIC)
            .partition(2)
            .then(FaultAction::MoveLeader { to: other }),
    );
    check(within(HANG, "moved leader", cluster.fetch_many(&params)).await);
    // One partition twice: a request names it once, the second goes alone.
    let twice = [params[0].clone(), params[0].clone()];
    let many = within(HANG, "twice", cluster.fetch_many(&twice)).await;
    assert_eq!(many.requests, 2);
    for fetched in many.partitions {
        assert_eq!(
            decode(&fetched.expect("answered").records),
            vec![(0, written[0].clone())]
        );
    }
}

/// A broker that spends a request's `max_bytes` on its first partitions
/// (Tansu 0.6: `Habits::spend_request_bytes`) answers the others with no
/// records below their high watermark. `fetch_many` fetches such a
/// starved partition again on its own, so every result holds its first
/// batch as a single fetch would; once the broker is seen giving one
/// partition more than its limit while starving another, its partitions
/// go one a request.
#[tokio::test]
async fn fetch_many_fetches_a_starved_partition_again_and_stops_sharing_with_that_broker() {
    let scripted = ScriptedCluster::start(1).await.expect("scripted cluster");
    scripted.create_topic(TOPIC, 2).expect("topic");
    let mut first = Vec::new();
    for p in 0..2 {
        for b in 0..3 {
            let value = Bytes::from(format!("partition {p} batch {b} {}", "v".repeat(200)));
            scripted
                .append(TOPIC, p, batch(std::slice::from_ref(&value)))
                .expect("appended");
            if b == 0 {
                first.push(value);
            }
        }
    }
    scripted
        .set_habits(1, walfetch_testkit::Habits::TANSU_0_6)
        .expect("habits");
    let cluster = within(HANG, "connect", Cluster::connect(client_config(&scripted)))
        .await
        .expect("connects");
    let limit = i32::try_from(batch(std::slice::from_ref(&first[0])).len()).expect("small");
    let params: Vec<FetchParams> = (0..2)
        .map(|p| {
            FetchParams::new(TOPIC, p, 0)
                .with_max_wait(MAX_WAIT)
                .with_max_bytes(limit)
        })
        .collect();
    let check = |many: walfetch::cluster::FetchedMany| {
        for (p, result) in many.partitions.into_iter().enumerate() {
            let fetched = result.unwrap_or_else(|e| panic!("partition {p}: {e}"));
            let records = decode(&fetched.records);
            assert_eq!(
                records.first(),
                Some(&(0, first[p].clone())),
                "partition {p}"
            );
        }
        many.requests
    };
    // The shared request starves partition 1 (partition 0 takes every
    // batch): it is fetched again alone.
    assert_eq!(
        check(within(HANG, "shared", cluster.fetch_many(&params)).await),
        2
    );
    scripted.reset_stats();
    // From then on, one request each.
    assert_eq!(
        check(within(HANG, "alone", cluster.fetch_many(&params)).await),
        2
    );
    assert_eq!(
        scripted.stats(1).expect("stats").requests_of(ApiKey::Fetch),
        2
    );
}

/// A broker that stops answering on a connection it keeps open (a stuck
/// request handler, a stopped process): the operation's deadline came
/// before the request's own timeout (a Fetch's is the request timeout
/// plus its wait), the attempt was dropped, and the connection stayed in
/// the pool as if healthy, so every later fetch waited on it too, even
/// after the partition's leader moved. The deadline now ends the request
/// as a timeout, which drops the connection. With the CLI's
/// `--timeout` (`ClusterConfig::with_timeout`) and with the defaults.
#[tokio::test(start_paused = true)]
async fn a_connection_that_stops_answering_is_dropped_at_the_deadline() {
    for timeout in [Some(Duration::from_secs(3)), None] {
        let scripted = ScriptedCluster::start(2).await.unwrap();
        scripted.create_topic(TOPIC, 1).unwrap();
        scripted
            .append(TOPIC, 0, batch(&[Bytes::from_static(b"x")]))
            .unwrap();
        let config = ClusterConfig::new([scripted.bootstrap()]);
        let config = match timeout {
            Some(t) => config.with_timeout(t),
            None => config,
        };
        let cluster = Cluster::connect(config).await.unwrap();
        let params = FetchParams::new(TOPIC, 0, 0).with_max_wait(Duration::from_millis(100));
        cluster.fetch(&params).await.expect("a first fetch");
        scripted.script(
            Fault::on(ApiKey::Fetch)
                .broker(1)
                .then(FaultAction::Delay(Duration::from_secs(3600))),
        );
        let hung = cluster.fetch(&params).await;
        assert!(
            matches!(hung, Err(ClientError::RetriesExhausted { .. })),
            "{timeout:?}: {hung:?}"
        );
        scripted.move_leader(TOPIC, 0, 2).unwrap();
        for i in 0..3 {
            let fetched = cluster.fetch(&params).await;
            assert!(
                fetched.is_ok(),
                "{timeout:?}, fetch {i} after the hang: {fetched:?}"
            );
        }
    }
}
