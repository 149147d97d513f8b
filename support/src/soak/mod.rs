//! A seeded, randomized fault soak against the scripted broker.
//!
//! Rounds, each on a small world (a scripted cluster of three brokers, a
//! WAL topic of three partitions written by one [`WalWriter`](walfetch::writer::WalWriter) per
//! partition, their indexes): random faults are queued (connection cuts
//! before, during and after a response, partial and oversized frames,
//! leader moves, slow and throttled responses, retriable and fatal error
//! codes, corrupt and truncated batches, absurd array counts and lengths),
//! brokers may take on other brokers' habits (Tansu's, omitting partitions
//! of hurried fetches), retention may drop the log's head, and then one of:
//!
//! - a recovery of one region,
//! - a recovery of several regions of one partition,
//! - a recovery of several regions of every partition,
//! - a WAL writer producing a batch of entries to a topic of its own, then
//!   a fault-free recovery of what it wrote with its index.
//!
//! The invariant, checked entry by entry: a recovery that ends well gave
//! every region exactly its entries from its checkpoint, in order; one that
//! fails gave each region a prefix of them, and its error is one the
//! round's faults explain (offsets reported lost were really removed; a
//! decode error only after a corrupting fault); never an entry twice,
//! never one of another region, never a hang. The replay core's reported
//! peak of buffered bytes stays within the cap (plus the one fetch per
//! partition the cap allows past it). A writer's acknowledged entries are
//! all in the log at their offsets and all recovered; nothing it did not
//! write is recovered, nothing twice; an entry it reported failed is not
//! in the log unless its error says it may be.
//!
//! Memory is measured two ways: the replay core's own account
//! ([`ReplayStats::peak_buffered_bytes`](walfetch::consumer::ReplayStats::peak_buffered_bytes): buffered records plus the limits
//! of fetches in flight), checked against the cap; and the process's peak
//! resident set (`VmHWM` of `/proc/self/status`, reset before each round
//! through `/proc/self/clear_refs`), reported as growth over the level
//! before the round. The latter counts everything in the process (the
//! scripted broker's logs and response frames too) and is only a sanity
//! bound against runaway allocations.

// The soak's shape (topic, partitions, brokers, regions, sizes) and what every part of it uses.
mod common;
// The soak's configuration and its report: faults fired, rounds run, violations found.
mod report;
// One world: a scripted cluster of three brokers, a WAL topic written with one writer per partition, and its indexes.
mod world;
// The random faults queued for a round: those of a recovery and those of a writer.
mod faults;
// The invariants checked after a round: entries exact or a prefix, errors the faults explain, memory within the cap.
mod checks;
// A recovery round: faults queued, one, several or every partition's regions asked for, the recovery run and checked.
mod recovery_round;
// The soak's loop: rounds on fresh worlds until the faults asked for have fired.
mod rounds;
// A produce round: a writer writes to a topic of its own under faults, then its entries are recovered and checked.
mod produce_round;

pub use report::{SoakConfig, SoakReport};
pub use rounds::run;
