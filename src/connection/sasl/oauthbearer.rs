//! The OAUTHBEARER mechanism's client first message, carrying a bearer
//! token the caller's [`super::TokenProvider`] supplies.
//!
//! The message is the GS2 header `n,,` then `auth=Bearer TOKEN` between
//! `\x01` separators, ended by `\x01\x01`. A broker that refuses the token
//! answers with an error JSON (`{"status":"invalid_token"}`) as its
//! challenge; the client then sends [`ERROR_RESPONSE`] and the broker fails
//! the exchange (Kafka: `SASL_AUTHENTICATION_FAILED`).
//!
//! # References
//! - RFC 7628 (OAUTHBEARER), §3.1 (client response), §3.2.2 (server's
//!   error response, answered by the client's `%x01`).
//! - KIP-255 (OAUTHBEARER in Kafka).

/// The client first message for `token`; `None` when the token holds a
/// character RFC 6750 does not allow in a bearer token (it would break the
/// message's framing).
pub(crate) fn initial_response(token: &str) -> Option<Vec<u8>> {
    let valid = !token.is_empty()
        && token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~+/=".contains(&b));
    valid.then(|| format!("n,,\x01auth=Bearer {token}\x01\x01").into_bytes())
}

/// The client's answer to the server's error challenge (RFC 7628 §3.2.2:
/// a single `%x01`), after which the broker reports the failure.
pub(crate) const ERROR_RESPONSE: &[u8] = b"\x01";

#[cfg(test)]
mod tests {
    #[test]
    fn rfc7628_shape() {
        assert_eq!(
            super::initial_response("vF9dft4qmT").expect("valid"),
            b"n,,\x01auth=Bearer vF9dft4qmT\x01\x01"
        );
        assert_eq!(super::initial_response("a\x01b"), None);
        assert_eq!(super::initial_response(""), None);
    }
}
