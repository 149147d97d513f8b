//! A real broker for integration tests: Tansu 0.6.0 with in-memory storage
//! on a free loopback port, one per test.
//!
//! Why here and not in the library behind a feature: starting and killing a
//! process is test equipment, not client code. Keeping it under `tests/`
//! keeps `std::process` and the broker's command line out of the published
//! crate and needs no feature flag to remember; benches that need a broker
//! include this file with `#[path = "../tests/support/tansu.rs"] mod tansu;`.
//!
//! Tansu starts in milliseconds and takes ~16 MB, so every test gets its own
//! broker: tests cannot see each other's topics, and Drop stops the broker.
//!
//! The broker runs under a small `sh` wrapper whose stdin is a pipe from
//! this process: dropping [`Tansu`] closes the pipe, and so does this
//! process dying in any way (even SIGKILL), and the wrapper then kills the
//! broker. No broker outlives its test.
//!
//! A missing binary fails the test with the install command; it never
//! skips.

use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use walfetch::cluster::{Cluster, ClusterConfig, NewTopic, RetryPolicy};
use walfetch::connection::{Connection, ConnectionConfig};

/// The Tansu version whose habits the tests pin down.
pub(crate) const TANSU_VERSION: &str = "0.6.0";

const INSTALL_HINT: &str = "install it with `scripts/setup-broker.sh` \
    (runs `cargo install tansu --version 0.6.0 --locked --features dynostore`, \
    about 10 minutes cold), or point TANSU_BIN at a tansu 0.6.0 binary";

/// Kills the broker once this process stops holding stdin open.
const WRAPPER: &str = r#"
"$0" "$@" </dev/null &
broker=$!
cat >/dev/null
kill -9 "$broker" 2>/dev/null
wait "$broker" 2>/dev/null
exit 0
"#;

/// A running Tansu broker.
pub(crate) struct Tansu {
    wrapper: Child,
    stdin: Option<ChildStdin>,
    port: u16,
    log: PathBuf,
}

/// The tansu binary: `$TANSU_BIN`, `tansu` on PATH, or `~/.cargo/bin/tansu`;
/// panics with the install command when there is none.
pub(crate) fn tansu_binary() -> PathBuf {
    find_tansu(|name| std::env::var_os(name)).unwrap_or_else(|why| panic!("{why}"))
}

/// Looks for the tansu binary with `env` as the environment; the error says
/// where it looked and how to install it.
pub(crate) fn find_tansu(env: impl Fn(&str) -> Option<OsString>) -> Result<PathBuf, String> {
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
    candidates.into_iter().find(|c| c.is_file()).ok_or_else(|| {
        format!(
            "the integration tests need the Tansu {TANSU_VERSION} broker, which is not installed \
             (looked at $TANSU_BIN, `tansu` on PATH and ~/.cargo/bin/tansu): {INSTALL_HINT}"
        )
    })
}

fn check_version(bin: &Path) {
    let output = Command::new(bin)
        .arg("--version")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}; {INSTALL_HINT}", bin.display()));
    let version = String::from_utf8_lossy(&output.stdout);
    if !version.contains(TANSU_VERSION) {
        // Not fatal: the habit tests exist to notice what a new version changes.
        eprintln!(
            "note: {} reports {:?}; the tests pin down the habits of Tansu {TANSU_VERSION}",
            bin.display(),
            version.trim()
        );
    }
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free loopback port");
    listener.local_addr().expect("local address").port()
}

impl Tansu {
    /// Starts a broker and waits until it answers ApiVersions. Panics, with
    /// the broker's log, when it cannot be started.
    pub(crate) async fn start() -> Self {
        let bin = tansu_binary();
        check_version(&bin);
        let mut last_log = String::new();
        // A port found free can be taken before the broker binds it: retry.
        for _ in 0..3 {
            let mut broker = Self::spawn(&bin, free_port());
            match broker.wait_ready(Duration::from_secs(20)).await {
                Ok(()) => return broker,
                Err(why) => last_log = format!("{why}\n--- broker log ---\n{}", broker.log_text()),
            }
        }
        panic!("Tansu did not start: {last_log}");
    }

    fn spawn(bin: &Path, port: u16) -> Self {
        let log =
            std::env::temp_dir().join(format!("walfetch-tansu-{}-{port}.log", std::process::id()));
        let log_file = std::fs::File::create(&log).expect("create the broker log file");
        let url = format!("tcp://127.0.0.1:{port}");
        let mut wrapper = Command::new("sh")
            .arg("-c")
            .arg(WRAPPER)
            .arg(bin)
            .args([
                "broker",
                "--listener-url",
                &url,
                "--advertised-listener-url",
                &url,
            ])
            .args(["--storage-engine", "memory://tansu/"])
            .env_remove("CLUSTER_ID")
            .stdin(Stdio::piped())
            .stdout(log_file.try_clone().expect("clone log handle"))
            .stderr(log_file)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}; {INSTALL_HINT}", bin.display()));
        let stdin = wrapper.stdin.take();
        Self {
            wrapper,
            stdin,
            port,
            log,
        }
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
                    return Err(format!("no ApiVersions answer within {within:?}: {e}"));
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
    }

    /// `127.0.0.1:PORT`.
    pub(crate) fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// What the broker wrote to stdout and stderr so far.
    pub(crate) fn log_text(&self) -> String {
        let mut text = String::new();
        if let Ok(mut f) = std::fs::File::open(&self.log) {
            let _ = f.read_to_string(&mut text);
        }
        text
    }

    /// A cluster config for this broker with test-sized timeouts.
    pub(crate) fn cluster_config(&self) -> ClusterConfig {
        let mut config = ClusterConfig::new([self.address()]);
        config.connection.connect_timeout = Duration::from_secs(2);
        config.connection.request_timeout = Duration::from_secs(10);
        config.retry = RetryPolicy {
            deadline: Duration::from_secs(10),
            ..RetryPolicy::default()
        };
        config
    }

    /// A cluster client bootstrapped from this broker.
    pub(crate) async fn cluster(&self) -> Cluster {
        Cluster::connect(self.cluster_config())
            .await
            .unwrap_or_else(|e| panic!("bootstrap from Tansu at {}: {e}", self.address()))
    }

    /// A cluster client with a fresh topic of `partitions` partitions.
    pub(crate) async fn cluster_with_topic(&self, topic: &str, partitions: i32) -> Cluster {
        let cluster = self.cluster().await;
        cluster
            .create_topics(&[NewTopic::new(topic, partitions)])
            .await
            .unwrap_or_else(|e| panic!("create topic {topic:?}: {e}"));
        cluster
    }
}

impl Drop for Tansu {
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
