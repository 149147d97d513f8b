//! The library embedded in a long-running server, against the scripted
//! broker: recoveries dropped midway, one cluster shared by a writer and
//! several recoveries on a single-threaded runtime, extreme limits, the
//! builder misused, and the types moved into spawned tasks. Each must
//! work or fail with an error naming what it concerns; never hang, panic
//! or leave a task behind.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use walfetch::cluster::{Cluster, ClusterConfig, RetryPolicy};
use walfetch::consumer::{Recovery, RecoveryBuilder, ReplayOptions};
use walfetch::error::Error;
use walfetch::index::WalIndex;
use walfetch::writer::{WalEntry, WalWriter, WriterConfig};
use walfetch_testkit::ScriptedCluster;

const TOPIC: &str = "wal";
const REGIONS: u64 = 4;

async fn scripted() -> (ScriptedCluster, Arc<Cluster>) {
    let scripted = ScriptedCluster::start(1).await.expect("scripted broker");
    scripted.create_topic(TOPIC, 2).expect("topic");
    let mut config = ClusterConfig::new([scripted.bootstrap()]);
    config.retry = RetryPolicy {
        deadline: Duration::from_secs(10),
        ..RetryPolicy::default()
    };
    let cluster = Arc::new(Cluster::connect(config).await.expect("bootstrap"));
    (scripted, cluster)
}

/// Writes `entries` entries of `REGIONS` regions to `partition`; its index.
async fn write(cluster: &Arc<Cluster>, partition: i32, entries: usize) -> WalIndex {
    let config = WriterConfig::new(TOPIC, partition).with_max_batch_bytes(2 << 10);
    let writer = WalWriter::new(Arc::clone(cluster), config);
    let mut pending = Vec::new();
    for n in 0..entries {
        let payload = Bytes::from(format!("entry {n} {}", "y".repeat(n * 31 % 500)));
        let entry = WalEntry::new(n as u64 % REGIONS, payload);
        pending.push(writer.append(entry).await.unwrap());
    }
    for p in pending {
        p.await.unwrap();
    }
    writer.close().await.unwrap()
}

/// Every region of partition 0 from the start.
fn every_region<'a>(cluster: &Arc<Cluster>, index: &'a WalIndex) -> RecoveryBuilder<'a> {
    let mut builder = Recovery::builder(Arc::clone(cluster)).index(TOPIC, 0, index);
    for region in 0..REGIONS {
        builder = builder.region(TOPIC, 0, region, 0);
    }
    builder
}

async fn count(mut recovery: Recovery) -> Result<usize, Error> {
    let mut n = 0;
    while let Some(entry) = recovery.next().await {
        entry?;
        n += 1;
    }
    Ok(n)
}

#[tokio::test]
async fn extreme_limits_still_recover_every_entry() {
    let (_scripted, cluster) = scripted().await;
    let index = write(&cluster, 0, 1500).await;
    let default = ReplayOptions::default;
    for (name, options) in [
        ("memory cap 0", default().with_max_buffered_bytes(0)),
        ("memory cap 1", default().with_max_buffered_bytes(1)),
        (
            "memory cap max",
            default().with_max_buffered_bytes(u64::MAX),
        ),
        ("in-flight bytes 0", default().with_max_in_flight_bytes(0)),
        ("in-flight bytes 1", default().with_max_in_flight_bytes(1)),
        (
            "in-flight bytes max",
            default().with_max_in_flight_bytes(u64::MAX),
        ),
        ("in flight 0", default().with_max_in_flight(0)),
        ("in flight max", default().with_max_in_flight(usize::MAX)),
        ("attempts 0", default().with_max_attempts(0)),
    ] {
        let recovery = async {
            let builder = every_region(&cluster, &index).options(options);
            count(builder.build().await?).await
        };
        let waited = tokio::time::timeout(Duration::from_secs(30), recovery).await;
        let Ok(recovered) = waited else {
            panic!("{name}: hangs");
        };
        assert_eq!(recovered.unwrap(), 1500, "{name}");
    }
}

