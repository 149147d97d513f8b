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
mod dial;
mod error;
#[doc(hidden)]
pub mod frame;
#[doc(hidden)]
pub mod guard;
mod not_kafka;
pub mod sasl;
mod security;
pub mod tls;
pub mod versions;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse, RequestHeader};
use kafka_protocol::protocol::{Encodable, HeaderVersion, Request, StrBytes};
use tokio::io::{AsyncWriteExt, BufWriter};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

pub use address::{AddressError, BrokerAddress, Scheme, DEFAULT_PORT};
pub use error::ConnectionError;
use frame::FrameReader;

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
use guard::GuardError;
pub use sasl::{SaslConfig, TokenProvider};
pub use security::Security;
pub use tls::{Pem, TlsConfig, TrustRoots};
use tls::{ReadStream, Stream, WriteStream};
pub use versions::{NegotiatedVersions, VersionPolicy, VersionRange};

use crate::error_code::ErrorCode;

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
    /// the connection with [`ConnectionError::FrameTooLarge`].
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
    shared: Arc<Shared>,
    outgoing: mpsc::UnboundedSender<Bytes>,
    versions: NegotiatedVersions,
    client_id: StrBytes,
    request_timeout: Duration,
    reader: JoinHandle<()>,
    /// Aborted with the reader when the connection is dropped or closed:
    /// a writer blocked on a broker that stopped reading would otherwise
    /// never end, and keep the socket open.
    writer: JoinHandle<()>,
    /// The SASL settings, to re-authenticate with.
    sasl: Option<SaslConfig>,
    /// When the SASL session must be renewed (KIP-368).
    reauthenticate_at: Mutex<Option<tokio::time::Instant>>,
    /// Requests hold it shared for their round trip; re-authentication
    /// holds it alone, so that its requests are the only ones on the wire.
    gate: tokio::sync::RwLock<()>,
    /// Held by a request from its call until its frame is queued: a fair
    /// lock, so frames are queued in the order the requests were made,
    /// also when some of them waited for a re-authentication.
    turn: tokio::sync::Mutex<()>,
}

impl Connection {
    /// Connects to `broker` (`host:port`, see [`BrokerAddress`] for the
    /// forms accepted), sets `TCP_NODELAY`, performs the TLS handshake if
    /// configured, starts the reader and writer tasks, negotiates API
    /// versions and authenticates with SASL if configured. Connecting (with
    /// the TLS handshake) and the `ApiVersions` answer each have
    /// [`ConnectionConfig::connect_timeout`].
    pub async fn connect(
        broker: impl Into<String>,
        config: ConnectionConfig,
    ) -> Result<Self, ConnectionError> {
        let broker = broker.into();
        let stream = dial::dial(&broker, config.connect_timeout).await?;
        let stream = tls::wrap(
            stream,
            &broker,
            config.security.tls.as_ref(),
            config.connect_timeout,
        )
        .await?;
        let mut connection = Self::start(stream, broker, &config);
        // A connection lost here took no request of the caller's with it:
        // say so, so that even a Produce may be retried.
        let versions = connection
            .handshake(&config.versions, config.connect_timeout)
            .await
            .map_err(tls::refine_first_error)
            .map_err(|e| match e {
                ConnectionError::RequestTimeout {
                    broker, timeout, ..
                } => ConnectionError::HandshakeTimeout { broker, timeout },
                e if e.is_connection_lost() => ConnectionError::HandshakeLost {
                    broker: e.broker().to_owned(),
                    source: Box::new(e),
                },
                e => e,
            })?;
        connection.versions = versions;
        if let Some(sasl) = connection.sasl.clone() {
            let token_timeout = config.connect_timeout;
            connection
                .authenticate(&sasl, token_timeout)
                .await
                .map_err(|e| match e {
                    e if e.is_connection_lost() => ConnectionError::HandshakeLost {
                        broker: e.broker().to_owned(),
                        source: Box::new(e),
                    },
                    e => e,
                })?;
        }
        Ok(connection)
    }

