//! API version negotiation.
//!
//! On connect the client sends `ApiVersions`; the broker lists, per API, the
//! versions it supports. For every API walfetch uses, the version used is the
//! highest one in both the broker's range and walfetch's own range
//! ([`VersionPolicy`]), which is the range of the `kafka-protocol` message
//! types narrowed by what walfetch's code handles. An API with no common
//! version is not an error at connect time (a consumer does not need
//! `CreateTopics`); using it is, with both ranges in the message.
//!
//! # Why Fetch is capped at v11 by default
//! Tansu 0.6.0 advertises Fetch v0–v17, but its Fetch v12 response carries a
//! top-level tagged field 0 (`NodeEndpoints`), which the protocol only
//! defines from v16, and `kafka-protocol` 0.18 rejects it ("Tag 0 is not
//! valid for version 12"). Fetch v4–v11 decode, and v11 already has
//! everything walfetch needs (log start offset, aborted transactions, the
//! current leader epoch in the request). The cap is
//! [`DEFAULT_FETCH_MAX_VERSION`]; raise it with [`VersionPolicy::with_max`]
//! against brokers that encode v12+ correctly (v13+ address topics by id,
//! which walfetch takes from `Metadata`).
//!
//! # References
//! - Kafka protocol guide, "Versioning and Compatibility":
//!   <https://kafka.apache.org/protocol#protocol_compatibility>
//! - KIP-35 (ApiVersions), KIP-511 (ApiVersions v3 and the v0 fallback
//!   answer to an unsupported ApiVersions version), KIP-482 (flexible
//!   versions and their header versions).

use std::fmt;

use kafka_protocol::messages::{ApiKey, ApiVersionsResponse};

use super::ConnectionError;

/// An inclusive range of API versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VersionRange {
    /// Lowest version.
    pub min: i16,
    /// Highest version.
    pub max: i16,
}

impl VersionRange {
    /// `min..=max`.
    pub const fn new(min: i16, max: i16) -> Self {
        Self { min, max }
    }

    /// Whether the range holds no version.
    pub const fn is_empty(self) -> bool {
        self.min > self.max
    }

    /// Whether `version` is in the range.
    pub const fn contains(self, version: i16) -> bool {
        self.min <= version && version <= self.max
    }

    /// The versions in both ranges (possibly empty).
    pub fn intersect(self, other: Self) -> Self {
        Self {
            min: self.min.max(other.min),
            max: self.max.min(other.max),
        }
    }

    /// The versions the `kafka-protocol` message types implement for `api`.
    pub fn of_message_types(api: ApiKey) -> Self {
        let range = api.valid_versions();
        Self::new(range.min, range.max)
    }
}

impl fmt::Display for VersionRange {
    /// `v4..=11`; an empty range (a policy narrowed to nothing the
    /// message types implement) is `no version`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("no version");
        }
        write!(f, "v{}..={}", self.min, self.max)
    }
}

/// The highest Fetch version walfetch uses unless told otherwise (see the
/// module documentation for why).
pub const DEFAULT_FETCH_MAX_VERSION: i16 = 11;

/// The lowest Fetch version walfetch speaks: v4 brought record batches
/// (magic 2), `last_stable_offset` and aborted transactions.
pub const MIN_FETCH_VERSION: i16 = 4;

/// The versions walfetch is willing to use, per API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionPolicy {
    apis: Vec<(ApiKey, VersionRange)>,
}

