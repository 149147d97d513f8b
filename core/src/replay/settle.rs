//! What an answer does: its records checked and taken, what it did not
//! deliver asked for again, the log's start and end learned, lost
//! offsets and stalls counted, the tail past `last_index` read.

use std::ops::Range;
use std::time::Duration;

use walfetch_codec::{Record, RECORD_CHECKSUM_HEADER};

use super::absorb::{absorb, hold, Response, Taken};
use super::replay_core::{InFlight, Slot};
use super::{CutRecords, Decoded, FetchAnswer, FetchId, LostPolicy, ReplayCore};
use crate::error::Error;
use crate::plan::{one_region, FetchKind, PlannedFetch, SeenBatch};

impl<C> ReplayCore<C> {
    pub(super) fn take_in_flight(&mut self, id: FetchId) -> Option<InFlight> {
        let f = self.in_flight.remove(&id)?;
        self.in_flight_bytes -= f.asked;
        self.in_flight_held -= f.reserved;
        Some(f)
    }

    /// Takes in one answered fetch (`wait`: how long the broker was allowed
    /// to wait for its records), and its decoder's reading if any.
    pub(super) fn settle(
        &mut self,
        fetch: PlannedFetch,
        wait: Duration,
        answer: FetchAnswer,
        decoded: Option<Decoded>,
    ) -> Result<(), Error<C>> {
        self.stats.fetches += 1;
        self.answered = true;
        let (range, tail_from) = match &fetch.kind {
            FetchKind::Indexed { entries } => (entries.clone(), None),
            FetchKind::Tail { from } => (0..0, Some(*from)),
        };
        let fetched = match answer {
            FetchAnswer::Fetched(fetched) => fetched,
            FetchAnswer::OutOfRange { log_start, log_end } => {
                return self.settle_out_of_range(&fetch, range, tail_from, log_start, log_end);
            }
        };
        // A scan fetch planned above where the scan stands: the log starts
        // past it now, and what lay between is gone.
        if let Some(from) = tail_from.filter(|&from| fetch.offset > from) {
            self.lose_tail(from, fetch.offset, None)?;
        }
        self.stats.wire_bytes += fetched.wire_bytes as u64;
        self.stats.records_bytes += fetched.records.len() as u64;
        let lags = (0..self.known_end).contains(&fetched.high_watermark);
        // Nothing past the last stable offset comes to a read_committed
        // fetch: records written below the high watermark but behind a
        // transaction still open. They are not gone, and not the log's end
        // either; the next fetch waits at the broker for the transaction
        // to end (Kafka answers it as soon as the last stable offset
        // moves).
        // Told until an answer makes progress (a fetch backing off below
        // the offset in between gets records already had).
        let readable = fetched.readable_end(self.options.isolation);
        if !lags
            && fetched.records.is_empty()
            && (readable..fetched.high_watermark).contains(&fetch.offset)
        {
            let first = match &fetch.kind {
                FetchKind::Indexed { entries } => self.entries[entries.start].offset,
                FetchKind::Tail { from } => *from,
            };
            self.held_back = Some((readable, first.max(fetch.offset)));
        }
        self.lagging = lags;
        // Nothing although records lie at the fetch offset: not read in
        // time (or a batch skipped); the next fetch may wait for them.
        self.unready = !lags && fetched.records.is_empty() && fetch.offset < readable;
        self.learn_wait(wait, fetched.records.is_empty());
        self.known_end = self.known_end.max(fetched.high_watermark);
        // A broker cannot have skipped the batch containing a fetch offset
        // known to start one.
        let aligned = self
            .layout
            .starts_batch(fetch.offset, fetched.log_start_offset);
        let absorbed = match decoded {
            Some(decoded) if decoded.holds(&fetched, aligned) => decoded.result,
            _ => {
                let response = Response::of(&fetched, aligned);
                absorb(&self.entries, &fetch, &response, &self.absorb_options())
            }
        };
        let absorbed = absorbed.map_err(|source| Error::Decode {
            topic: self.topic.clone(),
            partition: self.partition,
            fetch_offset: fetch.offset,
            source,
        })?;
        self.strategy
            .observe_response(&fetch, fetched.records.len(), absorbed.at_or_above);
        tracing::debug!(
            topic = %self.topic,
            partition = self.partition,
            strategy = self.strategy.name(),
            offset = fetch.offset,
            max_bytes = fetch.max_bytes,
            kind = ?fetch.kind,
            records_bytes = fetched.records.len(),
            batches = absorbed.batches.len(),
            delivered = absorbed.delivered.len(),
            requeue = ?absorbed.requeue,
            misaligned = absorbed.misaligned,
            "fetch answered"
        );
        // A batch not seen before is progress too: a fetch that delivers
        // nothing yet may be walking the log toward a wanted offset whose
        // batch is unknown, one batch a response (a broker that never cuts
        // a batch, a small byte limit). The log holds finitely many.
        let mut learned = false;
        for b in &absorbed.batches {
            learned |= self
                .layout
                .containing(b.base)
                .is_none_or(|(base, e)| base != b.base || e.last_known != b.last || e.len != b.len);
            self.layout.observe_batch(b);
        }
        // An empty answer to a fetch below the log's end skipped the batch
        // holding the fetch offset too: Kafka returns at least that batch
        // (KIP-74); a broker that skips the containing batch returns
        // nothing when it is the log's last. Unless the broker could not
        // read it in time: only an answer to a fetch that was allowed to
        // wait tells (the fetch after an empty answer is, see
        // `OutgoingFetch::max_wait`); taken for a skip, one slow read would
        // have every later fetch of the replay start below its offset.
        let log_end = fetched.readable_end(self.options.isolation);
        let skipped =
            fetched.records.is_empty() && fetch.offset < log_end && !aligned && !wait.is_zero();
        if absorbed.misaligned || skipped {
            self.misaligned = Some(fetched.log_start_offset.max(0));
            // Not answered from the fetch offset: a batch start a hint
            // claimed there is not one to plan from again.
            self.layout.forget_hint(fetch.offset);
        } else if absorbed
            .batches
            .first()
            .is_some_and(|b| b.base < fetch.offset)
        {
            // Answered from the batch holding a mid-batch fetch offset: this
            // broker does not skip it, whatever empty answers suggested
            // before (a broker that could not read in time, for a wait too
            // short).
            self.misaligned = None;
        }
        self.stats.unverified_records += absorbed.unverified;
        if absorbed.overshot {
            // Whole batches past the limit: such a broker does not cut
            // batches either, so plan whole ones.
            self.overshoots = true;
            self.cut_usable = false;
        }
        if absorbed.unchecked_cut
            || (self.cut_usable
                && self.options.cut_records == CutRecords::Checked
                && absorbed
                    .delivered
                    .iter()
                    .map(|(_, t)| &t.record)
                    .chain(&absorbed.tail)
                    // Presence only: the checksum itself is checked where
                    // it matters (cut records, and the floor when yielded).
                    .any(|r| {
                        !r.headers()
                            .any(|h| h.key == RECORD_CHECKSUM_HEADER.as_bytes())
                    }))
        {
            // Records without a per-record checksum: a batch cut after one
            // would have to be read again whole, so plan whole batches.
            self.cut_usable = false;
        }
        let mut progress = learned
            || !absorbed.delivered.is_empty()
            || !absorbed.lost.is_empty()
            || !absorbed.tail.is_empty();
        self.learn_neighbours(&absorbed.delivered, &absorbed.batches);
        let mut held = 0;
        for (i, taken) in absorbed.delivered {
            if matches!(self.slots[i], Slot::Pending) {
                held += taken.held;
                self.slots[i] = Slot::Ready(taken);
            }
        }
        for i in absorbed.lost {
            if matches!(self.slots[i], Slot::Pending) {
                self.slots[i] = Slot::Lost;
            }
        }
        held += self.take_tail(absorbed.tail, &absorbed.tail_batches, fetched.records.len());
        self.buffered_bytes += held;
        // What answers hold once taken, per byte of records they carried:
        // fetches are sized by it (see `ReplayCore::held_for`).
        self.taken_held += held;
        self.taken_bytes += fetched.records.len() as u64;
        if let Some(requeue) = absorbed.requeue {
            // An empty answer past the log's end means those entries are
            // gone; past a lagging replica's high watermark, not yet there.
            let log_end = fetched.high_watermark;
            if fetched.records.is_empty() && fetch.offset >= log_end && log_end >= 0 && !lags {
                for i in requeue {
                    self.slots[i] = Slot::Lost;
                }
                progress = true;
            } else {
                let missed = requeue.start == range.start;
                self.queue.requeue(requeue, missed);
            }
        }
        if let Some(skipped) = absorbed.skipped {
            // Below a batch the broker sent whole: a try that missed
            // (after the requeue above, which it then joins if adjacent).
            self.queue.requeue(skipped, true);
        }
        if let Some(next) = absorbed.tail_next {
            let from = tail_from.unwrap_or(next);
            progress |= next > from;
            // Nothing more exists past the log's end (a lagging replica's
            // high watermark is not it).
            let end = if fetched.records.is_empty() && next >= fetched.high_watermark && !lags {
                self.end
            } else {
                self.tail_resume(next)
            };
            progress |= end >= self.end;
            self.queue.tail_progress(end);
        }
        // No records to a fetch that could not wait says only that they
        // were not read at once, not that asking fails: the fetches after
        // it wait (see `OutgoingFetch::max_wait`), and their answers count.
        // Fetches sent before it, many in flight, all come back so.
        if progress || !wait.is_zero() || !self.unready {
            self.count_stall(progress, fetch.offset)?;
        }
        self.note_buffered();
        Ok(())
    }

