//! walfetch's own index file format (version 1).
//!
//! ```text
//! "WFIX"  magic                      u8 version (1)   u8 flags (0)
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
//! Varints are unsigned LEB128. Offsets of one region are delta-encoded, and
//! entries sharing a batch share its description: an entry costs about two
//! bytes without hints and four with them.

use std::path::Path;

use super::{Hint, IndexEntry, IndexError, WalIndex};

/// The file format version this build reads and writes.
pub const INDEX_FILE_VERSION: u8 = 1;
const MAGIC: &[u8; 4] = b"WFIX";

fn put(out: &mut Vec<u8>, value: u64) {
    // Writing to a Vec cannot fail.
    let _ = leb128::write::unsigned(out, value);
}

/// Encodes an index into the file format.
pub fn encode_index(index: &WalIndex) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + index.len() * 3);
    out.extend_from_slice(MAGIC);
    out.push(INDEX_FILE_VERSION);
    out.push(0);
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
    if body[4] != INDEX_FILE_VERSION {
        return Err(corrupt(format!(
            "format version {} is not supported (this build reads version {INDEX_FILE_VERSION})",
            body[4]
        )));
    }
    let mut c = Cursor {
        rest: &body[6..],
        len: body.len(),
    };
    c.rest = &body[6..];
    let parse = |c: &mut Cursor<'_>| -> Result<WalIndex, String> {
        let mut index = WalIndex::new();
        let last = c.uvarint("last_index")?;
        if last > 0 {
            index.set_last_index(
                i64::try_from(last - 1).map_err(|_| c.fail("last_index out of range"))?,
            );
        }
        let regions = c.uvarint("the region count")?;
        for _ in 0..regions {
            let region = c.uvarint("a region id")?;
            let count = c.uvarint("an entry count")?;
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
        Ok(index)
    };
    parse(&mut c).map_err(corrupt)
}

/// Writes `index` to `path` atomically (a temporary file renamed over it).
pub fn write_index_file(path: &Path, index: &WalIndex) -> Result<(), IndexError> {
    let io = |source| IndexError::Io {
        path: path.display().to_string(),
        source,
    };
    let tmp = path.with_extension("tmp-walfetch");
    std::fs::write(&tmp, encode_index(index)).map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)
}

/// Reads an index file written by [`write_index_file`].
pub fn read_index_file(path: &Path) -> Result<WalIndex, IndexError> {
    let data = std::fs::read(path).map_err(|source| IndexError::Io {
        path: path.display().to_string(),
        source,
    })?;
    decode_index(&data, &path.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn index_strategy() -> impl Strategy<Value = WalIndex> {
        let entry = (1..50i64, any::<bool>(), any::<bool>(), 0..4i64, 61..2000u32);
        let region = (any::<u64>(), prop::collection::vec(entry, 0..40));
        (
            prop::collection::vec(region, 0..6),
            prop::option::of(0..1_000_000i64),
        )
            .prop_map(|(regions, last)| {
                let mut index = WalIndex::new();
                for (id, entries) in regions {
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
                        let _ = index.push(id, IndexEntry { offset, hint });
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
}
