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
//! # References
//! - Kafka protocol guide, Produce API; Kafka documentation, "Message
//!   Format"; Apache Kafka `LogValidator` (one batch per compressed
//!   request, no control batches from clients).

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ApiKey, ProduceRequest, ProduceResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use walfetch_codec::{Batches, Compression, DecodeOptions, Error as CodecError};

use super::Ctx;

/// Why a partition's records were refused: an error code and a message.
type Refusal = (i16, String);

/// Splits `records` into batches, checking each one.
fn validate(records: Option<&Bytes>) -> Result<Vec<Bytes>, Refusal> {
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
        compressed |= batch.compression() != Compression::None;
        out.push(batch.bytes().clone());
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

pub(super) fn handle(ctx: &Ctx<'_>, request: ProduceRequest) -> Result<Option<BytesMut>, String> {
    let acks_valid = matches!(request.acks, -1..=1);
    let mut appended = false;
    let response = {
        let mut state = ctx.shared.lock();
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
                    match state.partition_mut(name, p.index) {
                        None => Err((ResponseError::UnknownTopicOrPartition.code(), String::new())),
                        Some(part) if part.leader != ctx.node_id => {
                            Err((ResponseError::NotLeaderOrFollower.code(), String::new()))
                        }
                        Some(part) => match ctx.partition_error(name, p.index, true, true) {
                            Some(code) => Err((code, String::new())),
                            None => validate(p.records.as_ref()).and_then(|batches| {
                                let epoch = part.leader_epoch;
                                let mut first = None;
                                for batch in batches {
                                    let base = part.log.append(batch, epoch).map_err(|e| {
                                        (ResponseError::InvalidRecord.code(), e.to_string())
                                    })?;
                                    first.get_or_insert(base);
                                }
                                Ok((first.unwrap_or(-1), part.log.log_start_offset()))
                            }),
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
