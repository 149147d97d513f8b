//! The five ways to replay a region, run on the same broker and data, and
//! the check every replay's output must pass before its numbers count.

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use rskafka::client::partition::PartitionClient;
use rskafka::record::RecordAndOffset;
use walfetch::cluster::{Cluster, FetchParams};
use walfetch::codec::{Record, RECORD_CHECKSUM_HEADER};
use walfetch::consumer::{Consumer, ReplayOptions, ReplayRange, StrategyKind};
use walfetch::index::{IndexEntry, RegionId, WalIndex};
use walfetch::plan::{EstimatePlanner, FetchKind, FetchStrategy, Layout, PlanConfig, PlanView};

use crate::proxy::Proxy;
use crate::workload::{Written, WrittenEntry};

/// A way to replay a region.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Contender {
    /// Full scan of the range on walfetch's connection layer.
    Scan,
    /// GreptimeDB's estimate strategy on walfetch's connection layer.
    Estimate,
    /// GreptimeDB's estimate strategy on rskafka 0.6.
    EstimateRskafka,
    /// walfetch's planner with an index of offsets only.
    OffsetsOnly,
    /// walfetch's planner with the writer's hints.
    Hints,
    /// walfetch's planner with the writer's hints, planning the fewest
    /// bytes (a cost model whose fetches cost nothing: runs never merge).
    HintsFewestBytes,
}

impl Contender {
    pub(crate) const ALL: [Contender; 6] = [
        Contender::Scan,
        Contender::Estimate,
        Contender::EstimateRskafka,
        Contender::OffsetsOnly,
        Contender::Hints,
        Contender::HintsFewestBytes,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Contender::Scan => "scan",
            Contender::Estimate => "estimate",
            Contender::EstimateRskafka => "estimate/rskafka",
            Contender::OffsetsOnly => "walfetch offsets",
            Contender::Hints => "walfetch hints",
            Contender::HintsFewestBytes => "walfetch hints, fewest bytes",
        }
    }

    /// Whether it runs GreptimeDB's estimate algorithm.
    pub(crate) fn is_estimate(self) -> bool {
        matches!(self, Contender::Estimate | Contender::EstimateRskafka)
    }

    /// Its name in the tables on `broker`: GreptimeDB's algorithm would
    /// fetch the same offset forever on a broker that skips the batch
    /// holding a mid-batch offset (Tansu 0.6); the back-off that lets it
    /// finish there is walfetch's, and said so.
    pub(crate) fn label(self, kafka_rules: bool) -> String {
        if self.is_estimate() && !kafka_rules {
            format!("{} + back-off", self.name())
        } else {
            self.name().to_owned()
        }
    }
}

/// One replay to run: a region, a range, and the index as the replay sees it.
#[derive(Debug)]
pub(crate) struct Scenario {
    pub(crate) topic: String,
    pub(crate) region: RegionId,
    /// `hot`, `median` or `cold`.
    pub(crate) class: &'static str,
    /// `complete` or `tail` (the index stops halfway).
    pub(crate) index_mode: &'static str,
    pub(crate) range: Range<i64>,
    /// The index's `last_index`.
    pub(crate) last_index: i64,
    /// The writer's index (hints), truncated below the checkpoint.
    pub(crate) hinted: WalIndex,
    /// The same offsets, without hints.
    pub(crate) offsets_only: WalIndex,
    /// The region's entries in the range, in offset order.
    pub(crate) expected: Vec<WrittenEntry>,
}

impl Scenario {
    pub(crate) fn label(&self) -> String {
        format!("{} {}", self.class, self.index_mode)
    }

    /// First offset past the index's reach: the tail scan starts here.
    pub(crate) fn indexed_end(&self) -> i64 {
        (self.last_index + 1).clamp(self.range.start, self.range.end)
    }
}

/// What one replay did.
#[derive(Debug, Clone, Default)]
pub(crate) struct RunResult {
    /// The region's entries yielded.
    pub(crate) entries: usize,
    /// Other regions' records yielded (a scan, a tail scan).
    pub(crate) other_records: usize,
    /// Bytes broker → client through the proxy.
    pub(crate) wire_bytes: u64,
    /// Bytes client → broker through the proxy.
    pub(crate) request_bytes: u64,
    /// The consumer's own count of Fetch response bytes (walfetch only).
    pub(crate) consumer_wire_bytes: Option<u64>,
    pub(crate) fetches: u64,
    /// Round trips on the critical path (equal to `fetches` for a replay
    /// with one fetch in flight).
    pub(crate) round_trips: u64,
    pub(crate) wall: Duration,
    pub(crate) time_to_first: Option<Duration>,
    pub(crate) peak_buffered: u64,
    /// Connections the contender opened through the proxy during the
    /// replay (their setup is in `wire_bytes`).
    pub(crate) new_connections: u64,
}

