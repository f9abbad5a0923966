//! The name of every exported metric, in one place: `docs/METRICS.md`
//! describes each, `status` reads a scrape by them, and the registry
//! (`exposition.rs`) registers each under exactly this name.
//!
//! Names are the exported series names, suffixes included: counters end in
//! `_total`, the build info in `_info`.

/// Build information, constant 1, labelled `version`, `commit` and `librdkafka`.
pub const BUILD_INFO: &str = "pgcdc_build_info";
/// The run phase, 1 for the current one, labelled `phase`.
pub const PHASE: &str = "pgcdc_phase";
/// 1 when `/readyz` answers 200.
pub const READY: &str = "pgcdc_ready";
/// Everything before this WAL position (bytes) was read from the stream.
pub const RECEIVED_LSN_BYTES: &str = "pgcdc_received_lsn_bytes";
/// Everything before this WAL position (bytes) is acknowledged by Kafka.
pub const ACKNOWLEDGED_LSN_BYTES: &str = "pgcdc_acknowledged_lsn_bytes";
/// The WAL position (bytes) last confirmed to Postgres (standby status update).
pub const CONFIRMED_LSN_BYTES: &str = "pgcdc_confirmed_lsn_bytes";
/// The server's WAL end (bytes), as its keepalives and data messages report it.
pub const SERVER_WAL_END_LSN_BYTES: &str = "pgcdc_server_wal_end_lsn_bytes";
/// [`RECEIVED_LSN_BYTES`] under its name before units were in gauge names;
/// deprecated, exported until a release says otherwise (docs/METRICS.md).
pub const RECEIVED_LSN: &str = "pgcdc_received_lsn";
/// [`ACKNOWLEDGED_LSN_BYTES`]'s deprecated name.
pub const ACKNOWLEDGED_LSN: &str = "pgcdc_acknowledged_lsn";
/// [`CONFIRMED_LSN_BYTES`]'s deprecated name.
pub const CONFIRMED_LSN: &str = "pgcdc_confirmed_lsn";
/// [`SERVER_WAL_END_LSN_BYTES`]'s deprecated name.
pub const SERVER_WAL_END_LSN: &str = "pgcdc_server_wal_end_lsn";
/// Server WAL end minus confirmed position, in bytes.
pub const LAG_BYTES: &str = "pgcdc_lag_bytes";
/// Age of the oldest change read but not acknowledged by Kafka.
pub const LAG_SECONDS: &str = "pgcdc_lag_seconds";
/// Commit time (Unix seconds) of the last fully acknowledged transaction.
pub const LAST_ACKNOWLEDGED_COMMIT: &str = "pgcdc_last_acknowledged_commit_timestamp_seconds";
/// Unix time of the last keepalive from the server.
pub const LAST_KEEPALIVE: &str = "pgcdc_last_keepalive_timestamp_seconds";
/// Transactions read (commits).
pub const TRANSACTIONS: &str = "pgcdc_transactions_total";
/// Change events emitted, labelled `table` and `op`.
pub const EVENTS: &str = "pgcdc_events_total";
/// Key and value bytes of emitted events (tombstones included), labelled `table` and `op`.
pub const EVENT_BYTES: &str = "pgcdc_event_bytes_total";
/// Records handed to the Kafka producer.
pub const RECORDS_SENT: &str = "pgcdc_kafka_records_sent_total";
/// Records Kafka acknowledged.
pub const RECORDS_ACKNOWLEDGED: &str = "pgcdc_kafka_records_acknowledged_total";
/// Records Kafka did not accept (including those purged at a restart).
pub const DELIVERY_ERRORS: &str = "pgcdc_kafka_delivery_errors_total";
/// Replayed records not sent again because Kafka already had them.
pub const ALREADY_DELIVERED: &str = "pgcdc_kafka_records_already_delivered_total";
/// Topics whose partition tails could not be read at a restart.
pub const TAIL_READ_FAILURES: &str = "pgcdc_kafka_tail_read_failures_total";
/// Produce requests librdkafka sent again (its brokers' `txretries`).
pub const PRODUCER_RETRIES: &str = "pgcdc_kafka_producer_retries_total";
/// Records handed to the producer and not yet acknowledged or failed.
pub const IN_FLIGHT_RECORDS: &str = "pgcdc_in_flight_records";
/// Bytes of the in-flight records.
pub const IN_FLIGHT_BYTES: &str = "pgcdc_in_flight_bytes";
/// librdkafka's queue depth (`rd_kafka_outq_len`).
pub const PRODUCER_QUEUE_DEPTH: &str = "pgcdc_kafka_producer_queue_depth";
/// Enqueue-to-delivery-report latency.
pub const ACK_LATENCY: &str = "pgcdc_kafka_ack_latency_seconds";
/// Time to handle one replication message (decode, encode, enqueue, backpressure).
pub const HANDLER_LATENCY: &str = "pgcdc_handler_latency_seconds";
/// Pipeline restarts after transient failures (reconnects).
pub const RESTARTS: &str = "pgcdc_restarts_total";
/// Schemas registered with (or looked up in) the schema registry.
pub const SCHEMA_REGISTRATIONS: &str = "pgcdc_schema_registrations_total";
/// Failed schema registry requests.
pub const SCHEMA_REGISTRY_ERRORS: &str = "pgcdc_schema_registry_errors_total";
/// 1 while an initial snapshot runs.
pub const SNAPSHOT_RUNNING: &str = "pgcdc_snapshot_running";
/// Tables the running (or last) snapshot covers.
pub const SNAPSHOT_TABLES: &str = "pgcdc_snapshot_tables";
/// Tables the running (or last) snapshot has finished.
pub const SNAPSHOT_TABLES_DONE: &str = "pgcdc_snapshot_tables_done";
/// Rows emitted by incremental snapshots (`source.snapshot` = `incremental`).
pub const INCREMENTAL_SNAPSHOT_ROWS: &str = "pgcdc_incremental_snapshot_rows_total";
/// Incremental snapshot chunks emitted (one per watermark window).
pub const INCREMENTAL_SNAPSHOT_CHUNKS: &str = "pgcdc_incremental_snapshot_chunks_total";
/// Tables incremental snapshots have finished.
pub const INCREMENTAL_SNAPSHOT_TABLES_DONE: &str = "pgcdc_incremental_snapshot_tables_done_total";
/// Tables the running incremental snapshot still has to read (the current one included).
pub const INCREMENTAL_SNAPSHOT_TABLES_REMAINING: &str =
    "pgcdc_incremental_snapshot_tables_remaining";
