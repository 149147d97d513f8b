//! The index binds to what it indexed, against the scripted broker: a
//! replay refuses an index of another topic, partition or topic
//! incarnation, one past the log's end, a start below its first offset, a
//! rule other than its own unless forced, and a region it does not list
//! unless the log past `last_index` may hold it; an entry read at an
//! indexed offset that is not of its region is an error, never output.
//! `build_index` records what it indexes and, from an offset inside a batch
//! on a broker that skips that batch, still indexes every record from it;
//! it leaves out records of aborted transactions, reads past the empty
//! batches and offset gaps the log cleaner leaves, and asks again for a
//! batch the broker cut, failing rather than ending early when it stays
//! cut. An index imported from
//! GreptimeDB binds as GreptimeDB meant it: its `last_index` is the log end
//! (exclusive), and a region it lists with no entries replays empty.
#![allow(clippy::unwrap_used)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use kafka_protocol::messages::ApiKey;
use support::recovery::{dumped_at, write_partition, Written};
use walfetch::cluster::{ClientError, Cluster, ClusterConfig, FetchParams, RetryPolicy};
use walfetch::codec::{BatchBuilder, NewRecord};
use walfetch::connection::VersionPolicy;
use walfetch::consumer::{Recovery, ReplayOptions};
use walfetch::error::{Error, Mismatch};
use walfetch::index::{IdFormat, IndexSource, RegionId, RegionRule, WalIndex};
use walfetch::scan::{build_index, BuildError};
use walfetch::writer::WriterConfig;
use walfetch_testkit::{Fault, FaultAction, Habits, ScriptedCluster};

async fn connect(scripted: &ScriptedCluster) -> Arc<Cluster> {
    let mut config = ClusterConfig::new([scripted.bootstrap()]);
    config.retry = RetryPolicy {
        deadline: Duration::from_secs(10),
        ..RetryPolicy::default()
    };
    Arc::new(Cluster::connect(config).await.expect("connect"))
}

/// Topic `wal` of two partitions: partition 0 holds regions 1 and 2 in
/// turn, partition 1 only region 3; the writers' indexes.
async fn two_partitions() -> (ScriptedCluster, Arc<Cluster>, Written, Vec<WalIndex>) {
    let scripted = ScriptedCluster::start(1).await.expect("scripted broker");
    scripted.create_topic("wal", 2).expect("topic");
    scripted.create_topic("other", 1).expect("topic");
    let cluster = connect(&scripted).await;
    let mut written = Written::new();
    let mut indexes = Vec::new();
    for p in 0..2 {
        let mut config = WriterConfig::new("wal", p);
        config.max_batch_bytes = 600;
        let entries = (0..60u64).map(|n| {
            let region = if p == 0 { 1 + n % 2 } else { 3 };
            (region, Bytes::from(format!("p{p} n{n} {}", "x".repeat(40))))
        });
        indexes.push(write_partition(&cluster, config, entries, &mut written).await);
    }
    (scripted, cluster, written, indexes)
}

/// Recovers `region` of `topic`/`partition` from `from` with `index`; the
/// offsets it got, or the error.
async fn replay(
    cluster: &Arc<Cluster>,
    index: &WalIndex,
    (topic, partition): (&str, i32),
    region: RegionId,
    from: i64,
    options: ReplayOptions,
) -> Result<Vec<i64>, Error> {
    let mut recovery = Recovery::builder(Arc::clone(cluster))
        .options(options)
        .index(topic, partition, index)
        .region(topic, partition, region, from)
        .build()
        .await?;
    let mut got = Vec::new();
    while let Some(entry) = recovery.next().await {
        got.push(entry?.record.offset());
    }
    Ok(got)
}

fn mismatch(result: Result<Vec<i64>, Error>) -> Mismatch {
    match result {
        Err(Error::IndexMismatch { mismatch, .. }) => mismatch,
        other => panic!("expected an index mismatch, got {other:?}"),
    }
}

fn offsets(written: &Written, p: i32, region: RegionId) -> Vec<i64> {
    written[&p][&region].iter().map(|(o, _)| *o).collect()
}

#[tokio::test]
async fn the_writers_index_records_its_source_and_replays() {
    let (scripted, cluster, written, indexes) = two_partitions().await;
    let source = indexes[0].source();
    assert_eq!(source.topic.as_deref(), Some("wal"));
    assert_eq!(source.partition, Some(0));
    assert_eq!(source.topic_id, scripted.topic_id("wal"));
    assert_eq!(source.rule, Some(RegionRule::Key(IdFormat::BigEndian)));
    let got = replay(
        &cluster,
        &indexes[0],
        ("wal", 0),
        1,
        0,
        ReplayOptions::default(),
    )
    .await;
    assert_eq!(got.unwrap(), offsets(&written, 0, 1));
}

#[tokio::test]
async fn an_index_of_another_topic_or_partition_is_refused() {
    let (_scripted, cluster, _, indexes) = two_partitions().await;
    let o = ReplayOptions::default;
    let on_p1 = replay(&cluster, &indexes[0], ("wal", 1), 1, 0, o()).await;
    assert_eq!(mismatch(on_p1), Mismatch::Partition { indexed: 0 });
    let other = replay(&cluster, &indexes[0], ("other", 0), 1, 0, o()).await;
    let err = other.unwrap_err().to_string();
    assert!(
        err.contains("\"other\"") && err.contains("the index is of topic \"wal\""),
        "{err}"
    );
}

#[tokio::test]
async fn an_index_of_a_recreated_topic_is_refused() {
    let (scripted, cluster, _, indexes) = two_partitions().await;
    // The index as it was built before the topic was deleted and created
    // again: another topic id.
    let mut old = indexes[0].clone();
    let before = uuid::Uuid::from_u128(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef);
    old.set_source(old.source().clone().with_topic_id(before));
    let got = replay(&cluster, &old, ("wal", 0), 1, 0, ReplayOptions::default()).await;
    assert_eq!(
        mismatch(got),
        Mismatch::TopicId {
            indexed: before,
            current: scripted.topic_id("wal").unwrap()
        }
    );
}

/// How the client of [`wal_of_200`] names topics in its Fetch requests.
#[derive(Debug, Clone, Copy)]
enum FetchNames {
    /// By name (Fetch v11, walfetch's default): the broker reads whatever
    /// has the name, and only the id metadata gives tells the topics apart.
    Names,
    /// By topic id (Fetch v13+, KIP-516): the request carries the id.
    Ids,
}

