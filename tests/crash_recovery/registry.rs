//! Faults around the schema registry, in Avro mode: the connector binary
//! killed while it registers a changed table's schema, and the registry
//! unreachable across a schema change. The registry sits behind a
//! [`FaultProxy`] so its requests can be slowed, stalled and refused while
//! the registry itself (and the schemas it holds) stays up; the records are
//! decoded with the writer schemas fetched from the registry directly, by id,
//! never with the connector's own.

use pgcdc_testcontainers::SchemaRegistry;

use super::*;
use crate::common::avro_reader::AvroReader;

/// The shared registry, started off the async runtime.
async fn registry() -> &'static SchemaRegistry {
    tokio::task::spawn_blocking(SchemaRegistry::shared)
        .await
        .expect("registry launch thread")
}

/// `registry`'s API URL through `proxy`.
fn proxied_url(registry: &SchemaRegistry, proxy: &FaultProxy) -> String {
    registry.url().replace(
        &format!("127.0.0.1:{}/", registry.port()),
        &format!("127.0.0.1:{}/", proxy.port()),
    )
}

/// Decodes Confluent-framed Avro into the JSON converter's shape,
/// `{"payload": {...}}`, for [`verify`].
fn avro_decoder(registry: &'static SchemaRegistry) -> Decode {
    let reader = AvroReader::new(registry);
    Arc::new(move |bytes| serde_json::json!({ "payload": reader.json(bytes) }))
}

fn avro_args(s: &Scenario, bootstrap: &str, registry_url: &str) -> Vec<String> {
    s.args(
        bootstrap,
        &[
            "--format",
            "avro",
            "--schema-registry-url",
            registry_url,
            "--status-interval",
            "250ms",
        ],
    )
}

/// The connector binary is killed while it registers a schema: the tables
/// gain a column round after round under a continuous write load, and the
/// connector is killed with the registration request in flight. In odd
/// rounds the registry proxy stalls, so the request never reaches the
/// registry; in even rounds it is slowed and the kill lands at a random
/// moment, also after the registry stored the schema but before the
/// connector used its id. Every change must arrive, decodable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_during_schema_registration_loses_nothing() {
    const TABLES: [&str; 2] = ["profiles", "sessions"];
    const SCENARIO: &str = "kill -9 during schema registration";
    let rounds = fault_rounds(4, 20);
    let registry = registry().await;
    let proxy = FaultProxy::start(([127, 0, 0, 1], registry.port()).into()).expect("proxy");
    let pg = Postgres::shared();
    let bootstrap = Kafka::shared().bootstrap_servers();
    let s = Scenario::new(pg, "regkill");
    create_tables(&s, &TABLES);
    let (mut rng, seed) = XorShift::seeded(SEED_ENV);
    let logs = LogDir::new("crash_recovery_regkill");
    println!(
        "[{SCENARIO}] seed {seed}; connector logs in {}",
        logs.dir().display()
    );
    let args = avro_args(&s, &bootstrap, &proxied_url(registry, &proxy));
    let mut connector = ConnectorProcess::spawn(&args, logs.path(0));
    wait_until(TIMEOUT, "slot created", || async {
        connector.assert_running("before creating the slot");
        s.confirmed_flush_lsn().is_some()
    })
    .await;
    let stop_writer = Arc::new(AtomicBool::new(false));
    let writer = tokio::spawn(write_continuously(
        pg,
        s.db.clone(),
        Workload::new(&TABLES, rng.next()),
        Arc::clone(&stop_writer),
    ));

    let mut probes = 0;
    for round in 1..=rounds {
        // The instance streams under load before each round's change.
        connector.await_streaming(&s).await;
        let table = TABLES[round % TABLES.len()];
        let stalled = round % 2 == 1;
        if stalled {
            proxy.stall();
        } else {
            proxy.set_latency(Duration::from_millis(100 + rng.below(300) as u64));
        }
        s.sql(&format!("ALTER TABLE {table} ADD COLUMN extra_{round} int"));
        // A row of our own in the altered table (a key the writer never
        // uses): the altered table's first change after the ALTER is this
        // one or a writer's before it, and none may be confirmed while the
        // registry is stalled. Other tables' transactions before it may.
        s.sql(&format!(
            "INSERT INTO {table} (id, version, note) VALUES (-{round}, 1, 'probe')"
        ));
        probes += 1;
        let after_probe = s.current_lsn();
        // Stalled: the registration cannot have completed however long we
        // wait, and 1.5 s lets the connector reach it. Slowed: a random
        // moment from the seed is the point, so the kill lands before, during
        // or after the registry stored the schema.
        let delay = match stalled {
            true => 1500,
            false => rng.below(1500) as u64,
        };
        tokio::time::sleep(Duration::from_millis(delay)).await;
        connector.assert_running(&format!("before kill round {round}"));
        let confirmed = s.confirmed_flush_lsn().expect("slot exists");
        if stalled {
            assert!(
                confirmed <= after_probe,
                "round {round}: confirmed {confirmed} past the first change to {table} after \
                 its schema change (before {after_probe}) with the registry stalled"
            );
        }
        connector.kill_9();
        println!(
            "[{SCENARIO}] round {round}: {table} altered, killed {delay} ms later with the registry {}",
            if stalled { "stalled" } else { "slowed" }
        );
        proxy.resume();
        proxy.set_latency(Duration::ZERO);
        connector = ConnectorProcess::spawn(&args, logs.path(round));
    }

    connector.await_streaming(&s).await;
    stop_writer.store(true, Ordering::Relaxed);
    let stats = writer.await.expect("writer task");
    await_confirmed_past(&s, s.current_lsn(), Some(&connector)).await;
    connector.terminate_cleanly(TIMEOUT).await;
    verify_tables(
        SCENARIO,
        &s,
        &bootstrap,
        &TABLES,
        stats.changes + probes,
        avro_decoder(registry),
    )
    .await;
}

