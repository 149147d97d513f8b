//! The writer bench's own parts: GreptimeDB's producer as it writes its WAL
//! (`greptime`), the writers compared and a timed run (`producers`), and
//! the rows and table (`table`).

pub(crate) mod greptime;
pub(crate) mod producers;
pub(crate) mod table;
