//! The connector's metrics and its run phase, rendered in the Prometheus text
//! exposition format for `--metrics-addr` (see [`crate::http`]).
//!
//! Every metric name is a constant in [`names`], the one list of what the
//! connector exports; `docs/METRICS.md` describes each. The pipeline and the
//! Kafka delivery callback record into one shared [`Metrics`]: counters and
//! gauges are relaxed atomics, so recording never blocks the read loop or
//! librdkafka's polling thread; the few structured values (per-table counts,
//! the phase, the commit times of unacknowledged transactions) sit behind
//! short `std::sync::Mutex` sections that are never held across an `.await`.
//!
//! # LSNs and lag
//!
//! The three positions of the pipeline keep their names here too:
//! *received* (everything before it was read from the stream),
//! *acknowledged* (everything before it is in Kafka) and *confirmed* (the
//! position last reported to Postgres, from the replication client's
//! [`ReplicationMetrics::last_applied_lsn`]). Lag in bytes is the server's
//! WAL end (from keepalives and data messages,
//! [`ReplicationMetrics::last_wal_end`]) minus the confirmed position: what
//! the slot makes the server retain on our account. Lag in seconds is how old
//! the oldest change not yet acknowledged by Kafka is: `now` minus the commit
//! time of the oldest transaction read but not fully acknowledged, and zero
//! when everything read is acknowledged, so an idle connector reports no lag.
//!
//! # Bounded
//!
//! Per-table label sets grow with the number of published tables only; the
//! queue of unacknowledged commit times is pruned as acknowledgements arrive
//! and holds at most the transactions the ack tracker holds.
//!
//! Prometheus samples are `f64`: LSNs are exact up to 2^53 bytes (8 PiB) of
//! WAL, far beyond any real server.

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::lsn::Lsn;
use crate::source::replication::ReplicationMetrics;

/// The name of every exported metric, in one place.
pub mod names {
    /// Build information, constant 1, labelled `version`.
    pub const BUILD_INFO: &str = "pgcdc_build_info";
    /// The run phase, 1 for the current one, labelled `phase`.
    pub const PHASE: &str = "pgcdc_phase";
    /// 1 when `/readyz` answers 200.
    pub const READY: &str = "pgcdc_ready";
    /// Everything before this WAL position was read from the stream.
    pub const RECEIVED_LSN: &str = "pgcdc_received_lsn";
    /// Everything before this WAL position is acknowledged by Kafka.
    pub const ACKNOWLEDGED_LSN: &str = "pgcdc_acknowledged_lsn";
    /// The WAL position last confirmed to Postgres (standby status update).
    pub const CONFIRMED_LSN: &str = "pgcdc_confirmed_lsn";
    /// The server's WAL end, as its keepalives and data messages report it.
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
    pub const INCREMENTAL_SNAPSHOT_TABLES_DONE: &str =
        "pgcdc_incremental_snapshot_tables_done_total";
    /// Tables the running incremental snapshot still has to read (the current one included).
    pub const INCREMENTAL_SNAPSHOT_TABLES_REMAINING: &str =
        "pgcdc_incremental_snapshot_tables_remaining";
}

/// Microseconds since the Unix epoch.
fn unix_micros() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section here is a few assignments: the data stays
    // consistent even if a panic elsewhere poisoned the lock.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What the connector is doing, for `/readyz` and [`names::PHASE`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    /// Connecting to Postgres, preparing the slot, starting replication.
    Connecting,
    /// Taking an initial snapshot.
    Snapshotting,
    /// Streaming changes.
    Streaming,
    /// An attempt failed with a transient error; the next starts after `retry_in`.
    Restarting {
        /// The failure, with its sources.
        error: String,
        /// The backoff before the next attempt.
        retry_in: Duration,
    },
    /// Stopped on request or caught up.
    Stopped,
    /// Stopped on a definite error; it will not restart by itself.
    Failed {
        /// The failure, with its sources.
        error: String,
    },
}

impl Phase {
    /// Every phase's label value, in a fixed order.
    pub const LABELS: [&'static str; 6] = [
        "connecting",
        "snapshotting",
        "streaming",
        "restarting",
        "stopped",
        "failed",
    ];

    /// The `phase` label value.
    pub fn label(&self) -> &'static str {
        match self {
            Phase::Connecting => "connecting",
            Phase::Snapshotting => "snapshotting",
            Phase::Streaming => "streaming",
            Phase::Restarting { .. } => "restarting",
            Phase::Stopped => "stopped",
            Phase::Failed { .. } => "failed",
        }
    }
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Phase::Connecting => f.write_str("connecting to PostgreSQL and starting replication"),
            Phase::Snapshotting => f.write_str("taking the initial snapshot"),
            Phase::Streaming => f.write_str("streaming"),
            Phase::Restarting { error, retry_in } => write!(
                f,
                "restarting after a failure (next attempt in {}): {error}",
                humantime::format_duration(*retry_in)
            ),
            Phase::Stopped => f.write_str("stopped"),
            Phase::Failed { error } => write!(f, "stopped on an error: {error}"),
        }
    }
}

