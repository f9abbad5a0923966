//! Apache Kafka 4.x in KRaft mode: one combined broker and controller.
//!
//! The local backend runs `kafka.Kafka` from the Maven-resolved classpath in
//! the cache (see `cache.rs`), with storage formatted once per instance by
//! `kafka.tools.StorageTool format --standalone`. Both listeners are on free
//! 127.0.0.1 ports that stay the same across [`Kafka::stop`] / [`Kafka::start`],
//! as do the log dirs, so fault tests can stop the broker mid-stream and bring
//! it back. Readiness is a real metadata request that lists the broker.

use std::fs;
use std::io::Read;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::ClientConfig;

use crate::process::{self, block_on, run, Launch, Local};
use crate::proxy::FaultProxy;
use crate::runner::{External, Runner};
use crate::{cache, BackendKind, Error, Result};

const READY_TIMEOUT: Duration = Duration::from_secs(120);
/// Names a broker shared by every test binary of a run.
const EXTERNAL: &str = "PGCDC_TEST_KAFKA";

/// A running (or stopped) Kafka broker on `127.0.0.1`.
///
/// Dropping it stops the broker and removes its log dirs; the instance of
/// [`Kafka::shared`] lives until the test process exits.
#[derive(Debug)]
pub struct Kafka {
    runner: Runner,
    port: u16,
    /// A second listener reached only through a fault proxy (see
    /// [`Kafka::launch_behind_proxy`]).
    proxy: Option<FaultProxy>,
    /// The listeners of [`Kafka::launch_secure`].
    secure: Option<SecureListeners>,
}

/// The SASL user of [`Kafka::launch_secure`], for PLAIN and SCRAM-SHA-256.
pub const SASL_USER: &str = "alice";
/// [`SASL_USER`]'s password.
pub const SASL_PASSWORD: &str = "alice-secret-7d1f";

/// The extra listeners of a secured broker: TLS, SASL without TLS, SASL
/// over TLS.
#[derive(Debug, Clone)]
struct SecureListeners {
    ssl: u16,
    sasl_plaintext: u16,
    sasl_ssl: u16,
    /// PEM files: the server key and certificate, and the CA.
    keystore: PathBuf,
    truststore: PathBuf,
}

/// The ports of a listener advertised at a proxy: the broker listens on
/// `internal`, clients are told to connect to `advertised` (the proxy).
#[derive(Debug, Clone, Copy)]
struct ProxiedListener {
    internal: u16,
    advertised: u16,
}

