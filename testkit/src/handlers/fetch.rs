//! Fetch (key 1), v4–v17: records under Kafka's fetch rules.
//!
//! Partitions are read in request order. Each gets
//! `min(partition_max_bytes, what is left of max_bytes)`, where `max_bytes`
//! is the request's, at most the broker's `fetch.max.bytes` (KIP-541,
//! [`crate::ScriptedCluster::set_fetch_max_bytes`]); the first partition
//! that returns data gets its first batch whole even over that limit, the
//! others are cut at exactly the limit, or get no records when their first
//! batch does not fit it (see [`crate::fetch_rules`]). Under
//! `read_committed` the read stops at the last stable offset and the response
//! lists the aborted transactions Kafka would (those overlapping the
//! returned offsets and up to its offset index's bound; null for a first
//! batch that did not fit: [`crate::fetch_rules::AbortedList`]); under
//! `read_uncommitted` it stops at the high watermark and the list is null.
//!
//! When fewer than `min_bytes` are ready and `max_wait_ms` is positive, the
//! fetch waits for an append (or a leadership change) and reads again, until
//! `min_bytes` are ready or `max_wait_ms` has passed, as Kafka's delayed
//! fetch does; a partition error answers at once.
//!
//! With follower fetching on (brokers given racks, see
//! `ClusterBuilder::racks`), a leader answers a consumer in another rack
//! (v11+ `rack_id`) that has a broker of its own with that broker as
//! `preferred_read_replica` and no records, as Kafka's
//! `RackAwareReplicaSelector` does; a broker that does not lead the
//! partition serves a consumer fetch (v11+) as a follower instead of
//! answering `NOT_LEADER_OR_FOLLOWER`.
//!
//! Fetch sessions (KIP-227) are not kept: a full fetch (session epoch 0 or
//! -1) is answered in full with session id 0 ("no session created"), an
//! incremental one gets `FETCH_SESSION_ID_NOT_FOUND`.
//!
//! # References
//! - Kafka protocol guide, Fetch API; KIP-74 (response size limit); KIP-98
//!   (isolation level, aborted transactions); KIP-227 (fetch sessions);
//!   KIP-320 (leader epoch check); KIP-392 (fetch from the closest
//!   replica, v11); KIP-516 (topic ids, v13); KIP-951
//!   (current leader and node endpoints on `NOT_LEADER_OR_FOLLOWER`, v16).

use std::collections::BTreeSet;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, FetchableTopicResponse, LeaderIdAndEpoch, NodeEndpoint, PartitionData,
};
use kafka_protocol::messages::{ApiKey, BrokerId, FetchRequest, FetchResponse, ProducerId};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::{check_leader_epoch, Ctx};
use crate::faults::FaultAction;
use crate::fetch_rules::{extents_of, AbortedList, Habits, ReadRequest};
use crate::state::{ClusterState, KAFKA_FETCH_MAX_BYTES};

/// A response read from the logs, and what decides whether to wait.
struct Read {
    response: FetchResponse,
    bytes: usize,
    any_error: bool,
}

pub(super) async fn handle(ctx: &Ctx<'_>, request: &FetchRequest) -> Result<BytesMut, String> {
    if ctx.version >= 7 && request.session_epoch != 0 && request.session_epoch != -1 {
        let mut response = FetchResponse::default();
        response.error_code = if request.session_epoch > 0 {
            ResponseError::FetchSessionIdNotFound.code()
        } else {
            ResponseError::InvalidFetchSessionEpoch.code()
        };
        return ctx.frame(ApiKey::Fetch, &response);
    }
    if ctx.version >= 7 {
        if let Some(code) = ctx.response_error() {
            let mut response = FetchResponse::default();
            response.error_code = code;
            return ctx.frame(ApiKey::Fetch, &response);
        }
    }
    let min_bytes = usize::try_from(request.min_bytes).unwrap_or(0);
    let max_wait = Duration::from_millis(u64::try_from(request.max_wait_ms).unwrap_or(0));
    let deadline = tokio::time::Instant::now() + max_wait;
    let mut changes = ctx.shared.subscribe_appends();
    loop {
        changes.borrow_and_update();
        let read = read_logs(ctx, &ctx.shared.lock(), request);
        if read.bytes >= min_bytes || read.any_error || max_wait.is_zero() {
            return ctx.frame(ApiKey::Fetch, &read.response);
        }
        match tokio::time::timeout_at(deadline, changes.changed()).await {
            Ok(Ok(())) => continue,
            // Timed out (or the cluster is gone): answer with what there is now.
            _ => {
                let read = read_logs(ctx, &ctx.shared.lock(), request);
                return ctx.frame(ApiKey::Fetch, &read.response);
            }
        }
    }
}

