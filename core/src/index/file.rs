//! walfetch's own index file format (version 2; version 1 files still load).
//!
//! ```text
//! "WFIX"  magic                      u8 version (2)   u8 flags
//! what the index indexes, each part present when its flag bit is set:
//!   bit 0  topic:        uvarint length (1..=249), UTF-8 name
//!   bit 1  partition:    uvarint (0..=i32::MAX)
//!   bit 2  topic id:     16 bytes (a UUID, KIP-516; never nil)
//!   bit 3  first offset: uvarint, the first offset the index covers
//!   bit 4  region rule:  u8 place (0 key, 1 header), u8 id format
//!                        (0 big-endian, 1 decimal, 2 GreptimeDB's record
//!                        meta); for a header:
//!                        uvarint length (0..=32767), UTF-8 header name
//! uvarint last_index + 1 (0: none)   uvarint region count
//! per region:  uvarint region id     uvarint entry count
//!   per entry: uvarint offset (the first absolute, then the difference, > 0)
//!              u8 hint tag: 0 none
//!                           1 same batch as the previous entry's hint:
//!                             uvarint record_end - the previous record_end (> 0)
//!                           2 new batch: uvarint offset - batch_base,
//!                                        uvarint batch_len, uvarint record_end
//! u32 (big-endian) CRC32C of every byte before it
//! ```
//! Version 1 is the same without the parts (its flags byte is 0): an index
//! that says nothing about what it indexes. Other flag bits are errors.
//! A region may be listed with an entry count of 0: the index knows it
//! and it has nothing indexed ([`WalIndex::add_region`]). The format is
//! unchanged for it (version 2): a reader from before it loads such a
//! region as one the index does not list, and then reads only the log past
//! `last_index` for it or refuses the replay (`RegionAbsent`), never
//! replaying it wrong.
//! Varints are unsigned LEB128. Offsets of one region are delta-encoded, and
//! entries sharing a batch share its description: an entry costs about two
//! bytes without hints and four with them.

use std::path::Path;

use uuid::Uuid;

use super::{Hint, IdFormat, IndexEntry, IndexError, IndexSource, RegionRule, WalIndex};

/// The file format version this build writes (it reads this one and
/// version 1).
pub const INDEX_FILE_VERSION: u8 = 2;
const MAGIC: &[u8; 4] = b"WFIX";

const HAS_TOPIC: u8 = 1;
const HAS_PARTITION: u8 = 1 << 1;
const HAS_TOPIC_ID: u8 = 1 << 2;
const HAS_FIRST_OFFSET: u8 = 1 << 3;
const HAS_RULE: u8 = 1 << 4;
/// Kafka's longest topic name.
const MAX_TOPIC_LEN: u64 = 249;
/// A Kafka header key is a compact string of at most `i16::MAX` bytes.
const MAX_HEADER_NAME_LEN: u64 = i16::MAX as u64;

fn put(out: &mut Vec<u8>, value: u64) {
    // Writing to a Vec cannot fail.
    let _ = leb128::write::unsigned(out, value);
}

/// Encodes an index into the file format.
pub fn encode_index(index: &WalIndex) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + index.len() * 3);
    out.extend_from_slice(MAGIC);
    out.push(INDEX_FILE_VERSION);
    encode_source(&mut out, index.source());
    put(&mut out, index.last_index().map_or(0, |l| l as u64 + 1));
    let regions: Vec<_> = index.regions().collect();
    put(&mut out, regions.len() as u64);
    for (id, region) in regions {
        put(&mut out, id);
        put(&mut out, region.len() as u64);
        let mut previous: Option<IndexEntry> = None;
        for entry in region.entries() {
            put(
                &mut out,
                (entry.offset - previous.map_or(0, |p| p.offset)) as u64,
            );
            match entry.hint {
                None => out.push(0),
                Some(h) => {
                    let same = previous.and_then(|p| p.hint).filter(|p| {
                        p.batch_base == h.batch_base
                            && p.batch_len == h.batch_len
                            && p.record_end < h.record_end
                    });
                    if let Some(p) = same {
                        out.push(1);
                        put(&mut out, u64::from(h.record_end - p.record_end));
                    } else {
                        out.push(2);
                        put(&mut out, (entry.offset - h.batch_base) as u64);
                        put(&mut out, u64::from(h.batch_len));
                        put(&mut out, u64::from(h.record_end));
                    }
                }
            }
            previous = Some(*entry);
        }
    }
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_be_bytes());
    out
}

