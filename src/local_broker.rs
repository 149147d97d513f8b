//! A local Kafka-compatible broker for the demo, tests and benchmarks:
//! Tansu 0.6.0 with in-memory storage on a free loopback port.
//!
//! [`find_tansu`] looks for the binary, [`install_tansu`] installs it with
//! `cargo install` (about 10 minutes cold on 2 cores), and [`LocalBroker`]
//! runs one, stopping it when dropped.
//!
//! The broker runs under a small `sh` wrapper whose stdin is a pipe from
//! this process: dropping the [`LocalBroker`] closes the pipe, and so does
//! this process dying in any way (even SIGKILL); the wrapper then kills the
//! broker. No broker outlives its owner.

use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use crate::connection::{Connection, ConnectionConfig};

/// The Tansu version walfetch is tested against.
pub const TANSU_VERSION: &str = "0.6.0";

/// How to install Tansu, for error messages.
pub const INSTALL_HINT: &str = "install it with `scripts/setup-broker.sh` (runs `cargo install \
    tansu --version 0.6.0 --locked --features dynostore`, about 10 minutes cold), or point \
    TANSU_BIN at a tansu 0.6.0 binary";

/// Kills the broker once the owner stops holding stdin open.
const WRAPPER: &str = r#"
"$0" "$@" </dev/null &
broker=$!
cat >/dev/null
kill -9 "$broker" 2>/dev/null
wait "$broker" 2>/dev/null
exit 0
"#;

/// Why a local broker could not be found, installed or started.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LocalBrokerError {
    /// No binary was found.
    #[error("the Tansu {TANSU_VERSION} broker is not installed (looked at $TANSU_BIN, `tansu` on PATH and ~/.cargo/bin/tansu): {INSTALL_HINT}")]
    NotInstalled,
    /// `cargo install` failed.
    #[error("installing Tansu failed: {0}")]
    Install(String),
    /// The broker did not come up.
    #[error("Tansu ({binary}) did not start: {why}")]
    Start {
        /// The binary run.
        binary: String,
        /// What happened, with the broker's log.
        why: String,
    },
}

