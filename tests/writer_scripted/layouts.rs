//! Layouts (clustered and interleaved), the writer settings, queues, cancelled appends and index checkpoints.

use crate::common::*;

#[tokio::test]
async fn clustered_batches_hold_one_region_interleaved_mix_them() {
    for (mode, compression) in [
        (WriterMode::Clustered, Compression::None),
        (WriterMode::Clustered, Compression::Lz4),
        (WriterMode::Interleaved, Compression::None),
    ] {
        let (_scripted, cluster) = scripted().await;
        let config = config(mode).with_compression(compression);
        let (appended, index) = write(&cluster, config, &entries(0, 600)).await;
        let layout = check(&cluster, &appended, &index).await;
        match mode {
            WriterMode::Clustered => assert_eq!(layout.mixed_batches, 0, "{layout:?}"),
            _ => assert!(layout.mixed_batches > 0, "{layout:?}"),
        }
        assert!(
            layout.pure_batches + layout.mixed_batches > 20,
            "{layout:?}"
        );
        assert_eq!(layout.producer_ids.len(), 1, "one producer id: {layout:?}");
        assert!(
            layout.producer_ids.iter().all(|id| *id >= 1000),
            "{layout:?}"
        );
    }
}

#[tokio::test]
async fn checksums_off_and_a_plain_producer_one_in_flight() {
    let (_scripted, cluster) = scripted().await;
    let config = config(WriterMode::Interleaved)
        .with_record_checksums(false)
        .with_idempotent(false)
        .with_max_in_flight(1);
    let (appended, index) = write(&cluster, config, &entries(0, 300)).await;
    let log = read_log(&cluster, TOPIC, 0).await;
    let layout = check_written(&log, &appended, &index, false);
    assert_eq!(
        layout.producer_ids.into_iter().collect::<Vec<_>>(),
        [-1],
        "no producer id"
    );
}

#[tokio::test]
async fn settings_are_checked() {
    let (_scripted, cluster) = scripted().await;
    for bad in [
        config(WriterMode::Clustered).with_max_in_flight(0),
        config(WriterMode::Clustered).with_max_in_flight(6),
        config(WriterMode::Clustered)
            .with_max_in_flight(2)
            .with_idempotent(false),
    ] {
        let writer = WalWriter::new(Arc::clone(&cluster), bad);
        let err = writer
            .append(WalEntry::new(1, "x"))
            .await
            .expect_err("refused");
        // Named: a server runs many writers.
        assert!(
            matches!(&err, Error::InvalidArgument(m) if m.contains("max_in_flight")
                && m.contains("topic \"wal\" partition 0")),
            "{err}"
        );
        assert!(writer.close().await.is_err());
    }
}

/// A queue of `usize::MAX` entries ("no limit but the buffer's bytes")
/// panicked in `WalWriter::new` (tokio's channel holds at most
/// `Semaphore::MAX_PERMITS`); it now counts as that many, as 0 counts as 1.
#[tokio::test]
async fn a_queue_of_any_length_is_taken() {
    let (_scripted, cluster) = scripted().await;
    for queue in [0, usize::MAX] {
        let config = config(WriterMode::Clustered).with_queue(queue);
        let writer = WalWriter::new(Arc::clone(&cluster), config);
        let appended = writer.append(WalEntry::new(1, "x")).await.unwrap();
        appended.await.expect("written");
        writer.close().await.expect("closed");
    }
}

/// With `max_batch_bytes` 0 every entry is a full batch of its own: an
/// empty group counted as full already, so no group was ever marked full
/// and entries waited out the linger (forever under `Duration::MAX`,
/// until a flush) instead of going at once.
#[tokio::test]
async fn with_max_batch_bytes_0_each_entry_goes_at_once() {
    let (_scripted, cluster) = scripted().await;
    for mode in [WriterMode::Clustered, WriterMode::Interleaved] {
        let config = config(mode)
            .with_max_batch_bytes(0)
            .with_linger(Duration::MAX);
        let writer = WalWriter::new(Arc::clone(&cluster), config);
        let mut pending = Vec::new();
        for n in 0..10u64 {
            pending.push(writer.append(WalEntry::new(n % 3, "x")).await.unwrap());
        }
        let waited = tokio::time::timeout(
            Duration::from_secs(10),
            futures::future::try_join_all(pending),
        )
        .await;
        let Ok(written) = waited else {
            panic!("{mode:?}: the entries wait for the linger");
        };
        let written = written.unwrap();
        assert_eq!(written.len(), 10);
        writer.close().await.unwrap();
    }
}

/// An `append` cancelled while the writer's queue is full (a caller's
/// timeout, the writer task busy getting its producer id) kept the buffer
/// bytes it had taken: they were never given back, and once such appends
/// added up to the buffer, every later `append` waited forever.
#[tokio::test]
async fn a_cancelled_append_gives_its_buffer_bytes_back() {
    let (scripted, cluster) = scripted().await;
    // The writer task waits 2 s for its producer id, reading no entries.
    scripted.script(
        Fault::on(ApiKey::InitProducerId)
            .times(1)
            .then(FaultAction::Delay(Duration::from_secs(2))),
    );
    let config = WriterConfig::new(TOPIC, 0)
        .with_queue(1)
        .with_linger(Duration::ZERO);
    let buffer = config.buffer_bytes();
    let writer = WalWriter::new(Arc::clone(&cluster), config);
    let first = writer.append(WalEntry::new(1, "first")).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    // Fills the queue.
    let second = writer.append(WalEntry::new(1, "second")).await.unwrap();
    let large = Bytes::from(vec![0u8; buffer * 2 / 3]);
    let cancelled = tokio::time::timeout(
        Duration::from_millis(200),
        writer.append(WalEntry::new(1, large.clone())),
    )
    .await;
    assert!(cancelled.is_err(), "the queue was full");
    first.await.unwrap();
    second.await.unwrap();
    let again = tokio::time::timeout(Duration::from_secs(10), async {
        writer.append(WalEntry::new(1, large)).await?.await
    })
    .await
    .expect("room for it once the others are written");
    assert_eq!(again.unwrap(), 2);
    writer.close().await.unwrap();
}

/// A writer in a long-running server: its index kept every entry it ever
/// wrote, with no way to let go of those its regions had flushed. Truncated
/// below a checkpoint, it holds the rest and indexes on.
#[tokio::test]
async fn a_long_running_writer_lets_go_of_its_index_below_a_checkpoint() {
    let (_scripted, cluster) = scripted().await;
    let writer = WalWriter::new(Arc::clone(&cluster), config(WriterMode::Clustered));
    let first: Vec<_> = written(append_all(&writer, &entries(0, 90)).await);
    writer.truncate_index_below(60);
    let later: Vec<_> = written(append_all(&writer, &entries(90, 30)).await);
    let index = writer.close().await.unwrap();
    let kept: Vec<i64> = index.regions().flat_map(|(_, r)| r.offsets()).collect();
    assert_eq!(kept.len(), 60, "{kept:?}");
    assert!(kept.iter().all(|&o| o >= 60), "{kept:?}");
    assert_eq!(index.source().first_offset, Some(60));
    assert_eq!(index.last_index(), Some(119));
    // Every region still listed, those with nothing left too.
    let regions = |w: &[(RegionId, Bytes, i64)]| {
        w.iter()
            .map(|(r, _, _)| *r)
            .collect::<std::collections::BTreeSet<_>>()
    };
    assert_eq!(
        index.regions().map(|(r, _)| r).collect::<Vec<_>>(),
        regions(&first)
            .union(&regions(&later))
            .copied()
            .collect::<Vec<_>>()
    );
}
