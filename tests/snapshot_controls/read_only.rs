//! `--read-only` incremental snapshots (Debezium's `read.only`): a role with
//! SELECT on the tables and REPLICATION, and no way to write anything, takes
//! an incremental snapshot of three tables, read together
//! (`--incremental-snapshot-tables-in-flight 3`: one snapshot per window
//! covers a chunk of each), asked for through the kafka signal channel
//! while a writer updates, deletes and inserts; every row is checked in its
//! topic. Around it ([`super::read_only_phases`]): `check --read-only`
//! before the connector starts; once the writer stopped, a snapshot on the
//! idle server and one interrupted by a crash.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use pgcdc_testcontainers::{unique_name, Kafka, Postgres};
use rdkafka::config::ClientConfig;
use rdkafka::producer::{FutureProducer, FutureRecord};
use serde_json::{json, Value as Json};

use super::common::compacted::{table_state, wait_for_topic_to_equal_table};
use super::common::{consume_all, wait_for, Record, Scenario, TIMEOUT};
use super::read_only_phases;

const ROWS: i64 = 3000;

/// The tables read alongside `t`, smaller: their writes touch only ids that
/// are multiples of 4 and new ids past their end.
const OTHERS: [(&str, i64); 2] = [("u", 800), ("w", 1600)];

/// Sends `value` through the kafka channel's topic, keyed `connector`;
/// returns its offset.
pub(super) async fn kafka_signal(kafka: &Kafka, topic: &str, connector: &str, value: Json) -> i64 {
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", kafka.bootstrap_servers())
        .create()
        .expect("a producer");
    let value = value.to_string();
    let record = FutureRecord::to(topic)
        .partition(0)
        .key(connector)
        .payload(&value);
    let delivered = producer
        .send(record, Duration::from_secs(30))
        .await
        .expect("the signal is written");
    delivered.offset
}

/// A new role that may log in, replicate and SELECT from `tables` (a
/// comma-separated list), nothing else, and whose every transaction is
/// read-only, so any write the connector tried would fail it; returns its
/// name and `s`'s URL with it as the user.
pub(super) async fn select_only_role(s: &Scenario, tables: &str) -> (String, String) {
    let role = unique_name("ro");
    s.sql(&format!("CREATE ROLE {role} LOGIN REPLICATION"));
    s.sql(&format!("GRANT SELECT ON {tables} TO {role}"));
    s.sql(&format!("REVOKE ALL ON DATABASE {} FROM PUBLIC", s.db));
    s.sql(&format!("GRANT CONNECT ON DATABASE {} TO {role}", s.db));
    s.sql("REVOKE CREATE ON SCHEMA public FROM PUBLIC");
    s.sql(&format!(
        "ALTER ROLE {role} SET default_transaction_read_only = on"
    ));
    // The server's default, not the suite's 10 s: the walsender's own
    // keepalives then come every 30 s at most (read_only_phases.rs).
    s.sql(&format!("ALTER ROLE {role} SET wal_sender_timeout = '60s'"));
    let admin_url = s.pg.url(&s.db);
    let url = admin_url.replacen(&format!("//{}:", s.pg.user()), &format!("//{role}:"), 1);
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .expect("the role connects");
    tokio::spawn(connection);
    let first = tables.split(',').next().expect("a table").trim();
    let write = (client.batch_execute(&format!("INSERT INTO {first} VALUES (-1, 0)"))).await;
    let refused = write.expect_err("the role cannot write");
    let refused = refused.as_db_error().map(|e| e.message().to_owned());
    assert!(
        refused
            .as_deref()
            .is_some_and(|m| m.contains("read-only") || m.contains("permission")),
        "refused for want of the right, not by a wrong statement: {refused:?}"
    );
    let create = client
        .batch_execute("CREATE TABLE public.scratch (i int)")
        .await;
    assert!(create.is_err(), "the role cannot create");
    (role, url)
}

