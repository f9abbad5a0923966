//! The PostgreSQL half of `check`: server settings, the role, the slot,
//! the publication and the tables it would stream, all from
//! [`catalog`]'s facts, which `run` reads too.

use std::time::Duration;

use tokio_postgres::Client;

use super::{list, Report};
use crate::config::{PublicationAutocreateMode, RunConfig, SnapshotMode};
use crate::http::HealthPolicy;
use crate::source::{catalog, setup};

pub(super) use catalog::Table as TableInfo;

/// The server's settings and the connecting role, read once.
struct ServerFacts {
    server: catalog::Server,
    role: catalog::Role,
}

/// `--signal-data-collection`: the table incremental snapshots need.
async fn check_signal_table(client: &Client, config: &RunConfig, report: &mut Report) {
    let Some(table) = config
        .signal_data_collection
        .as_deref()
        .and_then(crate::source::signal::SignalTable::parse)
    else {
        return;
    };
    match crate::source::signal::problems(client, &table, &config.publication_name).await {
        Ok(problems) if problems.is_empty() => report.pass(
            "signal table",
            format!("{table} is published and writable; incremental snapshots can run"),
        ),
        Ok(problems) => {
            for (problem, fix) in problems {
                report.fail("signal table", problem, fix);
            }
        }
        Err(error) => report.fail(
            "signal table",
            crate::error_chain(&error),
            "connect as a role that may read the catalog",
        ),
    }
}

/// Checks the database side; returns the tables that would be streamed
/// (`None` when they cannot be known).
pub(super) async fn check_postgres(
    config: &RunConfig,
    health: &HealthPolicy,
    timeout: Duration,
    report: &mut Report,
) -> Option<Vec<TableInfo>> {
    let client = connect(config, timeout, report).await?;
    let facts = match server_facts(&client).await {
        Ok(facts) => facts,
        Err(error) => {
            report.fail(
                "postgres",
                format!(
                    "cannot read server settings: {}",
                    crate::error_chain(&error)
                ),
                "connect as a role that may read pg_settings and pg_roles",
            );
            return None;
        }
    };
    report.pass(
        "postgres",
        format!(
            "connected to {} (PostgreSQL {}) as {}",
            config.pg_url, facts.server.version, facts.role.name
        ),
    );

    super::version::check_version(&facts.server, config, report);
    check_wal_level(&facts, report);
    check_role(&facts, report);

    let slot = check_slot(&client, config, &facts, report).await;
    check_wal_senders(&facts, slot.snapshot_needed, report);
    check_retention(&facts, report);
    check_sender_timeout(&facts, health, report);
    let tables = check_publication(&client, config, &facts, report).await;
    if !config.signal_channels.read_only {
        // Read-only only reads it: see read_only.rs.
        check_signal_table(&client, config, report).await;
    }
    if let Some(tables) = &tables {
        check_tables(config, tables, report);
    }
    tables
}

/// Connects within `timeout`, or reports why not (the remaining
/// PostgreSQL checks are then skipped).
async fn connect(config: &RunConfig, timeout: Duration, report: &mut Report) -> Option<Client> {
    match tokio::time::timeout(timeout, setup::connect(&config.pg())).await {
        Ok(Ok(client)) => Some(client),
        Ok(Err(error)) => {
            report.fail(
                "postgres",
                crate::error_chain(&error),
                "check --pg-url, that the server runs, and that pg_hba.conf admits this host, \
                 user and database; the remaining PostgreSQL checks were skipped",
            );
            None
        }
        Err(_) => {
            report.fail(
                "postgres",
                format!(
                    "no answer from {} within {}",
                    config.pg_url,
                    humantime::format_duration(timeout)
                ),
                "check --pg-url and the network path to the server; the remaining PostgreSQL \
                 checks were skipped",
            );
            None
        }
    }
}

