//! One world: a scripted cluster of three brokers, a WAL topic written with one writer per partition, and its indexes.

use super::common::*;

/// One world: the cluster, a client, what was written and the indexes.
pub(crate) struct World {
    pub(crate) broker: ScriptedCluster,
    pub(crate) cluster: Arc<Cluster>,
    pub(crate) written: Written,
    pub(crate) indexes: Vec<WalIndex>,
    /// Offsets below which retention removed the log, per partition.
    pub(crate) log_start: BTreeMap<i32, i64>,
    /// Whether Fetch responses have the v11 layout `PatchFrame` faults
    /// aim at.
    pub(crate) fetch_v11: bool,
    pub(crate) produce_topics: u32,
}

pub(crate) fn client_config(bootstrap: String) -> ClusterConfig {
    let mut config = ClusterConfig::new([bootstrap]);
    config.retry = RetryPolicy {
        initial_backoff: Duration::from_millis(2),
        max_backoff: Duration::from_millis(40),
        multiplier: 2.0,
        jitter: 0.5,
        deadline: Duration::from_secs(4),
    };
    config.connection.connect_timeout = Duration::from_secs(2);
    config.connection.request_timeout = Duration::from_millis(800);
    config
}

pub(crate) async fn new_world(rng: &mut StdRng, entries: usize) -> World {
    let broker = ScriptedCluster::start(BROKERS as usize)
        .await
        .expect("scripted cluster");
    broker.create_topic(TOPIC, PARTITIONS).expect("topic");
    let cluster = Arc::new(
        Cluster::connect(client_config(broker.bootstrap()))
            .await
            .expect("connect"),
    );
    let mut written = Written::new();
    let mut indexes = Vec::new();
    for p in 0..PARTITIONS {
        let mut config = WriterConfig::new(TOPIC, p);
        config.max_batch_bytes = MAX_BATCH_BYTES;
        config.compression = if rng.random_bool(0.3) {
            Compression::Lz4
        } else {
            Compression::None
        };
        let drawn: Vec<(RegionId, Bytes)> = (0..entries)
            .map(|n| {
                let region = region_of(p, skewed_region(rng, REGIONS_PER_PARTITION));
                let pad = rng.random_range(0..300);
                let payload = Bytes::from(format!("p{p} r{region} n{n} {}", "x".repeat(pad)));
                (region, payload)
            })
            .collect();
        let mut index = write_partition(&cluster, config, drawn, &mut written).await;
        // Some worlds' indexes stop halfway: the rest is read by the scan
        // past `last_index`.
        if rng.random_bool(0.3) {
            index = dumped_halfway(&index, &written[&p]);
        }
        indexes.push(index);
    }
    let probe = cluster
        .fetch(&FetchParams::new(TOPIC, 0, 0).with_max_bytes(1))
        .await
        .expect("probe");
    World {
        broker,
        cluster,
        written,
        indexes,
        log_start: BTreeMap::new(),
        fetch_v11: probe.version == 11,
        produce_topics: 0,
    }
}
