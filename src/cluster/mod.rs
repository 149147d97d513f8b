//! The cluster client: metadata, leaders, a connection per broker, and the
//! operations walfetch needs (ListOffsets, Fetch, Produce, CreateTopics,
//! InitProducerId),
//! each retried under a deadline.
//!
//! A partition operation asks the cached metadata for the partition's
//! leader (reading `Metadata` when it is not known), sends the request on
//! the pooled connection to that broker, and reads the answer. When the
//! answer is a retriable error (`NOT_LEADER_OR_FOLLOWER`,
//! `FENCED_LEADER_EPOCH`, `UNKNOWN_LEADER_EPOCH`, `LEADER_NOT_AVAILABLE`,
//! `UNKNOWN_TOPIC_OR_PARTITION`, ...) or the connection is lost, the
//! partition's metadata is dropped (and a broken connection closed), and the
//! operation is tried again after an exponential backoff with jitter
//! ([`RetryPolicy`]), until the policy's deadline. Non-retriable errors are
//! returned at once, naming the topic, partition and broker. Metadata read
//! again so is read at most once every [`RetryPolicy::initial_backoff`] a
//! topic, however many of its partitions wait (see [`Cluster::leader`]).
//!
//! Each operation lives in its own file with its request and response code:
//! its `Cluster` method and the single attempt that method retries
//! (`metadata.rs`, `list_offsets.rs`, `fetch.rs`, `produce.rs`,
//! `create_topics.rs`). This file holds the client itself, leader lookup
//! and the retry driver. `init_producer_id.rs` gives the idempotent WAL
//! writer its producer id.
//!
//! # References
//! - Kafka protocol guide: <https://kafka.apache.org/protocol> ("Partitioning
//!   and bootstrapping": clients bootstrap from any broker, then send
//!   partition requests to the leader from Metadata).
//! - KIP-320 (leader epochs and fencing), KIP-580 (exponential backoff with
//!   jitter for client retries).

mod bootstrap;
mod create_topics;
mod error;
mod fetch;
mod follower;
mod init_producer_id;
mod list_offsets;
mod metadata;

mod pool;
mod produce;
mod retry;
mod throttle;
mod topic_id;

use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use kafka_protocol::messages::ApiKey;
use tokio::time::Instant;

pub use bootstrap::DEFAULT_BOOTSTRAP_DEADLINE;
pub use create_topics::NewTopic;
#[doc(hidden)]
pub use create_topics::{create_topics_request, read_create_topics_response};
use error::Asked;
pub use error::ClientError;
// The request builders and response readers are internals (tests,
// benches and fuzzing use them); the operations on `Cluster` are the API.
#[doc(hidden)]
pub use fetch::{
    fetch_on, fetch_request, fetch_request_for, read_fetch_response, read_fetch_response_for,
    FetchTarget,
};
pub use fetch::{
    FetchParams, FetchedMany, FetchedPartition, IsolationLevel, MAX_CONSECUTIVE_OMISSIONS,
    OMITTED_FIRST_WAIT, OMITTED_WAIT_CAP,
};
pub use init_producer_id::ProducerIdentity;
#[doc(hidden)]
pub use init_producer_id::{init_producer_id_request, read_init_producer_id_response};
#[doc(hidden)]
pub use list_offsets::{list_offsets_request, read_list_offsets_response};
pub use list_offsets::{ListedOffset, OffsetSpec};
#[doc(hidden)]
pub use metadata::metadata_request;
pub use metadata::{BrokerInfo, ClusterMetadata, PartitionInfo, PartitionLeader, TopicInfo};
use pool::Pool;
#[doc(hidden)]
pub use produce::{produce_request, read_produce_response};
pub use produce::{ProduceAnswer, ACKS_ALL};
pub use retry::RetryPolicy;

use crate::connection::{Connection, ConnectionConfig, ConnectionStats};
use crate::error_code::ErrorCode;

