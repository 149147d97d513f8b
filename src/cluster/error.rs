//! The cluster client's one error type.

use std::time::Duration;

use kafka_protocol::messages::ApiKey;

use crate::connection::ConnectionError;
use crate::error_code::ErrorCode;

/// Everything that can go wrong in a cluster operation.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// A connection-level failure.
    #[error(transparent)]
    Connection(#[from] ConnectionError),
    /// The broker answered with a Kafka error code.
    #[error(
        "{api:?} {}on broker {broker} failed: {code}{}",
        target(topic, *partition),
        message.as_ref().map(|m| format!(": {m}")).unwrap_or_default()
    )]
    Kafka {
        /// The request's API.
        api: ApiKey,
        /// The error code.
        code: ErrorCode,
        /// The topic, when the error is about one.
        topic: Option<String>,
        /// The partition, when the error is about one.
        partition: Option<i32>,
        /// The broker that answered.
        broker: String,
        /// The broker's error message, if it sent one.
        message: Option<String>,
    },
    /// Metadata names a leader the client cannot reach: no leader, or a
    /// leader id missing from the broker list.
    #[error(
        "topic {topic:?} partition {partition} has no reachable leader (leader id {leader_id})"
    )]
    NoLeader {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
        /// The leader id metadata gave (-1: none).
        leader_id: i32,
    },
    /// A response lacks the topic or partition the request asked about.
    #[error("{api:?} response from broker {broker} lacks topic {topic:?} partition {partition}")]
    MissingInResponse {
        /// The request's API.
        api: ApiKey,
        /// The broker that answered.
        broker: String,
        /// The topic asked about.
        topic: String,
        /// The partition asked about.
        partition: i32,
    },
    /// A broker kept leaving a partition out of its Fetch responses (no
    /// data, no error), even when allowed to wait: the habit of a broker
    /// that omits a partition whose storage it cannot read within
    /// `max_wait_ms`. [`super::Cluster::fetch`] takes one omission as
    /// "nothing this time" and asks again with a growing wait; this error
    /// is what it returns when the omissions persist.
    #[error(
        "broker {broker} left topic {topic:?} partition {partition} (fetch offset {offset}) out of \
         {times} Fetch responses in a row, the last after a wait of up to {last_wait:?}: it omits \
         a partition it cannot read in time, and kept doing so"
    )]
    PartitionOmitted {
        /// The broker that answered.
        broker: String,
        /// The topic asked about.
        topic: String,
        /// The partition asked about.
        partition: i32,
        /// The fetch offset.
        offset: i64,
        /// Consecutive responses that omitted the partition.
        times: u32,
        /// The `max_wait_ms` of the last of them.
        last_wait: Duration,
    },
    /// Fetch answers kept holding no batch at a fetch offset below the
    /// partition's high watermark, no error either, also when allowed to
    /// wait longer and longer: the broker did not read the records in
    /// time (Kafka answers so when a read from tiered storage outlasts its
    /// `remote.fetch.max.wait.ms`). What the WAL writer meets when it
    /// cannot read the log to look for a batch whose answer it lost: the
    /// batch's entries then fail saying they may have been written.
    #[error(
        "topic {topic:?} partition {partition}: {answers} Fetch answers in a row at offset \
         {offset} held no batch although the high watermark is {high_watermark} (the last \
         allowed to wait {last_wait:?}): the broker did not read the records in time"
    )]
    NoRecords {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
        /// The fetch offset.
        offset: i64,
        /// The high watermark the last answer gave.
        high_watermark: i64,
        /// Answers in a row that held no batch.
        answers: u32,
        /// The `max_wait_ms` of the last fetch.
        last_wait: Duration,
    },
    /// No broker answered a Metadata request (bootstrap, or a refresh).
    #[error(
        "no broker answered Metadata (tried {}): {}{last}",
        addresses.join(", "),
        earlier.iter().map(|e| format!("{e}; ")).collect::<String>()
    )]
    NoBrokerAnswered {
        /// The addresses tried, in order.
        addresses: Vec<String>,
        /// The failures before the last, in order (each names its broker).
        earlier: Vec<ClientError>,
        /// The last failure.
        #[source]
        last: Box<ClientError>,
    },
    /// A retriable failure persisted until the operation's deadline.
    #[error(
        "gave up on {operation} after {attempts} attempt(s) in {:.3} s (deadline {:.3} s, \
         --timeout / socket.timeout.ms){}",
        elapsed.as_secs_f64(),
        deadline.as_secs_f64(),
        last.as_ref().map(|e| format!(": {e}")).unwrap_or_default()
    )]
    RetriesExhausted {
        /// What was attempted.
        operation: String,
        /// Attempts made.
        attempts: u32,
        /// Time spent.
        elapsed: Duration,
        /// The deadline ([`super::RetryPolicy::deadline`]).
        deadline: Duration,
        /// The failure of the last attempt that ended (the deadline may
        /// have cut a later one short); `None` when the deadline struck
        /// during the first.
        last: Option<Box<ClientError>>,
    },
    /// The topic a request was bound to by its id (see
    /// [`super::FetchParams::topic_id`]) is gone: metadata, read again,
    /// gives the topic's name another id. The topic was deleted and
    /// created again, and what now has its name is another log. Not
    /// retried.
    #[error(
        "topic {topic:?} partition {partition} was deleted and recreated: its topic id was \
         {expected}, metadata now gives {current}; the new topic's records are not read as the \
         old one's"
    )]
    TopicIdChanged {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
        /// The topic id the request was bound to.
        expected: uuid::Uuid,
        /// The topic id metadata gives now.
        current: uuid::Uuid,
    },
    /// An argument was invalid.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The task doing the operation was stopped before its answer came
    /// (its tokio runtime shut down): a request already sent may have
    /// been acted on. Not retried.
    #[error(
        "{operation} was stopped before its answer came: the task doing it ended (its tokio \
         runtime shut down)"
    )]
    Stopped {
        /// What was under way.
        operation: String,
    },
}

