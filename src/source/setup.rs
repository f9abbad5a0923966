//! Slot and publication management, and the catalog look-ups the stream
//! needs, over an ordinary (non-replication) SQL connection.

use tokio_postgres::types::Type;
use tokio_postgres::{Client, NoTls};

use crate::source::tls::{MakeRustlsConnect, SslMode, TlsSettingError};

use crate::config::PgUrl;
use crate::lsn::Lsn;
use crate::select::Selection;
use crate::source::catalog;
use crate::source::options::{PublicationAutocreateMode, PublicationOptions};
use crate::source::relation::CatalogColumn;
use crate::source::types::{CatalogError, CatalogRow, TypeRegistry, CATALOG_QUERY};
use crate::source::version::{Feature, ServerVersion, Unsupported};

/// Errors talking to Postgres outside the replication stream.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("cannot connect to PostgreSQL at {url}; check --pg-url and that the server accepts connections")]
    Connect {
        url: String,
        #[source]
        error: tokio_postgres::Error,
    },
    #[error("PostgreSQL at {url} presented a certificate that sslmode={mode} does not accept; check that sslrootcert is the CA that signed the server's certificate and, with verify-full, that the host in --pg-url is a name the certificate was issued for")]
    Certificate {
        url: String,
        mode: &'static str,
        #[source]
        error: tokio_postgres::Error,
    },
    #[error("PostgreSQL at {url} refused the login; check the user and password (--pg-url, --pg-password, --pg-password-file), the client certificate (sslcert, sslkey), and that pg_hba.conf admits this user, database and sslmode")]
    Login {
        url: String,
        #[source]
        error: tokio_postgres::Error,
    },
    #[error("the TLS settings of --pg-url cannot be used: {0}")]
    Tls(#[source] TlsSettingError),
    #[error("{action} failed")]
    Query {
        action: String,
        #[source]
        error: tokio_postgres::Error,
    },
    #[error("wal_level is {0:?}, logical decoding needs wal_level = logical; as a superuser run ALTER SYSTEM SET wal_level = logical; then restart PostgreSQL (on a managed service set its logical replication parameter)")]
    WalLevel(String),
    #[error("role {role:?} may not use replication (it has neither REPLICATION nor SUPERUSER); as a superuser run ALTER ROLE {role_sql} REPLICATION; (on Amazon RDS: GRANT rds_replication TO {role_sql};)")]
    NoReplication { role: String, role_sql: String },
    #[error("publication {publication:?} does not exist and --publication-autocreate-mode disabled does not create it; create it with: {statement}")]
    PublicationMissing {
        publication: String,
        statement: String,
    },
    #[error("publication {publication:?} does not exist, and --read-only never creates it: creating it is a write to the source; have an admin run {statement} then start again")]
    ReadOnlyPublicationMissing {
        publication: String,
        statement: String,
    },
    #[error("publication {publication:?} does not carry what this run would snapshot and capture, and {why}: {problems}")]
    PublicationShape {
        publication: String,
        why: &'static str,
        problems: String,
    },
    #[error("publication {publication:?} is FOR ALL TABLES, so --publication-autocreate-mode filtered cannot narrow it to the selected tables; drop it (DROP PUBLICATION {publication_sql};) to have it recreated, or pass another --publication")]
    PublicationForAllTables {
        publication: String,
        publication_sql: String,
    },
    #[error("no table matches the include/exclude lists, so --publication-autocreate-mode filtered has nothing to publish; check --schema-include-list / --table-include-list (and their exclude lists) against the database")]
    NothingSelected,
    #[error("PostgreSQL {version} is not supported: pgcdc-kafka needs PostgreSQL 14 or later (pgoutput's logical decoding messages and the replication commands it uses); upgrade the server, or stay on a Debezium version that supports it")]
    UnsupportedVersion { version: String },
    #[error("publication {publication:?} does not publish {tables}, which the selection names, so nothing of {them} would be streamed; add {them} ({statement}) or narrow --table / the include lists")]
    NotPublished {
        publication: String,
        tables: String,
        them: &'static str,
        statement: String,
    },
    #[error("no table of the database matches the selection (--table, the include and exclude lists), so nothing would be streamed; check the names against the database (schema-qualified, case as created)")]
    SelectsNothing,
    #[error("not allowed to run: {statement}; {needs}; run it as a role with that privilege, or have one run it and restart")]
    PublicationPrivilege {
        statement: String,
        needs: &'static str,
        #[source]
        error: tokio_postgres::Error,
    },
    #[error("replication slot {slot:?} exists but uses plugin {plugin:?}; pgcdc-kafka needs a pgoutput slot: drop it or pass another --slot")]
    WrongPlugin { slot: String, plugin: String },
    #[error("replication slot {slot:?} is a physical slot; pass the name of a logical slot or a new name to --slot")]
    PhysicalSlot { slot: String },
    #[error("replication slot {slot:?} belongs to database {actual:?}, not {expected:?}; pass another --slot")]
    WrongDatabase {
        slot: String,
        expected: String,
        actual: String,
    },
    #[error("replication slot {slot:?} was invalidated (wal_status = lost): the WAL it needed is gone, so changes since its last confirmed position cannot be streamed; raise max_slot_wal_keep_size, and restart with --snapshot-mode when_needed to drop it and take a new snapshot")]
    Invalidated { slot: String },
    #[error("replication slot {slot:?} already exists; --slot-temporary creates its own slot, so pass a --slot name that is not taken (or drop the old slot)")]
    TemporarySlotExists { slot: String },
    #[error("creating the temporary replication slot {slot:?} failed")]
    TemporarySlot {
        slot: String,
        #[source]
        error: crate::source::replication::ReplicationError,
    },
    #[error("CREATE_REPLICATION_SLOT for the temporary slot {slot:?} returned an unexpected reply; expected slot_name, consistent_point, snapshot_name, output_plugin")]
    TemporarySlotReply { slot: String },
    #[error("--slot-failover needs PostgreSQL 17 or later (failover slots), and this server is {version}; upgrade, or run without --slot-failover (a promoted standby then has no copy of the slot, and the connector stops there and says so)")]
    FailoverUnsupported { version: String },
    #[error("making replication slot {slot:?} a failover slot (ALTER_REPLICATION_SLOT ... (FAILOVER true)) failed")]
    Failover {
        slot: String,
        #[source]
        error: crate::source::replication::ReplicationError,
    },
    #[error("cannot run {statement} on this server: it is a standby, which is read-only; run it on the primary (a standby decodes on PostgreSQL 16+ but cannot create objects), then start the connector again")]
    ReadOnlyServer {
        statement: String,
        #[source]
        error: tokio_postgres::Error,
    },
    #[error("--heartbeat-action-query cannot run on a standby, which is read-only: drop it; on a standby the slot advances with the WAL the standby replays (the primary's writes, and its running-transactions records while busy), so an idle stream still confirms the replayed position. To keep WAL moving on an idle primary, run the write there (e.g. on a schedule)")]
    HeartbeatOnStandby,
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    #[error(transparent)]
    Unsupported(#[from] Unsupported),
    #[error("publication {publication:?} does not publish generated columns, which --publish-generated-columns asks for, and --publication-autocreate-mode leaves it as it is; run {statement} or use --publication-autocreate-mode filtered")]
    GeneratedColumnsNotPublished {
        publication: String,
        statement: String,
    },
    #[error("--pgoutput-binary on cannot stream publication {publication:?}: these columns have types without a binary decoder: {columns}; run with --pgoutput-binary auto (text values for this publication), or leave those columns out of the publication")]
    BinaryUnsupportedColumns {
        publication: String,
        columns: String,
    },
    #[error("publication {0:?} has no tables; add tables with ALTER PUBLICATION ... ADD TABLE, or pass --table")]
    EmptyPublication(String),
}

impl SetupError {
    /// Whether trying again later may succeed (the server was unreachable)
    /// rather than failing the same way (a setting or object is wrong).
    pub fn is_retryable(&self) -> bool {
        match self {
            SetupError::Connect { .. } => true,
            SetupError::Failover { error, .. } => error.is_retryable(),
            SetupError::Query { error, .. } => {
                error.is_closed()
                    || error
                        .as_db_error()
                        .is_none_or(|db| crate::source::sqlstate::is_transient(db.code()))
            }
            _ => false,
        }
    }
}

fn query_error(action: impl Into<String>) -> impl FnOnce(tokio_postgres::Error) -> SetupError {
    let action = action.into();
    move |error| SetupError::Query { action, error }
}

/// Opens a SQL connection, over TLS as the URL's `sslmode` says; the
/// connection task runs in the background.
pub async fn connect(url: &PgUrl) -> Result<Client, SetupError> {
    let mode = url.tls().mode.as_str();
    let failed = |error: tokio_postgres::Error| {
        let url = url.to_string();
        if is_certificate_error(&error) {
            SetupError::Certificate { url, mode, error }
        } else if error
            .as_db_error()
            .is_some_and(|db| db.code().code().starts_with("28"))
        {
            // Class 28, invalid authorization: a wrong password, no
            // pg_hba.conf line; trying again fails the same way.
            SetupError::Login { url, error }
        } else {
            SetupError::Connect { url, error }
        }
    };
    let client = if url.tls().mode == SslMode::Disable {
        let (client, connection) = url.config().connect(NoTls).await.map_err(failed)?;
        spawn_connection(connection);
        client
    } else {
        let tls = MakeRustlsConnect::new(url.tls().rustls_config().map_err(SetupError::Tls)?);
        let (client, connection) = url.config().connect(tls).await.map_err(failed)?;
        spawn_connection(connection);
        client
    };
    Ok(client)
}

/// Whether the TLS handshake failed on the server's certificate.
fn is_certificate_error(error: &tokio_postgres::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = source {
        let rustls_error = e.downcast_ref::<rustls::Error>().or_else(|| {
            e.downcast_ref::<std::io::Error>()
                .and_then(|io| io.get_ref())
                .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        });
        if matches!(rustls_error, Some(rustls::Error::InvalidCertificate(_))) {
            return true;
        }
        source = e.source();
    }
    false
}

fn spawn_connection<F>(connection: F)
where
    F: std::future::Future<Output = Result<(), tokio_postgres::Error>> + Send + 'static,
{
    tokio::spawn(async move {
        if let Err(error) = connection.await {
            tracing::debug!(%error, "sql connection closed");
        }
    });
}

pub use super::sql::quote_ident;
mod ddl;
pub mod shape;
mod unmanaged;
use ddl::{all_tables_target, run_publication_ddl};
pub use unmanaged::{check_published, missing_publication};

/// What the slot looks like when the connector starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotStatus {
    /// No slot of that name.
    Missing,
    /// A usable pgoutput slot, confirmed up to this position.
    Ready { confirmed_flush: Lsn },
    /// The slot exists but lost the WAL it needed (`wal_status = lost`).
    Invalidated,
}

