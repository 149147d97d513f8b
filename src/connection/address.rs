//! Broker addresses as users write them: `host:port`, `host` (port 9092),
//! `[v6]:port`, optionally behind a listener scheme pasted from a Kafka
//! or Tansu configuration (`tcp://`, `ssl://`, `PLAINTEXT://`,
//! `SASL_SSL://`, `SASL_PLAINTEXT://`, any case).
//!
//! Parsing is pure and happens before any socket is opened, so a malformed
//! address fails at once with [`AddressError`], which says what is wrong,
//! instead of being retried as if the broker were down.
//!
//! Decisions:
//! - A missing port is 9092 ([`DEFAULT_PORT`]), as Kafka clients assume.
//! - An IPv6 address must be written in brackets: `[::1]:9092`, or `[::1]`
//!   for port 9092. Without brackets `::1:9092` reads either as host `::1`
//!   port 9092 or as the address `::1:9092` with the default port, so any
//!   host with more than one `:` and no brackets is refused as ambiguous
//!   ([`AddressError::UnbracketedIpv6`]) rather than guessed.
//! - A scheme is stripped and remembered ([`Scheme`]); an unknown scheme
//!   (`http://`) is refused. Nothing may follow the port: no path, no
//!   trailing `/`.
//! - Leading and trailing whitespace is ignored; whitespace inside is not.
//!
//! # References
//! - Kafka's `bootstrap.servers` (`host:port` list) and listener syntax
//!   (`PLAINTEXT://host:port`, KIP-103 security protocol names).

use std::fmt;
use std::net::Ipv6Addr;
use std::str::FromStr;

/// The port of a broker address given without one, as in Kafka clients.
pub const DEFAULT_PORT: u16 = 9092;

/// The scheme (Kafka security protocol or Tansu URL scheme) an address was
/// written with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    /// `tcp://` (Tansu's form): plain TCP.
    Tcp,
    /// `ssl://`: TLS.
    Ssl,
    /// `plaintext://`: plain TCP.
    Plaintext,
    /// `sasl_ssl://`: SASL over TLS.
    SaslSsl,
    /// `sasl_plaintext://`: SASL over plain TCP.
    SaslPlaintext,
}

impl Scheme {
    /// Every scheme, in the order error messages list them.
    pub const ALL: [Scheme; 5] = [
        Scheme::Tcp,
        Scheme::Ssl,
        Scheme::Plaintext,
        Scheme::SaslSsl,
        Scheme::SaslPlaintext,
    ];

    /// The scheme's name, lower case, without `://`.
    pub const fn name(self) -> &'static str {
        match self {
            Scheme::Tcp => "tcp",
            Scheme::Ssl => "ssl",
            Scheme::Plaintext => "plaintext",
            Scheme::SaslSsl => "sasl_ssl",
            Scheme::SaslPlaintext => "sasl_plaintext",
        }
    }

    /// Whether the scheme asks for TLS.
    pub const fn is_tls(self) -> bool {
        matches!(self, Scheme::Ssl | Scheme::SaslSsl)
    }

    /// Whether the scheme asks for SASL.
    pub const fn is_sasl(self) -> bool {
        matches!(self, Scheme::SaslSsl | Scheme::SaslPlaintext)
    }

    fn from_name(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|s| s.name().eq_ignore_ascii_case(name))
    }
}

/// A broker's host and port, parsed from what a user wrote.
///
/// ```
/// use walfetch::connection::BrokerAddress;
///
/// let a: BrokerAddress = " SASL_SSL://kafka-0.example:9093 ".parse()?;
/// assert_eq!((a.host(), a.port()), ("kafka-0.example", 9093));
/// assert_eq!("localhost".parse::<BrokerAddress>()?.to_string(), "localhost:9092");
/// assert_eq!("[::1]".parse::<BrokerAddress>()?.to_string(), "[::1]:9092");
/// assert!("::1".parse::<BrokerAddress>().is_err()); // ambiguous: write [::1]
/// # Ok::<(), walfetch::connection::AddressError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BrokerAddress {
    host: String,
    port: u16,
    scheme: Option<Scheme>,
}