/// Settings of a [`Cluster`].
///
/// The defaults fail fast on a dead or wrong address and are patient with
/// a live cluster: connecting (name resolution and TCP) and the
/// `ApiVersions` answer that opens a connection each have 5 s
/// ([`crate::connection::DEFAULT_CONNECT_TIMEOUT`]); a bootstrap retries
/// refused or lost connections for 3 s ([`DEFAULT_BOOTSTRAP_DEADLINE`]) and
/// fails at once on a malformed address, a name that does not resolve or a
/// peer that is not a Kafka broker; a request may take 30 s and an
/// operation, retries included, 30 s. [`ClusterConfig::with_timeout`] sets
/// them all to one value.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    /// Brokers to bootstrap from, tried in order: `host:port`, `host`
    /// (port 9092), `[v6]:port`, optionally after a scheme such as
    /// `tcp://` or `SASL_SSL://` (see [`crate::connection::BrokerAddress`]).
    /// [`Cluster::connect`] checks them all before connecting, and keeps
    /// them as `host:port`.
    pub bootstrap: Vec<String>,
    /// Settings of every broker connection.
    pub connection: ConnectionConfig,
    /// Retry timing and the overall deadline of each operation.
    pub retry: RetryPolicy,
    /// How long a bootstrap retries retriable failures (refused or lost
    /// connections, timeouts, retriable error codes) before it gives up;
    /// an attempt under way when it passes is finished (each is bounded by
    /// the connect timeout). Default [`DEFAULT_BOOTSTRAP_DEADLINE`].
    pub bootstrap_deadline: Duration,
    /// How long the broker may wait for in-sync replicas on Produce.
    pub produce_timeout: Duration,
    /// How long the broker may take to create topics.
    pub admin_timeout: Duration,
    /// How many connections to open to one broker at most. Fetches spread
    /// over them (a broker serves one request of a connection at a time, so
    /// fetches on separate connections are served side by side); every other
    /// request uses the first, so Produce stays in order. Default 4; 1 is
    /// what most Kafka clients open.
    pub connections_per_broker: usize,
    /// The rack this client runs in (librdkafka's `client.rack`), sent in
    /// Fetch requests (v11+) so that a leader may point the client at a
    /// replica in the same rack, which then serves the partition's
    /// fetches until it fails one (KIP-392; see [`Cluster::fetch`]).
    /// `None` fetches from leaders only.
    pub client_rack: Option<String>,
}

impl ClusterConfig {
    /// Defaults, bootstrapping from `bootstrap`.
    pub fn new<S: Into<String>>(bootstrap: impl IntoIterator<Item = S>) -> Self {
        Self {
            bootstrap: bootstrap.into_iter().map(Into::into).collect(),
            connection: ConnectionConfig::default(),
            retry: RetryPolicy::default(),
            bootstrap_deadline: DEFAULT_BOOTSTRAP_DEADLINE,
            produce_timeout: Duration::from_secs(30),
            admin_timeout: Duration::from_secs(30),
            connections_per_broker: 4,
            client_rack: None,
        }
    }

    /// Sets every time limit to `timeout`: connecting (and the
    /// `ApiVersions` answer), the bootstrap's retries, one request, and one
    /// whole operation (all retries included). The CLI's `--timeout` and
    /// librdkafka's `socket.timeout.ms`, which the error messages about
    /// timeouts name. A shorter limit fails faster on a dead address; a
    /// longer one waits longer for a broker that is starting. The bootstrap
    /// deadline gets a tenth more (and 5 ms, a few timer ticks): an attempt
    /// that ends at its own limit then reports why, instead of being cut
    /// at the same instant with no cause.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.connection.connect_timeout = timeout;
        self.connection.request_timeout = timeout;
        self.retry.deadline = timeout;
        self.bootstrap_deadline = timeout
            .saturating_add(timeout / 10)
            .saturating_add(Duration::from_millis(5));
        self
    }

    /// How long a Produce's answer is waited for: the request timeout
    /// plus [`ClusterConfig::produce_timeout`], the time the broker may
    /// wait for the in-sync replicas before it answers (60 s by default).
    pub fn produce_answer_timeout(&self) -> Duration {
        self.connection
            .request_timeout
            .saturating_add(self.produce_timeout)
    }
}

/// What a leader lookup that may not wait found
/// ([`Cluster::leader_unless_paced`]).
#[derive(Debug, Clone)]
pub(crate) enum LeaderLookup {
    /// The partition's leader.
    Found(PartitionLeader),
    /// Not known now: metadata said the cached leader is stale, and the
    /// topic's Metadata may be read again from this instant (a backoff
    /// after the last read).
    ReadAt(Instant),
}

