//! The settings of a [`Cluster`](super::Cluster): bootstrap addresses,
//! timeouts, the retry policy and what each connection is opened with.

use std::time::Duration;

use super::{RetryPolicy, DEFAULT_BOOTSTRAP_DEADLINE};
use crate::connection::ConnectionConfig;

/// Settings of a [`Cluster`](super::Cluster).
///
/// The defaults fail fast on a dead or wrong address and are patient with
/// a live cluster: connecting (name resolution and TCP) and the
/// `ApiVersions` answer that opens a connection each have 5 s
/// ([`crate::connection::DEFAULT_CONNECT_TIMEOUT`]); a bootstrap retries
/// refused or lost connections for 3 s ([`DEFAULT_BOOTSTRAP_DEADLINE`]) and
/// fails at once on a malformed address, a name that does not resolve or a
/// peer that is not a Kafka broker; a request may take 30 s and an
/// operation, retries included, 30 s. [`ClusterConfig::with_timeout`] sets
/// them all to one value.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    /// Brokers to bootstrap from, tried in order: `host:port`, `host`
    /// (port 9092), `[v6]:port`, optionally after a scheme such as
    /// `tcp://` or `SASL_SSL://` (see [`crate::connection::BrokerAddress`]).
    /// [`Cluster::connect`](super::Cluster::connect) checks them all
    /// before connecting, and keeps them as `host:port`.
    pub bootstrap: Vec<String>,
    /// Settings of every broker connection.
    pub connection: ConnectionConfig,
    /// Retry timing and the overall deadline of each operation.
    pub retry: RetryPolicy,
    /// How long a bootstrap retries retriable failures (refused or lost
    /// connections, timeouts, retriable error codes) before it gives up;
    /// an attempt under way when it passes is finished (each is bounded by
    /// the connect timeout). Default [`DEFAULT_BOOTSTRAP_DEADLINE`].
    pub bootstrap_deadline: Duration,
    /// How long the broker may wait for in-sync replicas on Produce.
    pub produce_timeout: Duration,
    /// How long the broker may take to create topics.
    pub admin_timeout: Duration,
    /// How many connections to open to one broker at most. Fetches spread
    /// over them (a broker serves one request of a connection at a time, so
    /// fetches on separate connections are served side by side); every other
    /// request uses the first, so Produce stays in order. Default 4; 1 is
    /// what most Kafka clients open.
    pub connections_per_broker: usize,
    /// The rack this client runs in (librdkafka's `client.rack`), sent in
    /// Fetch requests (v11+) so that a leader may point the client at a
    /// replica in the same rack, which then serves the partition's
    /// fetches until it fails one (KIP-392; see
    /// [`Cluster::fetch`](super::Cluster::fetch)). `None` fetches from
    /// leaders only.
    pub client_rack: Option<String>,
}

impl ClusterConfig {
    /// Defaults, bootstrapping from `bootstrap`.
    pub fn new<S: Into<String>>(bootstrap: impl IntoIterator<Item = S>) -> Self {
        Self {
            bootstrap: bootstrap.into_iter().map(Into::into).collect(),
            connection: ConnectionConfig::default(),
            retry: RetryPolicy::default(),
            bootstrap_deadline: DEFAULT_BOOTSTRAP_DEADLINE,
            produce_timeout: Duration::from_secs(30),
            admin_timeout: Duration::from_secs(30),
            connections_per_broker: 4,
            client_rack: None,
        }
    }

    /// Sets every time limit to `timeout`: connecting (and the
    /// `ApiVersions` answer), the bootstrap's retries, one request, and one
    /// whole operation (all retries included). The CLI's `--timeout` and
    /// librdkafka's `socket.timeout.ms`, which the error messages about
    /// timeouts name. A shorter limit fails faster on a dead address; a
    /// longer one waits longer for a broker that is starting. The bootstrap
    /// deadline gets a tenth more (and 5 ms, a few timer ticks): an attempt
    /// that ends at its own limit then reports why, instead of being cut
    /// at the same instant with no cause.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.connection.connect_timeout = timeout;
        self.connection.request_timeout = timeout;
        self.retry.deadline = timeout;
        self.bootstrap_deadline = timeout
            .saturating_add(timeout / 10)
            .saturating_add(Duration::from_millis(5));
        self
    }

    /// How long a Produce's answer is waited for: the request timeout
    /// plus [`ClusterConfig::produce_timeout`], the time the broker may
    /// wait for the in-sync replicas before it answers (60 s by default).
    pub fn produce_answer_timeout(&self) -> Duration {
        self.connection
            .request_timeout
            .saturating_add(self.produce_timeout)
    }
}