/// Finds the tansu binary: `$TANSU_BIN`, `tansu` on `PATH`, or
/// `$CARGO_HOME/bin/tansu` (`~/.cargo/bin/tansu`), with `env` as the
/// environment.
pub fn find_tansu_in(env: impl Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(bin) = env("TANSU_BIN") {
        candidates.push(bin.into());
    }
    if let Some(path) = env("PATH") {
        candidates.extend(std::env::split_paths(&path).map(|dir| dir.join("tansu")));
    }
    let cargo_home = env("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| env("HOME").map(|h| Path::new(&h).join(".cargo")));
    if let Some(home) = cargo_home {
        candidates.push(home.join("bin").join("tansu"));
    }
    candidates.into_iter().find(|c| c.is_file())
}

/// Finds the tansu binary in this process's environment.
pub fn find_tansu() -> Result<PathBuf, LocalBrokerError> {
    find_tansu_in(|name| std::env::var_os(name)).ok_or(LocalBrokerError::NotInstalled)
}

/// Installs Tansu 0.6.0 with `cargo install` (its output goes to this
/// process's stderr) and returns the binary.
pub fn install_tansu() -> Result<PathBuf, LocalBrokerError> {
    let status = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .args([
            "install",
            "tansu",
            "--version",
            TANSU_VERSION,
            "--locked",
            "--features",
            "dynostore",
        ])
        .stdin(Stdio::null())
        .status()
        .map_err(|e| LocalBrokerError::Install(format!("cannot run cargo: {e}")))?;
    if !status.success() {
        return Err(LocalBrokerError::Install(format!(
            "cargo install exited with {status}"
        )));
    }
    find_tansu()
}

/// The version a binary reports, e.g. `tansu 0.6.0`.
pub fn tansu_version(binary: &Path) -> Option<String> {
    let output = Command::new(binary).arg("--version").output().ok()?;
    Some(String::from_utf8_lossy(&output.stdout).trim().to_string())
}

/// A running local broker; dropping it stops the broker.
#[derive(Debug)]
pub struct LocalBroker {
    wrapper: Child,
    stdin: Option<ChildStdin>,
    port: u16,
    log: PathBuf,
}

fn free_port() -> Result<u16, std::io::Error> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

impl LocalBroker {
    /// Starts `binary` on a free loopback port and waits (up to 20 s) until
    /// it answers ApiVersions. `advertised` overrides the address the broker
    /// advertises in Metadata (e.g. a proxy in front of it).
    pub async fn start(binary: &Path, advertised: Option<&str>) -> Result<Self, LocalBrokerError> {
        Self::start_with(binary, advertised, &[]).await
    }

    /// [`LocalBroker::start`] with more `tansu broker` arguments (e.g.
    /// `--authentication`).
    pub async fn start_with(
        binary: &Path,
        advertised: Option<&str>,
        extra_args: &[&str],
    ) -> Result<Self, LocalBrokerError> {
        let start_error = |why: String| LocalBrokerError::Start {
            binary: binary.display().to_string(),
            why,
        };
        let mut last = String::new();
        // A port found free can be taken before the broker binds it: retry.
        for _ in 0..3 {
            let port =
                free_port().map_err(|e| start_error(format!("no free loopback port: {e}")))?;
            let mut broker =
                Self::spawn(binary, port, advertised, extra_args).map_err(start_error)?;
            match broker.wait_ready(Duration::from_secs(20)).await {
                Ok(()) => return Ok(broker),
                Err(why) => last = format!("{why}\n--- broker log ---\n{}", broker.log_text()),
            }
        }
        Err(start_error(last))
    }

    fn spawn(
        binary: &Path,
        port: u16,
        advertised: Option<&str>,
        extra_args: &[&str],
    ) -> Result<Self, String> {
        let log =
            std::env::temp_dir().join(format!("walfetch-tansu-{}-{port}.log", std::process::id()));
        let log_file = std::fs::File::create(&log)
            .map_err(|e| format!("cannot create {}: {e}", log.display()))?;
        let err_file = log_file.try_clone().map_err(|e| e.to_string())?;
        let url = format!("tcp://127.0.0.1:{port}");
        let advertised = advertised.map_or_else(|| url.clone(), |a| format!("tcp://{a}"));
        let mut wrapper = Command::new("sh")
            .arg("-c")
            .arg(WRAPPER)
            .arg(binary)
            .args([
                "broker",
                "--listener-url",
                &url,
                "--advertised-listener-url",
                &advertised,
            ])
            .args(["--storage-engine", "memory://tansu/"])
            .args(extra_args)
            .env_remove("CLUSTER_ID")
            .stdin(Stdio::piped())
            .stdout(log_file)
            .stderr(err_file)
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", binary.display()))?;
        let stdin = wrapper.stdin.take();
        Ok(Self {
            wrapper,
            stdin,
            port,
            log,
        })
    }

    async fn wait_ready(&mut self, within: Duration) -> Result<(), String> {
        let started = Instant::now();
        let config = ConnectionConfig {
            connect_timeout: Duration::from_secs(1),
            request_timeout: Duration::from_secs(2),
            ..ConnectionConfig::default()
        };
        loop {
            if let Ok(Some(status)) = self.wrapper.try_wait() {
                return Err(format!("the broker exited ({status})"));
            }
            match Connection::connect(self.address(), config.clone()).await {
                Ok(_) => return Ok(()),
                Err(e) if started.elapsed() > within => {
                    return Err(format!(
                        "no ApiVersions answer within {} ms: {e}",
                        within.as_millis()
                    ));
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
    }

    /// `127.0.0.1:PORT`, where the broker listens.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The port the broker listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// What the broker wrote to stdout and stderr so far.
    pub fn log_text(&self) -> String {
        let mut text = String::new();
        if let Ok(mut f) = std::fs::File::open(&self.log) {
            let _ = f.read_to_string(&mut text);
        }
        text
    }
}

impl Drop for LocalBroker {
    fn drop(&mut self) {
        // Closing the pipe makes the wrapper kill the broker and exit.
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.wrapper.try_wait() {
                let _ = std::fs::remove_file(&self.log);
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.wrapper.kill();
        let _ = self.wrapper.wait();
    }
}