    /// Learns from an answer (to a fetch allowed `wait`; `empty`: with no
    /// records) whether the broker needs a wait to read records: a wait
    /// that got records where a shorter one, since the last records, got
    /// none below the readable end.
    fn learn_wait(&mut self, wait: Duration, empty: bool) {
        match (self.unready, empty) {
            (true, _) => self.waited_in_vain |= !wait.is_zero(),
            (false, false) => {
                if self.waited_in_vain {
                    self.needed_wait = self.needed_wait.max(wait);
                }
                self.waited_in_vain = false;
            }
            (false, true) => self.waited_in_vain = false,
        }
    }

    /// `OFFSET_OUT_OF_RANGE`: entries outside the log are gone; the rest is
    /// fetched again, from the log start at the lowest.
    pub(super) fn settle_out_of_range(
        &mut self,
        fetch: &PlannedFetch,
        range: std::ops::Range<usize>,
        tail_from: Option<i64>,
        log_start: i64,
        log_end: i64,
    ) -> Result<(), Error<C>> {
        self.log_start = self.log_start.max(log_start);
        self.held_back = None;
        self.unready = false;
        // The log was truncated below offsets known to have been written:
        // the fetch offset is one of them (below the known end), and the
        // log ends at or below it by the leader's own account. Under
        // Kafka's rules nothing else answers so, and there is no replica
        // to wait for. The offsets below the known end were committed: the
        // writer indexes an entry once every in-sync replica has it
        // (acks=all), and a high watermark counts committed records only.
        // A leader elected cleanly, from the in-sync replicas, holds every
        // committed record, and from Kafka 2.2 (KIP-207) a leader whose
        // high watermark still lags the start of its epoch answers
        // ListOffsets with OFFSET_NOT_AVAILABLE, which the client retries,
        // rather than an end below them. A leader whose end is below them
        // was elected uncleanly: the only in-sync replica, so its high
        // watermark is its log's end, and the other replicas truncate
        // their logs to its own. The records past it are gone for good
        // (records written since at their offsets are others). This answer
        // is either the leader's OFFSET_OUT_OF_RANGE (the cluster client
        // takes a follower's, KIP-392, back to the leader at once), or a
        // second answer in a row with nothing at or past a high watermark
        // below the known end, after which the driver looked up the end
        // from the leader (see `OutgoingFetch::max_wait`). Every wanted
        // entry at or past the fetch offset is lost, and the known end
        // goes back to the leader's, so that an answer reaching it is the
        // log's end again (the entries between it and the fetch offset are
        // settled by the answers to their own fetches). A log end below
        // the known end but past the fetch offset still reads as a replica
        // that lags.
        let truncated =
            log_end <= fetch.offset && (log_start..self.known_end).contains(&fetch.offset);
        let mut progress = false;
        let known_end = self.known_end;
        if truncated {
            tracing::warn!(
                topic = %self.topic,
                partition = self.partition,
                fetch_offset = fetch.offset,
                log_end,
                known_end,
                "the log was truncated below offsets known to have been written \
                 (an unclean leader election): the indexed entries past its end \
                 are lost"
            );
            self.truncated_to = Some(self.truncated_to.map_or(log_end, |t| t.min(log_end)));
            self.known_end = log_end;
            self.lagging = false;
            let from = self.entries.partition_point(|e| e.offset < fetch.offset);
            for slot in self.slots.iter_mut().skip(from) {
                if matches!(slot, Slot::Pending) {
                    *slot = Slot::Lost;
                    progress = true;
                }
            }
        } else {
            // A log end below one this replay knows of otherwise lags (a
            // stale answer, a replica whose high watermark lags): what lies
            // below the known end is not gone.
            self.lagging = (0..self.known_end).contains(&log_end);
            self.known_end = self.known_end.max(log_end);
        }
        let log_end = self.known_end;
        // Below the log start every entry is gone, whichever fetch it was
        // asked in (a batch straddling the log start may still carry some:
        // they are not served).
        let below = self.entries.partition_point(|e| e.offset < log_start);
        for slot in self.slots.iter_mut().take(below) {
            if matches!(slot, Slot::Pending) {
                *slot = Slot::Lost;
                progress = true;
            }
        }
        // Past the log end, this fetch's entries are.
        let mut kept = None;
        for i in range.clone() {
            let offset = self.entries[i].offset;
            if offset >= log_end && matches!(self.slots[i], Slot::Pending) {
                self.slots[i] = Slot::Lost;
                progress = true;
            } else if offset >= log_start && offset < log_end {
                kept.get_or_insert(i);
            }
        }
        self.count_stall(progress, fetch.offset)?;
        self.strategy.observe_response(fetch, 0, 0);
        if let Some(start) = kept {
            self.queue.requeue(start..range.end, start == range.start);
        }
        if let Some(from) = tail_from {
            if from < log_start && from < log_end {
                self.lose_tail(from, log_start, None)?;
            }
            // Records past `last_index` the scan had still to read past the
            // log's end now, known to have been written, went with the
            // truncation.
            let gone = from.max(log_start).max(log_end);
            if truncated && gone < known_end {
                self.lose_tail(gone, known_end, self.truncated_to)?;
            }
            // Below the log: resume at its start. Past its end: nothing
            // more exists.
            let next = if from >= log_end {
                self.end
            } else {
                self.tail_resume(from.max(log_start))
            };
            self.queue.tail_progress(next);
        }
        Ok(())
    }

