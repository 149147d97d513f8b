//! The scripted broker and cluster client, entries of six regions, writing them and checking the log.

pub(crate) use std::collections::BTreeMap;
pub(crate) use std::sync::Arc;
pub(crate) use std::time::Duration;

pub(crate) use bytes::Bytes;
pub(crate) use kafka_protocol::messages::ApiKey;
pub(crate) use kafka_protocol::ResponseError;
pub(crate) use walfetch::cluster::{Cluster, ClusterConfig, RetryPolicy};
pub(crate) use walfetch::codec::Compression;
pub(crate) use walfetch::error::Error;
pub(crate) use walfetch::index::{RegionId, WalIndex};
pub(crate) use walfetch::writer::{Appended, WalEntry, WalWriter, WriterConfig, WriterMode};
pub(crate) use walfetch_testkit::{DuplicateAnswer, Fault, FaultAction, ScriptedCluster};

pub(crate) use walfetch_support::partition_log::read_log;
pub(crate) use walfetch_support::wal_log::{check_written, Layout};

pub(crate) const TOPIC: &str = "wal";

pub(crate) async fn scripted() -> (ScriptedCluster, Arc<Cluster>) {
    scripted_with_deadline(Duration::from_secs(20)).await
}

/// A scripted broker and a cluster client whose retries end after
/// `deadline`.
pub(crate) async fn scripted_with_deadline(deadline: Duration) -> (ScriptedCluster, Arc<Cluster>) {
    let scripted = ScriptedCluster::start(1).await.expect("scripted broker");
    scripted.create_topic(TOPIC, 1).expect("topic");
    let mut config = ClusterConfig::new([scripted.bootstrap()]);
    config.retry = RetryPolicy {
        deadline,
        ..RetryPolicy::default()
    };
    // A lost answer shows as a timeout after about a second.
    config.connection.request_timeout = Duration::from_millis(700);
    config.produce_timeout = Duration::from_millis(300);
    let cluster = Arc::new(Cluster::connect(config).await.expect("bootstrap"));
    (scripted, cluster)
}

/// `count` entries of 6 regions, skewed, with unique payloads.
pub(crate) fn entries(from: usize, count: usize) -> Vec<(RegionId, Bytes)> {
    (from..from + count)
        .map(|n| {
            let region = [1, 1, 1, 2, 2, 3, 4, 5, 6][n % 9] as RegionId;
            let payload = format!("entry {n} of region {region} {}", "x".repeat(n * 37 % 300));
            (region, Bytes::from(payload))
        })
        .collect()
}

pub(crate) fn config(mode: WriterMode) -> WriterConfig {
    WriterConfig::new(TOPIC, 0)
        .with_mode(mode)
        .with_max_batch_bytes(2 << 10)
        .with_linger(Duration::from_millis(3))
}

/// Appends `entries` without waiting between them; each entry's offset (or
/// error), in append order.
pub(crate) async fn append_all(
    writer: &WalWriter,
    entries: &[(RegionId, Bytes)],
) -> Vec<(RegionId, Bytes, Result<i64, Error>)> {
    acknowledged(queue_all(writer, entries).await).await
}

/// Queues `entries` without waiting between them; each with its pending
/// acknowledgement, in append order.
pub(crate) async fn queue_all(
    writer: &WalWriter,
    entries: &[(RegionId, Bytes)],
) -> Vec<(RegionId, Bytes, Appended)> {
    let mut pending = Vec::new();
    for (region, payload) in entries {
        let appended = writer
            .append(WalEntry::new(*region, payload.clone()))
            .await
            .expect("queued");
        pending.push((*region, payload.clone(), appended));
    }
    pending
}

/// Each queued entry's offset (or error), in the order given.
pub(crate) async fn acknowledged(
    pending: Vec<(RegionId, Bytes, Appended)>,
) -> Vec<(RegionId, Bytes, Result<i64, Error>)> {
    let mut out = Vec::new();
    for (region, payload, appended) in pending {
        out.push((region, payload, appended.await));
    }
    out
}

pub(crate) fn written(
    results: Vec<(RegionId, Bytes, Result<i64, Error>)>,
) -> Vec<(RegionId, Bytes, i64)> {
    results
        .into_iter()
        .map(|(r, p, o)| (r, p, o.unwrap_or_else(|e| panic!("entry not written: {e}"))))
        .collect()
}

pub(crate) async fn write(
    cluster: &Arc<Cluster>,
    config: WriterConfig,
    entries: &[(RegionId, Bytes)],
) -> (Vec<(RegionId, Bytes, i64)>, WalIndex) {
    let writer = WalWriter::new(Arc::clone(cluster), config);
    let results = written(append_all(&writer, entries).await);
    (results, writer.close().await.expect("closed"))
}

pub(crate) async fn check(
    cluster: &Cluster,
    appended: &[(RegionId, Bytes, i64)],
    index: &WalIndex,
) -> Layout {
    let log = read_log(cluster, TOPIC, 0).await;
    check_written(&log, appended, index, true)
}

/// A writer of `config` whose first entry is written: its producer id and
/// the partition's leader are known.
pub(crate) async fn writer_with_a_first_entry(
    cluster: &Arc<Cluster>,
    config: WriterConfig,
) -> WalWriter {
    let writer = WalWriter::new(Arc::clone(cluster), config);
    let first = writer.append(WalEntry::new(1, "first")).await.unwrap();
    writer.flush().await.unwrap();
    first.await.unwrap();
    writer
}

/// Appends one entry to each of regions 1 to 6: six batches, clustered.
pub(crate) async fn one_entry_each_of_six_regions(writer: &WalWriter) -> Vec<Appended> {
    let mut pending = Vec::new();
    for region in 1..=6 {
        pending.push(writer.append(WalEntry::new(region, "x")).await.unwrap());
    }
    pending
}

/// Makes every Metadata answer say the partition has no leader, after the
/// cluster forgot what it knew: the writer cannot find where to send.
pub(crate) fn lose_the_leader(scripted: &ScriptedCluster, cluster: &Cluster) {
    cluster.invalidate(TOPIC);
    scripted.script(
        Fault::on(ApiKey::Metadata)
            .times(100_000)
            .then(FaultAction::TopicError(
                ResponseError::LeaderNotAvailable.code(),
            )),
    );
}

/// Appends `value` (region 2) with its Produce's answer lost, waits until
/// the broker appended it (after the writer's first entry), then has the
/// broker forget the producer before the batch goes again; what the
/// writer acknowledges for the entry.
pub(crate) async fn lose_the_answer_then_forget_the_producer(
    scripted: &ScriptedCluster,
    writer: &WalWriter,
    value: &'static str,
) -> Result<i64, Error> {
    scripted.script(Fault::on(ApiKey::Produce).then(FaultAction::LoseResponse));
    let appended = writer.append(WalEntry::new(2, value)).await.unwrap();
    while scripted.high_watermark(TOPIC, 0).unwrap() < 2 {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    scripted.expire_producers(TOPIC, 0).unwrap();
    appended.await
}

/// How many records of partition 0's log hold `value`.
pub(crate) async fn copies_in_log(cluster: &Cluster, value: &str) -> usize {
    read_log(cluster, TOPIC, 0)
        .await
        .iter()
        .flat_map(|b| &b.records)
        .filter(|r| r.value.as_deref() == Some(value.as_bytes()))
        .count()
}
