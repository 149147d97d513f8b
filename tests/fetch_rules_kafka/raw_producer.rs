//! Raw Produce requests to a real broker, with Kafka's transaction
//! protocol where asked: FindCoordinator, InitProducerId,
//! AddPartitionsToTxn, Produce, EndTxn, each sent as built here, so that
//! the broker stores exactly the batches the test encoded (and writes its
//! own control batches for the transactions' ends).
//!
//! Kafka's transaction protocol version 1 (KIP-98) is used: it is what
//! every Kafka 4 broker still serves, and it keeps the producer epoch.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::find_coordinator_request::FindCoordinatorRequest;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, ApiKey, EndTxnRequest, InitProducerIdRequest, ProduceRequest,
    ProducerId, TopicName, TransactionalId,
};
use kafka_protocol::protocol::{Request, StrBytes};
use kafka_protocol::ResponseError;
use walfetch::connection::{Connection, RequestOptions};

/// Error codes a transactional call is retried on: the coordinator is
/// still loading, moving, or finishing the previous transaction.
fn retriable(code: i16) -> bool {
    [
        ResponseError::CoordinatorLoadInProgress,
        ResponseError::CoordinatorNotAvailable,
        ResponseError::NotCoordinator,
        ResponseError::ConcurrentTransactions,
    ]
    .iter()
    .any(|e| e.code() == code)
}

/// Calls `attempt` until it answers an error code that is not
/// [`retriable`] (or 200 times, 50 ms apart); that code and what came with
/// it.
async fn until_settled<T, F, Fut>(what: &str, mut attempt: F) -> (i16, T)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = (i16, T)>,
{
    let mut code = 0;
    for _ in 0..200 {
        let answer = attempt().await;
        code = answer.0;
        if !retriable(code) {
            return answer;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{what}: still error {code} after 200 attempts");
}

/// Version 3 of AddPartitionsToTxn and EndTxn: the client side of
/// transactions version 1 (partitions added explicitly, no epoch bump at
/// the end of each transaction).
const V3: RequestOptions = RequestOptions {
    version: Some(3),
    timeout: None,
};

fn name(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_owned())
}

/// One batch in one Produce request (acks all), under `transactional_id`
/// if given; the base offset the broker gave it.
pub(crate) async fn produce(
    connection: &Connection,
    topic: &str,
    partition: i32,
    batch: Bytes,
    transactional_id: Option<&str>,
) -> i64 {
    let request = ProduceRequest::default()
        .with_transactional_id(transactional_id.map(|t| TransactionalId(name(t))))
        .with_acks(-1)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(name(topic)))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(batch))])]);
    let answer = connection.request(&request).await.unwrap().body;
    let p = &answer.responses[0].partition_responses[0];
    assert_eq!(
        p.error_code, 0,
        "produce to {topic}/{partition}: {answer:?}"
    );
    p.base_offset
}

/// A transactional producer (Kafka's transaction protocol, version 1:
/// partitions added with AddPartitionsToTxn, markers written by the
/// coordinator on EndTxn).
pub(crate) struct TxnProducer {
    connection: Arc<Connection>,
    id: String,
    /// The producer id and epoch InitProducerId gave.
    pub(crate) producer: (i64, i16),
}

impl TxnProducer {
    /// Finds `id`'s coordinator (creating the transaction state topic on
    /// first use) and initialises the producer. `connection` must be the
    /// coordinator's (the only node of a one-node cluster).
    pub(crate) async fn init(connection: Arc<Connection>, id: &str) -> Self {
        let version = connection.version(ApiKey::FindCoordinator).unwrap();
        let find = if version >= 4 {
            FindCoordinatorRequest::default()
                .with_key_type(1)
                .with_coordinator_keys(vec![name(id)])
        } else {
            FindCoordinatorRequest::default()
                .with_key_type(1)
                .with_key(name(id))
        };
        until_settled("FindCoordinator", || async {
            let answer = connection.request(&find).await.unwrap().body;
            let code = if version >= 4 {
                answer.coordinators[0].error_code
            } else {
                answer.error_code
            };
            (code, ())
        })
        .await;
        let init = InitProducerIdRequest::default()
            .with_transactional_id(Some(TransactionalId(name(id))))
            .with_transaction_timeout_ms(600_000)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
        let (code, producer) = until_settled("InitProducerId", || async {
            let answer = connection.request(&init).await.unwrap().body;
            (
                answer.error_code,
                (answer.producer_id.0, answer.producer_epoch),
            )
        })
        .await;
        assert_eq!(code, 0, "InitProducerId for {id}");
        Self {
            connection,
            id: id.to_owned(),
            producer,
        }
    }

    /// Sends `request` at [`V3`] until the error code `code_of` reads in
    /// its answer is not [`retriable`]; that code must be 0 (`what` names
    /// the call).
    async fn settled_v3<R: Request>(
        &self,
        what: &str,
        request: &R,
        code_of: impl Fn(&R::Response) -> i16,
    ) {
        let (code, ()) = until_settled(what, || async {
            let answer = self.connection.request_with(request, V3).await.unwrap();
            (code_of(&answer.body), ())
        })
        .await;
        assert_eq!(code, 0, "{what}");
    }

    /// Adds `topic`/`partition` to the open transaction (beginning one).
    pub(crate) async fn add_partition(&self, topic: &str, partition: i32) {
        let request = AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(TransactionalId(name(&self.id)))
            .with_v3_and_below_producer_id(ProducerId(self.producer.0))
            .with_v3_and_below_producer_epoch(self.producer.1)
            .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
                .with_name(TopicName(name(topic)))
                .with_partitions(vec![partition])]);
        let what = format!("AddPartitionsToTxn {topic}/{partition}");
        self.settled_v3(&what, &request, |answer| {
            let topic = &answer.results_by_topic_v3_and_below[0];
            topic.results_by_partition[0].partition_error_code
        })
        .await;
    }

    /// Commits (or aborts) the open transaction.
    pub(crate) async fn end(&self, commit: bool) {
        let request = EndTxnRequest::default()
            .with_transactional_id(TransactionalId(name(&self.id)))
            .with_producer_id(ProducerId(self.producer.0))
            .with_producer_epoch(self.producer.1)
            .with_committed(commit);
        self.settled_v3(&format!("EndTxn {commit}"), &request, |answer| {
            answer.error_code
        })
        .await;
    }

    /// Produces `batch` (encoded with this producer's id, epoch and the
    /// partition's next sequence, transactional) in the open transaction.
    pub(crate) async fn produce(&self, topic: &str, partition: i32, batch: Bytes) -> i64 {
        produce(&self.connection, topic, partition, batch, Some(&self.id)).await
    }
}
