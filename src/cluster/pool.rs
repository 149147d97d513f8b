//! Connections per broker address, opened on first use and replaced once
//! they break.
//!
//! Each address has a *primary* connection, which every operation whose
//! requests must stay in order uses (Produce, admin, metadata), and up to
//! `per_broker - 1` more that only Fetch spreads over. A Kafka broker reads
//! one request of a connection at a time and answers it before reading the
//! next (its socket server mutes the channel while a request is served), so
//! fetches pipelined on one connection wait for each other at the broker;
//! spread over a few connections, the broker's request handler threads
//! serve them side by side.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::time::Instant;

use super::throttle::Throttles;
use crate::connection::{Connection, ConnectionConfig, ConnectionError, ConnectionStats};

/// The connections to one address, and how many are being opened.
#[derive(Debug, Default)]
struct Broker {
    /// The first open one is the primary.
    open: Vec<Arc<Connection>>,
    connecting: usize,
}

impl Broker {
    fn prune(&mut self) {
        self.open.retain(|c| !c.is_closed());
    }

    fn least_busy(&self) -> Option<(usize, Arc<Connection>)> {
        self.open
            .iter()
            .map(|c| (c.stats().in_flight, c))
            .min_by_key(|(n, _)| *n)
            .map(|(n, c)| (n, Arc::clone(c)))
    }
}

/// The connection pool.
#[derive(Debug)]
pub(crate) struct Pool {
    config: ConnectionConfig,
    per_broker: usize,
    brokers: Mutex<HashMap<String, Broker>>,
    /// Brokers' throttles (KIP-219): handing out a connection to a
    /// throttled broker waits for the throttle to end.
    throttles: Throttles,
}

/// A slot reserved for a connection being opened; given back when the
/// attempt ends, whatever became of it.
struct Reserved<'a> {
    pool: &'a Pool,
    address: &'a str,
}

impl Drop for Reserved<'_> {
    fn drop(&mut self) {
        if let Some(b) = self.pool.lock().get_mut(self.address) {
            b.connecting = b.connecting.saturating_sub(1);
        }
    }
}

impl Pool {
    /// A pool opening at most `per_broker` connections to each broker (at
    /// least one).
    pub(crate) fn new(config: ConnectionConfig, per_broker: usize) -> Self {
        Self {
            config,
            per_broker: per_broker.max(1),
            brokers: Mutex::new(HashMap::new()),
            throttles: Throttles::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Broker>> {
        self.brokers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Notes that the broker at `address` answered with
    /// `throttle_time_ms`: connections to it are handed out once that time
    /// has passed.
    pub(crate) fn throttled(&self, address: &str, throttle_time_ms: i32) {
        self.throttles.record(address, throttle_time_ms);
    }

    /// When the broker at `address` accepts requests again, if a throttled
    /// answer holds them back now.
    pub(crate) fn throttled_until(&self, address: &str) -> Option<Instant> {
        self.throttles.until(address)
    }

    /// The primary connection to `address`, connecting if there is none,
    /// once the broker's throttle (if any) has ended.
    pub(crate) async fn get(&self, address: &str) -> Result<Arc<Connection>, ConnectionError> {
        self.throttles.wait(address).await;
        if let Some(connection) = self.open(address) {
            return Ok(connection);
        }
        self.connect(address).await
    }

    /// A connection to `address` for a request whose order relative to
    /// others does not matter: an idle one if there is one, else a new one
    /// while fewer than `per_broker` are open or opening, else the least
    /// busy.
    pub(crate) async fn get_spread(
        &self,
        address: &str,
    ) -> Result<Arc<Connection>, ConnectionError> {
        self.throttles.wait(address).await;
        let reserved = {
            let mut brokers = self.lock();
            let broker = brokers.entry(address.to_owned()).or_default();
            broker.prune();
            match broker.least_busy() {
                Some((0, c)) => return Ok(c),
                Some((_, c)) if broker.open.len() + broker.connecting >= self.per_broker => {
                    return Ok(c)
                }
                // None open, one being opened: it will be the primary.
                None if broker.connecting > 0 => false,
                _ => {
                    broker.connecting += 1;
                    true
                }
            }
        };
        if !reserved {
            return self.connect(address).await;
        }
        let _slot = Reserved {
            pool: self,
            address,
        };
        self.connect(address).await
    }

    /// Opens a connection to `address` and keeps it, unless `per_broker`
    /// opened meanwhile (then it uses the least busy of those).
    async fn connect(&self, address: &str) -> Result<Arc<Connection>, ConnectionError> {
        let connection = Arc::new(Connection::connect(address, self.config.clone()).await?);
        let mut brokers = self.lock();
        let broker = brokers.entry(address.to_owned()).or_default();
        broker.prune();
        if broker.open.len() < self.per_broker {
            broker.open.push(Arc::clone(&connection));
            return Ok(connection);
        }
        Ok(broker.least_busy().map_or(connection, |(_, c)| c))
    }

    /// The open primary connection to `address`, if there is one.
    pub(crate) fn open(&self, address: &str) -> Option<Arc<Connection>> {
        self.lock()
            .get(address)?
            .open
            .iter()
            .find(|c| !c.is_closed())
            .cloned()
    }

    /// Every address with an open connection.
    pub(crate) fn open_addresses(&self) -> Vec<String> {
        self.lock()
            .iter()
            .filter(|(_, b)| b.open.iter().any(|c| !c.is_closed()))
            .map(|(a, _)| a.clone())
            .collect()
    }

    /// Closes `connection` and forgets it, so the next request opens another.
    pub(crate) fn evict(&self, connection: &Arc<Connection>) {
        connection.close();
        if let Some(b) = self.lock().get_mut(connection.broker()) {
            b.open.retain(|c| !Arc::ptr_eq(c, connection));
        }
    }

    /// Every pooled connection's counters, summed per address.
    pub(crate) fn stats(&self) -> Vec<(String, ConnectionStats)> {
        let mut stats: Vec<_> = self
            .lock()
            .iter()
            .filter(|(_, b)| !b.open.is_empty())
            .map(|(a, b)| {
                let sum = b.open.iter().map(|c| c.stats()).fold(
                    ConnectionStats::default(),
                    |mut s, c| {
                        s.bytes_sent += c.bytes_sent;
                        s.bytes_received += c.bytes_received;
                        s.requests += c.requests;
                        s.responses += c.responses;
                        s.in_flight += c.in_flight;
                        s
                    },
                );
                (a.clone(), sum)
            })
            .collect();
        stats.sort_by(|a, b| a.0.cmp(&b.0));
        stats
    }
}
