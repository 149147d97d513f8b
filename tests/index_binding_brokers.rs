//! The index binds to what it indexed, on the real brokers (Apache Kafka
//! and Tansu, one test body on each): an index of a topic that was deleted
//! and created again under the same name with other, shorter data is
//! refused before anything is fetched. On Kafka the topic is deleted
//! (DeleteTopics) and created again; Tansu 0.6 is given a fresh broker
//! with a topic of the same name instead. To the client either is the same
//! name with another topic id (when the broker's Metadata gives ids) and
//! another log.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt;
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::{ApiKey, DeleteTopicsRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use walfetch::cluster::{Cluster, NewTopic};
use walfetch::connection::{Connection, VersionPolicy, VersionRange};
use walfetch::consumer::Recovery;
use walfetch::error::{Error, Mismatch};
use walfetch::error_code::ErrorCode;
use walfetch::writer::WriterConfig;
use walfetch_support::broker::{BrokerKind, TestBroker};
use walfetch_support::on_brokers;
use walfetch_support::recovery::{write_partition, Written};

/// Deletes `topic` (DeleteTopics, which the broker forwards to the
/// controller; on a connection of its own, as walfetch's policy does not
/// use the API) and creates it again, retrying while the deletion is still
/// under way.
async fn delete_and_create_again(broker: &TestBroker, cluster: &Cluster, topic: &str) {
    let mut config = broker.cluster_config().connection;
    config.versions = VersionPolicy::default().with_range(
        ApiKey::DeleteTopics,
        VersionRange::of_message_types(ApiKey::DeleteTopics),
    );
    let connection = Connection::connect(broker.address(), config).await.unwrap();
    let request = DeleteTopicsRequest::default()
        .with_topics(vec![DeleteTopicState::default()
            .with_name(Some(TopicName(StrBytes::from_string(topic.to_owned()))))])
        .with_topic_names(vec![TopicName(StrBytes::from_string(topic.to_owned()))])
        .with_timeout_ms(30_000);
    let response = connection.request(&request).await.unwrap();
    for result in &response.body.responses {
        assert_eq!(
            ErrorCode::from(result.error_code),
            ErrorCode::None,
            "{result:?}"
        );
    }
    for _ in 0..100 {
        match cluster.create_topics(&[NewTopic::new(topic, 1)]).await {
            Ok(()) => return,
            Err(e) if e.code() == Some(ErrorCode::TopicAlreadyExists) => {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            Err(e) => panic!("create {topic:?} again: {e}"),
        }
    }
    panic!("{topic:?} still exists 10 s after DeleteTopics");
}

async fn an_index_of_a_recreated_topic_is_refused(broker: &TestBroker) {
    let wal: &str = &broker.topic("wal");
    // The topic as indexed: 200 entries of regions 1 and 2.
    let cluster = Arc::new(broker.cluster_with_topic(wal, 1).await);
    let entries = (0..200u64).map(|n| (n % 2 + 1, Bytes::from(format!("old {n}"))));
    let index = write_partition(
        &cluster,
        WriterConfig::new(wal, 0),
        entries,
        &mut Written::new(),
    )
    .await;

    // The topic recreated: 50 entries, regions 7 and 8.
    let fresh;
    let cluster = match broker.kind() {
        BrokerKind::Kafka => {
            delete_and_create_again(broker, &cluster, wal).await;
            cluster
        }
        BrokerKind::Tansu => {
            drop(cluster);
            fresh = TestBroker::start_own(BrokerKind::Tansu).await;
            Arc::new(fresh.cluster_with_topic(wal, 1).await)
        }
    };
    let entries = (0..50u64).map(|n| (n % 2 + 7, Bytes::from(format!("new {n}"))));
    write_partition(
        &cluster,
        WriterConfig::new(wal, 0),
        entries,
        &mut Written::new(),
    )
    .await;
    let current = cluster.leader(wal, 0).await.unwrap().topic_id;

    let built = Recovery::builder(Arc::clone(&cluster))
        .index(wal, 0, &index)
        .region(wal, 0, 1, 0)
        .build()
        .await;
    let err = match built {
        Ok(mut recovery) => {
            let first = recovery.next().await;
            panic!("a recovery with the old index started: {first:?}")
        }
        Err(e) => e,
    };
    eprintln!("refused: {err}");
    let Error::IndexMismatch { mismatch, .. } = &err else {
        panic!("expected an index mismatch, got {err:?}");
    };
    match (index.source().topic_id, current.is_nil()) {
        // Both incarnations have ids: told apart by them.
        (Some(indexed), false) => {
            assert_eq!(*mismatch, Mismatch::TopicId { indexed, current }, "{err}")
        }
        // No ids: the old index runs past the new log's end.
        _ => assert!(
            matches!(
                mismatch,
                Mismatch::LastIndexPastEnd {
                    last_index: 199,
                    ..
                }
            ),
            "{err}"
        ),
    }
}

on_brokers!(an_index_of_a_recreated_topic_is_refused);
