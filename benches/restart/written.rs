//! The WAL a restart recovers: the regions split over partitions, each written
//! by its own writer with its own index, and the regions' seeded checkpoints.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use walfetch::cluster::{Cluster, NewTopic};
use walfetch::index::{RegionId, WalIndex};

use crate::floor::{self, Floor, LogLayout, Want};
use crate::workload::{self, PlannedBatch, WorkloadSpec, Written, WrittenEntry};

/// One partition of a restart: where it is, what it holds, its index.
pub(super) struct Part {
    pub(super) topic: String,
    pub(super) partition: i32,
    /// The log end offset.
    pub(super) end: i64,
    /// The writer's index, complete (`last_index` at the last offset).
    pub(super) hinted: WalIndex,
    /// The same offsets without hints, as a GreptimeDB index gives them.
    pub(super) offsets_only: WalIndex,
    pub(super) layout: LogLayout,
}

impl Part {
    /// The index walfetch recovers with: the writer's, or offsets only.
    pub(super) fn walfetch_index(&self, offsets_only: bool) -> &WalIndex {
        match offsets_only {
            true => &self.offsets_only,
            false => &self.hinted,
        }
    }
}

/// One region to recover.
pub(super) struct Wish {
    /// Its partition, an index into [`Restart::parts`].
    pub(super) part: usize,
    pub(super) region: RegionId,
    /// Its checkpoint.
    pub(super) from: i64,
    /// Its written entries from the checkpoint on, in offset order.
    pub(super) expected: Vec<WrittenEntry>,
}

/// Every region of a workload on one layout, and the floor of recovering
/// them all.
pub(crate) struct Restart {
    pub(super) parts: Vec<Part>,
    pub(super) wishes: Vec<Wish>,
    /// Each partition's floor of the union of its regions' wanted records.
    pub(super) floors: Vec<Floor>,
    /// The regions' own floors, summed: the least a replay region by region
    /// moves under Kafka's rules.
    pub(super) region_floors: u64,
}

impl Restart {
    pub(super) fn entries(&self) -> usize {
        self.wishes.iter().map(|w| w.expected.len()).sum()
    }

    /// The union floor on `broker`, over every partition (separate logs:
    /// their floors add up).
    pub(super) fn floor_bytes(&self, broker: &str) -> u64 {
        self.floors.iter().map(|f| f.bytes_for(broker)).sum()
    }

    /// The regions' own records from their checkpoints on, as the broker's
    /// batches hold them: how many, and their encoded bytes.
    pub(super) fn own_records(&self) -> (usize, u64) {
        self.floors.iter().fold((0, 0), |(n, b), f| {
            (n + f.region_records, b + f.region_record_bytes)
        })
    }

    /// Names a region in an error.
    pub(super) fn context(&self, wish: &Wish, what: String) -> String {
        let part = &self.parts[wish.part];
        format!(
            "region {} ({}/{}, checkpoint {}, {} entries to {}): {what}",
            wish.region,
            part.topic,
            part.partition,
            wish.from,
            wish.expected.len(),
            part.end
        )
    }
}

/// The partition of `region` when regions are split over `partitions`.
pub(super) fn partition_of(region: RegionId, partitions: usize) -> usize {
    (region.saturating_sub(1) % partitions as u64) as usize
}

/// Each region's checkpoint, as a fraction of its partition's log.
pub(super) fn checkpoints(regions: u64, seed: u64) -> BTreeMap<RegionId, f64> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x7265_7374_6172_7400);
    (1..=regions)
        .map(|r| (r, rng.random_range(0.0..1.0)))
        .collect()
}

