//! TLS on broker connections, with rustls (no OpenSSL).
//!
//! A [`TlsConfig`] says which certificate authorities to trust (the
//! system's, or a PEM file as librdkafka's `ssl.ca.location`), an optional
//! client certificate and key for mutual TLS (`ssl.certificate.location`,
//! `ssl.key.location`), and the name the broker's certificate must carry:
//! by default the host of the address connected to, so every broker,
//! including those learnt from Metadata, is checked against its own name.
//!
//! Verification is always on unless switched off by name, as librdkafka
//! does: [`TlsConfig::danger_skip_hostname_verification`]
//! (`ssl.endpoint.identification.algorithm=none`) still checks the chain
//! but not the name; [`TlsConfig::danger_skip_certificate_verification`]
//! (`enable.ssl.certificate.verification=false`) checks nothing but the
//! handshake's signatures.
//!
//! The rustls client configuration is built on the first connection and
//! cached (clones share the cache), so certificate files are read once. The
//! cache is keyed by the settings it was built from: changing a public
//! field (`verify_hostname`, `roots`, ...) of a config already used, or of
//! its clone, takes effect at the next connection.
//!
//! # References
//! - Kafka's `SSL` and `SASL_SSL` listeners: TLS around the same framing
//!   (<https://kafka.apache.org/documentation/#security_ssl>).
//! - librdkafka `CONFIGURATION.md`: `ssl.*` properties.
//! - RFC 8446 (TLS 1.3), RFC 5246 (TLS 1.2), RFC 6125 (server identity).

use std::fmt;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf, ReadHalf, WriteHalf};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use super::address::BrokerAddress;
use super::ConnectionError;

/// Where PEM data comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pem {
    /// A file, read on first use.
    File(PathBuf),
    /// PEM text in memory.
    Bytes(Vec<u8>),
}

impl Pem {
    fn describe(&self) -> String {
        match self {
            Self::File(path) => path.display().to_string(),
            Self::Bytes(_) => "PEM given in memory".to_owned(),
        }
    }

    fn certificates(&self) -> Result<Vec<CertificateDer<'static>>, String> {
        let certs: Result<Vec<_>, _> = match self {
            Self::File(path) => CertificateDer::pem_file_iter(path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?
                .collect(),
            Self::Bytes(pem) => CertificateDer::pem_slice_iter(pem).collect(),
        };
        let certs = certs.map_err(|e| format!("{}: {e}", self.describe()))?;
        if certs.is_empty() {
            return Err(format!("{}: no PEM certificate in it", self.describe()));
        }
        Ok(certs)
    }

    fn private_key(&self) -> Result<PrivateKeyDer<'static>, String> {
        match self {
            Self::File(path) => PrivateKeyDer::from_pem_file(path),
            Self::Bytes(pem) => PrivateKeyDer::from_pem_slice(pem),
        }
        .map_err(|e| format!("{}: no usable PEM private key: {e}", self.describe()))
    }
}

/// Which certificate authorities a broker's certificate must chain to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrustRoots {
    /// The operating system's trust store (`rustls-native-certs`).
    System,
    /// The certificates of a PEM bundle (librdkafka's `ssl.ca.location`).
    Pem(Pem),
}

/// TLS settings of broker connections. The fields may be set directly, on
/// a config already used or a clone of one: the next connection follows
/// them.
#[derive(Clone)]
#[non_exhaustive]
pub struct TlsConfig {
    /// The trusted certificate authorities.
    pub roots: TrustRoots,
    /// The client's certificate chain and private key, for brokers that
    /// require mutual TLS.
    pub client_identity: Option<(Pem, Pem)>,
    /// The name the broker's certificate must carry, instead of the host
    /// of the address connected to.
    pub server_name: Option<String>,
    /// Whether the certificate must name the broker (default true).
    pub verify_hostname: bool,
    /// Whether the certificate is verified at all (default true).
    pub verify_certificate: bool,
    /// The rustls configurations built so far, each with the settings it
    /// was built from (shared by clones, which may differ in settings).
    built: Arc<Mutex<Vec<(Settings, Built)>>>,
}

