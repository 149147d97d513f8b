//! The cluster client: metadata, leaders, a connection per broker, and the
//! operations walfetch needs (ListOffsets, Fetch, Produce, CreateTopics,
//! InitProducerId),
//! each retried under a deadline.
//!
//! A partition operation asks the cached metadata for the partition's
//! leader (reading `Metadata` when it is not known), sends the request on
//! the pooled connection to that broker, and reads the answer. When the
//! answer is a retriable error (`NOT_LEADER_OR_FOLLOWER`,
//! `FENCED_LEADER_EPOCH`, `UNKNOWN_LEADER_EPOCH`, `LEADER_NOT_AVAILABLE`,
//! `UNKNOWN_TOPIC_OR_PARTITION`, ...) or the connection is lost, the
//! partition's metadata is dropped (and a broken connection closed), and the
//! operation is tried again after an exponential backoff with jitter
//! ([`RetryPolicy`]), until the policy's deadline. Non-retriable errors are
//! returned at once, naming the topic, partition and broker. Metadata read
//! again so is read at most once every [`RetryPolicy::initial_backoff`] a
//! topic, however many of its partitions wait (see [`Cluster::leader`]).
//!
//! Each operation lives in its own file with its request and response code:
//! its `Cluster` method and the single attempt that method retries
//! (`metadata.rs`, `list_offsets.rs`, `fetch.rs`, `produce.rs`,
//! `create_topics.rs`). `client.rs` holds the client itself, leader
//! lookup and the retry driver; `config.rs` its settings.
//! `init_producer_id.rs` gives the idempotent WAL writer its producer id.
//!
//! # References
//! - Kafka protocol guide: <https://kafka.apache.org/protocol> ("Partitioning
//!   and bootstrapping": clients bootstrap from any broker, then send
//!   partition requests to the leader from Metadata).
//! - KIP-320 (leader epochs and fencing), KIP-580 (exponential backoff with
//!   jitter for client retries).

mod bootstrap;
mod client;
mod config;
mod create_topics;
mod error;
mod fetch;
mod follower;
mod init_producer_id;
mod list_offsets;
mod metadata;
mod pool;
mod produce;
mod retry;
#[cfg(test)]
mod tests;
mod throttle;
mod topic_id;

pub use bootstrap::DEFAULT_BOOTSTRAP_DEADLINE;
pub use client::Cluster;
pub(crate) use client::LeaderLookup;
pub use config::ClusterConfig;
pub use create_topics::NewTopic;
#[doc(hidden)]
pub use create_topics::{create_topics_request, read_create_topics_response};
pub use error::ClientError;
// The request builders and response readers are internals (tests,
// benches and fuzzing use them); the operations on `Cluster` are the API.
#[doc(hidden)]
pub use fetch::{
    fetch_on, fetch_request, fetch_request_for, read_fetch_response, read_fetch_response_for,
    FetchTarget,
};
pub use fetch::{
    FetchParams, FetchedMany, FetchedPartition, IsolationLevel, MAX_CONSECUTIVE_OMISSIONS,
    OMITTED_FIRST_WAIT, OMITTED_WAIT_CAP,
};
pub use init_producer_id::ProducerIdentity;
#[doc(hidden)]
pub use init_producer_id::{init_producer_id_request, read_init_producer_id_response};
#[doc(hidden)]
pub use list_offsets::{list_offsets_request, read_list_offsets_response};
pub use list_offsets::{ListedOffset, OffsetSpec};
#[doc(hidden)]
pub use metadata::metadata_request;
pub use metadata::{BrokerInfo, ClusterMetadata, PartitionInfo, PartitionLeader, TopicInfo};
#[doc(hidden)]
pub use produce::{produce_request, read_produce_response};
pub use produce::{ProduceAnswer, ACKS_ALL};
pub use retry::RetryPolicy;
