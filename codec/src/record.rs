//! One record inside a batch, decoded lazily from its bytes.
//!
//! ```text
//! length: varint        attributes: int8 (unused)   timestampDelta: varlong
//! offsetDelta: varint   keyLength: varint  key      valueLength: varint  value
//! headersCount: varint  [headerKeyLength: varint  headerKey
//!                        headerValueLength: varint  headerValue] ...
//! ```
//! A length of -1 is null (key, value, header value).
//!
//! # References
//! - Kafka documentation, "Message Format" / "Record" and "Record Header" (KIP-82).

use bytes::Bytes;

use crate::wire::{ReadFault, Reader};

/// Where a nullable byte field (a key or value) lies inside a record's body,
/// or that it is null.
///
/// Null is a sentinel length rather than an `Option<Span>`: the option's
/// 12-byte layout (a 4-byte tag before the two fields) made the parser's
/// result go through the stack as 4-byte stores reloaded by 8-byte loads
/// that straddled them, missing store-to-load forwarding; a quarter of the
/// record parser's samples landed on one such reload (perf annotate,
/// uncompressed 100 B records). Two plain `u32`s move in registers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    start: u32,
    /// The field's length, or [`Span::NULL_LEN`]. A wire length is an `i32`,
    /// so no real length reaches it.
    len: u32,
}

impl Span {
    const NULL_LEN: u32 = u32::MAX;
    /// A null field.
    const NULL: Span = Span {
        start: 0,
        len: Self::NULL_LEN,
    };

    /// The field's byte range in the body, or `None` if it is null.
    #[inline]
    fn range(self) -> Option<std::ops::Range<usize>> {
        (self.len != Self::NULL_LEN)
            .then(|| self.start as usize..self.start as usize + self.len as usize)
    }
}

/// A decoded record. Key, value and headers are views into one `Bytes` slice
/// of the batch (or of its decompressed records): no copy is made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    offset: i64,
    timestamp: i64,
    wire_len: u32,
    /// Where the record starts in an uncompressed batch.
    batch_start: Option<u32>,
    body: Bytes,
    key: Span,
    value: Span,
    headers_at: u32,
    header_count: u32,
}

impl Record {
    /// The record's offset in the partition.
    #[inline]
    pub fn offset(&self) -> i64 {
        self.offset
    }

    /// The record's timestamp in milliseconds (for a batch with log-append
    /// time, the batch's `maxTimestamp`, as Kafka consumers report it).
    #[inline]
    pub fn timestamp(&self) -> i64 {
        self.timestamp
    }

    /// The key, or `None` for a null key.
    #[inline]
    pub fn key(&self) -> Option<&[u8]> {
        self.key.range().map(|r| &self.body[r])
    }

    /// The value, or `None` for a null value (a tombstone).
    #[inline]
    pub fn value(&self) -> Option<&[u8]> {
        self.value.range().map(|r| &self.body[r])
    }

    /// The key as a zero-copy `Bytes` slice.
    #[inline]
    pub fn key_bytes(&self) -> Option<Bytes> {
        self.key.range().map(|r| self.body.slice(r))
    }

    /// The value as a zero-copy `Bytes` slice.
    #[inline]
    pub fn value_bytes(&self) -> Option<Bytes> {
        self.value.range().map(|r| self.body.slice(r))
    }

    /// Number of headers.
    #[inline]
    pub fn header_count(&self) -> usize {
        self.header_count as usize
    }

    /// The headers, in order, as borrowed views.
    pub fn headers(&self) -> Headers<'_> {
        Headers {
            reader: Reader::new(
                self.body
                    .get(self.headers_at as usize..)
                    .unwrap_or_default(),
            ),
            left: self.header_count,
            body: &self.body,
            base: self.headers_at as usize,
        }
    }

    /// The record's size on the wire, its length varint included.
    #[inline]
    pub fn wire_len(&self) -> usize {
        self.wire_len as usize
    }

    /// The same record over a copy of its own bytes. A record is a slice of
    /// its batch's buffer and keeps all of it alive, which for a compressed
    /// batch is every record decompressed: a caller keeping a few records
    /// of a large batch frees the rest by keeping these copies instead.
    pub fn detached(&self) -> Record {
        Record {
            body: Bytes::copy_from_slice(&self.body),
            ..*self
        }
    }

    /// Where the record lies in its batch, in bytes from the batch's first
    /// byte (length varint included), when the batch is uncompressed:
    /// `end` is the byte limit a fetch from the batch's start needs to
    /// deliver this record. `None` in a compressed batch.
    pub fn batch_range(&self) -> Option<std::ops::Range<usize>> {
        self.batch_start
            .map(|s| s as usize..s as usize + self.wire_len as usize)
    }
}

