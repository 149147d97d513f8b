//! Where the pinned Apache Kafka release is installed, and installing it.
//!
//! `scripts/setup-kafka.sh` resolves `org.apache.kafka:kafka_2.13` with its
//! runtime dependencies from Maven Central into a cache outside the
//! repository, `$WALFETCH_KAFKA_HOME`, else
//! `${XDG_CACHE_HOME:-~/.cache}/walfetch/kafka-<version>`: the jars in
//! `libs/`, and a `VERSION` file written last, so a half-done install is
//! never taken for a whole one.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::BrokerError;

/// The Apache Kafka release walfetch is tested against (KRaft, Scala 2.13).
pub const KAFKA_VERSION: &str = "4.4.0";

/// How to install Kafka, for error messages.
pub const KAFKA_INSTALL_HINT: &str = "install it with `scripts/setup-kafka.sh` (Maven resolves \
    org.apache.kafka:kafka_2.13 from Maven Central, about 15 s and 45 MB; needs a JDK 17+ and \
    mvn), or point WALFETCH_KAFKA_HOME at such an install";

/// An installed Kafka release and the JVM that runs it.
#[derive(Debug, Clone)]
pub struct KafkaInstall {
    /// The install's directory (`libs/`, `VERSION`).
    pub home: PathBuf,
    /// The `java` to run.
    pub java: PathBuf,
}

impl KafkaInstall {
    /// The classpath: every jar in `libs/`.
    pub fn classpath(&self) -> String {
        format!("{}/*", self.home.join("libs").display())
    }
}

/// Where the pinned release is (or would be) installed, with `env` as the
/// environment.
pub fn kafka_home_in(env: impl Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    if let Some(home) = env("WALFETCH_KAFKA_HOME") {
        return Some(home.into());
    }
    let cache = env("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| env("HOME").map(|h| Path::new(&h).join(".cache")))?;
    Some(
        cache
            .join("walfetch")
            .join(format!("kafka-{KAFKA_VERSION}")),
    )
}

/// The `java` binary: `$JAVA_HOME/bin/java`, else `java` on `PATH`.
fn java_in(env: &impl Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    if let Some(home) = env("JAVA_HOME") {
        let java = Path::new(&home).join("bin").join("java");
        if java.is_file() {
            return Some(java);
        }
    }
    let path = env("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("java"))
        .find(|c| c.is_file())
}

/// Finds the installed release and a JVM, with `env` as the environment.
pub fn find_kafka_in(env: impl Fn(&str) -> Option<OsString>) -> Result<KafkaInstall, BrokerError> {
    let home = kafka_home_in(&env).ok_or_else(|| BrokerError::KafkaNotInstalled {
        looked_at: "nowhere: neither WALFETCH_KAFKA_HOME nor HOME is set".into(),
    })?;
    let version = std::fs::read_to_string(home.join("VERSION")).unwrap_or_default();
    if version.trim() != KAFKA_VERSION {
        return Err(BrokerError::KafkaNotInstalled {
            looked_at: home.display().to_string(),
        });
    }
    let java = java_in(&env).ok_or(BrokerError::NoJava)?;
    Ok(KafkaInstall { home, java })
}

/// Finds the installed release in this process's environment.
pub fn find_kafka() -> Result<KafkaInstall, BrokerError> {
    find_kafka_in(|name| std::env::var_os(name))
}

/// Runs `scripts/setup-kafka.sh` of this repository (its output goes to
/// this process's stderr) and returns the install.
pub fn install_kafka() -> Result<KafkaInstall, BrokerError> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/setup-kafka.sh");
    let status = Command::new("bash")
        .arg(&script)
        .stdin(Stdio::null())
        .stdout(Stdio::inherit())
        .status()
        .map_err(|e| BrokerError::Install(format!("cannot run {}: {e}", script.display())))?;
    if !status.success() {
        return Err(BrokerError::Install(format!(
            "{} exited with {status}",
            script.display()
        )));
    }
    find_kafka()
}

/// [`find_kafka`], installing the release first when it is missing.
pub fn find_or_install_kafka() -> Result<KafkaInstall, BrokerError> {
    match find_kafka() {
        Err(BrokerError::KafkaNotInstalled { .. }) => install_kafka(),
        found => found,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_home_follows_the_environment() {
        let env = |name: &str| match name {
            "HOME" => Some(OsString::from("/home/u")),
            _ => None,
        };
        assert_eq!(
            kafka_home_in(env),
            Some(PathBuf::from(format!(
                "/home/u/.cache/walfetch/kafka-{KAFKA_VERSION}"
            )))
        );
        let env = |name: &str| match name {
            "WALFETCH_KAFKA_HOME" => Some(OsString::from("/opt/k")),
            "HOME" => Some(OsString::from("/home/u")),
            _ => None,
        };
        assert_eq!(kafka_home_in(env), Some(PathBuf::from("/opt/k")));
    }

    #[test]
    fn a_missing_install_names_where_it_looked_and_how_to_install() {
        let dir = std::env::temp_dir().join(format!("walfetch-no-kafka-{}", std::process::id()));
        let env = |name: &str| match name {
            "WALFETCH_KAFKA_HOME" => Some(dir.clone().into_os_string()),
            _ => None,
        };
        let why = find_kafka_in(env)
            .expect_err("nothing installed there")
            .to_string();
        assert!(why.contains(&dir.display().to_string()), "{why}");
        assert!(why.contains("scripts/setup-kafka.sh"), "{why}");
    }
}
