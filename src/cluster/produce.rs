//! Produce: appending codec-encoded record batches to one partition with
//! `acks = all`.
//!
//! The batches are sent as they are (`walfetch_codec::BatchBuilder` output,
//! base offset 0); the broker assigns offsets and returns the first one.
//!
//! # References
//! - Kafka protocol guide, "Produce API":
//!   <https://kafka.apache.org/protocol#The_Messages_Produce>
//! - KIP-98 (record batches, Produce v3+), KIP-467 (per-record errors, v8+).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::produce_response::PartitionProduceResponse;
use kafka_protocol::messages::{ApiKey, ProduceRequest, ProduceResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::error::Asked;
use super::{ClientError, Cluster};
use crate::connection::{Connection, RequestOptions};

/// `acks = all`: the leader answers once every in-sync replica has the batch.
pub const ACKS_ALL: i16 = -1;

/// The Produce request for one partition (topic by name: v3–v12).
pub fn produce_request(
    topic: &str,
    partition: i32,
    records: Bytes,
    timeout: Duration,
) -> ProduceRequest {
    ProduceRequest::default()
        .with_transactional_id(None)
        .with_acks(ACKS_ALL)
        .with_timeout_ms(i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX))
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(records))])])
}

/// The base offset the broker assigned, or its error with the broker's
/// messages.
pub fn read_produce_response(
    topic: &str,
    partition: i32,
    broker: &str,
    response: &ProduceResponse,
) -> Result<i64, ClientError> {
    let named = response
        .responses
        .iter()
        .filter(|t| t.name.0.as_str() == topic);
    let p = Asked::new(ApiKey::Produce, broker, topic, partition).answer(
        named.flat_map(|t| &t.partition_responses),
        |p| (p.index, p.error_code),
        broker_messages,
    )?;
    Ok(p.base_offset)
}

/// What the broker said about a failed partition: its error message and
/// every record error, `None` when it said nothing.
fn broker_messages(p: &PartitionProduceResponse) -> Option<String> {
    let mut messages: Vec<String> = p.error_message.iter().map(|m| m.to_string()).collect();
    messages.extend(p.record_errors.iter().map(|e| {
        format!(
            "record {}: {}",
            e.batch_index,
            e.batch_index_error_message
                .as_deref()
                .unwrap_or("(no message)")
        )
    }));
    (!messages.is_empty()).then(|| messages.join("; "))
}

/// The answer to a Produce request queued by [`Cluster::produce_queued`]:
/// the base offset the broker assigned, or what went wrong.
pub type ProduceAnswer = Pin<Box<dyn Future<Output = Result<i64, ClientError>> + Send + 'static>>;

impl Cluster {
    /// Queues one Produce of `records` (one record batch) on `connection`
    /// (the partition leader's primary connection, from
    /// [`Cluster::leader_connection`]) and returns its answer to come, once
    /// the request frame is on the connection's queue: requests queued one
    /// after the other on one connection reach the broker in that order,
    /// and a broker answers a connection's requests in order. This is how
    /// an idempotent producer keeps several requests in flight.
    ///
    /// One attempt, no retry: the caller decides what to resend. A lost
    /// connection is closed and dropped from the pool, and errors that say
    /// the leader moved drop the topic's metadata, as
    /// [`Cluster::produce`] does between its attempts. The answer is the
    /// base offset as the broker sent it: `-1` when a broker acknowledges
    /// a duplicate without its offset; `DUPLICATE_SEQUENCE_NUMBER` comes as
    /// an error ([`ClientError::code`]). The answer is waited for
    /// [`super::ClusterConfig::produce_answer_timeout`].
    pub async fn produce_queued(
        self: &Arc<Self>,
        connection: Arc<Connection>,
        topic: &str,
        partition: i32,
        records: Bytes,
    ) -> ProduceAnswer {
        let cluster = Arc::clone(self);
        let topic = topic.to_owned();
        let timeout = self.config.produce_timeout;
        let answer_timeout = self.config.produce_answer_timeout();
        let mut answer: ProduceAnswer = Box::pin(async move {
            let request = produce_request(&topic, partition, records, timeout);
            let options = RequestOptions {
                version: None,
                timeout: Some(answer_timeout),
            };
            let result = match connection.request_with(&request, options).await {
                Ok(response) => {
                    // A throttled producer holds back its next request to
                    // the broker (KIP-219): the writer's next connection
                    // from the pool waits for it.
                    cluster
                        .pool
                        .throttled(connection.broker(), response.body.throttle_time_ms);
                    read_produce_response(&topic, partition, connection.broker(), &response.body)
                }
                Err(e) => Err(e.into()),
            };
            if result
                .as_ref()
                .is_err_and(ClientError::invalidates_metadata)
            {
                cluster.invalidate_after_error(&topic);
            }
            cluster.evict_if_lost(&connection, &result);
            result
        });
        // The first poll runs up to the wait for the response: the frame is
        // queued on the connection when it returns. It runs outside tokio's
        // cooperative budget: with the calling task's budget spent, the
        // connection's gate would answer "not yet" before the frame is
        // queued, and a request queued after this one could reach the
        // broker first (an idempotent producer's batches out of sequence).
        match futures::poll!(tokio::task::unconstrained(answer.as_mut())) {
            Poll::Ready(result) => Box::pin(std::future::ready(result)),
            Poll::Pending => answer,
        }
    }

