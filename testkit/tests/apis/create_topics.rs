//! CreateTopics: every version and its errors.

use crate::common::*;

fn creatable(topic: &str, partitions: i32, replication_factor: i16) -> CreatableTopic {
    let mut t = CreatableTopic::default();
    t.name = name(topic);
    t.num_partitions = partitions;
    t.replication_factor = replication_factor;
    t
}

#[tokio::test]
async fn create_topics_every_version_and_errors() {
    let cluster = ScriptedCluster::start(2).await.expect("start");
    let mut client = RawClient::connect(cluster.addr(2).expect("addr")).await;
    for version in 2..=7 {
        let topic = format!("t{version}");
        let mut request = CreateTopicsRequest::default();
        request.topics = vec![creatable(&topic, 3, 2)];
        let response = client
            .call(version, &request)
            .await
            .unwrap_or_else(|e| panic!("CreateTopics v{version}: {e:?}"));
        let result = &response.topics[0];
        assert_eq!(
            result.error_code, 0,
            "v{version}: {:?}",
            result.error_message
        );
        if version >= 5 {
            assert_eq!((result.num_partitions, result.replication_factor), (3, 2));
        }
        if version >= 7 {
            assert_eq!(Some(result.topic_id), cluster.topic_id(&topic));
        }
        assert_eq!(cluster.leader(&topic, 2).map(|l| l.node_id).ok(), Some(1));
    }
    let mut assigned = creatable("assigned", -1, -1);
    assigned.assignments = (0..2)
        .map(|p| {
            let mut a = CreatableReplicaAssignment::default();
            a.partition_index = p;
            a.broker_ids = vec![BrokerId(2), BrokerId(1)];
            a
        })
        .collect();
    let mut validate = CreateTopicsRequest::default();
    validate.validate_only = true;
    validate.topics = vec![creatable("validated", 1, 1)];
    let response = client.call(7, &validate).await.expect("CreateTopics");
    assert_eq!(response.topics[0].error_code, 0);
    assert!(cluster.topic_id("validated").is_none());

    let mut request = CreateTopicsRequest::default();
    request.topics = vec![
        creatable("t2", 1, 1),
        creatable("bad/name", 1, 1),
        creatable("zero", 0, 1),
        creatable("rf", 1, 3),
        creatable("dup", 1, 1),
        creatable("dup", 1, 1),
        creatable("defaults", -1, -1),
        assigned,
    ];
    let response = client.call(7, &request).await.expect("CreateTopics");
    let codes: Vec<_> = response.topics.iter().map(|t| t.error_code).collect();
    assert_eq!(
        codes,
        vec![
            code(ResponseError::TopicAlreadyExists),
            code(ResponseError::InvalidTopicException),
            code(ResponseError::InvalidPartitions),
            code(ResponseError::InvalidReplicationFactor),
            code(ResponseError::InvalidRequest),
            code(ResponseError::InvalidRequest),
            0,
            0,
        ]
    );
    assert!(response.topics[0].error_message.is_some());
    assert_eq!(
        cluster.leader("assigned", 0).map(|l| l.node_id).ok(),
        Some(2)
    );
    assert_eq!(
        cluster.leader("assigned", 1).map(|l| l.node_id).ok(),
        Some(2)
    );
}
