//! The buffer of bytes held: full of lingering groups, a dropped writer, appends that wait.

use crate::common::*;

/// A writer whose batches go only when full or flushed (a linger of
/// `Duration::MAX`, one in flight), given one 64 KiB entry for each of 520
/// regions: 33 MiB, past `BUFFER_BYTES`, none of their groups near
/// `max_batch_bytes`. The entries' acknowledgements.
async fn a_buffer_full_of_lingering_groups(cluster: &Arc<Cluster>) -> (WalWriter, Vec<Appended>) {
    let config = WriterConfig::new(TOPIC, 0)
        .with_linger(Duration::MAX)
        .with_max_in_flight(1);
    let writer = WalWriter::new(Arc::clone(cluster), config);
    let payload = Bytes::from(vec![7u8; 64 << 10]);
    let mut pending = Vec::new();
    let fill = async {
        for region in 0..520u64 {
            let entry = WalEntry::new(region, payload.clone());
            pending.push(writer.append(entry).await.expect("queued"));
        }
    };
    tokio::time::timeout(Duration::from_secs(20), fill)
        .await
        .expect("appends go on once the buffer is full");
    (writer, pending)
}

/// With the buffer full of groups that are neither full nor due (a linger
/// of `Duration::MAX`), the writer stopped taking from its queue: a flush
/// behind the entries was never read, and `flush` and `close` hung. At the
/// cap the oldest group now goes.
#[tokio::test]
async fn a_buffer_full_of_lingering_groups_is_sent_and_a_flush_returns() {
    let (_scripted, cluster) = scripted().await;
    let (writer, pending) = a_buffer_full_of_lingering_groups(&cluster).await;
    tokio::time::timeout(Duration::from_secs(20), writer.flush())
        .await
        .expect("the flush returns")
        .expect("flushed");
    for p in pending {
        p.await.expect("written");
    }
    writer.close().await.expect("closed");
}

/// ... and a writer dropped without `close` with its buffer so full still
/// writes what it was given, then ends.
#[tokio::test]
async fn a_dropped_writer_with_a_full_buffer_still_writes_its_entries() {
    let (scripted, cluster) = scripted().await;
    let (writer, pending) = a_buffer_full_of_lingering_groups(&cluster).await;
    drop(writer);
    let results = tokio::time::timeout(Duration::from_secs(20), futures::future::join_all(pending))
        .await
        .expect("the dropped writer's entries are answered");
    assert!(results.iter().all(Result::is_ok));
    assert_eq!(scripted.high_watermark(TOPIC, 0).unwrap(), 520);
}

/// `append` waits once the writer holds `buffer_bytes` of entries (the
/// Java producer's `buffer.memory`): it used to wait only when its queue
/// held 16,384 entries, whatever their size (16 GiB of 1 MiB entries).
#[tokio::test]
async fn append_waits_once_the_buffer_bytes_are_held() {
    let (scripted, cluster) = scripted_with_deadline(Duration::from_secs(60)).await;
    let config = WriterConfig::new(TOPIC, 0).with_linger(Duration::from_millis(3));
    let buffer = config.buffer_bytes();
    let writer = writer_with_a_first_entry(&cluster, config).await;
    // Nothing can be sent: entries stay held.
    lose_the_leader(&scripted, &cluster);
    let payload = Bytes::from(vec![1u8; 1 << 20]);
    let mut accepted = 0usize;
    let mut pending = Vec::new();
    for n in 0..2_000u64 {
        let entry = WalEntry::new(n % 8, payload.clone());
        match tokio::time::timeout(Duration::from_millis(200), writer.append(entry)).await {
            Ok(appended) => {
                pending.push(appended.expect("queued"));
                accepted += 1;
            }
            Err(_) => break,
        }
    }
    assert_eq!(
        accepted,
        buffer / ((1 << 20) + 64),
        "append waits at {buffer} bytes held"
    );
    // An entry larger than the buffer is refused, not waited for.
    let huge = WalEntry::new(1, Bytes::from(vec![0u8; buffer + 1]));
    let refused = writer.append(huge).await.expect_err("refused");
    assert!(refused.to_string().contains("buffer_bytes"), "{refused}");
    assert!(
        refused
            .to_string()
            .contains("topic \"wal\" partition 0: an entry of region 1"),
        "{refused}"
    );
}
