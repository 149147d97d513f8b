//! The network side of each broker: a loopback listener, one task per
//! connection, size-prefixed frames in and out, and the scripted faults that
//! act on the connection (drops, cuts, delays, bad frames).
//!
//! A connection handles its requests one at a time, in order, as a Kafka
//! broker does (a client may pipeline; responses come back in request
//! order). A request the broker cannot parse, of an API or version it does
//! not serve, or larger than [`MAX_REQUEST_BYTES`] closes the connection;
//! an ApiVersions request at a version not served is answered with
//! `UNSUPPORTED_VERSION` (KIP-511).
//!
//! A listener may speak TLS (`tls.rs`) and require SASL (`sasl/`): the TLS
//! handshake comes first, then each connection keeps its own SASL state.
//!
//! # References
//! - Kafka protocol guide, "Network" and "Common Request and Response
//!   Structure".

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader};
use kafka_protocol::protocol::Decodable;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;

use crate::faults::{Fault, FaultAction};
use crate::handlers::{self, Ctx, Request};
use crate::sasl::{ConnectionAuth, SaslServer};
use crate::state::Shared;
use crate::stats::Counters;

/// The largest request frame accepted; a larger size prefix closes the
/// connection.
pub const MAX_REQUEST_BYTES: usize = 100 << 20;

/// How long a closing connection waits for the client to close its side.
const LINGER: Duration = Duration::from_secs(10);

/// Binds a listener on an ephemeral loopback port.
pub(crate) async fn bind() -> io::Result<(TcpListener, SocketAddr)> {
    bind_at(SocketAddr::from(([127, 0, 0, 1], 0))).await
}

/// Binds a listener at `addr` (port 0: an ephemeral one).
pub(crate) async fn bind_at(addr: SocketAddr) -> io::Result<(TcpListener, SocketAddr)> {
    let listener = TcpListener::bind(addr).await?;
    let addr = listener.local_addr()?;
    Ok((listener, addr))
}

/// TLS and SASL of a listener.
#[derive(Clone, Default)]
pub(crate) struct ListenerSecurity {
    pub(crate) tls: Option<TlsAcceptor>,
    pub(crate) sasl: Option<Arc<SaslServer>>,
}

