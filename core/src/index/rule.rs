//! The region rule: where a record's region id is written, and how.

use serde::Deserialize;
use walfetch_codec::Record;

use super::RegionId;

/// How a record's region id is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdFormat {
    /// ASCII decimal digits.
    Decimal,
    /// Up to 8 bytes, big-endian (WalWriter writes 8).
    BigEndian,
    /// GreptimeDB's record meta: a JSON object whose `ns.region_id` is the
    /// region, as GreptimeDB's Kafka log store writes it into every
    /// record's key (`{"version":0,"tp":"Full","entry_id":7,"ns":
    /// {"region_id":4398046511104,"topic":"…"}}`). Other fields, and their
    /// order, do not matter. [`RegionRule::GREPTIMEDB`] reads it from the
    /// key.
    GreptimeMeta,
}

/// Where a record's region id is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegionRule {
    /// In the record key.
    Key(IdFormat),
    /// In the value of the header with this name; of a record that has
    /// it more than once, the last one, as Kafka's clients read a header
    /// (Java's `Headers.lastHeader`, librdkafka's
    /// `rd_kafka_header_get_last`): a header added to a record later
    /// overrides the one before.
    Header(String, IdFormat),
}

impl RegionRule {
    /// Where GreptimeDB writes the region: its record meta (JSON) in the
    /// record key ([`IdFormat::GreptimeMeta`]). An index imported from a
    /// GreptimeDB index file ([`crate::index::import_greptime`]) carries
    /// this rule.
    pub const GREPTIMEDB: RegionRule = RegionRule::Key(IdFormat::GreptimeMeta);

    /// The record's region, if the rule finds a well-formed id.
    pub fn region(&self, record: &Record) -> Option<RegionId> {
        parse_id(self.id_bytes(record)?, self.format())
    }

    /// The bytes the rule reads the region id from (the key, or the
    /// header's value), whether or not they are a well-formed id.
    pub fn id_bytes<'r>(&self, record: &'r Record) -> Option<&'r [u8]> {
        match self {
            RegionRule::Key(_) => record.key(),
            RegionRule::Header(name, _) => {
                record
                    .headers()
                    .filter(|h| h.key == name.as_bytes())
                    .last()?
                    .value
            }
        }
    }

    /// Whether `record` is a no-op that carries no entry of any region, so
    /// that a replay does not yield it, an index build does not index it,
    /// and neither counts it as a record the rule finds no region in (a
    /// sign the rule misreads the log). Under GreptimeDB's format
    /// ([`IdFormat::GreptimeMeta`]), any record without a value: GreptimeDB's
    /// replay skips those, and its metasrv writes one with neither key nor
    /// value at the start of every topic it creates. Under the other
    /// formats, a record with neither key nor value nor anything where the
    /// rule reads the id: it holds no data at all.
    pub fn is_noop(&self, record: &Record) -> bool {
        record.value().is_none()
            && match self.format() {
                IdFormat::GreptimeMeta => true,
                IdFormat::Decimal | IdFormat::BigEndian => {
                    record.key().is_none() && self.id_bytes(record).is_none()
                }
            }
    }

    /// How the id is written.
    pub fn format(&self) -> IdFormat {
        match self {
            RegionRule::Key(format) | RegionRule::Header(_, format) => *format,
        }
    }
}

impl std::fmt::Display for IdFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            IdFormat::Decimal => "decimal",
            IdFormat::BigEndian => "be",
            IdFormat::GreptimeMeta => "greptime",
        })
    }
}

/// As the command line spells it: `key, be` or `header "region", decimal`.
impl std::fmt::Display for RegionRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RegionRule::Key(format) => write!(f, "key, {format}"),
            RegionRule::Header(name, format) => write!(f, "header {name:?}, {format}"),
        }
    }
}

fn parse_id(bytes: &[u8], format: IdFormat) -> Option<RegionId> {
    match format {
        IdFormat::Decimal => std::str::from_utf8(bytes).ok()?.trim().parse().ok(),
        IdFormat::BigEndian if !bytes.is_empty() && bytes.len() <= 8 => {
            Some(bytes.iter().fold(0u64, |acc, &b| (acc << 8) | u64::from(b)))
        }
        IdFormat::BigEndian => None,
        IdFormat::GreptimeMeta => greptime_region(bytes),
    }
}

/// The fields of GreptimeDB's record meta the rule reads; serde skips the
/// others.
#[derive(Deserialize)]
struct GreptimeMeta {
    ns: GreptimeNamespace,
}

#[derive(Deserialize)]
struct GreptimeNamespace {
    region_id: u64,
}

/// `ns.region_id` of a GreptimeDB record meta, if `bytes` are one.
fn greptime_region(bytes: &[u8]) -> Option<RegionId> {
    serde_json::from_slice::<GreptimeMeta>(bytes)
        .ok()
        .map(|meta| meta.ns.region_id)
}

