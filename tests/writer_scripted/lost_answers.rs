//! Lost, timed-out and undecodable answers: the batch is looked for in the log and sent again, never twice.

use crate::common::*;

/// Writes 900 entries with a fault on one Produce in the middle; every
/// entry is written once, in order, with an exact index. Returns how many
/// Produce requests the broker received and how many batches the log has.
async fn lost_answer(
    action: FaultAction,
    duplicates: DuplicateAnswer,
    mode: WriterMode,
    in_flight: usize,
) -> (u64, usize) {
    let (produced, batches, _) = lost_answer_fetches(action, duplicates, mode, in_flight).await;
    (produced, batches)
}

/// [`lost_answer`], with the writer's Fetch requests by `max_wait_ms`.
async fn lost_answer_fetches(
    action: FaultAction,
    duplicates: DuplicateAnswer,
    mode: WriterMode,
    in_flight: usize,
) -> (u64, usize, BTreeMap<i32, u64>) {
    let (scripted, cluster) = scripted().await;
    scripted.set_duplicate_answer(duplicates);
    let writer = WalWriter::new(
        Arc::clone(&cluster),
        config(mode).with_max_in_flight(in_flight),
    );
    let first = entries(0, 300);
    let mut appended = written(append_all(&writer, &first).await);
    // The fault hits the first Produce of the next entries, with more
    // batches behind it.
    scripted.script(Fault::on(ApiKey::Produce).then(action.clone()));
    let rest = entries(300, 600);
    appended.extend(written(append_all(&writer, &rest).await));
    let index = writer.close().await.expect("closed");
    assert!(scripted.pending_faults().is_empty(), "the fault fired");
    let fetch_waits = scripted.stats(1).unwrap().fetch_max_waits;
    let log = read_log(&cluster, TOPIC, 0).await;
    let layout = check_written(&log, &appended, &index, true);
    assert_eq!(
        layout.producer_ids.len(),
        1,
        "{action:?}: sent again under the same producer id"
    );
    let produced = scripted.stats(1).unwrap().requests_of(ApiKey::Produce);
    (produced, log.len(), fetch_waits)
}

#[tokio::test]
async fn a_lost_answer_is_sent_again_not_duplicated() {
    for mode in [WriterMode::Clustered, WriterMode::Interleaved] {
        for duplicates in [
            DuplicateAnswer::OriginalOffset,
            DuplicateAnswer::DuplicateSequenceNumber,
            DuplicateAnswer::NoOffset,
        ] {
            let (produced, batches, fetch_waits) =
                lost_answer_fetches(FaultAction::CutBeforeResponse, duplicates, mode, 5).await;
            assert!(
                produced > batches as u64,
                "{mode:?} {duplicates:?}: {produced} Produce requests for {batches} batches"
            );
            // Finding a duplicate acknowledged without its offset reads the
            // log, and lets the broker wait for nothing (Tansu 0.6 sleeps
            // out any wait asked for, even with the records at hand).
            let located = duplicates != DuplicateAnswer::OriginalOffset;
            assert_eq!(
                (located, fetch_waits.keys().all(|&ms| ms == 0)),
                (!fetch_waits.is_empty(), true),
                "{mode:?} {duplicates:?}: Fetch requests by max_wait_ms {fetch_waits:?}"
            );
        }
    }
}

#[tokio::test]
async fn a_timed_out_request_is_sent_again_with_those_behind_it() {
    // Five in flight: the batches sent behind the lost one were answered,
    // but go again with it (their answers are dropped with the
    // connection): the broker recognises every one.
    let (produced, batches) = lost_answer(
        FaultAction::LoseResponse,
        DuplicateAnswer::OriginalOffset,
        WriterMode::Clustered,
        5,
    )
    .await;
    assert!(
        produced >= batches as u64 + 2,
        "several in flight, sent again: {produced} Produce requests for {batches} batches"
    );
    // One in flight: only the lost one goes again.
    let (produced, batches) = lost_answer(
        FaultAction::LoseResponse,
        DuplicateAnswer::OriginalOffset,
        WriterMode::Clustered,
        1,
    )
    .await;
    assert_eq!(produced, batches as u64 + 1);
}

