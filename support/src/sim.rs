//! A simulated partition that drives the real [`ReplayCore`] with no
//! network, in the manner of quinn's `Pair`: the log is real encoded
//! batches (the codec's encoder, several regions' records per batch, the
//! key the region id as 8 bytes big-endian, as `WalWriter` writes them), a
//! broker serves each fetch with testkit's pure Kafka fetch rules and a
//! broker's [`Habits`], and one loop moves fetches and answers between the
//! two — several fetches in flight, answered in a seeded order, with faults
//! injected on demand. A seeded half of the answers is read by the fetch's
//! [`walfetch::replay::ResponseDecoder`] (as the driver does for large requests, on another
//! thread) and handed over with [`ReplayCore::handle_decoded`]; the rest
//! go through [`ReplayCore::handle_response`].
//!
//! The loop checks what must hold for any replay as it goes (it panics
//! otherwise): entries only of regions asked for, each carrying its
//! region's key, offsets strictly increasing per region, nothing after the
//! error that ended a replay. What a region must get is the caller's to
//! compare, with [`SimLog::expected`].

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use walfetch::cluster::{ClientError, FetchedPartition};
use walfetch::codec::{
    record_checksum_header, BatchBuilder, Compression, NewRecord, RECORD_CHECKSUM_HEADER,
};
use walfetch::error::Error;
use walfetch::error_code::ErrorCode;
use walfetch::index::{Hint, IndexEntry, RegionId, WalIndex};
use walfetch::plan::{floor_bytes, FetchRules, LogBatch};
use walfetch::replay::{
    Entry, FetchAnswer, OutgoingFetch, RegionRange, ReplayCore, ReplayOptions, ReplayStats, Room,
};
use walfetch_testkit::fetch_rules::{extents_of, BatchExtent, ReadRequest};
use walfetch_testkit::{Habits, PartitionLog};

/// Bytes a Fetch response adds around one partition's records (headers,
/// topic, partition fields), counted in [`ReplayStats::wire_bytes`].
const RESPONSE_OVERHEAD: usize = 90;

/// Answers after which a replay that has not ended is declared stuck.
const MAX_ANSWERS: usize = 50_000;

/// One batch to write: its records' regions, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BatchSpec {
    /// The region of each record.
    pub regions: Vec<RegionId>,
    /// Offsets left unused before the batch (as compaction leaves them).
    pub gap: u32,
    /// The writer that produced it: an index may cover one writer's only.
    pub writer: u8,
}

/// A batch of a [`SimLog`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimBatch {
    /// Its base offset.
    pub base: i64,
    /// Its last offset.
    pub last: i64,
    /// Where it starts in the log, in bytes.
    pub position: u64,
    /// Its encoded length.
    pub len: u32,
    /// Whether its records are compressed.
    pub compressed: bool,
    /// The writer that produced it.
    pub writer: u8,
}

/// A record of a [`SimLog`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimRecord {
    /// Its offset.
    pub offset: i64,
    /// Its region (its key).
    pub region: RegionId,
    /// Its value: region and offset, then bytes that do not compress.
    pub value: Bytes,
    /// Its batch, an index into [`SimLog::batches`].
    pub batch: usize,
    /// Where it ends in its batch (the batch's length when compressed: a
    /// compressed batch is read whole), as the writer's hint says.
    pub end: u32,
}

/// What an index built from a [`SimLog`] holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexSpec {
    /// The writer's exact hints, or offsets only.
    pub hints: bool,
    /// Entries up to this offset, and `last_index` there; `None`: every
    /// entry and no `last_index` (a replay then scans).
    pub last_index: Option<i64>,
    /// Only this writer's batches, if set.
    pub writer: Option<u8>,
}

/// A partition log of real encoded batches, and what each record is.
#[derive(Debug, Clone)]
pub struct SimLog {
    log: PartitionLog,
    /// Whether every record carries its per-record checksum (as
    /// `WalWriter` writes them): only then may a replay use the records
    /// of a cut batch by default, and so may the floor.
    checksums: bool,
    batches: Vec<SimBatch>,
    records: Vec<SimRecord>,
}

