//! Tansu 0.6.0 with in-memory storage on a free loopback port: the second
//! real broker of the tests, benches and demo.
//!
//! [`find_tansu`] looks for the binary, [`install_tansu`] installs it with
//! `cargo install` (about 10 minutes cold on 2 cores), and [`TansuBroker`]
//! runs one, stopping it when dropped (also when this process dies).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use walfetch::connection::{Connection, ConnectionConfig};

use crate::process::{free_port, Supervised};
use crate::BrokerError;

/// The Tansu version walfetch is tested against.
pub const TANSU_VERSION: &str = "0.6.0";

/// How to install Tansu, for error messages.
pub const INSTALL_HINT: &str = "install it with `scripts/setup-broker.sh` (runs `cargo install \
    tansu --version 0.6.0 --locked --features dynostore`, about 10 minutes cold), or point \
    TANSU_BIN at a tansu 0.6.0 binary";

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
pub fn find_tansu() -> Result<PathBuf, BrokerError> {
    find_tansu_in(|name| std::env::var_os(name)).ok_or(BrokerError::TansuNotInstalled)
}

/// Installs Tansu 0.6.0 with `cargo install` (its output goes to this
/// process's stderr) and returns the binary.
pub fn install_tansu() -> Result<PathBuf, BrokerError> {
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
        .map_err(|e| BrokerError::Install(format!("cannot run cargo: {e}")))?;
    if !status.success() {
        return Err(BrokerError::Install(format!(
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

/// A running Tansu broker; dropping it stops the broker.
#[derive(Debug)]
pub struct TansuBroker {
    process: Supervised,
    port: u16,
}

impl TansuBroker {
    /// Starts `binary` on a free loopback port and waits (up to 20 s) until
    /// it answers ApiVersions. `advertised` overrides the address the broker
    /// advertises in Metadata (e.g. a proxy in front of it).
    pub async fn start(binary: &Path, advertised: Option<&str>) -> Result<Self, BrokerError> {
        Self::start_with(binary, advertised, &[]).await
    }

    /// [`TansuBroker::start`] with more `tansu broker` arguments (e.g.
    /// `--authentication`).
    pub async fn start_with(
        binary: &Path,
        advertised: Option<&str>,
        extra_args: &[&str],
    ) -> Result<Self, BrokerError> {
        let start_error = |why: String| BrokerError::Start {
            broker: format!("Tansu ({})", binary.display()),
            why,
        };
        let mut last = String::new();
        // A port found free can be taken before the broker binds it: retry.
        for _ in 0..3 {
            let port =
                free_port().map_err(|e| start_error(format!("no free loopback port: {e}")))?;
            let url = format!("tcp://127.0.0.1:{port}");
            let advertised = advertised.map_or_else(|| url.clone(), |a| format!("tcp://{a}"));
            let mut args: Vec<String> = [
                "broker",
                "--listener-url",
                &url,
                "--advertised-listener-url",
                &advertised,
                "--storage-engine",
                "memory://tansu/",
            ]
            .map(str::to_owned)
            .to_vec();
            args.extend(extra_args.iter().map(|a| (*a).to_owned()));
            let log = std::env::temp_dir()
                .join(format!("walfetch-tansu-{}-{port}.log", std::process::id()));
            let mut broker = Self {
                process: Supervised::spawn(binary, &args, &[], log, false).map_err(start_error)?,
                port,
            };
            match broker.wait_ready(Duration::from_secs(20)).await {
                Ok(()) => return Ok(broker),
                Err(why) => last = format!("{why}\n--- broker log ---\n{}", broker.log_text()),
            }
        }
        Err(start_error(last))
    }

    async fn wait_ready(&mut self, within: Duration) -> Result<(), String> {
        let started = Instant::now();
        let config = ConnectionConfig {
            connect_timeout: Duration::from_secs(1),
            request_timeout: Duration::from_secs(2),
            ..ConnectionConfig::default()
        };
        loop {
            if let Some(status) = self.process.exited() {
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
        self.process.log_text()
    }
}