    /// The scan past `last_index` found `from..to` gone: below the log's
    /// start (retention, `to` the start), or past the end of a log
    /// `truncated_to` an offset below it. Records no index lists, so only
    /// the range can be named. Listed in the stats; an error unless lost
    /// offsets are skipped.
    pub(super) fn lose_tail(
        &mut self,
        from: i64,
        to: i64,
        truncated_to: Option<i64>,
    ) -> Result<(), Error<C>> {
        let to = to.min(self.end);
        let lost = &mut self.stats.lost_ranges;
        if !lost.iter().any(|r| r.start <= from && to <= r.end) {
            lost.push(from..to);
        }
        if self.options.on_lost == LostPolicy::Skip {
            return Ok(());
        }
        let regions = self
            .regions
            .iter()
            .filter(|r| r.tail_from < to && from < r.range.to)
            .map(|r| r.range.region)
            .collect();
        Err(Error::LostRange {
            topic: self.topic.clone(),
            partition: self.partition,
            regions,
            from,
            to,
            truncated_to,
        })
    }

    /// Where the scan past `last_index` goes on from `next`: the first
    /// offset at or past it in some region's part of the scan (`tail_from`
    /// to the end of its range), or the end when none is left. The scan
    /// covers the union of those parts, not their hull: offsets between
    /// them are wanted by no region.
    pub(super) fn tail_resume(&self, next: i64) -> i64 {
        self.regions
            .iter()
            .filter(|r| r.tail_from < r.range.to && next < r.range.to)
            .map(|r| r.tail_from.max(next))
            .min()
            .unwrap_or(self.end)
    }

