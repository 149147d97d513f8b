#![doc = include_str!("../README.md")]

pub mod fetch_rules;
pub mod segments;

mod error;
mod faults;
mod handlers;
mod log;
mod producers;
mod sasl;
mod server;
mod state;
mod stats;
mod tls;
mod versions;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bytes::Bytes;
use kafka_protocol::messages::ApiKey;
use tokio::task::JoinHandle;
use uuid::Uuid;

pub use error::TestkitError;
pub use faults::{Fault, FaultAction};
pub use fetch_rules::{kafka_fetch, BatchExtent, Habits};
pub use log::{AbortedTxn, AppendError, PartitionLog, StoredBatch};
pub use producers::{DuplicateAnswer, REMEMBERED_BATCHES};
pub use sasl::SaslServer;
pub use server::MAX_REQUEST_BYTES;
pub use state::KAFKA_FETCH_MAX_BYTES;
pub use stats::BrokerStats;
pub use tls::{IssuedCert, ServerTls, TestCa};
pub use versions::{served_versions, VersionRange, SERVED};

use state::{BrokerState, ClusterState, Shared};

/// The current leader of a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Leader {
    /// The leader's node id.
    pub node_id: i32,
    /// The leader epoch, raised by one at every move.
    pub epoch: i32,
}

/// How to start a [`ScriptedCluster`].
#[derive(Debug, Clone)]
pub struct ClusterBuilder {
    brokers: usize,
    first_node_id: i32,
    auto_create_topics: bool,
    default_partitions: i32,
    habits: Habits,
    advertised: Vec<SocketAddr>,
    tls: Option<ServerTls>,
    sasl: Option<SaslServer>,
    racks: Vec<String>,
}

impl Default for ClusterBuilder {
    fn default() -> Self {
        Self {
            brokers: 1,
            first_node_id: 1,
            auto_create_topics: false,
            default_partitions: 1,
            habits: Habits::KAFKA,
            advertised: Vec::new(),
            tls: None,
            sasl: None,
            racks: Vec::new(),
        }
    }
}

impl ClusterBuilder {
    /// How many brokers (default 1).
    pub fn brokers(mut self, n: usize) -> Self {
        self.brokers = n;
        self
    }

    /// The first broker's node id; the others follow (default 1).
    pub fn first_node_id(mut self, id: i32) -> Self {
        self.first_node_id = id;
        self
    }

    /// Whether a Metadata request for an unknown topic creates it, as
    /// Kafka's `auto.create.topics.enable` does (default false).
    pub fn auto_create_topics(mut self, enabled: bool) -> Self {
        self.auto_create_topics = enabled;
        self
    }

    /// Partitions of a topic created without a count (default 1).
    pub fn default_partitions(mut self, n: i32) -> Self {
        self.default_partitions = n.max(1);
        self
    }

    /// Every broker's habits (default: Kafka's rules).
    pub fn habits(mut self, habits: Habits) -> Self {
        self.habits = habits;
        self
    }

    /// Addresses the brokers advertise in Metadata and in Fetch leader
    /// hints, in node order, instead of their listeners' (default: none):
    /// for a proxy in front of a broker, so that clients that follow the
    /// metadata connect through it. Brokers past the list's end advertise
    /// their listener. [`ScriptedCluster::addrs`] and
    /// [`ScriptedCluster::bootstrap`] still give the listeners.
    pub fn advertised_addrs(mut self, addrs: impl IntoIterator<Item = SocketAddr>) -> Self {
        self.advertised = addrs.into_iter().collect();
        self
    }

    /// Serves TLS on every listener (Kafka's `SSL`, or `SASL_SSL` with
    /// [`ClusterBuilder::sasl`]); see [`TestCa`] for certificates.
    pub fn tls(mut self, tls: ServerTls) -> Self {
        self.tls = Some(tls);
        self
    }

    /// Requires SASL authentication on every connection before any request
    /// but ApiVersions (Kafka's `SASL_PLAINTEXT`, or `SASL_SSL` with
    /// [`ClusterBuilder::tls`]); SaslHandshake and SaslAuthenticate are
    /// then served and advertised.
    pub fn sasl(mut self, sasl: SaslServer) -> Self {
        self.sasl = Some(sasl);
        self
    }

