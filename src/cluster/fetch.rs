//! Fetch: one partition, one request, the records buffer as the broker sent
//! it. [`fetch_on`] is one request on a given connection;
//! [`Cluster::fetch`] sends it to the partition's leader and retries.
//!
//! The request is a sessionless full fetch (session id 0, epoch -1) from a
//! consumer (replica id -1). The response's `records` for the partition is a
//! [`Bytes`] view of the response frame, handed on without a copy; the
//! caller decodes it with [`walfetch_codec::Batches`]. The broker returns
//! batches from the start of the batch that contains the fetch offset, so
//! the buffer may start below it, may end with a partial batch, and may hold
//! less than asked for.
//!
//! # References
//! - Kafka protocol guide, "Fetch API":
//!   <https://kafka.apache.org/protocol#The_Messages_Fetch>
//! - KIP-74 (`max_bytes`, first batch returned whole), KIP-98
//!   (`isolation_level`, `last_stable_offset`, aborted transactions),
//!   KIP-227 (fetch sessions; not used), KIP-320 (`current_leader_epoch`),
//!   KIP-516 (topic ids, Fetch v13+; a fetch bound to a topic id sends it,
//!   and fails when metadata gives the name another), KIP-392 (`rack_id` and
//!   `preferred_read_replica`, Fetch v11+; see `follower.rs`), KIP-219
//!   (`throttle_time_ms` answered at once; see `throttle.rs`).

use std::collections::BTreeMap;
use std::time::Duration;

use kafka_protocol::messages::{ApiKey, FetchRequest, FetchResponse};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;
use walfetch_codec::BatchHeader;
use walfetch_core::patience::growing_wait;

use super::error::Asked;
use super::follower::FetchSource;
use super::{ClientError, Cluster, PartitionLeader};
use crate::connection::{Connection, RequestOptions, Response};
use walfetch_core::fetch::read_fetch_partitions;
pub use walfetch_core::fetch::{
    fetch_request, fetch_request_for, FetchParams, FetchTarget, FetchedPartition, IsolationLevel,
};

/// Picks `params`' partition out of a Fetch response. A top-level error or
/// a missing partition is an error; the partition's error code is returned
/// in the result.
pub fn read_fetch_response(
    params: &FetchParams,
    topic_id: Uuid,
    broker: &str,
    response: Response<FetchResponse>,
) -> Result<FetchedPartition, ClientError> {
    let target = FetchTarget {
        params,
        leader_epoch: -1,
        topic_id,
    };
    let mut picked = read_fetch_response_for(&[target], broker, response)?;
    picked
        .pop()
        .unwrap_or_else(|| Err(asked(params, broker).missing()))
}

