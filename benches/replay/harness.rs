//! What the replay and writer benches share around their measurements:
//! the brokers they run on (each behind the counting proxy), their tokio
//! runtimes and where they write their outputs.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use tokio::runtime::Runtime;
use walfetch::local_broker::{find_tansu, LocalBroker};
use walfetch_testkit::ScriptedCluster;

use crate::proxy::{self, Proxy};

/// A broker a bench runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BrokerKind {
    Scripted,
    Tansu,
}

impl BrokerKind {
    /// Its name in the tables.
    pub(crate) fn name(self) -> &'static str {
        match self {
            BrokerKind::Scripted => "scripted (Kafka rules)",
            BrokerKind::Tansu => "tansu 0.6",
        }
    }
}

/// A broker running for a bench, behind the proxy that counts its bytes.
/// The proxy stops before the broker when it is dropped.
pub(crate) struct Running {
    pub(crate) proxy: Proxy,
    _broker: Box<dyn std::any::Any>,
}

impl Running {
    /// The in-process scripted broker, when that is the one running.
    #[allow(
        dead_code,
        reason = "the writer bench's; the replay bench keeps its logs"
    )]
    pub(crate) fn scripted(&self) -> Option<&ScriptedCluster> {
        self._broker.downcast_ref()
    }
}

/// Starts `broker` (the scripted one on `infra`, Tansu as a process) with
/// the proxy in front of it, the address clients are given, holding bytes
/// `one_way` in each direction (zero: plain loopback).
pub(crate) fn start(
    broker: BrokerKind,
    infra: &Runtime,
    clients: &Runtime,
    one_way: Duration,
) -> Result<Running, String> {
    let (listener, proxy_addr) = infra
        .block_on(proxy::bind())
        .map_err(|e| format!("proxy: {e}"))?;
    let (running, upstream): (Box<dyn std::any::Any>, SocketAddr) = match broker {
        BrokerKind::Scripted => {
            let cluster = infra
                .block_on(
                    ScriptedCluster::builder()
                        .advertised_addrs([proxy_addr])
                        .start(),
                )
                .map_err(|e| format!("scripted broker: {e}"))?;
            let addr = cluster
                .addrs()
                .first()
                .map(|a| a.1)
                .ok_or("scripted broker: no address")?;
            (Box::new(cluster), addr)
        }
        BrokerKind::Tansu => {
            let binary = find_tansu().map_err(|e| e.to_string())?;
            let advertised = proxy_addr.to_string();
            let tansu = clients
                .block_on(LocalBroker::start(&binary, Some(&advertised)))
                .map_err(|e| e.to_string())?;
            let addr = tansu
                .address()
                .parse()
                .map_err(|e| format!("tansu address: {e}"))?;
            (Box::new(tansu), addr)
        }
    };
    Ok(Running {
        proxy: Proxy::start(listener, upstream, infra.handle(), one_way),
        _broker: running,
    })
}

/// A two-thread runtime named `name`.
pub(crate) fn runtime(name: &str) -> Result<Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name(name)
        .enable_all()
        .build()
        .map_err(|e| format!("tokio runtime: {e}"))
}

/// Where a bench's outputs go: `$CARGO_TARGET_DIR/<bench>` or
/// `<workspace>/target/<bench>`.
pub(crate) fn out_dir(bench: &str) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target"))
        .join(bench)
}

/// CPU time this process's threads have run so far (Linux: the sum of
/// `/proc/self/task/*/schedstat`, in nanoseconds); `None` elsewhere. It
/// covers the client, the proxy and the in-process scripted broker, not a
/// broker in another process (Tansu). A run's wall time on `cores` cores
/// can be no less than the CPU time it used divided by `cores`.
pub(crate) fn cpu_time() -> Option<Duration> {
    let mut total = 0u64;
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let stat = std::fs::read_to_string(task.ok()?.path().join("schedstat")).ok()?;
        total += stat.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(Duration::from_nanos(total))
}
