//! An index is bound to its source: another topic, partition or recreated topic, a high watermark below it, regions it does not list.

use crate::common::*;

#[tokio::test]
async fn the_writers_index_records_its_source_and_replays() {
    let (scripted, cluster, written, indexes) = two_partitions().await;
    let source = indexes[0].source();
    assert_eq!(source.topic.as_deref(), Some("wal"));
    assert_eq!(source.partition, Some(0));
    assert_eq!(source.topic_id, scripted.topic_id("wal"));
    assert_eq!(source.rule, Some(RegionRule::Key(IdFormat::BigEndian)));
    let got = replay_all(&cluster, &indexes[0], ("wal", 0), 1).await;
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
    let got = replay_all(&cluster, &old, ("wal", 0), 1).await;
    assert_eq!(
        mismatch(got),
        Mismatch::TopicId {
            indexed: before,
            current: scripted.topic_id("wal").unwrap()
        }
    );
}

#[tokio::test]
async fn an_index_past_the_high_watermark_is_refused() {
    let (scripted, cluster, _, indexes) = two_partitions().await;
    let hw = scripted.high_watermark("wal", 0).unwrap();
    let mut longer = indexes[0].clone();
    longer.set_last_index(hw + 100);
    let got = replay_all(&cluster, &longer, ("wal", 0), 1).await;
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
    let unchecked = replay_all(&cluster, &blind, ("wal", 1), 1).await;
    assert!(!unchecked.unwrap().is_empty());
}

#[tokio::test]
async fn a_region_absent_from_the_index_is_refused_unless_the_tail_may_hold_it() {
    let (_scripted, cluster, written, indexes) = two_partitions().await;
    let got = replay_all(&cluster, &indexes[0], ("wal", 0), 99).await;
    let err = got.unwrap_err().to_string();
    assert!(err.contains("region 99 has no entry in the index"), "{err}");
    // Dumped halfway, the log past last_index may hold region 99's
    // entries: read (and here empty).
    let cut = offsets(&written, 0, 2)[10];
    let mut half = dumped_at(&indexes[0], cut);
    half.set_source(indexes[0].source().clone());
    let got = replay_all(&cluster, &half, ("wal", 0), 99).await;
    assert_eq!(got.unwrap(), Vec::<i64>::new());
    // And a listed region gets its entries on both sides of last_index.
    let got = replay_all(&cluster, &half, ("wal", 0), 2).await;
    assert_eq!(got.unwrap(), offsets(&written, 0, 2));
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
    let got = replay_all(&cluster, &indexes[0], ("wal", 0), 1).await;
    assert_eq!(got.unwrap(), offsets(&written, 0, 1));
}
