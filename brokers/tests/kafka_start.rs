//! The Kafka launcher on the pinned release: a node starts, serves
//! Metadata and topics, and leaves no JVM behind; a node of a 3-node
//! cluster killed comes back.

use std::time::Duration;

use walfetch::cluster::{Cluster, NewTopic};
use walfetch_brokers::kafka::{find_kafka, KafkaCluster, KafkaConfig};

fn install() -> walfetch_brokers::kafka::KafkaInstall {
    find_kafka().unwrap_or_else(|e| panic!("{e}"))
}

/// The PIDs of Kafka JVMs whose command line names `dir`.
fn jvms_in(dir: &std::path::Path) -> Vec<String> {
    let needle = dir.display().to_string();
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            let cmdline = String::from_utf8_lossy(&cmdline).into_owned();
            // The JVM itself, not the `sh` wrapper whose arguments name it.
            let program = cmdline.split('\0').next().unwrap_or_default();
            (program.ends_with("java")
                && cmdline.contains("kafka.Kafka")
                && cmdline.contains(&needle))
            .then(|| entry.file_name().to_string_lossy().into_owned())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_serves_metadata_and_topics_and_dies_with_its_owner() {
    let kafka = KafkaCluster::start(&install(), KafkaConfig::nodes(1))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let cluster = Cluster::connect(kafka.cluster_config())
        .await
        .expect("bootstrap");
    cluster
        .create_topics(&[NewTopic::new("launcher-check", 3)])
        .await
        .expect("create topic");
    let metadata = cluster
        .metadata(Some(&["launcher-check"]))
        .await
        .expect("metadata");
    assert_eq!(metadata.brokers.len(), 1);
    assert_eq!(metadata.topics["launcher-check"].partitions.len(), 3);

    let dir = kafka.dir().to_owned();
    assert_eq!(jvms_in(&dir).len(), 1, "one JVM runs the node");
    drop(cluster);
    drop(kafka);
    assert!(
        jvms_in(&dir).is_empty(),
        "the JVM is gone once the cluster is dropped"
    );
    // The janitor removes the directory a moment after.
    for _ in 0..50 {
        if !dir.exists() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{} is still there", dir.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_node_of_three_comes_back() {
    let mut kafka = KafkaCluster::start(&install(), KafkaConfig::nodes(3))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(jvms_in(kafka.dir()).len(), 3);
    kafka.kill(1);
    assert_eq!(kafka.running(), vec![0, 2]);
    assert_eq!(jvms_in(kafka.dir()).len(), 2, "kill is immediate");
    kafka.restart(1).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(kafka.running(), vec![0, 1, 2]);
    let cluster = Cluster::connect(kafka.cluster_config())
        .await
        .expect("bootstrap");
    let metadata = cluster.metadata(Some(&[])).await.expect("metadata");
    assert_eq!(metadata.brokers.len(), 3);
}