/// Retriable Produce error codes that leave the batch possibly appended by
/// the leader (its replicas did not acknowledge it, or not in time).
fn code_may_have_appended(code: ErrorCode) -> bool {
    matches!(
        code,
        ErrorCode::RequestTimedOut | ErrorCode::NotEnoughReplicasAfterAppend
    )
}

fn target(topic: &Option<String>, partition: Option<i32>) -> String {
    match (topic, partition) {
        (Some(t), Some(p)) => format!("for topic {t:?} partition {p} "),
        (Some(t), None) => format!("for topic {t:?} "),
        _ => String::new(),
    }
}

impl ClientError {
    /// Whether retrying the operation may succeed: a retriable Kafka error
    /// code, a lost connection, or a leader that is not known yet.
    /// `idempotent` is false for Produce: after a connection is lost
    /// mid-request the batch may have been written, so only failures before
    /// sending are retried, and so are the error codes that say the batch
    /// was not written (not `REQUEST_TIMED_OUT` or
    /// `NOT_ENOUGH_REPLICAS_AFTER_APPEND`: the leader may have appended it).
    pub fn is_retriable(&self, idempotent: bool) -> bool {
        match self {
            Self::Connection(e) => {
                // A malformed address is before sending too, but not worth
                // a retry. A garbled answer to `ApiVersions` (not Kafka) is
                // from a broker the cluster named: a stream corrupted on
                // the way, as on any frame; a bootstrap address answering
                // so is not retried (`is_retriable_at_bootstrap`).
                let lost = e.is_connection_lost() || matches!(e, ConnectionError::NotKafka { .. });
                lost && (idempotent || e.is_before_send())
            }
            Self::Kafka { api, code, .. } => {
                code.is_retriable()
                    && (idempotent || *api != ApiKey::Produce || !code_may_have_appended(*code))
            }
            Self::NoLeader { .. } => true,
            // Only Metadata requests, which are idempotent, end up here.
            Self::NoBrokerAnswered { earlier, last, .. } => {
                earlier.iter().any(|e| e.is_retriable(true)) || last.is_retriable(true)
            }
            _ => false,
        }
    }

    /// Whether a Produce that failed so may still have been appended: the
    /// request was sent and its answer lost (the connection broke, the
    /// request timed out) or unreadable, or the broker said the replicas
    /// did not acknowledge the batch in time (`REQUEST_TIMED_OUT`,
    /// `NOT_ENOUGH_REPLICAS_AFTER_APPEND`).
    pub fn may_have_appended(&self) -> bool {
        matches!(self, Self::Connection(ConnectionError::Decode { .. }))
            || (self.is_retriable(true) && !self.is_retriable(false))
    }

