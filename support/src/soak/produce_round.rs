//! A produce round: a writer writes to a topic of its own under faults, then its entries are recovered and checked.

use super::checks::*;
use super::common::*;
use super::faults::*;
use super::recovery_round::*;
use super::report::*;
use super::world::*;

pub(crate) async fn produce_round(
    rng: &mut StdRng,
    world: &mut World,
    report: &mut SoakReport,
) -> u64 {
    world.produce_topics += 1;
    let topic = format!("produced-{}", world.produce_topics);
    world.broker.create_topic(&topic, 1).expect("topic");
    let n = rng.random_range(1..=6);
    let faults: Vec<_> = (0..n).map(|_| produce_fault(rng)).collect();
    let queued = queue(world, faults);
    let mut config = WriterConfig::new(topic.clone(), 0);
    config.max_batch_bytes = 2 << 10;
    config.linger = Duration::from_millis(1);
    let writer = WalWriter::new(Arc::clone(&world.cluster), config);
    let mut pending = Vec::new();
    let entries = rng.random_range(20..120);
    for n in 0..entries {
        let region = rng.random_range(0..4u64);
        let payload = Bytes::from(format!("{topic} r{region} n{n} {}", "y".repeat(n % 97)));
        match writer.append(WalEntry::new(region, payload.clone())).await {
            Ok(appended) => pending.push((region, payload, appended)),
            Err(e) => {
                SoakReport::count(&mut report.errors, format!("produce.{}", error_kind(&e)), 1)
            }
        }
    }
    let mut acked: BTreeMap<RegionId, Vec<(i64, Bytes)>> = BTreeMap::new();
    // Failed entries, and whether their error says they may be in the log.
    let mut failed: Vec<(Bytes, bool)> = Vec::new();
    for (region, payload, appended) in pending {
        match appended.await {
            Ok(offset) => acked.entry(region).or_default().push((offset, payload)),
            Err(e) => {
                SoakReport::count(&mut report.errors, format!("produce.{}", error_kind(&e)), 1);
                let says = matches!(
                    e,
                    Error::MaybeWritten { .. } | Error::WrittenOffsetUnknown { .. }
                );
                failed.push((payload, says));
            }
        }
    }
    let index = match writer.close().await {
        Ok(index) => index,
        Err(_) => WalIndex::new(),
    };
    let fired = count_fired(world, &queued, report);
    world.broker.clear_faults();
    SoakReport::count(&mut report.replays, "produce_then_recover", 1);
    report.produced_acked += acked.values().map(|v| v.len() as u64).sum::<u64>();
    report.produced_failed += failed.len() as u64;
    let context = format!("round {} (produce, seed {})", report.rounds, report.seed);

    // Every acknowledged entry is in the log, at its offset.
    let log = world.broker.log(&topic, 0).expect("log");
    let mut in_log: BTreeMap<i64, Bytes> = BTreeMap::new();
    for extent in log.extents() {
        let bytes = log.bytes(extent.position..extent.end());
        let decoded = Batches::new(bytes, DecodeOptions::default())
            .collect::<Result<Vec<_>, _>>()
            .and_then(|batches| {
                let mut records = Vec::new();
                for batch in batches {
                    for record in batch.records()? {
                        records.push(record?);
                    }
                }
                Ok(records)
            });
        let Ok(records) = decoded else {
            report
                .violations
                .push(format!("{context}: the log holds an undecodable batch"));
            continue;
        };
        for record in records {
            in_log.insert(record.offset(), record.value_bytes().unwrap_or_default());
        }
    }
    for (region, list) in &acked {
        for (offset, payload) in list {
            if in_log.get(offset) != Some(payload) {
                report.violations.push(format!(
                    "{context}: acknowledged entry of region {region} at {offset} is not in the log"
                ));
            }
        }
    }
    let values: Vec<&Bytes> = in_log.values().collect();
    let distinct: std::collections::BTreeSet<&Bytes> = values.iter().copied().collect();
    if distinct.len() != values.len() {
        report
            .violations
            .push(format!("{context}: an entry was written twice"));
    }
    report.produced_failed_but_written +=
        failed.iter().filter(|(p, _)| distinct.contains(p)).count() as u64;
    // An entry reported failed is not in the log, unless its error says it
    // may be: a caller appends it again only when it is not.
    if failed.iter().any(|(p, says)| !says && distinct.contains(p)) {
        report.violations.push(format!(
            "{context}: an entry reported failed is in the log, its error not saying it may be"
        ));
    }

    // A fault-free recovery of every region with the writer's index gets
    // every acknowledged entry, and nothing that was not written.
    // A region the index does not list (every append of it failed) is
    // refused by the recovery, and must have nothing acknowledged.
    let listed: Vec<RegionId> = (0..4u64).filter(|&r| index.region(r).is_some()).collect();
    for r in (0..4u64).filter(|r| !listed.contains(r)) {
        if acked.get(&r).is_some_and(|a| !a.is_empty()) {
            report.violations.push(format!(
                "{context}: region {r} has acknowledged entries but is not in the writer's index"
            ));
        }
    }
    if listed.is_empty() {
        // Nothing was acknowledged (checked above): nothing to recover.
        return fired;
    }
    let checkpoints: BTreeMap<(i32, RegionId), i64> = listed.iter().map(|&r| ((0, r), 0)).collect();
    let outcome = run_recovery(
        &world.cluster,
        &topic,
        std::slice::from_ref(&index),
        &checkpoints,
        ReplayOptions::default(),
    )
    .await;
    for f in &outcome.foreign {
        report.violations.push(format!("{context}: {f}"));
    }
    match &outcome.result {
        Err(e) => report
            .violations
            .push(format!("{context}: recovering what the writer wrote: {e}")),
        Ok(_) => {
            for &r in &listed {
                let got = &outcome.got[&0][&r];
                report.entries_checked += got.len() as u64;
                let want = acked.get(&r).cloned().unwrap_or_default();
                // The log may also hold entries whose append failed (the
                // answer was lost after the broker appended them): they
                // are past the index's `last_index` or not indexed.
                let got_acked: Vec<(i64, Bytes)> = got
                    .iter()
                    .filter(|(o, _)| want.iter().any(|(w, _)| w == o))
                    .cloned()
                    .collect();
                if got_acked != want {
                    report.violations.push(format!(
                        "{context}: region {r}: recovered {} of its {} acknowledged entries",
                        got_acked.len(),
                        want.len()
                    ));
                }
                let offsets: Vec<i64> = got.iter().map(|(o, _)| *o).collect();
                if offsets.windows(2).any(|w| w[0] >= w[1]) {
                    report
                        .violations
                        .push(format!("{context}: region {r}: out of order or repeated"));
                }
                for (o, v) in got {
                    if in_log.get(o) != Some(v) {
                        report
                            .violations
                            .push(format!("{context}: region {r}: offset {o} not as written"));
                    }
                }
            }
        }
    }
    fired
}
