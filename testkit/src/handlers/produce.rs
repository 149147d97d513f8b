//! Produce (key 0), v3–v9: appends record batches and returns the base
//! offset assigned.
//!
//! Each partition's `records` must hold complete, valid magic-2 batches (CRC
//! checked): one batch if compressed, one or more if not, and no control
//! batch (only a transaction coordinator writes those). The batches of a
//! partition are all appended or none is. The broker assigns offsets by
//! rewriting each batch's `baseOffset` (and `partitionLeaderEpoch`), neither
//! covered by the CRC; the response carries the first batch's base offset.
//! With `acks = 0` there is no response.
//!
//! Batches of idempotent producers (a producer id) are checked against the
//! partition's producer state (`producers.rs`): a batch already appended
//! is not appended again and is answered as the cluster's
//! [`crate::DuplicateAnswer`] says; a sequence gap or an old epoch is
//! refused. A request whose batches include a duplicate must hold only
//! that batch (as Kafka clients send one batch per partition).
//!
//! A topic may have a `max.message.bytes`
//! ([`crate::ScriptedCluster::set_max_message_bytes`]): a batch larger
//! than it is refused `MESSAGE_TOO_LARGE`, the partition's batches all
//! unwritten, as Kafka's log refuses it (`RecordTooLargeException`).
//!
//! # References
//! - Kafka protocol guide, Produce API; Kafka documentation, "Message
//!   Format"; Apache Kafka `LogValidator` (one batch per compressed
//!   request, no control batches from clients).
//! - KIP-98 (idempotent producer), KAFKA-5793 (a duplicate answered with
//!   its original offset).

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ApiKey, ProduceRequest, ProduceResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use walfetch_codec::{BatchHeader, Batches, Compression, DecodeOptions, Error as CodecError};

use super::Ctx;
use crate::producers::{Check, DuplicateAnswer};
use crate::state::PartitionState;

/// Why a partition's records were refused: an error code and a message.
type Refusal = (i16, String);

/// Splits `records` into batches, checking each one (and its size against
/// the topic's `max.message.bytes`, when set).
fn validate(
    records: Option<&Bytes>,
    max_message_bytes: Option<usize>,
) -> Result<Vec<(Bytes, BatchHeader)>, Refusal> {
    let invalid = |msg: String| (ResponseError::InvalidRecord.code(), msg);
    let Some(records) = records.filter(|r| !r.is_empty()) else {
        return Err(invalid("the request holds no record batch".into()));
    };
    let mut batches = Batches::new(records.clone(), DecodeOptions::default());
    let mut out = Vec::new();
    let mut compressed = false;
    for batch in batches.by_ref() {
        let batch = batch.map_err(|e| match e {
            CodecError::CrcMismatch { .. } => (ResponseError::CorruptMessage.code(), e.to_string()),
            other => invalid(other.to_string()),
        })?;
        if batch.header().is_control() {
            return Err(invalid(format!(
                "batch at offset {} is a control batch; clients may not write those",
                batch.base_offset()
            )));
        }
        let size = batch.bytes().len();
        if let Some(max) = max_message_bytes.filter(|&max| size > max) {
            // As Kafka's log checks each batch before it appends any.
            return Err((
                ResponseError::MessageTooLarge.code(),
                format!(
                    "a record batch of {size} bytes is larger than the topic's \
                     max.message.bytes, {max} bytes"
                ),
            ));
        }
        compressed |= batch.compression() != Compression::None;
        out.push((batch.bytes().clone(), *batch.header()));
    }
    if let Some(partial) = batches.partial() {
        return Err((
            ResponseError::CorruptMessage.code(),
            format!(
                "the last batch is cut short: {} bytes present of {:?}",
                partial.present(),
                partial.needed()
            ),
        ));
    }
    if out.is_empty() {
        return Err(invalid("the request holds no record batch".into()));
    }
    if compressed && out.len() > 1 {
        return Err(invalid(
            "Compressed outer record has more than one batch".into(),
        ));
    }
    Ok(out)
}

