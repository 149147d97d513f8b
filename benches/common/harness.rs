//! What the replay and writer benches share around their measurements:
//! the brokers they run on (each behind the counting proxy), their tokio
//! runtimes and where they write their outputs.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use rskafka::client::{ClientBuilder, Credentials, SaslConfig as RskafkaSasl};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::CertificateDer;
use tokio::runtime::Runtime;
use walfetch::connection::{SaslConfig, Security, TlsConfig};
use walfetch_brokers::kafka::{find_kafka, KafkaCluster, KafkaConfig};
use walfetch_brokers::tansu::{find_tansu, TansuBroker};
use walfetch_testkit::{SaslServer, ScriptedCluster, ServerTls, TestCa};

use crate::proxy::{self, Proxy};

/// A broker a bench runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BrokerKind {
    Scripted,
    /// Apache Kafka, one KRaft node of the cached install, with its
    /// default settings (1 GiB segments).
    Kafka,
    Tansu,
}

impl BrokerKind {
    /// Its name in the tables.
    pub(crate) fn name(self) -> &'static str {
        match self {
            BrokerKind::Scripted => "scripted (Kafka rules)",
            BrokerKind::Kafka => KAFKA_NAME,
            BrokerKind::Tansu => "tansu 0.6",
        }
    }

    /// Reads `--broker`: a comma-separated list of `scripted`, `kafka`
    /// and `tansu`, or `all` (every one, Kafka first), or `both` (scripted
    /// and Tansu, as before Kafka was in the benches).
    pub(crate) fn parse_list(list: &str) -> Result<Vec<Self>, String> {
        let mut out = Vec::new();
        for name in list.split(',') {
            let kinds: &[Self] = match name {
                "scripted" => &[Self::Scripted],
                "kafka" => &[Self::Kafka],
                "tansu" => &[Self::Tansu],
                "both" => &[Self::Scripted, Self::Tansu],
                "all" => &[Self::Kafka, Self::Scripted, Self::Tansu],
                other => {
                    return Err(format!(
                        "--broker: unknown {other:?} (scripted, kafka, tansu, both or all)"
                    ))
                }
            };
            for kind in kinds {
                if !out.contains(kind) {
                    out.push(*kind);
                }
            }
        }
        Ok(out)
    }
}

/// Kafka's name in the tables.
const KAFKA_NAME: &str = "kafka 4.4";

/// How clients reach a bench's broker: Kafka's `security.protocol`
/// values the scripted broker serves. The proxy forwards the bytes as they
/// are, so over TLS it counts what the network would carry, records
/// framing included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Listener {
    Plaintext,
    /// TLS (rustls, the scripted broker's certificate from a CA made for
    /// the run).
    Ssl,
    /// TLS, then SASL SCRAM-SHA-512, as a production cluster is reached.
    SaslSsl,
}

impl Listener {
    /// Reads librdkafka's `security.protocol` names, in either case.
    pub(crate) fn parse(name: &str) -> Option<Self> {
        match name.to_ascii_uppercase().as_str() {
            "PLAINTEXT" => Some(Self::Plaintext),
            "SSL" => Some(Self::Ssl),
            "SASL_SSL" => Some(Self::SaslSsl),
            _ => None,
        }
    }

    /// Its name in the tables: librdkafka's, with the SASL mechanism.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Plaintext => "PLAINTEXT",
            Self::Ssl => "SSL",
            Self::SaslSsl => "SASL_SSL (SCRAM-SHA-512)",
        }
    }
}

/// Whether a bench may run on `brokers` reached through `listener`: TLS
/// and SASL on the scripted broker only, which Tansu 0.6 does not serve.
pub(crate) fn check_listener(listener: Listener, brokers: &[BrokerKind]) -> Result<(), String> {
    match listener {
        Listener::Plaintext => Ok(()),
        _ if brokers == [BrokerKind::Scripted] => Ok(()),
        _ => Err(format!(
            "--security {}: with --broker scripted only (Tansu 0.6 serves plain TCP; the benches start Kafka with its plain listener)",
            listener.name()
        )),
    }
}

/// The bench's SASL user.
const USER: (&str, &str) = ("wal-reader", "wal-reader-secret");

/// A broker running for a bench, behind the proxy that counts its bytes.
/// The proxy stops before the broker when it is dropped.
pub(crate) struct Running {
    pub(crate) proxy: Proxy,
    /// What walfetch's clients connect with.
    pub(crate) security: Security,
    listener: Listener,
    /// The run's certificate authority, where the broker speaks TLS.
    ca_pem: Option<String>,
    _broker: Box<dyn std::any::Any>,
}

impl Running {
    /// The in-process scripted broker, when that is the one running.
    #[allow(
        dead_code,
        reason = "the writer bench's; the replay bench keeps its logs"
    )]
    pub(crate) fn scripted(&self) -> Option<&ScriptedCluster> {
        self._broker.downcast_ref()
    }

    /// An rskafka client builder set up to reach the broker as walfetch's
    /// clients do: TLS trusting the run's certificate authority
    /// (rskafka's `transport-tls`: rustls with ring, as walfetch's), and
    /// SCRAM-SHA-512 over it.
    #[allow(
        dead_code,
        reason = "the replay bench's; the writer bench runs no rskafka contender"
    )]
    pub(crate) fn rskafka_client(&self) -> Result<ClientBuilder, String> {
        let builder = ClientBuilder::new(vec![self.proxy.addr().to_string()]);
        let Some(pem) = &self.ca_pem else {
            return Ok(builder);
        };
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
            let cert = cert.map_err(|e| format!("rskafka: the CA's PEM: {e}"))?;
            roots
                .add(cert)
                .map_err(|e| format!("rskafka: the CA: {e}"))?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("rskafka: TLS: {e}"))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let builder = builder.tls_config(Arc::new(tls));
        Ok(match self.listener {
            Listener::SaslSsl => builder.sasl_config(RskafkaSasl::ScramSha512(Credentials::new(
                USER.0.into(),
                USER.1.into(),
            ))),
            _ => builder,
        })
    }
}

