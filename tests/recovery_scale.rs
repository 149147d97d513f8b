//! A restart at GreptimeDB's scale, against the scripted broker that
//! follows Kafka's fetch rules: 64 topics of one partition, 16 regions
//! each (1024 regions), region-pure lz4 batches, every region from its own
//! checkpoint, in one `Recovery`. Each region gets exactly its entries,
//! and the work is bounded by the regions' wanted batches and the number
//! of partitions, not by their product: fetches, Metadata requests,
//! connections, memory. Its cost is measured, not asserted here (see the
//! replay bench's restart).
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt;
use kafka_protocol::messages::ApiKey;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use walfetch::cluster::{Cluster, ClusterConfig};
use walfetch::codec::{BatchBuilder, Compression, NewRecord};
use walfetch::consumer::{Recovery, ReplayOptions};
use walfetch::index::{Hint, IndexEntry, IndexSource, RegionId, WalIndex};
use walfetch_testkit::ScriptedCluster;

const TOPICS: usize = 64;
const REGIONS: u64 = 16;
/// Batches a partition: of one region each, 1-4 records.
const BATCHES: usize = 150;

/// One partition as written: per region, `(offset, value, batch base)`.
type Written = BTreeMap<RegionId, Vec<(i64, Bytes, i64)>>;

/// Writes `topic`'s one partition as GreptimeDB does (a batch a region
/// write, lz4, skewed regions) with the writer's exact hints; what it
/// wrote and its index.
fn write(scripted: &ScriptedCluster, t: usize, rng: &mut StdRng) -> (Written, WalIndex) {
    let topic = format!("wal_{t}");
    let id = scripted.create_topic(&topic, 1).unwrap();
    let mut index = WalIndex::new();
    index.set_source(IndexSource::new(&topic, 0).with_topic_id(id));
    let mut written = Written::new();
    for b in 0..BATCHES {
        // Every region once first, then skewed: low regions are hot.
        let k = match b as u64 {
            b if b < REGIONS => b,
            _ => rng
                .random_range(0..REGIONS)
                .min(rng.random_range(0..REGIONS)),
        };
        let region = t as u64 * 100 + k;
        let n = rng.random_range(1..=4);
        let values: Vec<Bytes> = (0..n)
            .map(|i| {
                let pad = "x".repeat(rng.random_range(50..400));
                Bytes::from(format!("t{t} r{region} b{b} i{i} {pad}"))
            })
            .collect();
        let records: Vec<NewRecord> = (0..n)
            .map(|i| NewRecord {
                key: Some(Bytes::copy_from_slice(&region.to_be_bytes())),
                ..NewRecord::value(i, values[i as usize].clone())
            })
            .collect();
        let batch = BatchBuilder::new(0)
            .compression(Compression::Lz4)
            .encode(&records)
            .unwrap();
        let len = u32::try_from(batch.bytes.len()).unwrap();
        let base = scripted.append(&topic, 0, batch.bytes).unwrap();
        for (i, value) in (0..).zip(values) {
            let hint = Hint {
                batch_base: base,
                batch_len: len,
                record_end: len,
            };
            let entry = IndexEntry {
                offset: base + i,
                hint: Some(hint),
            };
            index.push(region, entry).unwrap();
            written
                .entry(region)
                .or_default()
                .push((base + i, value, base));
        }
    }
    index.set_last_index(scripted.high_watermark(&topic, 0).unwrap() - 1);
    (written, index)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_of_64_topics_and_1024_regions_gets_each_region_exactly() {
    let scripted = ScriptedCluster::start(1).await.expect("scripted broker");
    let mut rng = StdRng::seed_from_u64(0x5ca1e);
    let (written, indexes): (Vec<Written>, Vec<WalIndex>) =
        (0..TOPICS).map(|t| write(&scripted, t, &mut rng)).unzip();
    let cluster = Arc::new(
        Cluster::connect(ClusterConfig::new([scripted.bootstrap()]))
            .await
            .unwrap(),
    );
    // Checkpoints spread over each region's entries (some past its last).
    let options = ReplayOptions::default();
    let mut builder = Recovery::builder(Arc::clone(&cluster)).options(options.clone());
    let mut want: BTreeMap<(String, RegionId), Vec<(i64, Bytes)>> = BTreeMap::new();
    let mut wanted_batches = 0;
    for (t, (regions, index)) in written.iter().zip(&indexes).enumerate() {
        let topic = format!("wal_{t}");
        builder = builder.index(topic.as_str(), 0, index);
        let mut batches = BTreeSet::new();
        for (&region, entries) in regions {
            let i = rng.random_range(0..=entries.len());
            let from = entries.get(i).map_or_else(|| entries[i - 1].0 + 1, |e| e.0);
            builder = builder.region(topic.as_str(), 0, region, from);
            batches.extend(entries[i..].iter().map(|e| e.2));
            let entries = entries[i..].iter().map(|(o, v, _)| (*o, v.clone()));
            want.insert((topic.clone(), region), entries.collect());
        }
        wanted_batches += batches.len() as u64;
    }
    assert_eq!(
        want.len(),
        TOPICS * REGIONS as usize,
        "every region written"
    );
    scripted.reset_stats();
    let mut recovery = builder.build().await.unwrap();
    let mut got: BTreeMap<(String, RegionId), Vec<(i64, Bytes)>> =
        want.keys().map(|k| (k.clone(), Vec::new())).collect();
    while let Some(entry) = recovery.next().await {
        let entry = entry.unwrap();
        got.get_mut(&(entry.topic.to_string(), entry.region))
            .unwrap_or_else(|| panic!("region {} was not asked for", entry.region))
            .push((entry.record.offset(), entry.record.value_bytes().unwrap()));
    }
    for (key, entries) in &want {
        assert!(got[key] == *entries, "{key:?}: not exactly its entries");
    }
    let stats = recovery.stats();
    let broker = scripted.stats(scripted.node_ids()[0]).unwrap();
    // A fetch a run of wanted batches at most, besides each partition's
    // look at its end; requests carry one or more of them.
    assert!(
        stats.fetches <= wanted_batches + TOPICS as u64,
        "{} fetches for {wanted_batches} wanted batches",
        stats.fetches
    );
    // One pass, not region by region: fewer fetches than regions.
    assert!(
        stats.fetches < TOPICS as u64 * REGIONS,
        "{} fetches",
        stats.fetches
    );
    assert!(stats.requests <= stats.fetches);
    assert_eq!(broker.requests_of(ApiKey::Fetch), stats.requests);
    // One read of the topics' metadata at the start, one confirming their
    // ids at the end; one look at each partition's end.
    assert_eq!(broker.requests_of(ApiKey::Metadata), 2);
    assert_eq!(broker.requests_of(ApiKey::ListOffsets), TOPICS as u64);
    // The fetch connections of one broker, however many partitions.
    let per_broker = ClusterConfig::new(["x:1"]).connections_per_broker as u64;
    assert!(
        broker.connections <= per_broker,
        "{} connections",
        broker.connections
    );
    assert!(stats.peak_buffered_bytes <= options.max_buffered_bytes);
}
