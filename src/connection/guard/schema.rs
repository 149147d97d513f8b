//! The response schemas the bounds check walks: for every API walfetch
//! decodes, the fields of its response body, their wire types and the
//! versions they exist in.
//!
//! The tables mirror the Kafka message definitions that `kafka-protocol`
//! 0.18 generates its decoders from, field for field and in wire order; the
//! names are the `kafka-protocol` struct fields', so an error can name the
//! field it stopped at. The tests encode populated messages of every
//! version with `kafka-protocol` and check that the walk consumes exactly
//! their bytes, and that every strict prefix is refused.
//!
//! # References
//! - Kafka message definitions
//!   (`clients/src/main/resources/common/message/*Response.json`).
//! - KIP-482 (tagged fields of flexible versions).

use kafka_protocol::messages::ApiKey;

/// A field's wire type.
#[derive(Debug, Clone, Copy)]
pub(super) enum Ty {
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
    Structs(&'static [Field]),
    /// One embedded struct (tagged fields only, here).
    Struct(&'static [Field]),
}

/// A field: its name, type, the versions it exists in, and its tag if it
/// is a tagged field.
#[derive(Debug, Clone, Copy)]
pub(super) struct Field {
    pub(super) name: &'static str,
    pub(super) ty: Ty,
    from: i16,
    to: i16,
    pub(super) tag: Option<u32>,
}

impl Field {
    /// Whether the field exists in `version`.
    pub(super) fn is_in(&self, version: i16) -> bool {
        self.from <= version && version <= self.to
    }

    /// Exists from `version` on.
    const fn since(self, version: i16) -> Self {
        Self {
            from: version,
            ..self
        }
    }

    /// Exists up to `version` only.
    const fn until(self, version: i16) -> Self {
        Self {
            to: version,
            ..self
        }
    }

    /// Is the tagged field `tag` (of flexible versions).
    const fn tagged(self, tag: u32) -> Self {
        Self {
            tag: Some(tag),
            ..self
        }
    }
}

/// A field of every version; narrow it with [`Field::since`],
/// [`Field::until`] and [`Field::tagged`].
const fn f(name: &'static str, ty: Ty) -> Field {
    Field {
        name,
        ty,
        from: 0,
        to: i16::MAX,
        tag: None,
    }
}

use Ty::{Bool, Bytes, I32s, Str, Struct, Structs, Uuid, I16, I32, I64, I8};

// ApiVersions (flexible from v3).
const API_VERSION: &[Field] = &[
    f("api_key", I16),
    f("min_version", I16),
    f("max_version", I16),
];
const SUPPORTED_FEATURE: &[Field] = &[
    f("name", Str).since(3),
    f("min_version", I16).since(3),
    f("max_version", I16).since(3),
];
const FINALIZED_FEATURE: &[Field] = &[
    f("name", Str).since(3),
    f("max_version_level", I16).since(3),
    f("min_version_level", I16).since(3),
];
const API_VERSIONS: &[Field] = &[
    f("error_code", I16),
    f("api_keys", Structs(API_VERSION)),
    f("throttle_time_ms", I32).since(1),
    f("supported_features", Structs(SUPPORTED_FEATURE))
        .since(3)
        .tagged(0),
    f("finalized_features_epoch", I64).since(3).tagged(1),
    f("finalized_features", Structs(FINALIZED_FEATURE))
        .since(3)
        .tagged(2),
    f("zk_migration_ready", Bool).since(3).tagged(3),
];

// Metadata (flexible from v9).
const METADATA_BROKER: &[Field] = &[
    f("node_id", I32),
    f("host", Str),
    f("port", I32),
    f("rack", Str).since(1),
];
const METADATA_PARTITION: &[Field] = &[
    f("error_code", I16),
    f("partition_index", I32),
    f("leader_id", I32),
    f("leader_epoch", I32).since(7),
    f("replica_nodes", I32s),
    f("isr_nodes", I32s),
    f("offline_replicas", I32s).since(5),
];
const METADATA_TOPIC: &[Field] = &[
    f("error_code", I16),
    f("name", Str),
    f("topic_id", Uuid).since(10),
    f("is_internal", Bool).since(1),
    f("partitions", Structs(METADATA_PARTITION)),
    f("topic_authorized_operations", I32).since(8),
];
const METADATA: &[Field] = &[
    f("throttle_time_ms", I32).since(3),
    f("brokers", Structs(METADATA_BROKER)),
    f("cluster_id", Str).since(2),
    f("controller_id", I32).since(1),
    f("topics", Structs(METADATA_TOPIC)),
    f("cluster_authorized_operations", I32).since(8).until(10),
    f("error_code", I16).since(13),
];

// ListOffsets (flexible from v6).
const LIST_OFFSETS_PARTITION: &[Field] = &[
    f("partition_index", I32),
    f("error_code", I16),
    f("timestamp", I64),
    f("offset", I64),
    f("leader_epoch", I32).since(4),
];
const LIST_OFFSETS_TOPIC: &[Field] = &[
    f("name", Str),
    f("partitions", Structs(LIST_OFFSETS_PARTITION)),
];
const LIST_OFFSETS: &[Field] = &[
    f("throttle_time_ms", I32).since(2),
    f("topics", Structs(LIST_OFFSETS_TOPIC)),
];

// The leader hint and broker list of Fetch (tagged, v12+ and v16+) and
// Produce (tagged, v10+): the same structs in both. Their fields exist in
// every version their parent field does, and they are walked only there.
const LEADER_ID_AND_EPOCH: &[Field] = &[f("leader_id", I32), f("leader_epoch", I32)];
const NODE_ENDPOINT: &[Field] = &[
    f("node_id", I32),
    f("host", Str),
    f("port", I32),
    f("rack", Str),
];

// Fetch (flexible from v12).
const FETCH_ABORTED: &[Field] = &[f("producer_id", I64), f("first_offset", I64)];
const FETCH_EPOCH_END_OFFSET: &[Field] =
    &[f("epoch", I32).since(12), f("end_offset", I64).since(12)];
const FETCH_SNAPSHOT_ID: &[Field] = &[f("end_offset", I64), f("epoch", I32)];
const FETCH_PARTITION: &[Field] = &[
    f("partition_index", I32),
    f("error_code", I16),
    f("high_watermark", I64),
    f("last_stable_offset", I64),
    f("log_start_offset", I64).since(5),
    f("aborted_transactions", Structs(FETCH_ABORTED)),
    f("preferred_read_replica", I32).since(11),
    f("records", Bytes),
    f("diverging_epoch", Struct(FETCH_EPOCH_END_OFFSET))
        .since(12)
        .tagged(0),
    f("current_leader", Struct(LEADER_ID_AND_EPOCH))
        .since(12)
        .tagged(1),
    f("snapshot_id", Struct(FETCH_SNAPSHOT_ID))
        .since(12)
        .tagged(2),
];
const FETCH_TOPIC: &[Field] = &[
    f("topic", Str).until(12),
    f("topic_id", Uuid).since(13),
    f("partitions", Structs(FETCH_PARTITION)),
];
const FETCH: &[Field] = &[
    f("throttle_time_ms", I32),
    f("error_code", I16).since(7),
    f("session_id", I32).since(7),
    f("responses", Structs(FETCH_TOPIC)),
    f("node_endpoints", Structs(NODE_ENDPOINT))
        .since(16)
        .tagged(0),
];

// Produce (flexible from v9).
const PRODUCE_RECORD_ERROR: &[Field] = &[
    f("batch_index", I32).since(8),
    f("batch_index_error_message", Str).since(8),
];
const PRODUCE_PARTITION: &[Field] = &[
    f("index", I32),
    f("error_code", I16),
    f("base_offset", I64),
    f("log_append_time_ms", I64),
    f("log_start_offset", I64).since(5),
    f("record_errors", Structs(PRODUCE_RECORD_ERROR)).since(8),
    f("error_message", Str).since(8),
    f("current_leader", Struct(LEADER_ID_AND_EPOCH))
        .since(10)
        .tagged(0),
];
const PRODUCE_TOPIC: &[Field] = &[
    f("name", Str).until(12),
    f("topic_id", Uuid).since(13),
    f("partition_responses", Structs(PRODUCE_PARTITION)),
];
const PRODUCE: &[Field] = &[
    f("responses", Structs(PRODUCE_TOPIC)),
    f("throttle_time_ms", I32),
    f("node_endpoints", Structs(NODE_ENDPOINT))
        .since(10)
        .tagged(0),
];

// CreateTopics (flexible from v5).
const CREATE_TOPICS_CONFIG: &[Field] = &[
    f("name", Str).since(5),
    f("value", Str).since(5),
    f("read_only", Bool).since(5),
    f("config_source", I8).since(5),
    f("is_sensitive", Bool).since(5),
];
const CREATE_TOPICS_RESULT: &[Field] = &[
    f("name", Str),
    f("topic_id", Uuid).since(7),
    f("error_code", I16),
    f("error_message", Str),
    f("num_partitions", I32).since(5),
    f("replication_factor", I16).since(5),
    f("configs", Structs(CREATE_TOPICS_CONFIG)).since(5),
    f("topic_config_error_code", I16).since(5).tagged(0),
];
const CREATE_TOPICS: &[Field] = &[
    f("throttle_time_ms", I32),
    f("topics", Structs(CREATE_TOPICS_RESULT)),
];

// SaslHandshake (never flexible): the mechanisms are an array of strings,
// which on the wire is an array of one-string structs.
const SASL_MECHANISM: &[Field] = &[f("mechanisms", Str)];
const SASL_HANDSHAKE: &[Field] = &[
    f("error_code", I16),
    f("mechanisms", Structs(SASL_MECHANISM)),
];

// SaslAuthenticate (flexible from v2).
const SASL_AUTHENTICATE: &[Field] = &[
    f("error_code", I16),
    f("error_message", Str),
    f("auth_bytes", Bytes),
    f("session_lifetime_ms", I64).since(1),
];

// InitProducerId (flexible from v2).
const INIT_PRODUCER_ID: &[Field] = &[
    f("throttle_time_ms", I32),
    f("error_code", I16),
    f("producer_id", I64),
    f("producer_epoch", I16),
    f("ongoing_txn_producer_id", I64).since(6),
    f("ongoing_txn_producer_epoch", I16).since(6),
];

// The administrative APIs below are not used by recovery: the test
// harnesses send them (deleting topics and records, granting ACLs,
// transactions), and they pass the same bounds check as every response.

// DeleteTopics (flexible from v4).
const DELETE_TOPICS_RESULT: &[Field] = &[
    f("name", Str),
    f("topic_id", Uuid).since(6),
    f("error_code", I16),
    f("error_message", Str).since(5),
];
const DELETE_TOPICS: &[Field] = &[
    f("throttle_time_ms", I32).since(1),
    f("responses", Structs(DELETE_TOPICS_RESULT)),
];

// DeleteRecords (flexible from v2).
const DELETE_RECORDS_PARTITION: &[Field] = &[
    f("partition_index", I32),
    f("low_watermark", I64),
    f("error_code", I16),
];
const DELETE_RECORDS_TOPIC: &[Field] = &[
    f("name", Str),
    f("partitions", Structs(DELETE_RECORDS_PARTITION)),
];
const DELETE_RECORDS: &[Field] = &[
    f("throttle_time_ms", I32),
    f("topics", Structs(DELETE_RECORDS_TOPIC)),
];

// CreateAcls (flexible from v2).
const CREATE_ACLS_RESULT: &[Field] = &[f("error_code", I16), f("error_message", Str)];
const CREATE_ACLS: &[Field] = &[
    f("throttle_time_ms", I32),
    f("results", Structs(CREATE_ACLS_RESULT)),
];

// AddPartitionsToTxn (flexible from v3; batched by transaction from v4,
// KIP-890).
const ADD_PARTITIONS_RESULT: &[Field] =
    &[f("partition_index", I32), f("partition_error_code", I16)];
const ADD_PARTITIONS_TOPIC: &[Field] = &[
    f("name", Str),
    f("results_by_partition", Structs(ADD_PARTITIONS_RESULT)),
];
const ADD_PARTITIONS_TXN_RESULT: &[Field] = &[
    f("transactional_id", Str),
    f("topic_results", Structs(ADD_PARTITIONS_TOPIC)),
];
const ADD_PARTITIONS_TO_TXN: &[Field] = &[
    f("throttle_time_ms", I32),
    f("error_code", I16).since(4),
    f("results_by_transaction", Structs(ADD_PARTITIONS_TXN_RESULT)).since(4),
    f(
        "results_by_topic_v3_and_below",
        Structs(ADD_PARTITIONS_TOPIC),
    )
    .until(3),
];

// EndTxn (flexible from v3).
const END_TXN: &[Field] = &[
    f("throttle_time_ms", I32),
    f("error_code", I16),
    f("producer_id", I64).since(5),
    f("producer_epoch", I16).since(5),
];

// FindCoordinator (flexible from v3; batched by key from v4, KIP-699).
const COORDINATOR: &[Field] = &[
    f("key", Str),
    f("node_id", I32),
    f("host", Str),
    f("port", I32),
    f("error_code", I16),
    f("error_message", Str),
];
const FIND_COORDINATOR: &[Field] = &[
    f("throttle_time_ms", I32).since(1),
    f("error_code", I16).until(3),
    f("error_message", Str).since(1).until(3),
    f("node_id", I32).until(3),
    f("host", Str).until(3),
    f("port", I32).until(3),
    f("coordinators", Structs(COORDINATOR)).since(4),
];

/// One API's response body: its top-level fields, and the first version
/// that is flexible (compact lengths and tagged fields, KIP-482).
#[derive(Debug, Clone, Copy)]
pub(super) struct Schema {
    pub(super) fields: &'static [Field],
    pub(super) flexible_from: i16,
}

/// The schema of `api`'s response body, `None` for an API without one.
pub(super) fn schema(api: ApiKey) -> Option<Schema> {
    let (fields, flexible_from) = match api {
        ApiKey::ApiVersions => (API_VERSIONS, 3),
        ApiKey::Metadata => (METADATA, 9),
        ApiKey::ListOffsets => (LIST_OFFSETS, 6),
        ApiKey::Fetch => (FETCH, 12),
        ApiKey::Produce => (PRODUCE, 9),
        ApiKey::CreateTopics => (CREATE_TOPICS, 5),
        // Never flexible (its highest version is 1).
        ApiKey::SaslHandshake => (SASL_HANDSHAKE, i16::MAX),
        ApiKey::SaslAuthenticate => (SASL_AUTHENTICATE, 2),
        ApiKey::InitProducerId => (INIT_PRODUCER_ID, 2),
        ApiKey::DeleteTopics => (DELETE_TOPICS, 4),
        ApiKey::DeleteRecords => (DELETE_RECORDS, 2),
        ApiKey::CreateAcls => (CREATE_ACLS, 2),
        ApiKey::AddPartitionsToTxn => (ADD_PARTITIONS_TO_TXN, 3),
        ApiKey::EndTxn => (END_TXN, 3),
        ApiKey::FindCoordinator => (FIND_COORDINATOR, 3),
        _ => return None,
    };
    Some(Schema {
        fields,
        flexible_from,
    })
}

#[cfg(test)]
mod tests {
    use bytes::Bytes as Buf;
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
        InitProducerIdResponse, ListOffsetsResponse, MetadataResponse, ProduceResponse, ProducerId,
    };

    use super::super::tests::{encode, name, s};
    use super::super::walk::walk_body;
    use super::*;

    /// The walk consumes exactly the encoded bytes, and every strict prefix
    /// is refused (no truncation goes unnoticed).
    fn assert_exact(api: ApiKey, version: i16, bytes: &[u8]) {
        let walked =
            walk_body(api, version, bytes).unwrap_or_else(|e| panic!("{api:?} v{version}: {e}"));
        assert_eq!(
            walked,
            bytes.len(),
            "{api:?} v{version} walked a different length"
        );
        for cut in 0..bytes.len() {
            assert!(
                walk_body(api, version, &bytes[..cut]).is_err(),
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
    fn sasl_schemas_match_every_version() {
        use kafka_protocol::messages::{SaslAuthenticateResponse, SaslHandshakeResponse};
        for v in 0..=1 {
            let m = SaslHandshakeResponse::default()
                .with_error_code(33)
                .with_mechanisms(vec![s("PLAIN"), s("SCRAM-SHA-256")]);
            assert_exact(ApiKey::SaslHandshake, v, &encode(&m, v));
        }
        for v in 0..=2 {
            let mut m = SaslAuthenticateResponse::default()
                .with_error_message(Some(s("no")))
                .with_auth_bytes(Buf::from_static(b"v=abc"));
            if v >= 1 {
                m = m.with_session_lifetime_ms(60_000);
            }
            assert_exact(ApiKey::SaslAuthenticate, v, &encode(&m, v));
        }
    }

    #[test]
    fn init_producer_id_schema_matches_every_version() {
        for v in 0..=6 {
            let m = InitProducerIdResponse::default()
                .with_throttle_time_ms(3)
                .with_error_code(0)
                .with_producer_id(ProducerId(7000))
                .with_producer_epoch(2);
            assert_exact(ApiKey::InitProducerId, v, &encode(&m, v));
        }
    }

    #[test]
    fn administrative_schemas_match_every_version() {
        use kafka_protocol::messages::add_partitions_to_txn_response::{
            AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult,
            AddPartitionsToTxnTopicResult,
        };
        use kafka_protocol::messages::create_acls_response::AclCreationResult;
        use kafka_protocol::messages::delete_records_response::{
            DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
        };
        use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
        use kafka_protocol::messages::find_coordinator_response::Coordinator;
        use kafka_protocol::messages::{
            AddPartitionsToTxnResponse, CreateAclsResponse, DeleteRecordsResponse,
            DeleteTopicsResponse, EndTxnResponse, FindCoordinatorResponse, TransactionalId,
        };
        // Every version the message types implement.
        let versions = |api: ApiKey| {
            let range = api.valid_versions();
            range.min..=range.max
        };
        for v in versions(ApiKey::DeleteTopics) {
            let m = DeleteTopicsResponse::default()
                .with_throttle_time_ms(1)
                .with_responses(vec![DeletableTopicResult::default()
                    .with_name(Some(name("t")))
                    .with_error_code(3)
                    .with_error_message(Some(s("gone")))]);
            assert_exact(ApiKey::DeleteTopics, v, &encode(&m, v));
        }
        for v in versions(ApiKey::DeleteRecords) {
            let m = DeleteRecordsResponse::default()
                .with_throttle_time_ms(1)
                .with_topics(vec![DeleteRecordsTopicResult::default()
                    .with_name(name("t"))
                    .with_partitions(vec![DeleteRecordsPartitionResult::default()
                        .with_partition_index(2)
                        .with_low_watermark(40)
                        .with_error_code(1)])]);
            assert_exact(ApiKey::DeleteRecords, v, &encode(&m, v));
        }
        for v in versions(ApiKey::CreateAcls) {
            let m = CreateAclsResponse::default()
                .with_throttle_time_ms(1)
                .with_results(vec![AclCreationResult::default()
                    .with_error_code(0)
                    .with_error_message(Some(s("ok")))]);
            assert_exact(ApiKey::CreateAcls, v, &encode(&m, v));
        }
        let topics = vec![AddPartitionsToTxnTopicResult::default()
            .with_name(name("t"))
            .with_results_by_partition(vec![AddPartitionsToTxnPartitionResult::default()
                .with_partition_index(1)
                .with_partition_error_code(0)])];
        for v in versions(ApiKey::AddPartitionsToTxn) {
            let m = if v < 4 {
                AddPartitionsToTxnResponse::default()
                    .with_throttle_time_ms(1)
                    .with_results_by_topic_v3_and_below(topics.clone())
            } else {
                AddPartitionsToTxnResponse::default()
                    .with_throttle_time_ms(1)
                    .with_results_by_transaction(vec![AddPartitionsToTxnResult::default()
                        .with_transactional_id(TransactionalId(s("tx")))
                        .with_topic_results(topics.clone())])
            };
            assert_exact(ApiKey::AddPartitionsToTxn, v, &encode(&m, v));
        }
        for v in versions(ApiKey::EndTxn) {
            let m = EndTxnResponse::default()
                .with_throttle_time_ms(1)
                .with_error_code(0)
                .with_producer_id(ProducerId(9))
                .with_producer_epoch(1);
            assert_exact(ApiKey::EndTxn, v, &encode(&m, v));
        }
        for v in versions(ApiKey::FindCoordinator) {
            let m = if v < 4 {
                FindCoordinatorResponse::default()
                    .with_throttle_time_ms(1)
                    .with_error_message(Some(s("e")))
                    .with_node_id(BrokerId(3))
                    .with_host(s("h"))
                    .with_port(9092)
            } else {
                FindCoordinatorResponse::default()
                    .with_throttle_time_ms(1)
                    .with_coordinators(vec![Coordinator::default()
                        .with_key(s("tx"))
                        .with_node_id(BrokerId(3))
                        .with_host(s("h"))
                        .with_port(9092)
                        .with_error_message(Some(s("e")))])
            };
            assert_exact(ApiKey::FindCoordinator, v, &encode(&m, v));
        }
    }
}
