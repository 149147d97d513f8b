//! Lazy iteration over the records of one batch, bounded by an offset range.
//!
//! Uncompressed records are sliced straight from the batch. Compressed
//! records are decompressed on demand into a growing buffer that each record
//! is split off (still without copying the record), so iteration that stops
//! at an offset bound stops decompressing too.

use std::io::Read;

use bytes::{Bytes, BytesMut};

use crate::compression::{self, Decompressed};
use crate::header::HEADER_LEN;
use crate::record::{describe, parse_fields, parse_prefix, Fields, Meta};
use crate::wire::{ReadFault, Reader};
use crate::{
    BatchHeader, Compression, DecodeOptions, Error, Record, RecordBatch, RecordRef, Section,
    TimestampType,
};

/// First read size of a streaming decompression; it doubles up to [`MAX_CHUNK`].
const FIRST_CHUNK: usize = 16 << 10;
const MAX_CHUNK: usize = 1 << 20;

/// Where the records' bytes come from.
enum Source {
    /// All bytes at hand; `pos` is the next record's start.
    Whole { data: Bytes, pos: usize },
    /// Decompressing on demand; `buf` holds bytes not yet handed out.
    Stream {
        /// The decompressor, once opened: the first fill opens it unless it
        /// decompresses everything at once without it.
        reader: Option<Box<dyn Read + Send>>,
        buf: BytesMut,
        consumed: usize,
        produced: usize,
        next_chunk: usize,
        eof: bool,
        /// The compressed records, for a codec's one-shot decompression.
        payload: Bytes,
    },
}

impl Source {
    /// A stream of the decompressed `payload`, read from `reader` (opened
    /// on the first fill if `None`), nothing read yet.
    fn stream(reader: Option<Box<dyn Read + Send>>, payload: Bytes) -> Self {
        Source::Stream {
            reader,
            buf: BytesMut::new(),
            consumed: 0,
            produced: 0,
            next_chunk: FIRST_CHUNK,
            eof: false,
            payload,
        }
    }

    /// The available bytes at the front. A method of the source alone (not
    /// of [`Records`]), so the record parser can read them while it updates
    /// the iterator's other fields.
    #[inline]
    fn front(&self) -> &[u8] {
        match self {
            Source::Whole { data, pos } => data.get(*pos..).unwrap_or_default(),
            Source::Stream { buf, .. } => buf,
        }
    }

    /// The position of the front, for error messages.
    #[inline]
    fn front_position(&self) -> usize {
        match self {
            Source::Whole { pos, .. } => *pos,
            Source::Stream { consumed, .. } => *consumed,
        }
    }
}

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Whole { data, pos } => f
                .debug_struct("Whole")
                .field("len", &data.len())
                .field("pos", pos)
                .finish(),
            Source::Stream {
                consumed, produced, ..
            } => f
                .debug_struct("Stream")
                .field("consumed", consumed)
                .field("produced", produced)
                .finish(),
        }
    }
}

/// An iterator over a batch's records in offset order.
///
/// Yields `Err` at most once, then ends.
///
/// Two ways to walk it, which may be mixed: as an [`Iterator`] of owned
/// [`Record`]s (each holds a zero-copy `Bytes` slice of the batch, one
/// reference count per record), or with [`Records::next_ref`], a lending
/// iterator of [`RecordRef`]s that borrow the batch's bytes and take no
/// reference count:
///
/// ```
/// # use walfetch_codec::{BatchBuilder, Batches, DecodeOptions, NewRecord};
/// # let records: Vec<NewRecord> = (0..3)
/// #     .map(|i| NewRecord {
/// #         offset_delta: i,
/// #         timestamp: 0,
/// #         key: None,
/// #         value: Some(vec![b'x'; 10].into()),
/// #         headers: Vec::new(),
/// #     })
/// #     .collect();
/// # let batch = BatchBuilder::new(0).encode(&records)?;
/// # let buf = batch.bytes;
/// let mut value_bytes = 0;
/// for batch in Batches::new(buf, DecodeOptions::default()) {
///     let mut records = batch?.records()?;
///     while let Some(record) = records.next_ref() {
///         let record = record?;
///         value_bytes += record.value().map_or(0, <[u8]>::len);
///     }
/// }
/// assert_eq!(value_bytes, 30);
/// # Ok::<(), walfetch_codec::Error>(())
/// ```
#[derive(Debug)]
pub struct Records {
    base_offset: i64,
    base_timestamp: i64,
    log_append_time: Option<i64>,
    last_offset_delta: i32,
    count: u32,
    index: u32,
    prev_delta: i64,
    start: i64,
    end: i64,
    source: Source,
    section: Section,
    /// Added to a source position to give the position reported in errors.
    section_base: usize,
    /// A truncated prefix: running out of bytes ends iteration quietly.
    truncated: bool,
    done: bool,
    codec: Compression,
    batch_position: usize,
    limit: usize,
    /// The record the last [`Records::next_ref`] split off a streaming
    /// source: what its `RecordRef` borrows.
    held: Held,
}