impl SimLog {
    /// Writes `specs` with `compression`; the value of the record at an
    /// offset is `value_len(offset)` bytes long (at least its label). Every
    /// record carries its per-record checksum, as `WalWriter` writes it.
    pub fn build(
        specs: &[BatchSpec],
        compression: Compression,
        value_len: impl Fn(i64) -> usize,
    ) -> Self {
        Self::build_with(specs, compression, value_len, true)
    }

    /// [`SimLog::build`], with per-record checksums or without (as most
    /// writers write).
    pub fn build_with(
        specs: &[BatchSpec],
        compression: Compression,
        value_len: impl Fn(i64) -> usize,
        checksums: bool,
    ) -> Self {
        let mut sim = Self {
            log: PartitionLog::new(),
            checksums,
            batches: Vec::with_capacity(specs.len()),
            records: Vec::new(),
        };
        let mut next = 0i64;
        for spec in specs.iter().filter(|s| !s.regions.is_empty()) {
            let base = next + i64::from(spec.gap);
            let records: Vec<NewRecord> = (0..)
                .zip(&spec.regions)
                .map(|(delta, &region)| {
                    let offset = base + i64::from(delta);
                    let mut value = format!("{region}@{offset};").into_bytes();
                    let len = value_len(offset).max(value.len());
                    value.extend(filler(offset).take(len - value.len()));
                    let key = region.to_be_bytes();
                    let headers = checksums
                        .then(|| {
                            let sum = record_checksum_header(Some(&key), Some(&value));
                            (
                                Bytes::from_static(RECORD_CHECKSUM_HEADER.as_bytes()),
                                Some(Bytes::copy_from_slice(&sum)),
                            )
                        })
                        .into_iter()
                        .collect();
                    NewRecord {
                        offset_delta: delta,
                        timestamp: offset,
                        key: Some(Bytes::copy_from_slice(&key)),
                        value: Some(value.into()),
                        headers,
                    }
                })
                .collect();
            let encoded = BatchBuilder::new(base)
                .compression(compression)
                .encode(&records)
                .expect("encode a batch");
            let len = u32::try_from(encoded.bytes.len()).expect("a batch under 4 GiB");
            let batch = sim.batches.len();
            for (i, r) in records.iter().enumerate() {
                let end = encoded.record_end_in_batch(i).map_or(len, |e| e as u32);
                sim.records.push(SimRecord {
                    offset: base + i64::from(r.offset_delta),
                    region: spec.regions[i],
                    value: r.value.clone().unwrap_or_default(),
                    batch,
                    end,
                });
            }
            sim.batches.push(SimBatch {
                base,
                last: encoded.header.last_offset(),
                position: sim.log.size() as u64,
                len,
                compressed: compression != Compression::None,
                writer: spec.writer,
            });
            next = encoded.header.next_offset();
            sim.log
                .append_at(encoded.bytes)
                .expect("append a valid batch");
        }
        sim
    }

    /// Batches of `sizes[i]` records each, values of `value_len` bytes,
    /// the record at each offset in region `region_of(offset)`.
    pub fn uniform(
        sizes: &[usize],
        value_len: usize,
        compression: Compression,
        region_of: impl Fn(i64) -> RegionId,
    ) -> Self {
        let mut offset = 0i64;
        let specs: Vec<BatchSpec> = sizes
            .iter()
            .map(|&n| BatchSpec {
                regions: (0..n)
                    .map(|_| {
                        offset += 1;
                        region_of(offset - 1)
                    })
                    .collect(),
                ..BatchSpec::default()
            })
            .collect();
        Self::build(&specs, compression, |_| value_len)
    }

    /// Batch `i` as encoded, to produce it to a real broker.
    pub fn batch_bytes(&self, i: usize) -> Bytes {
        let b = &self.batches[i];
        let start = b.position as usize;
        self.log.bytes(start..start + b.len as usize)
    }

