//! The API versions the scripted broker serves, advertised as they are in
//! `ApiVersions`.
//!
//! # References
//! - Kafka protocol guide, "Versioning and Compatibility" and the ApiVersions
//!   API (KIP-35); flexible versions and tagged fields (KIP-482).

use kafka_protocol::messages::ApiKey;

/// A range of versions of one API, both ends included.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VersionRange {
    /// Lowest version served.
    pub min: i16,
    /// Highest version served.
    pub max: i16,
}

impl VersionRange {
    /// The range `min..=max`.
    pub const fn new(min: i16, max: i16) -> Self {
        Self { min, max }
    }

    /// Whether `version` is in the range.
    pub fn contains(&self, version: i16) -> bool {
        self.min <= version && version <= self.max
    }

    /// The versions in both ranges, if any.
    pub fn intersect(&self, other: VersionRange) -> Option<VersionRange> {
        let r = VersionRange::new(self.min.max(other.min), self.max.min(other.max));
        (r.min <= r.max).then_some(r)
    }
}

/// Every API the scripted broker implements, with the versions it serves.
///
/// - Produce v3–v9: one or more batches per partition, base offset assigned.
/// - Fetch v4–v17: v13+ names topics by id; v15+ reads `replica_state`.
/// - ListOffsets v1–v7: earliest, latest, by timestamp, max timestamp (v7).
/// - Metadata v1–v12: v10+ topic ids, v12 topics requested by id.
/// - ApiVersions v0–v3.
/// - CreateTopics v2–v7.
/// - InitProducerId v0–v5: idempotent producers only (no transactional id).
pub const SERVED: [(ApiKey, VersionRange); 7] = [
    (ApiKey::Produce, VersionRange::new(3, 9)),
    (ApiKey::Fetch, VersionRange::new(4, 17)),
    (ApiKey::ListOffsets, VersionRange::new(1, 7)),
    (ApiKey::Metadata, VersionRange::new(1, 12)),
    (ApiKey::ApiVersions, VersionRange::new(0, 3)),
    (ApiKey::CreateTopics, VersionRange::new(2, 7)),
    (ApiKey::InitProducerId, VersionRange::new(0, 5)),
];

/// The versions of `api_key` the broker serves, if it serves the API.
pub fn served_versions(api_key: ApiKey) -> Option<VersionRange> {
    SERVED.iter().find(|(k, _)| *k == api_key).map(|(_, r)| *r)
}
