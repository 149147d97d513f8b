//! The scripted two-broker set-up, its client, the faults and the records the tests write and read back.

pub(crate) use std::future::Future;
pub(crate) use std::time::Duration;

pub(crate) use bytes::Bytes;
pub(crate) use kafka_protocol::messages::{ApiKey, MetadataRequest};
pub(crate) use tokio::time::Instant;
pub(crate) use walfetch::cluster::{
    fetch_on, ClientError, Cluster, ClusterConfig, FetchParams, FetchedPartition, IsolationLevel,
    OffsetSpec, RetryPolicy,
};
pub(crate) use walfetch::codec::{BatchBuilder, Batches, DecodeOptions, NewRecord};
pub(crate) use walfetch::connection::frame::DEFAULT_MAX_FRAME_BYTES;
pub(crate) use walfetch::connection::{
    Connection, ConnectionConfig, ConnectionError, RequestOptions,
};
pub(crate) use walfetch::error_code::ErrorCode;
pub(crate) use walfetch_testkit::{BrokerStats, Fault, FaultAction, ScriptedCluster};

pub(crate) const TOPIC: &str = "wal";
/// Records appended to partition 0 by [`setup`]: offsets 0 to 8.
pub(crate) const RECORDS: i64 = 9;
/// The clients' request (and connect) timeout.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(1);
/// The fetches' `max_wait`, added to the request timeout of a Fetch.
pub(crate) const MAX_WAIT: Duration = Duration::from_millis(100);
/// The clients' overall deadline per operation.
pub(crate) const DEADLINE: Duration = Duration::from_secs(3);
/// How long any single operation of a real-time test may take before the
/// test calls it a hang.
pub(crate) const HANG: Duration = Duration::from_secs(10);
/// A delay far past every timeout here.
pub(crate) const FOREVER: Duration = Duration::from_secs(3600);

/// Backoff 10, 20, 40, 80, then 100 ms, without jitter, so retry timing is
/// exact.
pub(crate) fn retry_policy(deadline: Duration) -> RetryPolicy {
    RetryPolicy {
        initial_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_millis(100),
        multiplier: 2.0,
        jitter: 0.0,
        deadline,
    }
}

pub(crate) fn client_config(scripted: &ScriptedCluster) -> ClusterConfig {
    let mut config = ClusterConfig::new([scripted.bootstrap()]);
    config.retry = retry_policy(DEADLINE);
    config.connection.connect_timeout = REQUEST_TIMEOUT;
    config.connection.request_timeout = REQUEST_TIMEOUT;
    config.produce_timeout = Duration::from_millis(500);
    config
}

/// Runs `operation`, failing the test if it has not ended after `limit`.
pub(crate) async fn within<T>(
    limit: Duration,
    what: &str,
    operation: impl Future<Output = T>,
) -> T {
    tokio::time::timeout(limit, operation)
        .await
        .unwrap_or_else(|_| panic!("{what}: still running after {limit:?}"))
}

