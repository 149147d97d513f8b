//! Building an index by a scan: from inside a batch, on hurried brokers, the region rule stored and checked.

use crate::common::*;

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

/// A scripted broker with `habits`, and 100 records of decimal region ids
/// in batches of ten in `wal` partition 0.
async fn decimal_wal_on(habits: Habits) -> (ScriptedCluster, Arc<Cluster>) {
    let scripted = ScriptedCluster::builder()
        .habits(habits)
        .start()
        .await
        .expect("scripted broker");
    scripted.create_topic("wal", 1).expect("topic");
    let cluster = connect(&scripted).await;
    decimal_records(&cluster, "wal", 100, 10).await;
    (scripted, cluster)
}

#[tokio::test]
async fn build_from_inside_a_batch_indexes_every_record_from_there() {
    let (scripted, cluster) = decimal_wal_on(Habits::TANSU_0_6).await;
    let rule = RegionRule::Header("region".into(), IdFormat::Decimal);
    // 15 is inside the batch 10..=19, which this broker skips.
    let (index, report) = build_index(&cluster, "wal", 0, &rule, 15, None, 1 << 20)
        .await
        .unwrap();
    let all: Vec<i64> = {
        let mut v: Vec<i64> = index.regions().flat_map(|(_, r)| r.offsets()).collect();
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
    let (scripted, cluster) = decimal_wal_on(Habits::EMPTY_WHEN_HURRIED).await;
    let rule = RegionRule::Header("region".into(), IdFormat::Decimal);
    for from in [0, 15] {
        let (index, report) = build_index(&cluster, "wal", 0, &rule, from, None, 1 << 20)
            .await
            .unwrap();
        let mut all: Vec<i64> = index.regions().flat_map(|(_, r)| r.offsets()).collect();
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
    let got = replay_all(&cluster, &half, ("wal", 0), 2).await;
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
