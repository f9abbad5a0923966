//! The Prometheus side of [`Metrics`]: a prometheus-client [`Registry`] per
//! `Metrics`, every series registered in it, and a scrape in the Prometheus
//! text exposition format, version 0.0.4 ([`CONTENT_TYPE`]).
//!
//! # Invariants
//!
//! - One registry per [`Metrics`], never a process-global one: several
//!   connectors run in one process (the tests, fleet mode), each with its own
//!   series.
//! - Every series is registered in [`Exposition::new`], once, under its name
//!   from [`names`], in the order a scrape lists it. prometheus-client adds a
//!   counter's `_total` and an info's `_info` itself, and ends every HELP text
//!   with a period; both are taken off here, so the exported names and HELP
//!   texts are exactly those of `names` and of this file.
//! - Recording stays as cheap as it was: counters and stored gauges are
//!   prometheus-client handles over one atomic (a relaxed add or store); the
//!   latency histograms are our own atomic buckets ([`LatencyHistogram`]),
//!   because prometheus-client's `Histogram` takes a lock per observation;
//!   per-table counts stay in their map ([`Tables`]) and are encoded as a
//!   counter family only when scraped.
//! - Values derived from several facts (phase, readiness, positions, lag,
//!   in-flight work, the producer's queue) are gauges set from one
//!   [`Snapshot`] just before the registry is encoded, under a lock that only
//!   scrapes take: a scrape shows one moment, and recording never touches
//!   them.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::encoding::prometheus_text;
use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::info::Info;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Metric, Registry};

use super::notifications::Notifications;
use super::process::ProcessCollector;
use super::streamed::StreamedMetrics;
use super::{lock, names, Metrics, Phase, Snapshot};

/// The `Content-Type` of a scrape: the Prometheus text format 0.0.4.
pub const CONTENT_TYPE: &str = prometheus_text::CONTENT_TYPE;

/// A gauge over a `u64` (positions, byte counts, table counts).
pub(super) type U64Gauge = Gauge<u64, AtomicU64>;
/// A gauge over an `f64` (seconds).
type F64Gauge = Gauge<f64, AtomicU64>;

/// Upper bounds (seconds) of the latency histograms' buckets.
const LATENCY_BUCKETS: [f64; 14] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// A latency histogram with fixed buckets ([`LATENCY_BUCKETS`]): an
/// observation is two relaxed atomic adds. Clones share the buckets.
#[derive(Debug, Default, Clone)]
pub(super) struct LatencyHistogram(Arc<Buckets>);

#[derive(Debug, Default)]
struct Buckets {
    /// Per-bucket (not cumulative) counts; the last one is `+Inf`.
    counts: [AtomicU64; LATENCY_BUCKETS.len() + 1],
    sum_micros: AtomicU64,
}

impl LatencyHistogram {
    /// Records one observation.
    pub(super) fn observe(&self, elapsed: Duration) {
        let seconds = elapsed.as_secs_f64();
        let index = LATENCY_BUCKETS
            .iter()
            .position(|bound| seconds <= *bound)
            .unwrap_or(LATENCY_BUCKETS.len());
        if let Some(bucket) = self.0.counts.get(index) {
            bucket.fetch_add(1, Ordering::Relaxed);
        }
        let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        self.0.sum_micros.fetch_add(micros, Ordering::Relaxed);
    }
}

