//! Credentials and transport security: the PostgreSQL password, Kafka's
//! TLS and SASL settings, and secrets read from files.
//!
//! Secrets come from a flag, its `PGCDC_*` variable, or a `...-file` flag
//! naming a file (a mounted Kubernetes or Docker secret); they are held as
//! [`Secret`], whose `Debug` is redacted, and `config show` redacts every
//! flag whose name says password, secret or basic_auth. The Kafka settings
//! become librdkafka properties in [`RunConfig::producer_config`], the one
//! place a Kafka client configuration is built, so the producer, the admin
//! client that creates topics and the consumers that read the progress topic
//! and probe for earlier runs all connect the same way.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::RunConfig;
use crate::options::{read_secret_file, Invalid, Problems, Secret};

/// The PostgreSQL password, kept out of the URL.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Connection")]
pub struct PgPassword {
    /// PostgreSQL password, for a --pg-url without one.
    #[arg(long, env = "PGCDC_PG_PASSWORD")]
    pub pg_password: Option<Secret>,

    /// File holding the PostgreSQL password (a trailing newline is ignored).
    #[arg(long, env = "PGCDC_PG_PASSWORD_FILE", value_parser = read_secret_file)]
    pub pg_password_file: Option<Secret>,
}

impl PgPassword {
    /// The password given by either flag.
    pub fn get(&self) -> Option<&Secret> {
        self.pg_password.as_ref().or(self.pg_password_file.as_ref())
    }

    /// Problems: two passwords, or a URL that already has one.
    pub fn problems(&self, url: &super::PgUrl) -> Vec<Invalid> {
        let mut problems = Vec::new();
        if self.pg_password.is_some() && self.pg_password_file.is_some() {
            problems.push(Invalid {
                field: "pg-password",
                value: String::new(),
                constraint: "and --pg-password-file are both set; give the password once"
                    .to_owned(),
            });
        }
        if self.get().is_some() && url.config().get_password().is_some() {
            problems.push(Invalid {
                field: "pg-password",
                value: String::new(),
                constraint: "is set but --pg-url has a password too; remove it from the URL"
                    .to_owned(),
            });
        }
        for tls in url.tls().problems() {
            problems.push(Invalid {
                field: "pg-url",
                value: url.to_string(),
                constraint: tls.to_string(),
            });
        }
        problems
    }
}

/// librdkafka's `security.protocol`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "snake_case")]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    fn property(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "plaintext",
            SecurityProtocol::Ssl => "ssl",
            SecurityProtocol::SaslPlaintext => "sasl_plaintext",
            SecurityProtocol::SaslSsl => "sasl_ssl",
        }
    }

    fn sasl(self) -> bool {
        matches!(
            self,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        )
    }

    fn tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }
}

/// librdkafka's `sasl.mechanisms` for user name and password.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SaslMechanism {
    #[value(name = "PLAIN")]
    Plain,
    #[value(name = "SCRAM-SHA-256")]
    ScramSha256,
    #[value(name = "SCRAM-SHA-512")]
    ScramSha512,
}

impl SaslMechanism {
    fn property(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "PLAIN",
            SaslMechanism::ScramSha256 => "SCRAM-SHA-256",
            SaslMechanism::ScramSha512 => "SCRAM-SHA-512",
        }
    }
}

/// How the connector authenticates to Kafka and encrypts the connection.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Connection")]
pub struct KafkaSecurity {
    /// Kafka security.protocol: plaintext, ssl, sasl_plaintext or sasl_ssl
    /// (default: plaintext, or what --kafka-property sets).
    #[arg(long, env = "PGCDC_KAFKA_SECURITY_PROTOCOL", value_enum)]
    pub kafka_security_protocol: Option<SecurityProtocol>,

