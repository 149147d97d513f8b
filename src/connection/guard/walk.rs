//! The walk of a response body against its [schema](super::schema): reads
//! only lengths, counts and tags, skips everything else by its size, and
//! stops at the first thing that does not fit the bytes left.
//!
//! An array's count is refused as soon as it is read if the bytes left
//! cannot hold that many elements (every element takes at least one byte,
//! an `int32` element four), so a walk costs at most one step per byte of
//! the body whatever the counts claim. A Fetch response's record batches
//! are one `bytes` field, skipped by its length.
//!
//! # References
//! - Kafka protocol guide, "Protocol Primitive Types":
//!   <https://kafka.apache.org/protocol#protocol_types>
//! - KIP-482 (compact lengths, `uvarint` tagged fields).

use kafka_protocol::messages::ApiKey;

use super::schema::{schema, Field, Ty};
use super::GuardError;

/// Nesting depth of the schemas is at most 4; anything deeper is a bug.
const MAX_DEPTH: usize = 8;

/// Walks `body`, a response body of `api` in `version`, and returns how
/// many bytes the message takes (bytes after it are not looked at).
pub(super) fn walk_body(api: ApiKey, version: i16, body: &[u8]) -> Result<usize, GuardError> {
    let schema = schema(api).ok_or(GuardError::UnknownApi { key: api as i16 })?;
    let mut walker = Walker {
        buf: body,
        pos: 0,
        version,
        flexible: version >= schema.flexible_from,
    };
    walker.walk_struct(schema.fields, 0)?;
    Ok(walker.pos)
}

struct Walker<'a> {
    buf: &'a [u8],
    pos: usize,
    version: i16,
    flexible: bool,
}

