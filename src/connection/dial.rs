//! Opening the TCP connection to a broker: the address parsed
//! ([`BrokerAddress`]), its name resolved, the resolved addresses tried
//! one after another but overlapping (below), all within the connect
//! timeout, and every failure classified
//! ([`ConnectionError::InvalidAddress`], [`ConnectionError::Unresolvable`],
//! [`ConnectionError::Refused`], [`ConnectionError::ConnectTimeout`],
//! [`ConnectionError::Connect`]) so that the cluster client retries only
//! what may pass.
//!
//! A name may resolve to an address that cannot answer at all: an IPv6
//! address on a host without an IPv6 route, a decommissioned node whose
//! firewall drops packets. Its attempt hangs until the connect timeout,
//! and a client that waits for it never reaches the address that works,
//! on any retry. So, as RFC 8305 ("Happy Eyeballs") has it, each
//! address's attempt starts when the one before it failed or after
//! [`ATTEMPT_DELAY`], whichever is first, the earlier ones still running,
//! and the first connection made wins; the addresses are tried in the
//! resolver's order with the address families alternating.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::task::JoinSet;

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
    connect_any(broker, &alternate_families(resolved), ATTEMPT_DELAY).await
}

/// How long an address's attempt runs alone before the next address's
/// starts beside it: RFC 8305's recommended "Connection Attempt Delay".
pub(crate) const ATTEMPT_DELAY: Duration = Duration::from_millis(250);

/// `resolved` in the resolver's order, but with IPv6 and IPv4 addresses
/// taking turns (RFC 8305, section 4), so that a family that cannot
/// connect delays the other by one [`ATTEMPT_DELAY`] at most.
fn alternate_families(resolved: Vec<SocketAddr>) -> Vec<SocketAddr> {
    let first_v6 = resolved.first().is_some_and(SocketAddr::is_ipv6);
    let mut out = Vec::with_capacity(resolved.len());
    let (first, second): (Vec<_>, Vec<_>) =
        resolved.into_iter().partition(|a| a.is_ipv6() == first_v6);
    let mut second = second.into_iter();
    for address in first {
        out.push(address);
        out.extend(second.next());
    }
    out.extend(second);
    out
}

/// A TCP connection to the first of `addresses` that takes one, their
/// attempts started `delay` apart (or at once when the one before fails)
/// and overlapping; every failure when none does.
pub(crate) async fn connect_any(
    broker: &str,
    addresses: &[SocketAddr],
    delay: Duration,
) -> Result<TcpStream, ConnectionError> {
    let mut attempts = JoinSet::new();
    let mut waiting = addresses.iter().copied();
    let mut refused = Vec::new();
    let mut other: Option<io::Error> = None;
    // Each turn starts the next address's attempt: at first, after an
    // attempt failed, or after `delay` without a connection.
    loop {
        match waiting.next() {
            Some(address) => {
                attempts.spawn(async move { (address, TcpStream::connect(address).await) });
            }
            None if attempts.is_empty() => break,
            None => {}
        }
        let more = waiting.len() > 0;
        tokio::select! {
            // An attempt that succeeded wins over the delay that ends at the
            // same time: no extra attempt is started for nothing.
            biased;
            done = attempts.join_next(), if !attempts.is_empty() => match done {
                Some(Ok((_, Ok(stream)))) => return Ok(stream),
                Some(Ok((address, Err(e)))) => {
                    if e.kind() == io::ErrorKind::ConnectionRefused {
                        refused.push(address);
                    } else {
                        other = Some(e);
                    }
                }
                // An attempt's task panicked or was cancelled: a failure.
                Some(Err(e)) => other = Some(io::Error::other(e.to_string())),
                None => {}
            },
            () = tokio::time::sleep(delay), if more => {}
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

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, Ipv6Addr};
    use std::time::Instant;

    use tokio::net::{TcpListener, TcpSocket};

    use super::*;

    /// A loopback address whose connection attempts hang: its listener's
    /// accept queue (backlog 0) is full, so Linux drops further SYNs, as a
    /// firewall that drops packets does. Keep the returned values alive.
    async fn black_hole() -> (SocketAddr, TcpListener, TcpStream) {
        let socket = TcpSocket::new_v4().unwrap();
        socket.bind((Ipv4Addr::LOCALHOST, 0).into()).unwrap();
        let listener = socket.listen(0).unwrap();
        let address = listener.local_addr().unwrap();
        let queued = TcpStream::connect(address).await.unwrap();
        (address, listener, queued)
    }

    #[tokio::test]
    async fn an_address_that_never_answers_does_not_hide_the_next_one() {
        let (dead, _listener, _queued) = black_hole().await;
        // The black hole holds: an attempt on it alone gets nowhere.
        let alone = tokio::time::timeout(
            Duration::from_millis(300),
            connect_any("b", &[dead], ATTEMPT_DELAY),
        )
        .await;
        assert!(alone.is_err(), "the black hole answered: {alone:?}");

        let live = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
        let good = live.local_addr().unwrap();
        let started = Instant::now();
        let stream = tokio::time::timeout(
            Duration::from_secs(3),
            connect_any("b", &[dead, good], Duration::from_millis(50)),
        )
        .await
        .expect("stuck on the address that never answers")
        .unwrap();
        assert_eq!(stream.peer_addr().unwrap(), good);
        assert!(started.elapsed() < Duration::from_secs(1));
    }

    #[tokio::test]
    async fn a_refused_address_starts_the_next_at_once() {
        let closed = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
        let refused = closed.local_addr().unwrap();
        drop(closed);
        let live = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
        let good = live.local_addr().unwrap();
        let started = Instant::now();
        // A delay far past the test's wait: only the failure can start it.
        let stream = tokio::time::timeout(
            Duration::from_secs(5),
            connect_any("b", &[refused, good], Duration::from_secs(60)),
        )
        .await
        .expect("the next address waited out the delay")
        .unwrap();
        assert_eq!(stream.peer_addr().unwrap(), good);
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[tokio::test]
    async fn every_address_refused_is_reported_as_refused() {
        let mut addresses = Vec::new();
        for _ in 0..2 {
            let closed = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
            addresses.push(closed.local_addr().unwrap());
        }
        let err = connect_any("b", &addresses, Duration::from_millis(10))
            .await
            .unwrap_err();
        match err {
            ConnectionError::Refused { addresses: got, .. } => {
                let mut got = got;
                got.sort();
                addresses.sort();
                assert_eq!(got, addresses);
            }
            other => panic!("expected Refused, got {other:?}"),
        }
    }

    #[test]
    fn address_families_take_turns_in_the_resolvers_order() {
        let v6 = |p| SocketAddr::from((Ipv6Addr::LOCALHOST, p));
        let v4 = |p| SocketAddr::from((Ipv4Addr::LOCALHOST, p));
        assert_eq!(
            alternate_families(vec![v6(1), v6(2), v6(3), v4(4), v4(5)]),
            vec![v6(1), v4(4), v6(2), v4(5), v6(3)]
        );
        assert_eq!(
            alternate_families(vec![v4(1), v6(2), v6(3), v6(4)]),
            vec![v4(1), v6(2), v6(3), v6(4)]
        );
        assert_eq!(alternate_families(vec![]), vec![]);
    }
}
