//! A private PostgreSQL cluster with logical decoding enabled.
//!
//! The local backend runs `initdb` into a fresh work dir and then `postgres -D`
//! in the foreground under the watchdog (see `process.rs`). PostgreSQL refuses
//! to run as root, so when we are root both run as the `postgres` OS user
//! (through `setpriv`, which execs, so the watchdog signals the postmaster
//! itself) with the work dir chowned to it.
//!
//! Settings: trust auth on 127.0.0.1 only, a free port, `wal_level=logical`,
//! 64 replication slots and WAL senders, `wal_sender_timeout=10s` (so keepalive
//! bugs surface quickly) and `fsync=off` (the data dir is disposable).

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use tokio_postgres::{NoTls, SimpleQueryMessage};

use crate::process::{self, block_on, run, Launch, Local};
use crate::runner::Runner;
use crate::{unique_name, BackendKind, Error, Result, TestCa};

pub(crate) const USER: &str = "postgres";
const PASSWORD: &str = "postgres";
const READY_TIMEOUT: Duration = Duration::from_secs(60);
const PG_HINT: &str = "install the Debian package `postgresql-15` (or newer), \
    or set PGCDC_PG_BINDIR to the dir holding initdb and postgres";

/// The settings every cluster runs with (the Docker backend passes them as `-c`).
pub(crate) const SETTINGS: &[(&str, &str)] = &[
    ("wal_level", "logical"),
    ("max_replication_slots", "64"),
    ("max_wal_senders", "64"),
    ("wal_sender_timeout", "10s"),
    ("max_connections", "200"),
    // Safe for a disposable cluster: only an OS crash could lose data. Keep
    // synchronous_commit on, so a commit is durable across an immediate stop
    // and visible to WAL senders (which send flushed WAL only) at once.
    ("fsync", "off"),
    ("full_page_writes", "off"),
];

/// What [`Postgres::launch_with`] sets up beyond the defaults.
#[derive(Debug, Default, Clone)]
pub struct PostgresOptions<'a> {
    /// Serve TLS with this CA's server certificate and require it (with
    /// SCRAM passwords) from every role but the superuser.
    pub tls: Option<&'a TestCa>,
    /// Roles that log in with a client certificate (`cert` auth) instead of
    /// a password; needs `tls`.
    pub cert_users: Vec<String>,
    /// The major version to run, whatever `PGCDC_TEST_PG_VERSION` and
    /// `PGCDC_PG_BINDIR` say (the system's build, else one fetched into the
    /// cache); `None`: as they say.
    pub version: Option<u32>,
    /// Settings beyond the defaults, `(name, value)`, e.g.
    /// `("synchronous_standby_names", "*")`.
    pub settings: Vec<(String, String)>,
}

/// What [`Postgres::launch_standby_of`] sets up beyond a streaming standby.
#[derive(Debug, Default, Clone)]
pub struct StandbyOptions {
    /// `sync_replication_slots = on` (PostgreSQL 17+): the standby keeps
    /// copies of the primary's failover slots, usable once promoted.
    pub sync_replication_slots: bool,
    /// Settings beyond the defaults, `(name, value)`.
    pub settings: Vec<(String, String)>,
}

/// How to stop PostgreSQL; see the `pg_ctl stop -m` modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopMode {
    /// Wait for clients to disconnect (`SIGTERM`).
    Smart,
    /// Disconnect clients, checkpoint, exit (`SIGINT`).
    Fast,
    /// Exit at once, crash recovery on the next start (`SIGQUIT`).
    Immediate,
}

/// A running (or stopped) PostgreSQL server on `127.0.0.1`.
///
/// Dropping it stops the server and removes its data dir; the instance of
/// [`Postgres::shared`] lives until the test process exits.
#[derive(Debug)]
pub struct Postgres {
    pub(crate) runner: Runner,
    pub(crate) port: u16,
    pub(crate) data_dir: Option<PathBuf>,
    /// The bin dir of the local backend (a standby runs the same build).
    pub(crate) bindir: Option<PathBuf>,
    /// A standby's physical slot on its primary.
    pub(crate) physical_slot: Option<String>,
}

