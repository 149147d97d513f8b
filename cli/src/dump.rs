//! `walfetch dump FILE`: decode raw record batches from a file.

use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use bytes::Bytes;
use walfetch::codec::{Batches, DecodeOptions};

use crate::output::{BatchLine, RecordLine};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// File of record batches: a `.log` segment or captured Fetch `records`.
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
}

pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let data =
        std::fs::read(&args.file).with_context(|| format!("reading {}", args.file.display()))?;
    let opts = DecodeOptions {
        verify_crc: !args.no_crc,
        ..DecodeOptions::default()
    };
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    match dump(Bytes::from(data), opts, &args, &mut out) {
        Ok(()) => {}
        // `walfetch dump x | head` closes the pipe early: not an error.
        Err(DumpError::Io(e)) if e.kind() == io::ErrorKind::BrokenPipe => {
            return Ok(ExitCode::SUCCESS)
        }
        Err(DumpError::Io(e)) => return Err(e).context("writing to stdout"),
        Err(DumpError::Decode(e)) => {
            let _ = out.flush();
            return Err(anyhow::Error::new(e).context(format!("decoding {}", args.file.display())));
        }
    }
    out.flush().context("writing to stdout")?;
    Ok(ExitCode::SUCCESS)
}

enum DumpError {
    Io(io::Error),
    Decode(walfetch::codec::Error),
}

impl From<io::Error> for DumpError {
    fn from(e: io::Error) -> Self {
        DumpError::Io(e)
    }
}

impl From<walfetch::codec::Error> for DumpError {
    fn from(e: walfetch::codec::Error) -> Self {
        DumpError::Decode(e)
    }
}

fn line(out: &mut impl Write, value: &impl serde::Serialize) -> Result<(), DumpError> {
    serde_json::to_writer(&mut *out, value).map_err(io::Error::from)?;
    out.write_all(b"\n")?;
    Ok(())
}

fn dump(
    data: Bytes,
    opts: DecodeOptions,
    args: &Args,
    out: &mut impl Write,
) -> Result<(), DumpError> {
    let mut batches = Batches::new(data, opts);
    for batch in &mut batches {
        let batch = batch?;
        let control = batch.control_record()?;
        if args.batches {
            line(out, &BatchLine::new(&batch, control.map(|c| c.kind.id())))?;
            continue;
        }
        if control.is_some() && !args.control {
            continue;
        }
        for record in batch.records()? {
            line(out, &RecordLine::new(&record?))?;
        }
    }
    if let Some(partial) = batches.partial() {
        let needed = partial
            .needed()
            .map_or("unknown".to_string(), |n| n.to_string());
        let offset = partial
            .base_offset()
            .map_or("unknown".to_string(), |o| o.to_string());
        eprintln!(
            "walfetch: note: the file ends in a partial batch at byte {} (base offset {offset}): {} of {needed} bytes present; not decoded",
            partial.position(),
            partial.present(),
        );
    }
    Ok(())
}
