//! TLS for the scripted brokers, and a throwaway certificate authority
//! ([`TestCa`], made with rcgen) to issue their certificates and clients'.
//!
//! A cluster built with [`crate::ClusterBuilder::tls`] speaks TLS on every
//! listener (Kafka's `SSL` / `SASL_SSL`); with
//! [`ServerTls::require_client_certificate`] it also requires a client
//! certificate issued by a given authority (mutual TLS).
//!
//! # References
//! - Kafka documentation, "Encryption and Authentication using SSL".

use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;

use crate::TestkitError;

/// A certificate and its private key, PEM.
#[derive(Debug, Clone)]
pub struct IssuedCert {
    /// The certificate, PEM.
    pub cert_pem: String,
    /// Its private key, PEM (PKCS#8).
    pub key_pem: String,
}

/// A certificate authority made for one test: it issues server
/// certificates for given names and client certificates.
pub struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl std::fmt::Debug for TestCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestCa").finish_non_exhaustive()
    }
}

fn rcgen_error(e: rcgen::Error) -> TestkitError {
    TestkitError::Tls(format!("rcgen: {e}"))
}

impl TestCa {
    /// A fresh authority named `name`.
    pub fn new(name: &str) -> Result<Self, TestkitError> {
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(rcgen_error)?;
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate().map_err(rcgen_error)?;
        let issuer = CertifiedIssuer::self_signed(params, key).map_err(rcgen_error)?;
        Ok(Self { issuer })
    }

    /// The authority's certificate, PEM (what clients trust).
    pub fn ca_pem(&self) -> String {
        self.issuer.pem()
    }

    /// A server certificate for `names` (DNS names or IP addresses).
    pub fn server_cert(&self, names: &[&str]) -> Result<IssuedCert, TestkitError> {
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let mut params = CertificateParams::new(names.clone()).map_err(rcgen_error)?;
        if let Some(first) = names.first() {
            params.distinguished_name.push(DnType::CommonName, first);
        }
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        self.issue(params)
    }

    /// A client certificate with common name `name`.
    pub fn client_cert(&self, name: &str) -> Result<IssuedCert, TestkitError> {
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(rcgen_error)?;
        params.distinguished_name.push(DnType::CommonName, name);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        self.issue(params)
    }

    fn issue(&self, params: CertificateParams) -> Result<IssuedCert, TestkitError> {
        let key = KeyPair::generate().map_err(rcgen_error)?;
        let cert = params.signed_by(&key, &self.issuer).map_err(rcgen_error)?;
        Ok(IssuedCert {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

/// The TLS side of a scripted cluster's listeners.
#[derive(Debug, Clone)]
pub struct ServerTls {
    cert: IssuedCert,
    client_ca_pem: Option<String>,
}

impl ServerTls {
    /// Serves `cert` (issued for the name clients connect to, e.g.
    /// `127.0.0.1`).
    pub fn new(cert: IssuedCert) -> Self {
        Self {
            cert,
            client_ca_pem: None,
        }
    }

    /// Requires every client to present a certificate issued by the
    /// authority `ca_pem` (mutual TLS).
    pub fn require_client_certificate(mut self, ca_pem: impl Into<String>) -> Self {
        self.client_ca_pem = Some(ca_pem.into());
        self
    }

    pub(crate) fn acceptor(&self) -> Result<TlsAcceptor, TestkitError> {
        let bad = |what: &str, e: &dyn std::fmt::Display| TestkitError::Tls(format!("{what}: {e}"));
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let chain: Vec<CertificateDer<'static>> =
            CertificateDer::pem_slice_iter(self.cert.cert_pem.as_bytes())
                .collect::<Result<_, _>>()
                .map_err(|e| bad("server certificate", &e))?;
        let key = PrivateKeyDer::from_pem_slice(self.cert.key_pem.as_bytes())
            .map_err(|e| bad("server key", &e))?;
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| bad("protocol versions", &e))?;
        let builder = match &self.client_ca_pem {
            None => builder.with_no_client_auth(),
            Some(ca) => {
                let mut roots = RootCertStore::empty();
                for cert in CertificateDer::pem_slice_iter(ca.as_bytes()) {
                    let cert = cert.map_err(|e| bad("client CA", &e))?;
                    roots.add(cert).map_err(|e| bad("client CA", &e))?;
                }
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                        .build()
                        .map_err(|e| bad("client verifier", &e))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let config = builder
            .with_single_cert(chain, key)
            .map_err(|e| bad("server certificate", &e))?;
        Ok(TlsAcceptor::from(Arc::new(config)))
    }
}
