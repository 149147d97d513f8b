//! The replay core (`walfetch_core::replay::ReplayCore`) fed arbitrary answers:
//! a structured input makes a log of real encoded batches, an index of it
//! (any regions, offsets and hints, right or wrong, `last_index` anywhere),
//! the regions to replay, the options, and a list of answers to the
//! fetches the core sends — the log as a broker serves it (from any batch,
//! cut anywhere, bytes flipped), batches ending in a cut batch whose header
//! says anything, arbitrary bytes, `OFFSET_OUT_OF_RANGE` with any bounds, a
//! failed fetch, answers to fetches no longer in flight — in any order,
//! with any high watermark and log start.
//!
//! What must hold for any input: no panic; entries only of regions asked
//! for, inside their ranges, offsets strictly increasing per region;
//! nothing after the error that ended a replay.

use std::collections::BTreeMap;
use std::time::Instant;

use arbitrary::Arbitrary;
use bytes::{Bytes, BytesMut};
use walfetch_core::codec::{
    record_checksum_header, AbortedTransaction, BatchBuilder, Compression, ControlType,
    DecodeOptions, NewRecord, RECORD_CHECKSUM_HEADER,
};
use walfetch_core::error::Error;
use walfetch_core::error_code::ErrorCode;
use walfetch_core::fetch::{FetchedPartition, IsolationLevel};
use walfetch_core::index::{Hint, IndexEntry, RegionId, WalIndex};
use walfetch_core::plan::PlanConfig;
use walfetch_core::replay::{
    CutRecords, FetchAnswer, FetchId, LostPolicy, OutgoingFetch, RegionRange, ReplayCore,
    ReplayOptions, Room, StrategyKind,
};
use walfetch_testkit::fetch_rules::ReadRequest;
use walfetch_testkit::{Habits, PartitionLog};

/// Regions records belong to (ids `0..REGIONS`), so that several share
/// batches and the index.
const REGIONS: u8 = 6;
/// At most this many batches in the log.
const MAX_BATCHES: usize = 24;
/// At most this many answers are applied.
const MAX_ANSWERS: usize = 256;

/// The whole structured input of the `replay_core` target.
#[derive(Debug, Arbitrary)]
pub struct Input {
    /// The log's batches.
    pub batches: Vec<BatchInput>,
    /// The index's entries, in order.
    pub index: Vec<EntryInput>,
    /// `last_index`, relative to the log's end; `None`: none (a replay
    /// scans).
    pub last_index: Option<i8>,
    /// The regions to replay.
    pub regions: Vec<RegionInput>,
    /// How the replay runs.
    pub options: OptionsInput,
    /// Bit `k % 64` set: the `k`th answer is read by the fetch's
    /// `ResponseDecoder` and handed over with `handle_decoded`, as the
    /// driver does for large requests.
    pub apart: u64,
    /// The answers, in order.
    pub answers: Vec<Answer>,
}

/// One batch of the log.
#[derive(Debug, Arbitrary)]
pub struct BatchInput {
    /// The region of each record (modulo [`REGIONS`]).
    pub records: Vec<u8>,
    /// Offsets left out before the batch (modulo 4): a gap.
    pub gap: u8,
    /// Bytes of each value.
    pub value_len: u8,
    /// The batch's codec.
    pub compression: Compression,
    /// A transaction marker instead of records.
    pub marker: bool,
    /// Per-record checksums (modulo 3): none, right, or wrong on every
    /// other record.
    pub checksums: u8,
}

/// One index entry.
#[derive(Debug, Arbitrary)]
pub struct EntryInput {
    /// Its region (modulo [`REGIONS`] + 2: some regions have no records).
    pub region: u8,
    /// Its offset, after the previous entry's.
    pub step: u8,
    /// Its hints.
    pub hint: Option<HintInput>,
}

/// An entry's hints: the writer's, or anything.
#[derive(Debug, Arbitrary)]
pub enum HintInput {
    /// The record's real batch and end, when the offset holds one.
    Exact,
    /// Anything the index accepts.
    Forged {
        /// How far below the entry its batch starts.
        base_back: u8,
        /// The batch's length.
        len: u16,
        /// Where the record ends in it.
        end: u16,
    },
}

/// One region to replay.
#[derive(Debug, Arbitrary)]
pub struct RegionInput {
    /// Its id (modulo [`REGIONS`] + 2).
    pub region: u8,
    /// Its checkpoint, modulo the log's end + 2.
    pub from: u16,
    /// Where its range ends past the checkpoint; `None`: the log's end.
    pub to: Option<u8>,
}

