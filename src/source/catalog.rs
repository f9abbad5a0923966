//! Typed facts from PostgreSQL's catalog: the server's version and
//! settings, the connecting role, a replication slot, a publication and
//! its tables. `run` ([`super::setup`]), `check` and `status` read them
//! through these functions alone, so the preflight cannot drift from what
//! `run` does: a slot `check` calls usable is one `run` accepts.
//!
//! Each function is one round trip and returns the driver's error; the
//! caller says what it was doing (`run` fails with a [`SetupError`], `check`
//! reports a failed line). Views whose columns vary by version
//! (`pg_replication_slots` gained `wal_status` in 13, `failover` in 17) are
//! read through `row_to_json`, so a column a version lacks is `None` instead
//! of an error.
//!
//! [`SetupError`]: super::setup::SetupError

use tokio_postgres::{Client, Error};

use crate::lsn::Lsn;

/// The server's version and the settings logical replication depends on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Server {
    /// `server_version`, as the server prints it (`15.8 (Debian ...)`).
    pub version: String,
    /// `server_version_num`: `150008` for 15.8.
    pub version_num: i32,
    pub wal_level: String,
    pub max_replication_slots: i64,
    /// Slots that exist, of any kind.
    pub used_slots: i64,
    pub max_wal_senders: i64,
    /// WAL senders running now.
    pub used_wal_senders: i64,
    /// `None` before PostgreSQL 13, which cannot cap a slot's WAL.
    pub max_slot_wal_keep_size: Option<String>,
    /// Milliseconds; 0 disables it.
    pub wal_sender_timeout_ms: i64,
    /// A standby (`pg_is_in_recovery()`).
    pub in_recovery: bool,
}

/// The connecting role and what it may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Role {
    pub name: String,
    pub superuser: bool,
    /// `rolreplication`.
    pub replication: bool,
    /// A member of Amazon RDS's `rds_replication` or `rds_superuser`, which
    /// grant replication there instead of the attribute.
    pub rds_replication: bool,
    /// May create publications in the current database.
    pub can_create_in_database: bool,
}

impl Role {
    /// Whether the role may use slots and stream from them.
    pub fn may_replicate(&self) -> bool {
        self.superuser || self.replication || self.rds_replication
    }
}

const SERVER: &str = "\
    SELECT current_setting('server_version'), \
           current_setting('server_version_num')::int4, \
           current_setting('wal_level'), \
           current_setting('max_replication_slots')::int8, \
           (SELECT count(*) FROM pg_replication_slots), \
           current_setting('max_wal_senders')::int8, \
           (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'walsender'), \
           current_setting('max_slot_wal_keep_size', true), \
           (SELECT setting::int8 FROM pg_settings WHERE name = 'wal_sender_timeout'), \
           pg_is_in_recovery(), \
           current_user::text, r.rolsuper, r.rolreplication, \
           EXISTS (SELECT 1 FROM pg_roles g \
                   WHERE g.rolname IN ('rds_replication', 'rds_superuser') \
                     AND pg_has_role(r.oid, g.oid, 'member')), \
           has_database_privilege(current_database(), 'CREATE') \
    FROM pg_roles r WHERE r.rolname = current_user";

/// The server's facts and the connecting role's, in one query.
pub async fn server(client: &Client) -> Result<(Server, Role), Error> {
    let row = client.query_one(SERVER, &[]).await?;
    let server = Server {
        version: row.try_get(0)?,
        version_num: row.try_get(1)?,
        wal_level: row.try_get(2)?,
        max_replication_slots: row.try_get(3)?,
        used_slots: row.try_get(4)?,
        max_wal_senders: row.try_get(5)?,
        used_wal_senders: row.try_get(6)?,
        max_slot_wal_keep_size: row.try_get(7)?,
        wal_sender_timeout_ms: row.try_get(8)?,
        in_recovery: row.try_get(9)?,
    };
    let role = Role {
        name: row.try_get(10)?,
        superuser: row.try_get(11)?,
        replication: row.try_get(12)?,
        rds_replication: row.try_get(13)?,
        can_create_in_database: row.try_get(14)?,
    };
    Ok((server, role))
}