/// A client of one Kafka cluster. Share it behind an [`Arc`]; every method
/// takes `&self` and may run concurrently.
#[derive(Debug)]
pub struct Cluster {
    config: ClusterConfig,
    pool: Pool,
    metadata: Mutex<ClusterMetadata>,
    /// Serializes metadata refreshes so that concurrent failures cause one.
    refresh: tokio::sync::Mutex<()>,
    /// When each topic's metadata was last read (see [`Cluster::leader`]).
    topic_reads: metadata::TopicReads,
    /// The replicas leaders pointed fetches at (KIP-392).
    preferred: follower::PreferredReplicas,
    /// Brokers seen to starve a partition of a shared Fetch request (see
    /// [`Cluster::fetch_many`]): their partitions are fetched one a
    /// request.
    unshared: Mutex<std::collections::BTreeSet<String>>,
    /// The tokio runtime it was connected in, which runs its connections'
    /// tasks: where a [`crate::writer::WalWriter`] made outside any
    /// runtime runs its own.
    runtime: Option<tokio::runtime::Handle>,
}

impl Cluster {
    /// The settings.
    pub fn config(&self) -> &ClusterConfig {
        &self.config
    }

    /// The tokio runtime it was connected in, if it was in one.
    pub(crate) fn runtime(&self) -> Option<&tokio::runtime::Handle> {
        self.runtime.as_ref()
    }

    fn cache(&self) -> MutexGuard<'_, ClusterMetadata> {
        self.metadata
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The leader of a partition: from the cache, or after one Metadata
    /// read. Errors (unknown topic, no leader) are the retriable ones the
    /// operations retry on.
    ///
    /// A topic's metadata is read at most once every
    /// [`RetryPolicy::initial_backoff`] for the lookups that miss the
    /// cache, as Kafka clients space their metadata refreshes by
    /// `retry.backoff.ms`: a lookup sooner after a read that named no
    /// leader for the partition, for a reason that may pass, fails with
    /// what that read said (the operation retries after its backoff); one
    /// after a read whose leader an answer has since said is stale waits
    /// for the rest of that time; and lookups that waited together share
    /// one read. Without it, every
    /// partition without a leader (an election under way), and every
    /// answer `NOT_LEADER_OR_FOLLOWER`, made a Metadata read of its own,
    /// and a recovery of many partitions flooded the cluster with them
    /// while it was least able to answer.
    pub async fn leader(
        &self,
        topic: &str,
        partition: i32,
    ) -> Result<PartitionLeader, ClientError> {
        loop {
            match self.look_up_leader(topic, partition, true).await? {
                LeaderLookup::Found(leader) => return Ok(leader),
                // (Not answered to a lookup that may wait.)
                LeaderLookup::ReadAt(at) => tokio::time::sleep_until(at).await,
            }
        }
    }

    /// [`Cluster::leader`] for a task that must not wait (the WAL writer,
    /// which reads its answers and takes entries meanwhile): where that
    /// waits for the next Metadata read of the topic, this says when it may
    /// go ([`LeaderLookup::ReadAt`]), and the caller comes back then.
    pub(crate) async fn leader_unless_paced(
        &self,
        topic: &str,
        partition: i32,
    ) -> Result<LeaderLookup, ClientError> {
        self.look_up_leader(topic, partition, false).await
    }