/// How the replay runs.
#[derive(Debug, Arbitrary)]
pub struct OptionsInput {
    /// Index, estimate or scan (modulo 3).
    pub strategy: u8,
    /// Fetches in flight (modulo 4, plus 1).
    pub in_flight: u8,
    /// Which records of a batch the broker cut to use: checked, trusted or
    /// none (modulo 3).
    pub cut_records: u8,
    /// Skip lost offsets instead of failing.
    pub skip_lost: bool,
    /// `read_committed`.
    pub read_committed: bool,
    /// Check CRCs.
    pub verify_crc: bool,
    /// The fetch cap in 64-byte units (0: the default).
    pub max_fetch: u16,
    /// The probe's limit in 64-byte units (0: the default).
    pub probe: u16,
    /// Fetches without progress allowed (modulo 24).
    pub max_attempts: u8,
    /// The memory cap in 256-byte units (`None`: the default).
    pub max_buffered: Option<u16>,
    /// The partitions the cap is shared by (modulo 8, plus 1): this
    /// replay's fetches ask for that share of it at most.
    pub sharing: u8,
}

/// An offset a broker reports.
#[derive(Debug, Clone, Copy, Arbitrary)]
pub enum Mark {
    /// The log's end, plus this.
    End(i8),
    /// The fetch offset, plus this.
    Fetch(i8),
    /// Anything.
    Any(i64),
}

/// The offsets and aborted transactions an answer reports.
#[derive(Debug, Arbitrary)]
pub struct Marks {
    /// The high watermark.
    pub high_watermark: Mark,
    /// The log start offset.
    pub log_start: Mark,
    /// The last stable offset.
    pub last_stable: Mark,
    /// Aborted transactions: producer id and first offset.
    pub aborted: Vec<(i8, Mark)>,
}

/// A batch header whose fields say anything, of a batch cut short.
#[derive(Debug, Arbitrary)]
pub struct HeaderInput {
    /// Its base offset.
    pub base: Mark,
    /// `batchLength`.
    pub batch_length: i32,
    /// `magic` (`None`: 2).
    pub magic: Option<i8>,
    /// `attributes`.
    pub attributes: i16,
    /// `lastOffsetDelta`.
    pub last_offset_delta: i32,
    /// `producerId`.
    pub producer_id: i64,
    /// `recordCount`.
    pub record_count: i32,
}

/// What becomes of the fetch at `pick` (modulo the fetches in flight).
#[derive(Debug, Arbitrary)]
pub enum Answer {
    /// The log as a broker serves it: from the batch holding the fetch
    /// offset under `habits` (bit 0 never cut, bit 1 skip the containing
    /// batch, bit 2 repeat the last batch), `skip` batches further, cut at
    /// `cut` (else at the limit), with bytes xor-ed at `flips`.
    Log {
        /// The fetch answered.
        pick: u8,
        /// The broker's habits, as bits.
        habits: u8,
        /// Batches skipped past where the read starts.
        skip: u8,
        /// Where the bytes are cut, if not at the limit.
        cut: Option<u16>,
        /// Bytes changed: position (modulo the length), xor mask.
        flips: Vec<(u16, u8)>,
        /// What the response reports.
        marks: Marks,
    },
    /// The log's batches from the one holding the fetch offset, `keep` of
    /// them, then a batch with `header`, cut after `body`.
    CutHeader {
        /// The fetch answered.
        pick: u8,
        /// Whole batches before the cut one.
        keep: u8,
        /// The cut batch's header.
        header: HeaderInput,
        /// Bytes of it after its header.
        body: Vec<u8>,
        /// What the response reports.
        marks: Marks,
    },
    /// Arbitrary bytes as the response's records.
    Raw {
        /// The fetch answered.
        pick: u8,
        /// The records.
        records: Vec<u8>,
        /// What the response reports.
        marks: Marks,
    },
    /// `OFFSET_OUT_OF_RANGE`, then the partition's offsets.
    OutOfRange {
        /// The fetch answered.
        pick: u8,
        /// The log start offset.
        log_start: Mark,
        /// The log end offset.
        log_end: Mark,
    },
    /// The fetch failed.
    Error {
        /// The fetch answered.
        pick: u8,
    },
    /// An answer for a fetch not in flight (answered already, or never
    /// sent).
    Stray {
        /// The id answered.
        id: u8,
        /// The records.
        records: Vec<u8>,
    },
    /// The driver found the replay making no progress.
    Stalled,
}