/// Appends a partition's batches after the producer checks; the first
/// batch's base offset (the original one for a duplicate) and the log
/// start offset.
fn append(
    part: &mut PartitionState,
    batches: Vec<(Bytes, BatchHeader)>,
    duplicate_answer: DuplicateAnswer,
) -> Result<(i64, i64), Refusal> {
    let log_start = part.log.log_start_offset();
    // Checked in order against the state as the earlier batches leave it.
    let mut producers = part.producers.clone();
    let mut checked = Vec::with_capacity(batches.len());
    for (i, (bytes, header)) in batches.into_iter().enumerate() {
        match producers.check(&header) {
            Check::Append => {
                // Offsets as the log will assign them, for the state only.
                let base = part.log.log_end_offset()
                    + checked
                        .iter()
                        .map(|(_, h): &(Bytes, BatchHeader)| i64::from(h.last_offset_delta) + 1)
                        .sum::<i64>();
                producers.appended(&header, base);
                checked.push((bytes, header));
            }
            Check::Duplicate(base) if i == 0 && checked.is_empty() => {
                return match duplicate_answer {
                    DuplicateAnswer::OriginalOffset => Ok((base, log_start)),
                    DuplicateAnswer::NoOffset => Ok((-1, log_start)),
                    DuplicateAnswer::DuplicateSequenceNumber => Err((
                        ResponseError::DuplicateSequenceNumber.code(),
                        format!(
                            "the batch of sequence {} is a duplicate",
                            header.base_sequence
                        ),
                    )),
                };
            }
            Check::Duplicate(_) => {
                return Err((
                    ResponseError::InvalidRecord.code(),
                    "a duplicate batch among others in one request".into(),
                ))
            }
            Check::Refused(code, message) => return Err((code, message)),
        }
    }
    let epoch = part.leader_epoch;
    let mut first = None;
    for (bytes, header) in checked {
        let base = part
            .log
            .append(bytes, epoch)
            .map_err(|e| (ResponseError::InvalidRecord.code(), e.to_string()))?;
        part.producers.appended(&header, base);
        first.get_or_insert(base);
    }
    Ok((first.unwrap_or(-1), part.log.log_start_offset()))
}

pub(super) fn handle(ctx: &Ctx<'_>, request: ProduceRequest) -> Result<Option<BytesMut>, String> {
    let acks_valid = matches!(request.acks, -1..=1);
    let mut appended = false;
    let response = {
        let mut state = ctx.shared.lock();
        let duplicate_answer = state.duplicate_answer;
        let mut response = ProduceResponse::default();
        for topic in &request.topic_data {
            let name = topic.name.0.as_str();
            let mut out = TopicProduceResponse::default();
            out.name = topic.name.clone();
            for p in &topic.partition_data {
                let mut answer = PartitionProduceResponse::default();
                answer.index = p.index;
                let result = if !acks_valid {
                    Err((ResponseError::InvalidRequiredAcks.code(), String::new()))
                } else {
                    let max_message_bytes =
                        state.topics.get(name).and_then(|t| t.max_message_bytes);
                    match state.partition_mut(name, p.index) {
                        None => Err((ResponseError::UnknownTopicOrPartition.code(), String::new())),
                        Some(part) if part.leader != ctx.node_id => {
                            Err((ResponseError::NotLeaderOrFollower.code(), String::new()))
                        }
                        Some(part) => match ctx.partition_error(name, p.index, true, true) {
                            Some(code) => Err((code, String::new())),
                            None => validate(p.records.as_ref(), max_message_bytes)
                                .and_then(|batches| append(part, batches, duplicate_answer)),
                        },
                    }
                };
                match result {
                    Ok((base_offset, log_start_offset)) => {
                        appended = true;
                        answer.base_offset = base_offset;
                        answer.log_start_offset = log_start_offset;
                    }
                    Err((code, message)) => {
                        answer.error_code = code;
                        answer.base_offset = -1;
                        if ctx.version >= 8 && !message.is_empty() {
                            answer.error_message = Some(StrBytes::from_string(message));
                        }
                    }
                }
                out.partition_responses.push(answer);
            }
            response.responses.push(out);
        }
        if let Some(ms) = ctx.throttle_time_ms() {
            response.throttle_time_ms = ms;
        }
        response
    };
    if appended {
        ctx.shared.notify_append();
    }
    if request.acks == 0 {
        return Ok(None);
    }
    ctx.frame(ApiKey::Produce, &response).map(Some)
}
