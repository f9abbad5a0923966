//! The connector's metrics and its run phase, served in the Prometheus text
//! exposition format on `--metrics-addr` (see [`crate::http`]).
//!
//! Every metric name is a constant in [`names`], the one list of what the
//! connector exports; `docs/METRICS.md` describes each. The pipeline and the
//! Kafka delivery callback record into one shared [`Metrics`]: counters and
//! gauges are relaxed atomics, so recording never blocks the read loop or
//! librdkafka's polling thread; the few structured values (per-table counts,
//! the phase, the commit times of unacknowledged transactions) sit behind
//! short `std::sync::Mutex` sections that are never held across an `.await`.
//! Each `Metrics` owns its prometheus-client registry (`metrics/exposition.rs`): no
//! process-global state, so connectors in one process keep apart.
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
//! Per-table label sets grow with the number of published tables only; the queue of unacknowledged
//! commit times is pruned as acknowledgements arrive, holding at most the ack tracker's transactions.
//!
//! Prometheus samples are `f64`: LSNs are exact up to 2^53 bytes (8 PiB) of WAL, beyond any server.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::lsn::Lsn;
use crate::source::replication::ReplicationMetrics;
mod exposition;
pub mod fleet;
pub mod labelled;
pub mod names;
mod notifications;
mod phase;
pub mod process;
pub mod streamed;

pub use exposition::CONTENT_TYPE;
pub use phase::Phase;