impl Default for VersionPolicy {
    fn default() -> Self {
        let apis = vec![
            // v3 is the first flexible version (KIP-511); brokers since 2.4
            // answer an unknown version with a v0 response naming their
            // range, older ones with no range at all (then v0 is asked).
            (ApiKey::ApiVersions, VersionRange::new(0, 3)),
            // v1 brought controller id and racks; v7 the leader epoch.
            (ApiKey::Metadata, VersionRange::new(1, 13)),
            (
                ApiKey::Fetch,
                VersionRange::new(MIN_FETCH_VERSION, DEFAULT_FETCH_MAX_VERSION),
            ),
            // v1 looks offsets up by timestamp (KIP-79).
            (ApiKey::ListOffsets, VersionRange::new(1, 10)),
            // v3 is the first with record batches (magic 2); v13 addresses
            // topics by id only.
            (ApiKey::Produce, VersionRange::new(3, 12)),
            (ApiKey::CreateTopics, VersionRange::new(2, 7)),
            // v1 wraps the SASL exchange in SaslAuthenticate (KIP-152).
            (ApiKey::SaslHandshake, VersionRange::new(1, 1)),
            // v1 brought the session lifetime (KIP-368).
            (ApiKey::SaslAuthenticate, VersionRange::new(0, 2)),
            // The idempotent WAL writer's producer id (KIP-98); v6 adds
            // two-phase-commit fields (KIP-939) walfetch does not use.
            (ApiKey::InitProducerId, VersionRange::new(0, 5)),
        ];
        let apis = apis
            .into_iter()
            .map(|(api, range)| (api, range.intersect(VersionRange::of_message_types(api))))
            .collect();
        Self { apis }
    }
}

impl VersionPolicy {
    /// The versions walfetch uses for `api`, `None` for an API it does not use.
    pub fn range(&self, api: ApiKey) -> Option<VersionRange> {
        self.apis.iter().find(|(a, _)| *a == api).map(|(_, r)| *r)
    }

    /// Uses `range` for `api`, narrowed to what the message types implement.
    pub fn with_range(mut self, api: ApiKey, range: VersionRange) -> Self {
        let range = range.intersect(VersionRange::of_message_types(api));
        match self.apis.iter_mut().find(|(a, _)| *a == api) {
            Some(entry) => entry.1 = range,
            None => self.apis.push((api, range)),
        }
        self
    }

    /// Caps `api` at version `max` (e.g. `with_max(ApiKey::Fetch, 12)`).
    pub fn with_max(self, api: ApiKey, max: i16) -> Self {
        let min = self
            .range(api)
            .map_or(VersionRange::of_message_types(api).min, |r| r.min);
        self.with_range(api, VersionRange::new(min, max))
    }

    /// Picks, for every API of the policy, the highest version both sides
    /// support, given the broker's `ApiVersions` answer.
    pub fn negotiate(&self, broker: &str, response: &ApiVersionsResponse) -> NegotiatedVersions {
        let advertised: Vec<(i16, VersionRange)> = response
            .api_keys
            .iter()
            .map(|k| (k.api_key, VersionRange::new(k.min_version, k.max_version)))
            .collect();
        let apis = self
            .apis
            .iter()
            .map(|&(api, client)| {
                let broker_range = advertised
                    .iter()
                    .find(|(k, _)| *k == api as i16)
                    .map(|(_, r)| *r);
                let common = broker_range
                    .map(|b| b.intersect(client))
                    .filter(|r| !r.is_empty());
                let choice = match common {
                    Some(common) => Ok(common.max),
                    None => Err(broker_range),
                };
                (api, client, choice)
            })
            .collect();
        NegotiatedVersions {
            broker: broker.to_owned(),
            apis,
            advertised,
        }
    }
}

/// The outcome of version negotiation with one broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NegotiatedVersions {
    broker: String,
    /// Per API: walfetch's range and the version chosen, or the broker's
    /// range (if advertised at all) when there is no common version.
    apis: Vec<(ApiKey, VersionRange, Result<i16, Option<VersionRange>>)>,
    advertised: Vec<(i16, VersionRange)>,
}

impl NegotiatedVersions {
    /// The version to use for `api`, or [`ConnectionError::NoCommonVersion`]
    /// naming the API and both ranges.
    pub fn version(&self, api: ApiKey) -> Result<i16, ConnectionError> {
        let no_common = |client: VersionRange, broker_versions| ConnectionError::NoCommonVersion {
            broker: self.broker.clone(),
            api,
            client,
            broker_versions,
        };
        match self.apis.iter().find(|(a, _, _)| *a == api) {
            Some((_, _, Ok(version))) => Ok(*version),
            Some((_, client, Err(broker_versions))) => Err(no_common(*client, *broker_versions)),
            // An API outside the policy: the message types' range.
            None => {
                let client = VersionRange::of_message_types(api);
                let broker_versions = self.advertised(api);
                broker_versions
                    .map(|b| b.intersect(client))
                    .filter(|r| !r.is_empty())
                    .map(|r| r.max)
                    .ok_or_else(|| no_common(client, broker_versions))
            }
        }
    }

