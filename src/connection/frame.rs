//! Length-prefixed framing: every Kafka request and response is a big-endian
//! `int32` size followed by that many bytes.
//!
//! Reading is two-phase, as in mini-redis: [`check_frame`] decides from the
//! bytes buffered so far whether a whole frame is there (`Complete`), more
//! bytes are needed (`Incomplete`), or the length prefix is unacceptable (an
//! error: a negative length or one over the configured maximum is refused
//! before anything is allocated for it). [`FrameReader`] is the buffered
//! read loop around it; the frames it yields are [`Bytes`] views of its
//! read buffer, so a Fetch response's record batches reach the codec without
//! a copy.
//!
//! # References
//! - Kafka protocol guide, "Common Request and Response Structure":
//!   <https://kafka.apache.org/protocol#protocol_common>

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable};
use tokio::io::{AsyncRead, AsyncReadExt};

use super::ConnectionError;

/// Bytes of the length prefix.
pub const LENGTH_PREFIX: usize = 4;

/// Default limit for one response frame: 128 MiB, comfortably above the
/// 50 MiB default `fetch.max.bytes` of Kafka consumers.
pub const DEFAULT_MAX_FRAME_BYTES: usize = 128 * 1024 * 1024;

/// How much the read buffer grows at most per read while a frame is
/// incomplete, beyond what is already buffered: a length prefix alone never
/// makes the reader allocate the whole frame up front.
const READ_CHUNK: usize = 64 * 1024;

/// What the buffered bytes hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameStatus {
    /// A whole frame: `payload_len` bytes after the length prefix.
    Complete {
        /// The frame's payload length (prefix excluded).
        payload_len: usize,
    },
    /// More bytes are needed.
    Incomplete {
        /// The frame's full size (prefix included), once the prefix arrived.
        frame_len: Option<usize>,
    },
}

/// Checks whether `buf` starts with a complete frame, without consuming or
/// allocating anything. `peer` names the other side in errors.
pub fn check_frame(
    buf: &[u8],
    max_frame_bytes: usize,
    peer: &str,
) -> Result<FrameStatus, ConnectionError> {
    let Some(prefix) = buf.get(..LENGTH_PREFIX) else {
        return Ok(FrameStatus::Incomplete { frame_len: None });
    };
    let length = i32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]);
    let Ok(payload_len) = usize::try_from(length) else {
        return Err(ConnectionError::NegativeFrameLength {
            broker: peer.to_owned(),
            length,
        });
    };
    if payload_len > max_frame_bytes {
        return Err(ConnectionError::FrameTooLarge {
            broker: peer.to_owned(),
            length: payload_len,
            max: max_frame_bytes,
        });
    }
    let frame_len = LENGTH_PREFIX + payload_len;
    if buf.len() < frame_len {
        Ok(FrameStatus::Incomplete {
            frame_len: Some(frame_len),
        })
    } else {
        Ok(FrameStatus::Complete { payload_len })
    }
}

/// A buffered reader of length-prefixed frames.
#[derive(Debug)]
pub struct FrameReader<R> {
    reader: R,
    buffer: BytesMut,
    max_frame_bytes: usize,
    peer: String,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    /// A reader of frames of at most `max_frame_bytes` payload bytes from
    /// `reader`; `peer` names the other side in errors.
    pub fn new(reader: R, peer: impl Into<String>, max_frame_bytes: usize) -> Self {
        Self {
            reader,
            buffer: BytesMut::with_capacity(8 * 1024),
            max_frame_bytes,
            peer: peer.into(),
        }
    }