/// The workload's batches split by partition: each batch's entries of a
/// partition's regions become that partition's batch (one writer each).
pub(super) fn split(batches: &[PlannedBatch], partitions: usize) -> Vec<Vec<PlannedBatch>> {
    let mut out: Vec<Vec<PlannedBatch>> = vec![Vec::new(); partitions];
    for batch in batches {
        let mut parts = vec![Vec::new(); partitions];
        for e in &batch.entries {
            parts[partition_of(e.region, partitions)].push(e.clone());
        }
        for (p, entries) in parts.into_iter().enumerate() {
            if !entries.is_empty() {
                out[p].push(PlannedBatch { writer: 0, entries });
            }
        }
    }
    out
}

/// A partition as written, with its complete index and its layout.
pub(super) fn part(
    topic: &str,
    partition: i32,
    written: &Written,
    layout: LogLayout,
) -> Result<Part, String> {
    let hinted = crate::contenders::restrict(&written.index, 0, written.end - 1, true)?;
    Ok(Part {
        topic: topic.to_owned(),
        partition,
        end: written.end,
        offsets_only: hinted.without_hints(),
        hinted,
        layout,
    })
}

/// Writes the workload to a new topic of `partitions` partitions, one
/// writer each, and reads their layouts back.
pub(super) async fn write_partitioned(
    cluster: &Arc<Cluster>,
    topic: &str,
    spec: &WorkloadSpec,
    planned: &[PlannedBatch],
    partitions: usize,
) -> Result<(Vec<Part>, Vec<Written>), String> {
    cluster
        .create_topics(&[NewTopic::new(topic, partitions as i32)])
        .await
        .map_err(|e| format!("create {topic}: {e}"))?;
    let one_writer = WorkloadSpec {
        writers: 1,
        ..spec.clone()
    };
    let mut parts = Vec::new();
    let mut all = Vec::new();
    for (p, batches) in split(planned, partitions).into_iter().enumerate() {
        let partition = p as i32;
        let written =
            workload::write_partition(cluster, topic, partition, &one_writer, &batches).await?;
        let layout = floor::scan(cluster, topic, partition, written.end).await?;
        if layout.batches.len() != written.batches {
            return Err(format!(
                "{topic}/{partition}: wrote {} batches, the broker serves {}",
                written.batches,
                layout.batches.len()
            ));
        }
        parts.push(part(topic, partition, &written, layout)?);
        all.push(written);
    }
    Ok((parts, all))
}

/// Every region of `written` (one per partition) from its checkpoint, and
/// the floors.
pub(super) fn restart(
    parts: Vec<Part>,
    written: &[&Written],
    fractions: &BTreeMap<RegionId, f64>,
) -> Result<Restart, String> {
    let n = parts.len();
    let mut wishes = Vec::new();
    let mut floors = Vec::with_capacity(n);
    let mut region_floors = 0;
    for (k, (part, written)) in parts.iter().zip(written).enumerate() {
        let mut from_of: HashMap<RegionId, i64> = HashMap::new();
        for (&region, &fraction) in fractions {
            if partition_of(region, n) != k {
                continue;
            }
            let from = (fraction * part.end as f64) as i64;
            from_of.insert(region, from);
            let expected: Vec<WrittenEntry> = written
                .entries
                .iter()
                .filter(|e| e.region == region && e.offset >= from)
                .cloned()
                .collect();
            region_floors +=
                floor::floor(&part.layout, region, from..part.end, part.end)?.kafka_bytes;
            wishes.push(Wish {
                part: k,
                region,
                from,
                expected,
            });
        }
        let union = floor::floor_of(&part.layout, |r| {
            let own = r
                .region
                .and_then(|region| from_of.get(&region))
                .is_some_and(|&from| r.offset >= from && r.offset < part.end);
            if own {
                Want::Own
            } else {
                Want::No
            }
        })?;
        floors.push(union);
    }
    let restart = Restart {
        parts,
        wishes,
        floors,
        region_floors,
    };
    let (own, _) = restart.own_records();
    if restart.entries() != own {
        return Err(format!(
            "restart: {} entries written from the checkpoints on, the broker's batches hold {own}",
            restart.entries(),
        ));
    }
    Ok(restart)
}