impl Kafka {
    /// The broker shared by this test binary, started on first use, or the
    /// one `PGCDC_TEST_KAFKA` names.
    ///
    /// # Panics
    /// When the broker cannot be started, with the full error (every call).
    pub fn shared() -> &'static Kafka {
        static SHARED: OnceLock<Result<Kafka>> = OnceLock::new();
        match SHARED.get_or_init(|| match crate::external_port(EXTERNAL)? {
            Some(port) => Kafka::external(port),
            None => Kafka::launch(),
        }) {
            Ok(kafka) => kafka,
            Err(e) => panic!("shared kafka: {}", e.report()),
        }
    }

    /// The broker another process runs on `port`, once it answers.
    fn external(port: u16) -> Result<Kafka> {
        let kafka = Kafka {
            runner: Runner::External(External {
                service: "kafka",
                variable: EXTERNAL,
            }),
            port,
            proxy: None,
            secure: None,
        };
        kafka.start()?;
        Ok(kafka)
    }

    /// Starts a private broker (for tests that stop or kill it).
    pub fn launch() -> Result<Kafka> {
        Kafka::launch_with(None, None)
    }

    /// Starts a private broker with three more listeners besides PLAINTEXT:
    /// SSL, SASL_PLAINTEXT and SASL_SSL, with `ca`'s server certificate
    /// (a PEM keystore) and the SASL mechanisms PLAIN and SCRAM-SHA-256 for
    /// [`SASL_USER`] / [`SASL_PASSWORD`] (the SCRAM credential is written
    /// by `kafka-storage format --add-scram`, as KRaft wants). Clients are
    /// not asked for certificates. Local backend only.
    pub fn launch_secure(ca: &crate::TestCa) -> Result<Kafka> {
        let read = |path: PathBuf| {
            fs::read_to_string(&path).map_err(Error::io(format!("read {}", path.display())))
        };
        let keystore = format!(
            "{}{}",
            read(ca.server_key_file())?,
            read(ca.server_cert_file())?
        );
        let keystore_file = ca.dir().join("kafka-keystore.pem");
        fs::write(&keystore_file, keystore)
            .map_err(Error::io(format!("write {}", keystore_file.display())))?;
        let secure = SecureListeners {
            ssl: process::free_port()?,
            sasl_plaintext: process::free_port()?,
            sasl_ssl: process::free_port()?,
            keystore: keystore_file,
            truststore: ca.ca_file(),
        };
        Kafka::launch_with(None, Some(secure))
    }

    /// `bootstrap.servers` of the SSL listener ([`launch_secure`](Self::launch_secure)).
    pub fn ssl_bootstrap_servers(&self) -> Option<String> {
        self.secure.as_ref().map(|s| format!("127.0.0.1:{}", s.ssl))
    }

    /// `bootstrap.servers` of the SASL_PLAINTEXT listener.
    pub fn sasl_plaintext_bootstrap_servers(&self) -> Option<String> {
        self.secure
            .as_ref()
            .map(|s| format!("127.0.0.1:{}", s.sasl_plaintext))
    }

    /// `bootstrap.servers` of the SASL_SSL listener.
    pub fn sasl_ssl_bootstrap_servers(&self) -> Option<String> {
        self.secure
            .as_ref()
            .map(|s| format!("127.0.0.1:{}", s.sasl_ssl))
    }

    /// Starts a private broker with a second listener whose advertised
    /// address is a [`FaultProxy`]: clients bootstrapped at
    /// [`proxied_bootstrap_servers`](Self::proxied_bootstrap_servers) reach
    /// the broker only through [`proxy`](Self::proxy), for every request
    /// (metadata tells them the proxy's address). Local backend only.
    pub fn launch_behind_proxy() -> Result<Kafka> {
        let listener = ProxiedListener {
            internal: process::free_port()?,
            advertised: process::free_port()?,
        };
        let proxy = FaultProxy::start_on(
            listener.advertised,
            ([127, 0, 0, 1], listener.internal).into(),
        )?;
        let mut kafka = Kafka::launch_with(Some(listener), None)?;
        kafka.proxy = Some(proxy);
        Ok(kafka)
    }

    fn launch_with(
        proxied: Option<ProxiedListener>,
        secure: Option<SecureListeners>,
    ) -> Result<Kafka> {
        let port = process::free_port()?;
        let runner = match BackendKind::from_env()? {
            BackendKind::Local => {
                Runner::Local(Local::new(local_launch(port, proxied, secure.as_ref())?))
            }
            #[cfg(feature = "docker")]
            BackendKind::Docker if proxied.is_some() || secure.is_some() => {
                return Err(Error::LocalOnly {
                    what: "a Kafka listener behind a fault proxy, or with TLS and SASL",
                })
            }
            #[cfg(feature = "docker")]
            BackendKind::Docker => Runner::Docker(crate::docker::kafka(port)?),
            #[cfg(not(feature = "docker"))]
            BackendKind::Docker => return Err(Error::DockerFeatureOff),
        };
        let kafka = Kafka {
            runner,
            port,
            proxy: None,
            secure,
        };
        kafka.start()?;
        Ok(kafka)
    }

    /// `127.0.0.1:port`, for `bootstrap.servers`.
    pub fn bootstrap_servers(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `bootstrap.servers` through the fault proxy, for a broker started
    /// with [`launch_behind_proxy`](Self::launch_behind_proxy).
    pub fn proxied_bootstrap_servers(&self) -> Option<String> {
        self.proxy.as_ref().map(FaultProxy::addr)
    }

    /// The proxy in front of the second listener.
    pub fn proxy(&self) -> Option<&FaultProxy> {
        self.proxy.as_ref()
    }

    /// The broker (PLAINTEXT) port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The broker's pid while the local backend runs.
    pub fn pid(&self) -> Option<u32> {
        self.runner.pid()
    }

    /// The broker log of the local backend (WARN and above, plus JVM output).
    pub fn log_file(&self) -> Option<&Path> {
        self.runner.log()
    }

    /// Shuts the broker down cleanly (`SIGTERM`) and waits (no-op when stopped).
    pub fn stop(&self) -> Result<()> {
        self.runner.stop("TERM", Duration::from_secs(60))
    }

    /// Kills the broker (`SIGKILL`), like a crash (no-op when stopped).
    pub fn kill(&self) -> Result<()> {
        self.runner.stop("KILL", Duration::from_secs(10))
    }

    /// Starts the broker again on the same ports and log dirs and waits until
    /// it answers metadata requests (no-op when running).
    pub fn start(&self) -> Result<()> {
        let servers = self.bootstrap_servers();
        let mut client: Option<BaseConsumer> = None;
        self.runner.start(READY_TIMEOUT, || {
            // Cheap check first, so no client is made until the port is open.
            TcpStream::connect_timeout(&([127, 0, 0, 1], self.port).into(), Duration::from_secs(1))
                .map_err(|e| format!("connect: {e}"))?;
            if client.is_none() {
                client = Some(
                    client_config(&servers)
                        .set("reconnect.backoff.max.ms", "200")
                        .create()
                        .map_err(|e| e.to_string())?,
                );
            }
            let metadata = client
                .as_ref()
                .ok_or("no client")?
                .fetch_metadata(None, Duration::from_secs(2))
                .map_err(|e| format!("metadata: {e}"))?;
            match metadata.brokers().len() {
                0 => Err("metadata lists no broker yet".into()),
                _ => Ok(()),
            }
        })
    }

    /// Creates `topic` with `partitions` partitions (replication factor 1).
    pub fn create_topic(&self, topic: &str, partitions: i32) -> Result<()> {
        self.create_topics(&[topic], partitions)
    }

    /// Creates `topics`, each with `partitions` partitions, in one request.
    pub fn create_topics(&self, topics: &[&str], partitions: i32) -> Result<()> {
        let kafka_err = |source| Error::Kafka {
            action: format!("create topics {topics:?}"),
            source,
        };
        let admin: AdminClient<DefaultClientContext> = client_config(&self.bootstrap_servers())
            .create()
            .map_err(kafka_err)?;
        let new_topics: Vec<NewTopic<'_>> = topics
            .iter()
            .map(|topic| NewTopic::new(topic, partitions, TopicReplication::Fixed(1)))
            .collect();
        let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
        let results = block_on(admin.create_topics(&new_topics, &options))?.map_err(kafka_err)?;
        for result in results {
            result.map_err(|(_, code)| kafka_err(KafkaError::AdminOp(code)))?;
        }
        Ok(())
    }
}