impl Postgres {
    /// The server shared by this test binary, started on first use.
    ///
    /// # Panics
    /// When the server cannot be started, with the full error (every call).
    pub fn shared() -> &'static Postgres {
        static SHARED: OnceLock<Result<Postgres>> = OnceLock::new();
        match SHARED.get_or_init(Postgres::launch) {
            Ok(pg) => pg,
            Err(e) => panic!("shared postgres: {}", e.report()),
        }
    }

    /// Starts a private server (for tests that stop or restart it).
    pub fn launch() -> Result<Postgres> {
        let pg = match BackendKind::from_env()? {
            BackendKind::Local => Self::launch_local()?,
            #[cfg(feature = "docker")]
            BackendKind::Docker => {
                let port = process::free_port()?;
                let runner =
                    Runner::Docker(crate::docker::postgres(port, USER, PASSWORD, SETTINGS)?);
                Postgres {
                    runner,
                    port,
                    data_dir: None,
                    bindir: None,
                    physical_slot: None,
                }
            }
            #[cfg(not(feature = "docker"))]
            BackendKind::Docker => return Err(Error::DockerFeatureOff),
        };
        pg.start()?;
        Ok(pg)
    }

    /// Starts a private server with `options` (local backend only).
    ///
    /// With [`PostgresOptions::tls`] the server requires TLS from every role
    /// but the superuser, which keeps trust auth without TLS so helpers like
    /// [`execute`](Self::execute) work as on any other cluster: `ssl=on` with
    /// the CA's server certificate (for 127.0.0.1 and localhost),
    /// `password_encryption=scram-sha-256`, and `pg_hba.conf` lines
    /// `hostssl ... cert` for [`PostgresOptions::cert_users`] (the CA must
    /// have signed their client certificate, common name = role) and
    /// `hostssl ... scram-sha-256` for every other role. A connection
    /// without TLS from another role finds no `pg_hba.conf` line.
    pub fn launch_with(options: &PostgresOptions<'_>) -> Result<Postgres> {
        match BackendKind::from_env()? {
            BackendKind::Local => {}
            #[cfg(feature = "docker")]
            BackendKind::Docker => {
                return Err(Error::LocalOnly {
                    what: "a PostgreSQL cluster with TLS",
                })
            }
            #[cfg(not(feature = "docker"))]
            BackendKind::Docker => return Err(Error::DockerFeatureOff),
        }
        let pg = Self::launch_local_with(options)?;
        pg.start()?;
        Ok(pg)
    }

    fn launch_local() -> Result<Postgres> {
        Self::launch_local_with(&PostgresOptions::default())
    }

    fn launch_local_with(options: &PostgresOptions<'_>) -> Result<Postgres> {
        let bindir = match options.version {
            Some(major) => bindir_of_version(major)?,
            None => bindir()?,
        };
        process::with_work_dir("postgres", |work| {
            let data = work.join("data");
            let port = process::free_port()?;
            let owner = run_as()?;
            if let Some((uid, gid)) = owner {
                std::os::unix::fs::chown(work, Some(uid), Some(gid)).map_err(Error::io(
                    format!("chown {} to the postgres user", work.display()),
                ))?;
            }
            run(
                as_owner(owner, bindir.join("initdb"), work)
                    .arg("-D")
                    .arg(&data)
                    .args(["-U", USER, "--auth=trust", "--no-sync", "-E", "UTF8"])
                    .arg("--locale=C"),
                "initdb could not create the cluster; check the temp dir is writable \
             (set PGCDC_SERVICES_TMP) and that the postgres user can reach it",
            )?;
            let mut conf =
                String::from("\n# pgcdc-testcontainers\nlisten_addresses = '127.0.0.1'\n");
            conf += &format!(
                "port = {port}\nunix_socket_directories = '{}'\n",
                work.display()
            );
            for (name, value) in SETTINGS {
                conf += &format!("{name} = '{value}'\n");
            }
            for (name, value) in &options.settings {
                conf += &format!("{name} = '{value}'\n");
            }
            let mut hba = String::from(
                "local all all trust\nlocal replication all trust\n\
                 host all all 127.0.0.1/32 trust\nhost replication all 127.0.0.1/32 trust\n",
            );
            if let Some(ca) = options.tls {
                for (file, source, private) in [
                    ("server.pem", ca.server_cert_file(), false),
                    ("server-key.pem", ca.server_key_file(), true),
                    ("ca.pem", ca.ca_file(), false),
                ] {
                    let target = data.join(file);
                    fs::copy(&source, &target).map_err(Error::io(format!(
                        "copy {} to {}",
                        source.display(),
                        target.display()
                    )))?;
                    if let Some((uid, gid)) = owner {
                        std::os::unix::fs::chown(&target, Some(uid), Some(gid))
                            .map_err(Error::io(format!("chown {}", target.display())))?;
                    }
                    if private {
                        // PostgreSQL refuses a key others can read.
                        use std::os::unix::fs::PermissionsExt;
                        fs::set_permissions(&target, fs::Permissions::from_mode(0o600))
                            .map_err(Error::io(format!("chmod {}", target.display())))?;
                    }
                }
                conf += "ssl = on\nssl_cert_file = 'server.pem'\nssl_key_file = 'server-key.pem'\n\
                         ssl_ca_file = 'ca.pem'\npassword_encryption = 'scram-sha-256'\n";
                hba = format!(
                    "local all all trust\nlocal replication all trust\n\
                     hostnossl all {USER} 127.0.0.1/32 trust\n\
                     hostnossl replication {USER} 127.0.0.1/32 trust\n"
                );
                for user in &options.cert_users {
                    hba += &format!(
                        "hostssl all {user} 127.0.0.1/32 cert\n\
                         hostssl replication {user} 127.0.0.1/32 cert\n"
                    );
                }
                hba += "hostssl all all 127.0.0.1/32 scram-sha-256\n\
                        hostssl replication all 127.0.0.1/32 scram-sha-256\n";
            }
            let conf_path = data.join("postgresql.conf");
            OpenOptions::new()
                .append(true)
                .open(&conf_path)
                .and_then(|mut f| f.write_all(conf.as_bytes()))
                .map_err(Error::io(format!("append to {}", conf_path.display())))?;
            let hba_path = data.join("pg_hba.conf");
            fs::write(&hba_path, hba)
                .map_err(Error::io(format!("write {}", hba_path.display())))?;

            Ok(Postgres {
                runner: Runner::Local(Local::new(server_launch(owner, &bindir, &data, work))),
                port,
                data_dir: Some(data),
                bindir: Some(bindir.clone()),
                physical_slot: None,
            })
        })
    }

    /// Always `127.0.0.1`.
    pub fn host(&self) -> &str {
        "127.0.0.1"
    }

    /// The TCP port; it stays the same across [`stop`](Self::stop) and [`start`](Self::start).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The superuser's name.
    pub fn user(&self) -> &str {
        USER
    }

    /// The superuser's password (auth is `trust`, so any password works).
    pub fn password(&self) -> &str {
        PASSWORD
    }

    /// `postgres://user:password@127.0.0.1:port/database`.
    pub fn url(&self, database: &str) -> String {
        format!(
            "postgres://{USER}:{PASSWORD}@127.0.0.1:{}/{database}",
            self.port
        )
    }

    /// A libpq key-value conninfo reaching `database` through the server's
    /// Unix-domain socket (local backend only; `None` under Docker), e.g.
    /// `host=/tmp/.../1234-0-postgres port=5433 user=postgres dbname=db`.
    /// A walsender costs less per message over a Unix socket than over TCP
    /// loopback (BENCHMARKS.md, "The pg_recvlogical reference").
    pub fn socket_url(&self, database: &str) -> Option<String> {
        let dir = self.data_dir.as_deref()?.parent()?;
        Some(format!(
            "host={} port={} user={USER} dbname={database}",
            dir.display(),
            self.port
        ))
    }

    /// The data dir of the local backend (`None` under Docker).
    pub fn data_dir(&self) -> Option<&Path> {
        self.data_dir.as_deref()
    }

    /// The server log of the local backend.
    pub fn log_file(&self) -> Option<&Path> {
        self.runner.log()
    }

    /// The postmaster's pid while the local backend runs.
    pub fn pid(&self) -> Option<u32> {
        self.runner.pid()
    }

    /// Creates a database named [`unique_name(prefix)`](unique_name) and returns its name.
    pub fn create_database(&self, prefix: &str) -> Result<String> {
        let name = unique_name(prefix);
        self.execute("postgres", &format!("CREATE DATABASE {name}"))?;
        Ok(name)
    }

    /// Runs `sql` (one or more statements, simple query protocol) in `database`.
    ///
    /// Blocking: it connects afresh on a private runtime in a helper thread, so
    /// it may be called from sync code and from inside a tokio runtime alike.
    /// Several statements run in one implicit transaction unless `sql` has its
    /// own `BEGIN`/`COMMIT`, so send `CREATE DATABASE` alone.
    pub fn execute(&self, database: &str, sql: &str) -> Result<()> {
        self.query(database, sql).map(drop)
    }

    /// Like [`execute`](Self::execute), returning every row of every statement,
    /// each value in its text form (`None` for NULL).
    ///
    /// `query("postgres", "SHOW wal_level")` gives `[[Some("logical")]]`.
    pub fn query(&self, database: &str, sql: &str) -> Result<Vec<Vec<Option<String>>>> {
        let pg_err = |source| Error::Postgres {
            database: database.to_owned(),
            source,
        };
        let url = self.url(database);
        let messages = block_on(async {
            let (client, connection) = tokio_postgres::connect(&url, NoTls).await?;
            let connection = tokio::spawn(connection);
            let result = client.simple_query(sql).await;
            drop(client);
            let _ = connection.await;
            result
        })?
        .map_err(pg_err)?;
        Ok(messages
            .iter()
            .filter_map(|m| match m {
                SimpleQueryMessage::Row(row) => Some(
                    (0..row.len())
                        .map(|i| row.get(i).map(str::to_owned))
                        .collect(),
                ),
                _ => None,
            })
            .collect())
    }

    /// Connects to `database`; the connection task is spawned on the caller's
    /// tokio runtime (so call this from inside one).
    pub async fn connect(&self, database: &str) -> Result<tokio_postgres::Client> {
        let (client, connection) = tokio_postgres::connect(&self.url(database), NoTls)
            .await
            .map_err(|source| Error::Postgres {
                database: database.to_owned(),
                source,
            })?;
        tokio::spawn(connection);
        Ok(client)
    }

    /// Stops the server (no-op when stopped). Under Docker `Immediate` kills
    /// the container and the other modes stop it with its `SIGINT`.
    pub fn stop(&self, mode: StopMode) -> Result<()> {
        let signal = match mode {
            StopMode::Smart => "TERM",
            StopMode::Fast => "INT",
            StopMode::Immediate => "QUIT",
        };
        self.runner.stop(signal, Duration::from_secs(30))
    }

    /// Starts the server again on the same data dir and port, and waits until
    /// it accepts queries (no-op when running).
    pub fn start(&self) -> Result<()> {
        let url = self.url("postgres");
        self.runner.start(READY_TIMEOUT, || {
            block_on(async {
                let connect = tokio_postgres::connect(&url, NoTls);
                let (client, connection) = tokio::time::timeout(Duration::from_secs(2), connect)
                    .await
                    .map_err(|_| "connect timed out".to_owned())?
                    .map_err(|e| e.to_string())?;
                tokio::spawn(connection);
                client
                    .simple_query("SELECT 1")
                    .await
                    .map_err(|e| e.to_string())?;
                Ok(())
            })
            .map_err(|e| e.to_string())?
        })
    }

    /// [`stop`](Self::stop) with `Fast`, then [`start`](Self::start).
    pub fn restart(&self) -> Result<()> {
        self.stop(StopMode::Fast)?;
        self.start()
    }
}

