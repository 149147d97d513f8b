//! Measuring the link to a broker, for the planner's [`CostModel`]: how long
//! a fetch takes beyond its bytes, and how fast bytes come.
//!
//! The planner merges two runs into one fetch when reading the gap between
//! them costs less than another fetch; that trade depends on the round trip
//! and the bandwidth, which differ between loopback, a data centre and a
//! cloud region. [`measure_link`] measures both on a real partition with
//! ordinary fetches (nothing is written):
//!
//! - the round trip: the median time of a fetch at the log's end, which
//!   returns no records;
//! - the bandwidth: the median of the bytes of a large fetch from the log's
//!   start over its time less that round trip.
//!
//! ```no_run
//! # async fn run(cluster: &walfetch::cluster::Cluster) -> Result<(), walfetch::error::Error> {
//! use walfetch::calibrate::measure_link;
//! use walfetch::consumer::ReplayOptions;
//!
//! let link = measure_link(cluster, "wal", 0, 20).await?;
//! let mut options = ReplayOptions::default();
//! options.plan.cost = link.cost_model(options.max_in_flight);
//! # Ok(()) }
//! ```

use std::time::{Duration, Instant};

use crate::cluster::{Cluster, FetchParams};
use crate::error::Error;
use crate::plan::CostModel;

/// Byte limit of the fetches that measure bandwidth.
const BANDWIDTH_FETCH_BYTES: i32 = 4 << 20;

/// The least a bandwidth fetch must carry to count: below this the time is
/// mostly the round trip, and the quotient mostly noise.
const MIN_BANDWIDTH_BYTES: usize = 256 << 10;

/// What [`measure_link`] measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkMeasurement {
    /// Median time of a fetch that returned no records.
    pub round_trip: Duration,
    /// Median bytes per second of the large fetches, their round trip
    /// subtracted; `None` when the partition held too few bytes to tell.
    pub bytes_per_second: Option<f64>,
    /// Bytes the median large fetch carried (0 without bandwidth).
    pub bandwidth_fetch_bytes: usize,
    /// Fetches timed for each figure.
    pub samples: usize,
}

impl LinkMeasurement {
    /// The cost model these figures give for `in_flight` fetches in flight;
    /// without a bandwidth figure, the default model's.
    pub fn cost_model(&self, in_flight: usize) -> CostModel {
        let default = CostModel::default();
        CostModel {
            round_trip: self.round_trip,
            bytes_per_second: self.bytes_per_second.unwrap_or(default.bytes_per_second),
            in_flight: in_flight.max(1),
        }
    }
}

/// Measures the round trip and bandwidth to the leader of `topic`'s
/// `partition`, timing `samples` fetches for each (at least one). See the
/// module docs.
pub async fn measure_link(
    cluster: &Cluster,
    topic: &str,
    partition: i32,
    samples: usize,
) -> Result<LinkMeasurement, Error> {
    let samples = samples.max(1);
    let fetch = |offset: i64, max_bytes: i32| {
        FetchParams::new(topic, partition, offset)
            .with_max_bytes(max_bytes)
            .with_max_wait(Duration::ZERO)
    };
    // One fetch to learn where the log starts and ends, and to warm up the
    // connection and the metadata.
    let first = cluster.fetch(&fetch(0, 1)).await?;
    let end = first.high_watermark.max(0);
    let start = first.log_start_offset.max(0);

    let mut round_trips = Vec::with_capacity(samples);
    for _ in 0..samples {
        let started = Instant::now();
        cluster.fetch(&fetch(end, 1)).await?;
        round_trips.push(started.elapsed());
    }
    let round_trip = median(&mut round_trips);

    let mut rates = Vec::with_capacity(samples);
    let mut sizes = Vec::with_capacity(samples);
    for _ in 0..samples {
        let started = Instant::now();
        let answer = cluster.fetch(&fetch(start, BANDWIDTH_FETCH_BYTES)).await?;
        let took = started.elapsed();
        let bytes = answer.records.len();
        if bytes < MIN_BANDWIDTH_BYTES {
            break;
        }
        let transfer = took
            .saturating_sub(round_trip)
            .max(Duration::from_micros(1));
        rates.push(bytes as f64 / transfer.as_secs_f64());
        sizes.push(bytes);
    }
    let bytes_per_second = (!rates.is_empty()).then(|| median_f64(&mut rates));
    let bandwidth_fetch_bytes = if sizes.is_empty() {
        0
    } else {
        median(&mut sizes)
    };
    Ok(LinkMeasurement {
        round_trip,
        bytes_per_second,
        bandwidth_fetch_bytes,
        samples,
    })
}

fn median<T: Copy + Ord>(values: &mut [T]) -> T {
    values.sort_unstable();
    values[values.len() / 2]
}

fn median_f64(values: &mut [f64]) -> f64 {
    values.sort_unstable_by(f64::total_cmp);
    values[values.len() / 2]
}
