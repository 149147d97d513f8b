//! Bootstrapping: the addresses checked up front, then `Metadata` read from
//! the first bootstrap broker that answers, with failures classified so
//! that a dead or wrong address is reported within seconds.
//!
//! - Every bootstrap address is parsed before anything is sent; a
//!   malformed one fails at once, naming it
//!   ([`crate::connection::ConnectionError::InvalidAddress`]).
//! - A connect or request timeout of zero is refused at once
//!   ([`ClientError::InvalidArgument`]), as librdkafka refuses a
//!   `socket.timeout.ms` under 10 ms: under it an operation would succeed
//!   or fail by the order in which a loaded machine runs a response and a
//!   timer that fall due together.
//! - A failure that says the address leads nowhere usable (a name that
//!   does not resolve, a peer that is not a Kafka broker, a handshake the
//!   broker refused: [`crate::connection::ConnectionError::is_wrong_peer`])
//!   on every bootstrap address fails the bootstrap at once.
//! - Failures that may pass (a refused connection, a timeout, a connection
//!   lost, a retriable error code) are retried with backoff for
//!   [`super::ClusterConfig::bootstrap_deadline`] (3 s by default), then
//!   the bootstrap gives up with the last failure of every address.
//!
//! A production client such as librdkafka keeps reconnecting in the
//! background forever but reports "all brokers down" to the application
//! within seconds; walfetch is a recovery tool run by a person or a
//! restarting node, which is better served by an error it can act on than
//! by a wait: the default gives up on a closed port after about 2 s, on a
//! port that accepts and never answers after the 5 s connect timeout. A
//! cluster that is starting needs a longer `--timeout`
//! ([`super::ClusterConfig::with_timeout`]).
//!
//! # References
//! - Kafka protocol guide, "Partitioning and bootstrapping".
//! - librdkafka `CONFIGURATION.md`: `socket.timeout.ms`,
//!   `socket.connection.setup.timeout.ms`; KIP-580 (backoff with jitter).

use std::sync::Mutex;
use std::time::Duration;

use super::client::Retry;
use super::pool::Pool;
use super::{ClientError, Cluster, ClusterConfig, ClusterMetadata};
use crate::connection::{BrokerAddress, ConnectionError};

/// The default [`ClusterConfig::bootstrap_deadline`]: 3 s.
pub const DEFAULT_BOOTSTRAP_DEADLINE: Duration = Duration::from_secs(3);

impl Cluster {
    /// Bootstraps: checks every bootstrap address, then reads `Metadata`
    /// (brokers only) from the first bootstrap broker that answers,
    /// retrying what may pass until
    /// [`ClusterConfig::bootstrap_deadline`] (see the module
    /// documentation of `cluster::bootstrap` for what fails at once).
    pub async fn connect(mut config: ClusterConfig) -> Result<Self, ClientError> {
        if config.bootstrap.is_empty() {
            return Err(ClientError::InvalidArgument(
                "no bootstrap broker given".to_owned(),
            ));
        }
        for (name, timeout) in [
            ("connect", config.connection.connect_timeout),
            ("request", config.connection.request_timeout),
        ] {
            if timeout.is_zero() {
                return Err(ClientError::InvalidArgument(format!(
                    "the {name} timeout is zero: nothing could be waited for \
                     (librdkafka's socket.timeout.ms takes 10 ms at least)"
                )));
            }
        }
        let mut addresses = Vec::with_capacity(config.bootstrap.len());
        for given in &config.bootstrap {
            let address = BrokerAddress::parse(given).map_err(|source| {
                ClientError::Connection(ConnectionError::InvalidAddress {
                    broker: given.clone(),
                    source,
                })
            })?;
            let address = address.to_string();
            if !addresses.contains(&address) {
                addresses.push(address);
            }
        }
        config.bootstrap = addresses;
        let cluster = Self {
            pool: Pool::new(config.connection.clone(), config.connections_per_broker),
            metadata: Mutex::new(ClusterMetadata::default()),
            refresh: tokio::sync::Mutex::new(()),
            topic_reads: Default::default(),
            preferred: Default::default(),
            unshared: Default::default(),
            runtime: tokio::runtime::Handle::try_current().ok(),
            config,
        };
        let retry = Retry {
            policy: super::RetryPolicy {
                deadline: cluster.config.bootstrap_deadline,
                ..cluster.config.retry
            },
            cut: cluster.config.retry.deadline,
            retriable: &ClientError::is_retriable_at_bootstrap,
        };
        cluster
            .retrying_with(
                retry,
                || format!("bootstrap from {}", cluster.config.bootstrap.join(", ")),
                None,
                || cluster.read_metadata(Some(&[])),
            )
            .await?;
        Ok(cluster)
    }
}