    /// One SASL exchange, waiting at most `token_timeout` for an
    /// OAUTHBEARER token; schedules the next before the session ends.
    async fn authenticate(
        &self,
        sasl: &SaslConfig,
        token_timeout: Duration,
    ) -> Result<(), ConnectionError> {
        let started = tokio::time::Instant::now();
        let lifetime = sasl::authenticate(self, sasl, token_timeout).await?;
        let at = lifetime.map(|l| started + sasl::reauthentication_delay(l, rand::random::<f64>()));
        tracing::debug!(broker = %self.shared.broker, mechanism = sasl.mechanism_name(), ?lifetime, "SASL authenticated");
        *self
            .reauthenticate_at
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = at;
        Ok(())
    }

    fn reauthentication_due(&self) -> bool {
        self.reauthenticate_at
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some_and(|at| tokio::time::Instant::now() >= at)
    }

    /// Re-authenticates when the session is due (KIP-368), waiting for the
    /// requests in flight and holding back new ones meanwhile. A failure
    /// breaks the connection. A token provider has the request timeout to
    /// answer: the connection's requests wait for it.
    async fn reauthenticate_if_due(&self) -> Result<(), ConnectionError> {
        let Some(sasl) = &self.sasl else {
            return Ok(());
        };
        if !self.reauthentication_due() {
            return Ok(());
        }
        let _alone = self.gate.write().await;
        if !self.reauthentication_due() {
            return Ok(());
        }
        if let Err(error) = self.authenticate(sasl, self.request_timeout).await {
            self.shared.fail(error.clone());
            self.stop_tasks();
            return Err(error);
        }
        Ok(())
    }

    fn start(stream: Stream, broker: String, config: &ConnectionConfig) -> Self {
        let (read, write) = stream.split();
        let shared = Arc::new(Shared {
            broker: broker.clone(),
            state: Mutex::new(State::default()),
            next_id: AtomicU64::new(0),
            bytes_sent: AtomicU64::new(0),
            bytes_received: AtomicU64::new(0),
            requests: AtomicU64::new(0),
            responses: AtomicU64::new(0),
        });
        let (outgoing, queue) = mpsc::unbounded_channel();
        let frames = FrameReader::new(read, broker.clone(), config.max_frame_bytes);
        let reader = tokio::spawn(read_loop(frames, Arc::clone(&shared)));
        let writer = tokio::spawn(write_loop(queue, write, Arc::clone(&shared)));
        Self {
            shared,
            outgoing,
            versions: config
                .versions
                .negotiate(&broker, &ApiVersionsResponse::default()),
            client_id: StrBytes::from_string(config.client_id.clone()),
            request_timeout: config.request_timeout,
            reader,
            writer,
            sasl: config.security.sasl.clone(),
            reauthenticate_at: Mutex::new(None),
            gate: tokio::sync::RwLock::new(()),
            turn: tokio::sync::Mutex::new(()),
        }
    }

    /// Sends `ApiVersions` and negotiates. Per KIP-511 a broker that does
    /// not know the version sent answers with a v0 body holding error
    /// `UNSUPPORTED_VERSION` and its own range, and the request is retried
    /// once with the highest common version.
    async fn handshake(
        &self,
        policy: &VersionPolicy,
        timeout: Duration,
    ) -> Result<NegotiatedVersions, ConnectionError> {
        let ours = policy
            .range(ApiKey::ApiVersions)
            .unwrap_or_else(|| VersionRange::of_message_types(ApiKey::ApiVersions));
        let mut version = ours.max;
        for _ in 0..2 {
            let response = self.api_versions(version, timeout).await?;
            let code = ErrorCode::from(response.error_code);
            if code == ErrorCode::UnsupportedVersion {
                let theirs = response
                    .api_keys
                    .iter()
                    .find(|k| k.api_key == ApiKey::ApiVersions as i16)
                    .map(|k| VersionRange::new(k.min_version, k.max_version));
                let common = theirs.map(|t| t.intersect(ours)).filter(|r| !r.is_empty());
                match common {
                    Some(common) if common.max < version => {
                        version = common.max;
                        continue;
                    }
                    // A broker before Kafka 2.4 (KIP-511) names no range:
                    // ask again at v0, which every broker answers, as the
                    // Java client does.
                    None if theirs.is_none() && version > 0 && ours.contains(0) => {
                        version = 0;
                        continue;
                    }
                    _ => {
                        return Err(ConnectionError::NoCommonVersion {
                            broker: self.shared.broker.clone(),
                            api: ApiKey::ApiVersions,
                            client: ours,
                            broker_versions: theirs,
                        })
                    }
                }
            }
            if !code.is_ok() {
                return Err(ConnectionError::Handshake {
                    broker: self.shared.broker.clone(),
                    version,
                    code,
                });
            }
            return Ok(policy.negotiate(&self.shared.broker, &response));
        }
        Err(ConnectionError::Handshake {
            broker: self.shared.broker.clone(),
            version,
            code: ErrorCode::UnsupportedVersion,
        })
    }