/// `wal_level` must be `logical`.
fn check_wal_level(facts: &ServerFacts, report: &mut Report) {
    if facts.server.wal_level == "logical" {
        report.pass("wal_level", "logical");
    } else {
        report.fail(
            "wal_level",
            format!(
                "is {}; logical decoding needs wal_level = logical",
                facts.server.wal_level
            ),
            "as a superuser run ALTER SYSTEM SET wal_level = logical, then restart PostgreSQL \
             (on a managed service set its logical replication parameter)",
        );
    }
}

/// The role must be allowed to use replication slots.
fn check_role(facts: &ServerFacts, report: &mut Report) {
    if facts.role.may_replicate() {
        let how = if facts.role.superuser {
            "is a superuser"
        } else if facts.role.replication {
            "has REPLICATION"
        } else {
            "is a member of rds_replication"
        };
        report.pass("role", format!("{} {how}", facts.role.name));
    } else {
        report.fail(
            "role",
            format!(
                "{} has neither REPLICATION nor SUPERUSER, so it may not use replication slots",
                facts.role.name
            ),
            format!(
                "as a superuser run ALTER ROLE {} REPLICATION (on Amazon RDS: GRANT rds_replication TO {})",
                setup::quote_ident(&facts.role.name),
                setup::quote_ident(&facts.role.name)
            ),
        );
    }
}

async fn server_facts(client: &Client) -> Result<ServerFacts, tokio_postgres::Error> {
    let (server, role) = catalog::server(client).await?;
    Ok(ServerFacts { server, role })
}

struct SlotOutcome {
    /// The run would take an initial snapshot (which needs a second slot
    /// and WAL sender while it runs).
    snapshot_needed: bool,
}

/// A slot that does not exist yet: `run` creates it (and a second one
/// while the initial snapshot runs) if enough slots are free.
fn report_missing_slot(
    report: &mut Report,
    slot: &str,
    facts: &ServerFacts,
    snapshot_wanted: bool,
) {
    let free = facts.server.max_replication_slots - facts.server.used_slots;
    let needed = if snapshot_wanted { 2 } else { 1 };
    if free >= needed {
        report.pass(
            "replication slot",
            format!(
                "{slot:?} does not exist and will be created ({free} of {} slots free{})",
                facts.server.max_replication_slots,
                if snapshot_wanted {
                    "; the initial snapshot uses a second one while it runs"
                } else {
                    ""
                }
            ),
        );
    } else {
        report.fail(
            "replication slot",
            format!(
                "{slot:?} does not exist and {free} of {} slots are free; the connector needs {needed}",
                facts.server.max_replication_slots
            ),
            "raise max_replication_slots (takes a restart), or drop unused slots with \
             SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE NOT active AND slot_name = '...'",
        );
    }
}

async fn check_slot(
    client: &Client,
    config: &RunConfig,
    facts: &ServerFacts,
    report: &mut Report,
) -> SlotOutcome {
    let slot = &config.slot_name;
    let snapshot_wanted = !matches!(
        config.snapshot_mode,
        SnapshotMode::Never | SnapshotMode::NoData
    );
    let row = match catalog::slot(client, slot).await {
        Ok(row) => row,
        Err(error) => {
            report.fail(
                "replication slot",
                format!(
                    "cannot read pg_replication_slots: {}",
                    crate::error_chain(&error)
                ),
                "connect as a role that may read pg_replication_slots",
            );
            return SlotOutcome {
                snapshot_needed: false,
            };
        }
    };
    let Some(found) = row else {
        report_missing_slot(report, slot, facts, snapshot_wanted);
        return SlotOutcome {
            snapshot_needed: snapshot_wanted,
        };
    };
    SlotOutcome {
        snapshot_needed: report_existing_slot(found, config, report),
    }
}

