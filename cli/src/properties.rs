//! Client properties with librdkafka's names, as kcat takes them: `-X
//! property=value` (repeatable) and `-F FILE` (`key=value` lines, `#`
//! comments), plus `--timeout`. They become the library's settings:
//! [`Security`] (TLS and SASL), [`ClusterConfig::client_rack`],
//! [`ClusterConfig::with_timeout`] and, for `replay`, the isolation level
//! (`isolation.level`).
//!
//! Values are taken as given: a password may begin or end with a space.
//! Only a properties file's layout is loosened: blank lines, `#` comments,
//! and whitespace around the property name and before its value.
//!
//! Unknown properties are refused by name (a misspelt `sasl.pasword` must
//! not silently connect without it), and so are properties that the chosen
//! `security.protocol` would ignore (an `ssl.ca.location` with `PLAINTEXT`
//! means the user expects TLS that would not happen).
//!
//! # References
//! - librdkafka `CONFIGURATION.md` (property names and values).
//! - kcat's `-X` and `-F` options.

use std::path::{Path, PathBuf};
use std::time::Duration;

use walfetch::cluster::{ClusterConfig, IsolationLevel};
use walfetch::connection::{Pem, SaslConfig, Security, TlsConfig};

/// The properties walfetch understands.
pub(crate) const KNOWN: &[&str] = &[
    "security.protocol",
    "ssl.ca.location",
    "ssl.certificate.location",
    "ssl.key.location",
    "ssl.endpoint.identification.algorithm",
    "enable.ssl.certificate.verification",
    "sasl.mechanism",
    "sasl.mechanisms",
    "sasl.username",
    "sasl.password",
    "client.id",
    "client.rack",
    "socket.timeout.ms",
    "isolation.level",
];

/// Parses one `-X property=value`: the value is everything after the
/// first `=`, as given (kcat hands it to librdkafka so): a password may
/// begin or end with a space.
pub(crate) fn assignment(text: &str) -> Result<(String, String), String> {
    let (key, value) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?} is not property=value"))?;
    let key = key.trim();
    if key.is_empty() {
        return Err(format!("{text:?} has no property name before ="));
    }
    Ok((key.to_owned(), value.to_owned()))
}

/// The `key=value` lines of a properties file (`-F`): blank lines and
/// lines starting with `#` are skipped, and whitespace around the name and
/// before the value goes (`name = value`, as Java's properties files
/// allow); the rest of the line is the value, trailing spaces included.
pub(crate) fn parse_file(text: &str, path: &Path) -> Result<Vec<(String, String)>, String> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| {
            let line = line.trim_start();
            !line.is_empty() && !line.starts_with('#')
        })
        .map(|(i, line)| {
            assignment(line)
                .map(|(key, value)| (key, value.trim_start().to_owned()))
                .map_err(|e| format!("{}:{}: {e}", path.display(), i + 1))
        })
        .collect()
}

/// Parses a duration: whole seconds (`5`), or with a unit: `500ms`, `5s`,
/// `2m`.
pub(crate) fn duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration (e.g. 5, 5s, 500ms, 2m)"))?;
    let d = match unit {
        "" | "s" => Duration::from_secs(n),
        "ms" => Duration::from_millis(n),
        "m" => Duration::from_secs(n.saturating_mul(60)),
        _ => return Err(format!("{text:?}: unknown unit {unit:?} (ms, s or m)")),
    };
    if d.is_zero() {
        return Err(format!("{text:?}: a timeout must be above zero"));
    }
    Ok(d)
}

/// Settings read from properties.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Settings {
    protocol: Protocol,
    ca: Option<PathBuf>,
    certificate: Option<PathBuf>,
    key: Option<PathBuf>,
    verify_hostname: bool,
    verify_certificate: bool,
    mechanism: Option<String>,
    username: Option<String>,
    password: Option<String>,
    client_id: Option<String>,
    client_rack: Option<String>,
    timeout: Option<Duration>,
    /// `isolation.level`, when given.
    isolation: Option<IsolationLevel>,
    /// Properties given, for the consistency checks.
    given: Vec<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum Protocol {
    #[default]
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl Protocol {
    fn tls(self) -> bool {
        matches!(self, Self::Ssl | Self::SaslSsl)
    }
    fn sasl(self) -> bool {
        matches!(self, Self::SaslPlaintext | Self::SaslSsl)
    }
}

fn boolean(key: &str, value: &str) -> Result<bool, String> {
    match value.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Ok(true),
        "false" | "0" | "no" | "off" => Ok(false),
        _ => Err(format!("{key}: {value:?} is not true or false")),
    }
}

