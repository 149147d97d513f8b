//! A missing leader and a forgotten producer: the rest still go, no sequence gap, a growing backoff.

use crate::common::*;

/// A writer of partition 0 (lingering 3 ms, its client giving up after
/// `deadline`) that wrote a first entry, and then lost the leader: the
/// scripted cluster, the client and the writer.
async fn a_writer_that_lost_its_leader(
    deadline: Duration,
) -> (ScriptedCluster, Arc<Cluster>, WalWriter) {
    let (scripted, cluster) = scripted_with_deadline(deadline).await;
    let config = WriterConfig::new(TOPIC, 0).with_linger(Duration::from_millis(3));
    let writer = writer_with_a_first_entry(&cluster, config).await;
    lose_the_leader(&scripted, &cluster);
    (scripted, cluster, writer)
}

/// The leader cannot be found for longer than the retry deadline while six
/// batches wait and a flush waits for them: the oldest fails, and once the
/// leader is back the rest go. They once waited for an append to wake the
/// writer, and the flush (and `close`, which flushes) never returned.
#[tokio::test]
async fn after_the_leader_is_missing_past_the_deadline_the_rest_still_go() {
    let (scripted, _cluster, writer) = a_writer_that_lost_its_leader(Duration::from_secs(1)).await;
    let pending = one_entry_each_of_six_regions(&writer).await;
    let mut pending = pending.into_iter();
    let oldest = pending.next().unwrap();
    {
        let flush = writer.flush();
        tokio::pin!(flush);
        tokio::select! {
            r = &mut flush => panic!("flushed during the outage: {r:?}"),
            r = oldest => assert!(r.is_err(), "the oldest batch fails: {r:?}"),
        }
        scripted.clear_faults();
        tokio::time::timeout(Duration::from_secs(10), &mut flush)
            .await
            .expect("the flush returns once the leader is back")
            .unwrap();
    }
    // Each batch's deadline ran from when the writer was first held up:
    // those that outlived it failed with the oldest, the rest are written.
    for p in pending {
        if let Ok(offset) = p.await {
            assert!(offset >= 1);
        }
    }
    writer.close().await.unwrap();
}