impl EncodeMetric for LatencyHistogram {
    fn encode(&self, mut encoder: MetricEncoder) -> fmt::Result {
        // Each bucket is read once, so `_count` (the `+Inf` bucket) is the
        // sum of the buckets shown even while observations arrive.
        let counts = self.0.counts.each_ref().map(|c| c.load(Ordering::Relaxed));
        let mut buckets = [(0.0, 0); LATENCY_BUCKETS.len()];
        for (bucket, (bound, count)) in buckets.iter_mut().zip(LATENCY_BUCKETS.iter().zip(counts)) {
            *bucket = (*bound, count);
        }
        let count = counts.iter().sum();
        let sum = self.0.sum_micros.load(Ordering::Relaxed) as f64 / 1e6;
        encoder.encode_histogram::<NoLabelSet>(sum, count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

/// The `op` label values of [`names::EVENTS`]: Debezium's op codes, and `m`
/// for logical decoding messages.
pub(super) const OPS: [&str; 6] = ["c", "u", "d", "t", "r", "m"];

/// Events and their bytes of one table, per op (indexed like [`OPS`]).
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct TableCounts {
    pub(super) events: [u64; OPS.len()],
    pub(super) bytes: [u64; OPS.len()],
}

/// Per-table counts by `schema.table`; grows with the published tables only.
pub(super) type Tables = Arc<Mutex<BTreeMap<Arc<str>, TableCounts>>>;

/// A counter family over [`Tables`], labelled `table` and `op`, in table
/// order; a series appears once its table had an event with that op.
#[derive(Debug)]
struct TableCounters {
    tables: Tables,
    /// Which of the two counts this family shows.
    pick: fn(&TableCounts) -> &[u64; OPS.len()],
}

impl EncodeMetric for TableCounters {
    fn encode(&self, mut encoder: MetricEncoder) -> fmt::Result {
        let tables = lock(&self.tables);
        for (table, counts) in tables.iter() {
            let values = (self.pick)(counts);
            for ((op, events), value) in OPS.iter().zip(counts.events).zip(values) {
                if events > 0 {
                    let labels = [("table", &**table), ("op", *op)];
                    encoder
                        .encode_family(&labels)?
                        .encode_counter::<NoLabelSet, u64, u64>(value, None)?;
                }
            }
        }
        Ok(())
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Counter
    }
}

/// [`names::PHASE`]: a series per phase in [`Phase::LABELS`] order, 1 for
/// the current one (stored as its index there).
#[derive(Debug, Default, Clone)]
struct PhaseGauge(Arc<AtomicUsize>);

impl PhaseGauge {
    fn set(&self, phase: &Phase) {
        let label = phase.label();
        let index = Phase::LABELS.iter().position(|l| *l == label);
        self.0.store(index.unwrap_or(usize::MAX), Ordering::Relaxed);
    }
}

impl EncodeMetric for PhaseGauge {
    fn encode(&self, mut encoder: MetricEncoder) -> fmt::Result {
        let current = self.0.load(Ordering::Relaxed);
        for (index, phase) in Phase::LABELS.iter().enumerate() {
            encoder
                .encode_family(&[("phase", *phase)])?
                .encode_gauge(&i64::from(index == current))?;
        }
        Ok(())
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Gauge
    }
}

/// The series derived when scraped, set from one [`Snapshot`].
#[derive(Debug, Default)]
struct Live {
    phase: PhaseGauge,
    ready: Gauge,
    received_lsn: U64Gauge,
    acknowledged_lsn: U64Gauge,
    confirmed_lsn: U64Gauge,
    server_wal_end: U64Gauge,
    lag_bytes: U64Gauge,
    lag_seconds: F64Gauge,
    last_acknowledged_commit: F64Gauge,
    last_keepalive: F64Gauge,
    in_flight_records: U64Gauge,
    in_flight_bytes: U64Gauge,
    producer_queue_depth: U64Gauge,
}

impl Live {
    fn set(&self, s: &Snapshot, ready: bool) {
        let unix_seconds = |micros: Option<i64>| micros.unwrap_or(0) as f64 / 1e6;
        self.phase.set(&s.phase);
        self.ready.set(i64::from(ready));
        self.received_lsn.set(s.received_lsn.as_u64());
        self.acknowledged_lsn.set(s.acknowledged_lsn.as_u64());
        self.confirmed_lsn.set(s.confirmed_lsn.as_u64());
        self.server_wal_end.set(s.server_wal_end.as_u64());
        self.lag_bytes.set(s.lag_bytes);
        self.lag_seconds.set(s.lag.as_secs_f64());
        self.last_acknowledged_commit
            .set(unix_seconds(s.last_acknowledged_commit_micros));
        self.last_keepalive
            .set(unix_seconds(s.last_keepalive_micros));
        self.in_flight_records.set(s.in_flight_records);
        self.in_flight_bytes.set(s.in_flight_bytes);
        self.producer_queue_depth.set(s.producer_queue_depth);
    }
}

/// The registry of one [`Metrics`] and the series it derives when scraped.
#[derive(Debug, Default)]
pub(super) struct Exposition {
    registry: Registry,
    /// Streamed transactions and the spool ([`super::streamed`]).
    pub(super) streamed: StreamedMetrics,
    /// Snapshot notifications by kind ([`super::notifications`]).
    pub(super) notifications: Notifications,
    /// Taken by scrapes only, from setting these gauges to encoding them.
    live: Mutex<Live>,
}

impl Exposition {
    /// Registers every series of `m`, in the order a scrape lists them.
    ///
    /// Long on purpose: one registration per exported metric, each with its
    /// help text, read top to bottom as the scrape page is; split up, the
    /// order of the page would no longer be visible in one place.
    pub(super) fn new(m: &Metrics) -> Self {
        let live = Live::default();
        let mut r = Registry::default();
        let build = [
            ("version", crate::build_info::VERSION),
            ("commit", crate::build_info::COMMIT),
            ("librdkafka", crate::build_info::librdkafka_version()),
        ];
        info(
            &mut r,
            names::BUILD_INFO,
            "Build information: the version, git commit and librdkafka version.",
            build,
        );
        register(
            &mut r,
            names::PHASE,
            "The run phase: 1 for the current one.",
            live.phase.clone(),
        );
        register(
            &mut r,
            names::READY,
            "1 when /readyz answers 200.",
            live.ready.clone(),
        );

        // The positions under their names with the unit, then under the
        // names they had before (deprecated, same values).
        let positions = [
            (
                names::RECEIVED_LSN_BYTES,
                names::RECEIVED_LSN,
                "Everything before this WAL position (bytes) was read from the stream.",
                &live.received_lsn,
            ),
            (
                names::ACKNOWLEDGED_LSN_BYTES,
                names::ACKNOWLEDGED_LSN,
                "Everything before this WAL position (bytes) is acknowledged by Kafka.",
                &live.acknowledged_lsn,
            ),
            (
                names::CONFIRMED_LSN_BYTES,
                names::CONFIRMED_LSN,
                "WAL position (bytes) last confirmed to PostgreSQL for the slot.",
                &live.confirmed_lsn,
            ),
            (
                names::SERVER_WAL_END_LSN_BYTES,
                names::SERVER_WAL_END_LSN,
                "The server's WAL end (bytes) as last reported on the replication connection.",
                &live.server_wal_end,
            ),
        ];
        for (name, _, text, gauge) in positions {
            register(&mut r, name, text, gauge.clone());
        }
        for (name, old, _, gauge) in positions {
            r.register(
                old,
                format!("Deprecated name of {name} (same value)"),
                gauge.clone(),
            );
        }
        register(
            &mut r,
            names::LAG_BYTES,
            "Server WAL end minus the confirmed position: WAL retained on our account.",
            live.lag_bytes.clone(),
        );
        register(
            &mut r,
            names::LAG_SECONDS,
            "Age of the oldest change read but not yet acknowledged by Kafka (0 when none).",
            live.lag_seconds.clone(),
        );
        register(
            &mut r,
            names::LAST_ACKNOWLEDGED_COMMIT,
            "Commit time of the last fully acknowledged transaction (0 before the first).",
            live.last_acknowledged_commit.clone(),
        );
        register(
            &mut r,
            names::LAST_KEEPALIVE,
            "Time of the last keepalive from the server (0 before the first).",
            live.last_keepalive.clone(),
        );

        counter(
            &mut r,
            names::TRANSACTIONS,
            "Transactions read from the stream.",
            m.transactions.clone(),
        );
        counter(
            &mut r,
            names::EVENTS,
            "Change events emitted, by table and op (m: logical decoding messages, table empty).",
            TableCounters {
                tables: Arc::clone(&m.tables),
                pick: |c| &c.events,
            },
        );
        counter(
            &mut r,
            names::EVENT_BYTES,
            "Key and value bytes of emitted records (tombstones included), by table and op.",
            TableCounters {
                tables: Arc::clone(&m.tables),
                pick: |c| &c.bytes,
            },
        );

        counter(
            &mut r,
            names::RECORDS_SENT,
            "Records handed to the Kafka producer.",
            m.records_sent.clone(),
        );
        counter(
            &mut r,
            names::RECORDS_ACKNOWLEDGED,
            "Records acknowledged by Kafka.",
            m.records_acknowledged.clone(),
        );
        counter(
            &mut r,
            names::DELIVERY_ERRORS,
            "Records Kafka did not accept, including those purged when an attempt ended.",
            m.delivery_errors.clone(),
        );
        counter(
            &mut r,
            names::ALREADY_DELIVERED,
            "Replayed records not sent again after a restart because Kafka already had them \
             (--skip-delivered).",
            m.already_delivered.clone(),
        );
        counter(
            &mut r,
            names::TAIL_READ_FAILURES,
            "Topics whose partition tails could not be read at a restart, so their replayed \
             records were sent again.",
            m.tail_read_failures.clone(),
        );
        counter(
            &mut r,
            names::PRODUCER_RETRIES,
            "Produce requests the Kafka producer sent again after a failure or timeout \
             (sampled every 5 s from librdkafka's statistics).",
            m.producer_retries.clone(),
        );
        register(
            &mut r,
            names::IN_FLIGHT_RECORDS,
            "Records handed to the producer and not yet acknowledged.",
            live.in_flight_records.clone(),
        );
        register(
            &mut r,
            names::IN_FLIGHT_BYTES,
            "Bytes of the in-flight records.",
            live.in_flight_bytes.clone(),
        );
        register(
            &mut r,
            names::PRODUCER_QUEUE_DEPTH,
            "Messages and requests in librdkafka's queues (rd_kafka_outq_len).",
            live.producer_queue_depth.clone(),
        );
        register(
            &mut r,
            names::ACK_LATENCY,
            "Time from handing a record to the producer to its delivery report.",
            m.ack_latency.clone(),
        );
        register(
            &mut r,
            names::HANDLER_LATENCY,
            "Time to handle one replication message, including waits for in-flight capacity.",
            m.handler_latency.clone(),
        );

        counter(
            &mut r,
            names::RESTARTS,
            "Pipeline restarts (reconnects) after transient failures.",
            m.restarts.clone(),
        );
        counter(
            &mut r,
            names::SCHEMA_REGISTRATIONS,
            "Schemas registered with the schema registry.",
            m.schema_registrations.clone(),
        );
        counter(
            &mut r,
            names::SCHEMA_REGISTRY_ERRORS,
            "Failed schema registry requests.",
            m.schema_registry_errors.clone(),
        );
        register(
            &mut r,
            names::SNAPSHOT_RUNNING,
            "1 while an initial snapshot runs.",
            m.snapshot_running.clone(),
        );
        register(
            &mut r,
            names::SNAPSHOT_TABLES,
            "Tables the running or last snapshot covers.",
            m.snapshot_tables.clone(),
        );
        register(
            &mut r,
            names::SNAPSHOT_TABLES_DONE,
            "Tables the running or last snapshot has finished.",
            m.snapshot_tables_done.clone(),
        );
        counter(
            &mut r,
            names::INCREMENTAL_SNAPSHOT_ROWS,
            "Rows emitted by incremental snapshots.",
            m.incremental_rows.clone(),
        );
        counter(
            &mut r,
            names::INCREMENTAL_SNAPSHOT_CHUNKS,
            "Incremental snapshot chunks emitted.",
            m.incremental_chunks.clone(),
        );
        counter(
            &mut r,
            names::SNAPSHOT_READS_DEFERRED,
            "Snapshot reads put off: their snapshot did not see yet a transaction the stream had carried.",
            m.snapshot_reads_deferred.clone(),
        );
        counter(
            &mut r,
            names::INCREMENTAL_SNAPSHOT_TABLES_DONE,
            "Tables incremental snapshots have finished.",
            m.incremental_tables_done.clone(),
        );
        register(
            &mut r,
            names::INCREMENTAL_SNAPSHOT_TABLES_REMAINING,
            "Tables the running incremental snapshot still has to read.",
            m.incremental_tables_remaining.clone(),
        );
        let notifications = Notifications::default();
        notifications.register(&mut r);
        let streamed = StreamedMetrics::default();
        streamed.register(&mut r);
        r.register_collector(Box::new(ProcessCollector));
        Exposition {
            registry: r,
            streamed,
            notifications,
            live: Mutex::new(live),
        }
    }

    /// The scrape: every series, the derived ones taken from `snapshot` and
    /// `ready` (what `/readyz` answers now).
    pub(super) fn encode(&self, snapshot: &Snapshot, ready: bool) -> String {
        let mut out = String::with_capacity(8 * 1024);
        let live = lock(&self.live);
        live.set(snapshot, ready);
        // Writing into a String cannot fail, and none of our metrics fails on
        // its own: an error here would be a broken invariant of the encoder.
        let encoded = prometheus_text::encode(&mut out, &self.registry);
        debug_assert!(encoded.is_ok(), "encoding metrics into a String failed");
        out
    }
}

/// The HELP text as the registry takes it: it appends the final period.
fn help(text: &'static str) -> &'static str {
    text.strip_suffix('.').unwrap_or(text)
}

/// Registers a gauge or a histogram under exactly `name`.
fn register(r: &mut Registry, name: &'static str, text: &'static str, metric: impl Metric) {
    r.register(name, help(text), metric);
}

/// Registers a counter; prometheus-client appends the `_total` of `name`.
fn counter(r: &mut Registry, name: &'static str, text: &'static str, metric: impl Metric) {
    let base = name.strip_suffix("_total");
    debug_assert!(base.is_some(), "counter {name} must end with _total");
    r.register(base.unwrap_or(name), help(text), metric);
}

/// Registers an info series, constant 1; prometheus-client appends the
/// `_info` of `name`.
fn info<const N: usize>(
    r: &mut Registry,
    name: &'static str,
    text: &'static str,
    labels: [(&'static str, &'static str); N],
) {
    let base = name.strip_suffix("_info");
    debug_assert!(base.is_some(), "info {name} must end with _info");
    r.register(base.unwrap_or(name), help(text), Info::new(labels));
}

#[cfg(test)]
mod tests {
    use super::*;

    use prometheus_client::metrics::counter::Counter;

    #[test]
    fn histogram_buckets_are_cumulative_and_count_matches() {
        let h = LatencyHistogram::default();
        h.observe(Duration::from_micros(500));
        h.observe(Duration::from_millis(3));
        h.observe(Duration::from_secs(60));
        let mut r = Registry::default();
        register(&mut r, "h_seconds", "H.", h.clone());
        let mut text = String::new();
        prometheus_text::encode(&mut text, &r).expect("encode");
        assert!(text.contains("# HELP h_seconds H.\n"), "{text}");
        assert!(
            text.contains("h_seconds_bucket{le=\"0.001\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("h_seconds_bucket{le=\"0.005\"} 2\n"),
            "{text}"
        );
        assert!(text.contains("h_seconds_bucket{le=\"30\"} 2\n"), "{text}");
        assert!(text.contains("h_seconds_bucket{le=\"+Inf\"} 3\n"), "{text}");
        assert!(text.contains("h_seconds_count 3\n"), "{text}");
        assert!(text.contains("h_seconds_sum 60.0035\n"), "{text}");
    }

    #[test]
    fn counter_and_info_names_keep_their_suffix() {
        let mut r = Registry::default();
        counter(&mut r, "c_total", "A counter.", Counter::<u64>::default());
        info(&mut r, "b_info", "Build.", [("version", "1")]);
        let mut text = String::new();
        prometheus_text::encode(&mut text, &r).expect("encode");
        assert_eq!(
            text,
            "# HELP c_total A counter.\n# TYPE c_total counter\nc_total 0\n\
             # HELP b_info Build.\n# TYPE b_info gauge\nb_info{version=\"1\"} 1\n"
        );
    }
}
