//! walfetch's strategy: sizing each fetch from the log's layout. This file
//! holds its limits, what it plans and the [`FetchStrategy`] it is; where
//! entries sit in a fetch's response is in `position`, how a fetch is
//! sized over a run of entries in `run`.

use std::ops::Range;

use super::{CostModel, FetchStrategy, PlanView};

mod position;
mod run;
#[cfg(test)]
mod tests;

use run::Plan;

/// Limits and defaults for planning.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlanConfig {
    /// The cost model for merging runs.
    pub cost: CostModel,
    /// Largest byte limit of one fetch (bounds one response's memory); the
    /// byte limit of each fetch of a tail scan, where every record is
    /// wanted and fewer, larger fetches waste less of the batches a broker
    /// cuts.
    pub max_fetch_bytes: u32,
    /// Byte limit of a fetch with nothing to size it from (no hints, no
    /// observed batches yet). Default 1: its first batch comes whole
    /// anyway (KIP-74), and is what the next fetches are sized from; more
    /// mostly reads other regions' records (docs/benchmarks.md measures
    /// 1 byte, 16 KiB and 1 MiB). Not for a run of entries at every
    /// offset to the log's end, where nothing read can be another's: that
    /// fetch asks for its budget (`PlanView::budget`).
    pub probe_bytes: u32,
}

impl Default for PlanConfig {
    fn default() -> Self {
        Self {
            cost: CostModel::default(),
            max_fetch_bytes: 8 << 20,
            probe_bytes: 1,
        }
    }
}

/// What a planned fetch is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FetchKind {
    /// Indexed entries: `entries` indexes the planner's entry list.
    Indexed {
        /// The entries this fetch is meant to deliver.
        entries: Range<usize>,
    },
    /// A scan past `last_index`: every record from `from` on is wanted (the
    /// fetch itself may start lower, at a known batch boundary).
    Tail {
        /// The first offset wanted.
        from: i64,
    },
}

/// One Fetch request to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedFetch {
    /// The fetch offset.
    pub offset: i64,
    /// The partition byte limit.
    pub max_bytes: u32,
    /// What it is for.
    pub kind: FetchKind,
}

/// Plans the fetches of a replay; see the module docs. It keeps nothing
/// but its limits: what it plans from is the core's [`PlanView`].
#[derive(Debug, Clone)]
pub struct Planner {
    config: PlanConfig,
}

impl Planner {
    /// A planner with `config`.
    pub fn new(config: PlanConfig) -> Self {
        Self { config }
    }
}

impl FetchStrategy for Planner {
    fn plan_entries(
        &mut self,
        view: &PlanView<'_>,
        run: Range<usize>,
        attempt: u32,
    ) -> PlannedFetch {
        Plan::new(view, &self.config, attempt).plan_run(run.start, run.end)
    }

    /// Every record is wanted: the largest fetch wastes least of the batch
    /// a broker cuts. Starting at the batch boundary below the first wanted
    /// offset costs nothing under Kafka's rules and is safe on brokers that
    /// skip a containing batch.
    fn plan_tail(
        &mut self,
        view: &PlanView<'_>,
        from: i64,
        _to: i64,
        attempt: u32,
    ) -> PlannedFetch {
        let offset = match view.layout.containing(from) {
            Some((base, _)) => base,
            None => view.start_for(from, attempt),
        };
        PlannedFetch {
            offset,
            max_bytes: self.config.max_fetch_bytes.min(view.budget),
            kind: FetchKind::Tail { from },
        }
    }

    fn set_cost_model(&mut self, cost: CostModel) {
        self.config.cost = cost;
    }

    fn name(&self) -> &'static str {
        "walfetch"
    }
}
