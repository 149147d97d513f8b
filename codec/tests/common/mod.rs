//! proptest strategies shared by the codec's test files.

use bytes::Bytes;
use proptest::prelude::*;
use walfetch_codec::{Compression, NewRecord, SnappyFraming};

/// A nullable byte field of fewer than `max` bytes.
fn bytes_field(max: usize) -> impl Strategy<Value = Option<Bytes>> {
    prop::option::of(prop::collection::vec(any::<u8>(), 0..max).prop_map(Bytes::from))
}

/// Size limits of generated records (each bound exclusive).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shape {
    /// Key bytes.
    pub(crate) key: usize,
    /// Value bytes.
    pub(crate) value: usize,
    /// Header value bytes.
    pub(crate) header_value: usize,
    /// Records in a batch.
    pub(crate) records: usize,
}

/// A batch's records: increasing offset deltas with gaps (as after
/// compaction), timestamps around 2023, nullable keys and values, 0-2
/// headers.
pub(crate) fn records(shape: Shape) -> impl Strategy<Value = Vec<NewRecord>> {
    let record = (
        1..4i32,
        -1_000_000i64..1_000_000,
        (
            bytes_field(shape.key),
            bytes_field(shape.value),
            prop::collection::vec(
                (
                    prop::collection::vec(any::<u8>(), 0..20).prop_map(Bytes::from),
                    bytes_field(shape.header_value),
                ),
                0..3,
            ),
        ),
    );
    prop::collection::vec(record, 1..shape.records).prop_map(|rs| {
        spaced(rs, |offset_delta, timestamp, (key, value, headers)| {
            NewRecord {
                offset_delta,
                timestamp,
                key,
                value,
                headers,
            }
        })
    })
}

/// Records made by `make(offset_delta, timestamp, fields)` from
/// `(gap, ts, fields)`: offset deltas increasing by each gap from
/// `gap - 1` (gaps as after compaction), timestamps
/// `1_700_000_000_000 + ts` (around 2023).
pub(crate) fn spaced<F, R>(rs: Vec<(i32, i64, F)>, make: impl Fn(i32, i64, F) -> R) -> Vec<R> {
    let mut delta = -1;
    rs.into_iter()
        .map(|(gap, ts, fields)| {
            delta += gap;
            make(delta, 1_700_000_000_000 + ts, fields)
        })
        .collect()
}

/// Every codec, snappy with either framing.
pub(crate) fn compression() -> impl Strategy<Value = (Compression, SnappyFraming)> {
    (
        prop::sample::select(Compression::ALL.to_vec()),
        any::<bool>(),
    )
        .prop_map(|(c, raw)| {
            let framing = if raw {
                SnappyFraming::Raw
            } else {
                SnappyFraming::Xerial
            };
            (c, framing)
        })
}
