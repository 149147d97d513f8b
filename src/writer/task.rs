//! The writer task: its loop, taking entries, waking for lingers,
//! answers and backoffs, and answering flushes.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;
use tokio::time::Instant;

use super::memory::Memory;
use super::{Command, Task, WriterConfig, TAKE_AT_ONCE};
use crate::cluster::Cluster;
use crate::index::WalIndex;

impl Task {
    pub(super) fn new(
        cluster: Arc<Cluster>,
        config: WriterConfig,
        index: Arc<Mutex<WalIndex>>,
        memory: Arc<Memory>,
    ) -> Self {
        Self {
            cluster,
            target: Arc::new((config.topic.clone(), config.partition)),
            config,
            index,
            groups: HashMap::new(),
            taken: 0,
            latest: None,
            heads: BTreeMap::new(),
            full_heads: BTreeMap::new(),
            ready: VecDeque::new(),
            in_flight: VecDeque::new(),
            next_number: 0,
            flushes: Vec::new(),
            producer: None,
            next_sequence: 0,
            reset_producer: false,
            rewind: None,
            resume_at: None,
            search_from: 0,
            buffered: 0,
            memory,
        }
    }

    pub(super) async fn run(mut self, mut queue: mpsc::Receiver<Command>) {
        let mut closed = false;
        // One timer, moved as the oldest group changes (not one per entry).
        let timer = tokio::time::sleep_until(Instant::now());
        tokio::pin!(timer);
        let mut armed: Option<Instant> = None;
        let memory = Arc::clone(&self.memory);
        loop {
            self.form_due(Instant::now());
            self.send_ready().await;
            self.encode_ahead(Instant::now());
            self.answer_flushes();
            if closed
                && self.groups.is_empty()
                && self.ready.is_empty()
                && self.in_flight.is_empty()
            {
                return;
            }
            // With room in the pipeline, wake when the oldest group's linger
            // runs out; without, an answer makes room.
            let deadline = match self.room() {
                true => self.oldest().map(|(_, due)| due),
                false => None,
            };
            if deadline != armed {
                if let Some(at) = deadline {
                    timer.as_mut().reset(at);
                }
                armed = deadline;
            }
            let resume = self.resume_at;
            let head = async {
                match self.in_flight.front_mut() {
                    Some(f) => f.answer.as_mut().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                answer = head => self.on_answer(answer).await,
                // `form_due` at the top of the loop takes the due group.
                () = &mut timer, if armed.is_some() => armed = None,
                () = sleep_until(resume) => self.resume_at = None,
                // An `append` waits for room: `form_due` at the top of the
                // loop sends the oldest group.
                () = memory.exhausted() => {}
                // The entries held are bounded by `append` (`Memory`): the
                // queue is always read, so a flush or the writer's closing
                // behind entries is always reached.
                command = queue.recv(), if !closed => {
                    // Entries already appended go into their groups before
                    // any group is formed: a batch formed first would
                    // leave them behind, and go out smaller.
                    let mut next = command;
                    for taken in 1..=TAKE_AT_ONCE {
                        match next {
                            Some(Command::Append(p)) => self.add(p),
                            Some(Command::Flush(done)) => {
                                self.form_all();
                                self.flushes.push((self.next_number, done));
                                break;
                            }
                            None => {
                                closed = true;
                                self.form_all();
                                break;
                            }
                        }
                        if taken == TAKE_AT_ONCE {
                            break;
                        }
                        match queue.try_recv() {
                            Ok(command) => next = Some(command),
                            Err(_) => break,
                        }
                    }
                }
            }
        }
    }

    /// Answers the flushes whose batches are all written or failed.
    pub(super) fn answer_flushes(&mut self) {
        if self.flushes.is_empty() {
            return;
        }
        let unresolved = self
            .in_flight
            .iter()
            .map(|f| f.batch.number)
            .chain(self.ready.iter().map(|b| b.number))
            .min()
            .unwrap_or(self.next_number);
        let (done, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.flushes)
            .into_iter()
            .partition(|(upto, _)| *upto <= unresolved);
        self.flushes = waiting;
        for (_, done) in done {
            let _ = done.send(());
        }
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

impl Drop for Task {
    /// `append`s waiting for room fail (the writer is closed) instead of
    /// waiting for permits no one gives back.
    fn drop(&mut self) {
        self.memory.close();
    }
}