/// The registry becomes unreachable (open connections reset, new ones
/// refused) and a table changes under a continuous write load: the changed
/// table's next change needs a new schema, so nothing from it on may be sent
/// or confirmed; the connector keeps retrying rather than stopping, and once
/// the registry is reachable again every change arrives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registry_down_during_a_schema_change_loses_nothing() {
    const TABLES: [&str; 2] = ["tickets", "comments"];
    const SCENARIO: &str = "registry down during a schema change";
    init_logs();
    let rounds = fault_rounds(1, 50);
    let registry = registry().await;
    let proxy = FaultProxy::start(([127, 0, 0, 1], registry.port()).into()).expect("proxy");
    let pg = Postgres::shared();
    let bootstrap = Kafka::shared().bootstrap_servers();
    let s = Scenario::new(pg, "regdown");
    create_tables(&s, &TABLES);
    let (rng, seed) = XorShift::seeded(SEED_ENV);
    println!("[{SCENARIO}] seed {seed}");
    let decode = avro_decoder(registry);
    let mut running = s.start_args(avro_args(&s, &bootstrap, &proxied_url(registry, &proxy)));
    s.await_slot().await;
    let stop_writer = Arc::new(AtomicBool::new(false));
    let writer = tokio::spawn(write_continuously(
        pg,
        s.db.clone(),
        Workload::new(&TABLES, rng.0),
        Arc::clone(&stop_writer),
    ));

    for round in 1..=rounds {
        s.await_confirmed_past_now("the connector streaming under load before the outage")
            .await;
        proxy.refuse(true);
        proxy.reset();
        // The change and a row that needs the new schema, committed together,
        // so nothing at or after this commit can be delivered without the
        // registry. The id is far from the workload's.
        let table = TABLES[round % TABLES.len()];
        let marker = 1_000_000_000 + round as i64;
        s.sql(&format!(
            "BEGIN; ALTER TABLE {table} ADD COLUMN extra_{round} int; \
             INSERT INTO {table} (id, version, note, extra_{round}) \
             VALUES ({marker}, 1, 'during the outage', {round}); COMMIT"
        ));
        let after_change = s.current_lsn();
        // The outage's length is the fault; throughout, the slot stays put.
        hold_for(Duration::from_secs(6), || async {
            let confirmed = s.confirmed_flush_lsn().expect("slot exists");
            assert!(
                confirmed < after_change,
                "round {round}: slot confirmed to {confirmed}, past the schema change committed \
                 before {after_change}, with the registry unreachable"
            );
        })
        .await;
        assert!(
            !running.is_finished(),
            "the connector retries while the registry is unreachable rather than stopping"
        );
        proxy.refuse(false);
        let back = Instant::now();
        let (again, took) = await_all_arrived_decoded(
            "rows written before and during the outage",
            &s,
            &bootstrap,
            &TABLES,
            running,
            Arc::clone(&decode),
        )
        .await;
        running = again;
        println!(
            "[{SCENARIO}] round {round}: {table} altered while the registry was unreachable; \
             every row in Kafka {:?} after it was back (waited {took:?})",
            back.elapsed()
        );
    }

    stop_writer.store(true, Ordering::Relaxed);
    let stats = writer.await.expect("writer task");
    await_confirmed_past(&s, s.current_lsn(), None).await;
    running.stop().await;
    // The marker rows are changes too, written by the test, not the writer.
    let written = stats.changes + rounds as u64;
    verify_tables(SCENARIO, &s, &bootstrap, &TABLES, written, decode).await;
}