/// Why a broker address is malformed. Every variant holds the address as
/// written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AddressError {
    /// Nothing but whitespace.
    #[error("empty broker address (expected host:port)")]
    Empty,
    /// The host part is empty (`:9092`, `tcp://`).
    #[error("broker address {address:?} has no host (expected host:port)")]
    EmptyHost {
        /// The address as written.
        address: String,
    },
    /// The host holds characters no host name or IP address has.
    #[error(
        "broker address {address:?}: {host:?} is not a host name or IP address \
         (letters, digits, '-', '.', '_' only)"
    )]
    InvalidHost {
        /// The address as written.
        address: String,
        /// The host part.
        host: String,
    },
    /// The port is not a number from 1 to 65535.
    #[error("broker address {address:?}: port {port:?} is not a number from 1 to 65535")]
    InvalidPort {
        /// The address as written.
        address: String,
        /// The port part.
        port: String,
    },
    /// A scheme other than those Kafka listeners and Tansu use.
    #[error(
        "broker address {address:?}: unknown scheme {scheme:?}:// (expected host:port, \
         optionally after tcp://, ssl://, plaintext://, sasl_ssl:// or sasl_plaintext://)"
    )]
    UnknownScheme {
        /// The address as written.
        address: String,
        /// The scheme.
        scheme: String,
    },
    /// Something follows the port (`host:9092/path`).
    #[error("broker address {address:?}: unexpected {rest:?} after host:port")]
    TrailingPath {
        /// The address as written.
        address: String,
        /// What follows host and port.
        rest: String,
    },
    /// An IPv6 address without brackets: the port cannot be told apart.
    #[error(
        "broker address {address:?} is ambiguous: write an IPv6 address in brackets, \
         [{host}]:port (or [{host}] for port 9092)"
    )]
    UnbracketedIpv6 {
        /// The address as written.
        address: String,
        /// The unbracketed text.
        host: String,
    },
    /// Brackets around something that is not an IPv6 address, or not
    /// closed.
    #[error("broker address {address:?}: only an IPv6 address may be in brackets ([::1]:9092)")]
    InvalidIpv6 {
        /// The address as written.
        address: String,
    },
}

impl BrokerAddress {
    /// An address from its parts; the host as it is (an IPv6 address
    /// without brackets).
    pub fn new(host: impl Into<String>, port: u16) -> Self {
        Self {
            host: host.into(),
            port,
            scheme: None,
        }
    }

    /// Parses what a user wrote (see the module documentation).
    pub fn parse(text: &str) -> Result<Self, AddressError> {
        let address = text.trim();
        if address.is_empty() {
            return Err(AddressError::Empty);
        }
        let owned = || address.to_owned();
        let (scheme, rest) = match address.split_once("://") {
            Some((scheme, rest)) => {
                let known =
                    Scheme::from_name(scheme).ok_or_else(|| AddressError::UnknownScheme {
                        address: owned(),
                        scheme: scheme.to_owned(),
                    })?;
                (Some(known), rest)
            }
            None => (None, address),
        };
        let (host, after_host) = if let Some(bracketed) = rest.strip_prefix('[') {
            let (inside, after) = bracketed
                .split_once(']')
                .ok_or_else(|| AddressError::InvalidIpv6 { address: owned() })?;
            if inside.parse::<Ipv6Addr>().is_err() {
                return Err(AddressError::InvalidIpv6 { address: owned() });
            }
            (inside, after)
        } else {
            let end = rest.find([':', '/']).unwrap_or(rest.len());
            let (host, after) = rest.split_at(end);
            if after.starts_with(':') && after[1..].contains(':') {
                let host = rest.split('/').next().unwrap_or(rest).to_owned();
                return Err(AddressError::UnbracketedIpv6 {
                    address: owned(),
                    host,
                });
            }
            if host.is_empty() {
                return Err(AddressError::EmptyHost { address: owned() });
            }
            if !host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
            {
                return Err(AddressError::InvalidHost {
                    address: owned(),
                    host: host.to_owned(),
                });
            }
            (host, after)
        };
        let (port_text, tail) = match after_host.strip_prefix(':') {
            Some(port_and_tail) => {
                let end = port_and_tail.find('/').unwrap_or(port_and_tail.len());
                let (port, tail) = port_and_tail.split_at(end);
                (Some(port), tail)
            }
            None => (None, after_host),
        };
        if !tail.is_empty() {
            return Err(AddressError::TrailingPath {
                address: owned(),
                rest: tail.to_owned(),
            });
        }
        let port = match port_text {
            None => DEFAULT_PORT,
            Some(p) => Some(p)
                .filter(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|p| p.parse::<u16>().ok())
                .filter(|p| *p != 0)
                .ok_or_else(|| AddressError::InvalidPort {
                    address: owned(),
                    port: p.to_owned(),
                })?,
        };
        Ok(Self {
            host: host.to_owned(),
            port,
            scheme,
        })
    }

