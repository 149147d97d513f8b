//! The WAL writer against the scripted broker (Kafka's idempotence rules):
//! clustered and interleaved layouts, several requests in flight, and
//! answers lost (the connection cut after the append, or no answer at all
//! until the request times out) — the batches are sent again and the log
//! holds every entry once, regions in append order, the index exact.
#![allow(clippy::unwrap_used)]

// Shared by the modules below: the scripted broker and cluster client, entries of six regions, writing them and checking the log.
mod common;

// Layouts (clustered and interleaved), the writer settings, queues, cancelled appends and index checkpoints.
mod layouts;
// Writers outside a tokio runtime: made outside one, and stopped with their runtime.
mod runtimes;
// Lost, timed-out and undecodable answers: the batch is looked for in the log and sent again, never twice.
mod lost_answers;
// Answers not held back: by the task budget, by throttling, by a paced metadata read.
mod pacing;
// Batching: batches fill up under load, a quiet region goes by its age, the linger and the record stamps.
mod batching;
// A missing leader and a forgotten producer: the rest still go, no sequence gap, a growing backoff.
mod leaders;
// The buffer of bytes held: full of lingering groups, a dropped writer, appends that wait.
mod buffer;
// Refused batches: those behind go again, entries too large, answers at offsets already given.
mod refusals;
