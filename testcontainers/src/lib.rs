//! Real PostgreSQL, Apache Kafka and a Confluent-compatible schema registry for
//! pgcdc-kafka's integration tests.
//!
//! Each service runs as a local process on free `127.0.0.1` ports (or, with the
//! `docker` feature and `PGCDC_TEST_BACKEND=docker`, as a Docker container):
//!
//! * [`Postgres`]: a private cluster (`initdb` into a temp dir) with
//!   `wal_level=logical`, trust auth and room for 64 replication slots;
//! * [`Kafka`]: Apache Kafka 4.x in KRaft mode, one combined broker+controller,
//!   run from a Maven-resolved classpath;
//! * [`SchemaRegistry`]: Apicurio Registry 3.x, whose Confluent API is at
//!   [`SchemaRegistry::url`].
//!
//! Tests normally share one instance of each per test binary, started lazily on
//! first use: [`Postgres::shared`], [`Kafka::shared`], [`SchemaRegistry::shared`].
//! Tests isolate themselves through unique names ([`unique_name`],
//! [`Postgres::create_database`]), so they may run in parallel. Fault tests
//! that stop and restart a service start a private one with
//! [`Postgres::launch`] / [`Kafka::launch`] instead. [`FaultProxy`] puts
//! network faults between a client and a service; [`BasicAuthProxy`] puts
//! HTTP basic auth in front of the registry
//! ([`SchemaRegistry::basic_auth_proxy`]). [`Postgres::launch_standby_of`]
//! starts a streaming standby of a private cluster (any version, without
//! `pg_basebackup`) and [`Postgres::promote`] promotes it, for failover tests.
//!
//! # No leaked processes
//! Every service runs under a small `bash` watchdog whose standard input is a
//! pipe held only by the process that started it. When that process exits for
//! any reason (normal exit, panic, abort, `kill -9`) the kernel closes the pipe,
//! the watchdog's `read` returns, and it stops the service (escalating to
//! `SIGKILL` after a grace period) and removes the service's temp dir. Temp
//! dirs left behind by a service that was stopped at the moment its owner died
//! are swept the next time any service starts (details in `process.rs`).
//!
//! # Where the software comes from
//! PostgreSQL from the system (`postgresql-15` or newer on Debian); Kafka and
//! Apicurio from Maven Central, fetched once into a cache dir outside the repo
//! (`$PGCDC_SERVICES_CACHE`, else `$XDG_CACHE_HOME/pgcdc-kafka`, else
//! `$HOME/.cache/pgcdc-kafka`), by `fetch-services.sh` or on first use.
//! Apicurio Registry 3.3 needs Java 21 or newer (see [`SchemaRegistry`]).
//!
//! # Environment
//! * `PGCDC_TEST_BACKEND`: `local` (default) or `docker` (needs the `docker` feature).
//! * `PGCDC_SERVICES_CACHE`: the download cache (see [`cache_dir`]).
//! * `PGCDC_SERVICES_TMP`: where work dirs go (see [`work_root`]).
//! * `PGCDC_PG_BINDIR`: the PostgreSQL bin dir (default: the newest
//!   `/usr/lib/postgresql/*/bin`, else `pg_config --bindir`).
//! * `PGCDC_JAVA_HOME`: a JDK to prefer (else `JAVA_HOME`, `PATH`, `/usr/lib/jvm`).
//! * `PGCDC_TEST_KAFKA`, `PGCDC_TEST_REGISTRY`: `127.0.0.1:PORT` of a broker
//!   or registry already running (e.g. from `pgcdc-services`), used as
//!   [`Kafka::shared`] / [`SchemaRegistry::shared`] by every test binary of a
//!   run instead of starting one per binary. Tests isolate themselves by
//!   unique names anyway; one that stops or restarts a service uses a private
//!   one, and stopping a shared one is an error.

mod auth_proxy;
mod cache;
#[cfg(feature = "docker")]
mod docker;
mod error;
mod kafka;
mod postgres;
mod process;
mod proxy;
mod registry;
mod runner;
mod standby;
mod tls;

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

