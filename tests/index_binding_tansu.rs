//! The index binds to what it indexed, on the real broker (Tansu): an index
//! of a topic that was deleted and created again under the same name with
//! other, shorter data is refused before anything is fetched. walfetch has
//! no DeleteTopics call, so the new incarnation is a fresh broker's topic of
//! the same name: to the client, the same name with another topic id (when
//! the broker's Metadata gives ids) and another log.
#![allow(clippy::unwrap_used)]

mod support;

use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt;
use support::recovery::{write_partition, Written};
use support::tansu::Tansu;
use walfetch::consumer::Recovery;
use walfetch::error::{Error, Mismatch};
use walfetch::writer::WriterConfig;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_index_of_a_recreated_topic_is_refused() {
    // The topic as indexed: 200 entries of regions 1 and 2.
    let old = Tansu::start().await;
    let cluster = Arc::new(old.cluster_with_topic("wal", 1).await);
    let entries = (0..200u64).map(|n| (n % 2 + 1, Bytes::from(format!("old {n}"))));
    let index = write_partition(
        &cluster,
        WriterConfig::new("wal", 0),
        entries,
        &mut Written::new(),
    )
    .await;
    drop(cluster);
    drop(old);

    // The topic recreated: 50 entries, regions 7 and 8.
    let new = Tansu::start().await;
    let cluster = Arc::new(new.cluster_with_topic("wal", 1).await);
    let entries = (0..50u64).map(|n| (n % 2 + 7, Bytes::from(format!("new {n}"))));
    write_partition(
        &cluster,
        WriterConfig::new("wal", 0),
        entries,
        &mut Written::new(),
    )
    .await;
    let current = cluster.leader("wal", 0).await.unwrap().topic_id;

    let built = Recovery::builder(Arc::clone(&cluster))
        .index("wal", 0, &index)
        .region("wal", 0, 1, 0)
        .build()
        .await;
    let err = match built {
        Ok(mut recovery) => {
            let first = recovery.next().await;
            panic!("a recovery with the old index started: {first:?}")
        }
        Err(e) => e,
    };
    eprintln!("refused: {err}");
    let Error::IndexMismatch { mismatch, .. } = &err else {
        panic!("expected an index mismatch, got {err:?}");
    };
    match (index.source().topic_id, current.is_nil()) {
        // Both incarnations have ids: told apart by them.
        (Some(indexed), false) => {
            assert_eq!(*mismatch, Mismatch::TopicId { indexed, current }, "{err}")
        }
        // No ids: the old index runs past the new log's end.
        _ => assert!(
            matches!(
                mismatch,
                Mismatch::LastIndexPastEnd {
                    last_index: 199,
                    ..
                }
            ),
            "{err}"
        ),
    }
}