/// Reports on the slot `found` under `--slot`: whether it can be streamed
/// from. Returns whether the run would take a snapshot (an invalidated slot
/// under `--snapshot-mode when_needed`).
fn report_existing_slot(found: catalog::Slot, config: &RunConfig, report: &mut Report) -> bool {
    let slot = &config.slot_name;
    let other_slot = "pass another --slot, or drop this one if nothing uses it";
    if !found.is_logical() {
        report.fail(
            "replication slot",
            format!("{slot:?} is a physical slot"),
            other_slot,
        );
    } else if !found.is_pgoutput() {
        report.fail(
            "replication slot",
            format!(
                "{slot:?} uses plugin {:?}, not pgoutput",
                found.plugin.unwrap_or_default()
            ),
            other_slot,
        );
    } else if !found.in_current_database() {
        report.fail(
            "replication slot",
            format!(
                "{slot:?} belongs to database {:?}, not {:?}",
                found.database.unwrap_or_default(),
                found.current_database
            ),
            other_slot,
        );
    } else if found.is_lost() {
        if config.snapshot_mode == SnapshotMode::WhenNeeded {
            report.warn(
                "replication slot",
                format!("{slot:?} was invalidated (wal_status = lost); changes since its last confirmed position are gone"),
                "--snapshot-mode when_needed will drop it and take a new snapshot; raise \
                 max_slot_wal_keep_size so it does not happen again",
            );
            return true;
        }
        report.fail(
            "replication slot",
            format!("{slot:?} was invalidated (wal_status = lost); changes since its last confirmed position are gone"),
            "run with --snapshot-mode when_needed to drop it and take a new snapshot, and raise \
             max_slot_wal_keep_size",
        );
    } else if found.active {
        let pid = found
            .active_pid
            .map(|pid| pid.to_string())
            .unwrap_or_default();
        report.warn(
            "replication slot",
            format!("{slot:?} is in use by process {pid}: a connector (this one?) streams from it, and a second one would be refused"),
            "run only one connector per slot; stop the other one, or pass another --slot",
        );
    } else {
        report.pass(
            "replication slot",
            format!(
                "{slot:?} exists (pgoutput, confirmed up to {}); streaming resumes there",
                found
                    .confirmed_flush_lsn
                    .map_or_else(|| "?".to_owned(), |lsn| lsn.to_string())
            ),
        );
    }
    false
}

fn check_wal_senders(facts: &ServerFacts, snapshot_needed: bool, report: &mut Report) {
    let free = facts.server.max_wal_senders - facts.server.used_wal_senders;
    let needed = if snapshot_needed { 2 } else { 1 };
    if free >= needed {
        report.pass(
            "wal senders",
            format!("{free} of {} free", facts.server.max_wal_senders),
        );
    } else {
        report.fail(
            "wal senders",
            format!(
                "{free} of {} max_wal_senders are free; the connector needs {needed}",
                facts.server.max_wal_senders
            ),
            "raise max_wal_senders (takes a restart), or stop unused replication connections",
        );
    }
}

fn check_retention(facts: &ServerFacts, report: &mut Report) {
    match facts.server.max_slot_wal_keep_size.as_deref() {
        None => report.warn(
            "max_slot_wal_keep_size",
            "this PostgreSQL (before 13) cannot cap what a slot retains: a stopped or \
             lagging connector keeps WAL until the disk is full",
            "alert on pgcdc_lag_bytes and on the slot's retained WAL (pgcdc-kafka status)",
        ),
        Some("-1") => report.warn(
            "max_slot_wal_keep_size",
            "-1 (unbounded): a stopped or lagging connector keeps WAL until the disk is full",
            "as a superuser run ALTER SYSTEM SET max_slot_wal_keep_size = '<size>' (well below \
             the free space of pg_wal) and SELECT pg_reload_conf(); then a slot behind by more \
             is invalidated instead (recoverable with --snapshot-mode when_needed)",
        ),
        Some(size) => report.pass(
            "max_slot_wal_keep_size",
            format!(
                "{size}: a slot more than this behind is invalidated (wal_status = lost) and \
                 then needs a new snapshot"
            ),
        ),
    }
}