    /// The brokers' racks, in node order (default: none), advertised in
    /// Metadata. Giving racks also turns on follower fetching (KIP-392), as
    /// Kafka's `replica.selector.class = RackAwareReplicaSelector` does:
    /// a leader answers a Fetch (v11+) whose `rack_id` names another rack
    /// than its own, where a broker of that rack exists, with that broker
    /// as `preferred_read_replica` and no records; every broker
    /// replicates every partition, so any broker serves consumer fetches
    /// (v11+) of a partition it does not lead, from the shared log, up to
    /// the high watermark. Brokers past the list's end have no rack.
    pub fn racks<S: Into<String>>(mut self, racks: impl IntoIterator<Item = S>) -> Self {
        self.racks = racks.into_iter().map(Into::into).collect();
        self
    }

    /// Binds every broker's listener on a loopback ephemeral port and starts
    /// serving, on the current tokio runtime.
    pub async fn start(self) -> Result<ScriptedCluster, TestkitError> {
        if self.brokers == 0 {
            return Err(TestkitError::NoBrokers);
        }
        let mut listeners = Vec::with_capacity(self.brokers);
        let mut brokers = Vec::with_capacity(self.brokers);
        for (i, node_id) in (self.first_node_id..).take(self.brokers).enumerate() {
            let (listener, addr) = server::bind().await.map_err(TestkitError::Bind)?;
            tracing::debug!(node_id, %addr, index = i, "scripted broker listening");
            listeners.push(listener);
            let mut broker = BrokerState::new(node_id, addr, self.habits);
            if let Some(&advertised) = self.advertised.get(i) {
                broker.advertised = advertised;
            }
            if self.sasl.is_some() {
                broker
                    .versions
                    .insert(ApiKey::SaslHandshake as i16, sasl::HANDSHAKE_VERSIONS);
                broker
                    .versions
                    .insert(ApiKey::SaslAuthenticate as i16, sasl::AUTHENTICATE_VERSIONS);
            }
            broker.rack = self.racks.get(i).cloned();
            brokers.push(broker);
        }
        let counters: Vec<_> = brokers
            .iter()
            .map(|b| (b.node_id, b.counters.clone()))
            .collect();
        let security = server::ListenerSecurity {
            tls: self.tls.as_ref().map(ServerTls::acceptor).transpose()?,
            sasl: self.sasl.map(Arc::new),
        };
        let mut state =
            ClusterState::new(brokers, self.auto_create_topics, self.default_partitions);
        state.follower_fetching = !self.racks.is_empty();
        let shared = Arc::new(Shared::new(state));
        let tasks = listeners
            .into_iter()
            .zip(counters)
            .map(|(listener, (node_id, counters))| {
                let task = tokio::spawn(server::accept_loop(
                    listener,
                    shared.clone(),
                    node_id,
                    counters,
                    security.clone(),
                ));
                (node_id, task)
            })
            .collect();
        Ok(ScriptedCluster {
            shared,
            security,
            tasks: Mutex::new(tasks),
        })
    }
}

/// An in-process Kafka-compatible cluster on loopback, for tests and
/// benchmarks: several brokers sharing in-memory partition logs, serving
/// ApiVersions, Metadata, ListOffsets, Fetch, Produce and CreateTopics
/// under Kafka's fetch rules, with scriptable faults and per-broker habits
/// and counters.
///
/// Dropping the cluster stops every listener and closes every connection.
///
/// ```
/// use bytes::Bytes;
/// use kafka_protocol::messages::ApiKey;
/// use walfetch_codec::{BatchBuilder, NewRecord};
/// use walfetch_testkit::{Fault, FaultAction, ScriptedCluster};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let cluster = ScriptedCluster::builder().brokers(2).start().await?;
/// cluster.create_topic("wal", 1)?;
/// let batch = BatchBuilder::new(0).encode(&[NewRecord::value(0, "a"), NewRecord::value(1, "b")])?;
/// assert_eq!(cluster.append("wal", 0, batch.bytes.clone())?, 0);
/// assert_eq!(cluster.append("wal", 0, batch.bytes)?, 2);
///
/// // The next Fetch that broker 1 receives loses its connection mid-response.
/// cluster.script(Fault::on(ApiKey::Fetch).broker(1).then(FaultAction::CutDuringResponse { bytes: None }));
/// // Clients connect to `cluster.bootstrap()` ("127.0.0.1:PORT").
/// assert!(cluster.bootstrap().starts_with("127.0.0.1:"));
/// # Ok(())
/// # }
/// ```
pub struct ScriptedCluster {
    shared: Arc<Shared>,
    /// What every listener requires, for brokers started again.
    security: server::ListenerSecurity,
    /// Each running broker's accept loop, by node id (a stopped broker has
    /// none).
    tasks: Mutex<BTreeMap<i32, JoinHandle<()>>>,
}

