//! Shared code of the fuzz targets: walking everything the decoder exposes
//! (`decode`), the encode → decode round trip (`roundtrip`), and the replay
//! core fed arbitrary answers (`replay`).
//!
//! The decode walk asserts only what the codec's API promises for *any*
//! input: no panic, offsets inside a batch strictly increasing and inside the
//! batch's range, a bounded iteration yielding only offsets in its bound, and
//! a record iterator ending after its first error, and the borrowed walk
//! (`Records::next_ref`) yielding exactly the owned walk's records, error
//! and end. The round trip asserts that every field comes back exactly.

#![forbid(unsafe_code)]

pub mod replay;
pub mod roundtrip;

use std::hint::black_box;

use bytes::Bytes;
use walfetch_codec::{
    AbortedTransaction, Batches, DecodeOptions, Header, Record, Records, TransactionFilter,
};
use walfetch_core::index::{IdFormat, RegionRule};

/// Decodes `data` as the `records` bytes of a Fetch response partition:
/// every complete batch (header, control record, `read_committed` filter,
/// all records, a bounded slice of them), then the trailing partial batch
/// and its unverified records.
pub fn decode(data: &[u8], opts: DecodeOptions) {
    let buf = Bytes::copy_from_slice(data);

    // The aborted-transactions list comes from the input itself (every other
    // transactional batch's producer and base offset), so the filter's abort
    // path is reached without a separate input format.
    let aborted: Vec<AbortedTransaction> = Batches::new(buf.clone(), opts)
        .map_while(Result::ok)
        .filter(|b| b.header().is_transactional())
        .step_by(2)
        .map(|b| AbortedTransaction {
            first_offset: b.base_offset(),
            producer_id: b.header().producer_id,
        })
        .collect();
    let mut filter = TransactionFilter::new(aborted);

    let mut batches = Batches::new(buf, opts);
    for batch in batches.by_ref() {
        let Ok(batch) = batch else { break };
        let header = *batch.header();
        black_box((
            header,
            batch.compression(),
            batch.position(),
            batch.bytes().len(),
        ));
        let _ = black_box(filter.admit(&batch));
        let _ = black_box(batch.control_record());

        let (first, last) = (batch.base_offset(), batch.last_offset());
        if let Ok(records) = batch.records() {
            let owned = walk(records, first, last);
            if let Ok(records) = batch.records() {
                walk_borrowed(records, &owned);
            }
        }
        // A bounded iteration: the middle of the batch's offset range.
        let mid = first.saturating_add(i64::from(header.last_offset_delta / 2));
        if let Ok(records) = batch.records_in(mid..=mid) {
            let owned = walk(records, mid, mid);
            if let Ok(records) = batch.records_in(mid..=mid) {
                walk_borrowed(records, &owned);
            }
        }
    }
    black_box(batches.position());

    if let Some(partial) = batches.partial() {
        black_box((
            partial.position(),
            partial.present(),
            partial.needed(),
            partial.base_offset(),
            partial.header(),
        ));
        if let Some(records) = partial.records_unverified() {
            let (first, last) = match partial.header() {
                Some(h) => (h.base_offset, h.last_offset()),
                None => (i64::MIN, i64::MAX),
            };
            let owned = walk(records, first, last);
            if let Some(records) = partial.records_unverified() {
                walk_borrowed(records, &owned);
            }
        }
    }
}

/// What an owned walk yielded: its records, then its error (as a message)
/// if it ended with one.
struct Walked {
    records: Vec<Record>,
    error: Option<String>,
}

/// Touches every field of every record, checking that offsets increase
/// strictly and stay in `first..=last`, and that nothing follows an error.
fn walk(mut records: Records, first: i64, last: i64) -> Walked {
    let mut prev = None;
    let mut walked = Walked {
        records: Vec::new(),
        error: None,
    };
    while let Some(record) = records.next() {
        let record = match record {
            Ok(record) => record,
            Err(err) => {
                walked.error = Some(err.to_string());
                assert!(
                    records.next().is_none(),
                    "a record iterator yielded after an error"
                );
                return walked;
            }
        };
        let offset = record.offset();
        assert!(
            (first..=last).contains(&offset),
            "record offset {offset} outside {first}..={last}"
        );
        assert!(
            prev < Some(offset),
            "record offsets do not increase: {prev:?} then {offset}"
        );
        prev = Some(offset);

        black_box((record.timestamp(), record.wire_len(), record.header_count()));
        // Every way a region rule reads an id, on the record's key (and
        // on a header of the record's first header's name).
        for format in [
            IdFormat::BigEndian,
            IdFormat::Decimal,
            IdFormat::GreptimeMeta,
        ] {
            black_box(RegionRule::Key(format).region(&record));
            if let Some(h) = record.headers().next() {
                let name = String::from_utf8_lossy(h.key).into_owned();
                black_box(RegionRule::Header(name, format).region(&record));
            }
        }
        assert_eq!(record.key_bytes().as_deref(), record.key());
        assert_eq!(record.value_bytes().as_deref(), record.value());
        let mut headers = 0;
        for header in record.headers() {
            assert_eq!(header.value_bytes().as_deref(), header.value);
            black_box(header.key);
            headers += 1;
        }
        assert_eq!(
            headers,
            record.header_count(),
            "headers iterated != header count"
        );
        walked.records.push(record);
    }
    walked
}

