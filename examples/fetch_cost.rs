//! What a Fetch costs on a real broker, and what it depends on:
//! `cargo run --release --example fetch_cost [-- --broker kafka|tansu]
//! [--batches N]`.
//!
//! Starts the broker on loopback — Apache Kafka (one KRaft node of the
//! cached install, default settings; see `walfetch_brokers::kafka`) or
//! Tansu 0.6 (in-memory storage; `walfetch_brokers::tansu`) — writes N
//! batches of one 4 KB record each (lz4, incompressible: about the size of
//! a GreptimeDB region's write request in the replay bench), then times
//! single-batch fetches at spread offsets:
//! - one after another on one connection (what a fetch costs in latency);
//! - 16 at a time over one and over four connections (what one more fetch
//!   costs when many are in flight);
//! - one with `max_wait_ms` = 100 whose data is there (Tansu sleeps out the
//!   wait anyway; Kafka answers at once).
//!
//! The figures explain the plans walfetch learns on each (docs/brokers.md).

use std::error::Error;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::try_join_all;
use walfetch::cluster::{Cluster, ClusterConfig, FetchParams, NewTopic};
use walfetch::codec::{BatchBuilder, Compression, NewRecord};
use walfetch_brokers::kafka::{find_kafka, KafkaCluster, KafkaConfig, KAFKA_VERSION};
use walfetch_brokers::tansu::{find_tansu, TansuBroker, TANSU_VERSION};

const TOPIC: &str = "fetch-cost";
/// Fetches timed per measurement.
const FETCHES: usize = 160;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn Error>> {
    const USAGE: &str = "usage: fetch_cost [--broker kafka|tansu] [--batches N]";
    let mut batches = 4000usize;
    let mut kind = "kafka".to_owned();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let value = args.next().ok_or(USAGE)?;
        match arg.as_str() {
            "--batches" => batches = value.parse().ok().filter(|&n| n > 0).ok_or(USAGE)?,
            "--broker" if value == "kafka" || value == "tansu" => kind = value,
            _ => return Err(USAGE.into()),
        }
    }
    let (_broker, address, name): (Box<dyn std::any::Any>, String, String) = if kind == "kafka" {
        let kafka = KafkaCluster::start(&find_kafka()?, KafkaConfig::nodes(1)).await?;
        let address = kafka.address(0);
        (
            Box::new(kafka),
            address,
            format!("Apache Kafka {KAFKA_VERSION}"),
        )
    } else {
        let tansu = TansuBroker::start(&find_tansu()?, None).await?;
        let address = tansu.address();
        (Box::new(tansu), address, format!("Tansu {TANSU_VERSION}"))
    };
    let writer = Cluster::connect(ClusterConfig::new([address.clone()])).await?;
    writer.create_topics(&[NewTopic::new(TOPIC, 1)]).await?;
    // Incompressible bytes, so each batch stays about 4 KB.
    let value: Vec<u8> = (0..4000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let mut offsets = Vec::with_capacity(batches);
    for _ in 0..batches {
        let batch = BatchBuilder::new(0)
            .compression(Compression::Lz4)
            .encode(&[NewRecord::value(0, value.clone())])?;
        offsets.push(writer.produce(TOPIC, 0, batch.bytes).await?);
    }
    // Spread over the log, each a batch's first offset.
    let picks: Vec<i64> = (0..FETCHES).map(|i| offsets[i * 7919 % batches]).collect();
    println!("{name}, one partition of {batches} batches of 4 KB, {FETCHES} single-batch fetches each line:");
    for connections in [1, 4] {
        let mut config = ClusterConfig::new([address.clone()]);
        config.connections_per_broker = connections;
        let cluster = Arc::new(Cluster::connect(config).await?);
        // Warm: open the connections.
        timed(&cluster, &picks[..16], 16, Duration::ZERO).await?;
        if connections == 1 {
            let each = timed(&cluster, &picks, 1, Duration::ZERO).await?;
            println!("  one at a time:                   {each:.2} ms a fetch");
            let waited = timed(&cluster, &picks[..4], 1, Duration::from_millis(100)).await?;
            println!("  one at a time, max_wait 100 ms:  {waited:.2} ms a fetch");
        }
        let each = timed(&cluster, &picks, 16, Duration::ZERO).await?;
        println!("  16 at a time, {connections} connection(s):   {each:.2} ms a fetch");
    }
    Ok(())
}

/// Fetches one batch at each of `offsets`, `together` at a time; the wall
/// time per fetch, in milliseconds.
async fn timed(
    cluster: &Arc<Cluster>,
    offsets: &[i64],
    together: usize,
    max_wait: Duration,
) -> Result<f64, Box<dyn Error>> {
    let started = Instant::now();
    for chunk in offsets.chunks(together) {
        try_join_all(chunk.iter().map(|&offset| {
            let params = FetchParams::new(TOPIC, 0, offset)
                .with_max_bytes(1)
                .with_max_wait(max_wait);
            let cluster = Arc::clone(cluster);
            async move { cluster.fetch(&params).await }
        }))
        .await?;
    }
    Ok(started.elapsed().as_secs_f64() * 1e3 / offsets.len() as f64)
}
