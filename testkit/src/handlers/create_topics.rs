//! CreateTopics (key 19), v2–v7: so clients can create their topics.
//!
//! Any broker accepts it (as a KRaft broker forwards it to the controller).
//! `num_partitions` -1 takes the cluster's default, an explicit replica
//! assignment gives each partition's leader (its first broker), and the
//! replication factor may not exceed the number of brokers; topic configs are
//! accepted and ignored. `validate_only` checks without creating.
//!
//! # References
//! - Kafka protocol guide, CreateTopics API; KIP-4 (admin requests),
//!   KIP-464 (default partitions and replication factor, v4), KIP-525
//!   (configs in the response, v5), KIP-516 (topic id, v7).

use std::collections::HashSet;

use bytes::BytesMut;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::{ApiKey, CreateTopicsRequest, CreateTopicsResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::Ctx;
use crate::state::{ClusterState, CreateError};

pub(super) fn handle(ctx: &Ctx<'_>, request: &CreateTopicsRequest) -> Result<BytesMut, String> {
    let mut counts = std::collections::HashMap::<&str, usize>::new();
    for topic in &request.topics {
        *counts.entry(topic.name.0.as_str()).or_default() += 1;
    }
    let duplicates: HashSet<&str> = counts
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .map(|(t, _)| t)
        .collect();
    let mut created = false;
    let response = {
        let mut state = ctx.shared.lock();
        let mut response = CreateTopicsResponse::default();
        for topic in &request.topics {
            let name = topic.name.0.as_str();
            let mut result = CreatableTopicResult::default();
            result.name = topic.name.clone();
            result.error_message = None;
            let outcome = if duplicates.contains(name) {
                Err((
                    ResponseError::InvalidRequest.code(),
                    format!("Create topics request from client contains multiple entries for the topic '{name}'."),
                ))
            } else if let Some(code) = ctx.topic_error(name, true) {
                Err((code, String::new()))
            } else {
                create(&mut state, topic, request.validate_only)
            };
            match outcome {
                Ok((id, partitions, replication_factor)) => {
                    created |= !request.validate_only;
                    result.topic_id = id;
                    result.num_partitions = partitions;
                    result.replication_factor = replication_factor;
                }
                Err((code, message)) => {
                    result.error_code = code;
                    result.error_message =
                        (!message.is_empty()).then(|| StrBytes::from_string(message));
                    result.configs = None;
                }
            }
            response.topics.push(result);
        }
        response
    };
    if created {
        ctx.shared.notify_append();
    }
    ctx.frame(ApiKey::CreateTopics, &response)
}

type Created = (uuid::Uuid, i32, i16);

fn create(
    state: &mut ClusterState,
    topic: &CreatableTopic,
    validate_only: bool,
) -> Result<Created, CreateError> {
    let brokers = state.brokers.len();
    let replication_factor = match topic.replication_factor {
        -1 => 1,
        rf if rf < 1 || usize::try_from(rf).unwrap_or(usize::MAX) > brokers => {
            return Err((
                ResponseError::InvalidReplicationFactor.code(),
                format!("Replication factor {rf} is invalid: the cluster has {brokers} brokers."),
            ))
        }
        rf => rf,
    };
    let leaders = if topic.assignments.is_empty() {
        None
    } else {
        if topic.num_partitions != -1 || topic.replication_factor != -1 {
            return Err((
                ResponseError::InvalidRequest.code(),
                "Both numPartitions or replicationFactor and replicasAssignments were set.".into(),
            ));
        }
        let mut assignments: Vec<_> = topic.assignments.iter().collect();
        assignments.sort_by_key(|a| a.partition_index);
        let mut leaders = Vec::with_capacity(assignments.len());
        for (expected, a) in assignments.iter().enumerate() {
            let leader = a.broker_ids.first().map(|b| b.0);
            match leader {
                Some(leader) if usize::try_from(a.partition_index).ok() == Some(expected) => {
                    leaders.push(leader)
                }
                _ => {
                    return Err((
                        ResponseError::InvalidReplicaAssignment.code(),
                        "Partitions must be numbered from 0 and name at least one broker each."
                            .into(),
                    ))
                }
            }
        }
        Some(leaders)
    };
    let partitions = match (&leaders, topic.num_partitions) {
        (Some(leaders), _) => i32::try_from(leaders.len()).unwrap_or(i32::MAX),
        (None, -1) => state.default_partitions,
        (None, n) => n,
    };
    if leaders.is_none() && partitions < 1 {
        return Err((
            ResponseError::InvalidPartitions.code(),
            format!("Number of partitions was set to an invalid non-positive value {partitions}."),
        ));
    }
    if validate_only {
        crate::state::validate_topic_name(topic.name.0.as_str())?;
        if state.topics.contains_key(topic.name.0.as_str()) {
            return Err((
                ResponseError::TopicAlreadyExists.code(),
                format!("Topic '{}' already exists.", topic.name.0),
            ));
        }
        return Ok((uuid::Uuid::nil(), partitions, replication_factor));
    }
    let id = state.create_topic(topic.name.0.as_str(), partitions, leaders)?;
    Ok((id, partitions, replication_factor))
}
