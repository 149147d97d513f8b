//! The soak's loop: rounds on fresh worlds until the faults asked for have fired.

use super::checks::*;
use super::common::*;
use super::produce_round::*;
use super::recovery_round::*;
use super::report::*;
use super::world::*;

/// Runs the soak; the report (whose `violations` must be empty).
pub async fn run(config: SoakConfig) -> SoakReport {
    let started = Instant::now();
    let mut rng = StdRng::seed_from_u64(config.seed);
    let mut report = SoakReport {
        seed: config.seed,
        ..SoakReport::default()
    };
    let mut world = new_world(&mut rng, config.entries_per_partition).await;
    let mut world_rounds = 0;
    while report.faults_fired() < config.faults {
        if world_rounds >= 30 || !world.log_start.is_empty() {
            world = new_world(&mut rng, config.entries_per_partition).await;
            world_rounds = 0;
        }
        world_rounds += 1;
        report.rounds += 1;
        let round = report.rounds;
        reset_peak_rss();
        let rss_before = peak_rss();
        let produce = rng.random_bool(0.15);
        let fired = tokio::time::timeout(ROUND_TIMEOUT, async {
            if produce {
                produce_round(&mut rng, &mut world, &mut report).await
            } else {
                replay_round(&mut rng, &mut world, &mut report).await
            }
        })
        .await;
        if fired.is_err() {
            report
                .violations
                .push(format!("round {round}: no end within {ROUND_TIMEOUT:?}"));
        }
        // What did not fire is not counted; the world goes back to
        // Kafka's rules.
        world.broker.clear_faults();
        for node in world.broker.node_ids() {
            let _ = world.broker.set_habits(node, Habits::KAFKA);
        }
        if let (Some(before), Some(after)) = (rss_before, peak_rss()) {
            report.peak_rss_growth_bytes = report
                .peak_rss_growth_bytes
                .max(after.saturating_sub(before));
        }
        if report.violations.len() > 20 {
            break;
        }
    }
    report.elapsed = started.elapsed();
    report
}