/// Accepts connections until the task is aborted; aborting it drops (and
/// so aborts) every connection task.
pub(crate) async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    node_id: i32,
    counters: Arc<Counters>,
    security: ListenerSecurity,
) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    counters.connection();
                    tracing::debug!(node_id, %peer, "connection accepted");
                    connections.spawn(accept(stream, shared.clone(), node_id, counters.clone(), security.clone()));
                }
                Err(error) => {
                    tracing::warn!(node_id, %error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// What to do after a request.
enum Outcome {
    /// Write the bytes (if any) and read the next request.
    Reply(Option<BytesMut>),
    /// Write the bytes (if any), then close the connection.
    Close(Option<Bytes>),
}

/// Sets up one accepted connection (TLS handshake, SASL state) and serves it.
async fn accept(
    stream: TcpStream,
    shared: Arc<Shared>,
    node_id: i32,
    counters: Arc<Counters>,
    security: ListenerSecurity,
) {
    if let Err(error) = stream.set_nodelay(true) {
        tracing::debug!(node_id, %error, "TCP_NODELAY");
    }
    let auth = security.sasl.map(ConnectionAuth::new);
    match security.tls {
        None => serve(stream, shared, node_id, counters, auth).await,
        Some(acceptor) => match tokio::time::timeout(LINGER, acceptor.accept(stream)).await {
            Ok(Ok(stream)) => serve(stream, shared, node_id, counters, auth).await,
            Ok(Err(error)) => tracing::debug!(node_id, %error, "TLS handshake failed"),
            Err(_) => tracing::debug!(node_id, "TLS handshake timed out"),
        },
    }
}

async fn serve<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    shared: Arc<Shared>,
    node_id: i32,
    counters: Arc<Counters>,
    mut auth: Option<ConnectionAuth>,
) {
    loop {
        let frame = match read_frame(&mut stream).await {
            Ok(Some(frame)) => frame,
            Ok(None) => return,
            Err(error) => {
                tracing::debug!(node_id, %error, "closing the connection");
                close(stream, None, &counters).await;
                return;
            }
        };
        counters.received(4 + frame.len());
        match process(&shared, node_id, &counters, auth.as_mut(), frame).await {
            Outcome::Reply(None) => {}
            Outcome::Reply(Some(bytes)) => {
                counters.sent(bytes.len());
                // Flushed: over TLS, the last records of a response the
                // socket could not take at once otherwise wait in the TLS
                // session for the next response, and the client for them.
                if let Err(error) = write_flushed(&mut stream, &bytes).await {
                    tracing::debug!(node_id, %error, "write failed");
                    return;
                }
            }
            Outcome::Close(bytes) => {
                close(stream, bytes, &counters).await;
                return;
            }
        }
    }
}

/// Writes `bytes` and flushes them.
async fn write_flushed<S: AsyncWrite + Unpin>(stream: &mut S, bytes: &[u8]) -> io::Result<()> {
    stream.write_all(bytes).await?;
    stream.flush().await
}

/// Reads one size-prefixed frame; `None` at a clean end of stream.
async fn read_frame<S: AsyncRead + Unpin>(stream: &mut S) -> io::Result<Option<Bytes>> {
    let mut prefix = [0u8; 4];
    match stream.read_exact(&mut prefix).await {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let size = i32::from_be_bytes(prefix);
    let size = usize::try_from(size)
        .ok()
        .filter(|s| *s <= MAX_REQUEST_BYTES)
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("request size prefix {size}"),
            )
        })?;
    // Grows as bytes arrive: the size prefix alone allocates nothing large.
    let mut body = Vec::with_capacity(size.min(64 << 10));
    (&mut *stream)
        .take(size as u64)
        .read_to_end(&mut body)
        .await?;
    if body.len() != size {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("request frame cut short: {} of {size} bytes", body.len()),
        ));
    }
    Ok(Some(body.into()))
}

/// Writes `bytes`, closes the write side, and waits (bounded) for the client
/// to close, so that what was written is not lost to a reset.
async fn close<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    bytes: Option<Bytes>,
    counters: &Counters,
) {
    if let Some(bytes) = bytes {
        counters.sent(bytes.len());
        let _ = write_flushed(&mut stream, &bytes).await;
    }
    let _ = stream.shutdown().await;
    let mut scratch = [0u8; 4096];
    let _ = tokio::time::timeout(LINGER, async {
        while let Ok(n) = stream.read(&mut scratch).await {
            if n == 0 {
                break;
            }
        }
    })
    .await;
}

