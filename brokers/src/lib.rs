//! Real Kafka-protocol brokers on loopback for walfetch's demo, tests and
//! benchmarks: [Apache Kafka](kafka) (KRaft, the pinned release from Maven
//! Central) first, [Tansu](tansu) 0.6 second.
//!
//! Not part of the library a user `cargo add`s: a launcher is test and demo
//! equipment. Every broker process runs under a wrapper that kills it when
//! its owner drops it or dies in any way, so no broker outlives the test
//! binary, bench or demo that started it.

mod process;

pub mod kafka;
pub mod tansu;

use std::time::Duration;

use walfetch::cluster::{ClusterConfig, RetryPolicy};

/// A client config for a broker on loopback, with test-sized timeouts:
/// 2 s to connect, 10 s for a request and 10 s of retries.
pub fn test_config(bootstrap: impl IntoIterator<Item = String>) -> ClusterConfig {
    let mut config = ClusterConfig::new(bootstrap);
    config.connection.connect_timeout = Duration::from_secs(2);
    config.connection.request_timeout = Duration::from_secs(10);
    config.retry = RetryPolicy {
        deadline: Duration::from_secs(10),
        ..RetryPolicy::default()
    };
    config
}

/// Why a broker could not be found, installed or started.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BrokerError {
    /// No Tansu binary was found.
    #[error("the Tansu {} broker is not installed (looked at $TANSU_BIN, `tansu` on PATH and ~/.cargo/bin/tansu): {}", tansu::TANSU_VERSION, tansu::INSTALL_HINT)]
    TansuNotInstalled,
    /// The pinned Kafka release is not installed.
    #[error(
        "Apache Kafka {} is not installed (looked at {looked_at}): {}",
        kafka::KAFKA_VERSION,
        kafka::KAFKA_INSTALL_HINT
    )]
    KafkaNotInstalled {
        /// Where it was looked for.
        looked_at: String,
    },
    /// No JVM to run Kafka.
    #[error("Apache Kafka needs a JDK 17 or newer: no `java` at $JAVA_HOME/bin/java or on PATH")]
    NoJava,
    /// Installing failed.
    #[error("installing the broker failed: {0}")]
    Install(String),
    /// A request to the broker (an administrative one the harness sends)
    /// failed.
    #[error("{what} failed: {why}")]
    Request {
        /// What was asked.
        what: String,
        /// The broker's answer, or why none came.
        why: String,
    },
    /// The broker did not come up.
    #[error("{broker} did not start: {why}")]
    Start {
        /// Which broker.
        broker: String,
        /// What happened, with the broker's log.
        why: String,
    },
}