/// Snapshot reads put off because their snapshot did not yet see a
/// transaction the stream had carried (docs/SNAPSHOTS.md, "Commits the
/// stream carries before they are visible").
pub const SNAPSHOT_READS_DEFERRED: &str = "pgcdc_snapshot_reads_deferred_total";
/// Snapshot notifications sent, labelled `aggregate_type` and `type` (Debezium's).
pub const SNAPSHOT_NOTIFICATIONS: &str = "pgcdc_snapshot_notifications_total";
/// Streamed transactions (`--stream-in-progress`) that ended, labelled
/// `outcome` (`committed`, `aborted`).
pub const STREAMED_TRANSACTIONS: &str = "pgcdc_streamed_transactions_total";
/// Subtransactions of streamed transactions rolled back (`ROLLBACK TO SAVEPOINT`).
pub const STREAMED_SUBTRANSACTION_ABORTS: &str = "pgcdc_streamed_subtransaction_aborts_total";
/// Bytes of open streamed transactions held by the spool, labelled `medium`
/// (`memory`, `disk`).
pub const SPOOL_BYTES: &str = "pgcdc_spool_bytes";

// The process, under the names every Prometheus client library uses
// (`process.rs`).
/// User and system CPU time of the process.
pub const PROCESS_CPU_SECONDS: &str = "process_cpu_seconds_total";
/// Resident memory of the process.
pub const PROCESS_RESIDENT_MEMORY: &str = "process_resident_memory_bytes";
/// Virtual memory of the process.
pub const PROCESS_VIRTUAL_MEMORY: &str = "process_virtual_memory_bytes";
/// Open file descriptors of the process.
pub const PROCESS_OPEN_FDS: &str = "process_open_fds";
/// The soft limit on open file descriptors (absent when unlimited).
pub const PROCESS_MAX_FDS: &str = "process_max_fds";
/// Start time of the process, Unix seconds.
pub const PROCESS_START_TIME: &str = "process_start_time_seconds";

/// Every name a scrape exports (the deprecated ones included; the process
/// ones on Linux), for the check of the Grafana dashboard's queries
/// (`tests/metrics_dashboard.rs`).
pub const ALL: &[&str] = &[
    BUILD_INFO,
    PHASE,
    READY,
    RECEIVED_LSN_BYTES,
    ACKNOWLEDGED_LSN_BYTES,
    CONFIRMED_LSN_BYTES,
    SERVER_WAL_END_LSN_BYTES,
    RECEIVED_LSN,
    ACKNOWLEDGED_LSN,
    CONFIRMED_LSN,
    SERVER_WAL_END_LSN,
    LAG_BYTES,
    LAG_SECONDS,
    LAST_ACKNOWLEDGED_COMMIT,
    LAST_KEEPALIVE,
    TRANSACTIONS,
    EVENTS,
    EVENT_BYTES,
    RECORDS_SENT,
    RECORDS_ACKNOWLEDGED,
    DELIVERY_ERRORS,
    ALREADY_DELIVERED,
    TAIL_READ_FAILURES,
    PRODUCER_RETRIES,
    IN_FLIGHT_RECORDS,
    IN_FLIGHT_BYTES,
    PRODUCER_QUEUE_DEPTH,
    ACK_LATENCY,
    HANDLER_LATENCY,
    RESTARTS,
    SCHEMA_REGISTRATIONS,
    SCHEMA_REGISTRY_ERRORS,
    SNAPSHOT_RUNNING,
    SNAPSHOT_TABLES,
    SNAPSHOT_TABLES_DONE,
    INCREMENTAL_SNAPSHOT_ROWS,
    INCREMENTAL_SNAPSHOT_CHUNKS,
    INCREMENTAL_SNAPSHOT_TABLES_DONE,
    INCREMENTAL_SNAPSHOT_TABLES_REMAINING,
    SNAPSHOT_NOTIFICATIONS,
    STREAMED_TRANSACTIONS,
    STREAMED_SUBTRANSACTION_ABORTS,
    SPOOL_BYTES,
    PROCESS_CPU_SECONDS,
    PROCESS_RESIDENT_MEMORY,
    PROCESS_VIRTUAL_MEMORY,
    PROCESS_OPEN_FDS,
    PROCESS_MAX_FDS,
    PROCESS_START_TIME,
];
