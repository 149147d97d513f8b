//! The scripted broker and a cluster client of it: the set-up most tests
//! against the scripted broker begin with.

use std::sync::Arc;

use walfetch::cluster::{Cluster, ClusterConfig};
use walfetch_testkit::ScriptedCluster;

/// A scripted cluster of `brokers` brokers holding `topic` with
/// `partitions` partitions, and a client of it with the default settings.
pub async fn scripted_with_topic(
    brokers: usize,
    topic: &str,
    partitions: i32,
) -> (ScriptedCluster, Arc<Cluster>) {
    let scripted = ScriptedCluster::start(brokers)
        .await
        .expect("scripted broker");
    scripted.create_topic(topic, partitions).expect("topic");
    let cluster = Cluster::connect(ClusterConfig::new([scripted.bootstrap()]))
        .await
        .expect("connect");
    (scripted, Arc::new(cluster))
}
