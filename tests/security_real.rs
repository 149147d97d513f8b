//! TLS and SASL against real servers.
//!
//! - TLS: Tansu behind Debian's stunnel4 (`support/stunnel.rs`), with a
//!   certificate the harness makes; Tansu advertises stunnel's port, so
//!   every broker connection the client opens, bootstrap and after
//!   Metadata, is TLS; mutual TLS with a client certificate. A certificate
//!   from an unknown authority, or no client certificate where one is
//!   required, fails fast.
//! - SASL: Tansu 0.6 with `--authentication` (SCRAM): its refusal of an
//!   unknown user, and of PLAIN (it closes the connection in answer to the
//!   SaslHandshake), reaches the caller fast, as the non-retriable errors
//!   that say so. (A successful
//!   SCRAM login to Tansu 0.6 cannot be tested: `tansu user create` cannot
//!   authenticate to a broker that requires authentication, and a broker
//!   that does not require it refuses every SCRAM handshake; see
//!   docs/testing.md.)
//!
//! Needs `tansu` and `stunnel4` (`scripts/setup-broker.sh` installs both).
#![allow(clippy::unwrap_used)]

use walfetch::cluster::{Cluster, FetchParams, NewTopic};
use walfetch::codec::{BatchBuilder, NewRecord};
use walfetch::connection::{Pem, SaslConfig, Security, TlsConfig};
use walfetch_brokers::tansu::TansuBroker;

use walfetch_support::latest_offset;
use walfetch_support::security::{
    assert_an_unknown_authority_fails_fast, refused_fast, secured_config,
};
use walfetch_support::stunnel::TlsTansu;
use walfetch_support::tansu::tansu_binary;

/// A client of Tansu through `tls` with `security`, and the topic `wal`
/// (one partition) made through it.
async fn client_with_a_wal(tls: &TlsTansu, security: Security) -> Cluster {
    let cluster = Cluster::connect(secured_config(tls.address(), security))
        .await
        .unwrap_or_else(|e| panic!("{e}\n--- stunnel ---\n{}", tls.log_text()));
    cluster
        .create_topics(&[NewTopic::new("wal", 1)])
        .await
        .unwrap();
    cluster
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_through_stunnel_to_tansu() {
    let tls = TlsTansu::start().await;
    let security = Security::ssl(TlsConfig::ca_pem(tls.ca.ca_pem()));
    let cluster = client_with_a_wal(&tls, security).await;
    let mut produced = 0;
    for b in 0..3 {
        let batch = BatchBuilder::new(0)
            .encode(&[
                NewRecord::value(0, format!("a{b}")),
                NewRecord::value(1, "b"),
            ])
            .unwrap();
        let base = cluster.produce("wal", 0, batch.bytes).await.unwrap();
        assert_eq!(base, produced);
        produced += 2;
    }
    let latest = latest_offset(&cluster, "wal", 0).await;
    // (Tansu 0.6 answers Latest with the last offset, not the next one.)
    assert!(latest >= Some(produced - 1), "{latest:?}");
    let fetched = cluster.fetch(&FetchParams::new("wal", 0, 0)).await.unwrap();
    assert_eq!(walfetch_support::batch_offsets(&fetched.records).len(), 3);
    // Every connection went to stunnel's TLS port, the one Tansu advertises.
    let stats = cluster.stats();
    assert!(!stats.is_empty());
    for (address, s) in &stats {
        assert_eq!(address, &tls.address(), "{stats:?}");
        assert!(s.responses > 0);
    }
    assert!(
        tls.log_text().contains("accepted connection"),
        "stunnel saw no connection:\n{}",
        tls.log_text()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_through_stunnel() {
    let tls = TlsTansu::start_with(true).await;
    let client = tls.ca.client_cert("walfetch").unwrap();
    let identity = TlsConfig::ca_pem(tls.ca.ca_pem()).client_identity(
        Pem::Bytes(client.cert_pem.into_bytes()),
        Pem::Bytes(client.key_pem.into_bytes()),
    );
    let cluster = client_with_a_wal(&tls, Security::ssl(identity)).await;
    let batch = BatchBuilder::new(0)
        .encode(&[NewRecord::value(0, "m")])
        .unwrap();
    assert_eq!(cluster.produce("wal", 0, batch.bytes).await.unwrap(), 0);

    // Without a client certificate stunnel refuses the handshake: at once.
    let text = refused_fast(
        secured_config(
            tls.address(),
            Security::ssl(TlsConfig::ca_pem(tls.ca.ca_pem())),
        ),
        "no client certificate",
    )
    .await;
    assert!(
        text.contains("TLS handshake"),
        "{text}\n--- stunnel ---\n{}",
        tls.log_text()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stunnel_certificate_from_an_unknown_authority_fails_fast() {
    let tls = TlsTansu::start().await;
    assert_an_unknown_authority_fails_fast(tls.address()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tansu_refuses_unknown_scram_users_and_plain() {
    let broker = TansuBroker::start_with(&tansu_binary(), None, &["--authentication"])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    for sasl in [
        SaslConfig::scram_sha512("nobody", "secret"),
        SaslConfig::scram_sha256("nobody", "secret"),
    ] {
        let name = sasl.mechanism_name();
        let config = secured_config(broker.address(), Security::sasl_plaintext(sasl));
        let text = refused_fast(config, "unknown user").await;
        assert!(
            text.contains(&format!("SASL {name} authentication with broker")),
            "{text}\n--- tansu ---\n{}",
            broker.log_text()
        );
    }
    let plain = Security::sasl_plaintext(SaslConfig::plain("nobody", "secret"));
    let text = refused_fast(secured_config(broker.address(), plain), "PLAIN").await;
    assert!(
        text.contains("SASL PLAIN authentication with broker")
            && text.contains("closed the connection in answer to SaslHandshake"),
        "{text}\n--- tansu ---\n{}",
        broker.log_text()
    );
}
