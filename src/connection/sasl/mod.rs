//! SASL authentication of broker connections: PLAIN, SCRAM-SHA-256,
//! SCRAM-SHA-512 and OAUTHBEARER, framed in Kafka requests.
//!
//! After `ApiVersions`, the client sends `SaslHandshake` (v1) naming the
//! mechanism; the broker answers with its enabled mechanisms, or
//! `UNSUPPORTED_SASL_MECHANISM`. The mechanism's messages then travel in
//! `SaslAuthenticate` requests and responses until the exchange is done; a
//! broker that refuses the credentials answers `SASL_AUTHENTICATION_FAILED`
//! with a message. Both failures are their own [`ConnectionError`]
//! variants, which the cluster client never retries: a wrong password stays
//! wrong.
//!
//! When the broker gives the session a lifetime (`session_lifetime_ms` in
//! `SaslAuthenticate` v1+), the connection authenticates again, on the same
//! connection and between requests, when 85–95% of it has passed (KIP-368);
//! a broker closes connections whose session expired.
//!
//! The mechanisms themselves are sans-io ([`scram`], `plain.rs`,
//! `oauthbearer.rs`); this file holds the settings and the exchange.
//!
//! # References
//! - KIP-152 (SaslAuthenticate requests instead of raw SASL tokens).
//! - KIP-368 (re-authentication before the session lifetime ends).
//! - KIP-84 (SCRAM), KIP-255 (OAUTHBEARER).
//! - RFC 4616 (PLAIN), RFC 5802 and RFC 7677 (SCRAM), RFC 7628
//!   (OAUTHBEARER).

mod oauthbearer;
mod plain;
pub mod scram;

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use kafka_protocol::messages::{ApiKey, SaslAuthenticateRequest, SaslHandshakeRequest};
use kafka_protocol::protocol::StrBytes;

use super::{Connection, ConnectionError, RequestOptions};
use crate::error_code::ErrorCode;
use scram::{ScramClient, ScramHash};

/// Supplies OAUTHBEARER tokens, once per authentication (so a token
/// refreshed by the caller is used at re-authentication). Any
/// `Fn() -> impl Future<Output = Result<String, String>>` closure is one.
pub trait TokenProvider: Send + Sync {
    /// A bearer token, or why there is none.
    fn token(&self) -> BoxFuture<'static, Result<String, String>>;
}

impl<F, Fut> TokenProvider for F
where
    F: Fn() -> Fut + Send + Sync,
    Fut: Future<Output = Result<String, String>> + Send + 'static,
{
    fn token(&self) -> BoxFuture<'static, Result<String, String>> {
        Box::pin(self())
    }
}

#[derive(Clone)]
enum Mechanism {
    Plain {
        username: String,
        password: String,
    },
    Scram {
        hash: ScramHash,
        username: String,
        password: String,
    },
    OAuthBearer(Arc<dyn TokenProvider>),
}

/// SASL settings: a mechanism and its credentials.
#[derive(Clone)]
pub struct SaslConfig {
    mechanism: Mechanism,
}

impl fmt::Debug for SaslConfig {
    /// The mechanism and username; never the password.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = f.debug_struct("SaslConfig");
        s.field("mechanism", &self.mechanism_name());
        match &self.mechanism {
            Mechanism::Plain { username, .. } | Mechanism::Scram { username, .. } => {
                s.field("username", username);
            }
            Mechanism::OAuthBearer(_) => {}
        }
        s.finish_non_exhaustive()
    }
}

impl SaslConfig {
    /// PLAIN (RFC 4616): the password travels as it is; use with TLS.
    pub fn plain(username: impl Into<String>, password: impl Into<String>) -> Self {
        Self {
            mechanism: Mechanism::Plain {
                username: username.into(),
                password: password.into(),
            },
        }
    }

    /// SCRAM-SHA-256 (RFC 7677).
    pub fn scram_sha256(username: impl Into<String>, password: impl Into<String>) -> Self {
        Self::scram(ScramHash::Sha256, username, password)
    }

    /// SCRAM-SHA-512.
    pub fn scram_sha512(username: impl Into<String>, password: impl Into<String>) -> Self {
        Self::scram(ScramHash::Sha512, username, password)
    }

    fn scram(hash: ScramHash, username: impl Into<String>, password: impl Into<String>) -> Self {
        Self {
            mechanism: Mechanism::Scram {
                hash,
                username: username.into(),
                password: password.into(),
            },
        }
    }

    /// OAUTHBEARER (RFC 7628) with tokens from `provider`.
    pub fn oauthbearer(provider: impl TokenProvider + 'static) -> Self {
        Self {
            mechanism: Mechanism::OAuthBearer(Arc::new(provider)),
        }
    }

    /// The mechanism by its SASL name (librdkafka's `sasl.mechanism`) with
    /// a username and password; `None` for a name that is not PLAIN,
    /// SCRAM-SHA-256 or SCRAM-SHA-512 (OAUTHBEARER needs a token provider:
    /// [`SaslConfig::oauthbearer`]).
    pub fn with_password(
        mechanism: &str,
        username: impl Into<String>,
        password: impl Into<String>,
    ) -> Option<Self> {
        match mechanism.to_ascii_uppercase().as_str() {
            "PLAIN" => Some(Self::plain(username, password)),
            "SCRAM-SHA-256" => Some(Self::scram_sha256(username, password)),
            "SCRAM-SHA-512" => Some(Self::scram_sha512(username, password)),
            _ => None,
        }
    }