impl Settings {
    /// Reads properties in order (a later one overrides an earlier one).
    pub(crate) fn from_pairs<'a>(
        pairs: impl IntoIterator<Item = &'a (String, String)>,
    ) -> Result<Self, String> {
        let mut s = Self {
            verify_hostname: true,
            verify_certificate: true,
            ..Self::default()
        };
        for (key, value) in pairs {
            let v = value.clone();
            match key.as_str() {
                "security.protocol" => {
                    s.protocol = match value.to_ascii_uppercase().as_str() {
                        "PLAINTEXT" => Protocol::Plaintext,
                        "SSL" => Protocol::Ssl,
                        "SASL_PLAINTEXT" => Protocol::SaslPlaintext,
                        "SASL_SSL" => Protocol::SaslSsl,
                        _ => {
                            return Err(format!(
                                "security.protocol: {value:?} is not PLAINTEXT, SSL, \
                                 SASL_PLAINTEXT or SASL_SSL"
                            ))
                        }
                    }
                }
                "ssl.ca.location" => s.ca = Some(v.into()),
                "ssl.certificate.location" => s.certificate = Some(v.into()),
                "ssl.key.location" => s.key = Some(v.into()),
                "ssl.endpoint.identification.algorithm" => {
                    s.verify_hostname = match value.to_ascii_lowercase().as_str() {
                        "https" => true,
                        "none" => false,
                        _ => {
                            return Err(format!(
                            "ssl.endpoint.identification.algorithm: {value:?} is not https or none"
                        ))
                        }
                    }
                }
                "enable.ssl.certificate.verification" => {
                    s.verify_certificate = boolean(key, value)?;
                }
                "sasl.mechanism" | "sasl.mechanisms" => {
                    let upper = value.to_ascii_uppercase();
                    match upper.as_str() {
                        "PLAIN" | "SCRAM-SHA-256" | "SCRAM-SHA-512" => {}
                        "OAUTHBEARER" => {
                            return Err(format!(
                                "{key}: OAUTHBEARER needs a token provider, which only the \
                                 library API takes (SaslConfig::oauthbearer)"
                            ))
                        }
                        _ => {
                            return Err(format!(
                                "{key}: {value:?} is not PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"
                            ))
                        }
                    }
                    s.mechanism = Some(upper);
                }
                "sasl.username" => s.username = Some(v),
                "sasl.password" => s.password = Some(v),
                "client.id" => s.client_id = Some(v),
                "client.rack" => s.client_rack = Some(v).filter(|r| !r.is_empty()),
                "socket.timeout.ms" => {
                    let ms: u64 = value.parse().ok().filter(|ms| *ms > 0).ok_or_else(|| {
                        format!(
                            "socket.timeout.ms: {value:?} is not a number of milliseconds above 0"
                        )
                    })?;
                    s.timeout = Some(Duration::from_millis(ms));
                }
                "isolation.level" => {
                    s.isolation = Some(match value.to_ascii_lowercase().as_str() {
                        "read_committed" => IsolationLevel::ReadCommitted,
                        "read_uncommitted" => IsolationLevel::ReadUncommitted,
                        _ => {
                            return Err(format!(
                                "isolation.level: {value:?} is not read_committed or \
                                 read_uncommitted"
                            ))
                        }
                    });
                }
                other => {
                    return Err(format!(
                        "unknown property {other:?} (walfetch knows: {})",
                        KNOWN.join(", ")
                    ))
                }
            }
            s.given.push(key.clone());
        }
        s.check()?;
        Ok(s)
    }

    fn check(&self) -> Result<(), String> {
        let ignored = |prefix: &str, needs: &str| -> Result<(), String> {
            match self.given.iter().find(|k| k.starts_with(prefix)) {
                Some(k) => Err(format!(
                    "{k} is set but security.protocol is {} (it needs {needs})",
                    protocol_name(self.protocol)
                )),
                None => Ok(()),
            }
        };
        if !self.protocol.tls() {
            ignored("ssl.", "SSL or SASL_SSL")?;
            ignored("enable.ssl.", "SSL or SASL_SSL")?;
        }
        if !self.protocol.sasl() {
            ignored("sasl.", "SASL_PLAINTEXT or SASL_SSL")?;
        }
        if self.key.is_some() != self.certificate.is_some() {
            return Err(
                "ssl.certificate.location and ssl.key.location go together (mutual TLS)".to_owned(),
            );
        }
        if self.protocol.sasl() {
            if self.mechanism.is_none() {
                return Err(format!(
                    "security.protocol={} needs sasl.mechanism (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)",
                    protocol_name(self.protocol)
                ));
            }
            if self.username.is_none() || self.password.is_none() {
                return Err("SASL needs sasl.username and sasl.password".to_owned());
            }
        }
        Ok(())
    }

    /// Sets `timeout` (`--timeout`, over `socket.timeout.ms`).
    pub(crate) fn with_timeout(mut self, timeout: Option<Duration>) -> Self {
        if timeout.is_some() {
            self.timeout = timeout;
        }
        self
    }

    /// `isolation.level`, when given: which records `replay` yields.
    pub(crate) fn isolation(&self) -> Option<IsolationLevel> {
        self.isolation
    }

    /// The library's security settings.
    pub(crate) fn security(&self) -> Security {
        let tls = self.protocol.tls().then(|| {
            let mut tls = match &self.ca {
                Some(ca) => TlsConfig::ca_file(ca),
                None => TlsConfig::system_roots(),
            };
            if let (Some(cert), Some(key)) = (&self.certificate, &self.key) {
                tls = tls.client_identity(Pem::File(cert.clone()), Pem::File(key.clone()));
            }
            if !self.verify_hostname {
                tls = tls.danger_skip_hostname_verification();
            }
            if !self.verify_certificate {
                tls = tls.danger_skip_certificate_verification();
            }
            tls
        });
        let sasl = match (&self.mechanism, &self.username, &self.password) {
            (Some(m), Some(u), Some(p)) if self.protocol.sasl() => {
                SaslConfig::with_password(m, u.clone(), p.clone())
            }
            _ => None,
        };
        match (tls, sasl) {
            (None, None) => Security::plaintext(),
            (Some(t), None) => Security::ssl(t),
            (None, Some(s)) => Security::sasl_plaintext(s),
            (Some(t), Some(s)) => Security::sasl_ssl(t, s),
        }
    }

    /// `config` with these settings applied.
    pub(crate) fn apply(&self, mut config: ClusterConfig) -> ClusterConfig {
        config.connection.security = self.security();
        if let Some(id) = &self.client_id {
            config.connection.client_id = id.clone();
        }
        if let Some(rack) = &self.client_rack {
            config.client_rack = Some(rack.clone());
        }
        match self.timeout {
            Some(t) => config.with_timeout(t),
            None => config,
        }
    }
}

