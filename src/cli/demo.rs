//! `walfetch demo`: what walfetch does, on sample data.
//!
//! At this stage of the project the demo runs the codec alone: it writes a
//! small interleaved multi-region WAL as record batches with every codec,
//! then decodes it back, once whole and once bounded to one region's offsets,
//! and prints what it saw. The replay demo against a broker replaces it.

use std::process::ExitCode;
use std::time::Instant;

use bytes::Bytes;
use walfetch::codec::{BatchBuilder, Batches, Compression, DecodeOptions, NewRecord};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Number of regions sharing the partition.
    #[arg(long, default_value_t = 16)]
    regions: u64,
    /// Entries written per codec.
    #[arg(long, default_value_t = 20_000)]
    entries: u32,
}

pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(args.regions > 0, "--regions must be at least 1");
    println!(
        "walfetch demo: {} regions share one partition; {} entries per codec, 64 entries per batch\n",
        args.regions, args.entries
    );
    println!(
        "{:<8} {:>10} {:>12} {:>10} {:>14} {:>12} {:>12}",
        "codec", "batches", "wire bytes", "records", "decode MB/s", "region 3", "region 3 ms"
    );
    for codec in Compression::ALL {
        let (log, offsets_of_region) = write_wal(codec, args.regions, args.entries)?;
        let started = Instant::now();
        let mut records = 0usize;
        let mut batches = 0usize;
        for batch in Batches::new(log.clone(), DecodeOptions::default()) {
            let batch = batch?;
            batches += 1;
            for record in batch.records()? {
                std::hint::black_box(record?.value());
                records += 1;
            }
        }
        let whole = started.elapsed();

        // Bounded decode: visit only batches holding region 3's offsets, and
        // inside each stop right after the last wanted record.
        let started = Instant::now();
        let mut found = 0usize;
        let mut wanted = offsets_of_region.iter().peekable();
        for batch in Batches::new(log.clone(), DecodeOptions::default()) {
            let batch = batch?;
            let last = batch.last_offset();
            let Some(&&first_wanted) = wanted.peek() else {
                break;
            };
            if first_wanted > last {
                continue;
            }
            let mut in_batch = Vec::new();
            while let Some(&&o) = wanted.peek() {
                if o > last {
                    break;
                }
                in_batch.push(o);
                wanted.next();
            }
            let (lo, hi) = (in_batch[0], in_batch[in_batch.len() - 1]);
            for record in batch.records_in(lo..=hi)? {
                let record = record?;
                if in_batch.binary_search(&record.offset()).is_ok() {
                    found += 1;
                }
            }
        }
        let bounded = started.elapsed();
        anyhow::ensure!(
            found == offsets_of_region.len(),
            "region 3: found {found} of {}",
            offsets_of_region.len()
        );
        println!(
            "{:<8} {:>10} {:>12} {:>10} {:>14.0} {:>12} {:>12.3}",
            codec.name(),
            batches,
            log.len(),
            records,
            log.len() as f64 / whole.as_secs_f64() / 1e6,
            found,
            bounded.as_secs_f64() * 1e3,
        );
    }
    println!("\nEvery record decoded; region 3's entries found exactly, by offset, with bounded decoding.");
    Ok(ExitCode::SUCCESS)
}

/// Writes `entries` WAL entries of `regions` regions (region = key, a
/// big-endian u64) in 64-entry batches; returns the log and region 3's offsets.
fn write_wal(codec: Compression, regions: u64, entries: u32) -> anyhow::Result<(Bytes, Vec<i64>)> {
    let mut log = Vec::new();
    let mut region3 = Vec::new();
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut offset = 0i64;
    while offset < i64::from(entries) {
        let n = 64.min(i64::from(entries) - offset) as i32;
        let records: Vec<NewRecord> = (0..n)
            .map(|i| {
                // xorshift: a deterministic, skewed region choice and entry size.
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let region = (state % regions).min(state.rotate_left(17) % regions);
                if region == 3 {
                    region3.push(offset + i64::from(i));
                }
                let size = 100 + (state >> 40) as usize % 900;
                let value = format!(
                    "{{\"region\":{region},\"seq\":{},\"payload\":\"{}\"}}",
                    offset + i64::from(i),
                    "x".repeat(size)
                );
                NewRecord {
                    offset_delta: i,
                    timestamp: 1_700_000_000_000 + offset + i64::from(i),
                    key: Some(Bytes::copy_from_slice(&region.to_be_bytes())),
                    value: Some(value.into()),
                    headers: Vec::new(),
                }
            })
            .collect();
        let batch = BatchBuilder::new(offset)
            .compression(codec)
            .encode(&records)?;
        log.extend_from_slice(&batch.bytes);
        offset += i64::from(n);
    }
    Ok((log.into(), region3))
}