/// What a run did, for choosing seeds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    /// Answers applied.
    pub answers: usize,
    /// Entries yielded.
    pub entries: usize,
    /// Whether an error ended the replay.
    pub failed: bool,
    /// Cut batches applied whose header's last offset delta is negative.
    pub negative_deltas: usize,
}

/// The log built from the input.
struct Log {
    log: PartitionLog,
    /// Each record's batch base, batch length and end in it.
    records: BTreeMap<i64, Hint>,
}

impl Log {
    fn end(&self) -> i64 {
        self.log.high_watermark()
    }

    fn at(&self, mark: Mark, fetch: i64) -> i64 {
        match mark {
            Mark::End(d) => self.end().saturating_add(i64::from(d)),
            Mark::Fetch(d) => fetch.saturating_add(i64::from(d)),
            Mark::Any(o) => o,
        }
    }

    /// The bytes of whole batches from index `first`, `count` of them.
    fn batches(&self, first: usize, count: usize) -> Bytes {
        let extents = self.log.extents();
        let first = first.min(extents.len());
        let last = first.saturating_add(count).min(extents.len());
        match (
            extents.get(first),
            last.checked_sub(1).and_then(|l| extents.get(l)),
        ) {
            (Some(a), Some(b)) if first < last => self.log.bytes(a.position..b.end()),
            _ => Bytes::new(),
        }
    }

    /// The index of the batch holding `offset`, or the first after it.
    fn holding(&self, offset: i64) -> usize {
        self.log
            .extents()
            .partition_point(|e| e.last_offset < offset)
    }
}

fn build_log(batches: &[BatchInput]) -> Log {
    let mut log = PartitionLog::new();
    let mut records = BTreeMap::new();
    let mut next = 0i64;
    for b in batches.iter().take(MAX_BATCHES) {
        let base = next + i64::from(b.gap % 4);
        let builder = BatchBuilder::new(base).compression(b.compression);
        let encoded = if b.marker {
            builder
                .producer(7, 0, 0)
                .encode_marker(ControlType::Commit, 0, base)
        } else {
            let new: Vec<NewRecord> = (0..)
                .zip(b.records.iter().take(32))
                .map(|(delta, &r)| {
                    let key = RegionId::from(r % REGIONS).to_be_bytes();
                    let value = vec![r; usize::from(b.value_len)];
                    let mut sum = record_checksum_header(Some(&key), Some(&value));
                    if b.checksums % 3 == 2 && delta % 2 == 1 {
                        sum[0] ^= 1;
                    }
                    NewRecord {
                        offset_delta: delta,
                        timestamp: base + i64::from(delta),
                        key: Some(Bytes::copy_from_slice(&key)),
                        value: Some(Bytes::from(value)),
                        headers: (b.checksums % 3 != 0)
                            .then(|| {
                                (
                                    Bytes::from_static(RECORD_CHECKSUM_HEADER.as_bytes()),
                                    Some(Bytes::copy_from_slice(&sum)),
                                )
                            })
                            .into_iter()
                            .collect(),
                    }
                })
                .collect();
            builder.encode(&new)
        };
        let Ok(encoded) = encoded else { continue };
        let len = encoded.bytes.len() as u32;
        for i in 0..encoded.record_ranges.len() {
            let end = encoded.record_end_in_batch(i).map_or(len, |e| e as u32);
            let hint = Hint {
                batch_base: base,
                batch_len: len,
                record_end: end,
            };
            records.insert(base + i as i64, hint);
        }
        next = encoded.header.next_offset();
        if log.append_at(encoded.bytes).is_err() {
            break;
        }
    }
    Log { log, records }
}

fn build_index(input: &Input, log: &Log) -> WalIndex {
    let mut index = WalIndex::new();
    let mut offset = -1i64;
    for e in input.index.iter().take(256) {
        offset += 1 + i64::from(e.step % 16);
        let region = RegionId::from(e.region % (REGIONS + 2));
        let hint = match e.hint {
            None => None,
            Some(HintInput::Exact) => log.records.get(&offset).copied(),
            Some(HintInput::Forged {
                base_back,
                len,
                end,
            }) => Some(Hint {
                batch_base: offset - i64::from(base_back),
                batch_len: u32::from(len),
                record_end: u32::from(end),
            }),
        };
        // The index refuses impossible hints; the entry goes in bare.
        if index.push(region, IndexEntry { offset, hint }).is_err() {
            let _ = index.push(region, IndexEntry::offset_only(offset));
        }
    }
    if let Some(d) = input.last_index {
        index.set_last_index(log.end() + i64::from(d));
    }
    index
}

