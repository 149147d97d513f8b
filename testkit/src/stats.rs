//! Per-broker counters: requests by API key, bytes on the wire, connections.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use kafka_protocol::messages::ApiKey;

/// A snapshot of one broker's counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BrokerStats {
    /// Requests received, by API key (every decoded request, faulted or not).
    pub requests: BTreeMap<i16, u64>,
    /// Bytes handed to clients' sockets, length prefixes included.
    pub bytes_sent: u64,
    /// Bytes read from clients, length prefixes included.
    pub bytes_received: u64,
    /// Connections accepted.
    pub connections: u64,
    /// Fetch requests received, by their `max_wait_ms`: a client reading
    /// what it knows is there should not let the broker wait (Tansu 0.6
    /// sleeps out the whole wait even when it has the records).
    pub fetch_max_waits: BTreeMap<i32, u64>,
}

impl BrokerStats {
    /// Requests received with `api_key`.
    pub fn requests_of(&self, api_key: ApiKey) -> u64 {
        self.requests.get(&(api_key as i16)).copied().unwrap_or(0)
    }

    /// Requests received, all API keys.
    pub fn total_requests(&self) -> u64 {
        self.requests.values().sum()
    }
}

/// The live counters behind [`BrokerStats`].
#[derive(Debug, Default)]
pub(crate) struct Counters {
    requests: Mutex<BTreeMap<i16, u64>>,
    fetch_max_waits: Mutex<BTreeMap<i32, u64>>,
    bytes_sent: AtomicU64,
    bytes_received: AtomicU64,
    connections: AtomicU64,
}

impl Counters {
    pub(crate) fn request(&self, api_key: i16) {
        let mut requests = self.requests.lock().unwrap_or_else(PoisonError::into_inner);
        *requests.entry(api_key).or_default() += 1;
    }

    pub(crate) fn fetch_max_wait(&self, max_wait_ms: i32) {
        let mut waits = self
            .fetch_max_waits
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *waits.entry(max_wait_ms).or_default() += 1;
    }

    pub(crate) fn sent(&self, bytes: usize) {
        self.bytes_sent.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    pub(crate) fn received(&self, bytes: usize) {
        self.bytes_received
            .fetch_add(bytes as u64, Ordering::Relaxed);
    }

    pub(crate) fn connection(&self) {
        self.connections.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> BrokerStats {
        BrokerStats {
            requests: self
                .requests
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
            bytes_sent: self.bytes_sent.load(Ordering::Relaxed),
            bytes_received: self.bytes_received.load(Ordering::Relaxed),
            connections: self.connections.load(Ordering::Relaxed),
            fetch_max_waits: self
                .fetch_max_waits
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
        }
    }

    pub(crate) fn reset(&self) {
        self.requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        self.fetch_max_waits
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        self.bytes_sent.store(0, Ordering::Relaxed);
        self.bytes_received.store(0, Ordering::Relaxed);
        self.connections.store(0, Ordering::Relaxed);
    }
}