/// `program` run as `owner` (through `setpriv`, which execs) in `work`.
pub(crate) fn as_owner(owner: Option<(u32, u32)>, program: PathBuf, work: &Path) -> Command {
    let mut cmd = match owner {
        Some((uid, gid)) => {
            let mut c = Command::new("setpriv");
            c.arg(format!("--reuid={uid}"))
                .arg(format!("--regid={gid}"))
                .arg("--init-groups")
                .arg("--")
                .arg(program);
            c
        }
        None => Command::new(program),
    };
    cmd.current_dir(work);
    cmd
}

/// How the watchdog runs `postgres -D data` of the work dir `work`.
pub(crate) fn server_launch(
    owner: Option<(u32, u32)>,
    bindir: &Path,
    data: &Path,
    work: &Path,
) -> Launch {
    let postgres = as_owner(owner, bindir.join("postgres"), work);
    let mut args: Vec<_> = postgres.get_args().map(|a| a.to_owned()).collect();
    args.extend(["-D".into(), data.as_os_str().to_owned()]);
    Launch {
        service: "postgres",
        program: PathBuf::from(postgres.get_program()),
        args,
        log: work.join("postgres.log"),
        work_dir: work.to_path_buf(),
        // The owner is gone and the data dir is about to be removed.
        stop_signal: "QUIT",
        grace: Duration::from_secs(5),
    }
}