/// Readiness counts a server that sent nothing for --ready-max-silence as a
/// stalled connection. An idle server sends keepalives about once per
/// wal_sender_timeout, and none when the timeout is disabled.
fn check_sender_timeout(facts: &ServerFacts, health: &HealthPolicy, report: &mut Report) {
    let timeout =
        Duration::from_millis(u64::try_from(facts.server.wal_sender_timeout_ms).unwrap_or(0));
    let silence = humantime::format_duration(health.max_silence);
    if timeout.is_zero() {
        report.warn(
            "wal_sender_timeout",
            format!(
                "0 (disabled): an idle server then sends no keepalives, and /readyz reports \
                 not ready after --ready-max-silence ({silence})"
            ),
            "set wal_sender_timeout (the default is 60s), or raise --ready-max-silence",
        );
    } else if timeout * 2 > health.max_silence {
        report.warn(
            "wal_sender_timeout",
            format!(
                "{}: an idle server may stay silent about that long, more than half of \
                 --ready-max-silence ({silence}), so /readyz may flap on an idle database",
                humantime::format_duration(timeout)
            ),
            format!(
                "run with --ready-max-silence {}",
                humantime::format_duration(timeout * 2)
            ),
        );
    } else {
        report.pass(
            "wal_sender_timeout",
            format!(
                "{} (readiness allows {silence} of silence)",
                humantime::format_duration(timeout)
            ),
        );
    }
}

async fn check_publication(
    client: &Client,
    config: &RunConfig,
    facts: &ServerFacts,
    report: &mut Report,
) -> Option<Vec<TableInfo>> {
    let publication = &config.publication_name;
    let row = read(
        report,
        "publication",
        catalog::publication(client, publication).await,
        "cannot read pg_publication",
        "connect as a role that may read the catalog",
    )?;
    let names: Vec<(String, String)> = match &row {
        Some(_) => read(
            report,
            "publication",
            catalog::published_tables(client, publication).await,
            "cannot list its tables",
            "connect as a role that may read pg_publication_tables",
        )?,
        None if config.tables.is_empty() => read(
            report,
            "publication",
            catalog::user_tables(client).await,
            "cannot list tables",
            "connect as a role that may read pg_class",
        )?,
        None => config
            .tables
            .iter()
            .map(|t| match t.split_once('.') {
                Some((schema, table)) => (schema.to_owned(), table.to_owned()),
                None => ("public".to_owned(), t.clone()),
            })
            .collect(),
    };
    // Only the tables the include/exclude lists select are streamed.
    let selection =
        crate::select::Selection::new(&config.select, &config.tables).unwrap_or_default();
    let published = names.len();
    let mut names = names;
    names.retain(|(schema, table)| selection.includes_table(schema, table));
    if let Some(found) = row.as_ref().filter(|_| selection.filters_tables()) {
        // As `run` would: a selected table the publication lacks, or a
        // selection that matches nothing, streams nothing of it.
        let checked = setup::check_published(
            client,
            publication,
            &selection,
            found.all_tables,
            found.via_root,
        )
        .await;
        if let Err(error) = checked {
            let fix = match &error {
                setup::SetupError::NotPublished { statement, .. } => statement.clone(),
                _ => "check --table and the include/exclude lists against the database".to_owned(),
            };
            report.fail("selection", crate::error_chain(&error), fix);
        }
    }
    let tables = read(
        report,
        "tables",
        catalog::tables(client, &names).await,
        "cannot read the tables' keys",
        "connect as a role that may read pg_class and pg_index",
    )?;

    match row {
        Some(found) => report_existing(report, publication, found, published),
        None => report_missing(report, config, facts, &names, &tables),
    }
    Some(tables)
}

/// The value of a catalog read, or a FAIL line for `check` naming what
/// could not be read and the privilege that would allow it.
fn read<T>(
    report: &mut Report,
    check: &'static str,
    result: Result<T, tokio_postgres::Error>,
    what: &str,
    fix: &str,
) -> Option<T> {
    match result {
        Ok(value) => Some(value),
        Err(error) => {
            report.fail(
                check,
                format!("{what}: {}", crate::error_chain(&error)),
                fix,
            );
            None
        }
    }
}