/// Walks `records` with `Records::next_ref`, asserting that it lends exactly
/// the records, field by field, and the error of the owned walk `owned`.
fn walk_borrowed(mut records: Records, owned: &Walked) {
    let mut i = 0;
    while let Some(record) = records.next_ref() {
        let record = match record {
            Ok(record) => record,
            Err(err) => {
                assert_eq!(i, owned.records.len(), "borrowed walk failed early: {err}");
                assert_eq!(Some(err.to_string()), owned.error, "a different error");
                assert!(
                    records.next_ref().is_none(),
                    "a record iterator lent after an error"
                );
                return;
            }
        };
        let Some(want) = owned.records.get(i) else {
            panic!("borrowed walk lent record {i} past the owned walk's end");
        };
        assert_eq!(record.offset(), want.offset());
        assert_eq!(record.timestamp(), want.timestamp());
        assert_eq!(record.key(), want.key());
        assert_eq!(record.value(), want.value());
        assert_eq!(record.wire_len(), want.wire_len());
        assert_eq!(record.batch_range(), want.batch_range());
        // Header's own `==` also compares the buffer it slices, which is the
        // batch's for a borrowed record: compare what each header holds.
        fn fields(h: Header<'_>) -> (&[u8], Option<&[u8]>, Option<Bytes>) {
            (h.key, h.value, h.value_bytes())
        }
        assert!(
            record.headers().map(fields).eq(want.headers().map(fields)),
            "headers differ"
        );
        assert_eq!(&record.to_record(), want, "to_record differs");
        i += 1;
    }
    assert_eq!(i, owned.records.len(), "borrowed walk ended early");
    assert_eq!(owned.error, None, "borrowed walk ended without the error");
}

/// Decodes `data[2..]` as the payload of a response frame (header, then
/// body) of the API `data[0]` picks, in the version `data[1]` picks from
/// the range the `kafka-protocol` message types implement (Fetch from v4,
/// walfetch's lowest), through `walfetch::connection::decode_response_frame`,
/// the path every response a connection receives takes. The APIs are every
/// one the client and the writer send: ApiVersions, Metadata, ListOffsets,
/// Fetch, Produce, InitProducerId, CreateTopics, SaslHandshake and
/// SaslAuthenticate, and the administrative ones the test harnesses send
/// (DeleteTopics, DeleteRecords, CreateAcls, AddPartitionsToTxn, EndTxn,
/// FindCoordinator). Fetch records go through the codec. Only panics and
/// hangs are failures.
pub fn decode_response(data: &[u8]) {
    use kafka_protocol::messages::{
        AddPartitionsToTxnRequest, ApiKey, ApiVersionsRequest, CreateAclsRequest,
        CreateTopicsRequest, DeleteRecordsRequest, DeleteTopicsRequest, EndTxnRequest,
        FetchRequest, FindCoordinatorRequest, InitProducerIdRequest, ListOffsetsRequest,
        MetadataRequest, ProduceRequest, SaslAuthenticateRequest, SaslHandshakeRequest,
    };
    use walfetch::connection::decode_response_frame;

    const APIS: [ApiKey; 15] = [
        ApiKey::Fetch,
        ApiKey::Metadata,
        ApiKey::ListOffsets,
        ApiKey::ApiVersions,
        ApiKey::Produce,
        ApiKey::InitProducerId,
        ApiKey::CreateTopics,
        ApiKey::SaslHandshake,
        ApiKey::SaslAuthenticate,
        ApiKey::DeleteTopics,
        ApiKey::DeleteRecords,
        ApiKey::CreateAcls,
        ApiKey::AddPartitionsToTxn,
        ApiKey::EndTxn,
        ApiKey::FindCoordinator,
    ];
    let [pick, v, rest @ ..] = data else {
        return;
    };
    let api = APIS[usize::from(*pick) % APIS.len()];
    let (min, max) = response_versions(api);
    let span = u16::try_from(max - min + 1).unwrap_or(1).max(1);
    let version = min + i16::try_from(u16::from(*v) % span).unwrap_or(0);
    let payload = bytes::Bytes::copy_from_slice(rest);
    match api {
        ApiKey::Fetch => {
            let Ok(response) = decode_response_frame::<FetchRequest>(version, payload) else {
                return;
            };
            for topic in response.responses {
                for partition in topic.partitions {
                    if let Some(records) = partition.records {
                        decode(&records, DecodeOptions::default());
                    }
                }
            }
        }
        ApiKey::Metadata => drop(decode_response_frame::<MetadataRequest>(version, payload)),
        ApiKey::ListOffsets => drop(decode_response_frame::<ListOffsetsRequest>(
            version, payload,
        )),
        ApiKey::ApiVersions => drop(decode_response_frame::<ApiVersionsRequest>(
            version, payload,
        )),
        ApiKey::Produce => drop(decode_response_frame::<ProduceRequest>(version, payload)),
        ApiKey::InitProducerId => drop(decode_response_frame::<InitProducerIdRequest>(
            version, payload,
        )),
        ApiKey::CreateTopics => drop(decode_response_frame::<CreateTopicsRequest>(
            version, payload,
        )),
        ApiKey::SaslHandshake => drop(decode_response_frame::<SaslHandshakeRequest>(
            version, payload,
        )),
        ApiKey::DeleteTopics => drop(decode_response_frame::<DeleteTopicsRequest>(
            version, payload,
        )),
        ApiKey::DeleteRecords => drop(decode_response_frame::<DeleteRecordsRequest>(
            version, payload,
        )),
        ApiKey::CreateAcls => drop(decode_response_frame::<CreateAclsRequest>(version, payload)),
        ApiKey::AddPartitionsToTxn => drop(decode_response_frame::<AddPartitionsToTxnRequest>(
            version, payload,
        )),
        ApiKey::EndTxn => drop(decode_response_frame::<EndTxnRequest>(version, payload)),
        ApiKey::FindCoordinator => drop(decode_response_frame::<FindCoordinatorRequest>(
            version, payload,
        )),
        _ => drop(decode_response_frame::<SaslAuthenticateRequest>(
            version, payload,
        )),
    }
}