    /// One `ApiVersions` round trip; a body that does not decode in
    /// `version` is tried as v0 (the KIP-511 fallback answer).
    async fn api_versions(
        &self,
        version: i16,
        timeout: Duration,
    ) -> Result<ApiVersionsResponse, ConnectionError> {
        let mut request = ApiVersionsRequest::default();
        if version >= 3 {
            request.client_software_name = StrBytes::from_static_str("walfetch");
            request.client_software_version = StrBytes::from_static_str(env!("CARGO_PKG_VERSION"));
        }
        let raw = self
            .round_trip(ApiKey::ApiVersions, version, &request, timeout, None)
            .await?;
        match decode_response_frame::<ApiVersionsRequest>(version, raw.payload.clone()) {
            Ok(response) => Ok(response),
            Err(first) => decode_response_frame::<ApiVersionsRequest>(0, raw.payload.clone())
                .ok()
                .filter(|r| r.error_code == ErrorCode::UnsupportedVersion.code())
                .ok_or_else(|| ConnectionError::NotKafka {
                    broker: self.shared.broker.clone(),
                    answered: format!(
                        "a frame that is no ApiVersions v{version} response ({first}): {}",
                        not_kafka::describe(&raw.payload)
                    ),
                }),
        }
    }

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
    fn stop_tasks(&self) {
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
    async fn request_ungated<R: Request>(
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

    /// Sends one request frame and waits for the matching response frame.
    async fn round_trip<T: Encodable>(
        &self,
        api: ApiKey,
        version: i16,
        body: &T,
        timeout: Duration,
        turn: Option<tokio::sync::MutexGuard<'_, ()>>,
    ) -> Result<RawResponse, ConnectionError> {
        let correlation_id = self.shared.next_correlation_id();
        let header = RequestHeader::default()
            .with_request_api_key(api as i16)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(self.client_id.clone()));
        let frame =
            frame::encode_request(&header, api.request_header_version(version), body, version)
                .map_err(|message| ConnectionError::Encode {
                    broker: self.shared.broker.clone(),
                    api,
                    version,
                    message,
                })?;
        let (reply, response) = oneshot::channel();
        self.shared.register(correlation_id, reply)?;
        // Removes the entry however this future ends (timeout, cancellation).
        let _entry = PendingEntry {
            shared: &self.shared,
            correlation_id,
        };
        let frame_len = frame.len();
        if self.outgoing.send(frame).is_err() {
            return Err(self.shared.failure_or_shutdown());
        }
        drop(turn);
        self.shared.requests.fetch_add(1, Ordering::Relaxed);
        tracing::trace!(broker = %self.shared.broker, ?api, version, correlation_id, frame_len, "request queued");
        match tokio::time::timeout(timeout, response).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(self.shared.failure_or_shutdown()),
            Err(_) => Err(ConnectionError::RequestTimeout {
                broker: self.shared.broker.clone(),
                api,
                version,
                correlation_id,
                timeout,
            }),
        }
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

/// A response frame for one request, before decoding.
#[derive(Debug)]
struct RawResponse {
    /// The frame after its length prefix: response header, then body.
    payload: Bytes,
    correlation_id: i32,
    wire_bytes: usize,
}

/// Where a request waiting for its response gets it.
type Pending = oneshot::Sender<Result<RawResponse, ConnectionError>>;

#[derive(Debug, Default)]
struct State {
    pending: HashMap<i32, Pending>,
    failed: Option<ConnectionError>,
}

/// What the connection handle and its two tasks share.
#[derive(Debug)]
struct Shared {
    broker: String,
    state: Mutex<State>,
    /// Correlation ids issued so far; the id is this count modulo 2^31.
    next_id: AtomicU64,
    bytes_sent: AtomicU64,
    bytes_received: AtomicU64,
    requests: AtomicU64,
    responses: AtomicU64,
}

const CORRELATION_ID_SPACE: u64 = 1 << 31;

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // The state stays consistent even if a holder panicked: every
        // critical section is a single map operation.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn next_correlation_id(&self) -> i32 {
        let n = self.next_id.fetch_add(1, Ordering::Relaxed);
        // In range by construction: n % 2^31 < 2^31.
        i32::try_from(n % CORRELATION_ID_SPACE).unwrap_or(0)
    }

