//! What the replay and writer benches share around their measurements:
//! their command line (the flags both take), the brokers they run on (each
//! behind the counting proxy), their tokio runtimes and where they write
//! their outputs.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::error::ErrorKind;
use kafka_protocol::messages::ApiKey;
use rskafka::client::partition::{OffsetAt, PartitionClient, UnknownTopicHandling};
use rskafka::client::{ClientBuilder, Credentials, SaslConfig as RskafkaSasl};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::CertificateDer;
use tokio::runtime::Runtime;
use walfetch::cluster::{Cluster, ClusterConfig};
use walfetch::codec::Compression;
use walfetch::connection::{SaslConfig, Security, TlsConfig};
use walfetch_brokers::kafka::{find_kafka, KafkaCluster, KafkaConfig};
use walfetch_brokers::tansu::{find_tansu, TansuBroker};
use walfetch_testkit::{Fault, FaultAction, SaslServer, ScriptedCluster, ServerTls, TestCa};

use crate::proxy::{self, Proxy};
use crate::workload::WorkloadSpec;

/// The flags both benches take, as given: each bench flattens them into its
/// own (`#[command(flatten)]`), and [`CommonFlags::resolve`] fills in what
/// was not given from the bench's [`Defaults`].
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct CommonFlags {
    /// Small data, one run (also the profile when run without `--bench`)
    #[arg(long)]
    quick: bool,
    /// Added by `cargo bench`; without it the quick profile runs, as a smoke
    /// test
    #[arg(long, hide = true)]
    bench: bool,
    /// Comma-separated: kafka, scripted, tansu; or both (scripted and tansu)
    /// or all
    #[arg(long, value_name = "B", value_parser = BrokerKind::parse_list)]
    broker: Option<BrokerList>,
    /// Regions sharing the partition (default 64; quick 16)
    #[arg(long, value_name = "N")]
    regions: Option<u64>,
    /// Entries per workload
    #[arg(long, value_name = "N")]
    entries: Option<usize>,
    /// Entries per second, all writers (the writer bench: when paced)
    #[arg(long, value_name = "N", default_value_t = 5_000.0)]
    rate: f64,
    /// Writer linger, in ms
    #[arg(long = "linger-ms", value_name = "N", default_value_t = 5)]
    linger_ms: u64,
    /// Writer batch size cap, in KiB
    #[arg(long = "batch-kib", value_name = "N", default_value_t = 256)]
    batch_kib: usize,
    /// Replay from this fraction of the log
    #[arg(long, value_name = "F", default_value_t = 0.25)]
    checkpoint: f64,
    /// Measured runs
    #[arg(long, value_name = "N")]
    runs: Option<usize>,
    /// Workload seed
    #[arg(long, value_name = "N", default_value_t = 42)]
    seed: u64,
    /// How clients reach the broker: PLAINTEXT, SSL or SASL_SSL (TLS, then
    /// SCRAM-SHA-512), as librdkafka's security.protocol, for every client;
    /// not PLAINTEXT: the scripted broker only (--broker scripted)
    #[arg(long, value_name = "P", default_value = "PLAINTEXT", value_parser = Listener::parse)]
    security: Listener,
    /// Criterion-style filters: there are none here, they are ignored
    #[arg(hide = true)]
    filters: Vec<String>,
}

/// `--broker`'s value: the brokers, in the order they run.
#[derive(Debug, Clone)]
pub(crate) struct BrokerList(Vec<BrokerKind>);

/// A bench's defaults for the common flags that differ between the benches
/// (the others have one default, in [`CommonFlags`]), and its own words
/// for their help.
pub(crate) struct Defaults {
    pub(crate) brokers: &'static [BrokerKind],
    /// Entries per workload: default profile, quick profile.
    pub(crate) entries: (usize, usize),
    /// Measured runs: default profile, quick profile.
    pub(crate) runs: (usize, usize),
    /// Help for flags (by their long names, which are their ids) in the
    /// bench's words.
    pub(crate) help: &'static [(&'static str, &'static str)],
}

/// The common flags with the bench's defaults filled in, checked.
#[derive(Debug, Clone)]
pub(crate) struct Common {
    pub(crate) quick: bool,
    pub(crate) brokers: Vec<BrokerKind>,
    pub(crate) regions: u64,
    pub(crate) entries: usize,
    pub(crate) rate: f64,
    pub(crate) linger: Duration,
    pub(crate) batch_bytes: usize,
    pub(crate) checkpoint: f64,
    pub(crate) runs: usize,
    pub(crate) seed: u64,
    /// How clients reach the broker (`--security`).
    pub(crate) listener: Listener,
}

