//! `check --read-only`: what read-only incremental snapshots need
//! (docs/SNAPSHOTS.md, "Read-only incremental snapshots"), checked against
//! the role and the servers `run` would use.
//!
//! - the role: REPLICATION, and SELECT on every captured table (the chunks
//!   are read with SELECT); nothing else, no signal table to write;
//! - the publication exists (a read-only run never creates it, whatever the
//!   role could do: that is a write to the source; `run` stops with the same
//!   statement), the slot exists or can be created (over the replication
//!   connection, which REPLICATION allows: not a write to the database);
//! - the existing publication carries what the snapshots read: no row
//!   filter, nor a missing captured operation (FAIL, as `run` refuses), no
//!   column list or `publish_via_partition_root` other than the run's
//!   (WARN), see `setup::shape`;
//! - `pg_current_snapshot()` and `pg_current_wal_insert_lsn()` answer
//!   (PostgreSQL 13+, on a primary: on a hot standby the snapshot lists no
//!   transactions in progress, so a chunk cannot be placed);
//! - the kafka channel's signal topic answers, and its consumer group's
//!   committed position can be read.

use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::TopicPartitionList;
use tokio_postgres::Client;

use super::postgres::TableInfo;
use super::Report;
use crate::config::RunConfig;
use crate::select::Selection;
use crate::sink::client_log::LoggingContext;
use crate::source::setup::{shape, SetupError};
use crate::source::signal::SignalTable;
use crate::source::{catalog, setup};

const CHECK: &str = "read-only";

/// The read-only findings, when `--read-only` is set.
pub(super) async fn check_read_only(
    config: &RunConfig,
    tables: Option<&[TableInfo]>,
    timeout: Duration,
    report: &mut Report,
) {
    if !config.signal_channels.read_only {
        return;
    }
    // A server that cannot be reached was reported by the PostgreSQL checks.
    if let Ok(Ok(client)) = tokio::time::timeout(timeout, setup::connect(&config.pg())).await {
        check_database(&client, config, tables, report).await;
    }
    check_signal_topic(config, timeout, report).await;
}

async fn check_database(
    client: &Client,
    config: &RunConfig,
    tables: Option<&[TableInfo]>,
    report: &mut Report,
) {
    let (server, role) = match catalog::server(client).await {
        Ok(facts) => facts,
        Err(error) => {
            report.fail(
                CHECK,
                format!(
                    "cannot read the server's settings: {}",
                    crate::error_chain(&error)
                ),
                "connect as a role that may read pg_settings and pg_roles",
            );
            return;
        }
    };
    check_marks(client, &server, &role, report).await;
    if let Some(tables) = tables {
        check_privileges(client, &role, tables, report).await;
    }
    check_objects(client, config, report).await;
    check_signal_table(client, config, &role, report).await;
}

/// The two functions each chunk's transaction calls, on a primary.
async fn check_marks(
    client: &Client,
    server: &catalog::Server,
    role: &catalog::Role,
    report: &mut Report,
) {
    if server.in_recovery {
        report.fail(
            CHECK,
            "the server is a hot standby: there pg_current_snapshot() lists no transactions in \
             progress (a snapshot taken during recovery keeps them elsewhere), so a chunk could \
             not be placed in the stream, and run refuses --read-only",
            "point --pg-url at the primary, or run without --read-only",
        );
        return;
    }
    if server.version_num < 130_000 {
        report.fail(
            CHECK,
            format!(
                "PostgreSQL {} has no pg_current_snapshot() (13 and later have it)",
                server.version
            ),
            "upgrade the server (the connector needs 14 or later anyway)",
        );
        return;
    }
    let probe = client
        .query_one(
            "SELECT pg_current_snapshot()::text, pg_current_wal_insert_lsn()::text",
            &[],
        )
        .await;
    match probe {
        Ok(row) => report.pass(
            CHECK,
            format!(
                "pg_current_snapshot() ({}) and pg_current_wal_insert_lsn() ({}) answer: chunks \
                 are placed in the stream without writing",
                row.get::<_, String>(0),
                row.get::<_, String>(1)
            ),
        ),
        Err(error) => report.fail(
            CHECK,
            format!(
                "pg_current_snapshot() or pg_current_wal_insert_lsn() failed: {}",
                crate::error_chain(&error)
            ),
            format!(
                "as an admin: GRANT EXECUTE ON FUNCTION pg_current_snapshot(), \
                 pg_current_wal_insert_lsn() TO {}",
                setup::quote_ident(&role.name)
            ),
        ),
    }
}

