//! Opening the TCP connection to a broker: the address parsed
//! ([`BrokerAddress`]), its name resolved, each resolved address tried in
//! turn, all within the connect timeout, and every failure classified
//! ([`ConnectionError::InvalidAddress`], [`ConnectionError::Unresolvable`],
//! [`ConnectionError::Refused`], [`ConnectionError::ConnectTimeout`],
//! [`ConnectionError::Connect`]) so that the cluster client retries only
//! what may pass.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::TcpStream;

use super::address::BrokerAddress;
use super::ConnectionError;

/// A TCP connection to `broker` (as a user or the cluster's metadata wrote
/// it), with `TCP_NODELAY` set, within `timeout`.
pub(crate) async fn dial(broker: &str, timeout: Duration) -> Result<TcpStream, ConnectionError> {
    let address =
        BrokerAddress::parse(broker).map_err(|source| ConnectionError::InvalidAddress {
            broker: broker.to_owned(),
            source,
        })?;
    let stream = tokio::time::timeout(timeout, resolve_and_connect(broker, &address))
        .await
        .map_err(|_| ConnectionError::ConnectTimeout {
            broker: broker.to_owned(),
            timeout,
        })??;
    stream
        .set_nodelay(true)
        .map_err(|e| ConnectionError::Connect {
            broker: broker.to_owned(),
            source: e.into(),
        })?;
    Ok(stream)
}

async fn resolve_and_connect(
    broker: &str,
    address: &BrokerAddress,
) -> Result<TcpStream, ConnectionError> {
    let unresolvable = |reason: String| ConnectionError::Unresolvable {
        broker: broker.to_owned(),
        host: address.host().to_owned(),
        reason,
    };
    let resolved: Vec<SocketAddr> = tokio::net::lookup_host((address.host(), address.port()))
        .await
        .map_err(|e| unresolvable(e.to_string()))?
        .collect();
    if resolved.is_empty() {
        return Err(unresolvable("the name has no address".to_owned()));
    }
    let mut refused = Vec::new();
    let mut other: Option<io::Error> = None;
    for socket in &resolved {
        match TcpStream::connect(socket).await {
            Ok(stream) => return Ok(stream),
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => refused.push(*socket),
            Err(e) => other = Some(e),
        }
    }
    Err(match other {
        Some(e) => ConnectionError::Connect {
            broker: broker.to_owned(),
            source: e.into(),
        },
        None => ConnectionError::Refused {
            broker: broker.to_owned(),
            addresses: refused,
        },
    })
}