/// A built rustls configuration, or why it could not be built.
type Built = Result<Arc<ClientConfig>, String>;

/// What the rustls configuration is built from: every field but
/// `server_name`, which is given per handshake.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Settings {
    roots: TrustRoots,
    client_identity: Option<(Pem, Pem)>,
    verify_hostname: bool,
    verify_certificate: bool,
}

/// How many differently-set configurations one cache keeps (clones set
/// differently, or a config changed back and forth); past it the oldest
/// is built again when used.
const CACHED_CONFIGS: usize = 4;

impl fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsConfig")
            .field("roots", &self.roots)
            .field(
                "client_identity",
                &self.client_identity.as_ref().map(|(c, _)| c.describe()),
            )
            .field("server_name", &self.server_name)
            .field("verify_hostname", &self.verify_hostname)
            .field("verify_certificate", &self.verify_certificate)
            .finish()
    }
}

impl Default for TlsConfig {
    fn default() -> Self {
        Self::system_roots()
    }
}

impl TlsConfig {
    /// Trusts the operating system's certificate authorities.
    pub fn system_roots() -> Self {
        Self::with_roots(TrustRoots::System)
    }

    /// Trusts the certificates of a PEM file (`ssl.ca.location`).
    pub fn ca_file(path: impl Into<PathBuf>) -> Self {
        Self::with_roots(TrustRoots::Pem(Pem::File(path.into())))
    }

    /// Trusts the certificates of PEM text.
    pub fn ca_pem(pem: impl Into<Vec<u8>>) -> Self {
        Self::with_roots(TrustRoots::Pem(Pem::Bytes(pem.into())))
    }

    fn with_roots(roots: TrustRoots) -> Self {
        Self {
            roots,
            client_identity: None,
            server_name: None,
            verify_hostname: true,
            verify_certificate: true,
            built: Arc::default(),
        }
    }

    /// Presents a client certificate chain and its private key (mutual
    /// TLS).
    pub fn client_identity(mut self, certificate_chain: Pem, private_key: Pem) -> Self {
        self.client_identity = Some((certificate_chain, private_key));
        self
    }

    /// Checks every broker's certificate against `name` instead of the
    /// host connected to.
    pub fn server_name(mut self, name: impl Into<String>) -> Self {
        self.server_name = Some(name.into());
        self
    }

    /// Accepts a certificate that chains to a trusted authority whatever
    /// name it carries (librdkafka's
    /// `ssl.endpoint.identification.algorithm=none`). Anyone holding any
    /// certificate of those authorities can then pose as the broker.
    pub fn danger_skip_hostname_verification(mut self) -> Self {
        self.verify_hostname = false;
        self
    }

    /// Accepts any certificate (librdkafka's
    /// `enable.ssl.certificate.verification=false`): the connection is
    /// encrypted but the broker is not authenticated.
    pub fn danger_skip_certificate_verification(mut self) -> Self {
        self.verify_certificate = false;
        self
    }

    fn settings(&self) -> Settings {
        Settings {
            roots: self.roots.clone(),
            client_identity: self.client_identity.clone(),
            verify_hostname: self.verify_hostname,
            verify_certificate: self.verify_certificate,
        }
    }

