//! Import of GreptimeDB's WAL index file (`__wal/<location>/index.json`).
//!
//! The file maps a topic name to `{"regions": {"<region id>": [offsets]},
//! "last_index": N}`, with each region's offsets delta-encoded: the first
//! value absolute, then differences. It carries offsets only, no hints.
//!
//! GreptimeDB's `last_index` is exclusive: its log-store worker sets it to
//! the topic's log end offset (`get_offset(OffsetAt::Latest)`, the next
//! offset to be written) before it dumps the index, and its replay reads
//! the log from `max(last_index, start)` on as unindexed
//! (`build_region_wal_index_iterator`). walfetch's `last_index` is the last
//! offset covered, inclusive, so `N` is imported as `N - 1`, and `0` as no
//! `last_index` (nothing covered).
//!
//! A region listed with no offsets (`"7": []`: GreptimeDB keeps a region
//! whose entries were all truncated on flush) is imported as a region the
//! index lists with no entries ([`WalIndex::add_region`]): it has nothing
//! to replay up to `last_index`.
//! The index is of partition 0 of the topic ([`GREPTIMEDB_PARTITION`]),
//! the only one GreptimeDB's log store uses.
//! GreptimeDB writes each record's region into the record key, in its
//! record meta (JSON), so an imported index carries
//! [`RegionRule::GREPTIMEDB`]: a replay reads the region of the records past
//! `last_index` from there, and checks the indexed ones against it.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::{IndexEntry, IndexError, IndexSource, RegionRule, WalIndex};

#[derive(Debug, Deserialize)]
struct TopicIndex {
    regions: Members<Vec<u64>>,
    last_index: u64,
}

/// A JSON object's members in the order written, a key given twice kept
/// twice: a map would keep only the last, and one region's offsets (or a
/// topic's index) would go unseen.
#[derive(Debug)]
struct Members<V>(Vec<(String, V)>);

impl<'de, V: Deserialize<'de>> Deserialize<'de> for Members<V> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor<V>(std::marker::PhantomData<V>);
        impl<'de, V: Deserialize<'de>> serde::de::Visitor<'de> for Visitor<V> {
            type Value = Members<V>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Members<V>, A::Error> {
                let mut members = Vec::new();
                while let Some(member) = map.next_entry()? {
                    members.push(member);
                }
                Ok(Members(members))
            }
        }
        deserializer.deserialize_map(Visitor(std::marker::PhantomData))
    }
}

/// The partition GreptimeDB's Kafka log store writes and reads in each of
/// its topics (its `DEFAULT_PARTITION`), and so the one an imported index
/// is of.
pub const GREPTIMEDB_PARTITION: i32 = 0;

