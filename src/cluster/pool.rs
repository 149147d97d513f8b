//! One connection per broker address, opened on first use and replaced once
//! it breaks.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::connection::{Connection, ConnectionConfig, ConnectionError, ConnectionStats};

/// The connection pool.
#[derive(Debug)]
pub(crate) struct Pool {
    config: ConnectionConfig,
    connections: Mutex<HashMap<String, Arc<Connection>>>,
}

impl Pool {
    pub(crate) fn new(config: ConnectionConfig) -> Self {
        Self {
            config,
            connections: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Arc<Connection>>> {
        self.connections
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The open connection to `address`, connecting if there is none.
    pub(crate) async fn get(&self, address: &str) -> Result<Arc<Connection>, ConnectionError> {
        if let Some(connection) = self.open(address) {
            return Ok(connection);
        }
        let connection = Arc::new(Connection::connect(address, self.config.clone()).await?);
        let mut connections = self.lock();
        // Another task may have connected meanwhile: keep one.
        match connections.get(address) {
            Some(existing) if !existing.is_closed() => Ok(Arc::clone(existing)),
            _ => {
                connections.insert(address.to_owned(), Arc::clone(&connection));
                Ok(connection)
            }
        }
    }

    /// The open connection to `address`, if there is one.
    pub(crate) fn open(&self, address: &str) -> Option<Arc<Connection>> {
        self.lock().get(address).filter(|c| !c.is_closed()).cloned()
    }

    /// Every open connection's address.
    pub(crate) fn open_addresses(&self) -> Vec<String> {
        self.lock()
            .iter()
            .filter(|(_, c)| !c.is_closed())
            .map(|(a, _)| a.clone())
            .collect()
    }

    /// Closes `connection` and forgets it, so the next `get` reconnects.
    pub(crate) fn evict(&self, connection: &Arc<Connection>) {
        connection.close();
        let mut connections = self.lock();
        if connections
            .get(connection.broker())
            .is_some_and(|c| Arc::ptr_eq(c, connection))
        {
            connections.remove(connection.broker());
        }
    }

    /// Every pooled connection's counters.
    pub(crate) fn stats(&self) -> Vec<(String, ConnectionStats)> {
        let mut stats: Vec<_> = self
            .lock()
            .iter()
            .map(|(a, c)| (a.clone(), c.stats()))
            .collect();
        stats.sort_by(|a, b| a.0.cmp(&b.0));
        stats
    }
}