use exposition::{Exposition, LatencyHistogram, Tables, U64Gauge, OPS};
use prometheus_client::metrics::counter::Counter;

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
///
/// Counters, the snapshot gauges and the histograms are handles shared with
/// the registry in `exposition`; positions, times, in-flight work and the
/// phase are plain values here, turned into gauges when scraped.
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

    transactions: Counter,
    tables: Tables,
    unacknowledged: Mutex<Unacknowledged>,

    records_sent: Counter,
    records_acknowledged: Counter,
    delivery_errors: Counter,
    already_delivered: Counter,
    tail_read_failures: Counter,
    producer_retries: Counter,
    in_flight_records: AtomicI64,
    in_flight_bytes: AtomicI64,
    ack_latency: LatencyHistogram,
    handler_latency: LatencyHistogram,

    restarts: Counter,
    schema_registrations: Counter,
    schema_registry_errors: Counter,
    snapshot_running: U64Gauge,
    snapshot_tables: U64Gauge,
    snapshot_tables_done: U64Gauge,
    incremental_rows: Counter,
    incremental_chunks: Counter,
    incremental_tables_done: Counter,
    incremental_tables_remaining: U64Gauge,
    snapshot_reads_deferred: Counter,

    probes: Mutex<Probes>,
    /// `--startup-timeout`: PostgreSQL / Kafka answered at least once.
    answered_postgres: AtomicBool,
    answered_kafka: AtomicBool,
    exposition: Exposition,
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
        let mut metrics = Metrics {
            started: Instant::now(),
            phase: Mutex::new(Phase::Connecting),
            received_lsn: AtomicU64::new(0),
            acknowledged_lsn: AtomicU64::new(0),
            confirmed_lsn: AtomicU64::new(0),
            server_wal_end: AtomicU64::new(0),
            server_message_at: AtomicU64::new(0),
            delivery_progress_at: AtomicU64::new(0),
            last_keepalive_micros: AtomicI64::new(0),
            transactions: Counter::default(),
            tables: Tables::default(),
            unacknowledged: Mutex::new(Unacknowledged::default()),
            records_sent: Counter::default(),
            records_acknowledged: Counter::default(),
            delivery_errors: Counter::default(),
            already_delivered: Counter::default(),
            tail_read_failures: Counter::default(),
            producer_retries: Counter::default(),
            in_flight_records: AtomicI64::new(0),
            in_flight_bytes: AtomicI64::new(0),
            ack_latency: LatencyHistogram::default(),
            handler_latency: LatencyHistogram::default(),
            restarts: Counter::default(),
            schema_registrations: Counter::default(),
            schema_registry_errors: Counter::default(),
            snapshot_running: U64Gauge::default(),
            snapshot_tables: U64Gauge::default(),
            snapshot_tables_done: U64Gauge::default(),
            incremental_rows: Counter::default(),
            incremental_chunks: Counter::default(),
            incremental_tables_done: Counter::default(),
            incremental_tables_remaining: U64Gauge::default(),
            snapshot_reads_deferred: Counter::default(),
            probes: Mutex::new(Probes::default()),
            answered_postgres: AtomicBool::new(false),
            answered_kafka: AtomicBool::new(false),
            // Replaced below by the registry of the handles above.
            exposition: Exposition::default(),
        };
        metrics.exposition = Exposition::new(&metrics);
        metrics
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
        self.transactions.inc();
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
        self.restarts.inc();
    }

    // ----- the Kafka side ---------------------------------------------------

    /// Everything before `lsn` is acknowledged by Kafka.
    pub fn acknowledged(&self, lsn: Lsn) {
        self.acknowledged_lsn.store(lsn.as_u64(), Ordering::Relaxed);
        lock(&self.unacknowledged).prune(lsn);
    }

    /// A record of `bytes` was handed to the producer.
    pub fn record_enqueued(&self, bytes: u64) {
        self.records_sent.inc();
        if self.in_flight_records.fetch_add(1, Ordering::Relaxed) <= 0 {
            // Waiting for Kafka starts now, not at the last delivery long ago.
            self.delivery_progress_at
                .store(self.now_mark(), Ordering::Relaxed);
        }
        self.in_flight_bytes
            .fetch_add(i64::try_from(bytes).unwrap_or(i64::MAX), Ordering::Relaxed);
    }

    /// Kafka acknowledged a record of `bytes` `now`, `latency` after it was
    /// enqueued (one clock read per record, the caller's).
    pub fn record_delivered(&self, bytes: u64, latency: Duration, now: Instant) {
        self.records_acknowledged.inc();
        self.ack_latency.observe(latency);
        (self.delivery_progress_at).store(self.mark_at(now), Ordering::Relaxed);
        self.leave_flight(bytes);
    }

    /// A record of `bytes` failed for good (or was rejected before queueing).
    pub fn record_failed(&self, bytes: u64) {
        self.delivery_errors.inc();
        self.leave_flight(bytes);
    }

    /// A replayed record was not sent: Kafka already had it (`--skip-delivered`).
    pub fn record_already_delivered(&self) {
        self.already_delivered.inc();
    }

    /// A topic's partition tails could not be read: its replayed records
    /// are sent again.
    pub fn tail_read_failed(&self) {
        self.tail_read_failures.inc();
    }

    /// Adds produce requests the producer retried since its last statistics.
    pub fn producer_retried(&self, requests: u64) {
        self.producer_retries.inc_by(requests);
    }

    fn leave_flight(&self, bytes: u64) {
        self.in_flight_records.fetch_sub(1, Ordering::Relaxed);
        self.in_flight_bytes
            .fetch_sub(i64::try_from(bytes).unwrap_or(i64::MAX), Ordering::Relaxed);
    }

    // ----- fed by the schema registry client and the snapshot ----------------

    /// A schema was registered (or found registered) in the registry.
    pub fn schema_registered(&self) {
        self.schema_registrations.inc();
    }

    /// A schema registry request failed.
    pub fn schema_registry_error(&self) {
        self.schema_registry_errors.inc();
    }

    /// An initial snapshot starts (its rows are counted as events with op `r`).
    pub fn snapshot_started(&self) {
        self.snapshot_running.set(1);
        self.snapshot_tables.set(0);
        self.snapshot_tables_done.set(0);
        self.set_phase(Phase::Snapshotting);
    }

    /// The snapshot covers `tables` tables.
    pub fn snapshot_tables(&self, tables: u64) {
        self.snapshot_tables.set(tables);
    }

    /// The snapshot finished one more table.
    pub fn snapshot_table_done(&self) {
        self.snapshot_tables_done.inc();
    }

    /// The snapshot ended (complete or interrupted).
    pub fn snapshot_finished(&self) {
        self.snapshot_running.set(0);
    }

    /// An incremental snapshot chunk of `rows` rows was emitted.
    pub fn incremental_chunk(&self, rows: u64) {
        self.incremental_chunks.inc();
        self.incremental_rows.inc_by(rows);
    }

    /// A snapshot read (an incremental window's chunks, a blocking
    /// snapshot) was put off: its snapshot did not see a transaction the
    /// stream had carried.
    pub fn snapshot_read_deferred(&self) {
        self.snapshot_reads_deferred.inc();
    }

    /// An incremental snapshot finished one more table.
    pub fn incremental_table_done(&self) {
        self.incremental_tables_done.inc();
    }

    /// Tables the incremental snapshot still has to read.
    pub fn incremental_tables_remaining(&self, tables: u64) {
        self.incremental_tables_remaining.set(tables);
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

    /// Records handed to the producer and not yet acknowledged or failed.
    pub fn in_flight_records(&self) -> u64 {
        u64::try_from(self.in_flight_records.load(Ordering::Relaxed)).unwrap_or(0)
    }

    /// Records Kafka acknowledged so far.
    pub fn records_acknowledged(&self) -> u64 {
        self.records_acknowledged.get()
    }

    /// PostgreSQL answered (a connection was made) at least once.
    pub fn postgres_answered(&self) {
        self.answered_postgres.store(true, Ordering::Relaxed);
    }

    /// A Kafka broker answered (a connection was up, or a record was
    /// acknowledged) at least once.
    pub fn kafka_answered(&self) {
        self.answered_kafka.store(true, Ordering::Relaxed);
    }

    /// Which of PostgreSQL and Kafka have answered so far: `(postgres, kafka)`.
    pub fn answered(&self) -> (bool, bool) {
        (
            self.answered_postgres.load(Ordering::Relaxed),
            self.answered_kafka.load(Ordering::Relaxed),
        )
    }

    /// Change events emitted so far for `table` with op code `op`.
    pub fn events(&self, table: &str, op: &str) -> u64 {
        let Some(index) = OPS.iter().position(|o| *o == op) else {
            return 0;
        };
        lock(&self.tables).get(table).map_or(0, |c| c.events[index])
    }

    /// The metrics in the Prometheus text exposition format (version 0.0.4,
    /// [`CONTENT_TYPE`]); `ready` is what `/readyz` answers now.
    pub fn render(&self, ready: bool) -> String {
        self.exposition.encode(&self.snapshot(), ready)
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

#[cfg(test)]
mod tests;