    /// The host: a name, an IPv4 address, or an IPv6 address without
    /// brackets.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The scheme the address was written with, if any.
    pub fn scheme(&self) -> Option<Scheme> {
        self.scheme
    }
}

impl FromStr for BrokerAddress {
    type Err = AddressError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// `host:port`, an IPv6 host in brackets; without the scheme.
impl fmt::Display for BrokerAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn ok(text: &str) -> (String, u16, Option<Scheme>) {
        let a = BrokerAddress::parse(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
        (a.host().to_owned(), a.port(), a.scheme())
    }

    fn err(text: &str) -> AddressError {
        match BrokerAddress::parse(text) {
            Ok(a) => panic!("{text:?} parsed as {a:?}"),
            Err(e) => e,
        }
    }

    #[test]
    fn the_forms_users_write() {
        let h = |s: &str| s.to_owned();
        assert_eq!(ok("broker:9093"), (h("broker"), 9093, None));
        assert_eq!(ok("broker"), (h("broker"), 9092, None));
        assert_eq!(ok("  10.0.0.1:1  "), (h("10.0.0.1"), 1, None));
        assert_eq!(ok("[::1]:65535"), (h("::1"), 65535, None));
        assert_eq!(ok("[::1]"), (h("::1"), 9092, None));
        assert_eq!(
            ok("tcp://localhost:9092"),
            (h("localhost"), 9092, Some(Scheme::Tcp))
        );
        assert_eq!(
            ok("TCP://localhost"),
            (h("localhost"), 9092, Some(Scheme::Tcp))
        );
        assert_eq!(ok("ssl://b:9093"), (h("b"), 9093, Some(Scheme::Ssl)));
        assert_eq!(ok("PLAINTEXT://b:1"), (h("b"), 1, Some(Scheme::Plaintext)));
        assert_eq!(ok("SASL_SSL://b:2"), (h("b"), 2, Some(Scheme::SaslSsl)));
        assert_eq!(
            ok("Sasl_Plaintext://[::1]:3"),
            (h("::1"), 3, Some(Scheme::SaslPlaintext))
        );
        assert_eq!(
            ok("kafka_0.internal-x"),
            (h("kafka_0.internal-x"), 9092, None)
        );
        assert!(Scheme::SaslSsl.is_tls() && Scheme::SaslSsl.is_sasl());
        assert!(!Scheme::Tcp.is_tls() && !Scheme::Plaintext.is_sasl());
    }