impl std::fmt::Debug for ScriptedCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedCluster")
            .field("brokers", &self.addrs())
            .finish_non_exhaustive()
    }
}

impl Drop for ScriptedCluster {
    fn drop(&mut self) {
        for task in self.tasks().values() {
            task.abort();
        }
    }
}

impl ScriptedCluster {
    /// A builder for a cluster.
    pub fn builder() -> ClusterBuilder {
        ClusterBuilder::default()
    }

    /// Starts a cluster of `brokers` brokers (node ids 1, 2, ...), with
    /// Kafka's rules and no topics.
    pub async fn start(brokers: usize) -> Result<Self, TestkitError> {
        Self::builder().brokers(brokers).start().await
    }

    /// The brokers' node ids.
    pub fn node_ids(&self) -> Vec<i32> {
        self.shared
            .lock()
            .brokers
            .iter()
            .map(|b| b.node_id)
            .collect()
    }

    /// Every broker's node id and address.
    pub fn addrs(&self) -> Vec<(i32, SocketAddr)> {
        self.shared
            .lock()
            .brokers
            .iter()
            .map(|b| (b.node_id, b.addr))
            .collect()
    }

    /// The address of broker `node_id`.
    pub fn addr(&self, node_id: i32) -> Option<SocketAddr> {
        self.shared.lock().broker(node_id).map(|b| b.addr)
    }

    /// The first broker's `host:port`, to bootstrap a client.
    pub fn bootstrap(&self) -> String {
        self.addrs()
            .first()
            .map(|(_, a)| a.to_string())
            .unwrap_or_default()
    }

    /// Every broker's `host:port`, comma-separated.
    pub fn bootstrap_servers(&self) -> String {
        let addrs: Vec<String> = self.addrs().iter().map(|(_, a)| a.to_string()).collect();
        addrs.join(",")
    }

    /// Creates a topic with `partitions` partitions; partition `p`'s leader
    /// is the `p`-th broker, round robin. Returns the topic id.
    pub fn create_topic(&self, name: &str, partitions: i32) -> Result<Uuid, TestkitError> {
        let id = self
            .shared
            .lock()
            .create_topic(name, partitions, None)
            .map_err(|(code, message)| TestkitError::CreateTopic {
                topic: name.to_owned(),
                code,
                message,
            })?;
        self.shared.notify_append();
        Ok(id)
    }

    /// The topic names.
    pub fn topics(&self) -> Vec<String> {
        self.shared.lock().topics.keys().cloned().collect()
    }

    /// A topic's id.
    pub fn topic_id(&self, topic: &str) -> Option<Uuid> {
        self.shared.lock().topics.get(topic).map(|t| t.id)
    }

    fn with_partition<T>(
        &self,
        topic: &str,
        partition: i32,
        f: impl FnOnce(&mut state::PartitionState) -> T,
    ) -> Result<T, TestkitError> {
        let mut state = self.shared.lock();
        if !state.topics.contains_key(topic) {
            return Err(TestkitError::UnknownTopic(topic.to_owned()));
        }
        let part = state.partition_mut(topic, partition).ok_or_else(|| {
            TestkitError::UnknownPartition {
                topic: topic.to_owned(),
                partition,
            }
        })?;
        Ok(f(part))
    }

