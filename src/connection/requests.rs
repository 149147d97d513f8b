//! The [`Connection`] handle: what it tells of itself, closing it, and
//! requests sent on it and their decoded responses.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::{HeaderVersion, Request, StrBytes};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::guard::{self, GuardError};
use super::multiplexer::Shared;
use super::{frame, ConnectionError, NegotiatedVersions, RequestOptions, SaslConfig, VersionRange};

tokio::task_local! {
    /// When requests made in this scope must be answered by (see
    /// [`answered_by`]).
    static ANSWER_BY: tokio::time::Instant;
}

/// Runs `future` with every request it makes timing out at `at` at the
/// latest, before its own timeout if that ends later. An operation's
/// deadline then ends a request as a timeout, which marks its connection
/// lost (the pool drops it), rather than dropping the request and leaving
/// a connection that stopped answering in the pool for the next request
/// to wait on.
pub(crate) async fn answered_by<F: std::future::Future>(
    at: tokio::time::Instant,
    future: F,
) -> F::Output {
    ANSWER_BY.scope(at, future).await
}

/// A decoded response.
#[derive(Debug, Clone)]
pub struct Response<T> {
    /// The response message.
    pub body: T,
    /// The API version of request and response.
    pub version: i16,
    /// The correlation id the request carried.
    pub correlation_id: i32,
    /// Bytes the response took on the wire, length prefix included.
    pub wire_bytes: usize,
}

/// Counters of one connection, since it was opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConnectionStats {
    /// Bytes written to the socket (request frames, length prefixes included).
    pub bytes_sent: u64,
    /// Bytes read from the socket (response frames, length prefixes included).
    pub bytes_received: u64,
    /// Requests sent.
    pub requests: u64,
    /// Responses received.
    pub responses: u64,
    /// Requests waiting for their response right now.
    pub in_flight: usize,
}

/// One TCP connection to one broker, shared by any number of concurrent
/// requests. Dropping it closes the socket.
#[derive(Debug)]
pub struct Connection {
    pub(super) shared: Arc<Shared>,
    pub(super) outgoing: mpsc::UnboundedSender<Bytes>,
    pub(super) versions: NegotiatedVersions,
    pub(super) client_id: StrBytes,
    pub(super) request_timeout: Duration,
    pub(super) reader: JoinHandle<()>,
    /// Aborted with the reader when the connection is dropped or closed:
    /// a writer blocked on a broker that stopped reading would otherwise
    /// never end, and keep the socket open.
    pub(super) writer: JoinHandle<()>,
    /// The SASL settings, to re-authenticate with.
    pub(super) sasl: Option<SaslConfig>,
    /// When the SASL session must be renewed (KIP-368).
    pub(super) reauthenticate_at: Mutex<Option<tokio::time::Instant>>,
    /// Requests hold it shared for their round trip; re-authentication
    /// holds it alone, so that its requests are the only ones on the wire.
    pub(super) gate: tokio::sync::RwLock<()>,
    /// Held by a request from its call until its frame is queued: a fair
    /// lock, so frames are queued in the order the requests were made,
    /// also when some of them waited for a re-authentication.
    pub(super) turn: tokio::sync::Mutex<()>,
}

impl Connection {
    /// The broker address this connection was opened to.
    pub fn broker(&self) -> &str {
        &self.shared.broker
    }

    /// The outcome of version negotiation.
    pub fn versions(&self) -> &NegotiatedVersions {
        &self.versions
    }

    /// The negotiated version of `api`, or the error naming both ranges.
    pub fn version(&self, api: ApiKey) -> Result<i16, ConnectionError> {
        self.versions.version(api)
    }

    /// The default request timeout of this connection.
    pub fn request_timeout(&self) -> Duration {
        self.request_timeout
    }

    /// The counters.
    pub fn stats(&self) -> ConnectionStats {
        ConnectionStats {
            bytes_sent: self.shared.bytes_sent.load(Ordering::Relaxed),
            bytes_received: self.shared.bytes_received.load(Ordering::Relaxed),
            requests: self.shared.requests.load(Ordering::Relaxed),
            responses: self.shared.responses.load(Ordering::Relaxed),
            in_flight: self.shared.lock().pending.len(),
        }
    }

    /// The error that broke the connection, `None` while it is usable.
    pub fn failure(&self) -> Option<ConnectionError> {
        self.shared.lock().failed.clone()
    }

    /// Whether the connection is broken or shut down.
    pub fn is_closed(&self) -> bool {
        self.shared.lock().failed.is_some() || self.outgoing.is_closed()
    }

    /// Shuts the connection down: requests in flight and later ones fail
    /// with [`ConnectionError::Shutdown`], and the socket is closed at once,
    /// also when a frame is half written to a broker that stopped reading.
    pub fn close(&self) {
        self.shared.fail(ConnectionError::Shutdown {
            broker: self.shared.broker.clone(),
        });
        self.stop_tasks();
    }