/// Checks a replay's output as it comes: every record in the range, in
/// strictly increasing offsets; the region's records exactly the written
/// entries (offset, value, headers), none missing; other regions' records
/// only where the replay scans.
pub(crate) struct Checker<'a> {
    region: RegionId,
    range: Range<i64>,
    /// The region's entries in the range, in offset order.
    expected: &'a [WrittenEntry],
    /// Other regions' records are allowed at or above this offset.
    others_from: i64,
    next: usize,
    last: Option<i64>,
    others: usize,
    started: Instant,
    first: Option<Duration>,
}

impl<'a> Checker<'a> {
    fn new(scenario: &'a Scenario, contender: Contender, started: Instant) -> Self {
        let others_from = if contender == Contender::Scan {
            scenario.range.start
        } else {
            scenario.indexed_end()
        };
        Self::region(
            scenario.region,
            scenario.range.clone(),
            &scenario.expected,
            others_from,
            started,
        )
    }

    /// A checker of `region`'s records over `range`, where `expected` are
    /// its written entries there and other regions' records are allowed
    /// from `others_from` on (`range.end`: never).
    pub(crate) fn region(
        region: RegionId,
        range: Range<i64>,
        expected: &'a [WrittenEntry],
        others_from: i64,
        started: Instant,
    ) -> Self {
        Self {
            region,
            range,
            expected,
            others_from,
            next: 0,
            last: None,
            others: 0,
            started,
            first: None,
        }
    }

    /// Checks a record as walfetch yields it.
    pub(crate) fn walfetch_record(&mut self, record: &Record) -> Result<(), String> {
        let headers: Vec<_> = record.headers().map(|h| (h.key, h.value)).collect();
        self.record(record.offset(), record.key(), record.value(), &headers)
    }

    /// Checks a record as rskafka yields it.
    fn rskafka_record(&mut self, r: &RecordAndOffset) -> Result<(), String> {
        let headers = rskafka_headers(&r.record);
        let (key, value) = (r.record.key.as_deref(), r.record.value.as_deref());
        self.record(r.offset, key, value, &headers)
    }

    fn record(
        &mut self,
        offset: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[(&[u8], Option<&[u8]>)],
    ) -> Result<(), String> {
        let range = &self.range;
        if offset < range.start || offset >= range.end {
            return Err(format!("yielded offset {offset} outside {range:?}"));
        }
        if self.last.is_some_and(|l| offset <= l) {
            return Err(format!(
                "yielded offset {offset} after {:?}: out of order or duplicated",
                self.last
            ));
        }
        self.last = Some(offset);
        let region = key
            .and_then(|k| <[u8; 8]>::try_from(k).ok())
            .map(u64::from_be_bytes);
        if region != Some(self.region) {
            if offset < self.others_from {
                return Err(format!(
                    "yielded offset {offset} of region {region:?}, not the replayed region {}, below {}",
                    self.region, self.others_from
                ));
            }
            self.others += 1;
            return Ok(());
        }
        let Some(want) = self.expected.get(self.next) else {
            return Err(format!(
                "yielded offset {offset} past the {} written entries",
                self.expected.len()
            ));
        };
        if want.offset != offset {
            return Err(format!(
                "yielded offset {offset} where entry {} is at {} (missing or extra entries)",
                self.next, want.offset
            ));
        }
        if value != Some(&want.payload[..]) {
            return Err(format!(
                "offset {offset}: the value differs from what was written"
            ));
        }
        let same_headers = headers.len() == want.headers.len()
            && headers
                .iter()
                .zip(&want.headers)
                .all(|(got, (k, v))| got.0 == &k[..] && got.1 == v.as_deref());
        if !same_headers {
            return Err(format!(
                "offset {offset}: the headers differ from what was written"
            ));
        }
        self.next += 1;
        self.first.get_or_insert_with(|| self.started.elapsed());
        Ok(())
    }

    /// Ends the check: every written entry yielded. Returns the entries
    /// and other regions' records yielded, and the time to the first entry.
    pub(crate) fn finish(self) -> Result<(usize, usize, Option<Duration>), String> {
        if self.next != self.expected.len() {
            let missing = self.expected[self.next].offset;
            return Err(format!(
                "ended after {} of {} entries; first missing offset {missing}",
                self.next,
                self.expected.len()
            ));
        }
        Ok((self.next, self.others, self.first))
    }
}