/// The lowest and highest version of `api`'s responses `decode_response`
/// picks: what the `kafka-protocol` message types implement, Fetch from
/// walfetch's lowest (v4).
pub fn response_versions(api: kafka_protocol::messages::ApiKey) -> (i16, i16) {
    use kafka_protocol::messages::ApiKey;
    use walfetch::connection::versions::MIN_FETCH_VERSION;
    use walfetch::connection::VersionRange;

    let range = VersionRange::of_message_types(api);
    let min = match api {
        ApiKey::Fetch => range.min.max(MIN_FETCH_VERSION),
        _ => range.min,
    };
    (min, range.max)
}

/// Decodes `data` as a walfetch index file and as a GreptimeDB
/// `index.json`; an index either yields must round-trip through walfetch's
/// current format.
pub fn index_file(data: &[u8]) {
    let round_trips = |index: &walfetch_core::index::WalIndex| {
        let again = walfetch_core::index::encode_index(index);
        let back =
            walfetch_core::index::decode_index(&again, "fuzz").expect("re-encoded index decodes");
        assert_eq!(&back, index, "an index file round-trips");
    };
    let decoded = walfetch_core::index::decode_index(data, "fuzz").ok();
    if let Some(index) = &decoded {
        round_trips(index);
    }
    // Read from a reader (magic first, then the rest), the same index.
    let read = walfetch_core::index::read_index(data, "fuzz").ok();
    assert_eq!(
        read, decoded,
        "reading an index from a reader is decoding it"
    );
    if let Ok(topics) = walfetch_core::index::import_greptime(data, "fuzz") {
        topics.values().for_each(round_trips);
    }
}

/// The client nonce of the SCRAM exchanges `sasl_scram` runs (RFC 7677's
/// example, so that its messages make a seed).
pub const SCRAM_NONCE: &str = "rOprNGfwEbeRWgbNEkqO";

/// Runs one SCRAM exchange, client side, against a server whose messages
/// are `data[1..]` split at its first NUL (server-first, then
/// server-final); `data[0]` picks SHA-256 or SHA-512. A server-first
/// asking for more iterations than Kafka allows (16384) is skipped, not
/// refused: the client takes up to [`MAX_ITERATIONS`], each run of which
/// would slow the fuzzer to a crawl without reaching more code.
///
/// [`MAX_ITERATIONS`]: walfetch::connection::sasl::scram::MAX_ITERATIONS
pub fn sasl_scram(data: &[u8]) {
    use walfetch::connection::sasl::scram::{ScramClient, ScramHash};

    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let (first, last) = match rest.iter().position(|&b| b == 0) {
        Some(at) => (&rest[..at], &rest[at + 1..]),
        None => (rest, &[][..]),
    };
    let iterations = std::str::from_utf8(first).ok().and_then(|text| {
        text.split(',')
            .find_map(|attr| attr.strip_prefix("i="))
            .and_then(|i| i.parse::<u64>().ok())
    });
    if iterations.is_some_and(|i| i > 16384) {
        return;
    }
    let hash = if pick % 2 == 0 {
        ScramHash::Sha256
    } else {
        ScramHash::Sha512
    };
    let mut client = ScramClient::with_nonce(hash, "user", "pencil", SCRAM_NONCE);
    if pick & 2 != 0 {
        // A server-final before server-first is refused, and the exchange
        // goes on.
        assert!(client.finish(last).is_err(), "server-final taken first");
    }
    if client.client_final(first).is_ok() {
        let _ = client.finish(last);
    }
}
