//! TLS and SASL of walfetch's client against the scripted broker's server
//! side (testkit): every mechanism, over plain TCP and TLS, mutual TLS,
//! re-authentication before the session lifetime ends (KIP-368), and the
//! failures that must fail fast, once, saying what is wrong: a certificate
//! that does not verify, a missing client certificate, a wrong password,
//! an unsupported mechanism, an OAUTHBEARER token the broker refuses (with
//! Kafka's error challenge). Also: a token provider that never answers
//! fails connect and re-authentication within their timeouts, and
//! `TlsConfig`'s fields changed on a config already used take effect.
//!
//! The testkit's server side is itself checked against librdkafka in
//! `tests/librdkafka_security.rs`.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use kafka_protocol::messages::{ApiKey, MetadataRequest};
use walfetch::cluster::{Cluster, ClusterConfig, FetchParams};
use walfetch::codec::{BatchBuilder, NewRecord};
use walfetch::connection::{
    Connection, ConnectionConfig, ConnectionError, Pem, SaslConfig, Security, TlsConfig,
};
use walfetch_support::latest_offset;
use walfetch_support::security::{refused_fast, secured_config};
use walfetch_testkit::{SaslServer, ScriptedCluster, ServerTls, TestCa};

fn config(cluster: &ScriptedCluster, security: Security) -> ClusterConfig {
    secured_config(cluster.bootstrap(), security)
}

fn tls_server(ca: &TestCa, names: &[&str]) -> ServerTls {
    ServerTls::new(ca.server_cert(names).unwrap())
}

/// Produces to and fetches from every partition (one led by each broker),
/// so that the brokers learnt from Metadata are reached with the same
/// security as the bootstrap broker.
async fn round_trip_every_broker(cluster: &ScriptedCluster, security: Security) -> Cluster {
    let brokers = cluster.node_ids().len() as i32;
    cluster.create_topic("wal", brokers).unwrap();
    let client = Cluster::connect(config(cluster, security))
        .await
        .unwrap_or_else(|e| panic!("connect: {e}"));
    for p in 0..brokers {
        let batch = BatchBuilder::new(0)
            .encode(&[NewRecord::value(0, format!("v{p}"))])
            .unwrap();
        let base = client.produce("wal", p, batch.bytes).await.unwrap();
        assert_eq!(base, 0);
        assert_eq!(latest_offset(&client, "wal", p).await, Some(1));
        let fetched = client.fetch(&FetchParams::new("wal", p, 0)).await.unwrap();
        assert!(!fetched.records.is_empty());
    }
    for (node, _) in cluster.addrs() {
        assert!(
            cluster.stats(node).unwrap().requests_of(ApiKey::Produce) >= 1,
            "broker {node} was not reached"
        );
    }
    client
}

/// Connects and expects a fatal error, fast, on the first and only
/// connection attempt; returns the error's text.
async fn fails_fast(cluster: &ScriptedCluster, security: Security) -> String {
    let text = refused_fast(config(cluster, security), "must not connect").await;
    let connections: u64 = cluster
        .node_ids()
        .iter()
        .map(|n| cluster.stats(*n).unwrap().connections)
        .sum();
    assert_eq!(connections, 1, "retried: {text}");
    text
}

#[tokio::test]
async fn tls_reaches_every_broker() {
    let ca = TestCa::new("walfetch test CA").unwrap();
    let cluster = ScriptedCluster::builder()
        .brokers(2)
        .tls(tls_server(&ca, &["127.0.0.1"]))
        .start()
        .await
        .unwrap();
    round_trip_every_broker(&cluster, Security::ssl(TlsConfig::ca_pem(ca.ca_pem()))).await;
}

#[tokio::test]
async fn mutual_tls() {
    let ca = TestCa::new("walfetch test CA").unwrap();
    let client_cert = ca.client_cert("walfetch-client").unwrap();
    let cluster = ScriptedCluster::builder()
        .brokers(2)
        .tls(tls_server(&ca, &["127.0.0.1"]).require_client_certificate(ca.ca_pem()))
        .start()
        .await
        .unwrap();
    let tls = TlsConfig::ca_pem(ca.ca_pem()).client_identity(
        Pem::Bytes(client_cert.cert_pem.into()),
        Pem::Bytes(client_cert.key_pem.into()),
    );
    round_trip_every_broker(&cluster, Security::ssl(tls)).await;

    // Without a client certificate the broker refuses the connection.
    cluster.reset_stats();
    let text = fails_fast(&cluster, Security::ssl(TlsConfig::ca_pem(ca.ca_pem()))).await;
    assert!(text.contains("TLS handshake"), "{text}");
}