#[tokio::test]
async fn a_recovery_dropped_midway_lets_go_of_everything() {
    let (_scripted, cluster) = scripted().await;
    let index = write(&cluster, 0, 3000).await;
    let before = Arc::strong_count(&cluster);
    for taken in [0, 1, 10, 500, 2999] {
        let options = ReplayOptions::default().with_max_buffered_bytes(64 << 10);
        let mut recovery = every_region(&cluster, &index)
            .options(options)
            .build()
            .await
            .unwrap();
        for _ in 0..taken {
            recovery.next().await.unwrap().unwrap();
        }
        drop(recovery);
        assert_eq!(Arc::strong_count(&cluster), before, "after {taken} entries");
        // Requests abandoned are forgotten by their connections.
        for (broker, stats) in cluster.stats() {
            assert_eq!(stats.in_flight, 0, "{broker} after {taken} entries");
        }
    }
    // The connections still serve.
    let recovered = count(every_region(&cluster, &index).build().await.unwrap()).await;
    assert_eq!(recovered.unwrap(), 3000);
}

/// A writer appending to one partition and three recoveries of another,
/// one with a memory cap of 1 byte, all on one cluster and one thread.
#[tokio::test]
async fn one_cluster_serves_a_writer_and_recoveries_on_one_thread() {
    let (_scripted, cluster) = scripted().await;
    let index = write(&cluster, 0, 2000).await;
    let writer = Arc::new(WalWriter::new(
        Arc::clone(&cluster),
        WriterConfig::new(TOPIC, 1),
    ));
    let appending = tokio::spawn({
        let writer = Arc::clone(&writer);
        async move {
            let mut pending = Vec::new();
            for n in 0..3000u64 {
                let entry = WalEntry::new(n % 5, vec![3u8; 200]);
                pending.push(writer.append(entry).await.unwrap());
            }
            for p in pending {
                p.await.unwrap();
            }
        }
    });
    let capped = ReplayOptions::default().with_max_buffered_bytes(1);
    let recovered = tokio::time::timeout(Duration::from_secs(60), async {
        futures::future::join3(
            count(every_region(&cluster, &index).build().await.unwrap()),
            count(every_region(&cluster, &index).build().await.unwrap()),
            count(
                every_region(&cluster, &index)
                    .options(capped)
                    .build()
                    .await
                    .unwrap(),
            ),
        )
        .await
    })
    .await
    .expect("the recoveries end");
    assert_eq!(
        (
            recovered.0.unwrap(),
            recovered.1.unwrap(),
            recovered.2.unwrap()
        ),
        (2000, 2000, 2000)
    );
    tokio::time::timeout(Duration::from_secs(60), appending)
        .await
        .expect("the writer's entries are answered")
        .unwrap();
    let index = Arc::try_unwrap(writer).unwrap().close().await.unwrap();
    assert_eq!(index.last_index(), Some(2999));
}

#[tokio::test]
async fn cluster_timeouts_of_zero_fail_and_of_duration_max_work() {
    let scripted = ScriptedCluster::start(1).await.expect("scripted broker");
    scripted.create_topic(TOPIC, 1).expect("topic");
    let round = |config: ClusterConfig| async move {
        let cluster = Arc::new(Cluster::connect(config).await?);
        let writer = WalWriter::new(Arc::clone(&cluster), WriterConfig::new(TOPIC, 0));
        let offset = writer.append(WalEntry::new(1, "x")).await?.await?;
        let index = writer.close().await?;
        let recovery = Recovery::builder(cluster)
            .index(TOPIC, 0, &index)
            .region(TOPIC, 0, 1, offset)
            .build()
            .await?;
        count(recovery).await
    };
    // Refused up front: with nothing to wait for, whether an operation
    // got its answer would depend on how a loaded machine orders an answer
    // and a timer that fall due together.
    let zero = ClusterConfig::new([scripted.bootstrap()]).with_timeout(Duration::ZERO);
    let failed = tokio::time::timeout(Duration::from_secs(20), round(zero))
        .await
        .expect("a zero timeout fails at once");
    let error = failed.expect_err("a zero timeout is refused").to_string();
    assert!(error.contains("timeout is zero"), "{error}");
    let mut forever = ClusterConfig::new([scripted.bootstrap()]).with_timeout(Duration::MAX);
    forever.produce_timeout = Duration::MAX;
    forever.admin_timeout = Duration::MAX;
    forever.retry.max_backoff = Duration::MAX;
    let recovered = tokio::time::timeout(Duration::from_secs(20), round(forever))
        .await
        .expect("no timeout to wait for");
    assert_eq!(recovered.unwrap(), 1);
}

