//! TLS, SASL and ACLs on Apache Kafka's own listeners (no stunnel): one
//! node for the whole binary, with
//!
//! - `SASL_SSL` with SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN,
//! - `SSL` (server certificate only) and
//! - `MTLS`, an `SSL` listener with `ssl.client.auth=required`,
//!
//! each serving a certificate from a [`TestCa`] made when the node starts
//! (PEM key stores), and Kafka's `StandardAuthorizer` with
//! `allow.everyone.if.no.acl.found=false`. Kafka advertises each listener's
//! own address to the clients that came through it, so every connection a
//! client opens, bootstrap and after Metadata, is on the secured listener.
//!
//! A wrong password, an unknown authority, a missing client certificate and
//! a refused topic each fail fast (in well under the 10 s retry deadline a
//! retry loop would use up), with an error that says what was refused.
#![allow(clippy::unwrap_used)]

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use kafka_protocol::messages::ApiKey;
use walfetch::cluster::{ClientError, Cluster, ClusterConfig, FetchParams, NewTopic};
use walfetch::codec::{BatchBuilder, Batches, DecodeOptions, NewRecord};
use walfetch::connection::{Pem, SaslConfig, Security, TlsConfig};
use walfetch::error_code::ErrorCode;
use walfetch_brokers::kafka::{find_kafka, AclOperation, KafkaCluster, Listener};
use walfetch_testkit::TestCa;

use walfetch_support::kafka::{secured_node, unique_topic, write_node_certs};
use walfetch_support::security::{
    assert_an_unknown_authority_fails_fast, error_chain as chain, refused_fast, secured_config,
    FAST,
};

/// The SCRAM user with both mechanisms; a super user.
const ALICE: (&str, &str) = ("alice", "alice-secret");
/// The PLAIN user; a super user.
const BOB: (&str, &str) = ("bob", "bob-secret");
/// A SCRAM-SHA-256 user allowed only to describe the topics it is given.
const DORA: (&str, &str) = ("dora", "dora-secret");
/// A SCRAM-SHA-256 user allowed to read the topics it is given.
const RITA: (&str, &str) = ("rita", "rita-secret");
/// The common name of the client certificate the `MTLS` listener accepts
/// (its principal, `User:CN=walfetch-client`, is a super user).
const CLIENT_CN: &str = "walfetch-client";

/// The binary's node and the authority its certificates come from.
struct Secured {
    kafka: KafkaCluster,
    ca_pem: String,
    client_cert_pem: String,
    client_key_pem: String,
}

fn secured() -> &'static Secured {
    static SECURED: OnceLock<Secured> = OnceLock::new();
    SECURED.get_or_init(|| {
        let install = find_kafka().unwrap_or_else(|e| panic!("{e}"));
        let ca = TestCa::new("walfetch Kafka test CA").unwrap();
        let client = ca.client_cert(CLIENT_CN).unwrap();
        let certs = write_node_certs(&ca, &["127.0.0.1", "localhost"], "security-kafka");
        let mut config = secured_node(&certs)
            .listener(Listener::new("SSL", "SSL"))
            .listener(Listener::new("MTLS", "SSL"))
            // The plain-text listener (brokers and controllers among
            // themselves, the harness, topic set-up here) and the `SSL`
            // one give `User:ANONYMOUS`.
            .setting(
                "super.users",
                format!(
                    "User:ANONYMOUS;User:{};User:{};User:CN={CLIENT_CN}",
                    ALICE.0, BOB.0
                ),
            )
            .setting(
                "listener.name.sasl_ssl.sasl.enabled.mechanisms",
                "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN",
            )
            .setting(
                "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config",
                "org.apache.kafka.common.security.scram.ScramLoginModule required;",
            )
            .setting(
                "listener.name.sasl_ssl.plain.sasl.jaas.config",
                format!(
                    "org.apache.kafka.common.security.plain.PlainLoginModule required \
                     user_{}=\"{}\";",
                    BOB.0, BOB.1
                ),
            )
            .setting("listener.name.mtls.ssl.client.auth", "required")
            .setting("listener.name.mtls.ssl.truststore.type", "PEM")
            .setting(
                "listener.name.mtls.ssl.truststore.location",
                certs.ca_file.display().to_string(),
            );
        for listener in ["ssl", "mtls"] {
            config = config
                .setting(format!("listener.name.{listener}.ssl.keystore.type"), "PEM")
                .setting(
                    format!("listener.name.{listener}.ssl.keystore.location"),
                    certs.keystore.display().to_string(),
                );
        }
        for mechanism in ["SCRAM-SHA-256", "SCRAM-SHA-512"] {
            config = config.scram_user(mechanism, ALICE.0, ALICE.1);
        }
        for (name, password) in [DORA, RITA] {
            config = config.scram_user("SCRAM-SHA-256", name, password);
        }
        let kafka =
            KafkaCluster::start_blocking(&install, config).unwrap_or_else(|e| panic!("{e}"));
        Secured {
            kafka,
            ca_pem: ca.ca_pem(),
            client_cert_pem: client.cert_pem,
            client_key_pem: client.key_pem,
        }
    })
}