/// The bin dir of major version `major`: the system's build, else one
/// fetched into the cache.
fn bindir_of_version(major: u32) -> Result<PathBuf> {
    let system = PathBuf::from(format!("/usr/lib/postgresql/{major}/bin"));
    if system.join("postgres").is_file() && system.join("initdb").is_file() {
        return Ok(system);
    }
    crate::cache::postgres_bindir(major)
}

/// `$PGCDC_PG_BINDIR`; else with `$PGCDC_TEST_PG_VERSION` (a major version)
/// the system's build of that version or one fetched into the cache
/// ([`crate::cache::postgres_bindir`]); else the newest
/// `/usr/lib/postgresql/*/bin`, else `pg_config --bindir` (Debian's
/// `/usr/local/bin` wrappers are avoided).
fn bindir() -> Result<PathBuf> {
    let has_server = |dir: &Path| dir.join("postgres").is_file() && dir.join("initdb").is_file();
    if let Some(dir) = std::env::var_os("PGCDC_PG_BINDIR").map(PathBuf::from) {
        return has_server(&dir)
            .then_some(dir.clone())
            .ok_or(Error::MissingTool {
                program: format!("initdb and postgres in PGCDC_PG_BINDIR={}", dir.display()),
                hint: PG_HINT.into(),
            });
    }
    if let Some(major) = requested_version()? {
        return bindir_of_version(major);
    }
    let mut versions: Vec<(u32, PathBuf)> = fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let version = e.file_name().to_str()?.parse().ok()?;
            Some((version, e.path().join("bin")))
        })
        .filter(|(_, dir)| has_server(dir))
        .collect();
    versions.sort();
    if let Some((_, dir)) = versions.pop() {
        return Ok(dir);
    }
    let out = run(Command::new("pg_config").arg("--bindir"), PG_HINT)?;
    let dir = PathBuf::from(out.trim());
    has_server(&dir).then_some(dir).ok_or(Error::MissingTool {
        program: "initdb and postgres".into(),
        hint: PG_HINT.into(),
    })
}