/// `args` with `flag`'s value replaced by `value`.
pub(super) fn with_flag(mut args: Vec<String>, flag: &str, value: &str) -> Vec<String> {
    let at = args.iter().position(|a| a == flag).expect(flag) + 1;
    args[at] = value.to_owned();
    args
}

/// Asserts that the snapshot read every row of `expected` the writer never
/// touched (`v` still 0) as it is (`read`: id to the `v` read), and returns
/// how many such rows there are.
pub(super) fn assert_untouched_rows_read(
    table: &str,
    expected: &BTreeMap<i64, Json>,
    read: &BTreeMap<i64, i64>,
) -> usize {
    let untouched: Vec<i64> = expected
        .iter()
        .filter(|(_, row)| row["v"] == 0)
        .map(|(id, _)| *id)
        .collect();
    let missing: Vec<&i64> = untouched
        .iter()
        .filter(|id| read.get(*id) != Some(&0))
        .collect();
    assert!(
        missing.is_empty(),
        "{table}: every untouched row is in the snapshot; missing {} of {}: {:?}",
        missing.len(),
        untouched.len(),
        &missing[..missing.len().min(10)]
    );
    untouched.len()
}

/// The incremental snapshot notifications for signal `id` in the topic.
async fn notifications_of(kafka: &Kafka, topic: &str, id: &str) -> Vec<Json> {
    consume_all(&kafka.bootstrap_servers(), topic, TIMEOUT)
        .await
        .into_iter()
        .filter_map(|r| r.value.map(|v| v["payload"].clone()))
        .filter(|p| p["aggregate_type"] == "Incremental Snapshot" && p["id"] == id)
        .collect()
}

/// The table a notification is about (`""` for none).
fn table_of(payload: &Json) -> &str {
    let data = &payload["additional_data"];
    data["scanned_collection"]
        .as_str()
        .or(data["current_collection_in_progress"].as_str())
        .unwrap_or("")
}

/// Waits for the first `kind` incremental snapshot notification for signal
/// `id` about `table` (any table when empty); returns its payload.
pub(super) async fn notification(
    kafka: &Kafka,
    topic: &str,
    kind: &str,
    id: &str,
    table: &str,
) -> Json {
    wait_for(TIMEOUT, &format!("{kind} notification"), || async move {
        notifications_of(kafka, topic, id)
            .await
            .into_iter()
            .find(|p| p["type"] == kind && (table.is_empty() || table_of(p) == table))
            .ok_or_else(|| "not yet".to_owned())
    })
    .await
}

/// An event's place in its key's history: the version it carries (`v` is
/// the writer's round, increasing), a delete coming after the version it
/// deleted (the table has REPLICA IDENTITY FULL, so deletes carry it).
fn version(payload: &Json) -> Option<(i64, u8)> {
    match payload["op"].as_str()? {
        "d" => Some((payload["before"]["v"].as_i64()?, 1)),
        _ => Some((payload["after"]["v"].as_i64()?, 0)),
    }
}

/// Keys whose events in `records` go back to an older version after a
/// newer one (a stale snapshot row after a streamed change, or a deleted
/// key brought back).
pub(super) fn stale_keys(records: &[Record]) -> Vec<String> {
    let mut last: BTreeMap<i64, ((i64, u8), String)> = BTreeMap::new();
    let mut stale = Vec::new();
    for r in records {
        let (Some(key), Some(value)) = (&r.key, &r.value) else {
            continue;
        };
        let id = key["payload"]["id"].as_i64().expect("integer key");
        let payload = &value["payload"];
        let Some(now) = version(payload) else {
            continue;
        };
        let op = format!("{}@{}", payload["op"], r.offset);
        if let Some((before, before_op)) = last.get(&id) {
            if now < *before {
                stale.push(format!("{id}: {before_op} {before:?} then {op} {now:?}"));
            }
        }
        last.insert(id, (now, op));
    }
    stale
}

