//! The failover soak: `cargo run --release --example failover_soak --
//! --kills 50 [--seed N] [--entries-per-partition N]` starts one 3-node
//! Apache Kafka KRaft cluster (RF 3, `min.insync.replicas` 2, 4
//! partitions, a region-pure lz4 WAL written once by walfetch's writer),
//! then repeats until that many leaders were killed: a one-pass recovery
//! of every region (from offset 0, or each from a random checkpoint),
//! during which the current leader of a random partition is killed
//! (SIGKILL) after a random number of entries and started again (at once,
//! after some more entries, or after the recovery); the recovery's entries
//! are checked against what it should have got, and the next recovery
//! starts only once every node agrees that every partition has a live
//! leader past the killed one's epoch and all three replicas in sync, so
//! that no kill takes a partition below `min.insync.replicas`.
//!
//! One progress line a recovery on stderr; at the end one JSON object on
//! stdout: recoveries, kills, restarts, entries checked, lost (expected
//! but never got), duplicated (got again, or after a later offset of its
//! region), unexpected (got but not expected), recoveries that ended in an
//! error by kind with their texts, wall seconds. Exits 1 if an entry was
//! lost, duplicated or unexpected, a recovery ended in an error, or the
//! soak could not go on (a node that would not restart or resync).
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use serde_json::json;
use walfetch::error::Error;

use walfetch_support::failover::{self, Differences, PARTITIONS};
use walfetch_support::recovery::{self, Written};

mod common;

const TOPIC: &str = "failover-soak";

/// How long a restarted node may take to be back in sync everywhere.
const SETTLE: Duration = Duration::from_secs(120);

/// What the command line asked for.
#[derive(Debug, Clone, Copy)]
struct Config {
    kills: u64,
    seed: u64,
    entries_per_partition: usize,
}

/// When the killed node is started again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Moment {
    /// Right after the kill, before the recovery pulls another entry.
    AtOnce,
    /// After the recovery pulled some more entries.
    Midway,
    /// After the recovery ended.
    After,
}

impl Moment {
    fn name(self) -> &'static str {
        match self {
            Self::AtOnce => "at_once",
            Self::Midway => "midway",
            Self::After => "after",
        }
    }
}

/// One step of a round.
#[derive(Debug, Clone, Copy)]
enum Step {
    Pull(usize),
    Kill,
    Restart,
}

/// The running totals.
#[derive(Debug, Default)]
struct Report {
    recoveries: u64,
    from_start: u64,
    from_checkpoints: u64,
    kills: u64,
    kills_by_node: BTreeMap<i32, u64>,
    restarts: u64,
    restarts_by_moment: BTreeMap<&'static str, u64>,
    entries_written: u64,
    entries_expected: u64,
    entries_checked: u64,
    lost: u64,
    duplicated: u64,
    unexpected: u64,
    /// Recoveries that ended in an error: by kind, how many and their
    /// (distinct, first few) texts.
    errors: BTreeMap<String, (u64, Vec<String>)>,
    recovery_seconds: Vec<f64>,
    settle_seconds: Vec<f64>,
    aborted: Option<String>,
}

impl Report {
    fn failed(&self) -> bool {
        self.lost > 0
            || self.duplicated > 0
            || self.unexpected > 0
            || !self.errors.is_empty()
            || self.aborted.is_some()
    }

    fn error(&mut self, error: &Error) {
        let (count, texts) = self.errors.entry(kind(error)).or_default();
        *count += 1;
        let text = error.to_string();
        if texts.len() < 5 && !texts.contains(&text) {
            texts.push(text);
        }
    }