    /// Reads the next frame's payload (length prefix removed).
    ///
    /// `Ok(None)` when the peer closed the connection cleanly between two
    /// frames; closing in the middle of a frame is
    /// [`ConnectionError::TruncatedFrame`] ("connection reset by peer").
    pub async fn read_frame(&mut self) -> Result<Option<Bytes>, ConnectionError> {
        loop {
            match check_frame(&self.buffer, self.max_frame_bytes, &self.peer)? {
                FrameStatus::Complete { payload_len } => {
                    self.buffer.advance(LENGTH_PREFIX);
                    return Ok(Some(self.buffer.split_to(payload_len).freeze()));
                }
                FrameStatus::Incomplete { frame_len } => {
                    let missing = frame_len.unwrap_or(LENGTH_PREFIX) - self.buffer.len();
                    let spare = self.buffer.capacity() - self.buffer.len();
                    if spare < missing {
                        self.buffer
                            .reserve(missing.min(self.buffer.len().max(READ_CHUNK)));
                    }
                    let read = self.reader.read_buf(&mut self.buffer).await.map_err(|e| {
                        ConnectionError::Io {
                            broker: self.peer.clone(),
                            source: e.into(),
                        }
                    })?;
                    if read == 0 {
                        if self.buffer.is_empty() {
                            return Ok(None);
                        }
                        return Err(ConnectionError::TruncatedFrame {
                            broker: self.peer.clone(),
                            received: self.buffer.len(),
                            expected: frame_len,
                        });
                    }
                }
            }
        }
    }

    /// The bytes read but not yet handed out as a frame (what a peer sent
    /// when its frame was refused).
    pub fn buffered(&self) -> &[u8] {
        &self.buffer
    }

    /// Changes the largest frame accepted from the next frame on.
    pub fn set_max_frame_bytes(&mut self, max_frame_bytes: usize) {
        self.max_frame_bytes = max_frame_bytes;
    }

    /// The largest frame accepted.
    pub fn max_frame_bytes(&self) -> usize {
        self.max_frame_bytes
    }

    /// The underlying reader.
    pub fn get_ref(&self) -> &R {
        &self.reader
    }
}

/// Encodes a request frame: length prefix, request header (in
/// `header_version`), body (in `version`). The error is kafka-protocol's
/// message (a field set that the version lacks, a string too long, ...).
pub fn encode_request<T: Encodable>(
    header: &RequestHeader,
    header_version: i16,
    body: &T,
    version: i16,
) -> Result<Bytes, String> {
    let size = header
        .compute_size(header_version)
        .map_err(|e| e.to_string())?
        + body.compute_size(version).map_err(|e| e.to_string())?;
    let length = i32::try_from(size)
        .map_err(|_| format!("request of {size} bytes is too large for one frame"))?;
    let mut buf = BytesMut::with_capacity(LENGTH_PREFIX + size);
    buf.put_i32(length);
    header
        .encode(&mut buf, header_version)
        .map_err(|e| e.to_string())?;
    body.encode(&mut buf, version).map_err(|e| e.to_string())?;
    if buf.len() != LENGTH_PREFIX + size {
        return Err(format!(
            "encoded {} bytes where the computed size was {size}",
            buf.len() - LENGTH_PREFIX
        ));
    }
    Ok(buf.freeze())
}

/// The correlation id at the start of a response frame's payload, if the
/// payload is long enough to hold one.
pub fn peek_correlation_id(payload: &[u8]) -> Option<i32> {
    let id = payload.get(..4)?;
    Some(i32::from_be_bytes([id[0], id[1], id[2], id[3]]))
}

