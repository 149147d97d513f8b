//! One pass over every partition: every region exactly, no more read than region by region, entries past the last stable offset waited for.

use crate::common::*;

#[tokio::test]
async fn one_pass_recovers_every_region_of_every_partition_exactly() {
    for compression in [Compression::None, Compression::Lz4] {
        let (_broker, cluster, written, full) = setup(900, compression).await;
        let halfway = halfway(&full, &written);
        let checkpoints = checkpoints(&written, 7);
        let want = expected(&written, &checkpoints);
        for (name, indexes) in [("complete", &full), ("last_index halfway", &halfway)] {
            // The index strategy also with the link learned as it goes.
            for (strategy, learn) in [
                (StrategyKind::Index, false),
                (StrategyKind::Index, true),
                (StrategyKind::Estimate, false),
                (StrategyKind::Scan, false),
            ] {
                let options = ReplayOptions::default()
                    .with_strategy(strategy)
                    .with_learn_link(learn);
                let (got, stats) = recover(&cluster, TOPIC, indexes, &checkpoints, options)
                    .await
                    .unwrap_or_else(|e| panic!("{compression:?} {name} {strategy:?}: {e}"));
                assert!(
                    got == want,
                    "{compression:?} {name} {strategy:?}: regions differ"
                );
                let total: usize = want.values().flat_map(|r| r.values()).map(Vec::len).sum();
                assert_eq!(
                    stats.entries + stats.tail_records,
                    total as u64,
                    "{compression:?} {name} {strategy:?}: counted"
                );
                for regions in want.values() {
                    for (region, entries) in regions {
                        let s = &stats.regions[region];
                        assert_eq!(s.entries + s.tail_records, entries.len() as u64);
                    }
                }
            }
        }
    }
}

#[tokio::test]
async fn one_pass_reads_no_more_than_region_by_region() {
    let (_broker, cluster, written, indexes) = setup(1200, Compression::None).await;
    let checkpoints = checkpoints(&written, 11);
    let (_, one_pass) = recover_with_defaults(&cluster, TOPIC, &indexes, &checkpoints)
        .await
        .unwrap();
    let mut by_region = ReplayStats::default();
    for (&(p, region), &from) in &checkpoints {
        let range = ReplayRange {
            topic: TOPIC.into(),
            partition: p,
            region,
            from,
            to: None,
        };
        let index = &indexes[usize::try_from(p).unwrap()];
        let mut consumer =
            Consumer::new(Arc::clone(&cluster), index, range, ReplayOptions::default())
                .await
                .unwrap();
        while let Some(record) = consumer.next().await {
            record.unwrap();
        }
        by_region.add(&consumer.stats());
    }
    assert_eq!(one_pass.entries, by_region.entries);
    assert_eq!(
        by_region.requests, by_region.fetches,
        "one partition's fetches never share a request"
    );
    assert!(
        one_pass.requests < one_pass.fetches,
        "partitions on one broker share requests: {} requests for {} fetches",
        one_pass.requests,
        one_pass.fetches
    );
    assert!(
        one_pass.records_bytes <= by_region.records_bytes,
        "one pass {} bytes, region by region {}",
        one_pass.records_bytes,
        by_region.records_bytes
    );
    assert!(
        one_pass.fetches < by_region.fetches,
        "one pass {} fetches, region by region {}",
        one_pass.fetches,
        by_region.fetches
    );
}

/// A transaction of another producer left open in the WAL's partition
/// (a producer that crashed mid-transaction holds it until
/// `transaction.timeout.ms`) holds the last stable offset below entries
/// the WAL writer wrote after it. A `read_committed` recovery (the
/// default) once read to that last stable offset only, and ended without
/// those entries, as if they were never written. The index says they were:
/// the recovery waits at the broker for the last stable offset to pass
/// them, and yields them once the transaction ends; while it stays open,
/// the recovery ends with an error that names the first entry held back
/// and the last stable offset, never short of entries without a word.
#[tokio::test]
async fn indexed_entries_past_the_last_stable_offset_are_waited_for_not_dropped() {
    use walfetch::codec::{BatchBuilder, ControlType, NewRecord};
    use walfetch::error::Error;
    use walfetch::writer::{WalEntry, WalWriter};
    const HOT: RegionId = 1;
    for ends in [false, true] {
        let scripted = Arc::new(ScriptedCluster::start(1).await.unwrap());
        scripted.create_topic(TOPIC, 1).unwrap();
        let cluster = Arc::new(
            Cluster::connect(ClusterConfig::new([scripted.bootstrap()]))
                .await
                .unwrap(),
        );
        let writer = WalWriter::new(Arc::clone(&cluster), WriterConfig::new(TOPIC, 0));
        let mut written = Vec::new();
        let mut open_at = None;
        for n in 0..40 {
            if n == 20 {
                // Another producer's transaction, never ended (yet).
                let batch = BatchBuilder::new(0)
                    .producer(77, 0, 0)
                    .transactional(true)
                    .encode(&[NewRecord::value(0, "in a transaction")])
                    .unwrap()
                    .bytes;
                open_at = Some(scripted.append(TOPIC, 0, batch).unwrap());
            }
            let value = Bytes::from(format!("entry {n}"));
            let offset = writer
                .append(WalEntry::new(HOT, value.clone()))
                .await
                .unwrap()
                .await
                .unwrap();
            written.push((offset, value));
        }
        let index = writer.close().await.unwrap();
        let open_at = open_at.unwrap();
        let mut recovery = Recovery::builder(Arc::clone(&cluster))
            .options(ReplayOptions::default().with_max_attempts(6))
            .index(TOPIC, 0, &index)
            .region(TOPIC, 0, HOT, 0)
            .build()
            .await
            .unwrap();
        if ends {
            // The transaction ends while the recovery waits.
            let scripted = Arc::clone(&scripted);
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(300)).await;
                let marker = BatchBuilder::new(0)
                    .producer(77, 0, -1)
                    .encode_marker(ControlType::Abort, 0, 0)
                    .unwrap()
                    .bytes;
                scripted.append(TOPIC, 0, marker).unwrap();
            });
        }
        let (got, error) = entries_until_its_error(&mut recovery).await;
        if ends {
            assert!(error.is_none(), "{error:?}");
            assert_eq!(got, written);
        } else {
            let held: Vec<_> = written
                .iter()
                .filter(|(o, _)| *o < open_at)
                .cloned()
                .collect();
            assert_eq!(got, held);
            let error = error.expect("entries held back past the last stable offset");
            let message = error.to_string();
            match error {
                Error::Unstable {
                    offset,
                    last_stable_offset,
                    ..
                } => assert_eq!((offset, last_stable_offset), (open_at + 1, open_at)),
                other => panic!("not Unstable: {other}"),
            }
            assert!(message.contains("last stable offset"), "{message}");
        }
    }
}
