//! Bounded reads and writes of the primitive Kafka wire types used inside
//! record batches: big-endian integers and zig-zag varints.
//!
//! # References
//! - Kafka protocol guide, "Protocol Primitive Types" (`VARINT`, `VARLONG`,
//!   which use the zig-zag encoding of Protocol Buffers).

/// Why a bounded read failed: the bytes ended, or a varint was too long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadFault {
    /// Fewer bytes remain than the value needs.
    End,
    /// A varint ran over its maximum length.
    VarintTooLong,
}

/// A cursor over a byte slice that never reads past its end.
///
/// It keeps the unread bytes as a slice (and the whole length, for
/// positions), so a read checks one length and slices without a second
/// bounds check.
#[derive(Debug, Clone)]
pub(crate) struct Reader<'a> {
    rest: &'a [u8],
    len: usize,
}

impl<'a> Reader<'a> {
    #[inline]
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Self {
            rest: buf,
            len: buf.len(),
        }
    }

    /// Bytes consumed so far.
    #[inline]
    pub(crate) fn position(&self) -> usize {
        self.len - self.rest.len()
    }

    #[inline]
    pub(crate) fn remaining(&self) -> usize {
        self.rest.len()
    }

    #[inline]
    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8], ReadFault> {
        let Some((out, rest)) = self.rest.split_at_checked(n) else {
            return Err(ReadFault::End);
        };
        self.rest = rest;
        Ok(out)
    }

    #[inline]
    pub(crate) fn skip(&mut self, n: usize) -> Result<(), ReadFault> {
        self.take(n).map(|_| ())
    }

    #[inline]
    fn array<const N: usize>(&mut self) -> Result<[u8; N], ReadFault> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    #[inline]
    pub(crate) fn i8(&mut self) -> Result<i8, ReadFault> {
        Ok(i8::from_be_bytes(self.array()?))
    }

    #[inline]
    pub(crate) fn i16(&mut self) -> Result<i16, ReadFault> {
        Ok(i16::from_be_bytes(self.array()?))
    }

    #[inline]
    pub(crate) fn i32(&mut self) -> Result<i32, ReadFault> {
        Ok(i32::from_be_bytes(self.array()?))
    }

    #[inline]
    pub(crate) fn u32(&mut self) -> Result<u32, ReadFault> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    #[inline]
    pub(crate) fn i64(&mut self) -> Result<i64, ReadFault> {
        Ok(i64::from_be_bytes(self.array()?))
    }

    /// An unsigned LEB128 value of at most `N` bytes.
    ///
    /// A one-byte value (a record's header count, most key lengths) is read
    /// first on its own. A longer one is read from a window of `N` bytes,
    /// with no bounds check per byte; near the end of the bytes the window is
    /// zero-padded (see [`padded`]). Everything stays inline and in
    /// registers: an out-of-line slow path taking `&mut self` made every
    /// caller keep its reader on the stack.
    #[inline(always)]
    fn unsigned<const N: usize>(&mut self) -> Result<u64, ReadFault> {
        let rest = self.rest;
        if let Some((&byte, after)) = rest.split_first() {
            if byte & 0x80 == 0 {
                self.rest = after;
                return Ok(u64::from(byte));
            }
        }
        let padding;
        let window = match rest.first_chunk::<N>() {
            Some(window) => window,
            None => {
                padding = padded(rest);
                &padding
            }
        };
        let mut value = 0u64;
        for (i, &byte) in window.iter().enumerate() {
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                // Ending on the padding means running past the bytes.
                let Some(after) = rest.get(i + 1..) else {
                    self.rest = &[];
                    return Err(ReadFault::End);
                };
                self.rest = after;
                return Ok(value);
            }
        }
        self.rest = rest.get(N..).unwrap_or_default();
        Err(ReadFault::VarintTooLong)
    }

    /// A zig-zag `VARINT` (at most 5 bytes).
    #[inline(always)]
    pub(crate) fn varint(&mut self) -> Result<i32, ReadFault> {
        let raw = self.unsigned::<5>()? as u32;
        Ok(((raw >> 1) as i32) ^ -((raw & 1) as i32))
    }

    /// A zig-zag `VARLONG` (at most 10 bytes).
    #[inline(always)]
    pub(crate) fn varlong(&mut self) -> Result<i64, ReadFault> {
        let raw = self.unsigned::<10>()?;
        Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64))
    }
}