    /// SASL mechanism (sasl.mechanisms): PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.
    #[arg(
        long,
        env = "PGCDC_KAFKA_SASL_MECHANISM",
        value_enum,
        ignore_case = true
    )]
    pub kafka_sasl_mechanism: Option<SaslMechanism>,

    /// SASL user name (sasl.username).
    #[arg(long, env = "PGCDC_KAFKA_SASL_USERNAME")]
    pub kafka_sasl_username: Option<String>,

    /// SASL password (sasl.password).
    #[arg(long, env = "PGCDC_KAFKA_SASL_PASSWORD")]
    pub kafka_sasl_password: Option<Secret>,

    /// File holding the SASL password (a trailing newline is ignored).
    #[arg(long, env = "PGCDC_KAFKA_SASL_PASSWORD_FILE", value_parser = read_secret_file)]
    pub kafka_sasl_password_file: Option<Secret>,

    /// PEM file of the CA that signs the brokers' certificates
    /// (ssl.ca.location; default: the system's CAs).
    #[arg(long, env = "PGCDC_KAFKA_SSL_CA")]
    pub kafka_ssl_ca: Option<PathBuf>,

    /// Client certificate (PEM) for brokers that authenticate clients by
    /// certificate (ssl.certificate.location).
    #[arg(long, env = "PGCDC_KAFKA_SSL_CERT")]
    pub kafka_ssl_cert: Option<PathBuf>,

    /// The client certificate's private key (PEM, ssl.key.location).
    #[arg(long, env = "PGCDC_KAFKA_SSL_KEY")]
    pub kafka_ssl_key: Option<PathBuf>,
}

/// A librdkafka property set by a typed flag.
pub(super) struct Typed {
    pub property: &'static str,
    pub value: String,
    pub flag: &'static str,
}

impl KafkaSecurity {
    fn password(&self) -> Option<&Secret> {
        self.kafka_sasl_password
            .as_ref()
            .or(self.kafka_sasl_password_file.as_ref())
    }

    /// The librdkafka properties the flags set.
    pub(super) fn properties(&self) -> Vec<Typed> {
        let mut typed = Vec::new();
        let mut set = |property, value: String, flag| {
            typed.push(Typed {
                property,
                value,
                flag,
            })
        };
        if let Some(p) = self.kafka_security_protocol {
            set(
                "security.protocol",
                p.property().to_owned(),
                "kafka-security-protocol",
            );
        }
        if let Some(m) = self.kafka_sasl_mechanism {
            set(
                "sasl.mechanisms",
                m.property().to_owned(),
                "kafka-sasl-mechanism",
            );
        }
        if let Some(user) = &self.kafka_sasl_username {
            set("sasl.username", user.clone(), "kafka-sasl-username");
        }
        if let Some(password) = self.password() {
            set(
                "sasl.password",
                password.expose().to_owned(),
                "kafka-sasl-password",
            );
        }
        let path = |p: &PathBuf| p.display().to_string();
        if let Some(ca) = &self.kafka_ssl_ca {
            set("ssl.ca.location", path(ca), "kafka-ssl-ca");
        }
        if let Some(cert) = &self.kafka_ssl_cert {
            set("ssl.certificate.location", path(cert), "kafka-ssl-cert");
        }
        if let Some(key) = &self.kafka_ssl_key {
            set("ssl.key.location", path(key), "kafka-ssl-key");
        }
        typed
    }

    /// Every contradiction among the flags and with `--kafka-property`.
    pub(super) fn problems(&self, config: &RunConfig) -> Vec<Invalid> {
        let mut p = Problems::default();
        self.contradictions(config, &mut p);
        p.check(
            !(self.kafka_sasl_password.is_some() && self.kafka_sasl_password_file.is_some()),
            "kafka-sasl-password",
            String::new(),
            "and --kafka-sasl-password-file are both set; give the password once".to_owned(),
        );
        let protocol = self.protocol(config);
        self.sasl_problems(config, protocol, &mut p);
        self.tls_problems(protocol, &mut p);
        p.0
    }