/// [`Records::held`], printed by its length only.
#[derive(Default)]
struct Held(Bytes);

impl std::fmt::Debug for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} bytes", self.0.len())
    }
}

/// A record found at the source's front and parsed, not yet consumed.
#[derive(Debug, Clone, Copy)]
struct Found {
    /// Bytes of its length varint.
    head: usize,
    /// Bytes of its body, after the length varint.
    len: usize,
    meta: Meta,
    fields: Fields,
}

impl Records {
    fn with_source(
        header: &BatchHeader,
        source: Source,
        section: Section,
        start: i64,
        end: i64,
    ) -> Self {
        Self {
            base_offset: header.base_offset,
            base_timestamp: header.base_timestamp,
            log_append_time: (header.attributes.timestamp_type() == TimestampType::LogAppendTime)
                .then_some(header.max_timestamp),
            last_offset_delta: header.last_offset_delta,
            count: header.record_count.max(0) as u32,
            index: 0,
            prev_delta: -1,
            start,
            end,
            source,
            section,
            section_base: if section == Section::Batch {
                HEADER_LEN
            } else {
                0
            },
            truncated: false,
            done: false,
            codec: Compression::None,
            batch_position: 0,
            limit: 0,
            held: Held::default(),
        }
    }

    /// The records of a complete batch, decompressing if needed.
    pub(crate) fn complete(
        batch: &RecordBatch,
        start: i64,
        end: i64,
        opts: DecodeOptions,
    ) -> Result<Self, Error> {
        let header = batch.header();
        let payload = batch.bytes().slice(HEADER_LEN..);
        let codec = batch.compression();
        let decompress_error = |source| Error::Decompress {
            base_offset: header.base_offset,
            position: batch.position(),
            codec,
            source,
        };
        let (source, section) = match codec {
            Compression::None => (
                Source::Whole {
                    data: payload,
                    pos: 0,
                },
                Section::Batch,
            ),
            _ => {
                let started =
                    compression::decompress(codec, payload.clone(), opts.max_decompressed_bytes)
                        .map_err(decompress_error)?;
                let source = match started {
                    Decompressed::Whole(data) => Source::Whole { data, pos: 0 },
                    Decompressed::Stream(reader) => Source::stream(Some(reader), payload),
                    Decompressed::Deferred(payload) => Source::stream(None, payload),
                };
                (source, Section::DecompressedRecords)
            }
        };
        let mut records = Self::with_source(header, source, section, start, end);
        records.codec = codec;
        records.batch_position = batch.position();
        records.limit = opts.max_decompressed_bytes;
        // Nothing in the batch can fall in the range: stop before decoding.
        if header.last_offset() < start || header.base_offset > end {
            records.done = true;
        }
        Ok(records)
    }

    /// The complete records in the prefix of an uncompressed batch cut short.
    pub(crate) fn prefix(header: BatchHeader, bytes: Bytes, opts: DecodeOptions) -> Self {
        let data = bytes.slice(HEADER_LEN.min(bytes.len())..);
        let mut records = Self::with_source(
            &header,
            Source::Whole { data, pos: 0 },
            Section::Batch,
            i64::MIN,
            i64::MAX,
        );
        records.truncated = true;
        records.limit = opts.max_decompressed_bytes;
        records
    }