/// A decoded record borrowed from its [`Records`](crate::Records) iterator,
/// as [`Records::next_ref`](crate::Records::next_ref) yields it: the same
/// fields as a [`Record`], read from the same bytes, but without taking a
/// reference count on the batch's buffer. It lives until the iterator's
/// next call; [`RecordRef::to_record`] turns it into an owned [`Record`]
/// (still without copying the bytes) when it has to outlive that.
#[derive(Clone, Copy)]
pub struct RecordRef<'a> {
    meta: Meta,
    fields: Fields,
    /// The record's body: the bytes after its length varint.
    body: &'a [u8],
    /// The buffer `body` lies in, for zero-copy `Bytes` slices.
    backing: &'a Bytes,
    /// Where `body` starts in `backing`.
    body_start: usize,
}

impl<'a> RecordRef<'a> {
    /// The borrowed record whose `body` is `backing[body_start..body_start + len]`.
    #[inline]
    pub(crate) fn new(
        meta: Meta,
        fields: Fields,
        backing: &'a Bytes,
        body_start: usize,
        len: usize,
    ) -> Self {
        Self {
            meta,
            fields,
            body: backing
                .get(body_start..body_start + len)
                .unwrap_or_default(),
            backing,
            body_start,
        }
    }

    /// The record's offset in the partition.
    #[inline]
    pub fn offset(&self) -> i64 {
        self.meta.offset
    }

    /// The record's timestamp in milliseconds (for a batch with log-append
    /// time, the batch's `maxTimestamp`, as Kafka consumers report it).
    #[inline]
    pub fn timestamp(&self) -> i64 {
        self.meta.timestamp
    }

    /// The key, or `None` for a null key. The slice borrows the batch's
    /// buffer (or its decompressed records), not this `RecordRef`.
    #[inline]
    pub fn key(&self) -> Option<&'a [u8]> {
        let body = self.body;
        self.fields.key.range().and_then(|r| body.get(r))
    }

    /// The value, or `None` for a null value (a tombstone). The slice borrows
    /// the batch's buffer (or its decompressed records), not this `RecordRef`.
    #[inline]
    pub fn value(&self) -> Option<&'a [u8]> {
        let body = self.body;
        self.fields.value.range().and_then(|r| body.get(r))
    }

    /// Number of headers.
    #[inline]
    pub fn header_count(&self) -> usize {
        self.fields.header_count as usize
    }

    /// The headers, in order, as borrowed views (of the same lifetime as the
    /// key and value).
    pub fn headers(&self) -> Headers<'a> {
        let at = self.fields.headers_at as usize;
        Headers {
            reader: Reader::new(self.body.get(at..).unwrap_or_default()),
            left: self.fields.header_count,
            body: self.backing,
            base: self.body_start + at,
        }
    }

    /// The record's size on the wire, its length varint included.
    #[inline]
    pub fn wire_len(&self) -> usize {
        self.meta.wire_len as usize
    }

    /// Where the record lies in its batch, in bytes from the batch's first
    /// byte (length varint included), when the batch is uncompressed; `None`
    /// in a compressed batch. As [`Record::batch_range`].
    pub fn batch_range(&self) -> Option<std::ops::Range<usize>> {
        self.meta
            .batch_start
            .map(|s| s as usize..s as usize + self.meta.wire_len as usize)
    }

    /// The owned record: equal to the one [`Records::next`](Iterator::next)
    /// would have yielded here. Its bytes are a zero-copy `Bytes` slice of
    /// the same buffer (one reference count taken).
    pub fn to_record(&self) -> Record {
        let body = self
            .backing
            .slice(self.body_start..self.body_start + self.body.len());
        Record::from_parts(body, self.meta, self.fields)
    }
}

impl std::fmt::Debug for RecordRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordRef")
            .field("offset", &self.meta.offset)
            .field("timestamp", &self.meta.timestamp)
            .field("wire_len", &self.meta.wire_len)
            .field("batch_start", &self.meta.batch_start)
            .field("key", &self.key())
            .field("value", &self.value())
            .field("header_count", &self.fields.header_count)
            .finish()
    }
}

/// One record header: a key (a string by convention) and an optional value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header<'a> {
    /// The header key's bytes.
    pub key: &'a [u8],
    /// The header value, or `None` for null.
    pub value: Option<&'a [u8]>,
    body: &'a Bytes,
    value_at: usize,
}

impl Header<'_> {
    /// The value as a zero-copy `Bytes` slice.
    pub fn value_bytes(&self) -> Option<Bytes> {
        self.value
            .map(|v| self.body.slice(self.value_at..self.value_at + v.len()))
    }
}

/// Iterator over a record's headers.
#[derive(Debug, Clone)]
pub struct Headers<'a> {
    reader: Reader<'a>,
    left: u32,
    body: &'a Bytes,
    base: usize,
}

impl<'a> Iterator for Headers<'a> {
    type Item = Header<'a>;