    /// Whether `id` was handed out on this connection.
    fn was_issued(&self, id: i32) -> bool {
        let issued = self.next_id.load(Ordering::Relaxed);
        id >= 0 && (issued >= CORRELATION_ID_SPACE || (id as u64) < issued)
    }

    fn register(&self, correlation_id: i32, pending: Pending) -> Result<(), ConnectionError> {
        let mut state = self.lock();
        if let Some(error) = &state.failed {
            return Err(error.clone());
        }
        state.pending.insert(correlation_id, pending);
        Ok(())
    }

    fn failure_or_shutdown(&self) -> ConnectionError {
        self.lock()
            .failed
            .clone()
            .unwrap_or_else(|| ConnectionError::Shutdown {
                broker: self.broker.clone(),
            })
    }

    /// Marks the connection broken (the first error wins) and fails every
    /// request in flight with the error.
    fn fail(&self, error: ConnectionError) {
        let pending = {
            let mut state = self.lock();
            if state.failed.is_none() {
                tracing::debug!(broker = %self.broker, %error, "connection failed");
                state.failed = Some(error);
            }
            std::mem::take(&mut state.pending)
        };
        let error = self.failure_or_shutdown();
        for (_, reply) in pending {
            let _ = reply.send(Err(error.clone()));
        }
    }

    /// Routes one response frame to its request. An error breaks the
    /// connection.
    fn dispatch(&self, payload: Bytes) -> Result<(), ConnectionError> {
        let wire_bytes = frame::LENGTH_PREFIX + payload.len();
        self.bytes_received
            .fetch_add(wire_bytes as u64, Ordering::Relaxed);
        let Some(correlation_id) = frame::peek_correlation_id(&payload) else {
            return Err(ConnectionError::FrameTooShort {
                broker: self.broker.clone(),
                length: payload.len(),
            });
        };
        let pending = self.lock().pending.remove(&correlation_id);
        let Some(pending) = pending else {
            if self.was_issued(correlation_id) {
                // The request timed out or was cancelled; its late answer is
                // dropped.
                tracing::debug!(broker = %self.broker, correlation_id, "dropping response to abandoned request");
                return Ok(());
            }
            return Err(ConnectionError::UnexpectedCorrelationId {
                broker: self.broker.clone(),
                correlation_id,
            });
        };
        self.responses.fetch_add(1, Ordering::Relaxed);
        let _ = pending.send(Ok(RawResponse {
            payload,
            correlation_id,
            wire_bytes,
        }));
        Ok(())
    }
}

/// Removes a pending request's entry when its future ends.
struct PendingEntry<'a> {
    shared: &'a Shared,
    correlation_id: i32,
}

impl Drop for PendingEntry<'_> {
    fn drop(&mut self) {
        self.shared.lock().pending.remove(&self.correlation_id);
    }
}

