//! `walfetch calibrate`: measures the round trip and bandwidth to a
//! partition's leader, and the cost model they give the planner.

use std::process::ExitCode;

use walfetch::calibrate::measure_link;
use walfetch::consumer::ReplayOptions;

use crate::connect::{check_partition, connect, Target};
use crate::output::outln;

/// The most `--samples`: each costs two fetches, one of up to 4 MiB.
const MAX_SAMPLES: u64 = 1000;

#[derive(Debug, clap::Args)]
#[command(after_help = "Example:
  walfetch calibrate -b 127.0.0.1:9092 -t wal -p 0 --samples 50
then replay with the figures it prints:
  walfetch replay ... --round-trip-us 1500 --bytes-per-second 900000000")]
pub(crate) struct Args {
    #[command(flatten)]
    target: Target,
    /// Fetches timed for each figure (1 to 1000).
    #[arg(long, default_value_t = 20,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=MAX_SAMPLES))]
    samples: usize,
}

pub(crate) async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let cluster = connect(&args.target.brokers, &args.target.client.settings()?).await?;
    check_partition(&cluster, &args.target).await?;
    let link = measure_link(
        &cluster,
        &args.target.topic,
        args.target.partition,
        args.samples,
    )
    .await?;
    // A replay prices a fetch at its share of a round trip among the
    // fetches it keeps in flight.
    let cost = link.cost_model(ReplayOptions::default().max_in_flight);
    outln!(
        "{}",
        serde_json::json!({
            "round_trip_us": link.round_trip.as_micros() as u64,
            "bytes_per_second": link.bytes_per_second.map(|b| b as u64),
            "bandwidth_fetch_bytes": link.bandwidth_fetch_bytes,
            "samples": link.samples,
            "in_flight": cost.in_flight,
            "merge_gap_bytes": cost.merge_gap_bytes(),
        })
    )?;
    if link.bytes_per_second.is_none() {
        say!(
            "walfetch: the partition holds too little data to measure bandwidth; the default ({} bytes/s) stands",
            cost.bytes_per_second as u64
        );
    }
    say!(
        "replay with: --round-trip-us {} --bytes-per-second {}",
        link.round_trip.as_micros(),
        cost.bytes_per_second as u64
    );
    Ok(ExitCode::SUCCESS)
}