    /// The records of the scan past `last_index` an answer carried, in
    /// offset order (`batches`: which of them came from which compressed
    /// batch, see [`super::absorb::Absorbed::tail_batches`]; the others
    /// are slices of the answer's `response` bytes of records): each kept
    /// for its region, held as [`hold`] says for those kept of each
    /// buffer. What they hold.
    pub(super) fn take_tail(
        &mut self,
        tail: Vec<Record>,
        batches: &[(Range<usize>, usize)],
        response: usize,
    ) -> u64 {
        // Each record kept: its region, and the compressed batch it is a
        // slice of (an index into `batches`), if any.
        let mut runs = batches.iter().enumerate().peekable();
        let mut kept: Vec<(usize, Taken, Option<usize>)> = Vec::new();
        for (i, record) in tail.into_iter().enumerate() {
            while runs.next_if(|(_, (run, _))| run.end <= i).is_some() {}
            let batch = runs
                .peek()
                .filter(|(_, (run, _))| run.contains(&i))
                .map(|(j, _)| *j);
            if let Some(k) = self.tail_owner(&record) {
                kept.push((k, Taken::own(record), batch));
            }
        }
        // A compressed batch's records kept lie together.
        let mut held = 0;
        for group in kept.chunk_by_mut(|a, b| a.2 == b.2) {
            if let Some(j) = group[0].2 {
                held += hold(group.iter_mut().map(|(_, t, _)| t), batches[j].1);
            }
        }
        held += hold(
            kept.iter_mut()
                .filter(|(_, _, batch)| batch.is_none())
                .map(|(_, t, _)| t),
            response,
        );
        self.tail
            .extend(kept.into_iter().map(|(k, taken, _)| (k, taken)));
        held
    }