/// One replication slot as `pg_replication_slots` shows it, with where the
/// server's WAL stands against it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slot {
    pub name: String,
    /// `logical` or `physical`.
    pub slot_type: Option<String>,
    pub plugin: Option<String>,
    /// The database of a logical slot.
    pub database: Option<String>,
    /// The database this connection is to.
    pub current_database: String,
    pub active: bool,
    pub active_pid: Option<i64>,
    pub restart_lsn: Option<Lsn>,
    pub confirmed_flush_lsn: Option<Lsn>,
    /// `reserved`, `extended`, `unreserved` or `lost` (PostgreSQL 13+).
    pub wal_status: Option<String>,
    /// Bytes that may still be written before the slot is at risk (13+, with
    /// `max_slot_wal_keep_size` set).
    pub safe_wal_size: Option<i64>,
    /// The server's current WAL position (replay position on a standby).
    pub server_lsn: Option<Lsn>,
    /// WAL the server keeps for this slot: server position minus `restart_lsn`.
    pub retained_wal_bytes: Option<i64>,
    /// Server position minus `confirmed_flush_lsn`.
    pub unconfirmed_wal_bytes: Option<i64>,
    /// A failover slot, synchronized to standbys (17+; `None` before).
    pub failover: Option<bool>,
    /// A copy a standby keeps of its primary's failover slot (17+).
    pub synced: Option<bool>,
}

impl Slot {
    /// A logical slot.
    pub fn is_logical(&self) -> bool {
        self.slot_type.as_deref() == Some("logical")
    }

    /// Decoded with pgoutput.
    pub fn is_pgoutput(&self) -> bool {
        self.plugin.as_deref() == Some("pgoutput")
    }

    /// A slot of the database this connection is to.
    pub fn in_current_database(&self) -> bool {
        self.database.as_deref() == Some(self.current_database.as_str())
    }

    /// Invalidated: the WAL it needed is gone (`wal_status = lost`).
    pub fn is_lost(&self) -> bool {
        self.wal_status.as_deref() == Some("lost")
    }
}

const SLOT: &str = "\
    WITH pos AS (SELECT CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() \
                             ELSE pg_current_wal_lsn() END AS lsn) \
    SELECT row_to_json(s)::text, current_database()::text, pos.lsn::text, \
           pg_wal_lsn_diff(pos.lsn, s.restart_lsn)::int8, \
           pg_wal_lsn_diff(pos.lsn, s.confirmed_flush_lsn)::int8 \
    FROM pg_replication_slots s, pos WHERE s.slot_name = $1";

/// The slot named `name`, if it exists.
pub async fn slot(client: &Client, name: &str) -> Result<Option<Slot>, Error> {
    let Some(row) = client.query_opt(SLOT, &[&name]).await? else {
        return Ok(None);
    };
    let json: String = row.try_get(0)?;
    let info: serde_json::Value = serde_json::from_str(&json).unwrap_or_default();
    let text = |key: &str| info.get(key).and_then(|v| v.as_str()).map(str::to_owned);
    let lsn = |key: &str| text(key).and_then(|s| s.parse().ok());
    Ok(Some(Slot {
        name: name.to_owned(),
        slot_type: text("slot_type"),
        plugin: text("plugin"),
        database: text("database"),
        current_database: row.try_get(1)?,
        active: info
            .get("active")
            .and_then(serde_json::Value::as_bool)
            .unwrap_or(false),
        active_pid: info.get("active_pid").and_then(serde_json::Value::as_i64),
        restart_lsn: lsn("restart_lsn"),
        confirmed_flush_lsn: lsn("confirmed_flush_lsn"),
        wal_status: text("wal_status"),
        safe_wal_size: info
            .get("safe_wal_size")
            .and_then(serde_json::Value::as_i64),
        server_lsn: row
            .try_get::<_, Option<String>>(2)?
            .and_then(|s| s.parse().ok()),
        retained_wal_bytes: row.try_get(3)?,
        unconfirmed_wal_bytes: row.try_get(4)?,
        failover: info.get("failover").and_then(serde_json::Value::as_bool),
        synced: info.get("synced").and_then(serde_json::Value::as_bool),
    }))
}

/// A publication's definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Publication {
    pub name: String,
    /// `FOR ALL TABLES`.
    pub all_tables: bool,
    /// `publish_via_partition_root`.
    pub via_root: bool,
    /// Publishes updates and deletes (`publish` includes them).
    pub updates: bool,
    pub deletes: bool,
    pub owner: String,
    /// `publish_generated_columns = stored` (18+): stored generated columns
    /// are in the stream.
    pub generated_columns: bool,
}

/// The publication named `name`, if it exists.
pub async fn publication(client: &Client, name: &str) -> Result<Option<Publication>, Error> {
    let row = client
        .query_opt(
            "SELECT puballtables, pubviaroot, pubupdate, pubdelete, \
                    pg_get_userbyid(pubowner)::text, \
                    coalesce(row_to_json(p)->>'pubgencols' = 's', false) \
             FROM pg_publication p WHERE pubname = $1",
            &[&name],
        )
        .await?;
    row.map(|row| {
        Ok(Publication {
            name: name.to_owned(),
            all_tables: row.try_get(0)?,
            via_root: row.try_get(1)?,
            updates: row.try_get(2)?,
            deletes: row.try_get(3)?,
            owner: row.try_get(4)?,
            generated_columns: row.try_get(5)?,
        })
    })
    .transpose()
}