    /// The SASL mechanism name: `PLAIN`, `SCRAM-SHA-256`, `SCRAM-SHA-512`
    /// or `OAUTHBEARER`.
    pub fn mechanism_name(&self) -> &'static str {
        match &self.mechanism {
            Mechanism::Plain { .. } => "PLAIN",
            Mechanism::Scram { hash, .. } => hash.mechanism(),
            Mechanism::OAuthBearer(_) => "OAUTHBEARER",
        }
    }
}

/// Where an exchange stands: what to send next, or done.
enum Exchange {
    /// One message, then the broker's answer ends it.
    Single,
    Scram(ScramClient),
}

/// Authenticates `connection` with `sasl` (SaslHandshake, then
/// SaslAuthenticate rounds). Returns the session lifetime the broker set,
/// if any.
pub(super) async fn authenticate(
    connection: &Connection,
    sasl: &SaslConfig,
) -> Result<Option<Duration>, ConnectionError> {
    let broker = || connection.broker().to_owned();
    let mechanism = sasl.mechanism_name();
    let failed = |message: String| ConnectionError::SaslAuthentication {
        broker: broker(),
        mechanism,
        message,
    };
    if connection
        .versions()
        .version(ApiKey::SaslHandshake)
        .is_err()
    {
        return Err(failed(
            "the broker does not offer SASL on this listener (no SaslHandshake in its \
             ApiVersions): check security.protocol and the port"
                .to_owned(),
        ));
    }
    // A broker that closes the connection instead of answering refuses the
    // exchange (Tansu 0.6 does so for a mechanism it does not enable):
    // retrying would meet the same refusal.
    let closed = |step: &str, e: ConnectionError| match e {
        ConnectionError::ClosedByPeer { .. } => failed(format!(
            "the broker closed the connection in answer to {step} (does it enable {mechanism} \
             for this user on this listener?)"
        )),
        e => e,
    };
    let handshake = connection
        .request_ungated(
            &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(mechanism)),
            RequestOptions::default(),
        )
        .await
        .map_err(|e| closed("SaslHandshake", e))?
        .body;
    let code = ErrorCode::from(handshake.error_code);
    if code == ErrorCode::UnsupportedSaslMechanism {
        return Err(ConnectionError::SaslMechanismUnsupported {
            broker: broker(),
            mechanism,
            enabled: handshake.mechanisms.iter().map(|m| m.to_string()).collect(),
        });
    }
    if !code.is_ok() {
        return Err(failed(format!("SaslHandshake answered {code}")));
    }

    let (mut message, mut exchange) = match &sasl.mechanism {
        Mechanism::Plain { username, password } => (
            plain::initial_response(username, password),
            Exchange::Single,
        ),
        Mechanism::Scram {
            hash,
            username,
            password,
        } => {
            let client = ScramClient::new(*hash, username, password);
            (client.client_first().into_bytes(), Exchange::Scram(client))
        }
        Mechanism::OAuthBearer(provider) => {
            let token = provider
                .token()
                .await
                .map_err(|why| failed(format!("no token from the token provider: {why}")))?;
            let message = oauthbearer::initial_response(&token).ok_or_else(|| {
                failed(
                    "the token provider's token holds characters a bearer token may not".to_owned(),
                )
            })?;
            (message, Exchange::Single)
        }
    };
    // SCRAM takes two rounds; a broker asking for more is not following it.
    for round in 0..3 {
        let response = connection
            .request_ungated(
                &SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(message)),
                RequestOptions::default(),
            )
            .await
            .map_err(|e| closed("SaslAuthenticate", e))?
            .body;
        let code = ErrorCode::from(response.error_code);
        if !code.is_ok() {
            let detail = response
                .error_message
                .as_ref()
                .map(|m| m.to_string())
                .filter(|m| !m.is_empty())
                .unwrap_or_else(|| "no message".to_owned());
            return Err(failed(format!("{code}: {detail}")));
        }
        let lifetime = u64::try_from(response.session_lifetime_ms)
            .ok()
            .filter(|ms| *ms > 0)
            .map(Duration::from_millis);
        match &mut exchange {
            Exchange::Single => return Ok(lifetime),
            Exchange::Scram(client) if round == 0 => {
                message = client
                    .client_final(&response.auth_bytes)
                    .map_err(|e| failed(e.to_string()))?
                    .into_bytes();
            }
            Exchange::Scram(client) => {
                client
                    .finish(&response.auth_bytes)
                    .map_err(|e| failed(e.to_string()))?;
                return Ok(lifetime);
            }
        }
    }
    Err(failed(
        "the exchange did not end after three rounds".to_owned(),
    ))
}

/// When to re-authenticate a session of `lifetime`: after a random 85–95%
/// of it (KIP-368 and the Java client), so that connections opened together
/// do not re-authenticate together.
pub(super) fn reauthentication_delay(lifetime: Duration, unit: f64) -> Duration {
    lifetime.mul_f64(0.85 + 0.10 * unit.clamp(0.0, 1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reauthentication_comes_before_the_end() {
        let life = Duration::from_secs(100);
        assert_eq!(reauthentication_delay(life, 0.0), Duration::from_secs(85));
        assert_eq!(reauthentication_delay(life, 1.0), Duration::from_secs(95));
        assert_eq!(reauthentication_delay(life, 7.0), Duration::from_secs(95));
    }

    #[test]
    fn mechanisms_by_name_and_debug_hides_passwords() {
        let s = SaslConfig::with_password("scram-sha-512", "u", "secret").expect("known");
        assert_eq!(s.mechanism_name(), "SCRAM-SHA-512");
        assert!(!format!("{s:?}").contains("secret"), "{s:?}");
        assert!(SaslConfig::with_password("GSSAPI", "u", "p").is_none());
        let o = SaslConfig::oauthbearer(|| async { Ok::<_, String>("t".to_owned()) });
        assert_eq!(o.mechanism_name(), "OAUTHBEARER");
    }
}