    /// For a compressed batch, the bytes of its records decompressed so far:
    /// the buffer the records yielded are slices of, which any one of them
    /// keeps alive (see [`Record::detached`]). Zero for an uncompressed
    /// batch, whose records are slices of the batch itself.
    pub fn decompressed_len(&self) -> usize {
        match &self.source {
            _ if self.section != Section::DecompressedRecords => 0,
            Source::Whole { data, .. } => data.len(),
            Source::Stream { produced, .. } => *produced,
        }
    }

    /// Bounds the iteration to records with offsets in `start..=end`.
    pub fn bounded(mut self, start: i64, end: i64) -> Self {
        self.start = self.start.max(start);
        self.end = self.end.min(end);
        self
    }

    fn corrupt(&self, position: usize, what: &'static str) -> Error {
        Error::CorruptRecord {
            base_offset: self.base_offset,
            index: self.index,
            position: self.section_base + position,
            section: self.section,
            what,
        }
    }

    /// Makes at least `n` bytes available at the source's front, if the
    /// source has them. Returns how many are available.
    #[inline]
    fn fill(&mut self, n: usize) -> Result<usize, Error> {
        match &self.source {
            Source::Whole { data, pos } => Ok(data.len() - *pos),
            Source::Stream { buf, eof, .. } if buf.len() >= n || *eof => Ok(buf.len()),
            Source::Stream { .. } => self.fill_stream(n),
        }
    }

    /// [`Records::fill`] when the decompressor has to run.
    ///
    /// When no offset bound can stop the iteration before the batch's last
    /// record, everything is decompressed at once (see
    /// [`Records::decompress_all`]). Otherwise chunks of doubling size are
    /// read, so a bounded iteration stops decompressing early.
    #[inline(never)]
    fn fill_stream(&mut self, n: usize) -> Result<usize, Error> {
        let (codec, limit) = (self.codec, self.limit);
        let unbounded = self.end
            >= self
                .base_offset
                .saturating_add(i64::from(self.last_offset_delta));
        let decompress_error = self.decompress_error();
        let too_large = self.too_large();
        let Source::Stream {
            reader,
            buf,
            produced,
            next_chunk,
            eof,
            payload,
            ..
        } = &mut self.source
        else {
            return Ok(self.source.front().len());
        };
        if unbounded && *produced == 0 {
            let reader = reader.take();
            let payload = payload.clone();
            return self.decompress_all(payload, reader);
        }
        let reader = match reader {
            Some(reader) => reader,
            None => reader.insert(
                compression::open(codec, payload.clone(), limit).map_err(decompress_error)?,
            ),
        };
        while buf.len() < n && !*eof {
            let room = (limit + 1).saturating_sub(*produced);
            let want = (n - buf.len()).max(*next_chunk).min(room);
            if want == 0 {
                return Err(too_large);
            }
            *next_chunk = (*next_chunk * 2).min(MAX_CHUNK);
            let old = buf.len();
            buf.resize(old + want, 0);
            let mut filled = old;
            while filled < old + want {
                match reader.read(&mut buf[filled..old + want]) {
                    Ok(0) => {
                        *eof = true;
                        break;
                    }
                    Ok(got) => filled += got,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(source) => {
                        buf.truncate(filled);
                        return Err(decompress_error(source));
                    }
                }
            }
            buf.truncate(filled);
            *produced += filled - old;
            if *produced > limit {
                return Err(too_large);
            }
        }
        Ok(buf.len())
    }

    /// Decompresses all of `payload` into one buffer, which becomes a whole
    /// source (nothing was handed out yet, so positions carry over
    /// unchanged): in one shot where the codec can (a zstd frame stating its
    /// size goes straight into a buffer of exactly that size), else with
    /// `read_to_end` from `reader` (opened here if `None`) into a buffer
    /// sized once from the codec's length hint. Returns the bytes available.
    fn decompress_all(
        &mut self,
        payload: Bytes,
        reader: Option<Box<dyn Read + Send>>,
    ) -> Result<usize, Error> {
        let (codec, limit) = (self.codec, self.limit);
        // One byte over the cap tells "exactly at the cap" from "over it".
        let room = limit.saturating_add(1);
        // The hint comes from the compressed bytes: capped (by the codec's
        // ratio bound, and here by the cap), never trusted.
        let capacity = compression::decompressed_len_hint(codec, &payload).min(room);
        let out = match compression::decompress_whole(codec, &payload, limit, capacity) {
            Some(out) => out,
            None => {
                let decompress_error = self.decompress_error();
                let reader = match reader {
                    Some(reader) => reader,
                    None => compression::open(codec, payload, limit).map_err(decompress_error)?,
                };
                let mut out = Vec::with_capacity(capacity);
                reader
                    .take(room as u64)
                    .read_to_end(&mut out)
                    .map_err(decompress_error)?;
                out
            }
        };
        if out.len() > limit {
            return Err(self.too_large());
        }
        let available = out.len();
        self.source = Source::Whole {
            data: Bytes::from(out),
            pos: 0,
        };
        Ok(available)
    }