/// Starts `broker` (the scripted one on `infra`, Kafka and Tansu as
/// processes) with
/// the proxy in front of it, the address clients are given, holding bytes
/// `one_way` in each direction (zero: plain loopback), and reached through
/// `listener` (the scripted broker only, so far).
pub(crate) fn start(
    broker: BrokerKind,
    infra: &Runtime,
    clients: &Runtime,
    one_way: Duration,
    listener: Listener,
) -> Result<Running, String> {
    check_listener(listener, &[broker])?;
    let (socket, proxy_addr) = infra
        .block_on(proxy::bind())
        .map_err(|e| format!("proxy: {e}"))?;
    let mut security = Security::plaintext();
    let mut ca_pem = None;
    let (running, upstream): (Box<dyn std::any::Any>, SocketAddr) = match broker {
        BrokerKind::Scripted => {
            let mut builder = ScriptedCluster::builder().advertised_addrs([proxy_addr]);
            if listener != Listener::Plaintext {
                let tls_error = |e| format!("scripted broker's TLS: {e}");
                let ca = TestCa::new("walfetch bench CA").map_err(tls_error)?;
                let cert = ca.server_cert(&["127.0.0.1"]).map_err(tls_error)?;
                builder = builder.tls(ServerTls::new(cert));
                let tls = TlsConfig::ca_pem(ca.ca_pem());
                ca_pem = Some(ca.ca_pem());
                security = match listener {
                    Listener::SaslSsl => {
                        builder = builder.sasl(SaslServer::new().user(USER.0, USER.1));
                        Security::sasl_ssl(tls, SaslConfig::scram_sha512(USER.0, USER.1))
                    }
                    _ => Security::ssl(tls),
                };
            }
            let cluster = infra
                .block_on(builder.start())
                .map_err(|e| format!("scripted broker: {e}"))?;
            let addr = cluster
                .addrs()
                .first()
                .map(|a| a.1)
                .ok_or("scripted broker: no address")?;
            (Box::new(cluster), addr)
        }
        BrokerKind::Kafka => {
            let install = find_kafka().map_err(|e| e.to_string())?;
            // Clients learn the proxy's address from Metadata, so that
            // every connection they open after bootstrap is counted too.
            let config = KafkaConfig::nodes(1)
                .setting("advertised.listeners", format!("PLAINTEXT://{proxy_addr}"));
            let kafka = clients
                .block_on(KafkaCluster::start(&install, config))
                .map_err(|e| e.to_string())?;
            let addr = kafka
                .address(0)
                .parse()
                .map_err(|e| format!("kafka address: {e}"))?;
            (Box::new(kafka), addr)
        }
        BrokerKind::Tansu => {
            let binary = find_tansu().map_err(|e| e.to_string())?;
            let advertised = proxy_addr.to_string();
            let tansu = clients
                .block_on(TansuBroker::start(&binary, Some(&advertised)))
                .map_err(|e| e.to_string())?;
            let addr = tansu
                .address()
                .parse()
                .map_err(|e| format!("tansu address: {e}"))?;
            (Box::new(tansu), addr)
        }
    };
    Ok(Running {
        proxy: Proxy::start(socket, upstream, infra.handle(), one_way),
        security,
        listener,
        ca_pem,
        _broker: running,
    })
}

/// A bench's `main`: runs `run` and turns its error into a failure that
/// says which bench failed and why.
pub(crate) fn bench_main(bench: &str, run: impl FnOnce() -> Result<ExitCode, String>) -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(why) => {
            eprintln!("\n{bench} bench FAILED: {why}");
            ExitCode::FAILURE
        }
    }
}

/// The broker's runtime (the broker and the proxy get their own threads)
/// and the clients' runtime.
pub(crate) fn runtimes() -> Result<(Runtime, Runtime), String> {
    Ok((runtime("broker")?, runtime("client")?))
}

/// A two-thread runtime named `name`.
pub(crate) fn runtime(name: &str) -> Result<Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name(name)
        .enable_all()
        .build()
        .map_err(|e| format!("tokio runtime: {e}"))
}

/// Where a bench's outputs go: `$CARGO_TARGET_DIR/<bench>` or
/// `<workspace>/target/<bench>`.
pub(crate) fn out_dir(bench: &str) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target"))
        .join(bench)
}

/// CPU time this process's threads have run so far (Linux: the sum of
/// `/proc/self/task/*/schedstat`, in nanoseconds); `None` elsewhere. It
/// covers the client, the proxy and the in-process scripted broker, not a
/// broker in another process (Tansu). A run's wall time on `cores` cores
/// can be no less than the CPU time it used divided by `cores`.
pub(crate) fn cpu_time() -> Option<Duration> {
    let mut total = 0u64;
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let stat = std::fs::read_to_string(task.ok()?.path().join("schedstat")).ok()?;
        total += stat.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(Duration::from_nanos(total))
}
