//! The paired measurement: the contenders interleaved iteration by
//! iteration on the same buffer, after the criterion groups.
//!
//! On a shared machine a process loses the CPU for milliseconds at a time;
//! that lands on whichever iteration is running, and sequential criterion
//! groups each see a different share of it. Interleaving the contenders (in
//! alternating order) and taking a low quantile of each one's iteration
//! times drops those preempted iterations for every contender alike.

use std::hint::black_box;
use std::time::{Duration, Instant};

use crate::contenders::{contenders, BORROWED, CRC, DECOMPRESS, KAFKA, OURS};
use crate::report::Times;
use crate::workload::Case;

/// Time budget of the paired measurement of one case, and its round limits.
pub(crate) const PAIRED_BUDGET: Duration = Duration::from_millis(1500);
pub(crate) const PAIRED_ROUNDS: (u32, u32) = (15, 300);
/// The quantile of per-iteration times the paired measurement reports.
pub(crate) const PAIRED_QUANTILE: f64 = 0.2;

/// Each contender's [`PAIRED_QUANTILE`] of its iteration times (s) on `case`.
pub(crate) fn paired(case: &Case) -> Times {
    let contenders = contenders(case);
    // Rounds that fit the budget, from one warm round.
    let round_start = Instant::now();
    for (_, run) in &contenders {
        black_box(run());
    }
    let one_round = round_start.elapsed().max(Duration::from_micros(1));
    let rounds = (PAIRED_BUDGET.as_nanos() / one_round.as_nanos())
        .clamp(u128::from(PAIRED_ROUNDS.0), u128::from(PAIRED_ROUNDS.1)) as u32;
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); contenders.len()];
    for round in 0..rounds {
        for step in 0..contenders.len() {
            let i = if round % 2 == 0 {
                step
            } else {
                contenders.len() - 1 - step
            };
            let start = Instant::now();
            black_box(contenders[i].1());
            times[i].push(start.elapsed().as_secs_f64());
        }
    }
    let mut quantile = |id: &str| {
        let i = contenders.iter().position(|(name, _)| *name == id)?;
        let t = &mut times[i];
        t.sort_by(f64::total_cmp);
        Some(t[((t.len() - 1) as f64 * PAIRED_QUANTILE) as usize])
    };
    Times {
        owned: quantile(OURS),
        borrowed: quantile(BORROWED),
        kafka: quantile(KAFKA),
        crc: quantile(CRC),
        decompress: quantile(DECOMPRESS),
    }
}
