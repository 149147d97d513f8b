//! Kafka's fetch rules as pure functions: which bytes of a partition log a
//! broker returns for a fetch offset and a byte limit.
//!
//! No IO and no clock: the scripted broker serves Fetch through
//! [`read`], and the replay benchmark uses [`kafka_fetch`] to compute the
//! *floor*, the fewest bytes Kafka must send for a range of records.
//!
//! The rules, as the broker's log read path applies them:
//! - the read starts at the batch that *contains* the fetch offset (the first
//!   batch whose last offset is at or past it), from that batch's first byte;
//! - it is cut at exactly the byte limit, so the last batch may be partial;
//! - with "min one batch" (the first partition of a response that returns
//!   data, KIP-74) the first batch is returned whole even when it is larger
//!   than the limit; without it, a first batch larger than the limit makes
//!   the read return nothing at all, not a cut first batch (Fetch v3+: the
//!   broker replaces an incomplete first batch with no records, so that the
//!   consumer fetches the partition again rather than fail);
//! - nothing at or past the upper bound (the high watermark, or the last
//!   stable offset for `read_committed`) is returned; a fetch offset at the
//!   bound gets no bytes, one outside `[log start, log end]` is
//!   `OFFSET_OUT_OF_RANGE`;
//! - a read returns bytes of one segment only (with
//!   [`Habits::segment_bytes`]; the layout is [`crate::segments`]'s);
//! - under `read_committed` the aborted transactions listed are bounded by
//!   Kafka's sparse offset index, not by the batches returned
//!   ([`AbortedList`]): null when the first batch did not fit, empty at or
//!   past the upper bound.
//!
//! `tests/fetch_rules_kafka.rs` checks all of it against Apache Kafka, on
//! the same batches.
//!
//! Brokers seen in the wild bend these rules; [`Habits`] reproduces some of
//! those habits.
//!
//! # References
//! - Kafka protocol guide, Fetch API ("the server may return a partial
//!   message at the end of the message set").
//! - KIP-74, "Add Fetch Response Size Limit in Bytes" (partitions in request
//!   order, the first batch of the first non-empty partition returned whole).
//! - Apache Kafka `LogSegment.read` / `ReplicaManager.readFromLog` (the start
//!   position, `minOneMessage`, `maxPosition` bounded by the high watermark,
//!   `firstEntryIncomplete` answered with no records).

use std::ops::Range;

use walfetch_codec::{BatchHeader, HEADER_LEN, LOG_OVERHEAD};

use crate::segments::{Layout, SegmentCarry};

/// Where one batch lies in a partition log: its offsets and its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BatchExtent {
    /// Offset of the batch's first record (`baseOffset`).
    pub base_offset: i64,
    /// Offset of the batch's last record (`baseOffset + lastOffsetDelta`).
    pub last_offset: i64,
    /// Byte position of the batch's first byte in the log.
    pub position: usize,
    /// Whole size of the batch, header included.
    pub len: usize,
}

impl BatchExtent {
    /// The extent of a batch with `header`, stored at `position`.
    pub fn from_header(header: &BatchHeader, position: usize) -> Self {
        Self {
            base_offset: header.base_offset,
            last_offset: header.last_offset(),
            position,
            len: header.total_len(),
        }
    }

    /// Byte position right after the batch.
    pub fn end(&self) -> usize {
        self.position + self.len
    }

    /// Offset right after the batch.
    pub fn next_offset(&self) -> i64 {
        self.last_offset.saturating_add(1)
    }

    /// Whether the batch covers `offset`.
    pub fn contains(&self, offset: i64) -> bool {
        self.base_offset <= offset && offset <= self.last_offset
    }
}