    #[test]
    fn malformed_addresses_say_what_is_wrong() {
        assert_eq!(err("   "), AddressError::Empty);
        assert!(matches!(err(":9092"), AddressError::EmptyHost { .. }));
        assert!(matches!(err("tcp://"), AddressError::EmptyHost { .. }));
        assert!(matches!(err("tcp://:1"), AddressError::EmptyHost { .. }));
        for port in ["0", "65536", "99999999999", "x", "", "-1", "+1", " 1"] {
            let text = format!("b:{port}");
            match err(&text) {
                AddressError::InvalidPort { port: p, .. } => assert_eq!(p, port, "{text}"),
                other => panic!("{text}: {other:?}"),
            }
        }
        assert!(matches!(
            err("http://b:80"),
            AddressError::UnknownScheme { ref scheme, .. } if scheme == "http"
        ));
        assert!(matches!(
            err("tcp://b:9092/"),
            AddressError::TrailingPath { ref rest, .. } if rest == "/"
        ));
        assert!(matches!(
            err("b:9092/x/y"),
            AddressError::TrailingPath { ref rest, .. } if rest == "/x/y"
        ));
        assert!(matches!(err("b/x"), AddressError::TrailingPath { .. }));
        assert!(matches!(err("[::1]x"), AddressError::TrailingPath { .. }));
        assert!(matches!(
            err("::1"),
            AddressError::UnbracketedIpv6 { ref host, .. } if host == "::1"
        ));
        assert!(matches!(
            err("::1:9092"),
            AddressError::UnbracketedIpv6 { .. }
        ));
        assert!(matches!(
            err("fe80::1"),
            AddressError::UnbracketedIpv6 { .. }
        ));
        assert!(matches!(
            err("[broker]:1"),
            AddressError::InvalidIpv6 { .. }
        ));
        assert!(matches!(err("[::1:1"), AddressError::InvalidIpv6 { .. }));
        assert!(matches!(err("a b:1"), AddressError::InvalidHost { .. }));
        assert!(matches!(err("user@b:1"), AddressError::InvalidHost { .. }));
        assert!(matches!(err("b,c:1"), AddressError::InvalidHost { .. }));
        // Messages quote the address and say what to write.
        let message = err("::1").to_string();
        assert!(
            message.contains("\"::1\"") && message.contains("[::1]:port"),
            "{message}"
        );
        let message = err("b:0").to_string();
        assert!(
            message.contains("\"b:0\"") && message.contains("1 to 65535"),
            "{message}"
        );
    }

    fn host() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z0-9][a-z0-9_.-]{0,30}",
            any::<std::net::Ipv4Addr>().prop_map(|a| a.to_string()),
            any::<Ipv6Addr>().prop_map(|a| a.to_string()),
        ]
    }

    fn scheme() -> impl Strategy<Value = Option<(Scheme, bool)>> {
        proptest::option::of((
            proptest::sample::select(Scheme::ALL.to_vec()),
            any::<bool>(),
        ))
    }

    proptest! {
        /// Display then parse gives the same address back, whatever
        /// scheme (in either case) and whitespace surround it.
        #[test]
        fn round_trips(host in host(), port in 1u16.., scheme in scheme(), pad in "[ \t]{0,2}") {
            let address = BrokerAddress::new(host, port);
            let written = address.to_string();
            prop_assert_eq!(BrokerAddress::parse(&written), Ok(address.clone()));
            let (prefixed, expected) = match scheme {
                Some((s, upper)) => {
                    let name = if upper { s.name().to_uppercase() } else { s.name().to_owned() };
                    (format!("{pad}{name}://{written}{pad}"), Some(s))
                }
                None => (format!("{pad}{written}{pad}"), None),
            };
            let parsed = BrokerAddress::parse(&prefixed);
            prop_assert_eq!(parsed.as_ref().map(BrokerAddress::scheme), Ok(expected));
            prop_assert_eq!(parsed.map(|a| a.to_string()), Ok(written));
        }

        /// Parsing never panics, and whatever parses displays as something
        /// that parses to the same host and port.
        #[test]
        fn any_text_parses_or_errs(text in "\\PC{0,40}") {
            if let Ok(a) = BrokerAddress::parse(&text) {
                let again = BrokerAddress::parse(&a.to_string());
                prop_assert_eq!(again.map(|b| (b.host, b.port)), Ok((a.host, a.port)));
            }
        }
    }
}
