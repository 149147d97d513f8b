//! Topic ACLs for a cluster run with Kafka's authorizer: a CreateAcls
//! request (the `kafka-protocol` message, sent by walfetch's own client)
//! on a node's plain-text listener, whose principal (`User:ANONYMOUS`) the
//! cluster must make a super user. (The distribution the harness installs
//! has no `kafka-acls` tool: it lives in `kafka-tools`.)
//!
//! # References
//! - Kafka protocol guide, "CreateAcls API (Key: 30)"; KIP-140 (resource
//!   pattern types), KIP-801 (`StandardAuthorizer` in KRaft).

use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::CreateAclsRequest;
use kafka_protocol::protocol::StrBytes;
use walfetch::cluster::{Cluster, ClusterConfig};

use crate::BrokerError;

/// An operation an ACL allows on a topic (Kafka's `AclOperation` codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AclOperation {
    /// Every operation.
    All,
    /// Fetch (implies [`AclOperation::Describe`]).
    Read,
    /// Produce (implies [`AclOperation::Describe`]).
    Write,
    /// CreateTopics.
    Create,
    /// Metadata, ListOffsets, OffsetForLeaderEpoch.
    Describe,
}

impl AclOperation {
    fn code(self) -> i8 {
        match self {
            Self::All => 2,
            Self::Read => 3,
            Self::Write => 4,
            Self::Create => 5,
            Self::Describe => 8,
        }
    }
}

/// Resource type `TOPIC`, pattern `LITERAL`, permission `ALLOW`.
const RESOURCE_TOPIC: i8 = 2;
const PATTERN_LITERAL: i8 = 3;
const PERMISSION_ALLOW: i8 = 3;

/// The request allowing `principal` each of `operations` on `topic`.
fn request(principal: &str, topic: &str, operations: &[AclOperation]) -> CreateAclsRequest {
    let text = |s: &str| StrBytes::from_string(s.to_owned());
    CreateAclsRequest::default().with_creations(
        operations
            .iter()
            .map(|op| {
                AclCreation::default()
                    .with_resource_type(RESOURCE_TOPIC)
                    .with_resource_name(text(topic))
                    .with_resource_pattern_type(PATTERN_LITERAL)
                    .with_principal(text(principal))
                    .with_host(text("*"))
                    .with_operation(op.code())
                    .with_permission_type(PERMISSION_ALLOW)
            })
            .collect(),
    )
}

/// Sends the ACLs to the broker at `address` (reached with `config`).
pub(crate) async fn allow_topic(
    config: ClusterConfig,
    address: &str,
    principal: &str,
    topic: &str,
    operations: &[AclOperation],
) -> Result<(), BrokerError> {
    let fail = |why: String| BrokerError::Request {
        what: format!("CreateAcls for {principal} on topic {topic:?}"),
        why,
    };
    let cluster = Cluster::connect(config)
        .await
        .map_err(|e| fail(e.to_string()))?;
    let connection = cluster
        .connection(address)
        .await
        .map_err(|e| fail(e.to_string()))?;
    let answer = connection
        .request(&request(principal, topic, operations))
        .await
        .map_err(|e| fail(e.to_string()))?
        .body;
    match answer.results.iter().find(|r| r.error_code != 0) {
        Some(refused) => Err(fail(format!(
            "error {}: {}",
            refused.error_code,
            refused.error_message.as_deref().unwrap_or("")
        ))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_creation_per_operation() {
        let request = request(
            "User:dora",
            "t",
            &[AclOperation::Describe, AclOperation::Read],
        );
        let ops: Vec<i8> = request.creations.iter().map(|c| c.operation).collect();
        assert_eq!(ops, vec![8, 3]);
        let c = &request.creations[0];
        assert_eq!(
            (c.resource_type, c.resource_pattern_type, c.permission_type),
            (2, 3, 3)
        );
        assert_eq!(
            (c.principal.as_str(), c.resource_name.as_str()),
            ("User:dora", "t")
        );
    }
}
