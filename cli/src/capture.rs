//! `walfetch capture`: the raw `records` bytes of a partition as Fetch
//! responses carry them (complete batches only), to a file that
//! `walfetch dump` and the codec tests read. Used to make fixtures.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use walfetch::cluster::FetchParams;
use walfetch::codec::{Batches, DecodeOptions};

use crate::connect::{check_partition, connect, offset, Target};

#[derive(Debug, clap::Args)]
#[command(after_help = "Example:
  walfetch capture -b 127.0.0.1:9092 -t wal -p 0 --from 1200 --to 1500 --out wal.records
  walfetch dump wal.records

The file holds whole batches: it may start before --from (Kafka answers
from the start of the batch holding it) or after it (some brokers skip that
batch), and end past --to. The offsets it really holds are printed.")]
pub(crate) struct Args {
    #[command(flatten)]
    target: Target,
    /// The file to write.
    #[arg(long)]
    out: PathBuf,
    /// First offset wanted.
    #[arg(long, default_value_t = 0, value_parser = offset, allow_hyphen_values = true)]
    from: i64,
    /// End offset, exclusive (default: the high watermark). The batch
    /// holding `--to - 1` is captured whole.
    #[arg(long, value_parser = offset, allow_hyphen_values = true)]
    to: Option<i64>,
}

/// The offsets of the batches written.
#[derive(Debug, Default)]
struct Captured {
    first: Option<i64>,
    next: Option<i64>,
    bytes: u64,
    batches: u64,
}

pub(crate) async fn run(args: Args) -> anyhow::Result<ExitCode> {
    if let Some(to) = args.to {
        anyhow::ensure!(
            to > args.from,
            "--to {to} is not past --from {}: nothing to capture",
            args.from
        );
    }
    let cluster = connect(&args.target.brokers, &args.target.client.settings()?).await?;
    check_partition(&cluster, &args.target).await?;
    // Batches go to a temporary file as they come, renamed at the end: a
    // failed capture leaves no half file under the name asked for.
    let tmp = walfetch::index::temp_path(&args.out);
    let file = File::create(&tmp).with_context(|| format!("writing {}", tmp.display()))?;
    let mut out = BufWriter::new(file);
    let captured = capture(&cluster, &args, &mut out).await;
    let finished = captured.and_then(|c| {
        out.flush()
            .and_then(|()| std::fs::rename(&tmp, &args.out))
            .with_context(|| format!("writing {}", args.out.display()))?;
        Ok(c)
    });
    let captured = match finished {
        Ok(c) => c,
        Err(e) => {
            drop(out);
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
    };
    report(&args, &captured, &args.out);
    Ok(ExitCode::SUCCESS)
}

async fn capture(
    cluster: &walfetch::cluster::Cluster,
    args: &Args,
    out: &mut impl Write,
) -> anyhow::Result<Captured> {
    let mut captured = Captured::default();
    let mut next = args.from;
    loop {
        if args.to.is_some_and(|to| next >= to) {
            break;
        }
        let params = FetchParams::new(args.target.topic.clone(), args.target.partition, next)
            .with_max_bytes(4 << 20)
            .with_max_wait(Duration::ZERO);
        let fetched = cluster.fetch(&params).await?;
        let before = next;
        let mut batches = Batches::new(fetched.records.clone(), DecodeOptions::default());
        for batch in &mut batches {
            let batch = batch.with_context(|| format!("fetch at offset {before}"))?;
            if args.to.is_some_and(|to| batch.header().base_offset >= to) {
                break;
            }
            if batch.last_offset() >= next {
                out.write_all(batch.bytes())
                    .with_context(|| format!("writing {}", args.out.display()))?;
                captured.first.get_or_insert(batch.header().base_offset);
                captured.bytes += batch.bytes().len() as u64;
                captured.batches += 1;
                next = batch.header().next_offset();
                captured.next = Some(next);
            }
        }
        if next == before || next >= fetched.high_watermark {
            break;
        }
    }
    Ok(captured)
}

/// What the file really holds, with a note where it differs from what was
/// asked.
fn report(args: &Args, captured: &Captured, path: &Path) {
    let (Some(first), Some(next)) = (captured.first, captured.next) else {
        say!(
            "captured nothing from offset {} on (0 bytes) into {}: the partition holds no batch there",
            args.from,
            path.display()
        );
        return;
    };
    say!(
        "captured offsets {first}..{next} ({} batches, {} bytes) into {}",
        captured.batches,
        captured.bytes,
        path.display()
    );
    if first > args.from {
        say!(
            "walfetch: note: the file starts at offset {first}, after --from {}: the broker answered from the next batch (offsets before {first} are missing or were skipped)",
            args.from
        );
    } else if first < args.from {
        say!(
            "walfetch: note: the file starts at offset {first}, before --from {}: the batch holding {} starts there",
            args.from, args.from
        );
    }
}
