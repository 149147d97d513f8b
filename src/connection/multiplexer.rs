//! The multiplexer under a [`Connection`]: the writer task that sends
//! request frames in the order they are queued, the reader task that hands
//! each response frame to the request waiting for its correlation id, and
//! one request's round trip between them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, ApiVersionsResponse, RequestHeader};
use kafka_protocol::protocol::{Encodable, StrBytes};
use tokio::io::{AsyncWriteExt, BufWriter};
use tokio::sync::{mpsc, oneshot};

use super::frame::{self, FrameReader};
use super::tls::{ReadStream, Stream, WriteStream};
use super::{not_kafka, Connection, ConnectionConfig, ConnectionError};

impl Connection {
    pub(super) fn start(stream: Stream, broker: String, config: &ConnectionConfig) -> Self {
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

    /// Sends one request frame and waits for the matching response frame.
    pub(super) async fn round_trip<T: Encodable>(
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

/// A response frame for one request, before decoding.
#[derive(Debug)]
pub(super) struct RawResponse {
    /// The frame after its length prefix: response header, then body.
    pub(super) payload: Bytes,
    pub(super) correlation_id: i32,
    pub(super) wire_bytes: usize,
}

/// Where a request waiting for its response gets it.
type Pending = oneshot::Sender<Result<RawResponse, ConnectionError>>;

#[derive(Debug, Default)]
pub(super) struct State {
    pub(super) pending: HashMap<i32, Pending>,
    pub(super) failed: Option<ConnectionError>,
}

/// What the connection handle and its two tasks share.
#[derive(Debug)]
pub(super) struct Shared {
    pub(super) broker: String,
    pub(super) state: Mutex<State>,
    /// Correlation ids issued so far; the id is this count modulo 2^31.
    pub(super) next_id: AtomicU64,
    pub(super) bytes_sent: AtomicU64,
    pub(super) bytes_received: AtomicU64,
    pub(super) requests: AtomicU64,
    pub(super) responses: AtomicU64,
}

const CORRELATION_ID_SPACE: u64 = 1 << 31;

impl Shared {
    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
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

    pub(super) fn failure_or_shutdown(&self) -> ConnectionError {
        self.lock()
            .failed
            .clone()
            .unwrap_or_else(|| ConnectionError::Shutdown {
                broker: self.broker.clone(),
            })
    }

    /// Marks the connection broken (the first error wins) and fails every
    /// request in flight with the error.
    pub(super) fn fail(&self, error: ConnectionError) {
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