/// The flags byte and the parts of `source` it announces. Parts the format
/// cannot hold (a topic name longer than Kafka allows, a negative partition
/// or offset) are left out: unknown rather than wrong.
fn encode_source(out: &mut Vec<u8>, source: &IndexSource) {
    let topic = source
        .topic
        .as_ref()
        .filter(|t| !t.is_empty() && t.len() as u64 <= MAX_TOPIC_LEN);
    let partition = source.partition.filter(|p| *p >= 0);
    let topic_id = source.topic_id.filter(|id| !id.is_nil());
    let first = source.first_offset.filter(|o| *o >= 0);
    let rule = source.rule.as_ref().filter(|r| match r {
        RegionRule::Key(_) => true,
        RegionRule::Header(name, _) => name.len() as u64 <= MAX_HEADER_NAME_LEN,
    });
    let flags = [
        (topic.is_some(), HAS_TOPIC),
        (partition.is_some(), HAS_PARTITION),
        (topic_id.is_some(), HAS_TOPIC_ID),
        (first.is_some(), HAS_FIRST_OFFSET),
        (rule.is_some(), HAS_RULE),
    ]
    .iter()
    .filter(|(present, _)| *present)
    .fold(0, |flags, (_, bit)| flags | bit);
    out.push(flags);
    if let Some(topic) = topic {
        put(out, topic.len() as u64);
        out.extend_from_slice(topic.as_bytes());
    }
    if let Some(p) = partition {
        put(out, p as u64);
    }
    if let Some(id) = topic_id {
        out.extend_from_slice(id.as_bytes());
    }
    if let Some(o) = first {
        put(out, o as u64);
    }
    if let Some(rule) = rule {
        out.push(match rule {
            RegionRule::Key(_) => 0,
            RegionRule::Header(..) => 1,
        });
        out.push(match rule.format() {
            IdFormat::BigEndian => 0,
            IdFormat::Decimal => 1,
            IdFormat::GreptimeMeta => 2,
        });
        if let RegionRule::Header(name, _) = rule {
            put(out, name.len() as u64);
            out.extend_from_slice(name.as_bytes());
        }
    }
}

/// A bounded reader over the file's bytes that knows its position.
struct Cursor<'a> {
    rest: &'a [u8],
    len: usize,
}