/// Upper bounds (seconds) of the latency histograms' buckets.
const LATENCY_BUCKETS: [f64; 14] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// A latency histogram with fixed buckets ([`LATENCY_BUCKETS`]).
#[derive(Debug, Default)]
pub struct Histogram {
    /// Per-bucket (not cumulative) counts; the last one is `+Inf`.
    buckets: [AtomicU64; LATENCY_BUCKETS.len() + 1],
    sum_micros: AtomicU64,
    count: AtomicU64,
}

impl Histogram {
    /// Records one observation.
    pub fn observe(&self, elapsed: Duration) {
        let seconds = elapsed.as_secs_f64();
        let index = LATENCY_BUCKETS
            .iter()
            .position(|bound| seconds <= *bound)
            .unwrap_or(LATENCY_BUCKETS.len());
        self.buckets[index].fetch_add(1, Ordering::Relaxed);
        let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        self.sum_micros.fetch_add(micros, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    /// Number of observations.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    fn render(&self, out: &mut String, name: &str, help: &str) {
        header(out, name, help, "histogram");
        let mut cumulative = 0u64;
        for (i, bucket) in self.buckets.iter().enumerate() {
            cumulative += bucket.load(Ordering::Relaxed);
            let le = LATENCY_BUCKETS
                .get(i)
                .map_or_else(|| "+Inf".to_owned(), |b| b.to_string());
            let _ = writeln!(out, "{name}_bucket{{le=\"{le}\"}} {cumulative}");
        }
        let sum = self.sum_micros.load(Ordering::Relaxed) as f64 / 1e6;
        let _ = writeln!(out, "{name}_sum {sum}");
        let _ = writeln!(out, "{name}_count {cumulative}");
    }
}

/// The `op` label values of [`names::EVENTS`]: Debezium's op codes, and `m`
/// for logical decoding messages.
const OPS: [&str; 6] = ["c", "u", "d", "t", "r", "m"];

#[derive(Debug, Default, Clone, Copy)]
struct TableCounts {
    events: [u64; OPS.len()],
    bytes: [u64; OPS.len()],
}

/// Commit times of transactions read but not yet fully acknowledged.
#[derive(Debug, Default)]
struct Unacknowledged {
    /// Committed transactions in commit order: (end LSN, commit time µs).
    committed: VecDeque<(Lsn, i64)>,
    /// The transaction being read (Begin seen, Commit not yet).
    open: Option<i64>,
    /// Commit time of the last transaction that left `committed` acknowledged.
    last_acknowledged: Option<i64>,
}

impl Unacknowledged {
    fn prune(&mut self, acknowledged: Lsn) {
        while let Some(&(end, commit_time)) = self.committed.front() {
            if end > acknowledged {
                break;
            }
            self.last_acknowledged = Some(commit_time);
            self.committed.pop_front();
        }
    }

    fn oldest(&self) -> Option<i64> {
        self.committed.front().map(|&(_, t)| t).or(self.open)
    }
}

/// Reads librdkafka's queue depth of the current attempt's producer.
type QueueProbe = Box<dyn Fn() -> Option<u64> + Send + Sync>;

/// Probes into the current attempt's clients, replaced at each attempt.
#[derive(Default)]
struct Probes {
    /// Plain atomics: holding them keeps nothing else alive.
    replication: Option<Arc<ReplicationMetrics>>,
    producer_queue: Option<QueueProbe>,
}

/// Removes the producer probe of [`Metrics::watch_producer_queue`] when dropped.
pub struct ProbeGuard<'a>(&'a Metrics);

impl Drop for ProbeGuard<'_> {
    fn drop(&mut self) {
        lock(&self.0.probes).producer_queue = None;
    }
}

/// Every metric of one connector (shared by all attempts of a run).
pub struct Metrics {
    /// Monotonic base of the `*_at` fields below.
    started: Instant,
    phase: Mutex<Phase>,

    received_lsn: AtomicU64,
    acknowledged_lsn: AtomicU64,
    confirmed_lsn: AtomicU64,
    server_wal_end: AtomicU64,

    /// Milliseconds after `started` (+1; 0 means never) of the last message
    /// from the server, of any kind.
    server_message_at: AtomicU64,
    /// Same base: the last delivery report, or the moment the in-flight set
    /// became non-empty.
    delivery_progress_at: AtomicU64,
    last_keepalive_micros: AtomicI64,

    transactions: AtomicU64,
    tables: Mutex<BTreeMap<Arc<str>, TableCounts>>,
    unacknowledged: Mutex<Unacknowledged>,

    records_sent: AtomicU64,
    records_acknowledged: AtomicU64,
    delivery_errors: AtomicU64,
    producer_retries: AtomicU64,
    in_flight_records: AtomicI64,
    in_flight_bytes: AtomicI64,
    ack_latency: Histogram,
    handler_latency: Histogram,

