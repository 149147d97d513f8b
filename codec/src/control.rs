//! Control records: the single record of a control batch. Transaction
//! markers (commit, abort) end a producer's transaction; KRaft writes other
//! types into its metadata log.
//!
//! ```text
//! key:   version: int16, type: int16   (0 = abort, 1 = commit)
//! value: version: int16, coordinatorEpoch: int32   (transaction markers)
//! ```
//!
//! # References
//! - Kafka documentation, "Control Batches"; KIP-98 (transactions).

use crate::wire::Reader;
use crate::{BatchHeader, Error, Record, Section};

/// What a control record marks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ControlType {
    /// The producer's transaction was aborted: drop its records under
    /// `read_committed`.
    Abort,
    /// The producer's transaction was committed.
    Commit,
    /// Another control type (KRaft's leader change, snapshot markers, ...).
    Other(i16),
}

impl ControlType {
    /// The wire value.
    pub fn id(self) -> i16 {
        match self {
            ControlType::Abort => 0,
            ControlType::Commit => 1,
            ControlType::Other(id) => id,
        }
    }

    fn from_id(id: i16) -> Self {
        match id {
            0 => ControlType::Abort,
            1 => ControlType::Commit,
            other => ControlType::Other(other),
        }
    }
}

/// The decoded key of a control record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ControlRecord {
    /// The control key's version.
    pub version: i16,
    /// What the record marks.
    pub kind: ControlType,
}

impl ControlRecord {
    /// Decodes the control key of `record`, from the control batch `header`.
    pub fn parse(record: &Record, header: &BatchHeader) -> Result<ControlRecord, Error> {
        let corrupt = |what| Error::CorruptRecord {
            base_offset: header.base_offset,
            index: 0,
            position: 0,
            section: Section::Batch,
            what,
        };
        let key = record
            .key()
            .ok_or_else(|| corrupt("control record has a null key"))?;
        let mut r = Reader::new(key);
        let version = r
            .i16()
            .map_err(|_| corrupt("control record key is shorter than 4 bytes"))?;
        let kind = r
            .i16()
            .map_err(|_| corrupt("control record key is shorter than 4 bytes"))?;
        Ok(ControlRecord {
            version,
            kind: ControlType::from_id(kind),
        })
    }

    /// The 4-byte key of a control record (version 0).
    pub fn key(kind: ControlType) -> [u8; 4] {
        let mut out = [0u8; 4];
        out[2..].copy_from_slice(&kind.id().to_be_bytes());
        out
    }

    /// The 6-byte value of a transaction marker (version 0).
    pub fn marker_value(coordinator_epoch: i32) -> [u8; 6] {
        let mut out = [0u8; 6];
        out[2..].copy_from_slice(&coordinator_epoch.to_be_bytes());
        out
    }
}
