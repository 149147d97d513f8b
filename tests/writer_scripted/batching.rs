//! Batching: batches fill up under load, a quiet region goes by its age, the linger and the record stamps.

use crate::common::*;

/// While the pipeline is full (one request in flight, its answer held for
/// half a second), a busy region's entries keep collecting into full
/// batches instead of going as one small batch per linger, and a quiet
/// region's entry goes out by its age: before the busy region's entries
/// appended after it. Paused clock: the sleeps are exact.
#[tokio::test(start_paused = true)]
async fn under_load_batches_fill_up_and_a_quiet_region_goes_by_its_age() {
    let (scripted, cluster) = scripted().await;
    let payload = |n: usize| Bytes::from(format!("{n:0>100}"));
    let size = WalEntry::new(1, payload(0)).batch_bytes()
        + walfetch::codec::RECORD_CHECKSUM_HEADER.len()
        + 6;
    let config = WriterConfig::new(TOPIC, 0)
        .with_max_in_flight(1)
        .with_linger(Duration::from_millis(5))
        .with_max_batch_bytes(6 * size);
    let writer = WalWriter::new(Arc::clone(&cluster), config);
    scripted
        .script(Fault::on(ApiKey::Produce).then(FaultAction::Delay(Duration::from_millis(500))));
    let mut pending = vec![(
        9,
        payload(0),
        writer.append(WalEntry::new(9, payload(0))).await.unwrap(),
    )];
    // The first batch (region 9) is sent after its linger and held; then
    // 20 entries of region 1, one every 5 ms, and one of region 2 after
    // the ninth.
    for n in 1..=20 {
        tokio::time::sleep(Duration::from_millis(5)).await;
        let appended = writer.append(WalEntry::new(1, payload(n))).await.unwrap();
        pending.push((1, payload(n), appended));
        if n == 9 {
            let appended = writer.append(WalEntry::new(2, payload(100))).await.unwrap();
            pending.push((2, payload(100), appended));
        }
    }
    let mut appended = Vec::new();
    for (region, payload, offset) in pending {
        appended.push((region, payload, offset.await.expect("written")));
    }
    let index = writer.close().await.expect("closed");
    assert!(scripted.pending_faults().is_empty(), "the answer was held");
    let log = read_log(&cluster, TOPIC, 0).await;
    check_written(&log, &appended, &index, true);
    let regions: Vec<Vec<RegionId>> = log
        .iter()
        .map(|b| {
            b.records
                .iter()
                .map(|r| RegionId::from_be_bytes(r.key.as_deref().unwrap().try_into().unwrap()))
                .collect()
        })
        .collect();
    // Region 1: 20 entries in batches of 6, the fewest possible.
    let busy: Vec<usize> = regions.iter().filter(|b| b[0] == 1).map(Vec::len).collect();
    assert_eq!(busy, [6, 6, 6, 2], "batches grow under load: {regions:?}");
    // Region 2's entry goes before region 1's 13th (appended after it),
    // after the batches holding region 1's entries older than it.
    let at = |value: &Bytes| {
        log.iter()
            .position(|b| b.records.iter().any(|r| r.value.as_ref() == Some(value)))
            .unwrap()
    };
    assert!(at(&payload(100)) < at(&payload(13)), "{regions:?}");
    assert!(at(&payload(100)) > at(&payload(9)), "{regions:?}");
}

/// An entry's linger runs from its `append`, not from when the writer task
/// got to it: an entry the task takes 3 ms late is sent by its own linger
/// (5 ms from the append), not 5 ms after the task took it. Paused clock.
#[tokio::test(start_paused = true)]
async fn the_linger_runs_from_the_append_not_from_when_the_writer_took_the_entry() {
    let (_scripted, cluster) = scripted().await;
    let linger = Duration::from_millis(5);
    let config = WriterConfig::new(TOPIC, 0).with_linger(linger);
    let writer = WalWriter::new(Arc::clone(&cluster), config);
    let payload = Bytes::from_static(b"late");
    let appended_at = tokio::time::Instant::now();
    let appended = writer
        .append(WalEntry::new(7, payload.clone()))
        .await
        .unwrap();
    // The clock moves on before the writer task runs: it takes the entry
    // 3 ms after the append.
    tokio::time::advance(Duration::from_millis(3)).await;
    let offset = appended.await.expect("written");
    let waited = appended_at.elapsed();
    assert!(
        waited <= linger,
        "the entry waited {waited:?}, more than its {linger:?} linger"
    );
    let index = writer.close().await.expect("closed");
    let log = read_log(&cluster, TOPIC, 0).await;
    check_written(&log, &[(7, payload, offset)], &index, true);
}

