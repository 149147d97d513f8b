//! The soak's shape (topic, partitions, brokers, regions, sizes) and what every part of it uses.

pub(crate) use std::collections::BTreeMap;
pub(crate) use std::sync::Arc;
pub(crate) use std::time::{Duration, Instant};

pub(crate) use bytes::Bytes;
pub(crate) use futures::StreamExt;
pub(crate) use kafka_protocol::messages::ApiKey;
pub(crate) use rand::rngs::StdRng;
pub(crate) use rand::{RngExt, SeedableRng};
pub(crate) use serde_json::json;
pub(crate) use walfetch::cluster::{ClientError, Cluster, ClusterConfig, FetchParams, RetryPolicy};
pub(crate) use walfetch::codec::{Batches, Compression, DecodeOptions};
pub(crate) use walfetch::consumer::{LostPolicy, Recovery, ReplayOptions, ReplayStats};
pub(crate) use walfetch::error::Error;
pub(crate) use walfetch::index::{RegionId, WalIndex};
pub(crate) use walfetch::plan::PlanConfig;
pub(crate) use walfetch::writer::{WalEntry, WalWriter, WriterConfig};
pub(crate) use walfetch_testkit::{Fault, FaultAction, Habits, ScriptedCluster};

pub(crate) const TOPIC: &str = "wal";
pub(crate) const PARTITIONS: i32 = 3;
pub(crate) const BROKERS: i32 = 3;
pub(crate) const REGIONS_PER_PARTITION: u64 = 8;
/// The largest fetch the soak's recoveries plan.
pub(crate) const MAX_FETCH_BYTES: u32 = 64 << 10;
/// The writers' batch size (a batch may come whole past a fetch's limit).
pub(crate) const MAX_BATCH_BYTES: usize = 8 << 10;
/// A round that takes longer than this hangs.
pub(crate) const ROUND_TIMEOUT: Duration = Duration::from_secs(60);

pub(crate) use crate::recovery::{
    dumped_halfway, region_of, skewed_region, write_partition, Written,
};
