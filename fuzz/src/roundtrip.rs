//! Encode → decode of structured input: every field must come back exactly.

use arbitrary::Arbitrary;
use bytes::Bytes;
use walfetch_codec::{
    BatchBuilder, Batches, Compression, ControlRecord, ControlType, DecodeOptions, EncodedBatch,
    NewRecord, Record, TimestampType, TransactionFilter,
};

/// One record as the fuzzer makes it; offset deltas are derived from `gap`
/// so that they always increase strictly.
#[derive(Debug, Arbitrary)]
pub struct InputRecord {
    /// The offset delta is the previous one plus 1 plus `gap`.
    pub gap: u8,
    /// Timestamp in milliseconds.
    pub timestamp: i64,
    /// Key, `None` for null.
    pub key: Option<Vec<u8>>,
    /// Value, `None` for null.
    pub value: Option<Vec<u8>>,
    /// Headers: key and optional value.
    pub headers: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

/// The whole structured input of the `encode_decode` target.
#[derive(Debug, Arbitrary)]
pub struct Input {
    /// Header fields: base offset, epochs, codec, snappy framing, flags.
    pub builder: BatchBuilder,
    /// The records (an empty list must be refused by the encoder).
    pub records: Vec<InputRecord>,
    /// Bounds of a bounded iteration, as offset deltas.
    pub range: (u16, u16),
    /// Where to cut the encoded batch for the partial-batch check.
    pub cut: u16,
    /// A transaction marker to encode too: commit?, coordinator epoch, timestamp.
    pub marker: Option<(bool, i32, i64)>,
}

fn to_records(input: &[InputRecord]) -> Vec<NewRecord> {
    let mut delta: i32 = -1;
    input
        .iter()
        .map(|r| {
            delta = delta.saturating_add(1 + i32::from(r.gap));
            NewRecord {
                offset_delta: delta,
                timestamp: r.timestamp,
                key: r.key.clone().map(Bytes::from),
                value: r.value.clone().map(Bytes::from),
                headers: r
                    .headers
                    .iter()
                    .map(|(k, v)| (Bytes::from(k.clone()), v.clone().map(Bytes::from)))
                    .collect(),
            }
        })
        .collect()
}

/// Encodes the input, decodes it back and asserts that everything round-trips.
pub fn check(input: Input) {
    let records = to_records(&input.records);
    let encoded = match input.builder.encode(&records) {
        Ok(encoded) => encoded,
        Err(err) => {
            // The only refusals: no record, or offsets past i64::MAX.
            let overflow = records.last().is_some_and(|r| {
                base_offset(&input.builder)
                    .checked_add(i64::from(r.offset_delta))
                    .is_none()
            });
            assert!(
                records.is_empty() || overflow,
                "encoding {} records failed: {err}",
                records.len()
            );
            return;
        }
    };
    assert!(!records.is_empty(), "an empty batch was encoded");
    check_batch(&encoded, &records, input.range);
    check_prefix(&encoded, &records, input.cut);

    if let Some((commit, coordinator_epoch, timestamp)) = input.marker {
        check_marker(input.builder, commit, coordinator_epoch, timestamp);
    }
}

/// The builder's base offset (it has no getter): the header of a batch
/// holding one empty record, which always encodes.
fn base_offset(builder: &BatchBuilder) -> i64 {
    let batch = builder
        .encode(&[NewRecord::default()])
        .expect("one empty record encodes");
    batch.header.base_offset
}

fn opts() -> DecodeOptions {
    DecodeOptions::default()
}

fn decode_one(encoded: &EncodedBatch) -> walfetch_codec::RecordBatch {
    let mut batches = Batches::new(encoded.bytes.clone(), opts());
    let batch = batches
        .next()
        .expect("no batch decoded")
        .unwrap_or_else(|e| panic!("encoded batch does not decode: {e}"));
    assert!(batches.next().is_none(), "more than one batch decoded");
    assert!(
        batches.partial().is_none(),
        "a whole batch was reported partial"
    );
    assert_eq!(batches.position(), encoded.bytes.len());
    batch
}

fn check_batch(encoded: &EncodedBatch, records: &[NewRecord], range: (u16, u16)) {
    let batch = decode_one(encoded);
    let header = *batch.header();
    assert_eq!(
        header, encoded.header,
        "decoded header differs from the encoded one"
    );
    assert_eq!(header.record_count as usize, records.len());
    assert_eq!(
        header.last_offset_delta,
        records.last().map(|r| r.offset_delta).unwrap_or_default()
    );
    assert_eq!(header.base_timestamp, records[0].timestamp);
    assert_eq!(
        header.max_timestamp,
        records
            .iter()
            .map(|r| r.timestamp)
            .max()
            .unwrap_or_default()
    );
    assert_eq!(batch.bytes(), &encoded.bytes);
    assert_eq!(Some(batch.compression()), header.compression());
    assert_eq!(encoded.record_ranges.len(), records.len());

    let decoded: Vec<Record> = batch
        .records()
        .expect("records() failed")
        .map(|r| r.unwrap_or_else(|e| panic!("record does not decode: {e}")))
        .collect();
    assert_eq!(decoded.len(), records.len());
    for (i, (got, want)) in decoded.iter().zip(records).enumerate() {
        assert_record(got, want, &header, &encoded.record_ranges[i]);
        if batch.compression() == Compression::None {
            assert_eq!(
                encoded.record_end_in_batch(i),
                Some(encoded.record_ranges[i].end)
            );
        } else {
            assert_eq!(encoded.record_end_in_batch(i), None);
        }
    }

    // A bounded iteration yields exactly the records in its range.
    let (a, b) = (
        i64::from(range.0.min(range.1)),
        i64::from(range.0.max(range.1)),
    );
    let (lo, hi) = (
        header.base_offset.saturating_add(a),
        header.base_offset.saturating_add(b),
    );
    let bounded: Vec<i64> = batch
        .records_in(lo..=hi)
        .expect("records_in() failed")
        .map(|r| {
            r.unwrap_or_else(|e| panic!("bounded record does not decode: {e}"))
                .offset()
        })
        .collect();
    let expected: Vec<i64> = decoded
        .iter()
        .map(Record::offset)
        .filter(|o| (lo..=hi).contains(o))
        .collect();
    assert_eq!(bounded, expected, "records_in({lo}..={hi})");

    // Control batch: the control record is the first record's key.
    let control = batch.control_record();
    if header.is_control() {
        match (records[0].key.as_deref(), control) {
            (Some(key), Ok(Some(c))) if key.len() >= 4 => {
                assert_eq!(c.version, i16::from_be_bytes([key[0], key[1]]));
                assert_eq!(c.kind.id(), i16::from_be_bytes([key[2], key[3]]));
            }
            (Some(key), Err(_)) if key.len() < 4 => {}
            (None, Err(_)) => {}
            (key, control) => panic!("control record {control:?} from key {key:?}"),
        }
    } else {
        assert!(
            matches!(control, Ok(None)),
            "data batch has a control record"
        );
    }
    let admitted = TransactionFilter::default().admit(&batch);
    if !header.is_control() {
        assert!(
            matches!(admitted, Ok(true)),
            "a data batch without aborts was not admitted"
        );
    }
}

fn assert_record(
    got: &Record,
    want: &NewRecord,
    header: &walfetch_codec::BatchHeader,
    range: &std::ops::Range<usize>,
) {
    assert_eq!(
        got.offset(),
        header.base_offset + i64::from(want.offset_delta)
    );
    let timestamp = match header.attributes.timestamp_type() {
        TimestampType::CreateTime => want.timestamp,
        TimestampType::LogAppendTime => header.max_timestamp,
    };
    assert_eq!(got.timestamp(), timestamp);
    assert_eq!(got.key(), want.key.as_deref());
    assert_eq!(got.value(), want.value.as_deref());
    assert_eq!(got.key_bytes(), want.key);
    assert_eq!(got.value_bytes(), want.value);
    assert_eq!(got.header_count(), want.headers.len());
    let headers: Vec<(Bytes, Option<Bytes>)> = got
        .headers()
        .map(|h| (Bytes::copy_from_slice(h.key), h.value_bytes()))
        .collect();
    assert_eq!(headers, want.headers);
    assert_eq!(
        got.wire_len(),
        range.len(),
        "wire length differs from the encoder's record range"
    );
}

/// Cutting the batch short gives a partial batch (never an error), and for an
/// uncompressed batch exactly the records wholly inside the cut.
fn check_prefix(encoded: &EncodedBatch, records: &[NewRecord], cut: u16) {
    let len = encoded.bytes.len();
    let cut = usize::from(cut) % len; // strictly shorter than the batch
    let mut batches = Batches::new(encoded.bytes.slice(..cut), opts());
    assert!(
        batches.next().is_none(),
        "a batch cut to {cut} of {len} bytes decoded"
    );
    let Some(partial) = batches.partial() else {
        assert_eq!(cut, 0, "no partial batch for {cut} of {len} bytes");
        return;
    };
    assert_eq!(partial.present(), cut);
    assert_eq!(partial.position(), 0);
    assert_eq!(partial.needed(), (cut >= 12).then_some(len));
    assert_eq!(
        partial.base_offset(),
        (cut >= 8).then_some(encoded.header.base_offset)
    );
    let unverified = partial.records_unverified();
    if cut < walfetch_codec::HEADER_LEN || encoded.header.compression() != Some(Compression::None) {
        assert!(
            unverified.is_none(),
            "unverified records of a compressed or headerless prefix"
        );
        return;
    }
    let got: Vec<Record> = unverified
        .expect("no unverified records for an uncompressed prefix")
        .map(|r| r.unwrap_or_else(|e| panic!("unverified record does not decode: {e}")))
        .collect();
    let whole = encoded
        .record_ranges
        .iter()
        .take_while(|r| r.end <= cut)
        .count();
    assert_eq!(got.len(), whole, "records in a {cut}-byte prefix");
    for (i, (g, want)) in got.iter().zip(records).enumerate() {
        assert_record(g, want, &encoded.header, &encoded.record_ranges[i]);
    }
}

fn check_marker(builder: BatchBuilder, commit: bool, coordinator_epoch: i32, timestamp: i64) {
    let kind = if commit {
        ControlType::Commit
    } else {
        ControlType::Abort
    };
    let encoded = builder
        .encode_marker(kind, coordinator_epoch, timestamp)
        .unwrap_or_else(|e| panic!("marker does not encode: {e}"));
    let batch = decode_one(&encoded);
    assert!(batch.header().is_control() && batch.header().is_transactional());
    let control = batch
        .control_record()
        .expect("marker control record")
        .expect("no control record");
    assert_eq!(control, ControlRecord { version: 0, kind });
    let record = batch
        .records()
        .expect("records()")
        .next()
        .expect("no record")
        .expect("record");
    assert_eq!(
        record.value(),
        Some(&ControlRecord::marker_value(coordinator_epoch)[..])
    );
    assert!(matches!(
        TransactionFilter::default().admit(&batch),
        Ok(false)
    ));
}
