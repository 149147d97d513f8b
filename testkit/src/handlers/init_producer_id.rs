//! InitProducerId (key 22), v0–v5: a fresh producer id, epoch 0, for an
//! idempotent producer.
//!
//! Only idempotent producers are served: a request with a transactional id
//! is refused with `INVALID_REQUEST` (the scripted broker has no
//! transaction coordinator).
//! Ids are handed out from 1000 upwards, one per request; an injected
//! top-level error code (a `ResponseError` fault) is answered instead.
//!
//! # References
//! - Kafka protocol guide, InitProducerId API; KIP-98 (idempotent
//!   producer).

use bytes::BytesMut;
use kafka_protocol::messages::{ApiKey, InitProducerIdRequest, InitProducerIdResponse, ProducerId};
use kafka_protocol::ResponseError;

use super::Ctx;

pub(super) fn handle(ctx: &Ctx<'_>, request: &InitProducerIdRequest) -> Result<BytesMut, String> {
    let mut response = InitProducerIdResponse::default();
    response.producer_id = ProducerId(-1);
    response.producer_epoch = -1;
    if let Some(code) = ctx.response_error() {
        response.error_code = code;
    } else if request.transactional_id.is_some() {
        response.error_code = ResponseError::InvalidRequest.code();
    } else {
        let mut state = ctx.shared.lock();
        response.producer_id = ProducerId(state.next_producer_id);
        response.producer_epoch = 0;
        state.next_producer_id += 1;
    }
    ctx.frame(ApiKey::InitProducerId, &response)
}
