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

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

use walfetch_brokers::kafka::{find_kafka, KafkaCluster, KafkaConfig, Listener};
use walfetch_testkit::TestCa;

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

/// A node's TLS material written where Kafka's PEM stores read it.
#[derive(Debug, Clone)]
pub struct NodeCerts {
    /// The key store: the node's (unencrypted PKCS#8) key and certificate
    /// chain in one PEM file.
    pub keystore: PathBuf,
    /// The authority's certificate, for trust stores and clients.
    pub ca_file: PathBuf,
}

/// Writes a server certificate of `ca` for `hosts` into a fresh directory
/// of this process named for `name`.
pub fn write_node_certs(ca: &TestCa, hosts: &[&str], name: &str) -> NodeCerts {
    let server = ca.server_cert(hosts).unwrap();
    let dir = crate::temp_dir(name);
    let keystore = dir.join("server.pem");
    std::fs::write(&keystore, format!("{}{}", server.key_pem, server.cert_pem)).unwrap();
    let ca_file = dir.join("ca.pem");
    std::fs::write(&ca_file, ca.ca_pem()).unwrap();
    NodeCerts { keystore, ca_file }
}

/// One node with a `SASL_SSL` listener serving `certs` (SCRAM-SHA-256's
/// login module configured on it), Kafka's `StandardAuthorizer` refusing
/// what no ACL allows, and no topic created by a fetch. The caller adds its
/// super users, its mechanisms
/// (`listener.name.sasl_ssl.sasl.enabled.mechanisms`), users and listeners.
pub fn secured_node(certs: &NodeCerts) -> KafkaConfig {
    KafkaConfig::nodes(1)
        .listener(Listener::new("SASL_SSL", "SASL_SSL"))
        .setting("auto.create.topics.enable", "false")
        .setting(
            "authorizer.class.name",
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        )
        .setting("allow.everyone.if.no.acl.found", "false")
        .setting(
            "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config",
            "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        )
        .setting("listener.name.sasl_ssl.ssl.keystore.type", "PEM")
        .setting(
            "listener.name.sasl_ssl.ssl.keystore.location",
            certs.keystore.display().to_string(),
        )
}