/// `records` of `topic`/`partition` after the records fault that fired,
/// if it is one and covers the partition; whether it did anything.
fn records_fault(ctx: &Ctx<'_>, topic: &str, partition: i32, records: Bytes) -> (Bytes, bool) {
    let Some(fault) = ctx.fault.filter(|f| f.covers(topic, partition)) else {
        return (records, false);
    };
    if records.is_empty() {
        return (records, false);
    }
    match *fault.action() {
        FaultAction::TruncateRecords { keep } => {
            let keep = keep.min(records.len());
            (records.slice(..keep), true)
        }
        FaultAction::CorruptRecords => {
            let Some(first) = extents_of(&records).first().copied() else {
                return (records, false);
            };
            let mut corrupt = BytesMut::from(&records[..]);
            if let Some(byte) = corrupt.get_mut(first.end() - 1) {
                *byte ^= 0x5a;
            }
            (corrupt.freeze(), true)
        }
        _ => (records, false),
    }
}

/// The replica a leader points a consumer at (KIP-392): with follower
/// fetching on, a consumer's `rack_id` (v11+) naming a rack other than
/// the leader's, and a broker in that rack (the lowest node id of them).
fn preferred_replica(state: &ClusterState, ctx: &Ctx<'_>, request: &FetchRequest) -> Option<i32> {
    if !state.follower_fetching || ctx.version < 11 || request.rack_id.is_empty() {
        return None;
    }
    let rack = request.rack_id.as_str();
    let leader_rack = state.broker(ctx.node_id).and_then(|b| b.rack.as_deref());
    if leader_rack == Some(rack) {
        return None;
    }
    state
        .brokers
        .iter()
        .filter(|b| b.node_id != ctx.node_id && b.rack.as_deref() == Some(rack))
        .map(|b| b.node_id)
        .min()
}

fn error_partition(index: i32, code: i16) -> PartitionData {
    let mut data = PartitionData::default();
    data.partition_index = index;
    data.error_code = code;
    data.high_watermark = -1;
    data.last_stable_offset = -1;
    data.log_start_offset = -1;
    data.aborted_transactions = None;
    data.records = Some(Bytes::new());
    data
}

