//! How entries become batches: each entry's record is written into its
//! group's next batch as the writer takes it, and groups are formed into
//! batches by age, fullness and linger (see the module docs).

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use tokio::time::Instant;
use walfetch_codec::{record_checksum_header, NewRecord, RECORD_CHECKSUM_HEADER};

use super::{entry_bytes, Batch, Member, Open, Pending, Task, WalEntry, WriterMode};
use crate::error::Error;
use crate::index::RegionId;

impl Task {
    /// Adds an entry to its group, writing its record into the group's
    /// batch to be; an entry whose record cannot be written (a field too
    /// long for Kafka's lengths) is refused alone.
    pub(super) fn add(&mut self, pending: Pending) {
        let Pending {
            entry,
            ack,
            appended,
        } = pending;
        let bytes = entry_bytes(&entry, self.config.record_checksums);
        let key = match self.config.mode {
            WriterMode::Clustered => entry.region,
            WriterMode::Interleaved => 0,
        };
        let max = self.config.max_batch_bytes;
        // Appenders on several tasks may reach the channel out of the
        // order of their clocks; kept in the order taken, an older group
        // is never due later than a younger one (by a few microseconds at
        // most), which lets `next_group` look at the oldest group only.
        let at = self.latest.map_or(appended, |l| l.max(appended));
        let seq = self.taken;
        let checksums = self.config.record_checksums;
        let group = self.groups.entry(key).or_default();
        let was_full = group.full(max);
        let open = group.open_for(bytes, max, seq, at);
        let delta = i32::try_from(open.records.len()).unwrap_or(i32::MAX);
        if let Err(source) = open.records.push(&record(&entry, delta, checksums)) {
            if open.members.is_empty() {
                group.batches.pop_back();
                if group.batches.is_empty() {
                    self.groups.remove(&key);
                }
            }
            // Not held: its bytes go back to `append` at once.
            self.memory.give(bytes);
            let _ = ack.send(Err(Error::Encode {
                topic: self.config.topic.clone(),
                partition: self.config.partition,
                source,
            }));
            return;
        }
        open.bytes += bytes;
        open.members.push(Member {
            region: entry.region,
            ack,
        });
        group.bytes += bytes;
        self.buffered += bytes;
        self.latest = Some(at);
        self.taken += 1;
        let head = group.batches.front().map_or(seq, |b| b.seq);
        if head == seq {
            self.heads.insert(seq, key);
        }
        if !was_full && group.full(max) {
            self.full_heads.insert(head, key);
        }
    }

    /// Whether a new batch could be sent now: nothing formed waits and a
    /// request slot is free.
    pub(super) fn room(&self) -> bool {
        self.ready.is_empty()
            && self.in_flight.len() < self.config.max_in_flight
            && self.resume_at.is_none()
    }

    /// The group whose first entry is the oldest, and when it is due
    /// ([`due`]).
    pub(super) fn oldest(&self) -> Option<(RegionId, Instant)> {
        let (_, &key) = self.heads.first_key_value()?;
        let head = self.groups.get(&key)?.batches.front()?;
        Some((key, due(head.at, self.config.linger)))
    }

    /// The group to send next, if one may go at `now`: of the groups whose
    /// first entries make a full batch or whose linger ran out, the one
    /// whose first entry is the oldest, so that a quiet region's entry
    /// waits behind busier regions' batches only as long as they are
    /// older. Groups fall due in age order, so if the oldest is not due,
    /// none is, and the oldest full group goes.
    ///
    /// With the buffer at its cap and no group due or full, the oldest goes
    /// anyway (as the Java producer sends its batches early when its
    /// memory is exhausted): the writer takes no more entries until it
    /// has sent some, and a flush or the writer's closing waits in the
    /// queue behind them.
    pub(super) fn next_group(&self, now: Instant) -> Option<RegionId> {
        let (key, due) = self.oldest()?;
        if due <= now {
            return Some(key);
        }
        match self.full_heads.first_key_value() {
            Some((_, &full)) => Some(full),
            None => self.memory.is_exhausted().then_some(key),
        }
    }

    /// Forms the batches that can be sent now, one per free request slot:
    /// while the pipeline is full, groups keep growing (the Java
    /// producer's accumulator does the same), so under load batches fill
    /// up instead of queueing small.
    pub(super) fn form_due(&mut self, now: Instant) {
        while self.resume_at.is_none()
            && self.ready.len() + self.in_flight.len() < self.config.max_in_flight
        {
            let Some(key) = self.next_group(now) else {
                return;
            };
            self.form_from(key);
        }
    }

