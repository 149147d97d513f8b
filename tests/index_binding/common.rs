//! The scripted broker and client, WALs written to it, replaying an index, and GreptimeDB logs with their imported indexes.

pub(crate) use std::sync::Arc;
pub(crate) use std::time::Duration;

pub(crate) use bytes::Bytes;
pub(crate) use futures::StreamExt;
pub(crate) use kafka_protocol::messages::ApiKey;
pub(crate) use walfetch::cluster::{ClientError, Cluster, ClusterConfig, FetchParams, RetryPolicy};
pub(crate) use walfetch::codec::{BatchBuilder, NewRecord};
pub(crate) use walfetch::connection::VersionPolicy;
pub(crate) use walfetch::consumer::{Recovery, ReplayOptions};
pub(crate) use walfetch::error::{Error, Mismatch};
pub(crate) use walfetch::index::{IdFormat, IndexSource, RegionId, RegionRule, WalIndex};
pub(crate) use walfetch::scan::{build_index, BuildError};
pub(crate) use walfetch::writer::WriterConfig;
pub(crate) use walfetch_support::recovery::{dumped_at, to_the_end, write_partition, Written};
pub(crate) use walfetch_testkit::{Fault, FaultAction, Habits, ScriptedCluster};

pub(crate) async fn connect(scripted: &ScriptedCluster) -> Arc<Cluster> {
    let mut config = ClusterConfig::new([scripted.bootstrap()]);
    config.retry = RetryPolicy {
        deadline: Duration::from_secs(10),
        ..RetryPolicy::default()
    };
    Arc::new(Cluster::connect(config).await.expect("connect"))
}

/// A scripted broker holding `topic` of `partitions` partitions, empty,
/// and a client of it.
pub(crate) async fn an_empty_topic(
    topic: &str,
    partitions: i32,
) -> (ScriptedCluster, Arc<Cluster>) {
    let scripted = ScriptedCluster::start(1).await.expect("scripted broker");
    scripted.create_topic(topic, partitions).unwrap();
    let cluster = connect(&scripted).await;
    (scripted, cluster)
}

/// Topic `wal` of two partitions: partition 0 holds regions 1 and 2 in
/// turn, partition 1 only region 3; the writers' indexes.
pub(crate) async fn two_partitions() -> (ScriptedCluster, Arc<Cluster>, Written, Vec<WalIndex>) {
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
pub(crate) async fn replay(
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

/// [`replay`] of `region` from offset 0, default options.
pub(crate) async fn replay_all(
    cluster: &Arc<Cluster>,
    index: &WalIndex,
    at: (&str, i32),
    region: RegionId,
) -> Result<Vec<i64>, Error> {
    replay(cluster, index, at, region, 0, ReplayOptions::default()).await
}

pub(crate) fn mismatch(result: Result<Vec<i64>, Error>) -> Mismatch {
    match result {
        Err(Error::IndexMismatch { mismatch, .. }) => mismatch,
        other => panic!("expected an index mismatch, got {other:?}"),
    }
}

pub(crate) fn offsets(written: &Written, p: i32, region: RegionId) -> Vec<i64> {
    written[&p][&region].iter().map(|(o, _)| *o).collect()
}

/// GreptimeDB's topic in [`greptime_log`].
pub(crate) const GREPTIME_TOPIC: &str = "greptimedb_wal_topic_0";

/// A topic of one record a batch, GreptimeDB's record meta as each key:
/// record `n` is of `regions[n]`.
pub(crate) async fn greptime_log(regions: &[RegionId]) -> (ScriptedCluster, Arc<Cluster>) {
    let scripted = ScriptedCluster::start(1).await.expect("scripted broker");
    scripted.create_topic(GREPTIME_TOPIC, 1).unwrap();
    for (n, region) in regions.iter().enumerate() {
        let batch = greptime_batch(GREPTIME_TOPIC, n as u64, *region, format!("entry {n}"));
        scripted.append(GREPTIME_TOPIC, 0, batch).unwrap();
    }
    let cluster = connect(&scripted).await;
    (scripted, cluster)
}

/// A batch of one record as GreptimeDB writes it to `topic`: entry `n` of
/// `region` (its record meta the key), `value` its value.
pub(crate) fn greptime_batch(topic: &str, n: u64, region: RegionId, value: String) -> Bytes {
    BatchBuilder::new(0)
        .encode(&[NewRecord {
            offset_delta: 0,
            timestamp: 1_700_000_000_000,
            key: Some(walfetch_support::greptime::key(
                r#""Full""#,
                n,
                region,
                topic,
            )),
            value: Some(Bytes::from(value)),
            headers: Vec::new(),
        }])
        .unwrap()
        .bytes
}

/// The index of GreptimeDB's `index.json` for [`GREPTIME_TOPIC`].
pub(crate) fn import_greptime_json(json: &str) -> WalIndex {
    walfetch::index::import_greptime(json.as_bytes(), "index.json")
        .unwrap()
        .remove(GREPTIME_TOPIC)
        .unwrap()
}

/// A GreptimeDB index of [`GREPTIME_TOPIC`] as GreptimeDB dumps it:
/// `regions` the JSON members of its `regions` object (`"7": [0], "8": []`),
/// `last_index` the log end offset its worker read.
pub(crate) fn greptime_index(regions: &str, last_index: i64) -> WalIndex {
    import_greptime_json(&format!(
        r#"{{"{GREPTIME_TOPIC}": {{"regions": {{{regions}}}, "last_index": {last_index}}}}}"#
    ))
}

/// [`consume`] of `region` of the GreptimeDB topic, default options.
pub(crate) async fn consume_greptime(
    cluster: &Arc<Cluster>,
    index: &WalIndex,
    region: RegionId,
) -> Result<Vec<i64>, String> {
    consume(
        cluster,
        index,
        GREPTIME_TOPIC,
        region,
        ReplayOptions::default(),
    )
    .await
}

/// [`replay`] of `region` of the GreptimeDB topic's partition 0 from
/// `from`, default options.
pub(crate) async fn replay_greptime(
    cluster: &Arc<Cluster>,
    index: &WalIndex,
    region: RegionId,
    from: i64,
) -> Result<Vec<i64>, Error> {
    replay(
        cluster,
        index,
        (GREPTIME_TOPIC, 0),
        region,
        from,
        ReplayOptions::default(),
    )
    .await
}

/// `region` of partition 0 from offset 0 to the log's end, with a
/// [`Consumer`](walfetch::consumer::Consumer) (which, unlike a recovery,
/// takes a region the index does not list); the offsets, or the error.
pub(crate) async fn consume(
    cluster: &Arc<Cluster>,
    index: &WalIndex,
    topic: &str,
    region: RegionId,
    options: ReplayOptions,
) -> Result<Vec<i64>, String> {
    use walfetch::consumer::Consumer;
    let range = to_the_end(topic, region, 0);
    let mut consumer = Consumer::new(Arc::clone(cluster), index, range, options)
        .await
        .map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    while let Some(r) = consumer.next().await {
        out.push(r.map_err(|e| e.to_string())?.offset());
    }
    Ok(out)
}