    /// [`Cluster::leader`]'s lookup; with `wait` false, a lookup that must
    /// wait for the topic's next Metadata read returns when instead.
    async fn look_up_leader(
        &self,
        topic: &str,
        partition: i32,
        wait: bool,
    ) -> Result<LeaderLookup, ClientError> {
        if let Some(leader) = self.cache().leader(topic, partition) {
            return Ok(LeaderLookup::Found(leader));
        }
        let seen = self.topic_reads.last(topic);
        if let Some(read) = &seen {
            let next = read.at.checked_add(self.config.retry.initial_backoff);
            if next.is_some_and(|next| Instant::now() < next) {
                match read.answer.leader(topic, partition) {
                    // Retried after a backoff: told again until the next
                    // read may go. (A refusal for good ends the operation,
                    // and is read again at once: it may have passed.)
                    None => {
                        let error = no_leader(&read.answer, &read.by, topic, partition);
                        if error.is_retriable(true) {
                            return Err(error);
                        }
                    }
                    Some(_) => match next {
                        Some(next) if !wait => return Ok(LeaderLookup::ReadAt(next)),
                        Some(next) => tokio::time::sleep_until(next).await,
                        None => {}
                    },
                }
            }
        }
        let (answer, answered_by) = {
            let _single = self.refresh.lock().await;
            // Another task may have refreshed while this one waited.
            if let Some(leader) = self.cache().leader(topic, partition) {
                return Ok(LeaderLookup::Found(leader));
            }
            // A read answered since this lookup began says what is known,
            // even if a failure dropped the topic from the cache since.
            let newer = self
                .topic_reads
                .last(topic)
                .filter(|read| seen.as_ref().is_none_or(|s| read.number > s.number));
            match newer {
                Some(read) => (read.answer, read.by),
                None => {
                    let (answer, by) = self.read_metadata(Some(&[topic])).await?;
                    (Arc::new(answer), by)
                }
            }
        };
        // The cache first: it keeps a leader of a newer epoch than a
        // broker behind the others answered.
        if let Some(leader) = self.cache().leader(topic, partition) {
            return Ok(LeaderLookup::Found(leader));
        }
        match answer.leader(topic, partition) {
            Some(leader) => Ok(LeaderLookup::Found(leader)),
            None => Err(no_leader(&answer, &answered_by, topic, partition)),
        }
    }

    /// Reads, in one Metadata request, the topics of `partitions` whose
    /// leaders the cache does not know, so that each partition's lookup
    /// then finds its leader cached: a recovery of 64 topics reads their
    /// metadata in one round trip, not in 64 one after another. A failure
    /// is left to each partition's own lookup to meet, retry and report.
    pub(crate) async fn look_up_leaders(&self, partitions: &[(&str, i32)]) {
        let mut topics: Vec<&str> = partitions
            .iter()
            .filter(|(topic, partition)| self.cache().leader(topic, *partition).is_none())
            .map(|(topic, _)| *topic)
            .collect();
        topics.sort_unstable();
        topics.dedup();
        if topics.len() < 2 {
            return;
        }
        if let Err(error) = self.read_metadata(Some(&topics)).await {
            tracing::debug!(%error, topics = topics.len(), "reading the metadata of many topics");
        }
    }

    /// The leader of a partition, as [`Cluster::leader`] finds it, with
    /// retriable errors (no leader yet, stale metadata, a lost connection)
    /// retried under the retry policy's deadline.
    pub async fn leader_retrying(
        &self,
        topic: &str,
        partition: i32,
    ) -> Result<PartitionLeader, ClientError> {
        self.retrying(
            || format!("finding the leader of topic {topic:?} partition {partition}"),
            true,
            Some(topic),
            || self.leader(topic, partition),
        )
        .await
    }

    /// The pooled connection to `address`, opened if needed.
    pub async fn connection(&self, address: &str) -> Result<Arc<Connection>, ClientError> {
        Ok(self.pool.get(address).await?)
    }

    /// When the broker at `address` accepts requests again, if a
    /// throttled answer (KIP-219) holds them back now: until then
    /// [`Cluster::connection`] and [`Cluster::leader_connection`] wait. The
    /// WAL writer, which must go on reading answers meanwhile, asks first
    /// and comes back then.
    pub(crate) fn throttled_until(&self, address: &str) -> Option<tokio::time::Instant> {
        self.pool.throttled_until(address)
    }

    /// The partition's leader and the pooled connection to it.
    pub async fn leader_connection(
        &self,
        topic: &str,
        partition: i32,
    ) -> Result<(Arc<Connection>, PartitionLeader), ClientError> {
        let leader = self.leader(topic, partition).await?;
        let connection = self.pool.get(&leader.address).await?;
        Ok((connection, leader))
    }

    /// A connection to `address` for a Fetch: the least busy of up to
    /// [`ClusterConfig::connections_per_broker`], opened as needed.
    async fn fetch_connection(&self, address: &str) -> Result<Arc<Connection>, ClientError> {
        Ok(self.pool.get_spread(address).await?)
    }

    /// Counters of every pooled connection, by address.
    pub fn stats(&self) -> Vec<(String, ConnectionStats)> {
        self.pool.stats()
    }