fn protocol_name(p: Protocol) -> &'static str {
    match p {
        Protocol::Plaintext => "PLAINTEXT",
        Protocol::Ssl => "SSL",
        Protocol::SaslPlaintext => "SASL_PLAINTEXT",
        Protocol::SaslSsl => "SASL_SSL",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(list: &[&str]) -> Vec<(String, String)> {
        list.iter().map(|s| assignment(s).expect("k=v")).collect()
    }

    fn settings(list: &[&str]) -> Result<Settings, String> {
        Settings::from_pairs(&pairs(list))
    }

    /// A value is taken as given, spaces and all (a password may begin or
    /// end with one, and kcat passes it on so); a file may put spaces
    /// around the name and before the value, and keeps the rest.
    #[test]
    fn assignments_and_files() {
        assert_eq!(
            assignment("sasl.password= a=b ").expect("ok"),
            ("sasl.password".to_owned(), " a=b ".to_owned())
        );
        assert!(assignment("novalue").is_err());
        assert!(assignment("=x").is_err());
        let file = "# comment\n\nsecurity.protocol=SSL\n  ssl.ca.location = /ca.pem\n\
                    sasl.password= pass phrase \n";
        assert_eq!(
            parse_file(file, Path::new("c.properties")).expect("ok"),
            pairs(&[
                "security.protocol=SSL",
                "ssl.ca.location=/ca.pem",
                "sasl.password=pass phrase "
            ])
        );
        let err = parse_file("a=b\nbroken\n", Path::new("c.properties")).expect_err("bad");
        assert!(err.starts_with("c.properties:2:"), "{err}");
    }

    /// librdkafka's `isolation.level` and its two values; unset, the
    /// command's default holds.
    #[test]
    fn isolation_level() {
        assert_eq!(settings(&[]).expect("empty").isolation(), None);
        assert_eq!(
            settings(&["isolation.level=read_committed"])
                .expect("valid")
                .isolation(),
            Some(IsolationLevel::ReadCommitted)
        );
        assert_eq!(
            settings(&["isolation.level=read_uncommitted"])
                .expect("valid")
                .isolation(),
            Some(IsolationLevel::ReadUncommitted)
        );
        let err = settings(&["isolation.level=committed"]).expect_err("invalid");
        assert!(err.contains("isolation.level: \"committed\""), "{err}");
    }

    #[test]
    fn durations() {
        assert_eq!(duration("5").expect("s"), Duration::from_secs(5));
        assert_eq!(duration("5s").expect("s"), Duration::from_secs(5));
        assert_eq!(duration("500ms").expect("ms"), Duration::from_millis(500));
        assert_eq!(duration("2m").expect("m"), Duration::from_secs(120));
        for bad in ["", "s", "5h", "-1", "0", "1.5s"] {
            assert!(duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn sasl_ssl_with_scram() {
        let s = settings(&[
            "security.protocol=sasl_ssl",
            "sasl.mechanisms=scram-sha-512",
            "sasl.username=u",
            "sasl.password=p",
            "ssl.ca.location=/etc/ca.pem",
            "client.rack=r1",
            "socket.timeout.ms=2500",
        ])
        .expect("valid");
        let security = s.security();
        assert_eq!(security.protocol_name(), "SASL_SSL");
        assert_eq!(
            security.sasl.as_ref().map(SaslConfig::mechanism_name),
            Some("SCRAM-SHA-512")
        );
        let tls = security.tls.expect("tls");
        assert!(tls.verify_hostname && tls.verify_certificate);
        let config = s.apply(ClusterConfig::new(["b:9093"]));
        assert_eq!(config.client_rack.as_deref(), Some("r1"));
        assert_eq!(
            config.connection.request_timeout,
            Duration::from_millis(2500)
        );
        assert_eq!(config.retry.deadline, Duration::from_millis(2500));
        // --timeout wins over socket.timeout.ms.
        let config = s
            .with_timeout(Some(Duration::from_secs(7)))
            .apply(ClusterConfig::new(["b:9093"]));
        assert_eq!(config.connection.request_timeout, Duration::from_secs(7));
    }

    #[test]
    fn ssl_opt_outs_and_mutual_tls() {
        let s = settings(&[
            "security.protocol=SSL",
            "ssl.certificate.location=/c.pem",
            "ssl.key.location=/k.pem",
            "ssl.endpoint.identification.algorithm=none",
        ])
        .expect("valid");
        let tls = s.security().tls.expect("tls");
        assert!(!tls.verify_hostname && tls.verify_certificate);
        assert!(tls.client_identity.is_some());
        let s = settings(&[
            "security.protocol=SSL",
            "enable.ssl.certificate.verification=false",
        ])
        .expect("valid");
        assert!(!s.security().tls.expect("tls").verify_certificate);
        assert_eq!(
            settings(&[]).expect("empty").security().protocol_name(),
            "PLAINTEXT"
        );
    }

    #[test]
    fn errors_name_the_property() {
        let cases: &[(&[&str], &str)] = &[
            (&["sasl.pasword=x"], "unknown property \"sasl.pasword\""),
            (&["security.protocol=TLS"], "security.protocol: \"TLS\""),
            (
                &[
                    "security.protocol=SSL",
                    "enable.ssl.certificate.verification=maybe",
                ],
                "enable.ssl.certificate.verification",
            ),
            (
                &[
                    "security.protocol=SSL",
                    "ssl.endpoint.identification.algorithm=x",
                ],
                "ssl.endpoint.identification.algorithm",
            ),
            (
                &["security.protocol=SASL_SSL", "sasl.mechanism=GSSAPI"],
                "sasl.mechanism: \"GSSAPI\"",
            ),
            (
                &["security.protocol=SASL_SSL", "sasl.mechanism=OAUTHBEARER"],
                "OAUTHBEARER needs a token provider",
            ),
            (&["socket.timeout.ms=soon"], "socket.timeout.ms"),
            (
                &["ssl.ca.location=/ca.pem"],
                "ssl.ca.location is set but security.protocol is PLAINTEXT",
            ),
            (
                &["security.protocol=SSL", "sasl.username=u"],
                "sasl.username is set but security.protocol is SSL",
            ),
            (
                &[
                    "security.protocol=SASL_PLAINTEXT",
                    "sasl.username=u",
                    "sasl.password=p",
                ],
                "needs sasl.mechanism",
            ),
            (
                &["security.protocol=SASL_PLAINTEXT", "sasl.mechanism=PLAIN"],
                "sasl.username and sasl.password",
            ),
            (
                &["security.protocol=SSL", "ssl.key.location=/k.pem"],
                "go together",
            ),
        ];
        for (list, want) in cases {
            let err = settings(list).expect_err("invalid");
            assert!(err.contains(want), "{list:?}: {err}");
        }
    }
}
