//! Running the `walfetch` binary from the CLI tests. Each test binary uses
//! only part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

/// Runs `walfetch` with `args` to its end.
pub(crate) fn walfetch(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_walfetch"))
        .args(args)
        .output()
        .expect("run walfetch")
}

/// [`walfetch`] on a blocking thread, for tests whose scripted broker runs
/// on the test's own runtime (it must go on answering meanwhile).
pub(crate) async fn walfetch_async(args: Vec<String>) -> Output {
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        walfetch(&args)
    })
    .await
    .expect("walfetch ran")
}

/// `walfetch index build -b ADDR -t TOPIC --out INDEX` and `extra`, as
/// [`walfetch_async`] runs it.
pub(crate) async fn index_build_async(
    addr: &str,
    topic: &str,
    index: &Path,
    extra: &[&str],
) -> Output {
    let mut args = vec![
        "index",
        "build",
        "-b",
        addr,
        "-t",
        topic,
        "--out",
        path(index),
    ];
    args.extend_from_slice(extra);
    walfetch_async(strings(&args)).await
}

/// `args` as owned strings (for [`walfetch_async`]).
pub(crate) fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| (*s).to_owned()).collect()
}

/// Starts `walfetch` with `args`, its stdin, stdout and stderr piped.
pub(crate) fn spawn_piped(args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_walfetch"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run walfetch")
}

pub(crate) fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub(crate) fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A directory of this test process, `name` telling tests apart.
pub(crate) fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("walfetch-cli-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temporary directory");
    dir
}

pub(crate) fn path(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}