    /// A `--kafka-property` that says otherwise than a typed flag.
    fn contradictions(&self, config: &RunConfig, p: &mut Problems) {
        for typed in self.properties() {
            let aliases: &[&str] = match typed.property {
                "sasl.mechanisms" => &["sasl.mechanisms", "sasl.mechanism"],
                other => &[other],
            };
            for (key, value) in &config.kafka_properties {
                if !aliases.contains(&key.as_str()) {
                    continue;
                }
                let same = match typed.property {
                    "security.protocol" | "sasl.mechanisms" => {
                        value.eq_ignore_ascii_case(&typed.value)
                    }
                    _ => *value == typed.value,
                };
                let shown = match typed.property {
                    "sasl.password" => format!("{key}=<redacted>"),
                    _ => format!("{key}={value}"),
                };
                p.check(
                    same,
                    "kafka-property",
                    shown,
                    format!("contradicts --{}; set it in one place", typed.flag),
                );
            }
        }
    }

    /// The security protocol: the flag's, or the pass-through property's.
    fn protocol(&self, config: &RunConfig) -> Option<SecurityProtocol> {
        self.kafka_security_protocol.or_else(|| {
            passed(config, "security.protocol")
                .and_then(|p| SecurityProtocol::from_str(&p.to_ascii_lowercase(), true).ok())
        })
    }

    /// SASL settings only with a SASL protocol, and complete.
    fn sasl_problems(
        &self,
        config: &RunConfig,
        protocol: Option<SecurityProtocol>,
        p: &mut Problems,
    ) {
        let passed = |key: &str| passed(config, key);
        let sasl_flags = self.kafka_sasl_mechanism.is_some()
            || self.kafka_sasl_username.is_some()
            || self.password().is_some();
        if sasl_flags {
            p.check(
                protocol.is_some_and(SecurityProtocol::sasl),
                "kafka-security-protocol",
                protocol
                    .map_or("plaintext", SecurityProtocol::property)
                    .to_owned(),
                "must be sasl_plaintext or sasl_ssl with --kafka-sasl-* settings".to_owned(),
            );
        }
        if protocol.is_some_and(SecurityProtocol::sasl) {
            let mechanism = self
                .kafka_sasl_mechanism
                .map(|m| m.property().to_owned())
                .or_else(|| passed("sasl.mechanisms").map(str::to_owned));
            p.check(
                mechanism.is_some(),
                "kafka-sasl-mechanism",
                String::new(),
                "is required with a SASL --kafka-security-protocol (PLAIN, SCRAM-SHA-256 or \
                 SCRAM-SHA-512)"
                    .to_owned(),
            );
            let with_password = mechanism
                .as_deref()
                .is_some_and(|m| m == "PLAIN" || m.starts_with("SCRAM-"));
            if with_password {
                p.check(
                    self.kafka_sasl_username.is_some() || passed("sasl.username").is_some(),
                    "kafka-sasl-username",
                    String::new(),
                    "is required with SASL PLAIN and SCRAM".to_owned(),
                );
                p.check(
                    self.password().is_some() || passed("sasl.password").is_some(),
                    "kafka-sasl-password",
                    String::new(),
                    "is required with SASL PLAIN and SCRAM (or --kafka-sasl-password-file)"
                        .to_owned(),
                );
            }
        }
    }

    /// TLS files only with a TLS protocol, paired, and readable.
    fn tls_problems(&self, protocol: Option<SecurityProtocol>, p: &mut Problems) {
        let tls_flags = self.kafka_ssl_ca.is_some()
            || self.kafka_ssl_cert.is_some()
            || self.kafka_ssl_key.is_some();
        if tls_flags {
            p.check(
                protocol.is_some_and(SecurityProtocol::tls),
                "kafka-security-protocol",
                protocol
                    .map_or("plaintext", SecurityProtocol::property)
                    .to_owned(),
                "must be ssl or sasl_ssl with --kafka-ssl-* settings".to_owned(),
            );
        }
        p.check(
            self.kafka_ssl_cert.is_some() == self.kafka_ssl_key.is_some(),
            "kafka-ssl-cert",
            String::new(),
            "and --kafka-ssl-key go together".to_owned(),
        );
        for (field, path) in [
            ("kafka-ssl-ca", &self.kafka_ssl_ca),
            ("kafka-ssl-cert", &self.kafka_ssl_cert),
            ("kafka-ssl-key", &self.kafka_ssl_key),
        ] {
            if let Some(path) = path {
                p.check(
                    path.is_file(),
                    field,
                    path.display().to_string(),
                    "is not a readable file".to_owned(),
                );
            }
        }
    }
}

