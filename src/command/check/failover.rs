//! The failover half of `check`: with `--slot-failover`, what each server
//! of the `--pg-url` host list needs so the slot survives a promotion
//! ([failover slots](https://www.postgresql.org/docs/current/logicaldecoding-explanation.html#LOGICALDECODING-REPLICATION-SLOTS-SYNCHRONIZATION),
//! PostgreSQL 17+). Every host is visited on its own replication session
//! (which also runs SQL), so standbys are checked too, not only the primary
//! the run would stream from:
//!
//! - a standby needs `sync_replication_slots = on`, `hot_standby_feedback
//!   = on`, a `primary_slot_name`, and a `dbname` in `primary_conninfo`;
//!   once it holds a synchronized copy of the slot, it says so;
//! - the primary should list each standby's physical slot in
//!   `synchronized_standby_slots`, so it never sends the connector a change
//!   those standbys lack (else a promotion can lose changes Kafka has, and
//!   the connector stops there rather than guess).

use std::time::Duration;

use super::Report;
use crate::config::RunConfig;
use crate::source::replication::{Endpoint, ReplicationConfig, Session, TargetSession};
use crate::source::version::{Feature, ServerVersion};

const CHECK: &str = "failover";

/// What one server of the host list says.
#[derive(Debug, Default)]
struct HostFacts {
    in_recovery: bool,
    version_num: u32,
    setting: std::collections::BTreeMap<&'static str, Option<String>>,
    /// A standby's synchronized copy of the slot, or the primary's slot's
    /// `failover` flag.
    slot_flag: Option<bool>,
}

const SETTINGS: [&str; 5] = [
    "sync_replication_slots",
    "hot_standby_feedback",
    "primary_slot_name",
    "primary_conninfo",
    "synchronized_standby_slots",
];