/// Topic `wal` of one partition, 200 entries of regions 1 and 2 in turn
/// (one region a batch of about 600 bytes), and a client whose fetches
/// name topics as `names` says; the writer's index.
async fn wal_of_200(names: FetchNames) -> (ScriptedCluster, Arc<Cluster>, Written, WalIndex) {
    let scripted = ScriptedCluster::start(1).await.expect("scripted broker");
    scripted.create_topic("wal", 1).expect("topic");
    let mut config = ClusterConfig::new([scripted.bootstrap()]);
    config.retry.deadline = Duration::from_secs(10);
    if let FetchNames::Ids = names {
        config.connection.versions = VersionPolicy::default().with_max(ApiKey::Fetch, 17);
    }
    let cluster = Arc::new(Cluster::connect(config).await.expect("connect"));
    let version = cluster
        .fetch(&FetchParams::new("wal", 0, 0))
        .await
        .unwrap()
        .version;
    assert_eq!(
        version >= 13,
        matches!(names, FetchNames::Ids),
        "Fetch v{version}"
    );
    let mut written = Written::new();
    let config = WriterConfig::new("wal", 0).with_max_batch_bytes(600);
    let entries =
        (0..200u64).map(|k| (1 + k % 2, Bytes::from(format!("old{k} {}", "x".repeat(40)))));
    let index = write_partition(&cluster, config, entries, &mut written).await;
    (scripted, cluster, written, index)
}

/// Recovers region 1 of `wal` from 0 with `index`, one fetch at a time
/// into a 2 KiB buffer, and after its first entry deletes the topic and
/// creates it again (a new topic id), writing a new WAL of the same
/// regions and layout into it. Returns every value yielded and how the
/// recovery ended.
async fn recreated_mid_recovery(
    scripted: &ScriptedCluster,
    cluster: &Arc<Cluster>,
    index: &WalIndex,
) -> (Vec<Bytes>, Option<Error>) {
    let mut recovery = Recovery::builder(Arc::clone(cluster))
        .index("wal", 0, index)
        .region("wal", 0, 1, 0)
        .options(
            ReplayOptions::default()
                .with_max_in_flight(1)
                .with_max_buffered_bytes(2 << 10),
        )
        .build()
        .await
        .unwrap();
    let mut got = vec![recovery
        .next()
        .await
        .unwrap()
        .unwrap()
        .record
        .value_bytes()
        .unwrap()];
    scripted.recreate_topic("wal", 1).unwrap();
    let config = WriterConfig::new("wal", 0).with_max_batch_bytes(600);
    let entries =
        (0..200u64).map(|k| (1 + k % 2, Bytes::from(format!("new{k} {}", "y".repeat(40)))));
    write_partition(cluster, config, entries, &mut Written::new()).await;
    while let Some(entry) = recovery.next().await {
        match entry {
            Ok(e) => got.push(e.record.value_bytes().unwrap()),
            Err(e) => return (got, Some(e)),
        }
    }
    (got, None)
}

/// Found in review: the topic id was checked when the recovery was built
/// and never again, and each fetch named the topic as metadata gave it
/// then, so a topic deleted and recreated mid-recovery was read as the
/// indexed one (88 of 100 entries were the new topic's, and the recovery
/// ended well). Every fetch is now bound to the id checked at build, and
/// the recovery ends with the topic-id mismatch naming both ids: at once
/// when its fetches name the topic's id (the broker knows the old id no
/// more), yielding only the old log's entries; at its end when they name
/// the topic (Fetch below v13, the default), where the Metadata read made
/// before the end is told gives the name another id (confirming every
/// answer so would cost a round trip a fetch; the new topic's records it
/// yielded come before an error, so a recovery that ends in one is not
/// done).
#[tokio::test]
async fn a_topic_recreated_mid_recovery_is_a_topic_id_mismatch_not_read_as_the_indexed_one() {
    for names in [FetchNames::Names, FetchNames::Ids] {
        let (scripted, cluster, written, index) = wal_of_200(names).await;
        let old_id = scripted.topic_id("wal").unwrap();
        assert_eq!(index.source().topic_id, Some(old_id));
        let (got, err) = recreated_mid_recovery(&scripted, &cluster, &index).await;
        let old: Vec<&Bytes> = written[&0][&1].iter().map(|(_, v)| v).collect();
        assert!(
            matches!(names, FetchNames::Names)
                || (got.iter().zip(&old).all(|(g, o)| g == *o) && got.len() < old.len()),
            "{names:?}: the recovery yielded {} entries, not a start of the old log's {}: {:?}",
            got.len(),
            old.len(),
            got.iter().find(|g| g.starts_with(b"new"))
        );
        let new_id = scripted.topic_id("wal").unwrap();
        match err {
            Some(Error::IndexMismatch {
                topic,
                partition: 0,
                mismatch: Mismatch::TopicId { indexed, current },
            }) => {
                assert_eq!((topic.as_str(), indexed, current), ("wal", old_id, new_id));
            }
            other => panic!("{names:?}: expected a topic-id mismatch, got {other:?}"),
        }
    }
}

/// The same with an index that records no topic id (as GreptimeDB's
/// imported ones), dumped early so that most of region 1 comes from the
/// scan past `last_index`: the recovery is bound to the id metadata gave
/// when it started, and ends with the mismatch too (reading no record of
/// the new topic when its fetches name the topic's id).
#[tokio::test]
async fn a_topic_recreated_mid_scan_past_last_index_is_a_topic_id_mismatch() {
    for names in [FetchNames::Names, FetchNames::Ids] {
        let (scripted, cluster, written, full) = wal_of_200(names).await;
        let old_id = scripted.topic_id("wal").unwrap();
        let index = dumped_at(&full, written[&0][&1][2].0);
        assert_eq!(index.source().topic_id, None);
        let (got, err) = recreated_mid_recovery(&scripted, &cluster, &index).await;
        assert!(
            matches!(names, FetchNames::Names) || got.iter().all(|g| g.starts_with(b"old")),
            "{names:?}: the scan yielded the new topic's records: {got:?}"
        );
        let new_id = scripted.topic_id("wal").unwrap();
        match err {
            Some(Error::IndexMismatch {
                mismatch: Mismatch::TopicId { indexed, current },
                ..
            }) => assert_eq!((indexed, current), (old_id, new_id)),
            other => panic!("{names:?}: expected a topic-id mismatch, got {other:?}"),
        }
    }
}

