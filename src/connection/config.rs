//! Settings of a connection and of one request.

use std::time::Duration;

use super::{frame, Security, VersionPolicy};

/// Settings of one connection.
#[derive(Debug, Clone)]
pub struct ConnectionConfig {
    /// The client id sent in every request header.
    pub client_id: String,
    /// How long opening a connection may take, twice: resolving the name
    /// and establishing TCP, then the `ApiVersions` answer that opens the
    /// connection. Default 5 s; zero is refused by
    /// [`crate::cluster::Cluster::connect`].
    pub connect_timeout: Duration,
    /// How long a request may wait for its response (Fetch adds its
    /// `max_wait` to this). Zero is refused by
    /// [`crate::cluster::Cluster::connect`].
    pub request_timeout: Duration,
    /// The largest response frame accepted; a larger length prefix breaks
    /// the connection with
    /// [`ConnectionError::FrameTooLarge`](super::ConnectionError::FrameTooLarge).
    pub max_frame_bytes: usize,
    /// The API versions walfetch may use.
    pub versions: VersionPolicy,
    /// TLS and SASL (default: neither).
    pub security: Security,
}

impl Default for ConnectionConfig {
    fn default() -> Self {
        Self {
            client_id: "walfetch".to_owned(),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            request_timeout: Duration::from_secs(30),
            max_frame_bytes: frame::DEFAULT_MAX_FRAME_BYTES,
            versions: VersionPolicy::default(),
            security: Security::default(),
        }
    }
}

/// The default [`ConnectionConfig::connect_timeout`]: 5 s, long enough for
/// a broker across a slow link, short enough that a dead address is
/// reported within seconds.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Per-request settings that differ from the connection's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RequestOptions {
    /// Use this API version instead of the negotiated one.
    pub version: Option<i16>,
    /// Use this timeout instead of [`ConnectionConfig::request_timeout`].
    pub timeout: Option<Duration>,
}
