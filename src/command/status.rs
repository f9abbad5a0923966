//! `pgcdc-kafka status`: the replication slot as PostgreSQL sees it, and,
//! with `--metrics-url`, the progress of the connector serving that
//! endpoint.
//!
//! The slot is the one thing that must be watched whatever the connector
//! does: while it exists the server keeps every WAL segment from its
//! `restart_lsn` on, so a connector that is stopped or behind makes the
//! primary's disk fill up ("retained WAL"). `wal_status` says whether that
//! WAL is still all there (`reserved`), is past `max_wal_size` (`extended`),
//! is about to be removed (`unreserved`) or is gone (`lost`: the slot is
//! invalidated and needs a new snapshot). See `docs/OPERATIONS.md`.
//!
//! Exit code 0 when the slot exists (and the metrics endpoint, when given,
//! answered), 1 otherwise.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::Serialize;

use crate::config::pipelines::DEFAULT_PIPELINE;
use crate::config::PgUrl;
use crate::lsn::Lsn;
use crate::metrics::labelled::PIPELINE_LABEL;
use crate::metrics::{names, Phase};
use crate::naming;
use crate::or_unknown;
use crate::source::{catalog, setup};

/// `pgcdc-kafka status`.
#[derive(Debug, Clone, clap::Args)]
pub struct StatusArgs {
    /// `run`'s TOML configuration file: the settings `status` shares with
    /// `run` (pg_url, pg_password, slot, signal_data_collection) are read
    /// from it; its other keys are skipped. Flags and environment override it.
    #[arg(long = "config", env = "PGCDC_CONFIG", value_name = "FILE")]
    pub config: Option<std::path::PathBuf>,

    /// PostgreSQL connection URL (libpq style), e.g. postgres://user:pw@host:5432/db.
    #[arg(long, env = "PGCDC_PG_URL")]
    pub pg_url: PgUrl,

    #[command(flatten)]
    pub pg_password: crate::config::security::PgPassword,

    /// The connector's replication slot.
    #[arg(long = "slot", env = "PGCDC_SLOT", default_value = "pgcdc")]
    pub slot_name: String,

    /// Base URL of a running connector's --metrics-addr, e.g. http://127.0.0.1:9187.
    #[arg(long, env = "PGCDC_METRICS_URL")]
    pub metrics_url: Option<String>,

    /// The connector's --signal-data-collection: also show the progress of
    /// its incremental snapshot, as recorded in that table.
    #[arg(long, env = "PGCDC_SIGNAL_DATA_COLLECTION")]
    pub signal_data_collection: Option<String>,

    /// How long connecting and each request may take.
    #[arg(long = "status-timeout", env = "PGCDC_STATUS_TIMEOUT", default_value = "10s", value_parser = humantime::parse_duration)]
    pub timeout: Duration,

    /// The pipeline whose progress to read from a metrics endpoint that
    /// serves several (`pipeline` label): set per pipeline when `--config`
    /// declares pipelines; [`DEFAULT_PIPELINE`] otherwise.
    #[arg(skip)]
    pub pipeline: Option<crate::config::pipelines::PipelineName>,
}

/// The slot as `pg_replication_slots` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct SlotState {
    pub slot: String,
    pub plugin: Option<String>,
    pub database: Option<String>,
    pub active: bool,
    pub active_pid: Option<i64>,
    #[serde(serialize_with = "lsn_text")]
    pub restart_lsn: Option<Lsn>,
    #[serde(serialize_with = "lsn_text")]
    pub confirmed_flush_lsn: Option<Lsn>,
    /// The server's current WAL position (replay position on a standby).
    #[serde(serialize_with = "lsn_text")]
    pub server_lsn: Option<Lsn>,
    /// WAL the server keeps for this slot: server position minus `restart_lsn`.
    pub retained_wal_bytes: Option<i64>,
    /// Server position minus `confirmed_flush_lsn`.
    pub unconfirmed_wal_bytes: Option<i64>,
    /// `reserved`, `extended`, `unreserved` or `lost` (PostgreSQL 13+).
    pub wal_status: Option<String>,
    /// Bytes that may still be written before the slot is at risk (13+, with
    /// `max_slot_wal_keep_size` set).
    pub safe_wal_size: Option<i64>,
}

