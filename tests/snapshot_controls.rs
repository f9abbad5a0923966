//! Debezium's snapshot controls and notifications against real Postgres and
//! Kafka (docs/SNAPSHOTS.md, "Snapshot controls"):
//!
//! - the initial snapshot reads only `--snapshot-include-collection-list`'s
//!   tables, one of them through `--snapshot-select-statement-override`; the
//!   table left out still streams; its notifications reach the topic;
//! - an incremental snapshot with `additional-conditions` emits exactly the
//!   matching rows; one paused in its signal's transaction emits nothing
//!   until `resume-snapshot`, then every row; a blocking snapshot under a
//!   concurrent write load re-reads the table while the stream waits, and
//!   the topic ends equal to the table row by row; a signal sent through
//!   Debezium's kafka channel acts (another connector's is skipped); every
//!   step's notification is read back from the topic with Debezium's fields;
//! - `--read-only` takes an incremental snapshot on a SELECT-only role
//!   under load ([`read_only`]); `check --read-only` reports what the role
//!   lacks, `run --read-only` creates no publication, an idle server's
//!   windows do not wait for keepalives, and a crash resumes from the
//!   progress topic ([`read_only_phases`]); a publication with a row
//!   filter, a column list, `publish = 'insert'` or another partition root
//!   is reported by `check` and refused or warned about by `run`
//!   ([`read_only_publication`]); an initial snapshot killed
//!   midway resumes read-only, and under exactly-once a kafka signal
//!   survives a crash before its Kafka commit ([`read_only_resume`]); an
//!   exactly-once read-only initial snapshot killed with a checkpoint's
//!   Kafka transaction open resumes, reading again only that
//!   transaction's rows ([`read_only_eos_kill`]);
//! - `--incremental-snapshot-tables-in-flight` reads several tables' chunks
//!   in each window, under load and across a restart ([`in_flight`]);
//!   with it, `stop-snapshot` of a table in flight, pause across a restart,
//!   and `kill -9` mid-snapshot, at-least-once with watermarks and
//!   exactly-once read-only ([`in_flight_faults`]);
//! - `stop-snapshot` under exactly-once, through the signal table and
//!   through the kafka channel with `--read-only`, then `kill -9`: nothing
//!   read after the stop, nothing resumed ([`stop_exactly_once`]);
//! - a snapshot paused with the signal table's watermarks stays paused
//!   across a graceful restart, streaming meanwhile, until
//!   `resume-snapshot` ([`pause_restart`]);
//! - a change streamed before its transaction is visible (waiting for a
//!   synchronous standby) is never followed by an older snapshot row:
//!   incremental with watermarks and read-only, and blocking
//!   ([`invisible_commit`]).

mod common;
#[path = "snapshot_controls/in_flight.rs"]
mod in_flight;
#[path = "snapshot_controls/in_flight_faults.rs"]
mod in_flight_faults;
#[path = "snapshot_controls/invisible_commit.rs"]
mod invisible_commit;
#[path = "snapshot_controls/pause_restart.rs"]
mod pause_restart;
#[path = "snapshot_controls/read_only.rs"]
mod read_only;
#[path = "snapshot_controls/read_only_eos_kill.rs"]
mod read_only_eos_kill;
#[path = "snapshot_controls/read_only_phases.rs"]
mod read_only_phases;
#[path = "snapshot_controls/read_only_publication.rs"]
mod read_only_publication;
#[path = "snapshot_controls/read_only_resume.rs"]
mod read_only_resume;
#[path = "snapshot_controls/stop_exactly_once.rs"]
mod stop_exactly_once;

use std::collections::BTreeSet;
use std::time::Duration;

use common::compacted::wait_for_topic_to_equal_table;
use common::{consume_all, hold_for, wait_for, wait_until, Record, Scenario, TIMEOUT};
use pgcdc_testcontainers::{Kafka, Postgres};
use rdkafka::config::ClientConfig;
use rdkafka::producer::{FutureProducer, FutureRecord};
use serde_json::{json, Value as Json};

const SIGNALS: &str =
    "CREATE TABLE signals (id varchar(42) PRIMARY KEY, type varchar(32) NOT NULL, data varchar(2048))";

/// The `op: "r"` records of a topic whose `source.snapshot` is `marker`
/// (any snapshot marker but `incremental` when `None`), by id.
fn reads(records: &[Record], marker: Option<&str>) -> Vec<i64> {
    records
        .iter()
        .filter_map(|r| {
            let p = &r.value.as_ref()?["payload"];
            let snapshot = p["source"]["snapshot"].as_str()?;
            let wanted = match marker {
                Some(m) => snapshot == m,
                None => snapshot != "incremental" && snapshot != "false",
            };
            (p["op"] == "r" && wanted).then(|| p["after"]["id"].as_i64().expect("id"))
        })
        .collect()
}