/// The clients every contender uses, connected through the proxy.
pub(crate) struct Clients {
    pub(crate) walfetch: Arc<Cluster>,
    /// rskafka partition clients by topic.
    pub(crate) rskafka: HashMap<String, Arc<PartitionClient>>,
    /// walfetch's planner settings (its default unless `--round-trip-us`).
    pub(crate) plan: PlanConfig,
}

/// walfetch's options for a contender planning with `plan`: the library's
/// defaults, learning the link as it goes (`ReplayOptions::learn_link`)
/// unless the cost model was set by hand (`--round-trip-us`); or, for
/// `fewest_bytes`, a per-fetch cost of zero, kept (runs never merge).
pub(crate) fn walfetch_options(
    strategy: StrategyKind,
    mut plan: PlanConfig,
    fewest_bytes: bool,
) -> ReplayOptions {
    let by_hand = plan.cost != PlanConfig::default().cost;
    if fewest_bytes {
        plan.cost.round_trip = std::time::Duration::ZERO;
    }
    ReplayOptions::default()
        .with_strategy(strategy)
        .with_plan(plan)
        .with_learn_link(!by_hand && !fewest_bytes)
}

/// Fetches one byte of `topic` on `cluster`, so that no replay pays for
/// its connections and metadata; `broker` names it in an error.
pub(crate) async fn warm_up(cluster: &Cluster, topic: &str, broker: &str) -> Result<(), String> {
    cluster
        .fetch(&FetchParams::new(topic, 0, 0).with_max_bytes(1))
        .await
        .map(drop)
        .map_err(|e| format!("{broker}: warm-up fetch: {e}"))
}

/// Runs one replay of `scenario` by `contender` and checks its output.
pub(crate) async fn run(
    contender: Contender,
    clients: &Clients,
    proxy: &Proxy,
    scenario: &Scenario,
) -> Result<RunResult, String> {
    let (received, sent, connections) = (proxy.received(), proxy.sent(), proxy.connections());
    let mut result = match contender {
        Contender::EstimateRskafka => {
            let client = clients
                .rskafka
                .get(&scenario.topic)
                .ok_or_else(|| format!("no rskafka client for {}", scenario.topic))?;
            replay_rskafka(client, proxy, scenario).await?
        }
        _ => replay_walfetch(contender, &clients.walfetch, clients.plan, scenario).await?,
    };
    result.wire_bytes = proxy.received() - received;
    result.request_bytes = proxy.sent() - sent;
    result.new_connections = proxy.connections() - connections;
    Ok(result)
}

async fn replay_walfetch(
    contender: Contender,
    cluster: &Arc<Cluster>,
    plan: PlanConfig,
    scenario: &Scenario,
) -> Result<RunResult, String> {
    let (strategy, index) = match contender {
        Contender::Scan => (StrategyKind::Scan, &scenario.offsets_only),
        Contender::Estimate => (StrategyKind::Estimate, &scenario.offsets_only),
        Contender::OffsetsOnly => (StrategyKind::Index, &scenario.offsets_only),
        Contender::Hints | Contender::HintsFewestBytes => (StrategyKind::Index, &scenario.hinted),
        Contender::EstimateRskafka => unreachable!("rskafka runs in replay_rskafka"),
    };
    let options = walfetch_options(strategy, plan, contender == Contender::HintsFewestBytes);
    let range = ReplayRange {
        topic: scenario.topic.clone(),
        partition: 0,
        region: scenario.region,
        from: scenario.range.start,
        to: Some(scenario.range.end),
    };
    let started = Instant::now();
    let mut checker = Checker::new(scenario, contender, started);
    let mut consumer = Consumer::new(Arc::clone(cluster), index, range, options)
        .await
        .map_err(|e| format!("consumer: {e}"))?;
    while let Some(record) = consumer.next().await {
        let record = record.map_err(|e| format!("replay: {e}"))?;
        checker.walfetch_record(&record)?;
    }
    let wall = started.elapsed();
    let (entries, other_records, time_to_first) = checker.finish()?;
    let stats = consumer.stats();
    Ok(RunResult {
        entries,
        other_records,
        consumer_wire_bytes: Some(stats.wire_bytes),
        fetches: stats.fetches,
        round_trips: stats.round_trips,
        wall,
        time_to_first,
        peak_buffered: stats.peak_buffered_bytes,
        ..RunResult::default()
    })
}

