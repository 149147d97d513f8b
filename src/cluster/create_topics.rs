//! CreateTopics, for tests and the demo.
//!
//! # References
//! - Kafka protocol guide, "CreateTopics API":
//!   <https://kafka.apache.org/protocol#The_Messages_CreateTopics>
//! - KIP-4 (administrative requests).

use std::time::Duration;

use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::{ApiKey, CreateTopicsRequest, CreateTopicsResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::error::Asked;
use super::{BrokerInfo, ClientError, Cluster};
use crate::connection::RequestOptions;
use crate::error_code::ErrorCode;

/// A topic to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTopic {
    /// The name.
    pub name: String,
    /// The number of partitions.
    pub partitions: i32,
    /// The replication factor.
    pub replication_factor: i16,
    /// Topic configs (`cleanup.policy`, `segment.bytes`, ...).
    pub configs: Vec<(String, String)>,
}

impl NewTopic {
    /// A topic with `partitions` partitions, replication factor 1 and no
    /// configs.
    pub fn new(name: impl Into<String>, partitions: i32) -> Self {
        Self {
            name: name.into(),
            partitions,
            replication_factor: 1,
            configs: Vec::new(),
        }
    }
}

/// The CreateTopics request.
pub fn create_topics_request(topics: &[NewTopic], timeout: Duration) -> CreateTopicsRequest {
    CreateTopicsRequest::default()
        .with_timeout_ms(i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX))
        .with_topics(
            topics
                .iter()
                .map(|t| {
                    CreatableTopic::default()
                        .with_name(TopicName(StrBytes::from_string(t.name.clone())))
                        .with_num_partitions(t.partitions)
                        .with_replication_factor(t.replication_factor)
                        .with_configs(
                            t.configs
                                .iter()
                                .map(|(k, v)| {
                                    CreatableTopicConfig::default()
                                        .with_name(StrBytes::from_string(k.clone()))
                                        .with_value(Some(StrBytes::from_string(v.clone())))
                                })
                                .collect(),
                        )
                })
                .collect(),
        )
}

/// Checks every topic's result; the first error is returned with its topic.
pub fn read_create_topics_response(
    topics: &[NewTopic],
    broker: &str,
    response: &CreateTopicsResponse,
) -> Result<(), ClientError> {
    for topic in topics {
        let result = response
            .topics
            .iter()
            .find(|r| r.name.0.as_str() == topic.name)
            .ok_or_else(|| Asked::new(ApiKey::CreateTopics, broker, &topic.name, -1).missing())?;
        let code = ErrorCode::from(result.error_code);
        if !code.is_ok() {
            return Err(ClientError::Kafka {
                api: ApiKey::CreateTopics,
                code,
                topic: Some(topic.name.clone()),
                partition: None,
                broker: broker.to_owned(),
                message: result.error_message.as_ref().map(|m| m.to_string()),
            });
        }
    }
    Ok(())
}

impl Cluster {
    /// Creates topics on the controller (any broker when none is known).
    pub async fn create_topics(&self, topics: &[NewTopic]) -> Result<(), ClientError> {
        let names: Vec<&str> = topics.iter().map(|t| t.name.as_str()).collect();
        let describe = || format!("CreateTopics {}", names.join(", "));
        let result = self
            .retrying(describe, false, None, || self.create_topics_once(topics))
            .await;
        for name in &names {
            self.invalidate(name);
        }
        result
    }

    async fn create_topics_once(&self, topics: &[NewTopic]) -> Result<(), ClientError> {
        let address = {
            let cache = self.cache();
            cache
                .brokers
                .get(&cache.controller_id)
                .or_else(|| cache.brokers.values().next())
                .map(BrokerInfo::address)
        };
        let address = match address {
            Some(a) => a,
            None => self.config.bootstrap.first().cloned().unwrap_or_default(),
        };
        let connection = self.pool.get(&address).await?;
        let timeout = self.config.admin_timeout;
        let result = async {
            let request = create_topics_request(topics, timeout);
            let options = RequestOptions {
                version: None,
                timeout: Some(connection.request_timeout().saturating_add(timeout)),
            };
            let response = connection.request_with(&request, options).await?;
            self.pool
                .throttled(connection.broker(), response.body.throttle_time_ms);
            read_create_topics_response(topics, connection.broker(), &response.body)
        }
        .await;
        self.evict_if_lost(&connection, &result);
        if matches!(&result, Err(e) if e.code() == Some(ErrorCode::NotController)) {
            self.read_metadata(Some(&[])).await?;
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::create_topics_response::CreatableTopicResult;

    use super::*;

    #[test]
    fn request_and_response() {
        let topics = [NewTopic::new("a", 3)];
        let r = create_topics_request(&topics, Duration::from_secs(1));
        assert_eq!(
            (r.topics[0].num_partitions, r.topics[0].replication_factor),
            (3, 1)
        );
        let response = |code| {
            CreateTopicsResponse::default().with_topics(vec![CreatableTopicResult::default()
                .with_name(TopicName(StrBytes::from_static_str("a")))
                .with_error_code(code)])
        };
        read_create_topics_response(&topics, "b:1", &response(0)).expect("created");
        let err = read_create_topics_response(&topics, "b:1", &response(36)).expect_err("exists");
        assert_eq!(err.code(), Some(ErrorCode::TopicAlreadyExists));
        assert!(err.to_string().contains("\"a\""), "{err}");
    }
}