    restarts: AtomicU64,
    schema_registrations: AtomicU64,
    schema_registry_errors: AtomicU64,
    snapshot_running: AtomicU64,
    snapshot_tables: AtomicU64,
    snapshot_tables_done: AtomicU64,
    incremental_rows: AtomicU64,
    incremental_chunks: AtomicU64,
    incremental_tables_done: AtomicU64,
    incremental_tables_remaining: AtomicU64,

    probes: Mutex<Probes>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics")
            .field("phase", &*lock(&self.phase))
            .finish_non_exhaustive()
    }
}

impl Metrics {
    /// Fresh metrics, in phase [`Phase::Connecting`].
    pub fn new() -> Self {
        Metrics {
            started: Instant::now(),
            phase: Mutex::new(Phase::Connecting),
            received_lsn: AtomicU64::new(0),
            acknowledged_lsn: AtomicU64::new(0),
            confirmed_lsn: AtomicU64::new(0),
            server_wal_end: AtomicU64::new(0),
            server_message_at: AtomicU64::new(0),
            delivery_progress_at: AtomicU64::new(0),
            last_keepalive_micros: AtomicI64::new(0),
            transactions: AtomicU64::new(0),
            tables: Mutex::new(BTreeMap::new()),
            unacknowledged: Mutex::new(Unacknowledged::default()),
            records_sent: AtomicU64::new(0),
            records_acknowledged: AtomicU64::new(0),
            delivery_errors: AtomicU64::new(0),
            producer_retries: AtomicU64::new(0),
            in_flight_records: AtomicI64::new(0),
            in_flight_bytes: AtomicI64::new(0),
            ack_latency: Histogram::default(),
            handler_latency: Histogram::default(),
            restarts: AtomicU64::new(0),
            schema_registrations: AtomicU64::new(0),
            schema_registry_errors: AtomicU64::new(0),
            snapshot_running: AtomicU64::new(0),
            snapshot_tables: AtomicU64::new(0),
            snapshot_tables_done: AtomicU64::new(0),
            incremental_rows: AtomicU64::new(0),
            incremental_chunks: AtomicU64::new(0),
            incremental_tables_done: AtomicU64::new(0),
            incremental_tables_remaining: AtomicU64::new(0),
            probes: Mutex::new(Probes::default()),
        }
    }

    fn now_mark(&self) -> u64 {
        self.mark_at(Instant::now())
    }

