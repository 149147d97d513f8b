//! A byte-counting TCP proxy on loopback, in front of the broker.
//!
//! Every contender — walfetch and rskafka alike — bootstraps at the proxy,
//! and the broker advertises the proxy's address in its metadata, so every
//! byte a contender receives passes through here and is counted the same
//! way. The proxy forwards bytes unchanged in both directions; the count of
//! a direction is raised before the bytes are written on, so once a client
//! has read a response, the count already includes it.
//!
//! It can also stand for a network link (the replay bench's
//! `--link-rtt-us`): each chunk it reads is written on half the round trip
//! later, by a thread that sleeps until then (the OS's sleep, tens of
//! microseconds late at most, where tokio's timers round up to the next
//! millisecond). Reading goes on meanwhile, so the link delays bytes
//! without limiting how many are on their way, as a real link's latency
//! does. Bandwidth is loopback's. The round trip can be changed while the
//! proxy runs ([`Proxy::set_link_rtt`]): each chunk is held what the link
//! holds when it is read, so one run measures several links over the same
//! connections.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Handle;
use tokio::task::JoinHandle;

#[derive(Debug, Default)]
struct Counters {
    to_client: AtomicU64,
    to_broker: AtomicU64,
    connections: AtomicU64,
}

/// A running proxy; dropping it stops it and closes its connections.
#[derive(Debug)]
pub(crate) struct Proxy {
    addr: SocketAddr,
    counters: Arc<Counters>,
    /// How long each direction holds a chunk, in nanoseconds (0: not at
    /// all), read by every connection for every chunk.
    one_way_ns: Arc<AtomicU64>,
    tasks: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

/// Binds the proxy's listener on a loopback ephemeral port, so that its
/// address can be given to the broker before the proxy starts.
pub(crate) async fn bind() -> std::io::Result<(TcpListener, SocketAddr)> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    Ok((listener, addr))
}

impl Proxy {
    /// Serves `listener` on `runtime`, forwarding every connection to
    /// `upstream`, as loopback is until [`Proxy::set_link_rtt`] says
    /// otherwise.
    pub(crate) fn start(listener: TcpListener, upstream: SocketAddr, runtime: &Handle) -> Self {
        let addr = listener
            .local_addr()
            .expect("a bound listener has an address");
        let counters = Arc::new(Counters::default());
        let one_way_ns = Arc::new(AtomicU64::new(0));
        let tasks: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let accept = {
            let counters = Arc::clone(&counters);
            let one_way_ns = Arc::clone(&one_way_ns);
            let tasks = Arc::clone(&tasks);
            let runtime = runtime.clone();
            runtime.clone().spawn(async move {
                while let Ok((client, _)) = listener.accept().await {
                    let counters = Arc::clone(&counters);
                    let link = Link {
                        one_way_ns: Arc::clone(&one_way_ns),
                        runtime: runtime.clone(),
                    };
                    let conn = runtime.spawn(async move {
                        let Ok(broker) = TcpStream::connect(upstream).await else {
                            return;
                        };
                        counters.connections.fetch_add(1, Ordering::SeqCst);
                        let _ = client.set_nodelay(true);
                        let _ = broker.set_nodelay(true);
                        let (client_read, client_write) = client.into_split();
                        let (broker_read, broker_write) = broker.into_split();
                        let c = Arc::clone(&counters);
                        let up = tokio::spawn({
                            let link = link.clone();
                            async move {
                                pump(client_read, broker_write, &c.to_broker, link).await;
                            }
                        });
                        pump(broker_read, client_write, &counters.to_client, link).await;
                        let _ = up.await;
                    });
                    lock(&tasks).push(conn);
                }
            })
        };
        lock(&tasks).push(accept);
        Self {
            addr,
            counters,
            one_way_ns,
            tasks,
        }
    }

    /// Makes the proxy stand for a link of round trip `rtt`, half of it
    /// each way (zero: loopback as it is), from the next chunk any
    /// connection reads on; chunks already held keep their time.
    pub(crate) fn set_link_rtt(&self, rtt: Duration) {
        let one_way = u64::try_from((rtt / 2).as_nanos()).unwrap_or(u64::MAX);
        self.one_way_ns.store(one_way, Ordering::SeqCst);
    }