/// The publication a run streams: its name (`--publication`), how it is
/// managed, and the `--table` list it is created for in `all_tables` mode.
pub struct Publication<'a> {
    pub name: &'a str,
    pub options: &'a PublicationOptions,
    pub tables: &'a [String],
    /// `--read-only`: never created nor altered, only checked (its shape
    /// too, as every existing publication: [`shape`]).
    pub read_only: bool,
    /// The operations the run emits (not in `--skipped-operations`).
    pub captured: shape::Operations,
    /// Whether the run can read rows by snapshot ([`RunConfig::may_snapshot`]):
    /// without one, a publication that streams less only streams less.
    ///
    /// [`RunConfig::may_snapshot`]: crate::config::RunConfig::may_snapshot
    pub snapshots: bool,
}

/// Makes sure the server can decode logically and the role may replicate
/// (and, on a standby, that the run would not write: `heartbeat_writes` is
/// `--heartbeat-action-query`); returns the server's facts for [`prepare`].
/// Reads only, so it may run before the server is known to be the right one.
pub async fn preflight(
    client: &Client,
    heartbeat_writes: bool,
) -> Result<catalog::Server, SetupError> {
    let (server, role) = catalog::server(client)
        .await
        .map_err(query_error("reading the server's settings and the role"))?;
    let version = ServerVersion::from_num(server.version_num);
    if !version.is_supported() {
        return Err(SetupError::UnsupportedVersion {
            version: server.version,
        });
    }
    if server.in_recovery {
        version.require(
            Feature::StandbyDecoding,
            "streaming from a standby",
            "point --pg-url at the primary",
        )?;
    }
    if server.wal_level != "logical" {
        return Err(SetupError::WalLevel(server.wal_level));
    }
    if server.in_recovery && heartbeat_writes {
        return Err(SetupError::HeartbeatOnStandby);
    }
    if !role.may_replicate() {
        return Err(SetupError::NoReplication {
            role_sql: quote_ident(&role.name),
            role: role.name,
        });
    }
    Ok(server)
}