/// One uncompressed batch holding `values`.
pub(crate) fn batch(values: &[Bytes]) -> Bytes {
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
pub(crate) fn decode(records: &Bytes) -> Vec<(i64, Bytes)> {
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
pub(crate) fn log_records(scripted: &ScriptedCluster, partition: i32) -> Vec<(i64, Bytes)> {
    let log = scripted.log(TOPIC, partition).expect("partition");
    log.batches()
        .iter()
        .flat_map(|b| decode(&b.bytes))
        .collect()
}

/// Two brokers; topic [`TOPIC`] with partition 0 led by broker 1 and
/// partition 1 by broker 2; partition 0 holds three batches of three
/// records; a client bootstrapped from broker 1.
pub(crate) struct Setup {
    pub(crate) scripted: ScriptedCluster,
    pub(crate) cluster: Cluster,
    /// The records of partition 0.
    pub(crate) records: Vec<(i64, Bytes)>,
}

pub(crate) async fn setup() -> Setup {
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

pub(crate) fn fetch_params(partition: i32) -> FetchParams {
    FetchParams::new(TOPIC, partition, 0).with_max_wait(MAX_WAIT)
}

impl Setup {
    pub(crate) fn addr(&self, node_id: i32) -> String {
        self.scripted
            .addr(node_id)
            .expect("known broker")
            .to_string()
    }

    pub(crate) fn stats(&self, node_id: i32) -> BrokerStats {
        self.scripted.stats(node_id).expect("known broker")
    }

    /// Requests of `api` received by all brokers.
    pub(crate) fn requests(&self, api: ApiKey) -> u64 {
        self.scripted
            .node_ids()
            .into_iter()
            .map(|n| self.stats(n).requests_of(api))
            .sum()
    }

    pub(crate) async fn fetch(&self) -> Result<FetchedPartition, ClientError> {
        within(HANG, "fetch", self.cluster.fetch(&fetch_params(0))).await
    }

    pub(crate) async fn latest(&self, partition: i32) -> Result<Option<i64>, ClientError> {
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

    pub(crate) async fn produce(&self, partition: i32, records: Bytes) -> Result<i64, ClientError> {
        within(
            HANG,
            "produce",
            self.cluster.produce(TOPIC, partition, records),
        )
        .await
    }

    /// Counters reset, and `action` scripted for the next two `api`
    /// requests broker 1 receives.
    pub(crate) fn fails_twice_on_broker_1(&self, api: ApiKey, action: &FaultAction) {
        self.scripted.reset_stats();
        self.scripted
            .script(Fault::on(api).broker(1).times(2).then(action.clone()));
    }

    /// Counters reset, and `action` scripted for the next `api` request
    /// broker 1 receives.
    pub(crate) fn fails_once_on_broker_1(&self, api: ApiKey, action: &FaultAction) {
        self.scripted.reset_stats();
        self.scripted
            .script(Fault::on(api).broker(1).then(action.clone()));
    }

    /// The client forgets the leaders, counters reset, and `action`
    /// scripted for the next `times` Metadata requests about [`TOPIC`]: the
    /// next operation's leader lookup meets it.
    pub(crate) fn leader_lookup_fails(&self, times: u32, action: &FaultAction) {
        self.cluster.invalidate(TOPIC);
        self.scripted.reset_stats();
        self.scripted.script(
            Fault::on(ApiKey::Metadata)
                .topic(TOPIC)
                .times(times)
                .then(action.clone()),
        );
    }

    /// A fetch of partition 0 despite `fault`: it returns every record
    /// written at set-up.
    pub(crate) async fn fetches_every_record(&self, fault: &FaultAction) -> FetchedPartition {
        let fetched = self
            .fetch()
            .await
            .unwrap_or_else(|e| panic!("{fault:?}: {e}"));
        assert_eq!(decode(&fetched.records), self.records, "{fault:?}");
        fetched
    }

    /// Partition 0's latest offset despite `fault`: [`RECORDS`].
    pub(crate) async fn lists_the_latest_offset(&self, fault: &FaultAction) {
        let latest = self
            .latest(0)
            .await
            .unwrap_or_else(|e| panic!("{fault:?}: {e}"));
        assert_eq!(latest, Some(RECORDS), "{fault:?}");
    }

    pub(crate) fn assert_fault_fired(&self, what: &dyn std::fmt::Debug) {
        assert!(
            self.scripted.pending_faults().is_empty(),
            "{what:?}: the fault did not fire"
        );
    }
}

/// Faults that lose the connection after the broker read the request and
/// before the client has a whole response.
pub(crate) fn connection_faults() -> Vec<FaultAction> {
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
pub(crate) fn is_error_of(action: &FaultAction, error: &ConnectionError) -> bool {
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

/// The retriable codes, each with whether it makes the client re-read
/// metadata.
pub(crate) const RETRIABLE: [(i16, bool); 6] = [
    (6, true),  // NOT_LEADER_OR_FOLLOWER
    (5, true),  // LEADER_NOT_AVAILABLE
    (74, true), // FENCED_LEADER_EPOCH
    (75, true), // UNKNOWN_LEADER_EPOCH
    (3, true),  // UNKNOWN_TOPIC_OR_PARTITION
    (7, false), // REQUEST_TIMED_OUT
];

/// Asserts `error` is the broker's `code` for `api` on partition 0 of
/// [`TOPIC`] at broker 1, and says so in its message.
/// Each of [`RETRIABLE`] as a partition error, with whether it makes the
/// client re-read metadata.
pub(crate) fn retriable_partition_errors() -> Vec<(FaultAction, bool)> {
    RETRIABLE
        .iter()
        .map(|&(code, refresh)| (FaultAction::PartitionError(code), refresh))
        .collect()
}

pub(crate) fn assert_kafka_error(s: &Setup, error: &ClientError, api: ApiKey, code: i16) {
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
