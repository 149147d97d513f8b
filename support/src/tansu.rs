//! A real broker for integration tests: Tansu 0.6.0 with in-memory storage
//! on a free loopback port, one per test, started by
//! [`walfetch_brokers::tansu`].
//!
//! Tansu starts in milliseconds and takes ~16 MB, so every test gets its own
//! broker: tests cannot see each other's topics, and Drop stops the broker
//! (also when the test process dies).
//!
//! A missing binary fails the test with the install command; it never
//! skips.

use std::ffi::OsString;
use std::path::PathBuf;

use walfetch::cluster::{Cluster, ClusterConfig, NewTopic};
pub use walfetch_brokers::tansu::TANSU_VERSION;
use walfetch_brokers::tansu::{find_tansu_in, tansu_version, TansuBroker, INSTALL_HINT};

/// A running Tansu broker.
pub struct Tansu {
    broker: TansuBroker,
}

/// The tansu binary: `$TANSU_BIN`, `tansu` on PATH, or `~/.cargo/bin/tansu`;
/// panics with the install command when there is none.
pub fn tansu_binary() -> PathBuf {
    find_tansu(|name| std::env::var_os(name)).unwrap_or_else(|why| panic!("{why}"))
}

/// Looks for the tansu binary with `env` as the environment; the error says
/// where it looked and how to install it.
pub fn find_tansu(env: impl Fn(&str) -> Option<OsString>) -> Result<PathBuf, String> {
    find_tansu_in(env).ok_or_else(|| {
        format!(
            "the integration tests need the Tansu {TANSU_VERSION} broker, which is not installed \
             (looked at $TANSU_BIN, `tansu` on PATH and ~/.cargo/bin/tansu): {INSTALL_HINT}"
        )
    })
}

impl Tansu {
    /// Starts a broker and waits until it answers ApiVersions. Panics, with
    /// the broker's log, when it cannot be started.
    pub async fn start() -> Self {
        let bin = tansu_binary();
        let version = tansu_version(&bin).unwrap_or_default();
        if !version.contains(TANSU_VERSION) {
            // Not fatal: the habit tests exist to notice what a new version changes.
            eprintln!("note: {} reports {version:?}; the tests pin down the habits of Tansu {TANSU_VERSION}", bin.display());
        }
        let broker = TansuBroker::start(&bin, None)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        Self { broker }
    }

    /// `127.0.0.1:PORT`.
    pub fn address(&self) -> String {
        self.broker.address()
    }

    /// What the broker wrote to stdout and stderr so far.
    pub fn log_text(&self) -> String {
        self.broker.log_text()
    }

    /// A cluster config for this broker with test-sized timeouts.
    pub fn cluster_config(&self) -> ClusterConfig {
        walfetch_brokers::test_config([self.address()])
    }

    /// A cluster client bootstrapped from this broker.
    pub async fn cluster(&self) -> Cluster {
        Cluster::connect(self.cluster_config())
            .await
            .unwrap_or_else(|e| panic!("bootstrap from Tansu at {}: {e}", self.address()))
    }

    /// A cluster client with a fresh topic of `partitions` partitions.
    pub async fn cluster_with_topic(&self, topic: &str, partitions: i32) -> Cluster {
        let cluster = self.cluster().await;
        cluster
            .create_topics(&[NewTopic::new(topic, partitions)])
            .await
            .unwrap_or_else(|e| panic!("create topic {topic:?}: {e}"));
        cluster
    }
}