/// The verdict on a publication that exists (`published`: how many tables
/// it publishes, whatever the selection).
fn report_existing(
    report: &mut Report,
    publication: &str,
    found: catalog::Publication,
    published: usize,
) {
    let all = found.all_tables;
    let scope = if all {
        "FOR ALL TABLES".to_owned()
    } else {
        format!("{published} tables")
    };
    // Its publish list, row filters and column lists against the run:
    // `publication_shape`.
    if !all && published == 0 {
        report.fail(
            "publication",
            format!("{publication:?} exists but has no tables"),
            format!(
                "ALTER PUBLICATION {} ADD TABLE schema.table, ...",
                setup::quote_ident(publication)
            ),
        );
    } else {
        report.pass("publication", format!("{publication:?} exists ({scope})"));
    }
}

/// The verdict on a missing publication: whether `run` can create it, as
/// --publication-autocreate-mode says, with this role.
fn report_missing(
    report: &mut Report,
    config: &RunConfig,
    facts: &ServerFacts,
    names: &[(String, String)],
    tables: &[TableInfo],
) {
    let publication = &config.publication_name;
    if config.signal_channels.read_only {
        // Never created under --read-only: the read-only findings say so.
        return;
    }
    match config.publication.publication_autocreate_mode {
        PublicationAutocreateMode::Disabled => {
            report.fail(
                "publication",
                format!(
                    "{publication:?} does not exist and --publication-autocreate-mode disabled \
                 does not create it"
                ),
                format!(
                "create it: CREATE PUBLICATION {} FOR TABLE schema.table, ... (or FOR ALL TABLES)",
                setup::quote_ident(publication)
            ),
            );
        }
        PublicationAutocreateMode::Filtered => {
            report_filtered_publication(report, config, facts, tables)
        }
        PublicationAutocreateMode::AllTables if config.tables.is_empty() => {
            if facts.role.superuser {
                report.pass(
                    "publication",
                    format!("{publication:?} does not exist and will be created FOR ALL TABLES"),
                );
            } else {
                report.fail(
                "publication",
                format!(
                    "{publication:?} does not exist, and creating it FOR ALL TABLES needs a superuser; {} is not one",
                    facts.role.name
                ),
                format!(
                    "have a superuser run CREATE PUBLICATION {} FOR ALL TABLES, or pass \
                     --table schema.table,... naming tables {} owns",
                    setup::quote_ident(publication),
                    facts.role.name
                ),
            );
            }
        }
        PublicationAutocreateMode::AllTables => {
            report_table_list_publication(report, config, facts, names, tables)
        }
    }
}

/// `--publication-autocreate-mode filtered`: `run` creates it for the selected tables it may publish.
fn report_filtered_publication(
    report: &mut Report,
    config: &RunConfig,
    facts: &ServerFacts,
    tables: &[TableInfo],
) {
    let publication = &config.publication_name;
    let not_owned: Vec<&str> = tables
        .iter()
        .filter(|t| !t.owned)
        .map(|t| t.name.as_str())
        .collect();
    if tables.is_empty() {
        report.fail(
            "publication",
            "no table matches the include/exclude lists",
            "check --schema-include-list / --table-include-list and their exclude lists",
        );
    } else if facts.role.superuser || not_owned.is_empty() {
        report.pass(
            "publication",
            format!(
            "{publication:?} does not exist and will be created FOR TABLE the {} selected tables",
            tables.len()
        ),
        );
    } else {
        report.fail(
            "publication",
            format!(
                "{publication:?} does not exist, and {} does not own {}",
                facts.role.name,
                not_owned.join(", ")
            ),
            "run the connector once as the tables' owner or a superuser, or create the \
         publication yourself",
        );
    }
}

