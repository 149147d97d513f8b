//! SASL on the scripted brokers: SaslHandshake (key 17) and
//! SaslAuthenticate (key 36) with PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and
//! OAUTHBEARER, per connection.
//!
//! As a Kafka broker does, a connection of a cluster built with
//! [`crate::ClusterBuilder::sasl`] serves only ApiVersions and the SASL
//! requests until it is authenticated, and is closed on any other request;
//! a failed authentication is answered `SASL_AUTHENTICATION_FAILED` (58)
//! with a message, then the connection is closed; an unknown mechanism is
//! answered `UNSUPPORTED_SASL_MECHANISM` (33) with the enabled ones. An
//! OAUTHBEARER token not accepted is refused as Kafka's
//! `OAuthBearerSaslServer` does (RFC 7628 §3.2.2): error code NONE with the
//! error JSON `{"status":"invalid_token"}` as the server challenge, then,
//! once the client answers `%x01`, `SASL_AUTHENTICATION_FAILED` with that
//! JSON as the message, and the connection is closed. With a
//! session lifetime, the final SaslAuthenticate response (v1+) carries it,
//! the client may authenticate again on the same connection, and a request
//! other than ApiVersions/SASL after the session expired closes the
//! connection (KIP-368).
//!
//! # References
//! - KIP-152 (SaslHandshake v1 + SaslAuthenticate), KIP-368
//!   (re-authentication, `session_lifetime_ms`), KIP-84 (SCRAM), KIP-255
//!   (OAUTHBEARER).
//! - RFC 4616 (PLAIN), RFC 5802 / RFC 7677 (SCRAM), RFC 7628 (OAUTHBEARER;
//!   §3.2.2 for the error challenge).

mod scram;

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, RequestHeader, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
    SaslHandshakeResponse,
};
use kafka_protocol::protocol::{Decodable, StrBytes};
use tokio::time::Instant;

use crate::versions::VersionRange;
use scram::{Hash, ScramServer};

/// SaslHandshake versions served (v1: the exchange travels in
/// SaslAuthenticate).
pub(crate) const HANDSHAKE_VERSIONS: VersionRange = VersionRange::new(1, 1);
/// SaslAuthenticate versions served.
pub(crate) const AUTHENTICATE_VERSIONS: VersionRange = VersionRange::new(0, 2);

const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
const ILLEGAL_SASL_STATE: i16 = 34;
const SASL_AUTHENTICATION_FAILED: i16 = 58;

/// The RFC 7628 §3.2.2 error JSON Kafka's broker sends for a token it does
/// not accept.
const OAUTH_INVALID_TOKEN: &str = r#"{"status":"invalid_token"}"#;

/// The SASL settings of a scripted cluster: enabled mechanisms, users and
/// their passwords, accepted OAUTHBEARER tokens, the session lifetime.
#[derive(Debug, Clone)]
pub struct SaslServer {
    mechanisms: Vec<String>,
    users: BTreeMap<String, String>,
    tokens: Vec<String>,
    session_lifetime: Option<Duration>,
}

impl Default for SaslServer {
    fn default() -> Self {
        Self::new()
    }
}

impl SaslServer {
    /// PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 enabled, no user yet, no
    /// session lifetime.
    pub fn new() -> Self {
        Self {
            mechanisms: ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
                .map(str::to_owned)
                .to_vec(),
            users: BTreeMap::new(),
            tokens: Vec::new(),
            session_lifetime: None,
        }
    }

    /// Enables exactly `mechanisms` (names as in SaslHandshake).
    pub fn mechanisms(mut self, mechanisms: &[&str]) -> Self {
        self.mechanisms = mechanisms.iter().map(|m| (*m).to_owned()).collect();
        self
    }

    /// Adds a user for PLAIN and SCRAM.
    pub fn user(mut self, name: impl Into<String>, password: impl Into<String>) -> Self {
        self.users.insert(name.into(), password.into());
        self
    }

    /// Accepts `token` with OAUTHBEARER (and enables OAUTHBEARER).
    pub fn oauth_token(mut self, token: impl Into<String>) -> Self {
        self.tokens.push(token.into());
        if !self.mechanisms.iter().any(|m| m == "OAUTHBEARER") {
            self.mechanisms.push("OAUTHBEARER".to_owned());
        }
        self
    }

    /// Gives each authenticated session `lifetime` (sent as
    /// `session_lifetime_ms`); past it the connection must authenticate
    /// again before any other request.
    pub fn session_lifetime(mut self, lifetime: Duration) -> Self {
        self.session_lifetime = Some(lifetime);
        self
    }
}