    /// While every request slot is taken, forms the batch to send next, if
    /// it is a full one, and encodes it, so that encoding overlaps the
    /// requests in flight instead of following their answers (a batch
    /// that could still grow is left to grow).
    pub(super) fn encode_ahead(&mut self, now: Instant) {
        if !self.ready.is_empty()
            || self.in_flight.len() < self.config.max_in_flight
            || self.resume_at.is_some()
            || self.reset_producer
            || self.rewind.is_some()
            || (self.config.idempotent && self.producer.is_none())
            || self.full_heads.is_empty()
        {
            return;
        }
        let Some(key) = self.next_group(now) else {
            return;
        };
        let max = self.config.max_batch_bytes;
        if !self.groups.get(&key).is_some_and(|g| g.full(max)) {
            return;
        }
        self.form_from(key);
        if let Some(mut batch) = self.ready.pop_front() {
            // An encoding error is met again, and reported, when it is sent.
            if let Ok(encoded) = self.encode(&batch) {
                batch.encoded = Some(encoded);
            }
            self.ready.push_front(batch);
        }
    }

    /// Forms every entry into batches, oldest group first (a flush, or the
    /// writer closing).
    pub(super) fn form_all(&mut self) {
        while let Some((key, _)) = self.oldest() {
            self.form_from(key);
        }
    }

    /// Forms one batch of the first entries of `key`'s group.
    pub(super) fn form_from(&mut self, key: RegionId) {
        let max = self.config.max_batch_bytes;
        let Some(group) = self.groups.get_mut(&key) else {
            return;
        };
        let Some(taken) = group.take_batch() else {
            return;
        };
        self.heads.remove(&taken.seq);
        self.full_heads.remove(&taken.seq);
        match group.batches.front() {
            Some(head) => {
                self.heads.insert(head.seq, key);
                if group.full(max) {
                    self.full_heads.insert(head.seq, key);
                }
            }
            None => {
                self.groups.remove(&key);
            }
        }
        self.form(taken);
    }

    pub(super) fn form(&mut self, open: Open) {
        self.ready.push_back(Batch {
            target: Arc::clone(&self.target),
            buffered: open.bytes,
            number: self.next_number,
            part: 0,
            splits: 0,
            entries: open.members,
            records: open.records,
            encoded: None,
            first_try: None,
            sent: false,
            attempts: 0,
            renewed: false,
            maybe_written: None,
        });
        self.next_number += 1;
    }
}

/// An entry's record: the region id as key, the payload as value, and the
/// checksum header (when on) before the entry's own headers. Its timestamp
/// is when the writer took it.
fn record(entry: &WalEntry, offset_delta: i32, checksums: bool) -> NewRecord {
    let key = Bytes::copy_from_slice(&entry.region.to_be_bytes());
    let mut headers = Vec::with_capacity(entry.headers.len() + 1);
    if checksums {
        let sum = record_checksum_header(Some(&key), Some(&entry.payload));
        headers.push((
            Bytes::from_static(RECORD_CHECKSUM_HEADER.as_bytes()),
            Some(Bytes::copy_from_slice(&sum)),
        ));
    }
    headers.extend(entry.headers.iter().cloned());
    NewRecord {
        offset_delta,
        timestamp: now_ms(),
        key: Some(key),
        value: Some(entry.payload.clone()),
        headers,
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// When a group whose first entry was appended `at` is due: its linger
/// later, less up to 2 ms (at most half the linger), and an entry may wait
/// `linger` at most. Tokio's timers fire on millisecond ticks, up to one
/// late, and the thread parked for them sleeps whole milliseconds too, so
/// a timer armed for the instant itself goes off up to 2 ms after it.
fn due(at: Instant, linger: Duration) -> Instant {
    let slack = (linger / 2).min(Duration::from_millis(2));
    // A linger too long to add (`Duration::MAX`: only when full or
    // flushed) is due in 30 years, tokio's own far future.
    let due = at
        .checked_add(linger)
        .or_else(|| at.checked_add(FAR_FUTURE))
        .unwrap_or(at);
    due.checked_sub(slack).unwrap_or(due)
}

/// Later than any linger that matters: 30 years.
const FAR_FUTURE: Duration = Duration::from_secs(30 * 365 * 86_400);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_falls_due_early_enough_for_a_late_timer() {
        let at = Instant::now();
        // 2 ms early at most, so that a timer up to 2 ms late still sends
        // the batch within the linger.
        assert_eq!(
            due(at, Duration::from_millis(5)),
            at + Duration::from_millis(3)
        );
        assert_eq!(
            due(at, Duration::from_millis(100)),
            at + Duration::from_millis(98)
        );
        // Never earlier than half the linger.
        assert_eq!(
            due(at, Duration::from_millis(2)),
            at + Duration::from_millis(1)
        );
        assert_eq!(due(at, Duration::ZERO), at);
    }
}
