//! The PLAIN mechanism's one message: `authzid NUL authcid NUL passwd`,
//! with no authorization identity (Kafka takes the username).
//!
//! PLAIN sends the password as it is: use it over TLS (`SASL_SSL`).
//!
//! # References
//! - RFC 4616 (PLAIN), §2.

/// The PLAIN initial response for `username` and `password`.
pub(crate) fn initial_response(username: &str, password: &str) -> Vec<u8> {
    let mut message = Vec::with_capacity(2 + username.len() + password.len());
    message.push(0);
    message.extend_from_slice(username.as_bytes());
    message.push(0);
    message.extend_from_slice(password.as_bytes());
    message
}

#[cfg(test)]
mod tests {
    #[test]
    fn rfc4616_shape() {
        assert_eq!(
            super::initial_response("tim", "tanstaaftanstaaf"),
            b"\0tim\0tanstaaftanstaaf"
        );
    }
}
