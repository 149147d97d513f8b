//! Errors of the cluster's control API (not of the wire protocol: those are
//! Kafka error codes in responses).

use crate::log::AppendError;

/// An error from [`crate::ScriptedCluster`]'s control API.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TestkitError {
    /// A listener could not be bound.
    #[error("cannot bind a loopback listener: {0}")]
    Bind(#[source] std::io::Error),
    /// No broker has this node id.
    #[error("no broker with node id {0}")]
    UnknownBroker(i32),
    /// No such topic.
    #[error("unknown topic {0:?}")]
    UnknownTopic(String),
    /// The topic has no such partition.
    #[error("topic {topic:?} has no partition {partition}")]
    UnknownPartition {
        /// The topic.
        topic: String,
        /// The partition asked for.
        partition: i32,
    },
    /// The topic could not be created.
    #[error("cannot create topic {topic:?}: {message} (error code {code})")]
    CreateTopic {
        /// The topic.
        topic: String,
        /// The Kafka error code CreateTopics would answer.
        code: i16,
        /// Why.
        message: String,
    },
    /// A batch could not be appended.
    #[error("cannot append to {topic}-{partition}: {source}")]
    Append {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
        /// Why.
        #[source]
        source: AppendError,
    },
    /// The cluster needs at least one broker.
    #[error("a cluster needs at least one broker")]
    NoBrokers,
    /// The TLS settings or test certificates could not be made.
    #[error("TLS: {0}")]
    Tls(String),
}
