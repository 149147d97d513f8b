//! The replay layer's error type: what the consumer and the WAL writer
//! report, wrapping the cluster client's and the index's errors. It is the
//! core's [`walfetch_core::error::Error`] over this crate's
//! [`ClientError`].

use crate::cluster::ClientError;
pub use walfetch_core::error::Mismatch;

/// Everything that can go wrong while writing or replaying a WAL: the
/// core's error with the cluster client's [`ClientError`] as its
/// [`Error::Client`]. A [`ClientError::TopicIdChanged`] converts to
/// [`Error::IndexMismatch`] with [`Mismatch::TopicId`] instead: the topic
/// recreated under a replay is the mismatch it would have been before the
/// replay started.
pub type Error = walfetch_core::error::Error<ClientError>;

impl From<ClientError> for Error {
    fn from(error: ClientError) -> Self {
        match error {
            ClientError::TopicIdChanged {
                topic,
                partition,
                expected,
                current,
            } => Error::IndexMismatch {
                topic,
                partition,
                mismatch: Mismatch::TopicId {
                    indexed: expected,
                    current,
                },
            },
            other => Error::Client(other),
        }
    }
}
