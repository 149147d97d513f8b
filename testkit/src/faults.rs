//! Scripted faults: what the broker does wrong, to which request.
//!
//! Faults wait in one queue per cluster. Each request, once its header and
//! body are decoded, is matched against the queue in order; the first fault
//! that matches fires (and is removed once it has fired as many times as it
//! was scripted to). A fault matches by API key and, optionally, by broker,
//! topic and partition.

use std::time::Duration;

use kafka_protocol::messages::ApiKey;

/// What a fault does to the request it matches.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FaultAction {
    /// Close the connection without handling the request (a Produce is not
    /// appended) and without answering.
    DropRequest,
    /// Handle the request (a Produce *is* appended), then close the
    /// connection without answering.
    CutBeforeResponse,
    /// Handle the request (a Produce *is* appended) and never answer it,
    /// keeping the connection open and serving the requests after it: the
    /// client's request times out while later answers arrive.
    LoseResponse,
    /// Handle the request, write the first `bytes` bytes of the response
    /// frame (length prefix included; `None`: half of the frame), then
    /// close the connection.
    CutDuringResponse {
        /// How many bytes of the frame to write.
        bytes: Option<usize>,
    },
    /// Answer normally, then close the connection.
    CutAfterResponse,
    /// Answer with this error code at the partition level, for the matched
    /// partitions: Fetch, ListOffsets and Produce partitions, Metadata
    /// partitions (with no leader).
    PartitionError(i16),
    /// Answer with this error code at the topic level: Metadata topics,
    /// CreateTopics results; for Fetch, ListOffsets and Produce, which have
    /// no topic-level code, every partition of the matched topics.
    TopicError(i16),
    /// Answer with this error code at the top level, where the response has
    /// one (ApiVersions, Fetch v7+); elsewhere every partition gets it.
    ResponseError(i16),
    /// Move the leadership of the matched partitions to broker `to` (the
    /// leader epoch goes up by one), then handle the request: the old leader
    /// now answers `NOT_LEADER_OR_FOLLOWER`.
    MoveLeader {
        /// The new leader's node id.
        to: i32,
    },
    /// Handle the request, then wait this long before answering (a tokio
    /// sleep: tests may pause time).
    Delay(Duration),
    /// Handle the request, then send a frame whose length prefix claims
    /// `missing` more bytes than are sent, send the whole response, and
    /// close the connection.
    TruncatedFrame {
        /// Bytes the prefix claims beyond the real response.
        missing: u32,
    },
    /// Handle the request, wait this long, then answer with the response's
    /// `throttle_time_ms` set to it where the field leads the body (Fetch
    /// v1+, Metadata v3+, ListOffsets v2+): a quota-throttled answer as
    /// Kafka sent it before KIP-219 (the delay first).
    Throttle(Duration),
    /// Answer at once with the response's `throttle_time_ms` set to this
    /// where the field leads the body (Fetch v1+, Metadata v3+, ListOffsets
    /// v2+) and in Produce's (its last field, v1+), as a quota-throttled
    /// answer since KIP-219: the broker answers
    /// first and the client must hold back its next request to it for
    /// that long. The connection is not muted meanwhile, so a test sees
    /// whether the client waits.
    ThrottleTime(Duration),
    /// Fetch: the records of the first matched partition that returns any
    /// get one byte flipped inside the first whole batch's CRC-covered
    /// part (its last byte), as a broker reading a corrupt segment would
    /// send them. No effect when no whole batch is returned.
    CorruptRecords,
    /// Fetch: the records of the first matched partition that returns any
    /// are cut to their first `keep` bytes, wherever that falls (inside a
    /// batch's header too): less than the limits allowed, as a broker
    /// may send.
    TruncateRecords {
        /// How many bytes of the records to keep.
        keep: usize,
    },
    /// Handle the request, then overwrite the response frame at byte `at`
    /// (length prefix included) with `bytes`, as far as the frame goes:
    /// absurd array counts and lengths where the test knows the layout.
    PatchFrame {
        /// Where the patch starts in the frame.
        at: usize,
        /// What to write there.
        bytes: Vec<u8>,
    },
    /// Send only a length prefix of `length` (a raw `u32`: `0x8000_0000`
    /// is 2 GiB, which as a signed length is negative; `0xFFFF_FFFF` is -1)
    /// and the response's correlation id, then close the connection.
    OversizedFrame {
        /// The length prefix to send.
        length: u32,
    },
}

/// One scripted fault: which requests it matches, what it does, how often.
///
/// ```
/// use std::time::Duration;
/// use kafka_protocol::messages::ApiKey;
/// use walfetch_testkit::{Fault, FaultAction};
///
/// let fault = Fault::on(ApiKey::Fetch)
///     .broker(1)
///     .topic("wal")
///     .partition(0)
///     .times(2)
///     .then(FaultAction::Delay(Duration::from_secs(5)));
/// assert_eq!(fault.remaining(), 2);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    api_key: Option<ApiKey>,
    broker: Option<i32>,
    topic: Option<String>,
    partition: Option<i32>,
    action: FaultAction,
    remaining: u32,
}

impl Fault {
    /// A fault on requests with `api_key`, firing once; its action is
    /// [`FaultAction::CutBeforeResponse`] until set with [`Fault::then`].
    pub fn on(api_key: ApiKey) -> Self {
        Self {
            api_key: Some(api_key),
            ..Self::any()
        }
    }

