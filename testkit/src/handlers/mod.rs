//! Request handlers, one file per API, and what they share: the decoded
//! request, the handler context (with the fault that fired, if it injects an
//! error code), and response framing.
//!
//! # References
//! - Kafka protocol guide, "Common Request and Response Structure" (size
//!   prefix, request and response headers; flexible versions use header v2 /
//!   v1, except ApiVersions responses, always header v0 — KIP-511).

mod api_versions;
mod create_topics;
mod fetch;
mod init_producer_id;
mod list_offsets;
mod metadata;
mod produce;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, CreateTopicsRequest, FetchRequest, InitProducerIdRequest,
    ListOffsetsRequest, MetadataRequest, ProduceRequest, ResponseHeader,
};
use kafka_protocol::protocol::{Decodable, Encodable};

use crate::faults::{Fault, FaultAction};
use crate::state::{ClusterState, Shared};

pub(crate) use api_versions::unsupported_version_response;

/// A decoded request of an API the broker serves.
#[derive(Debug)]
pub(crate) enum Request {
    ApiVersions(ApiVersionsRequest),
    Metadata(MetadataRequest),
    ListOffsets(ListOffsetsRequest),
    Fetch(FetchRequest),
    Produce(ProduceRequest),
    CreateTopics(CreateTopicsRequest),
    InitProducerId(InitProducerIdRequest),
}

impl Request {
    /// Decodes the body of a request; `None` for an API not served here.
    pub(crate) fn decode(
        api_key: ApiKey,
        version: i16,
        body: &mut Bytes,
    ) -> Option<Result<Request, String>> {
        fn body_of<T: Decodable>(body: &mut Bytes, version: i16) -> Result<T, String> {
            T::decode(body, version).map_err(|e| e.to_string())
        }
        Some(match api_key {
            ApiKey::ApiVersions => body_of(body, version).map(Request::ApiVersions),
            ApiKey::Metadata => body_of(body, version).map(Request::Metadata),
            ApiKey::ListOffsets => body_of(body, version).map(Request::ListOffsets),
            ApiKey::Fetch => body_of(body, version).map(Request::Fetch),
            ApiKey::Produce => body_of(body, version).map(Request::Produce),
            ApiKey::CreateTopics => body_of(body, version).map(Request::CreateTopics),
            ApiKey::InitProducerId => body_of(body, version).map(Request::InitProducerId),
            _ => return None,
        })
    }

    /// The `(topic, partition)` pairs the request names, for fault matching
    /// (a Metadata request for all topics names every partition).
    pub(crate) fn partitions(&self, state: &ClusterState, version: i16) -> Vec<(String, i32)> {
        let all_of = |topic: &str| -> Vec<(String, i32)> {
            state.topics.get(topic).map_or_else(
                || vec![(topic.to_owned(), -1)],
                |t| {
                    (0..t.partitions.len())
                        .map(|p| (topic.to_owned(), p as i32))
                        .collect()
                },
            )
        };
        match self {
            Request::ApiVersions(_) | Request::InitProducerId(_) => Vec::new(),
            Request::Metadata(r) => match &r.topics {
                None => state.topics.keys().flat_map(|t| all_of(t)).collect(),
                Some(topics) => topics
                    .iter()
                    .filter_map(|t| match &t.name {
                        Some(name) => Some(name.0.to_string()),
                        None => state.topic_name_by_id(t.topic_id).map(str::to_owned),
                    })
                    .flat_map(|t| all_of(&t))
                    .collect(),
            },
            Request::ListOffsets(r) => r
                .topics
                .iter()
                .flat_map(|t| {
                    t.partitions
                        .iter()
                        .map(|p| (t.name.0.to_string(), p.partition_index))
                })
                .collect(),
            Request::Fetch(r) => r
                .topics
                .iter()
                .flat_map(|t| {
                    let name = if version >= 13 {
                        state
                            .topic_name_by_id(t.topic_id)
                            .unwrap_or_default()
                            .to_owned()
                    } else {
                        t.topic.0.to_string()
                    };
                    t.partitions
                        .iter()
                        .map(move |p| (name.clone(), p.partition))
                })
                .collect(),
            Request::Produce(r) => r
                .topic_data
                .iter()
                .flat_map(|t| {
                    t.partition_data
                        .iter()
                        .map(|p| (t.name.0.to_string(), p.index))
                })
                .collect(),
            Request::CreateTopics(r) => r
                .topics
                .iter()
                .map(|t| (t.name.0.to_string(), -1))
                .collect(),
        }
    }
}

/// What a handler needs: the cluster, which broker answers, the request's
/// version, and the fault that fired if it injects an error code.
pub(crate) struct Ctx<'a> {
    pub(crate) shared: &'a Shared,
    pub(crate) node_id: i32,
    pub(crate) version: i16,
    pub(crate) correlation_id: i32,
    pub(crate) fault: Option<&'a Fault>,
}

