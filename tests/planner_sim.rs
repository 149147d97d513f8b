//! The fetch planner's replays, through the real replay core against a
//! simulated partition (`walfetch_support::sim`): how many fetches and how many
//! bytes a region's replay takes next to the floor (the fewest bytes
//! Kafka's fetch rules allow), with the writer's hints, offsets only,
//! wrong hints, and brokers that bend the rules. Tests of single planned
//! fetches stay with the planner (`src/plan/planner.rs`).
#![allow(clippy::unwrap_used)]

use walfetch::codec::Compression;
use walfetch::index::{IndexEntry, RegionId, WalIndex};
use walfetch::plan::PlanConfig;
use walfetch::replay::ReplayOptions;
use walfetch_testkit::{kafka_fetch, Habits};

use walfetch_support::sim::{BatchSpec, IndexSpec, Outcome, Sim, SimLog};

/// The region replayed; every other record is [`OTHER`]'s.
const WANTED: RegionId = 1;
const OTHER: RegionId = 2;

/// A log of batches of `sizes[i]` records of `value_len` bytes, the
/// records at `wanted` offsets [`WANTED`]'s.
fn log_with(sizes: &[usize], value_len: usize, compression: Compression, wanted: &[i64]) -> SimLog {
    SimLog::uniform(sizes, value_len, compression, |o| {
        if wanted.contains(&o) {
            WANTED
        } else {
            OTHER
        }
    })
}

/// Replays [`WANTED`] from the log's start with `index`, one fetch in
/// flight, checking it gets exactly its records.
fn replay(log: &SimLog, index: &WalIndex, habits: Habits) -> Outcome {
    let range = log.whole(WANTED);
    let out = Sim::new(log, habits, 0).run(
        index,
        &[range],
        ReplayOptions::default().with_max_in_flight(1),
    );
    assert!(out.error.is_none(), "{habits:?}: {:?}", out.error);
    assert_eq!(out.regions[&WANTED], log.expected(&range), "{habits:?}");
    out
}

const NEVER_CUT: Habits = Habits {
    never_cut: true,
    ..Habits::KAFKA
};

const SKIP_CONTAINING: Habits = Habits {
    skip_containing_batch: true,
    ..Habits::KAFKA
};

/// The fewest bytes Kafka sends to deliver `wanted` in one fetch per run
/// of adjacent batches holding wanted records: each run fetched from its
/// first batch's base, its limit ending right after its last wanted
/// record (Kafka's rules, `kafka_fetch`). Fewer bytes take more fetches
/// (the floor proper, `SimLog::floor`, counts round trips free).
fn floor_in_runs(log: &SimLog, wanted: &[i64]) -> u64 {
    // (first batch, last batch, where the last wanted record ends in it)
    let mut runs: Vec<(usize, usize, u32)> = Vec::new();
    for &o in wanted {
        let r = log.records().iter().find(|r| r.offset == o).unwrap();
        match runs.last_mut() {
            Some(run) if run.1 == r.batch => run.2 = run.2.max(r.end),
            Some(run) if run.1 + 1 == r.batch => (run.1, run.2) = (r.batch, r.end),
            _ => runs.push((r.batch, r.batch, r.end)),
        }
    }
    let batches = log.batches();
    runs.iter()
        .map(|&(first, last, end)| {
            let start = batches[first].position;
            let limit = batches[last].position + u64::from(end) - start;
            let bytes = kafka_fetch(log.extents(), batches[first].base, limit as usize).unwrap();
            bytes.len() as u64
        })
        .sum()
}