/// The first `N` bytes of `rest`, which has fewer, followed by zeros.
///
/// A zero byte ends a varint, so a varint read from the padded window that
/// runs past `rest` ends on the padding, where the byte-by-byte reading
/// would have run out of bytes; it can never look too long.
#[cold]
fn padded<const N: usize>(rest: &[u8]) -> [u8; N] {
    let mut window = [0; N];
    for (to, from) in window.iter_mut().zip(rest) {
        *to = *from;
    }
    window
}

/// Appends a zig-zag `VARINT`.
pub(crate) fn put_varint(out: &mut Vec<u8>, value: i32) {
    put_unsigned(out, ((value << 1) ^ (value >> 31)) as u32 as u64);
}

/// Appends a zig-zag `VARLONG`.
pub(crate) fn put_varlong(out: &mut Vec<u8>, value: i64) {
    put_unsigned(out, ((value << 1) ^ (value >> 63)) as u64);
}

fn put_unsigned(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// The encoded length of a zig-zag `VARINT`: that of the same value as a
/// `VARLONG` (zig-zag maps a value to the same unsigned number at either
/// width).
pub(crate) fn varint_len(value: i32) -> usize {
    varlong_len(i64::from(value))
}

/// The encoded length of a zig-zag `VARLONG`.
pub(crate) fn varlong_len(value: i64) -> usize {
    let raw = ((value << 1) ^ (value >> 63)) as u64;
    let bits = 64 - raw.leading_zeros() as usize;
    bits.max(1).div_ceil(7)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn varint_round_trips(v: i32) {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            prop_assert_eq!(out.len(), varint_len(v));
            let mut r = Reader::new(&out);
            prop_assert_eq!(r.varint(), Ok(v));
            prop_assert_eq!(r.remaining(), 0);
        }

        #[test]
        fn varlong_round_trips(v: i64) {
            let mut out = Vec::new();
            put_varlong(&mut out, v);
            prop_assert_eq!(out.len(), varlong_len(v));
            let mut r = Reader::new(&out);
            prop_assert_eq!(r.varlong(), Ok(v));
            prop_assert_eq!(r.remaining(), 0);
        }
    }

    #[test]
    fn known_encodings() {
        // Values from the protocol guide's zig-zag table.
        for (v, bytes) in [
            (0, vec![0u8]),
            (-1, vec![1]),
            (1, vec![2]),
            (-64, vec![0x7f]),
            (64, vec![0x80, 0x01]),
        ] {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            assert_eq!(out, bytes, "{v}");
        }
    }

    proptest! {
        /// A varint cut short anywhere is `End` with every byte consumed,
        /// whether it is read from a full window or a padded one.
        #[test]
        fn truncated_varints_end_at_the_end(v: i64, pad in 0usize..12) {
            let mut out = Vec::new();
            put_varlong(&mut out, v);
            for cut in 0..out.len() {
                let mut r = Reader::new(&out[..cut]);
                prop_assert_eq!(r.varlong(), Err(ReadFault::End));
                prop_assert_eq!(r.position(), cut);
            }
            out.resize(out.len() + pad, 0xaa);
            let mut r = Reader::new(&out);
            prop_assert_eq!(r.varlong(), Ok(v));
            prop_assert_eq!(r.remaining(), pad);
        }
    }

    #[test]
    fn overlong_varints_consume_their_maximum_length() {
        let mut r = Reader::new(&[0xff; 8]);
        assert_eq!(r.varint(), Err(ReadFault::VarintTooLong));
        assert_eq!(r.position(), 5);
        let mut r = Reader::new(&[0x80; 12]);
        assert_eq!(r.varlong(), Err(ReadFault::VarintTooLong));
        assert_eq!(r.position(), 10);
    }

    #[test]
    fn overlong_and_truncated_varints_are_errors() {
        assert_eq!(
            Reader::new(&[0xff; 6]).varint(),
            Err(ReadFault::VarintTooLong)
        );
        assert_eq!(
            Reader::new(&[0xff; 11]).varlong(),
            Err(ReadFault::VarintTooLong)
        );
        assert_eq!(Reader::new(&[0x80]).varint(), Err(ReadFault::End));
        assert_eq!(Reader::new(&[]).i32(), Err(ReadFault::End));
    }
}