/// A batch refused for good (`INVALID_RECORD`; a batch refused
/// `MESSAGE_TOO_LARGE` is split instead, see
/// `a_batch_larger_than_the_topic_takes_is_split_and_only_an_entry_too_large_alone_fails`)
/// fails alone; the batches behind it, refused for their sequence, follow
/// under the same producer id, their sequence taken back to the refused
/// batch's (they once went under a new one).
#[tokio::test]
async fn a_refused_batch_fails_alone_and_the_rest_follow_under_the_same_producer_id() {
    let (scripted, cluster) = scripted().await;
    let writer = WalWriter::new(Arc::clone(&cluster), config(WriterMode::Clustered));
    let mut appended = written(append_all(&writer, &entries(0, 300)).await);
    scripted.script(Fault::on(ApiKey::Produce).then(FaultAction::PartitionError(
        ResponseError::InvalidRecord.code(),
    )));
    let results = append_all(&writer, &entries(300, 600)).await;
    let mut failed = 0;
    for (region, payload, result) in results {
        match result {
            Ok(offset) => appended.push((region, payload, offset)),
            Err(e) => {
                failed += 1;
                assert!(e.to_string().contains("INVALID_RECORD"), "{e}");
            }
        }
    }
    let index = writer.close().await.expect("closed");
    assert!(failed > 0, "the refused batch's entries fail");
    // The refused batch is not in the log; everything else is, once.
    let layout = check(&cluster, &appended, &index).await;
    assert_eq!(
        layout.producer_ids.len(),
        1,
        "the same producer id: {layout:?}"
    );
}

#[tokio::test]
async fn an_answer_past_the_largest_offset_fails_its_batch_and_the_writer_goes_on() {
    let (scripted, cluster) = scripted().await;
    let config = config(WriterMode::Interleaved).with_max_in_flight(1);
    let writer = WalWriter::new(Arc::clone(&cluster), config);
    // In Produce v9's answer (the scripted broker's newest version), the
    // first partition's base offset is at byte 21 of the frame for a
    // three-letter topic: length 4, correlation id 4, tagged fields 1,
    // topics 1, name 1 + 3, partitions 1, index 4, error code 2.
    scripted.script(Fault::on(ApiKey::Produce).then(FaultAction::PatchFrame {
        at: 21,
        bytes: (i64::MAX - 1).to_be_bytes().to_vec(),
    }));
    let results = append_all(&writer, &entries(0, 3)).await;
    let failed: Vec<_> = results.iter().filter_map(|r| r.2.as_ref().err()).collect();
    assert!(!failed.is_empty(), "the batch so answered fails");
    for e in failed {
        assert!(e.to_string().contains("past the largest offset"), "{e}");
    }
    // The writer goes on, and indexes only what it could place.
    let ok = results.iter().filter(|r| r.2.is_ok()).count();
    let more = written(append_all(&writer, &entries(3, 20)).await);
    let index = writer.close().await.expect("closed");
    assert!(more.windows(2).all(|w| w[0].2 < w[1].2), "{more:?}");
    assert_eq!(index.len(), ok + more.len());
}

/// A broker's answer the client cannot decode (a broker's bug, a stream
/// garbled past the frame) does not say whether the batch was written: the
/// writer looks for it in the log, so that an entry that was written is
/// neither reported failed (which a caller would write again) nor lost.
#[tokio::test]
async fn a_batch_whose_answer_cannot_be_decoded_is_looked_for_in_the_log() {
    for in_flight in [1, 5] {
        let (scripted, cluster) = scripted().await;
        an_undecodable_answer_is_found_in_the_log(&scripted, cluster, in_flight).await;
    }
}

/// Scripts the next Produce answer to be one the client cannot decode: in
/// Produce v9's answer the topics' count (a compact array length) is byte
/// 9 of the frame; claiming 126 topics, the answer ends long before them.
fn garble_the_next_produce_answer(scripted: &ScriptedCluster) {
    scripted.script(Fault::on(ApiKey::Produce).then(FaultAction::PatchFrame {
        at: 9,
        bytes: vec![0x7f],
    }));
}

/// Writes 90 entries with `in_flight` batches at most, the answer to the
/// first Produce after the 30th garbled: every entry is written once, at
/// the offset the writer answered, and indexed.
async fn an_undecodable_answer_is_found_in_the_log(
    scripted: &ScriptedCluster,
    cluster: Arc<Cluster>,
    in_flight: usize,
) {
    let config = config(WriterMode::Clustered).with_max_in_flight(in_flight);
    let writer = WalWriter::new(Arc::clone(&cluster), config);
    let mut appended = written(append_all(&writer, &entries(0, 30)).await);
    garble_the_next_produce_answer(scripted);
    appended.extend(written(append_all(&writer, &entries(30, 90)).await));
    assert!(scripted.pending_faults().is_empty(), "the fault was met");
    let index = writer.close().await.expect("closed");
    check(&cluster, &appended, &index).await;
}

