//! ListOffsets (key 2), v1–v7: offsets by time.
//!
//! - `-2` (earliest): the log start offset;
//! - `-1` (latest): the high watermark, or the last stable offset under
//!   `read_committed` (v2+);
//! - `-3` (max timestamp, v7): the first record with the largest timestamp;
//! - any other timestamp: the first record at or after the log start whose
//!   timestamp is at least that, found through the first batch whose max
//!   timestamp is; none gives offset and timestamp -1.
//!
//! Only the leader answers (`NOT_LEADER_OR_FOLLOWER` elsewhere), after the
//! leader-epoch check (v4+).
//!
//! # References
//! - Kafka protocol guide, ListOffsets API; KIP-79 (by timestamp), KIP-98
//!   (isolation level), KIP-320 (leader epoch), KIP-734 (max timestamp).

use bytes::BytesMut;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ApiKey, ListOffsetsRequest, ListOffsetsResponse};
use kafka_protocol::ResponseError;

use super::{check_leader_epoch, Ctx};

/// Latest offset.
const LATEST: i64 = -1;
/// Earliest offset.
const EARLIEST: i64 = -2;
/// The record with the largest timestamp.
const MAX_TIMESTAMP: i64 = -3;

pub(super) fn handle(ctx: &Ctx<'_>, request: &ListOffsetsRequest) -> Result<BytesMut, String> {
    let read_committed = request.isolation_level == 1;
    let response = {
        let state = ctx.shared.lock();
        let mut response = ListOffsetsResponse::default();
        for topic in &request.topics {
            let name = topic.name.0.as_str();
            let mut out = ListOffsetsTopicResponse::default();
            out.name = topic.name.clone();
            for p in &topic.partitions {
                let mut answer = ListOffsetsPartitionResponse::default();
                answer.partition_index = p.partition_index;
                let result = match state.partition(name, p.partition_index) {
                    None => Err(ResponseError::UnknownTopicOrPartition.code()),
                    Some(part) if part.leader != ctx.node_id => {
                        Err(ResponseError::NotLeaderOrFollower.code())
                    }
                    Some(part) => {
                        match check_leader_epoch(p.current_leader_epoch, part.leader_epoch)
                            .or_else(|| ctx.partition_error(name, p.partition_index, true, true))
                        {
                            Some(code) => Err(code),
                            None => {
                                let log = &part.log;
                                let upper = if read_committed {
                                    log.last_stable_offset()
                                } else {
                                    log.high_watermark()
                                };
                                Ok(match p.timestamp {
                                    LATEST => (upper, -1, part.leader_epoch),
                                    EARLIEST => (
                                        log.log_start_offset(),
                                        -1,
                                        log.epoch_at(log.log_start_offset())
                                            .unwrap_or(part.leader_epoch),
                                    ),
                                    MAX_TIMESTAMP => {
                                        log.max_timestamp(upper).unwrap_or((-1, -1, -1))
                                    }
                                    ts => {
                                        log.offset_for_timestamp(ts, upper).unwrap_or((-1, -1, -1))
                                    }
                                })
                            }
                        }
                    }
                };
                match result {
                    Ok((offset, timestamp, epoch)) => {
                        answer.offset = offset;
                        answer.timestamp = timestamp;
                        if ctx.version >= 4 {
                            answer.leader_epoch = epoch;
                        }
                    }
                    Err(code) => answer.error_code = code,
                }
                out.partitions.push(answer);
            }
            response.topics.push(out);
        }
        response
    };
    ctx.frame(ApiKey::ListOffsets, &response)
}
