//! What a Kafka test cluster looks like: node count, listeners beyond the
//! plain-text one, broker settings, SCRAM users, heap.

use std::time::Duration;

/// A client listener besides the plain-text one every node has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listener {
    /// The listener name (`SASL_SSL`, `MTLS`, …); settings for it are
    /// prefixed `listener.name.<lower-case name>.`.
    pub name: String,
    /// Its security protocol: `PLAINTEXT`, `SSL`, `SASL_PLAINTEXT` or
    /// `SASL_SSL`.
    pub protocol: String,
}

impl Listener {
    /// A listener named `name` speaking `protocol`.
    pub fn new(name: impl Into<String>, protocol: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            protocol: protocol.into(),
        }
    }
}

/// A SCRAM credential written into the cluster's metadata when its log
/// directories are formatted (`kafka-storage format --add-scram`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScramUser {
    /// `SCRAM-SHA-256` or `SCRAM-SHA-512`.
    pub mechanism: String,
    /// The user name.
    pub name: String,
    /// The password.
    pub password: String,
}

/// How to start a Kafka cluster of combined (broker + controller) KRaft
/// nodes on loopback.
#[derive(Debug, Clone)]
pub struct KafkaConfig {
    /// Nodes, each broker and controller (1 for most tests, 3 for
    /// failover).
    pub nodes: usize,
    /// More `server.properties` lines for every node, after the harness's
    /// own (so they override them): `log.segment.bytes`, an authorizer,
    /// listener JAAS settings, ….
    pub settings: Vec<(String, String)>,
    /// Client listeners besides `PLAINTEXT` (which brokers also use among
    /// themselves).
    pub listeners: Vec<Listener>,
    /// SCRAM users to create.
    pub scram_users: Vec<ScramUser>,
    /// Each node's JVM heap (`-Xmx`), in MiB.
    pub heap_mb: u32,
    /// How long a node may take to start and register.
    pub start_timeout: Duration,
}

impl Default for KafkaConfig {
    fn default() -> Self {
        Self::nodes(1)
    }
}

impl KafkaConfig {
    /// `nodes` nodes with the harness's defaults: 512 MiB heaps, a minute
    /// to start.
    pub fn nodes(nodes: usize) -> Self {
        Self {
            nodes,
            settings: Vec::new(),
            listeners: Vec::new(),
            scram_users: Vec::new(),
            heap_mb: 512,
            start_timeout: Duration::from_secs(90),
        }
    }

    /// Adds a broker setting.
    pub fn setting(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.settings.push((name.into(), value.into()));
        self
    }

    /// Adds a client listener.
    pub fn listener(mut self, listener: Listener) -> Self {
        self.listeners.push(listener);
        self
    }

    /// Adds a SCRAM user.
    pub fn scram_user(
        mut self,
        mechanism: impl Into<String>,
        name: impl Into<String>,
        password: impl Into<String>,
    ) -> Self {
        self.scram_users.push(ScramUser {
            mechanism: mechanism.into(),
            name: name.into(),
            password: password.into(),
        });
        self
    }
}
