//! Bounds check of response bodies before `kafka-protocol` decodes them.
//!
//! `kafka-protocol` 0.18 allocates `Vec::with_capacity(count)` for every
//! array it decodes, with `count` read from the wire. Five bytes claiming an
//! array of two billion 200-byte structs would make the allocator abort the
//! process, which no `Result` can catch. So before a response body is handed
//! to `Decodable::decode`, [`check_response`] walks it against the message's
//! schema for the negotiated version and refuses it when an array claims
//! more elements than there are bytes left (every element takes at least one
//! byte, `int32` elements four), or when the body is truncated. The walk
//! reads only lengths and counts; a Fetch response's record batches are
//! skipped by their length, so the check costs a few hundred comparisons.
//!
//! The schemas mirror the Kafka message definitions that `kafka-protocol`
//! 0.18 generates its decoders from; tests encode populated messages of
//! every version with `kafka-protocol` and check that the walk consumes
//! exactly their bytes. Responses of APIs without a schema here are refused
//! rather than decoded unchecked.
//!
//! # References
//! - Kafka protocol guide, "Protocol Primitive Types" and the message
//!   definitions (`clients/src/main/resources/common/message/*.json`);
//!   KIP-482 (compact types and tagged fields of flexible versions).

use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::{Decodable, Request};