impl Secured {
    fn address(&self, listener: &str) -> String {
        self.kafka.listener_address(0, listener)
    }

    fn tls(&self) -> TlsConfig {
        TlsConfig::ca_pem(self.ca_pem.clone())
    }

    fn sasl(&self, sasl: SaslConfig) -> ClusterConfig {
        secured_config(
            self.address("SASL_SSL"),
            Security::sasl_ssl(self.tls(), sasl),
        )
    }

    /// A client connected with `config`; a refusal panics with the log.
    async fn connect(&self, config: ClusterConfig) -> Cluster {
        Cluster::connect(config)
            .await
            .unwrap_or_else(|e| panic!("{}\n{}", chain(&e), self.log_tail()))
    }

    /// A client as `User:ANONYMOUS` on the plain-text listener (a super
    /// user): topics are made and written through it.
    async fn admin(&self) -> Cluster {
        self.connect(self.kafka.cluster_config()).await
    }

    fn log_tail(&self) -> String {
        let log = self.kafka.log_text(0);
        let lines: Vec<&str> = log.lines().collect();
        format!(
            "--- Kafka log (tail) ---\n{}",
            lines[lines.len().saturating_sub(40)..].join("\n")
        )
    }
}

/// Makes `topic` (one partition) and writes three batches of two records
/// to it through `cluster`; returns the values written.
async fn write_topic(cluster: &Cluster, topic: &str) -> Vec<String> {
    cluster
        .create_topics(&[NewTopic::new(topic, 1)])
        .await
        .unwrap();
    let mut values = Vec::new();
    for b in 0..3 {
        let batch_values = [format!("{topic}-{b}-a"), format!("{topic}-{b}-b")];
        let batch = BatchBuilder::new(0)
            .encode(&[
                NewRecord::value(0, batch_values[0].clone()),
                NewRecord::value(1, batch_values[1].clone()),
            ])
            .unwrap();
        let base = cluster.produce(topic, 0, batch.bytes).await.unwrap();
        assert_eq!(base, 2 * b, "{topic}");
        values.extend(batch_values);
    }
    values
}

/// Every value of partition 0 of `topic` from offset 0, by one Fetch.
async fn read_topic(cluster: &Cluster, topic: &str) -> Result<Vec<String>, ClientError> {
    let fetched = cluster.fetch(&FetchParams::new(topic, 0, 0)).await?;
    let mut values = Vec::new();
    for batch in Batches::new(fetched.records, DecodeOptions::default()) {
        let batch = batch.unwrap();
        for record in batch.records().unwrap() {
            let record = record.unwrap();
            values.push(String::from_utf8_lossy(record.value().unwrap()).into_owned());
        }
    }
    Ok(values)
}

/// [`read_topic`], answered (`what` says how) within [`FAST`].
async fn read_answered_fast(
    cluster: &Cluster,
    topic: &str,
    what: &str,
) -> Result<Vec<String>, ClientError> {
    let started = Instant::now();
    let result = read_topic(cluster, topic).await;
    let took = started.elapsed();
    eprintln!("{what} ({took:?}): {result:?}");
    assert!(took < FAST, "{what}: {took:?}: {result:?}");
    result
}