/// A batch encoded ahead (its sequence numbers given out) that fails
/// without ever being sent, the leader missing past the deadline: the next
/// batch once went out under the same producer with a gap in its sequence,
/// and the broker refused it (`OUT_OF_ORDER_SEQUENCE_NUMBER`). It goes
/// under a new producer id now.
#[tokio::test]
async fn a_batch_encoded_ahead_that_never_left_leaves_no_sequence_gap() {
    let (scripted, cluster) = scripted_with_deadline(Duration::from_secs(1)).await;
    let config = WriterConfig::new(TOPIC, 0)
        .with_max_in_flight(1)
        .with_max_batch_bytes(2 << 10)
        .with_linger(Duration::from_millis(3));
    let writer = writer_with_a_first_entry(&cluster, config).await;
    // Batch A is held by the broker for 500 ms; behind it more than a full
    // batch of region 1 gathers, and the first full one is encoded ahead.
    scripted
        .script(Fault::on(ApiKey::Produce).then(FaultAction::Delay(Duration::from_millis(500))));
    let a = writer.append(WalEntry::new(1, "a")).await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut rest = Vec::new();
    for n in 0..20 {
        let payload = Bytes::from(format!("{n:0>100}"));
        rest.push(writer.append(WalEntry::new(1, payload)).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    lose_the_leader(&scripted, &cluster);
    a.await.expect("A is written");
    let mut rest = rest.into_iter();
    let encoded_ahead = rest.next().unwrap().await;
    assert!(encoded_ahead.is_err(), "{encoded_ahead:?}");
    scripted.clear_faults();
    for r in rest {
        if let Err(e) = r.await {
            assert!(
                !e.to_string().contains("OUT_OF_ORDER_SEQUENCE_NUMBER"),
                "{e}"
            );
        }
    }
    writer.close().await.unwrap();
}

/// A new writer on a log whose start is past 0 (retention), its first
/// batch's answer lost and the batch answered as a duplicate without its
/// offset (`DUPLICATE_SEQUENCE_NUMBER`, as Kafka 0.11 and Tansu 0.6 do):
/// the writer once looked for it from offset 0, got
/// `OFFSET_OUT_OF_RANGE`, and failed an entry that was written.
#[tokio::test]
async fn a_duplicate_is_looked_for_past_the_log_end_when_the_producer_began() {
    use walfetch::codec::{BatchBuilder, NewRecord};
    let (scripted, cluster) = scripted().await;
    for i in 0..10 {
        let batch = BatchBuilder::new(0)
            .encode(&[NewRecord::value(0, format!("old {i}"))])
            .unwrap()
            .bytes;
        scripted.append(TOPIC, 0, batch).unwrap();
    }
    scripted.advance_log_start(TOPIC, 0, 8).unwrap();
    scripted.set_duplicate_answer(DuplicateAnswer::DuplicateSequenceNumber);
    scripted.script(Fault::on(ApiKey::Produce).then(FaultAction::CutBeforeResponse));
    let writer = WalWriter::new(Arc::clone(&cluster), WriterConfig::new(TOPIC, 0));
    let appended = writer.append(WalEntry::new(1, "new")).await.unwrap();
    writer.flush().await.unwrap();
    assert_eq!(appended.await.unwrap(), 10);
    assert_eq!(
        scripted.high_watermark(TOPIC, 0).unwrap(),
        11,
        "written once"
    );
    writer.close().await.unwrap();
}

/// The broker forgets the writer's producer while it is idle (Kafka does
/// after `producer.id.expiration.ms`, a day by default): the next batch,
/// its sequence past 0, is refused with `UNKNOWN_PRODUCER_ID`. It was not
/// written, so it goes again under a new producer id instead of failing
/// its entries, and the log holds each entry once.
#[tokio::test]
async fn after_the_broker_forgets_an_idle_producer_the_next_batch_is_written() {
    let (scripted, cluster) = scripted().await;
    let writer = WalWriter::new(Arc::clone(&cluster), config(WriterMode::Clustered));
    let first = writer.append(WalEntry::new(1, "before")).await.unwrap();
    writer.flush().await.unwrap();
    assert_eq!(first.await.unwrap(), 0);
    scripted.expire_producers(TOPIC, 0).unwrap();
    let mut after = Vec::new();
    for region in 1..=3 {
        after.push(writer.append(WalEntry::new(region, "after")).await.unwrap());
    }
    writer.flush().await.unwrap();
    let mut offsets = Vec::new();
    for a in after {
        offsets.push(a.await.unwrap());
    }
    offsets.sort_unstable();
    assert_eq!(offsets, [1, 2, 3]);
    assert_eq!(
        scripted.high_watermark(TOPIC, 0).unwrap(),
        4,
        "each entry once"
    );
    writer.close().await.unwrap();
}

/// The leader missing for good, six batches waiting and a flush: they
/// were held up together, so their deadlines run from then and they fail
/// together, not one deadline after another (each batch's once ran from
/// when the one before it gave up).
#[tokio::test]
async fn batches_held_up_together_fail_together() {
    let (_scripted, _cluster, writer) = a_writer_that_lost_its_leader(Duration::from_secs(1)).await;
    let pending = one_entry_each_of_six_regions(&writer).await;
    let started = tokio::time::Instant::now();
    tokio::time::timeout(Duration::from_secs(20), writer.flush())
        .await
        .expect("the flush returns")
        .unwrap();
    let took = started.elapsed();
    for p in pending {
        assert!(p.await.is_err());
    }
    assert!(took < Duration::from_secs(3), "{took:?}");
}

/// While the leader cannot be found, the writer looks it up again after a
/// backoff that grows (50, 100, 200, 400 ms …, jittered), as it does
/// between sends: it once asked every 25–50 ms for the whole deadline.
#[tokio::test]
async fn a_missing_leader_is_looked_up_with_a_growing_backoff() {
    let (scripted, _cluster, writer) = a_writer_that_lost_its_leader(Duration::from_secs(2)).await;
    scripted.reset_stats();
    let appended = writer.append(WalEntry::new(1, "x")).await.unwrap();
    writer.flush().await.unwrap();
    assert!(appended.await.is_err(), "the leader never came back");
    let lookups = scripted.stats(1).unwrap().requests_of(ApiKey::Metadata);
    // Over 2 s: 40–80 lookups at a fixed 25–50 ms; a handful growing.
    assert!(lookups <= 15, "{lookups} Metadata requests");
}