/// Reads a GreptimeDB `index.json` and returns the index of every topic in
/// it, by topic name, each of partition [`GREPTIMEDB_PARTITION`]. `path`
/// only names the file in errors.
pub fn import_greptime(json: &[u8], path: &str) -> Result<BTreeMap<String, WalIndex>, IndexError> {
    let corrupt = |what: String| IndexError::Corrupt {
        path: path.to_string(),
        what,
    };
    let Members(topics): Members<TopicIndex> = serde_json::from_slice(json)
        .map_err(|e| corrupt(format!("not a GreptimeDB index file: {e}")))?;
    let mut out = BTreeMap::new();
    for (topic, t) in topics {
        if let Some(why) = invalid_topic_name(&topic) {
            return Err(corrupt(format!("topic {topic:?} {why}")));
        }
        if out.contains_key(&topic) {
            return Err(corrupt(format!("topic {topic:?} is listed twice")));
        }
        let mut index = WalIndex::new();
        // The file names the topic; GreptimeDB's log store reads and
        // writes partition 0 of each topic only (its `DEFAULT_PARTITION`),
        // and its records carry the region in the key's record meta.
        // Nothing else of the source is known.
        index.set_source(IndexSource {
            topic: Some(topic.clone()),
            partition: Some(GREPTIMEDB_PARTITION),
            rule: Some(RegionRule::GREPTIMEDB),
            ..IndexSource::default()
        });
        let end = i64::try_from(t.last_index).map_err(|_| {
            corrupt(format!(
                "topic {topic}: last_index {} is out of range",
                t.last_index
            ))
        })?;
        // GreptimeDB's is the log end when it was read (exclusive); ours
        // the last offset covered. 0: nothing covered, and
        // `set_last_index` leaves it unset for -1.
        index.set_last_index(end - 1);
        // How each region id was spelled: GreptimeDB writes an id one way,
        // so two keys of one id ("7" and "07", or "7" twice) are a damaged
        // or hand-edited file, and joining their offsets would replay
        // entries of one list the other may not have had.
        let mut spelled: BTreeMap<u64, String> = BTreeMap::new();
        for (region, deltas) in t.regions.0 {
            let id: u64 = region.parse().map_err(|_| {
                corrupt(format!(
                    "topic {topic}: region id {region:?} is not a decimal u64"
                ))
            })?;
            if let Some(first) = spelled.insert(id, region.clone()) {
                return Err(corrupt(format!(
                    "topic {topic}: region {id} is listed twice (as {first:?} and {region:?})"
                )));
            }
            index.add_region(id);
            let mut offset: u64 = 0;
            for (i, delta) in deltas.into_iter().enumerate() {
                offset = if i == 0 {
                    delta
                } else if delta == 0 {
                    return Err(corrupt(format!(
                        "topic {topic}, region {id}: entry {i} repeats offset {offset}"
                    )));
                } else {
                    offset.checked_add(delta).ok_or_else(|| {
                        corrupt(format!(
                            "topic {topic}, region {id}: offset overflows at entry {i}"
                        ))
                    })?
                };
                let offset = i64::try_from(offset).map_err(|_| {
                    corrupt(format!(
                        "topic {topic}, region {id}: offset {offset} is out of range"
                    ))
                })?;
                index.push(id, IndexEntry::offset_only(offset))?;
            }
        }
        // A record has one region.
        super::check_one_region_an_offset(&index.regions)
            .map_err(|e| corrupt(format!("topic {topic}: {e}")))?;
        out.insert(topic, index);
    }
    Ok(out)
}

