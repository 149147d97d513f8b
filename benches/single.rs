//! The single-region scenario: the hottest, a median and a cold region,
//! each with a complete index and with one that stops halfway, replayed by
//! every contender over the link the proxy stands for at the time.

use std::collections::BTreeMap;
use std::time::Instant;

use crate::contenders::{self, Clients, Contender, RunResult, Scenario};
use crate::floor::{self, Floor, LogLayout};
use crate::proxy::Proxy;
use crate::report::{self, Conditions, Row};
use crate::workload::Written;

/// A scenario and its floor, picked once per workload and run once per
/// link.
pub(crate) struct Picked {
    scenario: Scenario,
    floor: Floor,
}

/// The scenarios of `written` (on `topic`, laid out as `layout`) replayed
/// from `checkpoint`, with their floors.
pub(crate) fn pick(
    topic: &str,
    written: &Written,
    layout: &LogLayout,
    checkpoint: f64,
) -> Result<Vec<Picked>, String> {
    contenders::scenarios(topic, written, checkpoint)?
        .into_iter()
        .map(|scenario| {
            let floor = floor::floor(
                layout,
                scenario.region,
                scenario.range.clone(),
                scenario.indexed_end(),
            )?;
            Ok(Picked { scenario, floor })
        })
        .collect()
}

/// How the scenarios of one workload run.
pub(crate) struct Setup<'a> {
    /// The broker's name in the tables.
    pub(crate) broker: &'a str,
    /// The workload's name in the tables.
    pub(crate) workload: &'a str,
    pub(crate) clients: &'a Clients,
    pub(crate) proxy: &'a Proxy,
    /// Measured runs, and unmeasured (but checked) runs before them.
    pub(crate) runs: usize,
    pub(crate) warmups: usize,
}

/// Runs every contender on each of `picked` over `conditions` (the link
/// the proxy stands for now), each run checked against the written
/// entries and the floor; adds a row per scenario and contender.
pub(crate) async fn bench(
    setup: &Setup<'_>,
    picked: &[Picked],
    conditions: Conditions,
    rows: &mut Vec<Row>,
) -> Result<(), String> {
    let name = setup.broker;
    for Picked { scenario, floor } in picked {
        let t = Instant::now();
        let mut results: BTreeMap<Contender, Vec<RunResult>> = BTreeMap::new();
        let context = |c: Contender| {
            format!(
                "{name} {} {} {} (region {}, offsets {:?}, last_index {}) {}",
                conditions.label(),
                setup.workload,
                scenario.label(),
                scenario.region,
                scenario.range,
                scenario.last_index,
                c.name()
            )
        };
        for run in 0..setup.warmups + setup.runs {
            for k in 0..Contender::ALL.len() {
                // Rotate the order so no contender always runs first.
                let c = Contender::ALL[(k + run) % Contender::ALL.len()];
                let result = contenders::run(c, setup.clients, setup.proxy, scenario)
                    .await
                    .map_err(|e| format!("{}: {e}", context(c)))?;
                if let Some(own) = result.consumer_wire_bytes {
                    if own > result.wire_bytes {
                        return Err(format!(
                            "{}: the consumer counted {own} response bytes, the proxy only {}",
                            context(c),
                            result.wire_bytes
                        ));
                    }
                }
                floor::check_above(&context(c), result.wire_bytes, floor.wire_bytes_for(name))?;
                if run >= setup.warmups {
                    results.entry(c).or_default().push(result);
                }
            }
        }
        let first = rows.len();
        for c in Contender::ALL {
            rows.push(Row::new(
                name,
                conditions,
                setup.workload,
                scenario,
                c,
                *floor,
                &results[&c],
            ));
        }
        report::set_over_scan(&mut rows[first..]);
        let hints = rows[first..]
            .iter()
            .find(|r| r.contender_kind == Some(Contender::Hints));
        eprintln!(
            "  {} {} {:<16} region {:>3}: {} entries, floor {} B; hints {:.3}x floor, {} fetches, {:.3}x the scan's time; {:.1} s",
            setup.workload,
            conditions.label(),
            scenario.label(),
            scenario.region,
            scenario.expected.len(),
            floor.kafka_bytes,
            hints.map_or(0.0, |h| h.amp_floor),
            hints.map_or(0, |h| h.fetches),
            hints.and_then(|h| h.wall_over_scan).unwrap_or(f64::NAN),
            t.elapsed().as_secs_f64()
        );
    }
    Ok(())
}