async fn read_loop(mut frames: FrameReader<ReadStream>, shared: Arc<Shared>) {
    // The first frame answers ApiVersions: one that does not frame is a
    // peer that is not a Kafka broker (see `not_kafka`).
    let max_frame_bytes = frames.max_frame_bytes();
    frames.set_max_frame_bytes(max_frame_bytes.min(not_kafka::FIRST_FRAME_MAX_BYTES));
    let mut first = true;
    let error = loop {
        match frames.read_frame().await {
            Ok(Some(payload)) => {
                let shown = first.then(|| payload.clone());
                if first {
                    first = false;
                    frames.set_max_frame_bytes(max_frame_bytes);
                }
                if let Err(error) = shared.dispatch(payload) {
                    break match shown {
                        Some(payload) => not_kafka::first_frame_error(error, &payload),
                        None => error,
                    };
                }
            }
            Err(error) if first => break not_kafka::first_frame_error(error, frames.buffered()),
            Ok(None) => {
                break ConnectionError::ClosedByPeer {
                    broker: shared.broker.clone(),
                }
            }
            Err(error) => break error,
        }
    };
    shared.fail(error);
}

async fn write_loop(
    mut queue: mpsc::UnboundedReceiver<Bytes>,
    write: WriteStream,
    shared: Arc<Shared>,
) {
    let mut writer = BufWriter::new(write);
    while let Some(frame) = queue.recv().await {
        let mut result = write_counted(&mut writer, &frame, &shared).await;
        // Coalesce whatever else is queued into the same flush.
        while result.is_ok() {
            match queue.try_recv() {
                Ok(frame) => result = write_counted(&mut writer, &frame, &shared).await,
                Err(_) => break,
            }
        }
        if result.is_ok() {
            result = writer.flush().await;
        }
        if let Err(e) = result {
            shared.fail(ConnectionError::Io {
                broker: shared.broker.clone(),
                source: e.into(),
            });
            return;
        }
    }
    let _ = writer.shutdown().await;
}

