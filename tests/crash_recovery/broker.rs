//! The Kafka broker killed (`SIGKILL`) and restarted under a continuous
//! write load, with the default delivery settings: no delivery timeout
//! (`message.timeout.ms=0`, which `--skip-delivered` sets), so the producer
//! holds what it could not send and retries it, in order and idempotently,
//! once the broker is back. During the outage the slot must not be
//! confirmed past what Kafka acknowledged before it, and the connector must
//! not stop; afterwards every change must be in Kafka, in order, and none
//! twice. (A delivery timeout shorter than an outage makes deliveries fail
//! and the attempt start over from the slot: the network faults scenario,
//! a Kafka stall past `message.timeout.ms`. Outages the producer rides out
//! are also in `tests/stream_inserts.rs`, a clean broker stop.)

use super::*;

/// How long the broker stays down; its restart adds more.
const OUTAGE: Duration = Duration::from_secs(6);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_killed_and_restarted_under_load_loses_nothing() {
    const TABLES: [&str; 3] = ["carts", "payments", "shipments"];
    const SCENARIO: &str = "kafka broker killed";
    init_logs();
    let rounds = fault_rounds(1, 50);
    let pg = Postgres::shared();
    let kafka = tokio::task::spawn_blocking(|| {
        Kafka::launch().unwrap_or_else(|e| panic!("private kafka: {}", e.report()))
    })
    .await
    .expect("launch thread");
    let kafka = Arc::new(kafka);
    let bootstrap = kafka.bootstrap_servers();
    let s = Scenario::new(pg, "brokerkill");
    create_tables(&s, &TABLES);
    for topic in topics_of(&s, &TABLES) {
        kafka.create_topic(&topic, 2).expect("create topic");
    }
    let (rng, seed) = XorShift::seeded(SEED_ENV);
    println!("[{SCENARIO}] seed {seed}");
    let running = s.start(&bootstrap, &["--status-interval", "200ms"]);
    s.await_slot().await;
    let stop_writer = Arc::new(AtomicBool::new(false));
    let writer = tokio::spawn(write_continuously(
        pg,
        s.db.clone(),
        Workload::new(&TABLES, rng.0),
        Arc::clone(&stop_writer),
    ));

    let mut running = running;
    for round in 1..=rounds {
        s.await_confirmed_past_now("the connector streaming under load before the kill")
            .await;
        assert!(
            !running.is_finished(),
            "the connector stopped before the kill"
        );
        let broker = Arc::clone(&kafka);
        tokio::task::spawn_blocking(move || broker.kill())
            .await
            .expect("kill thread")
            .unwrap_or_else(|e| panic!("broker killed: {}", e.report()));
        let at_kill = s.current_lsn();
        // Nothing written from here on can be acknowledged, so the slot
        // must stay at or before the WAL position of the kill.
        hold_for(OUTAGE, || async {
            let confirmed = s.confirmed_flush_lsn().expect("slot exists");
            assert!(
                confirmed <= at_kill,
                "round {round}: slot confirmed to {confirmed} while the broker was down \
                 (killed at WAL {at_kill})"
            );
        })
        .await;
        assert!(
            !running.is_finished(),
            "the connector waits for the broker rather than stopping"
        );
        let broker = Arc::clone(&kafka);
        tokio::task::spawn_blocking(move || broker.start())
            .await
            .expect("start thread")
            .unwrap_or_else(|e| panic!("broker restarts: {}", e.report()));
        let restarted = Instant::now();
        let (back, took) = await_all_arrived(
            "rows written before and during the outage",
            &s,
            &bootstrap,
            &TABLES,
            running,
        )
        .await;
        running = back;
        println!(
            "[{SCENARIO}] round {round}: down {OUTAGE:?}; every row up to the restart in Kafka \
             {:?} after it (waited {took:?})",
            restarted.elapsed()
        );
    }

    stop_writer.store(true, Ordering::Relaxed);
    let stats = writer.await.expect("writer task");
    await_confirmed_past(&s, s.current_lsn(), None).await;
    running.stop().await;
    let verified = verify_tables(
        SCENARIO,
        &s,
        &bootstrap,
        &TABLES,
        stats.changes,
        json_decoder(),
    )
    .await;
    // The producer's retries are idempotent and the attempt never failed:
    // nothing was sent twice.
    assert_eq!(
        verified.duplicates, 0,
        "a broker restart re-sent records Kafka already had"
    );
}
