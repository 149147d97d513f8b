//! What to fetch next: the next run or scan position the queue hands
//! out, sized by the strategy within the memory and in-flight limits.

use std::time::Duration;

use super::absorb::AbsorbOptions;
use super::queue::Work;
use super::replay_core::{InFlight, Slot, FIRST_GROWTH, SMALLEST_CUT};
use super::{unready_wait, OutgoingFetch, ReplayCore, Room, LAGGING_WAIT, LEARNING_IN_FLIGHT};
use crate::fetch::IsolationLevel;
use crate::plan::{FetchKind, PlanView, PlannedFetch};

impl<C> ReplayCore<C> {
    /// The next fetch to send, if the strategy has one. `room` is what the
    /// driver's limits still allow (see [`Room`]): the fetch asks for at
    /// most [`Room::memory`] bytes, nor more than [`Room::share`], and
    /// waits where less than a sixteenth of a share is left. With no room
    /// left, a fetch is given only when this partition can yield nothing
    /// and has nothing in flight, so that a replay never stalls on its
    /// limits; with too little memory left, that fetch asks for one byte,
    /// and gets its first batch whole (KIP-74). `round_trip` is the
    /// driver's count of round trips answered so far (see
    /// [`super::ReplayStats::round_trips`]). Until the first answer, at
    /// most one burst of fetches ([`LEARNING_IN_FLIGHT`]) is given, or, with
    /// [`super::ReplayOptions::learn_link`] off, the first fetch alone.
    pub fn poll_fetch(&mut self, room: Room, round_trip: u64) -> Option<OutgoingFetch> {
        if self.is_drained() {
            return None;
        }
        // The fetch that keeps this partition going: it can yield nothing
        // and has nothing in flight. It goes whatever the limits.
        let keeps_going = self.in_flight.is_empty() && self.head_blocked();
        if room.in_flight == 0 && !keeps_going {
            return None;
        }
        // A fetch is planned within its share of the cap and what is left
        // of it, where that is a fair part of a share; with less left,
        // only the fetch that keeps the partition going is sent, of one
        // byte.
        let share = room.share.min(self.options.max_buffered_bytes);
        let room_now = room.memory.min(share);
        let budget = if room_now >= (share / SMALLEST_CUT).max(1) {
            // In bytes on the wire: what the answer will hold once taken
            // (decompressed) fits in the room.
            u32::try_from(self.wire_for(room_now)).unwrap_or(u32::MAX)
        } else if keeps_going {
            1
        } else {
            return None;
        };
        // Until the first answer shows whether the broker keeps to the
        // byte limit (see `PlanView::overshoots`), the fetches sized
        // without knowing are few: one burst while the link is learned
        // (the driver holds every partition to it then), else the first
        // fetch alone. A broker that does not keep to it adds a batch to
        // each of them, against a round trip lost by every replay if the
        // first fetch always went alone.
        let before_answer = if self.options.learn_link {
            LEARNING_IN_FLIGHT
        } else {
            1
        };
        if !self.answered && self.in_flight.len() >= before_answer {
            return None;
        }
        // After an answer with no records below the readable end, one
        // fetch at a time, each allowed a longer wait, until records come:
        // fetches side by side would all come back empty, each a try.
        if self.unready && !self.in_flight.is_empty() {
            return None;
        }
        if self
            .strategy
            .max_in_flight()
            .is_some_and(|max| self.in_flight.len() >= max)
        {
            return None;
        }
        let Some(work) = self.next_work() else {
            if self.in_flight.is_empty() {
                self.drained = true;
                // Nothing to send, nothing in flight: entries still pending
                // mean the replay gave up on them.
                if let Some(i) = self.slots.iter().position(|s| matches!(s, Slot::Pending)) {
                    self.error = Some(self.stalled_at(self.entries[i].offset));
                }
            }
            return None;
        };
        let fetch = self.plan(&work, budget);
        let id = self.next_id;
        self.next_id += 1;
        let known = self.layout.containing(fetch.offset);
        // A fetch asking for less than its first batch gets that batch
        // whole: count what it will bring, as well as it is known, and no
        // more than a fetch may ask for. A length learned from the header
        // of a batch the broker cut is not covered by its CRC and may be
        // anything; a batch really larger passes the cap by itself.
        let first_batch = match known {
            Some((_, e)) => u64::from(e.len),
            None => self.layout.observed().average_batch() as u64,
        };
        let counted = first_batch.min(u64::from(self.options.plan.max_fetch_bytes));
        let asked = u64::from(fetch.max_bytes).max(counted);
        // What the answer is expected to hold once taken: the limit grown
        // as answers grew. A first batch passing the limit (the KIP-74
        // case above) is counted at its own size, as the cap's documented
        // excess of one batch: growing it by a guess made before any
        // answer (`FIRST_GROWTH`) would book many times a batch that no
        // answer can bring.
        let limit = u64::from(fetch.max_bytes);
        let reserved = self.held_for(limit) + (asked - limit);
        self.in_flight_bytes += asked;
        self.in_flight_held += reserved;
        let fits = known.is_some_and(|(base, e)| base == fetch.offset && e.len <= fetch.max_bytes);
        let max_wait = self.max_wait();
        let out = OutgoingFetch {
            id,
            offset: fetch.offset,
            max_bytes: fetch.max_bytes.max(1),
            isolation: self.options.isolation,
            max_wait,
            lagging: self.lagging,
            // A request shared by several partitions' fetches waits as
            // long as its first fetch allows (see `cluster::fetch`): a
            // fetch allowed to wait (a replica that lags, records held
            // back, storage not read in time, a wait learned) goes alone,
            // so that it waits as long as the core counts on.
            shareable: fits && self.stalls == 0 && max_wait.is_zero(),
        };
        self.in_flight.insert(
            id,
            InFlight {
                fetch,
                wait: max_wait,
                round_trip: round_trip + 1,
                asked,
                reserved,
            },
        );
        self.note_buffered();
        Some(out)
    }

