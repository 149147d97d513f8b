//! A KRaft cluster of combined broker + controller nodes on loopback, each
//! a JVM under [`Supervised`], in a temporary directory removed when the
//! cluster is dropped or this process dies.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::hash::{BuildHasher, Hasher};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use walfetch::cluster::{Cluster, ClusterConfig, RetryPolicy};

use super::config::KafkaConfig;
use super::install::KafkaInstall;
use crate::process::{free_port, read_log, tail, Supervised};
use crate::BrokerError;

/// The listener brokers use among themselves and tests use by default.
const PLAINTEXT: &str = "PLAINTEXT";

/// Root logger at INFO into the node's log file (its stdout).
const LOG4J2: &str = "\
status = warn
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.out.ref = out
logger.state.name = state.change.logger
logger.state.level = warn
";

/// Removes a directory once its owner stops holding stdin open (when the
/// cluster is dropped, or this process dies in any way).
const JANITOR: &str = r#"cat >/dev/null; sleep 1; rm -rf "$0""#;

/// One node: its ports, properties file and, while it runs, its JVM.
#[derive(Debug)]
struct Node {
    id: i32,
    ports: BTreeMap<String, u16>,
    properties: PathBuf,
    log: PathBuf,
    process: Option<Supervised>,
}

/// A running Kafka cluster; dropping it kills every node and removes its
/// log directories.
#[derive(Debug)]
pub struct KafkaCluster {
    install: KafkaInstall,
    config: KafkaConfig,
    dir: PathBuf,
    nodes: Vec<Node>,
    janitor: Option<(Child, ChildStdin)>,
}

/// A random KRaft cluster id: 16 bytes, URL-safe base64 without padding,
/// never starting with `-`.
fn cluster_id() -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut bytes = [0u8; 16];
    for (i, chunk) in bytes.chunks_mut(8).enumerate() {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_usize(i);
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos()),
        );
        chunk.copy_from_slice(&h.finish().to_le_bytes());
    }
    // A leading `-` would read as an option to `kafka-storage format`
    // (Kafka's own `Uuid.randomUuid` draws again for the same reason): the
    // first character encodes the top six bits, below 62 with the top bit
    // clear.
    bytes[0] &= 0x7f;
    let mut bits = 0u32;
    let mut nbits = 0;
    let mut out = String::new();
    for b in bytes {
        bits = (bits << 8) | u32::from(b);
        nbits += 8;
        while nbits >= 6 {
            nbits -= 6;
            out.push(char::from(ALPHABET[((bits >> nbits) & 63) as usize]));
        }
    }
    if nbits > 0 {
        out.push(char::from(ALPHABET[((bits << (6 - nbits)) & 63) as usize]));
    }
    out
}

impl KafkaCluster {
    /// Formats and starts `config.nodes` nodes, and waits until every one
    /// is registered and answers Metadata listing them all.
    pub async fn start(install: &KafkaInstall, config: KafkaConfig) -> Result<Self, BrokerError> {
        let mut last = String::new();
        // A port found free can be taken before the broker binds it: retry.
        for _ in 0..3 {
            let mut cluster = Self::prepare(install, &config)?;
            match cluster.boot().await {
                Ok(()) => return Ok(cluster),
                Err(why) => last = why,
            }
        }
        Err(BrokerError::Start {
            broker: format!("Apache Kafka {}", super::KAFKA_VERSION),
            why: last,
        })
    }