/// Misuses of the builder are errors naming the partition (and region).
#[tokio::test]
async fn builder_misuse_is_an_error_naming_the_partition() {
    let (scripted, cluster) = scripted().await;
    let index = write(&cluster, 0, 100).await;
    let other = write(&cluster, 1, 100).await;
    scripted.create_topic("other", 1).expect("topic");
    let builder = || Recovery::builder(Arc::clone(&cluster));
    for (misuse, builder, said) in [
        (
            "inverted",
            builder()
                .index(TOPIC, 0, &index)
                .region_until(TOPIC, 0, 1, 50, Some(10)),
            "topic \"wal\" partition 0: region 1: the range 50..10 is inverted",
        ),
        (
            "negative",
            builder().index(TOPIC, 0, &index).region(TOPIC, 0, 1, -1),
            "topic \"wal\" partition 0: region 1: the range -1..",
        ),
        (
            "another partition's index",
            builder().index(TOPIC, 0, &other).region(TOPIC, 0, 1, 0),
            "topic \"wal\" partition 0: the index is of partition 1",
        ),
        (
            "another topic's index",
            builder().index("other", 0, &index).region("other", 0, 1, 0),
            "topic \"other\" partition 0: the index is of topic \"wal\"",
        ),
        (
            "no index",
            builder().index(TOPIC, 0, &index).region(TOPIC, 1, 1, 0),
            "no index for topic \"wal\" partition 1 (regions 1)",
        ),
        (
            "a region the index lacks",
            builder().index(TOPIC, 0, &index).region(TOPIC, 0, 99, 0),
            "topic \"wal\" partition 0: region 99 has no entry in the index",
        ),
    ] {
        let err = builder.build().await.expect_err(misuse);
        assert!(err.to_string().contains(said), "{misuse}: {err}");
    }
    // A region past the log's end ends at the log's end.
    let recovery = builder()
        .index(TOPIC, 0, &index)
        .region_until(TOPIC, 0, 1, 0, Some(1_000_000))
        .build()
        .await
        .unwrap();
    let recovered = tokio::time::timeout(Duration::from_secs(20), count(recovery))
        .await
        .expect("ends at the log's end");
    assert_eq!(recovered.unwrap(), 25);
}

/// The types a server moves into spawned tasks (a compile-time check).
#[allow(dead_code)]
fn spawnable(cluster: Arc<Cluster>, index: Arc<WalIndex>, writer: Arc<WalWriter>) {
    fn shared<T: Send + Sync + 'static>() {}
    shared::<WalWriter>();
    shared::<Error>();
    tokio::spawn(async move {
        let recovery = Recovery::builder(cluster)
            .index(TOPIC, 0, &index)
            .region(TOPIC, 0, 1, 0)
            .build()
            .await;
        if let Ok(recovery) = recovery {
            // The stream itself moves to another task.
            tokio::spawn(count(recovery));
        }
    });
    tokio::spawn(async move {
        if let Ok(appended) = writer.append(WalEntry::new(1, "x")).await {
            tokio::spawn(appended);
        }
        let _ = writer.flush().await;
    });
}