    /// Closes and forgets `connection` after an error that says it is gone.
    fn evict_if_lost<T>(&self, connection: &Arc<Connection>, result: &Result<T, ClientError>) {
        if let Err(ClientError::Connection(e)) = result {
            if e.is_connection_lost() {
                self.pool.evict(connection);
            }
        }
    }

    /// Runs `attempt` until it succeeds, fails with a non-retriable error,
    /// or the deadline passes. `topic`'s metadata is dropped after failures
    /// that say it is stale.
    async fn retrying<T, F, A>(
        &self,
        describe: impl Fn() -> String,
        idempotent: bool,
        topic: Option<&str>,
        attempt: F,
    ) -> Result<T, ClientError>
    where
        F: FnMut() -> A,
        A: Future<Output = Result<T, ClientError>>,
    {
        let policy = self.config.retry;
        let retry = Retry {
            policy,
            cut: policy.deadline,
            retriable: &|e: &ClientError| e.is_retriable(idempotent),
        };
        self.retrying_with(retry, describe, topic, attempt).await
    }

    /// [`Cluster::retrying`] with its own rules: retries stop being started
    /// after `retry.policy.deadline`, an attempt under way is cut at
    /// `retry.cut` after the start, and `retry.retriable` picks the errors
    /// to retry.
    async fn retrying_with<T, F, A>(
        &self,
        retry: Retry<'_>,
        describe: impl Fn() -> String,
        topic: Option<&str>,
        mut attempt: F,
    ) -> Result<T, ClientError>
    where
        F: FnMut() -> A,
        A: Future<Output = Result<T, ClientError>>,
    {
        let policy = retry.policy;
        let started = Instant::now();
        // A deadline too far to represent is no deadline at all.
        let far = Duration::from_secs(100 * 365 * 24 * 3600);
        let at = |after: Duration| started.checked_add(after).unwrap_or_else(|| started + far);
        let deadline = at(policy.deadline);
        let cut = at(retry.cut.max(policy.deadline));

        let mut attempts = 0u32;
        // The error of the last attempt that ended, reported if the cut
        // ends a later one.
        let mut last: Option<ClientError> = None;
        loop {
            attempts += 1;
            // Requests end as timeouts at the cut, inside the attempt,
            // which then drops a connection that stopped answering (the
            // timeout polls the attempt first, so a request's timeout due
            // at the cut ends it); anything else it waits on is cut.
            let attempt = crate::connection::answered_by(cut, attempt());
            let error = match tokio::time::timeout_at(cut, attempt).await {
                Ok(Ok(value)) => return Ok(value),
                Ok(Err(error)) => error,
                Err(_) => {
                    return Err(ClientError::RetriesExhausted {
                        operation: describe(),
                        attempts,
                        elapsed: started.elapsed(),
                        deadline: policy.deadline,
                        last: last.map(Box::new),
                    })
                }
            };
            if !(retry.retriable)(&error) {
                return Err(error);
            }
            if error.invalidates_metadata() {
                if let Some(topic) = topic {
                    self.invalidate_after_error(topic);
                }
            }
            let delay = policy.random_backoff(attempts);
            if Instant::now()
                .checked_add(delay)
                .is_none_or(|at| at >= deadline)
            {
                return Err(ClientError::RetriesExhausted {
                    operation: describe(),
                    attempts,
                    elapsed: started.elapsed(),
                    deadline: policy.deadline,
                    last: Some(Box::new(error)),
                });
            }
            tracing::debug!(operation = %describe(), attempts, ?delay, %error, "retrying");
            last = Some(error);
            tokio::time::sleep(delay).await;
        }
    }
}

/// Why `answer`, a Metadata answer from `by`, names no usable leader of
/// `topic`/`partition`: the topic's or partition's error code, or
/// [`ClientError::NoLeader`].
fn no_leader(answer: &ClusterMetadata, by: &str, topic: &str, partition: i32) -> ClientError {
    let asked = Asked::new(ApiKey::Metadata, by, topic, partition);
    let kafka = |code| asked.failed(code, None);
    let Some(t) = answer.topics.get(topic) else {
        return kafka(ErrorCode::UnknownTopicOrPartition);
    };
    if !t.error.is_ok() {
        return kafka(t.error);
    }
    match t.partitions.get(&partition) {
        None => kafka(ErrorCode::UnknownTopicOrPartition),
        Some(p) if !p.error.is_ok() && p.leader_id < 0 => kafka(p.error),
        Some(p) => ClientError::NoLeader {
            topic: topic.to_owned(),
            partition,
            leader_id: p.leader_id,
        },
    }
}