fn read_logs(ctx: &Ctx<'_>, state: &ClusterState, request: &FetchRequest) -> Read {
    let version = ctx.version;
    let read_committed = request.isolation_level == 1;
    let (habits, fetch_max_bytes) = state
        .broker(ctx.node_id)
        .map_or((Habits::default(), KAFKA_FETCH_MAX_BYTES), |b| {
            (b.habits, b.fetch_max_bytes)
        });
    let mut limit = usize::try_from(request.max_bytes)
        .unwrap_or(0)
        .min(fetch_max_bytes);
    let mut min_one_batch = true;
    let mut total = 0;
    let mut any_error = false;
    let mut leaders_named = BTreeSet::new();
    let mut records_fault_done = false;
    let mut response = FetchResponse::default();

    for topic in &request.topics {
        let mut out = FetchableTopicResponse::default();
        let name: Option<String> = if version >= 13 {
            out.topic_id = topic.topic_id;
            state.topic_name_by_id(topic.topic_id).map(str::to_owned)
        } else {
            out.topic = topic.topic.clone();
            Some(topic.topic.0.to_string())
        };
        for p in &topic.partitions {
            let index = p.partition;
            let Some(name) = name.as_deref().filter(|n| state.topics.contains_key(*n)) else {
                let code = if version >= 13 {
                    ResponseError::UnknownTopicId.code()
                } else {
                    ResponseError::UnknownTopicOrPartition.code()
                };
                any_error = true;
                out.partitions.push(error_partition(index, code));
                continue;
            };
            let Some(part) = state.partition(name, index) else {
                any_error = true;
                out.partitions.push(error_partition(
                    index,
                    ResponseError::UnknownTopicOrPartition.code(),
                ));
                continue;
            };
            let epoch_error = if version >= 9 {
                check_leader_epoch(p.current_leader_epoch, part.leader_epoch)
            } else {
                None
            };
            let follower_serves = state.follower_fetching && version >= 11;
            let error = if part.leader != ctx.node_id && !follower_serves {
                Some(ResponseError::NotLeaderOrFollower.code())
            } else {
                epoch_error
            };
            if let Some(code) = error {
                any_error = true;
                let mut data = error_partition(index, code);
                let tells_leader = code == ResponseError::NotLeaderOrFollower.code()
                    || code == ResponseError::FencedLeaderEpoch.code();
                if version >= 16 && tells_leader {
                    let mut leader = LeaderIdAndEpoch::default();
                    leader.leader_id = BrokerId(part.leader);
                    leader.leader_epoch = part.leader_epoch;
                    data.current_leader = leader;
                    leaders_named.insert(part.leader);
                }
                out.partitions.push(data);
                continue;
            }
            if let Some(code) = ctx.partition_error(name, index, true, version < 7) {
                any_error = true;
                out.partitions.push(error_partition(index, code));
                continue;
            }
            if part.leader == ctx.node_id {
                if let Some(replica) = preferred_replica(state, ctx, request) {
                    // Kafka answers with the replica and no records.
                    let mut data = error_partition(index, 0);
                    data.high_watermark = part.log.high_watermark();
                    data.last_stable_offset = part.log.last_stable_offset();
                    data.log_start_offset = part.log.log_start_offset();
                    data.preferred_read_replica = BrokerId(replica);
                    out.partitions.push(data);
                    continue;
                }
            }
            let wait_ms = u32::try_from(request.max_wait_ms).unwrap_or(0);
            if wait_ms < habits.omit_below_wait_ms {
                // Storage too slow for the wait: no entry for the partition.
                continue;
            }
            let log = &part.log;
            if wait_ms < habits.empty_below_wait_ms {
                // Storage too slow for the wait: the partition, no records.
                let mut data = error_partition(index, 0);
                data.high_watermark = log.high_watermark();
                data.last_stable_offset = log.last_stable_offset();
                data.log_start_offset = log.log_start_offset();
                data.aborted_transactions = read_committed.then(Vec::new);
                out.partitions.push(data);
                continue;
            }
            let upper_bound = if read_committed {
                log.last_stable_offset()
            } else {
                log.high_watermark()
            };
            let read_request = if habits.spend_request_bytes {
                // Nothing left for this partition: no records at all.
                let spent = limit == 0 && !min_one_batch;
                ReadRequest {
                    offset: p.fetch_offset,
                    max_bytes: limit,
                    min_one_batch,
                    habits: Habits {
                        never_cut: habits.never_cut && !spent,
                        ..habits
                    },
                }
            } else {
                ReadRequest {
                    offset: p.fetch_offset,
                    max_bytes: usize::try_from(p.partition_max_bytes)
                        .unwrap_or(0)
                        .min(limit),
                    min_one_batch,
                    habits,
                }
            };
            let slice = match log.read(read_request, upper_bound) {
                Ok(slice) => slice,
                Err(_) => {
                    any_error = true;
                    out.partitions.push(error_partition(
                        index,
                        ResponseError::OffsetOutOfRange.code(),
                    ));
                    continue;
                }
            };
            let mut data = PartitionData::default();
            data.partition_index = index;
            data.high_watermark = log.high_watermark();
            data.last_stable_offset = log.last_stable_offset();
            data.log_start_offset = log.log_start_offset();
            let listed = match slice.aborted {
                AbortedList::Null => None,
                AbortedList::Empty => Some(Vec::new()),
                AbortedList::Before(bound) => Some(log.aborted_overlapping(p.fetch_offset, bound)),
            };
            data.aborted_transactions = listed.filter(|_| read_committed).map(|list| {
                list.into_iter()
                    .map(|t| {
                        let mut aborted = AbortedTransaction::default();
                        aborted.producer_id = ProducerId(t.producer_id);
                        aborted.first_offset = t.first_offset;
                        aborted
                    })
                    .collect()
            });
            if !slice.is_empty() {
                min_one_batch = false;
                limit = limit.saturating_sub(slice.len());
                total += slice.len();
            }
            let last = log.extents().len();
            data.records = Some(
                if habits.repeat_last_batch
                    && !slice.partial
                    && slice.batches.end == last
                    && last > 0
                {
                    let repeated = log.extents()[last - 1];
                    let mut both = BytesMut::from(&log.bytes(slice.bytes)[..]);
                    both.extend_from_slice(&log.bytes(repeated.position..repeated.end()));
                    both.freeze()
                } else {
                    log.bytes(slice.bytes)
                },
            );
            if !records_fault_done {
                if let Some(records) = data.records.take() {
                    let (records, done) = records_fault(ctx, name, index, records);
                    records_fault_done = done;
                    data.records = Some(records);
                }
            }
            out.partitions.push(data);
        }
        response.responses.push(out);
    }
    if version >= 16 {
        response.node_endpoints = leaders_named
            .into_iter()
            .filter_map(|id| state.broker(id))
            .map(|b| {
                let mut endpoint = NodeEndpoint::default();
                endpoint.node_id = BrokerId(b.node_id);
                endpoint.host = StrBytes::from_string(b.advertised.ip().to_string());
                endpoint.port = i32::from(b.advertised.port());
                endpoint
            })
            .collect();
    }
    Read {
        response,
        bytes: total,
        any_error,
    }
}
