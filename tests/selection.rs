//! Selection and routing against real Postgres and Kafka: schema, table and
//! column filters (snapshot and stream), custom message keys, the topic
//! delimiter, routing several tables into one topic, topic creation,
//! publication autocreate modes, partition roots, dropping the slot on stop,
//! and settings that fail validation before anything connects.

mod common;

use std::process::Command;
use std::time::Duration;

use common::{consume, consume_all, wait_until, Record, Scenario, TIMEOUT};
use pgcdc_kafka::config::RunConfig;
use pgcdc_kafka::pipeline::{self, PipelineError, Shutdown};
use pgcdc_testcontainers::{unique_name, Kafka, Postgres, SchemaRegistry};
use rdkafka::admin::{AdminClient, AdminOptions, ResourceSpecifier};
use rdkafka::client::DefaultClientContext;
use rdkafka::ClientConfig;
use serde_json::{json, Value as Json};

const BIN: &str = env!("CARGO_BIN_EXE_pgcdc-kafka");

fn payload(record: &Record) -> &Json {
    &record.value.as_ref().expect("not a tombstone")["payload"]
}

fn field_names(schema: &Json) -> Vec<String> {
    schema["fields"]
        .as_array()
        .expect("struct schema")
        .iter()
        .map(|f| f["field"].as_str().expect("field name").to_owned())
        .collect()
}

/// The `after` (or `before`) row schema of an envelope schema.
fn row_schema<'a>(value: &'a Json, part: &str) -> &'a Json {
    value["schema"]["fields"]
        .as_array()
        .expect("envelope fields")
        .iter()
        .find(|f| f["field"] == part)
        .expect("row field")
}

/// Waits until the slot confirmed everything written so far, so every
/// record the connector was going to produce for it is in Kafka.
async fn wait_confirmed_past_now(s: &Scenario) {
    let target = s.current_lsn();
    wait_until(TIMEOUT, "slot confirmed past the writes", || async {
        s.confirmed_flush_lsn().is_some_and(|lsn| lsn >= target)
    })
    .await;
}

async fn wait_for_slot(s: &Scenario) {
    s.await_slot().await;
}

