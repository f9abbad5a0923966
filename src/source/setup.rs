//! Slot and publication management, and the catalog look-ups the stream
//! needs, over an ordinary (non-replication) SQL connection.

use tokio_postgres::{Client, NoTls};

use crate::config::PgUrl;
use crate::lsn::Lsn;
use crate::source::relation::CatalogColumn;
use crate::source::types::{CatalogError, CatalogRow, TypeRegistry, CATALOG_QUERY};

/// Errors talking to Postgres outside the replication stream.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("cannot connect to PostgreSQL at {url}; check --pg-url and that the server accepts connections")]
    Connect {
        url: String,
        #[source]
        error: tokio_postgres::Error,
    },
    #[error("{action} failed")]
    Query {
        action: String,
        #[source]
        error: tokio_postgres::Error,
    },
    #[error("wal_level is {0:?}, logical decoding needs wal_level = logical; set it in postgresql.conf and restart PostgreSQL")]
    WalLevel(String),
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
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    #[error("publication {0:?} has no tables; add tables with ALTER PUBLICATION ... ADD TABLE, or pass --table")]
    EmptyPublication(String),
}

impl SetupError {
    /// Whether trying again later may succeed (the server was unreachable)
    /// rather than failing the same way (a setting or object is wrong).
    pub fn is_retryable(&self) -> bool {
        match self {
            SetupError::Connect { .. } => true,
            SetupError::Query { error, .. } => {
                error.is_closed()
                    || error
                        .as_db_error()
                        .is_none_or(|db| crate::pipeline::sqlstate_is_transient(db.code().code()))
            }
            _ => false,
        }
    }
}

fn query_error(action: impl Into<String>) -> impl FnOnce(tokio_postgres::Error) -> SetupError {
    let action = action.into();
    move |error| SetupError::Query { action, error }
}

/// Opens a SQL connection; the connection task runs in the background.
pub async fn connect(url: &PgUrl) -> Result<Client, SetupError> {
    let (client, connection) =
        url.config()
            .connect(NoTls)
            .await
            .map_err(|error| SetupError::Connect {
                url: url.to_string(),
                error,
            })?;
    tokio::spawn(async move {
        if let Err(error) = connection.await {
            tracing::debug!(%error, "sql connection closed");
        }
    });
    Ok(client)
}

/// Quotes an identifier for SQL.
pub fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

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

/// Makes sure the server can decode logically and the publication exists
/// (creating it FOR ALL TABLES, or for `tables`), and reports the slot.
pub async fn prepare(
    client: &Client,
    slot: &str,
    publication: &str,
    tables: &[String],
) -> Result<SlotStatus, SetupError> {
    let wal_level: String = client
        .query_one("SHOW wal_level", &[])
        .await
        .map_err(query_error("reading wal_level"))?
        .get(0);
    if wal_level != "logical" {
        return Err(SetupError::WalLevel(wal_level));
    }
    ensure_publication(client, publication, tables).await?;
    slot_status(client, slot).await
}

/// Looks the slot up and checks it is a pgoutput slot of this database.
pub async fn slot_status(client: &Client, slot: &str) -> Result<SlotStatus, SetupError> {
    let row = client
        .query_opt(
            "SELECT plugin, slot_type, database, confirmed_flush_lsn::text, \
                    wal_status, current_database() \
             FROM pg_replication_slots WHERE slot_name = $1",
            &[&slot],
        )
        .await
        .map_err(query_error(format!("looking up replication slot {slot:?}")))?;
    let Some(row) = row else {
        return Ok(SlotStatus::Missing);
    };
    let plugin: Option<String> = row.get(0);
    let slot_type: String = row.get(1);
    let database: Option<String> = row.get(2);
    let confirmed: Option<String> = row.get(3);
    let wal_status: Option<String> = row.get(4);
    let current: String = row.get(5);
    if slot_type != "logical" {
        return Err(SetupError::PhysicalSlot { slot: slot.into() });
    }
    if plugin.as_deref() != Some("pgoutput") {
        return Err(SetupError::WrongPlugin {
            slot: slot.into(),
            plugin: plugin.unwrap_or_default(),
        });
    }
    if database.as_deref() != Some(current.as_str()) {
        return Err(SetupError::WrongDatabase {
            slot: slot.into(),
            expected: current,
            actual: database.unwrap_or_default(),
        });
    }
    if wal_status.as_deref() == Some("lost") {
        return Ok(SlotStatus::Invalidated);
    }
    let confirmed_flush = confirmed
        .as_deref()
        .and_then(|s| s.parse().ok())
        .unwrap_or(Lsn::ZERO);
    Ok(SlotStatus::Ready { confirmed_flush })
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

async fn ensure_publication(
    client: &Client,
    publication: &str,
    tables: &[String],
) -> Result<(), SetupError> {
    let exists = client
        .query_opt(
            "SELECT 1 FROM pg_publication WHERE pubname = $1",
            &[&publication],
        )
        .await
        .map_err(query_error(format!(
            "looking up publication {publication:?}"
        )))?
        .is_some();
    if exists {
        return Ok(());
    }
    let target = if tables.is_empty() {
        "ALL TABLES".to_owned()
    } else {
        let list: Vec<String> = tables
            .iter()
            .map(|t| match t.split_once('.') {
                Some((schema, table)) => format!("{}.{}", quote_ident(schema), quote_ident(table)),
                None => quote_ident(t),
            })
            .collect();
        format!("TABLE {}", list.join(", "))
    };
    let sql = format!(
        "CREATE PUBLICATION {} FOR {target}",
        quote_ident(publication)
    );
    client
        .batch_execute(&sql)
        .await
        .map_err(query_error(format!(
            "creating publication {publication:?} (needs superuser for FOR ALL TABLES, \
             or ownership of the tables; or create it yourself and pass --publication)"
        )))?;
    tracing::info!(publication, target, "created publication");
    Ok(())
}

/// What the catalog says about the columns of a relation: NOT NULL and
/// primary-key position, which pgoutput's Relation message does not carry.
pub async fn catalog_columns(
    client: &Client,
    relation_id: u32,
) -> Result<Vec<CatalogColumn>, SetupError> {
    let rows = client
        .query(
            "SELECT a.attname::text, a.attnotnull, \
                    array_position(i.indkey::int2[], a.attnum)::int4 \
             FROM pg_attribute a \
             LEFT JOIN pg_index i ON i.indrelid = a.attrelid AND i.indisprimary \
             WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped",
            &[&relation_id],
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
        })
        .collect())
}

/// The slot's confirmed position now (for tests and status).
pub async fn confirmed_flush_lsn(client: &Client, slot: &str) -> Result<Option<Lsn>, SetupError> {
    let row = client
        .query_opt(
            "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1",
            &[&slot],
        )
        .await
        .map_err(query_error(format!("reading replication slot {slot:?}")))?;
    Ok(row
        .and_then(|r| r.get::<_, Option<String>>(0))
        .and_then(|s| s.parse().ok()))
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

/// The server's current WAL write position.
pub async fn current_wal_lsn(client: &Client) -> Result<Lsn, SetupError> {
    let text: String = client
        .query_one("SELECT pg_current_wal_lsn()::text", &[])
        .await
        .map_err(query_error("reading pg_current_wal_lsn()"))?
        .get(0);
    Ok(text.parse().unwrap_or(Lsn::ZERO))
}
