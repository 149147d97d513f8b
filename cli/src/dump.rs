//! `walfetch dump FILE`: decode raw record batches from a file or stdin, one
//! batch at a time.

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use bytes::Bytes;
use walfetch::codec::{Batches, DecodeOptions, Error as CodecError, HEADER_LEN, LOG_OVERHEAD};

use crate::output::{stdout_error, BatchLine, RecordLine};

/// The default of `--max-batch-bytes`: Kafka's own limit is 1 MiB by
/// default (`message.max.bytes`), raised by some; 64 MiB leaves room.
const DEFAULT_MAX_BATCH_BYTES: u32 = 64 << 20;
/// The most `--max-batch-bytes` allows: a batch's length field is an i32.
const MAX_MAX_BATCH_BYTES: i64 = i32::MAX as i64;

#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  walfetch dump --batches 00000000000000000000.log
  zcat wal.records.gz | walfetch dump -")]
pub(crate) struct Args {
    /// File of record batches: a `.log` segment or captured Fetch
    /// `records`; `-` reads stdin.
    file: PathBuf,
    /// Print one object per batch header instead of one per record.
    #[arg(long)]
    batches: bool,
    /// Do not check batch CRCs.
    #[arg(long)]
    no_crc: bool,
    /// Include control records (transaction markers) in the record output.
    #[arg(long)]
    control: bool,
    /// The largest batch to read, in bytes (61 to 2147483647): a longer
    /// length in a batch header is an error, not an allocation. Batches are
    /// read one at a time, so this bounds the memory used.
    #[arg(long, default_value_t = DEFAULT_MAX_BATCH_BYTES,
          value_parser = clap::value_parser!(u32).range(HEADER_LEN as i64..=MAX_MAX_BATCH_BYTES))]
    max_batch_bytes: u32,
}

pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let name = if args.file.as_os_str() == "-" {
        "stdin".to_owned()
    } else {
        args.file.display().to_string()
    };
    let input: Box<dyn Read> = if args.file.as_os_str() == "-" {
        Box::new(io::stdin().lock())
    } else {
        Box::new(File::open(&args.file).with_context(|| format!("reading {name}"))?)
    };
    let opts = DecodeOptions {
        verify_crc: !args.no_crc,
        ..DecodeOptions::default()
    };
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let result = dump(BufReader::new(input), opts, &args, &mut out);
    match result {
        Ok(()) => {}
        Err(DumpError::Output(e)) => return Err(stdout_error(e)),
        Err(DumpError::Input(e)) => {
            out.flush().map_err(stdout_error)?;
            return Err(anyhow::Error::new(e).context(format!("reading {name}")));
        }
        Err(DumpError::Decode(e)) => {
            out.flush().map_err(stdout_error)?;
            return Err(anyhow::Error::new(e).context(format!("decoding {name}")));
        }
    }
    out.flush().map_err(stdout_error)?;
    Ok(ExitCode::SUCCESS)
}

enum DumpError {
    /// Reading the batches failed.
    Input(io::Error),
    /// Writing to stdout failed.
    Output(io::Error),
    Decode(CodecError),
}

impl From<CodecError> for DumpError {
    fn from(e: CodecError) -> Self {
        DumpError::Decode(e)
    }
}

fn line(out: &mut impl Write, value: &impl serde::Serialize) -> Result<(), DumpError> {
    serde_json::to_writer(&mut *out, value)
        .map_err(io::Error::from)
        .and_then(|()| out.write_all(b"\n"))
        .map_err(DumpError::Output)
}

