//! Secured connections as the TLS and SASL tests make them: a client
//! configuration with their 10 s deadlines, an error's whole chain as the
//! CLI prints it, and the checks that a refused connect fails fast.

use std::time::{Duration, Instant};

use walfetch::cluster::{Cluster, ClusterConfig, RetryPolicy};
use walfetch::connection::{Security, TlsConfig};
use walfetch_testkit::TestCa;

/// Fail-fast bound: a fatal error must come in half the 10 s retry
/// deadline of [`secured_config`], which retrying it would take whole.
/// (Under a second on an idle machine; the margin is for a loaded one,
/// where a debug build's SCRAM proof alone has taken a second.)
pub const FAST: Duration = Duration::from_secs(5);

/// A client of `bootstrap` with `security`, a 10 s request timeout and a
/// 10 s retry deadline.
pub fn secured_config(bootstrap: impl Into<String>, security: Security) -> ClusterConfig {
    let mut config = ClusterConfig::new([bootstrap.into()]).with_timeout(Duration::from_secs(10));
    config.connection.security = security;
    config.retry = RetryPolicy {
        deadline: Duration::from_secs(10),
        ..RetryPolicy::default()
    };
    config
}

/// `err` and every source under it, joined by `": "`, as the CLI prints it.
pub fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// Connects with `config`, expecting a refusal (`what` says which) within
/// [`FAST`]; returns the refusal's [`error_chain`].
pub async fn refused_fast(config: ClusterConfig, what: &str) -> String {
    let started = Instant::now();
    let err = Cluster::connect(config).await.map(|_| ()).expect_err(what);
    let took = started.elapsed();
    let text = error_chain(&err);
    eprintln!("{what} ({took:?}): {text}");
    assert!(took < FAST, "{what}: took {took:?}: {text}");
    text
}

/// A client that trusts only an authority of its own is refused by the TLS
/// listener at `address` fast, in the TLS handshake, as `UnknownIssuer`.
pub async fn assert_an_unknown_authority_fails_fast(address: String) {
    let stranger = TestCa::new("not the one").unwrap();
    let tls = TlsConfig::ca_pem(stranger.ca_pem());
    let text = refused_fast(
        secured_config(address, Security::ssl(tls)),
        "a certificate from an unknown authority",
    )
    .await;
    assert!(
        text.contains("TLS handshake") && text.contains("UnknownIssuer"),
        "{text}"
    );
}
