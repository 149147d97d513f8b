//! TLS in front of a real broker: Debian's stunnel4 terminating TLS with a
//! certificate the harness makes (rcgen, through the testkit's `TestCa`)
//! and forwarding to Tansu, which advertises stunnel's port so that every
//! connection a client opens after Metadata also goes through TLS.
//!
//! A missing stunnel fails the test with the install command; it never
//! skips.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use walfetch_brokers::tansu::TansuBroker;
use walfetch_testkit::TestCa;

use crate::tansu::tansu_binary;

/// `stunnel4` or `stunnel` on PATH; panics with the install command.
pub fn stunnel_binary() -> PathBuf {
    for name in ["stunnel4", "stunnel"] {
        if let Ok(out) = Command::new("sh")
            .args(["-c", &format!("command -v {name}")])
            .output()
        {
            let path = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            if out.status.success() && !path.is_empty() {
                return path.into();
            }
        }
    }
    panic!(
        "this test needs stunnel (Debian's stunnel4), which is not on PATH: \
         `scripts/setup-broker.sh` installs it (apt-get install -y stunnel4)"
    )
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// Tansu behind stunnel: TLS on [`TlsTansu::address`].
pub struct TlsTansu {
    /// The authority that issued stunnel's certificate.
    pub ca: TestCa,
    stunnel: Child,
    port: u16,
    dir: PathBuf,
    /// The Tansu broker stunnel fronts.
    pub broker: TansuBroker,
}

impl TlsTansu {
    /// Starts Tansu advertising a free port, then stunnel on that port
    /// with a certificate for 127.0.0.1, and waits until stunnel accepts.
    pub async fn start() -> Self {
        Self::start_with(false).await
    }

    /// [`TlsTansu::start`]; with `client_certificates`, stunnel requires a
    /// client certificate issued by [`TlsTansu::ca`] (mutual TLS).
    pub async fn start_with(client_certificates: bool) -> Self {
        let stunnel_bin = stunnel_binary();
        let ca = TestCa::new("walfetch stunnel test CA").expect("test CA");
        let cert = ca.server_cert(&["127.0.0.1"]).expect("server certificate");
        let port = free_port();
        let advertised = format!("127.0.0.1:{port}");
        let broker = TansuBroker::start(&tansu_binary(), Some(&advertised))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let dir = crate::temp_dir(&format!("stunnel-{port}"));
        let cert_file = dir.join("server.pem");
        let key_file = dir.join("server.key");
        std::fs::write(&cert_file, &cert.cert_pem).expect("write certificate");
        std::fs::write(&key_file, &cert.key_pem).expect("write key");
        {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600))
                .expect("key file permissions");
        }
        let ca_file = dir.join("ca.pem");
        std::fs::write(&ca_file, ca.ca_pem()).expect("write CA");
        let verify = if client_certificates {
            format!("verifyChain = yes\nCAfile = {}\n", ca_file.display())
        } else {
            String::new()
        };
        let conf = dir.join("stunnel.conf");
        std::fs::write(
            &conf,
            format!(
                "foreground = yes\npid =\ndebug = 5\n\n[kafka]\naccept = 127.0.0.1:{port}\n\
                 connect = {}\ncert = {}\nkey = {}\n{verify}",
                broker.address(),
                cert_file.display(),
                key_file.display()
            ),
        )
        .expect("write stunnel.conf");
        let log = std::fs::File::create(dir.join("stunnel.log")).expect("stunnel log");
        let stunnel = Command::new(&stunnel_bin)
            .arg(&conf)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", stunnel_bin.display()));
        let mut this = Self {
            ca,
            stunnel,
            port,
            dir,
            broker,
        };
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = this.stunnel.try_wait() {
                panic!("stunnel exited ({status}):\n{}", this.log_text());
            }
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "stunnel did not listen on {port} within 10 s:\n{}",
                this.log_text()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        this
    }

    /// `127.0.0.1:PORT`, stunnel's TLS listener.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// stunnel's log.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(self.dir.join("stunnel.log")).unwrap_or_default()
    }
}

impl Drop for TlsTansu {
    fn drop(&mut self) {
        let _ = self.stunnel.kill();
        let _ = self.stunnel.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