/// ... and a batch so answered that is not in the log was not written: its
/// entries fail (a caller may write them again), saying so, and the
/// writer goes on under a new producer id.
#[tokio::test]
async fn a_batch_whose_answer_cannot_be_decoded_and_is_not_in_the_log_fails() {
    let (scripted, cluster) = scripted().await;
    let config = config(WriterMode::Clustered).with_max_in_flight(1);
    let writer = WalWriter::new(Arc::clone(&cluster), config);
    let mut appended = written(append_all(&writer, &entries(0, 30)).await);
    // The broker forgets the producer, so it refuses the next batch
    // (`UNKNOWN_PRODUCER_ID`), in an answer that cannot be decoded.
    scripted.expire_producers(TOPIC, 0).expect("expired");
    garble_the_next_produce_answer(&scripted);
    let mut failed = 0;
    for (region, payload, result) in append_all(&writer, &entries(30, 90)).await {
        match result {
            Ok(offset) => appended.push((region, payload, offset)),
            Err(e) => {
                failed += 1;
                let e = e.to_string();
                assert!(
                    e.contains("cannot be decoded") && e.contains("no batch"),
                    "{e}"
                );
            }
        }
    }
    assert!(failed > 0, "the batch so answered fails");
    let index = writer.close().await.expect("closed");
    // The failed entries are not in the log; every other entry is, once.
    let layout = check(&cluster, &appended, &index).await;
    assert_eq!(
        layout.producer_ids.len(),
        2,
        "a new producer id: {layout:?}"
    );
}

#[tokio::test]
async fn without_idempotence_a_lost_answer_fails_its_entries_and_is_not_sent_again() {
    let (scripted, cluster) = scripted().await;
    let config = config(WriterMode::Interleaved)
        .with_idempotent(false)
        .with_max_in_flight(1);
    let writer = WalWriter::new(Arc::clone(&cluster), config);
    let first = written(append_all(&writer, &entries(0, 100)).await);
    scripted.script(Fault::on(ApiKey::Produce).then(FaultAction::CutBeforeResponse));
    let results = append_all(&writer, &entries(100, 200)).await;
    let index = writer.close().await.expect("closed");
    let failed: Vec<_> = results.iter().filter(|r| r.2.is_err()).collect();
    assert!(!failed.is_empty(), "the batch whose answer was lost fails");
    // Its error says it may be in the log (it is): appended again, it would
    // be there twice.
    for (_, _, e) in &failed {
        let e = e.as_ref().unwrap_err();
        assert!(matches!(e, Error::MaybeWritten { .. }), "{e}");
    }
    // The broker appended the batch once; the writer did not send it again
    // and did not index it.
    let log = read_log(&cluster, TOPIC, 0).await;
    let records: usize = log.iter().map(|b| b.records.len()).sum();
    assert_eq!(records, 300, "every entry once, the lost batch included");
    let ok = results.iter().filter(|r| r.2.is_ok()).count();
    assert_eq!(
        index.len(),
        first.len() + ok,
        "failed entries are not indexed"
    );
    assert_eq!(
        scripted.stats(1).unwrap().requests_of(ApiKey::Produce),
        log.len() as u64,
        "one Produce per batch"
    );
}

/// A batch's answer is lost (the request times out) after the broker
/// appended it, and the broker then forgets the producer (a restart
/// without its producer snapshot, an expired producer): the batch sent
/// again is refused `UNKNOWN_PRODUCER_ID`. That refusal says nothing of the
/// first send, which may be in the log: the writer once sent the batch
/// under a new producer id at once, and the entry was written twice. It
/// now looks for the batch in the log under its old stamp first, and
/// finds it written.
#[tokio::test]
async fn a_batch_whose_answer_was_lost_is_looked_for_before_it_goes_under_a_new_producer_id() {
    a_lost_answer_then_a_forgotten_producer_leaves_the_entry_once(None).await;
}

/// The body of the tests of a lost answer and a producer the broker then
/// forgot (its habits set to `habits` first, if any): the writer finds the
/// batch in the log, the entry is there once, acknowledged at its offset.
async fn a_lost_answer_then_a_forgotten_producer_leaves_the_entry_once(
    habits: Option<walfetch_testkit::Habits>,
) {
    let (scripted, cluster) = scripted().await;
    if let Some(habits) = habits {
        scripted.set_habits(1, habits).unwrap();
    }
    let config = WriterConfig::new(TOPIC, 0).with_linger(Duration::from_millis(3));
    let writer = writer_with_a_first_entry(&cluster, config).await;
    // The broker loses the producer's state before the batch goes again.
    let offset = lose_the_answer_then_forget_the_producer(&scripted, &writer, "written once").await;
    writer.close().await.unwrap();
    let copies = copies_in_log(&cluster, "written once").await;
    assert_eq!(copies, 1, "the entry is in the log {copies} times");
    assert_eq!(
        offset.unwrap(),
        1,
        "acknowledged where the first send put it"
    );
}