    /// Appends one encoded batch to a partition as its leader would: the
    /// batch gets the next offset (its `baseOffset` is rewritten) and the
    /// current leader epoch. Returns the base offset assigned. Control
    /// batches (transaction markers) are accepted here, unlike in Produce.
    pub fn append(&self, topic: &str, partition: i32, batch: Bytes) -> Result<i64, TestkitError> {
        self.append_with(topic, partition, |p| {
            let epoch = p.leader_epoch;
            p.log.append(batch, epoch)
        })
    }

    /// Appends one encoded batch as it is, keeping its `baseOffset` (at or
    /// above the log end offset; the offsets between are a gap, as after
    /// compaction). Returns its base offset.
    pub fn append_at(
        &self,
        topic: &str,
        partition: i32,
        batch: Bytes,
    ) -> Result<i64, TestkitError> {
        self.append_with(topic, partition, |p| p.log.append_at(batch))
    }

    /// Runs an append on the partition's state, names its failure, and
    /// wakes the fetches waiting for data.
    fn append_with(
        &self,
        topic: &str,
        partition: i32,
        append: impl FnOnce(&mut state::PartitionState) -> Result<i64, log::AppendError>,
    ) -> Result<i64, TestkitError> {
        let result = self.with_partition(topic, partition, append)?;
        let base = result.map_err(|source| TestkitError::Append {
            topic: topic.to_owned(),
            partition,
            source,
        })?;
        self.shared.notify_append();
        Ok(base)
    }

    /// A snapshot of a partition's log (cheap: batches are shared `Bytes`).
    pub fn log(&self, topic: &str, partition: i32) -> Result<PartitionLog, TestkitError> {
        self.with_partition(topic, partition, |p| p.log.clone())
    }

    /// A partition's high watermark.
    pub fn high_watermark(&self, topic: &str, partition: i32) -> Result<i64, TestkitError> {
        self.with_partition(topic, partition, |p| p.log.high_watermark())
    }

    /// Moves a partition's log start offset forward (as DeleteRecords or
    /// retention would): fetches below it get `OFFSET_OUT_OF_RANGE`.
    pub fn advance_log_start(
        &self,
        topic: &str,
        partition: i32,
        offset: i64,
    ) -> Result<(), TestkitError> {
        self.with_partition(topic, partition, |p| p.log.advance_log_start(offset))
    }

    /// Deletes topic `name` and creates it again under the same name with
    /// `partitions` empty partitions, as `kafka-topics --delete` then
    /// `--create` do: a new topic id (a new incarnation), logs from offset
    /// 0. Returns the new id.
    pub fn recreate_topic(&self, name: &str, partitions: i32) -> Result<Uuid, TestkitError> {
        self.shared.lock().topics.remove(name);
        self.create_topic(name, partitions)
    }

    /// Truncates a partition's log as an unclean leader election does:
    /// the batches whose base offset is at or past `offset` are dropped, so
    /// the log end moves back to the batch boundary at or below it, and the
    /// leader epoch goes up by one.
    pub fn truncate(&self, topic: &str, partition: i32, offset: i64) -> Result<(), TestkitError> {
        self.with_partition(topic, partition, |p| {
            p.log.truncate_to(offset);
            p.leader_epoch += 1;
        })
    }

    /// Forgets a partition's idempotent producers, as Kafka does once a
    /// producer has written nothing for `producer.id.expiration.ms` (a
    /// day by default, KIP-854): a producer's next batch, its sequence
    /// past 0, is then refused with `UNKNOWN_PRODUCER_ID`.
    pub fn expire_producers(&self, topic: &str, partition: i32) -> Result<(), TestkitError> {
        self.with_partition(topic, partition, |p| p.producers = Default::default())
    }