/// Whether `bytes` are a GreptimeDB record meta (for a hint that the rule
/// should read them so).
pub fn is_greptime_meta(bytes: &[u8]) -> bool {
    greptime_region(bytes).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_parse_in_both_formats() {
        assert_eq!(
            parse_id(b"4398046511104", IdFormat::Decimal),
            Some(4_398_046_511_104)
        );
        assert_eq!(parse_id(b"x1", IdFormat::Decimal), None);
        assert_eq!(parse_id(&7u64.to_be_bytes(), IdFormat::BigEndian), Some(7));
        assert_eq!(parse_id(&[1, 0], IdFormat::BigEndian), Some(256));
        assert_eq!(parse_id(&[0; 9], IdFormat::BigEndian), None);
        assert_eq!(parse_id(b"", IdFormat::BigEndian), None);
    }

    /// A record with the region header twice is of the region its last
    /// one names, as a Kafka consumer reads it (`Headers.lastHeader`); the
    /// first one was read, so a record whose region header was overridden
    /// went to its old region.
    #[test]
    fn the_last_of_a_repeated_header_names_the_region() {
        use bytes::Bytes;
        use walfetch_codec::{BatchBuilder, Batches, NewRecord};
        let header = |v: &'static str| {
            (
                Bytes::from_static(b"region"),
                Some(Bytes::from_static(v.as_bytes())),
            )
        };
        let records = [NewRecord {
            timestamp: 0,
            key: None,
            value: Some(Bytes::from_static(b"v")),
            headers: vec![
                header("1"),
                (Bytes::from_static(b"other"), None),
                header("2"),
            ],
            offset_delta: 0,
        }];
        let batch = BatchBuilder::new(0).encode(&records).unwrap();
        let record = Batches::new(batch.bytes, Default::default())
            .next()
            .unwrap()
            .unwrap()
            .records()
            .unwrap()
            .next()
            .unwrap()
            .unwrap();
        let rule = RegionRule::Header("region".into(), IdFormat::Decimal);
        assert_eq!(rule.region(&record), Some(2));
        assert_eq!(rule.id_bytes(&record), Some(&b"2"[..]));
    }

    /// A no-op carries no entry: under GreptimeDB's format, any record
    /// without a value (its replay skips them); otherwise one with nothing
    /// in it. An empty value is data.
    #[test]
    fn noop_records_by_format() {
        use bytes::Bytes;
        use walfetch_codec::{BatchBuilder, Batches, NewRecord};
        let meta = Bytes::from_static(
            br#"{"version":0,"tp":"Full","entry_id":0,"ns":{"region_id":7,"topic":""}}"#,
        );
        let records = [
            (None, None, vec![]),
            (Some(meta.clone()), None, vec![]),
            (Some(meta.clone()), Some(Bytes::new()), vec![]),
            (
                None,
                None,
                vec![(
                    Bytes::from_static(b"region"),
                    Some(Bytes::from_static(b"7")),
                )],
            ),
        ]
        .into_iter()
        .enumerate()
        .map(|(i, (key, value, headers))| NewRecord {
            timestamp: 0,
            key,
            value,
            headers,
            offset_delta: i as i32,
        })
        .collect::<Vec<_>>();
        let batch = BatchBuilder::new(0).encode(&records).unwrap();
        let batch = Batches::new(batch.bytes, Default::default())
            .next()
            .unwrap()
            .unwrap();
        let records: Vec<_> = batch.records().unwrap().map(Result::unwrap).collect();
        let noop =
            |rule: &RegionRule| -> Vec<bool> { records.iter().map(|r| rule.is_noop(r)).collect() };
        assert_eq!(noop(&RegionRule::GREPTIMEDB), [true, true, false, true]);
        assert_eq!(
            noop(&RegionRule::Key(IdFormat::BigEndian)),
            [true, false, false, true]
        );
        let header = RegionRule::Header("region".into(), IdFormat::Decimal);
        assert_eq!(noop(&header), [true, false, false, false]);
    }

    #[test]
    fn greptime_meta_gives_the_namespace_region() {
        let g = |json: &str| parse_id(json.as_bytes(), IdFormat::GreptimeMeta);
        // As GreptimeDB's log store writes it (serde_json, field order of
        // its struct), whole and as the parts of a split entry.
        assert_eq!(
            g(
                r#"{"version":0,"tp":"Full","entry_id":12,"ns":{"region_id":4398046511104,"topic":"greptimedb_wal_topic_3"}}"#
            ),
            Some(4_398_046_511_104)
        );
        assert_eq!(
            g(r#"{"version":0,"tp":{"Middle":2},"entry_id":0,"ns":{"region_id":7,"topic":""}}"#),
            Some(7)
        );
        // Any order, any spacing, fields it does not know.
        assert_eq!(
            g(" {\"ns\" : {\"topic\":\"t\", \"region_id\": 9}, \"new\": [1, {}]}\n"),
            Some(9)
        );
        assert_eq!(
            g(&format!(r#"{{"ns":{{"region_id":{}}}}}"#, u64::MAX)),
            Some(u64::MAX)
        );
        for bad in [
            "",
            "7",
            "{}",
            r#"{"ns":{}}"#,
            r#"{"ns":{"region_id":-1}}"#,
            r#"{"ns":{"region_id":1.5}}"#,
            r#"{"ns":{"region_id":"7"}}"#,
            r#"{"ns":{"region_id":18446744073709551616}}"#,
            r#"{"region_id":7}"#,
            r#"{"ns":{"region_id":7}"#,
        ] {
            assert_eq!(g(bad), None, "{bad:?}");
        }
        assert_eq!(parse_id(&[0xff, 0xfe], IdFormat::GreptimeMeta), None);
        assert_eq!(RegionRule::GREPTIMEDB.to_string(), "key, greptime");
    }
}