    fn to_json(&self, config: Config, wall: Duration) -> serde_json::Value {
        let max = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
        let mean = |v: &[f64]| {
            if v.is_empty() {
                0.0
            } else {
                v.iter().sum::<f64>() / v.len() as f64
            }
        };
        let round = |x: f64| (x * 10.0).round() / 10.0;
        let errors: BTreeMap<&String, serde_json::Value> = self
            .errors
            .iter()
            .map(|(kind, (count, texts))| (kind, json!({"count": count, "texts": texts})))
            .collect();
        json!({
            "seed": config.seed,
            "entries_per_partition": config.entries_per_partition,
            "entries_written": self.entries_written,
            "recoveries": self.recoveries,
            "recoveries_from_start": self.from_start,
            "recoveries_from_checkpoints": self.from_checkpoints,
            "kills": self.kills,
            "kills_by_node": self.kills_by_node,
            "restarts": self.restarts,
            "restarts_by_moment": self.restarts_by_moment,
            "entries_expected": self.entries_expected,
            "entries_checked": self.entries_checked,
            "entries_lost": self.lost,
            "entries_duplicated": self.duplicated,
            "entries_unexpected": self.unexpected,
            "errors": errors,
            "recovery_seconds_mean": round(mean(&self.recovery_seconds)),
            "recovery_seconds_max": round(max(&self.recovery_seconds)),
            "settle_seconds_mean": round(mean(&self.settle_seconds)),
            "settle_seconds_max": round(max(&self.settle_seconds)),
            "aborted": self.aborted,
            "wall_seconds": round(wall.as_secs_f64()),
        })
    }
}