async fn process(
    shared: &Shared,
    node_id: i32,
    counters: &Counters,
    auth: Option<&mut ConnectionAuth>,
    mut frame: Bytes,
) -> Outcome {
    let Some(fixed) = frame.get(..8) else {
        tracing::debug!(
            node_id,
            len = frame.len(),
            "request shorter than its header"
        );
        return Outcome::Close(None);
    };
    let api_key_raw = i16::from_be_bytes([fixed[0], fixed[1]]);
    let version = i16::from_be_bytes([fixed[2], fixed[3]]);
    let correlation_id = i32::from_be_bytes([fixed[4], fixed[5], fixed[6], fixed[7]]);
    let Ok(api_key) = ApiKey::try_from(api_key_raw) else {
        tracing::debug!(node_id, api_key_raw, "unknown API key");
        return Outcome::Close(None);
    };
    if let Some(auth) = auth {
        match api_key {
            ApiKey::ApiVersions => {}
            ApiKey::SaslHandshake | ApiKey::SaslAuthenticate => {
                counters.request(api_key_raw);
                let answer = auth.handle(api_key, version, correlation_id, frame);
                return match (answer.reply, answer.close) {
                    (reply, false) => Outcome::Reply(reply),
                    (reply, true) => Outcome::Close(reply.map(BytesMut::freeze)),
                };
            }
            _ if !auth.allows_requests() => {
                tracing::debug!(
                    node_id,
                    ?api_key,
                    "request before SASL authentication (or after the session expired)"
                );
                return Outcome::Close(None);
            }
            _ => {}
        }
    }
    let served = shared
        .lock()
        .broker(node_id)
        .and_then(|b| b.serves(api_key));
    if !served.is_some_and(|r| r.contains(version)) {
        if api_key == ApiKey::ApiVersions {
            counters.request(api_key_raw);
            let state = shared.lock();
            return match handlers::unsupported_version_response(
                state.broker(node_id),
                correlation_id,
            ) {
                Ok(bytes) => Outcome::Reply(Some(bytes)),
                Err(error) => {
                    tracing::error!(node_id, %error, "ApiVersions");
                    Outcome::Close(None)
                }
            };
        }
        tracing::debug!(node_id, ?api_key, version, "API version not served");
        return Outcome::Close(None);
    }
    if let Err(error) = RequestHeader::decode(&mut frame, api_key.request_header_version(version)) {
        tracing::debug!(node_id, ?api_key, version, %error, "bad request header");
        return Outcome::Close(None);
    }
    let request = match Request::decode(api_key, version, &mut frame) {
        Some(Ok(request)) => request,
        Some(Err(error)) => {
            tracing::debug!(node_id, ?api_key, version, %error, "bad request body");
            return Outcome::Close(None);
        }
        None => return Outcome::Close(None),
    };
    counters.request(api_key_raw);
    if let Request::Fetch(fetch) = &request {
        counters.fetch_max_wait(fetch.max_wait_ms);
    }

    let fault = {
        let mut state = shared.lock();
        let partitions = request.partitions(&state, version);
        let fault = state.faults.take(api_key, node_id, &partitions);
        if let Some(FaultAction::MoveLeader { to }) = fault.as_ref().map(Fault::action) {
            for (topic, partition) in &partitions {
                if fault.as_ref().is_some_and(|f| f.covers(topic, *partition)) {
                    state.move_leader(topic, *partition, *to);
                }
            }
        }
        fault
    };
    if let Some(fault) = &fault {
        tracing::debug!(node_id, ?api_key, version, action = ?fault.action(), "scripted fault fires");
        match fault.action() {
            FaultAction::DropRequest => return Outcome::Close(None),
            FaultAction::MoveLeader { .. } => shared.notify_append(),
            _ => {}
        }
    }

    let ctx = Ctx {
        shared,
        node_id,
        version,
        correlation_id,
        fault: fault.as_ref(),
    };
    let reply = match handlers::handle(&ctx, request).await {
        Ok(reply) => reply,
        Err(error) => {
            tracing::error!(node_id, ?api_key, version, %error, "cannot answer");
            return Outcome::Close(None);
        }
    };
    let Some(fault) = fault else {
        return Outcome::Reply(reply);
    };
    match *fault.action() {
        FaultAction::Delay(delay) => {
            tokio::time::sleep(delay).await;
            Outcome::Reply(reply)
        }
        FaultAction::Throttle(delay) => {
            tokio::time::sleep(delay).await;
            Outcome::Reply(reply.map(|frame| set_throttle_time(frame, api_key, version, delay)))
        }
        FaultAction::ThrottleTime(time) => {
            Outcome::Reply(reply.map(|frame| set_throttle_time(frame, api_key, version, time)))
        }
        FaultAction::PatchFrame { at, ref bytes } => Outcome::Reply(reply.map(|mut frame| {
            let end = at.saturating_add(bytes.len()).min(frame.len());
            if let Some(target) = frame.get_mut(at..end) {
                let n = target.len();
                target.copy_from_slice(&bytes[..n]);
            }
            frame
        })),
        FaultAction::CutBeforeResponse => Outcome::Close(None),
        FaultAction::LoseResponse => Outcome::Reply(None),
        FaultAction::CutDuringResponse { bytes } => Outcome::Close(reply.map(|frame| {
            let len = frame.len();
            let cut = bytes.unwrap_or(len / 2).min(len.saturating_sub(1));
            frame.freeze().slice(..cut)
        })),
        FaultAction::CutAfterResponse => Outcome::Close(reply.map(BytesMut::freeze)),
        FaultAction::TruncatedFrame { missing } => Outcome::Close(reply.map(|mut frame| {
            let claimed = (frame.len() as u64 - 4).saturating_add(u64::from(missing));
            let claimed = u32::try_from(claimed).unwrap_or(u32::MAX);
            frame[..4].copy_from_slice(&claimed.to_be_bytes());
            frame.freeze()
        })),
        FaultAction::OversizedFrame { length } => {
            let mut bytes = BytesMut::with_capacity(8);
            bytes.extend_from_slice(&length.to_be_bytes());
            bytes.extend_from_slice(&correlation_id.to_be_bytes());
            Outcome::Close(Some(bytes.freeze()))
        }
        _ => Outcome::Reply(reply),
    }
}