/// A TLS broker whose certificate (from `ca`) names `broker.example`, not
/// the address a client connects to.
async fn cluster_with_a_certificate_for_another_name(ca: &TestCa) -> ScriptedCluster {
    ScriptedCluster::builder()
        .tls(tls_server(ca, &["broker.example"]))
        .start()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_certificate_that_does_not_verify_fails_fast() {
    let ca = TestCa::new("walfetch test CA").unwrap();
    let cluster = cluster_with_a_certificate_for_another_name(&ca).await;
    let text = fails_fast(&cluster, Security::ssl(TlsConfig::ca_pem(ca.ca_pem()))).await;
    assert!(text.contains("TLS handshake"), "{text}");
    assert!(text.contains("not valid for name"), "{text}");
    // ... unless hostname verification is off by name, or the name given.
    let lenient = TlsConfig::ca_pem(ca.ca_pem()).danger_skip_hostname_verification();
    Cluster::connect(config(&cluster, Security::ssl(lenient)))
        .await
        .unwrap();
    let named = TlsConfig::ca_pem(ca.ca_pem()).server_name("broker.example");
    Cluster::connect(config(&cluster, Security::ssl(named)))
        .await
        .unwrap();

    // Issued by an authority the client does not trust.
    let other = TestCa::new("someone else").unwrap();
    cluster.reset_stats();
    let text = fails_fast(&cluster, Security::ssl(TlsConfig::ca_pem(other.ca_pem()))).await;
    assert!(text.contains("UnknownIssuer"), "{text}");
    let blind = TlsConfig::ca_pem(other.ca_pem()).danger_skip_certificate_verification();
    Cluster::connect(config(&cluster, Security::ssl(blind)))
        .await
        .unwrap();
}

#[tokio::test]
async fn tls_to_a_plaintext_broker_fails_fast() {
    let ca = TestCa::new("walfetch test CA").unwrap();
    let cluster = ScriptedCluster::start(1).await.unwrap();
    let text = fails_fast(&cluster, Security::ssl(TlsConfig::ca_pem(ca.ca_pem()))).await;
    assert!(text.contains("does it speak TLS"), "{text}");
}

/// A scripted cluster (the builder's default size) that asks for SASL of
/// [`users`].
async fn sasl_broker() -> ScriptedCluster {
    ScriptedCluster::builder()
        .sasl(users())
        .start()
        .await
        .unwrap()
}

fn users() -> SaslServer {
    SaslServer::new()
        .user("alice", "alice-secret")
        .oauth_token("token-123")
}

#[tokio::test]
async fn every_sasl_mechanism_over_tcp_and_tls() {
    let ca = TestCa::new("walfetch test CA").unwrap();
    let mechanisms = || {
        [
            SaslConfig::plain("alice", "alice-secret"),
            SaslConfig::scram_sha256("alice", "alice-secret"),
            SaslConfig::scram_sha512("alice", "alice-secret"),
            SaslConfig::oauthbearer(|| async { Ok::<_, String>("token-123".to_owned()) }),
        ]
    };
    for sasl in mechanisms() {
        let name = sasl.mechanism_name();
        let cluster = ScriptedCluster::builder()
            .brokers(2)
            .sasl(users())
            .start()
            .await
            .unwrap();
        round_trip_every_broker(&cluster, Security::sasl_plaintext(sasl)).await;
        let auths = cluster
            .stats(1)
            .unwrap()
            .requests_of(ApiKey::SaslAuthenticate);
        let rounds = if name.starts_with("SCRAM") { 2 } else { 1 };
        assert!(auths >= rounds, "{name}: {auths} SaslAuthenticate");
    }
    for sasl in mechanisms() {
        let cluster = ScriptedCluster::builder()
            .brokers(2)
            .tls(tls_server(&ca, &["127.0.0.1"]))
            .sasl(users())
            .start()
            .await
            .unwrap();
        round_trip_every_broker(
            &cluster,
            Security::sasl_ssl(TlsConfig::ca_pem(ca.ca_pem()), sasl),
        )
        .await;
    }
}

#[tokio::test]
async fn the_broker_refuses_unauthenticated_requests() {
    // The server side this file relies on: without SASL, a SASL broker
    // closes the connection at the first request past ApiVersions.
    let cluster = sasl_broker().await;
    let connection = Connection::connect(cluster.bootstrap(), ConnectionConfig::default())
        .await
        .unwrap();
    let err = connection
        .request(&MetadataRequest::default())
        .await
        .expect_err("unauthenticated");
    assert!(err.is_connection_lost(), "{err}");
}

#[tokio::test]
async fn a_wrong_password_fails_fast_and_says_so() {
    for sasl in [
        SaslConfig::plain("alice", "wrong"),
        SaslConfig::scram_sha256("alice", "wrong"),
        SaslConfig::scram_sha512("alice", "wrong"),
        SaslConfig::scram_sha512("mallory", "alice-secret"),
        SaslConfig::oauthbearer(|| async { Ok::<_, String>("expired".to_owned()) }),
    ] {
        let name = sasl.mechanism_name();
        let cluster = sasl_broker().await;
        let text = fails_fast(&cluster, Security::sasl_plaintext(sasl)).await;
        // Kafka's OAUTHBEARER server side says why in RFC 7628's error
        // JSON rather than in words.
        let why = if name == "OAUTHBEARER" {
            r#"{"status":"invalid_token"}"#
        } else {
            "invalid credentials"
        };
        assert!(
            text.contains(&format!("SASL {name} authentication"))
                && text.contains("SASL_AUTHENTICATION_FAILED")
                && text.contains(why),
            "{text}"
        );
    }
}

#[tokio::test]
async fn an_unsupported_mechanism_fails_fast_naming_the_enabled_ones() {
    let cluster = ScriptedCluster::builder()
        .sasl(users().mechanisms(&["SCRAM-SHA-512", "OAUTHBEARER"]))
        .start()
        .await
        .unwrap();
    let text = fails_fast(
        &cluster,
        Security::sasl_plaintext(SaslConfig::plain("alice", "alice-secret")),
    )
    .await;
    assert!(
        text.contains("does not enable SASL mechanism PLAIN (enabled: SCRAM-SHA-512, OAUTHBEARER)"),
        "{text}"
    );

    // SASL asked of a broker that has none.
    let plain = ScriptedCluster::start(1).await.unwrap();
    let text = fails_fast(
        &plain,
        Security::sasl_plaintext(SaslConfig::plain("alice", "alice-secret")),
    )
    .await;
    assert!(text.contains("does not offer SASL"), "{text}");
}

#[tokio::test]
async fn sessions_are_renewed_before_they_expire() {
    let lifetime = Duration::from_millis(400);
    let cluster = ScriptedCluster::builder()
        .sasl(users().session_lifetime(lifetime))
        .start()
        .await
        .unwrap();
    let config = ConnectionConfig {
        security: Security::sasl_plaintext(SaslConfig::scram_sha256("alice", "alice-secret")),
        ..ConnectionConfig::default()
    };
    let connection = Connection::connect(cluster.bootstrap(), config)
        .await
        .unwrap();
    let handshakes = || cluster.stats(1).unwrap().requests_of(ApiKey::SaslHandshake);
    assert_eq!(handshakes(), 1);
    // Requests spread over three lifetimes: each finds the session valid
    // (the broker closes the connection at a request past the lifetime).
    let started = Instant::now();
    let mut requests = 0;
    while started.elapsed() < lifetime * 3 {
        connection
            .request(&MetadataRequest::default())
            .await
            .unwrap_or_else(|e| panic!("request {requests} at {:?}: {e}", started.elapsed()));
        requests += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        handshakes() >= 3,
        "{} handshakes in {:?}",
        handshakes(),
        started.elapsed()
    );
    assert_eq!(cluster.stats(1).unwrap().connections, 1);
    assert!(connection.failure().is_none());

    // Idle past the lifetime: the next request re-authenticates first.
    tokio::time::sleep(lifetime + Duration::from_millis(100)).await;
    let before = handshakes();
    connection
        .request(&MetadataRequest::default())
        .await
        .unwrap();
    assert_eq!(handshakes(), before + 1);
}

/// Requests made while a due re-authentication waits for the request in
/// flight reach the broker in the order they were made: an idempotent
/// producer's batches must not overtake each other. Paused clock (the
/// testkit's sessions run on the same clock): a 60 s session, renewed at
/// 85–95 % of it.
#[tokio::test(start_paused = true)]
async fn requests_made_while_a_reauthentication_waits_keep_their_order() {
    let lifetime = Duration::from_secs(60);
    let cluster = ScriptedCluster::builder()
        .sasl(users().session_lifetime(lifetime))
        .start()
        .await
        .unwrap();
    cluster.create_topic("wal", 1).unwrap();
    let security = Security::sasl_plaintext(SaslConfig::plain("alice", "alice-secret"));
    let client = std::sync::Arc::new(Cluster::connect(config(&cluster, security)).await.unwrap());
    let (connection, _) = client.leader_connection("wal", 0).await.unwrap();
    let handshakes = || cluster.stats(1).unwrap().requests_of(ApiKey::SaslHandshake);
    let before = handshakes();
    // A request in flight from before the renewal is due until after it:
    // the renewal waits for it, and so do the requests made meanwhile.
    tokio::time::sleep(Duration::from_secs(50)).await;
    cluster.script(
        walfetch_testkit::Fault::on(ApiKey::Metadata)
            .then(walfetch_testkit::FaultAction::Delay(Duration::from_secs(9))),
    );
    let in_flight = {
        let connection = std::sync::Arc::clone(&connection);
        tokio::spawn(async move { connection.request(&MetadataRequest::default()).await })
    };
    while connection.stats().requests == 0 || cluster.pending_faults().len() == 1 {
        tokio::task::yield_now().await;
    }
    tokio::time::sleep(Duration::from_millis(7_500)).await;
    let batch = |value: &str| {
        BatchBuilder::new(0)
            .encode(&[NewRecord::value(0, value.to_owned())])
            .unwrap()
            .bytes
    };
    let first = client
        .produce_queued(std::sync::Arc::clone(&connection), "wal", 0, batch("first"))
        .await;
    let second = client
        .produce_queued(
            std::sync::Arc::clone(&connection),
            "wal",
            0,
            batch("second"),
        )
        .await;
    let (first, second) = tokio::join!(first, second);
    in_flight.await.unwrap().unwrap();
    assert_eq!(handshakes(), before + 1, "the session was renewed once");
    assert_eq!(
        (first.unwrap(), second.unwrap()),
        (0, 1),
        "the batches were appended in the order they were produced"
    );
}

/// A refused OAUTHBEARER token: the broker (as Kafka's
/// `OAuthBearerSaslServer`) answers the token with error code NONE and
/// RFC 7628's error JSON as its challenge, and fails the exchange only at
/// the client's `%x01`. walfetch once took that first answer for a
/// successful login; the connection then broke at the first request, a
/// retriable "connection lost" instead of the fatal authentication error.
#[tokio::test]
async fn a_refused_oauthbearer_token_fails_with_the_brokers_status() {
    let cluster = sasl_broker().await;
    let config = ConnectionConfig {
        security: Security::sasl_plaintext(SaslConfig::oauthbearer(|| async {
            Ok::<_, String>("expired.token.value".to_owned())
        })),
        request_timeout: Duration::from_secs(2),
        ..ConnectionConfig::default()
    };
    let err = Connection::connect(cluster.bootstrap(), config)
        .await
        .map(|_| ())
        .expect_err("the token was refused");
    match &err {
        ConnectionError::SaslAuthentication {
            broker, message, ..
        } => {
            assert_eq!(broker, &cluster.bootstrap());
            assert!(
                message.contains(r#"the broker refused the token: {"status":"invalid_token"}"#)
                    && message.contains("SASL_AUTHENTICATION_FAILED"),
                "{message}"
            );
        }
        other => panic!("expected a SASL authentication error, got {other:?}"),
    }
    // The token, then the %x01 that ends the exchange.
    let auths = cluster
        .stats(1)
        .unwrap()
        .requests_of(ApiKey::SaslAuthenticate);
    assert_eq!(auths, 2);
}

/// A token provider that never answers (an identity provider that accepts
/// the HTTP connection and hangs) fails the connect within the connect
/// timeout, naming the broker, instead of hanging it: every other step of
/// a connect is bounded.
#[tokio::test]
async fn a_token_provider_that_never_answers_does_not_hang_connect() {
    let cluster = sasl_broker().await;
    let config = ConnectionConfig {
        connect_timeout: Duration::from_secs(1),
        request_timeout: Duration::from_secs(1),
        security: Security::sasl_plaintext(SaslConfig::oauthbearer(|| {
            std::future::pending::<Result<String, String>>()
        })),
        ..ConnectionConfig::default()
    };
    let outcome = tokio::time::timeout(
        Duration::from_secs(10),
        Connection::connect(cluster.bootstrap(), config),
    )
    .await
    .expect("connect with 1 s timeouts ends within 10 s")
    .map(|_| ());
    assert_token_timed_out(outcome, &cluster.bootstrap(), "1s");
}

/// `outcome` is the SASL failure of a token provider that gave no token
/// within `within`, naming `broker`.
fn assert_token_timed_out(outcome: Result<(), ConnectionError>, broker: &str, within: &str) {
    match outcome {
        Err(err @ ConnectionError::SaslAuthentication { .. }) => {
            let text = err.to_string();
            let said = format!("the token provider gave no token within {within}");
            assert!(text.contains(broker) && text.contains(&said), "{text}");
        }
        other => panic!("expected a SASL authentication error, got {other:?}"),
    }
}

/// The same at re-authentication, where the connection's requests wait for
/// it (KIP-368): a provider that answered at connect and then hangs fails
/// the renewal within the request timeout, and the request with it.
/// Paused clock (the testkit's sessions run on the same clock).
#[tokio::test(start_paused = true)]
async fn a_token_provider_that_never_answers_does_not_hang_reauthentication() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    let cluster = ScriptedCluster::builder()
        .sasl(users().session_lifetime(Duration::from_secs(60)))
        .start()
        .await
        .unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let provider = {
        let calls = Arc::clone(&calls);
        move || {
            let first = calls.fetch_add(1, Ordering::SeqCst) == 0;
            async move {
                if !first {
                    std::future::pending::<()>().await;
                }
                Ok::<_, String>("token-123".to_owned())
            }
        }
    };
    let config = ConnectionConfig {
        request_timeout: Duration::from_secs(2),
        security: Security::sasl_plaintext(SaslConfig::oauthbearer(provider)),
        ..ConnectionConfig::default()
    };
    let connection = Connection::connect(cluster.bootstrap(), config)
        .await
        .unwrap();
    connection
        .request(&MetadataRequest::default())
        .await
        .unwrap();
    // Past 95 % of the session: the next request renews it first.
    tokio::time::sleep(Duration::from_secs(58)).await;
    let outcome = tokio::time::timeout(
        Duration::from_secs(30),
        connection.request(&MetadataRequest::default()),
    )
    .await
    .expect("the request waiting for the renewal ends within 30 s")
    .map(|_| ());
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_token_timed_out(outcome, &cluster.bootstrap(), "2s");
    assert!(connection.failure().is_some(), "a failed renewal breaks it");
}

/// `TlsConfig`'s fields are public settings: switching hostname
/// verification back on by its field, on a clone of a config already used
/// (whose rustls configuration is cached and shared by clones), turns it
/// on. It once stayed off until a builder method reset the cache.
#[tokio::test]
async fn hostname_verification_switched_on_by_its_field_is_on() {
    let ca = TestCa::new("walfetch test CA").unwrap();
    let cluster = cluster_with_a_certificate_for_another_name(&ca).await;
    let config = |tls: TlsConfig| ConnectionConfig {
        security: Security::ssl(tls),
        ..ConnectionConfig::default()
    };
    let lenient = TlsConfig::ca_pem(ca.ca_pem()).danger_skip_hostname_verification();
    Connection::connect(cluster.bootstrap(), config(lenient.clone()))
        .await
        .unwrap();

    let mut strict = lenient.clone();
    strict.verify_hostname = true;
    match Connection::connect(cluster.bootstrap(), config(strict.clone())).await {
        Err(ConnectionError::TlsHandshake { broker, message }) => {
            assert_eq!(broker, cluster.bootstrap());
            assert!(message.contains("not valid for name"), "{message}");
        }
        Err(other) => panic!("expected a TLS handshake error, got {other:?}"),
        Ok(_) => panic!(
            "connected to a broker whose certificate names broker.example, \
             with verify_hostname = true"
        ),
    }
    // And off again by the field, on the config just used.
    strict.verify_hostname = false;
    Connection::connect(cluster.bootstrap(), config(strict))
        .await
        .unwrap();
}
