//! Recovering many regions: what was written, checkpoints, the index as a
//! writer would have dumped it, and a recovery checked entry by entry.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use walfetch::cluster::Cluster;
use walfetch::consumer::{Recovery, ReplayOptions, ReplayStats};
use walfetch::error::Error;
use walfetch::index::{RegionId, WalIndex};

/// What was written: per partition, per region, `(offset, value)`.
pub(crate) type Written = BTreeMap<i32, BTreeMap<RegionId, Vec<(i64, Bytes)>>>;

/// `index` as if its writer had dumped it at `cut`: entries up to `cut`,
/// `last_index` there.
pub(crate) fn dumped_at(index: &WalIndex, cut: i64) -> WalIndex {
    let mut out = WalIndex::new();
    for (region, entries) in index.regions() {
        for e in entries.entries().iter().filter(|e| e.offset <= cut) {
            out.push(region, *e).unwrap();
        }
    }
    out.set_last_index(cut);
    out
}

/// A checkpoint per region: somewhere in its entries (or 0).
pub(crate) fn checkpoints(written: &Written, seed: u64) -> BTreeMap<(i32, RegionId), i64> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut out = BTreeMap::new();
    for (&p, regions) in written {
        for (&region, entries) in regions {
            let i = rng.random_range(0..=entries.len());
            let from = entries.get(i).map_or(0, |(o, _)| *o);
            out.insert((p, region), from);
        }
    }
    out
}

/// What each region must get: its entries from its checkpoint on.
pub(crate) fn expected(written: &Written, checkpoints: &BTreeMap<(i32, RegionId), i64>) -> Written {
    let mut out = Written::new();
    for (&(p, region), &from) in checkpoints {
        let entries = written[&p][&region]
            .iter()
            .filter(|(o, _)| *o >= from)
            .cloned()
            .collect();
        out.entry(p).or_default().insert(region, entries);
    }
    out
}

/// Runs a recovery of every region in `checkpoints` of `topic`; what each
/// region got. Every entry must belong to the region it is tagged with, by
/// the options' region rule.
pub(crate) async fn recover(
    cluster: &Arc<Cluster>,
    topic: &str,
    indexes: &[WalIndex],
    checkpoints: &BTreeMap<(i32, RegionId), i64>,
    options: ReplayOptions,
) -> Result<(Written, ReplayStats), Error> {
    let rule = options.region_rule.clone();
    let mut builder = Recovery::builder(Arc::clone(cluster)).options(options);
    for (p, index) in (0..).zip(indexes) {
        builder = builder.index(topic, p, index);
    }
    for (&(p, region), &from) in checkpoints {
        builder = builder.region(topic, p, region, from);
    }
    let mut recovery = builder.build().await?;
    let mut got = Written::new();
    // Every region asked for is in the output, even with nothing to yield.
    for &(p, region) in checkpoints.keys() {
        got.entry(p).or_default().entry(region).or_default();
    }
    while let Some(entry) = recovery.next().await {
        let entry = entry?;
        assert_eq!(&*entry.topic, topic);
        assert_eq!(
            rule.region(&entry.record),
            Some(entry.region),
            "offset {} tagged with the wrong region",
            entry.record.offset()
        );
        got.entry(entry.partition)
            .or_default()
            .get_mut(&entry.region)
            .unwrap_or_else(|| panic!("region {} was not asked for", entry.region))
            .push((entry.record.offset(), entry.record.value_bytes().unwrap()));
    }
    Ok((got, recovery.stats()))
}