impl CommonFlags {
    /// The flags with `defaults` filled in; an error says which flag is
    /// out of range.
    pub(crate) fn resolve(&self, defaults: &Defaults) -> Result<Common, String> {
        for free in &self.filters {
            eprintln!("note: ignoring the argument {free:?} (no filters here)");
        }
        let quick = self.quick || !self.bench;
        let profile = |(full, quick_value): (usize, usize)| if quick { quick_value } else { full };
        let common = Common {
            quick,
            brokers: self
                .broker
                .as_ref()
                .map_or_else(|| defaults.brokers.to_vec(), |list| list.0.clone()),
            regions: self.regions.unwrap_or(if quick { 16 } else { 64 }),
            entries: self.entries.unwrap_or(profile(defaults.entries)),
            rate: self.rate,
            linger: Duration::from_millis(self.linger_ms),
            batch_bytes: self.batch_kib << 10,
            checkpoint: self.checkpoint,
            runs: self.runs.unwrap_or(profile(defaults.runs)),
            seed: self.seed,
            listener: self.security,
        };
        if common.regions == 0 || common.entries == 0 || common.runs == 0 || common.rate <= 0.0 {
            return Err(see_help(
                "--regions, --entries, --runs and --rate must be positive",
            ));
        }
        if !(0.0..1.0).contains(&common.checkpoint) {
            return Err(see_help("--checkpoint must be in [0, 1)"));
        }
        check_listener(common.listener, &common.brokers).map_err(see_help)?;
        Ok(common)
    }
}

impl Common {
    /// The seeded workload of these settings: `writers` writers, `zipf`
    /// region activity; `region_pure` as GreptimeDB writes (one region a
    /// batch, its 1 MiB `max_batch_bytes`), named
    /// `<compression>-<writers>w[-pure]`.
    pub(crate) fn spec(
        &self,
        compression: Compression,
        writers: usize,
        region_pure: bool,
        zipf: f64,
    ) -> WorkloadSpec {
        WorkloadSpec {
            name: format!(
                "{}-{writers}w{}",
                compression.name(),
                if region_pure { "-pure" } else { "" }
            ),
            regions: self.regions,
            zipf,
            entries: self.entries,
            rate: self.rate,
            linger: self.linger,
            max_batch_bytes: if region_pure {
                1 << 20
            } else {
                self.batch_bytes
            },
            writers,
            compression,
            region_pure,
            seed: self.seed,
        }
    }

    /// `-- --quick` when the quick profile runs, for the command line a
    /// report quotes.
    pub(crate) fn quick_flag(&self) -> &'static str {
        if self.quick {
            " -- --quick"
        } else {
            ""
        }
    }
}

/// Reads a bench's command line (`args` with the program's name first)
/// into `F`, its flags: `None` after printing the help that `--help` asked
/// for. `defaults` words the help of the common flags for the bench. A
/// flag may be given again: the last one counts.
fn parse_flags<F: clap::Parser>(
    defaults: &Defaults,
    args: impl IntoIterator<Item = String>,
) -> Result<Option<F>, String> {
    let mut command = F::command().args_override_self(true);
    for &(flag, help) in defaults.help {
        command = command.mut_arg(flag, |arg| arg.help(help));
    }
    let matches = match command.try_get_matches_from_mut(args) {
        Ok(matches) => matches,
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => {
            print!("{}", e.render());
            return Ok(None);
        }
        Err(e) => return Err(e.render().to_string()),
    };
    F::from_arg_matches(&matches)
        .map(Some)
        .map_err(|e| e.render().to_string())
}

/// `why` a command line was refused, and where to read what it may be.
pub(crate) fn see_help(why: impl std::fmt::Display) -> String {
    format!("{why}\n\nFor more information, try '--help'.")
}