    /// [`KafkaCluster::start`] on a runtime of its own, for a cluster kept
    /// in a `static` and shared by the tests of one binary (whose runtimes
    /// come and go).
    pub fn start_blocking(
        install: &KafkaInstall,
        config: KafkaConfig,
    ) -> Result<Self, BrokerError> {
        let install = install.clone();
        std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| BrokerError::Start {
                    broker: "Apache Kafka".into(),
                    why: format!("no runtime: {e}"),
                })?
                .block_on(Self::start(&install, config))
        })
        .join()
        .unwrap_or_else(|_| {
            Err(BrokerError::Start {
                broker: "Apache Kafka".into(),
                why: "the start-up thread panicked".into(),
            })
        })
    }

    /// Writes every node's properties and formats its log directory.
    fn prepare(install: &KafkaInstall, config: &KafkaConfig) -> Result<Self, BrokerError> {
        let fail = |why: String| BrokerError::Start {
            broker: format!("Apache Kafka {}", super::KAFKA_VERSION),
            why,
        };
        if config.nodes == 0 {
            return Err(fail("a cluster needs at least one node".into()));
        }
        let dir = std::env::temp_dir().join(format!(
            "walfetch-kafka-{}-{}",
            std::process::id(),
            cluster_id()
        ));
        std::fs::create_dir_all(&dir)
            .map_err(|e| fail(format!("cannot create {}: {e}", dir.display())))?;
        let janitor = Command::new("sh")
            .arg("-c")
            .arg(JANITOR)
            .arg(&dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()
            .and_then(|mut child| child.stdin.take().map(|stdin| (child, stdin)));
        std::fs::write(dir.join("log4j2.properties"), LOG4J2).map_err(|e| fail(e.to_string()))?;

        let mut nodes = Vec::new();
        for index in 0..config.nodes {
            let mut ports = BTreeMap::new();
            for name in std::iter::once(PLAINTEXT)
                .chain(std::iter::once("CONTROLLER"))
                .chain(config.listeners.iter().map(|l| l.name.as_str()))
            {
                let port = free_port().map_err(|e| fail(format!("no free loopback port: {e}")))?;
                ports.insert(name.to_owned(), port);
            }
            let id = i32::try_from(index + 1).map_err(|e| fail(e.to_string()))?;
            let node_dir = dir.join(format!("node-{id}"));
            nodes.push(Node {
                id,
                ports,
                properties: node_dir.join("server.properties"),
                log: node_dir.join("broker.log"),
                process: None,
            });
        }
        let voters = nodes
            .iter()
            .map(|n| format!("{}@127.0.0.1:{}", n.id, n.ports["CONTROLLER"]))
            .collect::<Vec<_>>()
            .join(",");
        let replication = config.nodes.min(3);
        let id = cluster_id();
        for node in &nodes {
            let node_dir = node.properties.parent().unwrap_or(&dir);
            std::fs::create_dir_all(node_dir.join("data")).map_err(|e| fail(e.to_string()))?;
            let mut protocols = vec![
                format!("{PLAINTEXT}:PLAINTEXT"),
                "CONTROLLER:PLAINTEXT".to_owned(),
            ];
            protocols.extend(
                config
                    .listeners
                    .iter()
                    .map(|l| format!("{}:{}", l.name, l.protocol)),
            );
            let listen = |names: &mut dyn Iterator<Item = (&String, &u16)>| {
                names
                    .map(|(name, port)| format!("{name}://127.0.0.1:{port}"))
                    .collect::<Vec<_>>()
                    .join(",")
            };
            let mut text = String::new();
            let mut line = |k: &str, v: &dyn std::fmt::Display| {
                let _ = writeln!(text, "{k}={v}");
            };
            line("process.roles", &"broker,controller");
            line("node.id", &node.id);
            line("controller.quorum.voters", &voters);
            line("listeners", &listen(&mut node.ports.iter()));
            line(
                "advertised.listeners",
                &listen(&mut node.ports.iter().filter(|(n, _)| *n != "CONTROLLER")),
            );
            line("controller.listener.names", &"CONTROLLER");
            line("inter.broker.listener.name", &PLAINTEXT);
            line("listener.security.protocol.map", &protocols.join(","));
            line("log.dirs", &node_dir.join("data").display());
            line("num.partitions", &1);
            line("offsets.topic.replication.factor", &replication);
            line("transaction.state.log.replication.factor", &replication);
            line("transaction.state.log.min.isr", &1);
            line(
                "share.coordinator.state.topic.replication.factor",
                &replication,
            );
            line("share.coordinator.state.topic.min.isr", &1);
            line("group.initial.rebalance.delay.ms", &0);
            for (k, v) in &config.settings {
                line(k, v);
            }
            std::fs::write(&node.properties, text).map_err(|e| fail(e.to_string()))?;
        }
        let formats: Vec<_> = nodes
            .iter()
            .map(|node| {
                let mut command = Command::new(&install.java);
                command
                    .args([
                        "-Xmx256m",
                        "-cp",
                        &install.classpath(),
                        "kafka.tools.StorageTool",
                    ])
                    .args(["format", "-t", &id, "-c"])
                    .arg(&node.properties);
                for user in &config.scram_users {
                    command.arg("--add-scram").arg(format!(
                        "{}=[name={},password={}]",
                        user.mechanism, user.name, user.password
                    ));
                }
                command.stdin(Stdio::null()).output()
            })
            .collect();
        for (node, output) in nodes.iter().zip(formats) {
            let output =
                output.map_err(|e| fail(format!("cannot run {}: {e}", install.java.display())))?;
            if !output.status.success() {
                return Err(fail(format!(
                    "formatting node {}'s log directory failed ({}):\n{}{}",
                    node.id,
                    output.status,
                    String::from_utf8_lossy(&output.stdout),
                    String::from_utf8_lossy(&output.stderr)
                )));
            }
        }
        Ok(Self {
            install: install.clone(),
            config: config.clone(),
            dir,
            nodes,
            janitor,
        })
    }

    /// Starts every node and waits for them all.
    async fn boot(&mut self) -> Result<(), String> {
        for index in 0..self.nodes.len() {
            self.spawn(index)?;
        }
        let within = self.config.start_timeout;
        for index in 0..self.nodes.len() {
            self.wait_ready(index, within).await?;
        }
        Ok(())
    }

    fn spawn(&mut self, index: usize) -> Result<(), String> {
        let heap = self.config.heap_mb;
        let args = vec![
            format!("-Xmx{heap}m"),
            format!("-Xms{}m", heap / 2),
            "-XX:+UseG1GC".to_owned(),
            "-XX:MaxGCPauseMillis=20".to_owned(),
            "-Djava.awt.headless=true".to_owned(),
            // The JVM unpacks its compression codecs' native libraries into
            // its temporary directory and removes them only at a clean exit:
            // inside the cluster's directory, the janitor takes them too
            // when a node is killed.
            format!("-Djava.io.tmpdir={}", self.dir.display()),
            format!(
                "-Dlog4j2.configurationFile={}",
                self.dir.join("log4j2.properties").display()
            ),
            "-cp".to_owned(),
            self.install.classpath(),
            "kafka.Kafka".to_owned(),
            self.nodes[index].properties.display().to_string(),
        ];
        let node = &mut self.nodes[index];
        node.process = Some(Supervised::spawn(
            &self.install.java,
            &args,
            &[],
            node.log.clone(),
            true,
        )?);
        Ok(())
    }

    /// Waits until node `index` answers Metadata listing every running node.
    async fn wait_ready(&mut self, index: usize, within: Duration) -> Result<(), String> {
        let started = Instant::now();
        let address = self.address(index);
        let running = self.running().len();
        let mut last;
        loop {
            let node = &mut self.nodes[index];
            if let Some(status) = node.process.as_mut().and_then(Supervised::exited) {
                return Err(format!(
                    "node {} exited ({status}):\n{}",
                    node.id,
                    tail(&read_log(&node.log), 40)
                ));
            }
            match probe(&address).await {
                Ok(brokers) if brokers >= running => return Ok(()),
                Ok(brokers) => last = format!("Metadata lists {brokers} of {running} brokers"),
                Err(e) => last = e,
            }
            if started.elapsed() > within {
                return Err(format!(
                    "node {} at {address} was not ready within {} s ({last}):\n{}",
                    node.id,
                    within.as_secs(),
                    tail(&read_log(&node.log), 40)
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The plain-text addresses of every node, running or not.
    pub fn bootstrap(&self) -> Vec<String> {
        (0..self.nodes.len()).map(|i| self.address(i)).collect()
    }

    /// `127.0.0.1:PORT` of node `index`'s plain-text listener.
    pub fn address(&self, index: usize) -> String {
        self.listener_address(index, PLAINTEXT)
    }

    /// `127.0.0.1:PORT` of node `index`'s listener `name`; panics for a
    /// listener the cluster was not configured with.
    pub fn listener_address(&self, index: usize, name: &str) -> String {
        format!("127.0.0.1:{}", self.nodes[index].ports[name])
    }

    /// The broker id of node `index` (`index + 1`).
    pub fn node_id(&self, index: usize) -> i32 {
        self.nodes[index].id
    }

    /// The index of the node with broker id `id`.
    pub fn index_of(&self, id: i32) -> Option<usize> {
        self.nodes.iter().position(|n| n.id == id)
    }

    /// The nodes running now, by index.
    pub fn running(&self) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&i| self.nodes[i].process.is_some())
            .collect()
    }

    /// Kills node `index` with SIGKILL (its data stays, for
    /// [`KafkaCluster::restart`]).
    pub fn kill(&mut self, index: usize) {
        drop(self.nodes[index].process.take());
    }

    /// Starts node `index` again on its ports and data, and waits until it
    /// is back in the cluster.
    pub async fn restart(&mut self, index: usize) -> Result<(), BrokerError> {
        let fail = |why: String| BrokerError::Start {
            broker: format!("Kafka node {}", index + 1),
            why,
        };
        if self.nodes[index].process.is_some() {
            return Ok(());
        }
        self.spawn(index).map_err(fail)?;
        let within = self.config.start_timeout;
        self.wait_ready(index, within).await.map_err(fail)
    }

    /// What node `index` logged so far.
    pub fn log_text(&self, index: usize) -> String {
        read_log(&self.nodes[index].log)
    }

    /// Allows `principal` (`User:alice`, `User:CN=client`) each of
    /// `operations` on the topic `topic` (a literal name), by a CreateAcls
    /// request on node 0's plain-text listener: for a cluster started with
    /// an authorizer whose `super.users` include that listener's
    /// `User:ANONYMOUS`. Returns once the controller has committed the
    /// ACLs; the broker applies them a moment later (when it next loads
    /// the metadata log), so a test waits for them to take effect.
    pub async fn allow_topic(
        &self,
        principal: &str,
        topic: &str,
        operations: &[super::AclOperation],
    ) -> Result<(), BrokerError> {
        super::acl::allow_topic(
            self.cluster_config(),
            &self.address(0),
            principal,
            topic,
            operations,
        )
        .await
    }

    /// A client configuration that reaches node `index` alone and gives
    /// up within seconds (1 s to connect, 3 s a request, a 2 s retry
    /// deadline): for asking one node what it sees, as the harness does
    /// while a node starts, where a dead node must not hold the caller.
    pub fn node_probe_config(&self, index: usize) -> ClusterConfig {
        probe_config(&self.address(index))
    }

    /// The cluster's directory (node properties, data, logs).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A client config bootstrapped from every node, with test-sized
    /// timeouts.
    pub fn cluster_config(&self) -> ClusterConfig {
        crate::test_config(self.bootstrap())
    }
}

/// See [`KafkaCluster::node_probe_config`].
fn probe_config(address: &str) -> ClusterConfig {
    let mut config = ClusterConfig::new([address.to_owned()]);
    config.connection.connect_timeout = Duration::from_secs(1);
    config.connection.request_timeout = Duration::from_secs(3);
    config.retry = RetryPolicy {
        deadline: Duration::from_secs(2),
        ..RetryPolicy::default()
    };
    config
}

/// How many brokers the node at `address` lists in Metadata.
async fn probe(address: &str) -> Result<usize, String> {
    let cluster = Cluster::connect(probe_config(address))
        .await
        .map_err(|e| e.to_string())?;
    let metadata = cluster
        .metadata(Some(&[]))
        .await
        .map_err(|e| e.to_string())?;
    Ok(metadata.brokers.len())
}

impl Drop for KafkaCluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            drop(node.process.take());
        }
        if let Some((mut child, stdin)) = self.janitor.take() {
            drop(stdin);
            let _ = child.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::cluster_id;

    #[test]
    fn cluster_ids_are_22_url_safe_characters_never_led_by_a_dash() {
        for _ in 0..2000 {
            let id = cluster_id();
            assert_eq!(id.len(), 22, "{id}");
            assert!(
                id.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
                "{id}"
            );
            assert!(!id.starts_with('-'), "{id}");
        }
    }
}
