//! Entries written to a partition by one or more [`WalWriter`]s: appended
//! in rounds, each round's offsets awaited (after a flush, where the round
//! asks for one), the writers closed and their indexes merged.

use std::sync::Arc;

use walfetch::cluster::Cluster;
use walfetch::index::WalIndex;
use walfetch::writer::{WalEntry, WalWriter, WriterConfig};

/// Entries appended to one of the writers, whose offsets are awaited before
/// the next round is appended.
#[derive(Debug, Clone)]
pub struct Round {
    /// Which writer appends them (its place among the configurations).
    pub writer: usize,
    /// The entries, in append order.
    pub entries: Vec<WalEntry>,
    /// Whether the writer is flushed once they are appended (else its own
    /// linger and size cap send them).
    pub flush: bool,
}

/// What [`write_rounds`] wrote.
#[derive(Debug)]
pub struct Rounds {
    /// Each round's offsets, an entry's where its append put it.
    pub offsets: Vec<Vec<i64>>,
    /// The writers' indexes merged (the index of the one writer as it is).
    pub index: WalIndex,
}

/// Starts one [`WalWriter`] on `cluster` for each of `configs`, appends
/// `rounds` in order, closes the writers and merges their indexes. An
/// error names the first writer's topic and what failed.
pub async fn write_rounds(
    cluster: &Arc<Cluster>,
    configs: impl IntoIterator<Item = WriterConfig>,
    rounds: impl IntoIterator<Item = Round>,
) -> Result<Rounds, String> {
    let configs: Vec<WriterConfig> = configs.into_iter().collect();
    let topic = configs
        .first()
        .ok_or("no writer to write with")?
        .topic
        .clone();
    let writers: Vec<WalWriter> = configs
        .into_iter()
        .map(|config| WalWriter::new(Arc::clone(cluster), config))
        .collect();
    let mut offsets = Vec::new();
    for round in rounds {
        let writer = writers
            .get(round.writer)
            .ok_or_else(|| format!("{topic}: no writer {}", round.writer))?;
        let mut pending = Vec::with_capacity(round.entries.len());
        for entry in round.entries {
            let appended = writer
                .append(entry)
                .await
                .map_err(|e| format!("append to {topic}: {e}"))?;
            pending.push(appended);
        }
        if round.flush {
            writer
                .flush()
                .await
                .map_err(|e| format!("flush {topic}: {e}"))?;
        }
        let mut written = Vec::with_capacity(pending.len());
        for appended in pending {
            written.push(
                appended
                    .await
                    .map_err(|e| format!("write to {topic}: {e}"))?,
            );
        }
        offsets.push(written);
    }
    let mut index: Option<WalIndex> = None;
    for writer in writers {
        let part = writer
            .close()
            .await
            .map_err(|e| format!("close a writer of {topic}: {e}"))?;
        match index.as_mut() {
            None => index = Some(part),
            Some(index) => index
                .merge(&part)
                .map_err(|e| format!("merge the writers' indexes of {topic}: {e}"))?,
        }
    }
    Ok(Rounds {
        offsets,
        index: index.unwrap_or_default(),
    })
}
