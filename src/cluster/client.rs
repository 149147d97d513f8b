//! The [`Cluster`] client itself: its metadata cache and connection
//! pool, leader lookup, and the retry driver every operation runs under.

use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use kafka_protocol::messages::ApiKey;
use tokio::time::Instant;

use super::error::Asked;
use super::pool::Pool;
use super::{ClientError, ClusterConfig, ClusterMetadata, PartitionLeader, RetryPolicy};
use crate::connection::{Connection, ConnectionStats};
use crate::error_code::ErrorCode;

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
    pub(super) config: ClusterConfig,
    pub(super) pool: Pool,
    pub(super) metadata: Mutex<ClusterMetadata>,
    /// Serializes metadata refreshes so that concurrent failures cause one.
    pub(super) refresh: tokio::sync::Mutex<()>,
    /// When each topic's metadata was last read (see [`Cluster::leader`]).
    pub(super) topic_reads: super::metadata::TopicReads,
    /// The replicas leaders pointed fetches at (KIP-392).
    pub(super) preferred: super::follower::PreferredReplicas,
    /// Brokers seen to starve a partition of a shared Fetch request (see
    /// [`Cluster::fetch_many`]): their partitions are fetched one a
    /// request.
    pub(super) unshared: Mutex<std::collections::BTreeSet<String>>,
    /// The tokio runtime it was connected in, which runs its connections'
    /// tasks: where a [`crate::writer::WalWriter`] made outside any
    /// runtime runs its own.
    pub(super) runtime: Option<tokio::runtime::Handle>,
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

    pub(super) fn cache(&self) -> MutexGuard<'_, ClusterMetadata> {
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
    pub(super) async fn look_up_leader(
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
    pub(super) async fn fetch_connection(
        &self,
        address: &str,
    ) -> Result<Arc<Connection>, ClientError> {
        Ok(self.pool.get_spread(address).await?)
    }

    /// Counters of every pooled connection, by address.
    pub fn stats(&self) -> Vec<(String, ConnectionStats)> {
        self.pool.stats()
    }

    /// Closes and forgets `connection` after an error that says it is gone.
    pub(super) fn evict_if_lost<T>(
        &self,
        connection: &Arc<Connection>,
        result: &Result<T, ClientError>,
    ) {
        if let Err(ClientError::Connection(e)) = result {
            if e.is_connection_lost() {
                self.pool.evict(connection);
            }
        }
    }

    /// Runs `attempt` until it succeeds, fails with a non-retriable error,
    /// or the deadline passes. `topic`'s metadata is dropped after failures
    /// that say it is stale.
    pub(super) async fn retrying<T, F, A>(
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
    pub(super) async fn retrying_with<T, F, A>(
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
pub(super) fn no_leader(
    answer: &ClusterMetadata,
    by: &str,
    topic: &str,
    partition: i32,
) -> ClientError {
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
pub(super) struct Retry<'a> {
    /// Backoff, and the deadline after which no retry starts.
    pub(super) policy: RetryPolicy,
    /// When an attempt under way is cut, after the start (at least the
    /// policy's deadline).
    pub(super) cut: Duration,
    /// Which errors are retried.
    pub(super) retriable: &'a (dyn Fn(&ClientError) -> bool + Sync),
}