fn lsn_text<S: serde::Serializer>(lsn: &Option<Lsn>, s: S) -> Result<S::Ok, S::Error> {
    match lsn {
        Some(lsn) => s.collect_str(lsn),
        None => s.serialize_none(),
    }
}

/// A running connector's progress, read from its metrics endpoint.
#[derive(Debug, Clone, Serialize)]
pub struct ConnectorProgress {
    pub url: String,
    pub phase: Option<String>,
    pub ready: bool,
    /// The body of `/readyz`.
    pub readiness: String,
    pub received_lsn: Option<String>,
    pub acknowledged_lsn: Option<String>,
    pub confirmed_lsn: Option<String>,
    pub lag_bytes: Option<f64>,
    pub lag_seconds: Option<f64>,
    pub transactions: Option<f64>,
    pub events: Option<f64>,
    pub in_flight_records: Option<f64>,
    pub in_flight_bytes: Option<f64>,
    pub delivery_errors: Option<f64>,
    pub restarts: Option<f64>,
    /// Seconds since the last keepalive from the server.
    pub keepalive_age_seconds: Option<f64>,
    pub snapshot_running: bool,
    pub snapshot_tables_done: Option<f64>,
    pub snapshot_tables: Option<f64>,
    /// Snapshot rows emitted so far (events with op `r`).
    pub snapshot_rows: Option<f64>,
}

/// Everything `status` found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct StatusReport {
    pub slot: Option<SlotState>,
    /// The working slot of a snapshot in progress (or one interrupted by a crash).
    pub snapshot_slot: Option<SlotState>,
    pub connector: Option<ConnectorProgress>,
    /// With --signal-data-collection: the recorded incremental snapshot
    /// progress (`None`: none is running).
    pub incremental_snapshot: Option<crate::source::signal::Progress>,
    /// What could not be read, or is wrong, each with what to do.
    pub problems: Vec<String>,
}

impl StatusReport {
    /// Whether the slot was found and nothing failed to answer.
    pub fn ok(&self) -> bool {
        self.slot.is_some() && self.problems.is_empty()
    }
}

/// Reads the slot and, when asked, the connector's metrics.
pub async fn run(args: &StatusArgs) -> StatusReport {
    let mut report = StatusReport::default();
    match tokio::time::timeout(args.timeout, read_slots(args)).await {
        Ok(Ok((slot, snapshot_slot))) => {
            if slot.is_none() {
                report.problems.push(format!(
                    "replication slot {:?} does not exist in {}; check --slot and --pg-url \
                     (`pgcdc-kafka run` creates it)",
                    args.slot_name, args.pg_url
                ));
            }
            report.slot = slot;
            report.snapshot_slot = snapshot_slot;
        }
        Ok(Err(error)) => report.problems.push(crate::error_chain(&error)),
        Err(_) => report.problems.push(format!(
            "PostgreSQL at {} did not answer within {}; check --pg-url",
            args.pg_url,
            humantime::format_duration(args.timeout)
        )),
    }
    if let Some(table) = args
        .signal_data_collection
        .as_deref()
        .and_then(crate::source::signal::SignalTable::parse)
    {
        let read = async {
            let client = setup::connect(&args.pg_url).await?;
            let id = crate::source::signal::progress_row_id(&args.slot_name);
            crate::source::signal::read_progress(&client, &table, &id).await
        };
        match tokio::time::timeout(args.timeout, read).await {
            Ok(Ok(progress)) => report.incremental_snapshot = progress,
            Ok(Err(error)) => report.problems.push(crate::error_chain(&error)),
            Err(_) => report.problems.push(format!(
                "reading signal table {table} took longer than {}",
                humantime::format_duration(args.timeout)
            )),
        }
    }
    if let Some(url) = &args.metrics_url {
        let pipeline = args
            .pipeline
            .as_ref()
            .map_or(DEFAULT_PIPELINE, |p| p.as_str());
        match read_connector(url, pipeline, args.timeout).await {
            Ok(progress) => report.connector = Some(progress),
            Err(problem) => report.problems.push(problem),
        }
    }
    report
}

