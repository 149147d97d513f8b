//! Recoveries asked for the wrong thing: what is wrong is said, two indexes of one partition refused.

use crate::common::*;
use walfetch_support::scripted::scripted_with_topic;

/// Why a recovery of `regions` (partition, region, checkpoint) of
/// [`TOPIC`], with `index` as partition 0's, is refused.
async fn refusal(
    cluster: &Arc<Cluster>,
    index: &WalIndex,
    regions: &[(i32, RegionId, i64)],
) -> String {
    let mut builder = Recovery::builder(Arc::clone(cluster)).index(TOPIC, 0, index);
    for &(partition, region, from) in regions {
        builder = builder.region(TOPIC, partition, region, from);
    }
    builder.build().await.unwrap_err().to_string()
}

#[tokio::test]
async fn a_recovery_says_what_is_wrong_with_what_it_was_asked() {
    let (_broker, cluster, _, indexes) = setup(50, Compression::None).await;
    let err = Recovery::builder(Arc::clone(&cluster))
        .build()
        .await
        .unwrap_err();
    assert!(err.to_string().contains("at least one region"), "{err}");
    let index = &indexes[0];
    let err = refusal(&cluster, index, &[(1, 100, 0)]).await;
    assert!(
        err.contains("no index for topic \"wal\" partition 1"),
        "{err}"
    );
    let err = refusal(&cluster, index, &[(0, 1, 0), (0, 1, 5)]).await;
    assert!(err.contains("region 1 is asked for twice"), "{err}");
    let err = refusal(&cluster, index, &[(0, 1, -3)]).await;
    assert!(err.contains("negative"), "{err}");
    // A checkpoint past the log's end (it said "the range 1000000..N is
    // inverted", naming an end the caller never gave).
    let err = refusal(&cluster, index, &[(0, 1, 1_000_000)]).await;
    assert!(
        err.contains("region 1: the checkpoint 1000000 is past the log's end"),
        "{err}"
    );
}

/// Two writers share a partition, each with its index. Given both for the
/// partition, the builder kept the last one only and the recovery ended
/// well with half the region's entries: the first writer's, below the
/// second's `last_index` and not in its index, were skipped unsaid. Two
/// indexes for one partition are now refused (the merged index is the
/// way), and the same index given twice is still one.
#[tokio::test]
async fn two_indexes_of_one_partition_are_refused_not_half_read() {
    let (_scripted, cluster) = scripted_with_topic(1, TOPIC, 1).await;
    let first = WalWriter::new(Arc::clone(&cluster), WriterConfig::new(TOPIC, 0));
    let second = WalWriter::new(Arc::clone(&cluster), WriterConfig::new(TOPIC, 0));
    for n in 0..20 {
        for writer in [&first, &second] {
            let entry = WalEntry::new(1, format!("entry {n}"));
            writer.append(entry).await.unwrap().await.unwrap();
        }
    }
    let (first, second) = (first.close().await.unwrap(), second.close().await.unwrap());
    let entries = |index: &WalIndex| {
        let cluster = Arc::clone(&cluster);
        let index = index.clone();
        async move {
            let recovery = Recovery::builder(cluster)
                .index(TOPIC, 0, &index)
                .index(TOPIC, 0, &index)
                .region(TOPIC, 0, 1, 0)
                .build()
                .await?;
            let got: Vec<_> = recovery.collect().await;
            got.into_iter()
                .collect::<Result<Vec<_>, _>>()
                .map(|e| e.len())
        }
    };
    let err = Recovery::builder(Arc::clone(&cluster))
        .index(TOPIC, 0, &first)
        .index(TOPIC, 0, &second)
        .region(TOPIC, 0, 1, 0)
        .build()
        .await
        .expect_err("two indexes of one partition");
    assert!(
        err.to_string()
            .contains("topic \"wal\" partition 0 is given more than one index"),
        "{err}"
    );
    let mut merged = first.clone();
    merged.merge(&second).unwrap();
    assert_eq!(entries(&merged).await.unwrap(), 40);
}
