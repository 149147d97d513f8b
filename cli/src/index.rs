//! `walfetch index build|show|import-greptime`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use walfetch::cluster::{IsolationLevel, OffsetSpec};
use walfetch::index::{
    import_greptime, read_index_file, write_index_file, IdFormat, IndexSource, RegionRule,
};

use walfetch::scan::build_index;

use crate::connect::{check_partition, connect, Target};

#[derive(Debug, clap::Subcommand)]
pub(crate) enum Command {
    /// Scan a partition once and index every record by its region.
    Build(BuildArgs),
    /// Summarize an index file.
    Show(ShowArgs),
    /// Convert a GreptimeDB WAL index file (`__wal/<location>/index.json`).
    ImportGreptime(ImportArgs),
}

/// Where a record's region id is.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct RuleArgs {
    /// Read the region id from this header instead of the key.
    #[arg(long)]
    region_header: Option<String>,
    /// How the id is written: `be` (big-endian, up to 8 bytes; WalWriter
    /// writes 8) or `decimal`. Default: `be` for `index build`; for
    /// `replay`, the rule the index was built with.
    #[arg(long)]
    region_format: Option<String>,
}

impl RuleArgs {
    /// The rule given on the command line, if any part of one is.
    pub(crate) fn rule(&self) -> anyhow::Result<Option<RegionRule>> {
        if self.region_header.is_none() && self.region_format.is_none() {
            return Ok(None);
        }
        let format = match self.region_format.as_deref().unwrap_or("be") {
            "be" => IdFormat::BigEndian,
            "decimal" => IdFormat::Decimal,
            other => anyhow::bail!("--region-format {other:?}: expected `be` or `decimal`"),
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
    #[arg(long)]
    from: Option<i64>,
    /// End offset, exclusive (default: the high watermark).
    #[arg(long)]
    to: Option<i64>,
    #[command(flatten)]
    rule: RuleArgs,
}

#[derive(Debug, clap::Args)]
pub(crate) struct ShowArgs {
    /// The index file.
    file: PathBuf,
    /// Print this region's offsets too.
    #[arg(long)]
    region: Option<u64>,
}

#[derive(Debug, clap::Args)]
pub(crate) struct ImportArgs {
    /// GreptimeDB's `index.json`.
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
    let cluster = connect(&args.target.brokers).await?;
    check_partition(&cluster, &args.target).await?;
    let (topic, partition) = (&args.target.topic, args.target.partition);
    let from = match args.from {
        Some(from) => from,
        None => cluster
            .list_offsets(
                topic,
                partition,
                OffsetSpec::Earliest,
                IsolationLevel::ReadUncommitted,
            )
            .await?
            .offset
            .unwrap_or(0),
    };
    let (index, report) =
        build_index(&cluster, topic, partition, &rule, from, args.to, 4 << 20).await?;
    write_index_file(&args.out, &index)?;
    eprintln!(
        "indexed {} records of {} regions into {} (last_index {:?}); {} without a region, {} control records; {} fetches, {} wire bytes",
        report.indexed,
        index.regions().count(),
        args.out.display(),
        index.last_index(),
        report.unassigned,
        report.control,
        report.fetches,
        report.wire_bytes
    );
    for warning in report.warnings(&rule) {
        eprintln!("warning: {warning}");
    }
    Ok(ExitCode::SUCCESS)
}

fn show(args: ShowArgs) -> anyhow::Result<ExitCode> {
    let index = read_index_file(&args.file)?;
    println!(
        "{}: {} regions, {} entries, last_index {}",
        args.file.display(),
        index.regions().count(),
        index.len(),
        index.last_index().map_or("none".into(), |l| l.to_string())
    );
    println!("{}", describe_source(index.source()));
    println!(
        "{:>20} {:>10} {:>14} {:>14} {:>8}",
        "region", "entries", "first", "last", "hinted"
    );
    for (id, region) in index.regions() {
        let entries = region.entries();
        let hinted = entries.iter().filter(|e| e.hint.is_some()).count();
        println!(
            "{:>20} {:>10} {:>14} {:>14} {:>7.0}%",
            id,
            entries.len(),
            entries.first().map_or(-1, |e| e.offset),
            entries.last().map_or(-1, |e| e.offset),
            100.0 * hinted as f64 / entries.len().max(1) as f64
        );
    }
    if let Some(id) = args.region {
        let region = index
            .region(id)
            .with_context(|| format!("region {id} has no entries in the index"))?;
        for e in region.entries() {
            match e.hint {
                Some(h) => println!(
                    "{} batch {} len {} end {}",
                    e.offset, h.batch_base, h.batch_len, h.record_end
                ),
                None => println!("{}", e.offset),
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
    let json =
        std::fs::read(&args.file).with_context(|| format!("reading {}", args.file.display()))?;
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
    write_index_file(&args.out, &index)?;
    eprintln!(
        "imported {} entries of {} regions for topic {topic:?} into {} (offsets only, no hints)",
        index.len(),
        index.regions().count(),
        args.out.display()
    );
    Ok(ExitCode::SUCCESS)
}