fn client_config(servers: &str) -> ClientConfig {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", servers);
    config
}

fn local_launch(
    port: u16,
    proxied: Option<ProxiedListener>,
    secure: Option<&SecureListeners>,
) -> Result<Launch> {
    let libs = cache::kafka_libs()?;
    let java = cache::java(17)?;
    process::with_work_dir("kafka", |work| {
        let controller_port = process::free_port()?;
        let write = |name: &str, text: String| -> Result<PathBuf> {
            let path = work.join(name);
            fs::write(&path, text).map_err(Error::io(format!("write {}", path.display())))?;
            Ok(path)
        };
        let props = write(
            "server.properties",
            server_properties(work, port, controller_port, proxied, secure),
        )?;
        let log4j = write(
            "log4j2.properties",
            "status = warn\nappender.err.type = Console\nappender.err.name = ERR\n\
         appender.err.target = SYSTEM_ERR\nappender.err.layout.type = PatternLayout\n\
         appender.err.layout.pattern = [%d] %p %m (%c)%n\nrootLogger.level = warn\n\
         rootLogger.appenderRef.err.ref = ERR\n"
                .into(),
        )?;
        let tmp = work.join("tmp");
        fs::create_dir(&tmp).map_err(Error::io(format!("create dir {}", tmp.display())))?;
        let mut jvm: Vec<std::ffi::OsString> = vec![
            "-Xms128m".into(),
            "-Xmx512m".into(),
            "-XX:+UseG1GC".into(),
            "-XX:MaxGCPauseMillis=20".into(),
            "-XX:+ExitOnOutOfMemoryError".into(),
            "-Djava.awt.headless=true".into(),
            format!("-Djava.io.tmpdir={}", tmp.display()).into(),
            format!("-Dlog4j2.configurationFile={}", log4j.display()).into(),
            "-cp".into(),
            libs.join("*").into_os_string(),
        ];
        let mut format = Command::new(&java);
        format
            .args(&jvm)
            .args(["kafka.tools.StorageTool", "format", "--standalone", "-t"])
            .arg(cluster_id()?)
            .arg("-c")
            .arg(&props);
        if secure.is_some() {
            format.arg("--add-scram").arg(format!(
                "SCRAM-SHA-256=[name={SASL_USER},password={SASL_PASSWORD}]"
            ));
        }
        run(
            &mut format,
            &format!(
                "kafka storage could not be formatted; check that {} runs, and delete {} \
                 to re-fetch if its jars are damaged",
                java.display(),
                libs.display()
            ),
        )?;
        jvm.extend(["kafka.Kafka".into(), props.into_os_string()]);
        Ok(Launch {
            service: "kafka",
            program: java,
            args: jvm,
            log: work.join("kafka.log"),
            work_dir: work.to_path_buf(),
            // The owner is gone and the log dirs are about to be removed.
            stop_signal: "KILL",
            grace: Duration::from_secs(1),
        })
    })
}