/// The tables whose changes a publication carries (`pg_publication_tables`:
/// its tables, those of its schemas, or all, with partitions resolved as
/// `publish_via_partition_root` says), as `(schema, table)` sorted.
pub async fn published_tables(
    client: &Client,
    publication: &str,
) -> Result<Vec<(String, String)>, Error> {
    let rows = client
        .query(
            "SELECT schemaname::text, tablename::text FROM pg_publication_tables \
             WHERE pubname = $1 ORDER BY 1, 2",
            &[&publication],
        )
        .await?;
    rows.iter()
        .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
        .collect()
}

/// What a publication names (not the tables it resolves to): its tables,
/// and from PostgreSQL 15 on its schemas (`FOR TABLES IN SCHEMA`), each as
/// `(schema, "*")`; sorted. `version_num` is [`Server::version_num`].
pub async fn publication_members(
    client: &Client,
    publication: &str,
    version_num: i32,
) -> Result<Vec<(String, String)>, Error> {
    const TABLES: &str = "SELECT n.nspname::text, c.relname::text FROM pg_publication p \
         JOIN pg_publication_rel pr ON pr.prpubid = p.oid \
         JOIN pg_class c ON c.oid = pr.prrelid JOIN pg_namespace n ON n.oid = c.relnamespace \
         WHERE p.pubname = $1";
    const SCHEMAS: &str = " UNION ALL SELECT n.nspname::text, '*' FROM pg_publication p \
         JOIN pg_publication_namespace pn ON pn.pnpubid = p.oid \
         JOIN pg_namespace n ON n.oid = pn.pnnspid WHERE p.pubname = $1";
    let sql = if version_num >= 150_000 {
        format!("{TABLES}{SCHEMAS}")
    } else {
        TABLES.to_owned()
    };
    let rows = client.query(sql.as_str(), &[&publication]).await?;
    let mut members: Vec<(String, String)> = rows
        .iter()
        .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
        .collect::<Result<_, Error>>()?;
    members.sort();
    Ok(members)
}

/// The permanent ordinary tables of the database outside the system
/// schemas: what `FOR ALL TABLES` would publish, as `(schema, table)` sorted.
pub async fn user_tables(client: &Client) -> Result<Vec<(String, String)>, Error> {
    let rows = client
        .query(
            "SELECT n.nspname::text, c.relname::text FROM pg_class c \
             JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE c.relkind = 'r' AND c.relpersistence = 'p' \
               AND n.nspname NOT IN ('pg_catalog', 'information_schema') \
               AND n.nspname NOT LIKE 'pg\\_%' ORDER BY 1, 2",
            &[],
        )
        .await?;
    rows.iter()
        .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
        .collect()
}

/// A table, with what decides its keys and before-images.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    /// `schema.table`.
    pub name: String,
    /// `pg_class.relreplident`: d(efault), n(othing), f(ull), i(ndex).
    pub replica_identity: char,
    pub has_primary_key: bool,
    /// The connecting role owns it (or is a member of its owner).
    pub owned: bool,
}

/// The tables among `names` (`(schema, table)`) that exist, by name.
pub async fn tables(client: &Client, names: &[(String, String)]) -> Result<Vec<Table>, Error> {
    let schemas: Vec<&str> = names.iter().map(|(s, _)| s.as_str()).collect();
    let tables: Vec<&str> = names.iter().map(|(_, t)| t.as_str()).collect();
    let rows = client
        .query(
            "SELECT n.nspname::text || '.' || c.relname::text, c.relreplident::text, \
                    EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisprimary), \
                    pg_has_role(c.relowner, 'USAGE') \
             FROM unnest($1::text[], $2::text[]) AS wanted(schema_name, table_name) \
             JOIN pg_namespace n ON n.nspname = wanted.schema_name \
             JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = wanted.table_name \
             ORDER BY 1",
            &[&schemas, &tables],
        )
        .await?;
    rows.iter()
        .map(|r| {
            Ok(Table {
                name: r.try_get(0)?,
                replica_identity: r.try_get::<_, String>(1)?.chars().next().unwrap_or('d'),
                has_primary_key: r.try_get(2)?,
                owned: r.try_get(3)?,
            })
        })
        .collect()
}