/// Makes sure the publication exists as `--publication-autocreate-mode`
/// wants it on the `server` [`preflight`] read; then reports the slot.
pub async fn prepare(
    client: &Client,
    server: &catalog::Server,
    slot: &str,
    publication: &Publication<'_>,
    selection: &Selection,
) -> Result<SlotStatus, SetupError> {
    // A publication the run uses as it found it must carry what the run
    // snapshots and captures (`shape`'s module docs).
    if let Some(kept) =
        ensure_publication(client, publication, selection, server.version_num).await?
    {
        let (name, options) = (publication.name, publication.options);
        let found =
            shape::mismatches(client, name, options, publication.captured, selection, kept).await?;
        if let Some(refused) = shape::refuse_or_warn(name, kept, &found, publication.snapshots) {
            return Err(refused);
        }
    }
    let status = slot_status(client, slot).await?;
    if server.in_recovery && status == SlotStatus::Missing {
        tracing::info!(slot, "creating the slot on a standby: it waits for the primary's next running-transactions record (SELECT pg_log_standby_snapshot() on the primary hurries it)");
    }
    Ok(status)
}

/// Looks the slot up and checks it is a pgoutput slot of this database.
pub async fn slot_status(client: &Client, slot: &str) -> Result<SlotStatus, SetupError> {
    let found = catalog::slot(client, slot)
        .await
        .map_err(query_error(format!("looking up replication slot {slot:?}")))?;
    let Some(found) = found else {
        return Ok(SlotStatus::Missing);
    };
    if !found.is_logical() {
        return Err(SetupError::PhysicalSlot { slot: slot.into() });
    }
    if !found.is_pgoutput() {
        return Err(SetupError::WrongPlugin {
            slot: slot.into(),
            plugin: found.plugin.unwrap_or_default(),
        });
    }
    if !found.in_current_database() {
        return Err(SetupError::WrongDatabase {
            slot: slot.into(),
            expected: found.current_database,
            actual: found.database.unwrap_or_default(),
        });
    }
    if found.is_lost() {
        return Ok(SlotStatus::Invalidated);
    }
    Ok(SlotStatus::Ready {
        confirmed_flush: found.confirmed_flush_lsn.unwrap_or(Lsn::ZERO),
    })
}