/// Reads `--compression`'s names: none, lz4 or zstd.
pub(crate) fn parse_compression(name: &str) -> Result<Compression, String> {
    match name {
        "none" => Ok(Compression::None),
        "lz4" => Ok(Compression::Lz4),
        "zstd" => Ok(Compression::Zstd),
        other => Err(format!("unknown compression {other:?} (none, lz4 or zstd)")),
    }
}

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
    pub(crate) fn parse_list(list: &str) -> Result<BrokerList, String> {
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
                        "unknown {other:?} (scripted, kafka, tansu, both or all)"
                    ))
                }
            };
            for kind in kinds {
                if !out.contains(kind) {
                    out.push(*kind);
                }
            }
        }
        Ok(BrokerList(out))
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
    /// Reads librdkafka's `security.protocol` names, in either case
    /// (`--security`).
    pub(crate) fn parse(name: &str) -> Result<Self, String> {
        match name.to_ascii_uppercase().as_str() {
            "PLAINTEXT" => Ok(Self::Plaintext),
            "SSL" => Ok(Self::Ssl),
            "SASL_SSL" => Ok(Self::SaslSsl),
            _ => Err(format!("unknown {name:?} (PLAINTEXT, SSL or SASL_SSL)")),
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

/// Whether a bench may charge `cost` per Fetch on `brokers`: the scripted
/// broker only, which the bench scripts ([`Running::set_fetch_cost`]).
pub(crate) fn check_fetch_cost(cost: Duration, brokers: &[BrokerKind]) -> Result<(), String> {
    match cost.is_zero() || brokers == [BrokerKind::Scripted] {
        true => Ok(()),
        false => Err(FETCH_COST_BROKERS.to_owned()),
    }
}

/// Why a fetch cost was refused.
const FETCH_COST_BROKERS: &str = "--fetch-cost-us: with --broker scripted only (the bench scripts the in-process broker; Kafka and Tansu answer as they do)";

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
    pub(crate) fn scripted(&self) -> Option<&ScriptedCluster> {
        self._broker.downcast_ref()
    }

    /// Makes the scripted broker hold every Fetch answer `cost` once it
    /// has read the records (a tokio sleep: it rounds up to the next
    /// millisecond), as a broker whose fetches are dear; zero takes that
    /// back. Any other fault scripted on it is cleared. An error on any
    /// other broker, unless `cost` is zero.
    pub(crate) fn set_fetch_cost(&self, cost: Duration) -> Result<(), String> {
        let Some(scripted) = self.scripted() else {
            return match cost.is_zero() {
                true => Ok(()),
                false => Err(FETCH_COST_BROKERS.to_owned()),
            };
        };
        scripted.clear_faults();
        if !cost.is_zero() {
            scripted.script(
                Fault::on(ApiKey::Fetch)
                    .times(u32::MAX)
                    .then(FaultAction::Delay(cost)),
            );
        }
        Ok(())
    }

    /// How many Fetch answers the fetch cost ([`Running::set_fetch_cost`])
    /// has held since it was set; `None` when none is set (or it no longer
    /// fires: it was scripted to fire `u32::MAX` times).
    pub(crate) fn fetch_cost_fired(&self) -> Option<u32> {
        let scripted = self.scripted()?;
        scripted
            .pending_faults()
            .iter()
            .find(|f| matches!(f.action(), FaultAction::Delay(_)))
            .map(|f| u32::MAX - f.remaining())
    }

    /// walfetch's cluster client, connected through the proxy with the
    /// broker's security; `broker` names it in an error.
    pub(crate) async fn connect(&self, broker: &str) -> Result<Arc<Cluster>, String> {
        let mut config = ClusterConfig::new([self.proxy.addr().to_string()]);
        config.connection.request_timeout = Duration::from_secs(30);
        config.connection.security = self.security.clone();
        Cluster::connect(config)
            .await
            .map(Arc::new)
            .map_err(|e| format!("{broker}: connect through the proxy: {e}"))
    }

    /// An rskafka client, connected through the proxy as walfetch's
    /// clients are; `broker` names it in an error.
    pub(crate) async fn rskafka(&self, broker: &str) -> Result<rskafka::client::Client, String> {
        self.rskafka_client()?
            .build()
            .await
            .map_err(|e| format!("{broker}: rskafka: {e}"))
    }

    /// An rskafka client builder set up to reach the broker as walfetch's
    /// clients do: TLS trusting the run's certificate authority
    /// (rskafka's `transport-tls`: rustls with ring, as walfetch's), and
    /// SCRAM-SHA-512 over it.
    fn rskafka_client(&self) -> Result<ClientBuilder, String> {
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

/// `client`'s client of `topic`'s partition 0, warmed up as a running
/// database's is: the partition's leader known, its connection open (by
/// asking for the offset `at`).
pub(crate) async fn rskafka_partition(
    client: &rskafka::client::Client,
    topic: &str,
    at: OffsetAt,
) -> Result<PartitionClient, String> {
    let partition = client
        .partition_client(topic.to_owned(), 0, UnknownTopicHandling::Retry)
        .await
        .map_err(|e| format!("{topic}: rskafka partition client: {e}"))?;
    partition
        .get_offset(at)
        .await
        .map_err(|e| format!("{topic}: rskafka warm-up: {e}"))?;
    Ok(partition)
}

/// Runs `bench` on each of `brokers` in turn, each started (see [`start`])
/// behind the proxy (loopback until the bench sets a link on it), reached
/// through `listener`, and kept alive until its figures are in; `bench`
/// gets the clients' runtime to run on. Their results, in the order of
/// `brokers`.
pub(crate) fn on_each_broker<T>(
    brokers: &[BrokerKind],
    listener: Listener,
    mut bench: impl FnMut(&Runtime, BrokerKind, &Running) -> Result<T, String>,
) -> Result<Vec<T>, String> {
    let (infra, clients) = runtimes()?;
    let mut out = Vec::with_capacity(brokers.len());
    for &broker in brokers {
        let running = start(broker, &infra, &clients, listener)?;
        let result = bench(&clients, broker, &running);
        drop(running);
        out.push(result?);
    }
    Ok(out)
}

/// Starts `broker` (the scripted one on `infra`, Kafka and Tansu as
/// processes) with the proxy in front of it, the address clients are
/// given, reached through `listener` (the scripted broker only, so far).
fn start(
    broker: BrokerKind,
    infra: &Runtime,
    clients: &Runtime,
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
        proxy: Proxy::start(socket, upstream, infra.handle()),
        security,
        listener,
        ca_pem,
        _broker: running,
    })
}

/// A bench's `main`: reads its command line into its flags `F` (see
/// [`parse_flags`]; `--help` prints the help and ends there), `build`s its
/// arguments from them and `run`s it. An error, of the command line or of
/// the run, is a failure that says which bench failed and why.
pub(crate) fn bench_main<F: clap::Parser, A>(
    bench: &str,
    defaults: &Defaults,
    build: impl FnOnce(F) -> Result<A, String>,
    run: impl FnOnce(A) -> Result<(), String>,
) -> ExitCode {
    let outcome = parse_flags::<F>(defaults, std::env::args()).and_then(|flags| match flags {
        Some(flags) => run(build(flags)?),
        None => Ok(()),
    });
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(why) => {
            eprintln!("\n{bench} bench FAILED: {why}");
            ExitCode::FAILURE
        }
    }
}