    /// The rustls configuration for the current field values: built on
    /// first use, then taken from the cache while they stay the same.
    fn client_config(&self) -> Built {
        let settings = self.settings();
        // Every critical section leaves the cache consistent: a holder
        // that panicked left it as it was or with one more entry.
        let mut built = self.built.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, config)) = built.iter().find(|(s, _)| *s == settings) {
            return config.clone();
        }
        let config = self.build().map(Arc::new);
        if built.len() >= CACHED_CONFIGS {
            let _oldest = built.remove(0);
        }
        built.push((settings, config.clone()));
        config
    }

    fn build(&self) -> Result<ClientConfig, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = RootCertStore::empty();
        match &self.roots {
            TrustRoots::System => {
                let found = rustls_native_certs::load_native_certs();
                for cert in found.certs {
                    // A certificate of the store rustls cannot parse is
                    // skipped, as every rustls client does.
                    let _ = roots.add(cert);
                }
                if roots.is_empty() {
                    return Err(format!(
                        "no trusted certificate authority found in the system store{}; \
                         give one with ssl.ca.location",
                        found
                            .errors
                            .first()
                            .map(|e| format!(" ({e})"))
                            .unwrap_or_default()
                    ));
                }
            }
            TrustRoots::Pem(pem) => {
                for cert in pem.certificates()? {
                    roots
                        .add(cert)
                        .map_err(|e| format!("{}: {e}", pem.describe()))?;
                }
            }
        }
        let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
            .build()
            .map_err(|e| format!("certificate verifier: {e}"))?;
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?;
        let builder = if self.verify_certificate && self.verify_hostname {
            builder.with_webpki_verifier(webpki)
        } else {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(Lenient {
                    webpki,
                    provider,
                    verify_certificate: self.verify_certificate,
                }))
        };
        match &self.client_identity {
            None => Ok(builder.with_no_client_auth()),
            Some((chain, key)) => builder
                .with_client_auth_cert(chain.certificates()?, key.private_key()?)
                .map_err(|e| format!("client certificate {}: {e}", chain.describe())),
        }
    }
}

/// A verifier that skips the name check, or everything but signatures.
#[derive(Debug)]
struct Lenient {
    webpki: Arc<WebPkiServerVerifier>,
    provider: Arc<CryptoProvider>,
    verify_certificate: bool,
}