/// Lays out the batches of a contiguous log buffer (batches back to back, as
/// in a segment file or a Fetch response's `records`), reading only their
/// headers. Stops at the first incomplete or unreadable header; a trailing
/// partial batch is not included.
pub fn extents_of(log: &[u8]) -> Vec<BatchExtent> {
    let mut extents = Vec::new();
    let mut position = 0;
    while let Some(header) = log.get(position..).and_then(BatchHeader::parse) {
        let len = header.total_len();
        if header.batch_length < 0 || len <= LOG_OVERHEAD || position + len > log.len() {
            break;
        }
        extents.push(BatchExtent::from_header(&header, position));
        position += len;
    }
    extents
}

/// Ways in which a broker departs from Kafka's fetch rules. The default is
/// none: Kafka's rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Habits {
    /// Return whole batches only: stop before a batch that would not fit the
    /// limit, but always return at least one batch (Tansu 0.6).
    pub never_cut: bool,
    /// With `never_cut`: add whole batches while the bytes counted so far
    /// are below the limit, each batch counted without its 61-byte header,
    /// so a response overshoots the limit by up to a batch (Tansu 0.6;
    /// `tests/tansu_habits.rs` pins it). Without it, a never-cut read stops
    /// before a batch that would not fit.
    pub overshoot: bool,
    /// A fetch offset in the middle of a batch starts the read at the *next*
    /// batch, skipping the rest of the containing one (Tansu 0.6; wrong, but
    /// seen).
    pub skip_containing_batch: bool,
    /// A response that reaches the end of the log, its last batch whole,
    /// carries that batch twice. Seen on Tansu 0.6 in the replay bench (a
    /// fetch at offset 577 with an 8 MiB limit over 6.6 MB of batches
    /// ended with the log's last batch twice); what triggers it there is
    /// not pinned down (fetches of 40 or 102 small batches to the log's end
    /// did not repeat), so this habit applies it to every such response.
    pub repeat_last_batch: bool,
    /// A fetch that may wait less than this many milliseconds
    /// (`max_wait_ms`) gets every partition it names left out of the
    /// response altogether: no records, no error, no entry at all. A
    /// broker whose storage is slower than the wait answers so (seen on a
    /// Kafka-compatible broker with `max_wait_ms = 0`, where librdkafka,
    /// which waits up to 500 ms, reads fine). 0: never.
    pub omit_below_wait_ms: u32,
    /// A fetch that may wait less than this many milliseconds
    /// (`max_wait_ms`) gets every partition it names answered with no
    /// records and no error, its high watermark past the fetch offset:
    /// the storage could not be read within the wait. The protocol allows
    /// it (a broker answers with what it has once `max_wait_ms` has
    /// passed, and with 0 that is at once), and Kafka itself answers so,
    /// whatever the fetch's wait, when a read from tiered storage (KIP-405)
    /// outlasts its `remote.fetch.max.wait.ms`. 0: never.
    pub empty_below_wait_ms: u32,
    /// Kafka's `log.segment.bytes`: the log is rolled into segments, a new
    /// one begun where the next batch would take the current one past
    /// this many bytes (a batch larger than that gets one of its own), and
    /// a read returns bytes of one segment only, so a response ends at the
    /// end of the segment holding its first batch, with fewer bytes than
    /// asked although more lie past it (Kafka's `LocalLog.read` reads the
    /// first segment that has data at the offset). Kafka's own rule with
    /// segments rolled by size; 0: the log is one segment.
    pub segment_bytes: u32,
    /// `partition_max_bytes` is ignored: each partition of a request reads
    /// up to what is left of the request's `max_bytes`, and one reached
    /// with nothing left gets no records, even below its high watermark
    /// (Tansu 0.6: the first partition of a two-partition fetch took
    /// three batches, the second none; `tests/tansu_habits.rs`).
    pub spend_request_bytes: bool,
}