    /// Whether the broker refused a Produce's batch for good and left its
    /// producer's state as it was: it answered with an error code that is
    /// not retriable (so not one that leaves the batch's fate open,
    /// `REQUEST_TIMED_OUT`, ...) about the batch itself (too large,
    /// invalid records, not authorized), not about its producer id, epoch
    /// or sequence. A broker checks a batch's size and records before its
    /// producer's sequence, and appends nothing of a refused batch.
    pub fn refused_batch_for_good(&self) -> bool {
        let Self::Kafka { code, .. } = self else {
            return false;
        };
        !code.is_retriable()
            && !matches!(
                code,
                ErrorCode::Unknown(_)
                    | ErrorCode::OutOfOrderSequenceNumber
                    | ErrorCode::DuplicateSequenceNumber
                    | ErrorCode::InvalidProducerEpoch
                    | ErrorCode::UnknownProducerId
                    | ErrorCode::ProducerFenced
                    | ErrorCode::ClusterAuthorizationFailed
            )
    }

    /// Whether retrying a bootstrap may succeed: the failure is retriable
    /// ([`ClientError::is_retriable`]) and does not say that the address
    /// leads nowhere usable
    /// ([`crate::connection::ConnectionError::is_wrong_peer`]: a malformed
    /// address, a name that does not resolve, a peer that is not a Kafka
    /// broker). With several bootstrap addresses, one that may pass is
    /// enough to retry.
    pub fn is_retriable_at_bootstrap(&self) -> bool {
        match self {
            Self::Connection(e) => e.is_connection_lost() && !e.is_wrong_peer(),
            Self::NoBrokerAnswered { earlier, last, .. } => {
                earlier.iter().any(Self::is_retriable_at_bootstrap)
                    || last.is_retriable_at_bootstrap()
            }
            other => other.is_retriable(true),
        }
    }

    /// Whether the client's metadata should be refreshed before retrying.
    pub fn invalidates_metadata(&self) -> bool {
        match self {
            Self::Connection(e) => e.is_connection_lost(),
            Self::Kafka { code, .. } => code.invalidates_metadata(),
            Self::NoLeader { .. } => true,
            Self::NoBrokerAnswered { last, .. } => last.invalidates_metadata(),
            _ => false,
        }
    }

    /// The Kafka error code, when the broker answered with one (also inside
    /// [`ClientError::RetriesExhausted`] and [`ClientError::NoBrokerAnswered`]).
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            Self::Kafka { code, .. } => Some(*code),
            Self::RetriesExhausted {
                last: Some(last), ..
            } => last.code(),
            Self::NoBrokerAnswered { last, .. } => last.code(),
            _ => None,
        }
    }
}

/// The partition a request asked about and the broker it went to: what the
/// errors about the broker's answer name.
#[derive(Debug, Clone, Copy)]
pub(super) struct Asked<'a> {
    api: ApiKey,
    broker: &'a str,
    topic: &'a str,
    partition: i32,
}

impl<'a> Asked<'a> {
    /// `api`'s request about `topic`'s `partition` (-1 for a request about
    /// the whole topic), sent to `broker`.
    pub(super) fn new(api: ApiKey, broker: &'a str, topic: &'a str, partition: i32) -> Self {
        Self {
            api,
            broker,
            topic,
            partition,
        }
    }

    /// [`ClientError::MissingInResponse`]: the answer lacks the topic or
    /// the partition.
    pub(super) fn missing(&self) -> ClientError {
        ClientError::MissingInResponse {
            api: self.api,
            broker: self.broker.to_owned(),
            topic: self.topic.to_owned(),
            partition: self.partition,
        }
    }

    /// [`ClientError::Kafka`]: the broker answered about the partition with
    /// `code`, and `message` if it said more.
    pub(super) fn failed(&self, code: ErrorCode, message: Option<String>) -> ClientError {
        ClientError::Kafka {
            api: self.api,
            code,
            topic: Some(self.topic.to_owned()),
            partition: Some(self.partition),
            broker: self.broker.to_owned(),
            message,
        }
    }

