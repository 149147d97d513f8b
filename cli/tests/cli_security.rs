//! The command line's client properties end to end, against the scripted
//! broker with TLS and SASL: kcat-style `-X` properties and a `-F`
//! properties file reach the broker, and bad settings, a wrong password and
//! an unverifiable certificate each fail fast with a message naming them.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use walfetch::codec::{BatchBuilder, NewRecord};
use walfetch_support::cli::{path, stderr, temp_dir, Cli};
use walfetch_testkit::{SaslServer, ScriptedCluster, ServerTls, TestCa};

/// The `walfetch` binary these tests run.
const WALFETCH: Cli = Cli::new(env!("CARGO_BIN_EXE_walfetch"));

/// A password that begins and ends with a space (legal in PLAIN and SCRAM).
const SPACED_PASSWORD: &str = " pass phrase ";
/// A password that ends with a space.
const TRAILING_SPACE_PASSWORD: &str = "pass phrase ";

async fn secured_cluster(ca: &TestCa) -> ScriptedCluster {
    let cluster = ScriptedCluster::builder()
        .tls(ServerTls::new(ca.server_cert(&["127.0.0.1"]).unwrap()))
        .sasl(
            SaslServer::new()
                .user("alice", "alice-secret")
                .user("bob", SPACED_PASSWORD)
                .user("carol", TRAILING_SPACE_PASSWORD),
        )
        .start()
        .await
        .unwrap();
    cluster.create_topic("wal", 1).unwrap();
    for b in 0..3 {
        let batch = BatchBuilder::new(0)
            .encode(&[
                NewRecord::value(0, format!("v{b}")),
                NewRecord::value(1, "x"),
            ])
            .unwrap();
        cluster.append("wal", 0, batch.bytes).unwrap();
    }
    cluster
}

/// Runs the binary off the runtime's worker (the broker runs on it).
async fn run_walfetch(args: Vec<String>) -> std::process::Output {
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        WALFETCH.run(&args)
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capture_over_sasl_ssl_with_properties() {
    let ca = TestCa::new("cli test CA").unwrap();
    let cluster = secured_cluster(&ca).await;
    let dir = temp_dir("security");
    let ca_file = dir.join("ca.pem");
    std::fs::write(&ca_file, ca.ca_pem()).unwrap();
    let out_file = dir.join("wal.records");
    let base = |extra: &[String]| -> Vec<String> {
        let mut args: Vec<String> = [
            "capture",
            "-b",
            &cluster.bootstrap(),
            "-t",
            "wal",
            "-p",
            "0",
            "--out",
            path(&out_file),
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        args.extend(extra.iter().cloned());
        args
    };
    let x = |pairs: &[&str]| -> Vec<String> {
        pairs
            .iter()
            .flat_map(|p| ["-X".to_owned(), (*p).to_owned()])
            .collect()
    };
    let ca_prop = format!("ssl.ca.location={}", path(&ca_file));

    // Every property as -X, kcat style.
    let out = run_walfetch(base(&x(&[
        "security.protocol=SASL_SSL",
        "sasl.mechanism=SCRAM-SHA-512",
        "sasl.username=alice",
        "sasl.password=alice-secret",
        &ca_prop,
        "client.rack=rack-1",
    ])))
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(std::fs::metadata(&out_file).unwrap().len() > 0);

    // The same from a properties file, with --timeout.
    let props = dir.join("client.properties");
    std::fs::write(
        &props,
        format!(
            "# SASL over TLS\nsecurity.protocol=sasl_ssl\nsasl.mechanisms=PLAIN\n\
             sasl.username=alice\nsasl.password=alice-secret\n{ca_prop}\n"
        ),
    )
    .unwrap();
    let mut args = base(&["-F".to_owned(), path(&props).to_owned()]);
    args.extend(["--timeout".to_owned(), "5s".to_owned()]);
    let out = run_walfetch(args).await;
    assert!(out.status.success(), "{}", stderr(&out));

    // A password is sent as given: -X values were trimmed, so one that
    // begins or ends with a space failed with "invalid credentials". In a
    // file, the spaces after `=` go (`name = value`), those at its end stay.
    let out = run_walfetch(base(&x(&[
        "security.protocol=SASL_SSL",
        "sasl.mechanism=SCRAM-SHA-256",
        "sasl.username=bob",
        &format!("sasl.password={SPACED_PASSWORD}"),
        &ca_prop,
    ])))
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let spaced = dir.join("spaced.properties");
    std::fs::write(
        &spaced,
        format!(
            "security.protocol = SASL_SSL\nsasl.mechanism = SCRAM-SHA-256\nsasl.username = carol\n\
             sasl.password = {TRAILING_SPACE_PASSWORD}\n{ca_prop}\n"
        ),
    )
    .unwrap();
    let out = run_walfetch(base(&["-F".to_owned(), path(&spaced).to_owned()])).await;
    assert!(out.status.success(), "{}", stderr(&out));

    // A wrong password: fails at once, saying so.
    let started = Instant::now();
    let mut args = base(&["-F".to_owned(), path(&props).to_owned()]);
    args.extend(x(&["sasl.password=wrong"]));
    let out = run_walfetch(args).await;
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("SASL PLAIN authentication")
            && stderr(&out).contains("invalid credentials"),
        "{}",
        stderr(&out)
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );

    // A certificate that does not verify (no CA given: system roots).
    let out = run_walfetch(base(&x(&["security.protocol=SSL"]))).await;
    assert!(!out.status.success());
    // (On a machine without a system trust store, the error says that.)
    assert!(
        stderr(&out).contains("TLS handshake") && stderr(&out).contains("UnknownIssuer")
            || stderr(&out).contains("no trusted certificate authority found"),
        "{}",
        stderr(&out)
    );

    // Unknown and bad properties are named.
    let out = run_walfetch(base(&x(&["sasl.pasword=x"]))).await;
    assert!(
        stderr(&out).contains("unknown property \"sasl.pasword\""),
        "{}",
        stderr(&out)
    );
    let out = run_walfetch(base(&x(&["security.protocol=TLS"]))).await;
    assert!(
        stderr(&out).contains("security.protocol: \"TLS\""),
        "{}",
        stderr(&out)
    );
    let out = run_walfetch(base(&["--timeout".to_owned(), "soon".to_owned()])).await;
    assert!(stderr(&out).contains("--timeout"), "{}", stderr(&out));
}