/// A record's headers as the checker takes them; rskafka keeps them in a
/// map, sorted by key, and the workload writes them sorted by key after the
/// writer's per-record checksum, which goes first.
fn rskafka_headers(r: &rskafka::record::Record) -> Vec<(&[u8], Option<&[u8]>)> {
    let mut headers: Vec<_> = r
        .headers
        .iter()
        .map(|(k, v)| (k.as_bytes(), Some(&v[..])))
        .collect();
    headers.sort_by_key(|h| h.0 != RECORD_CHECKSUM_HEADER.as_bytes());
    headers
}

/// GreptimeDB's replay loop on rskafka: one fetch at a time, sized by the
/// estimate strategy ([`EstimatePlanner`], the same pure planner the
/// `estimate` contender runs on walfetch's connection layer), records
/// matched against the index, what a response did not deliver fetched
/// again.
///
/// GreptimeDB sizes its next fetch from the *encoded size of the response*,
/// which its fork of rskafka reports; stock rskafka 0.6 does not, so the
/// loop reads it from the proxy's counter (one fetch in flight on the
/// connection, so the difference is exactly that response). Like the
/// `estimate` contender, it backs off below a mid-batch offset when the
/// broker skipped the batch containing it (Tansu 0.6): GreptimeDB itself
/// would fetch the same offset forever there. And it drops a record
/// repeated within a response (Tansu 0.6 may send the log's last batch
/// twice), which rskafka passes on.
///
/// Fetches use `max_wait` 0 like every other contender (they never fetch
/// at the log end, so GreptimeDB's 500 ms would not change the result).
/// Peak buffered bytes: the larger of the fetch's byte limit while it is in
/// flight and the decoded records of its response.
async fn replay_rskafka(
    client: &PartitionClient,
    proxy: &Proxy,
    scenario: &Scenario,
) -> Result<RunResult, String> {
    let indexed_end = scenario.indexed_end();
    let entries: Vec<IndexEntry> = scenario
        .offsets_only
        .region(scenario.region)
        .map(|r| r.range(scenario.range.start, indexed_end).to_vec())
        .unwrap_or_default();
    let tail = (indexed_end < scenario.range.end).then_some(indexed_end..scenario.range.end);
    let to = scenario.range.end;
    let started = Instant::now();
    let mut checker = Checker::new(scenario, Contender::EstimateRskafka, started);
    let mut planner = EstimatePlanner::new();
    // The replay core's part, as GreptimeDB's loop keeps it: the first
    // entry not yet delivered, the scan's position, how often in a row the
    // same fetch came back short, and whether the broker skipped a batch.
    let layout = Layout::new();
    let mut next = 0usize;
    let mut tail_next = tail.as_ref().map_or(to, |t| t.start);
    let mut attempt = 0u32;
    let mut misaligned = None;
    let mut fetches = 0u64;
    let mut peak = 0u64;
    let mut stalls = 0u32;
    loop {
        let view = PlanView {
            entries: &entries,
            regions: &[],
            layout: &layout,
            log_start: 0,
            log_end: to,
            misaligned,
            cut_records: true,
            overshoots: false,
            budget: u32::MAX,
        };
        let fetch = if next < entries.len() {
            planner.plan_entries(&view, next..entries.len(), attempt)
        } else if tail_next < to {
            planner.plan_tail(&view, tail_next, to, attempt)
        } else {
            break;
        };
        let yielded_before = checker.last;
        let before = proxy.received();
        let limit = i32::try_from(fetch.max_bytes).unwrap_or(i32::MAX - 1);
        let (mut records, _high_watermark) = client
            .fetch_records(fetch.offset, 1..limit.saturating_add(1), 0)
            .await
            .map_err(|e| format!("rskafka fetch at {}: {e}", fetch.offset))?;
        let response_bytes = (proxy.received() - before) as usize;
        fetches += 1;
        records.sort_unstable_by_key(|r| r.offset);
        // Tansu 0.6 may send the log's last batch twice in one response;
        // rskafka hands both copies over. Dropping the repeat is this
        // bench's addition, as walfetch's consumer does it.
        records.dedup_by_key(|r| r.offset);
        let decoded: u64 = records
            .iter()
            .map(|r| r.record.approximate_size() as u64)
            .sum();
        peak = peak.max(u64::from(fetch.max_bytes)).max(decoded);
        let first_wanted = match &fetch.kind {
            FetchKind::Indexed { entries: run } => entries[run.start].offset,
            FetchKind::Tail { from } => *from,
        };
        // The broker skipped the batch holding the first wanted offset.
        let skipped = records.first().is_none_or(|r| r.offset > first_wanted);
        match fetch.kind.clone() {
            FetchKind::Indexed { entries: range } => {
                // Every record is matched against the whole index, as
                // GreptimeDB's records buffer does: entries past those the
                // fetch was sized for count too, up to the first one the
                // response lacks.
                let wanted = &entries[range.start..];
                let asked = range.len();
                let mut cursor = 0;
                if !skipped {
                    for r in &records {
                        if cursor == wanted.len() {
                            break;
                        }
                        if r.offset > wanted[cursor].offset {
                            if cursor >= asked {
                                break;
                            }
                            return Err(format!(
                                "estimate/rskafka: indexed offset {} is missing from a response that passed it",
                                wanted[cursor].offset
                            ));
                        }
                        if r.offset == wanted[cursor].offset {
                            checker.rskafka_record(r)?;
                            cursor += 1;
                        }
                    }
                }
                planner.observe_response(&fetch, response_bytes, records.len());
                if skipped {
                    misaligned = Some(0);
                }
                attempt = if cursor == 0 { attempt + 1 } else { 0 };
                next = range.start + cursor;
            }
            FetchKind::Tail { from } => {
                let mut next = from;
                if !skipped {
                    for r in records.iter().filter(|r| r.offset >= from && r.offset < to) {
                        checker.rskafka_record(r)?;
                        next = r.offset + 1;
                    }
                }
                planner.observe_response(&fetch, response_bytes, records.len());
                if skipped {
                    misaligned = Some(0);
                }
                attempt = if next > from { 0 } else { attempt + 1 };
                tail_next = tail_next.max(next);
            }
        }
        // As the consumer gives up after fetches in a row without progress.
        stalls = if checker.last == yielded_before {
            stalls + 1
        } else {
            0
        };
        if stalls > 64 {
            return Err(format!(
                "estimate/rskafka: {stalls} fetches in a row without progress, the last at {}",
                fetch.offset
            ));
        }
    }
    let wall = started.elapsed();
    let (entries, other_records, time_to_first) = checker.finish()?;
    Ok(RunResult {
        entries,
        other_records,
        fetches,
        round_trips: fetches,
        wall,
        time_to_first,
        peak_buffered: peak,
        ..RunResult::default()
    })
}

