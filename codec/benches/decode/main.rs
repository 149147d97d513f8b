//! Decode throughput of `walfetch-codec`, with its alternatives in the same run.
//!
//! Every case is one buffer of record batches, like the `records` field of a
//! Fetch response at the default 1 MiB `max.partition.fetch.bytes`: about
//! 1 MiB of records (measured uncompressed) split into batches of 16 KiB or
//! 1 MiB, for each codec and for records of 100 B, 1 KiB and 16 KiB (key plus
//! value). Payloads are seeded, deterministic, JSON-like WAL entries with a
//! share of random characters, so they compress partly (about 2:1 with gzip).
//! zstd comes twice: as walfetch's encoder writes it (each frame states its
//! content size) and "streamed", recompressed by zstd's streaming encoder as
//! the Java client, rskafka and kafka-protocol write it (no content size).
//!
//! Each case is a criterion group with up to five benchmarks on the same bytes:
//! - `walfetch`: our decoder, CRC on, every record's key and value touched,
//!   iterating owned `Record`s (`Records` as an `Iterator`): the owned walk;
//! - `walfetch-borrowed` ("borrowed" in the tables): the same, iterating
//!   borrowed `RecordRef`s with `Records::next_ref`;
//! - `kafka-protocol`: `RecordBatchDecoder::decode_all` on the same buffer,
//!   CRC checked, building a `Vec<Record>` of owned records;
//! - `crc32c`: bare `crc32c::crc32c` over the whole buffer;
//! - `decompress` (compressed cases): the bare decompressor on each batch's
//!   records section, into a `Vec` of the known decompressed size.
//!
//! Throughput is the size of the same records encoded uncompressed (for an
//! uncompressed case, the buffer itself), so every benchmark of a case uses
//! the same byte count and throughput ratios are inverse time ratios.
//!
//! After the groups, the medians of this run are read back from criterion's
//! `estimates.json` files (only files written by this run are used), the
//! contenders are timed again interleaved (`paired.rs`), and ratio
//! tables are printed and written to `<target>/codec-bench.md`. The headline
//! and the targets are like for like: the owned walk against kafka-protocol
//! (both yield owned records); the borrowed walk has its own columns. A
//! compressed case is judged against decompress + CRC32C of the same bytes,
//! the least a decoder that checks CRCs can take, the bare decompressor
//! shown beside it.
//!
//! Files: `workload.rs` builds the cases, `contenders.rs`
//! holds what is timed, `paired.rs` the paired measurement and
//! `report.rs` the tables and targets; this file runs criterion.
//!
//! Full run: `cargo bench -p walfetch-codec --bench decode`; smoke run:
//! `cargo bench -p walfetch-codec --bench decode -- --test`.

mod contenders;
mod paired;
mod report;
mod workload;

use std::time::{Duration, SystemTime};

use criterion::{Criterion, Throughput};
use walfetch_codec::Compression;

use contenders::contenders;
use report::{report, target_dir};
use workload::{build_case, Case, BATCH_SIZES, RECORD_SIZES};

fn bench_case(c: &mut Criterion, case: &Case) {
    let mut group = c.benchmark_group(case.group_name());
    group.throughput(Throughput::Bytes(case.logical_len as u64));
    for (id, run) in contenders(case) {
        group.bench_function(id, |b| b.iter(&run));
    }
    group.finish();
}

fn main() {
    let started = SystemTime::now();
    let args: Vec<String> = std::env::args().collect();
    let analysing = !args
        .iter()
        .any(|a| a == "--test" || a == "--list" || a == "--profile-time");

    let mut criterion = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_millis(1500))
        .nresamples(10_000)
        .configure_from_args();

    let mut cases = Vec::new();
    // Every codec as walfetch's encoder writes it, then zstd as streaming
    // compressors write it (no content size in the frame header).
    let codecs = Compression::ALL
        .into_iter()
        .map(|codec| (codec, false))
        .chain([(Compression::Zstd, true)]);
    for (codec, streamed) in codecs {
        for record_size in RECORD_SIZES {
            for batch_size in BATCH_SIZES {
                let case = build_case(codec, streamed, record_size, batch_size);
                bench_case(&mut criterion, &case);
                cases.push(case);
            }
        }
    }
    criterion.final_summary();

    if !analysing {
        return;
    }
    println!("\nPaired, interleaved measurement of the cases criterion ran...");
    let Some(table) = report(&cases, started) else {
        println!("\nNo criterion estimates were written by this run: no ratio table.");
        return;
    };
    println!("\n{table}");
    let path = target_dir().join("codec-bench.md");
    match std::fs::write(&path, &table) {
        Ok(()) => println!("Wrote {}", path.display()),
        Err(err) => eprintln!("Could not write {}: {err}", path.display()),
    }
}