fn build_regions(input: &Input, log: &Log) -> Vec<RegionRange> {
    let end = log.end();
    input
        .regions
        .iter()
        .take(6)
        .map(|r| {
            let from = i64::from(r.from) % (end + 2);
            let to = r.to.map_or(end, |t| from + i64::from(t) % (end - from + 3));
            RegionRange {
                region: RegionId::from(r.region % (REGIONS + 2)),
                from,
                to,
            }
        })
        .collect()
}

fn build_options(o: &OptionsInput) -> ReplayOptions {
    let strategy = match o.strategy % 3 {
        0 => StrategyKind::Index,
        1 => StrategyKind::Estimate,
        _ => StrategyKind::Scan,
    };
    let mut plan = PlanConfig::default();
    if o.max_fetch > 0 {
        plan.max_fetch_bytes = u32::from(o.max_fetch) * 64;
    }
    if o.probe > 0 {
        plan.probe_bytes = u32::from(o.probe) * 64;
    }
    let mut options = ReplayOptions::default()
        .with_strategy(strategy)
        .with_plan(plan)
        .with_max_in_flight(usize::from(o.in_flight % 4) + 1)
        .with_cut_records(
            [CutRecords::Checked, CutRecords::Trusted, CutRecords::Never]
                [usize::from(o.cut_records % 3)],
        )
        .with_on_lost([LostPolicy::Error, LostPolicy::Skip][usize::from(o.skip_lost)])
        .with_isolation(
            [
                IsolationLevel::ReadUncommitted,
                IsolationLevel::ReadCommitted,
            ][usize::from(o.read_committed)],
        )
        .with_decode(DecodeOptions {
            verify_crc: o.verify_crc,
            max_decompressed_bytes: 1 << 20,
        })
        .with_max_attempts(u32::from(o.max_attempts % 24));
    if let Some(cap) = o.max_buffered {
        options = options.with_max_buffered_bytes(u64::from(cap) * 256);
    }
    options
}

fn habits(bits: u8) -> Habits {
    Habits {
        never_cut: bits & 1 != 0,
        overshoot: bits & 8 != 0,
        skip_containing_batch: bits & 2 != 0,
        repeat_last_batch: bits & 4 != 0,
        // The cluster client's concern, not the core's.
        omit_below_wait_ms: 0,
        empty_below_wait_ms: 0,
        segment_bytes: 0,
        spend_request_bytes: false,
    }
}

fn header_bytes(h: &HeaderInput, base: i64) -> Vec<u8> {
    let mut out = Vec::with_capacity(61);
    out.extend_from_slice(&base.to_be_bytes());
    out.extend_from_slice(&h.batch_length.to_be_bytes());
    out.extend_from_slice(&(-1i32).to_be_bytes()); // partition leader epoch
    out.push(h.magic.unwrap_or(2) as u8);
    out.extend_from_slice(&0u32.to_be_bytes()); // CRC: a cut batch's is never checked
    out.extend_from_slice(&h.attributes.to_be_bytes());
    out.extend_from_slice(&h.last_offset_delta.to_be_bytes());
    out.extend_from_slice(&0i64.to_be_bytes()); // base timestamp
    out.extend_from_slice(&0i64.to_be_bytes()); // max timestamp
    out.extend_from_slice(&h.producer_id.to_be_bytes());
    out.extend_from_slice(&0i16.to_be_bytes()); // producer epoch
    out.extend_from_slice(&0i32.to_be_bytes()); // base sequence
    out.extend_from_slice(&h.record_count.to_be_bytes());
    out
}

/// What the replay yielded so far, checked as it comes.
struct Checker {
    ranges: Vec<RegionRange>,
    last: BTreeMap<RegionId, i64>,
    failed: bool,
    entries: usize,
}