/// Writes a topic through `cluster` and reads it back; checks that every
/// connection went to `address`.
async fn round_trip(cluster: &Cluster, address: &str, what: &str) {
    let topic = unique_topic(what);
    let written = write_topic(cluster, &topic).await;
    assert_eq!(
        read_topic(cluster, &topic).await.unwrap(),
        written,
        "{what}"
    );
    let stats = cluster.stats();
    assert!(!stats.is_empty());
    for (connected, s) in &stats {
        assert_eq!(connected, address, "{what}: {stats:?}");
        assert!(s.responses > 0, "{what}: {stats:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sasl_ssl_round_trips_with_scram_sha256_scram_sha512_and_plain() {
    let kafka = secured();
    let address = kafka.address("SASL_SSL");
    for sasl in [
        SaslConfig::scram_sha256(ALICE.0, ALICE.1),
        SaslConfig::scram_sha512(ALICE.0, ALICE.1),
        SaslConfig::plain(BOB.0, BOB.1),
    ] {
        let name = sasl.mechanism_name();
        let started = Instant::now();
        let cluster = kafka.connect(kafka.sasl(sasl)).await;
        eprintln!("{name}: connected in {:?}", started.elapsed());
        round_trip(&cluster, &address, &format!("sasl-{}", name.to_lowercase())).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ssl_round_trip_and_an_unknown_authority_fails_fast() {
    let kafka = secured();
    let address = kafka.address("SSL");
    let cluster = kafka
        .connect(secured_config(address.clone(), Security::ssl(kafka.tls())))
        .await;
    round_trip(&cluster, &address, "ssl").await;

    assert_an_unknown_authority_fails_fast(address).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_round_trip_and_no_client_certificate_fails_fast() {
    let kafka = secured();
    let address = kafka.address("MTLS");
    let identity = kafka.tls().client_identity(
        Pem::Bytes(kafka.client_cert_pem.clone().into_bytes()),
        Pem::Bytes(kafka.client_key_pem.clone().into_bytes()),
    );
    let cluster = kafka
        .connect(secured_config(address.clone(), Security::ssl(identity)))
        .await;
    round_trip(&cluster, &address, "mtls").await;

    let text = refused_fast(
        secured_config(address, Security::ssl(kafka.tls())),
        "no client certificate",
    )
    .await;
    assert!(text.contains("TLS handshake"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_passwords_and_unknown_users_fail_fast_saying_authentication_failed() {
    let kafka = secured();
    for sasl in [
        SaslConfig::scram_sha256(ALICE.0, "wrong"),
        SaslConfig::scram_sha512(ALICE.0, "wrong"),
        SaslConfig::scram_sha256("nobody", "secret"),
        SaslConfig::plain(BOB.0, "wrong"),
        SaslConfig::plain("nobody", "secret"),
    ] {
        let name = sasl.mechanism_name();
        let text = refused_fast(kafka.sasl(sasl), &format!("{name}: bad credentials")).await;
        assert!(
            text.contains(&format!("SASL {name} authentication with broker"))
                && text.contains("failed")
                && text.to_lowercase().contains("authentication failed"),
            "{name}: {text}"
        );
    }
}

/// Waits (up to 30 s) until `check` holds: ACLs take effect on the broker
/// a moment after CreateAcls is answered.
async fn until_acls_apply<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    let started = Instant::now();
    loop {
        match check().await {
            Ok(()) => {
                eprintln!("{what}: the ACLs applied within {:?}", started.elapsed());
                return;
            }
            Err(e) if started.elapsed() > Duration::from_secs(30) => {
                panic!("{what}: the ACLs never took effect: {e}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// Asserts that `result` is Kafka's TOPIC_AUTHORIZATION_FAILED about
/// `topic`, said in its text too.
fn assert_topic_refused<T: std::fmt::Debug>(
    result: Result<T, ClientError>,
    refused_by: ApiKey,
    topic: &str,
) {
    let err = result.expect_err("a topic the user may not read");
    let text = chain(&err);
    assert!(
        text.contains("TOPIC_AUTHORIZATION_FAILED") && text.contains(topic),
        "{text}"
    );
    match &err {
        ClientError::Kafka {
            api,
            code,
            topic: named,
            ..
        } => {
            assert_eq!(*api, refused_by, "{text}");
            assert_eq!(*code, ErrorCode::TopicAuthorizationFailed, "{text}");
            assert_eq!(named.as_deref(), Some(topic), "{text}");
        }
        other => panic!("not a Kafka error: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_without_read_is_topic_authorization_failed_at_once() {
    let kafka = secured();
    let admin = kafka.admin().await;
    let topic = unique_topic("described");
    write_topic(&admin, &topic).await;
    kafka
        .kafka
        .allow_topic(
            &format!("User:{}", DORA.0),
            &topic,
            &[AclOperation::Describe],
        )
        .await
        .unwrap();
    let dora = kafka
        .connect(kafka.sasl(SaslConfig::scram_sha256(DORA.0, DORA.1)))
        .await;
    until_acls_apply("DESCRIBE", || async {
        dora.leader(&topic, 0)
            .await
            .map(|_| ())
            .map_err(|e| chain(&e))
    })
    .await;
    let result = read_answered_fast(&dora, &topic, "fetch without READ").await;
    // Metadata shows the topic (DESCRIBE); Fetch refuses it (no READ).
    assert_topic_refused(result, ApiKey::Fetch, &topic);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_of_one_topic_gets_nothing_of_another() {
    let kafka = secured();
    let admin = kafka.admin().await;
    let allowed = unique_topic("allowed");
    let other = unique_topic("other");
    let written = write_topic(&admin, &allowed).await;
    write_topic(&admin, &other).await;
    kafka
        .kafka
        .allow_topic(&format!("User:{}", RITA.0), &allowed, &[AclOperation::Read])
        .await
        .unwrap();
    let rita = kafka
        .connect(kafka.sasl(SaslConfig::scram_sha256(RITA.0, RITA.1)))
        .await;
    until_acls_apply("READ", || async {
        read_topic(&rita, &allowed)
            .await
            .map(|_| ())
            .map_err(|e| chain(&e))
    })
    .await;
    assert_eq!(read_topic(&rita, &allowed).await.unwrap(), written);

    let result = read_answered_fast(&rita, &other, "fetch of another topic").await;
    // Refused before any Fetch: Metadata does not show the topic either.
    assert_topic_refused(result, ApiKey::Metadata, &other);
    // Nor its metadata.
    assert_topic_refused(rita.leader(&other, 0).await, ApiKey::Metadata, &other);
}
