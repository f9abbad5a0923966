//! The Docker backend (feature `docker`, `PGCDC_TEST_BACKEND=docker`): the same
//! services from testcontainers-rs containers.
//!
//! Each container's port is mapped to a host port we pick, so it stays the same
//! across stop and start (Kafka must advertise it). Containers are removed when
//! their handle drops; a `kill -9` of the test process leaves them to
//! `docker rm -f`, unlike the local backend's watchdog.

use std::sync::Mutex;
use std::time::Duration;

use testcontainers::core::IntoContainerPort;
use testcontainers::runners::SyncRunner;
use testcontainers::{Container, ContainerRequest, GenericImage, ImageExt};

use crate::process::poll_ready;
use crate::{Error, Result, KAFKA_VERSION, REGISTRY_VERSION};

/// A started container behind one service.
pub(crate) struct Handle {
    service: &'static str,
    // `None` only while dropping.
    container: Mutex<Option<Container<GenericImage>>>,
}

impl std::fmt::Debug for Handle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handle")
            .field("service", &self.service)
            .finish()
    }
}

fn docker_err(action: String) -> impl FnOnce(testcontainers::TestcontainersError) -> Error {
    move |source| Error::Docker { action, source }
}

/// Runs `f` on a helper thread: testcontainers' blocking API starts its own
/// tokio runtime, which panics on a thread that is already inside one (as in
/// a `#[tokio::test]`).
fn off_runtime<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|scope| {
        scope
            .spawn(f)
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

impl Handle {
    fn run(service: &'static str, request: ContainerRequest<GenericImage>) -> Result<Self> {
        let container = off_runtime(|| request.start())
            .map_err(docker_err(format!("start the {service} container")))?;
        Ok(Self {
            service,
            container: Mutex::new(Some(container)),
        })
    }

    /// Calls `f` with the container, off any tokio runtime.
    fn with<T: Send>(
        &self,
        action: &str,
        f: impl FnOnce(&Container<GenericImage>) -> testcontainers::core::error::Result<T> + Send,
    ) -> Result<T> {
        let guard = self.container.lock().unwrap_or_else(|e| e.into_inner());
        let container = guard.as_ref().ok_or_else(|| Error::Io {
            action: format!("{action} the {} container", self.service),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        })?;
        off_runtime(|| f(container)).map_err(docker_err(format!(
            "{action} the {} container",
            self.service
        )))
    }

    /// Starts the container unless it runs, then waits for `probe`.
    pub fn start(
        &self,
        timeout: Duration,
        probe: impl FnMut() -> Result<(), String>,
    ) -> Result<()> {
        let id = self.with("start", |c| {
            if !c.is_running()? {
                c.start()?;
            }
            Ok(c.id().to_owned())
        })?;
        let log = std::path::PathBuf::from(format!("`docker logs {id}`"));
        let tail = || {
            let out = self.with("read logs of", |c| c.stderr_to_vec());
            let text = String::from_utf8_lossy(&out.unwrap_or_default()).into_owned();
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(40)..].join("\n")
        };
        poll_ready(self.service, timeout, probe, || Ok(()), &log, tail)
    }

    /// Stops the container; `kill` gives it no time to shut down.
    pub fn stop(&self, kill: bool) -> Result<()> {
        let timeout = if kill { Some(0) } else { None };
        self.with("stop", |c| c.stop_with_timeout(timeout))
    }
}

impl Drop for Handle {
    /// Removing the container blocks on a runtime too.
    fn drop(&mut self) {
        let container = self
            .container
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        off_runtime(move || drop(container));
    }
}

/// PostgreSQL with logical decoding, on host port `port`.
pub(crate) fn postgres(
    port: u16,
    user: &str,
    password: &str,
    settings: &[(&str, &str)],
) -> Result<Handle> {
    let mut cmd = vec!["postgres".to_owned()];
    for (name, value) in settings {
        cmd.extend(["-c".to_owned(), format!("{name}={value}")]);
    }
    let request = GenericImage::new("postgres", "15")
        .with_exposed_port(5432.tcp())
        .with_mapped_port(port, 5432.tcp())
        .with_env_var("POSTGRES_USER", user)
        .with_env_var("POSTGRES_PASSWORD", password)
        .with_env_var("POSTGRES_HOST_AUTH_METHOD", "trust")
        .with_cmd(cmd);
    Handle::run("postgres", request)
}

/// Apache Kafka (KRaft, combined node) advertising `127.0.0.1:port`.
pub(crate) fn kafka(port: u16) -> Result<Handle> {
    let env = [
        ("KAFKA_NODE_ID", "1".to_owned()),
        ("KAFKA_PROCESS_ROLES", "broker,controller".into()),
        (
            "KAFKA_LISTENERS",
            "PLAINTEXT://:9092,CONTROLLER://:9093".into(),
        ),
        (
            "KAFKA_ADVERTISED_LISTENERS",
            format!("PLAINTEXT://127.0.0.1:{port}"),
        ),
        ("KAFKA_CONTROLLER_LISTENER_NAMES", "CONTROLLER".into()),
        (
            "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP",
            "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT".into(),
        ),
        ("KAFKA_CONTROLLER_QUORUM_VOTERS", "1@localhost:9093".into()),
        ("KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR", "1".into()),
        ("KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR", "1".into()),
        ("KAFKA_TRANSACTION_STATE_LOG_MIN_ISR", "1".into()),
        ("KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS", "0".into()),
        ("KAFKA_AUTO_CREATE_TOPICS_ENABLE", "true".into()),
        ("KAFKA_NUM_PARTITIONS", "1".into()),
    ];
    let mut request = GenericImage::new("apache/kafka", KAFKA_VERSION)
        .with_exposed_port(9092.tcp())
        .with_mapped_port(port, 9092.tcp());
    for (name, value) in env {
        request = request.with_env_var(name, value);
    }
    Handle::run("kafka", request)
}

/// Apicurio Registry on host port `port`.
pub(crate) fn registry(port: u16) -> Result<Handle> {
    let request = GenericImage::new("apicurio/apicurio-registry", REGISTRY_VERSION)
        .with_exposed_port(8080.tcp())
        .with_mapped_port(port, 8080.tcp());
    Handle::run("schema-registry", request)
}
