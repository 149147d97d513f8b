//! Broker arguments shared by the commands that talk to Kafka (kcat's
//! `-b`, `-t`, `-p`) and connecting with them.

use std::sync::Arc;

use anyhow::Context as _;
use walfetch::cluster::{Cluster, ClusterConfig};

/// Where to read or write.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct Target {
    /// Bootstrap brokers, `host:port[,host:port...]`.
    #[arg(short = 'b', long = "brokers")]
    pub(crate) brokers: String,
    /// The topic.
    #[arg(short = 't', long = "topic")]
    pub(crate) topic: String,
    /// The partition.
    #[arg(short = 'p', long = "partition", default_value_t = 0, value_parser = partition,
          allow_hyphen_values = true)]
    pub(crate) partition: i32,
}

/// Parses an offset given on the command line: a number from 0 on, with
/// what is wrong said plainly (`--from=-5`: a negative offset).
pub(crate) fn offset(text: &str) -> Result<i64, String> {
    match text.trim().parse::<i64>() {
        Ok(o) if o >= 0 => Ok(o),
        Ok(o) => Err(format!(
            "{o} is a negative offset: a partition's offsets start at 0"
        )),
        Err(_) => Err("not an offset: expected a whole number from 0 on".to_owned()),
    }
}

/// Parses a partition number: from 0 on.
pub(crate) fn partition(text: &str) -> Result<i32, String> {
    match text.trim().parse::<i32>() {
        Ok(p) if p >= 0 => Ok(p),
        Ok(p) => Err(format!(
            "{p} is a negative partition: partitions are numbered from 0"
        )),
        Err(_) => Err(format!(
            "not a partition: expected a whole number from 0 to {}",
            i32::MAX
        )),
    }
}

/// Connects to the cluster, with the broker list in the error.
pub(crate) async fn connect(brokers: &str) -> anyhow::Result<Arc<Cluster>> {
    let list: Vec<String> = brokers
        .split(',')
        .map(|b| b.trim().to_string())
        .filter(|b| !b.is_empty())
        .collect();
    anyhow::ensure!(!list.is_empty(), "no broker given (-b host:port)");
    let cluster = Cluster::connect(ClusterConfig::new(list))
        .await
        .with_context(|| format!("connecting to {brokers}"))?;
    Ok(Arc::new(cluster))
}

/// Checks that the topic and partition exist, for a clear error up front.
pub(crate) async fn check_partition(cluster: &Cluster, target: &Target) -> anyhow::Result<()> {
    cluster
        .leader(&target.topic, target.partition)
        .await
        .with_context(|| {
            format!(
                "topic {:?} partition {} on {}",
                target.topic, target.partition, target.brokers
            )
        })?;
    Ok(())
}