/// `build_index` checks the topic id once, and then read whatever had the
/// topic's name: a topic deleted and recreated during the scan would give
/// an index of two logs as one. Its fetches are bound to the id it records:
/// the build fails naming both ids.
#[tokio::test]
async fn a_topic_recreated_mid_build_fails_the_build() {
    for names in [FetchNames::Names, FetchNames::Ids] {
        let (scripted, cluster, _, _) = wal_of_200(names).await;
        let old_id = scripted.topic_id("wal").unwrap();
        // The build's first fetch is answered late: the topic is recreated
        // meanwhile, and its next fetch is of the new topic.
        scripted
            .script(Fault::on(ApiKey::Fetch).then(FaultAction::Delay(Duration::from_millis(500))));
        let rule = RegionRule::Key(IdFormat::BigEndian);
        let build = build_index(&cluster, "wal", 0, &rule, 0, None, 600);
        let recreate = async {
            tokio::time::sleep(Duration::from_millis(100)).await;
            scripted.recreate_topic("wal", 1).unwrap();
            let config = WriterConfig::new("wal", 0).with_max_batch_bytes(600);
            let entries =
                (0..200u64).map(|k| (1 + k % 2, Bytes::from(format!("new{k} {}", "y".repeat(40)))));
            write_partition(&cluster, config, entries, &mut Written::new()).await;
        };
        let (built, ()) = tokio::join!(build, recreate);
        let new_id = scripted.topic_id("wal").unwrap();
        match built {
            Err(BuildError::Client(ClientError::TopicIdChanged {
                topic,
                partition: 0,
                expected,
                current,
            })) => assert_eq!((topic.as_str(), expected, current), ("wal", old_id, new_id)),
            other => panic!("{names:?}: expected the build to fail on the topic id, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn an_index_past_the_high_watermark_is_refused() {
    let (scripted, cluster, _, indexes) = two_partitions().await;
    let hw = scripted.high_watermark("wal", 0).unwrap();
    let mut longer = indexes[0].clone();
    longer.set_last_index(hw + 100);
    let got = replay(
        &cluster,
        &longer,
        ("wal", 0),
        1,
        0,
        ReplayOptions::default(),
    )
    .await;
    assert_eq!(
        mismatch(got),
        Mismatch::LastIndexPastEnd {
            last_index: hw + 100,
            high_watermark: hw
        }
    );
}

#[tokio::test]
async fn an_entry_of_another_region_at_an_indexed_offset_is_an_error_not_output() {
    let (_scripted, cluster, written, indexes) = two_partitions().await;
    // Partition 0's index with no source but its rule (as a version 1 file
    // replayed with the rule given), used on partition 1: the offsets it
    // gives region 1 hold region 3 there.
    let mut blind = indexes[0].clone();
    blind.set_source(IndexSource::default());
    let with_rule = ReplayOptions::default().with_region_rule(RegionRule::Key(IdFormat::BigEndian));
    let got = replay(&cluster, &blind, ("wal", 1), 1, 0, with_rule).await;
    let first = offsets(&written, 0, 1)[0];
    let err = got.unwrap_err();
    assert!(
        err.to_string().contains(&format!(
            "the index does not match this partition at offset {first}"
        )),
        "{err}"
    );
    assert!(
        matches!(
            &err,
            Error::IndexMismatch {
                mismatch: Mismatch::Entry {
                    found: Some(3),
                    region: 1,
                    ..
                },
                ..
            }
        ),
        "{err:?}"
    );
    // The rule unknown, nothing can be checked: the old behaviour.
    let unchecked = replay(&cluster, &blind, ("wal", 1), 1, 0, ReplayOptions::default()).await;
    assert!(!unchecked.unwrap().is_empty());
}

#[tokio::test]
async fn a_region_absent_from_the_index_is_refused_unless_the_tail_may_hold_it() {
    let (_scripted, cluster, written, indexes) = two_partitions().await;
    let got = replay(
        &cluster,
        &indexes[0],
        ("wal", 0),
        99,
        0,
        ReplayOptions::default(),
    )
    .await;
    let err = got.unwrap_err().to_string();
    assert!(err.contains("region 99 has no entry in the index"), "{err}");
    // Dumped halfway, the log past last_index may hold region 99's
    // entries: read (and here empty).
    let cut = offsets(&written, 0, 2)[10];
    let mut half = dumped_at(&indexes[0], cut);
    half.set_source(indexes[0].source().clone());
    let got = replay(&cluster, &half, ("wal", 0), 99, 0, ReplayOptions::default()).await;
    assert_eq!(got.unwrap(), Vec::<i64>::new());
    // And a listed region gets its entries on both sides of last_index.
    let got = replay(&cluster, &half, ("wal", 0), 2, 0, ReplayOptions::default()).await;
    assert_eq!(got.unwrap(), offsets(&written, 0, 2));
}

/// `n` records in batches of `per_batch`, the region id of record `i`
/// (`i % 3 + 1`) written in decimal both in the key and in header
/// `region`.
async fn decimal_records(cluster: &Cluster, topic: &str, n: usize, per_batch: usize) {
    for (b, chunk) in (0..n).collect::<Vec<_>>().chunks(per_batch).enumerate() {
        let records: Vec<NewRecord> = chunk
            .iter()
            .enumerate()
            .map(|(d, &i)| {
                let id = Bytes::from((i % 3 + 1).to_string());
                NewRecord {
                    offset_delta: i32::try_from(d).unwrap(),
                    timestamp: i64::try_from(i).unwrap(),
                    key: Some(id.clone()),
                    value: Some(Bytes::from(format!("record {i}"))),
                    headers: vec![(Bytes::from_static(b"region"), Some(id))],
                }
            })
            .collect();
        let batch = BatchBuilder::new(0).encode(&records).unwrap();
        cluster
            .produce(topic, 0, batch.bytes)
            .await
            .unwrap_or_else(|e| panic!("batch {b}: {e}"));
    }
}

#[tokio::test]
async fn build_from_inside_a_batch_indexes_every_record_from_there() {
    let scripted = ScriptedCluster::builder()
        .habits(Habits::TANSU_0_6)
        .start()
        .await
        .expect("scripted broker");
    scripted.create_topic("wal", 1).expect("topic");
    let cluster = connect(&scripted).await;
    decimal_records(&cluster, "wal", 100, 10).await;
    let rule = RegionRule::Header("region".into(), IdFormat::Decimal);
    // 15 is inside the batch 10..=19, which this broker skips.
    let (index, report) = build_index(&cluster, "wal", 0, &rule, 15, None, 1 << 20)
        .await
        .unwrap();
    let all: Vec<i64> = {
        let mut v: Vec<i64> = index
            .regions()
            .flat_map(|(_, r)| r.entries().iter().map(|e| e.offset))
            .collect();
        v.sort_unstable();
        v
    };
    assert_eq!(all, (15..100).collect::<Vec<_>>(), "{report:?}");
    assert!(report.realigned > 0, "{report:?}");
    assert_eq!(index.last_index(), Some(99));
    let source = index.source();
    assert_eq!(source.first_offset, Some(15));
    assert_eq!(source.rule, Some(rule.clone()));
    assert_eq!(source.topic_id, scripted.topic_id("wal"));
    // Replays from its first offset on work; from below, they are refused.
    let got = replay(
        &cluster,
        &index,
        ("wal", 0),
        1,
        15,
        ReplayOptions::default(),
    )
    .await;
    let want: Vec<i64> = (15..100).filter(|i| i % 3 == 0).collect();
    assert_eq!(got.unwrap(), want);
    let below = replay(
        &cluster,
        &index,
        ("wal", 0),
        1,
        14,
        ReplayOptions::default(),
    )
    .await;
    assert_eq!(
        mismatch(below),
        Mismatch::BeforeFirstOffset {
            region: 1,
            from: 14,
            first_offset: 15
        }
    );
}

/// A broker that answers fetches that may not wait with no records and no
/// error below the readable end (storage slower than the wait; Kafka
/// answers so when a tiered-storage read outlasts its
/// `remote.fetch.max.wait.ms`): the build asks again allowing a wait and
/// indexes every record, from the start or from inside a batch. Before,
/// it took the first empty answer for the log's end and returned an index
/// of nothing, complete "up to" the offset before `from`, with no error.
/// A broker that never reads them is an error naming the offset, not an
/// index that ends early.
#[tokio::test]
async fn build_on_a_broker_that_answers_hurried_fetches_with_no_records_indexes_everything() {
    let scripted = ScriptedCluster::builder()
        .habits(Habits::EMPTY_WHEN_HURRIED)
        .start()
        .await
        .expect("scripted broker");
    scripted.create_topic("wal", 1).expect("topic");
    let cluster = connect(&scripted).await;
    decimal_records(&cluster, "wal", 100, 10).await;
    let rule = RegionRule::Header("region".into(), IdFormat::Decimal);
    for from in [0, 15] {
        let (index, report) = build_index(&cluster, "wal", 0, &rule, from, None, 1 << 20)
            .await
            .unwrap();
        let mut all: Vec<i64> = index
            .regions()
            .flat_map(|(_, r)| r.entries().iter().map(|e| e.offset))
            .collect();
        all.sort_unstable();
        assert_eq!(all, (from..100).collect::<Vec<_>>(), "{report:?}");
        assert_eq!(index.last_index(), Some(99), "{report:?}");
    }
    for node in scripted.node_ids() {
        let habits = Habits {
            empty_below_wait_ms: 10_000,
            ..Habits::KAFKA
        };
        scripted.set_habits(node, habits).unwrap();
    }
    let err = build_index(&cluster, "wal", 0, &rule, 0, None, 1 << 20)
        .await
        .expect_err("no records, ever");
    assert!(
        matches!(
            err,
            BuildError::NoRecords {
                offset: 0,
                readable_end: 100,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("offset 0"), "{err}");
}

#[tokio::test]
async fn the_stored_rule_is_the_default_and_another_is_refused_unless_forced() {
    let scripted = ScriptedCluster::start(1).await.expect("scripted broker");
    scripted.create_topic("wal", 1).expect("topic");
    let cluster = connect(&scripted).await;
    decimal_records(&cluster, "wal", 90, 10).await;
    let rule = RegionRule::Header("region".into(), IdFormat::Decimal);
    let (full, _) = build_index(&cluster, "wal", 0, &rule, 0, None, 1 << 20)
        .await
        .unwrap();
    // Complete up to 44: the rest is a scan split by the rule, which must
    // be the index's (the default rule, the key read big-endian, finds
    // regions 49..51 there).
    let mut half = dumped_at(&full, 44);
    half.set_source(full.source().clone());
    let want: Vec<i64> = (0..90).filter(|i| i % 3 == 1).collect();
    let got = replay(&cluster, &half, ("wal", 0), 2, 0, ReplayOptions::default()).await;
    assert_eq!(got.unwrap(), want);
    // Another rule given: refused, naming both.
    let be = ReplayOptions::default().with_region_rule(RegionRule::Key(IdFormat::BigEndian));
    let err = replay(&cluster, &half, ("wal", 0), 2, 0, be.clone())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("(key, be)") && err.contains("(header \"region\", decimal)"),
        "{err}"
    );
    // Forced, it is used: here a rule that reads the same ids elsewhere.
    let key_decimal = ReplayOptions::default()
        .with_region_rule(RegionRule::Key(IdFormat::Decimal))
        .with_force_rule(true);
    let got = replay(&cluster, &half, ("wal", 0), 2, 0, key_decimal).await;
    assert_eq!(got.unwrap(), want);
    // Forced with a rule that is wrong: the entries say so.
    let got = replay(&cluster, &half, ("wal", 0), 2, 0, be.with_force_rule(true)).await;
    assert!(
        matches!(
            mismatch(got),
            Mismatch::Entry {
                offset: 1,
                region: 2,
                ..
            }
        ),
        "forced wrong rule"
    );
}

#[tokio::test]
async fn build_warns_of_a_rule_that_finds_nothing_or_decimal_ids_read_big_endian() {
    let scripted = ScriptedCluster::start(1).await.expect("scripted broker");
    scripted.create_topic("wal", 1).expect("topic");
    let cluster = connect(&scripted).await;
    decimal_records(&cluster, "wal", 30, 10).await;
    let be = RegionRule::Key(IdFormat::BigEndian);
    let (index, report) = build_index(&cluster, "wal", 0, &be, 0, None, 1 << 20)
        .await
        .unwrap();
    // "1", "2", "3" read big-endian: regions 49, 50, 51.
    assert_eq!(
        index.regions().map(|(r, _)| r).collect::<Vec<_>>(),
        [49, 50, 51]
    );
    let warnings = report.warnings(&be);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("--region-format decimal"),
        "{warnings:?}"
    );
    let missing = RegionRule::Header("shard".into(), IdFormat::Decimal);
    let (_, report) = build_index(&cluster, "wal", 0, &missing, 0, None, 1 << 20)
        .await
        .unwrap();
    let warnings = report.warnings(&missing);
    assert!(
        warnings.len() == 1 && warnings[0].contains("found no region in 30 of 30 records"),
        "{warnings:?}"
    );
    let decimal = RegionRule::Key(IdFormat::Decimal);
    let (_, report) = build_index(&cluster, "wal", 0, &decimal, 0, None, 1 << 20)
        .await
        .unwrap();
    assert!(report.warnings(&decimal).is_empty());
}

/// Found by the fault soak: checking the index's topic id asked for the
/// partition's leader once, so a Metadata answer with a retriable error
/// (no leader yet) ended the recovery instead of being retried.
#[tokio::test]
async fn the_topic_id_check_rides_out_a_retriable_metadata_error() {
    let (scripted, _, written, indexes) = two_partitions().await;
    // A client that has not read the topic's metadata yet.
    let cluster = connect(&scripted).await;
    scripted.script(
        Fault::on(ApiKey::Metadata)
            .times(2)
            .then(FaultAction::PartitionError(5)), // LEADER_NOT_AVAILABLE
    );
    let got = replay(
        &cluster,
        &indexes[0],
        ("wal", 0),
        1,
        0,
        ReplayOptions::default(),
    )
    .await;
    assert_eq!(got.unwrap(), offsets(&written, 0, 1));
}

/// GreptimeDB's topic in [`greptime_log`].
const GREPTIME_TOPIC: &str = "greptimedb_wal_topic_0";

/// A topic of one record a batch, GreptimeDB's record meta as each key:
/// record `n` is of `regions[n]`.
async fn greptime_log(regions: &[RegionId]) -> (ScriptedCluster, Arc<Cluster>) {
    let scripted = ScriptedCluster::start(1).await.expect("scripted broker");
    scripted.create_topic(GREPTIME_TOPIC, 1).unwrap();
    for (n, region) in regions.iter().enumerate() {
        let batch = BatchBuilder::new(0)
            .encode(&[NewRecord {
                offset_delta: 0,
                timestamp: 1_700_000_000_000,
                key: Some(support::greptime::key(
                    r#""Full""#,
                    n as u64,
                    *region,
                    GREPTIME_TOPIC,
                )),
                value: Some(Bytes::from(format!("entry {n}"))),
                headers: Vec::new(),
            }])
            .unwrap();
        scripted.append(GREPTIME_TOPIC, 0, batch.bytes).unwrap();
    }
    let cluster = connect(&scripted).await;
    (scripted, cluster)
}

/// The index of GreptimeDB's `index.json` for [`GREPTIME_TOPIC`].
fn import_greptime_json(json: &str) -> WalIndex {
    walfetch::index::import_greptime(json.as_bytes(), "index.json")
        .unwrap()
        .remove(GREPTIME_TOPIC)
        .unwrap()
}

/// `region` of partition 0 from offset 0 to the log's end, with a
/// [`Consumer`](walfetch::consumer::Consumer) (which, unlike a recovery,
/// takes a region the index does not list); the offsets, or the error.
async fn consume(
    cluster: &Arc<Cluster>,
    index: &WalIndex,
    topic: &str,
    region: RegionId,
    options: ReplayOptions,
) -> Result<Vec<i64>, String> {
    use walfetch::consumer::{Consumer, ReplayRange};
    let range = ReplayRange {
        topic: topic.into(),
        partition: 0,
        region,
        from: 0,
        to: None,
    };
    let mut consumer = Consumer::new(Arc::clone(cluster), index, range, options)
        .await
        .map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    while let Some(r) = consumer.next().await {
        out.push(r.map_err(|e| e.to_string())?.offset());
    }
    Ok(out)
}

/// GreptimeDB's `last_index` is the log end offset its worker read
/// (`get_offset(OffsetAt::Latest)`, exclusive), and GreptimeDB replays
/// `last_index..end` itself. Dumped when the log ended at 2; region 7
/// then wrote offset 2, which the replay must read.
#[tokio::test]
async fn greptime_last_index_is_exclusive_the_record_at_it_is_replayed() {
    let (_scripted, cluster) = greptime_log(&[7, 8, 7]).await;
    let index = import_greptime_json(&format!(
        r#"{{"{GREPTIME_TOPIC}": {{"regions": {{"7": [0], "8": [1]}}, "last_index": 2}}}}"#
    ));
    assert_eq!(index.last_index(), Some(1));
    let got = consume(
        &cluster,
        &index,
        GREPTIME_TOPIC,
        7,
        ReplayOptions::default(),
    )
    .await;
    assert_eq!(got, Ok(vec![0, 2]));
}

/// The index of an idle GreptimeDB (nothing written since it was dumped):
/// its `last_index` is the log end, and it is GreptimeDB's own index of
/// this log, not one past its end.
#[tokio::test]
async fn greptime_index_of_an_idle_topic_is_accepted() {
    let (_scripted, cluster) = greptime_log(&[7, 8]).await;
    let index = import_greptime_json(&format!(
        r#"{{"{GREPTIME_TOPIC}": {{"regions": {{"7": [0], "8": [1]}}, "last_index": 2}}}}"#
    ));
    let got = consume(
        &cluster,
        &index,
        GREPTIME_TOPIC,
        7,
        ReplayOptions::default(),
    )
    .await;
    assert_eq!(got, Ok(vec![0]));
}

/// GreptimeDB keeps a region whose entries were all truncated on flush as
/// `"7": []`: a region it knows, with nothing to replay. Imported, it
/// replays empty (not `RegionAbsent`), in a recovery too, and an entry it
/// wrote past `last_index` is still found by the scan.
#[tokio::test]
async fn greptime_region_listed_with_no_entries_replays_empty() {
    let (_scripted, cluster) = greptime_log(&[8, 8, 7]).await;
    // Dumped at the log's end (3): nothing of region 7 to replay.
    let idle = import_greptime_json(&format!(
        r#"{{"{GREPTIME_TOPIC}": {{"regions": {{"7": [], "8": [0, 1]}}, "last_index": 3}}}}"#
    ));
    let got = consume(&cluster, &idle, GREPTIME_TOPIC, 7, ReplayOptions::default()).await;
    assert_eq!(got, Ok(vec![]));
    let got = replay(
        &cluster,
        &idle,
        (GREPTIME_TOPIC, 0),
        7,
        0,
        ReplayOptions::default(),
    )
    .await;
    assert_eq!(got.unwrap(), Vec::<i64>::new());
    // Dumped at 2: region 7's entry at 2 is past it, read by the scan.
    let earlier = import_greptime_json(&format!(
        r#"{{"{GREPTIME_TOPIC}": {{"regions": {{"7": [], "8": [0, 1]}}, "last_index": 2}}}}"#
    ));
    let got = consume(
        &cluster,
        &earlier,
        GREPTIME_TOPIC,
        7,
        ReplayOptions::default(),
    )
    .await;
    assert_eq!(got, Ok(vec![2]));
}

/// A region whose entries are all below the checkpoint an index is
/// truncated at (it flushed everything) stays listed: recovered from the
/// checkpoint it gets nothing, where it was dropped from the index and the
/// recovery refused it as a region the index does not know.
#[tokio::test]
async fn a_region_truncated_to_nothing_recovers_empty() {
    let (_scripted, cluster) = greptime_log(&[8, 8, 7]).await;
    let mut index = import_greptime_json(&format!(
        r#"{{"{GREPTIME_TOPIC}": {{"regions": {{"7": [2], "8": [0, 1]}}, "last_index": 3}}}}"#
    ));
    index.truncate_below(2);
    let got = replay(
        &cluster,
        &index,
        (GREPTIME_TOPIC, 0),
        8,
        2,
        ReplayOptions::default(),
    )
    .await;
    assert_eq!(got.unwrap(), Vec::<i64>::new());
    let got = replay(
        &cluster,
        &index,
        (GREPTIME_TOPIC, 0),
        7,
        2,
        ReplayOptions::default(),
    )
    .await;
    assert_eq!(got.unwrap(), vec![2]);
}

/// A GreptimeDB datanode's index lists only the regions it wrote to
/// since it started: a region it does not list, recovered up to where the
/// index is complete, is refused (its entries below `last_index` are not
/// known) with an error that says why a GreptimeDB index may leave a
/// region out and how to read it without the index; a full scan does.
#[tokio::test]
async fn a_region_absent_from_a_greptime_index_is_refused_with_a_way_forward() {
    let (_scripted, cluster) = greptime_log(&[7, 8]).await;
    let index = import_greptime_json(&format!(
        r#"{{"{GREPTIME_TOPIC}": {{"regions": {{"8": [1]}}, "last_index": 2}}}}"#
    ));
    let err = replay(
        &cluster,
        &index,
        (GREPTIME_TOPIC, 0),
        7,
        0,
        ReplayOptions::default(),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("region 7 has no entry in the index")
            && err.contains("GreptimeDB index lists only the regions its datanode wrote to")
            && err.contains("--strategy scan"),
        "{err}"
    );
    let scan = ReplayOptions::default().with_strategy(walfetch::consumer::StrategyKind::Scan);
    let got = replay(&cluster, &index, (GREPTIME_TOPIC, 0), 7, 0, scan).await;
    assert_eq!(got.unwrap(), vec![0]);
}

/// A region asked of several partitions that no index lists (as
/// `walfetch replay` asks a region of every partition when no index lists
/// it: a GreptimeDB region idle since its datanode started) is read from
/// the scans past `last_index` that may hold it; a partition whose index
/// covers the whole range has nothing of it and is no reason to refuse the
/// recovery. Refused only when no partition may hold it.
#[tokio::test]
async fn a_region_no_index_lists_is_read_where_a_scan_may_hold_it() {
    let scripted = ScriptedCluster::start(1).await.expect("scripted broker");
    let one = |n: u64, region: RegionId, topic: &str| {
        BatchBuilder::new(0)
            .encode(&[NewRecord {
                offset_delta: 0,
                timestamp: 1_700_000_000_000,
                key: Some(support::greptime::key(r#""Full""#, n, region, topic)),
                value: Some(Bytes::from(format!("entry {n}"))),
                headers: Vec::new(),
            }])
            .unwrap()
            .bytes
    };
    for (topic, regions) in [("gt_active", [8, 7]), ("gt_idle", [9, 9])] {
        scripted.create_topic(topic, 1).unwrap();
        for (n, region) in regions.into_iter().enumerate() {
            scripted
                .append(topic, 0, one(n as u64, region, topic))
                .unwrap();
        }
    }
    let cluster = connect(&scripted).await;
    let import = |json: String, topic: &str| {
        walfetch::index::import_greptime(json.as_bytes(), "index.json")
            .unwrap()
            .remove(topic)
            .unwrap()
    };
    // Dumped when `gt_active` ended at 1 (region 7 wrote 1 since), and
    // when `gt_idle` ended where it still does.
    let active = import(
        r#"{"gt_active": {"regions": {"8": [0]}, "last_index": 1}}"#.into(),
        "gt_active",
    );
    let idle = import(
        r#"{"gt_idle": {"regions": {"9": [0, 1]}, "last_index": 2}}"#.into(),
        "gt_idle",
    );
    let recover = |region: RegionId| {
        let cluster = Arc::clone(&cluster);
        let (active, idle) = (&active, &idle);
        async move {
            let mut recovery = Recovery::builder(cluster)
                .index("gt_active", 0, active)
                .index("gt_idle", 0, idle)
                .region("gt_active", 0, region, 0)
                .region("gt_idle", 0, region, 0)
                .build()
                .await?;
            let mut got = Vec::new();
            while let Some(entry) = recovery.next().await {
                let entry = entry?;
                got.push((entry.topic.to_string(), entry.record.offset()));
            }
            Ok::<_, Error>(got)
        }
    };
    assert_eq!(recover(7).await.unwrap(), [("gt_active".to_owned(), 1)]);
    // Region 5: no index lists it and only `gt_active`'s scan may hold it
    // (it holds none of it).
    assert_eq!(recover(5).await.unwrap(), []);
    // Region 8, listed by `gt_active`'s index, asked from past its end
    // there (all flushed): it is `gt_active`'s, with nothing to replay.
    let mut flushed = Recovery::builder(Arc::clone(&cluster))
        .index("gt_active", 0, &active)
        .index("gt_idle", 0, &idle)
        .region("gt_active", 0, 8, 2)
        .region("gt_idle", 0, 8, 0)
        .build()
        .await
        .unwrap();
    assert!(flushed.next().await.is_none());
    // Asked of the idle partition alone, where nothing may hold it.
    let mut alone = Recovery::builder(Arc::clone(&cluster))
        .index("gt_idle", 0, &idle)
        .region("gt_idle", 0, 7, 0)
        .build()
        .await;
    assert!(
        matches!(
            alone,
            Err(Error::IndexMismatch {
                mismatch: Mismatch::RegionAbsent { region: 7, .. },
                ..
            })
        ),
        "{:?}",
        alone.as_mut().err()
    );
}

/// GreptimeDB's log store reads and writes partition 0 of each topic
/// only (its `DEFAULT_PARTITION`), so its index is of partition 0: given
/// for another partition of the topic, it is refused as an index of
/// another partition, not read there (where the scan past `last_index`
/// would hand that partition's records to the region).
#[tokio::test]
async fn a_greptime_index_is_of_partition_zero() {
    let scripted = ScriptedCluster::start(1).await.expect("scripted broker");
    scripted.create_topic(GREPTIME_TOPIC, 2).unwrap();
    for partition in 0..2 {
        for n in 0..3u64 {
            let batch = BatchBuilder::new(0)
                .encode(&[NewRecord {
                    offset_delta: 0,
                    timestamp: 1_700_000_000_000,
                    key: Some(support::greptime::key(r#""Full""#, n, 7, GREPTIME_TOPIC)),
                    value: Some(Bytes::from(format!("p{partition} entry {n}"))),
                    headers: Vec::new(),
                }])
                .unwrap();
            scripted
                .append(GREPTIME_TOPIC, partition, batch.bytes)
                .unwrap();
        }
    }
    let cluster = connect(&scripted).await;
    let index = import_greptime_json(&format!(
        r#"{{"{GREPTIME_TOPIC}": {{"regions": {{"7": []}}, "last_index": 1}}}}"#
    ));
    assert_eq!(index.source().partition, Some(0));
    let got = replay(
        &cluster,
        &index,
        (GREPTIME_TOPIC, 1),
        7,
        0,
        ReplayOptions::default(),
    )
    .await;
    assert_eq!(mismatch(got), Mismatch::Partition { indexed: 0 });
    let got = replay(
        &cluster,
        &index,
        (GREPTIME_TOPIC, 0),
        7,
        0,
        ReplayOptions::default(),
    )
    .await;
    assert_eq!(got.unwrap(), vec![1, 2]);
}

/// A GreptimeDB topic as its metasrv creates it: a no-op record first
/// (no key, no value: `append_noop_record`), then GreptimeDB's records,
/// one a batch, record `n + 1` of `regions[n]`; and, last, a record with
/// region 7's record meta but no value, which GreptimeDB's replay skips
/// as a no-op too (`kafka_record.value.is_none()`).
async fn greptime_log_after_noop(regions: &[RegionId]) -> (ScriptedCluster, Arc<Cluster>) {
    let (scripted, _) = greptime_log(&[]).await;
    let one = |key: Option<Bytes>, value: Option<Bytes>| {
        BatchBuilder::new(0)
            .encode(&[NewRecord {
                offset_delta: 0,
                timestamp: 1_700_000_000_000,
                key,
                value,
                headers: Vec::new(),
            }])
            .unwrap()
            .bytes
    };
    scripted.append(GREPTIME_TOPIC, 0, one(None, None)).unwrap();
    for (n, region) in regions.iter().enumerate() {
        let key = support::greptime::key(r#""Full""#, n as u64, *region, GREPTIME_TOPIC);
        let value = Bytes::from(format!("entry {n}"));
        scripted
            .append(GREPTIME_TOPIC, 0, one(Some(key), Some(value)))
            .unwrap();
    }
    let key = support::greptime::key(r#""Full""#, 0, 7, GREPTIME_TOPIC);
    scripted
        .append(GREPTIME_TOPIC, 0, one(Some(key), None))
        .unwrap();
    let cluster = connect(&scripted).await;
    (scripted, cluster)
}

/// GreptimeDB's no-op records carry no entry: a replay with the GreptimeDB
/// rule does not yield them (GreptimeDB's replay skips every record without
/// a value) nor count them as records the rule finds no region in (which
/// says the rule may be wrong, and every GreptimeDB topic starts with one);
/// `build_index` does not count them as unassigned either, and still
/// tells a rule that reads GreptimeDB's records another way to use
/// `--region-format greptime`. A record with an empty value is an entry.
#[tokio::test]
async fn greptimedb_noop_records_are_not_entries_nor_a_sign_of_a_wrong_rule() {
    let (scripted, cluster) = greptime_log_after_noop(&[7, 8, 7]).await;
    // An empty value: an entry GreptimeDB replays (empty data).
    let key = support::greptime::key(r#""Full""#, 9, 7, GREPTIME_TOPIC);
    let empty = BatchBuilder::new(0)
        .encode(&[NewRecord {
            offset_delta: 0,
            timestamp: 1_700_000_000_000,
            key: Some(key),
            value: Some(Bytes::new()),
            headers: Vec::new(),
        }])
        .unwrap();
    let empty_at = scripted.append(GREPTIME_TOPIC, 0, empty.bytes).unwrap();
    assert_eq!(empty_at, 5);
    // Region 7 wrote offsets 1 and 3 (entries), 4 (no value), 5 (empty).
    let (index, report) = build_index(
        &cluster,
        GREPTIME_TOPIC,
        0,
        &RegionRule::GREPTIMEDB,
        0,
        None,
        1 << 20,
    )
    .await
    .unwrap();
    assert_eq!((report.indexed, report.unassigned), (4, 0), "{report:?}");
    let indexed: Vec<i64> = index
        .region(7)
        .unwrap()
        .entries()
        .iter()
        .map(|e| e.offset)
        .collect();
    assert_eq!(indexed, [1, 3, 5]);
    assert!(report.warnings(&RegionRule::GREPTIMEDB).is_empty());
    let be = RegionRule::Key(IdFormat::BigEndian);
    let (_, report) = build_index(&cluster, GREPTIME_TOPIC, 0, &be, 0, None, 1 << 20)
        .await
        .unwrap();
    let warnings = report.warnings(&be);
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("--region-format greptime")),
        "{warnings:?}"
    );

    // GreptimeDB dumped its index before anything was written
    // (`last_index` 0): the whole log is the scan's.
    let index = import_greptime_json(&format!(
        r#"{{"{GREPTIME_TOPIC}": {{"regions": {{}}, "last_index": 0}}}}"#
    ));
    use walfetch::consumer::{Consumer, ReplayRange};
    let range = ReplayRange {
        topic: GREPTIME_TOPIC.into(),
        partition: 0,
        region: 7,
        from: 0,
        to: None,
    };
    let mut consumer = Consumer::new(
        Arc::clone(&cluster),
        &index,
        range,
        ReplayOptions::default(),
    )
    .await
    .unwrap();
    let mut got = Vec::new();
    while let Some(record) = consumer.next().await {
        let record = record.unwrap();
        got.push((record.offset(), record.value_bytes()));
    }
    assert_eq!(
        got,
        [
            (1, Some(Bytes::from("entry 0"))),
            (3, Some(Bytes::from("entry 2"))),
            (5, Some(Bytes::new())),
        ]
    );
    let stats = consumer.stats();
    assert_eq!(stats.tail_unassigned, 0, "{stats:?}");
    assert_eq!(stats.tail_skipped, 3, "{stats:?}");
}

/// `build_index` over a log with an aborted transaction (as a Java or
/// librdkafka transactional producer leaves it) leaves its records out, as
/// a `read_committed` consumer does: a `read_committed` replay with the
/// index then gets the committed records, not `LostOffsets` on the
/// aborted ones. A transaction still open at the end of the scan is not
/// indexed either: the index ends below it (the last stable offset).
#[tokio::test]
async fn build_index_skips_aborted_transactions() {
    use walfetch::cluster::IsolationLevel;
    use walfetch::codec::ControlType;

    let scripted = ScriptedCluster::start(1).await.expect("scripted broker");
    scripted.create_topic("wal", 1).unwrap();
    let cluster = connect(&scripted).await;
    let key = Bytes::copy_from_slice(&5u64.to_be_bytes());
    let recs = |tag: &str| -> Vec<NewRecord> {
        (0..2)
            .map(|i| NewRecord {
                offset_delta: i,
                key: Some(key.clone()),
                value: Some(Bytes::from(format!("{tag} {i}"))),
                ..NewRecord::default()
            })
            .collect()
    };
    let append = |b: walfetch::codec::EncodedBatch| scripted.append("wal", 0, b.bytes).unwrap();
    let aborted = append(
        BatchBuilder::new(0)
            .producer(2, 0, 0)
            .transactional(true)
            .encode(&recs("aborted"))
            .unwrap(),
    );
    append(
        BatchBuilder::new(0)
            .producer(2, 0, 2)
            .encode_marker(ControlType::Abort, 0, 0)
            .unwrap(),
    );
    let plain = append(BatchBuilder::new(0).encode(&recs("plain")).unwrap());
    let rule = RegionRule::Key(IdFormat::BigEndian);
    let (index, report) = build_index(&cluster, "wal", 0, &rule, 0, None, 1 << 20)
        .await
        .unwrap();
    let indexed: Vec<i64> = index
        .region(5)
        .unwrap()
        .entries()
        .iter()
        .map(|e| e.offset)
        .collect();
    assert_eq!(
        indexed,
        [plain, plain + 1],
        "aborted batch at {aborted}, report {report:?}"
    );
    assert_eq!((report.aborted, report.control), (2, 1));
    let options = ReplayOptions::default().with_isolation(IsolationLevel::ReadCommitted);
    let got = consume(&cluster, &index, "wal", 5, options).await;
    assert_eq!(got, Ok(vec![plain, plain + 1]));

    // A transaction left open: its records may yet be aborted.
    let open = append(
        BatchBuilder::new(0)
            .producer(3, 0, 0)
            .transactional(true)
            .encode(&recs("open"))
            .unwrap(),
    );
    let (index, _) = build_index(&cluster, "wal", 0, &rule, 0, None, 1 << 20)
        .await
        .unwrap();
    assert_eq!(index.last_index(), Some(open - 1));
    assert_eq!(index.region(5).unwrap().len(), 2);
}

/// `n` records of `region` (its id as the key, big-endian), at offset
/// deltas `0, step, 2 * step, ...` (a step above 1: the gaps compaction
/// leaves inside a batch).
fn keyed(region: RegionId, n: i32, step: i32) -> Vec<NewRecord> {
    (0..n)
        .map(|i| NewRecord {
            offset_delta: i * step,
            key: Some(Bytes::copy_from_slice(&region.to_be_bytes())),
            value: Some(Bytes::from(format!("r{region} {i}"))),
            ..NewRecord::default()
        })
        .collect()
}

/// A batch with no records covering `base..=base + last_delta`, as Kafka's
/// log cleaner writes one (`DefaultRecordBatch.writeEmptyHeader`) to keep a
/// producer's state once all its records are cleaned: `batch`'s 61-byte
/// header with record count 0.
fn emptied(batch: BatchBuilder, base: i64, last_delta: i32) -> Bytes {
    let mut header = batch.encode(&keyed(0, 1, 1)).unwrap().bytes[..61].to_vec();
    header[0..8].copy_from_slice(&base.to_be_bytes());
    header[8..12].copy_from_slice(&49i32.to_be_bytes());
    header[23..27].copy_from_slice(&last_delta.to_be_bytes());
    header[57..61].copy_from_slice(&0i32.to_be_bytes());
    let crc = crc32c::crc32c(&header[21..]);
    header[17..21].copy_from_slice(&crc.to_be_bytes());
    Bytes::from(header)
}

/// The log cleaner keeps a producer's last transaction marker, once its
/// delete horizon has passed, as an empty control batch (record count 0).
/// It marks nothing: `build_index` (read_committed) and replays under
/// either isolation read past it, and the broker's last stable offset does
/// not stop at it.
#[tokio::test]
async fn build_and_replay_read_past_an_empty_control_batch() {
    use walfetch::cluster::IsolationLevel;

    let scripted = ScriptedCluster::start(1).await.expect("scripted broker");
    scripted.create_topic("wal", 1).unwrap();
    let cluster = connect(&scripted).await;
    let append = |b: Bytes| scripted.append("wal", 0, b).unwrap();
    append(BatchBuilder::new(0).encode(&keyed(5, 2, 1)).unwrap().bytes);
    let marker = BatchBuilder::new(0)
        .producer(7, 0, 0)
        .transactional(true)
        .control(true);
    let empty = append(emptied(marker, 0, 0));
    let after = append(BatchBuilder::new(0).encode(&keyed(5, 2, 1)).unwrap().bytes);
    assert_eq!((empty, after), (2, 3));

    let rule = RegionRule::Key(IdFormat::BigEndian);
    let (index, report) = build_index(&cluster, "wal", 0, &rule, 0, None, 1 << 20)
        .await
        .unwrap_or_else(|e| panic!("build_index: {e}"));
    assert_eq!((report.indexed, report.control), (4, 0), "{report:?}");
    assert_eq!(index.last_index(), Some(4));
    for isolation in [
        IsolationLevel::ReadCommitted,
        IsolationLevel::ReadUncommitted,
    ] {
        let options = ReplayOptions::default().with_isolation(isolation);
        let got = consume(&cluster, &index, "wal", 5, options.clone()).await;
        assert_eq!(got, Ok(vec![0, 1, 3, 4]), "{isolation:?}");
        // All from the scan past `last_index`.
        let got = consume(&cluster, &WalIndex::new(), "wal", 5, options).await;
        assert_eq!(got, Ok(vec![0, 1, 3, 4]), "{isolation:?}, scanned");
    }
}

/// A compacted log: offset gaps inside a batch and between batches, and
/// empty data batches (record count 0) covering offsets with no record.
/// `build_index` indexes exactly the records there are, and replays with
/// the index, or scanning past an index of the first entry only, yield
/// them under either isolation.
#[tokio::test]
async fn build_and_replay_a_compacted_log_with_gaps_and_empty_batches() {
    use walfetch::cluster::IsolationLevel;
    use walfetch::index::IndexEntry;

    let scripted = ScriptedCluster::start(1).await.expect("scripted broker");
    scripted.create_topic("wal", 1).unwrap();
    let cluster = connect(&scripted).await;
    let append_at = |b: Bytes| scripted.append_at("wal", 0, b).unwrap();
    // 0..=4 holding 0, 2 and 4; empty 5..=8; 20..=21; empty 22; 30.
    append_at(BatchBuilder::new(0).encode(&keyed(5, 3, 2)).unwrap().bytes);
    append_at(emptied(BatchBuilder::new(0).producer(3, 0, 0), 5, 3));
    append_at(BatchBuilder::new(20).encode(&keyed(5, 2, 1)).unwrap().bytes);
    append_at(emptied(BatchBuilder::new(0).producer(4, 0, 0), 22, 0));
    append_at(BatchBuilder::new(30).encode(&keyed(5, 1, 1)).unwrap().bytes);
    let want = vec![0, 2, 4, 20, 21, 30];

    let rule = RegionRule::Key(IdFormat::BigEndian);
    let (index, report) = build_index(&cluster, "wal", 0, &rule, 0, None, 1 << 20)
        .await
        .unwrap();
    assert_eq!(report.indexed, 6, "{report:?}");
    assert_eq!(index.last_index(), Some(30));
    let mut first_only = WalIndex::new();
    first_only.push(5, IndexEntry::offset_only(0)).unwrap();
    first_only.set_last_index(0);
    for isolation in [
        IsolationLevel::ReadCommitted,
        IsolationLevel::ReadUncommitted,
    ] {
        let options = ReplayOptions::default().with_isolation(isolation);
        let got = consume(&cluster, &index, "wal", 5, options.clone()).await;
        assert_eq!(got.as_ref(), Ok(&want), "{isolation:?}");
        let got = consume(&cluster, &first_only, "wal", 5, options).await;
        assert_eq!(got.as_ref(), Ok(&want), "{isolation:?}, scanned");
    }
}

/// Kafka returns a fetch's first batch whole however large (KIP-74); a
/// broker that does not cuts it at the byte limit, and an answer holding
/// only the start of a batch used to end the build there, as if the log
/// ended: an index complete only up to an early offset, and no word of it.
/// `build_index` asks again for the whole batch, and fails, naming the
/// partition and offset, when that answer is cut too.
#[tokio::test]
async fn build_asks_again_for_a_batch_cut_short_and_fails_if_it_stays_cut() {
    let scripted = ScriptedCluster::start(1).await.expect("scripted broker");
    scripted.create_topic("wal", 1).unwrap();
    let cluster = connect(&scripted).await;
    for _ in 0..3 {
        let batch = BatchBuilder::new(0).encode(&keyed(5, 4, 1)).unwrap().bytes;
        assert!(batch.len() > 100);
        scripted.append("wal", 0, batch).unwrap();
    }
    let rule = RegionRule::Key(IdFormat::BigEndian);
    // The answer to the first fetch is cut to 80 bytes, below its limit of
    // 100, as such a broker answers.
    let cut = || Fault::on(ApiKey::Fetch).then(FaultAction::TruncateRecords { keep: 80 });
    scripted.script(cut());
    let (index, report) = build_index(&cluster, "wal", 0, &rule, 0, None, 100)
        .await
        .unwrap_or_else(|e| panic!("build_index: {e}"));
    assert_eq!(report.indexed, 12, "{report:?}");
    assert_eq!(index.last_index(), Some(11));

    // Cut again when asked again: an error, not an index that ends at 0.
    scripted.script(cut().times(2));
    let error = build_index(&cluster, "wal", 0, &rule, 0, None, 100)
        .await
        .expect_err("a batch that stays cut");
    assert!(
        matches!(
            error,
            BuildError::NoCompleteBatch {
                offset: 0,
                present: 80,
                ..
            }
        ),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(
        message.contains("\"wal\" partition 0") && message.contains("offset 0"),
        "{message}"
    );
}
