//! The bytes of entries the writer may hold ([`WriterConfig::buffer_bytes`],
//! the Java producer's `buffer.memory`): `append` takes an entry's bytes
//! before queueing it, waiting while there is no room, and the writer task
//! gives them back once it no longer holds the entry unsent. While an
//! `append` waits, the writer's memory is *exhausted* and its groups go
//! before their linger (the Java producer's accumulator counts a batch
//! ready then too), so that room is made whatever the linger.
//!
//! [`WriterConfig::buffer_bytes`]: super::WriterConfig::buffer_bytes

use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::{Notify, Semaphore, TryAcquireError};

/// See the module docs.
#[derive(Debug)]
pub(super) struct Memory {
    bytes: Semaphore,
    /// `append`s waiting for bytes.
    waiting: AtomicUsize,
    /// Wakes the writer task when an `append` starts waiting.
    exhausted: Notify,
}

/// The memory was closed: the writer task ended.
#[derive(Debug)]
pub(super) struct Closed;

impl Memory {
    pub(super) fn new(bytes: usize) -> Self {
        Self {
            bytes: Semaphore::new(bytes.min(Semaphore::MAX_PERMITS)),
            waiting: AtomicUsize::new(0),
            exhausted: Notify::new(),
        }
    }

    /// Takes `bytes`, waiting (and waking the writer task) while there is
    /// not as much room. They are given back when the [`Taken`] is dropped
    /// before being handed over ([`Taken::hand_over`]).
    pub(super) async fn take(&self, bytes: u32) -> Result<Taken<'_>, Closed> {
        let taken = |permit: tokio::sync::SemaphorePermit<'_>| {
            permit.forget();
            Taken {
                memory: self,
                bytes: bytes as usize,
            }
        };
        match self.bytes.try_acquire_many(bytes) {
            Ok(permit) => return Ok(taken(permit)),
            Err(TryAcquireError::Closed) => return Err(Closed),
            Err(TryAcquireError::NoPermits) => {}
        }
        let _waiting = Waiting::new(&self.waiting);
        self.exhausted.notify_one();
        let permit = self.bytes.acquire_many(bytes).await.map_err(|_| Closed)?;
        Ok(taken(permit))
    }

    /// Gives `bytes` back.
    pub(super) fn give(&self, bytes: usize) {
        if bytes > 0 {
            self.bytes.add_permits(bytes);
        }
    }

    /// Whether an `append` waits for room.
    pub(super) fn is_exhausted(&self) -> bool {
        self.waiting.load(Ordering::Acquire) > 0
    }

    /// Resolves once an `append` has started waiting since the last time
    /// it resolved (at once if one did meanwhile).
    pub(super) async fn exhausted(&self) {
        self.exhausted.notified().await;
    }

    /// Closed: waiting and later `take`s fail.
    pub(super) fn close(&self) {
        self.bytes.close();
    }
}

/// Bytes an `append` took for its entry: given back if the `append` ends
/// before its entry reaches the writer task (cancelled while the queue is
/// full, or the task gone), as nothing else would give them back.
#[must_use = "dropped, the bytes are given back at once"]
pub(super) struct Taken<'a> {
    memory: &'a Memory,
    bytes: usize,
}

impl Taken<'_> {
    /// The entry reached the writer task, which gives its bytes back once
    /// it no longer holds it unsent.
    pub(super) fn hand_over(mut self) {
        self.bytes = 0;
    }
}

impl Drop for Taken<'_> {
    fn drop(&mut self) {
        self.memory.give(self.bytes);
    }
}

/// Counts an `append` as waiting while it lives (also when the `append`
/// is dropped while waiting).
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn new(count: &'a AtomicUsize) -> Self {
        count.fetch_add(1, Ordering::AcqRel);
        Self(count)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn a_waiting_take_exhausts_the_memory_until_it_gets_its_bytes() {
        let memory = Arc::new(Memory::new(10));
        memory.take(8).await.unwrap().hand_over();
        assert!(!memory.is_exhausted());
        let waiter = tokio::spawn({
            let memory = Arc::clone(&memory);
            async move { memory.take(5).await.map(Taken::hand_over) }
        });
        tokio::time::timeout(Duration::from_secs(5), memory.exhausted())
            .await
            .expect("the writer task is woken");
        assert!(memory.is_exhausted());
        memory.give(8);
        waiter.await.unwrap().unwrap();
        assert!(!memory.is_exhausted());
    }

    #[tokio::test]
    async fn a_dropped_take_no_longer_counts_as_waiting_and_close_fails_takes() {
        let memory = Memory::new(1);
        let take = memory.take(2);
        assert!(tokio::time::timeout(Duration::from_millis(50), take)
            .await
            .is_err());
        assert!(!memory.is_exhausted());
        memory.close();
        assert!(memory.take(1).await.is_err());
    }

    #[tokio::test]
    async fn bytes_taken_and_not_handed_over_are_given_back() {
        let memory = Memory::new(10);
        drop(memory.take(8).await.unwrap());
        memory.take(10).await.unwrap().hand_over();
        let full = tokio::time::timeout(Duration::from_millis(50), memory.take(1)).await;
        assert!(full.is_err(), "handed over, the bytes stay taken");
    }
}