    /// Makes the error for a decompressor's failure.
    fn decompress_error(&self) -> impl Fn(std::io::Error) -> Error + Copy {
        let (base_offset, position, codec) = (self.base_offset, self.batch_position, self.codec);
        move |source| Error::Decompress {
            base_offset,
            position,
            codec,
            source,
        }
    }

    /// The error for records decompressing past the cap.
    fn too_large(&self) -> Error {
        Error::DecompressedTooLarge {
            base_offset: self.base_offset,
            position: self.batch_position,
            codec: self.codec,
            limit: self.limit,
        }
    }

    /// Drops the next `skip` bytes of the source and hands out the `n` after them.
    #[inline]
    fn advance(&mut self, skip: usize, n: usize) -> Bytes {
        match &mut self.source {
            Source::Whole { data, pos } => {
                let out = data.slice(*pos + skip..*pos + skip + n);
                *pos += skip + n;
                out
            }
            Source::Stream { buf, consumed, .. } => {
                *consumed += skip + n;
                bytes::Buf::advance(buf, skip);
                buf.split_to(n).freeze()
            }
        }
    }

    /// Drops the next `n` bytes of the source.
    #[inline]
    fn discard(&mut self, n: usize) {
        match &mut self.source {
            Source::Whole { pos, .. } => *pos += n,
            Source::Stream { buf, consumed, .. } => {
                *consumed += n;
                let _ = buf.split_to(n);
            }
        }
    }

    /// After the last record: bytes left over mean the batch lied about its
    /// record count or length.
    fn check_trailing(&mut self) -> Result<(), Error> {
        if self.truncated {
            return Ok(());
        }
        let left = self.fill(1)?;
        if left > 0 {
            return Err(Error::CorruptBatch {
                base_offset: self.base_offset,
                position: self.batch_position,
                what: format!(
                    "bytes follow the last of its {} records at byte {} of its {}",
                    self.count,
                    self.section_base + self.source.front_position(),
                    self.section
                ),
            });
        }
        Ok(())
    }

    /// Finds and parses the next record in range, leaving its bytes at the
    /// source's front: the one record parser of the owned and the borrowed
    /// paths.
    #[inline(always)]
    fn next_found(&mut self) -> Result<Option<Found>, Error> {
        loop {
            if self.index == self.count {
                self.check_trailing()?;
                return Ok(None);
            }
            // The length varint: at most 5 bytes.
            let mut available = self.fill(5)?;
            let at = self.source.front_position();
            let mut r = Reader::new(self.source.front());
            let len = match r.varint() {
                Ok(len) => len,
                Err(ReadFault::End) if self.truncated => return Ok(None),
                Err(ReadFault::End) => {
                    return Err(self.corrupt(at, "the records end before the batch's record count"))
                }
                Err(f) => return Err(self.corrupt(at, describe(f))),
            };
            let head = r.position();
            let Ok(len) = usize::try_from(len) else {
                return Err(self.corrupt(at, "negative record length"));
            };
            let wire_len = head + len;
            if available < wire_len {
                available = self.fill(wire_len)?;
            }
            if available < wire_len {
                if self.truncated {
                    return Ok(None);
                }
                return Err(self.corrupt(at, "record length runs past the end of the records"));
            }
            // One reader over the body for the prefix and the fields; it
            // borrows the source only, so the fields below stay writable.
            let body = self.source.front().get(head..wire_len).unwrap_or_default();
            let mut r = Reader::new(body);
            let prefix = parse_prefix(&mut r).map_err(|(p, w)| self.corrupt(at + head + p, w))?;
            let delta = i64::from(prefix.offset_delta);
            if delta <= self.prev_delta || delta > i64::from(self.last_offset_delta) {
                return Err(self.corrupt(
                    at,
                    "offset delta is not above the previous record's or exceeds the batch's last offset delta",
                ));
            }
            let Some(offset) = self.base_offset.checked_add(delta) else {
                return Err(self.corrupt(at, "base offset plus offset delta overflows an i64"));
            };
            if offset > self.end {
                return Ok(None);
            }
            self.prev_delta = delta;
            if offset < self.start {
                self.index += 1;
                self.discard(wire_len);
                continue;
            }
            let fields = parse_fields(&mut r).map_err(|(p, w)| self.corrupt(at + head + p, w))?;
            let timestamp = self
                .log_append_time
                .unwrap_or_else(|| self.base_timestamp.wrapping_add(prefix.timestamp_delta));
            let batch_start =
                (self.section == Section::Batch).then_some((self.section_base + at) as u32);
            self.index += 1;
            return Ok(Some(Found {
                head,
                len,
                meta: Meta {
                    offset,
                    timestamp,
                    wire_len: wire_len as u32,
                    batch_start,
                },
                fields,
            }));
        }
    }