/// A field's wire type.
#[derive(Debug, Clone, Copy)]
enum Ty {
    I8,
    I16,
    I32,
    I64,
    Bool,
    Uuid,
    /// (Nullable) string: `int16` length, compact: `uvarint` length + 1.
    Str,
    /// (Nullable) bytes: `int32` length, compact: `uvarint` length + 1.
    Bytes,
    /// (Nullable) array of `int32`.
    I32s,
    /// (Nullable) array of structs.
    Structs(&'static [F]),
    /// One embedded struct (tagged fields only, here).
    Struct(&'static [F]),
}

/// A field: its type, the versions it exists in, and its tag if tagged.
#[derive(Debug, Clone, Copy)]
struct F {
    ty: Ty,
    from: i16,
    to: i16,
    tag: Option<u32>,
}

const fn all(ty: Ty) -> F {
    F {
        ty,
        from: 0,
        to: i16::MAX,
        tag: None,
    }
}

const fn since(from: i16, ty: Ty) -> F {
    F {
        ty,
        from,
        to: i16::MAX,
        tag: None,
    }
}

const fn between(from: i16, to: i16, ty: Ty) -> F {
    F {
        ty,
        from,
        to,
        tag: None,
    }
}

const fn tagged(tag: u32, from: i16, ty: Ty) -> F {
    F {
        ty,
        from,
        to: i16::MAX,
        tag: Some(tag),
    }
}

use Ty::{Bool, Bytes, I32s, Str, Struct, Structs, Uuid, I16, I32, I64, I8};

// ApiVersions (flexible from v3).
const API_VERSION: &[F] = &[all(I16), all(I16), all(I16)];
const SUPPORTED_FEATURE: &[F] = &[since(3, Str), since(3, I16), since(3, I16)];
const FINALIZED_FEATURE: &[F] = &[since(3, Str), since(3, I16), since(3, I16)];
const API_VERSIONS: &[F] = &[
    all(I16),
    all(Structs(API_VERSION)),
    since(1, I32),
    tagged(0, 3, Structs(SUPPORTED_FEATURE)),
    tagged(1, 3, I64),
    tagged(2, 3, Structs(FINALIZED_FEATURE)),
    tagged(3, 3, Bool),
];

// Metadata (flexible from v9).
const METADATA_BROKER: &[F] = &[all(I32), all(Str), all(I32), since(1, Str)];
const METADATA_PARTITION: &[F] = &[
    all(I16),
    all(I32),
    all(I32),
    since(7, I32),
    all(I32s),
    all(I32s),
    since(5, I32s),
];
const METADATA_TOPIC: &[F] = &[
    all(I16),
    all(Str),
    since(10, Uuid),
    since(1, Bool),
    all(Structs(METADATA_PARTITION)),
    since(8, I32),
];
const METADATA: &[F] = &[
    since(3, I32),
    all(Structs(METADATA_BROKER)),
    since(2, Str),
    since(1, I32),
    all(Structs(METADATA_TOPIC)),
    between(8, 10, I32),
    since(13, I16),
];

// ListOffsets (flexible from v6).
const LIST_OFFSETS_PARTITION: &[F] = &[all(I32), all(I16), all(I64), all(I64), since(4, I32)];
const LIST_OFFSETS_TOPIC: &[F] = &[all(Str), all(Structs(LIST_OFFSETS_PARTITION))];
const LIST_OFFSETS: &[F] = &[since(2, I32), all(Structs(LIST_OFFSETS_TOPIC))];

// Fetch (flexible from v12).
const FETCH_ABORTED: &[F] = &[all(I64), all(I64)];
const FETCH_EPOCH_END_OFFSET: &[F] = &[since(12, I32), since(12, I64)];
const FETCH_LEADER: &[F] = &[since(12, I32), since(12, I32)];
const FETCH_SNAPSHOT_ID: &[F] = &[all(I64), all(I32)];
const FETCH_NODE_ENDPOINT: &[F] = &[
    since(16, I32),
    since(16, Str),
    since(16, I32),
    since(16, Str),
];
const FETCH_PARTITION: &[F] = &[
    all(I32),
    all(I16),
    all(I64),
    all(I64),
    since(5, I64),
    all(Structs(FETCH_ABORTED)),
    since(11, I32),
    all(Bytes),
    tagged(0, 12, Struct(FETCH_EPOCH_END_OFFSET)),
    tagged(1, 12, Struct(FETCH_LEADER)),
    tagged(2, 12, Struct(FETCH_SNAPSHOT_ID)),
];
const FETCH_TOPIC: &[F] = &[
    between(0, 12, Str),
    since(13, Uuid),
    all(Structs(FETCH_PARTITION)),
];
const FETCH: &[F] = &[
    all(I32),
    since(7, I16),
    since(7, I32),
    all(Structs(FETCH_TOPIC)),
    tagged(0, 16, Structs(FETCH_NODE_ENDPOINT)),
];

// Produce (flexible from v9).
const PRODUCE_RECORD_ERROR: &[F] = &[since(8, I32), since(8, Str)];
const PRODUCE_LEADER: &[F] = &[since(10, I32), since(10, I32)];
const PRODUCE_NODE_ENDPOINT: &[F] = &[
    since(10, I32),
    since(10, Str),
    since(10, I32),
    since(10, Str),
];
const PRODUCE_PARTITION: &[F] = &[
    all(I32),
    all(I16),
    all(I64),
    all(I64),
    since(5, I64),
    since(8, Structs(PRODUCE_RECORD_ERROR)),
    since(8, Str),
    tagged(0, 10, Struct(PRODUCE_LEADER)),
];
const PRODUCE_TOPIC: &[F] = &[
    between(0, 12, Str),
    since(13, Uuid),
    all(Structs(PRODUCE_PARTITION)),
];
const PRODUCE: &[F] = &[
    all(Structs(PRODUCE_TOPIC)),
    all(I32),
    tagged(0, 10, Structs(PRODUCE_NODE_ENDPOINT)),
];

// CreateTopics (flexible from v5).
const CREATE_TOPICS_CONFIG: &[F] = &[
    since(5, Str),
    since(5, Str),
    since(5, Bool),
    since(5, I8),
    since(5, Bool),
];
const CREATE_TOPICS_RESULT: &[F] = &[
    all(Str),
    since(7, Uuid),
    all(I16),
    all(Str),
    since(5, I32),
    since(5, I16),
    since(5, Structs(CREATE_TOPICS_CONFIG)),
    tagged(0, 5, I16),
];
const CREATE_TOPICS: &[F] = &[all(I32), all(Structs(CREATE_TOPICS_RESULT))];

/// The schema of `api`'s response body and its first flexible version.
fn schema(api: ApiKey) -> Option<(&'static [F], i16)> {
    match api {
        ApiKey::ApiVersions => Some((API_VERSIONS, 3)),
        ApiKey::Metadata => Some((METADATA, 9)),
        ApiKey::ListOffsets => Some((LIST_OFFSETS, 6)),
        ApiKey::Fetch => Some((FETCH, 12)),
        ApiKey::Produce => Some((PRODUCE, 9)),
        ApiKey::CreateTopics => Some((CREATE_TOPICS, 5)),
        _ => None,
    }
}

/// Whether [`check_response`] knows `api`'s responses.
pub fn is_checked(api: ApiKey) -> bool {
    schema(api).is_some()
}

/// Why a response body failed the bounds check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GuardError {
    /// The API has no schema here.
    UnknownApi,
    /// The body is malformed: what and at which byte.
    Malformed(String),
}

/// Checks that `body`, a response body of `api` in `version`, has no array
/// claiming more elements than the bytes left and is not truncated. Bytes
/// after the body are allowed (the decoder ignores them too).
pub fn check_response(api: ApiKey, version: i16, body: &[u8]) -> Result<(), GuardError> {
    let (fields, flexible_from) = schema(api).ok_or(GuardError::UnknownApi)?;
    let mut walker = Walker {
        buf: body,
        pos: 0,
        version,
        flexible: version >= flexible_from,
    };
    walker.walk_struct(fields, 0).map_err(GuardError::Malformed)
}

impl std::fmt::Display for GuardError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::UnknownApi => f.write_str("no bounds check for this API's responses"),
            Self::Malformed(what) => f.write_str(what),
        }
    }
}