/// Five in flight, a broker that answers a duplicate with
/// `DUPLICATE_SEQUENCE_NUMBER` (Kafka 0.11, Tansu), and a principal that
/// may Write the topic but not Read it (its Fetch refused
/// `TOPIC_AUTHORIZATION_FAILED`, a usual producer ACL). Batch 1 is appended
/// and its answer lost; sent again, the broker says it has it, but the
/// writer cannot read the log to find its offset. Its entry once failed
/// with the Fetch's error (as if not written) and the writer took a new
/// producer id; batch 2, its answer lost too, then went under the new id
/// and was written twice. Now batch 1's entry fails saying it was written
/// at an offset unknown, the producer goes on, and no entry is in the log
/// twice or reported failed while in the log without saying so.
#[tokio::test]
async fn a_duplicate_whose_offset_cannot_be_read_is_reported_written_and_nothing_goes_twice() {
    let (scripted, cluster) = scripted().await;
    scripted.set_duplicate_answer(DuplicateAnswer::DuplicateSequenceNumber);
    let config = WriterConfig::new(TOPIC, 0).with_linger(Duration::MAX);
    let writer = WalWriter::new(Arc::clone(&cluster), config);
    // Produce 1 appended, the connection cut (2 to 5 never read). Sent
    // again: 1 is answered (a duplicate), 2 appended and the connection
    // cut.
    scripted.script(Fault::on(ApiKey::Produce).then(FaultAction::CutBeforeResponse));
    scripted.script(Fault::on(ApiKey::Produce).then(FaultAction::Delay(Duration::ZERO)));
    scripted.script(Fault::on(ApiKey::Produce).then(FaultAction::CutBeforeResponse));
    scripted.script(Fault::on(ApiKey::Fetch).then(FaultAction::PartitionError(
        ResponseError::TopicAuthorizationFailed.code(),
    )));
    let mut pending = Vec::new();
    for region in 1..=6 as RegionId {
        let payload = Bytes::from(format!("the entry of region {region}"));
        let appended = writer
            .append(WalEntry::new(region, payload.clone()))
            .await
            .unwrap();
        pending.push((payload, appended));
    }
    writer.flush().await.unwrap();
    let mut results = Vec::new();
    for (payload, appended) in pending {
        results.push((payload, appended.await));
    }
    writer.close().await.unwrap();
    assert!(scripted.pending_faults().is_empty(), "every fault fired");
    let log = read_log(&cluster, TOPIC, 0).await;
    let mut copies: BTreeMap<Bytes, usize> = BTreeMap::new();
    for r in log.iter().flat_map(|b| &b.records) {
        *copies.entry(r.value.clone().unwrap()).or_default() += 1;
    }
    let report: Vec<String> = results
        .iter()
        .map(|(p, r)| {
            let n = copies.get(p).copied().unwrap_or(0);
            let said = r.as_ref().map_err(ToString::to_string);
            format!("{p:?}: {n} in the log, the writer said {said:?}")
        })
        .collect();
    let report = report.join("\n");
    for (payload, result) in &results {
        let n = copies.get(payload).copied().unwrap_or(0);
        assert!(n <= 1, "written {n} times:\n{report}");
        match result {
            Ok(offset) => {
                assert_eq!(n, 1, "{report}");
                let at = log
                    .iter()
                    .flat_map(|b| &b.records)
                    .find(|r| r.offset == *offset);
                assert_eq!(at.and_then(|r| r.value.as_ref()), Some(payload), "{report}");
            }
            Err(Error::WrittenOffsetUnknown { .. } | Error::MaybeWritten { .. }) => {}
            Err(_) => assert_eq!(n, 0, "reported failed but written:\n{report}"),
        }
    }
    assert!(
        matches!(results[0].1, Err(Error::WrittenOffsetUnknown { .. })),
        "{report}"
    );
    assert!(results[1..].iter().all(|(_, r)| r.is_ok()), "{report}");
}