    /// The versions the broker advertised for `api`.
    pub fn advertised(&self, api: ApiKey) -> Option<VersionRange> {
        self.advertised
            .iter()
            .find(|(k, _)| *k == api as i16)
            .map(|(_, r)| *r)
    }

    /// Every API key the broker advertised with its versions (including keys
    /// unknown to walfetch), in the broker's order.
    pub fn all_advertised(&self) -> &[(i16, VersionRange)] {
        &self.advertised
    }
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::api_versions_response::ApiVersion;

    use super::*;

    fn broker(apis: &[(ApiKey, i16, i16)]) -> ApiVersionsResponse {
        ApiVersionsResponse::default().with_api_keys(
            apis.iter()
                .map(|&(k, min, max)| {
                    ApiVersion::default()
                        .with_api_key(k as i16)
                        .with_min_version(min)
                        .with_max_version(max)
                })
                .collect(),
        )
    }

    #[test]
    fn picks_highest_common_version() {
        let policy = VersionPolicy::default();
        let v = policy.negotiate(
            "b:1",
            &broker(&[
                (ApiKey::Fetch, 0, 17),
                (ApiKey::Metadata, 0, 8),
                (ApiKey::Produce, 0, 9),
            ]),
        );
        assert_eq!(
            v.version(ApiKey::Fetch).expect("fetch"),
            DEFAULT_FETCH_MAX_VERSION
        );
        assert_eq!(v.version(ApiKey::Metadata).expect("metadata"), 8);
        assert_eq!(v.version(ApiKey::Produce).expect("produce"), 9);
        assert_eq!(v.advertised(ApiKey::Fetch), Some(VersionRange::new(0, 17)));
    }

    #[test]
    fn cap_is_configurable_and_clamped_to_message_types() {
        let policy = VersionPolicy::default().with_max(ApiKey::Fetch, 12);
        assert_eq!(policy.range(ApiKey::Fetch), Some(VersionRange::new(4, 12)));
        let policy = VersionPolicy::default().with_max(ApiKey::Fetch, 99);
        assert_eq!(
            policy.range(ApiKey::Fetch),
            Some(VersionRange::new(
                4,
                VersionRange::of_message_types(ApiKey::Fetch).max
            ))
        );
        let v = policy.negotiate("b:1", &broker(&[(ApiKey::Fetch, 0, 12)]));
        assert_eq!(v.version(ApiKey::Fetch).expect("fetch"), 12);
    }

    #[test]
    fn a_policy_narrowed_to_nothing_says_so() {
        let policy = VersionPolicy::default().with_range(ApiKey::Fetch, VersionRange::new(0, 3));
        let v = policy.negotiate("b:1", &broker(&[(ApiKey::Fetch, 4, 18)]));
        let msg = v
            .version(ApiKey::Fetch)
            .expect_err("nothing asked")
            .to_string();
        assert!(msg.contains("walfetch supports no version"), "{msg}");
        assert!(msg.contains("v4..=18"), "{msg}");
    }

    #[test]
    fn no_common_version_names_api_and_both_ranges() {
        let policy = VersionPolicy::default();
        let v = policy.negotiate("127.0.0.1:9092", &broker(&[(ApiKey::Fetch, 0, 3)]));
        let err = v.version(ApiKey::Fetch).expect_err("no common version");
        let msg = err.to_string();
        assert!(msg.contains("127.0.0.1:9092"), "{msg}");
        assert!(msg.contains("Fetch"), "{msg}");
        assert!(msg.contains("v0..=3"), "{msg}");
        assert!(msg.contains("v4..=11"), "{msg}");
        let err = v.version(ApiKey::Produce).expect_err("not advertised");
        assert!(err.to_string().contains("in no version"), "{err}");
    }
}