pub use auth_proxy::BasicAuthProxy;
pub use cache::{cache_dir, KAFKA_VERSION, POSTGRES_BUILDS, REGISTRY_VERSION};
pub use error::{Error, Report};
pub use kafka::{Kafka, SASL_PASSWORD, SASL_USER};
pub use postgres::{requested_version, Postgres, PostgresOptions, StandbyOptions, StopMode};
pub use process::work_root;
pub use proxy::FaultProxy;
pub use registry::SchemaRegistry;
pub use tls::TestCa;

/// Result type of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Which implementation serves the services, chosen by `PGCDC_TEST_BACKEND`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    /// Local processes (the default; `PGCDC_TEST_BACKEND` unset or `local`).
    Local,
    /// Docker containers via testcontainers-rs (`PGCDC_TEST_BACKEND=docker`).
    Docker,
}

impl BackendKind {
    /// Reads `PGCDC_TEST_BACKEND`; fails on an unknown value, or on `docker`
    /// when this crate was built without its `docker` feature.
    pub fn from_env() -> Result<Self> {
        match std::env::var("PGCDC_TEST_BACKEND").as_deref() {
            Err(_) | Ok("") | Ok("local") => Ok(Self::Local),
            Ok("docker") if cfg!(feature = "docker") => Ok(Self::Docker),
            Ok("docker") => Err(Error::DockerFeatureOff),
            Ok(other) => Err(Error::UnknownBackend(other.to_owned())),
        }
    }
}

/// A fresh name, unique across processes and calls: `{prefix}_{pid}_{n}_{rand}`.
///
/// Lowercase ASCII letters, digits and `_` only, at most 63 bytes, so it is a
/// valid unquoted Postgres identifier (database, slot, publication, table) and
/// a valid Kafka topic or registry subject. Characters of `prefix` outside that
/// set become `_`.
///
/// ```
/// let a = pgcdc_testcontainers::unique_name("Orders-Test");
/// assert!(a.starts_with("orders_test_"));
/// assert_ne!(a, pgcdc_testcontainers::unique_name("Orders-Test"));
/// ```
pub fn unique_name(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(n);
    let suffix = format!("{:06x}", hasher.finish() & 0xff_ffff);
    let tail = format!("_{}_{n}_{suffix}", std::process::id());
    let mut head: String = prefix
        .chars()
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9' | '_') => c,
            _ => '_',
        })
        .take(63 - tail.len())
        .collect();
    // An identifier must not start with a digit.
    if !head.starts_with(|c: char| c.is_ascii_lowercase() || c == '_') {
        head.insert(0, 't');
        head.truncate(63 - tail.len());
    }
    head + &tail
}

/// The port of the shared service `variable` names (`127.0.0.1:PORT`), if
/// it is set.
pub(crate) fn external_port(variable: &'static str) -> Result<Option<u16>> {
    match std::env::var(variable) {
        Ok(value) => loopback_port(variable, value).map(Some),
        Err(_) => Ok(None),
    }
}

fn loopback_port(variable: &'static str, value: String) -> Result<u16> {
    value
        .strip_prefix("127.0.0.1:")
        .and_then(|port| port.parse().ok())
        .ok_or(Error::BadEnv {
            variable,
            value,
            expected: "127.0.0.1:PORT, the address of a service on loopback",
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_names_are_valid_identifiers() {
        let long = "x".repeat(100);
        for prefix in ["", "9lives", "Slot.Name", long.as_str()] {
            let name = unique_name(prefix);
            assert!(name.len() <= 63, "{name}");
            assert!(name.starts_with(|c: char| c.is_ascii_lowercase() || c == '_'));
            assert!(name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'));
        }
    }

    #[test]
    fn shared_services_are_named_by_a_loopback_address() {
        let port = |value: &str| loopback_port("PGCDC_TEST_KAFKA", value.to_string());
        assert_eq!(port("127.0.0.1:9092").unwrap(), 9092);
        for bad in [
            "9092",
            "localhost:9092",
            "10.0.0.1:9092",
            "127.0.0.1:",
            "127.0.0.1:x",
        ] {
            let message = port(bad).unwrap_err().to_string();
            assert!(
                message.contains("PGCDC_TEST_KAFKA") && message.contains("127.0.0.1:PORT"),
                "{message}"
            );
        }
    }
}