    /// A fault on any request, firing once.
    pub fn any() -> Self {
        Self {
            api_key: None,
            broker: None,
            topic: None,
            partition: None,
            action: FaultAction::CutBeforeResponse,
            remaining: 1,
        }
    }

    /// Only on requests received by broker `node_id`.
    pub fn broker(mut self, node_id: i32) -> Self {
        self.broker = Some(node_id);
        self
    }

    /// Only on requests that name `topic` (a Metadata request for all
    /// topics names every topic). Requests without topics never match.
    pub fn topic(mut self, topic: impl Into<String>) -> Self {
        self.topic = Some(topic.into());
        self
    }

    /// Only on requests that name partition `partition` (of the topic, if
    /// one is set).
    pub fn partition(mut self, partition: i32) -> Self {
        self.partition = Some(partition);
        self
    }

    /// Fires `n` times (at least once).
    pub fn times(mut self, n: u32) -> Self {
        self.remaining = n.max(1);
        self
    }

    /// What the fault does.
    pub fn then(mut self, action: FaultAction) -> Self {
        self.action = action;
        self
    }

    /// How many more times the fault will fire.
    pub fn remaining(&self) -> u32 {
        self.remaining
    }

    /// The fault's action.
    pub fn action(&self) -> &FaultAction {
        &self.action
    }

    /// Whether the fault matches a request with `api_key`, received by
    /// `broker`, naming `partitions` (topic, partition).
    fn matches(&self, api_key: ApiKey, broker: i32, partitions: &[(String, i32)]) -> bool {
        if self.api_key.is_some_and(|k| k != api_key) || self.broker.is_some_and(|b| b != broker) {
            return false;
        }
        if self.topic.is_none() && self.partition.is_none() {
            return true;
        }
        partitions.iter().any(|(t, p)| self.covers(t, *p))
    }

    /// Whether the fault's topic and partition filters cover `(topic, partition)`.
    pub(crate) fn covers(&self, topic: &str, partition: i32) -> bool {
        self.topic.as_deref().is_none_or(|t| t == topic)
            && self.partition.is_none_or(|p| p == partition)
    }

    /// Whether the fault's topic filter covers `topic`.
    pub(crate) fn covers_topic(&self, topic: &str) -> bool {
        self.topic.as_deref().is_none_or(|t| t == topic)
    }
}

/// The cluster's queue of scripted faults.
#[derive(Debug, Default)]
pub(crate) struct FaultQueue {
    faults: Vec<Fault>,
}

impl FaultQueue {
    pub(crate) fn push(&mut self, fault: Fault) {
        self.faults.push(fault);
    }

    pub(crate) fn clear(&mut self) {
        self.faults.clear();
    }

    pub(crate) fn pending(&self) -> Vec<Fault> {
        self.faults.clone()
    }

    /// Takes one firing of the first fault that matches, if any.
    pub(crate) fn take(
        &mut self,
        api_key: ApiKey,
        broker: i32,
        partitions: &[(String, i32)],
    ) -> Option<Fault> {
        let index = self
            .faults
            .iter()
            .position(|f| f.matches(api_key, broker, partitions))?;
        let fault = self.faults.get_mut(index)?;
        fault.remaining = fault.remaining.saturating_sub(1);
        let fired = Fault {
            remaining: 1,
            ..fault.clone()
        };
        if fault.remaining == 0 {
            self.faults.remove(index);
        }
        Some(fired)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(list: &[(&str, i32)]) -> Vec<(String, i32)> {
        list.iter().map(|(t, p)| (t.to_string(), *p)).collect()
    }

    #[test]
    fn first_match_wins_and_counts_down() {
        let mut queue = FaultQueue::default();
        queue.push(
            Fault::on(ApiKey::Fetch)
                .broker(2)
                .then(FaultAction::DropRequest),
        );
        queue.push(
            Fault::on(ApiKey::Fetch)
                .times(2)
                .then(FaultAction::PartitionError(6)),
        );
        let p = parts(&[("t", 0)]);
        let fired = queue.take(ApiKey::Fetch, 1, &p).map(|f| f.action);
        assert_eq!(fired, Some(FaultAction::PartitionError(6)));
        let fired = queue.take(ApiKey::Fetch, 2, &p).map(|f| f.action);
        assert_eq!(fired, Some(FaultAction::DropRequest));
        let fired = queue.take(ApiKey::Fetch, 2, &p).map(|f| f.action);
        assert_eq!(fired, Some(FaultAction::PartitionError(6)));
        assert!(queue.take(ApiKey::Fetch, 2, &p).is_none());
    }

    #[test]
    fn topic_and_partition_filters() {
        let mut queue = FaultQueue::default();
        queue.push(Fault::on(ApiKey::Produce).topic("a").partition(1));
        assert!(queue
            .take(ApiKey::Produce, 1, &parts(&[("a", 0), ("b", 1)]))
            .is_none());
        assert!(queue.take(ApiKey::Produce, 1, &[]).is_none());
        assert!(queue.take(ApiKey::Fetch, 1, &parts(&[("a", 1)])).is_none());
        assert!(queue
            .take(ApiKey::Produce, 1, &parts(&[("b", 0), ("a", 1)]))
            .is_some());
        assert!(queue.pending().is_empty());
    }
}
