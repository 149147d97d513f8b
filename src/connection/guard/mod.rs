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
//! The schema tables are in `schema.rs`, the walk in `walk.rs`. Responses of
//! APIs without a schema are refused rather than decoded unchecked.
//!
//! # References
//! - Kafka protocol guide, "Protocol Primitive Types" and the message
//!   definitions (`clients/src/main/resources/common/message/*.json`);
//!   KIP-482 (compact types and tagged fields of flexible versions).

mod schema;
mod walk;

use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::{Decodable, Request};

/// Why a response failed the bounds check or did not decode. Every
/// variant found in the body names the field it was reading (by its
/// `kafka-protocol` name) and the byte of the body where it starts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GuardError {
    /// The API has no schema here, so its responses are not decoded.
    #[error("no bounds check for responses of API key {key}")]
    UnknownApi {
        /// The API key.
        key: i16,
    },
    /// The body ends inside a field.
    #[error("{field} needs {needed} bytes at byte {at} but only {remaining} remain")]
    Truncated {
        /// The field.
        field: &'static str,
        /// Where the missing bytes start.
        at: usize,
        /// Bytes the field needs there.
        needed: usize,
        /// Bytes left in the body there.
        remaining: usize,
    },
    /// A varint runs past the five bytes a 32-bit value can take.
    #[error("{field}: varint at byte {at} is longer than 5 bytes")]
    VarintTooLong {
        /// The field.
        field: &'static str,
        /// Where the varint starts.
        at: usize,
    },
    /// A length or count is negative other than the -1 of null.
    #[error("{field} at byte {at} has negative length {length}")]
    NegativeLength {
        /// The field.
        field: &'static str,
        /// Where the length starts.
        at: usize,
        /// The length read.
        length: i64,
    },
    /// An array claims more elements than the bytes left can hold.
    #[error("{field} at byte {at} claims {count} elements but only {remaining} bytes remain")]
    CountTooLarge {
        /// The array field.
        field: &'static str,
        /// Where the count starts.
        at: usize,
        /// The count read.
        count: usize,
        /// Bytes left after the count.
        remaining: usize,
    },
    /// A tagged field claims more bytes than the body has left.
    #[error("tagged field {tag} at byte {at} claims {size} bytes but only {remaining} remain")]
    TaggedFieldTooLarge {
        /// The tag.
        tag: u32,
        /// Where the field's content starts.
        at: usize,
        /// The size it claims.
        size: usize,
        /// Bytes left in the body there.
        remaining: usize,
    },
    /// A known tagged field's content takes a different number of bytes
    /// than its size says.
    #[error("tagged field {tag} at byte {at} claims {size} bytes but its content takes {content}")]
    TaggedFieldSizeMismatch {
        /// The tag.
        tag: u32,
        /// Where the field's content starts.
        at: usize,
        /// The size it claims.
        size: usize,
        /// The bytes its content took.
        content: usize,
    },
    /// The response header before the body did not decode.
    #[error("response header: {message}")]
    Header {
        /// `kafka-protocol`'s message.
        message: String,
    },
    /// The schema tables nest deeper than the walk allows: a bug in them.
    #[error("schema nesting deeper than {max} levels")]
    TooDeep {
        /// The deepest nesting allowed.
        max: usize,
    },
    /// The body passed the check but `kafka-protocol` refused it (a field
    /// invalid in the version, a string that is not UTF-8, ...).
    #[error("{message}")]
    Decode {
        /// `kafka-protocol`'s message.
        message: String,
    },
}

/// Whether [`check_response`] knows `api`'s responses.
pub fn is_checked(api: ApiKey) -> bool {
    schema::schema(api).is_some()
}

/// Checks that `body`, a response body of `api` in `version`, has no array
/// claiming more elements than the bytes left and is not truncated. Bytes
/// after the body are allowed (the decoder ignores them too).
pub fn check_response(api: ApiKey, version: i16, body: &[u8]) -> Result<(), GuardError> {
    walk::walk_body(api, version, body).map(|_| ())
}

