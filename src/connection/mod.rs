//! One TCP connection to one Kafka broker.
//!
//! A [`Connection`] owns a socket split in two halves. A writer task sends
//! request frames in the order they are queued (a task rather than a lock
//! around the socket, so that a request abandoned mid-write, by its timeout
//! or its caller, can never leave half a frame on the wire); a reader task
//! reads response frames ([`frame::FrameReader`]) and hands each, by its
//! correlation id, to the request waiting for it. Any number of requests can be in flight at
//! once (pipelining); each waits on its own channel, so a response can only
//! reach the request that carries its correlation id, whatever the order
//! responses arrive in.
//!
//! When the connection breaks (the peer closes, an I/O error, a malformed
//! frame, a correlation id that was never sent), every request in flight
//! fails at once with that error, and so does every later request.
//! Dropping or closing a connection ends both tasks at once, which closes
//! the socket even while a frame is stuck half written to a broker that
//! stopped reading.
//!
//! On connect the client wraps the socket in TLS when configured ([`tls`]),
//! negotiates versions with `ApiVersions` ([`versions`]), then
//! authenticates with SASL when configured ([`sasl`]), again before the
//! session's lifetime runs out; requests use the highest version both sides
//! support unless the caller names one. Every response is decoded by
//! [`decode_response_frame`], which bounds-checks its body ([`guard`])
//! before the message decoder sees it.
//!
//! # References
//! - Kafka protocol guide, "Network" and "Common Request and Response
//!   Structure": <https://kafka.apache.org/protocol#protocol_network>
//!   (correlation ids, in-order responses per connection, pipelining).
//! - KIP-35 / KIP-511 (ApiVersions), KIP-482 (request/response header
//!   versions of flexible messages).
//! - KIP-152 and KIP-368 (SASL authentication and re-authentication).

mod address;
mod config;
mod dial;
mod error;
#[doc(hidden)]
pub mod frame;
#[doc(hidden)]
pub mod guard;
mod handshake;
mod multiplexer;
mod not_kafka;
mod requests;
pub mod sasl;
mod security;
#[cfg(test)]
mod tests;
pub mod tls;
pub mod versions;

pub use address::{AddressError, BrokerAddress, Scheme, DEFAULT_PORT};
pub use config::{ConnectionConfig, RequestOptions, DEFAULT_CONNECT_TIMEOUT};
pub use error::ConnectionError;
pub(crate) use requests::answered_by;
pub use requests::{decode_response_frame, Connection, ConnectionStats, Response};
pub use sasl::{SaslConfig, TokenProvider};
pub use security::Security;
pub use tls::{Pem, TlsConfig, TrustRoots};
pub use versions::{NegotiatedVersions, VersionPolicy, VersionRange};