/// An error's kind: its variant, and the client error's variant inside
/// `Error::Client`.
fn kind(error: &Error) -> String {
    let debug = format!("{error:?}");
    let mut names = debug
        .split(|c: char| !c.is_alphanumeric() && c != '_')
        .filter(|s| !s.is_empty());
    match (names.next(), names.next()) {
        (Some("Client"), Some(inner)) => format!("Client::{inner}"),
        (Some(outer), _) => outer.to_owned(),
        (None, _) => "unknown".to_owned(),
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut config = Config {
        kills: 50,
        seed: 1,
        entries_per_partition: 3000,
    };
    common::numeric_flags(
        "failover_soak [--kills N] [--seed N] [--entries-per-partition N]",
        |flag, n| {
            match flag {
                "--kills" => config.kills = n,
                "--seed" => config.seed = n,
                "--entries-per-partition" if n > 0 => {
                    config.entries_per_partition = usize::try_from(n).unwrap();
                }
                _ => return false,
            }
            true
        },
    );
    let started = Instant::now();
    let report = run(config).await;
    common::report(&report.to_json(config, started.elapsed()), report.failed());
}

async fn run(config: Config) -> Report {
    let mut report = Report::default();
    let mut kafka = failover::start_cluster().await;
    // One client writes and looks leaders up; the recoveries share another,
    // kept across every kill and restart.
    let admin = failover::client(&kafka).await;
    let reader = failover::client(&kafka).await;
    let (written, indexes) =
        failover::write_wal(&admin, TOPIC, config.entries_per_partition, config.seed).await;
    report.entries_written = u64::try_from(failover::total(&written)).unwrap();
    eprintln!(
        "wrote {} entries over {PARTITIONS} partitions of {TOPIC}",
        report.entries_written
    );
    if let Err(why) = failover::wait_in_sync(&kafka, TOPIC, &BTreeMap::new(), SETTLE).await {
        report.aborted = Some(why);
        return report;
    }
    let mut rng = StdRng::seed_from_u64(config.seed);
    while report.kills < config.kills {
        let round = report.recoveries + 1;
        let from_start = rng.random_bool(0.5);
        let checkpoints = if from_start {
            report.from_start += 1;
            recovery::from_start(&written)
        } else {
            report.from_checkpoints += 1;
            recovery::checkpoints(&written, rng.random())
        };
        let want = recovery::expected(&written, &checkpoints);
        let total = failover::total(&want);
        let partition = rng.random_range(0..PARTITIONS);
        let kill_at = rng.random_range(0..total.max(1));
        let moment = match rng.random_range(0..3) {
            0 => Moment::AtOnce,
            1 => Moment::Midway,
            _ => Moment::After,
        };
        let mut steps = vec![Step::Pull(kill_at), Step::Kill];
        match moment {
            Moment::AtOnce => steps.push(Step::Restart),
            Moment::Midway => {
                let more = rng.random_range(0..=(total - kill_at) / 2);
                steps.extend([Step::Pull(more), Step::Restart]);
            }
            Moment::After => {}
        }
        steps.push(Step::Pull(usize::MAX));

        report.recoveries += 1;
        let began = Instant::now();
        let mut got = Written::new();
        let mut error = None;
        // The killed node, not yet restarted, and the leader epochs it held.
        let mut killed: Option<(usize, BTreeMap<i32, i32>)> = None;
        let mut restarted = false;
        let mut what = String::new();
        match failover::recovery(&reader, TOPIC, &indexes, &checkpoints).await {
            Err(e) => error = Some(e),
            Ok(mut recovery) => {
                for step in steps {
                    match step {
                        Step::Pull(limit) => {
                            if error.is_none() {
                                if let Err(e) =
                                    failover::pull_until(&mut recovery, &mut got, limit).await
                                {
                                    error = Some(e);
                                }
                            }
                        }
                        Step::Kill if error.is_none() => {
                            match kill_leader(&mut kafka, &admin, partition).await {
                                Ok((victim, fenced)) => {
                                    report.kills += 1;
                                    *report
                                        .kills_by_node
                                        .entry(kafka.node_id(victim))
                                        .or_default() += 1;
                                    what = format!(
                                        "killed node {} (leading {:?}) at entry {kill_at}",
                                        kafka.node_id(victim),
                                        fenced.keys().collect::<Vec<_>>()
                                    );
                                    killed = Some((victim, fenced));
                                }
                                Err(why) => {
                                    report.aborted = Some(why);
                                    return report;
                                }
                            }
                        }
                        Step::Kill => {}
                        Step::Restart => {
                            if let Some((victim, _)) = &killed {
                                if let Err(e) = kafka.restart(*victim).await {
                                    report.aborted = Some(format!("restart: {e}"));
                                    return report;
                                }
                                restarted = true;
                            }
                        }
                    }
                }
            }
        }
        let took = began.elapsed();
        report.recovery_seconds.push(took.as_secs_f64());
        let d: Differences = failover::differences(&got, &want);
        report.entries_checked += d.got;
        report.duplicated += d.duplicated;
        report.unexpected += d.unexpected;
        let ending = match &error {
            None => {
                report.entries_expected += d.expected;
                report.lost += d.lost;
                if d.is_exact() {
                    "exact".to_owned()
                } else {
                    format!(
                        "NOT EXACT: {} lost, {} duplicated, {} unexpected",
                        d.lost, d.duplicated, d.unexpected
                    )
                }
            }
            Some(e) => {
                report.error(e);
                format!("ERROR after {} entries: {e}", d.got)
            }
        };
        let mut settle = String::new();
        if let Some((victim, fenced)) = killed {
            let moment = if restarted {
                moment
            } else {
                if let Err(e) = kafka.restart(victim).await {
                    report.aborted = Some(format!("restart: {e}"));
                    return report;
                }
                Moment::After
            };
            report.restarts += 1;
            *report.restarts_by_moment.entry(moment.name()).or_default() += 1;
            let settling = Instant::now();
            if let Err(why) = failover::wait_in_sync(&kafka, TOPIC, &fenced, SETTLE).await {
                report.aborted = Some(why);
                return report;
            }
            report.settle_seconds.push(settling.elapsed().as_secs_f64());
            settle = format!(
                ", restarted {}, in sync {:.1} s later",
                moment.name(),
                settling.elapsed().as_secs_f64()
            );
        }
        eprintln!(
            "[kill {}/{}] recovery {round} ({}, {total} entries): {what}{settle}; {ending} in {:.1} s",
            report.kills,
            config.kills,
            if from_start { "from 0" } else { "from checkpoints" },
            took.as_secs_f64()
        );
    }
    report
}

/// Kills the current leader of `partition` of the soak's topic; the node
/// killed and the leader epochs of the partitions it led.
async fn kill_leader(
    kafka: &mut walfetch_brokers::kafka::KafkaCluster,
    admin: &walfetch::cluster::Cluster,
    partition: i32,
) -> Result<(usize, BTreeMap<i32, i32>), String> {
    let metadata = admin
        .metadata(Some(&[TOPIC]))
        .await
        .map_err(|e| format!("metadata before the kill: {e}"))?;
    let partitions = metadata
        .topics
        .get(TOPIC)
        .map(|t| t.partitions.clone())
        .unwrap_or_default();
    let leader = partitions
        .get(&partition)
        .map(|p| p.leader_id)
        .ok_or_else(|| format!("no partition {partition} in metadata"))?;
    let victim = kafka
        .index_of(leader)
        .filter(|i| kafka.running().contains(i))
        .ok_or_else(|| format!("partition {partition}'s leader {leader} is not a running node"))?;
    let fenced = partitions
        .values()
        .filter(|p| p.leader_id == leader)
        .map(|p| (p.partition, p.leader_epoch))
        .collect();
    kafka.kill(victim);
    Ok((victim, fenced))
}
