//! Handing entries out: in offset order, each record checked against the
//! region asked for and its checksum, what is lost reported by policy.

use std::time::Instant;

use walfetch_codec::{Record, RecordCheck};

use super::absorb::Taken;
use super::replay_core::Slot;
use super::{CutRecords, Entry, LostPolicy, ReplayCore};
use crate::error::Error;

impl<C> ReplayCore<C> {
    /// The next record in order, if it is here.
    pub(super) fn pop_ready(&mut self, now: Instant) -> Option<Result<Entry, Error<C>>> {
        while self.next_yield < self.slots.len() {
            let i = self.next_yield;
            match std::mem::replace(&mut self.slots[i], Slot::Done) {
                Slot::Ready(taken) => {
                    self.next_yield += 1;
                    let k = self.entry_regions[i];
                    if let Some(mismatch) = self.foreign_entry(k, &taken.record) {
                        self.buffered_bytes -= taken.held;
                        return Some(Err(mismatch));
                    }
                    self.stats.entries += 1;
                    self.region_stats[k].entries += 1;
                    return Some(Ok(self.yielded(k, taken, now)));
                }
                Slot::Lost => {
                    let offset = self.entries[i].offset;
                    let k = self.entry_regions[i];
                    self.next_yield += 1;
                    self.stats.lost.push(offset);
                    self.region_stats[k].lost.push(offset);
                    if self.options.on_lost == LostPolicy::Error {
                        return Some(Err(self.lost_error(i, offset)));
                    }
                }
                pending @ Slot::Pending => {
                    self.slots[i] = pending;
                    return None;
                }
                Slot::Done => self.next_yield += 1,
            }
        }
        let (k, taken) = self.tail.pop_front()?;
        self.stats.tail_records += 1;
        self.region_stats[k].tail_records += 1;
        Some(Ok(self.yielded(k, taken, now)))
    }

    /// Whether the next thing to yield is still to be fetched.
    pub(super) fn head_blocked(&self) -> bool {
        match self.slots.get(self.next_yield) {
            Some(slot) => matches!(slot, Slot::Pending),
            None => self.tail.is_empty(),
        }
    }

    pub(super) fn note_buffered(&mut self) {
        let held = self.held_bytes();
        self.stats.peak_buffered_bytes = self.stats.peak_buffered_bytes.max(held);
    }

    /// The error for an entry the index gives to region `k` whose record is
    /// of another region by the (known) rule: the index is not of this log.
    pub(super) fn foreign_entry(&self, k: usize, record: &Record) -> Option<Error<C>> {
        let rule = self
            .options
            .region_rule
            .as_ref()
            .filter(|_| self.verify_entries)?;
        let region = self.regions[k].range.region;
        let found = rule.region(record);
        (found != Some(region)).then(|| Error::IndexMismatch {
            topic: self.topic.clone(),
            partition: self.partition,
            mismatch: crate::error::Mismatch::Entry {
                offset: record.offset(),
                region,
                found,
                rule: rule.clone(),
            },
        })
    }

    /// The error for lost entry `i`: every lost offset of its region known
    /// now, not only the first. The stats list them all too (the error
    /// ends the replay, so they would not be reached otherwise): the error
    /// and the stats say the same.
    pub(super) fn lost_error(&mut self, i: usize, offset: i64) -> Error<C> {
        let k = self.entry_regions[i];
        let mut offsets = vec![offset];
        for j in self.next_yield..self.slots.len() {
            if matches!(self.slots[j], Slot::Lost) && self.entry_regions[j] == k {
                self.slots[j] = Slot::Done;
                let lost = self.entries[j].offset;
                self.stats.lost.push(lost);
                self.region_stats[k].lost.push(lost);
                offsets.push(lost);
            }
        }
        // Where the log was truncated below some of them, the message
        // says so.
        let truncated_to = self
            .truncated_to
            .filter(|&end| offsets.iter().any(|&o| o >= end));
        Error::LostOffsets {
            topic: self.topic.clone(),
            partition: self.partition,
            region: self.regions[k].range.region,
            offsets,
            truncated_to,
        }
    }

    pub(super) fn yielded(&mut self, k: usize, taken: Taken, now: Instant) -> Entry {
        let Taken { record, held } = taken;
        let len = record.wire_len() as u64;
        // The floor may cut a batch after this record only where the
        // policy would use it cut.
        let cut_ok = match self.options.cut_records {
            CutRecords::Trusted => true,
            CutRecords::Checked => record.check_checksum() == RecordCheck::Verified,
            CutRecords::Never => false,
        };
        let end = record
            .batch_range()
            .filter(|_| cut_ok)
            .map(|r| r.end as u32);
        self.yielded_ends.push((record.offset(), end));
        self.buffered_bytes -= held;
        self.stats.yielded_bytes += len;
        self.region_stats[k].yielded_bytes += len;
        self.stats
            .time_to_first
            .get_or_insert_with(|| now.saturating_duration_since(self.started));
        Entry {
            region: self.regions[k].range.region,
            record,
        }
    }
}