fn server_properties(
    work: &Path,
    port: u16,
    controller_port: u16,
    proxied: Option<ProxiedListener>,
    secure: Option<&SecureListeners>,
) -> String {
    let (mut listener, mut advertised, mut protocol) = match proxied {
        Some(p) => (
            format!(",PROXIED://127.0.0.1:{}", p.internal),
            format!(",PROXIED://127.0.0.1:{}", p.advertised),
            ",PROXIED:PLAINTEXT".to_owned(),
        ),
        None => (String::new(), String::new(), String::new()),
    };
    let mut security = String::new();
    if let Some(s) = secure {
        let secured = format!(
            ",SSL://127.0.0.1:{},SASL_PLAINTEXT://127.0.0.1:{},SASL_SSL://127.0.0.1:{}",
            s.ssl, s.sasl_plaintext, s.sasl_ssl
        );
        listener += &secured;
        advertised += &secured;
        protocol += ",SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL";
        security = format!(
            "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256
ssl.keystore.type=PEM
ssl.keystore.location={keystore}
ssl.truststore.type=PEM
ssl.truststore.location={truststore}
ssl.client.auth=none
",
            keystore = s.keystore.display(),
            truststore = s.truststore.display()
        );
        for name in ["sasl_plaintext", "sasl_ssl"] {
            security += &format!(
                "listener.name.{name}.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_{SASL_USER}=\"{SASL_PASSWORD}\";
listener.name.{name}.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
"
            );
        }
    }
    // The broker session settings: after a kill the restarted controller keeps
    // the dead incarnation's registration until its session expires (9 s by
    // default), which would delay the restart.
    format!(
        "process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:{controller_port}
listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}{listener}
advertised.listeners=PLAINTEXT://127.0.0.1:{port}{advertised}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT{protocol}
log.dirs={data}
num.partitions=1
default.replication.factor=1
auto.create.topics.enable=true
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=4
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
group.min.session.timeout.ms=1000
broker.session.timeout.ms=2000
broker.heartbeat.interval.ms=500
{security}",
        data = work.join("data").display()
    )
}

/// A random KRaft cluster id: 16 random bytes, URL-safe base64 without padding
/// (what `kafka-storage random-uuid` prints), saving a JVM start.
fn cluster_id() -> Result<String> {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut bytes = [0u8; 18];
    fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes[..16]))
        .map_err(Error::io("read /dev/urandom"))?;
    // Kafka rejects ids whose text starts with '-'.
    bytes[0] &= 0x7f;
    let mut id = String::with_capacity(24);
    for chunk in bytes.chunks(3) {
        let n = u32::from(chunk[0]) << 16 | u32::from(chunk[1]) << 8 | u32::from(chunk[2]);
        for shift in [18, 12, 6, 0] {
            id.push(char::from(ALPHABET[(n >> shift & 63) as usize]));
        }
    }
    id.truncate(22);
    Ok(id)
}