impl ServerCertVerifier for Lenient {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if !self.verify_certificate {
            return Ok(ServerCertVerified::assertion());
        }
        match self.webpki.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// A broker connection's byte stream: plain TCP or TLS over TCP.
#[derive(Debug)]
pub(crate) enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl Stream {
    /// The read and write halves. Plain TCP splits without a lock
    /// (`into_split`), as before TLS existed; a TLS stream's halves share
    /// its session through tokio's `split`.
    pub(crate) fn split(self) -> (ReadStream, WriteStream) {
        match self {
            Self::Plain(tcp) => {
                let (r, w) = tcp.into_split();
                (ReadStream::Plain(r), WriteStream::Plain(w))
            }
            Self::Tls(tls) => {
                let (r, w) = tokio::io::split(*tls);
                (ReadStream::Tls(r), WriteStream::Tls(w))
            }
        }
    }
}

/// The read half of a [`Stream`].
#[derive(Debug)]
pub(crate) enum ReadStream {
    Plain(OwnedReadHalf),
    Tls(ReadHalf<TlsStream<TcpStream>>),
}

/// The write half of a [`Stream`].
#[derive(Debug)]
pub(crate) enum WriteStream {
    Plain(OwnedWriteHalf),
    Tls(WriteHalf<TlsStream<TcpStream>>),
}

impl AsyncRead for ReadStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Self::Tls(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for WriteStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Self::Tls(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_flush(cx),
            Self::Tls(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Self::Tls(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}

/// The host of `host:port` (`[v6]:port` too), for the server name.
/// The host of `broker` as written (`ssl://host:port`, `[v6]:port` and the
/// rest: see [`BrokerAddress`]): the TLS server name unless one is set.
fn host_of(broker: &str) -> String {
    BrokerAddress::parse(broker).map_or_else(|_| broker.to_owned(), |a| a.host().to_owned())
}

/// Wraps `tcp` in TLS when `tls` is set: the handshake, within `timeout`.
/// A handshake the peer refuses or breaks off is
/// [`ConnectionError::TlsHandshake`], never retried as if the broker were
/// down; a reset is [`ConnectionError::Connect`].
pub(crate) async fn wrap(
    tcp: TcpStream,
    broker: &str,
    tls: Option<&TlsConfig>,
    timeout: Duration,
) -> Result<Stream, ConnectionError> {
    let Some(tls) = tls else {
        return Ok(Stream::Plain(tcp));
    };
    let config = tls
        .client_config()
        .map_err(|message| ConnectionError::TlsConfig {
            broker: broker.to_owned(),
            message,
        })?;
    let name = tls.server_name.clone().unwrap_or_else(|| host_of(broker));
    let server_name =
        ServerName::try_from(name.clone()).map_err(|e| ConnectionError::TlsConfig {
            broker: broker.to_owned(),
            message: format!("{name:?} is not a valid TLS server name: {e}"),
        })?;
    let handshake = TlsConnector::from(config).connect(server_name, tcp);
    match tokio::time::timeout(timeout, handshake).await {
        Ok(Ok(stream)) => Ok(Stream::Tls(Box::new(stream))),
        Ok(Err(e)) => {
            let tls_error = e
                .get_ref()
                .and_then(|inner| inner.downcast_ref::<rustls::Error>())
                .map(ToString::to_string);
            match (tls_error, e.kind()) {
                (Some(message), _) => Err(ConnectionError::TlsHandshake {
                    broker: broker.to_owned(),
                    message,
                }),
                (None, std::io::ErrorKind::UnexpectedEof) => Err(ConnectionError::TlsHandshake {
                    broker: broker.to_owned(),
                    message: "the broker closed the connection during the TLS handshake \
                              (does it speak TLS on this port?)"
                        .to_owned(),
                }),
                (None, _) => Err(ConnectionError::Connect {
                    broker: broker.to_owned(),
                    source: e.into(),
                }),
            }
        }
        Err(_) => Err(ConnectionError::ConnectTimeout {
            broker: broker.to_owned(),
            timeout,
        }),
    }
}

/// An error of the first exchange on a TLS connection that is really the
/// TLS layer refusing it (TLS 1.3 servers refuse a missing or unknown
/// client certificate after the client's handshake completed, with an
/// alert on the first read): as [`ConnectionError::TlsHandshake`].
pub(crate) fn refine_first_error(error: ConnectionError) -> ConnectionError {
    let tls_message = match &error {
        ConnectionError::Io { source, .. } | ConnectionError::Connect { source, .. } => source
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<rustls::Error>())
            .map(ToString::to_string),
        _ => None,
    };
    match tls_message {
        Some(message) => ConnectionError::TlsHandshake {
            broker: error.broker().to_owned(),
            message,
        },
        None => error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_name_is_the_host() {
        assert_eq!(host_of("broker-1.example:9093"), "broker-1.example");
        assert_eq!(host_of("127.0.0.1:9093"), "127.0.0.1");
        assert_eq!(host_of("[::1]:9093"), "::1");
        assert_eq!(host_of("plain"), "plain");
        assert_eq!(host_of("SSL://broker-1.example:9093"), "broker-1.example");
    }

    #[test]
    fn unusable_files_are_named() {
        let err = TlsConfig::ca_file("/nonexistent/ca.pem")
            .client_config()
            .expect_err("no file");
        assert!(err.contains("/nonexistent/ca.pem"), "{err}");
        let err = TlsConfig::ca_pem("not pem")
            .client_config()
            .expect_err("no cert");
        assert!(err.contains("no PEM certificate"), "{err}");
    }

    /// The built configuration follows the fields, also those changed on
    /// a config already used or on its clone (which shares the cache),
    /// and is built once while they stay the same.
    #[test]
    fn the_built_configuration_follows_the_fields() {
        let mut config = TlsConfig::ca_file("/nonexistent/ca.pem");
        assert!(config.client_config().is_err());
        let ca = walfetch_testkit::TestCa::new("tls unit test CA").expect("CA");
        config.roots = TrustRoots::Pem(Pem::Bytes(ca.ca_pem().into_bytes()));
        let strict = config.client_config().expect("built from the new roots");
        assert!(Arc::ptr_eq(
            &strict,
            &config.clone().client_config().expect("cached")
        ));

        let mut lenient = config.clone().danger_skip_hostname_verification();
        let skipping = lenient.client_config().expect("built");
        assert!(!Arc::ptr_eq(&strict, &skipping));
        lenient.verify_hostname = true;
        let again = lenient.client_config().expect("cached");
        assert!(
            Arc::ptr_eq(&strict, &again),
            "verify_hostname = true must give the verifying configuration"
        );
        lenient.verify_certificate = false;
        let none = lenient.client_config().expect("built");
        assert!(!Arc::ptr_eq(&none, &strict) && !Arc::ptr_eq(&none, &skipping));
    }
}
