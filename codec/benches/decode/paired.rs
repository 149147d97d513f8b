//! The paired measurement: the contenders interleaved iteration by
//! iteration on the same buffer, after the criterion groups.

use std::hint::black_box;
use std::time::{Duration, Instant};

use walfetch_codec::Compression;

use crate::contenders::{decode_borrowed, decode_kafka, decode_ours, decompress_bare};
use crate::report::{ratio, Walks};
use crate::workload::Case;

/// Time budget of the paired measurement of one case, and its round limits.
pub(crate) const PAIRED_BUDGET: Duration = Duration::from_millis(1500);
pub(crate) const PAIRED_ROUNDS: (u32, u32) = (15, 300);
/// The quantile of per-iteration times the paired measurement reports.
const PAIRED_QUANTILE: f64 = 0.2;

/// Ratios measured by interleaving the contenders iteration by iteration (in
/// alternating order) on the same buffer, each contender's time being the
/// 20th percentile of its iteration times. On a shared machine a process
/// loses the CPU for milliseconds at a time; that lands on whichever
/// iteration is running, and sequential criterion groups see different
/// amounts of it. A low quantile of interleaved iterations drops those
/// preempted iterations for every contender alike.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Paired {
    /// Each contender's time (s): walfetch owned, walfetch borrowed,
    /// kafka-protocol, crc32c, the bare decompressor.
    pub(crate) owned: f64,
    pub(crate) borrowed: f64,
    pub(crate) kafka: f64,
    pub(crate) crc: f64,
    pub(crate) decompress: Option<f64>,
}

impl Paired {
    /// The ratios of both walfetch walks over the alternative taking `alt`.
    pub(crate) fn vs(&self, alt: Option<f64>) -> Walks<Option<f64>> {
        Walks {
            owned: ratio(Some(self.owned), alt),
            borrowed: ratio(Some(self.borrowed), alt),
        }
    }
}

pub(crate) fn paired(case: &Case) -> Paired {
    let codec = case.codec;
    let mut contenders: Vec<Box<dyn Fn() -> usize + '_>> = vec![
        Box::new(|| decode_ours(black_box(&case.buf))),
        Box::new(|| decode_borrowed(black_box(&case.buf))),
        Box::new(|| decode_kafka(black_box(&case.buf))),
        Box::new(|| crc32c::crc32c(black_box(&case.buf)) as usize),
    ];
    if codec != Compression::None {
        contenders.push(Box::new(|| {
            decompress_bare(codec, black_box(&case.payloads))
        }));
    }
    // Rounds that fit the budget, from one warm round.
    let round_start = Instant::now();
    for run in &contenders {
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
            black_box(contenders[i]());
            times[i].push(start.elapsed().as_secs_f64());
        }
    }
    let quantiles: Vec<f64> = times
        .iter_mut()
        .map(|t| {
            t.sort_by(f64::total_cmp);
            t[((t.len() - 1) as f64 * PAIRED_QUANTILE) as usize]
        })
        .collect();
    Paired {
        owned: quantiles[0],
        borrowed: quantiles[1],
        kafka: quantiles[2],
        crc: quantiles[3],
        decompress: quantiles.get(4).copied(),
    }
}
