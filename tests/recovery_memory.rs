//! The memory cap against what a recovery really holds, measured as the
//! growth of the process's peak resident memory (Linux: `VmHWM`, reset
//! through `/proc/self/clear_refs`). In a test binary of its own: the
//! measure is the whole process's, so no other test may run beside it.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use walfetch::codec::Compression;
use walfetch::consumer::{Recovery, ReplayOptions};
use walfetch::writer::{WriterConfig, WriterMode};
use walfetch_support::recovery::{write_partition, Written};
use walfetch_support::scripted::scripted_with_topic;

/// This process's resident memory now and its peak (`VmRSS`, `VmHWM`), in
/// bytes.
fn resident() -> (usize, usize) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let field = |name: &str| -> usize {
        let kib = status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .unwrap_or_else(|| panic!("no {name} in /proc/self/status"));
        kib.parse::<usize>().unwrap() * 1024
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// A cold region of an lz4 WAL (one entry in 50, in batches of about 1 MiB
/// of entries of many regions that compress some 80 times) recovered under
/// a 256 KiB cap. Each record of a compressed batch is a slice of the
/// batch's decompressed records and keeps them all alive; the replay once
/// charged only the records' own bytes and sized fetches in compressed
/// bytes, so a fetch within the cap brought some 20 batches, decompressed
/// to 20 MiB, for 400 KB of wanted entries, all held until yielded (the
/// heap grew 21 MB, the stats said 259 KB). What the recovery holds must
/// stay within the cap but for one decompressed batch (the one being
/// read) and the broker's answers on their way, and the stats must say
/// what it held.
#[tokio::test(flavor = "current_thread")]
async fn a_recovery_of_compressed_batches_holds_no_more_than_the_cap_and_a_batch() {
    let (_scripted, cluster) = scripted_with_topic(1, "wal", 1).await;
    let batch: usize = 1 << 20;
    let config = WriterConfig::new("wal", 0)
        .with_compression(Compression::Lz4)
        .with_mode(WriterMode::Interleaved)
        .with_max_batch_bytes(batch);
    let entries = (0..20_000u64).map(|k| {
        let region = if k % 50 == 0 { 1 } else { 2 };
        (region, Bytes::from(format!("{k:08} {}", "a".repeat(2000))))
    });
    let mut written = Written::new();
    let index = write_partition(&cluster, config, entries, &mut written).await;
    let cap: u64 = 256 << 10;
    let mut recovery = Recovery::builder(Arc::clone(&cluster))
        .index("wal", 0, &index)
        .region("wal", 0, 1, 0)
        .options(ReplayOptions::default().with_max_buffered_bytes(cap))
        .build()
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    // The peak starts again from what is resident now (clear_refs 5).
    std::fs::write("/proc/self/clear_refs", "5").unwrap();
    let (base, _) = resident();
    let mut n = 0;
    while let Some(entry) = recovery.next().await {
        drop(entry.unwrap());
        n += 1;
    }
    let grew = resident().1.saturating_sub(base);
    let stats = recovery.stats();
    let cap = usize::try_from(cap).unwrap();
    let peak = usize::try_from(stats.peak_buffered_bytes).unwrap();
    eprintln!(
        "{n} entries; resident memory grew by up to {grew} bytes; cap {cap}; \
         peak_buffered_bytes {peak}; {} fetches",
        stats.fetches
    );
    assert_eq!(n, written[&0][&1].len());
    // A decompressed batch is a little over `batch` (record framing); the
    // broker's answers and the client's read buffer take about as much as
    // the fetches ask for, which the cap bounds. (0.3-0.5 MB in runs on a
    // 2-core machine; 21 MB before.)
    assert!(
        grew < 2 * cap + 2 * batch,
        "a recovery capped at {cap} bytes held {grew} (reported peak {peak})"
    );
    assert!(peak <= cap + cap / 8, "reported peak {peak}, cap {cap}");
}