impl Habits {
    /// Kafka's own rules.
    pub const KAFKA: Habits = Habits {
        never_cut: false,
        overshoot: false,
        skip_containing_batch: false,
        repeat_last_batch: false,
        omit_below_wait_ms: 0,
        empty_below_wait_ms: 0,
        segment_bytes: 0,
        spend_request_bytes: false,
    };
    /// The habits observed on Tansu 0.6.
    pub const TANSU_0_6: Habits = Habits {
        never_cut: true,
        overshoot: true,
        skip_containing_batch: true,
        repeat_last_batch: true,
        omit_below_wait_ms: 0,
        empty_below_wait_ms: 0,
        segment_bytes: 0,
        spend_request_bytes: true,
    };
    /// Kafka's rules, except that a fetch that may wait less than 50 ms
    /// gets its partitions left out ([`Habits::omit_below_wait_ms`]).
    pub const OMITS_WHEN_HURRIED: Habits = Habits {
        omit_below_wait_ms: 50,
        ..Habits::KAFKA
    };
    /// Kafka's rules, except that a fetch that may wait less than 50 ms
    /// gets its partitions answered with no records
    /// ([`Habits::empty_below_wait_ms`]).
    pub const EMPTY_WHEN_HURRIED: Habits = Habits {
        empty_below_wait_ms: 50,
        ..Habits::KAFKA
    };
}

/// The offsets that bound a read of one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReadBounds {
    /// The log start offset: fetch offsets below it are out of range.
    pub log_start_offset: i64,
    /// The log end offset: fetch offsets above it are out of range.
    pub log_end_offset: i64,
    /// Nothing at or past this offset is returned: the high watermark, or
    /// the last stable offset for `read_committed`. A batch boundary.
    pub upper_bound: i64,
    /// Where the log's first batch stands in its segment (batches before
    /// it removed by a moved log start); matters only with
    /// [`Habits::segment_bytes`].
    pub carry: SegmentCarry,
}

impl ReadBounds {
    /// The bounds of a log that holds exactly `log`'s batches, all committed:
    /// from the first batch's base offset to the last batch's next offset
    /// (`0..0` for an empty log).
    pub fn of(log: &[BatchExtent]) -> Self {
        let start = log.first().map_or(0, |b| b.base_offset);
        let end = log.last().map_or(start, BatchExtent::next_offset);
        Self {
            log_start_offset: start,
            log_end_offset: end,
            upper_bound: end,
            carry: SegmentCarry::default(),
        }
    }
}

/// One partition's part of a fetch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReadRequest {
    /// The fetch offset.
    pub offset: i64,
    /// The byte limit: `min(partition_max_bytes, what is left of the
    /// request's max_bytes)`.
    pub max_bytes: usize,
    /// Return the first batch whole even when it exceeds `max_bytes`: true
    /// for the first partition of a response that returns data (KIP-74).
    /// When false, a first batch over `max_bytes` means no bytes at all.
    pub min_one_batch: bool,
    /// How the broker departs from Kafka's rules.
    pub habits: Habits,
}

impl ReadRequest {
    /// A read under Kafka's rules of a single-partition fetch.
    pub fn kafka(offset: i64, max_bytes: usize) -> Self {
        Self {
            offset,
            max_bytes,
            min_one_batch: true,
            habits: Habits::KAFKA,
        }
    }
}

/// What a read returns: a byte range of the log.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ReadSlice {
    /// The log bytes returned (empty when nothing is).
    pub bytes: Range<usize>,
    /// Indexes of the batches the bytes touch, the partial one included.
    pub batches: Range<usize>,
    /// Whether the last batch is cut short.
    pub partial: bool,
    /// Which aborted transactions Kafka lists with the read, under
    /// `read_committed`.
    pub aborted: AbortedList,
}

/// The aborted transactions Kafka lists with a `read_committed` read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AbortedList {
    /// None at all (a null list): the first batch did not fit the byte
    /// limit, and Kafka replaced the cut read with no records.
    Null,
    /// An empty list: the fetch offset is at or past the upper bound.
    Empty,
    /// Those whose abort marker is at or past the fetch offset and whose
    /// first offset is before this bound (Kafka's, from its sparse offset
    /// index: see [`crate::segments`]).
    Before(i64),
}

