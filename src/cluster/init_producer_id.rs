//! InitProducerId: a producer id and epoch for an idempotent producer.
//!
//! An idempotent producer (no transactional id) asks any broker for a
//! producer id; the broker hands out a fresh id with epoch 0. The producer
//! then stamps every batch with the id, the epoch and a per-partition
//! sequence number, and the partition leader keeps, per producer id, the
//! sequence ranges of its last five batches: a batch sent again after a
//! lost response is recognised and not appended twice, and a batch that
//! skips a sequence is refused (`OUT_OF_ORDER_SEQUENCE_NUMBER`).
//!
//! # References
//! - Kafka protocol guide, "InitProducerId API":
//!   <https://kafka.apache.org/protocol#The_Messages_InitProducerId>
//! - KIP-98 (exactly-once delivery and the idempotent producer), KIP-360
//!   (epoch bumps, v3+), KIP-939 (v6 two-phase-commit fields, unused).

use kafka_protocol::messages::{ApiKey, InitProducerIdRequest, InitProducerIdResponse, ProducerId};

use super::{ClientError, Cluster};
use crate::error_code::ErrorCode;

/// A producer id and epoch from InitProducerId.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProducerIdentity {
    /// The producer id.
    pub id: i64,
    /// The producer epoch.
    pub epoch: i16,
}

/// The InitProducerId request of an idempotent, non-transactional producer.
pub fn init_producer_id_request() -> InitProducerIdRequest {
    InitProducerIdRequest::default()
        .with_transactional_id(None)
        // Ignored without a transactional id; the Java producer's default.
        .with_transaction_timeout_ms(60_000)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1)
}

/// The producer id and epoch the broker gave, or its error.
pub fn read_init_producer_id_response(
    broker: &str,
    response: &InitProducerIdResponse,
) -> Result<ProducerIdentity, ClientError> {
    let code = ErrorCode::from(response.error_code);
    if !code.is_ok() {
        return Err(ClientError::Kafka {
            api: ApiKey::InitProducerId,
            code,
            topic: None,
            partition: None,
            broker: broker.to_owned(),
            message: None,
        });
    }
    if response.producer_id.0 < 0 || response.producer_epoch < 0 {
        return Err(ClientError::Kafka {
            api: ApiKey::InitProducerId,
            code: ErrorCode::UnknownServerError,
            topic: None,
            partition: None,
            broker: broker.to_owned(),
            message: Some(format!(
                "the broker answered without an error but with producer id {} epoch {}",
                response.producer_id.0, response.producer_epoch
            )),
        });
    }
    Ok(ProducerIdentity {
        id: response.producer_id.0,
        epoch: response.producer_epoch,
    })
}

impl Cluster {
    /// A fresh producer id and epoch for an idempotent producer, asked of
    /// the leader of `topic`/`partition` (any broker may answer; the
    /// partition's leader is the one the producer talks to anyway).
    /// Retried like any idempotent request: an id asked for twice is only
    /// an id not used.
    pub async fn init_producer_id(
        &self,
        topic: &str,
        partition: i32,
    ) -> Result<ProducerIdentity, ClientError> {
        let describe = || format!("InitProducerId for topic {topic:?} partition {partition}");
        self.retrying(describe, true, Some(topic), || async {
            let (connection, _leader) = self.leader_connection(topic, partition).await?;
            let result = async {
                let response = connection.request(&init_producer_id_request()).await?;
                read_init_producer_id_response(connection.broker(), &response.body)
            }
            .await;
            self.evict_if_lost(&connection, &result);
            result
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_and_response() {
        let r = init_producer_id_request();
        assert_eq!(r.transactional_id, None);
        assert_eq!((r.producer_id.0, r.producer_epoch), (-1, -1));
        let ok = InitProducerIdResponse::default()
            .with_producer_id(ProducerId(4000))
            .with_producer_epoch(0);
        assert_eq!(
            read_init_producer_id_response("b:1", &ok).expect("id"),
            ProducerIdentity { id: 4000, epoch: 0 }
        );
        let refused = ok.clone().with_error_code(15);
        let err = read_init_producer_id_response("b:1", &refused).expect_err("error");
        assert_eq!(err.code(), Some(ErrorCode::CoordinatorNotAvailable));
        let no_id = ok.with_producer_id(ProducerId(-1));
        assert!(read_init_producer_id_response("b:1", &no_id).is_err());
    }
}