    /// The batches, in log order.
    pub fn batches(&self) -> &[SimBatch] {
        &self.batches
    }

    /// Where the batches lie in the log, for testkit's fetch rules.
    pub fn extents(&self) -> &[BatchExtent] {
        self.log.extents()
    }

    /// The records, in offset order.
    pub fn records(&self) -> &[SimRecord] {
        &self.records
    }

    /// The offset after the last batch: the high watermark.
    pub fn end(&self) -> i64 {
        self.log.high_watermark()
    }

    /// Every byte of the log.
    pub fn size(&self) -> u64 {
        self.log.size() as u64
    }

    /// The offsets of `region`'s records.
    pub fn offsets_of(&self, region: RegionId) -> Vec<i64> {
        self.records
            .iter()
            .filter(|r| r.region == region)
            .map(|r| r.offset)
            .collect()
    }

    /// The whole range of `region`: from offset 0 to the log's end.
    pub fn whole(&self, region: RegionId) -> RegionRange {
        RegionRange {
            region,
            from: 0,
            to: self.end(),
        }
    }

    /// The index a writer would have dumped, as `spec` says.
    pub fn index(&self, spec: IndexSpec) -> WalIndex {
        let mut index = WalIndex::new();
        for r in &self.records {
            let b = &self.batches[r.batch];
            if spec.last_index.is_some_and(|l| r.offset > l)
                || spec.writer.is_some_and(|w| w != b.writer)
            {
                continue;
            }
            let hint = spec.hints.then_some(Hint {
                batch_base: b.base,
                batch_len: b.len,
                record_end: r.end,
            });
            index
                .push(
                    r.region,
                    IndexEntry {
                        offset: r.offset,
                        hint,
                    },
                )
                .expect("the log's offsets increase");
        }
        if let Some(last) = spec.last_index {
            index.set_last_index(last);
        }
        index
    }

    /// The complete index of every writer's batches, with hints.
    pub fn full_index(&self) -> WalIndex {
        self.index(IndexSpec {
            hints: true,
            last_index: Some(self.end() - 1),
            writer: None,
        })
    }

    /// The complete index, offsets only (as a GreptimeDB index file gives
    /// them).
    pub fn offsets_index(&self) -> WalIndex {
        self.full_index().without_hints()
    }

    /// What a replay of `range` must yield: its region's records in
    /// `from..to`, as `(offset, value)`.
    pub fn expected(&self, range: &RegionRange) -> Vec<(i64, Bytes)> {
        self.records
            .iter()
            .filter(|r| r.region == range.region && (range.from..range.to).contains(&r.offset))
            .map(|r| (r.offset, r.value.clone()))
            .collect()
    }

    /// The floor of `offsets` (records of this log): the fewest bytes any
    /// consumer must receive to get them under Kafka's fetch rules.
    pub fn floor(&self, offsets: &[i64]) -> u64 {
        let mut log: Vec<LogBatch> = self
            .batches
            .iter()
            .map(|b| LogBatch {
                start: b.position,
                end: b.position + u64::from(b.len),
                wanted_end: None,
            })
            .collect();
        for &o in offsets {
            let r = self
                .records
                .iter()
                .find(|r| r.offset == o)
                .unwrap_or_else(|| panic!("offset {o} is not in the log"));
            let b = &mut log[r.batch];
            // Without per-record checksums a cut batch's records are not
            // used: the batch is read whole.
            let end = if self.checksums {
                b.start + u64::from(r.end)
            } else {
                b.end
            };
            b.wanted_end = Some(b.wanted_end.map_or(end, |w| w.max(end)));
        }
        floor_bytes(&log, FetchRules::Kafka).0
    }
}

