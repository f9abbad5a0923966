//! `pgcdc-services`: starts PostgreSQL and Kafka (and, with `--with-registry`,
//! the schema registry) for a quickstart or a benchmark, prints their
//! addresses as `NAME=value` lines followed by `READY`, then runs until its
//! stdin closes (unless `--no-stdin`), or it gets Ctrl-C or `SIGTERM`, and
//! stops everything. If it is killed outright the watchdogs stop the services.
//!
//! ```text
//! $ pgcdc-services --with-registry
//! PG_URL=postgres://postgres:postgres@127.0.0.1:40123/postgres
//! KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:40125
//! SCHEMA_REGISTRY_URL=http://127.0.0.1:40127/apis/ccompat/v7
//! READY
//! ```

use std::io::{Read, Write};
use std::process::ExitCode;
use std::thread;

use tokio::signal::unix::{signal, Signal, SignalKind};

use pgcdc_testcontainers::{Error, Kafka, Postgres, SchemaRegistry, StopMode};

const USAGE: &str = "usage: pgcdc-services [--with-registry] [--no-stdin]

Starts PostgreSQL (wal_level=logical) and Kafka on free 127.0.0.1 ports, plus
Apicurio Registry with --with-registry, prints NAME=value lines and READY, and
runs until stdin closes (not with --no-stdin), Ctrl-C or SIGTERM.";

fn main() -> ExitCode {
    let (mut with_registry, mut watch_stdin) = (false, true);
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--with-registry" => with_registry = true,
            "--no-stdin" => watch_stdin = false,
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            other => {
                eprintln!("pgcdc-services: unknown argument {other:?}\n{USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    match run(with_registry, watch_stdin) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pgcdc-services: {}", e.report());
            ExitCode::FAILURE
        }
    }
}

fn run(with_registry: bool, watch_stdin: bool) -> Result<(), Error> {
    let shutdown = Shutdown::listen(watch_stdin)?;
    // Start all at once: the JVMs take seconds each.
    let pg = thread::spawn(Postgres::launch);
    let kafka = thread::spawn(Kafka::launch);
    let registry = with_registry.then(|| thread::spawn(SchemaRegistry::launch));
    let (pg, kafka) = (join(pg), join(kafka));
    let registry = registry.map(join).transpose();
    let (pg, kafka, registry) = (pg?, kafka?, registry?);

    let mut lines = vec![
        format!("PG_URL={}", pg.url("postgres")),
        format!("PG_HOST={}", pg.host()),
        format!("PG_PORT={}", pg.port()),
        format!("PG_USER={}", pg.user()),
        format!("PG_PASSWORD={}", pg.password()),
        format!("KAFKA_BOOTSTRAP_SERVERS={}", kafka.bootstrap_servers()),
    ];
    if let Some(registry) = &registry {
        lines.push(format!("SCHEMA_REGISTRY_URL={}", registry.url()));
    }
    let pids = [("PG", pg.pid()), ("KAFKA", kafka.pid())]
        .into_iter()
        .chain(registry.iter().map(|r| ("SCHEMA_REGISTRY", r.pid())));
    lines.extend(pids.filter_map(|(name, pid)| Some(format!("{name}_PID={}", pid?))));
    lines.push("READY".into());
    let mut out = std::io::stdout().lock();
    // A closed stdout is no reason to stop the services.
    let _ = writeln!(out, "{}", lines.join("\n")).and_then(|()| out.flush());
    drop(out);

    shutdown.wait();
    eprintln!("pgcdc-services: stopping");
    if let Some(registry) = &registry {
        registry.stop()?;
    }
    kafka.stop()?;
    pg.stop(StopMode::Fast)
}

fn join<T>(handle: thread::JoinHandle<T>) -> T {
    handle
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// Ctrl-C, `SIGTERM` and (unless `--no-stdin`) end of stdin, listened for
/// from the start so that a signal during startup is not lost.
struct Shutdown {
    runtime: tokio::runtime::Runtime,
    term: Signal,
    int: Signal,
    eof: tokio::sync::oneshot::Receiver<()>,
    // Keeps `eof` pending under --no-stdin.
    _sender: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Shutdown {
    fn listen(watch_stdin: bool) -> Result<Self, Error> {
        let io = |action: &str| {
            let action = action.to_owned();
            move |source| Error::Io { action, source }
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(io("build a tokio runtime"))?;
        let (term, int) = {
            let _context = runtime.enter();
            let term = signal(SignalKind::terminate()).map_err(io("listen for SIGTERM"))?;
            (
                term,
                signal(SignalKind::interrupt()).map_err(io("listen for SIGINT"))?,
            )
        };
        let (tx, eof) = tokio::sync::oneshot::channel();
        let _sender = match watch_stdin {
            true => {
                thread::spawn(move || {
                    let mut sink = [0u8; 1024];
                    let mut stdin = std::io::stdin().lock();
                    while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
                    let _ = tx.send(());
                });
                None
            }
            false => Some(tx),
        };
        Ok(Self {
            runtime,
            term,
            int,
            eof,
            _sender,
        })
    }

    /// Returns on the first of the events.
    fn wait(mut self) {
        self.runtime.block_on(async {
            tokio::select! {
                _ = self.eof => {}
                _ = self.term.recv() => {}
                _ = self.int.recv() => {}
            }
        });
    }
}
