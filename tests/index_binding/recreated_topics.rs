//! A topic recreated while it is read: mid recovery, mid scan past the last index, mid build, each a topic id mismatch.

use crate::common::*;

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
