#![doc = include_str!("../README.md")]

mod batch;
mod batches;
mod checksum;
mod compression;
mod control;
mod encode;
mod error;
mod header;
mod record;
mod records;
mod transactions;
mod wire;

pub use batch::RecordBatch;
pub use batches::{Batches, DecodeOptions, PartialBatch, DEFAULT_MAX_DECOMPRESSED_BYTES};
pub use checksum::{record_checksum, record_checksum_header, RecordCheck, RECORD_CHECKSUM_HEADER};
pub use compression::SnappyFraming;
pub use control::{ControlRecord, ControlType};
pub use encode::{BatchBuilder, EncodedBatch, NewRecord, RecordsBuffer};
pub use error::{Error, Section};
pub use header::{Attributes, BatchHeader, Compression, TimestampType, HEADER_LEN, LOG_OVERHEAD};
pub use record::{Header, Headers, Record, RecordRef};
pub use records::Records;
pub use transactions::{AbortedTransaction, TransactionFilter};