/// Where one connection's authentication stands.
#[derive(Debug)]
enum Stage {
    /// Waiting for SaslHandshake.
    Handshake,
    /// The mechanism is chosen; waiting for its first message.
    Chosen(String),
    /// SCRAM's server-first was sent.
    Scram(ScramServer),
    /// An OAUTHBEARER token was refused with this error JSON; waiting for
    /// the client's `%x01`.
    OAuthRefused(&'static str),
}

/// One connection's SASL state.
#[derive(Debug)]
pub(crate) struct ConnectionAuth {
    server: std::sync::Arc<SaslServer>,
    stage: Stage,
    /// `Some(None)`: authenticated for good; `Some(Some(t))`: until `t`.
    authenticated: Option<Option<Instant>>,
}

/// What the connection does with a SASL request.
pub(crate) struct Answer {
    /// The response frame.
    pub(crate) reply: Option<BytesMut>,
    /// Whether to close the connection after it.
    pub(crate) close: bool,
}

impl ConnectionAuth {
    pub(crate) fn new(server: std::sync::Arc<SaslServer>) -> Self {
        Self {
            server,
            stage: Stage::Handshake,
            authenticated: None,
        }
    }

    /// Whether a request other than ApiVersions/SASL may be served now.
    pub(crate) fn allows_requests(&self) -> bool {
        match self.authenticated {
            Some(None) => true,
            Some(Some(until)) => Instant::now() < until,
            None => false,
        }
    }

    /// Handles a SaslHandshake or SaslAuthenticate request frame (after its
    /// first 8 header bytes were peeked).
    pub(crate) fn handle(
        &mut self,
        api_key: ApiKey,
        version: i16,
        correlation_id: i32,
        mut frame: Bytes,
    ) -> Answer {
        let close = Answer {
            reply: None,
            close: true,
        };
        let served = match api_key {
            ApiKey::SaslHandshake => HANDSHAKE_VERSIONS,
            _ => AUTHENTICATE_VERSIONS,
        };
        if !served.contains(version)
            || RequestHeader::decode(&mut frame, api_key.request_header_version(version)).is_err()
        {
            return close;
        }
        let reply = |body: Result<BytesMut, String>, close: bool| match body {
            Ok(bytes) => Answer {
                reply: Some(bytes),
                close,
            },
            Err(error) => {
                tracing::error!(%error, "cannot answer SASL request");
                Answer {
                    reply: None,
                    close: true,
                }
            }
        };
        if api_key == ApiKey::SaslHandshake {
            let Ok(request) = SaslHandshakeRequest::decode(&mut frame, version) else {
                return close;
            };
            let mechanism = request.mechanism.to_string();
            let enabled = self.server.mechanisms.contains(&mechanism);
            let response = SaslHandshakeResponse::default()
                .with_error_code(if enabled {
                    0
                } else {
                    UNSUPPORTED_SASL_MECHANISM
                })
                .with_mechanisms(
                    self.server
                        .mechanisms
                        .iter()
                        .map(|m| StrBytes::from_string(m.clone()))
                        .collect(),
                );
            if enabled {
                self.stage = Stage::Chosen(mechanism);
            }
            let body =
                crate::handlers::frame(ApiKey::SaslHandshake, version, correlation_id, &response);
            return reply(body, !enabled);
        }
        let Ok(request) = SaslAuthenticateRequest::decode(&mut frame, version) else {
            return close;
        };
        let step = self.step(&request.auth_bytes);
        let response = match step {
            Ok(Step::Continue(bytes)) => SaslAuthenticateResponse::default().with_auth_bytes(bytes),
            Ok(Step::Done(bytes)) => {
                let lifetime = self.server.session_lifetime;
                self.authenticated = Some(lifetime.map(|l| Instant::now() + l));
                self.stage = Stage::Handshake;
                let mut response = SaslAuthenticateResponse::default().with_auth_bytes(bytes);
                if version >= 1 {
                    response.session_lifetime_ms =
                        lifetime.map_or(0, |l| i64::try_from(l.as_millis()).unwrap_or(i64::MAX));
                }
                response
            }
            Err((code, message)) => {
                self.stage = Stage::Handshake;
                let body = crate::handlers::frame(
                    ApiKey::SaslAuthenticate,
                    version,
                    correlation_id,
                    &SaslAuthenticateResponse::default()
                        .with_error_code(code)
                        .with_error_message(Some(StrBytes::from_string(message))),
                );
                return reply(body, true);
            }
        };
        let body =
            crate::handlers::frame(ApiKey::SaslAuthenticate, version, correlation_id, &response);
        reply(body, false)
    }