impl Walker<'_> {
    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn skip(&mut self, n: usize, field: &'static str) -> Result<(), GuardError> {
        if n > self.remaining() {
            return Err(GuardError::Truncated {
                field,
                at: self.pos,
                needed: n,
                remaining: self.remaining(),
            });
        }
        self.pos += n;
        Ok(())
    }

    fn fixed<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], GuardError> {
        let start = self.pos;
        self.skip(N, field)?;
        let mut out = [0u8; N];
        out.copy_from_slice(&self.buf[start..start + N]);
        Ok(out)
    }

    fn uvarint(&mut self, field: &'static str) -> Result<u32, GuardError> {
        let start = self.pos;
        let mut value: u32 = 0;
        for i in 0..5 {
            let [byte] = self.fixed::<1>(field)?;
            value |= u32::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(GuardError::VarintTooLong { field, at: start })
    }

    /// A length or count: `None` for null (-1, or compact 0).
    fn length(&mut self, wide: bool, field: &'static str) -> Result<Option<usize>, GuardError> {
        let start = self.pos;
        let length: i64 = if self.flexible {
            i64::from(self.uvarint(field)?) - 1
        } else if wide {
            i64::from(i32::from_be_bytes(self.fixed::<4>(field)?))
        } else {
            i64::from(i16::from_be_bytes(self.fixed::<2>(field)?))
        };
        match length {
            -1 => Ok(None),
            n if n < 0 => Err(GuardError::NegativeLength {
                field,
                at: start,
                length: n,
            }),
            // At most 2^32 - 2: it fits any usize of 32 bits or more, and
            // where it would not, it cannot fit the body either.
            n => Ok(Some(usize::try_from(n).unwrap_or(usize::MAX))),
        }
    }

    fn count(&mut self, element_min: usize, field: &'static str) -> Result<usize, GuardError> {
        let start = self.pos;
        let count = self.length(true, field)?.unwrap_or(0);
        if count > self.remaining() / element_min {
            return Err(GuardError::CountTooLarge {
                field,
                at: start,
                count,
                remaining: self.remaining(),
            });
        }
        Ok(count)
    }

    fn walk(&mut self, field: &Field, depth: usize) -> Result<(), GuardError> {
        let name = field.name;
        match field.ty {
            Ty::I8 | Ty::Bool => self.skip(1, name),
            Ty::I16 => self.skip(2, name),
            Ty::I32 => self.skip(4, name),
            Ty::I64 => self.skip(8, name),
            Ty::Uuid => self.skip(16, name),
            Ty::Str => {
                let len = self.length(false, name)?.unwrap_or(0);
                self.skip(len, name)
            }
            Ty::Bytes => {
                let len = self.length(true, name)?.unwrap_or(0);
                self.skip(len, name)
            }
            Ty::I32s => {
                let count = self.count(4, name)?;
                self.skip(count * 4, name)
            }
            Ty::Structs(fields) => {
                let count = self.count(1, name)?;
                for _ in 0..count {
                    self.walk_struct(fields, depth + 1)?;
                }
                Ok(())
            }
            Ty::Struct(fields) => self.walk_struct(fields, depth + 1),
        }
    }

    fn walk_struct(&mut self, fields: &[Field], depth: usize) -> Result<(), GuardError> {
        if depth > MAX_DEPTH {
            return Err(GuardError::TooDeep { max: MAX_DEPTH });
        }
        let version = self.version;
        for field in fields
            .iter()
            .filter(|f| f.tag.is_none() && f.is_in(version))
        {
            self.walk(field, depth)?;
        }
        if self.flexible {
            let count = self.uvarint("tagged field count")?;
            for _ in 0..count {
                let tag = self.uvarint("tagged field tag")?;
                let size = self.uvarint("tagged field size")? as usize;
                let start = self.pos;
                if size > self.remaining() {
                    return Err(GuardError::TaggedFieldTooLarge {
                        tag,
                        at: start,
                        size,
                        remaining: self.remaining(),
                    });
                }
                let known = fields
                    .iter()
                    .find(|f| f.tag == Some(tag) && f.is_in(version));
                match known {
                    Some(field) => {
                        self.walk(field, depth)?;
                        if self.pos - start != size {
                            return Err(GuardError::TaggedFieldSizeMismatch {
                                tag,
                                at: start,
                                size,
                                content: self.pos - start,
                            });
                        }
                    }
                    None => self.pos += size,
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::metadata_response::{
        MetadataResponsePartition, MetadataResponseTopic,
    };
    use kafka_protocol::messages::{BrokerId, MetadataResponse};

    use super::super::tests::encode;
    use super::*;

    /// The array field, byte and count of the `CountTooLarge` refusal the
    /// walk of `body` ends with, and the bytes left after the count.
    fn too_large(api: ApiKey, version: i16, body: &[u8]) -> (&'static str, usize, usize, usize) {
        match walk_body(api, version, body) {
            Err(GuardError::CountTooLarge {
                field,
                at,
                count,
                remaining,
            }) => (field, at, count, remaining),
            other => panic!("{api:?} v{version}: {other:?}"),
        }
    }

    #[test]
    fn huge_array_counts_are_refused_naming_field_and_byte() {
        // Fetch v4: throttle, then a responses array claiming i32::MAX topics.
        let mut body = 0i32.to_be_bytes().to_vec();
        body.extend(i32::MAX.to_be_bytes());
        assert_eq!(
            too_large(ApiKey::Fetch, 4, &body),
            ("responses", 4, 2_147_483_647, 0)
        );
        assert_eq!(
            walk_body(ApiKey::Fetch, 4, &body).map_err(|e| e.to_string()),
            Err("responses at byte 4 claims 2147483647 elements but only 0 bytes remain".into())
        );
        // Metadata v12 (compact): a broker array claiming u32::MAX - 1 entries.
        let body = [0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f];
        assert_eq!(
            too_large(ApiKey::Metadata, 12, &body),
            ("brokers", 4, 4_294_967_294, 0)
        );
        // An int32 array must fit four bytes per element.
        let mut body =
            MetadataResponse::default().with_topics(vec![MetadataResponseTopic::default()
                .with_partitions(vec![
                    MetadataResponsePartition::default().with_replica_nodes(vec![BrokerId(1)])
                ])]);
        body.throttle_time_ms = 0;
        let mut bytes = encode(&body, 1);
        // Locate the replica count (1) followed by broker id 1 and inflate it to 3.
        let at = bytes
            .windows(8)
            .position(|w| w == [0, 0, 0, 1, 0, 0, 0, 1])
            .expect("replica array");
        bytes[at + 3] = 3;
        let left = bytes.len() - at - 4;
        assert!(left < 12, "{left} bytes would hold 3 int32s");
        assert_eq!(
            too_large(ApiKey::Metadata, 1, &bytes),
            ("replica_nodes", at, 3, left)
        );
    }

    #[test]
    fn truncation_and_bad_lengths_name_field_and_byte() {
        // Fetch v4 cut inside the throttle time.
        assert_eq!(
            walk_body(ApiKey::Fetch, 4, &[0, 0]),
            Err(GuardError::Truncated {
                field: "throttle_time_ms",
                at: 0,
                needed: 4,
                remaining: 2
            })
        );
        // ListOffsets v1: one topic whose name claims length -2.
        let body = [0, 0, 0, 1, 0xff, 0xfe];
        assert_eq!(
            walk_body(ApiKey::ListOffsets, 1, &body),
            Err(GuardError::NegativeLength {
                field: "name",
                at: 4,
                length: -2
            })
        );
        // Metadata v12: a throttle time, then a six-byte varint.
        let body = [0, 0, 0, 0, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01];
        assert_eq!(
            walk_body(ApiKey::Metadata, 12, &body),
            Err(GuardError::VarintTooLong {
                field: "brokers",
                at: 4
            })
        );
    }
}