/// Copies the entries of `index` in `from..=last` (every region), with or
/// without hints, and sets `last_index` to `last`.
pub(crate) fn restrict(
    index: &WalIndex,
    from: i64,
    last: i64,
    hints: bool,
) -> Result<WalIndex, String> {
    let mut out = WalIndex::new();
    for (region, entries) in index.regions() {
        for e in entries.range(from, last + 1) {
            let entry = if hints {
                *e
            } else {
                IndexEntry::offset_only(e.offset)
            };
            out.push(region, entry).map_err(|e| e.to_string())?;
        }
    }
    out.set_last_index(last);
    Ok(out)
}

/// The hottest, a median and a cold region, each with a complete index and
/// with one that stops halfway through the range.
pub(crate) fn scenarios(
    topic: &str,
    written: &Written,
    checkpoint: f64,
) -> Result<Vec<Scenario>, String> {
    let end = written.end;
    let from = (end as f64 * checkpoint) as i64;
    let mut counts: BTreeMap<u64, usize> = BTreeMap::new();
    for e in written.entries.iter().filter(|e| e.offset >= from) {
        *counts.entry(e.region).or_default() += 1;
    }
    let mut by_activity: Vec<(usize, u64)> = counts.into_iter().map(|(r, n)| (n, r)).collect();
    by_activity.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let Some(&hot) = by_activity.first() else {
        return Ok(Vec::new());
    };
    let median = by_activity[by_activity.len() / 2];
    let cold = by_activity[by_activity.len() - 1];
    let mut picks = vec![("hot", hot.1), ("median", median.1), ("cold", cold.1)];
    picks.dedup_by_key(|p| p.1);
    let mut out = Vec::new();
    for (class, region) in picks {
        for (mode, last) in [("complete", end - 1), ("tail", from + (end - from) / 2)] {
            let expected = written
                .entries
                .iter()
                .filter(|e| e.region == region && e.offset >= from)
                .cloned()
                .collect();
            let hinted = restrict(&written.index, from, last, true)?;
            let offsets_only = restrict(&written.index, from, last, false)?;
            out.push(Scenario {
                topic: topic.to_string(),
                region,
                class,
                index_mode: mode,
                range: from..end,
                last_index: last,
                hinted,
                offsets_only,
                expected,
            });
        }
    }
    Ok(out)
}