impl Cursor<'_> {
    fn position(&self) -> usize {
        self.len - self.rest.len()
    }

    fn fail(&self, what: &str) -> String {
        format!("{what} at byte {}", self.position())
    }

    fn uvarint(&mut self, what: &str) -> Result<u64, String> {
        let at = self.position();
        leb128::read::unsigned(&mut self.rest).map_err(|e| match e {
            leb128::read::Error::IoError(_) => format!("the file ends inside {what} at byte {at}"),
            leb128::read::Error::Overflow => format!("{what} at byte {at} overflows 64 bits"),
        })
    }

    fn byte(&mut self, what: &str) -> Result<u8, String> {
        let (&b, rest) = self
            .rest
            .split_first()
            .ok_or_else(|| self.fail(&format!("missing {what}")))?;
        self.rest = rest;
        Ok(b)
    }

    fn i64(&mut self, what: &str) -> Result<i64, String> {
        let at = self.position();
        i64::try_from(self.uvarint(what)?)
            .map_err(|_| format!("{what} at byte {at} is out of range"))
    }

    /// `len` bytes, never past the end.
    fn bytes(&mut self, len: u64, what: &str) -> Result<&[u8], String> {
        let at = self.position();
        let len = usize::try_from(len)
            .ok()
            .filter(|l| *l <= self.rest.len())
            .ok_or_else(|| format!("the file ends inside {what} at byte {at}"))?;
        let (taken, rest) = self.rest.split_at(len);
        self.rest = rest;
        Ok(taken)
    }

    /// A UTF-8 string of `min..=max` bytes, length first.
    fn string(&mut self, min: u64, max: u64, what: &str) -> Result<String, String> {
        let at = self.position();
        let len = self.uvarint(what)?;
        if len < min || len > max {
            return Err(format!(
                "{what} at byte {at} is {len} bytes long ({min} to {max} allowed)"
            ));
        }
        let bytes = self.bytes(len, what)?;
        std::str::from_utf8(bytes)
            .map(str::to_owned)
            .map_err(|_| format!("{what} at byte {at} is not UTF-8"))
    }

    /// The parts of an index source announced by `flags`.
    fn source(&mut self, flags: u8) -> Result<IndexSource, String> {
        let mut source = IndexSource::default();
        if flags & HAS_TOPIC != 0 {
            source.topic = Some(self.string(1, MAX_TOPIC_LEN, "the topic name")?);
        }
        if flags & HAS_PARTITION != 0 {
            let at = self.position();
            let p = self.uvarint("the partition")?;
            source.partition = Some(
                i32::try_from(p)
                    .map_err(|_| format!("the partition at byte {at} is out of range"))?,
            );
        }
        if flags & HAS_TOPIC_ID != 0 {
            let at = self.position();
            let raw = self.bytes(16, "the topic id")?;
            let id = Uuid::from_slice(raw).map_err(|_| self.fail("a malformed topic id"))?;
            if id.is_nil() {
                return Err(format!("the topic id at byte {at} is nil"));
            }
            source.topic_id = Some(id);
        }
        if flags & HAS_FIRST_OFFSET != 0 {
            source.first_offset = Some(self.i64("the first offset")?);
        }
        if flags & HAS_RULE != 0 {
            let place = self.byte("the region rule")?;
            let format = match self.byte("the region id format")? {
                0 => IdFormat::BigEndian,
                1 => IdFormat::Decimal,
                2 => IdFormat::GreptimeMeta,
                other => return Err(self.fail(&format!("unknown region id format {other}"))),
            };
            source.rule = Some(match place {
                0 => RegionRule::Key(format),
                1 => RegionRule::Header(
                    // Kafka allows an empty header key, so the rule may
                    // name one.
                    self.string(0, MAX_HEADER_NAME_LEN, "the region header name")?,
                    format,
                ),
                other => return Err(self.fail(&format!("unknown region rule place {other}"))),
            });
        }
        Ok(source)
    }

    fn u32(&mut self, what: &str) -> Result<u32, String> {
        let at = self.position();
        u32::try_from(self.uvarint(what)?)
            .map_err(|_| format!("{what} at byte {at} is out of range"))
    }
}