    fn mark_at(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.started).as_millis())
            .unwrap_or(u64::MAX - 1)
            .saturating_add(1)
    }

    fn since_mark(&self, mark: &AtomicU64) -> Option<Duration> {
        match mark.load(Ordering::Relaxed) {
            0 => None,
            at => Some(Duration::from_millis(self.now_mark().saturating_sub(at))),
        }
    }

    // ----- phase ---------------------------------------------------------

    /// Sets the run phase.
    pub fn set_phase(&self, phase: Phase) {
        *lock(&self.phase) = phase;
    }

    /// The run phase.
    pub fn phase(&self) -> Phase {
        lock(&self.phase).clone()
    }

    // ----- the replication stream -----------------------------------------

    /// A new attempt starts: forgets the previous attempt's unacknowledged
    /// transactions and client probes (its deliveries are void).
    pub fn start_attempt(&self) {
        *lock(&self.unacknowledged) = Unacknowledged::default();
        *lock(&self.probes) = Probes::default();
    }

    /// The replication connection of this attempt is streaming: counts as
    /// fresh contact with the server, and its counters are read from now on.
    pub fn streaming_started(&self, replication: &Arc<ReplicationMetrics>) {
        lock(&self.probes).replication = Some(Arc::clone(replication));
        self.server_message_at
            .store(self.now_mark(), Ordering::Relaxed);
    }

    /// Reads the producer's queue depth through `probe` (which should hold
    /// the producer weakly) until the returned guard is dropped. Declare the
    /// guard after the producer's owner, so it is dropped first: a scrape
    /// then never holds the producer's last reference (whose drop blocks
    /// while librdkafka purges its queue).
    #[must_use = "the probe is removed when the guard is dropped"]
    pub fn watch_producer_queue(
        &self,
        probe: impl Fn() -> Option<u64> + Send + Sync + 'static,
    ) -> ProbeGuard<'_> {
        lock(&self.probes).producer_queue = Some(Box::new(probe));
        ProbeGuard(self)
    }

    /// The attempt ended: takes a last reading of its replication client
    /// and stops probing it.
    pub fn end_attempt(&self) {
        let mut probes = lock(&self.probes);
        if let Some(replication) = probes.replication.take() {
            self.observe_replication(&replication);
        }
        probes.producer_queue = None;
    }

    /// A message from the server arrived; `keepalive` when it was one.
    pub fn server_message(&self, at: Instant, keepalive: bool) {
        self.server_message_at
            .store(self.mark_at(at), Ordering::Relaxed);
        if keepalive {
            self.last_keepalive_micros
                .store(unix_micros(), Ordering::Relaxed);
        }
    }

    /// The server reported its WAL end (keepalive).
    pub fn server_wal_end(&self, wal_end: Lsn) {
        self.server_wal_end
            .fetch_max(wal_end.as_u64(), Ordering::Relaxed);
    }

    /// Everything before `lsn` was read.
    pub fn received(&self, lsn: Lsn) {
        self.received_lsn.store(lsn.as_u64(), Ordering::Relaxed);
    }

    /// A Begin was read: the transaction committed at `commit_time_micros`
    /// (Unix µs) is now being read.
    pub fn transaction_begun(&self, commit_time_micros: i64) {
        lock(&self.unacknowledged).open = Some(commit_time_micros);
    }

    /// A Commit was read.
    pub fn transaction_committed(&self, end_lsn: Lsn, commit_time_micros: i64) {
        self.transactions.fetch_add(1, Ordering::Relaxed);
        let acknowledged = Lsn::new(self.acknowledged_lsn.load(Ordering::Relaxed));
        let mut unacknowledged = lock(&self.unacknowledged);
        unacknowledged.open = None;
        if end_lsn > acknowledged {
            unacknowledged
                .committed
                .push_back((end_lsn, commit_time_micros));
        } else {
            unacknowledged.last_acknowledged = Some(commit_time_micros);
        }
        unacknowledged.prune(acknowledged);
    }

    /// One change event of `table` (`schema.table`, empty for logical
    /// decoding messages) with Debezium op code `op` was handed to Kafka as
    /// records of `bytes` key and value bytes in all.
    pub fn event(&self, table: &str, op: &str, bytes: usize) {
        let Some(index) = OPS.iter().position(|o| *o == op) else {
            debug_assert!(false, "unknown op code {op:?}");
            return;
        };
        let mut tables = lock(&self.tables);
        let counts = match tables.get_mut(table) {
            Some(counts) => counts,
            None => tables.entry(Arc::from(table)).or_default(),
        };
        counts.events[index] += 1;
        counts.bytes[index] += bytes as u64;
    }

    /// Time spent handling one replication message.
    pub fn handled(&self, elapsed: Duration) {
        self.handler_latency.observe(elapsed);
    }

    /// The pipeline restarts after a transient failure.
    pub fn restarted(&self) {
        self.restarts.fetch_add(1, Ordering::Relaxed);
    }

    // ----- the Kafka side ---------------------------------------------------

    /// Everything before `lsn` is acknowledged by Kafka.
    pub fn acknowledged(&self, lsn: Lsn) {
        self.acknowledged_lsn.store(lsn.as_u64(), Ordering::Relaxed);
        lock(&self.unacknowledged).prune(lsn);
    }

    /// A record of `bytes` was handed to the producer.
    pub fn record_enqueued(&self, bytes: u64) {
        self.records_sent.fetch_add(1, Ordering::Relaxed);
        if self.in_flight_records.fetch_add(1, Ordering::Relaxed) <= 0 {
            // Waiting for Kafka starts now, not at the last delivery long ago.
            self.delivery_progress_at
                .store(self.now_mark(), Ordering::Relaxed);
        }
        self.in_flight_bytes
            .fetch_add(i64::try_from(bytes).unwrap_or(i64::MAX), Ordering::Relaxed);
    }

    /// Kafka acknowledged a record of `bytes`, `latency` after it was enqueued.
    pub fn record_delivered(&self, bytes: u64, latency: Duration) {
        self.records_acknowledged.fetch_add(1, Ordering::Relaxed);
        self.ack_latency.observe(latency);
        self.delivery_progress_at
            .store(self.now_mark(), Ordering::Relaxed);
        self.leave_flight(bytes);
    }

    /// A record of `bytes` failed for good (or was rejected before queueing).
    pub fn record_failed(&self, bytes: u64) {
        self.delivery_errors.fetch_add(1, Ordering::Relaxed);
        self.leave_flight(bytes);
    }

    /// Adds produce requests the producer retried since its last statistics.
    pub fn producer_retried(&self, requests: u64) {
        self.producer_retries.fetch_add(requests, Ordering::Relaxed);
    }

    fn leave_flight(&self, bytes: u64) {
        self.in_flight_records.fetch_sub(1, Ordering::Relaxed);
        self.in_flight_bytes
            .fetch_sub(i64::try_from(bytes).unwrap_or(i64::MAX), Ordering::Relaxed);
    }

    // ----- fed by the schema registry client and the snapshot ----------------

    /// A schema was registered (or found registered) in the registry.
    pub fn schema_registered(&self) {
        self.schema_registrations.fetch_add(1, Ordering::Relaxed);
    }

    /// A schema registry request failed.
    pub fn schema_registry_error(&self) {
        self.schema_registry_errors.fetch_add(1, Ordering::Relaxed);
    }

    /// An initial snapshot starts (its rows are counted as events with op `r`).
    pub fn snapshot_started(&self) {
        self.snapshot_running.store(1, Ordering::Relaxed);
        self.snapshot_tables.store(0, Ordering::Relaxed);
        self.snapshot_tables_done.store(0, Ordering::Relaxed);
        self.set_phase(Phase::Snapshotting);
    }

    /// The snapshot covers `tables` tables.
    pub fn snapshot_tables(&self, tables: u64) {
        self.snapshot_tables.store(tables, Ordering::Relaxed);
    }

    /// The snapshot finished one more table.
    pub fn snapshot_table_done(&self) {
        self.snapshot_tables_done.fetch_add(1, Ordering::Relaxed);
    }

    /// The snapshot ended (complete or interrupted).
    pub fn snapshot_finished(&self) {
        self.snapshot_running.store(0, Ordering::Relaxed);
    }

    /// An incremental snapshot chunk of `rows` rows was emitted.
    pub fn incremental_chunk(&self, rows: u64) {
        self.incremental_chunks.fetch_add(1, Ordering::Relaxed);
        self.incremental_rows.fetch_add(rows, Ordering::Relaxed);
    }

    /// An incremental snapshot finished one more table.
    pub fn incremental_table_done(&self) {
        self.incremental_tables_done.fetch_add(1, Ordering::Relaxed);
    }

    /// Tables the incremental snapshot still has to read.
    pub fn incremental_tables_remaining(&self, tables: u64) {
        self.incremental_tables_remaining
            .store(tables, Ordering::Relaxed);
    }

    // ----- reading ---------------------------------------------------------

    fn observe_replication(&self, replication: &ReplicationMetrics) {
        let applied = replication.last_applied_lsn().as_u64();
        self.confirmed_lsn.fetch_max(applied, Ordering::Relaxed);
        let wal_end = replication.last_wal_end().as_u64();
        self.server_wal_end.fetch_max(wal_end, Ordering::Relaxed);
    }

    /// Reads the attempt's clients into the stored values; returns the
    /// producer queue depth.
    fn sample(&self) -> u64 {
        let probes = lock(&self.probes);
        if let Some(replication) = &probes.replication {
            self.observe_replication(replication);
        }
        probes
            .producer_queue
            .as_ref()
            .and_then(|probe| probe())
            .unwrap_or(0)
    }

    /// A consistent-enough view of the values readiness and `status` need.
    pub fn snapshot(&self) -> Snapshot {
        let producer_queue_depth = self.sample();
        let now = unix_micros();
        let (lag_micros, last_acknowledged_commit_micros) = {
            let mut unacknowledged = lock(&self.unacknowledged);
            unacknowledged.prune(Lsn::new(self.acknowledged_lsn.load(Ordering::Relaxed)));
            (
                unacknowledged
                    .oldest()
                    .map_or(0, |t| now.saturating_sub(t).max(0)),
                unacknowledged.last_acknowledged,
            )
        };
        let confirmed = Lsn::new(self.confirmed_lsn.load(Ordering::Relaxed));
        let server_wal_end = Lsn::new(self.server_wal_end.load(Ordering::Relaxed));
        Snapshot {
            phase: self.phase(),
            received_lsn: Lsn::new(self.received_lsn.load(Ordering::Relaxed)),
            acknowledged_lsn: Lsn::new(self.acknowledged_lsn.load(Ordering::Relaxed)),
            confirmed_lsn: confirmed,
            server_wal_end,
            lag_bytes: if server_wal_end.is_zero() {
                0
            } else {
                server_wal_end.bytes_since(confirmed)
            },
            lag: Duration::from_micros(u64::try_from(lag_micros).unwrap_or(0)),
            last_acknowledged_commit_micros,
            last_keepalive_micros: Some(self.last_keepalive_micros.load(Ordering::Relaxed))
                .filter(|t| *t != 0),
            since_server_message: self.since_mark(&self.server_message_at),
            since_delivery_progress: self.since_mark(&self.delivery_progress_at),
            in_flight_records: u64::try_from(self.in_flight_records.load(Ordering::Relaxed))
                .unwrap_or(0),
            in_flight_bytes: u64::try_from(self.in_flight_bytes.load(Ordering::Relaxed))
                .unwrap_or(0),
            producer_queue_depth,
        }
    }

    /// Change events emitted so far for `table` with op code `op`.
    pub fn events(&self, table: &str, op: &str) -> u64 {
        let Some(index) = OPS.iter().position(|o| *o == op) else {
            return 0;
        };
        lock(&self.tables).get(table).map_or(0, |c| c.events[index])
    }

    /// The metrics in the Prometheus text exposition format (version 0.0.4);
    /// `ready` is what `/readyz` answers now.
    pub fn render(&self, ready: bool) -> String {
        let s = self.snapshot();
        let mut out = String::with_capacity(8 * 1024);
        let counter = |out: &mut String, name: &str, help: &str, value: u64| {
            header(out, name, help, "counter");
            let _ = writeln!(out, "{name} {value}");
        };
        let gauge = |out: &mut String, name: &str, help: &str, value: f64| {
            header(out, name, help, "gauge");
            let _ = writeln!(out, "{name} {value}");
        };
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);

        header(&mut out, names::BUILD_INFO, "Build information.", "gauge");
        let _ = writeln!(
            out,
            "{}{{version=\"{}\"}} 1",
            names::BUILD_INFO,
            env!("CARGO_PKG_VERSION")
        );
        header(
            &mut out,
            names::PHASE,
            "The run phase: 1 for the current one.",
            "gauge",
        );
        let current = s.phase.label();
        for label in Phase::LABELS {
            let value = u8::from(label == current);
            let _ = writeln!(out, "{}{{phase=\"{label}\"}} {value}", names::PHASE);
        }
        gauge(
            &mut out,
            names::READY,
            "1 when /readyz answers 200.",
            f64::from(u8::from(ready)),
        );

        gauge(
            &mut out,
            names::RECEIVED_LSN,
            "Everything before this WAL position (bytes) was read from the stream.",
            s.received_lsn.as_u64() as f64,
        );
        gauge(
            &mut out,
            names::ACKNOWLEDGED_LSN,
            "Everything before this WAL position (bytes) is acknowledged by Kafka.",
            s.acknowledged_lsn.as_u64() as f64,
        );
        gauge(
            &mut out,
            names::CONFIRMED_LSN,
            "WAL position (bytes) last confirmed to PostgreSQL for the slot.",
            s.confirmed_lsn.as_u64() as f64,
        );
        gauge(
            &mut out,
            names::SERVER_WAL_END_LSN,
            "The server's WAL end (bytes) as last reported on the replication connection.",
            s.server_wal_end.as_u64() as f64,
        );
        gauge(
            &mut out,
            names::LAG_BYTES,
            "Server WAL end minus the confirmed position: WAL retained on our account.",
            s.lag_bytes as f64,
        );
        gauge(
            &mut out,
            names::LAG_SECONDS,
            "Age of the oldest change read but not yet acknowledged by Kafka (0 when none).",
            s.lag.as_secs_f64(),
        );
        gauge(
            &mut out,
            names::LAST_ACKNOWLEDGED_COMMIT,
            "Commit time of the last fully acknowledged transaction (0 before the first).",
            s.last_acknowledged_commit_micros.unwrap_or(0) as f64 / 1e6,
        );
        gauge(
            &mut out,
            names::LAST_KEEPALIVE,
            "Time of the last keepalive from the server (0 before the first).",
            s.last_keepalive_micros.unwrap_or(0) as f64 / 1e6,
        );

        counter(
            &mut out,
            names::TRANSACTIONS,
            "Transactions read from the stream.",
            load(&self.transactions),
        );
        {
            let tables = lock(&self.tables);
            for (name, help, pick) in [
                (
                    names::EVENTS,
                    "Change events emitted, by table and op (m: logical decoding messages, table empty).",
                    (|c: &TableCounts, i: usize| c.events[i]) as fn(&TableCounts, usize) -> u64,
                ),
                (
                    names::EVENT_BYTES,
                    "Key and value bytes of emitted records (tombstones included), by table and op.",
                    |c: &TableCounts, i: usize| c.bytes[i],
                ),
            ] {
                header(&mut out, name, help, "counter");
                for (table, counts) in tables.iter() {
                    for (i, op) in OPS.iter().enumerate() {
                        if counts.events[i] > 0 {
                            let _ = writeln!(
                                out,
                                "{name}{{table=\"{}\",op=\"{op}\"}} {}",
                                escape_label(table),
                                pick(counts, i)
                            );
                        }
                    }
                }
            }
        }

        counter(
            &mut out,
            names::RECORDS_SENT,
            "Records handed to the Kafka producer.",
            load(&self.records_sent),
        );
        counter(
            &mut out,
            names::RECORDS_ACKNOWLEDGED,
            "Records acknowledged by Kafka.",
            load(&self.records_acknowledged),
        );
        counter(
            &mut out,
            names::DELIVERY_ERRORS,
            "Records Kafka did not accept, including those purged when an attempt ended.",
            load(&self.delivery_errors),
        );
        counter(
            &mut out,
            names::PRODUCER_RETRIES,
            "Produce requests the Kafka producer sent again after a failure or timeout \
             (sampled every 5 s from librdkafka's statistics).",
            load(&self.producer_retries),
        );
        gauge(
            &mut out,
            names::IN_FLIGHT_RECORDS,
            "Records handed to the producer and not yet acknowledged.",
            s.in_flight_records as f64,
        );
        gauge(
            &mut out,
            names::IN_FLIGHT_BYTES,
            "Bytes of the in-flight records.",
            s.in_flight_bytes as f64,
        );
        gauge(
            &mut out,
            names::PRODUCER_QUEUE_DEPTH,
            "Messages and requests in librdkafka's queues (rd_kafka_outq_len).",
            s.producer_queue_depth as f64,
        );
        self.ack_latency.render(
            &mut out,
            names::ACK_LATENCY,
            "Time from handing a record to the producer to its delivery report.",
        );
        self.handler_latency.render(
            &mut out,
            names::HANDLER_LATENCY,
            "Time to handle one replication message, including waits for in-flight capacity.",
        );

        counter(
            &mut out,
            names::RESTARTS,
            "Pipeline restarts (reconnects) after transient failures.",
            load(&self.restarts),
        );
        counter(
            &mut out,
            names::SCHEMA_REGISTRATIONS,
            "Schemas registered with the schema registry.",
            load(&self.schema_registrations),
        );
        counter(
            &mut out,
            names::SCHEMA_REGISTRY_ERRORS,
            "Failed schema registry requests.",
            load(&self.schema_registry_errors),
        );
        gauge(
            &mut out,
            names::SNAPSHOT_RUNNING,
            "1 while an initial snapshot runs.",
            load(&self.snapshot_running) as f64,
        );
        gauge(
            &mut out,
            names::SNAPSHOT_TABLES,
            "Tables the running or last snapshot covers.",
            load(&self.snapshot_tables) as f64,
        );
        gauge(
            &mut out,
            names::SNAPSHOT_TABLES_DONE,
            "Tables the running or last snapshot has finished.",
            load(&self.snapshot_tables_done) as f64,
        );
        counter(
            &mut out,
            names::INCREMENTAL_SNAPSHOT_ROWS,
            "Rows emitted by incremental snapshots.",
            load(&self.incremental_rows),
        );
        counter(
            &mut out,
            names::INCREMENTAL_SNAPSHOT_CHUNKS,
            "Incremental snapshot chunks emitted.",
            load(&self.incremental_chunks),
        );
        counter(
            &mut out,
            names::INCREMENTAL_SNAPSHOT_TABLES_DONE,
            "Tables incremental snapshots have finished.",
            load(&self.incremental_tables_done),
        );
        gauge(
            &mut out,
            names::INCREMENTAL_SNAPSHOT_TABLES_REMAINING,
            "Tables the running incremental snapshot still has to read.",
            load(&self.incremental_tables_remaining) as f64,
        );
        out
    }
}