/// Splits a response frame's payload into its header (decoded in
/// `header_version`) and the body that follows, a view of the same buffer.
pub fn split_response(
    mut payload: Bytes,
    header_version: i16,
) -> Result<(ResponseHeader, Bytes), String> {
    let header = ResponseHeader::decode(&mut payload, header_version).map_err(|e| e.to_string())?;
    Ok((header, payload))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame_bytes(len: i32, payload: &[u8]) -> Vec<u8> {
        let mut v = len.to_be_bytes().to_vec();
        v.extend_from_slice(payload);
        v
    }

    #[test]
    fn check_needs_prefix_then_payload() {
        assert_eq!(
            check_frame(&[0, 0], 100, "p").expect("ok"),
            FrameStatus::Incomplete { frame_len: None }
        );
        assert_eq!(
            check_frame(&frame_bytes(3, b"ab"), 100, "p").expect("ok"),
            FrameStatus::Incomplete { frame_len: Some(7) }
        );
        assert_eq!(
            check_frame(&frame_bytes(3, b"abcde"), 100, "p").expect("ok"),
            FrameStatus::Complete { payload_len: 3 }
        );
        assert_eq!(
            check_frame(&frame_bytes(0, b""), 100, "p").expect("ok"),
            FrameStatus::Complete { payload_len: 0 }
        );
    }

    #[test]
    fn check_refuses_negative_and_oversized_lengths() {
        let err = check_frame(&frame_bytes(-1, b""), 100, "127.0.0.1:1").expect_err("negative");
        assert!(
            matches!(err, ConnectionError::NegativeFrameLength { length: -1, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("127.0.0.1:1"), "{err}");
        let err = check_frame(&frame_bytes(101, b""), 100, "p").expect_err("too large");
        assert!(
            matches!(
                err,
                ConnectionError::FrameTooLarge {
                    length: 101,
                    max: 100,
                    ..
                }
            ),
            "{err}"
        );
        let err = check_frame(&frame_bytes(i32::MIN, b""), usize::MAX, "p").expect_err("negative");
        assert!(
            matches!(err, ConnectionError::NegativeFrameLength { .. }),
            "{err}"
        );
    }

    #[tokio::test]
    async fn reader_splits_frames_without_copying() {
        let mut wire = frame_bytes(3, b"abc");
        wire.extend(frame_bytes(0, b""));
        wire.extend(frame_bytes(2, b"xy"));
        let mut reader = FrameReader::new(&wire[..], "p", 100);
        assert_eq!(
            reader.read_frame().await.expect("frame"),
            Some(Bytes::from_static(b"abc"))
        );
        assert_eq!(
            reader.read_frame().await.expect("frame"),
            Some(Bytes::new())
        );
        assert_eq!(
            reader.read_frame().await.expect("frame"),
            Some(Bytes::from_static(b"xy"))
        );
        assert_eq!(reader.read_frame().await.expect("eof"), None);
    }

    #[tokio::test]
    async fn reader_reports_truncation_and_bad_lengths() {
        async fn error_of(wire: &[u8], max: usize) -> ConnectionError {
            FrameReader::new(wire, "p", max)
                .read_frame()
                .await
                .expect_err("a bad frame")
        }
        let err = error_of(&frame_bytes(10, b"abc"), 100).await;
        assert!(
            matches!(
                err,
                ConnectionError::TruncatedFrame {
                    received: 7,
                    expected: Some(14),
                    ..
                }
            ),
            "{err}"
        );
        let err = error_of(&[0u8, 0], 100).await;
        assert!(
            matches!(
                err,
                ConnectionError::TruncatedFrame {
                    received: 2,
                    expected: None,
                    ..
                }
            ),
            "{err}"
        );
        // A huge declared length is refused before any allocation for it.
        let err = error_of(&frame_bytes(i32::MAX, b""), 1 << 20).await;
        assert!(
            matches!(err, ConnectionError::FrameTooLarge { .. }),
            "{err}"
        );
    }

    #[tokio::test]
    async fn reader_does_not_preallocate_declared_length() {
        // 64 MiB declared, 10 bytes sent: the buffer stays small.
        let wire = frame_bytes(64 << 20, b"0123456789");
        let mut reader = FrameReader::new(&wire[..], "p", 128 << 20);
        let err = reader.read_frame().await.expect_err("truncated");
        assert!(
            matches!(err, ConnectionError::TruncatedFrame { .. }),
            "{err}"
        );
        assert!(
            reader.buffer.capacity() <= 1 << 20,
            "capacity {}",
            reader.buffer.capacity()
        );
    }

    #[test]
    fn request_encoding_prefixes_length() {
        use kafka_protocol::messages::ApiVersionsRequest;
        let header = RequestHeader::default()
            .with_request_api_key(18)
            .with_request_api_version(3)
            .with_correlation_id(7);
        let body = ApiVersionsRequest::default();
        let frame = encode_request(&header, 2, &body, 3).expect("encodes");
        let len = i32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]);
        assert_eq!(len as usize, frame.len() - 4);
        assert_eq!(&frame[4..6], &18i16.to_be_bytes());
        assert_eq!(peek_correlation_id(&frame[8..]), Some(7));
        assert_eq!(peek_correlation_id(&[1, 2, 3]), None);
    }
}
