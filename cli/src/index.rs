//! `walfetch index build|show|import-greptime`.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use walfetch::cluster::IsolationLevel;
use walfetch::index::{
    import_greptime, write_index_file, IdFormat, IndexSource, RegionRule, WalIndex,
};

use walfetch::scan::build_index;

use crate::connect::{check_partition, connect, offset, Target};
use crate::output::{last_index, outln};

#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// Scan a partition once and index every record by its region.
    #[command(after_help = "Example:
  walfetch index build -b 127.0.0.1:9092 -t wal -p 0 --out wal-0.idx
  walfetch index build -b 127.0.0.1:9092 -t wal --out wal.idx \\
      --region-header region --region-format decimal")]
    Build(BuildArgs),
    /// Summarize an index file.
    #[command(after_help = "Example:
  walfetch index show wal-0.idx --region 7")]
    Show(ShowArgs),
    /// Convert a GreptimeDB WAL index file (`__wal/<location>/index.json`).
    #[command(after_help = "Example:
  walfetch index import-greptime index.json --topic wal --out wal.idx")]
    ImportGreptime(ImportArgs),
}

/// How a record's region id is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum RegionFormat {
    /// Binary: the id as a big-endian unsigned integer of 1 to 8 bytes
    /// (WalWriter writes 8), e.g. region 7 is the bytes 00 .. 00 07.
    Be,
    /// Text: the id in ASCII decimal digits, e.g. region 7 is the byte "7"
    /// (0x37). Read as `be`, that byte would be region 55.
    Decimal,
    /// GreptimeDB's record meta: a JSON object whose `ns.region_id` is the
    /// id, which GreptimeDB writes into every record's key. An index from
    /// `import-greptime` already says so.
    Greptime,
}

/// Where a record's region id is.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct RuleArgs {
    /// Read the region id from this header instead of the key (of a
    /// record that has it twice, the last one, as Kafka's clients do).
    #[arg(long)]
    region_header: Option<String>,
    /// How the region id (in the key, or in `--region-header`) is written:
    /// binary big-endian, decimal digits, or GreptimeDB's record meta
    /// (JSON). The wrong one reads other regions' ids. Default: `be` for
    /// `index build`; for `replay`, the rule the index was built with
    /// (`greptime` for an index from `import-greptime`).
    #[arg(long, value_enum)]
    region_format: Option<RegionFormat>,
}

impl RuleArgs {
    /// The rule given on the command line, if any part of one is.
    pub(crate) fn rule(&self) -> anyhow::Result<Option<RegionRule>> {
        if self.region_header.is_none() && self.region_format.is_none() {
            return Ok(None);
        }
        let format = match self.region_format.unwrap_or(RegionFormat::Be) {
            RegionFormat::Be => IdFormat::BigEndian,
            RegionFormat::Decimal => IdFormat::Decimal,
            RegionFormat::Greptime => IdFormat::GreptimeMeta,
        };
        Ok(Some(match &self.region_header {
            Some(name) => RegionRule::Header(name.clone(), format),
            None => RegionRule::Key(format),
        }))
    }
}

#[derive(Debug, clap::Args)]
pub(crate) struct BuildArgs {
    #[command(flatten)]
    target: Target,
    /// The index file to write.
    #[arg(long)]
    out: PathBuf,
    /// First offset to index (default: the log start); it may fall inside
    /// a batch. The index records it: replays from below it are refused.
    #[arg(long, value_parser = offset, allow_hyphen_values = true)]
    from: Option<i64>,
    /// End offset, exclusive (default: the last stable offset, the high
    /// watermark unless a transaction is open). The index never goes past
    /// the last stable offset, and leaves out aborted transactions.
    #[arg(long, value_parser = offset, allow_hyphen_values = true)]
    to: Option<i64>,
    #[command(flatten)]
    rule: RuleArgs,
}

/// The most bytes of a GreptimeDB `index.json` `import-greptime` reads.
const MAX_JSON_BYTES: u64 = 256 << 20;

