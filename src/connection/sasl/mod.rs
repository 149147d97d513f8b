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
//! OAUTHBEARER takes one message when the broker accepts the token. A
//! broker that refuses it answers with error code NONE and an RFC 7628
//! §3.2.2 error JSON (`{"status":"invalid_token"}`) as the server
//! challenge; the client answers `%x01` and the broker then fails the
//! exchange with `SASL_AUTHENTICATION_FAILED`, as Kafka's
//! `OAuthBearerSaslServer` does. The error reports both.
//!
//! The token provider is awaited for at most the connect timeout when
//! connecting and the request timeout when re-authenticating (when the
//! connection's requests wait for it): one that never answers fails the
//! authentication instead of hanging it.
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
//!   (OAUTHBEARER; §3.2.2 for the server's error challenge).

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
    /// The token was sent: an empty answer accepts it, a non-empty one is
    /// the broker's error challenge (RFC 7628 §3.2.2).
    OAuthBearer,
    /// The broker refused the token with this status (its error JSON);
    /// the client sent `%x01` and waits for the final failure.
    OAuthBearerRefused(String),
}

/// Authenticates `connection` with `sasl` (SaslHandshake, then
/// SaslAuthenticate rounds), waiting at most `token_timeout` for an
/// OAUTHBEARER token. Returns the session lifetime the broker set, if any.
pub(super) async fn authenticate(
    connection: &Connection,
    sasl: &SaslConfig,
    token_timeout: Duration,
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
            let token = tokio::time::timeout(token_timeout, provider.token())
                .await
                .map_err(|_| {
                    failed(format!(
                        "the token provider gave no token within {token_timeout:?}"
                    ))
                })?
                .map_err(|why| failed(format!("no token from the token provider: {why}")))?;
            let message = oauthbearer::initial_response(&token).ok_or_else(|| {
                failed(
                    "the token provider's token holds characters a bearer token may not".to_owned(),
                )
            })?;
            (message, Exchange::OAuthBearer)
        }
    };
    // SCRAM and a refused OAUTHBEARER token take two rounds; a broker
    // asking for more is not following the mechanism.
    for round in 0..3 {
        let response = connection
            .request_ungated(
                &SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(message)),
                RequestOptions::default(),
            )
            .await
            .map_err(|e| match (&exchange, e) {
                (Exchange::OAuthBearerRefused(status), ConnectionError::ClosedByPeer { .. }) => {
                    failed(format!(
                        "the broker refused the token: {status}, then closed the connection"
                    ))
                }
                (_, e) => closed("SaslAuthenticate", e),
            })?
            .body;
        let code = ErrorCode::from(response.error_code);
        if !code.is_ok() {
            let detail = response
                .error_message
                .as_ref()
                .map(|m| m.to_string())
                .filter(|m| !m.is_empty())
                .unwrap_or_else(|| "no message".to_owned());
            return Err(failed(match &exchange {
                Exchange::OAuthBearerRefused(status) => {
                    format!("the broker refused the token: {status}; then {code}: {detail}")
                }
                _ => format!("{code}: {detail}"),
            }));
        }
        let lifetime = u64::try_from(response.session_lifetime_ms)
            .ok()
            .filter(|ms| *ms > 0)
            .map(Duration::from_millis);
        match &mut exchange {
            Exchange::Single => return Ok(lifetime),
            Exchange::OAuthBearer if response.auth_bytes.is_empty() => return Ok(lifetime),
            Exchange::OAuthBearer => {
                // RFC 7628 §3.2.2: the server's error challenge, answered
                // with %x01 so that the broker ends the exchange.
                let status = String::from_utf8_lossy(&response.auth_bytes).into_owned();
                exchange = Exchange::OAuthBearerRefused(status);
                message = oauthbearer::ERROR_RESPONSE.to_vec();
            }
            Exchange::OAuthBearerRefused(status) => {
                return Err(failed(format!(
                    "the broker refused the token: {status}; then answered the client's %x01 \
                     without an error"
                )));
            }
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
    use bytes::{Buf, BufMut, BytesMut};
    use kafka_protocol::messages::api_versions_response::ApiVersion;
    use kafka_protocol::messages::{
        ApiVersionsResponse, MetadataRequest, ResponseHeader, SaslAuthenticateResponse,
        SaslHandshakeResponse,
    };
    use kafka_protocol::protocol::{Encodable, HeaderVersion};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    use super::super::{ConnectionConfig, Security};
    use super::*;

    /// Reads one request frame: its API key, version, correlation id and
    /// body (after the header's client id).
    async fn read_request(socket: &mut TcpStream) -> Option<(i16, i16, i32, Vec<u8>)> {
        let len = socket.read_i32().await.ok()?;
        let mut buf = vec![0u8; usize::try_from(len).ok()?];
        socket.read_exact(&mut buf).await.ok()?;
        let mut b = &buf[..];
        let (key, version, id) = (b.get_i16(), b.get_i16(), b.get_i32());
        let client_id = usize::try_from(b.get_i16()).unwrap_or(0);
        Some((key, version, id, b.get(client_id..)?.to_vec()))
    }

    async fn send<B: Encodable + HeaderVersion>(
        socket: &mut TcpStream,
        correlation_id: i32,
        version: i16,
        body: &B,
    ) {
        let mut payload = BytesMut::new();
        ResponseHeader::default()
            .with_correlation_id(correlation_id)
            .encode(&mut payload, B::header_version(version))
            .expect("encodes");
        body.encode(&mut payload, version).expect("encodes");
        let mut frame = BytesMut::new();
        frame.put_i32(i32::try_from(payload.len()).expect("small"));
        frame.extend_from_slice(&payload);
        let _ = socket.write_all(&frame).await;
    }

    /// A broker whose OAUTHBEARER server side refuses every token as
    /// Kafka's `OAuthBearerSaslServer` does: error code NONE with the RFC
    /// 7628 §3.2.2 error JSON as the challenge, then, at the client's
    /// `%x01`, SASL_AUTHENTICATION_FAILED. Any other request while the
    /// exchange is open closes the connection (`IllegalSaslStateException`).
    /// SaslAuthenticate is answered in v0, whose request body is the auth
    /// bytes with a length prefix.
    async fn kafka_like_oauth_broker() -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("address").to_string();
        tokio::spawn(async move {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let mut challenged = false;
            while let Some((key, version, id, body)) = read_request(&mut socket).await {
                match ApiKey::try_from(key) {
                    Ok(ApiKey::ApiVersions) => {
                        let range = |k: ApiKey, max| {
                            ApiVersion::default()
                                .with_api_key(k as i16)
                                .with_min_version(0)
                                .with_max_version(max)
                        };
                        let body = ApiVersionsResponse::default().with_api_keys(vec![
                            range(ApiKey::ApiVersions, 3),
                            range(ApiKey::Metadata, 12),
                            range(ApiKey::SaslHandshake, 1),
                            range(ApiKey::SaslAuthenticate, 0),
                        ]);
                        send(&mut socket, id, version, &body).await;
                    }
                    Ok(ApiKey::SaslHandshake) => {
                        let body = SaslHandshakeResponse::default()
                            .with_mechanisms(vec![StrBytes::from_static_str("OAUTHBEARER")]);
                        send(&mut socket, id, version, &body).await;
                    }
                    Ok(ApiKey::SaslAuthenticate) if !challenged => {
                        challenged = true;
                        let body = SaslAuthenticateResponse::default()
                            .with_auth_bytes(Bytes::from_static(br#"{"status":"invalid_token"}"#));
                        send(&mut socket, id, version, &body).await;
                    }
                    Ok(ApiKey::SaslAuthenticate) if body == [0, 0, 0, 1, 1] => {
                        let body = SaslAuthenticateResponse::default()
                            .with_error_code(ErrorCode::SaslAuthenticationFailed.code())
                            .with_error_message(Some(StrBytes::from_static_str(
                                r#"{"status":"invalid_token"}"#,
                            )));
                        send(&mut socket, id, version, &body).await;
                        return;
                    }
                    // Not %x01, or a request in the middle of the exchange:
                    // the broker closes the connection.
                    _ => return,
                }
            }
        });
        address
    }

    /// A refused OAUTHBEARER token fails the connection with a SASL
    /// authentication error giving the broker's status. The first
    /// SaslAuthenticate answer with error code NONE once ended the exchange
    /// as a success whatever it carried: the connection was reported
    /// authenticated and the first request met a closed connection (a
    /// retriable "connection lost" instead of the fatal failure).
    #[tokio::test]
    async fn a_refused_oauthbearer_token_fails_authentication() {
        let address = kafka_like_oauth_broker().await;
        let config = ConnectionConfig {
            security: Security::sasl_plaintext(SaslConfig::oauthbearer(|| async {
                Ok::<_, String>("expired.token.value".to_owned())
            })),
            request_timeout: Duration::from_secs(2),
            ..ConnectionConfig::default()
        };
        match Connection::connect(address.clone(), config).await {
            Err(ConnectionError::SaslAuthentication {
                broker,
                mechanism,
                message,
            }) => {
                assert_eq!(
                    (broker.as_str(), mechanism),
                    (address.as_str(), "OAUTHBEARER")
                );
                assert_eq!(
                    message,
                    r#"the broker refused the token: {"status":"invalid_token"}; then SASL_AUTHENTICATION_FAILED (58): {"status":"invalid_token"}"#
                );
            }
            Err(other) => panic!("expected a SASL authentication error, got {other:?}"),
            Ok(connection) => {
                let next = connection.request(&MetadataRequest::default()).await;
                panic!(
                    "the refused token was taken as authenticated; the first request then got: \
                     {:?}",
                    next.map(|_| ())
                );
            }
        }
    }

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
