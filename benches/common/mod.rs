//! What the replay and writer benches share: the brokers they run on and
//! their runtimes (`harness`), the counting link proxy in front of every
//! broker (`proxy`), the seeded WAL workload (`workload`), the log's layout
//! and its floor (`floor`), the contenders and the check their output must
//! pass (`contenders`), the figures and tables (`report`) and the replay
//! bench's plot (`svg`). Each bench uses part of it.

pub(crate) mod contenders;
pub(crate) mod floor;
pub(crate) mod harness;
pub(crate) mod proxy;
pub(crate) mod report;
pub(crate) mod svg;
pub(crate) mod workload;