/// Creates a pgoutput slot with SQL (no snapshot) and returns its position.
pub async fn create_slot(client: &Client, slot: &str) -> Result<Lsn, SetupError> {
    let row = client
        .query_one(
            "SELECT lsn::text FROM pg_create_logical_replication_slot($1, 'pgoutput')",
            &[&slot],
        )
        .await
        .map_err(query_error(format!("creating replication slot {slot:?}")))?;
    let lsn: String = row.get(0);
    let lsn = lsn.parse().unwrap_or(Lsn::ZERO);
    tracing::info!(slot, %lsn, "created replication slot");
    Ok(lsn)
}

/// `--slot-failover`: makes `slot` a failover slot unless it is one, with
/// `ALTER_REPLICATION_SLOT` on the replication `session` that is about to
/// stream it (PostgreSQL 17+; the slot must not be in use). Whichever way
/// the slot was made (SQL, an exported snapshot, a copy, by hand), it is
/// one before the first change is streamed. Failover slots are synchronized
/// to standbys with `sync_replication_slots` on.
pub async fn ensure_failover(
    client: &Client,
    session: &mut crate::source::replication::Session,
    slot: &str,
) -> Result<(), SetupError> {
    let found = catalog::slot(client, slot)
        .await
        .map_err(query_error(format!("looking up replication slot {slot:?}")))?;
    match found.and_then(|s| s.failover) {
        Some(true) => return Ok(()),
        Some(false) => {}
        None => {
            let (server, _) = catalog::server(client)
                .await
                .map_err(query_error("reading the server's version"))?;
            if !ServerVersion::from_num(server.version_num).has(Feature::FailoverSlots) {
                return Err(SetupError::FailoverUnsupported {
                    version: server.version,
                });
            }
        }
    }
    session
        .simple_query(&format!(
            "ALTER_REPLICATION_SLOT {} (FAILOVER true)",
            quote_ident(slot)
        ))
        .await
        .map_err(|error| SetupError::Failover {
            slot: slot.to_owned(),
            error,
        })?;
    tracing::info!(
        slot,
        "made the slot a failover slot: standbys with sync_replication_slots keep a copy"
    );
    Ok(())
}

