//! ApiVersions (key 18), v0–v3: the versions this broker serves.
//!
//! A request at a version the broker does not serve is answered with
//! `UNSUPPORTED_VERSION` in a v0 body that still lists the served versions,
//! so the client can retry at a version both sides know.
//!
//! # References
//! - KIP-35 (ApiVersions), KIP-511 (v3, and the v0 response header of every
//!   ApiVersions response).

use bytes::BytesMut;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::ResponseError;

use super::Ctx;
use crate::state::BrokerState;

fn body(broker: Option<&BrokerState>, error_code: i16) -> ApiVersionsResponse {
    let mut response = ApiVersionsResponse::default();
    response.error_code = error_code;
    response.api_keys = broker
        .map(|b| {
            b.versions
                .iter()
                .map(|(key, range)| {
                    let mut v = ApiVersion::default();
                    v.api_key = *key;
                    v.min_version = range.min;
                    v.max_version = range.max;
                    v
                })
                .collect()
        })
        .unwrap_or_default();
    response
}

pub(super) fn handle(ctx: &Ctx<'_>, _request: &ApiVersionsRequest) -> Result<BytesMut, String> {
    let response = {
        let state = ctx.shared.lock();
        body(state.broker(ctx.node_id), ctx.response_error().unwrap_or(0))
    };
    ctx.frame(ApiKey::ApiVersions, &response)
}

/// The answer to an ApiVersions request at a version not served: a v0 body
/// with `UNSUPPORTED_VERSION` and the served versions.
pub(crate) fn unsupported_version_response(
    broker: Option<&BrokerState>,
    correlation_id: i32,
) -> Result<BytesMut, String> {
    let response = body(broker, ResponseError::UnsupportedVersion.code());
    super::frame(ApiKey::ApiVersions, 0, correlation_id, &response)
}
