//! Apache Kafka for integration tests: one single-node KRaft cluster per
//! test binary, started on first use by [`walfetch_brokers::kafka`] and
//! shared by that binary's tests (the JVM's start-up is paid once).
//!
//! Tests on the shared node must not see each other's data: each takes a
//! fresh topic name from [`unique_topic`]. The node dies with the test
//! process, panicking or killed (its supervisor watches a pipe that the
//! kernel closes), and takes its temporary log directory with it.
//!
//! A missing install or JDK fails the test with what to do; it never
//! skips.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

use walfetch_brokers::kafka::{find_kafka, KafkaCluster, KafkaConfig};

/// Segment size of the shared node: small, so that tests that write a few
/// MiB see their logs rolled into several segments as a long-running
/// broker's would be.
pub const SEGMENT_BYTES: usize = 1 << 20;

/// The binary's shared Kafka node; started (blocking, up to the launcher's
/// start timeout) by the first caller.
pub fn shared() -> &'static KafkaCluster {
    static KAFKA: OnceLock<KafkaCluster> = OnceLock::new();
    KAFKA.get_or_init(|| {
        let install = find_kafka().unwrap_or_else(|e| panic!("{e}"));
        let config = KafkaConfig::nodes(1)
            .setting("log.segment.bytes", SEGMENT_BYTES.to_string())
            // Tests create topics with the partition counts they need.
            .setting("auto.create.topics.enable", "false");
        KafkaCluster::start_blocking(&install, config).unwrap_or_else(|e| panic!("{e}"))
    })
}

/// `base` made unique within this test process (and across processes
/// sharing nothing): `base-<pid>-<n>`.
pub fn unique_topic(base: &str) -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    format!(
        "{base}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}
