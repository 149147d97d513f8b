//! A byte-counting TCP proxy on loopback, in front of the broker.
//!
//! Every contender — walfetch and rskafka alike — bootstraps at the proxy,
//! and the broker advertises the proxy's address in its metadata, so every
//! byte a contender receives passes through here and is counted the same
//! way. The proxy forwards bytes unchanged in both directions; the count of
//! a direction is raised before the bytes are written on, so once a client
//! has read a response, the count already includes it.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

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
    /// `upstream`.
    pub(crate) fn start(listener: TcpListener, upstream: SocketAddr, runtime: &Handle) -> Self {
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
                        let up = tokio::spawn(async move {
                            pump(client_read, broker_write, &c.to_broker).await;
                        });
                        pump(broker_read, client_write, &counters.to_client).await;
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

/// Copies `from` to `to` until either side closes, counting the bytes.
async fn pump(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, counter: &AtomicU64) {
    let mut buf = vec![0u8; 256 << 10];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        counter.fetch_add(n as u64, Ordering::SeqCst);
        if to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}