async fn read_slots(
    args: &StatusArgs,
) -> Result<(Option<SlotState>, Option<SlotState>), setup::SetupError> {
    let client = setup::connect(&match args.pg_password.get() {
        Some(password) => args.pg_url.with_password(password),
        None => args.pg_url.clone(),
    })
    .await?;
    let read = |slot: String| {
        let client = &client;
        async move {
            let found =
                catalog::slot(client, &slot)
                    .await
                    .map_err(|error| setup::SetupError::Query {
                        action: format!("reading replication slot {slot:?}"),
                        error,
                    })?;
            Ok::<_, setup::SetupError>(found.map(SlotState::from))
        }
    };
    let slot = read(args.slot_name.clone()).await?;
    let snapshot = read(naming::snapshot_slot(&args.slot_name)).await?;
    Ok((slot, snapshot))
}

impl From<catalog::Slot> for SlotState {
    fn from(slot: catalog::Slot) -> Self {
        SlotState {
            slot: slot.name,
            plugin: slot.plugin,
            database: slot.database,
            active: slot.active,
            active_pid: slot.active_pid,
            restart_lsn: slot.restart_lsn,
            confirmed_flush_lsn: slot.confirmed_flush_lsn,
            server_lsn: slot.server_lsn,
            retained_wal_bytes: slot.retained_wal_bytes,
            unconfirmed_wal_bytes: slot.unconfirmed_wal_bytes,
            wal_status: slot.wal_status,
            safe_wal_size: slot.safe_wal_size,
        }
    }
}

/// Prometheus text samples by series (`name{labels}`), without comments:
/// those of `pipeline`, without its `pipeline` label, and the unlabelled
/// ones (a connector serving one pipeline unlabelled, the process's own).
fn parse_samples(text: &str, pipeline: &str) -> BTreeMap<String, f64> {
    let label = format!("{PIPELINE_LABEL}=\"{pipeline}\"");
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let series = match series.split_once('{') {
                Some((name, labels)) if labels.starts_with(&label) => {
                    match &labels[label.len()..] {
                        "}" => name.to_owned(),
                        rest => format!("{name}{{{}", rest.strip_prefix(',')?),
                    }
                }
                Some(_) if series.contains(&format!("{PIPELINE_LABEL}=\"")) => return None,
                _ => series.to_owned(),
            };
            Some((series, value.parse().ok()?))
        })
        .collect()
}

