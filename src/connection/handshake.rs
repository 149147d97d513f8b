//! Opening a connection: dialling, TLS, the `ApiVersions` handshake
//! (KIP-35, KIP-511) and SASL authentication, again before the session's
//! lifetime runs out (KIP-368).

use std::time::Duration;

use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::protocol::StrBytes;

use super::{
    decode_response_frame, dial, not_kafka, sasl, tls, Connection, ConnectionConfig,
    ConnectionError, NegotiatedVersions, SaslConfig, VersionPolicy, VersionRange,
};
use crate::error_code::ErrorCode;

impl Connection {
    /// Connects to `broker` (`host:port`, see
    /// [`BrokerAddress`](super::BrokerAddress) for the forms accepted),
    /// sets `TCP_NODELAY`, performs the TLS handshake if configured,
    /// starts the reader and writer tasks, negotiates API versions and
    /// authenticates with SASL if configured. Connecting (with
    /// the TLS handshake) and the `ApiVersions` answer each have
    /// [`ConnectionConfig::connect_timeout`].
    pub async fn connect(
        broker: impl Into<String>,
        config: ConnectionConfig,
    ) -> Result<Self, ConnectionError> {
        let broker = broker.into();
        let stream = dial::dial(&broker, config.connect_timeout).await?;
        let stream = tls::wrap(
            stream,
            &broker,
            config.security.tls.as_ref(),
            config.connect_timeout,
        )
        .await?;
        let mut connection = Self::start(stream, broker, &config);
        // A connection lost here took no request of the caller's with it:
        // say so, so that even a Produce may be retried.
        let versions = connection
            .handshake(&config.versions, config.connect_timeout)
            .await
            .map_err(tls::refine_first_error)
            .map_err(|e| match e {
                ConnectionError::RequestTimeout {
                    broker, timeout, ..
                } => ConnectionError::HandshakeTimeout { broker, timeout },
                e if e.is_connection_lost() => ConnectionError::HandshakeLost {
                    broker: e.broker().to_owned(),
                    source: Box::new(e),
                },
                e => e,
            })?;
        connection.versions = versions;
        if let Some(sasl) = connection.sasl.clone() {
            let token_timeout = config.connect_timeout;
            connection
                .authenticate(&sasl, token_timeout)
                .await
                .map_err(|e| match e {
                    e if e.is_connection_lost() => ConnectionError::HandshakeLost {
                        broker: e.broker().to_owned(),
                        source: Box::new(e),
                    },
                    e => e,
                })?;
        }
        Ok(connection)
    }

    /// One SASL exchange, waiting at most `token_timeout` for an
    /// OAUTHBEARER token; schedules the next before the session ends.
    async fn authenticate(
        &self,
        sasl: &SaslConfig,
        token_timeout: Duration,
    ) -> Result<(), ConnectionError> {
        let started = tokio::time::Instant::now();
        let lifetime = sasl::authenticate(self, sasl, token_timeout).await?;
        let at = lifetime.map(|l| started + sasl::reauthentication_delay(l, rand::random::<f64>()));
        tracing::debug!(broker = %self.shared.broker, mechanism = sasl.mechanism_name(), ?lifetime, "SASL authenticated");
        *self
            .reauthenticate_at
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = at;
        Ok(())
    }

    fn reauthentication_due(&self) -> bool {
        self.reauthenticate_at
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some_and(|at| tokio::time::Instant::now() >= at)
    }

    /// Re-authenticates when the session is due (KIP-368), waiting for the
    /// requests in flight and holding back new ones meanwhile. A failure
    /// breaks the connection. A token provider has the request timeout to
    /// answer: the connection's requests wait for it.
    pub(super) async fn reauthenticate_if_due(&self) -> Result<(), ConnectionError> {
        let Some(sasl) = &self.sasl else {
            return Ok(());
        };
        if !self.reauthentication_due() {
            return Ok(());
        }
        let _alone = self.gate.write().await;
        if !self.reauthentication_due() {
            return Ok(());
        }
        if let Err(error) = self.authenticate(sasl, self.request_timeout).await {
            self.shared.fail(error.clone());
            self.stop_tasks();
            return Err(error);
        }
        Ok(())
    }

    /// Sends `ApiVersions` and negotiates. Per KIP-511 a broker that does
    /// not know the version sent answers with a v0 body holding error
    /// `UNSUPPORTED_VERSION` and its own range, and the request is retried
    /// once with the highest common version.
    async fn handshake(
        &self,
        policy: &VersionPolicy,
        timeout: Duration,
    ) -> Result<NegotiatedVersions, ConnectionError> {
        let ours = policy
            .range(ApiKey::ApiVersions)
            .unwrap_or_else(|| VersionRange::of_message_types(ApiKey::ApiVersions));
        let mut version = ours.max;
        for _ in 0..2 {
            let response = self.api_versions(version, timeout).await?;
            let code = ErrorCode::from(response.error_code);
            if code == ErrorCode::UnsupportedVersion {
                let theirs = response
                    .api_keys
                    .iter()
                    .find(|k| k.api_key == ApiKey::ApiVersions as i16)
                    .map(|k| VersionRange::new(k.min_version, k.max_version));
                let common = theirs.map(|t| t.intersect(ours)).filter(|r| !r.is_empty());
                match common {
                    Some(common) if common.max < version => {
                        version = common.max;
                        continue;
                    }
                    // A broker before Kafka 2.4 (KIP-511) names no range:
                    // ask again at v0, which every broker answers, as the
                    // Java client does.
                    None if theirs.is_none() && version > 0 && ours.contains(0) => {
                        version = 0;
                        continue;
                    }
                    _ => {
                        return Err(ConnectionError::NoCommonVersion {
                            broker: self.shared.broker.clone(),
                            api: ApiKey::ApiVersions,
                            client: ours,
                            broker_versions: theirs,
                        })
                    }
                }
            }
            if !code.is_ok() {
                return Err(ConnectionError::Handshake {
                    broker: self.shared.broker.clone(),
                    version,
                    code,
                });
            }
            return Ok(policy.negotiate(&self.shared.broker, &response));
        }
        Err(ConnectionError::Handshake {
            broker: self.shared.broker.clone(),
            version,
            code: ErrorCode::UnsupportedVersion,
        })
    }

    /// One `ApiVersions` round trip; a body that does not decode in
    /// `version` is tried as v0 (the KIP-511 fallback answer).
    async fn api_versions(
        &self,
        version: i16,
        timeout: Duration,
    ) -> Result<ApiVersionsResponse, ConnectionError> {
        let mut request = ApiVersionsRequest::default();
        if version >= 3 {
            request.client_software_name = StrBytes::from_static_str("walfetch");
            request.client_software_version = StrBytes::from_static_str(env!("CARGO_PKG_VERSION"));
        }
        let raw = self
            .round_trip(ApiKey::ApiVersions, version, &request, timeout, None)
            .await?;
        match decode_response_frame::<ApiVersionsRequest>(version, raw.payload.clone()) {
            Ok(response) => Ok(response),
            Err(first) => decode_response_frame::<ApiVersionsRequest>(0, raw.payload.clone())
                .ok()
                .filter(|r| r.error_code == ErrorCode::UnsupportedVersion.code())
                .ok_or_else(|| ConnectionError::NotKafka {
                    broker: self.shared.broker.clone(),
                    answered: format!(
                        "a frame that is no ApiVersions v{version} response ({first}): {}",
                        not_kafka::describe(&raw.payload)
                    ),
                }),
        }
    }
}