    /// Sets a topic's `max.message.bytes` (Kafka's topic config, default
    /// 1 MiB there; no limit here until set): a Produce whose record batch
    /// is larger is refused `MESSAGE_TOO_LARGE`, its message naming the
    /// batch's size and the limit, and nothing of it is appended. `None`
    /// lifts the limit.
    pub fn set_max_message_bytes(
        &self,
        topic: &str,
        bytes: Option<usize>,
    ) -> Result<(), TestkitError> {
        let mut state = self.shared.lock();
        let t = state
            .topics
            .get_mut(topic)
            .ok_or_else(|| TestkitError::UnknownTopic(topic.to_owned()))?;
        t.max_message_bytes = bytes;
        Ok(())
    }

    /// A partition's current leader and leader epoch.
    pub fn leader(&self, topic: &str, partition: i32) -> Result<Leader, TestkitError> {
        self.with_partition(topic, partition, |p| Leader {
            node_id: p.leader,
            epoch: p.leader_epoch,
        })
    }

    /// Makes broker `to` the leader of a partition (the epoch goes up by
    /// one); the old leader answers `NOT_LEADER_OR_FOLLOWER` from now on.
    /// Waiting fetches are woken. Returns the new leader and epoch.
    pub fn move_leader(
        &self,
        topic: &str,
        partition: i32,
        to: i32,
    ) -> Result<Leader, TestkitError> {
        if self.addr(to).is_none() {
            return Err(TestkitError::UnknownBroker(to));
        }
        let leader = self.with_partition(topic, partition, |p| {
            p.leader = to;
            p.leader_epoch += 1;
            Leader {
                node_id: to,
                epoch: p.leader_epoch,
            }
        })?;
        self.shared.notify_append();
        Ok(leader)
    }

