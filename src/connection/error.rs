//! The connection layer's one error type.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::ApiKey;

use super::versions::VersionRange;
use crate::error_code::ErrorCode;

/// Everything that can go wrong on one broker connection.
///
/// Every variant names the broker address. The type is `Clone` because one
/// broken connection fails every request in flight on it with the same
/// error (I/O errors are shared behind an [`Arc`]).
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectionError {
    /// The TCP connection could not be established.
    #[error("cannot connect to broker {broker}: {source}")]
    Connect {
        /// The broker address.
        broker: String,
        /// The I/O error.
        #[source]
        source: Arc<io::Error>,
    },
    /// The TCP connection was not established within the connect timeout.
    #[error("connecting to broker {broker} timed out after {} ms", timeout.as_millis())]
    ConnectTimeout {
        /// The broker address.
        broker: String,
        /// The connect timeout.
        timeout: Duration,
    },
    /// Reading from or writing to the socket failed.
    #[error("connection to broker {broker} failed: {source}")]
    Io {
        /// The broker address.
        broker: String,
        /// The I/O error.
        #[source]
        source: Arc<io::Error>,
    },
    /// The broker closed the connection between two responses.
    #[error("broker {broker} closed the connection")]
    ClosedByPeer {
        /// The broker address.
        broker: String,
    },
    /// The broker closed the connection in the middle of a response frame.
    #[error(
        "broker {broker} closed the connection in the middle of a response frame \
         ({received} bytes received{})",
        expected.map(|e| format!(" of {e}")).unwrap_or_default()
    )]
    TruncatedFrame {
        /// The broker address.
        broker: String,
        /// Bytes of the frame (length prefix included) that arrived.
        received: usize,
        /// The frame's full size (length prefix included), when the prefix
        /// arrived.
        expected: Option<usize>,
    },
    /// A response frame's length prefix is negative.
    #[error("broker {broker} sent a response frame with negative length {length}")]
    NegativeFrameLength {
        /// The broker address.
        broker: String,
        /// The length read.
        length: i32,
    },
    /// A response frame's length prefix is over the configured maximum.
    #[error(
        "broker {broker} sent a {length}-byte response frame, over the {max}-byte limit \
         (ConnectionConfig::max_frame_bytes)"
    )]
    FrameTooLarge {
        /// The broker address.
        broker: String,
        /// The length read.
        length: usize,
        /// The limit.
        max: usize,
    },
    /// A response frame is too short to hold a response header.
    #[error(
        "broker {broker} sent a {length}-byte response frame, too short for a response header"
    )]
    FrameTooShort {
        /// The broker address.
        broker: String,
        /// The frame's length.
        length: usize,
    },
    /// A response carries a correlation id that was never sent on this
    /// connection: the stream can no longer be trusted.
    #[error(
        "broker {broker} sent a response with correlation id {correlation_id}, which was never \
         used on this connection"
    )]
    UnexpectedCorrelationId {
        /// The broker address.
        broker: String,
        /// The correlation id received.
        correlation_id: i32,
    },
    /// No response arrived within the request timeout.
    #[error(
        "{api:?} v{version} request to broker {broker} timed out after {} ms \
         (correlation id {correlation_id})",
        timeout.as_millis()
    )]
    RequestTimeout {
        /// The broker address.
        broker: String,
        /// The request's API.
        api: ApiKey,
        /// The request's API version.
        version: i16,
        /// The request's correlation id.
        correlation_id: i32,
        /// The timeout.
        timeout: Duration,
    },
    /// A response could not be decoded.
    #[error("cannot decode {api:?} v{version} response from broker {broker}: {message}")]
    Decode {
        /// The broker address.
        broker: String,
        /// The response's API.
        api: ApiKey,
        /// The response's API version.
        version: i16,
        /// What was wrong.
        message: String,
    },
    /// A request could not be encoded (a field set that the version lacks).
    #[error("cannot encode {api:?} v{version} request for broker {broker}: {message}")]
    Encode {
        /// The broker address.
        broker: String,
        /// The request's API.
        api: ApiKey,
        /// The request's API version.
        version: i16,
        /// What was wrong.
        message: String,
    },
    /// The broker and walfetch share no version of an API.
    #[error(
        "broker {broker} supports {api:?} {}, walfetch supports {client}: no common version",
        broker_versions.map_or_else(|| "in no version".to_owned(), |v| v.to_string())
    )]
    NoCommonVersion {
        /// The broker address.
        broker: String,
        /// The API.
        api: ApiKey,
        /// The versions walfetch can use (after configured caps).
        client: VersionRange,
        /// The versions the broker advertised, `None` when it did not list
        /// the API at all.
        broker_versions: Option<VersionRange>,
    },
    /// A request asked for a version the message types cannot encode.
    #[error("{api:?} v{version} is outside the versions walfetch can encode ({supported})")]
    VersionOutOfRange {
        /// The broker address.
        broker: String,
        /// The API.
        api: ApiKey,
        /// The version asked for.
        version: i16,
        /// What the message types support.
        supported: VersionRange,
    },
    /// The connection broke (or the answer timed out) during the
    /// `ApiVersions` handshake that opens it, so no request of the caller
    /// was sent on it.
    #[error("ApiVersions handshake with broker {broker} failed: {source}")]
    HandshakeLost {
        /// The broker address.
        broker: String,
        /// How the connection broke.
        #[source]
        source: Box<ConnectionError>,
    },
    /// The broker answered `ApiVersions` with an error.
    #[error("broker {broker} answered ApiVersions v{version} with {code}")]
    Handshake {
        /// The broker address.
        broker: String,
        /// The ApiVersions version sent.
        version: i16,
        /// The error code.
        code: ErrorCode,
    },
    /// The API has no response bounds check, so its responses are refused
    /// rather than decoded unchecked (see `connection::guard`).
    #[error("walfetch does not decode {api:?} responses (no bounds check for them)")]
    UnsupportedApi {
        /// The broker address.
        broker: String,
        /// The API.
        api: ApiKey,
    },
    /// The connection was shut down by this side.
    #[error("connection to broker {broker} was shut down")]
    Shutdown {
        /// The broker address.
        broker: String,
    },
    /// The TLS settings cannot be used (a certificate or key file missing
    /// or not PEM, a server name that is not one).
    #[error("TLS settings for broker {broker} are unusable: {message}")]
    TlsConfig {
        /// The broker address.
        broker: String,
        /// What is wrong.
        message: String,
    },
    /// The TLS handshake failed: the broker's certificate does not verify,
    /// the broker refused the client's, or the broker does not speak TLS.
    #[error("TLS handshake with broker {broker} failed: {message}")]
    TlsHandshake {
        /// The broker address.
        broker: String,
        /// What rustls (or the peer) said.
        message: String,
    },
    /// The broker does not enable the SASL mechanism configured.
    #[error(
        "broker {broker} does not enable SASL mechanism {mechanism} (enabled: {})",
        if enabled.is_empty() { "none".to_owned() } else { enabled.join(", ") }
    )]
    SaslMechanismUnsupported {
        /// The broker address.
        broker: String,
        /// The mechanism asked for.
        mechanism: &'static str,
        /// The mechanisms the broker enables.
        enabled: Vec<String>,
    },
    /// SASL authentication failed: wrong credentials, an unknown user, a
    /// refused token, or a broker not following the mechanism.
    #[error("SASL {mechanism} authentication with broker {broker} failed: {message}")]
    SaslAuthentication {
        /// The broker address.
        broker: String,
        /// The mechanism.
        mechanism: &'static str,
        /// What the broker or the mechanism said.
        message: String,
    },
}