    /// How long the next fetch may wait at the broker (see
    /// [`OutgoingFetch::max_wait`]).
    fn max_wait(&self) -> Duration {
        if self.lagging || self.held_back.is_some() {
            return LAGGING_WAIT;
        }
        if !self.unready {
            return self.needed_wait;
        }
        // The answers in a row without progress, the empty one among them.
        unready_wait(self.stalls.max(1)).max(self.needed_wait)
    }

    /// The next work in the queue, past entries already had (a response
    /// may carry entries other fetches were asked for).
    pub(super) fn next_work(&mut self) -> Option<Work> {
        loop {
            let work = self.queue.peek()?;
            let Work::Entries { run, .. } = &work else {
                return Some(work);
            };
            let had = self.slots[run.clone()]
                .iter()
                .take_while(|s| !matches!(s, Slot::Pending))
                .count();
            if had == 0 {
                return Some(work);
            }
            self.queue.claimed(&work, run.start..run.start + had);
        }
    }

    /// Has the strategy size a fetch for `work` within `budget` bytes,
    /// holds it to what the work allows (a prefix of the run, at least its
    /// first entry; no offset below the log start; no more than `budget`),
    /// and takes the work off the queue.
    pub(super) fn plan(&mut self, work: &Work, budget: u32) -> PlannedFetch {
        let view = PlanView {
            entries: &self.entries,
            regions: &self.entry_regions,
            layout: &self.layout,
            log_start: self.log_start,
            log_end: self.end,
            misaligned: self.misaligned,
            cut_records: self.cut_usable,
            overshoots: self.overshoots,
            budget,
        };
        let mut fetch = match work {
            Work::Entries { run, attempt } => {
                let mut fetch = self.strategy.plan_entries(&view, run.clone(), *attempt);
                let end = match &fetch.kind {
                    FetchKind::Indexed { entries } if entries.start == run.start => {
                        entries.end.clamp(run.start + 1, run.end)
                    }
                    _ => run.start + 1,
                };
                fetch.kind = FetchKind::Indexed {
                    entries: run.start..end,
                };
                fetch
            }
            Work::Tail { from, to, attempt } => {
                let mut fetch = self.strategy.plan_tail(&view, *from, *to, *attempt);
                fetch.kind = FetchKind::Tail { from: *from };
                fetch
            }
        };
        fetch.offset = fetch.offset.max(self.log_start);
        fetch.max_bytes = fetch.max_bytes.min(budget);
        let claimed = match &fetch.kind {
            FetchKind::Indexed { entries } => entries.clone(),
            FetchKind::Tail { .. } => 0..0,
        };
        self.queue.claimed(work, claimed);
        fetch
    }

    /// How much answers grow once taken, as a ratio: what the records
    /// taken from them held (see `absorb::hold`) over the bytes of
    /// records they carried, no less than one (records copied out of their
    /// batches, or answers carrying more than was kept, grow nothing);
    /// [`FIRST_GROWTH`] before an answer carried any.
    fn growth(&self) -> (u128, u128) {
        match self.taken_bytes {
            0 => (u128::from(FIRST_GROWTH), 1),
            bytes if self.taken_held <= bytes => (1, 1),
            bytes => (u128::from(self.taken_held), u128::from(bytes)),
        }
    }

    /// What an answer of `bytes` of records is expected to hold once
    /// taken (see [`ReplayCore::growth`]).
    pub(super) fn held_for(&self, bytes: u64) -> u64 {
        let (held, of) = self.growth();
        u64::try_from(u128::from(bytes) * held / of).unwrap_or(u64::MAX)
    }

    /// The bytes of records a fetch may ask for so that its answer holds
    /// about `room` once taken (see [`ReplayCore::growth`]); at least one.
    pub(super) fn wire_for(&self, room: u64) -> u64 {
        let (held, of) = self.growth();
        u64::try_from(u128::from(room) * of / held)
            .unwrap_or(u64::MAX)
            .max(1)
    }

    pub(super) fn absorb_options(&self) -> AbsorbOptions {
        AbsorbOptions {
            decode: self.options.decode,
            read_committed: self.options.isolation == IsolationLevel::ReadCommitted,
            cut_records: self.options.cut_records,
            tail_end: self.end,
        }
    }
}
