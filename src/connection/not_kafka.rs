//! Telling a peer that is not a Kafka broker from a broken connection.
//!
//! The first frame a connection reads answers its `ApiVersions` request.
//! A Kafka broker's answer is a few hundred bytes to a few KiB; a peer that
//! speaks another protocol answers with text or a TLS record whose first
//! four bytes, read as a length prefix, are absurd (`HTTP` is 1 213 486 160
//! bytes) or negative. So the first frame is read under a small limit
//! ([`FIRST_FRAME_MAX_BYTES`]), and a framing error on it becomes
//! [`ConnectionError::NotKafka`], showing what the peer sent, instead of a
//! lost connection to retry. Later frames are read under the configured
//! limit, and a framing error there stays a broken connection.

use super::ConnectionError;

/// The largest first frame (the `ApiVersions` answer) accepted: far above
/// any broker's answer, far below what text read as a length gives.
pub(crate) const FIRST_FRAME_MAX_BYTES: usize = 1 << 20;

/// Bytes of the peer's answer shown in [`ConnectionError::NotKafka`].
const SHOWN: usize = 48;

/// The error for `error` met on the first frame, `buffered` being what
/// had arrived: [`ConnectionError::NotKafka`] for a framing error, `error`
/// itself for anything else (the peer closing or resetting the
/// connection, an I/O error).
pub(crate) fn first_frame_error(error: ConnectionError, buffered: &[u8]) -> ConnectionError {
    let garbled = match &error {
        // A plausible length over a configured limit below the first
        // frame's (`ConnectionConfig::max_frame_bytes`) is that limit's
        // doing, not a peer speaking another protocol.
        ConnectionError::FrameTooLarge { length, .. } => *length > FIRST_FRAME_MAX_BYTES,
        ConnectionError::NegativeFrameLength { .. }
        | ConnectionError::FrameTooShort { .. }
        | ConnectionError::UnexpectedCorrelationId { .. } => true,
        // A length prefix past the first-frame limit is refused before
        // its bytes are awaited; a cut below it may be a broker going down.
        ConnectionError::TruncatedFrame { expected, .. } => {
            expected.is_some_and(|e| e > FIRST_FRAME_MAX_BYTES)
        }
        _ => false,
    };
    if !garbled {
        return error;
    }
    ConnectionError::NotKafka {
        broker: error.broker().to_owned(),
        answered: describe(buffered),
    }
}

/// What a peer sent, for a message: its first line quoted when it is text,
/// its first bytes in hex otherwise, with a guess at the protocol.
pub(crate) fn describe(bytes: &[u8]) -> String {
    if bytes.is_empty() {
        return "nothing".to_owned();
    }
    let shown = &bytes[..bytes.len().min(SHOWN)];
    let more = if bytes.len() > SHOWN { " ..." } else { "" };
    let tls = matches!(bytes, [0x15 | 0x16, 0x03, ..]);
    let line = shown
        .split(|b| *b == b'\n' || *b == b'\r')
        .next()
        .unwrap_or_default();
    let text = !line.is_empty() && line.iter().all(|b| (0x20..0x7f).contains(b));
    if text && !tls {
        let line = String::from_utf8_lossy(line);
        let guess = if line.starts_with("HTTP/") {
            " (an HTTP server)"
        } else {
            ""
        };
        return format!("{line:?}{guess}");
    }
    let hex: Vec<String> = shown.iter().map(|b| format!("{b:02x}")).collect();
    let guess = if tls {
        " (a TLS record: the port expects TLS, -X security.protocol=SSL)"
    } else {
        ""
    };
    format!("bytes {}{more}{guess}", hex.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn too_large(length: usize) -> ConnectionError {
        ConnectionError::FrameTooLarge {
            broker: "b:1".into(),
            length,
            max: FIRST_FRAME_MAX_BYTES,
        }
    }

    #[test]
    fn framing_errors_on_the_first_frame_mean_not_kafka() {
        let http = b"HTTP/1.1 400 Bad Request\r\n\r\n";
        let error = first_frame_error(too_large(1_213_486_160), http);
        assert_eq!(
            error.to_string(),
            "b:1 is not a Kafka broker: it answered ApiVersions with \
             \"HTTP/1.1 400 Bad Request\" (an HTTP server)"
        );
        let alert = [0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x32];
        let error = first_frame_error(too_large(0x1503_0300), &alert);
        let message = error.to_string();
        assert!(
            message.contains("bytes 15 03 03 00 02 02 32 (a TLS record"),
            "{message}"
        );
        let negative = ConnectionError::NegativeFrameLength {
            broker: "b:1".into(),
            length: -1,
        };
        assert!(matches!(
            first_frame_error(negative, &[0xff; 60]),
            ConnectionError::NotKafka { ref answered, .. } if answered.ends_with("ff ff ...")
        ));
        let truncated = |expected| ConnectionError::TruncatedFrame {
            broker: "b:1".into(),
            received: 8,
            expected: Some(expected),
        };
        assert!(matches!(
            first_frame_error(truncated(FIRST_FRAME_MAX_BYTES + 1), &[]),
            ConnectionError::NotKafka { .. }
        ));
        // A cut inside a plausible frame, or the peer closing, is a lost
        // connection still.
        assert!(matches!(
            first_frame_error(truncated(100), &[]),
            ConnectionError::TruncatedFrame { .. }
        ));
        // A broker's answer over a small configured limit is that limit,
        // said so: it once read "b:1 is not a Kafka broker".
        let over_the_limit = ConnectionError::FrameTooLarge {
            broker: "b:1".into(),
            length: 400,
            max: 0,
        };
        let error = first_frame_error(over_the_limit, &[0, 0, 1, 0x90]);
        assert!(
            error
                .to_string()
                .contains("400-byte response frame, over the 0-byte limit"),
            "{error}"
        );
        let closed = ConnectionError::ClosedByPeer {
            broker: "b:1".into(),
        };
        assert!(matches!(
            first_frame_error(closed, &[]),
            ConnectionError::ClosedByPeer { .. }
        ));
    }
}