/// Drops a slot if it exists (it must not be in use).
pub async fn drop_slot(client: &Client, slot: &str) -> Result<(), SetupError> {
    client
        .execute(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1",
            &[&slot],
        )
        .await
        .map_err(query_error(format!("dropping replication slot {slot:?}")))?;
    Ok(())
}

/// Copies a logical slot under a new name, keeping its position.
pub async fn copy_slot(client: &Client, from: &str, to: &str) -> Result<(), SetupError> {
    client
        .execute(
            "SELECT pg_copy_logical_replication_slot($1, $2)",
            &[&from, &to],
        )
        .await
        .map_err(query_error(format!(
            "copying replication slot {from:?} to {to:?}"
        )))?;
    Ok(())
}

fn qualified(schema: &str, table: &str) -> String {
    format!("{}.{}", quote_ident(schema), quote_ident(table))
}

/// Creates or alters the publication as the mode says; `Some` (what the
/// mode leaves as it is) when it existed.
async fn ensure_publication(
    client: &Client,
    wanted: &Publication<'_>,
    selection: &Selection,
    version_num: i32,
) -> Result<Option<shape::Kept>, SetupError> {
    let publication = wanted.name;
    let pub_sql = quote_ident(publication);
    let existing = catalog::publication(client, publication)
        .await
        .map_err(query_error(format!(
            "looking up publication {publication:?}"
        )))?
        .map(|p| (p.all_tables, p.via_root, p.generated_columns));
    let via_root = wanted.options.publish_via_partition_root;
    let generated = wanted.options.publish_generated_columns;
    if generated {
        ServerVersion::from_num(version_num).require(
            Feature::GeneratedColumns,
            "--publish-generated-columns",
            "run without it (generated columns are then left out, as before 18)",
        )?;
    }
    let with = wanted.options.with_clause();
    // --read-only never creates nor alters it: it is checked as one made
    // beforehand is (`unmanaged`'s module docs).
    let mode = match wanted.read_only {
        true => PublicationAutocreateMode::Disabled,
        false => wanted.options.publication_autocreate_mode,
    };
    let kept = shape::Kept::of(wanted.read_only, mode);
    match (mode, existing) {
        (
            PublicationAutocreateMode::AllTables | PublicationAutocreateMode::Disabled,
            Some((_, _, false)),
        ) if generated => Err(SetupError::GeneratedColumnsNotPublished {
            publication: publication.to_owned(),
            statement: format!(
                "ALTER PUBLICATION {pub_sql} SET (publish_generated_columns = stored);"
            ),
        }),
        (
            PublicationAutocreateMode::AllTables | PublicationAutocreateMode::Disabled,
            Some((all_tables, current_via_root, _)),
        ) if selection.filters_tables() => {
            check_published(client, publication, selection, all_tables, current_via_root).await?;
            Ok(Some(kept))
        }
        (PublicationAutocreateMode::AllTables | PublicationAutocreateMode::Disabled, Some(_)) => {
            Ok(Some(kept))
        }
        (PublicationAutocreateMode::AllTables, None) => {
            let target = all_tables_target(wanted.tables);
            let statement = format!("CREATE PUBLICATION {pub_sql} FOR {target}{with}");
            run_publication_ddl(client, &statement, target == "ALL TABLES").await?;
            tracing::info!(publication, target, "created publication");
            Ok(None)
        }
        (PublicationAutocreateMode::Disabled, None) if wanted.read_only => {
            Err(missing_publication(client, publication, wanted.options, selection).await?)
        }
        (PublicationAutocreateMode::Disabled, None) => {
            let target = if selection.filters_tables() {
                let tables = selected_tables(client, selection, via_root).await?;
                if tables.is_empty() {
                    "TABLE schema.table, ...".to_owned()
                } else {
                    format!("TABLE {}", tables.join(", "))
                }
            } else {
                "ALL TABLES".to_owned()
            };
            Err(SetupError::PublicationMissing {
                publication: publication.to_owned(),
                statement: format!("CREATE PUBLICATION {pub_sql} FOR {target}{with};"),
            })
        }
        (PublicationAutocreateMode::Filtered, Some((true, _, _))) => {
            Err(SetupError::PublicationForAllTables {
                publication: publication.to_owned(),
                publication_sql: pub_sql,
            })
        }
        (PublicationAutocreateMode::Filtered, existing) => {
            let tables = selected_tables(client, selection, via_root).await?;
            if tables.is_empty() {
                return Err(SetupError::NothingSelected);
            }
            let list = tables.join(", ");
            match existing {
                None => {
                    let statement = format!("CREATE PUBLICATION {pub_sql} FOR TABLE {list}{with}");
                    run_publication_ddl(client, &statement, false).await?;
                    tracing::info!(
                        publication,
                        tables = tables.len(),
                        "created publication for the selected tables"
                    );
                    Ok(None)
                }
                Some((_, current_via_root, current_generated)) => {
                    let current = published_tables(client, publication, version_num).await?;
                    let mut wanted = tables.clone();
                    wanted.sort();
                    // SET TABLE publishes each whole: a row filter or column
                    // list would hide rows or columns the snapshots read.
                    let narrowed = shape::narrowed_tables(client, publication, selection).await?;
                    if !narrowed.is_empty() {
                        tracing::warn!(publication, tables = ?narrowed, "publishing these tables whole: their row filter or column list would hide from the stream rows or columns the snapshots read");
                    }
                    if current != wanted || !narrowed.is_empty() {
                        let statement = format!("ALTER PUBLICATION {pub_sql} SET TABLE {list}");
                        run_publication_ddl(client, &statement, false).await?;
                        tracing::info!(
                            publication,
                            tables = tables.len(),
                            "publication set to the selected tables"
                        );
                    }
                    if current_via_root != via_root {
                        let statement = format!(
                            "ALTER PUBLICATION {pub_sql} SET (publish_via_partition_root = {via_root})"
                        );
                        run_publication_ddl(client, &statement, false).await?;
                    }
                    if current_generated != generated {
                        let value = if generated { "stored" } else { "none" };
                        let statement = format!(
                            "ALTER PUBLICATION {pub_sql} SET (publish_generated_columns = {value})"
                        );
                        run_publication_ddl(client, &statement, false).await?;
                    }
                    Ok(Some(kept))
                }
            }
        }
    }
}