/// The broker's runtime (the broker and the proxy get their own threads)
/// and the clients' runtime.
fn runtimes() -> Result<(Runtime, Runtime), String> {
    Ok((runtime("broker")?, runtime("client")?))
}

/// A two-thread runtime named `name`.
fn runtime(name: &str) -> Result<Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name(name)
        .enable_all()
        .build()
        .map_err(|e| format!("tokio runtime: {e}"))
}

/// Where a bench's outputs go: `$CARGO_TARGET_DIR/<bench>` or
/// `<workspace>/target/<bench>`.
fn out_dir(bench: &str) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target"))
        .join(bench)
}

/// Writes a bench's report into [`out_dir`]`(bench)`: `report.md`,
/// `report.json` (`json`, pretty) and the `extra` files, and says so with
/// the time since `started`.
pub(crate) fn write_report(
    bench: &str,
    md: &str,
    json: &serde_json::Value,
    extra: Vec<(&str, String)>,
    started: Instant,
) -> Result<(), String> {
    let dir = out_dir(bench);
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let json = serde_json::to_string_pretty(json).map_err(|e| e.to_string())?;
    let files: Vec<(&str, String)> = [("report.md", md.to_owned()), ("report.json", json)]
        .into_iter()
        .chain(extra)
        .collect();
    let mut names = Vec::with_capacity(files.len());
    for (name, text) in files {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
        names.push(path.display().to_string());
    }
    let last = names.pop().unwrap_or_default();
    eprintln!(
        "wrote {}{}{last} in {:.0} s",
        names.join(", "),
        if names.is_empty() { "" } else { " and " },
        started.elapsed().as_secs_f64()
    );
    Ok(())
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
