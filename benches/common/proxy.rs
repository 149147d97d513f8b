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
//! does. Bandwidth is loopback's.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
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
    /// `upstream`, each direction's bytes held `one_way` (zero: forwarded
    /// as soon as read).
    pub(crate) fn start(
        listener: TcpListener,
        upstream: SocketAddr,
        runtime: &Handle,
        one_way: Duration,
    ) -> Self {
        let addr = listener
            .local_addr()
            .expect("a bound listener has an address");
        let counters = Arc::new(Counters::default());
        let tasks: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let accept = {
            let counters = Arc::clone(&counters);
            let tasks = Arc::clone(&tasks);
            let runtime = runtime.clone();
            runtime.clone().spawn(async move {
                while let Ok((client, _)) = listener.accept().await {
                    let counters = Arc::clone(&counters);
                    let handle = runtime.clone();
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
                        let link = Link {
                            one_way,
                            runtime: handle,
                        };
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
            tasks,
        }
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
    /// How long each chunk is held; zero forwards it at once.
    one_way: Duration,
    /// The runtime the delayed writes run on.
    runtime: Handle,
}

/// Copies `from` to `to` until either side closes, counting the bytes as
/// they are read, through a delay line when the link has one.
async fn pump(mut from: OwnedReadHalf, to: OwnedWriteHalf, counter: &AtomicU64, link: Link) {
    let mut to = if link.one_way.is_zero() {
        Sink::Direct(to)
    } else {
        Sink::Delayed(delay_line(to, link))
    };
    let mut buf = vec![0u8; 256 << 10];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        counter.fetch_add(n as u64, Ordering::SeqCst);
        let forwarded = match &mut to {
            Sink::Direct(to) => to.write_all(&buf[..n]).await.is_ok(),
            Sink::Delayed(line) => line.send((Instant::now(), buf[..n].to_vec())).is_ok(),
        };
        if !forwarded {
            break;
        }
    }
    // A delay line shuts its side down once it has written what it holds.
    if let Sink::Direct(mut to) = to {
        let _ = to.shutdown().await;
    }
}

/// Where a direction's bytes go once read.
enum Sink {
    Direct(OwnedWriteHalf),
    /// Chunks with the time they were read, to a [`delay_line`].
    Delayed(mpsc::Sender<(Instant, Vec<u8>)>),
}

/// Starts a thread that writes each chunk it is sent to `to` once
/// `link.one_way` has passed since the chunk was read, in order, and shuts
/// `to` down when the sender is dropped (the other side closed) or a write
/// fails.
fn delay_line(mut to: OwnedWriteHalf, link: Link) -> mpsc::Sender<(Instant, Vec<u8>)> {
    let (line, chunks) = mpsc::channel::<(Instant, Vec<u8>)>();
    std::thread::Builder::new()
        .name("proxy-link".into())
        .spawn(move || {
            while let Ok((read, chunk)) = chunks.recv() {
                let wait = (read + link.one_way).saturating_duration_since(Instant::now());
                if !wait.is_zero() {
                    std::thread::sleep(wait);
                }
                if link.runtime.block_on(to.write_all(&chunk)).is_err() {
                    break;
                }
            }
            let _ = link.runtime.block_on(to.shutdown());
        })
        .expect("the OS starts a thread");
    line
}