/// Faults a [`Sim`] injects.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Faults {
    /// The answer (counted from 0) that is a client error instead: the
    /// replay must end with it.
    pub error_at: Option<usize>,
    /// The chance that an answer is `OFFSET_OUT_OF_RANGE` although its
    /// offset is in range (a stale replica), with the log's real bounds.
    pub spurious_out_of_range: f64,
    /// The chance that an answer's records are cut at an arbitrary byte.
    pub truncate: f64,
    /// Before the answer with this number (counted from 0), the log start
    /// moves to this offset (retention): what lies below is gone.
    pub log_start: Option<(usize, i64)>,
    /// The chance that an answer comes from a replica whose high
    /// watermark lags (a follower, a leader just elected): drawn between
    /// the log start and the real one, it serves what lies below it and
    /// reports it (Kafka answers a fetch past it, within the log, with no
    /// records).
    pub lagging: f64,
}

impl Faults {
    /// No fault.
    pub const NONE: Faults = Faults {
        error_at: None,
        spurious_out_of_range: 0.0,
        truncate: 0.0,
        log_start: None,
        lagging: 0.0,
    };
}

/// The error [`Faults::error_at`] injects.
pub fn injected_error() -> ClientError {
    ClientError::RetriesExhausted {
        operation: "Fetch sim/0 (injected)".to_owned(),
        attempts: 3,
        elapsed: Duration::from_millis(30),
        deadline: Duration::from_millis(30),
        last: None,
    }
}

/// What a replay gave.
#[derive(Debug)]
pub struct Outcome {
    /// What each region asked for got, in the order yielded, as
    /// `(offset, value)`.
    pub regions: BTreeMap<RegionId, Vec<(i64, Bytes)>>,
    /// The error that ended the replay, if one did.
    pub error: Option<Error>,
    /// The core's counters at the end.
    pub stats: ReplayStats,
    /// Every fetch sent, in order.
    pub fetches: Vec<OutgoingFetch>,
    /// Answers given (responses, out-of-range answers and errors).
    pub answers: usize,
}

/// A broker holding one [`SimLog`], answering a [`ReplayCore`]'s fetches;
/// see the module docs.
#[derive(Debug)]
pub struct Sim {
    log: PartitionLog,
    habits: Habits,
    max_in_flight: usize,
    faults: Faults,
    rng: StdRng,
    /// Draws which answers are decoded apart (its own generator, so the
    /// answers' order and faults are the seed's alone).
    apart: StdRng,
}

impl Sim {
    /// A broker serving `log` under `habits`, with one fetch in flight and
    /// no faults; `seed` orders answers and draws faults.
    pub fn new(log: &SimLog, habits: Habits, seed: u64) -> Self {
        Self {
            log: log.log.clone(),
            habits,
            max_in_flight: 1,
            faults: Faults::NONE,
            rng: StdRng::seed_from_u64(seed),
            apart: StdRng::seed_from_u64(!seed),
        }
    }

    /// Lets up to `fetches` be in flight at once (answered in a seeded
    /// order, not the order sent).
    pub fn in_flight(mut self, fetches: usize) -> Self {
        self.max_in_flight = fetches.max(1);
        self
    }

    /// Injects `faults`.
    pub fn faults(mut self, faults: Faults) -> Self {
        self.faults = faults;
        self
    }