impl Checker {
    fn drain(&mut self, core: &mut ReplayCore, now: Instant) {
        while let Some(item) = core.poll_entry(now) {
            assert!(!self.failed, "the replay yielded after its error");
            match item {
                Ok(entry) => {
                    let offset = entry.record.offset();
                    let range = self
                        .ranges
                        .iter()
                        .find(|r| r.region == entry.region)
                        .unwrap_or_else(|| panic!("region {} was not asked for", entry.region));
                    assert!(
                        (range.from..range.to).contains(&offset),
                        "offset {offset} outside region {}'s range {}..{}",
                        entry.region,
                        range.from,
                        range.to
                    );
                    if let Some(&previous) = self.last.get(&entry.region) {
                        assert!(
                            offset > previous,
                            "region {}: offset {offset} after {previous}",
                            entry.region
                        );
                    }
                    self.last.insert(entry.region, offset);
                    self.entries += 1;
                    std::hint::black_box((entry.record.key(), entry.record.value()));
                }
                Err(error) => {
                    self.failed = true;
                    std::hint::black_box(error.to_string());
                    assert!(core.is_finished(), "a failed replay is finished");
                }
            }
        }
    }
}

/// Runs the replay `input` describes; panics if what must hold for any
/// input does not.
pub fn run(input: &Input) -> Summary {
    let now = Instant::now();
    let log = build_log(&input.batches);
    let index = build_index(input, &log);
    let ranges = build_regions(input, &log);
    let options = build_options(&input.options);
    let in_flight_max = options.max_in_flight;
    let max_buffered = options.max_buffered_bytes;
    let Ok(mut core) =
        ReplayCore::<std::convert::Infallible>::new("fuzz", 0, &index, &ranges, options, now)
    else {
        return Summary::default();
    };
    let mut check = Checker {
        ranges,
        last: BTreeMap::new(),
        failed: false,
        entries: 0,
    };
    let mut summary = Summary::default();
    let mut in_flight: Vec<OutgoingFetch> = Vec::new();
    let mut round_trips = 0;
    for (k, answer) in input.answers.iter().take(MAX_ANSWERS).enumerate() {
        let apart = input.apart & (1 << (k % 64)) != 0;
        while in_flight.len() < in_flight_max {
            let room = Room {
                memory: max_buffered.saturating_sub(core.held_bytes()),
                share: max_buffered / (u64::from(input.options.sharing % 8) + 1),
                ..Room::UNLIMITED
            };
            let Some(fetch) = core.poll_fetch(room, round_trips) else {
                break;
            };
            assert!(!check.failed, "a fetch after the replay failed");
            in_flight.push(fetch);
        }
        check.drain(&mut core, now);
        summary.answers += 1;
        let picked = match answer {
            Answer::Log { pick, .. }
            | Answer::CutHeader { pick, .. }
            | Answer::Raw { pick, .. }
            | Answer::OutOfRange { pick, .. }
            | Answer::Error { pick }
                if !in_flight.is_empty() =>
            {
                Some(in_flight.remove(usize::from(*pick) % in_flight.len()))
            }
            _ => None,
        };
        if let Some(rt) = picked.as_ref().and_then(|f| core.round_trip_of(f.id)) {
            round_trips = round_trips.max(rt);
        }
        match (answer, picked) {
            (Answer::Stalled, _) => core.fail_stalled(),
            (Answer::Stray { id, records }, _) => {
                let id = FetchId::from(*id);
                if in_flight.iter().all(|f| f.id != id) {
                    let fetched = fetched(Bytes::copy_from_slice(records), &log, 0, None);
                    deliver(&mut core, id, FetchAnswer::Fetched(fetched), apart);
                }
            }
            (Answer::Error { .. }, Some(fetch)) => core.handle_error(
                fetch.id,
                Error::InvalidArgument("fuzz: a failed fetch".into()),
            ),
            (
                Answer::OutOfRange {
                    log_start, log_end, ..
                },
                Some(fetch),
            ) => {
                let answer = FetchAnswer::OutOfRange {
                    log_start: log.at(*log_start, fetch.offset),
                    log_end: log.at(*log_end, fetch.offset),
                };
                deliver(&mut core, fetch.id, answer, apart);
            }
            (Answer::Raw { records, marks, .. }, Some(fetch)) => {
                let records = Bytes::copy_from_slice(records);
                let fetched = fetched(records, &log, fetch.offset, Some(marks));
                deliver(&mut core, fetch.id, FetchAnswer::Fetched(fetched), apart);
            }
            (
                Answer::Log {
                    habits: bits,
                    skip,
                    cut,
                    flips,
                    marks,
                    ..
                },
                Some(fetch),
            ) => {
                let records = served(&log, &fetch, habits(*bits), *skip, *cut, flips);
                let fetched = fetched(records, &log, fetch.offset, Some(marks));
                deliver(&mut core, fetch.id, FetchAnswer::Fetched(fetched), apart);
            }
            (
                Answer::CutHeader {
                    keep,
                    header,
                    body,
                    marks,
                    ..
                },
                Some(fetch),
            ) => {
                let first = log.holding(fetch.offset);
                let mut records = BytesMut::from(&log.batches(first, usize::from(*keep))[..]);
                let base = log.at(header.base, fetch.offset);
                records.extend_from_slice(&header_bytes(header, base));
                records.extend_from_slice(body);
                summary.negative_deltas += usize::from(header.last_offset_delta < 0);
                let fetched = fetched(records.freeze(), &log, fetch.offset, Some(marks));
                deliver(&mut core, fetch.id, FetchAnswer::Fetched(fetched), apart);
            }
            // Nothing in flight to answer.
            (_, None) => {}
        }
        check.drain(&mut core, now);
        std::hint::black_box((core.stats(), core.held_bytes(), core.is_finished()));
    }
    summary.entries = check.entries;
    summary.failed = check.failed;
    summary
}

