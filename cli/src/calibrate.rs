//! `walfetch calibrate`: measures the round trip and bandwidth to a
//! partition's leader, and the cost model they give the planner.

use std::process::ExitCode;

use walfetch::calibrate::measure_link;

use crate::connect::{check_partition, connect, Target};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    target: Target,
    /// Fetches timed for each figure.
    #[arg(long, default_value_t = 20)]
    samples: usize,
}

pub(crate) async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let cluster = connect(&args.target.brokers).await?;
    check_partition(&cluster, &args.target).await?;
    let link = measure_link(
        &cluster,
        &args.target.topic,
        args.target.partition,
        args.samples,
    )
    .await?;
    let in_flight = cluster.config().connections_per_broker;
    let cost = link.cost_model(in_flight);
    println!(
        "{}",
        serde_json::json!({
            "round_trip_us": link.round_trip.as_micros() as u64,
            "bytes_per_second": link.bytes_per_second.map(|b| b as u64),
            "bandwidth_fetch_bytes": link.bandwidth_fetch_bytes,
            "samples": link.samples,
            "in_flight": in_flight,
            "merge_gap_bytes": cost.merge_gap_bytes(),
        })
    );
    if link.bytes_per_second.is_none() {
        eprintln!(
            "walfetch: the partition holds too little data to measure bandwidth; the default ({} bytes/s) stands",
            cost.bytes_per_second as u64
        );
    }
    eprintln!(
        "replay with: --round-trip-us {} --bytes-per-second {}",
        link.round_trip.as_micros(),
        cost.bytes_per_second as u64
    );
    Ok(ExitCode::SUCCESS)
}
