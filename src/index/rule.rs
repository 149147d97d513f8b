//! The region rule: where a record's region id is written, and how.

use walfetch_codec::Record;

use super::RegionId;

/// How a record's region id is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdFormat {
    /// ASCII decimal digits.
    Decimal,
    /// Up to 8 bytes, big-endian (WalWriter writes 8).
    BigEndian,
}

/// Where a record's region id is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegionRule {
    /// In the record key.
    Key(IdFormat),
    /// In the value of the first header with this name.
    Header(String, IdFormat),
}

impl RegionRule {
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
                record.headers().find(|h| h.key == name.as_bytes())?.value
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
    }
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
}