/// The value of `key` among the `--kafka-property` pass-throughs (the last
/// one wins, as librdkafka applies them); `sasl.mechanism` stands for
/// `sasl.mechanisms`.
fn passed<'c>(config: &'c RunConfig, key: &str) -> Option<&'c str> {
    config
        .kafka_properties
        .iter()
        .rev()
        .find(|(k, _)| k == key || (key == "sasl.mechanisms" && k == "sasl.mechanism"))
        .map(|(_, v)| v.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> RunConfig {
        let mut argv = vec!["--pg-url", "postgres://u@db/shop", "--topic-prefix", "app"];
        argv.extend_from_slice(args);
        RunConfig::from_args(argv).expect("arguments parse")
    }

    #[test]
    fn typed_settings_reach_the_client_configuration() {
        let c = parse(&[
            "--kafka-security-protocol",
            "sasl_plaintext",
            "--kafka-sasl-mechanism",
            "scram-sha-256",
            "--kafka-sasl-username",
            "alice",
            "--kafka-sasl-password",
            "alice-secret",
        ]);
        c.validate().expect("valid");
        let client = c.producer_config();
        assert_eq!(client.get("security.protocol"), Some("sasl_plaintext"));
        assert_eq!(client.get("sasl.mechanisms"), Some("SCRAM-SHA-256"));
        assert_eq!(client.get("sasl.username"), Some("alice"));
        assert_eq!(client.get("sasl.password"), Some("alice-secret"));
        assert!(!format!("{c:?}").contains("alice-secret"));
    }

    #[test]
    fn contradictions_and_gaps_are_reported() {
        let c = parse(&[
            "--kafka-security-protocol",
            "sasl_ssl",
            "--kafka-property",
            "security.protocol=ssl",
            "--kafka-sasl-username",
            "alice",
            "--kafka-property",
            "sasl.password=from-property",
            "--kafka-sasl-password",
            "from-flag",
        ]);
        let error = c.validate().expect_err("contradictions");
        let text = error.to_string();
        assert!(
            text.contains("contradicts --kafka-security-protocol"),
            "{text}"
        );
        assert!(text.contains("contradicts --kafka-sasl-password"), "{text}");
        assert!(text.contains("kafka-sasl-mechanism"), "{text}");
        assert!(
            !text.contains("from-flag") && !text.contains("from-property"),
            "{text}"
        );
        let c = parse(&["--kafka-sasl-username", "alice"]);
        let text = c.validate().expect_err("no sasl protocol").to_string();
        assert!(text.contains("sasl_plaintext or sasl_ssl"), "{text}");
        let pass_through = parse(&[
            "--kafka-property",
            "security.protocol=SASL_SSL",
            "--kafka-property",
            "sasl.mechanism=PLAIN",
            "--kafka-property",
            "sasl.username=u",
            "--kafka-property",
            "sasl.password=p",
        ]);
        pass_through.validate().expect("pass-through alone is fine");
    }

    #[test]
    fn secret_files_lose_their_newline() {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("pw");
        std::fs::write(&file, "s3cret\n").expect("write");
        let secret = read_secret_file(file.to_str().expect("utf-8")).expect("read");
        assert_eq!(secret.expose(), "s3cret");
        let missing = read_secret_file("/nonexistent/pw").expect_err("missing");
        assert!(missing.contains("/nonexistent/pw"), "{missing}");
    }
}