    /// The region (an index into `regions`) a record of the scan past
    /// `last_index` is kept for: one asked for whose range holds the
    /// offset, by the region rule. One in which the rule finds no region at
    /// all is counted apart, and the first is logged: the rule may not read
    /// this log's records.
    pub(super) fn tail_owner(&mut self, record: &Record) -> Option<usize> {
        let offset = record.offset();
        let Some(rule) = self.options.region_rule.as_ref() else {
            self.stats.tail_skipped += 1;
            return None;
        };
        // A no-op record (GreptimeDB starts every topic with one) is no
        // region's entry, and no sign the rule misreads the log.
        if rule.is_noop(record) {
            self.stats.tail_skipped += 1;
            return None;
        }
        let Some(id) = rule.region(record) else {
            if self.stats.tail_unassigned == 0 {
                tracing::warn!(
                    topic = %self.topic,
                    partition = self.partition,
                    offset,
                    %rule,
                    "a record the scan read (past last_index, or any under a full \
                     scan) has no region id by the region rule: if the rule does not \
                     read this log's records, their regions' entries there are not \
                     yielded"
                );
            }
            self.stats.tail_skipped += 1;
            self.stats.tail_unassigned += 1;
            return None;
        };
        let owner = self
            .regions
            .iter()
            .position(|r| r.range.region == id && r.tail_from <= offset && offset < r.range.to);
        if owner.is_none() {
            self.stats.tail_skipped += 1;
        }
        owner
    }

    /// Gives up after too many fetches in a row that changed nothing (at
    /// `offset`), or held back by a transaction still open, if the last
    /// answer said so.
    pub(super) fn count_stall(&mut self, progress: bool, offset: i64) -> Result<(), Error<C>> {
        self.stalls = if progress { 0 } else { self.stalls + 1 };
        if progress {
            self.held_back = None;
        }
        if self.stalls > self.options.max_attempts {
            return Err(match self.held_back {
                Some((last_stable_offset, offset)) => Error::Unstable {
                    topic: self.topic.clone(),
                    partition: self.partition,
                    offset,
                    last_stable_offset,
                    attempts: self.stalls,
                },
                None => self.stalled_at(offset),
            });
        }
        Ok(())
    }

    /// Shows the layout, for each entry delivered for the first time,
    /// whether the next wanted entry is in its batch (which the batch's
    /// last offset tells, whether or not the response carried the next).
    pub(super) fn learn_neighbours(&mut self, delivered: &[(usize, Taken)], batches: &[SeenBatch]) {
        let mut batches = batches.iter().peekable();
        for (i, taken) in delivered {
            let offset = taken.record.offset();
            while batches.next_if(|b| b.last < offset).is_some() {}
            let (Some(batch), Some(next)) = (batches.peek(), self.entries.get(i + 1)) else {
                continue;
            };
            if batch.base <= offset && matches!(self.slots[*i], Slot::Pending) {
                let d = next.offset - self.entries[*i].offset;
                let one_region = one_region(&self.entry_regions, i + 1);
                self.layout
                    .observe_neighbours(d, one_region, next.offset <= batch.last);
            }
        }
    }
}
