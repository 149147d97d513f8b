//! The replay core against a simulated partition (`walfetch_support::sim`): any log
//! layout, any regions with any checkpoints, the index complete, partial or
//! absent, hints or none, any broker habit, answers out of order — every
//! region gets exactly its records from its checkpoint on, in order, and
//! nothing else; under Kafka's rules with the writer's hints, one pass over
//! several regions costs no more than replaying them one by one. Under
//! faults (responses cut short, spurious `OFFSET_OUT_OF_RANGE`, a failed
//! fetch, retention) nothing is lost silently.
#![allow(clippy::unwrap_used)]

// Shared by the modules below: the simulated scenarios (log layouts, regions, indexes, habits) and what an exact replay of one is.
mod common;

// The properties, over random scenarios: every region exactly its records, one pass no dearer, faults lose nothing.
mod properties;
// Retention past a checkpoint: an error, or the list of offsets lost.
mod retention;
// Answers: out of order with many in flight, the same records from every strategy, entries beyond a fetch, overshoots, waits.
mod answers;
// Broker habits: skipped containing batches, hurried fetches answered with nothing, segment ends, wrong hints.
mod broker_habits;
// Scans: from offsets that do not exist, over only the regions' ranges, a long walk toward an unknown batch.
mod scans;
