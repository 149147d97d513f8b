//! Answers not held back: by the task budget, by throttling, by a paced metadata read.

use crate::common::*;

#[tokio::test]
async fn a_queued_produce_is_on_the_connection_even_with_the_task_budget_spent() {
    // The writer keeps its requests in order by queueing each frame before
    // the next: `produce_queued` must queue it whatever the calling task's
    // cooperative budget (spent under load, when `recv` keeps finding
    // entries), or a later batch could overtake it.
    let (_scripted, cluster) = scripted().await;
    let (connection, _) = cluster.leader_connection(TOPIC, 0).await.unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    for n in 0..100_000 {
        tx.send(n).unwrap();
    }
    tokio::task::yield_now().await;
    // Each `recv` that finds an entry spends budget; once spent, `recv`
    // says "not yet" with entries waiting.
    let mut spent = false;
    for _ in 0..100_000 {
        if futures::poll!(std::pin::pin!(rx.recv())).is_pending() {
            spent = true;
            break;
        }
    }
    assert!(spent, "the task's budget is spent");
    let before = connection.stats().requests;
    let records = [walfetch::codec::NewRecord::value(
        0,
        Bytes::from_static(b"entry"),
    )];
    let batch = walfetch::codec::BatchBuilder::new(0)
        .encode(&records)
        .unwrap()
        .bytes;
    let answer = cluster
        .produce_queued(Arc::clone(&connection), TOPIC, 0, batch)
        .await;
    assert_eq!(
        connection.stats().requests,
        before + 1,
        "the frame is queued when produce_queued returns"
    );
    assert_eq!(answer.await.unwrap(), 0);
}

/// A throttled Produce answer (KIP-219, `throttle_time_ms` 3 s) while five
/// requests are in flight: the other four were written and answered at
/// once, but the writer task waited out the throttle inside its next send
/// (getting the leader's connection) and read no answer meanwhile. Now
/// only its sends wait; the entries already written are acknowledged at
/// once. Paused clock: the throttle's wait would show as 3 s.
#[tokio::test(start_paused = true)]
async fn a_throttled_answer_does_not_hold_back_the_answers_behind_it() {
    let (scripted, cluster) = scripted().await;
    let config = WriterConfig::new(TOPIC, 0).with_linger(Duration::MAX);
    let writer = writer_with_a_first_entry(&cluster, config).await;
    scripted
        .script(Fault::on(ApiKey::Produce).then(FaultAction::ThrottleTime(Duration::from_secs(3))));
    let pending = one_entry_each_of_six_regions(&writer).await;
    let started = tokio::time::Instant::now();
    let mut pending = pending.into_iter();
    let first_five: Vec<Appended> = pending.by_ref().take(5).collect();
    {
        let flush = writer.flush();
        tokio::pin!(flush);
        let offsets = tokio::select! {
            _ = &mut flush => panic!("flushed before the throttle ended"),
            offsets = futures::future::join_all(first_five) => offsets,
        };
        let took = started.elapsed();
        assert!(offsets.iter().all(Result::is_ok), "{offsets:?}");
        assert!(
            took < Duration::from_secs(1),
            "the batches sent before the throttle were acknowledged after {took:?}"
        );
        // The sixth waits out the throttle, then goes.
        flush.await.unwrap();
    }
    assert!(started.elapsed() >= Duration::from_secs(3));
    pending.next().unwrap().await.unwrap();
    writer.close().await.unwrap();
}

/// The partition's leader dropped from the cache just after a Metadata
/// read (another partition of the topic answered `NOT_LEADER_OR_FOLLOWER`
/// to a fetch), with a retry backoff of 3 s: the next read of the topic
/// may go only 3 s after the last. The writer task once waited those 3 s
/// inside its next send (the leader lookup), reading no answer: a batch
/// written meanwhile was acknowledged only then. Now its sends wait and its
/// answers do not. Paused clock.
#[tokio::test(start_paused = true)]
async fn a_paced_metadata_read_does_not_hold_back_the_writers_answers() {
    let scripted = ScriptedCluster::start(1).await.expect("scripted broker");
    scripted.create_topic(TOPIC, 2).expect("topic");
    let mut config = ClusterConfig::new([scripted.bootstrap()]);
    config.retry = RetryPolicy {
        initial_backoff: Duration::from_secs(3),
        max_backoff: Duration::from_secs(3),
        deadline: Duration::from_secs(60),
        ..RetryPolicy::default()
    };
    let cluster = Arc::new(Cluster::connect(config).await.expect("bootstrap"));
    let config = WriterConfig::new(TOPIC, 0).with_linger(Duration::from_millis(3));
    let writer = writer_with_a_first_entry(&cluster, config).await;
    // A Metadata read now.
    cluster.invalidate(TOPIC);
    cluster.leader(TOPIC, 0).await.unwrap();
    // The next batch is written at once and answered after 200 ms.
    scripted
        .script(Fault::on(ApiKey::Produce).then(FaultAction::Delay(Duration::from_millis(200))));
    let started = tokio::time::Instant::now();
    let answered_late = writer
        .append(WalEntry::new(2, "answered late"))
        .await
        .unwrap();
    while scripted.high_watermark(TOPIC, 0).unwrap() < 2 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    // The topic's leaders dropped from the cache: the next lookup must
    // wait for the next read.
    scripted.script(
        Fault::on(ApiKey::Fetch)
            .partition(1)
            .then(FaultAction::PartitionError(
                ResponseError::NotLeaderOrFollower.code(),
            )),
    );
    let fetching = {
        let cluster = Arc::clone(&cluster);
        tokio::spawn(async move {
            let params = walfetch::cluster::FetchParams::new(TOPIC, 1, 0);
            cluster.fetch(&params).await
        })
    };
    while !scripted.pending_faults().is_empty() {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    tokio::time::sleep(Duration::from_millis(1)).await;
    // A batch to send while the lookup is held back.
    let behind = writer.append(WalEntry::new(3, "behind")).await.unwrap();
    assert_eq!(answered_late.await.unwrap(), 1);
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(1),
        "a written batch was acknowledged after {took:?}"
    );
    assert_eq!(behind.await.unwrap(), 2);
    fetching.await.unwrap().unwrap();
    writer.close().await.unwrap();
}
