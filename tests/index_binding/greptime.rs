//! GreptimeDB indexes: the last index exclusive, idle topics, empty and absent regions, partition zero, no-op records.

use crate::common::*;

/// GreptimeDB's `last_index` is the log end offset its worker read
/// (`get_offset(OffsetAt::Latest)`, exclusive), and GreptimeDB replays
/// `last_index..end` itself. Dumped when the log ended at 2; region 7
/// then wrote offset 2, which the replay must read.
#[tokio::test]
async fn greptime_last_index_is_exclusive_the_record_at_it_is_replayed() {
    let (_scripted, cluster) = greptime_log(&[7, 8, 7]).await;
    let index = greptime_index(r#""7": [0], "8": [1]"#, 2);
    assert_eq!(index.last_index(), Some(1));
    let got = consume_greptime(&cluster, &index, 7).await;
    assert_eq!(got, Ok(vec![0, 2]));
}

/// The index of an idle GreptimeDB (nothing written since it was dumped):
/// its `last_index` is the log end, and it is GreptimeDB's own index of
/// this log, not one past its end.
#[tokio::test]
async fn greptime_index_of_an_idle_topic_is_accepted() {
    let (_scripted, cluster) = greptime_log(&[7, 8]).await;
    let index = greptime_index(r#""7": [0], "8": [1]"#, 2);
    let got = consume_greptime(&cluster, &index, 7).await;
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
    let idle = greptime_index(r#""7": [], "8": [0, 1]"#, 3);
    let got = consume_greptime(&cluster, &idle, 7).await;
    assert_eq!(got, Ok(vec![]));
    let got = replay_greptime(&cluster, &idle, 7, 0).await;
    assert_eq!(got.unwrap(), Vec::<i64>::new());
    // Dumped at 2: region 7's entry at 2 is past it, read by the scan.
    let earlier = greptime_index(r#""7": [], "8": [0, 1]"#, 2);
    let got = consume_greptime(&cluster, &earlier, 7).await;
    assert_eq!(got, Ok(vec![2]));
}

/// A region whose entries are all below the checkpoint an index is
/// truncated at (it flushed everything) stays listed: recovered from the
/// checkpoint it gets nothing, where it was dropped from the index and the
/// recovery refused it as a region the index does not know.
#[tokio::test]
async fn a_region_truncated_to_nothing_recovers_empty() {
    let (_scripted, cluster) = greptime_log(&[8, 8, 7]).await;
    let mut index = greptime_index(r#""7": [2], "8": [0, 1]"#, 3);
    index.truncate_below(2);
    let got = replay_greptime(&cluster, &index, 8, 2).await;
    assert_eq!(got.unwrap(), Vec::<i64>::new());
    let got = replay_greptime(&cluster, &index, 7, 2).await;
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
    let index = greptime_index(r#""8": [1]"#, 2);
    let err = replay_greptime(&cluster, &index, 7, 0)
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
    for (topic, regions) in [("gt_active", [8, 7]), ("gt_idle", [9, 9])] {
        scripted.create_topic(topic, 1).unwrap();
        for (n, region) in regions.into_iter().enumerate() {
            scripted
                .append(
                    topic,
                    0,
                    greptime_batch(topic, n as u64, region, format!("entry {n}")),
                )
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
            let batch = greptime_batch(GREPTIME_TOPIC, n, 7, format!("p{partition} entry {n}"));
            scripted.append(GREPTIME_TOPIC, partition, batch).unwrap();
        }
    }
    let cluster = connect(&scripted).await;
    let index = greptime_index(r#""7": []"#, 1);
    assert_eq!(index.source().partition, Some(0));
    let got = replay_all(&cluster, &index, (GREPTIME_TOPIC, 1), 7).await;
    assert_eq!(mismatch(got), Mismatch::Partition { indexed: 0 });
    let got = replay_greptime(&cluster, &index, 7, 0).await;
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
        let key = walfetch_support::greptime::key(r#""Full""#, n as u64, *region, GREPTIME_TOPIC);
        let value = Bytes::from(format!("entry {n}"));
        scripted
            .append(GREPTIME_TOPIC, 0, one(Some(key), Some(value)))
            .unwrap();
    }
    let key = walfetch_support::greptime::key(r#""Full""#, 0, 7, GREPTIME_TOPIC);
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
    let key = walfetch_support::greptime::key(r#""Full""#, 9, 7, GREPTIME_TOPIC);
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
    let indexed: Vec<i64> = index.region(7).unwrap().offsets().collect();
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
    let index = greptime_index(r#""#, 0);
    use walfetch::consumer::Consumer;
    let range = to_the_end(GREPTIME_TOPIC, 7, 0);
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
