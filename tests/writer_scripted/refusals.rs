//! Refused batches: those behind go again, entries too large, answers at offsets already given.

use crate::common::*;

/// One batch refused for good (`MESSAGE_TOO_LARGE`) with four in flight
/// behind it, and the next answered `NOT_LEADER_OR_FOLLOWER` (a leader
/// election under way): certainly not written, and retriable. Its entry
/// once failed; it now goes again under the new producer id with the
/// batches refused for their sequence behind the refused one.
#[tokio::test]
async fn a_batch_behind_a_refused_one_refused_for_a_passing_reason_goes_again() {
    let (scripted, cluster) = scripted().await;
    let config = WriterConfig::new(TOPIC, 0).with_linger(Duration::MAX);
    let writer = writer_with_a_first_entry(&cluster, config).await;
    scripted.script(Fault::on(ApiKey::Produce).then(FaultAction::PartitionError(
        ResponseError::MessageTooLarge.code(),
    )));
    scripted.script(Fault::on(ApiKey::Produce).then(FaultAction::PartitionError(
        ResponseError::NotLeaderOrFollower.code(),
    )));
    let mut pending = Vec::new();
    for region in 1..=5 as RegionId {
        pending.push(writer.append(WalEntry::new(region, "x")).await.unwrap());
    }
    writer.flush().await.unwrap();
    let mut results = Vec::new();
    for p in pending {
        results.push(p.await.map_err(|e| e.to_string()));
    }
    writer.close().await.unwrap();
    assert!(
        results[0]
            .as_ref()
            .is_err_and(|e| e.contains("MESSAGE_TOO_LARGE")),
        "{results:?}"
    );
    for (n, r) in results.iter().enumerate().skip(1) {
        assert!(r.is_ok(), "entry {n} not written: {r:?}");
    }
    assert_eq!(scripted.high_watermark(TOPIC, 0).unwrap(), 5, "each once");
}

/// A broker answering a batch with a base offset at or below one it gave
/// an earlier batch (reusing offsets): the index cannot take the entries
/// (a region's offsets only grow), and the writer once logged that and
/// acknowledged them all the same, so the index it returned lacked entries
/// below its `last_index`, which a replay by it would skip. The batch now
/// fails, saying it may be in the log, and the writer goes on.
#[tokio::test]
async fn an_answer_at_an_offset_already_given_fails_its_batch_unindexed() {
    let (scripted, cluster) = scripted().await;
    let config = config(WriterMode::Interleaved).with_max_in_flight(1);
    let writer = WalWriter::new(Arc::clone(&cluster), config);
    let first = written(append_all(&writer, &entries(0, 3)).await);
    // Produce v9's first base offset is at byte 21 of the frame (see
    // `an_answer_past_the_largest_offset_fails_its_batch_and_the_writer_goes_on`).
    scripted.script(Fault::on(ApiKey::Produce).then(FaultAction::PatchFrame {
        at: 21,
        bytes: 0i64.to_be_bytes().to_vec(),
    }));
    let results = append_all(&writer, &entries(3, 3)).await;
    for (_, _, r) in &results {
        let e = r.as_ref().expect_err("the batch so answered fails");
        assert!(matches!(e, Error::MaybeWritten { .. }), "{e}");
        assert!(e.to_string().contains("at or below offset 2"), "{e}");
    }
    let more = written(append_all(&writer, &entries(6, 20)).await);
    let index = writer.close().await.expect("closed");
    assert_eq!(index.len(), first.len() + more.len());
    for (region, _, offset) in first.iter().chain(&more) {
        assert!(
            index
                .region(*region)
                .is_some_and(|r| r.entries().iter().any(|e| e.offset == *offset)),
            "region {region} offset {offset} not indexed"
        );
    }
}

/// Appends `(region, payload)` entries and flushes; each entry's payload
/// and result, in append order.
async fn append_and_flush(
    writer: &WalWriter,
    entries: &[(RegionId, Bytes)],
) -> Vec<(RegionId, Bytes, Result<i64, Error>)> {
    let pending = queue_all(writer, entries).await;
    writer.flush().await.unwrap();
    acknowledged(pending).await
}

/// A topic whose `max.message.bytes` (1200) is below the writer's
/// `max_batch_bytes`: a batch of many small entries is refused
/// `MESSAGE_TOO_LARGE`. Every entry of it once failed, although each would
/// fit alone; the batch is now split and its halves sent again (as the
/// Java producer's `splitAndReenqueue` does), under the same producer id,
/// and only the entry too large alone fails, its error naming its batch's
/// size and the limit.
#[tokio::test]
async fn a_batch_larger_than_the_topic_takes_is_split_and_only_an_entry_too_large_alone_fails() {
    let (scripted, cluster) = scripted().await;
    scripted.set_max_message_bytes(TOPIC, Some(1200)).unwrap();
    let config = WriterConfig::new(TOPIC, 0)
        .with_mode(WriterMode::Interleaved)
        .with_max_batch_bytes(16 << 10)
        .with_linger(Duration::MAX);
    let writer = WalWriter::new(Arc::clone(&cluster), config);
    let mut entries: Vec<(RegionId, Bytes)> = (0..24)
        .map(|n| {
            let payload = format!("entry {n} {}", "y".repeat(140));
            ((n % 4 + 1) as RegionId, Bytes::from(payload))
        })
        .collect();
    entries.insert(9, (2, Bytes::from("z".repeat(2000))));
    let results = append_and_flush(&writer, &entries).await;
    let index = writer.close().await.unwrap();
    let mut appended = Vec::new();
    for (n, (region, payload, result)) in results.into_iter().enumerate() {
        match (n, result) {
            (9, Err(e @ Error::EntryTooLarge { bytes, .. })) => {
                assert!(bytes > 2000, "{bytes}");
                assert!(e.to_string().contains("1200 bytes"), "{e}");
            }
            (9, other) => panic!("the entry too large alone: {other:?}"),
            (_, Ok(offset)) => appended.push((region, payload, offset)),
            (n, Err(e)) => panic!("entry {n} fits alone but failed: {e}"),
        }
    }
    let layout = check(&cluster, &appended, &index).await;
    assert_eq!(layout.producer_ids.len(), 1, "{layout:?}");
}

