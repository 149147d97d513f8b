//! Batches out of the ordinary: aborted transactions, empty control batches, compacted logs with gaps, batches cut short.

use crate::common::*;
use walfetch_support::transactions::{region_records, transaction_marker, transactional_batch};

/// `build_index` over a log with an aborted transaction (as a Java or
/// librdkafka transactional producer leaves it) leaves its records out, as
/// a `read_committed` consumer does: a `read_committed` replay with the
/// index then gets the committed records, not `LostOffsets` on the
/// aborted ones. A transaction still open at the end of the scan is not
/// indexed either: the index ends below it (the last stable offset).
#[tokio::test]
async fn build_index_skips_aborted_transactions() {
    use walfetch::cluster::IsolationLevel;
    use walfetch::codec::ControlType;

    let (scripted, cluster) = an_empty_topic("wal", 1).await;
    let recs = |tag: &str| region_records(5, tag, 2);
    let append = |b: walfetch::codec::EncodedBatch| scripted.append("wal", 0, b.bytes).unwrap();
    let aborted = append(transactional_batch(2, &recs("aborted")));
    append(transaction_marker(2, 2, ControlType::Abort));
    let plain = append(BatchBuilder::new(0).encode(&recs("plain")).unwrap());
    let rule = RegionRule::Key(IdFormat::BigEndian);
    let (index, report) = build_index(&cluster, "wal", 0, &rule, 0, None, 1 << 20)
        .await
        .unwrap();
    let indexed: Vec<i64> = index.region(5).unwrap().offsets().collect();
    assert_eq!(
        indexed,
        [plain, plain + 1],
        "aborted batch at {aborted}, report {report:?}"
    );
    assert_eq!((report.aborted, report.control), (2, 1));
    let options = ReplayOptions::default().with_isolation(IsolationLevel::ReadCommitted);
    let got = consume(&cluster, &index, "wal", 5, options).await;
    assert_eq!(got, Ok(vec![plain, plain + 1]));

    // A transaction left open: its records may yet be aborted.
    let open = append(transactional_batch(3, &recs("open")));
    let (index, _) = build_index(&cluster, "wal", 0, &rule, 0, None, 1 << 20)
        .await
        .unwrap();
    assert_eq!(index.last_index(), Some(open - 1));
    assert_eq!(index.region(5).unwrap().len(), 2);
}

/// `n` records of `region` (its id as the key, big-endian), at offset
/// deltas `0, step, 2 * step, ...` (a step above 1: the gaps compaction
/// leaves inside a batch).
fn keyed(region: RegionId, n: i32, step: i32) -> Vec<NewRecord> {
    (0..n)
        .map(|i| NewRecord {
            offset_delta: i * step,
            key: Some(Bytes::copy_from_slice(&region.to_be_bytes())),
            value: Some(Bytes::from(format!("r{region} {i}"))),
            ..NewRecord::default()
        })
        .collect()
}

/// A batch with no records covering `base..=base + last_delta`, as Kafka's
/// log cleaner writes one (`DefaultRecordBatch.writeEmptyHeader`) to keep a
/// producer's state once all its records are cleaned: `batch`'s 61-byte
/// header with record count 0.
fn emptied(batch: BatchBuilder, base: i64, last_delta: i32) -> Bytes {
    let mut header = batch.encode(&keyed(0, 1, 1)).unwrap().bytes[..61].to_vec();
    header[0..8].copy_from_slice(&base.to_be_bytes());
    header[8..12].copy_from_slice(&49i32.to_be_bytes());
    header[23..27].copy_from_slice(&last_delta.to_be_bytes());
    header[57..61].copy_from_slice(&0i32.to_be_bytes());
    let crc = crc32c::crc32c(&header[21..]);
    header[17..21].copy_from_slice(&crc.to_be_bytes());
    Bytes::from(header)
}

/// Region 5 of `wal` consumed with `index`, then with `scanned` (an index
/// that leaves the region's entries to the scan past its `last_index`),
/// under either isolation: `want` every time.
async fn region_5_reads_under_either_isolation(
    cluster: &Arc<Cluster>,
    index: &WalIndex,
    scanned: &WalIndex,
    want: &[i64],
) {
    use walfetch::cluster::IsolationLevel;

    for isolation in [
        IsolationLevel::ReadCommitted,
        IsolationLevel::ReadUncommitted,
    ] {
        let options = ReplayOptions::default().with_isolation(isolation);
        let got = consume(cluster, index, "wal", 5, options.clone()).await;
        assert_eq!(got.as_deref(), Ok(want), "{isolation:?}");
        let got = consume(cluster, scanned, "wal", 5, options).await;
        assert_eq!(got.as_deref(), Ok(want), "{isolation:?}, scanned");
    }
}