/// REPLICATION, and SELECT on every captured table.
async fn check_privileges(
    client: &Client,
    role: &catalog::Role,
    tables: &[TableInfo],
    report: &mut Report,
) {
    let names: Vec<&str> = tables.iter().map(|t| t.name.as_str()).collect();
    let unreadable = client
        .query(
            "SELECT n.nspname::text || '.' || c.relname::text FROM pg_class c \
             JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname::text || '.' || c.relname::text = ANY($1) \
               AND NOT has_table_privilege(c.oid, 'SELECT') ORDER BY 1",
            &[&names],
        )
        .await;
    let unreadable: Vec<String> = match unreadable {
        Ok(rows) => rows.iter().map(|r| r.get(0)).collect(),
        Err(error) => {
            report.fail(
                CHECK,
                format!(
                    "cannot read the tables' privileges: {}",
                    crate::error_chain(&error)
                ),
                "connect as a role that may read the catalog",
            );
            return;
        }
    };
    let who = setup::quote_ident(&role.name);
    if !unreadable.is_empty() {
        let shown: Vec<&str> = unreadable.iter().map(String::as_str).collect();
        report.fail(
            CHECK,
            format!(
                "{} may not SELECT from {}: read-only snapshots read their chunks with SELECT",
                role.name,
                super::list(&shown)
            ),
            format!(
                "as an admin: GRANT SELECT ON {} TO {who}",
                unreadable.join(", ")
            ),
        );
    }
    if !role.may_replicate() {
        report.fail(
            CHECK,
            format!("{} lacks REPLICATION, which streaming needs", role.name),
            format!("as an admin: ALTER ROLE {who} REPLICATION"),
        );
    }
    if unreadable.is_empty() && role.may_replicate() {
        report.pass(
            CHECK,
            format!(
                "{} may replicate and SELECT from all {} captured tables: all a read-only run \
                 needs of it",
                role.name,
                tables.len()
            ),
        );
    }
}

/// The publication must exist beforehand; the slot may be created.
async fn check_objects(client: &Client, config: &RunConfig, report: &mut Report) {
    let publication = &config.publication_name;
    // An unreadable catalog was reported by the PostgreSQL checks. A
    // missing publication fails even for a role that could create it: run
    // never does under --read-only, and stops with this same error.
    if let Ok(None) = catalog::publication(client, publication).await {
        let selection = Selection::new(&config.select, &config.tables).unwrap_or_default();
        let missing =
            setup::missing_publication(client, publication, &config.publication, &selection).await;
        let fix = match &missing {
            Ok(SetupError::ReadOnlyPublicationMissing { statement, .. }) => {
                format!("as an admin: {statement}")
            }
            _ => "connect as a role that may read the catalog".to_owned(),
        };
        let (Ok(error) | Err(error)) = missing;
        report.fail(CHECK, crate::error_chain(&error), fix);
    } else {
        super::publication_shape::report_shape(
            client,
            config,
            shape::Kept::ReadOnly,
            CHECK,
            report,
        )
        .await;
    }
    if let Ok(None) = catalog::slot(client, &config.slot_name).await {
        report.info(
            CHECK,
            format!(
                "slot {:?} does not exist: run creates it over the replication connection, \
                 which REPLICATION allows (nothing is written to the database)",
                config.slot_name
            ),
        );
    }
}