async fn read_connector(
    url: &str,
    pipeline: &str,
    timeout: Duration,
) -> Result<ConnectorProgress, String> {
    let base = url.trim_end_matches('/');
    let client = reqwest::Client::builder()
        .timeout(timeout)
        .build()
        .map_err(|e| format!("cannot build an HTTP client: {}", crate::error_chain(&e)))?;
    let unreachable = |e: reqwest::Error| {
        format!(
            "the connector's metrics endpoint {base} did not answer: {}; check --metrics-url \
             and that the connector runs with --metrics-addr",
            crate::error_chain(&e)
        )
    };
    let metrics = client
        .get(format!("{base}/metrics"))
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
        .map_err(unreachable)?
        .text()
        .await
        .map_err(unreachable)?;
    let readyz = client
        .get(format!("{base}/readyz"))
        .send()
        .await
        .map_err(unreachable)?;
    let served_ready = readyz.status().is_success();
    let body = readyz.text().await.map_err(unreachable)?;
    // This pipeline's line where the endpoint lists each, else the body.
    let own = format!("{pipeline}: ");
    let readiness = body
        .lines()
        .find_map(|l| l.strip_prefix(&own))
        .unwrap_or(body.trim())
        .to_owned();

    let samples = parse_samples(&metrics, pipeline);
    let get = |name: &str| samples.get(name).copied();
    // This pipeline's readiness, where the endpoint reports each.
    let ready = get(names::READY).map_or(served_ready, |r| r == 1.0);
    let sum = |name: &str| {
        let prefix = format!("{name}{{");
        let values: Vec<f64> = samples
            .iter()
            .filter(|(k, _)| k.starts_with(&prefix))
            .map(|(_, v)| *v)
            .collect();
        (!values.is_empty()).then(|| values.iter().sum())
    };
    let sum_op = |name: &str, op: &str| {
        let prefix = format!("{name}{{");
        let suffix = format!(",op=\"{op}\"}}");
        let values: Vec<f64> = samples
            .iter()
            .filter(|(k, _)| k.starts_with(&prefix) && k.ends_with(&suffix))
            .map(|(_, v)| *v)
            .collect();
        (!values.is_empty()).then(|| values.iter().sum())
    };
    let lsn = |name: &str| get(name).map(|v| Lsn::new(v as u64).to_string());
    let phase = Phase::LABELS
        .iter()
        .find(|p| get(&format!("{}{{phase=\"{p}\"}}", names::PHASE)) == Some(1.0))
        .map(|p| (*p).to_owned());
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    Ok(ConnectorProgress {
        url: base.to_owned(),
        phase,
        ready,
        readiness,
        received_lsn: lsn(names::RECEIVED_LSN),
        acknowledged_lsn: lsn(names::ACKNOWLEDGED_LSN),
        confirmed_lsn: lsn(names::CONFIRMED_LSN),
        lag_bytes: get(names::LAG_BYTES),
        lag_seconds: get(names::LAG_SECONDS),
        transactions: get(names::TRANSACTIONS),
        events: sum(names::EVENTS),
        in_flight_records: get(names::IN_FLIGHT_RECORDS),
        in_flight_bytes: get(names::IN_FLIGHT_BYTES),
        delivery_errors: get(names::DELIVERY_ERRORS),
        restarts: get(names::RESTARTS),
        keepalive_age_seconds: get(names::LAST_KEEPALIVE)
            .filter(|t| *t > 0.0)
            .map(|t| (now - t).max(0.0)),
        snapshot_running: get(names::SNAPSHOT_RUNNING) == Some(1.0),
        snapshot_tables_done: get(names::SNAPSHOT_TABLES_DONE),
        snapshot_tables: get(names::SNAPSHOT_TABLES),
        snapshot_rows: sum_op(names::EVENTS, "r"),
    })
}