fn ops(records: &[Record]) -> Vec<String> {
    records
        .iter()
        .map(|r| {
            r.value.as_ref().map_or("tombstone".to_owned(), |v| {
                v["payload"]["op"].as_str().expect("op").to_owned()
            })
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schema_and_table_filters_apply_to_snapshot_and_stream() {
    let kafka = Kafka::shared();
    let bootstrap = kafka.bootstrap_servers();
    let s = Scenario::new(Postgres::shared(), "selfilt");
    s.sql("CREATE SCHEMA other");
    s.sql("CREATE TABLE keep (id int PRIMARY KEY)");
    s.sql("CREATE TABLE skip_me (id int PRIMARY KEY)");
    s.sql("CREATE TABLE other.t (id int PRIMARY KEY)");
    s.sql("INSERT INTO keep VALUES (1); INSERT INTO skip_me VALUES (1); INSERT INTO other.t VALUES (1)");

    let running = s.start(
        &bootstrap,
        &[
            "--schema-exclude-list",
            "other",
            "--table-exclude-list",
            "public\\.SKIP_.*",
        ],
    );
    wait_for_slot(&s).await;
    s.sql(
        "BEGIN; INSERT INTO skip_me VALUES (2); INSERT INTO other.t VALUES (2); \
         INSERT INTO keep VALUES (2); COMMIT",
    );
    let keep = consume(&bootstrap, &s.topic("keep"), 2, TIMEOUT).await;
    assert_eq!(
        ops(&keep),
        ["r", "c"],
        "snapshot row, then the streamed insert"
    );
    wait_confirmed_past_now(&s).await;
    running.stop().await;

    assert!(
        consume_all(&bootstrap, &s.topic("skip_me"), TIMEOUT)
            .await
            .is_empty(),
        "the table exclude list (case-insensitive, whole name) drops snapshot and stream"
    );
    assert!(
        consume_all(&bootstrap, &format!("{}.other.t", s.prefix), TIMEOUT)
            .await
            .is_empty(),
        "the schema exclude list drops the schema's tables"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn excluded_columns_vanish_and_message_key_columns_key_a_table_without_pk() {
    let kafka = Kafka::shared();
    let bootstrap = kafka.bootstrap_servers();
    let s = Scenario::new(Postgres::shared(), "selcols");
    s.sql("CREATE TABLE users (id int PRIMARY KEY, name text, password text, ssn text)");
    s.sql("ALTER TABLE users REPLICA IDENTITY FULL");
    s.sql("CREATE TABLE readings (sensor text NOT NULL, region text NOT NULL, v int)");
    s.sql("ALTER TABLE readings REPLICA IDENTITY FULL");
    s.sql("CREATE TABLE ignored (id int PRIMARY KEY)");
    s.sql("INSERT INTO users VALUES (1, 'ann', 'secret1', 'ssn-value-1')");

    let running = s.start(
        &bootstrap,
        &[
            "--table-include-list",
            "public\\.users,public\\.readings",
            "--column-exclude-list",
            "public\\.users\\.(password|ssn)",
            "--message-key-columns",
            "public\\.read.*:sensor,region",
        ],
    );
    wait_for_slot(&s).await;
    s.sql("INSERT INTO users VALUES (2, 'bob', 'secret2', 'ssn-value-2')");
    s.sql("UPDATE users SET password = 'changed', name = 'bo' WHERE id = 2");
    s.sql("DELETE FROM users WHERE id = 1");
    s.sql("INSERT INTO readings VALUES ('s1', 'eu', 10)");
    s.sql("UPDATE readings SET v = 11 WHERE sensor = 's1'");
    s.sql("INSERT INTO ignored VALUES (1)");

    let users = consume(&bootstrap, &s.topic("users"), 5, TIMEOUT).await;
    assert_eq!(ops(&users), ["r", "c", "u", "d", "tombstone"]);
    assert_eq!(payload(&users[0])["after"], json!({"id": 1, "name": "ann"}));
    assert_eq!(payload(&users[1])["after"], json!({"id": 2, "name": "bob"}));
    assert_eq!(
        payload(&users[2])["before"],
        json!({"id": 2, "name": "bob"}),
        "the before-image loses the excluded columns too"
    );
    assert_eq!(
        payload(&users[3])["before"],
        json!({"id": 1, "name": "ann"})
    );
    for record in &users[..4] {
        let value = record.value.as_ref().unwrap();
        assert_eq!(field_names(row_schema(value, "after")), ["id", "name"]);
        let text = value.to_string();
        assert!(
            // Markers no timestamp or LSN can contain by chance (a bare
            // "111" matched a ts_us once).
            !text.contains("secret") && !text.contains("changed") && !text.contains("ssn-value"),
            "no excluded value anywhere: {text}"
        );
    }

    let readings = consume(&bootstrap, &s.topic("readings"), 2, TIMEOUT).await;
    assert_eq!(ops(&readings), ["c", "u"]);
    for record in &readings {
        let key = record
            .key
            .as_ref()
            .expect("a table without PK gets the chosen key");
        assert_eq!(key["payload"], json!({"sensor": "s1", "region": "eu"}));
        assert_eq!(field_names(&key["schema"]), ["sensor", "region"]);
        assert_eq!(
            key["schema"]["name"],
            format!("{}.Key", s.topic("readings"))
        );
    }
    wait_confirmed_past_now(&s).await;
    running.stop().await;
    assert!(
        consume_all(&bootstrap, &s.topic("ignored"), TIMEOUT)
            .await
            .is_empty(),
        "tables outside the include list are not captured"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn excluding_a_key_column_stops_with_a_clear_error() {
    let kafka = Kafka::shared();
    let s = Scenario::new(Postgres::shared(), "selkey");
    s.sql("CREATE TABLE t (id int PRIMARY KEY, v int)");
    s.sql("INSERT INTO t VALUES (1, 1)");
    let running = s.start(
        &kafka.bootstrap_servers(),
        &["--column-exclude-list", "public\\.t\\.id"],
    );
    let error = running
        .wait_for_exit(TIMEOUT)
        .await
        .expect_err("a key column cannot be excluded");
    assert!(!error.is_retryable());
    let message = pgcdc_kafka::error_chain(&error);
    assert!(
        message.contains("\"id\"") && message.contains("public.t") && message.contains("key"),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delimiter_and_routes_send_shards_into_one_topic_with_unique_keys() {
    let kafka = Kafka::shared();
    let bootstrap = kafka.bootstrap_servers();
    let s = Scenario::new(Postgres::shared(), "selroute");
    s.sql("CREATE TABLE shard_1 (id int PRIMARY KEY, v text)");
    s.sql("CREATE TABLE shard_2 (id int PRIMARY KEY, v text)");
    s.sql("CREATE TABLE plain (id int PRIMARY KEY)");
    let route = "(.*)_public_shard_\\d+=$1_shards".to_owned();
    let running = s.start(
        &bootstrap,
        &[
            "--snapshot-mode",
            "never",
            "--topic-delimiter",
            "_",
            "--topic-route",
            &route,
        ],
    );
    wait_for_slot(&s).await;
    s.sql("INSERT INTO shard_1 VALUES (1, 'one')");
    s.sql("INSERT INTO shard_2 VALUES (1, 'uno')");
    s.sql("INSERT INTO plain VALUES (7)");

    let shards_topic = format!("{}_shards", s.prefix);
    let shards = consume(&bootstrap, &shards_topic, 2, TIMEOUT).await;
    assert_eq!(shards.len(), 2, "{shards:#?}");
    let mut seen = Vec::new();
    for record in &shards {
        let key = record.key.as_ref().expect("key");
        let physical = format!(
            "{}_public_{}",
            s.prefix,
            payload(record)["source"]["table"].as_str().unwrap()
        );
        assert_eq!(
            key["payload"],
            json!({"id": 1, "__dbz__physicalTableIdentifier": physical}),
            "equal primary keys stay distinct by the original topic"
        );
        assert_eq!(
            field_names(&key["schema"]),
            ["id", "__dbz__physicalTableIdentifier"]
        );
        assert_eq!(key["schema"]["name"], format!("{shards_topic}.Key"));
        let value = record.value.as_ref().unwrap();
        assert_eq!(value["schema"]["name"], format!("{shards_topic}.Envelope"));
        seen.push(
            payload(record)["source"]["table"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    seen.sort();
    assert_eq!(
        seen,
        ["shard_1", "shard_2"],
        "the envelope keeps the physical table"
    );

    let plain = consume(
        &bootstrap,
        &format!("{}_public_plain", s.prefix),
        1,
        TIMEOUT,
    )
    .await;
    assert_eq!(plain.len(), 1, "the delimiter shapes unrouted topics");
    assert_eq!(plain[0].key.as_ref().unwrap()["payload"], json!({"id": 7}));
    running.stop().await;

    // Without key uniqueness the key is the primary key alone.
    let s2 = Scenario::new(Postgres::shared(), "selroute2");
    s2.sql("CREATE TABLE shard_1 (id int PRIMARY KEY)");
    let route = format!("{}\\.public\\.shard_1={}.merged", s2.prefix, s2.prefix);
    let running = s2.start(
        &bootstrap,
        &[
            "--snapshot-mode",
            "never",
            "--topic-route",
            &route,
            "--topic-route-key-uniqueness",
            "false",
        ],
    );
    wait_for_slot(&s2).await;
    s2.sql("INSERT INTO shard_1 VALUES (5)");
    let merged = consume(&bootstrap, &format!("{}.merged", s2.prefix), 1, TIMEOUT).await;
    assert_eq!(merged.len(), 1);
    assert_eq!(merged[0].key.as_ref().unwrap()["payload"], json!({"id": 5}));
    running.stop().await;
}

fn admin(bootstrap: &str) -> AdminClient<DefaultClientContext> {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .expect("admin client")
}

async fn topic_layout(bootstrap: &str, topic: &str) -> (usize, String) {
    let admin = admin(bootstrap);
    let metadata = admin
        .inner()
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .expect("metadata");
    let partitions = metadata
        .topics()
        .iter()
        .find(|t| t.name() == topic)
        .map_or(0, |t| t.partitions().len());
    let resource = ResourceSpecifier::Topic(topic);
    let results = admin
        .describe_configs([&resource], &AdminOptions::new())
        .await
        .expect("describe configs");
    let config = results
        .into_iter()
        .next()
        .expect("one result")
        .expect("topic config");
    let policy = config
        .get("cleanup.policy")
        .and_then(|e| e.value.clone())
        .expect("cleanup.policy");
    (partitions, policy)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topics_are_created_with_the_given_layout_and_existing_ones_left_alone() {
    let kafka = Kafka::shared();
    let bootstrap = kafka.bootstrap_servers();
    let s = Scenario::new(Postgres::shared(), "seltopic");
    s.sql("CREATE TABLE fresh (id int PRIMARY KEY)");
    s.sql("CREATE TABLE existing (id int PRIMARY KEY)");
    s.sql("INSERT INTO fresh VALUES (1)");
    kafka
        .create_topic(&s.topic("existing"), 1)
        .expect("pre-create topic");
    let running = s.start(
        &bootstrap,
        &[
            "--topic-partitions",
            "3",
            "--topic-replication-factor",
            "1",
            "--topic-config",
            "cleanup.policy=compact",
        ],
    );
    wait_for_slot(&s).await;
    s.sql("INSERT INTO fresh VALUES (2)");
    s.sql("INSERT INTO existing VALUES (1)");
    s.sql("SELECT pg_logical_emit_message(true, 'p', 'hello')");
    assert_eq!(
        consume(&bootstrap, &s.topic("fresh"), 2, TIMEOUT)
            .await
            .len(),
        2
    );
    assert_eq!(
        consume(&bootstrap, &s.topic("existing"), 1, TIMEOUT)
            .await
            .len(),
        1
    );
    let message_topic = format!("{}.message", s.prefix);
    assert_eq!(
        consume(&bootstrap, &message_topic, 1, TIMEOUT).await.len(),
        1
    );
    running.stop().await;

    assert_eq!(
        topic_layout(&bootstrap, &s.topic("fresh")).await,
        (3, "compact".to_owned())
    );
    assert_eq!(
        topic_layout(&bootstrap, &message_topic).await,
        (3, "compact".to_owned()),
        "the message topic is created the same way"
    );
    assert_eq!(
        topic_layout(&bootstrap, &s.topic("existing")).await,
        (1, "delete".to_owned()),
        "an existing topic is never altered"
    );
}

fn published(s: &Scenario) -> Vec<String> {
    s.pg.query(
        &s.db,
        &format!(
            "SELECT schemaname || '.' || tablename FROM pg_publication_tables \
             WHERE pubname = '{}' ORDER BY 1",
            s.publication
        ),
    )
    .expect("query")
    .into_iter()
    .map(|r| r[0].clone().expect("name"))
    .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filtered_publication_follows_the_lists_and_partitions_go_to_the_root_topic() {
    let kafka = Kafka::shared();
    let bootstrap = kafka.bootstrap_servers();
    let s = Scenario::new(Postgres::shared(), "selpub");
    s.sql("CREATE TABLE a (id int PRIMARY KEY)");
    s.sql("CREATE TABLE b (id int PRIMARY KEY)");
    s.sql("CREATE TABLE meas (id int, day int, PRIMARY KEY (id, day)) PARTITION BY RANGE (day)");
    s.sql("CREATE TABLE meas_1 PARTITION OF meas FOR VALUES FROM (0) TO (10)");
    s.sql("CREATE TABLE meas_2 PARTITION OF meas FOR VALUES FROM (10) TO (20)");
    s.sql("INSERT INTO meas VALUES (1, 5)");

    let running = s.start(
        &bootstrap,
        &[
            "--publication-autocreate-mode",
            "filtered",
            "--table-include-list",
            "public\\.(a|meas)",
            "--publish-via-partition-root",
            "true",
        ],
    );
    wait_for_slot(&s).await;
    assert_eq!(published(&s), ["public.a", "public.meas"]);
    assert_eq!(
        s.query_one(&format!(
            "SELECT pubviaroot::text FROM pg_publication WHERE pubname = '{}'",
            s.publication
        ))
        .as_deref(),
        Some("true")
    );
    s.sql("INSERT INTO meas VALUES (2, 15)");
    let meas = consume(&bootstrap, &s.topic("meas"), 2, TIMEOUT).await;
    assert_eq!(
        ops(&meas),
        ["r", "c"],
        "snapshot and stream of the partitions"
    );
    for record in &meas {
        assert_eq!(payload(record)["source"]["table"], "meas");
    }
    assert_eq!(payload(&meas[1])["after"], json!({"id": 2, "day": 15}));
    wait_confirmed_past_now(&s).await;
    running.stop().await;
    assert!(
        consume_all(&bootstrap, &s.topic("meas_2"), TIMEOUT)
            .await
            .is_empty(),
        "nothing on the partition's own topic"
    );

    // Restarted with other lists, the publication is altered to match.
    let running = s.start(
        &bootstrap,
        &[
            "--publication-autocreate-mode",
            "filtered",
            "--table-include-list",
            "public\\.(a|b)",
        ],
    );
    wait_until(TIMEOUT, "publication altered", || async {
        published(&s) == ["public.a", "public.b"]
    })
    .await;
    s.sql("INSERT INTO b VALUES (1)");
    assert_eq!(
        consume(&bootstrap, &s.topic("b"), 1, TIMEOUT).await.len(),
        1
    );
    running.stop().await;
    assert_eq!(
        s.query_one(&format!(
            "SELECT pubviaroot::text FROM pg_publication WHERE pubname = '{}'",
            s.publication
        ))
        .as_deref(),
        Some("false")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disabled_mode_and_missing_replication_privilege_explain_the_fix() {
    let kafka = Kafka::shared();
    let s = Scenario::new(Postgres::shared(), "seldis");
    s.sql("CREATE TABLE a (id int PRIMARY KEY)");
    let running = s.start(
        &kafka.bootstrap_servers(),
        &[
            "--publication-autocreate-mode",
            "disabled",
            "--table-include-list",
            "public\\.a",
        ],
    );
    let error = running
        .wait_for_exit(TIMEOUT)
        .await
        .expect_err("the publication must exist");
    assert!(!error.is_retryable());
    let message = pgcdc_kafka::error_chain(&error);
    assert!(
        message.contains(&format!(
            "CREATE PUBLICATION \"{}\" FOR TABLE \"public\".\"a\";",
            s.publication
        )),
        "{message}"
    );
    assert!(s.confirmed_flush_lsn().is_none(), "no slot was created");

    let role = unique_name("norepl");
    s.sql(&format!("CREATE ROLE {role} LOGIN"));
    let url = format!("postgres://{role}@127.0.0.1:{}/{}", s.pg.port(), s.db);
    let mut args = s.args(&kafka.bootstrap_servers(), &[]);
    args[1] = url;
    let config = RunConfig::from_args(args).expect("flags");
    let (_stop, shutdown) = Shutdown::new();
    let error = pipeline::run(config, shutdown)
        .await
        .expect_err("the role may not replicate");
    let message = pgcdc_kafka::error_chain(&error);
    assert!(
        message.contains(&format!("ALTER ROLE \"{role}\" REPLICATION")),
        "{message}"
    );
    // A role that may replicate but owns nothing cannot create the publication.
    let role = unique_name("replonly");
    s.sql(&format!("CREATE ROLE {role} LOGIN REPLICATION"));
    let mut args = s.args(
        &kafka.bootstrap_servers(),
        &[
            "--publication-autocreate-mode",
            "filtered",
            "--table-include-list",
            "public\\.a",
        ],
    );
    args[1] = format!("postgres://{role}@127.0.0.1:{}/{}", s.pg.port(), s.db);
    let config = RunConfig::from_args(args).expect("flags");
    let (_stop, shutdown) = Shutdown::new();
    let error = pipeline::run(config, shutdown)
        .await
        .expect_err("the role may not create the publication");
    let message = pgcdc_kafka::error_chain(&error);
    assert!(!error.is_retryable(), "{message}");
    assert!(
        message.contains(&format!(
            "not allowed to run: CREATE PUBLICATION \"{}\" FOR TABLE \"public\".\"a\";",
            s.publication
        )) && message.contains("ownership"),
        "{message}"
    );
}

/// An existing publication that lacks a selected table, or a selection
/// that matches no table, stops the run before a slot exists, naming the fix
/// (it used to stream nothing, silently, while the slot held WAL).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_selected_table_the_publication_lacks_stops_the_run() {
    let kafka = Kafka::shared();
    let s = Scenario::new(Postgres::shared(), "selpub");
    s.sql("CREATE TABLE a (id int PRIMARY KEY); CREATE TABLE b (id int PRIMARY KEY)");
    s.sql(&format!("CREATE PUBLICATION {} FOR TABLE a", s.publication));
    let fails = |extra: &'static [&'static str]| {
        let config =
            RunConfig::from_args(s.args(&kafka.bootstrap_servers(), extra)).expect("flags");
        async move {
            let (_stop, shutdown) = Shutdown::new();
            let error = pipeline::run(config, shutdown)
                .await
                .expect_err("nothing of the selection would be streamed");
            assert!(!error.is_retryable());
            pgcdc_kafka::error_chain(&error)
        }
    };
    for extra in [
        &["--table", "public.a,public.b"][..],
        &[
            "--table-include-list",
            "public\\.(a|b)",
            "--publication-autocreate-mode",
            "disabled",
        ],
    ] {
        let message = fails(extra).await;
        assert!(
            message.contains(&format!(
                "ALTER PUBLICATION \"{}\" ADD TABLE \"public\".\"b\";",
                s.publication
            )) && !message.contains("\"a\""),
            "{extra:?}: {message}"
        );
    }
    let message = fails(&["--table", "public.nope"]).await;
    assert!(
        message.contains("no table of the database matches"),
        "{message}"
    );
    assert!(s.confirmed_flush_lsn().is_none(), "no slot was created");

    // The selection within the publication runs.
    let running = s.start(&kafka.bootstrap_servers(), &["--table", "public.a"]);
    wait_for_slot(&s).await;
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slot_is_dropped_after_a_graceful_stop() {
    let kafka = Kafka::shared();
    let bootstrap = kafka.bootstrap_servers();
    let s = Scenario::new(Postgres::shared(), "seldrop");
    s.sql("CREATE TABLE a (id int PRIMARY KEY)");
    let running = s.start(&bootstrap, &["--slot-drop-on-stop"]);
    wait_for_slot(&s).await;
    s.sql("INSERT INTO a VALUES (1)");
    assert_eq!(
        consume(&bootstrap, &s.topic("a"), 1, TIMEOUT).await.len(),
        1
    );
    running.stop().await;
    assert_eq!(s.confirmed_flush_lsn(), None, "the slot is gone");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_settings_fail_validation_before_touching_the_database() {
    // Nothing listens on port 1: reaching the database would be a connect error.
    let args = [
        "--pg-url",
        "postgres://u@127.0.0.1:1/db",
        "--topic-prefix",
        "app",
        "--table-include-list",
        "public\\.(unclosed",
        "--column-include-list",
        "a",
        "--column-exclude-list",
        "b",
        "--topic-route",
        "x=$2",
    ];
    let config = RunConfig::from_args(args).expect("flags parse");
    let error = config.validate().expect_err("invalid");
    let text = error.to_string();
    for needle in [
        "table-include-list: \"public\\\\.(unclosed\" is not a valid regular expression",
        "column-exclude-list",
        "cannot be combined with --column-include-list",
        "topic-route",
    ] {
        assert!(text.contains(needle), "{needle} in {text}");
    }

    let (_stop, shutdown) = Shutdown::new();
    let error = pipeline::run(config, shutdown)
        .await
        .expect_err("invalid settings");
    assert!(
        matches!(error, PipelineError::Config(_)),
        "stopped by the settings, not by the unreachable database: {error}"
    );

    let output = Command::new(BIN)
        .arg("run")
        .args(args)
        .output()
        .expect("binary runs");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("table-include-list"), "{stderr}");
}

/// `PUT /config/<subject>` on the registry (the helper has GET and POST only).
fn set_compatibility(registry: &SchemaRegistry, subject: &str, level: &str) {
    use std::io::{Read, Write};
    let url = registry.url();
    let base = url
        .splitn(4, '/')
        .nth(3)
        .map(|p| format!("/{p}"))
        .unwrap_or_default();
    let body = json!({ "compatibility": level }).to_string();
    let mut stream =
        std::net::TcpStream::connect(("127.0.0.1", registry.port())).expect("registry connects");
    write!(
        stream,
        "PUT {base}/config/{subject} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\
         Content-Type: application/vnd.schemaregistry.v1+json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("request sent");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("response");
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routed_tables_share_an_avro_subject_and_must_stay_compatible() {
    let kafka = Kafka::shared();
    let registry = SchemaRegistry::shared();
    let s = Scenario::new(Postgres::shared(), "selavro");
    s.sql("CREATE TABLE shard_1 (id int PRIMARY KEY, v int)");
    s.sql("CREATE TABLE shard_2 (id int PRIMARY KEY, v int)");
    s.sql("CREATE TABLE shard_3 (id int PRIMARY KEY, v text)");
    let topic = format!("{}.shards", s.prefix);
    let subject = format!("{topic}-value");
    set_compatibility(registry, &subject, "BACKWARD");
    let route = format!("{}\\.public\\.shard_\\d={topic}", s.prefix);
    let url = registry.url();
    let running = s.start(
        &kafka.bootstrap_servers(),
        &[
            "--format",
            "avro",
            "--schema-registry-url",
            &url,
            "--snapshot-mode",
            "never",
            "--topic-route",
            &route,
        ],
    );
    wait_for_slot(&s).await;
    s.sql("INSERT INTO shard_1 VALUES (1, 1)");
    s.sql("INSERT INTO shard_2 VALUES (1, 2)");
    wait_confirmed_past_now(&s).await;
    let (status, versions) = registry
        .get(&format!("/subjects/{subject}/versions"))
        .expect("registry answers");
    assert_eq!(status, 200, "{versions}");
    let versions: Vec<i64> = serde_json::from_str(&versions).expect("JSON");
    assert!(
        !versions.is_empty(),
        "both shards were written under the one subject"
    );

    s.sql("INSERT INTO shard_3 VALUES (1, 'three')");
    let error = running
        .wait_for_exit(TIMEOUT)
        .await
        .expect_err("an incompatible routed table stops the connector");
    let message = pgcdc_kafka::error_chain(&error);
    assert!(!error.is_retryable(), "{message}");
    assert!(
        message.contains("public.shard_3") && message.contains(&subject),
        "{message}"
    );
}

#[test]
fn check_follows_the_publication_mode_and_the_lists() {
    let kafka = Kafka::shared();
    let s = Scenario::new(Postgres::shared(), "selcheck");
    s.sql("CREATE TABLE a (id int PRIMARY KEY)");
    s.sql("CREATE TABLE b (id int PRIMARY KEY)");
    let check = |extra: &[&str]| {
        let mut args = s.args(&kafka.bootstrap_servers(), extra);
        args.insert(0, "check".to_owned());
        let output = Command::new(BIN)
            .args(&args)
            .env_remove("PGCDC_LOG_FORMAT")
            .output()
            .expect("binary runs");
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let line = |stdout: &str, prefix: &str| {
        stdout
            .lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix:?} line in:\n{stdout}"))
            .to_owned()
    };

    let stdout = check(&["--publication-autocreate-mode", "disabled"]);
    assert!(
        line(&stdout, "FAIL publication:").contains("disabled does not create it"),
        "{stdout}"
    );
    let stdout = check(&[
        "--publication-autocreate-mode",
        "filtered",
        "--table-include-list",
        "public\\.a",
    ]);
    assert!(
        line(&stdout, "PASS publication:").contains("the 1 selected tables"),
        "{stdout}"
    );

    // An existing publication without a selected table: check fails as run
    // would stop, naming the table and the fix (it used to say the
    // publication "has no tables").
    s.sql(&format!("CREATE PUBLICATION {} FOR TABLE a", s.publication));
    let stdout = check(&["--table", "public.b"]);
    let selection = line(&stdout, "FAIL selection:");
    assert!(
        selection.contains("\"public\".\"b\"")
            && stdout.contains(&format!(
                "ALTER PUBLICATION \"{}\" ADD TABLE",
                s.publication
            )),
        "{stdout}"
    );
    assert!(
        line(&stdout, "PASS publication:").contains("1 tables"),
        "{stdout}"
    );
    assert_eq!(s.confirmed_flush_lsn(), None, "check creates nothing");
}

/// `--slot-temporary`: the slot is created on the replication connection,
/// streams like any other, is gone as soon as the connector is; losing the
/// connection stops the connector (a retry would silently start from a new
/// slot), and a snapshot mode is refused at validation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_temporary_slot_lives_and_dies_with_its_connection() {
    let kafka = Kafka::shared();
    let bootstrap = kafka.bootstrap_servers();
    let s = Scenario::new(Postgres::shared(), "seltemp");
    s.sql("CREATE TABLE a (id int PRIMARY KEY)");

    let refused = RunConfig::from_args(s.args(&bootstrap, &["--slot-temporary"]))
        .expect("flags parse")
        .validate()
        .expect_err("a temporary slot with the default snapshot mode is refused");
    assert!(refused.to_string().contains("slot-temporary"), "{refused}");

    let flags = ["--slot-temporary", "--snapshot-mode", "never"];
    let running = s.start(&bootstrap, &flags);
    wait_for_slot(&s).await;
    assert_eq!(
        s.query_one(&format!(
            "SELECT temporary::text FROM pg_replication_slots WHERE slot_name = '{}'",
            s.slot
        ))
        .as_deref(),
        Some("true")
    );
    s.sql("INSERT INTO a VALUES (1)");
    assert_eq!(
        consume(&bootstrap, &s.topic("a"), 1, TIMEOUT).await.len(),
        1
    );
    running.stop().await;
    assert_eq!(
        s.confirmed_flush_lsn(),
        None,
        "the slot ended with the connector"
    );

    // A cut connection ends the slot: the connector stops instead of retrying.
    let running = s.start(&bootstrap, &flags);
    wait_for_slot(&s).await;
    wait_until(TIMEOUT, "the walsender", || async {
        s.query_one(&format!(
            "SELECT active_pid::text FROM pg_replication_slots WHERE slot_name = '{}'",
            s.slot
        ))
        .is_some()
    })
    .await;
    s.sql(&format!(
        "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = '{}'",
        s.slot
    ));
    let error = running
        .wait_for_exit(TIMEOUT)
        .await
        .expect_err("a lost temporary slot stops the connector");
    assert!(
        matches!(error, PipelineError::TemporarySlotEnded(_)),
        "{}",
        pgcdc_kafka::error_chain(&error)
    );
    assert_eq!(s.confirmed_flush_lsn(), None, "no new slot was made");
}