/// Decodes a response body of request type `R` (e.g. `FetchRequest` for a
/// Fetch response) in `version`, after [`check_response`]. `body` is the
/// frame after the response header; the decoded message's `Bytes` fields
/// (a Fetch response's `records`) are views of it.
///
/// [`crate::connection::decode_response_frame`] runs this on every
/// response, after the response header.
pub fn decode_response<R: Request>(
    version: i16,
    body: bytes::Bytes,
) -> Result<R::Response, GuardError> {
    let api = ApiKey::try_from(R::KEY).map_err(|()| GuardError::UnknownApi { key: R::KEY })?;
    check_response(api, version, &body)?;
    let mut buf = body;
    R::Response::decode(&mut buf, version).map_err(|e| GuardError::Decode {
        message: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use bytes::{Bytes as Buf, BytesMut};
    use kafka_protocol::messages::fetch_response::{
        AbortedTransaction, FetchableTopicResponse, PartitionData,
    };
    use kafka_protocol::messages::metadata_response::{
        MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
    };
    use kafka_protocol::messages::{BrokerId, FetchResponse, MetadataResponse, TopicName};
    use kafka_protocol::protocol::buf::NotEnoughBytesError;
    use kafka_protocol::protocol::{Encodable, StrBytes};
    use rand::rngs::StdRng;
    use rand::{Rng, RngExt, SeedableRng};

    use super::*;

    pub(super) fn encode<T: Encodable>(message: &T, version: i16) -> Vec<u8> {
        let mut buf = BytesMut::new();
        message.encode(&mut buf, version).expect("encodes");
        buf.to_vec()
    }

    pub(super) fn s(v: &'static str) -> StrBytes {
        StrBytes::from_static_str(v)
    }

    pub(super) fn name(v: &'static str) -> TopicName {
        TopicName(s(v))
    }

    /// Runs `body`, a response body of `R`'s API in `version`, through the
    /// two steps of [`decode_response`] (the bounds check, then
    /// `kafka-protocol`'s decoder) and, when the check accepts it, asserts
    /// that the decoder reads it as the check did:
    /// - the decoder never runs out of bytes. Had the check let through an
    ///   array count claiming more elements than the bytes left, the
    ///   decoder would allocate for them, then read elements (each at least
    ///   one byte) until the bytes ran out, unless one of them were refused
    ///   first for another reason: over thousands of mutations, such a
    ///   check fails this (a check that treats such counts as empty does).
    /// - when the decoder decodes the body, it stops where the walk did.
    ///
    /// Returns whether the check accepted the body.
    fn assert_decoder_agrees<R: Request>(version: i16, body: &[u8]) -> bool {
        let api = ApiKey::try_from(R::KEY).expect("a known API");
        let Ok(walked) = walk::walk_body(api, version, body) else {
            return false;
        };
        let mut buf = Buf::copy_from_slice(body);
        match R::Response::decode(&mut buf, version) {
            Ok(_) => assert_eq!(
                body.len() - buf.len(),
                walked,
                "{api:?} v{version}: the decoder read another length than the check in {body:?}"
            ),
            Err(e) => assert!(
                e.downcast_ref::<bytes::TryGetError>().is_none()
                    && e.downcast_ref::<NotEnoughBytesError>().is_none(),
                "{api:?} v{version}: the check accepted {body:?}, the decoder ran out of bytes: {e}"
            ),
        }
        true
    }

    /// Mutated valid responses and random bytes: every one the check
    /// accepts is read by the decoder within its bytes, as the check read it
    /// ([`assert_decoder_agrees`]), and nothing panics. (The fuzz targets do
    /// this at scale; this keeps a fast, seeded version in `cargo test`.)
    #[test]
    fn decoder_stays_within_every_mutated_response_the_check_accepts() {
        use kafka_protocol::messages::{FetchRequest, MetadataRequest};
        let mut rng = StdRng::seed_from_u64(0x9e37_79b9_7f4a_7c15);
        let mut accepted = 0;
        for version in 4..=17 {
            let mut m =
                FetchResponse::default().with_responses(vec![FetchableTopicResponse::default()
                    .with_topic(name("t"))
                    .with_partitions(vec![PartitionData::default()
                        .with_aborted_transactions(Some(vec![AbortedTransaction::default()]))
                        .with_records(Some(Buf::from_static(b"records")))])]);
            if version >= 13 {
                m.responses[0].topic = TopicName::default();
            }
            let valid = encode(&m, version);
            for _ in 0..2_000 {
                let mut bytes = valid.clone();
                for _ in 0..rng.random_range(1..=4) {
                    let at = rng.random_range(0..bytes.len());
                    bytes[at] = rng.random();
                }
                bytes.truncate(bytes.len() - rng.random_range(0..3));
                accepted += usize::from(assert_decoder_agrees::<FetchRequest>(version, &bytes));
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
                let at = rng.random_range(0..bytes.len());
                bytes[at] = rng.random();
                accepted += usize::from(assert_decoder_agrees::<MetadataRequest>(version, &bytes));
            }
        }
        for len in 0..64 {
            let mut bytes = vec![0; len];
            rng.fill_bytes(&mut bytes);
            for version in 4..=17 {
                accepted += usize::from(assert_decoder_agrees::<FetchRequest>(version, &bytes));
            }
        }
        // Many mutations are refused; enough must pass for the agreement to
        // be tested at all (with this seed, about 23 000 of 58 000 pass).
        assert!(accepted >= 10_000, "only {accepted} passed the check");
    }

    #[test]
    fn unknown_apis_are_refused() {
        assert_eq!(
            check_response(ApiKey::JoinGroup, 0, &[]),
            Err(GuardError::UnknownApi { key: 11 })
        );
        assert!(!is_checked(ApiKey::JoinGroup));
        assert!(is_checked(ApiKey::Fetch));
    }
}