fn sorted(mut ids: Vec<i64>) -> Vec<i64> {
    ids.sort_unstable();
    ids
}

/// The notifications in the topic, as (aggregate_type, type, payload).
async fn notifications(kafka: &Kafka, topic: &str) -> Vec<(String, String, Json)> {
    consume_all(&kafka.bootstrap_servers(), topic, TIMEOUT)
        .await
        .into_iter()
        .filter_map(|r| {
            let p = r.value?["payload"].clone();
            Some((
                p["aggregate_type"].as_str()?.to_owned(),
                p["type"].as_str()?.to_owned(),
                p,
            ))
        })
        .collect()
}

async fn wait_for_notification(
    kafka: &Kafka,
    topic: &str,
    aggregate: &str,
    kind: &str,
    id: &str,
) -> Json {
    wait_for(
        TIMEOUT,
        &format!("{aggregate} {kind} notification {id}"),
        || async move {
            let seen = notifications(kafka, topic).await;
            let summary: Vec<String> = seen
                .iter()
                .map(|(a, k, p)| format!("{a} {k} {}", p["id"]))
                .collect();
            seen.into_iter()
                .find(|(a, k, p)| a == aggregate && k == kind && (id.is_empty() || p["id"] == id))
                .map(|(_, _, p)| p)
                .ok_or_else(|| format!("seen {summary:?}"))
        },
    )
    .await
}

/// Sends a signal through the kafka channel's topic, keyed `connector`.
async fn kafka_signal(kafka: &Kafka, topic: &str, connector: &str, id: &str, data: Json) {
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", kafka.bootstrap_servers())
        .create()
        .expect("a producer");
    let value = json!({"id": id, "type": "execute-snapshot", "data": data}).to_string();
    let record = FutureRecord::to(topic)
        .partition(0)
        .key(connector)
        .payload(&value);
    producer
        .send(record, Duration::from_secs(30))
        .await
        .expect("the signal is written");
}