    /// Ends the reader and writer tasks, which closes the socket. Frames
    /// still queued are dropped unsent: every request they carry has
    /// already failed (the connection is marked failed first), and a
    /// request reported failed must not reach the broker afterwards (a
    /// retried Produce would be appended twice).
    pub(super) fn stop_tasks(&self) {
        self.reader.abort();
        self.writer.abort();
    }

    /// Sends `request` in the negotiated version and waits for its response.
    pub async fn request<R: Request>(
        &self,
        request: &R,
    ) -> Result<Response<R::Response>, ConnectionError> {
        self.request_with(request, RequestOptions::default()).await
    }

    /// Sends `request` with per-request options and waits for its response.
    pub async fn request_with<R: Request>(
        &self,
        request: &R,
        options: RequestOptions,
    ) -> Result<Response<R::Response>, ConnectionError> {
        // Frames go on the wire in the order the requests were made (an
        // idempotent producer's batches must not overtake each other): a
        // request made while a re-authentication waits for the requests
        // in flight would otherwise race the ones made after it for the
        // gate once the session is renewed.
        let turn = self.turn.lock().await;
        self.reauthenticate_if_due().await?;
        let _shared = self.gate.read().await;
        self.send_and_wait(request, options, Some(turn)).await
    }

    /// [`Connection::request_with`] without waiting for re-authentication
    /// (which itself sends requests this way).
    pub(super) async fn request_ungated<R: Request>(
        &self,
        request: &R,
        options: RequestOptions,
    ) -> Result<Response<R::Response>, ConnectionError> {
        self.send_and_wait(request, options, None).await
    }

    /// Sends `request` and waits for its response, letting the next
    /// request have its `turn` once the frame is queued.
    async fn send_and_wait<R: Request>(
        &self,
        request: &R,
        options: RequestOptions,
        turn: Option<tokio::sync::MutexGuard<'_, ()>>,
    ) -> Result<Response<R::Response>, ConnectionError> {
        let broker = || self.shared.broker.clone();
        let api = ApiKey::try_from(R::KEY).map_err(|()| ConnectionError::Decode {
            broker: broker(),
            api: ApiKey::ApiVersions,
            version: 0,
            message: format!("unknown API key {}", R::KEY),
        })?;
        if !guard::is_checked(api) {
            return Err(ConnectionError::UnsupportedApi {
                broker: broker(),
                api,
            });
        }
        let version = match options.version {
            Some(version) => version,
            None => self.versions.version(api)?,
        };
        let supported = VersionRange::new(R::VERSIONS.min, R::VERSIONS.max);
        if !supported.contains(version) {
            return Err(ConnectionError::VersionOutOfRange {
                broker: broker(),
                api,
                version,
                supported,
            });
        }
        let timeout = options.timeout.unwrap_or(self.request_timeout);
        let timeout = ANSWER_BY
            .try_with(|at| at.saturating_duration_since(tokio::time::Instant::now()))
            .map_or(timeout, |left| timeout.min(left));
        let raw = self
            .round_trip(api, version, request, timeout, turn)
            .await?;
        let body = decode_response_frame::<R>(version, raw.payload).map_err(|e| {
            ConnectionError::Decode {
                broker: broker(),
                api,
                version,
                message: e.to_string(),
            }
        })?;
        Ok(Response {
            body,
            version,
            correlation_id: raw.correlation_id,
            wire_bytes: raw.wire_bytes,
        })
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.shared.fail(ConnectionError::Shutdown {
            broker: self.shared.broker.clone(),
        });
        // Not left to the writer noticing the closed queue: a writer
        // blocked in `write_all` on a broker that stopped reading would
        // never notice, and keep the socket open.
        self.stop_tasks();
    }
}

/// Decodes a response frame's payload (after the length prefix) for
/// request type `R` (e.g. `FetchRequest` for a Fetch response) in
/// `version`: the response header in the version `R`'s response uses, then
/// the body through the bounds check ([`guard::decode_response`]). The
/// message's `Bytes` fields (a Fetch response's `records`) are views of
/// `payload`.
///
/// This is the whole path from a received frame to a response message: a
/// [`Connection`] runs it on every response, and the `decode_responses`
/// fuzz target on arbitrary bytes.
pub fn decode_response_frame<R: Request>(
    version: i16,
    payload: Bytes,
) -> Result<R::Response, GuardError> {
    let header_version = <R::Response as HeaderVersion>::header_version(version);
    let (_, body) = frame::split_response(payload, header_version)
        .map_err(|message| GuardError::Header { message })?;
    guard::decode_response::<R>(version, body)
}