    /// Appends `records` (record batches, e.g. from
    /// [`walfetch_codec::BatchBuilder`]) to a partition with `acks = all`;
    /// returns the base offset the broker assigned.
    ///
    /// Produce is not idempotent here: it is retried after retriable error
    /// codes that say the batch was not written and after failures before
    /// it was sent (looking the leader up, connecting, the `ApiVersions`
    /// handshake), but not after a connection lost mid-request, nor after
    /// `REQUEST_TIMED_OUT` or `NOT_ENOUGH_REPLICAS_AFTER_APPEND`, when the
    /// batch may have been written; that error is returned.
    pub async fn produce(
        &self,
        topic: &str,
        partition: i32,
        records: Bytes,
    ) -> Result<i64, ClientError> {
        let describe = || format!("Produce to topic {topic:?} partition {partition}");
        self.retrying(describe, false, Some(topic), || {
            self.produce_once(topic, partition, records.clone())
        })
        .await
    }

    async fn produce_once(
        &self,
        topic: &str,
        partition: i32,
        records: Bytes,
    ) -> Result<i64, ClientError> {
        let (connection, _leader) = self.leader_connection(topic, partition).await?;
        let timeout = self.config.produce_timeout;
        let answer_timeout = self.config.produce_answer_timeout();
        let result = async {
            let request = produce_request(topic, partition, records, timeout);
            let options = RequestOptions {
                version: None,
                timeout: Some(answer_timeout),
            };
            let response = connection.request_with(&request, options).await?;
            self.pool
                .throttled(connection.broker(), response.body.throttle_time_ms);
            read_produce_response(topic, partition, connection.broker(), &response.body)
        }
        .await;
        self.evict_if_lost(&connection, &result);
        result
    }
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::produce_response::{
        PartitionProduceResponse, TopicProduceResponse,
    };

    use super::*;

    #[test]
    fn request_and_response() {
        let r = produce_request("t", 1, Bytes::from_static(b"batch"), Duration::from_secs(5));
        assert_eq!((r.acks, r.timeout_ms), (-1, 5000));
        assert_eq!(
            r.topic_data[0].partition_data[0].records.as_deref(),
            Some(&b"batch"[..])
        );
        let response = |code: i16| {
            ProduceResponse::default().with_responses(vec![TopicProduceResponse::default()
                .with_name(TopicName(StrBytes::from_static_str("t")))
                .with_partition_responses(vec![PartitionProduceResponse::default()
                    .with_index(1)
                    .with_error_code(code)
                    .with_base_offset(77)
                    .with_error_message(Some(StrBytes::from_static_str("too big")))])])
        };
        assert_eq!(
            read_produce_response("t", 1, "b:1", &response(0)).expect("offset"),
            77
        );
        let err = read_produce_response("t", 1, "b:1", &response(10)).expect_err("error");
        let msg = err.to_string();
        assert!(
            msg.contains("MESSAGE_TOO_LARGE (10)") && msg.contains("too big"),
            "{msg}"
        );
        assert!(read_produce_response("t", 2, "b:1", &response(0)).is_err());
    }
}
