//! What is still to be fetched: indexed entries never asked for, runs a
//! response did not deliver (asked for again first), and the scan past
//! `last_index`. Pure bookkeeping; the strategy sizes each fetch.

use std::collections::BTreeMap;
use std::ops::Range;

/// The next thing to fetch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Work {
    /// The entries `run` (indexes into the replay's entries), and how often
    /// a fetch for its first entry came back without it.
    Entries { run: Range<usize>, attempt: u32 },
    /// The scan, which wants `from..to`, and how many scan fetches in a
    /// row made no progress.
    Tail { from: i64, to: i64, attempt: u32 },
}

/// The scan past `last_index`: `next..to` remains.
#[derive(Debug, Clone, Copy)]
struct Tail {
    next: i64,
    to: i64,
    in_flight: bool,
    attempts: u32,
}

/// What is still to be fetched; see the module docs.
#[derive(Debug, Clone)]
pub(crate) struct WorkQueue {
    len: usize,
    /// `entries[next..]` were never asked for.
    next: usize,
    /// Runs handed back, by start: asked for before anything new.
    requeued: BTreeMap<usize, usize>,
    /// How often a run starting at an entry was handed back.
    attempts: BTreeMap<usize, u32>,
    tail: Option<Tail>,
}

impl WorkQueue {
    /// `len` indexed entries, then the scan of `tail`, if any.
    pub(crate) fn new(len: usize, tail: Option<Range<i64>>) -> Self {
        Self {
            len,
            next: 0,
            requeued: BTreeMap::new(),
            attempts: BTreeMap::new(),
            tail: tail.filter(|t| t.start < t.end).map(|t| Tail {
                next: t.start,
                to: t.end,
                in_flight: false,
                attempts: 0,
            }),
        }
    }

    /// What to fetch next, if anything can be asked for now: runs handed
    /// back first, then entries never asked for, then (once every entry
    /// was asked for) the scan, one fetch at a time. Call
    /// [`WorkQueue::claimed`] with what the fetch took.
    pub(crate) fn peek(&self) -> Option<Work> {
        if let Some((&start, &end)) = self.requeued.iter().next() {
            return Some(self.entries(start..end));
        }
        if self.next < self.len {
            return Some(self.entries(self.next..self.len));
        }
        let tail = self.tail?;
        (!tail.in_flight).then_some(Work::Tail {
            from: tail.next,
            to: tail.to,
            attempt: tail.attempts,
        })
    }

    fn entries(&self, run: Range<usize>) -> Work {
        let attempt = self.attempts.get(&run.start).copied().unwrap_or(0);
        Work::Entries { run, attempt }
    }

    /// A fetch for `work` (from [`WorkQueue::peek`]) was sent; for entries,
    /// it claimed `claimed` (a prefix of the run).
    pub(crate) fn claimed(&mut self, work: &Work, claimed: Range<usize>) {
        match work {
            Work::Entries { run, .. } => {
                let end = claimed.end.clamp(run.start + 1, run.end);
                if self.requeued.remove(&run.start).is_some() {
                    if end < run.end {
                        self.requeued.insert(end, run.end);
                    }
                } else {
                    self.next = self.next.max(end);
                }
            }
            Work::Tail { .. } => {
                if let Some(t) = self.tail.as_mut() {
                    t.in_flight = true;
                }
            }
        }
    }

    /// Hands back entries a fetch did not deliver: asked for again before
    /// anything new, as one run with the entries right after them if those
    /// were not asked for yet. `missed`: the fetch was for the first of
    /// them and came back without it, which counts an attempt (entries a
    /// fetch claimed past what it delivered do not).
    pub(crate) fn requeue(&mut self, entries: Range<usize>, missed: bool) {
        if entries.start >= entries.end {
            return;
        }
        if missed {
            *self.attempts.entry(entries.start).or_default() += 1;
        }
        let mut end = entries.end;
        if let Some(following) = self.requeued.remove(&end) {
            end = following;
        } else if end == self.next {
            end = self.len;
            self.next = end;
        }
        let e = self.requeued.entry(entries.start).or_insert(end);
        *e = (*e).max(end);
    }

    /// A scan fetch came back having read up to `next` (exclusive). The
    /// scan ends when it reaches its end.
    pub(crate) fn tail_progress(&mut self, next: i64) {
        if let Some(tail) = self.tail.as_mut() {
            tail.in_flight = false;
            tail.attempts = if next > tail.next {
                0
            } else {
                tail.attempts + 1
            };
            tail.next = tail.next.max(next);
            if tail.next >= tail.to {
                self.tail = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn take(q: &mut WorkQueue, claim: usize) -> Work {
        let work = q.peek().unwrap();
        if let Work::Entries { run, .. } = &work {
            q.claimed(&work, run.start..(run.start + claim).min(run.end));
        } else {
            q.claimed(&work, 0..0);
        }
        work
    }

    #[test]
    fn handed_back_runs_come_first_joined_with_what_follows_them() {
        let mut q = WorkQueue::new(10, None);
        assert_eq!(
            take(&mut q, 3),
            Work::Entries {
                run: 0..10,
                attempt: 0
            }
        );
        assert_eq!(
            take(&mut q, 3),
            Work::Entries {
                run: 3..10,
                attempt: 0
            }
        );
        // The second fetch delivered nothing past entry 4; the rest of the
        // entries were not asked for yet, so they join it. Entry 4 was not
        // the first it was for: no attempt counted.
        q.requeue(4..6, false);
        assert_eq!(
            q.peek(),
            Some(Work::Entries {
                run: 4..10,
                attempt: 0
            })
        );
        take(&mut q, 2);
        // The first one delivered only its first entry.
        q.requeue(1..3, false);
        assert_eq!(
            take(&mut q, 1),
            Work::Entries {
                run: 1..3,
                attempt: 0
            }
        );
        // That fetch, for entry 1, came back without it: an attempt.
        q.requeue(1..2, true);
        assert_eq!(
            take(&mut q, 1),
            Work::Entries {
                run: 1..3,
                attempt: 1
            }
        );
        assert_eq!(
            take(&mut q, 9),
            Work::Entries {
                run: 2..3,
                attempt: 0
            }
        );
        assert_eq!(
            take(&mut q, 9),
            Work::Entries {
                run: 6..10,
                attempt: 0
            }
        );
        assert_eq!(q.peek(), None);
    }

    #[test]
    fn the_scan_follows_the_index_one_fetch_at_a_time() {
        let mut q = WorkQueue::new(1, Some(100..300));
        take(&mut q, 1);
        assert_eq!(
            take(&mut q, 0),
            Work::Tail {
                from: 100,
                to: 300,
                attempt: 0
            }
        );
        assert_eq!(q.peek(), None, "one scan fetch in flight");
        q.tail_progress(100);
        assert_eq!(
            take(&mut q, 0),
            Work::Tail {
                from: 100,
                to: 300,
                attempt: 1
            }
        );
        q.tail_progress(180);
        assert_eq!(
            take(&mut q, 0),
            Work::Tail {
                from: 180,
                to: 300,
                attempt: 0
            }
        );
        q.tail_progress(300);
        assert_eq!(q.peek(), None);
    }
}