#[derive(Debug, clap::Args)]
pub(crate) struct ShowArgs {
    /// The index file, or `-` for stdin (at most 512 MiB).
    file: PathBuf,
    /// Print this region's offsets too, one per line, with the batch each
    /// is in where the index knows it.
    #[arg(long)]
    region: Option<u64>,
}

#[derive(Debug, clap::Args)]
pub(crate) struct ImportArgs {
    /// GreptimeDB's `index.json` (at most 256 MiB), or `-` for stdin.
    file: PathBuf,
    /// The topic to take from it (default: its only topic).
    #[arg(long)]
    topic: Option<String>,
    /// The index file to write.
    #[arg(long)]
    out: PathBuf,
}

pub(crate) async fn run(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Build(args) => build(args).await,
        Command::Show(args) => show(args),
        Command::ImportGreptime(args) => import(args),
    }
}

async fn build(args: BuildArgs) -> anyhow::Result<ExitCode> {
    let rule = args
        .rule
        .rule()?
        .unwrap_or(RegionRule::Key(IdFormat::BigEndian));
    // An index holds what a read_committed consumer reads, whatever a
    // shared properties file says: records of aborted transactions are
    // never indexed as entries.
    let settings = args.target.client.settings()?;
    anyhow::ensure!(
        settings.isolation() != Some(IsolationLevel::ReadUncommitted),
        "isolation.level=read_uncommitted: index build reads as read_committed only (records \
         of aborted transactions are never indexed; a replay reads past last_index at its own \
         isolation level)"
    );
    let cluster = connect(&args.target.brokers, &settings).await?;
    check_partition(&cluster, &args.target).await?;
    let (topic, partition) = (&args.target.topic, args.target.partition);
    let from = match args.from {
        Some(from) => from,
        None => cluster.log_start(topic, partition).await?.unwrap_or(0),
    };
    if let Some(to) = args.to {
        anyhow::ensure!(
            to > from,
            "--to {to} is not past the first offset {from}: nothing to index"
        );
    }
    let (index, report) =
        build_index(&cluster, topic, partition, &rule, from, args.to, 4 << 20).await?;
    write_index(&args.out, &index)?;
    say!(
        "indexed {} records of {} regions into {} (last_index {}); {} without a region, {} no-op records (no entry), {} control records, {} of aborted transactions left out; {} fetches, {} wire bytes",
        report.indexed,
        index.regions().count(),
        args.out.display(),
        last_index(index.last_index()),
        report.unassigned,
        report.noop,
        report.control,
        report.aborted,
        report.fetches,
        report.wire_bytes
    );
    for warning in report.warnings(&rule) {
        say!("warning: {warning}");
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes an index file; on failure, removes the temporary file the
/// write left next to `out`.
fn write_index(out: &Path, index: &WalIndex) -> anyhow::Result<()> {
    write_index_file(out, index).map_err(|e| {
        // `write_index_file` writes `<out>.tmp-walfetch`, then renames it.
        let _ = std::fs::remove_file(walfetch::index::temp_path(out));
        anyhow::Error::new(e).context("writing the index file")
    })
}

/// Opens a file, or stdin for `-`.
fn open(path: &Path) -> anyhow::Result<Box<dyn Read>> {
    Ok(if path.as_os_str() == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        Box::new(std::fs::File::open(path).with_context(|| format!("reading {}", path.display()))?)
    })
}

/// Reads a whole file of at most `limit` bytes (a larger one is an error,
/// found without holding more than `limit + 1` bytes): for inputs that
/// must be held whole, such as JSON documents.
pub(crate) fn read_bounded(path: &Path, limit: u64, what: &str) -> anyhow::Result<Vec<u8>> {
    let mut data = Vec::new();
    open(path)?
        .take(limit + 1)
        .read_to_end(&mut data)
        .with_context(|| format!("reading {}", path.display()))?;
    anyhow::ensure!(
        data.len() as u64 <= limit,
        "{} is larger than {} MiB: not {what}",
        path.display(),
        limit >> 20
    );
    Ok(data)
}

/// Reads an index file, or stdin for `-` ([`walfetch::index::read_index`]:
/// what is not an index is refused on its first bytes).
pub(crate) fn read_index(path: &Path) -> anyhow::Result<WalIndex> {
    Ok(walfetch::index::read_index(
        open(path)?,
        &path.display().to_string(),
    )?)
}

fn show(args: ShowArgs) -> anyhow::Result<ExitCode> {
    let index = read_index(&args.file)?;
    let name = if args.file.as_os_str() == "-" {
        "stdin".to_owned()
    } else {
        args.file.display().to_string()
    };
    outln!(
        "{name}: {} regions, {} entries, last_index {}",
        index.regions().count(),
        index.len(),
        last_index(index.last_index())
    )?;
    outln!("{}", describe_source(index.source()))?;
    outln!(
        "{:>20} {:>10} {:>14} {:>14} {:>8}",
        "region",
        "entries",
        "first",
        "last",
        "hinted"
    )?;
    for (id, region) in index.regions() {
        let entries = region.entries();
        let hinted = entries.iter().filter(|e| e.hint.is_some()).count();
        outln!(
            "{:>20} {:>10} {:>14} {:>14} {:>7.0}%",
            id,
            entries.len(),
            entries.first().map_or(-1, |e| e.offset),
            entries.last().map_or(-1, |e| e.offset),
            100.0 * hinted as f64 / entries.len().max(1) as f64
        )?;
    }
    if let Some(id) = args.region {
        let region = index
            .region(id)
            .with_context(|| format!("region {id} has no entries in the index"))?;
        outln!(
            "region {id}: {} entries; each its offset, then where the index knows it the \
             batch it is in (base offset, length in bytes) and the byte its record ends at",
            region.len()
        )?;
        for e in region.entries() {
            match e.hint {
                Some(h) => outln!(
                    "offset {} batch_base {} batch_len {} record_end {}",
                    e.offset,
                    h.batch_base,
                    h.batch_len,
                    h.record_end
                )?,
                None => outln!("offset {} (no hint)", e.offset)?,
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// What an index file says it indexes, as one line.
pub(crate) fn describe_source(source: &IndexSource) -> String {
    if source.is_unknown() {
        return "source: unknown (an index of format version 1, or imported)".to_owned();
    }
    let unknown = || "unknown".to_owned();
    format!(
        "source: topic {}, partition {}, topic id {}, first offset {}, region rule {}",
        source
            .topic
            .as_ref()
            .map_or_else(unknown, |t| format!("{t:?}")),
        source.partition.map_or_else(unknown, |p| p.to_string()),
        source.topic_id.map_or_else(unknown, |id| id.to_string()),
        source.first_offset.map_or_else(unknown, |o| o.to_string()),
        source.rule.as_ref().map_or_else(unknown, |r| r.to_string()),
    )
}

fn import(args: ImportArgs) -> anyhow::Result<ExitCode> {
    let json = read_bounded(&args.file, MAX_JSON_BYTES, "a GreptimeDB index file")?;
    let mut topics = import_greptime(&json, &args.file.display().to_string())?;
    let names: Vec<String> = topics.keys().cloned().collect();
    let topic = match args.topic {
        Some(t) => t,
        None if names.len() == 1 => names[0].clone(),
        None => anyhow::bail!(
            "{} holds {} topics ({}): choose one with --topic",
            args.file.display(),
            names.len(),
            names.join(", ")
        ),
    };
    let index = topics.remove(&topic).with_context(|| {
        format!(
            "topic {topic:?} is not in {} (it has: {})",
            args.file.display(),
            names.join(", ")
        )
    })?;
    write_index(&args.out, &index)?;
    say!(
        "imported {} entries of {} regions for topic {topic:?} into {} (offsets only, no hints)",
        index.len(),
        index.regions().count(),
        args.out.display()
    );
    Ok(ExitCode::SUCCESS)
}
