//! Incremental snapshots against real Postgres and Kafka: a table added to
//! the publication while another streams under load is read in watermarked
//! chunks, and every topic ends equal to its table (no lost rows, no deleted
//! key brought back); a killed connector resumes from its recorded chunk;
//! under exactly-once, a connector killed between a chunk's Kafka commit
//! and the progress row's update reads no row twice; `pgcdc-kafka snapshot`
//! starts and stops one.

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::compacted::{latest_by_key, table_state, wait_for_topic_to_equal_table};
use common::{consume_all, record_count, wait_for, wait_until, Record, Scenario, TIMEOUT};
use pgcdc_kafka::sink::transactional::{self, IncrementalProgress, ProgressRecord};
use pgcdc_testcontainers::{Kafka, Postgres};
use serde_json::{json, Value as Json};

const BIN: &str = env!("CARGO_BIN_EXE_pgcdc-kafka");
const SIGNALS: &str =
    "CREATE TABLE signals (id varchar(42) PRIMARY KEY, type varchar(32) NOT NULL, data varchar(2048))";

fn incremental_reads(records: &[Record]) -> Vec<&Record> {
    records
        .iter()
        .filter(|r| {
            r.value.as_ref().is_some_and(|v| {
                v["payload"]["op"] == "r" && v["payload"]["source"]["snapshot"] == "incremental"
            })
        })
        .collect()
}

fn signal(s: &Scenario, tables: &[&str]) {
    let data = json!({"data-collections": tables, "type": "incremental"}).to_string();
    s.sql(&format!(
        "INSERT INTO signals VALUES ('sig-{}', 'execute-snapshot', '{data}')",
        tables.join("-")
    ));
}

fn progress_row(s: &Scenario) -> Option<String> {
    s.query_one(&format!(
        "SELECT data FROM signals WHERE id = 'pgcdc-{}'",
        s.slot
    ))
}

