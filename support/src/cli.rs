//! Running the `walfetch` command line from the CLI's tests, and reading
//! what it printed.

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

/// The `walfetch` binary a test runs. Only a test of the CLI's package can
/// name it: `Cli::new(env!("CARGO_BIN_EXE_walfetch"))`.
#[derive(Debug, Clone, Copy)]
pub struct Cli {
    bin: &'static str,
}

impl Cli {
    /// The binary at `bin`.
    pub const fn new(bin: &'static str) -> Self {
        Self { bin }
    }

    /// Runs `walfetch` with `args` to its end.
    pub fn run(&self, args: &[&str]) -> Output {
        Command::new(self.bin)
            .args(args)
            .output()
            .expect("run walfetch")
    }

    /// [`Cli::run`] on a blocking thread, for tests whose scripted broker
    /// runs on the test's own runtime (it must go on answering meanwhile).
    pub async fn run_async(&self, args: Vec<String>) -> Output {
        let cli = *self;
        tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            cli.run(&args)
        })
        .await
        .expect("walfetch ran")
    }

    /// `walfetch index build -b ADDR -t TOPIC --out INDEX` and `extra`, as
    /// [`Cli::run_async`] runs it.
    pub async fn index_build_async(
        &self,
        addr: &str,
        topic: &str,
        index: &Path,
        extra: &[&str],
    ) -> Output {
        self.run_async(strings(&index_build_args(addr, topic, index, extra)))
            .await
    }

    /// `walfetch index build -b ADDR -t TOPIC --out INDEX` and `extra`, run
    /// to its end.
    pub fn index_build(&self, addr: &str, topic: &str, index: &Path, extra: &[&str]) -> Output {
        self.run(&index_build_args(addr, topic, index, extra))
    }

    /// `walfetch replay -b ADDR -t TOPIC --index INDEX --region REGION` and
    /// `extra`, run to its end.
    pub fn replay_region(
        &self,
        addr: &str,
        topic: &str,
        index: &Path,
        region: &str,
        extra: &[&str],
    ) -> Output {
        self.run(&replay_region_args(addr, topic, index, region, extra))
    }

    /// [`Cli::replay_region`] as [`Cli::run_async`] runs it.
    pub async fn replay_region_async(
        &self,
        addr: &str,
        topic: &str,
        index: &Path,
        region: &str,
        extra: &[&str],
    ) -> Output {
        self.run_async(strings(&replay_region_args(
            addr, topic, index, region, extra,
        )))
        .await
    }

    /// Starts `walfetch` with `args`, its stdout to `stdout`, its stderr
    /// piped (its stdin the test's own).
    pub fn spawn<S: AsRef<OsStr>>(&self, args: &[S], stdout: Stdio) -> Child {
        Command::new(self.bin)
            .args(args)
            .stdout(stdout)
            .stderr(Stdio::piped())
            .spawn()
            .expect("run walfetch")
    }

    /// Starts `walfetch` with `args`, its stdin, stdout and stderr piped.
    pub fn spawn_piped(&self, args: &[&str]) -> Child {
        Command::new(self.bin)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run walfetch")
    }
}

/// The arguments of [`Cli::index_build`].
fn index_build_args<'a>(
    addr: &'a str,
    topic: &'a str,
    index: &'a Path,
    extra: &[&'a str],
) -> Vec<&'a str> {
    let args = [
        "index",
        "build",
        "-b",
        addr,
        "-t",
        topic,
        "--out",
        path(index),
    ];
    [&args[..], extra].concat()
}

/// The arguments of [`Cli::replay_region`].
fn replay_region_args<'a>(
    addr: &'a str,
    topic: &'a str,
    index: &'a Path,
    region: &'a str,
    extra: &[&'a str],
) -> Vec<&'a str> {
    let args = [
        "replay",
        "-b",
        addr,
        "-t",
        topic,
        "--index",
        path(index),
        "--region",
        region,
    ];
    [&args[..], extra].concat()
}

/// The words of a command line (no quoting: for arguments without spaces).
pub fn words(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

/// `args` as owned strings (for [`Cli::run_async`]).
pub fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| (*s).to_owned()).collect()
}

/// What the command wrote on stderr.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// What the command wrote on stdout.
pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub use crate::temp_dir;

/// `p` as the `&str` a command line takes.
pub fn path(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

/// The stats line of a replay: the last line on stderr, one JSON object.
pub fn stats_line(out: &Output) -> serde_json::Value {
    let err = stderr(out);
    let last = err.trim().lines().last().unwrap_or_default();
    serde_json::from_str(last)
        .unwrap_or_else(|e| panic!("the last line on stderr is not the stats line ({e}): {err}"))
}
