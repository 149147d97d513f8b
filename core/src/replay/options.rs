//! How a replay runs: strategy, limits, isolation, decoding, and what to do
//! about lost offsets. One set of options serves every partition of a
//! recovery.

use walfetch_codec::DecodeOptions;

use crate::fetch::IsolationLevel;
use crate::index::RegionRule;
use crate::plan::PlanConfig;

/// Which fetch strategy a replay uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum StrategyKind {
    /// walfetch's planner: starts and byte limits from the index's layout.
    #[default]
    Index,
    /// GreptimeDB's average-record-size estimate, for comparison.
    Estimate,
    /// Read the whole range, as a consumer without an index must; the
    /// regions' records are picked out of it by the region rule.
    Scan,
}

/// What to do about indexed offsets that no longer exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum LostPolicy {
    /// Fail with [`crate::error::Error::LostOffsets`] when the replay
    /// reaches one.
    #[default]
    Error,
    /// Skip them; they are listed in [`super::ReplayStats::lost`].
    Skip,
}

/// How a replay runs. Build it with [`ReplayOptions::default`] and the
/// `with_*` setters.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ReplayOptions {
    /// The fetch strategy.
    pub strategy: StrategyKind,
    /// Planner limits and cost model (its `in_flight`, the fetches that
    /// share a round trip, taken from
    /// [`ReplayOptions::max_in_flight`]); with `learn_link`, only the
    /// starting guess.
    pub plan: PlanConfig,
    /// Learn what a fetch costs on each broker's link from the replay's own
    /// fetches (service time ≈ per-fetch cost + bytes ÷ bandwidth, see
    /// [`super::LinkEstimator`]) and plan with that where fetches prove
    /// dear: a broker whose fetches cost more than their share of the
    /// link's round trip among the fetches in flight, pipeline full (Tansu
    /// 0.6: about 3 ms; Apache Kafka on loopback, 20–130 µs), gets fewer,
    /// larger fetches; elsewhere the cost model stays, with the link's
    /// round trip as its first answer showed it where that is longer.
    /// Default: on. Off, the cost model is kept as given.
    pub learn_link: bool,
    /// Fetches in flight at once, over the whole replay (every partition
    /// of a recovery together): a bound on requests, not the working limit,
    /// which is [`ReplayOptions::max_in_flight_bytes`]. Default 64.
    pub max_in_flight: usize,
    /// Byte limits of fetches in flight at once, summed over the whole
    /// replay: small fetches do not each cost a round trip, many travel
    /// together. A pacing limit, not a memory bound (that is
    /// [`ReplayOptions::max_buffered_bytes`]): once it is reached no fetch
    /// is sent but one that keeps a partition going (one that can yield
    /// nothing and has no fetch in flight), and no fetch is made smaller
    /// for it. Default 16 MiB.
    pub max_in_flight_bytes: u64,
    /// Cap on what buffered records keep alive plus what the answers to
    /// fetches in flight will hold, over the whole replay (every partition
    /// of a recovery together): a fetch asks for no more than is left under
    /// it, nor more than the cap split evenly over the partitions still
    /// fetching (64 partitions under the default: 1 MiB a fetch). A record
    /// of a compressed batch is a slice of the batch's decompressed records
    /// and keeps them alive: it is charged for them (in shares with the
    /// batch's other records kept), unless the records kept are less than
    /// half of them, which are then copied out and the batch freed at once.
    /// Records of uncompressed batches are slices of the answer's records
    /// and are held so too: charged for the answer's records, or copied
    /// out where they are less than half of them. (Partitions whose small
    /// fetches shared one request share its response buffer: one kept
    /// keeps the others' parts too.) A fetch counts what its answer will hold so: its byte limit grown as
    /// the answers taken so far grew (eightfold before the first). Decoding
    /// a response holds one more decompressed batch meanwhile (the records
    /// of a scan past `last_index` all of its batches, until its records of
    /// other regions are dropped). Two things can pass it, each by at most
    /// one batch (at most the broker's `message.max.bytes`, 1 MiB by
    /// default): Kafka answers a fetch with at least its first batch whole,
    /// whatever its limit (KIP-74); and with nothing left, a partition that
    /// can yield nothing and has no fetch in flight still sends a fetch of
    /// one byte (one batch), so a replay cannot stall on the cap. Default
    /// 64 MiB.
    pub max_buffered_bytes: u64,
    /// Which records a replay may yield. Default:
    /// [`IsolationLevel::ReadCommitted`], as a Kafka consumer reads by
    /// default (librdkafka's `isolation.level`): records of aborted
    /// transactions are left out (by the aborted transactions each Fetch
    /// answer lists, KIP-98), and the log is read up to its last stable
    /// offset, past which a transaction still open may yet be aborted (a
    /// broker that gives no last stable offset, -1, is read to its high
    /// watermark). Entries the index lists past the last stable offset
    /// (below the high watermark) were written: a fetch that gets nothing
    /// of them waits at the broker ([`super::LAGGING_WAIT`]) for the
    /// transaction holding them back to end, and after
    /// [`ReplayOptions::max_attempts`] such answers in a row the replay
    /// ends with [`crate::error::Error::Unstable`]. A WAL must never replay a write that was aborted, and
    /// `walfetch::scan::build_index` indexes the same records.
    /// [`IsolationLevel::ReadUncommitted`] yields every record up to the
    /// high watermark, aborted ones included. A broker that lists no
    /// aborted transactions in its Fetch answers (Tansu 0.6 lists none)
    /// leaves them in under either level.
    pub isolation: IsolationLevel,
    /// Decoding options (CRC checks, decompression cap).
    pub decode: DecodeOptions,
    /// Which records of a batch the broker cut at the byte limit may be
    /// used (uncompressed batches only; the batch's CRC cannot be checked).
    /// Using them is what lets a precise byte limit stop mid-batch. Default:
    /// [`CutRecords::Checked`], only records their own checksum covers.
    pub cut_records: CutRecords,
    /// Indexed offsets that no longer exist.
    pub on_lost: LostPolicy,
    /// Fetches in a row allowed to make no progress before giving up (an
    /// answer with no records to a fetch that could not wait is not
    /// counted: the next one may wait, see
    /// [`super::OutgoingFetch::max_wait`]).
    pub max_attempts: u32,
    /// How a record's region is found, for records past `last_index` (and
    /// for every record of a full scan): only the regions asked for are
    /// yielded. `None` (the default): the rule the index records (see
    /// [`crate::index::IndexSource::rule`]), else the key, 8 bytes
    /// big-endian, as `walfetch::writer::WalWriter` writes it. A rule given
    /// here that differs from the index's is an error
    /// ([`crate::error::Mismatch::Rule`]) unless
    /// [`ReplayOptions::force_rule`] is set. When the rule is known (given
    /// here or recorded in the index), every entry read at an indexed
    /// offset is checked to be of its region by it
    /// ([`crate::error::Mismatch::Entry`]).
    pub region_rule: Option<RegionRule>,
    /// Use [`ReplayOptions::region_rule`] even where it differs from the
    /// rule an index was built with. Default: off.
    pub force_rule: bool,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        Self {
            strategy: StrategyKind::Index,
            plan: PlanConfig::default(),
            learn_link: true,
            max_in_flight: 64,
            max_in_flight_bytes: 16 << 20,
            max_buffered_bytes: 64 << 20,
            isolation: IsolationLevel::ReadCommitted,
            decode: DecodeOptions::default(),
            cut_records: CutRecords::Checked,
            on_lost: LostPolicy::Error,
            max_attempts: 16,
            region_rule: None,
            force_rule: false,
        }
    }
}

