//! Metadata (key 3), v1–v12: brokers, topics, partition leaders and leader
//! epochs.
//!
//! Every broker replicates every partition (replicas and ISR list all
//! brokers); the leader is whatever the cluster says now. Topics may be asked
//! for by name, by id (v12), or all at once (a null list). An unknown topic
//! is `UNKNOWN_TOPIC_OR_PARTITION` (`UNKNOWN_TOPIC_ID` when asked for by
//! id), unless the cluster auto-creates topics: then, as Kafka does, the
//! topic is created and this response says `LEADER_NOT_AVAILABLE`.
//!
//! # References
//! - Kafka protocol guide, Metadata API; KIP-320 (leader epoch, v7);
//!   KIP-516 (topic ids, v10 and v12).

use bytes::BytesMut;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{ApiKey, BrokerId, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use uuid::Uuid;

use super::Ctx;
use crate::state::ClusterState;

pub(super) fn handle(ctx: &Ctx<'_>, request: &MetadataRequest) -> Result<BytesMut, String> {
    let mut created = false;
    let response = {
        let mut state = ctx.shared.lock();
        let wanted: Vec<(Option<String>, Uuid)> = match &request.topics {
            None => state
                .topics
                .keys()
                .map(|name| (Some(name.clone()), Uuid::nil()))
                .collect(),
            Some(topics) => topics
                .iter()
                .map(|t| (t.name.as_ref().map(|n| n.0.to_string()), t.topic_id))
                .collect(),
        };
        let mut response = MetadataResponse::default();
        response.brokers = state
            .brokers
            .iter()
            .map(|b| {
                let mut broker = MetadataResponseBroker::default();
                broker.node_id = BrokerId(b.node_id);
                broker.host = StrBytes::from_string(b.advertised.ip().to_string());
                broker.port = i32::from(b.advertised.port());
                broker.rack = b.rack.clone().map(StrBytes::from_string);
                broker
            })
            .collect();
        response.cluster_id = Some(StrBytes::from_string(state.cluster_id.clone()));
        response.controller_id = BrokerId(state.brokers.first().map_or(-1, |b| b.node_id));
        for (name, id) in wanted {
            let name = match name {
                Some(name) => name,
                None => match state.topic_name_by_id(id) {
                    Some(name) => name.to_owned(),
                    None => {
                        let mut topic = MetadataResponseTopic::default();
                        topic.name = None;
                        topic.topic_id = id;
                        topic.error_code = ResponseError::UnknownTopicId.code();
                        response.topics.push(topic);
                        continue;
                    }
                },
            };
            if !state.topics.contains_key(&name)
                && state.auto_create_topics
                && request.allow_auto_topic_creation
            {
                let partitions = state.default_partitions;
                if state.create_topic(&name, partitions, None).is_ok() {
                    created = true;
                    let mut topic = MetadataResponseTopic::default();
                    topic.name = Some(TopicName(StrBytes::from_string(name)));
                    topic.error_code = ResponseError::LeaderNotAvailable.code();
                    response.topics.push(topic);
                    continue;
                }
            }
            response.topics.push(topic_metadata(ctx, &state, &name));
        }
        response
    };
    if created {
        ctx.shared.notify_append();
    }
    ctx.frame(ApiKey::Metadata, &response)
}

fn topic_metadata(ctx: &Ctx<'_>, state: &ClusterState, name: &str) -> MetadataResponseTopic {
    let mut topic = MetadataResponseTopic::default();
    topic.name = Some(TopicName(StrBytes::from_string(name.to_owned())));
    let Some(t) = state.topics.get(name) else {
        topic.error_code = ResponseError::UnknownTopicOrPartition.code();
        return topic;
    };
    topic.topic_id = t.id;
    if let Some(code) = ctx.topic_error(name, true) {
        topic.error_code = code;
        return topic;
    }
    let all: Vec<BrokerId> = state.brokers.iter().map(|b| BrokerId(b.node_id)).collect();
    topic.partitions = t
        .partitions
        .iter()
        .enumerate()
        .map(|(index, p)| {
            let index = index as i32;
            let mut partition = MetadataResponsePartition::default();
            partition.partition_index = index;
            partition.leader_id = BrokerId(p.leader);
            partition.leader_epoch = p.leader_epoch;
            partition.replica_nodes = all.clone();
            partition.isr_nodes = all.clone();
            if let Some(code) = ctx.partition_error(name, index, false, false) {
                partition.error_code = code;
                partition.leader_id = BrokerId(-1);
            }
            partition
        })
        .collect();
    topic
}