/// `1.5 GiB`-style sizes for people.
fn bytes(n: i64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value.abs() >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

fn write_slot(f: &mut fmt::Formatter<'_>, s: &SlotState) -> fmt::Result {
    writeln!(f, "slot {:?}", s.slot)?;
    match s.active_pid {
        Some(pid) if s.active => writeln!(f, "  active:               yes (walsender pid {pid})")?,
        _ => writeln!(
            f,
            "  active:               no (no connector is streaming from it)"
        )?,
    }
    writeln!(
        f,
        "  confirmed_flush_lsn:  {}",
        or_unknown(&s.confirmed_flush_lsn)
    )?;
    writeln!(f, "  restart_lsn:          {}", or_unknown(&s.restart_lsn))?;
    writeln!(f, "  server WAL position:  {}", or_unknown(&s.server_lsn))?;
    writeln!(
        f,
        "  retained WAL:         {}",
        s.retained_wal_bytes.map_or_else(|| "unknown".into(), bytes)
    )?;
    writeln!(
        f,
        "  not yet confirmed:    {}",
        s.unconfirmed_wal_bytes
            .map_or_else(|| "unknown".into(), bytes)
    )?;
    let wal_status = s.wal_status.as_deref().unwrap_or("unknown");
    let meaning = match wal_status {
        "reserved" => " (all WAL the slot needs is kept, within max_wal_size)",
        "extended" => " (beyond max_wal_size, kept because of the slot)",
        "unreserved" => " (at risk: the WAL will be removed at the next checkpoint)",
        "lost" => " (invalidated: restart with --snapshot-mode when_needed)",
        _ => "",
    };
    writeln!(f, "  wal_status:           {wal_status}{meaning}")?;
    if let Some(safe) = s.safe_wal_size {
        writeln!(f, "  safe_wal_size:        {}", bytes(safe))?;
    }
    Ok(())
}

impl fmt::Display for StatusReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(slot) = &self.slot {
            write_slot(f, slot)?;
        }
        if let Some(snapshot) = &self.snapshot_slot {
            writeln!(
                f,
                "snapshot: working slot {:?} exists: a snapshot is running, or was interrupted \
                 and starts over on the next run",
                snapshot.slot
            )?;
        }
        if let Some(p) = &self.incremental_snapshot {
            let after = p.last_key.as_ref().map_or_else(
                || "from its first key".to_owned(),
                |key| format!("after key {key:?}"),
            );
            write!(
                f,
                "incremental snapshot: {} table(s) left ({}), the current one {after}",
                p.tables.len(),
                p.tables.join(", ")
            )?;
            // Tables read alongside the current one, or resumed from an
            // interrupted initial snapshot, start after their own keys.
            for (table, key) in &p.resume_after {
                write!(f, "; {table} after key {key:?}")?;
            }
            writeln!(f)?;
        }
        if let Some(c) = &self.connector {
            let number = |v: &Option<f64>| v.map_or_else(|| "unknown".into(), |v| format!("{v}"));
            writeln!(f, "connector {}", c.url)?;
            writeln!(
                f,
                "  phase:                {}",
                c.phase.as_deref().unwrap_or("unknown")
            )?;
            writeln!(f, "  readiness:            {}", c.readiness)?;
            writeln!(
                f,
                "  received / acknowledged / confirmed LSN: {} / {} / {}",
                or_unknown(&c.received_lsn),
                or_unknown(&c.acknowledged_lsn),
                or_unknown(&c.confirmed_lsn)
            )?;
            writeln!(
                f,
                "  lag:                  {} bytes, {} s",
                number(&c.lag_bytes),
                number(&c.lag_seconds)
            )?;
            writeln!(
                f,
                "  in flight:            {} records, {} bytes",
                number(&c.in_flight_records),
                number(&c.in_flight_bytes)
            )?;
            writeln!(
                f,
                "  delivered:            {} transactions, {} events",
                number(&c.transactions),
                number(&c.events)
            )?;
            writeln!(
                f,
                "  delivery errors:      {}; restarts: {}",
                number(&c.delivery_errors),
                number(&c.restarts)
            )?;
            if let Some(age) = c.keepalive_age_seconds {
                writeln!(f, "  last keepalive:       {age:.0} s ago")?;
            }
            if c.snapshot_running {
                writeln!(
                    f,
                    "  snapshot:             running, {} of {} tables, {} rows",
                    number(&c.snapshot_tables_done),
                    number(&c.snapshot_tables),
                    number(&c.snapshot_rows)
                )?;
            }
        }
        for problem in &self.problems {
            writeln!(f, "problem: {problem}")?;
        }
        Ok(())
    }
}

/// Runs `pgcdc-kafka status`: prints the report; 0 when it found nothing wrong, 1 otherwise.
pub async fn execute(
    args: &StatusArgs,
    format: crate::config::LogFormat,
) -> std::process::ExitCode {
    let report = run(args).await;
    super::print_report(format, &report);
    if report.ok() {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_prometheus_samples() {
        let text = "# HELP x y\n# TYPE x gauge\nx 3\ny{a=\"b c\"} 4.5\nbad\n";
        let samples = parse_samples(text, "default");
        assert_eq!(samples.get("x"), Some(&3.0));
        assert_eq!(samples.get("y{a=\"b c\"}"), Some(&4.5));
        assert_eq!(samples.len(), 2);
        let text = "x{pipeline=\"a\"} 1\nx{pipeline=\"b\"} 2\n\
                    y{pipeline=\"b\",op=\"c\"} 3\nprocess_z 4\n";
        let b = parse_samples(text, "b");
        assert_eq!(b.get("x"), Some(&2.0));
        assert_eq!(b.get("y{op=\"c\"}"), Some(&3.0));
        assert_eq!(b.get("process_z"), Some(&4.0));
        assert_eq!(b.len(), 3);
    }

    #[test]
    fn sizes_for_people() {
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(3 * 1024 * 1024 / 2), "1.5 MiB");
    }
}