    /// `127.0.0.1:PORT`: where clients connect.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Bytes sent from the broker to clients so far.
    pub(crate) fn received(&self) -> u64 {
        self.counters.to_client.load(Ordering::SeqCst)
    }

    /// Bytes sent from clients to the broker so far.
    pub(crate) fn sent(&self) -> u64 {
        self.counters.to_broker.load(Ordering::SeqCst)
    }

    /// Connections accepted so far.
    pub(crate) fn connections(&self) -> u64 {
        self.counters.connections.load(Ordering::SeqCst)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        for task in lock(&self.tasks).drain(..) {
            task.abort();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// How a direction of a connection forwards its bytes.
#[derive(Clone)]
struct Link {
    /// The proxy's hold, in nanoseconds: see [`Proxy::set_link_rtt`].
    one_way_ns: Arc<AtomicU64>,
    /// The runtime the delayed writes run on.
    runtime: Handle,
}

impl Link {
    /// How long a chunk read now is held.
    fn one_way(&self) -> Duration {
        Duration::from_nanos(self.one_way_ns.load(Ordering::Relaxed))
    }
}

/// A direction's write half, shared by its pump and its delay line.
type Shared = Arc<tokio::sync::Mutex<OwnedWriteHalf>>;

/// Copies `from` to `to` until either side closes, counting the bytes as
/// they are read. A chunk goes straight on while the link holds nothing
/// and no held chunk is still on its way (so that bytes stay in order);
/// otherwise through the direction's delay line, started when first
/// needed.
async fn pump(mut from: OwnedReadHalf, to: OwnedWriteHalf, counter: &AtomicU64, link: Link) {
    let to: Shared = Arc::new(tokio::sync::Mutex::new(to));
    let mut line: Option<DelayLine> = None;
    let mut buf = vec![0u8; 256 << 10];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let read = Instant::now();
        counter.fetch_add(n as u64, Ordering::SeqCst);
        let one_way = link.one_way();
        let forwarded = if one_way.is_zero() && line.as_ref().is_none_or(DelayLine::idle) {
            to.lock().await.write_all(&buf[..n]).await.is_ok()
        } else {
            line.get_or_insert_with(|| DelayLine::start(Arc::clone(&to), link.runtime.clone()))
                .send(read + one_way, &buf[..n])
        };
        if !forwarded {
            break;
        }
    }
    // A delay line shuts its side down once it has written what it holds.
    if line.is_none() {
        let _ = to.lock().await.shutdown().await;
    }
}

/// A thread that writes each chunk it is sent to a direction's write half
/// once the chunk is due, in order.
struct DelayLine {
    /// Chunks with the time they are due.
    chunks: mpsc::Sender<(Instant, Vec<u8>)>,
    /// Chunks sent and not yet written.
    pending: Arc<AtomicUsize>,
}

impl DelayLine {
    /// Starts the thread; it shuts `to` down when the line is dropped (the
    /// other side closed) or a write fails.
    fn start(to: Shared, runtime: Handle) -> Self {
        let (chunks, due) = mpsc::channel::<(Instant, Vec<u8>)>();
        let pending = Arc::new(AtomicUsize::new(0));
        let written = Arc::clone(&pending);
        std::thread::Builder::new()
            .name("proxy-link".into())
            .spawn(move || {
                while let Ok((at, chunk)) = due.recv() {
                    let wait = at.saturating_duration_since(Instant::now());
                    if !wait.is_zero() {
                        std::thread::sleep(wait);
                    }
                    let write = runtime.block_on(async { to.lock().await.write_all(&chunk).await });
                    if write.is_err() {
                        break;
                    }
                    written.fetch_sub(1, Ordering::SeqCst);
                }
                let _ = runtime.block_on(async { to.lock().await.shutdown().await });
            })
            .expect("the OS starts a thread");
        Self { chunks, pending }
    }

    /// Whether every chunk sent has been written.
    fn idle(&self) -> bool {
        self.pending.load(Ordering::SeqCst) == 0
    }

    /// Hands `chunk` to the thread, to be written at `at`; false once the
    /// thread has stopped.
    fn send(&self, at: Instant, chunk: &[u8]) -> bool {
        self.pending.fetch_add(1, Ordering::SeqCst);
        self.chunks.send((at, chunk.to_vec())).is_ok()
    }
}