/// `frame` (a whole response frame of `api_key` in `version`) with its
/// `throttle_time_ms` set to `time`, where the field leads the body
/// (Fetch v1+, Metadata v3+, ListOffsets v2+); as it is elsewhere.
fn set_throttle_time(
    mut frame: BytesMut,
    api_key: ApiKey,
    version: i16,
    time: Duration,
) -> BytesMut {
    let leads = match api_key {
        ApiKey::Fetch => version >= 1,
        ApiKey::Metadata => version >= 3,
        ApiKey::ListOffsets => version >= 2,
        _ => false,
    };
    if leads {
        // Length prefix, then the correlation id and (header v1) an empty
        // tagged-field section.
        let at = 4 + if api_key.response_header_version(version) >= 1 {
            5
        } else {
            4
        };
        let ms = i32::try_from(time.as_millis()).unwrap_or(i32::MAX);
        if let Some(field) = frame.get_mut(at..at + 4) {
            field.copy_from_slice(&ms.to_be_bytes());
        }
    }
    frame
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fetch_rules::Habits;
    use crate::state::{BrokerState, ClusterState};

    /// A response reaches the client whole even where the stream holds
    /// written bytes back until flushed, as a TLS session does with the
    /// records the socket could not take (a large Fetch response to a
    /// client reading slower than the broker writes). A buffered stream
    /// holds back every response smaller than its buffer, so this fails
    /// without the flush.
    #[tokio::test]
    async fn every_response_is_flushed() {
        let addr: SocketAddr = "127.0.0.1:9092".parse().unwrap();
        let broker = BrokerState::new(0, addr, Habits::KAFKA);
        let counters = broker.counters.clone();
        let shared = Arc::new(Shared::new(ClusterState::new(vec![broker], false, 1)));
        let (mut client, server) = tokio::io::duplex(1 << 20);
        let server = tokio::io::BufStream::new(server);
        let serving = tokio::spawn(serve(server, shared, 0, counters, None));
        // ApiVersions v0: key 18, version 0, correlation id 7, no client id.
        let request = [0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 7, 0xff, 0xff];
        client.write_all(&request).await.unwrap();
        let mut prefix = [0u8; 8];
        tokio::time::timeout(Duration::from_secs(5), client.read_exact(&mut prefix))
            .await
            .expect("the response stayed in the broker's buffer")
            .unwrap();
        assert_eq!(
            i32::from_be_bytes([prefix[4], prefix[5], prefix[6], prefix[7]]),
            7
        );
        serving.abort();
    }
}