/// Values of [`Metrics`] at one moment, as readiness and `status` need them.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub phase: Phase,
    pub received_lsn: Lsn,
    pub acknowledged_lsn: Lsn,
    pub confirmed_lsn: Lsn,
    pub server_wal_end: Lsn,
    pub lag_bytes: u64,
    pub lag: Duration,
    pub last_acknowledged_commit_micros: Option<i64>,
    pub last_keepalive_micros: Option<i64>,
    /// Time since the last message from the server (`None`: none yet).
    pub since_server_message: Option<Duration>,
    /// Time since the last delivery report, or since the in-flight set became
    /// non-empty, whichever is later (`None`: nothing sent yet).
    pub since_delivery_progress: Option<Duration>,
    pub in_flight_records: u64,
    pub in_flight_bytes: u64,
    pub producer_queue_depth: u64,
}

fn header(out: &mut String, name: &str, help: &str, kind: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// Escapes a label value: backslash, double quote and newline.
fn escape_label(value: &str) -> String {
    let mut escaped = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => escaped.push_str("\\\\"),
            '"' => escaped.push_str("\\\""),
            '\n' => escaped.push_str("\\n"),
            c => escaped.push(c),
        }
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The value of the sample `series` (name with labels) in `text`.
    fn sample(text: &str, series: &str) -> Option<f64> {
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
    }

    #[test]
    fn counts_events_per_table_and_op() {
        let m = Metrics::new();
        m.event("public.a", "c", 10);
        m.event("public.a", "c", 5);
        m.event("public.a", "d", 3);
        m.event("public.\"odd\"", "u", 1);
        m.event("", "m", 7);
        let text = m.render(true);
        assert_eq!(
            sample(&text, "pgcdc_events_total{table=\"public.a\",op=\"c\"}"),
            Some(2.0)
        );
        assert_eq!(
            sample(
                &text,
                "pgcdc_event_bytes_total{table=\"public.a\",op=\"c\"}"
            ),
            Some(15.0)
        );
        assert_eq!(
            sample(
                &text,
                "pgcdc_events_total{table=\"public.\\\"odd\\\"\",op=\"u\"}"
            ),
            Some(1.0)
        );
        assert_eq!(
            sample(&text, "pgcdc_events_total{table=\"\",op=\"m\"}"),
            Some(1.0)
        );
        assert_eq!(m.events("public.a", "d"), 1);
        assert_eq!(sample(&text, "pgcdc_ready"), Some(1.0));
    }

    #[test]
    fn every_metric_has_help_and_type_once() {
        let text = Metrics::new().render(false);
        for name in [
            names::LAG_BYTES,
            names::ACK_LATENCY,
            names::EVENTS,
            names::SNAPSHOT_RUNNING,
            names::PHASE,
        ] {
            let types = text
                .lines()
                .filter(|l| l.starts_with(&format!("# TYPE {name} ")))
                .count();
            assert_eq!(types, 1, "{name}");
        }
        assert_eq!(
            sample(&text, "pgcdc_phase{phase=\"connecting\"}"),
            Some(1.0)
        );
        assert_eq!(sample(&text, "pgcdc_phase{phase=\"streaming\"}"), Some(0.0));
    }

    #[test]
    fn lag_seconds_is_the_age_of_the_oldest_unacknowledged_transaction() {
        let m = Metrics::new();
        let now = unix_micros();
        assert_eq!(m.snapshot().lag, Duration::ZERO, "nothing read");
        m.transaction_begun(now - 5_000_000);
        let lag = m.snapshot().lag;
        assert!(
            lag >= Duration::from_secs(5),
            "open transaction counts: {lag:?}"
        );
        m.transaction_committed(Lsn::new(100), now - 5_000_000);
        m.transaction_begun(now - 1_000_000);
        m.transaction_committed(Lsn::new(200), now - 1_000_000);
        assert!(m.snapshot().lag >= Duration::from_secs(5));
        m.acknowledged(Lsn::new(100));
        let lag = m.snapshot().lag;
        assert!(
            lag >= Duration::from_secs(1) && lag < Duration::from_secs(5),
            "{lag:?}"
        );
        assert_eq!(
            m.snapshot().last_acknowledged_commit_micros,
            Some(now - 5_000_000)
        );
        m.acknowledged(Lsn::new(200));
        assert_eq!(m.snapshot().lag, Duration::ZERO, "all acknowledged");
    }

    #[test]
    fn committed_queue_stays_bounded_without_scrapes() {
        let m = Metrics::new();
        for i in 1..10_000u64 {
            m.transaction_begun(0);
            m.transaction_committed(Lsn::new(i * 10), 0);
            m.acknowledged(Lsn::new(i * 10));
        }
        assert!(lock(&m.unacknowledged).committed.is_empty());
    }

    #[test]
    fn lag_bytes_is_wal_end_minus_confirmed() {
        let m = Metrics::new();
        assert_eq!(m.snapshot().lag_bytes, 0, "no WAL end known yet");
        m.server_wal_end(Lsn::new(1_000));
        assert_eq!(m.snapshot().lag_bytes, 1_000);
        m.confirmed_lsn.store(400, Ordering::Relaxed);
        assert_eq!(m.snapshot().lag_bytes, 600);
        m.server_wal_end(Lsn::new(10));
        assert_eq!(
            m.snapshot().server_wal_end,
            Lsn::new(1_000),
            "never backwards"
        );
    }

    #[test]
    fn in_flight_and_delivery_progress() {
        let m = Metrics::new();
        assert_eq!(m.snapshot().since_delivery_progress, None);
        m.record_enqueued(100);
        m.record_enqueued(50);
        let s = m.snapshot();
        assert_eq!((s.in_flight_records, s.in_flight_bytes), (2, 150));
        assert!(s.since_delivery_progress.is_some());
        m.record_delivered(100, Duration::from_millis(3));
        m.record_failed(50);
        let s = m.snapshot();
        assert_eq!((s.in_flight_records, s.in_flight_bytes), (0, 0));
        m.producer_retried(2);
        m.producer_retried(3);
        let text = m.render(false);
        assert_eq!(
            sample(&text, "pgcdc_kafka_delivery_errors_total"),
            Some(1.0)
        );
        assert_eq!(
            sample(&text, "pgcdc_kafka_producer_retries_total"),
            Some(5.0)
        );
        assert_eq!(
            sample(
                &text,
                "pgcdc_kafka_ack_latency_seconds_bucket{le=\"0.005\"}"
            ),
            Some(1.0)
        );
        assert_eq!(
            sample(
                &text,
                "pgcdc_kafka_ack_latency_seconds_bucket{le=\"0.001\"}"
            ),
            Some(0.0)
        );
        assert_eq!(
            sample(&text, "pgcdc_kafka_ack_latency_seconds_count"),
            Some(1.0)
        );
    }

    #[test]
    fn producer_probe_is_dropped_with_its_guard() {
        let m = Metrics::new();
        let depth = Arc::new(7u64);
        let weak = Arc::downgrade(&depth);
        let guard = m.watch_producer_queue(move || weak.upgrade().map(|d| *d));
        assert_eq!(m.snapshot().producer_queue_depth, 7);
        drop(guard);
        assert_eq!(m.snapshot().producer_queue_depth, 0);
    }
}
