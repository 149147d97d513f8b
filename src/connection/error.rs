//! The connection layer's one error type.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::ApiKey;

use super::address::AddressError;
use super::versions::VersionRange;
use crate::error_code::ErrorCode;

/// Everything that can go wrong on one broker connection.
///
/// Every variant names the broker address. The type is `Clone` because one
/// broken connection fails every request in flight on it with the same
/// error (I/O errors are shared behind an [`Arc`]).
///
/// Connecting fails in kinds that call for different answers, told apart
/// here: a malformed address ([`ConnectionError::InvalidAddress`]), a name
/// that does not resolve ([`ConnectionError::Unresolvable`]), a port
/// nothing listens on ([`ConnectionError::Refused`]), no TCP connection in
/// time ([`ConnectionError::ConnectTimeout`]), a peer that accepts but
/// never answers ([`ConnectionError::HandshakeTimeout`]) and one that
/// answers but is not a Kafka broker ([`ConnectionError::NotKafka`]).
/// [`ConnectionError::is_connection_lost`] says which are worth retrying,
/// [`ConnectionError::is_wrong_peer`] which never are at bootstrap.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectionError {
    /// The broker address is malformed; nothing was attempted.
    #[error("invalid broker address: {source}")]
    InvalidAddress {
        /// The address as given.
        broker: String,
        /// What is wrong with it.
        #[source]
        source: AddressError,
    },
    /// The broker's host name does not resolve (DNS).
    #[error("cannot resolve the host {host:?} of broker {broker}: {reason}")]
    Unresolvable {
        /// The broker address.
        broker: String,
        /// The host name.
        host: String,
        /// The resolver's answer.
        reason: String,
    },
    /// Every address of the broker refused the connection: nothing listens
    /// on that port.
    #[error(
        "broker {broker} refused the connection{}: nothing listens on that port \
         (is the broker running, and is the port right?)",
        at_addresses(broker, addresses)
    )]
    Refused {
        /// The broker address.
        broker: String,
        /// The socket addresses tried, as resolved.
        addresses: Vec<SocketAddr>,
    },
    /// The TCP connection could not be established (other than refused).
    #[error("cannot connect to broker {broker}: {source}")]
    Connect {
        /// The broker address.
        broker: String,
        /// The I/O error.
        #[source]
        source: Arc<io::Error>,
    },
    /// The peer accepted the connection but did not answer the
    /// `ApiVersions` request that opens it within the connect timeout.
    #[error(
        "broker {broker} accepted the connection but did not answer ApiVersions within {} ms: \
         not a Kafka broker, or one too busy to answer (the limit is the connect timeout, \
         --timeout / socket.timeout.ms)",
        timeout.as_millis()
    )]
    HandshakeTimeout {
        /// The broker address.
        broker: String,
        /// The connect timeout.
        timeout: Duration,
    },
    /// The first answer on the connection is not a Kafka response frame:
    /// the peer speaks another protocol (HTTP, TLS, ...).
    #[error("{broker} is not a Kafka broker: it answered ApiVersions with {answered}")]
    NotKafka {
        /// The broker address.
        broker: String,
        /// What it answered, as far as it can be shown (text, or bytes in
        /// hex).
        answered: String,
    },
    /// The TCP connection (name resolution included) was not established
    /// within the connect timeout.
    #[error(
        "connecting to broker {broker} timed out after {} ms (--timeout / socket.timeout.ms)",
        timeout.as_millis()
    )]
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
         (receive.message.max.bytes)"
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
         (correlation id {correlation_id}; --timeout / socket.timeout.ms)",
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
    #[error(
        "ApiVersions handshake with broker {broker} failed: {source}{}",
        closed_at_once_hint(source)
    )]
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
            Self::InvalidAddress { broker, .. }
            | Self::Unresolvable { broker, .. }
            | Self::Refused { broker, .. }
            | Self::HandshakeTimeout { broker, .. }
            | Self::NotKafka { broker, .. }
            | Self::Connect { broker, .. }
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
    /// same request may succeed on a new connection: connect failures
    /// (refused, timed out, a name that did not resolve, which may be a
    /// passing DNS failure for a broker the cluster named), I/O errors, the
    /// peer closing, timeouts and a corrupted stream. A malformed address,
    /// a peer that is not a Kafka broker, decode, encode and version errors
    /// are deterministic and are not, nor are TLS and SASL failures (a
    /// certificate that does not verify, a wrong password): retrying cannot
    /// fix them.
    pub fn is_connection_lost(&self) -> bool {
        matches!(
            self,
            Self::Connect { .. }
                | Self::Refused { .. }
                | Self::Unresolvable { .. }
                | Self::HandshakeTimeout { .. }
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
            Self::InvalidAddress { .. }
                | Self::Unresolvable { .. }
                | Self::Refused { .. }
                | Self::Connect { .. }
                | Self::ConnectTimeout { .. }
                | Self::HandshakeTimeout { .. }
                | Self::NotKafka { .. }
                | Self::HandshakeLost { .. }
        )
    }

    /// Whether the address leads nowhere walfetch can use, whatever the
    /// timing: it is malformed, its name does not resolve, the peer is not
    /// a Kafka broker, or the broker refused the handshake (an error code,
    /// no common `ApiVersions` version). A bootstrap fails at once on these
    /// rather than retrying them until its deadline.
    pub fn is_wrong_peer(&self) -> bool {
        matches!(
            self,
            Self::InvalidAddress { .. }
                | Self::Unresolvable { .. }
                | Self::NotKafka { .. }
                | Self::Handshake { .. }
                | Self::NoCommonVersion {
                    api: ApiKey::ApiVersions,
                    ..
                }
        )
    }
}

/// What a peer that closes a new connection without answering may be.
fn closed_at_once_hint(source: &ConnectionError) -> &'static str {
    match source {
        ConnectionError::ClosedByPeer { .. } => {
            " (a broker that closes a new connection without answering may expect TLS: \
             -X security.protocol=SSL)"
        }
        _ => "",
    }
}

/// ` at 127.0.0.1:9092, [::1]:9092` when the resolved addresses say more
/// than the broker address itself.
fn at_addresses(broker: &str, addresses: &[SocketAddr]) -> String {
    let listed: Vec<String> = addresses.iter().map(ToString::to_string).collect();
    if listed.is_empty() || (listed.len() == 1 && listed[0] == broker) {
        String::new()
    } else {
        format!(" at {}", listed.join(", "))
    }
}