impl ReadSlice {
    /// How many bytes are returned.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether no bytes are returned.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}

/// The fetch offset lies outside `[log start, log end]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[error("fetch offset {offset} is out of range [{log_start_offset}, {log_end_offset}]")]
pub struct OffsetOutOfRange {
    /// The fetch offset asked for.
    pub offset: i64,
    /// The log start offset.
    pub log_start_offset: i64,
    /// The log end offset.
    pub log_end_offset: i64,
}

/// Reads one partition: the bytes of `log` a broker returns for `request`.
///
/// `log` holds the partition's batches in offset order, laid out back to back
/// (each batch's position is the previous one's end).
pub fn read(
    log: &[BatchExtent],
    bounds: ReadBounds,
    request: ReadRequest,
) -> Result<ReadSlice, OffsetOutOfRange> {
    let layout = Layout::new(log, bounds.carry, request.habits.segment_bytes);
    read_laid_out(log, &layout, bounds, request)
}

/// [`read`] with the log's segment layout already made (for
/// `request.habits.segment_bytes`, after `bounds.carry`): a log kept
/// between reads lays out only what was appended since.
pub fn read_laid_out(
    log: &[BatchExtent],
    layout: &Layout,
    bounds: ReadBounds,
    request: ReadRequest,
) -> Result<ReadSlice, OffsetOutOfRange> {
    let offset = request.offset;
    if offset < bounds.log_start_offset || offset > bounds.log_end_offset {
        return Err(OffsetOutOfRange {
            offset,
            log_start_offset: bounds.log_start_offset,
            log_end_offset: bounds.log_end_offset,
        });
    }
    let log_end_position = log.last().map_or(0, BatchExtent::end);
    // The batch that contains the offset, or the first one after it.
    let mut start = log.partition_point(|b| b.last_offset < offset);
    if request.habits.skip_containing_batch
        && log.get(start).is_some_and(|b| b.base_offset < offset)
    {
        start += 1;
    }
    // The first batch not below the upper bound, nor past the segment the
    // read starts in: the read stops at its start.
    let bound_index = log
        .partition_point(|b| b.base_offset < bounds.upper_bound)
        .min(layout.segment_end(start));
    let max_position = log
        .get(bound_index)
        .map_or(log_end_position, |b| b.position);
    let empty = |index: usize, aborted: AbortedList| {
        let position = log.get(index).map_or(log_end_position, |b| b.position);
        ReadSlice {
            bytes: position..position,
            batches: index..index,
            partial: false,
            aborted,
        }
    };
    let aborted_after = |read: usize| {
        AbortedList::Before(layout.aborted_bound(log, start, read, bounds.log_end_offset))
    };
    let Some(first) = log.get(start) else {
        return Ok(empty(start, AbortedList::Empty));
    };
    if offset >= bounds.upper_bound || start >= bound_index {
        return Ok(empty(start, AbortedList::Empty));
    }

    let end = if request.habits.never_cut {
        // Whole batches only, at least one.
        let mut end = first.end();
        let mut counted = first.len.saturating_sub(HEADER_LEN);
        for batch in &log[start + 1..bound_index] {
            let fits = if request.habits.overshoot {
                counted < request.max_bytes
            } else {
                batch.end() - first.position <= request.max_bytes
            };
            if !fits {
                break;
            }
            end = batch.end();
            counted += batch.len.saturating_sub(HEADER_LEN);
        }
        end
    } else {
        let limit = if request.min_one_batch {
            request.max_bytes.max(first.len)
        } else if request.max_bytes == 0 {
            // Kafka reads nothing, but lists aborted transactions.
            return Ok(empty(start, aborted_after(0)));
        } else if request.max_bytes < first.len {
            // Kafka sends no records rather than a first batch cut short,
            // and no aborted transactions either.
            return Ok(empty(start, AbortedList::Null));
        } else {
            request.max_bytes
        };
        first.position + limit.min(max_position - first.position)
    };
    if end == first.position {
        return Ok(empty(start, aborted_after(0)));
    }
    // The batches touched: up to the one holding the last byte.
    let last = start + log[start..bound_index].partition_point(|b| b.position < end);
    let partial = log.get(last - 1).is_some_and(|b| b.end() > end);
    Ok(ReadSlice {
        bytes: first.position..end,
        batches: start..last,
        partial,
        aborted: aborted_after(end - first.position),
    })
}

/// The bytes Kafka returns for a single-partition fetch at `offset` with the
/// byte limit `max_bytes`, from a log holding exactly `log`'s batches (all
/// committed): a byte range of the log.
///
/// ```
/// use walfetch_testkit::fetch_rules::{kafka_fetch, BatchExtent};
///
/// // Two batches: offsets 0..=9 in bytes 0..100, offsets 10..=19 in 100..250.
/// let log = [
///     BatchExtent { base_offset: 0, last_offset: 9, position: 0, len: 100 },
///     BatchExtent { base_offset: 10, last_offset: 19, position: 100, len: 150 },
/// ];
/// // Offset 5 is inside the first batch: the read starts at its first byte
/// // and is cut inside the second batch.
/// assert_eq!(kafka_fetch(&log, 5, 120), Ok(0..120));
/// // The first batch is returned whole even over the limit.
/// assert_eq!(kafka_fetch(&log, 12, 10), Ok(100..250));
/// ```
pub fn kafka_fetch(
    log: &[BatchExtent],
    offset: i64,
    max_bytes: usize,
) -> Result<Range<usize>, OffsetOutOfRange> {
    read(
        log,
        ReadBounds::of(log),
        ReadRequest::kafka(offset, max_bytes),
    )
    .map(|slice| slice.bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Batches of `(base, last, len)` laid out back to back.
    fn layout(batches: &[(i64, i64, usize)]) -> Vec<BatchExtent> {
        let mut position = 0;
        batches
            .iter()
            .map(|&(base_offset, last_offset, len)| {
                let extent = BatchExtent {
                    base_offset,
                    last_offset,
                    position,
                    len,
                };
                position += len;
                extent
            })
            .collect()
    }

    /// Offsets 0..=9 (100 bytes), 10..=19 (150 bytes), 20..=24 (50 bytes),
    /// then a gap (compaction) and 30..=39 (200 bytes).
    fn sample() -> Vec<BatchExtent> {
        layout(&[(0, 9, 100), (10, 19, 150), (20, 24, 50), (30, 39, 200)])
    }

    struct Case {
        name: &'static str,
        offset: i64,
        max_bytes: usize,
        min_one_batch: bool,
        upper_bound: Option<i64>,
        habits: Habits,
        expect: Result<(Range<usize>, Range<usize>, bool), ()>,
    }

    fn case(name: &'static str, offset: i64, max_bytes: usize) -> Case {
        Case {
            name,
            offset,
            max_bytes,
            min_one_batch: true,
            upper_bound: None,
            habits: Habits::KAFKA,
            expect: Err(()),
        }
    }

    impl Case {
        fn ok(mut self, bytes: Range<usize>, batches: Range<usize>, partial: bool) -> Self {
            self.expect = Ok((bytes, batches, partial));
            self
        }
        fn out_of_range(mut self) -> Self {
            self.expect = Err(());
            self
        }
        fn not_first(mut self) -> Self {
            self.min_one_batch = false;
            self
        }
        fn upper(mut self, bound: i64) -> Self {
            self.upper_bound = Some(bound);
            self
        }
        fn habits(mut self, habits: Habits) -> Self {
            self.habits = habits;
            self
        }
    }

    #[test]
    fn kafka_rules_table() {
        let never_cut = Habits {
            never_cut: true,
            ..Habits::KAFKA
        };
        let skip = Habits {
            skip_containing_batch: true,
            ..Habits::KAFKA
        };
        let overshoot = Habits {
            overshoot: true,
            ..never_cut
        };
        let segmented = Habits {
            segment_bytes: 200,
            ..Habits::KAFKA
        };
        let cases = [
            case("offset at batch start, limit covers all", 0, 10_000).ok(0..500, 0..4, false),
            case("offset at second batch start", 10, 10_000).ok(100..500, 1..4, false),
            case("mid-batch offset starts at the containing batch", 5, 10_000).ok(
                0..500,
                0..4,
                false,
            ),
            case("last offset of a batch", 19, 10_000).ok(100..500, 1..4, false),
            case(
                "limit inside the second batch leaves a partial batch",
                0,
                120,
            )
            .ok(0..120, 0..2, true),
            case("limit at a batch boundary", 0, 250).ok(0..250, 0..2, false),
            case("limit one byte into the third batch", 0, 251).ok(0..251, 0..3, true),
            case("first batch larger than the limit comes whole", 10, 20).ok(100..250, 1..2, false),
            case("limit zero still returns the first batch", 0, 0).ok(0..100, 0..1, false),
            case("not the first partition: zero limit, nothing", 0, 0)
                .not_first()
                .ok(0..0, 0..0, false),
            case(
                "not the first partition: a first batch over the limit, nothing",
                10,
                20,
            )
            .not_first()
            .ok(100..100, 1..1, false),
            case("not the first partition: the second batch cut", 10, 170)
                .not_first()
                .ok(100..270, 1..3, true),
            case(
                "offset in a compaction gap starts at the next batch",
                26,
                10_000,
            )
            .ok(300..500, 3..4, false),
            case("offset == high watermark: empty", 40, 10_000).ok(500..500, 4..4, false),
            case("offset past the high watermark", 41, 10_000).out_of_range(),
            case("offset below the log start", -1, 10_000).out_of_range(),
            case("read_committed stops at the LSO", 0, 10_000)
                .upper(20)
                .ok(0..250, 0..2, false),
            case("read_committed cut before the LSO", 0, 120)
                .upper(20)
                .ok(0..120, 0..2, true),
            case("offset == LSO: empty", 20, 10_000)
                .upper(20)
                .ok(250..250, 2..2, false),
            case("between LSO and HW: empty, not an error", 22, 10_000)
                .upper(20)
                .ok(250..250, 2..2, false),
            case("first batch over the limit stops at the LSO", 10, 10)
                .upper(20)
                .ok(100..250, 1..2, false),
            case("never_cut: stop before a batch that does not fit", 0, 260)
                .habits(never_cut)
                .ok(0..250, 0..2, false),
            case("never_cut: at least one batch", 0, 1)
                .habits(never_cut)
                .ok(0..100, 0..1, false),
            // Counted without headers, the first batch is 39 < 100: the
            // second comes too, ending 150 bytes past the limit.
            case("overshoot: a batch past the limit", 0, 100)
                .habits(overshoot)
                .ok(0..250, 0..2, false),
            case("overshoot: the count reaching the limit stops", 0, 128)
                .habits(overshoot)
                .ok(0..250, 0..2, false),
            case("overshoot: a limit of one, one batch", 0, 1)
                .habits(overshoot)
                .ok(0..100, 0..1, false),
            case("skip: mid-batch offset starts at the next batch", 5, 10_000)
                .habits(skip)
                .ok(100..500, 1..4, false),
            case("skip: offset at batch start is kept", 10, 10_000)
                .habits(skip)
                .ok(100..500, 1..4, false),
            case("skip: mid last batch gives nothing", 35, 10_000)
                .habits(skip)
                .ok(500..500, 4..4, false),
            // Segments of 200 bytes: batch 0 (the next would take it to
            // 250), batches 1 and 2 (200 bytes), batch 3.
            case("segments: the read stops at its segment's end", 0, 10_000)
                .habits(segmented)
                .ok(0..100, 0..1, false),
            case("segments: a read in the second segment", 12, 10_000)
                .habits(segmented)
                .ok(100..300, 1..3, false),
            case("segments: a cut within the segment", 10, 170)
                .habits(segmented)
                .ok(100..270, 1..3, true),
            case(
                "segments: a gap at a segment's end reads the next",
                26,
                10_000,
            )
            .habits(segmented)
            .ok(300..500, 3..4, false),
        ];
        let log = sample();
        for c in cases {
            let mut bounds = ReadBounds::of(&log);
            if let Some(bound) = c.upper_bound {
                bounds.upper_bound = bound;
            }
            let request = ReadRequest {
                offset: c.offset,
                max_bytes: c.max_bytes,
                min_one_batch: c.min_one_batch,
                habits: c.habits,
            };
            let got = read(&log, bounds, request)
                .map(|s| (s.bytes, s.batches, s.partial))
                .map_err(|_| ());
            assert_eq!(got, c.expect, "case: {}", c.name);
        }
    }

    #[test]
    fn kafka_fetch_matches_read() {
        let log = sample();
        assert_eq!(kafka_fetch(&log, 5, 120), Ok(0..120));
        assert_eq!(
            kafka_fetch(&log, 99, 1),
            Err(OffsetOutOfRange {
                offset: 99,
                log_start_offset: 0,
                log_end_offset: 40
            })
        );
        assert_eq!(kafka_fetch(&[], 0, 100), Ok(0..0));
    }

    #[test]
    fn kafka_lists_aborted_transactions_up_to_its_index_bound() {
        let aborted = |log: &[BatchExtent], bounds: ReadBounds, request: ReadRequest| {
            read(log, bounds, request).map(|s| s.aborted)
        };
        let log = sample();
        let bounds = ReadBounds::of(&log);
        // 500 bytes, no index entry: the bound is the log end offset, past
        // the batches returned.
        assert_eq!(
            aborted(&log, bounds, ReadRequest::kafka(0, 120)),
            Ok(AbortedList::Before(40))
        );
        let mut committed = bounds;
        committed.upper_bound = 20;
        assert_eq!(
            aborted(&log, committed, ReadRequest::kafka(20, 10_000)),
            Ok(AbortedList::Empty),
            "at the last stable offset: an empty list"
        );
        let later = |max_bytes| ReadRequest {
            min_one_batch: false,
            ..ReadRequest::kafka(12, max_bytes)
        };
        assert_eq!(
            aborted(&log, bounds, later(10)),
            Ok(AbortedList::Null),
            "a first batch over the limit: no records and a null list"
        );
        assert_eq!(
            aborted(&log, bounds, later(0)),
            Ok(AbortedList::Before(40)),
            "no bytes left: no records, the list all the same"
        );
        // With an index entry (5,000 bytes before the third batch), the
        // bound is that entry's offset.
        let big = layout(&[(0, 9, 3000), (10, 19, 2000), (20, 24, 50), (30, 39, 200)]);
        assert_eq!(
            aborted(&big, ReadBounds::of(&big), ReadRequest::kafka(0, 3000)),
            Ok(AbortedList::Before(24))
        );
    }

    #[test]
    fn extents_of_reads_headers_only() {
        use walfetch_codec::{BatchBuilder, NewRecord};
        let a = BatchBuilder::new(0)
            .encode(&[NewRecord::value(0, "a"), NewRecord::value(1, "b")])
            .expect("encode");
        let b = BatchBuilder::new(2)
            .encode(&[NewRecord::value(0, "c")])
            .expect("encode");
        let mut log = a.bytes.to_vec();
        log.extend_from_slice(&b.bytes);
        log.extend_from_slice(&a.bytes[..30]);
        let extents = extents_of(&log);
        assert_eq!(
            extents,
            vec![
                BatchExtent {
                    base_offset: 0,
                    last_offset: 1,
                    position: 0,
                    len: a.bytes.len()
                },
                BatchExtent {
                    base_offset: 2,
                    last_offset: 2,
                    position: a.bytes.len(),
                    len: b.bytes.len()
                },
            ]
        );
    }
}