    /// Replays `regions` with `index` and `options` to the end, as a
    /// driver would; panics if the core cannot be made or a replay breaks
    /// what must hold for any replay (see the module docs).
    pub fn run(
        &mut self,
        index: &WalIndex,
        regions: &[RegionRange],
        options: ReplayOptions,
    ) -> Outcome {
        let now = Instant::now();
        let max_buffered = options.max_buffered_bytes;
        let mut core = ReplayCore::new("sim", 0, index, regions, options, now)
            .unwrap_or_else(|e| panic!("a replay of {regions:?}: {e}"));
        // As `Recovery` does: the log's end, looked up before the replay.
        core.note_log_end(self.log.high_watermark());
        let mut out = Outcome {
            regions: regions.iter().map(|r| (r.region, Vec::new())).collect(),
            error: None,
            stats: ReplayStats::default(),
            fetches: Vec::new(),
            answers: 0,
        };
        let mut in_flight: Vec<OutgoingFetch> = Vec::new();
        let mut answered_round_trips = 0;
        // Turns in a row that yielded, sent and answered nothing.
        let mut idle = 0;
        loop {
            let mut progress = false;
            while let Some(item) = core.poll_entry(now) {
                progress = true;
                match item {
                    Ok(entry) => take(&mut out, entry),
                    Err(error) => {
                        out.error = Some(error);
                        break;
                    }
                }
            }
            if out.error.is_some() {
                // Answers still to come change nothing.
                for fetch in std::mem::take(&mut in_flight) {
                    self.answer(&mut core, &fetch, out.answers);
                    out.answers += 1;
                }
                assert!(core.is_finished(), "a replay that failed is finished");
                assert!(core.poll_entry(now).is_none(), "an entry after the error");
                assert!(
                    core.poll_fetch(Room::UNLIMITED, answered_round_trips)
                        .is_none(),
                    "a fetch after the error"
                );
                break;
            }
            if core.is_finished() {
                assert!(in_flight.is_empty(), "finished with fetches in flight");
                break;
            }
            while in_flight.len() < self.max_in_flight {
                let headroom = max_buffered.saturating_sub(core.held_bytes());
                let Some(fetch) = core.poll_fetch(Room::of_memory(headroom), answered_round_trips)
                else {
                    break;
                };
                progress = true;
                out.fetches.push(fetch.clone());
                in_flight.push(fetch);
            }
            if in_flight.is_empty() {
                // Nothing to send, nothing to yield, twice: as the driver
                // does, the core says where it stalled.
                idle = if progress { 0 } else { idle + 1 };
                assert!(idle < 4, "a stalled replay that does not end: {core:?}");
                if idle == 2 {
                    core.fail_stalled();
                }
                continue;
            }
            idle = 0;
            let fetch = in_flight.swap_remove(self.rng.random_range(0..in_flight.len()));
            if let Some(round_trip) = core.round_trip_of(fetch.id) {
                answered_round_trips = answered_round_trips.max(round_trip);
            }
            if trace() {
                eprintln!("sim: answer {} to {fetch:?}", out.answers);
            }
            self.answer(&mut core, &fetch, out.answers);
            out.answers += 1;
            assert!(
                out.answers < MAX_ANSWERS,
                "no end after {MAX_ANSWERS} answers: {core:?}"
            );
        }
        out.stats = core.stats();
        out
    }