/// With the cluster's default timeouts (`request_timeout` 30 s and
/// `produce_timeout` 30 s: a Produce's answer is waited for 60 s) and
/// retry deadline (30 s), a Produce whose answer was lost was never sent
/// again, although the module docs promise it: when it timed out, the
/// batch was past its deadline and failed at once, the broker having
/// appended it. A sent batch's deadline now has one answer's time on top.
/// When every answer is lost, the entry fails saying it may have been
/// written. Paused clock: the minutes pass at once.
#[tokio::test(start_paused = true)]
async fn with_the_default_timeouts_a_produce_whose_answer_was_lost_is_sent_again() {
    let scripted = ScriptedCluster::start(1).await.expect("scripted broker");
    scripted.create_topic(TOPIC, 1).expect("topic");
    let config = ClusterConfig::new([scripted.bootstrap()]);
    let cluster = Arc::new(Cluster::connect(config).await.expect("bootstrap"));
    let config = WriterConfig::new(TOPIC, 0).with_linger(Duration::from_millis(3));
    let writer = writer_with_a_first_entry(&cluster, config).await;
    scripted.script(Fault::on(ApiKey::Produce).then(FaultAction::LoseResponse));
    let lost = writer
        .append(WalEntry::new(2, "lost answer"))
        .await
        .unwrap();
    assert_eq!(lost.await.unwrap(), 1, "sent again, found written at 1");
    assert_eq!(scripted.high_watermark(TOPIC, 0).unwrap(), 2, "once");
    // No answer ever: the entry fails after its second send, saying it
    // may be in the log (it is).
    scripted.script(
        Fault::on(ApiKey::Produce)
            .times(10)
            .then(FaultAction::LoseResponse),
    );
    scripted.reset_stats();
    let lost = writer.append(WalEntry::new(3, "never answered")).await;
    let error = lost.unwrap().await.unwrap_err();
    assert!(matches!(error, Error::MaybeWritten { .. }), "{error}");
    assert!(
        error.to_string().contains("may have been written"),
        "{error}"
    );
    let produced = scripted.stats(1).unwrap().requests_of(ApiKey::Produce);
    assert_eq!(produced, 2, "sent again once: {error}");
    scripted.clear_faults();
    writer.close().await.unwrap();
}

/// [`a_batch_whose_answer_was_lost_is_looked_for_before_it_goes_under_a_new_producer_id`]
/// against a broker that answers a fetch allowed to wait under 50 ms with
/// no records and no error below its high watermark (Kafka does when a read
/// from tiered storage outlasts `remote.fetch.max.wait.ms`). The writer
/// looked for the batch with one fetch that may not wait, took the empty
/// answer for "not in the log", and sent the batch again under a new
/// producer id: the entry was written twice. It now asks again, allowing
/// a growing wait, and finds it.
#[tokio::test]
async fn a_lost_answer_is_found_in_a_log_that_answers_hurried_fetches_with_nothing() {
    a_lost_answer_then_a_forgotten_producer_leaves_the_entry_once(Some(
        walfetch_testkit::Habits::EMPTY_WHEN_HURRIED,
    ))
    .await;
}

/// ... and against a broker that never reads the log in time (every fetch
/// answered with no records): the search gives up, and the entry fails
/// saying it may have been written (it was), never sent again.
#[tokio::test]
async fn a_lost_answer_not_found_in_a_log_never_read_in_time_may_have_been_written() {
    let (scripted, cluster) = scripted().await;
    let config = WriterConfig::new(TOPIC, 0).with_linger(Duration::from_millis(3));
    let writer = writer_with_a_first_entry(&cluster, config).await;
    scripted
        .set_habits(
            1,
            walfetch_testkit::Habits {
                empty_below_wait_ms: 60_000,
                ..walfetch_testkit::Habits::KAFKA
            },
        )
        .unwrap();
    let error = lose_the_answer_then_forget_the_producer(&scripted, &writer, "lost")
        .await
        .unwrap_err();
    assert!(matches!(error, Error::MaybeWritten { .. }), "{error}");
    assert!(error.to_string().contains("held no batch"), "{error}");
    writer.close().await.unwrap();
    scripted
        .set_habits(1, walfetch_testkit::Habits::KAFKA)
        .unwrap();
    assert_eq!(scripted.high_watermark(TOPIC, 0).unwrap(), 2, "once");
}

/// [`a_batch_whose_answer_cannot_be_decoded_is_looked_for_in_the_log`]
/// against a broker that answers hurried fetches with no records: the
/// entries once failed saying they were not written, while they were in
/// the log (a caller writing them again would write them twice).
#[tokio::test]
async fn an_undecodable_answer_is_found_in_a_log_that_answers_hurried_fetches_with_nothing() {
    let (scripted, cluster) = scripted().await;
    scripted
        .set_habits(1, walfetch_testkit::Habits::EMPTY_WHEN_HURRIED)
        .unwrap();
    an_undecodable_answer_is_found_in_the_log(&scripted, cluster, 1).await;
}
