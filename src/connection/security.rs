//! How broker connections are secured: TLS, SASL, both or neither — the
//! four `security.protocol` values of Kafka clients.
//!
//! # References
//! - Kafka documentation, "Security": listeners `PLAINTEXT`, `SSL`,
//!   `SASL_PLAINTEXT`, `SASL_SSL`
//!   (<https://kafka.apache.org/documentation/#security>).

use super::sasl::SaslConfig;
use super::tls::TlsConfig;

/// TLS and SASL settings of every connection of a client; the default is
/// neither (`PLAINTEXT`).
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Security {
    /// TLS around the connection (`SSL`, `SASL_SSL`), `None` for plain TCP.
    pub tls: Option<TlsConfig>,
    /// SASL authentication after connecting (`SASL_PLAINTEXT`,
    /// `SASL_SSL`), `None` for none.
    pub sasl: Option<SaslConfig>,
}

impl Security {
    /// Plain TCP, no authentication (`PLAINTEXT`).
    pub fn plaintext() -> Self {
        Self::default()
    }

    /// TLS, no SASL (`SSL`; with a client certificate, mutual TLS).
    pub fn ssl(tls: TlsConfig) -> Self {
        Self {
            tls: Some(tls),
            sasl: None,
        }
    }

    /// SASL over plain TCP (`SASL_PLAINTEXT`).
    pub fn sasl_plaintext(sasl: SaslConfig) -> Self {
        Self {
            tls: None,
            sasl: Some(sasl),
        }
    }

    /// SASL over TLS (`SASL_SSL`).
    pub fn sasl_ssl(tls: TlsConfig, sasl: SaslConfig) -> Self {
        Self {
            tls: Some(tls),
            sasl: Some(sasl),
        }
    }

    /// The librdkafka `security.protocol` name of these settings.
    pub fn protocol_name(&self) -> &'static str {
        match (&self.tls, &self.sasl) {
            (None, None) => "PLAINTEXT",
            (Some(_), None) => "SSL",
            (None, Some(_)) => "SASL_PLAINTEXT",
            (Some(_), Some(_)) => "SASL_SSL",
        }
    }
}