/// Reads into `buf` until it is full or the input ends; the bytes read.
fn read_up_to(input: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match input.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// Decodes batch after batch: each batch's length comes from its header
/// (checked against `--max-batch-bytes` before anything is allocated), then
/// exactly that batch is read and decoded.
fn dump(
    mut input: impl Read,
    opts: DecodeOptions,
    args: &Args,
    out: &mut impl Write,
) -> Result<(), DumpError> {
    let mut position = 0usize;
    loop {
        let mut head = [0u8; LOG_OVERHEAD];
        let got = read_up_to(&mut input, &mut head).map_err(DumpError::Input)?;
        if got == 0 {
            return Ok(());
        }
        let base_offset = (got >= 8).then(|| i64::from_be_bytes(word(&head[..8])));
        let (Some(base_offset), true) = (base_offset, got == LOG_OVERHEAD) else {
            partial_note(position, base_offset, got, None);
            return Ok(());
        };
        let batch_length = i32::from_be_bytes([head[8], head[9], head[10], head[11]]);
        let min = (HEADER_LEN - LOG_OVERHEAD) as i64;
        let max = i64::from(args.max_batch_bytes) - LOG_OVERHEAD as i64;
        if i64::from(batch_length) < min || i64::from(batch_length) > max {
            let what = if i64::from(batch_length) < min {
                format!("batch length {batch_length} is below the {min}-byte minimum")
            } else {
                format!(
                    "batch length {batch_length} is over the {max}-byte limit \
                     (--max-batch-bytes {}): not read",
                    args.max_batch_bytes
                )
            };
            return Err(CodecError::CorruptBatch {
                base_offset,
                position,
                what,
            }
            .into());
        }
        // Checked above: 49 ..= i32::MAX - 12.
        let total = LOG_OVERHEAD + batch_length as usize;
        let mut bytes = Vec::with_capacity(total);
        bytes.extend_from_slice(&head);
        (&mut input)
            .take((total - LOG_OVERHEAD) as u64)
            .read_to_end(&mut bytes)
            .map_err(DumpError::Input)?;
        if bytes.len() < total {
            partial_note(position, Some(base_offset), bytes.len(), Some(total));
            return Ok(());
        }
        one_batch(Bytes::from(bytes), position, opts, args, out)?;
        position += total;
    }
}

fn word(bytes: &[u8]) -> [u8; 8] {
    let mut w = [0u8; 8];
    w.copy_from_slice(bytes);
    w
}

/// Prints one complete batch (`bytes` holds exactly it) found at byte
/// `position` of the input.
fn one_batch(
    bytes: Bytes,
    position: usize,
    opts: DecodeOptions,
    args: &Args,
    out: &mut impl Write,
) -> Result<(), DumpError> {
    let mut batches = Batches::new(bytes, opts);
    let Some(batch) = batches.next() else {
        return Ok(());
    };
    let batch = batch.map_err(|e| at_position(e, position))?;
    let control = batch
        .control_record()
        .map_err(|e| at_position(e, position))?;
    if args.batches {
        let line_of = BatchLine::new(&batch, control.map(|c| c.kind.id())).at(position);
        return line(out, &line_of);
    }
    if control.is_some() && !args.control {
        return Ok(());
    }
    for record in batch.records().map_err(|e| at_position(e, position))? {
        let record = record.map_err(|e| at_position(e, position))?;
        line(out, &RecordLine::new(&record))?;
    }
    Ok(())
}

/// A codec error about a batch decoded on its own, with the batch's byte
/// position in the whole input instead of 0. (A record's position is
/// within its batch already.)
fn at_position(err: CodecError, at: usize) -> CodecError {
    match err {
        CodecError::UnsupportedMagic {
            base_offset,
            position,
            magic,
        } => CodecError::UnsupportedMagic {
            base_offset,
            position: position + at,
            magic,
        },
        CodecError::CorruptBatch {
            base_offset,
            position,
            what,
        } => CodecError::CorruptBatch {
            base_offset,
            position: position + at,
            what,
        },
        CodecError::CrcMismatch {
            base_offset,
            position,
            stored,
            computed,
        } => CodecError::CrcMismatch {
            base_offset,
            position: position + at,
            stored,
            computed,
        },
        CodecError::UnknownCompression {
            base_offset,
            position,
            codec,
        } => CodecError::UnknownCompression {
            base_offset,
            position: position + at,
            codec,
        },
        CodecError::Decompress {
            base_offset,
            position,
            codec,
            source,
        } => CodecError::Decompress {
            base_offset,
            position: position + at,
            codec,
            source,
        },
        CodecError::DecompressedTooLarge {
            base_offset,
            position,
            codec,
            limit,
        } => CodecError::DecompressedTooLarge {
            base_offset,
            position: position + at,
            codec,
            limit,
        },
        other => other,
    }
}

/// The input ends inside a batch: a note, not an error (a capture or a
/// segment being written ends so).
fn partial_note(position: usize, base_offset: Option<i64>, present: usize, needed: Option<usize>) {
    let needed = needed.map_or("unknown".to_string(), |n| n.to_string());
    let offset = base_offset.map_or("unknown".to_string(), |o| o.to_string());
    say!(
        "walfetch: note: the input ends in a partial batch at byte {position} (base offset {offset}): {present} of {needed} bytes present; not decoded",
    );
}