/// Hands `answer` to the core: read first by the fetch's decoder when
/// `apart` (and the fetch is in flight), as the driver does for large
/// requests.
fn deliver(core: &mut ReplayCore, id: FetchId, answer: FetchAnswer, apart: bool) {
    match core.decoder(id).filter(|_| apart) {
        Some(decoder) => {
            let decoded = decoder.decode(&answer);
            core.handle_decoded(id, answer, decoded);
        }
        None => core.handle_response(id, answer),
    }
}

/// The bytes a broker with `habits` serves for `fetch`, `skip` batches
/// further on, cut at `cut` if given, with `flips` applied.
fn served(
    log: &Log,
    fetch: &OutgoingFetch,
    habits: Habits,
    skip: u8,
    cut: Option<u16>,
    flips: &[(u16, u8)],
) -> Bytes {
    let request = ReadRequest {
        offset: fetch.offset,
        max_bytes: fetch.max_bytes as usize,
        min_one_batch: true,
        habits,
    };
    let from = match log.log.read(request, i64::MAX) {
        Ok(slice) => slice,
        Err(_) => return Bytes::new(),
    };
    let extents = log.log.extents();
    let start = (from.batches.start + usize::from(skip % 4)).min(extents.len());
    let skipped = extents.get(start).map_or(from.bytes.end, |e| e.position);
    let mut end = from.bytes.end.max(skipped);
    if let Some(cut) = cut {
        end = skipped + usize::from(cut);
    }
    let end = end.min(log.log.size());
    let mut bytes = log.log.bytes(skipped.min(end)..end).to_vec();
    if habits.repeat_last_batch && !from.partial && from.batches.end == extents.len() {
        if let Some(last) = extents.last() {
            bytes.extend_from_slice(&log.log.bytes(last.position..last.end()));
        }
    }
    if !bytes.is_empty() {
        let len = bytes.len();
        for &(at, mask) in flips.iter().take(8) {
            bytes[usize::from(at) % len] ^= mask;
        }
    }
    Bytes::from(bytes)
}

/// A response carrying `records`, reporting `marks` (the log's real
/// offsets when `None`).
fn fetched(records: Bytes, log: &Log, fetch: i64, marks: Option<&Marks>) -> FetchedPartition {
    let at = |m: Option<Mark>, default: i64| m.map_or(default, |m| log.at(m, fetch));
    FetchedPartition {
        wire_bytes: records.len() + 90,
        high_watermark: at(marks.map(|m| m.high_watermark), log.end()),
        last_stable_offset: at(marks.map(|m| m.last_stable), log.end()),
        log_start_offset: at(marks.map(|m| m.log_start), 0),
        aborted_transactions: marks.map_or_else(Vec::new, |m| {
            m.aborted
                .iter()
                .take(4)
                .map(|&(producer, first)| AbortedTransaction {
                    producer_id: i64::from(producer),
                    first_offset: log.at(first, fetch),
                })
                .collect()
        }),
        records,
        error_code: ErrorCode::None,
        broker: "fuzz:9092".to_owned(),
        version: 12,
        throttle_time_ms: 0,
        preferred_read_replica: -1,
    }
}