    fn step(&mut self, message: &[u8]) -> Result<Step, (i16, String)> {
        let failed = |mechanism: &str, why: String| {
            tracing::debug!(mechanism, why, "SASL authentication failed");
            (
                SASL_AUTHENTICATION_FAILED,
                format!(
                    "Authentication failed during authentication due to invalid credentials \
                     with SASL mechanism {mechanism}"
                ),
            )
        };
        match std::mem::replace(&mut self.stage, Stage::Handshake) {
            Stage::Handshake => Err((
                ILLEGAL_SASL_STATE,
                "SaslAuthenticate before SaslHandshake".to_owned(),
            )),
            Stage::Chosen(mechanism) => match mechanism.as_str() {
                "PLAIN" => {
                    let mut parts = message.split(|b| *b == 0);
                    let (_authzid, user, password) = (parts.next(), parts.next(), parts.next());
                    let ok = match (user, password, parts.next()) {
                        (Some(user), Some(password), None) => self
                            .server
                            .users
                            .get(String::from_utf8_lossy(user).as_ref())
                            .is_some_and(|p| p.as_bytes() == password),
                        _ => false,
                    };
                    if ok {
                        Ok(Step::Done(Bytes::new()))
                    } else {
                        Err(failed("PLAIN", "wrong user or password".to_owned()))
                    }
                }
                "SCRAM-SHA-256" | "SCRAM-SHA-512" => {
                    let hash = if mechanism == "SCRAM-SHA-256" {
                        Hash::Sha256
                    } else {
                        Hash::Sha512
                    };
                    let users = &self.server.users;
                    let (exchange, server_first) =
                        ScramServer::start(hash, message, |u| users.get(u).cloned())
                            .map_err(|why| failed(&mechanism, why))?;
                    self.stage = Stage::Scram(exchange);
                    Ok(Step::Continue(Bytes::from(server_first)))
                }
                "OAUTHBEARER" => {
                    let text = String::from_utf8_lossy(message);
                    let token = text
                        .strip_prefix("n,,\u{1}auth=Bearer ")
                        .and_then(|rest| rest.strip_suffix("\u{1}\u{1}"));
                    if token.is_some_and(|t| self.server.tokens.iter().any(|k| k == t)) {
                        Ok(Step::Done(Bytes::new()))
                    } else {
                        // Kafka answers the error JSON as a challenge, with
                        // no error code, and fails at the client's %x01.
                        tracing::debug!("OAUTHBEARER token not accepted");
                        self.stage = Stage::OAuthRefused(OAUTH_INVALID_TOKEN);
                        Ok(Step::Continue(Bytes::from_static(
                            OAUTH_INVALID_TOKEN.as_bytes(),
                        )))
                    }
                }
                other => Err(failed(other, "mechanism not implemented".to_owned())),
            },
            Stage::Scram(exchange) => exchange
                .finish(message)
                .map(|server_final| Step::Done(Bytes::from(server_final)))
                .map_err(|why| failed("SCRAM", why)),
            // Kafka fails with the error JSON as the message at the
            // client's %x01; anything else is no valid answer either.
            Stage::OAuthRefused(status) if message == b"\x01" => {
                Err((SASL_AUTHENTICATION_FAILED, status.to_owned()))
            }
            Stage::OAuthRefused(_) => Err(failed(
                "OAUTHBEARER",
                "no %x01 after the error challenge".to_owned(),
            )),
        }
    }
}

enum Step {
    /// Send these bytes; more messages follow.
    Continue(Bytes),
    /// Authenticated; send these bytes.
    Done(Bytes),
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A token not accepted is refused as Kafka's `OAuthBearerSaslServer`
    /// does: no error code and the error JSON as the challenge, then
    /// SASL_AUTHENTICATION_FAILED at the client's %x01. The testkit once
    /// answered SASL_AUTHENTICATION_FAILED at once, which hid a client
    /// taking the challenge for success.
    #[test]
    fn a_refused_oauthbearer_token_is_challenged_as_kafka_does() {
        let server = std::sync::Arc::new(SaslServer::new().oauth_token("good"));
        let mut auth = ConnectionAuth::new(server);
        auth.stage = Stage::Chosen("OAUTHBEARER".to_owned());
        match auth.step(b"n,,\x01auth=Bearer bad\x01\x01") {
            Ok(Step::Continue(challenge)) => {
                assert_eq!(&challenge[..], br#"{"status":"invalid_token"}"#);
            }
            Ok(Step::Done(_)) => panic!("a bad token accepted"),
            Err(e) => panic!("refused at once: {e:?}"),
        }
        assert!(!auth.allows_requests());
        match auth.step(b"\x01") {
            Err((code, message)) => {
                assert_eq!(code, SASL_AUTHENTICATION_FAILED);
                assert_eq!(message, r#"{"status":"invalid_token"}"#);
            }
            Ok(_) => panic!("the %x01 must end the exchange with an error"),
        }

        auth.stage = Stage::Chosen("OAUTHBEARER".to_owned());
        assert!(matches!(
            auth.step(b"n,,\x01auth=Bearer good\x01\x01"),
            Ok(Step::Done(_))
        ));
    }
}