/// How [`Cluster::retrying_with`] retries.
#[derive(Clone, Copy)]
struct Retry<'a> {
    /// Backoff, and the deadline after which no retry starts.
    policy: RetryPolicy,
    /// When an attempt under way is cut, after the start (at least the
    /// policy's deadline).
    cut: Duration,
    /// Which errors are retried.
    retriable: &'a (dyn Fn(&ClientError) -> bool + Sync),
}

#[cfg(test)]
mod tests {
    use std::pin::Pin;

    use bytes::Bytes;

    use super::*;

    type SendFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

    fn offline_cluster(retry: RetryPolicy) -> Cluster {
        let mut config = ClusterConfig::new(["127.0.0.1:1"]);
        config.retry = retry;
        Cluster {
            pool: Pool::new(config.connection.clone(), config.connections_per_broker),
            config,
            metadata: Mutex::new(ClusterMetadata::default()),
            refresh: tokio::sync::Mutex::new(()),
            topic_reads: Default::default(),
            preferred: Default::default(),
            unshared: Default::default(),
            runtime: None,
        }
    }

    fn kafka(code: ErrorCode) -> ClientError {
        ClientError::Kafka {
            api: ApiKey::Fetch,
            code,
            topic: Some("t".into()),
            partition: Some(0),
            broker: "127.0.0.1:1".into(),
            message: None,
        }
    }