    fn next(&mut self) -> Option<Header<'a>> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        // The headers were validated when the record was decoded, so these
        // reads cannot fail; a failure ends the iteration rather than panics.
        let key_len = self.reader.varint().ok()?;
        let key = self.reader.take(usize::try_from(key_len).ok()?).ok()?;
        let value_len = self.reader.varint().ok()?;
        let value_at = self.base + self.reader.position();
        let value = match usize::try_from(value_len) {
            Ok(len) => Some(self.reader.take(len).ok()?),
            Err(_) => None,
        };
        Some(Header {
            key,
            value,
            body: self.body,
            value_at,
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.left as usize))
    }
}

/// The fields every record starts with, read before deciding to skip it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Prefix {
    pub(crate) timestamp_delta: i64,
    pub(crate) offset_delta: i32,
}

/// Reads the record prefix from `r`, a reader over a record's body (the
/// bytes after its length varint) at its start. On success `r` is left at
/// the key length, for [`parse_fields`] to go on from.
#[inline(always)]
pub(crate) fn parse_prefix(r: &mut Reader<'_>) -> Result<Prefix, (usize, &'static str)> {
    let fault = |r: &Reader<'_>, f: ReadFault| (r.position(), describe(f));
    r.i8().map_err(|f| fault(r, f))?;
    let timestamp_delta = r.varlong().map_err(|f| fault(r, f))?;
    let offset_delta = r.varint().map_err(|f| fault(r, f))?;
    Ok(Prefix {
        timestamp_delta,
        offset_delta,
    })
}

/// Where a record's fields lie in its body (the bytes after its length
/// varint): what the one record parser, [`parse_fields`], produces for both
/// the owned [`Record`] and the borrowed [`RecordRef`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fields {
    pub(crate) key: Span,
    pub(crate) value: Span,
    /// Where the first header's key length starts.
    pub(crate) headers_at: u32,
    pub(crate) header_count: u32,
}

/// What the batch and the record's position say about a record, beside its
/// fields: the same for the owned and the borrowed record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Meta {
    pub(crate) offset: i64,
    pub(crate) timestamp: i64,
    pub(crate) wire_len: u32,
    pub(crate) batch_start: Option<u32>,
}

impl Record {
    /// The owned record over `body`, whose fields lie where `fields` says.
    #[inline]
    pub(crate) fn from_parts(body: Bytes, meta: Meta, fields: Fields) -> Self {
        Record {
            offset: meta.offset,
            timestamp: meta.timestamp,
            wire_len: meta.wire_len,
            batch_start: meta.batch_start,
            body,
            key: fields.key,
            value: fields.value,
            headers_at: fields.headers_at,
            header_count: fields.header_count,
        }
    }
}

/// Decodes the rest of a record whose prefix [`parse_prefix`] read from
/// `r`: where its key, value and headers lie in the body `r` reads (the
/// bytes after the length varint, exactly the record's length of them).
/// Errors carry the byte position inside the body and what was wrong.
///
/// The one record parser: [`parse_prefix`] and this read the body in one
/// pass, for the owned [`Record`] and the borrowed [`RecordRef`] alike.
#[inline(always)]
pub(crate) fn parse_fields(r: &mut Reader<'_>) -> Result<Fields, (usize, &'static str)> {
    let key = nullable(r, "negative key length below -1")?;
    let value = nullable(r, "negative value length below -1")?;
    let header_count = r.varint().map_err(|f| (r.position(), describe(f)))?;
    let header_count =
        u32::try_from(header_count).map_err(|_| (r.position(), "negative header count"))?;
    let headers_at = r.position() as u32;
    for _ in 0..header_count {
        let key_len = r.varint().map_err(|f| (r.position(), describe(f)))?;
        let key_len =
            usize::try_from(key_len).map_err(|_| (r.position(), "negative header key length"))?;
        r.skip(key_len).map_err(|f| (r.position(), describe(f)))?;
        nullable(r, "negative header value length below -1")?;
    }
    if r.remaining() != 0 {
        return Err((
            r.position(),
            "record length runs past the record's last header",
        ));
    }
    Ok(Fields {
        key,
        value,
        headers_at,
        header_count,
    })
}

/// Reads a length-prefixed, nullable byte field and returns its span.
///
/// Always inlined: out of line, its `Result` went through
/// the stack and the caller's 8-byte reload of the two 4-byte `Span` stores
/// missed store-to-load forwarding: about half of `Records::next`'s samples
/// landed on those two reloads (perf annotate, uncompressed 100 B records).
#[inline(always)]
fn nullable(r: &mut Reader<'_>, negative: &'static str) -> Result<Span, (usize, &'static str)> {
    let len = r.varint().map_err(|f| (r.position(), describe(f)))?;
    if len == -1 {
        return Ok(Span::NULL);
    }
    let len = u32::try_from(len).map_err(|_| (r.position(), negative))?;
    let start = r.position() as u32;
    r.skip(len as usize)
        .map_err(|f| (r.position(), describe(f)))?;
    Ok(Span { start, len })
}

pub(crate) fn describe(fault: ReadFault) -> &'static str {
    match fault {
        ReadFault::End => "a field runs past the record's length",
        ReadFault::VarintTooLong => "a varint is longer than its type allows",
    }
}