/// No signal table is needed; one named is only read (published, SELECT).
async fn check_signal_table(
    client: &Client,
    config: &RunConfig,
    role: &catalog::Role,
    report: &mut Report,
) {
    let Some(table) = (config.signal_data_collection.as_deref()).and_then(SignalTable::parse)
    else {
        report.pass(
            CHECK,
            format!(
                "no signal table needed: signals come from Kafka topic {}",
                config.signal_channels.topic(&config.topic_prefix)
            ),
        );
        return;
    };
    let readable = client
        .query_one(
            "SELECT has_table_privilege(to_regclass($1), 'SELECT')",
            &[&table.sql()],
        )
        .await
        .ok()
        .and_then(|row| row.get::<_, Option<bool>>(0));
    let published = crate::source::signal::is_published(
        client,
        &config.publication_name,
        &table.schema,
        &table.table,
    )
    .await
    .unwrap_or(false);
    match (readable, published) {
        (Some(true), true) => report.pass(
            CHECK,
            format!("signal table {table} is published and readable (never written)"),
        ),
        (None, _) => report.fail(
            CHECK,
            format!("signal table {table} does not exist"),
            "drop --signal-data-collection (read-only takes signals from Kafka), or have an \
             admin create it",
        ),
        (Some(false), _) => report.fail(
            CHECK,
            format!("{} may not SELECT from signal table {table}", role.name),
            format!(
                "as an admin: GRANT SELECT ON {} TO {}",
                table.sql(),
                setup::quote_ident(&role.name)
            ),
        ),
        (Some(true), false) => report.fail(
            CHECK,
            format!(
                "signal table {table} is not in publication {:?}, so its signals are not streamed",
                config.publication_name
            ),
            format!(
                "as an admin: ALTER PUBLICATION {} ADD TABLE {}",
                setup::quote_ident(&config.publication_name),
                table.sql()
            ),
        ),
    }
}

/// The kafka channel's topic and its consumer group's position.
async fn check_signal_topic(config: &RunConfig, timeout: Duration, report: &mut Report) {
    let options = &config.signal_channels;
    let topic = options.topic(&config.topic_prefix);
    let client = options.kafka_consumer_config(crate::sink::transactional::client_config(
        &config.producer_config(),
    ));
    let name = topic.clone();
    // librdkafka's metadata and offset calls block: keep them off the runtime.
    let probe = tokio::task::spawn_blocking(move || probe_topic(&client, &name, timeout)).await;
    let group = &options.signal_kafka_group_id;
    match probe {
        Ok(Ok(true)) => report.pass(
            CHECK,
            format!("signal topic {topic} answers, and consumer group {group:?}'s position in it can be read"),
        ),
        Ok(Ok(false)) => report.warn(
            CHECK,
            format!("signal topic {topic} does not exist yet: run waits for it, and no signal arrives before it exists"),
            format!(
                "create it with one partition (kafka-topics.sh --create --topic {topic} \
                 --partitions 1), or let the first signal create it (auto.create.topics.enable)"
            ),
        ),
        Ok(Err(error)) => report.fail(
            CHECK,
            format!("signal topic {topic}: {error}"),
            format!(
                "check --signal-kafka-bootstrap-servers (default --bootstrap-servers) and that \
                 this principal may describe the topic and read consumer group {group:?}"
            ),
        ),
        Err(join) => report.fail(CHECK, format!("the signal topic probe failed: {join}"), "report this as a bug"),
    }
}

/// Whether `topic` has partition 0, after reading the group's committed
/// position in it; an error names what could not be read.
fn probe_topic(
    client: &rdkafka::ClientConfig,
    topic: &str,
    timeout: Duration,
) -> Result<bool, String> {
    let consumer: BaseConsumer<LoggingContext> = client
        .create_with_context(LoggingContext::for_config(client))
        .map_err(|e| format!("cannot create a consumer: {e}"))?;
    let metadata = consumer
        .fetch_metadata(Some(topic), timeout)
        .map_err(|e| format!("no metadata: {e}"))?;
    let exists = metadata.topics().iter().any(|t| {
        t.name() == topic && t.error().is_none() && t.partitions().iter().any(|p| p.id() == 0)
    });
    if !exists {
        return Ok(false);
    }
    let mut partition = TopicPartitionList::new();
    partition.add_partition(topic, 0);
    // A group coordinator that is not ready yet (a fresh cluster) says so
    // for a moment: asked again, as `run` would be restarted.
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let error = match consumer.committed_offsets(partition.clone(), timeout) {
            Ok(_) => break,
            Err(error) => error,
        };
        let loading = matches!(
            error.rdkafka_error_code(),
            Some(
                RDKafkaErrorCode::NotCoordinator
                    | RDKafkaErrorCode::CoordinatorLoadInProgress
                    | RDKafkaErrorCode::CoordinatorNotAvailable
            )
        );
        if !loading || std::time::Instant::now() >= deadline {
            return Err(format!(
                "the consumer group's committed position cannot be read: {error}"
            ));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Ok(true)
}
