//! Apache Kafka in KRaft mode on loopback: the first real broker of the
//! tests, benches and demo.
//!
//! [`find_kafka`] finds the pinned release that `scripts/setup-kafka.sh`
//! installed; [`KafkaCluster::start`] formats and starts one node or more
//! (combined broker + controller each, a JVM of 512 MiB heap by default)
//! and waits until Metadata lists them all.
//!
//! # References
//! - Apache Kafka documentation, "KRaft" and "Quick Start" (formatting a
//!   log directory with `kafka-storage`, `process.roles`,
//!   `controller.quorum.voters`).

mod acl;
mod cluster;
mod config;
mod install;

pub use acl::AclOperation;
pub use cluster::KafkaCluster;
pub use config::{KafkaConfig, Listener, ScramUser};
pub use install::{
    find_kafka, find_kafka_in, find_or_install_kafka, install_kafka, kafka_home_in, KafkaInstall,
    KAFKA_INSTALL_HINT, KAFKA_VERSION,
};
