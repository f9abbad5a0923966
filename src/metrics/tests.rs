//! Unit tests of the metrics: what each hook records, and the exposition.

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
        names::BUILD_INFO,
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
    let build = format!(
        "{}{{version=\"{}\",commit=\"{}\",librdkafka=\"{}\"}}",
        names::BUILD_INFO,
        crate::build_info::VERSION,
        crate::build_info::COMMIT,
        crate::build_info::librdkafka_version()
    );
    assert_eq!(sample(&text, &build), Some(1.0), "{build} in:\n{text}");
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
    m.record_delivered(100, Duration::from_millis(3), Instant::now());
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