    /// The partition's entry among `entries`, a response's partition
    /// entries of the asked topic (`key` reads an entry's partition index
    /// and error code), checked: no entry for the partition is
    /// [`Asked::missing`], an error code other than `NONE` is
    /// [`Asked::failed`] with what `messages` finds in the entry.
    pub(super) fn answer<'r, P>(
        &self,
        entries: impl IntoIterator<Item = &'r P>,
        key: impl Fn(&P) -> (i32, i16),
        messages: impl FnOnce(&P) -> Option<String>,
    ) -> Result<&'r P, ClientError> {
        let entry = entries
            .into_iter()
            .find(|p| key(p).0 == self.partition)
            .ok_or_else(|| self.missing())?;
        let code = ErrorCode::from(key(entry).1);
        if !code.is_ok() {
            return Err(self.failed(code, messages(entry)));
        }
        Ok(entry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Messages show durations as numbers with a unit, not Rust's `Debug`
    /// of a `Duration` (`30.001843211s`).
    #[test]
    fn durations_read_as_numbers() {
        let err = ClientError::RetriesExhausted {
            operation: "Fetch".into(),
            attempts: 3,
            elapsed: Duration::from_nanos(30_001_843_211),
            deadline: Duration::from_secs(30),
            last: None,
        };
        assert_eq!(
            err.to_string(),
            "gave up on Fetch after 3 attempt(s) in 30.002 s (deadline 30.000 s, \
             --timeout / socket.timeout.ms)"
        );
        let err = ConnectionError::ConnectTimeout {
            broker: "b:9092".into(),
            timeout: Duration::from_millis(1500),
        };
        assert_eq!(
            err.to_string(),
            "connecting to broker b:9092 timed out after 1500 ms (--timeout / socket.timeout.ms)"
        );
    }

    /// Which connect failures are retried: at bootstrap, those that may
    /// pass; for an operation (Produce included: none reached the broker),
    /// all but a malformed address and a peer that is not Kafka.
    #[test]
    fn connect_failures_are_retried_by_kind() {
        use crate::connection::BrokerAddress;
        let b = || "b:1".to_owned();
        let refused = ConnectionError::Refused {
            broker: b(),
            addresses: Vec::new(),
        };
        let unresolvable = ConnectionError::Unresolvable {
            broker: b(),
            host: "b".into(),
            reason: "no such host".into(),
        };
        let not_kafka = ConnectionError::NotKafka {
            broker: b(),
            answered: "\"HTTP/1.1 400\"".into(),
        };
        let invalid = ConnectionError::InvalidAddress {
            broker: "b:0".into(),
            source: BrokerAddress::parse("b:0").expect_err("port 0"),
        };
        let silent = ConnectionError::HandshakeTimeout {
            broker: b(),
            timeout: Duration::from_secs(5),
        };
        let retried = |e: &ConnectionError| {
            let e = ClientError::Connection(e.clone());
            (
                e.is_retriable_at_bootstrap(),
                e.is_retriable(true),
                e.is_retriable(false),
            )
        };
        assert_eq!(retried(&refused), (true, true, true));
        assert_eq!(retried(&silent), (true, true, true));
        assert_eq!(retried(&unresolvable), (false, true, true));
        // Not Kafka: a wrong bootstrap address, or a stream corrupted on
        // the way from a broker the cluster named.
        assert_eq!(retried(&not_kafka), (false, true, true));
        assert_eq!(retried(&invalid), (false, false, false));
        // With several bootstrap brokers, one that may come up is enough.
        let both = ClientError::NoBrokerAnswered {
            addresses: vec![b(), b()],
            earlier: vec![ClientError::Connection(unresolvable.clone())],
            last: Box::new(ClientError::Connection(refused)),
        };
        assert!(both.is_retriable_at_bootstrap());
        let neither = ClientError::NoBrokerAnswered {
            addresses: vec![b(), b()],
            earlier: vec![ClientError::Connection(unresolvable)],
            last: Box::new(ClientError::Connection(not_kafka)),
        };
        assert!(!neither.is_retriable_at_bootstrap());
        assert!(neither.to_string().contains("cannot resolve"), "{neither}");
    }

    /// A peer closing a new connection without a word may be a TLS
    /// listener: the message says so.
    #[test]
    fn a_handshake_closed_at_once_hints_at_tls() {
        let closed = ConnectionError::HandshakeLost {
            broker: "b:1".into(),
            source: Box::new(ConnectionError::ClosedByPeer {
                broker: "b:1".into(),
            }),
        };
        assert_eq!(
            closed.to_string(),
            "ApiVersions handshake with broker b:1 failed: broker b:1 closed the connection \
             (a broker that closes a new connection without answering may expect TLS: \
             -X security.protocol=SSL)"
        );
        let cut = ConnectionError::HandshakeLost {
            broker: "b:1".into(),
            source: Box::new(ConnectionError::TruncatedFrame {
                broker: "b:1".into(),
                received: 2,
                expected: None,
            }),
        };
        assert!(!cut.to_string().contains("TLS"), "{cut}");
    }
}