    /// Answers `fetch`, the `n`th answer, as the broker (and the faults)
    /// would.
    fn answer(&mut self, core: &mut ReplayCore, fetch: &OutgoingFetch, n: usize) {
        if let Some((at, offset)) = self.faults.log_start {
            if at == n {
                self.log.advance_log_start(offset);
            }
        }
        if self.faults.error_at == Some(n) {
            if trace() {
                eprintln!("sim:   injected error");
            }
            core.handle_error(fetch.id, injected_error());
            return;
        }
        let out_of_range = FetchAnswer::OutOfRange {
            log_start: self.log.log_start_offset(),
            log_end: self.log.high_watermark(),
        };
        if self.chance(self.faults.spurious_out_of_range) {
            if trace() {
                eprintln!("sim:   spurious {out_of_range:?}");
            }
            core.handle_response(fetch.id, out_of_range);
            return;
        }
        let request = ReadRequest {
            offset: fetch.offset,
            max_bytes: fetch.max_bytes as usize,
            min_one_batch: true,
            habits: self.habits,
        };
        // A broker whose storage is slower than the fetch may wait answers
        // with no records (as the scripted broker does).
        let hurried = fetch.max_wait.as_millis() < u128::from(self.habits.empty_below_wait_ms);
        let mut high_watermark = self.log.high_watermark();
        if self.chance(self.faults.lagging) {
            let start = self.log.log_start_offset();
            high_watermark = self.rng.random_range(start..=high_watermark.max(start));
            if trace() {
                eprintln!("sim:   from a replica whose high watermark lags at {high_watermark}");
            }
        }
        let Ok(slice) = self.log.read(request, high_watermark) else {
            if trace() {
                eprintln!("sim:   {out_of_range:?}");
            }
            core.handle_response(fetch.id, out_of_range);
            return;
        };
        let mut records = self.log.bytes(slice.bytes.clone());
        // Tansu 0.6: a response that reaches the log's end, its last batch
        // whole, carries that batch twice (as the scripted broker does).
        let batches = self.log.extents().len();
        if self.habits.repeat_last_batch
            && batches > 0
            && slice.batches.end == batches
            && !slice.partial
        {
            let last = self.log.extents()[batches - 1];
            let mut twice = BytesMut::from(&records[..]);
            twice.extend_from_slice(&self.log.bytes(last.position..last.end()));
            records = twice.freeze();
        }
        if hurried {
            if trace() {
                eprintln!("sim:   no records: the fetch may not wait");
            }
            records = Bytes::new();
        }
        if !records.is_empty() && self.chance(self.faults.truncate) {
            let cut = self.rng.random_range(0..records.len());
            records.truncate(cut);
        }
        if trace() {
            let batches: Vec<(i64, i64, usize)> = extents_of(&records)
                .iter()
                .map(|e| (e.base_offset, e.last_offset, e.len))
                .collect();
            eprintln!(
                "sim:   {} bytes of {:?} (+{} bytes of a cut batch)",
                records.len(),
                batches,
                records.len() - batches.iter().map(|b| b.2).sum::<usize>()
            );
        }
        let fetched = FetchedPartition {
            wire_bytes: records.len() + RESPONSE_OVERHEAD,
            records,
            high_watermark,
            last_stable_offset: self.log.last_stable_offset().min(high_watermark),
            log_start_offset: self.log.log_start_offset(),
            aborted_transactions: Vec::new(),
            error_code: ErrorCode::None,
            broker: "sim:9092".to_owned(),
            version: 12,
            throttle_time_ms: 0,
            preferred_read_replica: -1,
        };
        let answer = FetchAnswer::Fetched(fetched);
        match core
            .decoder(fetch.id)
            .filter(|_| self.apart.random_bool(0.5))
        {
            Some(decoder) => {
                let decoded = decoder.decode(&answer);
                core.handle_decoded(fetch.id, answer, decoded);
            }
            None => core.handle_response(fetch.id, answer),
        }
    }

    fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.rng.random_bool(p.min(1.0))
    }
}

/// Records a yielded entry, checking it belongs where it says and comes
/// after its region's previous one.
fn take(out: &mut Outcome, entry: Entry) {
    let Entry { region, record } = entry;
    let offset = record.offset();
    let got = out
        .regions
        .get_mut(&region)
        .unwrap_or_else(|| panic!("offset {offset}: region {region} was not asked for"));
    assert_eq!(
        record.key(),
        Some(&region.to_be_bytes()[..]),
        "offset {offset} yielded for region {region} is another region's"
    );
    if let Some(&(previous, _)) = got.last() {
        assert!(
            offset > previous,
            "region {region}: offset {offset} after {previous}"
        );
    }
    got.push((offset, record.value_bytes().unwrap_or_default()));
}

/// Pseudo-random bytes seeded by `offset`: values that compression cannot
/// shrink away, so compressed batches keep their size.
fn filler(offset: i64) -> impl Iterator<Item = u8> {
    let mut rng = StdRng::seed_from_u64(offset as u64);
    std::iter::repeat_with(move || rng.random::<u8>())
}

/// Whether to print each fetch and answer (`WALFETCH_SIM_TRACE=1`).
fn trace() -> bool {
    std::env::var_os("WALFETCH_SIM_TRACE").is_some()
}