    #[inline(always)]
    fn next_record(&mut self) -> Result<Option<Record>, Error> {
        let Some(found) = self.next_found()? else {
            return Ok(None);
        };
        let body = self.advance(found.head, found.len);
        Ok(Some(Record::from_parts(body, found.meta, found.fields)))
    }

    /// The next record, borrowed: a lending iterator yielding exactly the
    /// records, errors and end that [`Iterator::next`] would (and leaving the
    /// iterator in the same state), but as [`RecordRef`]s that borrow the
    /// batch's bytes instead of holding a reference-counted slice. The
    /// borrow ends before the next call, so walk it with
    /// `while let Some(record) = records.next_ref() { let record = record?; … }`
    /// and call [`RecordRef::to_record`] on a record that must be kept.
    ///
    /// Uncompressed records, and compressed ones decompressed at once (an
    /// iteration not bounded before the batch's last offset), are borrowed
    /// straight from the buffer. A bounded iteration over a compressed batch
    /// decompresses on demand and splits each record off that stream as the
    /// owned path does, then lends it.
    ///
    /// Calls to `next_ref` and `next` may be mixed: each yields the record
    /// after the last one either yielded.
    //
    // `#[inline]` (also on `next` and on the helpers they call): inlined
    // into the caller's loop, the record stays in registers instead of
    // going out through memory, and the helpers are not cross-crate calls.
    #[inline]
    pub fn next_ref(&mut self) -> Option<Result<RecordRef<'_>, Error>> {
        if self.done {
            return None;
        }
        let step = self.next_found();
        match self.fuse(step)? {
            Ok(found) => Some(Ok(self.lend(found))),
            Err(err) => Some(Err(err)),
        }
    }

    /// One step's outcome as the iterator yields it: the iterator ends for
    /// good after its last record or its first error.
    #[inline]
    fn fuse<T>(&mut self, step: Result<Option<T>, Error>) -> Option<Result<T, Error>> {
        let item = step.transpose();
        if !matches!(item, Some(Ok(_))) {
            self.done = true;
        }
        item
    }

    /// Lends the record `found` at the source's front: a whole source moves
    /// past it (the buffer still holds it), a stream splits it off.
    #[inline]
    fn lend(&mut self, found: Found) -> RecordRef<'_> {
        let body_start = match &mut self.source {
            Source::Whole { pos, .. } => {
                let body_start = *pos + found.head;
                *pos = body_start + found.len;
                body_start
            }
            Source::Stream { .. } => {
                self.held = Held(self.advance(found.head, found.len));
                0
            }
        };
        let backing = match &self.source {
            Source::Whole { data, .. } => data,
            Source::Stream { .. } => &self.held.0,
        };
        RecordRef::new(found.meta, found.fields, backing, body_start, found.len)
    }
}

impl Iterator for Records {
    type Item = Result<Record, Error>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let step = self.next_record();
        self.fuse(step)
    }
}