impl Ctx<'_> {
    /// The throttle time a `ThrottleTime` fault sets, in milliseconds, for
    /// handlers whose response carries it past the body's start (the
    /// others get it patched into the frame).
    pub(crate) fn throttle_time_ms(&self) -> Option<i32> {
        match self.fault?.action() {
            FaultAction::ThrottleTime(time) => {
                Some(i32::try_from(time.as_millis()).unwrap_or(i32::MAX))
            }
            _ => None,
        }
    }

    /// The error code injected at the top level of the response, if any.
    pub(crate) fn response_error(&self) -> Option<i16> {
        match self.fault?.action() {
            FaultAction::ResponseError(code) => Some(*code),
            _ => None,
        }
    }

    /// The error code injected for a topic, if any; `response_error_here`
    /// says whether a top-level code lands on topics (no top-level field).
    pub(crate) fn topic_error(&self, topic: &str, response_error_here: bool) -> Option<i16> {
        let fault = self.fault?;
        match fault.action() {
            FaultAction::TopicError(code) if fault.covers_topic(topic) => Some(*code),
            FaultAction::ResponseError(code)
                if response_error_here && fault.covers_topic(topic) =>
            {
                Some(*code)
            }
            _ => None,
        }
    }

    /// The error code injected for a partition, if any; `topic_error_here`
    /// and `response_error_here` say whether topic-level and top-level codes
    /// land on partitions.
    pub(crate) fn partition_error(
        &self,
        topic: &str,
        partition: i32,
        topic_error_here: bool,
        response_error_here: bool,
    ) -> Option<i16> {
        let fault = self.fault?;
        match fault.action() {
            FaultAction::PartitionError(code) if fault.covers(topic, partition) => Some(*code),
            FaultAction::TopicError(code) if topic_error_here && fault.covers_topic(topic) => {
                Some(*code)
            }
            FaultAction::ResponseError(code)
                if response_error_here && fault.covers(topic, partition) =>
            {
                Some(*code)
            }
            _ => None,
        }
    }

    /// A response frame for this request.
    pub(crate) fn frame<R: Encodable>(
        &self,
        api_key: ApiKey,
        body: &R,
    ) -> Result<BytesMut, String> {
        frame(api_key, self.version, self.correlation_id, body)
    }
}

/// Encodes a whole response frame: size prefix, response header, body.
pub(crate) fn frame<R: Encodable>(
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &R,
) -> Result<BytesMut, String> {
    let header_version = match api_key {
        ApiKey::ApiVersions => 0,
        _ => api_key.response_header_version(version),
    };
    let mut header = ResponseHeader::default();
    header.correlation_id = correlation_id;
    let mut buf = BytesMut::with_capacity(64);
    buf.put_i32(0);
    header
        .encode(&mut buf, header_version)
        .map_err(|e| format!("encoding the response header v{header_version}: {e}"))?;
    body.encode(&mut buf, version)
        .map_err(|e| format!("encoding {api_key:?} v{version} response: {e}"))?;
    let size =
        i32::try_from(buf.len() - 4).map_err(|_| format!("{api_key:?} response too large"))?;
    buf[..4].copy_from_slice(&size.to_be_bytes());
    Ok(buf)
}

/// Handles a decoded request: the response frame, or `None` when the request
/// gets no response (Produce with `acks = 0`).
pub(crate) async fn handle(ctx: &Ctx<'_>, request: Request) -> Result<Option<BytesMut>, String> {
    match request {
        Request::ApiVersions(r) => api_versions::handle(ctx, &r).map(Some),
        Request::Metadata(r) => metadata::handle(ctx, &r).map(Some),
        Request::ListOffsets(r) => list_offsets::handle(ctx, &r).map(Some),
        Request::Fetch(r) => fetch::handle(ctx, &r).await.map(Some),
        Request::Produce(r) => produce::handle(ctx, r),
        Request::CreateTopics(r) => create_topics::handle(ctx, &r).map(Some),
        Request::InitProducerId(r) => init_producer_id::handle(ctx, &r).map(Some),
    }
}

/// The leader-epoch check of Fetch and ListOffsets (KIP-320): a client's
/// epoch below the leader's is fenced, one above it is unknown; -1 skips the
/// check.
pub(crate) fn check_leader_epoch(client_epoch: i32, leader_epoch: i32) -> Option<i16> {
    use kafka_protocol::ResponseError;
    if client_epoch < 0 || client_epoch == leader_epoch {
        None
    } else if client_epoch < leader_epoch {
        Some(ResponseError::FencedLeaderEpoch.code())
    } else {
        Some(ResponseError::UnknownLeaderEpoch.code())
    }
}