/// `--table` with a missing publication: `run` creates it FOR TABLE that list.
fn report_table_list_publication(
    report: &mut Report,
    config: &RunConfig,
    facts: &ServerFacts,
    names: &[(String, String)],
    tables: &[TableInfo],
) {
    let publication = &config.publication_name;
    let missing: Vec<&str> = names
        .iter()
        .zip(&config.tables)
        .filter(|((s, t), _)| !tables.iter().any(|i| i.name == format!("{s}.{t}")))
        .map(|(_, given)| given.as_str())
        .collect();
    let not_owned: Vec<&str> = tables
        .iter()
        .filter(|t| !t.owned)
        .map(|t| t.name.as_str())
        .collect();
    if !missing.is_empty() {
        report.fail(
            "publication",
            format!("--table names tables that do not exist: {}", list(&missing)),
            "name existing tables as schema.table",
        );
    } else if !facts.role.superuser && !facts.role.can_create_in_database {
        report.fail(
            "publication",
            format!(
                "{publication:?} does not exist and {} may not create objects in this database",
                facts.role.name
            ),
            format!(
                "GRANT CREATE ON DATABASE {} TO {}, or have the owner create the publication",
                setup::quote_ident(&config.pg_url.dbname()),
                setup::quote_ident(&facts.role.name)
            ),
        );
    } else if !facts.role.superuser && !not_owned.is_empty() {
        report.fail(
            "publication",
            format!(
                "{publication:?} does not exist, and {} does not own {}, so it cannot create it",
                facts.role.name,
                list(&not_owned)
            ),
            format!(
                "have the owner or a superuser run CREATE PUBLICATION {} FOR TABLE {}",
                setup::quote_ident(publication),
                config.tables.join(", ")
            ),
        );
    } else {
        report.pass(
            "publication",
            format!(
                "{publication:?} does not exist and will be created for {} tables",
                tables.len()
            ),
        );
    }
}

pub(super) fn check_tables(config: &RunConfig, tables: &[TableInfo], report: &mut Report) {
    if tables.is_empty() {
        if config.tables.is_empty() {
            report.warn(
                "tables",
                "no tables to stream yet",
                "create the tables (a FOR ALL TABLES publication picks up new ones), or pass --table",
            );
        }
        return;
    }
    let names = |pick: &dyn Fn(&TableInfo) -> bool| -> Vec<&str> {
        tables
            .iter()
            .filter(|t| pick(t))
            .map(|t| t.name.as_str())
            .collect()
    };
    // Without a replica identity PostgreSQL refuses UPDATE and DELETE on a
    // table that a publication publishes them for.
    let no_identity =
        names(&|t| t.replica_identity == 'n' || (t.replica_identity == 'd' && !t.has_primary_key));
    let null_keys = names(&|t| t.replica_identity == 'f' && !t.has_primary_key);
    let key_only =
        names(&|t| (t.replica_identity == 'd' && t.has_primary_key) || t.replica_identity == 'i');
    if no_identity.is_empty() {
        report.pass(
            "replica identity",
            format!(
                "all {} tables have a primary key or a replica identity",
                tables.len()
            ),
        );
    } else {
        report.fail(
            "replica identity",
            format!(
                "{} without a primary key or replica identity: PostgreSQL rejects UPDATE and \
                 DELETE on them once published, and their events would have null keys",
                list(&no_identity)
            ),
            format!(
                "add a primary key (ALTER TABLE {} ADD PRIMARY KEY (...)), or ALTER TABLE {} \
                 REPLICA IDENTITY FULL for full before-images with null keys",
                no_identity[0], no_identity[0]
            ),
        );
    }
    if !null_keys.is_empty() {
        report.warn(
            "null keys",
            format!(
                "{} have no primary key (REPLICA IDENTITY FULL): their records get null Kafka \
                 keys, so no per-row ordering across partitions and no compaction",
                list(&null_keys)
            ),
            format!("ALTER TABLE {} ADD PRIMARY KEY (...)", null_keys[0]),
        );
    }
    if !key_only.is_empty() {
        report.warn(
            "before-images",
            format!(
                "{} under REPLICA IDENTITY DEFAULT/INDEX: updates carry no before-image and \
                 deletes only the key columns",
                list(&key_only)
            ),
            format!(
                "if consumers need full before-images: ALTER TABLE {} REPLICA IDENTITY FULL \
                 (more WAL per update and delete)",
                key_only[0]
            ),
        );
    }
}