/// The message of an entry too large alone names its batch's size and
/// the limit.
#[tokio::test]
async fn an_entry_too_large_alone_fails_naming_its_size_and_the_limit() {
    let (scripted, cluster) = scripted().await;
    scripted.set_max_message_bytes(TOPIC, Some(1000)).unwrap();
    let config = WriterConfig::new(TOPIC, 0).with_linger(Duration::from_millis(3));
    let writer = WalWriter::new(Arc::clone(&cluster), config);
    let big = writer
        .append(WalEntry::new(1, "q".repeat(1500)))
        .await
        .unwrap();
    let error = big.await.unwrap_err();
    let Error::EntryTooLarge { bytes, .. } = &error else {
        panic!("{error}");
    };
    let message = error.to_string();
    assert!(
        message.contains(&format!("{bytes} bytes")) && message.contains("1000"),
        "{message}"
    );
    assert!(message.contains("MESSAGE_TOO_LARGE"), "{message}");
    // The writer goes on.
    let next = writer.append(WalEntry::new(1, "small")).await.unwrap();
    assert_eq!(next.await.unwrap(), 0);
    writer.close().await.unwrap();
}

/// A flood of batches refused for good (`INVALID_RECORD`, the broker's
/// answer to records it will never take): each refusal once made the
/// writer take a new producer id (InitProducerId), although the broker
/// appended nothing and its sequence was where it was. Now the sequence of
/// what follows is taken back to the refused batch's: one producer id
/// throughout, and everything else written once, in order.
#[tokio::test]
async fn batches_refused_for_good_take_no_new_producer_id() {
    let (scripted, cluster) = scripted().await;
    let config = WriterConfig::new(TOPIC, 0).with_linger(Duration::MAX);
    let writer = writer_with_a_first_entry(&cluster, config).await;
    scripted.reset_stats();
    let mut appended = vec![(1, Bytes::from("first"), 0)];
    for round in 0..4 {
        // The first three of six requests refused: five in flight, the
        // two behind refused for their sequence.
        scripted.script(
            Fault::on(ApiKey::Produce)
                .times(3)
                .then(FaultAction::PartitionError(
                    ResponseError::InvalidRecord.code(),
                )),
        );
        let entries: Vec<(RegionId, Bytes)> = (1..=6)
            .map(|r| (r, Bytes::from(format!("round {round} region {r}"))))
            .collect();
        let results = append_and_flush(&writer, &entries).await;
        for (n, (region, payload, result)) in results.into_iter().enumerate() {
            match result {
                Ok(offset) if n >= 3 => appended.push((region, payload, offset)),
                Err(e) if n < 3 => assert!(e.to_string().contains("INVALID_RECORD"), "{e}"),
                other => panic!("round {round} entry {n}: {other:?}"),
            }
        }
    }
    let index = writer.close().await.unwrap();
    let layout = check(&cluster, &appended, &index).await;
    assert_eq!(layout.producer_ids.len(), 1, "{layout:?}");
    let inits = scripted
        .stats(1)
        .unwrap()
        .requests_of(ApiKey::InitProducerId);
    assert_eq!(inits, 0, "InitProducerId requests after the first");
}

/// A batch refused for good (`INVALID_RECORD`) with four in flight behind
/// it, and the connection lost before their answers: certainly not written (their
/// sequences no longer follow), but their answers lost. They once failed
/// saying they may have been written; they are now looked for in the log
/// (not there; one read of it for all four) and sent again, in order,
/// once each.
#[tokio::test]
async fn batches_behind_a_refused_one_whose_answers_were_lost_go_again() {
    let (scripted, cluster) = scripted().await;
    // One region, one entry a batch: their order in the log is checked.
    let config = WriterConfig::new(TOPIC, 0)
        .with_linger(Duration::MAX)
        .with_max_batch_bytes(64);
    let writer = writer_with_a_first_entry(&cluster, config).await;
    scripted.reset_stats();
    scripted.script(Fault::on(ApiKey::Produce).then(FaultAction::PartitionError(
        ResponseError::InvalidRecord.code(),
    )));
    scripted.script(Fault::on(ApiKey::Produce).then(FaultAction::DropRequest));
    let entries: Vec<(RegionId, Bytes)> = (1..=8)
        .map(|n| (1, Bytes::from(format!("entry {n} of region 1"))))
        .collect();
    let results = append_and_flush(&writer, &entries).await;
    let index = writer.close().await.unwrap();
    assert!(scripted.pending_faults().is_empty());
    // The four batches whose answers were lost are looked for in one read
    // of the log, not one each.
    let fetches = scripted.stats(1).unwrap().requests_of(ApiKey::Fetch);
    assert_eq!(fetches, 1, "Fetch requests to look for them");
    let mut appended = vec![(1, Bytes::from("first"), 0)];
    for (n, (region, payload, result)) in results.into_iter().enumerate() {
        match result {
            Ok(offset) if n > 0 => appended.push((region, payload, offset)),
            Err(e) if n == 0 => assert!(e.to_string().contains("INVALID_RECORD"), "{e}"),
            other => panic!("entry {n}: {other:?}"),
        }
    }
    let layout = check(&cluster, &appended, &index).await;
    assert_eq!(layout.pure_batches, 8, "one entry a batch: {layout:?}");
}
