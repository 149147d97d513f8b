//! Kafka protocol error codes as a `Copy` enum.
//!
//! Every response in the Kafka protocol carries `error_code` fields (per
//! response, per topic, per partition). [`ErrorCode`] names the ones a client
//! meets, keeps unknown codes as [`ErrorCode::Unknown`], and says which ones
//! are worth retrying and which ones mean the client's metadata is stale.
//!
//! # References
//! - Kafka protocol guide, "Error Codes":
//!   <https://kafka.apache.org/protocol#protocol_error_codes>
//! - KIP-320 (leader epochs: `FENCED_LEADER_EPOCH`, `UNKNOWN_LEADER_EPOCH`).

use std::fmt;

macro_rules! error_codes {
    ($( $(#[$doc:meta])* $variant:ident = $code:literal, $name:literal, $retriable:literal; )*) => {
        /// A Kafka protocol error code.
        ///
        /// `ErrorCode::from(0)` is [`ErrorCode::None`]; codes this table does
        /// not know are kept as [`ErrorCode::Unknown`] so nothing is lost.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum ErrorCode {
            $( $(#[$doc])* $variant, )*
            /// A code this client does not know.
            Unknown(i16),
        }

        impl ErrorCode {
            /// The error code for a wire value.
            pub const fn from_i16(code: i16) -> Self {
                match code {
                    $( $code => Self::$variant, )*
                    other => Self::Unknown(other),
                }
            }

            /// The wire value.
            pub const fn code(self) -> i16 {
                match self {
                    $( Self::$variant => $code, )*
                    Self::Unknown(code) => code,
                }
            }

            /// The name the Kafka documentation uses, e.g. `NOT_LEADER_OR_FOLLOWER`.
            pub const fn name(self) -> &'static str {
                match self {
                    $( Self::$variant => $name, )*
                    Self::Unknown(_) => "UNKNOWN_ERROR_CODE",
                }
            }

            /// Whether Kafka marks the error as retriable: the same request
            /// may succeed later.
            pub const fn is_retriable(self) -> bool {
                match self {
                    $( Self::$variant => $retriable, )*
                    Self::Unknown(_) => false,
                }
            }
        }
    };
}

error_codes! {
    /// The server experienced an unexpected error.
    UnknownServerError = -1, "UNKNOWN_SERVER_ERROR", false;
    /// No error.
    None = 0, "NONE", false;
    /// The requested offset is not within the range of offsets kept by the server.
    OffsetOutOfRange = 1, "OFFSET_OUT_OF_RANGE", false;
    /// A message failed its CRC check, exceeds the valid size, or is otherwise corrupt.
    CorruptMessage = 2, "CORRUPT_MESSAGE", true;
    /// The broker does not host this topic-partition.
    UnknownTopicOrPartition = 3, "UNKNOWN_TOPIC_OR_PARTITION", true;
    /// The requested fetch size is invalid.
    InvalidFetchSize = 4, "INVALID_FETCH_SIZE", false;
    /// The partition has no leader right now (e.g. during an election).
    LeaderNotAvailable = 5, "LEADER_NOT_AVAILABLE", true;
    /// The broker is not the leader (or a replica) of the partition.
    NotLeaderOrFollower = 6, "NOT_LEADER_OR_FOLLOWER", true;
    /// The request timed out on the broker.
    RequestTimedOut = 7, "REQUEST_TIMED_OUT", true;
    /// The broker is not available.
    BrokerNotAvailable = 8, "BROKER_NOT_AVAILABLE", false;
    /// The replica is not available for the requested topic-partition.
    ReplicaNotAvailable = 9, "REPLICA_NOT_AVAILABLE", true;
    /// The request included a message larger than the broker accepts.
    MessageTooLarge = 10, "MESSAGE_TOO_LARGE", false;
    /// The controller moved to another broker.
    StaleControllerEpoch = 11, "STALE_CONTROLLER_EPOCH", false;
    /// The metadata field of the offset request was too large.
    OffsetMetadataTooLarge = 12, "OFFSET_METADATA_TOO_LARGE", false;
    /// The server disconnected before a response was received.
    NetworkException = 13, "NETWORK_EXCEPTION", true;
    /// The coordinator is loading.
    CoordinatorLoadInProgress = 14, "COORDINATOR_LOAD_IN_PROGRESS", true;
    /// The coordinator is not available.
    CoordinatorNotAvailable = 15, "COORDINATOR_NOT_AVAILABLE", true;
    /// This is not the correct coordinator.
    NotCoordinator = 16, "NOT_COORDINATOR", true;
    /// The request named an invalid topic.
    InvalidTopicException = 17, "INVALID_TOPIC_EXCEPTION", false;
    /// The batch is larger than the broker's segment size.
    RecordListTooLarge = 18, "RECORD_LIST_TOO_LARGE", false;
    /// Fewer in-sync replicas than required.
    NotEnoughReplicas = 19, "NOT_ENOUGH_REPLICAS", true;
    /// Written, but to fewer in-sync replicas than required.
    NotEnoughReplicasAfterAppend = 20, "NOT_ENOUGH_REPLICAS_AFTER_APPEND", true;
    /// Produce request specified an invalid value for required acks.
    InvalidRequiredAcks = 21, "INVALID_REQUIRED_ACKS", false;
    /// Topic authorization failed.
    TopicAuthorizationFailed = 29, "TOPIC_AUTHORIZATION_FAILED", false;
    /// Cluster authorization failed.
    ClusterAuthorizationFailed = 31, "CLUSTER_AUTHORIZATION_FAILED", false;
    /// The timestamp of a message is out of the acceptable range.
    InvalidTimestamp = 32, "INVALID_TIMESTAMP", false;
    /// The broker does not enable the SASL mechanism asked for.
    UnsupportedSaslMechanism = 33, "UNSUPPORTED_SASL_MECHANISM", false;
    /// A SASL request arrived when the broker did not expect it.
    IllegalSaslState = 34, "ILLEGAL_SASL_STATE", false;
    /// The API version is not supported.
    UnsupportedVersion = 35, "UNSUPPORTED_VERSION", false;
    /// A topic with this name already exists.
    TopicAlreadyExists = 36, "TOPIC_ALREADY_EXISTS", false;
    /// The number of partitions is invalid.
    InvalidPartitions = 37, "INVALID_PARTITIONS", false;
    /// The replication factor is invalid.
    InvalidReplicationFactor = 38, "INVALID_REPLICATION_FACTOR", false;
    /// The replica assignment is invalid.
    InvalidReplicaAssignment = 39, "INVALID_REPLICA_ASSIGNMENT", false;
    /// A configuration is invalid.
    InvalidConfig = 40, "INVALID_CONFIG", false;
    /// This is not the correct controller.
    NotController = 41, "NOT_CONTROLLER", true;
    /// The request is malformed or was sent to an incompatible broker.
    InvalidRequest = 42, "INVALID_REQUEST", false;
    /// The message format version on the broker does not support the request.
    UnsupportedForMessageFormat = 43, "UNSUPPORTED_FOR_MESSAGE_FORMAT", false;
    /// The request violates a configured policy.
    PolicyViolation = 44, "POLICY_VIOLATION", false;
    /// The broker received an out of order sequence number.
    OutOfOrderSequenceNumber = 45, "OUT_OF_ORDER_SEQUENCE_NUMBER", false;
    /// The broker received a duplicate sequence number.
    DuplicateSequenceNumber = 46, "DUPLICATE_SEQUENCE_NUMBER", false;
    /// The producer epoch is old.
    InvalidProducerEpoch = 47, "INVALID_PRODUCER_EPOCH", false;
    /// The transactional state is invalid.
    InvalidTxnState = 48, "INVALID_TXN_STATE", false;
    /// Disk error on the broker.
    KafkaStorageError = 56, "KAFKA_STORAGE_ERROR", true;
    /// SASL authentication failed (wrong credentials, unknown user).
    SaslAuthenticationFailed = 58, "SASL_AUTHENTICATION_FAILED", false;
    /// The broker has no state for the producer id (expired, or never seen).
    UnknownProducerId = 59, "UNKNOWN_PRODUCER_ID", false;
    /// The fetch session ID was not found.
    FetchSessionIdNotFound = 70, "FETCH_SESSION_ID_NOT_FOUND", true;
    /// The fetch session epoch is invalid.
    InvalidFetchSessionEpoch = 71, "INVALID_FETCH_SESSION_EPOCH", true;
    /// The leader has no listener matching the one metadata came from.
    ListenerNotFound = 72, "LISTENER_NOT_FOUND", true;
    /// The leader epoch in the request is older than the broker's.
    FencedLeaderEpoch = 74, "FENCED_LEADER_EPOCH", true;
    /// The leader epoch in the request is newer than the broker's.
    UnknownLeaderEpoch = 75, "UNKNOWN_LEADER_EPOCH", true;
    /// The broker does not support the compression type for this request.
    UnsupportedCompressionType = 76, "UNSUPPORTED_COMPRESSION_TYPE", false;
    /// The high watermark has not caught up after a leader election.
    OffsetNotAvailable = 78, "OFFSET_NOT_AVAILABLE", true;
    /// The preferred leader was not available.
    PreferredLeaderNotAvailable = 80, "PREFERRED_LEADER_NOT_AVAILABLE", true;
    /// Eligible topic partition leaders are not available.
    EligibleLeadersNotAvailable = 83, "ELIGIBLE_LEADERS_NOT_AVAILABLE", true;
    /// A record failed validation on the broker.
    InvalidRecord = 87, "INVALID_RECORD", false;
    /// A newer producer with the same id has fenced this one.
    ProducerFenced = 90, "PRODUCER_FENCED", false;
    /// The throttling quota has been exceeded.
    ThrottlingQuotaExceeded = 89, "THROTTLING_QUOTA_EXCEEDED", true;
    /// The broker does not host this topic id.
    UnknownTopicId = 100, "UNKNOWN_TOPIC_ID", true;
    /// The log's topic id did not match the request's.
    InconsistentTopicId = 103, "INCONSISTENT_TOPIC_ID", true;
    /// The fetch session used topic ids inconsistently.
    FetchSessionTopicIdError = 106, "FETCH_SESSION_TOPIC_ID_ERROR", true;
    /// The requested offset was moved to tiered storage.
    OffsetMovedToTieredStorage = 109, "OFFSET_MOVED_TO_TIERED_STORAGE", false;
}

impl ErrorCode {
    /// Whether the error means the client's view of leadership is stale, so
    /// metadata must be refreshed before the request is retried.
    ///
    /// These are the errors after which a Kafka client re-reads `Metadata`:
    /// the partition moved, its leader changed epoch, or the topic is not
    /// (yet) known where the request went.
    pub const fn invalidates_metadata(self) -> bool {
        matches!(
            self,
            Self::NotLeaderOrFollower
                | Self::FencedLeaderEpoch
                | Self::UnknownLeaderEpoch
                | Self::LeaderNotAvailable
                | Self::UnknownTopicOrPartition
                | Self::ReplicaNotAvailable
                | Self::KafkaStorageError
                | Self::ListenerNotFound
                | Self::UnknownTopicId
                | Self::InconsistentTopicId
        )
    }

    /// Whether this is [`ErrorCode::None`].
    pub const fn is_ok(self) -> bool {
        matches!(self, Self::None)
    }
}

impl From<i16> for ErrorCode {
    fn from(code: i16) -> Self {
        Self::from_i16(code)
    }
}

impl From<ErrorCode> for i16 {
    fn from(code: ErrorCode) -> Self {
        code.code()
    }
}

impl fmt::Display for ErrorCode {
    /// `NAME (code)`, e.g. `NOT_LEADER_OR_FOLLOWER (6)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name(), self.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_round_trips() {
        for code in -1..=200i16 {
            assert_eq!(ErrorCode::from(code).code(), code);
        }
    }

    #[test]
    fn names_and_flags() {
        assert_eq!(ErrorCode::from(6), ErrorCode::NotLeaderOrFollower);
        assert_eq!(ErrorCode::from(6).to_string(), "NOT_LEADER_OR_FOLLOWER (6)");
        assert_eq!(ErrorCode::from(999).to_string(), "UNKNOWN_ERROR_CODE (999)");
        assert!(ErrorCode::from(0).is_ok());
        for retriable in [3, 5, 6, 74, 75] {
            let code = ErrorCode::from(retriable);
            assert!(code.is_retriable() && code.invalidates_metadata(), "{code}");
        }
        for fatal in [1, 10, 29, 36, 42, 87, 999] {
            let code = ErrorCode::from(fatal);
            assert!(
                !code.is_retriable() && !code.invalidates_metadata(),
                "{code}"
            );
        }
    }
}