/// A record's timestamp is when the writer took its entry, as a Kafka
/// producer stamps a record when it is sent, not when its batch was
/// formed: entries of one batch appended 60 ms apart are 60 ms apart in
/// the log.
#[tokio::test]
async fn records_are_stamped_when_taken_not_when_their_batch_is_formed() {
    let (_scripted, cluster) = scripted().await;
    let config = WriterConfig::new(TOPIC, 0)
        .with_compression(Compression::Lz4)
        .with_linger(Duration::from_secs(5));
    let writer = WalWriter::new(Arc::clone(&cluster), config);
    let mut appended = Vec::new();
    let mut pending = Vec::new();
    for i in 0..3u8 {
        if i > 0 {
            tokio::time::sleep(Duration::from_millis(60)).await;
        }
        let payload = Bytes::from(vec![i; 100]);
        pending.push((
            payload.clone(),
            writer.append(WalEntry::new(4, payload)).await.unwrap(),
        ));
    }
    writer.flush().await.unwrap();
    for (payload, offset) in pending {
        appended.push((4, payload, offset.await.expect("written")));
    }
    let index = writer.close().await.expect("closed");
    let log = read_log(&cluster, TOPIC, 0).await;
    assert_eq!(log.len(), 1, "one batch: {log:?}");
    check_written(&log, &appended, &index, true);
    let stamps: Vec<i64> = log[0].records.iter().map(|r| r.timestamp).collect();
    for pair in stamps.windows(2) {
        assert!(pair[1] - pair[0] >= 50, "{stamps:?}");
    }
    assert_eq!(log[0].header.base_timestamp, stamps[0]);
    assert_eq!(log[0].header.max_timestamp, stamps[2]);
}

/// Entries already queued when their group falls due go into its batch:
/// ten entries of one region, appended before the writer task ran and
/// past their linger by the time it does, make one batch, not a batch of
/// the first entry with the rest behind it.
#[tokio::test(start_paused = true)]
async fn entries_queued_when_their_group_falls_due_go_into_its_batch() {
    let (_scripted, cluster) = scripted().await;
    let config = WriterConfig::new(TOPIC, 0).with_linger(Duration::from_millis(5));
    let writer = WalWriter::new(Arc::clone(&cluster), config);
    let mut pending = Vec::new();
    for i in 0..10u8 {
        let payload = Bytes::from(vec![i; 64]);
        pending.push((
            payload.clone(),
            writer.append(WalEntry::new(3, payload)).await.unwrap(),
        ));
    }
    tokio::time::advance(Duration::from_millis(10)).await;
    let mut appended = Vec::new();
    for (payload, offset) in pending {
        appended.push((3, payload, offset.await.expect("written")));
    }
    let index = writer.close().await.expect("closed");
    let log = read_log(&cluster, TOPIC, 0).await;
    check_written(&log, &appended, &index, true);
    assert_eq!(log.len(), 1, "{log:?}");
}

/// A linger of `Duration::MAX` (send only when full or flushed) once
/// overflowed working out when a group is due, and the writer task
/// panicked: every append, flush and close then failed.
#[tokio::test]
async fn a_linger_of_duration_max_sends_on_flush() {
    let (_scripted, cluster) = scripted().await;
    let config = WriterConfig::new(TOPIC, 0).with_linger(Duration::MAX);
    let writer = WalWriter::new(Arc::clone(&cluster), config);
    let appended = writer.append(WalEntry::new(1, "x")).await.unwrap();
    writer.flush().await.unwrap();
    assert_eq!(appended.await.unwrap(), 0);
    writer.close().await.unwrap();
}
