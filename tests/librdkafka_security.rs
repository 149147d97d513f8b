//! The testkit's TLS and SASL server side against an independent client:
//! librdkafka 2.16.0 (the confluent-kafka Python package) authenticates to
//! the scripted broker over SASL_PLAINTEXT and SASL_SSL with PLAIN,
//! SCRAM-SHA-256 and SCRAM-SHA-512, produces, and consumes back; with a
//! wrong password it is refused. This is what makes the testkit a fair
//! stand-in for a broker in `tests/security_testkit.rs`.
//!
//! Needs `python3` with `confluent-kafka` at the version pinned in
//! `scripts/requirements-test.txt` (`scripts/setup-python.sh`).
#![allow(clippy::unwrap_used)]

use std::process::{Command, Output};

use serde_json::Value;
use walfetch_support::librdkafka::require_confluent_kafka;
use walfetch_testkit::{SaslServer, ScriptedCluster, ServerTls, TestCa};

const SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/scripts/fixtures/librdkafka_secure.py"
);

async fn librdkafka(bootstrap: String, topic: &str, props: Vec<String>) -> Output {
    let topic = topic.to_owned();
    tokio::task::spawn_blocking(move || {
        Command::new("python3")
            .arg(SCRIPT)
            .args([&bootstrap, &topic, "5"])
            .args(&props)
            .output()
            .expect("run python3")
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn librdkafka_authenticates_produces_and_consumes() {
    require_confluent_kafka();
    let ca = TestCa::new("librdkafka test CA").unwrap();
    let dir = std::env::temp_dir().join(format!("walfetch-librdkafka-sec-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca_file = dir.join("ca.pem");
    std::fs::write(&ca_file, ca.ca_pem()).unwrap();

    for tls in [false, true] {
        for mechanism in ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] {
            let mut builder =
                ScriptedCluster::builder().sasl(SaslServer::new().user("alice", "alice-secret"));
            let mut props = vec![
                format!("sasl.mechanism={mechanism}"),
                "sasl.username=alice".to_owned(),
            ];
            if tls {
                builder = builder.tls(ServerTls::new(ca.server_cert(&["127.0.0.1"]).unwrap()));
                props.push("security.protocol=SASL_SSL".to_owned());
                props.push(format!("ssl.ca.location={}", ca_file.display()));
            } else {
                props.push("security.protocol=SASL_PLAINTEXT".to_owned());
            }
            let cluster = builder.start().await.unwrap();
            cluster.create_topic("secure", 1).unwrap();
            let what = format!("{mechanism} over {}", if tls { "TLS" } else { "TCP" });

            let mut good = props.clone();
            good.push("sasl.password=alice-secret".to_owned());
            let out = librdkafka(cluster.bootstrap(), "secure", good).await;
            assert!(
                out.status.success(),
                "{what}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let result: Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(
                result["delivered"],
                serde_json::json!([0, 1, 2, 3, 4]),
                "{what}"
            );
            assert_eq!(
                result["consumed"],
                serde_json::json!(["secure-0", "secure-1", "secure-2", "secure-3", "secure-4"]),
                "{what}"
            );
            assert_eq!(cluster.high_watermark("secure", 0).unwrap(), 5, "{what}");

            // A wrong password is refused: nothing more is written.
            let mut bad = props;
            bad.push("sasl.password=wrong".to_owned());
            bad.push("message.timeout.ms=500".to_owned());
            let out = librdkafka(cluster.bootstrap(), "secure", bad).await;
            assert!(
                !out.status.success(),
                "{what}: a wrong password was accepted"
            );
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(stderr.contains("Authentication failed"), "{what}: {stderr}");
            assert_eq!(cluster.high_watermark("secure", 0).unwrap(), 5, "{what}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