async fn wait_for_incremental_reads(kafka: &Kafka, s: &Scenario, table: &str, at_least: usize) {
    let topic = s.topic(table);
    wait_until(
        TIMEOUT,
        &format!("{at_least} incremental snapshot rows of {table}"),
        || {
            let bootstrap = kafka.bootstrap_servers();
            let topic = topic.clone();
            async move {
                incremental_reads(&consume_all(&bootstrap, &topic, TIMEOUT).await).len() >= at_least
            }
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn added_table_is_snapshotted_while_another_streams_under_load() {
    let kafka = Kafka::shared();
    let s = Scenario::new(Postgres::shared(), "incr");
    s.sql("CREATE TABLE t1 (id int PRIMARY KEY, v int NOT NULL)");
    s.sql("CREATE TABLE t2 (id int PRIMARY KEY, v int NOT NULL)");
    s.sql(SIGNALS);
    s.sql("INSERT INTO t2 SELECT g, 0 FROM generate_series(1, 4000) g");
    s.sql(&format!(
        "CREATE PUBLICATION {} FOR TABLE t1, signals",
        s.publication
    ));
    let running = s.start(
        &kafka.bootstrap_servers(),
        &[
            "--signal-data-collection",
            "public.signals",
            "--incremental-snapshot-chunk-size",
            "100",
        ],
    );
    s.await_slot().await;

    // Writes to both tables: t1 streams, t2's updates, deletes and inserts
    // race the chunks of its snapshot. ANALYZE after each write invalidates
    // the server's cache of t2, so pgoutput sends its unchanged Relation
    // message again before the next change: no reason to re-read a chunk.
    let pg = s.pg;
    let db = s.db.clone();
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let writer = tokio::spawn(async move {
        let client = pg.connect(&db).await.expect("writer connects");
        let mut round = 0i64;
        while !*stop_rx.borrow_and_update() {
            round += 1;
            let id = (round * 7919) % 4000 + 1;
            client
                .batch_execute(&format!(
                    "BEGIN; \
                     INSERT INTO t1 VALUES ({}, {round}) ON CONFLICT (id) DO UPDATE SET v = {round}; \
                     UPDATE t2 SET v = {round} WHERE id = {id}; \
                     DELETE FROM t2 WHERE id = {}; \
                     INSERT INTO t2 VALUES ({}, {round}) ON CONFLICT (id) DO UPDATE SET v = {round}; \
                     COMMIT; \
                     ANALYZE t2",
                    round % 300,
                    (id * 31) % 4000 + 1,
                    4000 + round % 200,
                ))
                .await
                .expect("write");
            // Pacing the load, not waiting for anything.
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        round
    });

    // t1 streams under the load before t2 joins the publication.
    let t1 = s.topic("t1");
    wait_until(TIMEOUT, "the writer's changes of t1 in Kafka", || async {
        record_count(&kafka.bootstrap_servers(), &t1).await > 0
    })
    .await;
    s.sql(&format!("ALTER PUBLICATION {} ADD TABLE t2", s.publication));
    signal(&s, &["public.t2"]);
    wait_for_incremental_reads(kafka, &s, "t2", 1).await;
    wait_until(TIMEOUT, "the incremental snapshot to complete", || async {
        progress_row(&s).is_none()
    })
    .await;
    let _ = stop_tx.send(true);
    let rounds = writer.await.expect("writer");
    assert!(
        rounds > 10,
        "the writer overlapped the snapshot ({rounds} rounds)"
    );

    wait_for_topic_to_equal_table(kafka, &s, "t1").await;
    wait_for_topic_to_equal_table(kafka, &s, "t2").await;
    let records = consume_all(&kafka.bootstrap_servers(), &s.topic("t2"), TIMEOUT).await;
    let reads = incremental_reads(&records);
    assert!(
        reads.len() >= 3000,
        "most of t2 came from the incremental snapshot ({} rows)",
        reads.len()
    );
    assert!(
        records
            .iter()
            .any(|r| r.value.as_ref().is_some_and(|v| v["payload"]["op"] == "d")),
        "deletes of t2 streamed too"
    );
    // As Debezium does, the signal table's own changes are emitted too: the
    // signal, and the connector's updates of its progress row.
    let signal_topic = consume_all(&kafka.bootstrap_servers(), &s.topic("signals"), TIMEOUT).await;
    let kinds: Vec<&str> = signal_topic
        .iter()
        .filter_map(|r| r.value.as_ref()?["payload"]["after"]["type"].as_str())
        .collect();
    for kind in [
        "execute-snapshot",
        "snapshot-window-open",
        "snapshot-window-close",
    ] {
        assert!(
            kinds.contains(&kind),
            "{kind} in the signal table's topic: {kinds:?}"
        );
    }
    // One window per 100-key chunk of at most 4,200 keys, and the last,
    // empty one: none opened again for a chunk dropped on a Relation message
    // that changed nothing.
    let windows = kinds
        .iter()
        .filter(|&&k| k == "snapshot-window-open")
        .count();
    assert!(
        windows <= 4200 / 100 + 1,
        "{windows} chunk windows for at most 42 chunks: chunks were read again"
    );
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_mid_snapshot_resumes_from_the_recorded_chunk() {
    let kafka = Kafka::shared();
    let s = Scenario::new(Postgres::shared(), "incrkill");
    s.sql("CREATE TABLE t (id int PRIMARY KEY, v int NOT NULL)");
    s.sql(SIGNALS);
    s.sql("INSERT INTO t SELECT g, g FROM generate_series(1, 20000) g");
    s.sql(&format!(
        "CREATE PUBLICATION {} FOR TABLE t, signals",
        s.publication
    ));
    let args = [
        "--snapshot-mode",
        "never",
        "--signal-data-collection",
        "public.signals",
        "--incremental-snapshot-chunk-size",
        "50",
        "--kafka-property",
        "linger.ms=20",
    ];
    let mut child = Command::new(BIN)
        .arg("run")
        .args(s.args(&kafka.bootstrap_servers(), &args))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("binary starts");
    s.await_slot().await;
    signal(&s, &["public.t"]);
    // Kill once the recorded position is well into the table.
    let mut recorded = 0i64;
    wait_until(TIMEOUT, "progress past key 3000 to be recorded", || {
        let data = progress_row(&s);
        let key = data
            .and_then(|d| serde_json::from_str::<Json>(&d).ok())
            .and_then(|p| p["last_key"][0].as_str().and_then(|k| k.parse().ok()))
            .unwrap_or(0);
        recorded = key;
        async move { key >= 3000 }
    })
    .await;
    Command::new("kill")
        .args(["-9", &child.id().to_string()])
        .status()
        .expect("kill");
    let _ = child.wait();
    assert!(
        progress_row(&s).is_some(),
        "the progress row survives the crash"
    );
    let status = Command::new(BIN)
        .args(["status", "--pg-url", &s.pg.url(&s.db), "--slot", &s.slot])
        .args(["--signal-data-collection", "public.signals"])
        .output()
        .expect("status runs");
    let status = String::from_utf8_lossy(&status.stdout).into_owned();
    assert!(
        status.contains(
            "incremental snapshot: 1 table(s) left (public.t), the current one after key"
        ),
        "status shows the recorded progress: {status}"
    );

    s.sql("UPDATE t SET v = -1 WHERE id <= 10 OR id > 19990");
    s.sql("DELETE FROM t WHERE id BETWEEN 11 AND 20 OR id BETWEEN 19981 AND 19990");
    let running = s.start(&kafka.bootstrap_servers(), &args);
    wait_until(TIMEOUT, "the incremental snapshot to complete", || async {
        progress_row(&s).is_none()
    })
    .await;
    wait_for_topic_to_equal_table(kafka, &s, "t").await;
    let records = consume_all(&kafka.bootstrap_servers(), &s.topic("t"), TIMEOUT).await;
    let reads = incremental_reads(&records).len() as i64;
    assert!(
        reads < 20000 + recorded,
        "the restart resumed after key {recorded} instead of starting over ({reads} rows read)"
    );
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_starts_and_stops_incremental_snapshots() {
    let kafka = Kafka::shared();
    let s = Scenario::new(Postgres::shared(), "incrcli");
    s.sql("CREATE TABLE small (id int PRIMARY KEY, v int NOT NULL)");
    s.sql("CREATE TABLE big (id int PRIMARY KEY, v int NOT NULL)");
    s.sql("CREATE TABLE nokey (v int)");
    s.sql(SIGNALS);
    s.sql("INSERT INTO small SELECT g, g FROM generate_series(1, 500) g");
    s.sql("INSERT INTO big SELECT g, g FROM generate_series(1, 50000) g");
    s.sql("INSERT INTO nokey VALUES (1)");
    s.sql(&format!(
        "CREATE PUBLICATION {} FOR TABLE small, big, nokey, signals",
        s.publication
    ));
    let running = s.start(
        &kafka.bootstrap_servers(),
        &[
            "--snapshot-mode",
            "never",
            "--signal-data-collection",
            "public.signals",
            "--incremental-snapshot-chunk-size",
            "10",
        ],
    );
    s.await_slot().await;
    let snapshot = |extra: &[&str]| {
        let output = Command::new(BIN)
            .args([
                "snapshot",
                "--pg-url",
                &s.pg.url(&s.db),
                "--signal-data-collection",
                "public.signals",
            ])
            .args(extra)
            .output()
            .expect("snapshot command runs");
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(
            output.status.success(),
            "snapshot {extra:?} failed: {stdout} {}",
            String::from_utf8_lossy(&output.stderr)
        );
        stdout
    };

    // The preflight checks the signal table.
    let check = Command::new(BIN)
        .arg("check")
        .args(s.args(
            &kafka.bootstrap_servers(),
            &["--signal-data-collection", "public.signals"],
        ))
        .output()
        .expect("check runs");
    let report = String::from_utf8_lossy(&check.stdout).into_owned();
    assert!(
        report.contains("PASS signal table: public.signals is published and writable"),
        "{report}"
    );
    let check = Command::new(BIN)
        .arg("check")
        .args(s.args(
            &kafka.bootstrap_servers(),
            &["--signal-data-collection", "public.nosuch"],
        ))
        .output()
        .expect("check runs");
    let report = String::from_utf8_lossy(&check.stdout).into_owned();
    assert!(
        report.contains("FAIL signal table: signal table public.nosuch does not exist"),
        "{report}"
    );

    // A table without a key is skipped with a warning; the other one is read.
    let said = snapshot(&["public.nokey", "public.small"]);
    assert!(
        said.contains("execute-snapshot") && said.contains("public.small"),
        "it says what it inserted: {said}"
    );
    wait_until(TIMEOUT, "the snapshot of small to complete", || async {
        progress_row(&s).is_none()
            && s.query_one("SELECT count(*) FROM signals").as_deref() == Some("1")
    })
    .await;
    wait_for_topic_to_equal_table(kafka, &s, "small").await;

    snapshot(&["public.big"]);
    wait_for_incremental_reads(kafka, &s, "big", 10).await;
    let said = snapshot(&["--stop", "public.big"]);
    assert!(said.contains("stop-snapshot"), "{said}");
    wait_until(TIMEOUT, "the stop signal to be read", || async {
        progress_row(&s).is_none()
    })
    .await;
    // A marker transaction after the stop: once it is in Kafka, everything
    // before it (the stop included) was handled.
    s.sql("INSERT INTO small VALUES (100000, 1)");
    let small_topic = s.topic("small");
    wait_until(TIMEOUT, "the marker row", || {
        let bootstrap = kafka.bootstrap_servers();
        let topic = small_topic.clone();
        async move {
            latest_by_key(&consume_all(&bootstrap, &topic, TIMEOUT).await).contains_key(&100000)
        }
    })
    .await;
    let before =
        incremental_reads(&consume_all(&kafka.bootstrap_servers(), &s.topic("big"), TIMEOUT).await)
            .len();
    assert!(
        before < 50000,
        "the snapshot of big stopped ({before} rows)"
    );
    s.sql("INSERT INTO small VALUES (100001, 1)");
    wait_until(TIMEOUT, "a second marker row", || {
        let bootstrap = kafka.bootstrap_servers();
        let topic = small_topic.clone();
        async move {
            latest_by_key(&consume_all(&bootstrap, &topic, TIMEOUT).await).contains_key(&100001)
        }
    })
    .await;
    let after =
        incremental_reads(&consume_all(&kafka.bootstrap_servers(), &s.topic("big"), TIMEOUT).await)
            .len();
    assert_eq!(before, after, "no chunk of big after the stop");
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_once_carries_chunks_in_kafka_transactions() {
    let kafka = Kafka::shared();
    let s = Scenario::new(Postgres::shared(), "increos");
    s.sql("CREATE TABLE t (id int PRIMARY KEY, v int NOT NULL)");
    s.sql(SIGNALS);
    s.sql("INSERT INTO t SELECT g, 0 FROM generate_series(1, 3000) g");
    s.sql(&format!(
        "CREATE PUBLICATION {} FOR TABLE t, signals",
        s.publication
    ));
    let running = s.start(
        &kafka.bootstrap_servers(),
        &[
            "--snapshot-mode",
            "never",
            "--delivery",
            "exactly-once",
            "--signal-data-collection",
            "public.signals",
            "--incremental-snapshot-chunk-size",
            "200",
        ],
    );
    s.await_slot().await;
    signal(&s, &["public.t"]);
    let mut round = 0;
    while progress_row(&s).is_some() || round == 0 {
        round += 1;
        let id = (round * 7919) % 3000 + 1;
        s.sql(&format!(
            "BEGIN; UPDATE t SET v = {round} WHERE id = {id}; DELETE FROM t WHERE id = {}; COMMIT",
            (id * 31) % 3000 + 1
        ));
        assert!(round < 100_000, "the incremental snapshot completes");
    }
    let expected = table_state(&s, "t");
    let topic = s.topic("t");
    let read = |topic: String| {
        let bootstrap = kafka.bootstrap_servers();
        async move {
            common::consume_until_idle(&bootstrap, &topic, Duration::from_secs(2), TIMEOUT).await
        }
    };
    wait_until(TIMEOUT, "the committed topic to equal the table", || {
        let records = read(topic.clone());
        let expected = &expected;
        async move { latest_by_key(&records.await) == *expected }
    })
    .await;
    let records = read(topic.clone()).await;
    let reads = incremental_reads(&records);
    let keys: std::collections::BTreeSet<i64> = reads
        .iter()
        .map(|r| {
            r.key.as_ref().expect("key")["payload"]["id"]
                .as_i64()
                .expect("id")
        })
        .collect();
    assert!(
        reads.len() > 2000,
        "the rows came from the snapshot ({})",
        reads.len()
    );
    assert_eq!(keys.len(), reads.len(), "no chunk row was written twice");
    running.stop().await;
}

/// The progress record of connector `name` in `topic`, read_committed, as
/// the connector reads it on start.
async fn progress_record(kafka: &Kafka, topic: &str, name: &str) -> ProgressRecord {
    let mut client = rdkafka::ClientConfig::new();
    client.set("bootstrap.servers", kafka.bootstrap_servers());
    let (topic, name) = (topic.to_owned(), name.to_owned());
    tokio::task::spawn_blocking(move || transactional::read_progress(&client, &topic, &name))
        .await
        .expect("reader thread")
        .expect("the progress topic reads")
        .expect("a progress record")
}

/// The first key column of `last_key`, as a number.
fn first_key(last_key: Option<&Vec<Option<String>>>) -> Option<i64> {
    last_key?.first()?.as_deref()?.parse().ok()
}

/// The connector binary with the debug-build fault hook armed: it stops
/// dead right after the Kafka commit of the `n`-th transaction carrying a
/// chunk, before the progress row records that chunk.
struct PausedAfterChunkCommit {
    child: std::process::Child,
    marker: std::path::PathBuf,
}

impl PausedAfterChunkCommit {
    fn spawn(s: &Scenario, kafka: &Kafka, args: &[&str], n: u64) -> Self {
        let marker = std::env::temp_dir().join(pgcdc_testcontainers::unique_name("chunk-commit"));
        let child = Command::new(BIN)
            .arg("run")
            .args(s.args(&kafka.bootstrap_servers(), args))
            .env(
                pgcdc_kafka::pipeline::fault::PAUSE_AFTER_CHUNK_COMMIT,
                format!("{n}:{}", marker.display()),
            )
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("binary starts");
        PausedAfterChunkCommit { child, marker }
    }

    async fn wait(&self) {
        wait_until(
            TIMEOUT,
            "the connector to pause after a chunk's kafka commit",
            || {
                let paused = self.marker.exists();
                async move { paused }
            },
        )
        .await;
    }

    fn kill_9(mut self) {
        Command::new("kill")
            .args(["-9", &self.child.id().to_string()])
            .status()
            .expect("kill");
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.marker);
    }
}

/// Exactly-once, killed in the one window the progress row cannot cover:
/// a chunk's Kafka transaction is committed, the signal table's progress row
/// does not record the chunk yet. The progress record committed with the
/// chunk must make the next instance go on after it, so a read_committed
/// consumer sees every row of the table once, under concurrent writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_once_crash_after_a_chunk_commit_reads_no_row_twice() {
    const ROWS: i64 = 12_000;
    const CHUNK: &str = "250";
    const PAUSE_AT_CHUNK_COMMIT: u64 = 10;
    let kafka = Kafka::shared();
    let s = Scenario::new(Postgres::shared(), "increoskill");
    s.sql("CREATE TABLE t (id int PRIMARY KEY, v int NOT NULL)");
    s.sql(SIGNALS);
    s.sql(&format!(
        "INSERT INTO t SELECT g, 0 FROM generate_series(1, {ROWS}) g"
    ));
    s.sql(&format!(
        "CREATE PUBLICATION {} FOR TABLE t, signals",
        s.publication
    ));
    let args = [
        "--snapshot-mode",
        "never",
        "--delivery",
        "exactly-once",
        "--signal-data-collection",
        "public.signals",
        "--incremental-snapshot-chunk-size",
        CHUNK,
    ];
    let paused = PausedAfterChunkCommit::spawn(&s, kafka, &args, PAUSE_AT_CHUNK_COMMIT);
    s.await_slot().await;

    // Only keys divisible by 10 (and new keys above ROWS) are ever written:
    // every other row must come from the snapshot, exactly once.
    let pg = s.pg;
    let db = s.db.clone();
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let writer = tokio::spawn(async move {
        let client = pg.connect(&db).await.expect("writer connects");
        let mut round = 0i64;
        while !*stop_rx.borrow_and_update() {
            round += 1;
            let touched = |n: i64| (n % (ROWS / 10)) * 10 + 10;
            client
                .batch_execute(&format!(
                    "BEGIN; \
                     UPDATE t SET v = {round} WHERE id = {}; \
                     DELETE FROM t WHERE id = {}; \
                     INSERT INTO t VALUES ({}, {round}) ON CONFLICT (id) DO UPDATE SET v = {round}; \
                     COMMIT",
                    touched(round * 7919),
                    touched(round * 104_729 + 3),
                    ROWS + 1 + round % 300,
                ))
                .await
                .expect("write");
            // Pacing the load, not waiting for anything.
            tokio::time::sleep(Duration::from_millis(3)).await;
        }
        round
    });

    signal(&s, &["public.t"]);
    paused.wait().await;
    // The window is really open: Kafka holds a chunk the progress row does
    // not record yet.
    let row: IncrementalProgress =
        serde_json::from_str(&progress_row(&s).expect("a progress row")).expect("progress json");
    let progress_topic = format!("{}.progress", s.prefix);
    let record = progress_record(kafka, &progress_topic, &s.prefix).await;
    let committed = record
        .incremental_snapshot
        .as_ref()
        .expect("the record carries the incremental snapshot's progress");
    let (row_key, kafka_key) = (
        first_key(row.last_key.as_ref()).expect("the row records earlier chunks"),
        first_key(committed.last_key.as_ref()).expect("the record has a last key"),
    );
    assert!(
        kafka_key > row_key,
        "kafka committed a chunk after key {row_key} that the progress row does not record: {record:?}"
    );
    paused.kill_9();

    let running = s.start(&kafka.bootstrap_servers(), &args);
    wait_until(TIMEOUT, "the incremental snapshot to complete", || async {
        progress_row(&s).is_none()
    })
    .await;
    let _ = stop_tx.send(true);
    let rounds = writer.await.expect("writer");
    assert!(
        rounds > 10,
        "the writer overlapped the snapshot ({rounds} rounds)"
    );

    let expected = table_state(&s, "t");
    let topic = s.topic("t");
    let read = |topic: String| {
        let bootstrap = kafka.bootstrap_servers();
        async move {
            common::consume_until_idle(&bootstrap, &topic, Duration::from_secs(2), TIMEOUT).await
        }
    };
    wait_until(TIMEOUT, "the committed topic to equal the table", || {
        let records = read(topic.clone());
        let expected = &expected;
        async move { latest_by_key(&records.await) == *expected }
    })
    .await;
    let records = read(topic).await;
    let mut reads: std::collections::BTreeMap<i64, usize> = std::collections::BTreeMap::new();
    for r in incremental_reads(&records) {
        let id = r.key.as_ref().expect("key")["payload"]["id"]
            .as_i64()
            .expect("id");
        *reads.entry(id).or_default() += 1;
    }
    let twice: Vec<_> = reads.iter().filter(|(_, n)| **n > 1).collect();
    assert!(
        twice.is_empty(),
        "{} keys were read more than once, e.g. {:?}",
        twice.len(),
        &twice[..twice.len().min(5)]
    );
    let missing: Vec<i64> = (1..=ROWS)
        .filter(|id| id % 10 != 0 && !reads.contains_key(id))
        .collect();
    assert!(
        missing.is_empty(),
        "{} rows never written since were not read, e.g. {:?}",
        missing.len(),
        &missing[..missing.len().min(5)]
    );

    // The last record says the snapshot finished.
    let record = progress_record(kafka, &progress_topic, &s.prefix).await;
    assert_eq!(
        record.incremental_snapshot,
        Some(IncrementalProgress::default()),
        "the progress record says the snapshot finished: {record:?}"
    );
    running.stop().await;
}

/// Exactly-once, killed right after the Kafka commit of the chunk that
/// finished the snapshot: the progress row still lists the table, the
/// progress record says it finished, and the next instance must believe the
/// record (delete the row, read nothing again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_once_crash_after_the_last_chunk_commit_finishes_the_snapshot() {
    let kafka = Kafka::shared();
    let s = Scenario::new(Postgres::shared(), "increoslast");
    s.sql("CREATE TABLE t (id int PRIMARY KEY, v int NOT NULL)");
    s.sql(SIGNALS);
    // 10 full chunks and a short 11th one, which finishes the table.
    s.sql("INSERT INTO t SELECT g, g FROM generate_series(1, 1050) g");
    s.sql(&format!(
        "CREATE PUBLICATION {} FOR TABLE t, signals",
        s.publication
    ));
    let args = [
        "--snapshot-mode",
        "never",
        "--delivery",
        "exactly-once",
        "--signal-data-collection",
        "public.signals",
        "--incremental-snapshot-chunk-size",
        "100",
    ];
    let paused = PausedAfterChunkCommit::spawn(&s, kafka, &args, 11);
    s.await_slot().await;
    signal(&s, &["public.t"]);
    paused.wait().await;
    let row: IncrementalProgress =
        serde_json::from_str(&progress_row(&s).expect("a progress row")).expect("progress json");
    assert_eq!(
        (row.tables.as_slice(), first_key(row.last_key.as_ref())),
        (["public.t".to_owned()].as_slice(), Some(1000)),
        "the row does not record the last chunk yet"
    );
    let progress_topic = format!("{}.progress", s.prefix);
    let record = progress_record(kafka, &progress_topic, &s.prefix).await;
    assert_eq!(
        record.incremental_snapshot,
        Some(IncrementalProgress::default()),
        "the record committed with the last chunk says the snapshot finished: {record:?}"
    );
    paused.kill_9();

    let running = s.start(&kafka.bootstrap_servers(), &args);
    wait_until(TIMEOUT, "the stale progress row to be deleted", || async {
        progress_row(&s).is_none()
    })
    .await;
    // A marker transaction: once it is in Kafka, the restarted connector
    // has had every chance to read a chunk again.
    s.sql("INSERT INTO t VALUES (100000, 1)");
    let topic = s.topic("t");
    wait_until(TIMEOUT, "the marker row", || {
        let bootstrap = kafka.bootstrap_servers();
        let topic = topic.clone();
        async move {
            let records =
                common::consume_until_idle(&bootstrap, &topic, Duration::from_secs(1), TIMEOUT)
                    .await;
            latest_by_key(&records).contains_key(&100000)
        }
    })
    .await;
    let records = common::consume_until_idle(
        &kafka.bootstrap_servers(),
        &topic,
        Duration::from_secs(2),
        TIMEOUT,
    )
    .await;
    let keys: Vec<i64> = incremental_reads(&records)
        .iter()
        .map(|r| {
            r.key.as_ref().expect("key")["payload"]["id"]
                .as_i64()
                .expect("id")
        })
        .collect();
    let distinct: std::collections::BTreeSet<i64> = keys.iter().copied().collect();
    assert_eq!(
        distinct,
        (1..=1050).collect(),
        "every row of the table was read"
    );
    assert_eq!(
        keys.len(),
        distinct.len(),
        "no row was read twice ({} reads of {} keys)",
        keys.len(),
        distinct.len()
    );
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn composite_text_keys_are_chunked_in_key_order() {
    let kafka = Kafka::shared();
    let s = Scenario::new(Postgres::shared(), "incrkeys");
    s.sql("CREATE TABLE t (region text, id int, at timestamptz NOT NULL DEFAULT '2024-01-01', PRIMARY KEY (region, id))");
    s.sql(SIGNALS);
    s.sql(
        "INSERT INTO t (region, id) SELECT r, g FROM generate_series(1, 7) g, \
         unnest(ARRAY['north', 'o''hara', 'zürich', 'back\\slash', '']) r",
    );
    s.sql(&format!(
        "CREATE PUBLICATION {} FOR TABLE t, signals",
        s.publication
    ));
    kafka.create_topic(&s.topic("t"), 1).expect("create topic");
    let running = s.start(
        &kafka.bootstrap_servers(),
        &[
            "--snapshot-mode",
            "never",
            "--signal-data-collection",
            "public.signals",
            "--incremental-snapshot-chunk-size",
            "3",
        ],
    );
    s.await_slot().await;
    signal(&s, &["public.t"]);
    wait_until(TIMEOUT, "the incremental snapshot to complete", || async {
        progress_row(&s).is_none()
    })
    .await;
    // The order PostgreSQL itself gives the key (region's collation
    // included), not a Rust sort: the chunks must follow it.
    let expected: Vec<(String, i64)> =
        s.pg.query(&s.db, "SELECT region, id::text FROM t ORDER BY region, id")
            .expect("query")
            .into_iter()
            .map(|r| {
                (
                    r[0].clone().expect("region"),
                    r[1].as_deref().expect("id").parse().expect("integer id"),
                )
            })
            .collect();
    // One partition (created above), so the topic's order is the order the
    // connector produced the reads in.
    let topic = s.topic("t");
    let read = wait_for(TIMEOUT, "every row as an incremental read", || {
        let bootstrap = kafka.bootstrap_servers();
        let topic = topic.clone();
        let expected = &expected;
        async move {
            let records = consume_all(&bootstrap, &topic, TIMEOUT).await;
            let read: Vec<(String, i64)> = incremental_reads(&records)
                .iter()
                .map(|r| {
                    let after = &r.value.as_ref().expect("value")["payload"]["after"];
                    (
                        after["region"].as_str().expect("region").to_owned(),
                        after["id"].as_i64().expect("id"),
                    )
                })
                .collect();
            match read.len() >= expected.len() {
                true => Ok(read),
                false => Err(format!("{} of {} rows", read.len(), expected.len())),
            }
        }
    })
    .await;
    assert_eq!(
        read, expected,
        "the incremental snapshot reads the rows once each, chunk after chunk in the key order \
         PostgreSQL sorts them in"
    );
    running.stop().await;
}
