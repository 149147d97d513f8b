//! The command line against Apache Kafka's own `SASL_SSL` listener
//! (SCRAM-SHA-256, a server certificate from a [`TestCa`] made when the
//! node starts) with Kafka's `StandardAuthorizer` on: a topic the user may
//! describe but not read, or may not even describe, makes `walfetch
//! capture` exit non-zero at once (no retry loop: well under the 30 s
//! default retry deadline) with an error naming the topic and
//! `TOPIC_AUTHORIZATION_FAILED`; a topic it may read is captured. One node
//! for the whole binary.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use walfetch::cluster::{Cluster, NewTopic};
use walfetch::codec::{BatchBuilder, NewRecord};
use walfetch_brokers::kafka::{find_kafka, AclOperation, KafkaCluster};
use walfetch_support::cli::{path, stderr, strings, temp_dir, Cli};
use walfetch_support::kafka::{secured_node, unique_topic, write_node_certs};
use walfetch_testkit::TestCa;

/// The `walfetch` binary these tests run.
const WALFETCH: Cli = Cli::new(env!("CARGO_BIN_EXE_walfetch"));

/// A SCRAM-SHA-256 user allowed only what each test grants it.
const DORA: (&str, &str) = ("dora", "dora-secret");
/// Another, for the reader test.
const RITA: (&str, &str) = ("rita", "rita-secret");

/// Fail-fast bound, process start included: under a sixth of the CLI's
/// 30 s default retry deadline, which a retried error would use up.
const FAST: Duration = Duration::from_secs(5);

struct Secured {
    kafka: KafkaCluster,
    ca_file: PathBuf,
}

fn secured() -> &'static Secured {
    static SECURED: OnceLock<Secured> = OnceLock::new();
    SECURED.get_or_init(|| {
        let install = find_kafka().unwrap_or_else(|e| panic!("{e}"));
        let ca = TestCa::new("walfetch CLI Kafka test CA").unwrap();
        let certs = write_node_certs(&ca, &["127.0.0.1"], "cli-security-kafka");
        let config = secured_node(&certs)
            // The plain-text listener's principal: the node itself, the
            // harness and the set-up here.
            .setting("super.users", "User:ANONYMOUS")
            .setting(
                "listener.name.sasl_ssl.sasl.enabled.mechanisms",
                "SCRAM-SHA-256",
            )
            .scram_user("SCRAM-SHA-256", DORA.0, DORA.1)
            .scram_user("SCRAM-SHA-256", RITA.0, RITA.1);
        let kafka =
            KafkaCluster::start_blocking(&install, config).unwrap_or_else(|e| panic!("{e}"));
        Secured {
            kafka,
            ca_file: certs.ca_file,
        }
    })
}

/// Makes `topic` and writes two batches to it as the super user.
async fn write_topic(kafka: &KafkaCluster, topic: &str) {
    let cluster = Cluster::connect(kafka.cluster_config()).await.unwrap();
    cluster
        .create_topics(&[NewTopic::new(topic, 1)])
        .await
        .unwrap();
    for b in 0..2 {
        let batch = BatchBuilder::new(0)
            .encode(&[NewRecord::value(0, format!("v{b}"))])
            .unwrap();
        cluster.produce(topic, 0, batch.bytes).await.unwrap();
    }
}

/// `walfetch capture` of partition 0 of `topic` as `user` over SASL_SSL.
async fn capture(user: (&str, &str), topic: &str) -> (std::process::Output, Duration, PathBuf) {
    let kafka = secured();
    let out = temp_dir("security-kafka").join(format!("{topic}.records"));
    let address = kafka.kafka.listener_address(0, "SASL_SSL");
    let username = format!("sasl.username={}", user.0);
    let password = format!("sasl.password={}", user.1);
    let ca = format!("ssl.ca.location={}", path(&kafka.ca_file));
    let args = strings(&[
        "capture",
        "-b",
        &address,
        "-t",
        topic,
        "-p",
        "0",
        "--out",
        path(&out),
        "-X",
        "security.protocol=SASL_SSL",
        "-X",
        "sasl.mechanism=SCRAM-SHA-256",
        "-X",
        &username,
        "-X",
        &password,
        "-X",
        &ca,
    ]);
    let started = Instant::now();
    let output = WALFETCH.run_async(args).await;
    (output, started.elapsed(), out)
}

/// Runs `capture` until it succeeds (up to 30 s): ACLs take effect on the
/// broker a moment after CreateAcls is answered.
async fn capture_once_acls_apply(user: (&str, &str), topic: &str) -> PathBuf {
    let started = Instant::now();
    loop {
        let (output, _, out) = capture(user, topic).await;
        if output.status.success() {
            return out;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the ACLs never took effect: {}",
            stderr(&output)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn assert_refused(output: &std::process::Output, took: Duration, topic: &str) {
    let text = stderr(output);
    eprintln!(
        "walfetch capture of {topic} ({took:?}, {}): {text}",
        output.status
    );
    assert!(!output.status.success(), "{text}");
    assert!(took < FAST, "{took:?}: {text}");
    assert!(
        text.contains("TOPIC_AUTHORIZATION_FAILED") && text.contains(topic),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capture_of_a_topic_described_but_not_readable_exits_at_once_naming_it() {
    let kafka = secured();
    let topic = unique_topic("described");
    write_topic(&kafka.kafka, &topic).await;
    // Until the DESCRIBE ACL applies, Metadata refuses the topic; after,
    // Fetch does: wait for the second, then check it.
    kafka
        .kafka
        .allow_topic(
            &format!("User:{}", DORA.0),
            &topic,
            &[AclOperation::Describe],
        )
        .await
        .unwrap();
    let started = Instant::now();
    let (output, took) = loop {
        let (output, took, _) = capture(DORA, &topic).await;
        let text = stderr(&output);
        if !text.contains("Metadata") || started.elapsed() > Duration::from_secs(30) {
            break (output, took);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_refused(&output, took, &topic);
    assert!(stderr(&output).contains("Fetch"), "{}", stderr(&output));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capture_as_a_reader_of_one_topic_gets_it_and_nothing_of_another() {
    let kafka = secured();
    let allowed = unique_topic("allowed");
    let other = unique_topic("other");
    write_topic(&kafka.kafka, &allowed).await;
    write_topic(&kafka.kafka, &other).await;
    kafka
        .kafka
        .allow_topic(&format!("User:{}", RITA.0), &allowed, &[AclOperation::Read])
        .await
        .unwrap();
    let out = capture_once_acls_apply(RITA, &allowed).await;
    assert!(std::fs::metadata(&out).unwrap().len() > 0);

    let (output, took, out) = capture(RITA, &other).await;
    assert_refused(&output, took, &other);
    assert!(!out.exists(), "a refused capture left {}", out.display());
}