impl ReplayOptions {
    /// Sets [`ReplayOptions::strategy`].
    pub fn with_strategy(mut self, strategy: StrategyKind) -> Self {
        self.strategy = strategy;
        self
    }

    /// Sets [`ReplayOptions::plan`].
    pub fn with_plan(mut self, plan: PlanConfig) -> Self {
        self.plan = plan;
        self
    }

    /// Sets [`ReplayOptions::learn_link`].
    pub fn with_learn_link(mut self, learn: bool) -> Self {
        self.learn_link = learn;
        self
    }

    /// Sets [`ReplayOptions::max_in_flight_bytes`].
    pub fn with_max_in_flight_bytes(mut self, bytes: u64) -> Self {
        self.max_in_flight_bytes = bytes;
        self
    }

    /// Sets [`ReplayOptions::max_in_flight`] (at least 1).
    pub fn with_max_in_flight(mut self, fetches: usize) -> Self {
        self.max_in_flight = fetches.max(1);
        self
    }

    /// Sets [`ReplayOptions::max_buffered_bytes`].
    pub fn with_max_buffered_bytes(mut self, bytes: u64) -> Self {
        self.max_buffered_bytes = bytes;
        self
    }

    /// Sets [`ReplayOptions::isolation`].
    pub fn with_isolation(mut self, isolation: IsolationLevel) -> Self {
        self.isolation = isolation;
        self
    }

    /// Sets [`ReplayOptions::decode`].
    pub fn with_decode(mut self, decode: DecodeOptions) -> Self {
        self.decode = decode;
        self
    }

    /// Sets [`ReplayOptions::cut_records`].
    pub fn with_cut_records(mut self, cut_records: CutRecords) -> Self {
        self.cut_records = cut_records;
        self
    }

    /// Sets [`ReplayOptions::on_lost`].
    pub fn with_on_lost(mut self, policy: LostPolicy) -> Self {
        self.on_lost = policy;
        self
    }

    /// Sets [`ReplayOptions::max_attempts`].
    pub fn with_max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts;
        self
    }

    /// Sets [`ReplayOptions::region_rule`].
    pub fn with_region_rule(mut self, rule: RegionRule) -> Self {
        self.region_rule = Some(rule);
        self
    }

    /// Sets [`ReplayOptions::force_rule`].
    pub fn with_force_rule(mut self, force: bool) -> Self {
        self.force_rule = force;
        self
    }
}

/// Which records of a batch the broker cut at the byte limit a replay uses.
///
/// Kafka cuts the last batch of a response at the fetch's byte limit; the
/// complete records of an uncompressed batch's prefix are readable, but the
/// batch's CRC covers the whole batch and cannot be checked. A record whose
/// per-record checksum header ([`crate::codec::RECORD_CHECKSUM_HEADER`],
/// written by `walfetch::writer::WalWriter`) matches is covered on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum CutRecords {
    /// Use a cut batch's records only when each carries a matching
    /// per-record checksum; a mismatch is an error naming the offset. A
    /// record without one is left, and its batch read whole: once a
    /// replay meets such a record, it plans whole batches from then on.
    #[default]
    Checked,
    /// Use them all; those without a per-record checksum are counted in
    /// [`crate::replay::ReplayStats::unverified_records`] (a mismatching
    /// checksum is still an error).
    Trusted,
    /// Never use them: every batch is read whole.
    Never,
}