#[test]
fn table() {
    // (name, batch sizes, value bytes, wanted offsets, max fetches, max
    // bytes / the floor in runs)
    type Case = (&'static str, Vec<usize>, usize, Vec<i64>, u64, f64);
    let cases: Vec<Case> = vec![
        (
            "dense: the whole log",
            vec![10; 10],
            100,
            (0..100).collect(),
            1,
            1.0,
        ),
        (
            "one entry per batch, batches adjacent",
            vec![10; 10],
            100,
            (0..10).map(|b| b * 10 + 5).collect(),
            1,
            1.0,
        ),
        (
            "a run spanning batches",
            vec![10; 10],
            100,
            (15..47).collect(),
            1,
            1.0,
        ),
        (
            "sparse in big batches",
            vec![100; 20],
            1000,
            vec![5, 950, 1901],
            3,
            1.0,
        ),
        (
            "two far runs",
            vec![100; 20],
            1000,
            vec![100, 101, 150, 1500, 1550],
            2,
            1.0,
        ),
        // The 8 MiB cap on one fetch splits the run: the last batch comes
        // whole where the floor cuts it.
        (
            "a huge batch between small ones",
            vec![3, 2000, 3],
            10_000,
            vec![1, 1000, 2004],
            3,
            1.001,
        ),
        ("a single entry", vec![10; 10], 100, vec![42], 1, 1.0),
        // The first batch comes whole anyway: reaching the next batch
        // costs no gap, however early the first entry sits.
        (
            "an entry early in a big batch, the next in the batch after",
            vec![100, 10],
            1000,
            vec![0, 105],
            1,
            1.0,
        ),
    ];
    for (name, sizes, value_len, wanted, max_fetches, max_ratio) in cases {
        let log = log_with(&sizes, value_len, Compression::None, &wanted);
        let out = replay(&log, &log.full_index(), Habits::KAFKA);
        let floor = floor_in_runs(&log, &wanted);
        assert!(
            out.stats.records_bytes >= log.floor(&wanted),
            "{name}: below the floor"
        );
        assert!(
            out.stats.fetches <= max_fetches,
            "{name}: {} fetches",
            out.stats.fetches
        );
        assert!(
            out.stats.records_bytes as f64 <= floor as f64 * max_ratio,
            "{name}: {} bytes, floor {floor}",
            out.stats.records_bytes
        );
    }
}

#[test]
fn other_writers_batches_break_runs_but_lose_nothing() {
    // Writers 0 and 1 alternate batches; the index knows writer 0's only,
    // where the wanted entries are.
    let specs: Vec<BatchSpec> = (0..12i64)
        .map(|b| BatchSpec {
            regions: (0..10)
                .map(|r| if b % 2 == 0 && r == 3 { WANTED } else { OTHER })
                .collect(),
            gap: 0,
            writer: (b % 2) as u8,
        })
        .collect();
    let log = SimLog::build(&specs, Compression::None, |_| 100);
    let index = log.index(IndexSpec {
        hints: true,
        last_index: Some(log.end() - 1),
        writer: Some(0),
    });
    let out = replay(&log, &index, Habits::KAFKA);
    assert_eq!(
        out.stats.fetches, 6,
        "one fetch per run: the gaps are unknown"
    );
    let writer_0: u64 = log
        .batches()
        .iter()
        .filter(|b| b.writer == 0)
        .map(|b| u64::from(b.len))
        .sum();
    assert_eq!(out.stats.records_bytes, writer_0);
}

#[test]
fn offsets_only_learns_the_layout() {
    let wanted: Vec<i64> = (0..40).map(|b| b * 50 + 7).collect();
    let log = log_with(&[50; 40], 200, Compression::None, &wanted);
    let out = replay(&log, &log.offsets_index(), Habits::KAFKA);
    let probe = u64::from(PlanConfig::default().probe_bytes);
    assert!(
        out.stats.records_bytes <= log.size() + probe,
        "{}",
        out.stats.records_bytes
    );
}

#[test]
fn offsets_only_reads_across_gaps_cheaper_than_the_slack_a_split_costs() {
    // ~100 KB batches, an entry every 14 offsets (~70 KB apart): more
    // than the cost model's merge gap, less than the slack two
    // estimated fetches carry between them. One fetch after the probe.
    let wanted: Vec<i64> = (0..60 * 20).step_by(14).collect();
    let log = log_with(&[20; 60], 5000, Compression::None, &wanted);
    let out = replay(&log, &log.offsets_index(), Habits::KAFKA);
    assert!(out.stats.fetches <= 3, "{} fetches", out.stats.fetches);
    assert!(
        out.stats.records_bytes <= log.size() + (1 << 20),
        "{}",
        out.stats.records_bytes
    );
}

#[test]
fn offsets_only_resumes_a_cut_run_in_one_fetch() {
    // The probe is cut inside a compressed batch: its header tells where
    // the batch starts, and the next fetch starts there and goes on,
    // estimated, over every entry left.
    let wanted: Vec<i64> = (0..300).step_by(5).collect();
    let log = log_with(&[10; 30], 10_000, Compression::Lz4, &wanted);
    let out = replay(&log, &log.offsets_index(), Habits::KAFKA);
    assert_eq!(out.stats.fetches, 2);
}

/// A region that wrote every record from its checkpoint to the log's end
/// (GreptimeDB's default of a topic per region): every byte from there is
/// wanted, and nothing can come past it, so the first fetch claims the
/// whole run with the largest limit it may have, from the checkpoint. On
/// Kafka that is one fetch at exactly the floor, from a checkpoint inside
/// a batch too. Before, a probe of one byte went first, to learn where a
/// batch starts, and a fetch sized from its one batch came after it. On a
/// broker that skips the batch holding a mid-batch offset the answer holds
/// every batch after the checkpoint's, which are kept, and the skipped
/// batch is fetched again from a little lower: a few batches more than the
/// floor, in a few fetches.
#[test]
fn offsets_only_a_run_to_the_logs_end_is_one_fetch() {
    let specs: Vec<BatchSpec> = (0..30)
        .map(|b| BatchSpec {
            regions: vec![if b < 10 { OTHER } else { WANTED }; 10],
            ..BatchSpec::default()
        })
        .collect();
    // The wanted region's first batch has records half the size of the
    // rest: an estimate from it alone would fall short.
    let value_len = |o: i64| if o < 110 { 1600 } else { 3000 };
    let options = ReplayOptions::default()
        .with_max_in_flight(1)
        .with_learn_link(false);
    for compression in [Compression::None, Compression::Lz4] {
        let log = SimLog::build_with(&specs, compression, value_len, false);
        let replay = |from: i64, habits: Habits| {
            let range = walfetch::replay::RegionRange {
                region: WANTED,
                from,
                to: log.end(),
            };
            let out =
                Sim::new(&log, habits, 0).run(&log.offsets_index(), &[range], options.clone());
            assert!(out.error.is_none(), "{habits:?}: {:?}", out.error);
            assert_eq!(out.regions[&WANTED], log.expected(&range), "{habits:?}");
            out
        };
        for from in [100, 105] {
            let wanted: Vec<i64> = (from..300).collect();
            let out = replay(from, Habits::KAFKA);
            assert_eq!(out.stats.fetches, 1, "{compression:?} from {from}");
            assert_eq!(
                out.stats.records_bytes,
                log.floor(&wanted),
                "{compression:?} from {from}"
            );
        }

        let wanted: Vec<i64> = (105..300).collect();
        let out = replay(105, SKIP_CONTAINING);
        let batch = u64::from(log.batches()[10..].iter().map(|b| b.len).max().unwrap());
        assert!(
            out.stats.records_bytes <= log.floor(&wanted) + 3 * batch,
            "{compression:?}: {} bytes for a floor of {}",
            out.stats.records_bytes,
            log.floor(&wanted)
        );
        assert!(
            out.stats.fetches <= 4,
            "{compression:?}: {}",
            out.stats.fetches
        );
    }
}

/// GreptimeDB's layout: each region's records of a linger window are one
/// lz4 batch. With offsets only, each wanted batch is fetched from the
/// entry that starts it with a limit of one byte: it comes whole
/// (KIP-74), and nothing after it does. Batches of one to three records
/// of 20 KB, the wanted region's every tenth (the batches between are
/// more than the cost model's merge gap); the entries of one batch are
/// adjacent offsets, which responses show share a batch.
#[test]
fn offsets_only_on_one_region_a_batch_reads_only_the_wanted_batches() {
    let specs: Vec<BatchSpec> = (0..300usize)
        .map(|b| BatchSpec {
            regions: vec![if b % 10 == 3 { WANTED } else { OTHER }; 1 + b % 3],
            gap: 0,
            writer: 0,
        })
        .collect();
    let log = SimLog::build(&specs, Compression::Lz4, |_| 20_000);
    let out = replay(&log, &log.offsets_index(), Habits::KAFKA);
    assert_read_at_most(&log, &specs, &out, |spec| spec.regions[0] == WANTED, 1.05);
}

/// Asserts that `out` read no more than `within` times the batches whose
/// specs `wanted` picks, and the first fetch's probe.
fn assert_read_at_most(
    log: &SimLog,
    specs: &[BatchSpec],
    out: &Outcome,
    wanted: impl Fn(&BatchSpec) -> bool,
    within: f64,
) {
    let wanted: u64 = log
        .batches()
        .iter()
        .zip(specs)
        .filter(|(_, spec)| wanted(spec))
        .map(|(b, _)| u64::from(b.len))
        .sum();
    let probe = u64::from(PlanConfig::default().probe_bytes);
    assert!(
        out.stats.records_bytes as f64 <= wanted as f64 * within + probe as f64,
        "{} bytes for {wanted} of wanted batches",
        out.stats.records_bytes
    );
}

/// Two writers, as when several nodes share a partition: the wanted
/// region's entries are in every batch of one writer, whose batches
/// alternate with the other's. With offsets only, the batches between are
/// not known, but answers show that the next wanted entry past a batch
/// lies in another: each fetch asks for one byte and gets exactly one
/// wanted batch, rather than reading on through the other writer's (more
/// than the cost model's merge gap once the slack of the estimated end
/// that reading on would give the fetch is counted).
#[test]
fn offsets_only_on_two_writers_skips_the_other_writers_batches() {
    let specs: Vec<BatchSpec> = (0..200u8)
        .map(|b| BatchSpec {
            regions: match b % 2 {
                0 => vec![WANTED, OTHER, WANTED, OTHER],
                _ => vec![OTHER; 8],
            },
            gap: 0,
            writer: b % 2,
        })
        .collect();
    let log = SimLog::build(&specs, Compression::Lz4, |_| 10_000);
    let out = replay(&log, &log.offsets_index(), Habits::KAFKA);
    assert_read_at_most(&log, &specs, &out, |spec| spec.writer == 0, 1.1);
}

/// GreptimeDB's layout (each batch one region's, lz4, no per-record
/// checksums) recovered in one pass from each region's checkpoint with
/// offsets only, 64 fetches in flight as a recovery keeps them: the wanted
/// entries are the union of 16 regions', and two regions' entries at
/// adjacent offsets are in two batches. Answers show it (pairs of two
/// regions never share a batch, pairs of one do), so a fetch ends where
/// its region's batch does: it asks for one byte and gets exactly that
/// batch, instead of reading on, with an estimated end and its slack,
/// through the batches of regions not yet at their checkpoints.
#[test]
fn offsets_only_one_pass_over_a_region_per_batch_reads_the_wanted_batches() {
    use rand::rngs::StdRng;
    use rand::{RngExt, SeedableRng};
    use walfetch::replay::RegionRange;

    let mut rng = StdRng::seed_from_u64(7);
    let specs: Vec<BatchSpec> = (0..3000)
        .map(|_| {
            // Region 1 writes most, in larger batches.
            let region: RegionId = match rng.random_range(0..4) {
                0 => 1,
                _ => rng.random_range(2..=16),
            };
            let records = if region == 1 {
                rng.random_range(2..6)
            } else {
                1
            };
            BatchSpec {
                regions: vec![region; records],
                gap: 0,
                writer: 0,
            }
        })
        .collect();
    let lens: Vec<usize> = (0..4096).map(|_| rng.random_range(500..6000)).collect();
    let log = SimLog::build_with(&specs, Compression::Lz4, |o| lens[o as usize % 4096], false);
    let ranges: Vec<RegionRange> = (1..=16)
        .map(|region| RegionRange {
            region,
            from: rng.random_range(0..log.end()),
            to: log.end(),
        })
        .collect();
    let wanted: Vec<i64> = log
        .records()
        .iter()
        .filter(|r| {
            ranges
                .iter()
                .any(|w| w.region == r.region && r.offset >= w.from)
        })
        .map(|r| r.offset)
        .collect();
    let mut options = ReplayOptions::default().with_max_in_flight(64);
    options.plan.cost.in_flight = 64;
    let out =
        Sim::new(&log, Habits::KAFKA, 7)
            .in_flight(64)
            .run(&log.offsets_index(), &ranges, options);
    assert!(out.error.is_none(), "{:?}", out.error);
    for range in &ranges {
        assert_eq!(out.regions[&range.region], log.expected(range));
    }
    let floor = log.floor(&wanted);
    assert!(
        out.stats.records_bytes as f64 <= floor as f64 * 1.1,
        "{} bytes for a floor of {floor}",
        out.stats.records_bytes
    );
}

#[test]
fn offsets_only_on_a_broker_that_skips_the_containing_batch() {
    let wanted: Vec<i64> = (0..40).filter(|b| b % 3 == 0).map(|b| b * 50 + 7).collect();
    let log = log_with(&[50; 40], 200, Compression::None, &wanted);
    replay(&log, &log.offsets_index(), SKIP_CONTAINING);
}

#[test]
fn wrong_and_stale_hints_cost_fetches_never_records() {
    let wanted = [3, 33, 34, 71, 99];
    let log = log_with(&[10; 10], 100, Compression::None, &wanted);
    let full = log.full_index();
    for damage in 0..4 {
        let mut index = WalIndex::new();
        for e in full.region(WANTED).unwrap().entries() {
            let mut h = e.hint.unwrap();
            match damage {
                0 => {
                    // too short
                    h.batch_len /= 2;
                    h.record_end = h.record_end.min(h.batch_len);
                }
                1 => h.record_end = 61, // ends too early
                2 => h.batch_base = (h.batch_base - 5).max(0), // wrong batch
                _ => h.batch_len *= 3,  // too long
            }
            let damaged = IndexEntry {
                offset: e.offset,
                hint: Some(h),
            };
            index.push(WANTED, damaged).unwrap();
        }
        index.set_last_index(log.end() - 1);
        for habits in [Habits::KAFKA, NEVER_CUT, SKIP_CONTAINING] {
            replay(&log, &index, habits);
        }
    }
}

#[test]
fn brokers_that_never_cut_or_skip_the_containing_batch() {
    let wanted = [3, 15, 55, 56, 90];
    let log = log_with(&[10; 10], 100, Compression::None, &wanted);
    for habits in [NEVER_CUT, SKIP_CONTAINING, Habits::TANSU_0_6] {
        replay(&log, &log.full_index(), habits);
    }
}

#[test]
fn compressed_batches_are_read_whole() {
    let wanted = [2, 12];
    let log = log_with(&[10; 4], 100, Compression::Lz4, &wanted);
    let out = replay(&log, &log.full_index(), Habits::KAFKA);
    let two = u64::from(log.batches()[0].len + log.batches()[1].len);
    assert_eq!((out.stats.fetches, out.stats.records_bytes), (1, two));
}

/// Regression: entries past the byte cap in a batch larger than the cap
/// were left to later fetches, each getting the whole batch again (it
/// comes whole, KIP-74): one fetch per entry.
#[test]
fn a_batch_larger_than_the_fetch_cap_is_fetched_once() {
    let wanted: Vec<i64> = (10..20).collect();
    let log = log_with(&[10, 10, 10], 300, Compression::None, &wanted);
    let plan = PlanConfig {
        max_fetch_bytes: 1000,
        ..PlanConfig::default()
    };
    let out = Sim::new(&log, Habits::KAFKA, 0).run(
        &log.full_index(),
        &[log.whole(WANTED)],
        ReplayOptions::default().with_plan(plan),
    );
    assert!(out.error.is_none(), "{:?}", out.error);
    assert_eq!(out.regions[&WANTED], log.expected(&log.whole(WANTED)));
    assert_eq!(out.stats.fetches, 1);
    assert_eq!(out.stats.records_bytes, u64::from(log.batches()[1].len));
}

/// A batch the broker cuts has records its CRC no longer covers: by
/// default they are used only under their own per-record checksum. Without
/// checksums the replay reads each wanted batch whole (and the floor counts
/// it whole), unless the caller trusts cut batches, when it cuts and counts
/// what it yielded unverified.
#[test]
fn cut_batches_are_used_only_under_checksums_unless_trusted() {
    use walfetch::replay::CutRecords;
    // Three far-apart pairs of wanted records: one late in a large batch,
    // one early in the next (the first batch of a fetch comes whole; the
    // next can be cut).
    let wanted = [95i64, 105, 1095, 1105, 2095, 2105];
    let specs: Vec<BatchSpec> = (0..30i64)
        .map(|b| BatchSpec {
            regions: (0..100)
                .map(|r| {
                    if wanted.contains(&(b * 100 + r)) {
                        WANTED
                    } else {
                        OTHER
                    }
                })
                .collect(),
            ..BatchSpec::default()
        })
        .collect();
    let run = |checksums: bool, policy: CutRecords| {
        let log = SimLog::build_with(&specs, Compression::None, |_| 200, checksums);
        let range = log.whole(WANTED);
        let out = Sim::new(&log, Habits::KAFKA, 0).run(
            &log.full_index(),
            &[range],
            ReplayOptions::default()
                .with_max_in_flight(1)
                .with_cut_records(policy),
        );
        assert!(out.error.is_none(), "{policy:?}: {:?}", out.error);
        assert_eq!(out.regions[&WANTED], log.expected(&range), "{policy:?}");
        let mut batches: Vec<usize> = wanted.iter().map(|&o| (o / 100) as usize).collect();
        batches.dedup();
        let whole: u64 = batches
            .iter()
            .map(|&b| u64::from(log.batches()[b].len))
            .sum();
        (out.stats, whole, log.floor(&wanted))
    };

    // Checksums: cut after each wanted record, at the floor, all verified.
    let (stats, whole, floor) = run(true, CutRecords::Checked);
    assert_eq!(stats.unverified_records, 0);
    assert!(stats.records_bytes < whole * 6 / 10, "{stats:?}");
    assert_eq!(stats.records_bytes, floor);
    assert_eq!(stats.floor_bytes, floor);

    // No checksums, the default: each wanted batch whole (the first fetch
    // learns there are none from the whole batch it gets), and the floor
    // counts them whole too.
    let (stats, whole, floor) = run(false, CutRecords::Checked);
    assert_eq!(stats.unverified_records, 0);
    assert_eq!(floor, whole);
    assert_eq!(stats.floor_bytes, whole);
    assert!(stats.records_bytes >= whole, "{stats:?}");
    assert!(stats.records_bytes <= whole * 11 / 10, "{stats:?}");

    // No checksums, trusted: cut, and every record yielded counted.
    let (stats, whole, _) = run(false, CutRecords::Trusted);
    assert_eq!(stats.unverified_records, 3);
    assert!(stats.records_bytes < whole * 6 / 10, "{stats:?}");

    // Never: whole batches even with checksums.
    let (stats, whole, _) = run(true, CutRecords::Never);
    assert!(stats.records_bytes >= whole, "{stats:?}");
    assert_eq!(stats.floor_bytes, whole);
}

/// Hints recorded from the batches as written, replayed over a log whose
/// batches were rewritten since (a broker or a compaction that recompressed
/// them with another codec, or split and merged them): every offset and
/// record is the same, every hint's batch start and length is stale. The
/// replay still yields exactly each region's entries, past `last_index`
/// too, on every habit and with fetches side by side.
#[test]
fn hints_of_batches_since_rewritten_cost_fetches_never_records() {
    let wanted: Vec<i64> = (0..200).filter(|o| o % 7 == 3 || o % 11 == 0).collect();
    let written = log_with(&[10; 20], 120, Compression::Lz4, &wanted);
    // Batch sizes of the log as rewritten: fixed ones, then drawn (a
    // plain linear congruential generator, so that the cases are fixed).
    let mut layouts = vec![vec![3, 17, 40, 1, 9, 30, 50, 20, 30]];
    let mut state = 0x2545_f491_u64;
    for _ in 0..12 {
        let (mut sizes, mut left) = (Vec::new(), 200usize);
        while left > 0 {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            let n = usize::try_from(state >> 58).unwrap().clamp(1, left);
            sizes.push(n);
            left -= n;
        }
        layouts.push(sizes);
    }
    let codecs = [Compression::None, Compression::Gzip, Compression::Zstd];
    for (n, sizes) in layouts.iter().enumerate() {
        assert_eq!(sizes.iter().sum::<usize>(), 200);
        let compression = codecs[n % codecs.len()];
        let log = log_with(sizes, 120, compression, &wanted);
        for last_index in [Some(199), Some(120)] {
            let index = written.index(IndexSpec {
                hints: true,
                last_index,
                writer: None,
            });
            let ranges = [log.whole(WANTED), log.whole(OTHER)];
            for habits in [Habits::KAFKA, NEVER_CUT, SKIP_CONTAINING] {
                for in_flight in [1, 8] {
                    let out = Sim::new(&log, habits, 3).in_flight(in_flight).run(
                        &index,
                        &ranges,
                        ReplayOptions::default().with_max_in_flight(in_flight),
                    );
                    let case =
                        format!("{sizes:?} {compression:?} {last_index:?} {habits:?} {in_flight}");
                    assert!(out.error.is_none(), "{case}: {:?}", out.error);
                    for range in &ranges {
                        assert_eq!(
                            out.regions[&range.region],
                            log.expected(range),
                            "{case}: region {}",
                            range.region
                        );
                    }
                }
            }
        }
    }
}