/// Decodes a response body of request type `R` (e.g. `FetchRequest` for a
/// Fetch response) in `version`, after [`check_response`]. `body` is the
/// frame after the response header; the decoded message's `Bytes` fields
/// (a Fetch response's `records`) are views of it.
///
/// This is the whole path from network bytes to a response message; the
/// fuzz targets call it with arbitrary bytes.
pub fn decode_response<R: Request>(
    version: i16,
    body: bytes::Bytes,
) -> Result<R::Response, GuardError> {
    let api = ApiKey::try_from(R::KEY).map_err(|()| GuardError::UnknownApi)?;
    check_response(api, version, &body)?;
    let mut buf = body;
    R::Response::decode(&mut buf, version).map_err(|e| GuardError::Malformed(e.to_string()))
}

/// Nesting depth of the schemas is at most 4; anything deeper is a bug.
const MAX_DEPTH: usize = 8;

struct Walker<'a> {
    buf: &'a [u8],
    pos: usize,
    version: i16,
    flexible: bool,
}

impl Walker<'_> {
    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn skip(&mut self, n: usize, what: &str) -> Result<(), String> {
        if n > self.remaining() {
            return Err(format!(
                "{what} needs {n} bytes at byte {} but only {} remain",
                self.pos,
                self.remaining()
            ));
        }
        self.pos += n;
        Ok(())
    }

    fn fixed<const N: usize>(&mut self, what: &str) -> Result<[u8; N], String> {
        let start = self.pos;
        self.skip(N, what)?;
        let mut out = [0u8; N];
        out.copy_from_slice(&self.buf[start..start + N]);
        Ok(out)
    }

    fn uvarint(&mut self, what: &str) -> Result<u32, String> {
        let start = self.pos;
        let mut value: u32 = 0;
        for i in 0..5 {
            let [byte] = self.fixed::<1>(what)?;
            value |= u32::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(format!(
            "{what}: varint at byte {start} is longer than 5 bytes"
        ))
    }

    /// A length or count: `None` for null (-1, or compact 0).
    fn length(&mut self, wide: bool, what: &str) -> Result<Option<usize>, String> {
        let start = self.pos;
        let length: i64 = if self.flexible {
            i64::from(self.uvarint(what)?) - 1
        } else if wide {
            i64::from(i32::from_be_bytes(self.fixed::<4>(what)?))
        } else {
            i64::from(i16::from_be_bytes(self.fixed::<2>(what)?))
        };
        match length {
            -1 => Ok(None),
            n if n < 0 => Err(format!("{what} at byte {start} has negative length {n}")),
            n => {
                Ok(Some(usize::try_from(n).map_err(|_| {
                    format!("{what} length {n} at byte {start}")
                })?))
            }
        }
    }

    fn count(&mut self, element_min: usize, what: &str) -> Result<usize, String> {
        let start = self.pos;
        let count = self.length(true, what)?.unwrap_or(0);
        let room = self.remaining() / element_min;
        if count > room {
            return Err(format!(
                "{what} at byte {start} claims {count} elements but only {} bytes remain",
                self.remaining()
            ));
        }
        Ok(count)
    }

    fn walk(&mut self, ty: Ty, depth: usize) -> Result<(), String> {
        match ty {
            I8 | Bool => self.skip(1, "int8"),
            I16 => self.skip(2, "int16"),
            I32 => self.skip(4, "int32"),
            I64 => self.skip(8, "int64"),
            Uuid => self.skip(16, "uuid"),
            Str => {
                let len = self.length(false, "string")?.unwrap_or(0);
                self.skip(len, "string")
            }
            Bytes => {
                let len = self.length(true, "bytes")?.unwrap_or(0);
                self.skip(len, "bytes")
            }
            I32s => {
                let count = self.count(4, "int32 array")?;
                self.skip(count * 4, "int32 array")
            }
            Structs(fields) => {
                let count = self.count(1, "array")?;
                for _ in 0..count {
                    self.walk_struct(fields, depth + 1)?;
                }
                Ok(())
            }
            Struct(fields) => self.walk_struct(fields, depth + 1),
        }
    }

    fn present_in(version: i16, f: &F) -> bool {
        f.from <= version && version <= f.to
    }

    fn walk_struct(&mut self, fields: &[F], depth: usize) -> Result<(), String> {
        if depth > MAX_DEPTH {
            return Err("schema nesting too deep".to_owned());
        }
        let version = self.version;
        for f in fields
            .iter()
            .filter(|f| f.tag.is_none() && Self::present_in(version, f))
        {
            self.walk(f.ty, depth)?;
        }
        if self.flexible {
            let count = self.uvarint("tagged field count")?;
            for _ in 0..count {
                let tag = self.uvarint("tag")?;
                let size = self.uvarint("tagged field size")? as usize;
                let start = self.pos;
                if size > self.remaining() {
                    return Err(format!(
                        "tagged field {tag} at byte {start} claims {size} bytes but only {} remain",
                        self.remaining()
                    ));
                }
                let known = fields
                    .iter()
                    .find(|f| f.tag == Some(tag) && Self::present_in(version, f));
                match known {
                    Some(f) => {
                        self.walk(f.ty, depth)?;
                        if self.pos - start != size {
                            return Err(format!(
                                "tagged field {tag} at byte {start} claims {size} bytes but its content takes {}",
                                self.pos - start
                            ));
                        }
                    }
                    None => self.pos += size,
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use bytes::{Bytes as Buf, BytesMut};
    use kafka_protocol::messages::api_versions_response::{
        ApiVersion, FinalizedFeatureKey, SupportedFeatureKey,
    };
    use kafka_protocol::messages::create_topics_response::{
        CreatableTopicConfigs, CreatableTopicResult,
    };
    use kafka_protocol::messages::fetch_response::{
        AbortedTransaction, EpochEndOffset, FetchableTopicResponse, LeaderIdAndEpoch, NodeEndpoint,
        PartitionData, SnapshotId,
    };
    use kafka_protocol::messages::list_offsets_response::{
        ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
    };
    use kafka_protocol::messages::metadata_response::{
        MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
    };
    use kafka_protocol::messages::produce_response::{
        BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
    };
    use kafka_protocol::messages::{
        produce_response, ApiVersionsResponse, BrokerId, CreateTopicsResponse, FetchResponse,
        ListOffsetsResponse, MetadataResponse, ProduceResponse, ProducerId, TopicName,
    };
    use kafka_protocol::protocol::{Encodable, StrBytes};

    use super::*;

    fn encode<T: Encodable>(message: &T, version: i16) -> Vec<u8> {
        let mut buf = BytesMut::new();
        message.encode(&mut buf, version).expect("encodes");
        buf.to_vec()
    }

    fn s(v: &'static str) -> StrBytes {
        StrBytes::from_static_str(v)
    }

    fn name(v: &'static str) -> TopicName {
        TopicName(s(v))
    }

    /// The walk consumes exactly the encoded bytes, and every strict prefix
    /// is refused (no truncation goes unnoticed).
    fn assert_exact(api: ApiKey, version: i16, bytes: &[u8]) {
        let (fields, flexible_from) = schema(api).expect("schema");
        let mut walker = Walker {
            buf: bytes,
            pos: 0,
            version,
            flexible: version >= flexible_from,
        };
        walker
            .walk_struct(fields, 0)
            .unwrap_or_else(|e| panic!("{api:?} v{version}: {e}"));
        assert_eq!(
            walker.pos,
            bytes.len(),
            "{api:?} v{version} walked a different length"
        );
        for cut in 0..bytes.len() {
            assert!(
                check_response(api, version, &bytes[..cut]).is_err(),
                "{api:?} v{version} prefix {cut}/{} passed",
                bytes.len()
            );
        }
    }

    #[test]
    fn api_versions_schema_matches_every_version() {
        for v in 0..=4 {
            let mut m = ApiVersionsResponse::default()
                .with_api_keys(vec![
                    ApiVersion::default().with_api_key(1).with_max_version(11),
                    ApiVersion::default().with_api_key(3).with_max_version(12),
                ])
                .with_throttle_time_ms(if v >= 1 { 5 } else { 0 });
            if v >= 3 {
                m = m
                    .with_supported_features(vec![SupportedFeatureKey::default()
                        .with_name(s("f"))
                        .with_max_version(2)])
                    .with_finalized_features_epoch(7)
                    .with_finalized_features(vec![FinalizedFeatureKey::default().with_name(s("g"))])
                    .with_zk_migration_ready(true);
            }
            assert_exact(ApiKey::ApiVersions, v, &encode(&m, v));
        }
    }

    #[test]
    fn metadata_schema_matches_every_version() {
        for v in 0..=13 {
            let partition = MetadataResponsePartition::default()
                .with_partition_index(1)
                .with_leader_id(BrokerId(1))
                .with_replica_nodes(vec![BrokerId(1), BrokerId(2)])
                .with_isr_nodes(vec![BrokerId(1)])
                .with_offline_replicas(if v >= 5 { vec![BrokerId(2)] } else { vec![] });
            let mut topic = MetadataResponseTopic::default()
                .with_name(Some(name("t")))
                .with_partitions(vec![partition.clone(), partition]);
            if v >= 8 {
                topic = topic.with_topic_authorized_operations(5);
            }
            let mut m = MetadataResponse::default()
                .with_brokers(vec![MetadataResponseBroker::default()
                    .with_node_id(BrokerId(1))
                    .with_host(s("h"))
                    .with_port(9)])
                .with_topics(vec![topic]);
            if (8..=10).contains(&v) {
                m = m.with_cluster_authorized_operations(3);
            }
            assert_exact(ApiKey::Metadata, v, &encode(&m, v));
        }
    }

    #[test]
    fn list_offsets_schema_matches_every_version() {
        for v in 1..=10 {
            let m = ListOffsetsResponse::default().with_topics(vec![
                ListOffsetsTopicResponse::default()
                    .with_name(name("t"))
                    .with_partitions(vec![ListOffsetsPartitionResponse::default()
                        .with_offset(5)
                        .with_timestamp(6)]),
            ]);
            assert_exact(ApiKey::ListOffsets, v, &encode(&m, v));
        }
    }

    #[test]
    fn fetch_schema_matches_every_version() {
        for v in 4..=18 {
            let mut partition = PartitionData::default()
                .with_partition_index(2)
                .with_high_watermark(10)
                .with_aborted_transactions(Some(vec![AbortedTransaction::default()
                    .with_producer_id(ProducerId(1))
                    .with_first_offset(2)]))
                .with_records(Some(Buf::from_static(b"0123456789")));
            if v >= 12 {
                partition = partition
                    .with_diverging_epoch(
                        EpochEndOffset::default().with_epoch(3).with_end_offset(4),
                    )
                    .with_current_leader(LeaderIdAndEpoch::default().with_leader_id(BrokerId(5)))
                    .with_snapshot_id(SnapshotId::default().with_end_offset(6).with_epoch(7));
            }
            let null_records = PartitionData::default()
                .with_records(None)
                .with_aborted_transactions(None);
            let mut topic =
                FetchableTopicResponse::default().with_partitions(vec![partition, null_records]);
            if v <= 12 {
                topic = topic.with_topic(name("t"));
            }
            let mut m = FetchResponse::default().with_responses(vec![topic.clone(), topic]);
            if v >= 16 {
                m = m.with_node_endpoints(vec![NodeEndpoint::default()
                    .with_node_id(BrokerId(5))
                    .with_host(s("h"))
                    .with_port(9)]);
            }
            assert_exact(ApiKey::Fetch, v, &encode(&m, v));
        }
    }

    #[test]
    fn produce_schema_matches_every_version() {
        for v in 3..=13 {
            let mut partition = PartitionProduceResponse::default()
                .with_index(1)
                .with_base_offset(42);
            if v >= 8 {
                partition = partition
                    .with_record_errors(vec![BatchIndexAndErrorMessage::default()
                        .with_batch_index(1)
                        .with_batch_index_error_message(Some(s("bad")))])
                    .with_error_message(Some(s("msg")));
            }
            if v >= 10 {
                partition = partition.with_current_leader(
                    produce_response::LeaderIdAndEpoch::default()
                        .with_leader_id(BrokerId(1))
                        .with_leader_epoch(2),
                );
            }
            let mut topic =
                TopicProduceResponse::default().with_partition_responses(vec![partition]);
            if v <= 12 {
                topic = topic.with_name(name("t"));
            }
            let mut m = ProduceResponse::default().with_responses(vec![topic]);
            if v >= 10 {
                m = m.with_node_endpoints(vec![produce_response::NodeEndpoint::default()
                    .with_node_id(BrokerId(1))
                    .with_host(s("h"))]);
            }
            assert_exact(ApiKey::Produce, v, &encode(&m, v));
        }
    }

    #[test]
    fn create_topics_schema_matches_every_version() {
        for v in 2..=7 {
            let mut result = CreatableTopicResult::default()
                .with_name(name("t"))
                .with_error_message(Some(s("m")));
            if v >= 5 {
                result = result
                    .with_num_partitions(3)
                    .with_configs(Some(vec![CreatableTopicConfigs::default()
                        .with_name(s("k"))
                        .with_value(Some(s("v")))]))
                    .with_topic_config_error_code(40);
            }
            let m = CreateTopicsResponse::default().with_topics(vec![result]);
            assert_exact(ApiKey::CreateTopics, v, &encode(&m, v));
        }
    }

    #[test]
    fn huge_array_counts_are_refused() {
        // Fetch v4: throttle, then a responses array claiming i32::MAX topics.
        let mut body = 0i32.to_be_bytes().to_vec();
        body.extend(i32::MAX.to_be_bytes());
        let err = check_response(ApiKey::Fetch, 4, &body).expect_err("refused");
        assert!(
            matches!(&err, GuardError::Malformed(m) if m.contains("claims 2147483647 elements")),
            "{err:?}"
        );
        // Metadata v12 (compact): a broker array claiming u32::MAX - 1 entries.
        let body = [0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f];
        assert!(check_response(ApiKey::Metadata, 12, &body).is_err());
        // An int32 array must fit four bytes per element.
        let mut body =
            MetadataResponse::default().with_topics(vec![MetadataResponseTopic::default()
                .with_partitions(vec![
                    MetadataResponsePartition::default().with_replica_nodes(vec![BrokerId(1)])
                ])]);
        body.throttle_time_ms = 0;
        let mut bytes = encode(&body, 1);
        // Locate the replica count (1) followed by broker id 1 and inflate it to 2.
        let at = bytes
            .windows(8)
            .position(|w| w == [0, 0, 0, 1, 0, 0, 0, 1])
            .expect("replica array");
        bytes[at + 3] = 3;
        let err = check_response(ApiKey::Metadata, 1, &bytes).expect_err("refused");
        assert!(
            matches!(&err, GuardError::Malformed(m) if m.contains("claims 3 elements")),
            "{err:?}"
        );
    }

    /// Mutated valid responses and random bytes never panic the decoder
    /// and never get past the check with an absurd array count. (The fuzz
    /// targets do this at scale; this keeps a fast version in `cargo test`.)
    #[test]
    fn mutated_responses_never_panic() {
        use kafka_protocol::messages::{FetchRequest, MetadataRequest};
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for version in 4..=17 {
            let m =
                FetchResponse::default().with_responses(vec![FetchableTopicResponse::default()
                    .with_topic(name("t"))
                    .with_partitions(vec![PartitionData::default()
                        .with_aborted_transactions(Some(vec![AbortedTransaction::default()]))
                        .with_records(Some(Buf::from_static(b"records")))])]);
            let mut m = m;
            if version >= 13 {
                m.responses[0].topic = TopicName::default();
            }
            let valid = encode(&m, version);
            for _ in 0..2_000 {
                let mut bytes = valid.clone();
                for _ in 0..(next() % 4 + 1) {
                    let at = (next() as usize) % bytes.len();
                    bytes[at] = next() as u8;
                }
                bytes.truncate(bytes.len() - (next() as usize % 3).min(bytes.len()));
                let _ = decode_response::<FetchRequest>(version, Buf::from(bytes));
            }
        }
        for version in 1..=13 {
            let m = MetadataResponse::default()
                .with_brokers(vec![MetadataResponseBroker::default().with_host(s("h"))])
                .with_topics(vec![MetadataResponseTopic::default()
                    .with_name(Some(name("t")))
                    .with_partitions(vec![
                        MetadataResponsePartition::default().with_replica_nodes(vec![BrokerId(1)])
                    ])]);
            let valid = encode(&m, version);
            for _ in 0..2_000 {
                let mut bytes = valid.clone();
                let at = (next() as usize) % bytes.len();
                bytes[at] = next() as u8;
                let _ = decode_response::<MetadataRequest>(version, Buf::from(bytes));
            }
        }
        for len in 0..64 {
            let bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            for version in 4..=17 {
                let _ = decode_response::<FetchRequest>(version, Buf::from(bytes.clone()));
            }
        }
    }

    #[test]
    fn unknown_apis_are_refused() {
        assert_eq!(
            check_response(ApiKey::JoinGroup, 0, &[]),
            Err(GuardError::UnknownApi)
        );
        assert!(!is_checked(ApiKey::JoinGroup));
        assert!(is_checked(ApiKey::Fetch));
    }
}