impl ConnectionError {
    /// The broker address the error is about.
    pub fn broker(&self) -> &str {
        match self {
            Self::Connect { broker, .. }
            | Self::ConnectTimeout { broker, .. }
            | Self::Io { broker, .. }
            | Self::ClosedByPeer { broker }
            | Self::TruncatedFrame { broker, .. }
            | Self::NegativeFrameLength { broker, .. }
            | Self::FrameTooLarge { broker, .. }
            | Self::FrameTooShort { broker, .. }
            | Self::UnexpectedCorrelationId { broker, .. }
            | Self::RequestTimeout { broker, .. }
            | Self::Decode { broker, .. }
            | Self::Encode { broker, .. }
            | Self::NoCommonVersion { broker, .. }
            | Self::VersionOutOfRange { broker, .. }
            | Self::HandshakeLost { broker, .. }
            | Self::Handshake { broker, .. }
            | Self::UnsupportedApi { broker, .. }
            | Self::Shutdown { broker }
            | Self::TlsConfig { broker, .. }
            | Self::TlsHandshake { broker, .. }
            | Self::SaslMechanismUnsupported { broker, .. }
            | Self::SaslAuthentication { broker, .. } => broker,
        }
    }

    /// Whether the error means the connection is gone or unusable, so the
    /// same request may succeed on a new connection: connect failures, I/O
    /// errors, the peer closing, timeouts and a corrupted stream. Decode,
    /// encode and version errors are deterministic and are not, nor are TLS
    /// and SASL failures (a certificate that does not verify, a wrong
    /// password): retrying cannot fix them.
    pub fn is_connection_lost(&self) -> bool {
        matches!(
            self,
            Self::Connect { .. }
                | Self::ConnectTimeout { .. }
                | Self::Io { .. }
                | Self::ClosedByPeer { .. }
                | Self::TruncatedFrame { .. }
                | Self::NegativeFrameLength { .. }
                | Self::FrameTooLarge { .. }
                | Self::FrameTooShort { .. }
                | Self::UnexpectedCorrelationId { .. }
                | Self::RequestTimeout { .. }
                | Self::HandshakeLost { .. }
                | Self::Shutdown { .. }
        )
    }

    /// Whether the request certainly never reached the broker: the
    /// connection could not be established, or broke while negotiating
    /// versions. Only then is a non-idempotent request (Produce) safe to
    /// resend after a connection error.
    pub fn is_before_send(&self) -> bool {
        matches!(
            self,
            Self::Connect { .. } | Self::ConnectTimeout { .. } | Self::HandshakeLost { .. }
        )
    }
}