/// With `--slot-failover`, reports what each host still needs; without it,
/// warns when a multi-host URL suggests failover is expected.
pub(super) async fn check_failover(config: &RunConfig, timeout: Duration, report: &mut Report) {
    let base = config.pg().replication_config();
    if !config.slot_failover {
        if base.endpoints.len() > 1 {
            report.warn(
                CHECK,
                format!(
                    "--pg-url names {} hosts but the slot is not a failover slot: a promoted standby has no copy of it, and the connector stops there",
                    base.endpoints.len()
                ),
                "on PostgreSQL 17+ pass --slot-failover and set up slot synchronization on the standbys",
            );
        }
        return;
    }
    let mut standby_slots: Vec<String> = Vec::new();
    let mut primary_list: Option<String> = None;
    for endpoint in &base.endpoints {
        let facts = match tokio::time::timeout(timeout, host_facts(&base, endpoint, config)).await {
            Ok(Ok(facts)) => facts,
            Ok(Err(error)) => {
                report.warn(
                    CHECK,
                    format!(
                        "{endpoint}: cannot be checked: {}",
                        crate::error_chain(&error)
                    ),
                    "check that the host runs and admits replication connections for this user",
                );
                continue;
            }
            Err(_) => {
                report.warn(
                    CHECK,
                    format!(
                        "{endpoint}: no answer within {}",
                        humantime::format_duration(timeout)
                    ),
                    "check the network path to the host",
                );
                continue;
            }
        };
        let version = ServerVersion(facts.version_num);
        if !version.has(Feature::FailoverSlots) {
            report.fail(
                CHECK,
                format!("{endpoint}: PostgreSQL {version} has no failover slots (17+)"),
                "upgrade to PostgreSQL 17 or later, or run without --slot-failover",
            );
            continue;
        }
        let value = |name: &str| facts.setting.get(name).cloned().flatten();
        if !facts.in_recovery {
            primary_list = Some(value("synchronized_standby_slots").unwrap_or_default());
            match facts.slot_flag {
                Some(true) => report.pass(CHECK, format!("{endpoint} (primary): slot {:?} is a failover slot", config.slot_name)),
                Some(false) => report.pass(CHECK, format!("{endpoint} (primary): slot {:?} becomes a failover slot when run starts streaming", config.slot_name)),
                None => report.pass(CHECK, format!("{endpoint} (primary): run creates slot {:?} as a failover slot", config.slot_name)),
            }
            continue;
        }
        let mut missing = Vec::new();
        for (name, wanted) in [
            ("sync_replication_slots", "on"),
            ("hot_standby_feedback", "on"),
        ] {
            if value(name).as_deref() != Some(wanted) {
                missing.push(format!("{name} = {wanted}"));
            }
        }
        match value("primary_slot_name").filter(|s| !s.is_empty()) {
            Some(slot) => standby_slots.push(slot),
            None => missing.push("primary_slot_name (a physical slot on the primary)".to_owned()),
        }
        match value("primary_conninfo") {
            Some(conninfo) if conninfo.contains("dbname") => {}
            Some(_) => missing.push("a dbname in primary_conninfo".to_owned()),
            None => missing.push(
                "primary_conninfo readable (superuser or pg_read_all_settings) to be checked"
                    .to_owned(),
            ),
        }
        if missing.is_empty() {
            let copy = match facts.slot_flag {
                Some(true) => format!("holds a synchronized copy of slot {:?}", config.slot_name),
                _ => format!(
                    "has no synchronized copy of slot {:?} yet",
                    config.slot_name
                ),
            };
            report.pass(
                CHECK,
                format!("{endpoint} (standby): synchronizes failover slots; {copy}"),
            );
        } else {
            report.warn(
                CHECK,
                format!("{endpoint} (standby): missing {}", missing.join(", ")),
                "set them on the standby (ALTER SYSTEM SET ...; SELECT pg_reload_conf()), or the slot is not kept there",
            );
        }
    }
    if let Some(list) = primary_list {
        let listed: Vec<&str> = list
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        let unlisted: Vec<&String> = standby_slots
            .iter()
            .filter(|s| !listed.contains(&s.as_str()) && !listed.contains(&"*"))
            .collect();
        if listed.is_empty() || !unlisted.is_empty() {
            let names = match unlisted.is_empty() {
                true => "each standby's physical slot".to_owned(),
                false => unlisted
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(","),
            };
            report.warn(
                CHECK,
                format!("the primary's synchronized_standby_slots is {list:?}: it may send the connector changes a standby lacks, and after that standby's promotion the connector stops rather than go on past them"),
                format!("on the primary: ALTER SYSTEM SET synchronized_standby_slots = '{names}'; SELECT pg_reload_conf()"),
            );
        } else {
            report.pass(
                CHECK,
                format!("the primary waits for {list} before sending changes"),
            );
        }
    }
}

/// Visits one host on a replication session of its own (any kind of server).
async fn host_facts(
    base: &ReplicationConfig,
    endpoint: &Endpoint,
    config: &RunConfig,
) -> Result<HostFacts, crate::source::replication::ReplicationError> {
    let single = ReplicationConfig {
        endpoints: vec![endpoint.clone()],
        target: TargetSession::Any,
        ..base.clone()
    }
    .with_application_name(config.names().application_name());
    let mut session = Session::connect(&single).await?;
    let mut facts = HostFacts {
        version_num: session.server_version_num(),
        ..HostFacts::default()
    };
    let text = |rows: Vec<crate::source::replication::frame::Row>| {
        rows.first()
            .and_then(|r| r.first().cloned().flatten())
            .map(|b| String::from_utf8_lossy(&b).into_owned())
    };
    facts.in_recovery =
        text(session.simple_query("SELECT pg_is_in_recovery()").await?).as_deref() == Some("t");
    for name in SETTINGS {
        // A setting this version lacks, or one the role may not read, is unknown.
        let value = session
            .simple_query(&format!("SELECT current_setting('{name}', true)"))
            .await
            .ok()
            .and_then(text);
        facts.setting.insert(name, value);
    }
    let column = if facts.in_recovery {
        "synced"
    } else {
        "failover"
    };
    let slot = format!("'{}'", config.slot_name.replace('\'', "''"));
    facts.slot_flag = session
        .simple_query(&format!(
            "SELECT {column} FROM pg_replication_slots WHERE slot_name = {slot}"
        ))
        .await
        .ok()
        .and_then(text)
        .map(|v| v == "t");
    Ok(facts)
}