fn signal(s: &Scenario, id: &str, kind: &str, data: Json) {
    let data = data.to_string().replace('\'', "''");
    s.sql(&format!(
        "INSERT INTO signals VALUES ('{id}', '{kind}', '{data}')"
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initial_snapshot_reads_the_included_tables_with_their_overrides() {
    let kafka = Kafka::shared();
    let s = Scenario::new(Postgres::shared(), "snapsel");
    for table in ["a", "b", "c"] {
        s.sql(&format!(
            "CREATE TABLE {table} (id int PRIMARY KEY, v int NOT NULL)"
        ));
        s.sql(&format!(
            "INSERT INTO {table} SELECT g, g FROM generate_series(1, 40) g"
        ));
    }
    s.sql(SIGNALS);
    s.sql(&format!(
        "CREATE PUBLICATION {} FOR TABLE a, b, c, signals",
        s.publication
    ));
    let notification_topic = format!("{}.notifications", s.prefix);
    let running = s.start(
        &kafka.bootstrap_servers(),
        &[
            "--signal-data-collection",
            "public.signals",
            "--snapshot-fetch-size",
            "7",
            "--snapshot-include-collection-list",
            "public\\.a,public\\.b",
            "--snapshot-select-statement-override",
            "public.a=SELECT * FROM public.a WHERE id % 2 = 0 ORDER BY id DESC",
            "--notification-enabled-channels",
            "sink,log",
            "--notification-sink-topic-name",
            &notification_topic,
        ],
    );
    wait_for_notification(
        kafka,
        &notification_topic,
        "Initial Snapshot",
        "COMPLETED",
        "",
    )
    .await;
    s.await_slot().await;
    s.sql("INSERT INTO c VALUES (41, 41)");
    wait_until(TIMEOUT, "the insert into c streamed", || async {
        !consume_all(&kafka.bootstrap_servers(), &s.topic("c"), TIMEOUT)
            .await
            .is_empty()
    })
    .await;

    let a = consume_all(&kafka.bootstrap_servers(), &s.topic("a"), TIMEOUT).await;
    let b = consume_all(&kafka.bootstrap_servers(), &s.topic("b"), TIMEOUT).await;
    let c = consume_all(&kafka.bootstrap_servers(), &s.topic("c"), TIMEOUT).await;
    let even: Vec<i64> = (1..=20).rev().map(|i| i * 2).collect();
    assert_eq!(
        reads(&a, None),
        even,
        "a: the override's rows, in its order"
    );
    assert_eq!(
        reads(&b, None),
        (1..=40).collect::<Vec<_>>(),
        "b: every row"
    );
    assert!(
        reads(&c, None).is_empty(),
        "c is not in the include list: not snapshotted"
    );
    assert_eq!(
        c.iter()
            .filter_map(|r| r.value.as_ref().map(|v| v["payload"]["op"].clone()))
            .collect::<Vec<_>>(),
        [json!("c")],
        "c still streams"
    );

    let seen = notifications(kafka, &notification_topic).await;
    let kinds: Vec<&str> = seen.iter().map(|(_, k, _)| k.as_str()).collect();
    assert_eq!(kinds.first(), Some(&"STARTED"), "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"COMPLETED"), "{kinds:?}");
    let scanned: BTreeSet<(String, String)> = seen
        .iter()
        .filter(|(_, k, _)| k == "TABLE_SCAN_COMPLETED")
        .map(|(_, _, p)| {
            let data = &p["additional_data"];
            assert_eq!(data["status"], "SUCCEEDED");
            assert_eq!(data["connector_name"], s.prefix.as_str());
            assert_eq!(data["data_collections"], "public.a,public.b");
            (
                data["scanned_collection"]
                    .as_str()
                    .expect("scanned")
                    .to_owned(),
                data["total_rows_scanned"]
                    .as_str()
                    .expect("rows")
                    .to_owned(),
            )
        })
        .collect();
    assert_eq!(
        scanned,
        BTreeSet::from([
            ("public.a".into(), "20".into()),
            ("public.b".into(), "40".into())
        ])
    );
    assert!(seen
        .iter()
        .all(|(a, _, p)| a == "Initial Snapshot" && p["timestamp"].is_i64()));
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conditions_pause_resume_and_a_blocking_snapshot_under_load() {
    let kafka = Kafka::shared();
    let s = Scenario::new(Postgres::shared(), "snapctl");
    s.sql("CREATE TABLE t (id int PRIMARY KEY, v int NOT NULL)");
    s.sql("CREATE TABLE u (id int PRIMARY KEY, v int NOT NULL, region text NOT NULL)");
    s.sql("INSERT INTO t SELECT g, g FROM generate_series(1, 3000) g");
    s.sql("INSERT INTO u SELECT g, g, CASE WHEN g % 3 = 0 THEN 'eu' ELSE 'us' END FROM generate_series(1, 600) g");
    s.sql(SIGNALS);
    s.sql(&format!(
        "CREATE PUBLICATION {} FOR TABLE t, u, signals",
        s.publication
    ));
    let topic = format!("{}.notifications", s.prefix);
    // The kafka channel's topic exists before the connector reads it; a
    // record for another connector is skipped.
    let signal_topic = format!("{}-signal", s.prefix);
    let everything = json!({"data-collections": ["public.u"], "type": "incremental"});
    kafka_signal(
        kafka,
        &signal_topic,
        "another-connector",
        "other",
        everything,
    )
    .await;
    let running = s.start(
        &kafka.bootstrap_servers(),
        &[
            "--signal-enabled-channels",
            "source,kafka",
            "--snapshot-mode",
            "no_data",
            "--signal-data-collection",
            "public.signals",
            "--incremental-snapshot-chunk-size",
            "100",
            "--notification-enabled-channels",
            "sink",
            "--notification-sink-topic-name",
            &topic,
        ],
    );
    s.await_slot().await;

    // additional-conditions: only u's rows in 'eu' with id <= 300.
    signal(
        &s,
        "cond",
        "execute-snapshot",
        json!({
            "data-collections": ["public.u"], "type": "incremental",
            "additional-conditions": [{"data-collection": "public.u", "filter": "region = 'eu' AND id <= 300"}]
        }),
    );
    let done = wait_for_notification(
        kafka,
        &topic,
        "Incremental Snapshot",
        "TABLE_SCAN_COMPLETED",
        "cond",
    )
    .await;
    assert_eq!(done["additional_data"]["scanned_collection"], "public.u");
    assert_eq!(done["additional_data"]["total_rows_scanned"], "100");
    wait_for_notification(kafka, &topic, "Incremental Snapshot", "COMPLETED", "cond").await;
    let u = consume_all(&kafka.bootstrap_servers(), &s.topic("u"), TIMEOUT).await;
    assert_eq!(
        sorted(reads(&u, Some("incremental"))),
        (1..=100).map(|i| i * 3).collect::<Vec<_>>(),
        "exactly the rows matching the condition"
    );

    // Paused in the signal's own transaction: not a chunk until resumed.
    s.sql(&format!(
        "BEGIN; \
         INSERT INTO signals VALUES ('paused', 'execute-snapshot', '{}'); \
         INSERT INTO signals VALUES ('pause-1', 'pause-snapshot', '{{\"type\": \"incremental\"}}'); \
         COMMIT",
        json!({"data-collections": ["public.t"], "type": "incremental"})
    ));
    wait_for_notification(kafka, &topic, "Incremental Snapshot", "PAUSED", "paused").await;
    hold_for(Duration::from_secs(2), || async {
        let t = consume_all(&kafka.bootstrap_servers(), &s.topic("t"), TIMEOUT).await;
        assert!(
            reads(&t, Some("incremental")).is_empty(),
            "no chunk while paused"
        );
    })
    .await;
    signal(
        &s,
        "resume-1",
        "resume-snapshot",
        json!({"type": "incremental"}),
    );
    wait_for_notification(kafka, &topic, "Incremental Snapshot", "RESUMED", "paused").await;
    wait_for_notification(kafka, &topic, "Incremental Snapshot", "COMPLETED", "paused").await;
    let t = consume_all(&kafka.bootstrap_servers(), &s.topic("t"), TIMEOUT).await;
    assert_eq!(
        sorted(reads(&t, Some("incremental"))),
        (1..=3000).collect::<Vec<_>>(),
        "every row once resumed"
    );

    // A blocking snapshot of t while a writer updates, deletes and inserts.
    let (pg, db) = (s.pg, s.db.clone());
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let writer = tokio::spawn(async move {
        let client = pg.connect(&db).await.expect("writer connects");
        let mut round = 0i64;
        while !*stop_rx.borrow_and_update() {
            round += 1;
            let id = (round * 7919) % 3000 + 1;
            client
                .batch_execute(&format!(
                    "BEGIN; UPDATE t SET v = -{round} WHERE id = {id}; \
                     DELETE FROM t WHERE id = {}; \
                     INSERT INTO t VALUES ({}, {round}) ON CONFLICT (id) DO UPDATE SET v = {round}; \
                     COMMIT",
                    (id * 31) % 3000 + 1,
                    3000 + round % 500,
                ))
                .await
                .expect("write");
            // Pacing the load, not waiting for anything.
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        round
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    signal(
        &s,
        "block",
        "execute-snapshot",
        json!({"data-collections": ["public.t"], "type": "blocking"}),
    );
    let done = wait_for_notification(
        kafka,
        &topic,
        "Initial Snapshot",
        "TABLE_SCAN_COMPLETED",
        "block",
    )
    .await;
    wait_for_notification(kafka, &topic, "Initial Snapshot", "COMPLETED", "block").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let _ = stop_tx.send(true);
    let rounds = writer.await.expect("writer");
    assert!(
        rounds > 20,
        "the writer overlapped the blocking snapshot ({rounds} rounds)"
    );

    wait_for_topic_to_equal_table(kafka, &s, "t").await;
    let t = consume_all(&kafka.bootstrap_servers(), &s.topic("t"), TIMEOUT).await;
    let blocking = reads(&t, Some("true"));
    let scanned: usize = done["additional_data"]["total_rows_scanned"]
        .as_str()
        .and_then(|n| n.parse().ok())
        .expect("a row count");
    assert_eq!(
        blocking.len(),
        scanned,
        "every row the blocking snapshot read reached Kafka"
    );
    assert!(
        scanned >= 2500,
        "the whole table was re-read ({scanned} rows)"
    );
    assert_eq!(
        blocking.iter().collect::<BTreeSet<_>>().len(),
        blocking.len(),
        "each row once"
    );

    // Debezium's kafka signal channel: the same signal as a record.
    let data = json!({"data-collections": ["public.u"], "type": "incremental",
        "additional-conditions": [{"data-collection": "public.u", "filter": "id > 590"}]});
    kafka_signal(kafka, &signal_topic, &s.prefix, "via-kafka", data).await;
    wait_for_notification(
        kafka,
        &topic,
        "Incremental Snapshot",
        "COMPLETED",
        "via-kafka",
    )
    .await;
    let u = consume_all(&kafka.bootstrap_servers(), &s.topic("u"), TIMEOUT).await;
    let expected: Vec<i64> = (1..=100).map(|i| i * 3).chain(591..=600).collect();
    assert_eq!(
        sorted(reads(&u, Some("incremental"))),
        sorted(expected),
        "the kafka channel's snapshot read its rows; the other connector's signal did nothing"
    );
    running.stop().await;
}