/// Decodes the file format; `path` only names the file in errors.
pub fn decode_index(data: &[u8], path: &str) -> Result<WalIndex, IndexError> {
    let corrupt = |what: String| IndexError::Corrupt {
        path: path.to_string(),
        what,
    };
    if data.len() < MAGIC.len() + 2 + 4 || &data[..4] != MAGIC {
        return Err(corrupt("not a walfetch index file (no WFIX header)".into()));
    }
    let (body, crc) = data.split_at(data.len() - 4);
    let stored = u32::from_be_bytes([crc[0], crc[1], crc[2], crc[3]]);
    let computed = crc32c::crc32c(body);
    if stored != computed {
        return Err(corrupt(format!(
            "checksum mismatch (stored {stored:#010x}, computed {computed:#010x}): the file is damaged or truncated"
        )));
    }
    let (version, flags) = (body[4], body[5]);
    let known = match version {
        1 => 0,
        INDEX_FILE_VERSION => HAS_TOPIC | HAS_PARTITION | HAS_TOPIC_ID | HAS_FIRST_OFFSET | HAS_RULE,
        _ => {
            return Err(corrupt(format!(
                "format version {version} is not supported (this build reads versions 1 and {INDEX_FILE_VERSION})"
            )))
        }
    };
    if flags & !known != 0 {
        return Err(corrupt(format!(
            "unknown flags {flags:#04x} at byte 5 for format version {version}"
        )));
    }
    let mut c = Cursor {
        rest: &body[6..],
        len: body.len(),
    };
    let parse = |c: &mut Cursor<'_>| -> Result<WalIndex, String> {
        let mut index = WalIndex::new();
        index.set_source(c.source(flags)?);
        let last = c.uvarint("last_index")?;
        if last > 0 {
            index.set_last_index(
                i64::try_from(last - 1).map_err(|_| c.fail("last_index out of range"))?,
            );
        }
        let regions = c.uvarint("the region count")?;
        for _ in 0..regions {
            let at = c.position();
            let region = c.uvarint("a region id")?;
            // The encoder writes each region once: a second list of it
            // would be joined to the first unseen.
            if index.region(region).is_some() {
                return Err(format!("region {region} is listed twice (at byte {at})"));
            }
            let count = c.uvarint("an entry count")?;
            // Listed with no entries: known, nothing indexed.
            index.add_region(region);
            let mut offset = 0i64;
            let mut previous_hint: Option<Hint> = None;
            for i in 0..count {
                let at = c.position();
                let delta = c.i64("an offset")?;
                if i > 0 && delta == 0 {
                    return Err(format!("region {region}: repeated offset at byte {at}"));
                }
                offset = offset
                    .checked_add(delta)
                    .ok_or_else(|| format!("region {region}: offset overflows at byte {at}"))?;
                let hint = match c.byte("a hint tag")? {
                    0 => None,
                    1 => {
                        let p = previous_hint.ok_or_else(|| {
                            c.fail("a hint refers to a previous batch that is not there")
                        })?;
                        let at = c.position();
                        let step = c.u32("a record end")?;
                        let record_end = p
                            .record_end
                            .checked_add(step)
                            .filter(|_| step > 0)
                            .ok_or_else(|| {
                                format!("record end step {step} at byte {at} is out of range")
                            })?;
                        Some(Hint { record_end, ..p })
                    }
                    2 => {
                        let back = c.i64("a batch base")?;
                        Some(Hint {
                            batch_base: offset - back,
                            batch_len: c.u32("a batch length")?,
                            record_end: c.u32("a record end")?,
                        })
                    }
                    tag => return Err(c.fail(&format!("unknown hint tag {tag}"))),
                };
                if hint.is_some() {
                    previous_hint = hint;
                }
                index
                    .push(region, IndexEntry { offset, hint })
                    .map_err(|e| e.to_string())?;
            }
        }
        if !c.rest.is_empty() {
            return Err(c.fail("unexpected bytes after the last region"));
        }
        // A record has one region: an offset listed under two is an index
        // of no log.
        super::check_one_region_an_offset(&index.regions).map_err(|e| e.to_string())?;
        Ok(index)
    };
    parse(&mut c).map_err(corrupt)
}

/// The temporary file a file meant for `path` is written to before it is
/// renamed over it: `<path>.tmp-walfetch`, the whole name kept (so that
/// `wal.0` and `wal.1` written side by side do not share one).
pub fn temp_path(path: &Path) -> std::path::PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".tmp-walfetch");
    name.into()
}

/// Writes `index` to `path` atomically (a temporary file renamed over it,
/// [`temp_path`]).
pub fn write_index_file(path: &Path, index: &WalIndex) -> Result<(), IndexError> {
    let io = |source| IndexError::Io {
        path: path.display().to_string(),
        source,
    };
    let tmp = temp_path(path);
    std::fs::write(&tmp, encode_index(index)).map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)
}

/// Reads an index file written by [`write_index_file`]
/// ([`read_index`] on the file).
pub fn read_index_file(path: &Path) -> Result<WalIndex, IndexError> {
    let name = path.display().to_string();
    let file = std::fs::File::open(path).map_err(|source| IndexError::Io {
        path: name.clone(),
        source,
    })?;
    read_index(file, &name)
}