/// The log cleaner keeps a producer's last transaction marker, once its
/// delete horizon has passed, as an empty control batch (record count 0).
/// It marks nothing: `build_index` (read_committed) and replays under
/// either isolation read past it, and the broker's last stable offset does
/// not stop at it.
#[tokio::test]
async fn build_and_replay_read_past_an_empty_control_batch() {
    let (scripted, cluster) = an_empty_topic("wal", 1).await;
    let append = |b: Bytes| scripted.append("wal", 0, b).unwrap();
    append(BatchBuilder::new(0).encode(&keyed(5, 2, 1)).unwrap().bytes);
    let marker = BatchBuilder::new(0)
        .producer(7, 0, 0)
        .transactional(true)
        .control(true);
    let empty = append(emptied(marker, 0, 0));
    let after = append(BatchBuilder::new(0).encode(&keyed(5, 2, 1)).unwrap().bytes);
    assert_eq!((empty, after), (2, 3));

    let rule = RegionRule::Key(IdFormat::BigEndian);
    let (index, report) = build_index(&cluster, "wal", 0, &rule, 0, None, 1 << 20)
        .await
        .unwrap_or_else(|e| panic!("build_index: {e}"));
    assert_eq!((report.indexed, report.control), (4, 0), "{report:?}");
    assert_eq!(index.last_index(), Some(4));
    // The second time all from the scan past `last_index`.
    region_5_reads_under_either_isolation(&cluster, &index, &WalIndex::new(), &[0, 1, 3, 4]).await;
}

/// A compacted log: offset gaps inside a batch and between batches, and
/// empty data batches (record count 0) covering offsets with no record.
/// `build_index` indexes exactly the records there are, and replays with
/// the index, or scanning past an index of the first entry only, yield
/// them under either isolation.
#[tokio::test]
async fn build_and_replay_a_compacted_log_with_gaps_and_empty_batches() {
    use walfetch::index::IndexEntry;

    let (scripted, cluster) = an_empty_topic("wal", 1).await;
    let append_at = |b: Bytes| scripted.append_at("wal", 0, b).unwrap();
    // 0..=4 holding 0, 2 and 4; empty 5..=8; 20..=21; empty 22; 30.
    append_at(BatchBuilder::new(0).encode(&keyed(5, 3, 2)).unwrap().bytes);
    append_at(emptied(BatchBuilder::new(0).producer(3, 0, 0), 5, 3));
    append_at(BatchBuilder::new(20).encode(&keyed(5, 2, 1)).unwrap().bytes);
    append_at(emptied(BatchBuilder::new(0).producer(4, 0, 0), 22, 0));
    append_at(BatchBuilder::new(30).encode(&keyed(5, 1, 1)).unwrap().bytes);
    let want = vec![0, 2, 4, 20, 21, 30];

    let rule = RegionRule::Key(IdFormat::BigEndian);
    let (index, report) = build_index(&cluster, "wal", 0, &rule, 0, None, 1 << 20)
        .await
        .unwrap();
    assert_eq!(report.indexed, 6, "{report:?}");
    assert_eq!(index.last_index(), Some(30));
    let mut first_only = WalIndex::new();
    first_only.push(5, IndexEntry::offset_only(0)).unwrap();
    first_only.set_last_index(0);
    region_5_reads_under_either_isolation(&cluster, &index, &first_only, &want).await;
}

/// Kafka returns a fetch's first batch whole however large (KIP-74); a
/// broker that does not cuts it at the byte limit, and an answer holding
/// only the start of a batch used to end the build there, as if the log
/// ended: an index complete only up to an early offset, and no word of it.
/// `build_index` asks again for the whole batch, and fails, naming the
/// partition and offset, when that answer is cut too.
#[tokio::test]
async fn build_asks_again_for_a_batch_cut_short_and_fails_if_it_stays_cut() {
    let (scripted, cluster) = an_empty_topic("wal", 1).await;
    for _ in 0..3 {
        let batch = BatchBuilder::new(0).encode(&keyed(5, 4, 1)).unwrap().bytes;
        assert!(batch.len() > 100);
        scripted.append("wal", 0, batch).unwrap();
    }
    let rule = RegionRule::Key(IdFormat::BigEndian);
    // The answer to the first fetch is cut to 80 bytes, below its limit of
    // 100, as such a broker answers.
    let cut = || Fault::on(ApiKey::Fetch).then(FaultAction::TruncateRecords { keep: 80 });
    scripted.script(cut());
    let (index, report) = build_index(&cluster, "wal", 0, &rule, 0, None, 100)
        .await
        .unwrap_or_else(|e| panic!("build_index: {e}"));
    assert_eq!(report.indexed, 12, "{report:?}");
    assert_eq!(index.last_index(), Some(11));

    // Cut again when asked again: an error, not an index that ends at 0.
    scripted.script(cut().times(2));
    let error = build_index(&cluster, "wal", 0, &rule, 0, None, 100)
        .await
        .expect_err("a batch that stays cut");
    assert!(
        matches!(
            error,
            BuildError::NoCompleteBatch {
                offset: 0,
                present: 80,
                ..
            }
        ),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(
        message.contains("\"wal\" partition 0") && message.contains("offset 0"),
        "{message}"
    );
}