    fn tasks(&self) -> MutexGuard<'_, BTreeMap<i32, JoinHandle<()>>> {
        self.tasks.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Stops broker `node_id` as a crash does: its listener closes (new
    /// connections are refused) and every connection to it is closed,
    /// requests in flight unanswered. Like Kafka's controller before the
    /// broker's session expires, the cluster does not notice: Metadata
    /// (from the other brokers) still lists it and names it the leader of
    /// its partitions until [`ScriptedCluster::move_leader`] elects
    /// another. Stopping a stopped broker does nothing.
    pub async fn stop_broker(&self, node_id: i32) -> Result<(), TestkitError> {
        if self.addr(node_id).is_none() {
            return Err(TestkitError::UnknownBroker(node_id));
        }
        let task = self.tasks().remove(&node_id);
        if let Some(task) = task {
            task.abort();
            // Once it is dropped, so are its listener and connections.
            let _ = task.await;
        }
        Ok(())
    }

    /// Starts broker `node_id` again at its address, after
    /// [`ScriptedCluster::stop_broker`]; its state (logs, leadership,
    /// counters) is the cluster's and was kept. Returns its address.
    /// Starting a running broker does nothing.
    pub async fn start_broker(&self, node_id: i32) -> Result<SocketAddr, TestkitError> {
        let addr = self
            .addr(node_id)
            .ok_or(TestkitError::UnknownBroker(node_id))?;
        if self.tasks().contains_key(&node_id) {
            return Ok(addr);
        }
        self.listen(node_id, addr).await
    }

    /// Stops broker `node_id` (if it runs) and starts it again on another
    /// port, which Metadata and Fetch leader hints advertise from then on
    /// (unless the builder set the address it advertises), as a broker
    /// restarted on a new host or port registers its new endpoint.
    /// Clients that still connect to the old address are refused. Returns
    /// the new address.
    pub async fn restart_broker_elsewhere(&self, node_id: i32) -> Result<SocketAddr, TestkitError> {
        self.stop_broker(node_id).await?;
        let any_port = SocketAddr::from(([127, 0, 0, 1], 0));
        self.listen(node_id, any_port).await
    }

    /// Serves broker `node_id` on a listener bound at `at`; its address
    /// (and the advertised one, if it was the listener's) becomes the
    /// listener's.
    async fn listen(&self, node_id: i32, at: SocketAddr) -> Result<SocketAddr, TestkitError> {
        let (listener, addr) = server::bind_at(at).await.map_err(TestkitError::Bind)?;
        let counters = {
            let mut state = self.shared.lock();
            let broker = state
                .broker_mut(node_id)
                .ok_or(TestkitError::UnknownBroker(node_id))?;
            if broker.advertised == broker.addr {
                broker.advertised = addr;
            }
            broker.addr = addr;
            broker.counters.clone()
        };
        let task = tokio::spawn(server::accept_loop(
            listener,
            self.shared.clone(),
            node_id,
            counters,
            self.security.clone(),
        ));
        if let Some(old) = self.tasks().insert(node_id, task) {
            old.abort();
        }
        tracing::debug!(node_id, %addr, "scripted broker listening again");
        Ok(addr)
    }

    /// Queues a scripted fault (see [`Fault`]); faults are matched in the
    /// order they were queued.
    pub fn script(&self, fault: Fault) {
        self.shared.lock().faults.push(fault);
    }

    /// The faults that have not fired (or not all their times) yet.
    pub fn pending_faults(&self) -> Vec<Fault> {
        self.shared.lock().faults.pending()
    }

    /// Sets how Produce answers a batch an idempotent producer already
    /// wrote (sent again after a lost answer); default
    /// [`DuplicateAnswer::OriginalOffset`], as Kafka since 1.0.
    pub fn set_duplicate_answer(&self, answer: DuplicateAnswer) {
        self.shared.lock().duplicate_answer = answer;
    }

    /// Drops every queued fault.
    pub fn clear_faults(&self) {
        self.shared.lock().faults.clear();
    }

    /// Sets how broker `node_id` departs from Kafka's fetch rules.
    pub fn set_habits(&self, node_id: i32, habits: Habits) -> Result<(), TestkitError> {
        self.with_broker(node_id, |broker| broker.habits = habits)
    }

    /// Sets broker `node_id`'s `fetch.max.bytes` (KIP-541; Kafka's default,
    /// [`KAFKA_FETCH_MAX_BYTES`], until set): a Fetch response carries at
    /// most that many bytes, or its first batch whole, whatever the
    /// request's `max_bytes`, and the partitions past it get nothing.
    pub fn set_fetch_max_bytes(&self, node_id: i32, bytes: usize) -> Result<(), TestkitError> {
        self.with_broker(node_id, |broker| broker.fetch_max_bytes = bytes)
    }

    /// Narrows the versions of `api_key` broker `node_id` advertises and
    /// accepts to their intersection with `range` (`None`: the API is not
    /// served at all), as an older or different broker would. Requests
    /// outside the range close the connection, except ApiVersions, which is
    /// answered with `UNSUPPORTED_VERSION`. [`ScriptedCluster::reset_versions`]
    /// undoes it.
    pub fn limit_versions(
        &self,
        node_id: i32,
        api_key: ApiKey,
        range: Option<VersionRange>,
    ) -> Result<(), TestkitError> {
        let narrowed = range.and_then(|r| served_versions(api_key).and_then(|s| s.intersect(r)));
        self.with_broker(node_id, |broker| {
            match narrowed {
                Some(r) => broker.versions.insert(api_key as i16, r),
                None => broker.versions.remove(&(api_key as i16)),
            };
        })
    }

    /// Restores every API version broker `node_id` implements.
    pub fn reset_versions(&self, node_id: i32) -> Result<(), TestkitError> {
        self.with_broker(node_id, |broker| {
            broker.versions = SERVED.iter().map(|(k, r)| (*k as i16, *r)).collect();
        })
    }

    /// Runs `change` on broker `node_id`'s state, under the lock.
    fn with_broker(
        &self,
        node_id: i32,
        change: impl FnOnce(&mut BrokerState),
    ) -> Result<(), TestkitError> {
        let mut state = self.shared.lock();
        let broker = state
            .broker_mut(node_id)
            .ok_or(TestkitError::UnknownBroker(node_id))?;
        change(broker);
        Ok(())
    }

    /// Broker `node_id`'s counters.
    pub fn stats(&self, node_id: i32) -> Option<BrokerStats> {
        self.shared
            .lock()
            .broker(node_id)
            .map(|b| b.counters.snapshot())
    }

    /// Zeroes every broker's counters.
    pub fn reset_stats(&self) {
        for broker in &self.shared.lock().brokers {
            broker.counters.reset();
        }
    }
}