/// Reads an index from `input` (a file, stdin), named `name` in errors.
/// What does not start with an index file's magic is refused after its
/// first four bytes (`/dev/zero`, a log segment given by mistake), and
/// what is longer than [`MAX_INDEX_FILE_BYTES`] once that many are read.
pub fn read_index(input: impl std::io::Read, name: &str) -> Result<WalIndex, IndexError> {
    use std::io::Read as _;
    let io = |source| IndexError::Io {
        path: name.to_owned(),
        source,
    };
    let mut input = input.take(MAX_INDEX_FILE_BYTES + 1);
    let mut data = Vec::new();
    (&mut input).take(4).read_to_end(&mut data).map_err(io)?;
    if data.as_slice() == MAGIC {
        input.read_to_end(&mut data).map_err(io)?;
    }
    if data.len() as u64 > MAX_INDEX_FILE_BYTES {
        return Err(IndexError::Corrupt {
            path: name.to_owned(),
            what: format!(
                "larger than {} MiB, the most an index file may be: not an index file",
                MAX_INDEX_FILE_BYTES >> 20
            ),
        });
    }
    decode_index(&data, name)
}

/// The most bytes an index file may have (about a hundred million entries
/// with hints): its checksum is at its end, so a reader holds it whole,
/// and a bigger one (`/dev/zero`, a wrong path) is refused before it
/// exhausts memory.
pub const MAX_INDEX_FILE_BYTES: u64 = 512 << 20;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::RegionIndex;
    use proptest::prelude::*;

    /// Counts the bytes read through it.
    struct Counted<R> {
        inner: R,
        read: u64,
    }

    impl<R: std::io::Read> std::io::Read for Counted<R> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.inner.read(buf)?;
            self.read += n as u64;
            Ok(n)
        }
    }

    #[test]
    fn what_is_not_an_index_is_refused_on_its_first_bytes() {
        let mut zeros = Counted {
            inner: std::io::repeat(0),
            read: 0,
        };
        let err = read_index(&mut zeros, "zeros").unwrap_err();
        assert!(
            err.to_string().contains("not a walfetch index file"),
            "{err}"
        );
        assert_eq!(zeros.read, 4);
    }

    #[test]
    fn an_index_read_from_a_reader_is_the_index_written() {
        let mut index = WalIndex::new();
        index
            .push(
                7,
                IndexEntry {
                    offset: 3,
                    hint: None,
                },
            )
            .unwrap();
        index.set_last_index(9);
        let bytes = encode_index(&index);
        let read = read_index(bytes.as_slice(), "mem").unwrap();
        assert_eq!(encode_index(&read), bytes);
    }

    fn source_strategy() -> impl Strategy<Value = IndexSource> {
        let format = prop_oneof![
            Just(IdFormat::Decimal),
            Just(IdFormat::BigEndian),
            Just(IdFormat::GreptimeMeta),
        ];
        let rule = prop_oneof![
            format.clone().prop_map(RegionRule::Key),
            ("[a-zé_]{0,12}", format).prop_map(|(n, f)| RegionRule::Header(n, f)),
        ];
        (
            prop::option::of("[a-zA-Z0-9._-]{1,40}"),
            prop::option::of(0..=i32::MAX),
            prop::option::of(1..=u128::MAX),
            prop::option::of(0..=i64::MAX),
            prop::option::of(rule),
        )
            .prop_map(|(topic, partition, id, first, rule)| IndexSource {
                topic,
                partition,
                topic_id: id.map(Uuid::from_u128),
                first_offset: first,
                rule,
            })
    }

    fn index_strategy() -> impl Strategy<Value = WalIndex> {
        let entry = (1..50i64, any::<bool>(), any::<bool>(), 0..4i64, 61..2000u32);
        // A region may be listed with no entries (`listed`, or none made).
        let region = (
            any::<u64>(),
            prop::collection::vec(entry, 0..40),
            any::<bool>(),
        );
        (
            prop::collection::vec(region, 0..6),
            prop::option::of(0..1_000_000i64),
            source_strategy(),
        )
            .prop_map(|(regions, last, source)| {
                let mut index = WalIndex::new();
                index.set_source(source);
                // A record has one region: an offset another region took
                // is left out.
                let mut taken = std::collections::BTreeSet::new();
                for (id, entries, listed) in regions {
                    if listed {
                        index.add_region(id);
                    }
                    let mut offset = -1;
                    let mut base = 0;
                    for (gap, hinted, new_batch, back, end) in entries {
                        offset += gap;
                        if new_batch || base > offset {
                            base = offset - back.min(offset);
                        }
                        let hint = hinted.then_some(Hint {
                            batch_base: base,
                            batch_len: 2000,
                            record_end: end,
                        });
                        if taken.contains(&offset) {
                            continue;
                        }
                        if index.push(id, IndexEntry { offset, hint }).is_ok() {
                            taken.insert(offset);
                        }
                    }
                }
                if let Some(l) = last {
                    index.set_last_index(l);
                }
                index
            })
    }

    proptest! {
        #[test]
        fn round_trips(index in index_strategy()) {
            let bytes = encode_index(&index);
            prop_assert_eq!(decode_index(&bytes, "x").unwrap(), index);
        }

        #[test]
        fn any_damage_is_an_error_not_a_panic(index in index_strategy(), at in any::<prop::sample::Index>(), flip in 1..=255u8) {
            let mut bytes = encode_index(&index);
            let i = at.index(bytes.len());
            bytes[i] ^= flip;
            prop_assert!(decode_index(&bytes, "x").is_err());
            let cut = at.index(bytes.len());
            prop_assert!(decode_index(&bytes[..cut], "x").is_err());
        }
    }

    /// A version 1 file (no source) of the regions' lists `lists`, in that
    /// order, offsets without hints, with a good checksum: what a
    /// hand-made or foreign writer's file may hold.
    fn file_with(lists: &[(u64, &[i64])]) -> Vec<u8> {
        let mut bytes = b"WFIX\x01\x00".to_vec();
        bytes.push(0);
        put(&mut bytes, lists.len() as u64);
        for (id, offsets) in lists {
            put(&mut bytes, *id);
            put(&mut bytes, offsets.len() as u64);
            let mut previous = 0;
            for &o in offsets.iter() {
                put(&mut bytes, (o - previous) as u64);
                bytes.push(0);
                previous = o;
            }
        }
        let crc = crc32c::crc32c(&bytes);
        bytes.extend_from_slice(&crc.to_be_bytes());
        bytes
    }

    /// A record has one region: a file that lists an offset under two
    /// regions, or a region twice, is not an index of any log, and was
    /// read as one (the offset replayed for both regions; the two lists of
    /// a region joined).
    #[test]
    fn an_offset_in_two_regions_or_a_region_listed_twice_is_corrupt() {
        assert!(decode_index(&file_with(&[(1, &[2, 5]), (2, &[3, 6])]), "f").is_ok());
        let err = decode_index(&file_with(&[(1, &[2, 5, 9]), (2, &[3, 5])]), "f")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("corrupt index file f")
                && err.contains("offset 5 is given to both region 1 and region 2"),
            "{err}"
        );
        let err = decode_index(&file_with(&[(1, &[2]), (2, &[3]), (1, &[7])]), "f")
            .unwrap_err()
            .to_string();
        assert!(err.contains("region 1 is listed twice"), "{err}");
    }

    #[test]
    fn errors_name_the_file_and_problem() {
        let err = decode_index(b"garbage file", "/tmp/idx")
            .unwrap_err()
            .to_string();
        assert!(err.contains("/tmp/idx") && err.contains("WFIX"), "{err}");
        let mut bytes = encode_index(&WalIndex::new());
        bytes[4] = 9;
        let n = bytes.len();
        let crc = crc32c::crc32c(&bytes[..n - 4]);
        bytes[n - 4..].copy_from_slice(&crc.to_be_bytes());
        let err = decode_index(&bytes, "f").unwrap_err().to_string();
        assert!(err.contains("version 9"), "{err}");
    }

    /// A version 1 file, as the build before version 2 wrote it: magic,
    /// version 1, flags 0, `last_index` 41 (+1), one region (7) of two
    /// entries, offsets 3 and 5 without hints.
    fn version_1_file() -> Vec<u8> {
        let mut bytes = b"WFIX\x01\x00".to_vec();
        bytes.extend_from_slice(&[42, 1, 7, 2, 3, 0, 2, 0]);
        let crc = crc32c::crc32c(&bytes);
        bytes.extend_from_slice(&crc.to_be_bytes());
        bytes
    }

    #[test]
    fn version_1_files_still_load_knowing_nothing_of_their_source() {
        let index = decode_index(&version_1_file(), "old.idx").unwrap();
        assert_eq!(index.last_index(), Some(41));
        let offsets: Vec<i64> = index.region(7).unwrap().offsets().collect();
        assert_eq!(offsets, [3, 5]);
        assert!(index.source().is_unknown());
        // Written again, it is a version 2 file saying the same.
        let again = encode_index(&index);
        assert_eq!(again[4], INDEX_FILE_VERSION);
        assert_eq!(decode_index(&again, "new.idx").unwrap(), index);
    }

    /// A region listed with no entries (GreptimeDB's `"7": []`) is kept:
    /// written as an entry count of 0 and read back as a region the index
    /// lists, not one it does not know.
    #[test]
    fn a_region_with_no_entries_round_trips() {
        let mut index = WalIndex::new();
        index.add_region(7);
        index.push(8, IndexEntry::offset_only(3)).unwrap();
        index.set_last_index(5);
        let back = decode_index(&encode_index(&index), "x").unwrap();
        assert_eq!(back, index);
        assert!(back.region(7).is_some_and(RegionIndex::is_empty));
        assert_eq!(back.regions().count(), 2);
    }

    #[test]
    fn version_2_records_what_it_indexes() {
        let mut index = WalIndex::new();
        index.push(3, IndexEntry::offset_only(10)).unwrap();
        index.set_last_index(12);
        let id = Uuid::from_u128(0x1234_5678_9abc_def0_1234_5678_9abc_def0);
        index.set_source(
            IndexSource::new("wal", 4)
                .with_topic_id(id)
                .with_first_offset(10)
                .with_rule(RegionRule::Header("region".into(), IdFormat::Decimal)),
        );
        let back = decode_index(&encode_index(&index), "x").unwrap();
        let source = back.source();
        assert_eq!(source.topic.as_deref(), Some("wal"));
        assert_eq!(source.partition, Some(4));
        assert_eq!(source.topic_id, Some(id));
        assert_eq!(source.first_offset, Some(10));
        assert_eq!(
            source.rule,
            Some(RegionRule::Header("region".into(), IdFormat::Decimal))
        );
    }

    #[test]
    fn unknown_flags_and_a_version_1_file_with_flags_are_errors() {
        for (version, flags) in [(1u8, HAS_TOPIC), (2, 1 << 5), (2, 0x80)] {
            let mut bytes = version_1_file();
            bytes[4] = version;
            bytes[5] = flags;
            let n = bytes.len();
            let crc = crc32c::crc32c(&bytes[..n - 4]);
            bytes[n - 4..].copy_from_slice(&crc.to_be_bytes());
            let err = decode_index(&bytes, "f").unwrap_err().to_string();
            assert!(err.contains("unknown flags"), "{err}");
        }
    }

    #[test]
    fn dense_hinted_regions_cost_about_four_bytes_an_entry() {
        let mut index = WalIndex::new();
        for o in 0..10_000i64 {
            let base = o - o % 50;
            let hint = Hint {
                batch_base: base,
                batch_len: 60_000,
                record_end: 61 + (o % 50) as u32 * 1000,
            };
            index
                .push(
                    1,
                    IndexEntry {
                        offset: o,
                        hint: Some(hint),
                    },
                )
                .unwrap();
        }
        let len = encode_index(&index).len();
        assert!(len < 42_000, "{len}");
    }

    #[test]
    fn the_temporary_file_keeps_the_whole_name() {
        assert_eq!(
            temp_path(Path::new("d/wal.0")),
            Path::new("d/wal.0.tmp-walfetch")
        );
        assert_ne!(temp_path(Path::new("wal.0")), temp_path(Path::new("wal.1")));
    }
}