/// The tables the include/exclude lists select, as quoted `schema.table`,
/// in name order. With `via_root` partitions are represented by their
/// partitioned root; without it, by themselves.
pub async fn selected_tables(
    client: &Client,
    selection: &Selection,
    via_root: bool,
) -> Result<Vec<String>, SetupError> {
    let rows = client
        .query(
            "SELECT n.nspname::text, c.relname::text, c.relkind::text, c.relispartition \
             FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE c.relkind IN ('r', 'p') AND c.relpersistence = 'p' \
               AND n.nspname NOT IN ('pg_catalog', 'information_schema') \
               AND n.nspname NOT LIKE 'pg\\_%' ORDER BY 1, 2",
            &[],
        )
        .await
        .map_err(query_error("listing tables for the publication"))?;
    Ok(rows
        .iter()
        .filter(|r| {
            let partitioned = r.get::<_, String>(2) == "p";
            let partition: bool = r.get(3);
            if via_root {
                !partition
            } else {
                !partitioned
            }
        })
        .filter(|r| selection.includes_table(r.get(0), r.get(1)))
        .map(|r| qualified(r.get(0), r.get(1)))
        .collect())
}

/// The tables named in a publication (not FOR ALL TABLES), quoted and
/// sorted. A schema entry (`FOR TABLES IN SCHEMA`, PostgreSQL 15+) shows as
/// `schema.*`, which never equals a wanted table list, so it is replaced by
/// SET TABLE.
async fn published_tables(
    client: &Client,
    publication: &str,
    version_num: i32,
) -> Result<Vec<String>, SetupError> {
    let members = catalog::publication_members(client, publication, version_num)
        .await
        .map_err(query_error(format!(
            "listing the tables of publication {publication:?}"
        )))?;
    let mut tables: Vec<String> = members.iter().map(|(s, t)| qualified(s, t)).collect();
    tables.sort();
    Ok(tables)
}