/// The major version `$PGCDC_TEST_PG_VERSION` asks for, if set.
pub fn requested_version() -> Result<Option<u32>> {
    let Some(value) = std::env::var_os("PGCDC_TEST_PG_VERSION").filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    let text = value.to_string_lossy();
    text.trim()
        .parse()
        .map(Some)
        .map_err(|_| Error::MissingTool {
            program: format!("PostgreSQL version {text:?}"),
            hint: "PGCDC_TEST_PG_VERSION is a major version, e.g. 17".into(),
        })
}

/// `Some((uid, gid))` of the `postgres` user when we are root, else `None`.
pub(crate) fn run_as() -> Result<Option<(u32, u32)>> {
    if !crate::process::is_root()? {
        return Ok(None);
    }
    let passwd = fs::read_to_string("/etc/passwd").map_err(Error::io("read /etc/passwd"))?;
    passwd
        .lines()
        .map(|l| l.split(':').collect::<Vec<_>>())
        .find(|f| f.len() > 3 && f[0] == USER)
        .and_then(|f| Some((f[2].parse().ok()?, f[3].parse().ok()?)))
        .map(Some)
        .ok_or(Error::MissingTool {
            program: "the `postgres` OS user (PostgreSQL refuses to run as root)".into(),
            hint: "install `postgresql-15`, which creates it, or run the tests as a non-root user"
                .into(),
        })
}