/// Asserts that no key of `records` goes back to an older version
/// ([`stale_keys`]); `what` leads the message.
pub(super) fn assert_never_older(records: &[Record], what: &str) {
    let stale = stale_keys(records);
    assert!(
        stale.is_empty(),
        "{what}: no older version after a newer one: {stale:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_snapshot_on_a_select_only_role_under_load() {
    let started = Instant::now();
    let kafka = Kafka::shared();
    let s = Scenario::new(Postgres::shared(), "rosnap");
    for (table, rows) in [("t", ROWS)].into_iter().chain(OTHERS) {
        s.sql(&format!(
            "CREATE TABLE {table} (id int PRIMARY KEY, v bigint NOT NULL)"
        ));
        s.sql(&format!("ALTER TABLE {table} REPLICA IDENTITY FULL"));
        s.sql(&format!(
            "INSERT INTO {table} SELECT g, 0 FROM generate_series(1, {rows}) g"
        ));
    }
    s.sql(&format!(
        "CREATE PUBLICATION {} FOR TABLE t, u, w",
        s.publication
    ));
    // A row estimate for the notifications' total_rows.
    s.sql("ANALYZE t");
    // The connector's role: it may read the tables and replicate, nothing
    // else; and every transaction of its sessions is read-only.
    let (role, url) = select_only_role(&s, "t, u, w").await;

    let signal_topic = format!("{}-signal", s.prefix);
    let notifications = format!("{}.notifications", s.prefix);
    // The signal topic exists before the connector reads it.
    kafka_signal(kafka, &signal_topic, "someone-else", json!({"type": "log"})).await;
    let mut args = s.args(
        &kafka.bootstrap_servers(),
        &[
            "--read-only",
            "--signal-enabled-channels",
            "kafka",
            "--snapshot-mode",
            "no_data",
            "--incremental-snapshot-chunk-size",
            "250",
            "--incremental-snapshot-tables-in-flight",
            "3",
            "--notification-enabled-channels",
            "sink",
            "--notification-sink-topic-name",
            &notifications,
        ],
    );
    args = with_flag(args, "--pg-url", &url);
    read_only_phases::check_reports_what_the_role_lacks(&s, &role, &args).await;
    let running = s.start_args(args.clone());
    s.await_slot().await;

    // A writer: each round updates, deletes and upserts in every table,
    // stamping `v` with the round, so versions only grow.
    let (pg, db) = (s.pg, s.db.clone());
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let writer = tokio::spawn(async move {
        let client = pg.connect(&db).await.expect("writer connects");
        let mut round = 0i64;
        while !*stop_rx.borrow_and_update() {
            round += 1;
            let id = (round * 7919) % ROWS + 1;
            let mut sql = format!(
                "BEGIN; UPDATE t SET v = {round} WHERE id = {id}; \
                 DELETE FROM t WHERE id = {}; \
                 INSERT INTO t VALUES ({}, {round}) ON CONFLICT (id) DO UPDATE SET v = {round};",
                (id * 31) % ROWS + 1,
                (round * 104_729) % (ROWS + 300) + 1,
            );
            for (table, rows) in OTHERS {
                sql += &super::in_flight::writer_round(table, rows, round);
            }
            client
                .batch_execute(&(sql + "COMMIT"))
                .await
                .expect("write");
            // Pacing the load, not waiting for anything.
            tokio::time::sleep(Duration::from_millis(4)).await;
        }
        round
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    kafka_signal(
        kafka,
        &signal_topic,
        &s.prefix,
        json!({"id": "ro-1", "type": "execute-snapshot",
               "data": {"data-collections": ["public.t", "public.u", "public.w"], "type": "incremental"}}),
    )
    .await;
    notification(kafka, &notifications, "COMPLETED", "ro-1", "").await;
    let notes = notifications_of(kafka, &notifications, "ro-1").await;
    let at = |kind: &str, table: &str| {
        notes
            .iter()
            .position(|p| p["type"] == kind && table_of(p) == table)
            .unwrap_or_else(|| panic!("no {kind} of {table}: {notes:?}"))
    };
    // Read together, the smaller tables completed before t; one after
    // another, t (first in the list) would have.
    assert!(
        at("TABLE_SCAN_COMPLETED", "public.u") < at("TABLE_SCAN_COMPLETED", "public.t")
            && at("TABLE_SCAN_COMPLETED", "public.w") < at("TABLE_SCAN_COMPLETED", "public.t"),
        "u and w were read in t's windows: {notes:?}"
    );
    // The first chunk's IN_PROGRESS: the table's largest key then, and the
    // planner's estimate.
    let first = notes[at("IN_PROGRESS", "public.t")].clone();
    let data = &first["additional_data"];
    let number = |field: &str| {
        data[field]
            .as_str()
            .and_then(|v| v.parse::<i64>().ok())
            .unwrap_or_else(|| panic!("{field} in {data}"))
    };
    assert!(
        (ROWS..=ROWS + 300).contains(&number("maximum_key")),
        "{data}"
    );
    assert_eq!(number("chunk_index"), 1, "{data}");
    let total_rows = number("total_rows");
    assert!((ROWS - 100..=ROWS + 400).contains(&total_rows), "{data}");
    let chunks = u64::try_from(total_rows).expect("rows").div_ceil(250);
    assert_eq!(number("total_chunks"), chunks as i64, "{data}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let _ = stop_tx.send(true);
    let rounds = writer.await.expect("writer");
    assert!(
        rounds > 50,
        "the writer overlapped the snapshot ({rounds} rounds)"
    );

    let mut summary = Vec::new();
    for (table, rows) in [("t", ROWS)].into_iter().chain(OTHERS) {
        // The table after the writer stopped: what every later check reads.
        let expected = table_state(&s, table);
        wait_for_topic_to_equal_table(kafka, &s, table).await;
        let records = consume_all(&kafka.bootstrap_servers(), &s.topic(table), TIMEOUT).await;
        let stale = stale_keys(&records);
        assert!(
            stale.is_empty(),
            "{table}: no older version after a newer one: {stale:?}"
        );
        let read_records: Vec<(i64, i64)> = records
            .iter()
            .filter_map(|r| {
                let p = &r.value.as_ref()?["payload"];
                (p["op"] == "r" && p["source"]["snapshot"] == "incremental")
                    .then(|| Some((p["after"]["id"].as_i64()?, p["after"]["v"].as_i64()?)))?
            })
            .collect();
        let reads: BTreeMap<i64, i64> = read_records.iter().copied().collect();
        // Rows the writer never touched were only ever in the snapshot.
        let untouched = assert_untouched_rows_read(table, &expected, &reads);
        // Enough rows the writer never touched for that check to mean
        // something (t: about 1200 of 3000 here, fewer on a slower
        // machine; u and w: three in four, by construction).
        assert!(
            untouched as i64 > (rows / 2).min(300),
            "{table}: rows untouched: {untouched}"
        );
        let done = &notes[at("TABLE_SCAN_COMPLETED", &format!("public.{table}"))];
        let scanned: usize = done["additional_data"]["total_rows_scanned"]
            .as_str()
            .and_then(|n| n.parse().ok())
            .expect("a row count");
        assert_eq!(
            (read_records.len(), reads.len()),
            (scanned, scanned),
            "{table}: each row the snapshot read reached Kafka, once"
        );
        summary.push(format!(
            "{table}: {} rows read, {untouched} untouched",
            reads.len()
        ));
    }
    println!(
        "read-only snapshot: {}, {rounds} writer rounds, {:.1}s",
        summary.join("; "),
        started.elapsed().as_secs_f64()
    );

    read_only_phases::idle_snapshot_does_not_wait_for_keepalives(
        kafka,
        &s,
        &signal_topic,
        &notifications,
        chunks,
    )
    .await;
    running.stop().await;
    // Small chunks, so the crash comes mid-snapshot.
    args = with_flag(args, "--incremental-snapshot-chunk-size", "50");
    read_only_phases::crash_resumes_from_the_progress_topic(
        kafka,
        &s,
        &signal_topic,
        &notifications,
        50,
        args,
    )
    .await;
}
