//! Unit tests of the replay driver: how many core polls an entry costs.

use std::collections::BTreeMap;

use bytes::Bytes;
use futures::StreamExt;
use walfetch_codec::{BatchBuilder, Compression, NewRecord};
use walfetch_testkit::ScriptedCluster;

use crate::cluster::{Cluster, ClusterConfig};
use crate::consumer::Recovery;
use crate::index::{Hint, IndexEntry, IndexSource, RegionId, WalIndex};

const TOPICS: usize = 32;
const REGIONS: u64 = 4;
const BATCHES: i64 = 60;

/// `TOPICS` topics of one partition, each of `BATCHES` region-pure lz4
/// batches of two records, regions in turn; each partition's index.
fn write_topics(scripted: &ScriptedCluster) -> Vec<(String, WalIndex)> {
    let mut indexes = Vec::new();
    for t in 0..TOPICS {
        let topic = format!("wal-{t}");
        let id = scripted.create_topic(&topic, 1).expect("topic");
        let mut index = WalIndex::new();
        index.set_source(IndexSource::new(&topic, 0).with_topic_id(id));
        for b in 0..BATCHES {
            let region = b.unsigned_abs() % REGIONS;
            let records: Vec<NewRecord> = (0..2)
                .map(|i| NewRecord {
                    key: Some(Bytes::copy_from_slice(&region.to_be_bytes())),
                    ..NewRecord::value(i, format!("{topic} batch {b} record {i}"))
                })
                .collect();
            let batch = BatchBuilder::new(0)
                .compression(Compression::Lz4)
                .encode(&records)
                .expect("encoded");
            let len = u32::try_from(batch.bytes.len()).expect("small");
            let base = scripted.append(&topic, 0, batch.bytes).expect("appended");
            for offset in base..base + 2 {
                let hint = Hint {
                    batch_base: base,
                    batch_len: len,
                    record_end: len,
                };
                let entry = IndexEntry {
                    offset,
                    hint: Some(hint),
                };
                index.push(region, entry).expect("in order");
            }
        }
        index.set_last_index(2 * BATCHES - 1);
        indexes.push((topic, index));
    }
    indexes
}

/// Recovers every region of every topic from offset 0, checking that
/// each gets all its entries; the recovery, ended.
async fn recover_all(cluster: Cluster, indexes: &[(String, WalIndex)]) -> Recovery {
    let mut builder = Recovery::builder(std::sync::Arc::new(cluster));
    for (topic, index) in indexes {
        builder = builder.index(topic.as_str(), 0, index);
        for region in 0..REGIONS {
            builder = builder.region(topic.as_str(), 0, region, 0);
        }
    }
    let mut recovery = builder.build().await.expect("built");
    let mut got: BTreeMap<(String, RegionId), u64> = BTreeMap::new();
    while let Some(entry) = recovery.next().await {
        let entry = entry.expect("an entry");
        *got.entry((entry.topic.to_string(), entry.region))
            .or_default() += 1;
    }
    assert_eq!(got.len(), TOPICS * REGIONS as usize);
    assert!(got.values().all(|&n| n == 2 * BATCHES as u64 / REGIONS));
    recovery
}

/// A restart recovering regions of many partitions polls a core for
/// an entry about once an entry, not once per partition for each:
/// only the cores handed something since they last had nothing to
/// yield take turns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entry_costs_one_core_poll_however_many_partitions() {
    let scripted = ScriptedCluster::start(1).await.expect("scripted broker");
    let indexes = write_topics(&scripted);
    let cluster = Cluster::connect(ClusterConfig::new([scripted.bootstrap()]))
        .await
        .expect("connected");
    let recovery = recover_all(cluster, &indexes).await;
    // An entry is one poll; besides, a core polled with nothing to
    // yield once after each answer, once at the start and once when
    // it ends.
    let stats = recovery.stats();
    let entries = stats.entries;
    assert_eq!(entries, TOPICS as u64 * 2 * BATCHES as u64);
    let polls = recovery.driver.entry_polls;
    let bound = entries + stats.fetches + 2 * TOPICS as u64;
    assert!(
        polls <= bound,
        "{polls} polls of cores for {entries} entries over {TOPICS} partitions \
         ({} fetches): more than {bound}",
        stats.fetches
    );
}