/// Why Kafka would refuse `topic` as a topic name, if it would: empty,
/// `.` or `..`, longer than 249 bytes, or a character other than ASCII
/// letters, digits, `.`, `_` and `-` (Kafka's `Topic.validate`). The file
/// names Kafka topics, so a name no topic can have means a corrupt file.
fn invalid_topic_name(topic: &str) -> Option<&'static str> {
    const MAX_LEN: usize = 249;
    if topic.is_empty() || topic == "." || topic == ".." {
        Some("is not a topic name")
    } else if topic.len() > MAX_LEN {
        Some("is longer than Kafka's 249-character limit")
    } else if !topic
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        Some("has characters Kafka does not allow in a topic name")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_delta_encoded_offsets_per_topic() {
        let json = br#"{
            "wal_topic_0": {"regions": {"4398046511104": [3, 2, 10], "17": [0]}, "last_index": 20},
            "wal_topic_1": {"regions": {}, "last_index": 0}
        }"#;
        let topics = import_greptime(json, "index.json").unwrap();
        let t0 = &topics["wal_topic_0"];
        // GreptimeDB's last_index is the log end (exclusive).
        assert_eq!(t0.last_index(), Some(19));
        assert_eq!(t0.source().topic.as_deref(), Some("wal_topic_0"));
        assert_eq!(t0.source().partition, Some(GREPTIMEDB_PARTITION));
        assert_eq!(t0.source().rule, Some(RegionRule::GREPTIMEDB));
        let offsets: Vec<i64> = t0.region(4398046511104).unwrap().offsets().collect();
        assert_eq!(offsets, [3, 5, 15]);
        assert!(t0
            .region(4398046511104)
            .unwrap()
            .entries()
            .iter()
            .all(|e| e.hint.is_none()));
        assert_eq!(t0.region(17).unwrap().len(), 1);
        assert!(topics["wal_topic_1"].is_empty());
        assert_eq!(
            topics["wal_topic_1"].last_index(),
            None,
            "0: nothing covered"
        );
    }

    /// GreptimeDB's `last_index` is the log end offset its worker read
    /// (`get_offset(OffsetAt::Latest)`), and its replay reads from it on:
    /// the offset at `last_index` is not covered.
    #[test]
    fn last_index_is_greptimes_exclusive_log_end() {
        for (last_index, want) in [(0u64, None), (1, Some(0)), (2, Some(1))] {
            let json =
                format!(r#"{{"t": {{"regions": {{"7": [0]}}, "last_index": {last_index}}}}}"#);
            let index = import_greptime(json.as_bytes(), "index.json")
                .unwrap()
                .remove("t")
                .unwrap();
            assert_eq!(index.last_index(), want, "last_index {last_index}");
        }
    }

    /// A region GreptimeDB lists with no offsets (all truncated on flush)
    /// is one the index knows, with nothing indexed.
    #[test]
    fn a_region_listed_with_no_offsets_is_kept_empty() {
        let json = br#"{"t": {"regions": {"7": [], "8": [4]}, "last_index": 9}}"#;
        let index = import_greptime(json, "index.json")
            .unwrap()
            .remove("t")
            .unwrap();
        assert!(index.region(7).is_some_and(|r| r.is_empty()));
        assert_eq!(index.region(8).map(|r| r.len()), Some(1));
        assert_eq!(index.regions().count(), 2);
    }

    #[test]
    fn bad_files_are_clear_errors() {
        for (json, needle) in [
            (
                &br#"{"t": {"regions": {"x": [1]}, "last_index": 1}}"#[..],
                "not a decimal u64",
            ),
            (
                br#"{"t": {"regions": {"1": [1, 0]}, "last_index": 1}}"#,
                "repeats offset",
            ),
            (
                br#"{"t": {"regions": {"1": [18446744073709551615]}, "last_index": 1}}"#,
                "out of range",
            ),
            (
                br#"{"t": {"regions": {"1": [1]}}}"#,
                "not a GreptimeDB index file",
            ),
            (b"[]", "not a GreptimeDB index file"),
            (
                br#"{"": {"regions": {}, "last_index": 0}}"#,
                "is not a topic name",
            ),
            (
                br#"{"..": {"regions": {}, "last_index": 0}}"#,
                "is not a topic name",
            ),
            (
                br#"{"wal topic": {"regions": {}, "last_index": 0}}"#,
                "characters Kafka does not allow",
            ),
            // One region id spelled two ways, or one key twice: which list
            // is the region's is not known (joined, they replayed entries
            // of both silently).
            (
                br#"{"t": {"regions": {"7": [5], "07": [1, 2]}, "last_index": 9}}"#,
                r#"region 7 is listed twice (as "7" and "07")"#,
            ),
            (
                br#"{"t": {"regions": {"7": [1], "7": [5]}, "last_index": 9}}"#,
                r#"region 7 is listed twice (as "7" and "7")"#,
            ),
            (
                br#"{"t": {"regions": {}, "last_index": 0}, "t": {"regions": {}, "last_index": 4}}"#,
                r#"topic "t" is listed twice"#,
            ),
            // A record has one region.
            (
                br#"{"t": {"regions": {"7": [1, 4], "8": [3, 2]}, "last_index": 9}}"#,
                "offset 5 is given to both region 7 and region 8",
            ),
        ] {
            let err = import_greptime(json, "idx.json").unwrap_err().to_string();
            assert!(err.contains(needle) && err.contains("idx.json"), "{err}");
        }
        // A topic name at Kafka's limit is taken; one byte more is not.
        for (len, ok) in [(249, true), (250, false)] {
            let json = format!(
                r#"{{"{}": {{"regions": {{}}, "last_index": 0}}}}"#,
                "w".repeat(len)
            );
            let got = import_greptime(json.as_bytes(), "idx.json");
            assert_eq!(got.is_ok(), ok, "{len}: {got:?}");
        }
    }
}
