//! Broker arguments shared by the commands that talk to Kafka (kcat's
//! `-b`, `-t`, `-p`, and `-X`/`-F` client properties with `--timeout`) and
//! connecting with them.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use walfetch::cluster::{Cluster, ClusterConfig};

use crate::properties::{self, Settings};

/// How to connect: client properties with librdkafka's names and the
/// timeout; every command that talks to a broker takes them.
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct ClientArgs {
    /// A client property, librdkafka's name and value (repeatable), e.g.
    /// `-X security.protocol=SASL_SSL -X sasl.mechanism=SCRAM-SHA-512`.
    /// Known: security.protocol, ssl.ca.location, ssl.certificate.location,
    /// ssl.key.location, ssl.endpoint.identification.algorithm,
    /// enable.ssl.certificate.verification, sasl.mechanism(s),
    /// sasl.username, sasl.password, client.id, client.rack,
    /// socket.timeout.ms, isolation.level. The value is taken as given,
    /// spaces included.
    #[arg(short = 'X', value_name = "PROPERTY=VALUE", value_parser = properties::assignment)]
    pub(crate) properties: Vec<(String, String)>,
    /// A file of client properties, `property=value` lines (`#` comments);
    /// `-X` overrides it.
    #[arg(short = 'F', value_name = "FILE")]
    pub(crate) properties_file: Option<PathBuf>,
    /// How long connecting, one request, and one operation with its
    /// retries may take: seconds, or with a unit (`500ms`, `5s`, `2m`).
    /// Overrides socket.timeout.ms.
    #[arg(long, value_parser = properties::duration)]
    pub(crate) timeout: Option<Duration>,
}

impl ClientArgs {
    /// The settings of `-F` then `-X` then `--timeout`.
    pub(crate) fn settings(&self) -> anyhow::Result<Settings> {
        let mut pairs = Vec::new();
        if let Some(path) = &self.properties_file {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading the properties file {}", path.display()))?;
            pairs = properties::parse_file(&text, path).map_err(anyhow::Error::msg)?;
        }
        pairs.extend(self.properties.iter().cloned());
        let settings = Settings::from_pairs(&pairs).map_err(anyhow::Error::msg)?;
        Ok(settings.with_timeout(self.timeout))
    }
}

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
    /// Client properties and timeout.
    #[command(flatten)]
    pub(crate) client: ClientArgs,
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

/// Connects to the cluster with the client settings (of
/// [`ClientArgs::settings`], read once per command: `-F` may name a file
/// that can be read once, `-F /dev/stdin`), with the broker list in the
/// error.
pub(crate) async fn connect(brokers: &str, settings: &Settings) -> anyhow::Result<Arc<Cluster>> {
    let list: Vec<String> = brokers
        .split(',')
        .map(|b| b.trim().to_string())
        .filter(|b| !b.is_empty())
        .collect();
    anyhow::ensure!(!list.is_empty(), "no broker given (-b host:port)");
    let cluster = Cluster::connect(settings.apply(ClusterConfig::new(list)))
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
