//! A broker process that cannot outlive its owner.
//!
//! The broker runs under a small `sh` wrapper whose stdin is a pipe from
//! this process. Dropping the [`Supervised`] closes the pipe, and so does
//! this process dying in any way (a panic, SIGKILL); the wrapper then kills
//! the broker with SIGKILL and exits. No broker outlives its owner, and a
//! drop is a `kill -9` of the broker (what the failover tests want).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

/// Kills the broker once the owner stops holding stdin open.
const WRAPPER: &str = r#"
"$0" "$@" </dev/null &
broker=$!
cat >/dev/null
kill -9 "$broker" 2>/dev/null
wait "$broker" 2>/dev/null
exit 0
"#;

/// A running broker process, killed when dropped.
#[derive(Debug)]
pub(crate) struct Supervised {
    wrapper: Child,
    stdin: Option<ChildStdin>,
    log: PathBuf,
    keep_log: bool,
}

impl Supervised {
    /// Runs `program args…` under the wrapper, stdout and stderr into `log`
    /// (truncated), with `envs` set. `keep_log`: leave the log file when
    /// dropped (it lives in a directory the caller removes).
    pub(crate) fn spawn(
        program: &Path,
        args: &[String],
        envs: &[(&str, String)],
        log: PathBuf,
        keep_log: bool,
    ) -> Result<Self, String> {
        let log_file = std::fs::File::create(&log)
            .map_err(|e| format!("cannot create {}: {e}", log.display()))?;
        let err_file = log_file.try_clone().map_err(|e| e.to_string())?;
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg(WRAPPER)
            .arg(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(log_file)
            .stderr(err_file);
        for (name, value) in envs {
            command.env(name, value);
        }
        let mut wrapper = command
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", program.display()))?;
        let stdin = wrapper.stdin.take();
        Ok(Self {
            wrapper,
            stdin,
            log,
            keep_log,
        })
    }

    /// The exit status, if the wrapper (and so the broker) has exited.
    pub(crate) fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.wrapper.try_wait().ok().flatten()
    }

    /// What the broker wrote to stdout and stderr so far.
    pub(crate) fn log_text(&self) -> String {
        read_log(&self.log)
    }
}

/// A log file's text, empty when it cannot be read.
pub(crate) fn read_log(path: &Path) -> String {
    let mut text = String::new();
    if let Ok(mut f) = std::fs::File::open(path) {
        let _ = f.read_to_string(&mut text);
    }
    text
}

/// The last `lines` lines of `text`.
pub(crate) fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

impl Drop for Supervised {
    fn drop(&mut self) {
        // Closing the pipe makes the wrapper kill the broker and exit.
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.wrapper.try_wait() {
                if !self.keep_log {
                    let _ = std::fs::remove_file(&self.log);
                }
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.wrapper.kill();
        let _ = self.wrapper.wait();
    }
}

/// A loopback port free when asked (another process may take it before the
/// broker binds it: callers retry a start that fails to bind).
pub(crate) fn free_port() -> Result<u16, std::io::Error> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}
