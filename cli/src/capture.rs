//! `walfetch capture`: the raw `records` bytes of a partition as Fetch
//! responses carry them (complete batches only), to a file that
//! `walfetch dump` and the codec tests read. Used to make fixtures.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use walfetch::cluster::FetchParams;
use walfetch::codec::{Batches, DecodeOptions};

use crate::connect::{check_partition, connect, Target};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    target: Target,
    /// The file to write.
    #[arg(long)]
    out: PathBuf,
    /// First offset (where a batch starts).
    #[arg(long, default_value_t = 0)]
    from: i64,
}

pub(crate) async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let cluster = connect(&args.target.brokers).await?;
    check_partition(&cluster, &args.target).await?;
    let mut out = Vec::new();
    let mut next = args.from;
    loop {
        let params = FetchParams::new(args.target.topic.clone(), args.target.partition, next)
            .with_max_bytes(4 << 20)
            .with_max_wait(Duration::ZERO);
        let fetched = cluster.fetch(&params).await?;
        let before = next;
        let mut batches = Batches::new(fetched.records.clone(), DecodeOptions::default());
        for batch in &mut batches {
            let batch = batch.with_context(|| format!("fetch at offset {before}"))?;
            if batch.last_offset() >= next {
                out.extend_from_slice(batch.bytes());
                next = batch.header().next_offset();
            }
        }
        if next == before || next >= fetched.high_watermark {
            break;
        }
    }
    std::fs::write(&args.out, &out).with_context(|| format!("writing {}", args.out.display()))?;
    eprintln!(
        "captured offsets {}..{next} ({} bytes) into {}",
        args.from,
        out.len(),
        args.out.display()
    );
    Ok(ExitCode::SUCCESS)
}