/// Drops the slot once its walsender has let go of it (after a graceful
/// stop), waiting up to `timeout`.
pub async fn drop_slot_when_inactive(
    client: &Client,
    slot: &str,
    timeout: std::time::Duration,
) -> Result<(), SetupError> {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let active = catalog::slot(client, slot)
            .await
            .map_err(query_error(format!("looking up replication slot {slot:?}")))?
            .map(|found| found.active);
        match active {
            None => return Ok(()),
            Some(false) => return drop_slot(client, slot).await,
            Some(true) if std::time::Instant::now() >= deadline => {
                return drop_slot(client, slot).await
            }
            Some(true) => tokio::time::sleep(std::time::Duration::from_millis(50)).await,
        }
    }
}

/// What the catalog says about the columns of a relation: NOT NULL,
/// primary-key position and DEFAULT (not of a generated column), which
/// pgoutput's Relation message does not carry.
pub async fn catalog_columns(
    client: &Client,
    relation_id: u32,
) -> Result<Vec<CatalogColumn>, SetupError> {
    // Typed: parsed, bound and run in one round trip. By text a query is
    // prepared first, a round trip more at every table's first Relation
    // message: 0.3-0.5 ms each over loopback, one after the other for a
    // pipeline of 200 tables (BENCHMARKS.md).
    let rows = client
        .query_typed(
            "SELECT a.attname::text, a.attnotnull, \
                    array_position(i.indkey::int2[], a.attnum)::int4, \
                    pg_get_expr(d.adbin, d.adrelid) \
             FROM pg_attribute a \
             LEFT JOIN pg_index i ON i.indrelid = a.attrelid AND i.indisprimary \
             LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum \
                                   AND a.attgenerated = '' \
             WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped",
            &[(&relation_id, Type::OID)],
        )
        .await
        .map_err(query_error(format!(
            "reading the columns of relation {relation_id}"
        )))?;
    Ok(rows
        .iter()
        .map(|r| CatalogColumn {
            name: r.get(0),
            not_null: r.get(1),
            primary_key_position: r.get(2),
            default_expression: r.get(3),
        })
        .collect())
}

/// The slot's confirmed position now (for tests and status).
pub async fn confirmed_flush_lsn(client: &Client, slot: &str) -> Result<Option<Lsn>, SetupError> {
    Ok(catalog::slot(client, slot)
        .await
        .map_err(query_error(format!("reading replication slot {slot:?}")))?
        .and_then(|found| found.confirmed_flush_lsn))
}

/// Loads every user-defined type (enums, domains, arrays of them, extension
/// types) that a published column may use.
pub async fn load_types(client: &Client) -> Result<TypeRegistry, SetupError> {
    let rows = client
        .query(CATALOG_QUERY, &[])
        .await
        .map_err(query_error("reading user-defined types from pg_type"))?;
    let mut registry = TypeRegistry::default();
    for row in &rows {
        let text = |i: usize| row.get::<_, Option<&str>>(i).unwrap_or_default();
        registry.add_catalog_row(&CatalogRow {
            oid: text(0),
            namespace: text(1),
            name: text(2),
            kind: text(3),
            base_oid: text(4),
            base_type_modifier: text(5),
            element_oid: text(6),
            enum_labels: row.get(7),
        })?;
    }
    Ok(registry)
}

/// The server's current WAL write position; on a standby (16+ decodes
/// there) the position it has replayed, which is as far as its walsender
/// can decode.
pub async fn current_wal_lsn(client: &Client) -> Result<Lsn, SetupError> {
    let text: String = client
        .query_one(
            "SELECT (CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() \
                     ELSE pg_current_wal_lsn() END)::text",
            &[],
        )
        .await
        .map_err(query_error("reading the server's WAL position"))?
        .get(0);
    Ok(text.parse().unwrap_or(Lsn::ZERO))
}