/// Picks every partition of `targets` out of a Fetch response, in their
/// order ([`read_fetch_partitions`]): each the partition's answer (its
/// error code in it), or `MissingInResponse`. A top-level error fails them
/// all.
pub fn read_fetch_response_for(
    targets: &[FetchTarget<'_>],
    broker: &str,
    response: Response<FetchResponse>,
) -> Result<Vec<Result<FetchedPartition, ClientError>>, ClientError> {
    let Response {
        body,
        version,
        wire_bytes,
        ..
    } = response;
    let picked =
        read_fetch_partitions(targets, broker, body, version, wire_bytes).map_err(|code| {
            let first = targets.first().map(|t| t.params);
            ClientError::Kafka {
                api: ApiKey::Fetch,
                code,
                topic: first.map(|p| p.topic.clone()),
                partition: first.map(|p| p.partition),
                broker: broker.to_owned(),
                message: None,
            }
        })?;
    Ok(targets
        .iter()
        .zip(picked)
        .map(|(t, partition)| partition.ok_or_else(|| asked(t.params, broker).missing()))
        .collect())
}

/// One Fetch request on `connection`, no retries: the building block of
/// [`super::Cluster::fetch`], usable directly to pipeline fetches on one
/// connection. `version` overrides the negotiated Fetch version. The
/// request timeout is the connection's plus `max_wait`.
pub async fn fetch_on(
    connection: &Connection,
    params: &FetchParams,
    leader_epoch: i32,
    topic_id: Uuid,
    version: Option<i16>,
) -> Result<FetchedPartition, ClientError> {
    fetch_from_rack(connection, params, leader_epoch, topic_id, version, None).await
}

/// [`fetch_on`], the request carrying the client's `rack` (v11+).
async fn fetch_from_rack(
    connection: &Connection,
    params: &FetchParams,
    leader_epoch: i32,
    topic_id: Uuid,
    version: Option<i16>,
    rack: Option<&str>,
) -> Result<FetchedPartition, ClientError> {
    let version = match version {
        Some(v) => v,
        None => connection.version(ApiKey::Fetch)?,
    };
    if version >= 13 && topic_id.is_nil() {
        return Err(ClientError::InvalidArgument(format!(
            "Fetch v{version} addresses topics by id, and topic {:?} has none in metadata",
            params.topic
        )));
    }
    let mut request = fetch_request(params, leader_epoch, topic_id, version);
    set_rack(&mut request, version, rack);
    let options = RequestOptions {
        version: Some(version),
        timeout: Some(connection.request_timeout().saturating_add(params.max_wait)),
    };
    let response = connection.request_with(&request, options).await?;
    read_fetch_response(params, topic_id, connection.broker(), response)
}

/// Sets a Fetch request's `rack_id` (v11+, KIP-392) to the client's rack.
fn set_rack(request: &mut FetchRequest, version: i16, rack: Option<&str>) {
    if let Some(rack) = rack.filter(|_| version >= 11) {
        request.rack_id = StrBytes::from_string(rack.to_owned());
    }
}

/// What a Fetch of `params` asked, for its errors.
fn asked<'a>(params: &'a FetchParams, broker: &'a str) -> Asked<'a> {
    Asked::new(ApiKey::Fetch, broker, &params.topic, params.partition)
}

/// The error a partition's error code in a Fetch answer stands for.
fn failed(params: &FetchParams, fetched: &FetchedPartition) -> ClientError {
    let offset = format!("fetch offset {}", params.offset);
    asked(params, &fetched.broker).failed(fetched.error_code, Some(offset))
}

/// What [`Cluster::fetch_many`] did.
#[derive(Debug)]
pub struct FetchedMany {
    /// Each partition's answer, in the order asked.
    pub partitions: Vec<Result<FetchedPartition, ClientError>>,
    /// Fetch requests sent: one per leader, plus one for each partition
    /// fetched again on its own (whose own retries are not counted).
    pub requests: usize,
    /// Responses that left a requested partition out (no data, no error),
    /// each followed by a fetch of the partition with a longer wait (see
    /// [`Cluster::fetch`]).
    pub omitted: usize,
    /// The throttle times of the responses, summed (each response once):
    /// how long brokers asked the client to hold back its next request
    /// (KIP-219), which the cluster client waits out before it.
    pub throttle_time: Duration,
}

/// Consecutive responses omitting a partition after which
/// [`Cluster::fetch`] gives up with [`ClientError::PartitionOmitted`].
pub const MAX_CONSECUTIVE_OMISSIONS: u32 = 10;

/// The `max_wait_ms` of the fetch after the first response that omitted
/// its partition; it doubles after each further omission, up to
/// [`OMITTED_WAIT_CAP`].
pub const OMITTED_FIRST_WAIT: Duration = Duration::from_millis(10);

/// The longest wait [`Cluster::fetch`] allows a broker after omissions
/// (librdkafka's default `fetch.wait.max.ms`).
pub const OMITTED_WAIT_CAP: Duration = Duration::from_millis(500);

/// Whether `records` hold more than their first batch.
fn more_than_one_batch(records: &[u8]) -> bool {
    BatchHeader::parse(records).is_some_and(|h| records.len() > h.total_len())
}

/// The wait to allow after `omissions` (≥ 1) consecutive omissions.
fn wait_after_omissions(omissions: u32) -> Duration {
    growing_wait(omissions.max(1), OMITTED_FIRST_WAIT, OMITTED_WAIT_CAP)
}

/// How a partition fared in a request it shared.
enum SharedAnswer {
    /// A clean answer.
    Clean(FetchedPartition),
    /// The response left the partition out.
    Omitted,
    /// An error code or a failed request: fetch it again on its own.
    Retry,
}

impl Cluster {
    /// Fetches several partitions, those led by the same broker in one
    /// request (in the order given; see [`fetch_request_for`]). A partition
    /// whose answer is an error code, or whose request failed, is fetched
    /// again on its own with [`Cluster::fetch`]'s retries, so each result is
    /// what `fetch` would have returned; so is a partition the response
    /// left out, with a wait (see `fetch`).
    ///
    /// Under Kafka's rules each partition of a request gets up to its own
    /// `partition_max_bytes`, and the request's `max_bytes`, their sum,
    /// leaves room for all of them. A partition answered with nothing below
    /// its high watermark was starved (a first batch over its limit, which
    /// Kafka returns whole only to the response's first partition; or a
    /// broker that spends the request's `max_bytes` on the first
    /// partitions, as Tansu 0.6 does): it is fetched again on its own. A
    /// broker seen to starve partitions while giving another more than its
    /// limit gets one partition a request from then on.
    pub async fn fetch_many(&self, params: &[FetchParams]) -> FetchedMany {
        let mut by_leader: BTreeMap<String, Vec<(usize, FetchSource)>> = BTreeMap::new();
        let mut alone = Vec::new();
        for (i, p) in params.iter().enumerate() {
            let Ok(source) = self.fetch_source(p).await else {
                alone.push(i);
                continue;
            };
            if self.shares_unfairly(&source.target.address) {
                alone.push(i);
                continue;
            }
            let group = by_leader.entry(source.target.address.clone()).or_default();
            // A request names a partition once; a second fetch of it goes
            // on its own.
            let named = |&(j, _): &(usize, FetchSource)| {
                params[j].topic == p.topic && params[j].partition == p.partition
            };
            if group.iter().any(named) {
                alone.push(i);
            } else {
                group.push((i, source));
            }
        }
        let shared = futures::future::join_all(
            by_leader
                .into_iter()
                .map(|(address, group)| self.fetch_shared(address, group, params)),
        )
        .await;
        let mut out: Vec<Option<Result<FetchedPartition, ClientError>>> =
            params.iter().map(|_| None).collect();
        let mut requests = shared.len();
        let mut omitted = 0;
        let mut throttle_ms: u64 = shared
            .iter()
            .map(|(_, ms)| u64::try_from(*ms).unwrap_or(0))
            .sum();
        let mut alone: Vec<(usize, u32)> = alone.into_iter().map(|i| (i, 0)).collect();
        for (i, answer) in shared.into_iter().flat_map(|(answers, _)| answers) {
            match answer {
                SharedAnswer::Clean(fetched) => out[i] = Some(Ok(fetched)),
                SharedAnswer::Omitted => alone.push((i, 1)),
                SharedAnswer::Retry => alone.push((i, 0)),
            }
        }
        requests += alone.len();
        let retried = futures::future::join_all(
            alone
                .iter()
                .map(|&(i, omissions)| self.fetch_counting(&params[i], omissions)),
        )
        .await;
        for ((i, before), (result, omissions)) in alone.into_iter().zip(retried) {
            omitted += omissions as usize;
            requests += omissions.saturating_sub(before) as usize;
            if let Ok(fetched) = &result {
                throttle_ms += u64::try_from(fetched.throttle_time_ms).unwrap_or(0);
            }
            out[i] = Some(result);
        }
        FetchedMany {
            omitted,
            throttle_time: Duration::from_millis(throttle_ms),
            partitions: out
                .into_iter()
                .map(|r| {
                    r.unwrap_or_else(|| Err(ClientError::InvalidArgument("unanswered".into())))
                })
                .collect(),
            requests,
        }
    }

    /// One request for `group` (indexes into `params`, with their leader)
    /// to `address`: each partition's clean answer, or what to do about
    /// it; and the response's throttle time.
    async fn fetch_shared(
        &self,
        address: String,
        group: Vec<(usize, FetchSource)>,
        params: &[FetchParams],
    ) -> (Vec<(usize, SharedAnswer)>, i32) {
        // Every failure of a replica sends its partition back to the leader.
        let retry_all = |group: &[(usize, FetchSource)]| {
            let answers = group
                .iter()
                .map(|(i, source)| {
                    if source.follower {
                        self.preferred
                            .forget(&params[*i].topic, params[*i].partition);
                    }
                    (*i, SharedAnswer::Retry)
                })
                .collect();
            (answers, 0)
        };
        let Ok(connection) = self.fetch_connection(&address).await else {
            return retry_all(&group);
        };
        let Ok(version) = connection.version(ApiKey::Fetch) else {
            return retry_all(&group);
        };
        let targets: Vec<FetchTarget<'_>> = group
            .iter()
            .map(|(i, source)| FetchTarget {
                params: &params[*i],
                leader_epoch: source.target.leader_epoch,
                topic_id: source.target.topic_id,
            })
            .collect();
        if version >= 13 && targets.iter().any(|t| t.topic_id.is_nil()) {
            return retry_all(&group);
        }
        let max_wait = targets
            .iter()
            .map(|t| t.params.max_wait)
            .max()
            .unwrap_or_default();
        let options = RequestOptions {
            version: Some(version),
            timeout: Some(connection.request_timeout().saturating_add(max_wait)),
        };
        let mut request = fetch_request_for(&targets, version);
        set_rack(&mut request, version, self.config.client_rack.as_deref());
        let result = connection
            .request_with(&request, options)
            .await
            .map_err(ClientError::from);
        self.evict_if_lost(&connection, &result);
        let throttle_ms = result.as_ref().map_or(0, |r| r.body.throttle_time_ms);
        self.pool.throttled(connection.broker(), throttle_ms);
        let picked = result
            .and_then(|response| read_fetch_response_for(&targets, connection.broker(), response));
        let Ok(picked) = picked else {
            return (retry_all(&group).0, throttle_ms);
        };
        let overfilled = group.iter().zip(&picked).any(|((i, _), answer)| {
            answer.as_ref().is_ok_and(|f| {
                f.records.len() > usize::try_from(params[*i].partition_max_bytes).unwrap_or(0)
                    && more_than_one_batch(&f.records)
            })
        });
        let mut starved = false;
        let answers = group
            .iter()
            .zip(picked)
            .map(|((i, source), answer)| {
                let p = &params[*i];
                let answer = match answer {
                    Ok(f) if f.error_code.is_ok() => {
                        let redirected = self.preferred.observe(&p.topic, p.partition, source, &f);
                        if redirected && f.records.is_empty() {
                            // Fetched again from the replica, on its own.
                            SharedAnswer::Retry
                        } else if f.records.is_empty() && p.offset < f.readable_end(p.isolation) {
                            starved = true;
                            SharedAnswer::Retry
                        } else {
                            SharedAnswer::Clean(f)
                        }
                    }
                    _ if source.follower => {
                        self.preferred.forget(&p.topic, p.partition);
                        SharedAnswer::Retry
                    }
                    Err(ClientError::MissingInResponse { .. }) => SharedAnswer::Omitted,
                    _ => SharedAnswer::Retry,
                };
                (*i, answer)
            })
            .collect();
        if starved && overfilled {
            tracing::debug!(broker = %address, "a shared fetch starved a partition while overfilling another: one partition a request from now on");
            self.unshared
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .insert(address);
        }
        (answers, throttle_ms)
    }

    /// Whether the broker at `address` was seen to starve partitions of a
    /// shared request (see [`Cluster::fetch_many`]).
    fn shares_unfairly(&self, address: &str) -> bool {
        self.unshared
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .contains(address)
    }

    /// Fetches one partition from its leader. Every partition error code
    /// other than `NONE` is retried (if retriable) or returned as an error.
    ///
    /// A response that leaves the partition out altogether (no data, no
    /// error: what some brokers answer to a fetch that may not wait, such
    /// as `max_wait_ms = 0`, when they cannot read the partition's storage
    /// in time) means "nothing this time": the fetch is sent again allowing
    /// a wait of [`OMITTED_FIRST_WAIT`], doubled after each further
    /// omission up to [`OMITTED_WAIT_CAP`]. After
    /// [`MAX_CONSECUTIVE_OMISSIONS`] omissions in a row it fails with
    /// [`ClientError::PartitionOmitted`].
    ///
    /// With [`super::ClusterConfig::client_rack`] set, the request carries
    /// the rack (v11+), and a leader's `preferred_read_replica` makes that
    /// replica the partition's source for this and later fetches until it
    /// fails one, when the fetch goes back to the leader at once (KIP-392).
    /// A broker's `throttle_time_ms` holds back the next request to it
    /// (KIP-219).
    ///
    /// A fetch bound to a topic id ([`FetchParams::topic_id`]) fails with
    /// [`ClientError::TopicIdChanged`] when the cached metadata gives the
    /// name another id, also once read again; Fetch v13+ sends the bound
    /// id, which a broker that no longer has it answers with
    /// `UNKNOWN_TOPIC_ID` (retried, metadata read again, and so that
    /// error). Fetch below v13 names the topic only: the answer is of
    /// whatever had the name when the broker served it, which only a
    /// Metadata read sent after the answer came can tell (what a replay
    /// and `build_index` do before using it).
    pub async fn fetch(&self, params: &FetchParams) -> Result<FetchedPartition, ClientError> {
        self.fetch_counting(params, 0).await.0
    }

    /// [`Cluster::fetch`] after `omissions` responses already left the
    /// partition out; with the omissions counted, `omissions` included.
    async fn fetch_counting(
        &self,
        params: &FetchParams,
        mut omissions: u32,
    ) -> (Result<FetchedPartition, ClientError>, u32) {
        let mut patient = params.clone();
        loop {
            if omissions > 0 {
                patient.max_wait = params.max_wait.max(wait_after_omissions(omissions));
            }
            match self.fetch_retrying(&patient).await {
                Err(ClientError::MissingInResponse { broker, .. }) => {
                    omissions += 1;
                    tracing::debug!(
                        topic = %params.topic,
                        partition = params.partition,
                        offset = params.offset,
                        %broker,
                        omissions,
                        "the Fetch response omitted the partition"
                    );
                    if omissions >= MAX_CONSECUTIVE_OMISSIONS {
                        let error = ClientError::PartitionOmitted {
                            broker,
                            topic: params.topic.clone(),
                            partition: params.partition,
                            offset: params.offset,
                            times: omissions,
                            last_wait: patient.max_wait,
                        };
                        return (Err(error), omissions);
                    }
                }
                other => return (other, omissions),
            }
        }
    }

    /// One partition from its leader, retried under the policy.
    async fn fetch_retrying(&self, params: &FetchParams) -> Result<FetchedPartition, ClientError> {
        let describe = || {
            format!(
                "Fetch of topic {:?} partition {} at offset {}",
                params.topic, params.partition, params.offset
            )
        };
        self.retrying(describe, true, Some(&params.topic), || {
            self.fetch_once(params)
        })
        .await
    }

    /// One fetch of a partition from its source (see [`Cluster::fetch`]):
    /// the leader, or the replica the leader preferred. A leader naming a
    /// replica without sending records is followed at once, and a replica
    /// that fails is left for the leader at once: at most three requests.
    async fn fetch_once(&self, params: &FetchParams) -> Result<FetchedPartition, ClientError> {
        const MAX_HOPS: u32 = 3;
        let (topic, partition) = (params.topic.as_str(), params.partition);
        let mut hops = 0;
        loop {
            hops += 1;
            let source = self.fetch_source(params).await?;
            let retry_on_leader = source.follower && hops < MAX_HOPS;
            let connection = match self.fetch_connection(&source.target.address).await {
                Ok(connection) => connection,
                Err(error) if retry_on_leader => {
                    tracing::debug!(topic, partition, %error, "the preferred replica is unreachable");
                    self.preferred.forget(topic, partition);
                    continue;
                }
                Err(error) => return Err(error),
            };
            let result = fetch_from_rack(
                &connection,
                params,
                source.target.leader_epoch,
                source.target.topic_id,
                None,
                self.config.client_rack.as_deref(),
            )
            .await;
            self.evict_if_lost(&connection, &result);
            if let Ok(fetched) = &result {
                self.pool
                    .throttled(connection.broker(), fetched.throttle_time_ms);
            }
            let failed_here = result.as_ref().map_or(true, |f| !f.error_code.is_ok());
            if retry_on_leader && failed_here {
                match &result {
                    Ok(f) => {
                        tracing::debug!(topic, partition, code = %f.error_code, "the preferred replica failed the fetch")
                    }
                    Err(error) => {
                        tracing::debug!(topic, partition, %error, "the preferred replica failed the fetch")
                    }
                }
                self.preferred.forget(topic, partition);
                continue;
            }
            if source.follower && failed_here {
                self.preferred.forget(topic, partition);
            }
            let fetched = result?;
            if !fetched.error_code.is_ok() {
                return Err(failed(params, &fetched));
            }
            let redirected = self.preferred.observe(topic, partition, &source, &fetched);
            if redirected && fetched.records.is_empty() && hops < MAX_HOPS {
                continue;
            }
            return Ok(fetched);
        }
    }

    /// Where a partition's fetches go now: the replica its leader
    /// preferred, if there is one and metadata knows its address, else
    /// the leader.
    /// The address a fetch of `topic`/`partition` would go to now, as far
    /// as the cached metadata knows (the preferred replica if one is
    /// followed, else the leader): `None` when it is not cached. A driver
    /// puts only fetches to one broker in a request of theirs, so that a
    /// slow broker holds back no other broker's answers.
    pub(crate) fn cached_fetch_address(&self, topic: &str, partition: i32) -> Option<String> {
        let cache = self.cache();
        if let Some(address) = self
            .preferred
            .get(topic, partition)
            .and_then(|replica| cache.brokers.get(&replica))
            .map(|b| b.address())
        {
            return Some(address);
        }
        cache.leader(topic, partition).map(|l| l.address)
    }

    async fn fetch_source(&self, params: &FetchParams) -> Result<FetchSource, ClientError> {
        let (topic, partition) = (params.topic.as_str(), params.partition);
        let leader = self.bound_leader(topic, partition, params.topic_id).await?;
        if let Some(replica) = self.preferred.get(topic, partition) {
            let address = self.cache().brokers.get(&replica).map(|b| b.address());
            match address {
                Some(address) => {
                    return Ok(FetchSource {
                        target: PartitionLeader {
                            broker_id: replica,
                            address,
                            ..leader
                        },
                        follower: true,
                    })
                }
                None => self.preferred.forget(topic, partition),
            }
        }
        Ok(FetchSource {
            target: leader,
            follower: false,
        })
    }
}

#[cfg(test)]
mod tests;
