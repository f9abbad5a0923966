//! The error type of this crate: what failed, where its log is, and a hint.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// Why a service could not be fetched, started, stopped or used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A program this crate needs is not installed.
    #[error("{program} not found; {hint}")]
    MissingTool {
        /// The program looked for.
        program: String,
        /// How to install it.
        hint: String,
    },
    /// A filesystem or process operation failed.
    #[error("could not {action}")]
    Io {
        /// What was being done, e.g. `create dir /tmp/x`.
        action: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A helper command (initdb, mvn, tar, kafka-storage...) exited unsuccessfully.
    #[error("`{command}` failed ({status}); {hint}\n--- output ---\n{output}")]
    Command {
        /// The command line.
        command: String,
        /// Its exit status.
        status: String,
        /// The tail of what it printed.
        output: String,
        /// What to check.
        hint: String,
    },
    /// The service process exited while starting or while it should be running.
    #[error("{service} exited ({status}); log {}:\n{tail}", log.display())]
    Exited {
        /// `postgres`, `kafka` or `schema-registry`.
        service: &'static str,
        /// Its exit status.
        status: String,
        /// Its log file.
        log: PathBuf,
        /// The last lines of that log.
        tail: String,
    },
    /// The service did not answer its readiness probe in time.
    #[error("{service} not ready after {timeout:?} ({last}); log {}:\n{tail}", log.display())]
    NotReady {
        /// `postgres`, `kafka` or `schema-registry`.
        service: &'static str,
        /// How long we waited.
        timeout: Duration,
        /// The last probe failure.
        last: String,
        /// Its log file.
        log: PathBuf,
        /// The last lines of that log.
        tail: String,
    },
    /// A SQL statement or connection failed.
    #[error("postgres request on database {database:?} failed")]
    Postgres {
        /// The database used.
        database: String,
        /// The driver error (its source chain holds the server's message).
        #[source]
        source: tokio_postgres::Error,
    },
    /// A Kafka client request failed.
    #[error("kafka {action} failed")]
    Kafka {
        /// What was requested, e.g. `create topic "t"`.
        action: String,
        /// The client error.
        #[source]
        source: rdkafka::error::KafkaError,
    },
    /// An HTTP request to the schema registry failed or got an unexpected answer.
    #[error("http {request} failed: {detail}")]
    Http {
        /// Method and URL.
        request: String,
        /// What went wrong.
        detail: String,
    },
    /// A test certificate could not be generated.
    #[error("could not generate a test certificate: {detail}")]
    Tls {
        /// The generator's error.
        detail: String,
    },
    /// The backend cannot provide what was asked for.
    #[error("{what} is only available on the local backend (unset PGCDC_TEST_BACKEND)")]
    LocalOnly {
        /// What was asked for.
        what: &'static str,
    },
    /// A service shared by every test binary (`PGCDC_TEST_KAFKA`,
    /// `PGCDC_TEST_REGISTRY`) was asked to stop or start.
    #[error(
        "the {service} of {variable} is shared by every test binary and is not \
         {action} by a test; launch a private one for this test"
    )]
    External {
        /// `kafka` or `schema-registry`.
        service: &'static str,
        /// The environment variable that names it.
        variable: &'static str,
        /// `stopped` or `started`.
        action: &'static str,
    },
    /// An environment variable naming a shared service is malformed.
    #[error("{variable}={value:?}: {expected}")]
    BadEnv {
        /// The variable.
        variable: &'static str,
        /// Its value.
        value: String,
        /// What it should hold.
        expected: &'static str,
    },
    /// `PGCDC_TEST_BACKEND=docker` without the `docker` feature.
    #[error(
        "PGCDC_TEST_BACKEND=docker needs the docker backend; build with \
         `--features pgcdc-testcontainers/docker` or unset PGCDC_TEST_BACKEND"
    )]
    DockerFeatureOff,
    /// `PGCDC_TEST_BACKEND` has a value other than `local` or `docker`.
    #[error("PGCDC_TEST_BACKEND={0:?} is not a backend; use `local` (default) or `docker`")]
    UnknownBackend(String),
    /// A Docker operation failed.
    #[cfg(feature = "docker")]
    #[error("docker: could not {action}; is a Docker engine running and reachable?")]
    Docker {
        /// What was being done.
        action: String,
        /// The testcontainers error.
        #[source]
        source: testcontainers::TestcontainersError,
    },
}

impl Error {
    pub(crate) fn io(action: impl Into<String>) -> impl FnOnce(std::io::Error) -> Self {
        let action = action.into();
        move |source| Self::Io { action, source }
    }

    /// This error and all its sources, one per line (for panics in tests).
    pub fn report(&self) -> Report<'_> {
        Report(self)
    }
}

/// Displays an [`Error`] with its whole source chain; see [`Error::report`].
pub struct Report<'a>(&'a Error);

impl fmt::Display for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut source = std::error::Error::source(self.0);
        while let Some(s) = source {
            write!(f, "\n  caused by: {s}")?;
            source = s.source();
        }
        Ok(())
    }
}