async fn write_counted(
    writer: &mut BufWriter<WriteStream>,
    frame: &[u8],
    shared: &Shared,
) -> std::io::Result<()> {
    writer.write_all(frame).await?;
    shared
        .bytes_sent
        .fetch_add(frame.len() as u64, Ordering::Relaxed);
    Ok(())
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

#[cfg(test)]
mod tests {
    use bytes::{Buf, BufMut, BytesMut};
    use kafka_protocol::messages::api_versions_response::ApiVersion;
    use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
    use kafka_protocol::messages::{MetadataRequest, MetadataResponse, ResponseHeader, TopicName};
    use tokio::io::AsyncReadExt;
    use tokio::net::{TcpListener, TcpStream};

    use super::*;

    /// A broker that answers ApiVersions (v3) and then never reads again,
    /// as a hung broker (stopped process, stalled disk, frozen VM) does:
    /// its receive window fills and stays full. The socket stays open.
    async fn broker_that_stops_reading() -> (String, JoinHandle<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("address").to_string();
        let task = tokio::spawn(async move {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let Ok(len) = socket.read_i32().await else {
                return;
            };
            let mut request = vec![0u8; usize::try_from(len).unwrap_or(0)];
            if socket.read_exact(&mut request).await.is_err() || request.len() < 8 {
                return;
            }
            let correlation_id = (&request[4..8]).get_i32();
            let range = |key: ApiKey, max| {
                ApiVersion::default()
                    .with_api_key(key as i16)
                    .with_min_version(0)
                    .with_max_version(max)
            };
            let body = ApiVersionsResponse::default().with_api_keys(vec![
                range(ApiKey::ApiVersions, 3),
                range(ApiKey::Metadata, 12),
            ]);
            let mut payload = BytesMut::new();
            ResponseHeader::default()
                .with_correlation_id(correlation_id)
                .encode(&mut payload, 0)
                .expect("encodes");
            body.encode(&mut payload, 3).expect("encodes");
            let mut frame = BytesMut::new();
            frame.put_i32(i32::try_from(payload.len()).expect("small"));
            frame.extend_from_slice(&payload);
            let _ = socket.write_all(&frame).await;
            std::future::pending::<()>().await;
            drop::<TcpStream>(socket);
        });
        (address, task)
    }

    /// Connects to a broker that stops reading and leaves a request frame
    /// stuck half written (32 MiB of topic names, far more than the socket
    /// buffers hold), timed out.
    async fn connection_with_a_frame_stuck_half_written() -> (Connection, JoinHandle<()>) {
        let (address, broker) = broker_that_stops_reading().await;
        let config = ConnectionConfig {
            request_timeout: Duration::from_millis(300),
            ..ConnectionConfig::default()
        };
        let connection = Connection::connect(address, config)
            .await
            .expect("connects");
        let name = TopicName(StrBytes::from_string("t".repeat(200)));
        let topics = (0..160_000)
            .map(|_| MetadataRequestTopic::default().with_name(Some(name.clone())))
            .collect();
        let request = MetadataRequest::default().with_topics(Some(topics));
        let options = RequestOptions {
            version: Some(9),
            timeout: None,
        };
        let err = connection
            .request_with(&request, options)
            .await
            .expect_err("the broker does not read");
        assert!(
            matches!(err, ConnectionError::RequestTimeout { .. }),
            "{err:?}"
        );
        (connection, broker)
    }

    /// Closing or dropping a connection ends its reader and writer tasks
    /// (which closes the socket), also while the writer is blocked writing
    /// to a broker that stopped reading. Drop once aborted only the reader
    /// and left the writer to notice the closed queue, which a writer
    /// stuck in `write_all` never does.
    #[tokio::test]
    async fn closing_or_dropping_a_connection_ends_its_tasks_when_the_broker_stopped_reading() {
        let metrics = tokio::runtime::Handle::current().metrics();
        let settle = || tokio::time::sleep(Duration::from_millis(500));

        let baseline = metrics.num_alive_tasks();
        let (connection, broker) = connection_with_a_frame_stuck_half_written().await;
        drop(connection);
        settle().await;
        assert_eq!(
            metrics.num_alive_tasks(),
            baseline + 1,
            "tasks of the dropped connection still alive (its socket still open)"
        );
        broker.abort();
        settle().await;

        let baseline = metrics.num_alive_tasks();
        let (connection, broker) = connection_with_a_frame_stuck_half_written().await;
        connection.close();
        settle().await;
        assert_eq!(
            metrics.num_alive_tasks(),
            baseline + 1,
            "tasks of the closed connection still alive (its socket still open)"
        );
        assert!(connection.is_closed());
        broker.abort();
    }

    /// Metadata v12's response header (v1: correlation id, tagged fields)
    /// followed by `body`.
    fn metadata_v12_frame(body: &[u8]) -> Bytes {
        let mut payload = BytesMut::new();
        ResponseHeader::default()
            .with_correlation_id(7)
            .encode(&mut payload, 1)
            .expect("encodes");
        payload.extend_from_slice(body);
        payload.freeze()
    }

    #[test]
    fn a_response_frame_is_its_header_then_its_checked_body() {
        let mut body = BytesMut::new();
        MetadataResponse::default()
            .with_throttle_time_ms(5)
            .encode(&mut body, 12)
            .expect("encodes");
        let decoded = decode_response_frame::<MetadataRequest>(12, metadata_v12_frame(&body))
            .expect("decodes");
        assert_eq!(decoded.throttle_time_ms, 5);

        // The frame ends inside the header's tagged fields.
        let err = decode_response_frame::<MetadataRequest>(12, Bytes::from_static(&[0, 0, 0, 7]))
            .expect_err("no header");
        assert!(matches!(err, GuardError::Header { .. }), "{err:?}");
        assert!(err.to_string().starts_with("response header: "), "{err}");

        // A broker array claiming u32::MAX - 1 entries never reaches the
        // decoder.
        let frame = metadata_v12_frame(&[0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f]);
        let err = decode_response_frame::<MetadataRequest>(12, frame).expect_err("refused");
        assert!(
            matches!(
                err,
                GuardError::CountTooLarge {
                    field: "brokers",
                    ..
                }
            ),
            "{err:?}"
        );
    }
}
