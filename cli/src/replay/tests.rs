//! Unit tests of `walfetch replay`'s arguments: the isolation level and
//! the cost model.

use clap::Parser;

use super::*;

#[derive(Debug, Parser)]
struct Cli {
    #[command(flatten)]
    args: Args,
}

fn parsed(extra: &[&str]) -> ReplayOptions {
    let base = [
        "replay",
        "-b",
        "127.0.0.1:9092",
        "-t",
        "wal",
        "--region",
        "1",
    ];
    let cli = Cli::try_parse_from(base.iter().chain(extra)).expect("arguments");
    let settings = cli.args.client.settings().expect("settings");
    options(&cli.args, &settings).expect("options")
}

/// read_committed unless asked otherwise, by a flag (which wins) or by
/// librdkafka's `isolation.level`.
#[test]
fn a_replay_reads_committed_records_unless_asked() {
    let isolation = |extra: &[&str]| parsed(extra).isolation;
    assert_eq!(isolation(&[]), IsolationLevel::ReadCommitted);
    assert_eq!(
        isolation(&["--read-committed"]),
        IsolationLevel::ReadCommitted
    );
    assert_eq!(
        isolation(&["--read-uncommitted"]),
        IsolationLevel::ReadUncommitted
    );
    assert_eq!(
        isolation(&["-X", "isolation.level=read_uncommitted"]),
        IsolationLevel::ReadUncommitted
    );
    assert_eq!(
        isolation(&["-X", "isolation.level=read_uncommitted", "--read-committed"]),
        IsolationLevel::ReadCommitted
    );
}

/// A cost model given by hand is where learning starts: it stays on a
/// cheap broker and gives way on a dear one, as the default does.
#[test]
fn a_cost_model_given_by_hand_keeps_learning_on() {
    let given = parsed(&["--round-trip-us", "900", "--bytes-per-second", "1e8"]);
    assert!(given.learn_link);
    assert_eq!(given.plan.cost.round_trip, Duration::from_micros(900));
    assert_eq!(given.plan.cost.bytes_per_second, 1e8);
    assert!(parsed(&[]).learn_link);
    assert!(!parsed(&["--round-trip-us", "900", "--no-learn-link"]).learn_link);
}