    /// An attempt cut at the deadline after others failed reports the last
    /// failure, not "no cause": the bootstrap under `with_timeout` failed
    /// its first handshake, started a second and was cut in it.
    #[tokio::test(start_paused = true)]
    async fn an_attempt_cut_at_the_deadline_reports_the_previous_attempts_error() {
        let policy = RetryPolicy {
            jitter: 0.0,
            deadline: Duration::from_secs(1),
            ..RetryPolicy::default()
        };
        let cluster = offline_cluster(policy);
        let mut calls = 0;
        let err = cluster
            .retrying(
                || "op".into(),
                true,
                None,
                || {
                    calls += 1;
                    let first = calls == 1;
                    async move {
                        if !first {
                            std::future::pending::<()>().await;
                        }
                        Err::<(), _>(kafka(ErrorCode::NotLeaderOrFollower))
                    }
                },
            )
            .await
            .expect_err("cut");
        match &err {
            ClientError::RetriesExhausted {
                attempts: 2,
                last: Some(last),
                ..
            } => assert_eq!(last.code(), Some(ErrorCode::NotLeaderOrFollower)),
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn retriable_errors_are_retried_with_backoff_until_the_deadline() {
        let policy = RetryPolicy {
            jitter: 0.0,
            deadline: Duration::from_secs(1),
            ..RetryPolicy::default()
        };
        let cluster = offline_cluster(policy);
        let started = Instant::now();
        let mut calls = 0;
        let err = cluster
            .retrying(
                || "op".into(),
                true,
                Some("t"),
                || {
                    calls += 1;
                    async { Err::<(), _>(kafka(ErrorCode::NotLeaderOrFollower)) }
                },
            )
            .await
            .expect_err("gives up");
        // Delays 50, 100, 200, 400 ms (750 ms); the next (800 ms) would pass the deadline.
        assert_eq!(calls, 5);
        assert_eq!(started.elapsed(), Duration::from_millis(750));
        match &err {
            ClientError::RetriesExhausted {
                attempts,
                last: Some(last),
                ..
            } => {
                assert_eq!(*attempts, 5);
                assert_eq!(last.code(), Some(ErrorCode::NotLeaderOrFollower));
            }
            other => panic!("{other:?}"),
        }
        assert!(
            err.to_string().contains("gave up on op after 5 attempt(s)"),
            "{err}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn non_retriable_errors_surface_at_once_and_success_ends_retries() {
        let cluster = offline_cluster(RetryPolicy::default());
        let mut calls = 0;
        let err = cluster
            .retrying(
                || "op".into(),
                true,
                None,
                || {
                    calls += 1;
                    async { Err::<(), _>(kafka(ErrorCode::OffsetOutOfRange)) }
                },
            )
            .await
            .expect_err("fatal");
        assert_eq!((calls, err.code()), (1, Some(ErrorCode::OffsetOutOfRange)));

        let mut calls = 0;
        let value = cluster
            .retrying(
                || "op".into(),
                true,
                None,
                || {
                    calls += 1;
                    let n = calls;
                    async move {
                        if n < 3 {
                            Err(kafka(ErrorCode::LeaderNotAvailable))
                        } else {
                            Ok(n)
                        }
                    }
                },
            )
            .await
            .expect("third attempt succeeds");
        assert_eq!(value, 3);
    }

    #[tokio::test(start_paused = true)]
    async fn a_hung_attempt_is_cut_at_the_deadline() {
        let cluster = offline_cluster(RetryPolicy {
            deadline: Duration::from_millis(300),
            ..RetryPolicy::default()
        });
        let err = cluster
            .retrying(
                || "op".into(),
                true,
                None,
                std::future::pending::<Result<(), ClientError>>,
            )
            .await
            .expect_err("deadline");
        assert!(
            matches!(
                err,
                ClientError::RetriesExhausted {
                    last: None,
                    attempts: 1,
                    ..
                }
            ),
            "{err:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn produce_is_not_resent_after_a_connection_lost_mid_request() {
        let cluster = offline_cluster(RetryPolicy::default());
        let lost = || {
            ClientError::Connection(crate::connection::ConnectionError::ClosedByPeer {
                broker: "127.0.0.1:1".into(),
            })
        };
        let mut calls = 0;
        let err = cluster
            .retrying(
                || "produce".into(),
                false,
                None,
                || {
                    calls += 1;
                    async { Err::<(), _>(lost()) }
                },
            )
            .await
            .expect_err("not retried");
        assert_eq!(calls, 1);
        assert!(matches!(err, ClientError::Connection(_)), "{err:?}");
        // The same failure is retried for an idempotent operation.
        assert!(lost().is_retriable(true));
    }

    #[tokio::test(start_paused = true)]
    async fn bootstrap_without_a_broker_gives_up_with_the_connect_error() {
        let mut config = ClusterConfig::new(["127.0.0.1:1"]);
        config.retry.deadline = Duration::from_millis(500);
        let err = Cluster::connect(config).await.expect_err("no broker");
        let msg = err.to_string();
        assert!(msg.contains("gave up on bootstrap"), "{msg}");
        assert!(msg.contains("127.0.0.1:1"), "{msg}");
        let err = Cluster::connect(ClusterConfig::new(Vec::<String>::new()))
            .await
            .expect_err("no bootstrap list");
        assert!(matches!(err, ClientError::InvalidArgument(_)), "{err:?}");
    }

    /// The operations' futures are `Send` even when boxed generically (as a
    /// consumer keeping several fetches in flight does), so they can be
    /// spawned and stored. A compile-time check.
    #[allow(dead_code)]
    fn operations_are_send(cluster: Arc<Cluster>, params: FetchParams) -> Vec<SendFuture<()>> {
        let c = Arc::clone(&cluster);
        let fetch: SendFuture<()> = Box::pin(async move {
            let _ = c.fetch(&params).await;
        });
        let c = Arc::clone(&cluster);
        let list: SendFuture<()> = Box::pin(async move {
            let _ = c
                .list_offsets("t", 0, OffsetSpec::Latest, IsolationLevel::ReadCommitted)
                .await;
        });
        let c = Arc::clone(&cluster);
        let produce: SendFuture<()> = Box::pin(async move {
            let _ = c.produce("t", 0, Bytes::new()).await;
        });
        let admin: SendFuture<()> = Box::pin(async move {
            let _ = cluster.create_topics(&[NewTopic::new("t", 1)]).await;
            let _ = cluster.metadata(None).await;
            let _ = cluster.leader_connection("t", 0).await;
            let _ = Cluster::connect(ClusterConfig::new(["127.0.0.1:1"])).await;
        });
        vec![fetch, list, produce, admin]
    }
}
