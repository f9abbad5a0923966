//! The configuration layers through the binary: precedence (flags > env >
//! `--config` > `--debezium-config` > defaults) read back from `config
//! show`, every problem reported at once before anything connects, secrets
//! redacted, and Debezium's own documentation example imported and run
//! end to end.
//!
//! Each test runs the binary as a subprocess with its own environment, so
//! environment variables never race between tests.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use common::{consume, Scenario};
use pgcdc_testcontainers::{Kafka, Postgres};
use serde_json::json;
use tempfile::TempDir;

const BIN: &str = env!("CARGO_BIN_EXE_pgcdc-kafka");

/// A PostgreSQL URL nothing listens on: a test that reaches the database
/// would fail with a connection error instead of the configuration error.
const NOWHERE: &str = "postgres://cdc:pw@127.0.0.1:1/shop";

/// Every `PGCDC_*` variable of this process is removed, so the tests see
/// only the environment they set.
fn pgcdc(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(BIN);
    for (key, _) in std::env::vars() {
        if key.starts_with("PGCDC_") {
            cmd.env_remove(key);
        }
    }
    cmd.args(args)
        .envs(env.iter().copied())
        .output()
        .expect("the binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A file in the test's temp directory (removed when the test ends).
fn write(dir: &TempDir, name: &str, contents: &str) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, contents).expect("write");
    path
}

fn path(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// `config show`'s lines: key (table-qualified inside tables) -> (value, origin).
fn parse_show(stdout: &str) -> BTreeMap<String, (String, String)> {
    let mut table = String::new();
    let mut entries = BTreeMap::new();
    for line in stdout.lines() {
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            table = format!("{name}.");
            continue;
        }
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let (setting, origin) = line.rsplit_once("  # ").expect("every value has an origin");
        let (key, value) = setting.split_once(" = ").expect("key = value");
        entries.insert(
            format!("{table}{}", key.trim_matches('"')),
            (value.to_owned(), origin.to_owned()),
        );
    }
    entries
}

#[test]
fn flags_beat_env_beat_file_beat_debezium_beat_defaults() {
    let dir = tempfile::tempdir().expect("temp dir");
    let debezium = write(
        &dir,
        "connector.json",
        &json!({
            "name": "precedence",
            "config": {
                "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
                "plugin.name": "pgoutput",
                "database.hostname": "db.example",
                "database.port": "5433",
                "database.user": "cdc",
                "database.password": "dbz-secret-1",
                "database.dbname": "shop",
                "topic.prefix": "dbz_prefix",
                "slot.name": "dbz_slot",
                "publication.name": "dbz_pub",
                "snapshot.max.threads": "7",
                "producer.override.bootstrap.servers": "dbz:9092",
                "producer.override.compression.type": "gzip",
                "producer.override.linger.ms": "1",
            }
        })
        .to_string(),
    );
    let file = write(
        &dir,
        "pgcdc.toml",
        r#"
bootstrap_servers = "file:9092"
slot = "file_slot"
publication = "file_pub"
table = ["public.a", "public.b"]
json_value_schemas = false

[kafka]
"linger.ms" = 2
"batch.size" = "3"
"sasl.password" = "file-secret-2"
"#,
    );
    let output = pgcdc(
        &[
            "config",
            "show",
            "--debezium-config",
            path(&debezium),
            "--bootstrap-servers",
            "flag:9092",
            "--kafka-property",
            "batch.size=4",
            "--schema-registry-basic-auth",
            "user:flag-secret-3",
        ],
        &[
            ("PGCDC_CONFIG", path(&file)),
            ("PGCDC_BOOTSTRAP_SERVERS", "env:9092"),
            ("PGCDC_SLOT", "env_slot"),
        ],
    );
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    assert_eq!(output.status.code(), Some(0), "stderr: {stderr}");
    let show = parse_show(&stdout);
    let file_origin = format!("file {}", file.display());
    let expect = |key: &str, value: &str, origin: &str| {
        let (v, o) = show
            .get(key)
            .unwrap_or_else(|| panic!("{key} in:\n{stdout}"));
        assert_eq!(
            (v.as_str(), o.as_str()),
            (value, origin),
            "{key} in:\n{stdout}"
        );
    };
    expect("bootstrap_servers", "\"flag:9092\"", "flag");
    expect("slot", "\"env_slot\"", "env PGCDC_SLOT");
    expect("publication", "\"file_pub\"", &file_origin);
    expect("table", "[\"public.a\", \"public.b\"]", &file_origin);
    expect("json_value_schemas", "false", &file_origin);
    expect("json_key_schemas", "true", "default");
    expect("topic_prefix", "\"dbz_prefix\"", "debezium topic.prefix");
    expect("snapshot_workers", "7", "debezium snapshot.max.threads");
    expect("status_interval", "\"1s\"", "default");
    // librdkafka properties merge per key across the layers.
    expect("kafka.linger.ms", "\"2\"", &file_origin);
    expect("kafka.batch.size", "\"4\"", "flag");
    expect(
        "kafka.compression.type",
        "\"gzip\"",
        "debezium producer.override.compression.type",
    );
    // Secrets: the URL keeps its shape, the rest is replaced.
    assert!(
        show["pg_url"]
            .0
            .starts_with("\"postgres://cdc:redacted@db.example:5433/shop"),
        "{stdout}"
    );
    expect("kafka.sasl.password", "\"<redacted>\"", &file_origin);
    expect("schema_registry_basic_auth", "\"<redacted>\"", "flag");
    for secret in ["dbz-secret-1", "file-secret-2", "flag-secret-3"] {
        assert!(
            !stdout.contains(secret) && !stderr.contains(secret),
            "{secret} leaked:\n{stdout}\n{stderr}"
        );
    }

    // What `config show` prints is a file `--config` accepts, and it means
    // the same (secrets aside, which the environment supplies again).
    let shown = write(&dir, "shown.toml", &stdout);
    let again = pgcdc(
        &["config", "show", "--config", path(&shown)],
        &[("PGCDC_PG_URL", "postgres://cdc:pw@db.example:5433/shop")],
    );
    assert_eq!(
        again.status.code(),
        Some(0),
        "stderr: {}",
        text(&again.stderr)
    );
    let again = parse_show(&text(&again.stdout));
    for (key, (value, _)) in &show {
        if key != "pg_url" {
            assert_eq!(&again[key].0, value, "{key} survives the round trip");
        }
    }
}

/// Whether this build's `run` has the flag `--name`.
fn has_flag(name: &str) -> bool {
    let help = text(&pgcdc(&["run", "--help"], &[]).stdout);
    help.split(|c: char| c.is_whitespace() || c == ',')
        .any(|word| word == format!("--{name}"))
}

#[test]
fn every_problem_of_every_layer_is_reported_at_once_before_connecting() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut toml = r#"
topc_prefix = "app"
snapshot_mode = "sometimes"
max_in_flight_messages = 0
idle_timeout = 5
"#
    .to_owned();
    // A regex checked by validate(), in builds with topic routing.
    let routes = has_flag("topic-route");
    if routes {
        toml.push_str("topic_route = [\"[unclosed=x\"]\n");
    }
    toml.push_str("[kafka]\nacks = \"1\"\n");
    let file = write(&dir, "bad.toml", &toml);
    let debezium = write(
        &dir,
        "bad.json",
        &json!({
            "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
            "plugin.name": "wal2json",
        })
        .to_string(),
    );
    let output = pgcdc(
        &[
            "run",
            "--pg-url",
            NOWHERE,
            "--topic-prefix",
            "app",
            "--slot",
            "Bad-Slot",
            "--config",
            path(&file),
            "--debezium-config",
            path(&debezium),
        ],
        &[("PGCDC_FORMAT", "xml")],
    );
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "stderr: {stderr}");
    for needle in [
        "topc_prefix",
        "did you mean \"topic_prefix\"",
        "snapshot_mode = \"sometimes\"",
        "max_in_flight_messages",
        "idle_timeout",
        "kafka = \"acks=1\"",
        "acks=all",
        "--slot = \"Bad-Slot\"",
        "PGCDC_FORMAT = \"xml\"",
        "plugin.name = \"wal2json\"",
    ] {
        assert!(stderr.contains(needle), "stderr names {needle}:\n{stderr}");
    }
    assert!(
        !stderr.contains("refused") && !stderr.contains("127.0.0.1:1"),
        "nothing connected:\n{stderr}"
    );
    assert!(
        !stderr.contains("pw@"),
        "the URL's password is not printed:\n{stderr}"
    );
}

#[test]
fn a_missing_required_setting_names_every_way_to_set_it() {
    let output = pgcdc(&["run", "--topic-prefix", "app"], &[]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "stderr: {stderr}");
    for needle in ["--pg-url", "PGCDC_PG_URL", "pg_url"] {
        assert!(stderr.contains(needle), "stderr names {needle}:\n{stderr}");
    }
}

#[test]
fn unsupported_debezium_properties_are_each_listed_with_a_reason() {
    let dir = tempfile::tempdir().expect("temp dir");
    let debezium = write(
        &dir,
        "unsupported.json",
        &json!({
            "name": "unsupported",
            "config": {
                "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
                "database.hostname": "127.0.0.1",
                "database.port": "1",
                "database.user": "cdc",
                "database.password": "never-printed",
                "database.dbname": "shop",
                "topic.prefix": "app",
                "snapshot.mode": "custom",
                "column.mask.hash.SHA3-256.with.salt.pepper": "public.customers.email",
                "notification.enabled.channels": "jmx",
                "database.sslfactory": "org.postgresql.ssl.NonValidatingFactory",
                "transforms": "ins",
                "transforms.ins.type": "org.apache.kafka.connect.transforms.InsertField$Value",
                "tasks.max": "1",
            }
        })
        .to_string(),
    );
    let output = pgcdc(&["run", "--debezium-config", path(&debezium)], &[]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "stderr: {stderr}");
    for (property, reason) in [
        ("snapshot.mode", "Java classes"),
        ("column.mask.hash.SHA3-256.with.salt.pepper", "SHA3-256"),
        ("notification.enabled.channels", "notifications"),
        ("database.sslfactory", "socket factories"),
        ("transforms.ins.type", "InsertField$Value"),
    ] {
        let line = stderr
            .lines()
            .find(|l| l.trim_start().starts_with(property))
            .unwrap_or_else(|| panic!("{property} listed:\n{stderr}"));
        assert!(
            line.contains("not supported") && line.contains(reason),
            "{line}"
        );
    }
    assert!(
        !stderr.contains("tasks.max"),
        "accepted properties are not errors:\n{stderr}"
    );
    assert!(!stderr.contains("never-printed"), "{stderr}");
}

/// The example connector of Debezium's PostgreSQL connector documentation
/// ("fulfillment-connector"), pointed at the test database.
fn fulfillment_connector(s: &Scenario, with_table_list: bool) -> serde_json::Value {
    let mut config = json!({
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "database.hostname": s.pg.host(),
        "database.port": s.pg.port().to_string(),
        "database.user": s.pg.user(),
        "database.password": s.pg.password(),
        "database.dbname": s.db,
        "topic.prefix": s.prefix,
        "table.include.list": "public.inventory",
        // Not in the example: each test isolates its slot and publication.
        "slot.name": s.slot,
        "publication.name": s.publication,
    });
    if !with_table_list {
        config
            .as_object_mut()
            .expect("object")
            .remove("table.include.list");
    }
    json!({ "name": "fulfillment-connector", "config": config })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn debeziums_documentation_example_imports_and_runs_end_to_end() {
    let dir = tempfile::tempdir().expect("temp dir");
    let pg = Postgres::shared();
    let kafka = Kafka::shared();
    let s = Scenario::new(pg, "dbzimport");
    s.sql("CREATE TABLE inventory (id int PRIMARY KEY, item text, quantity int)");
    s.sql("INSERT INTO inventory VALUES (1, 'widget', 10), (2, 'gadget', 5)");

    // table.include.list maps to --table-include-list; a build without that
    // flag says so instead of ignoring it, and the rest is imported.
    let has_table_list = has_flag("table-include-list");
    let full = write(
        &dir,
        "fulfillment.json",
        &fulfillment_connector(&s, true).to_string(),
    );
    let connector = if has_table_list {
        full
    } else {
        let output = pgcdc(&["run", "--debezium-config", path(&full)], &[]);
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "stderr: {stderr}");
        assert!(
            stderr.contains("table.include.list") && stderr.contains("not supported by this build"),
            "{stderr}"
        );
        write(
            &dir,
            "fulfillment.json",
            &fulfillment_connector(&s, false).to_string(),
        )
    };

    let run = |extra: &'static [&'static str]| {
        let connector = connector.clone();
        let bootstrap = kafka.bootstrap_servers();
        tokio::task::spawn_blocking(move || {
            let mut args = vec![
                "run",
                "--debezium-config",
                path(&connector),
                "--bootstrap-servers",
                &bootstrap,
                "--stop-when-caught-up",
            ];
            args.extend(extra);
            pgcdc(&args, &[])
        })
    };
    // First run: the initial snapshot (Debezium's default snapshot.mode).
    let first = run(&[]).await.expect("join");
    assert_eq!(
        first.status.code(),
        Some(0),
        "stderr: {}",
        text(&first.stderr)
    );
    // Second run: streams what changed since.
    s.sql("INSERT INTO inventory VALUES (3, 'gizmo', 1)");
    s.sql("UPDATE inventory SET quantity = 9 WHERE id = 1");
    let second = run(&[]).await.expect("join");
    assert_eq!(
        second.status.code(),
        Some(0),
        "stderr: {}",
        text(&second.stderr)
    );

    let records = consume(
        &kafka.bootstrap_servers(),
        &s.topic("inventory"),
        4,
        Duration::from_secs(60),
    )
    .await;
    let seen: Vec<(String, i64)> = records
        .iter()
        .map(|r| {
            let payload = &r.value.as_ref().expect("a value")["payload"];
            (
                payload["op"].as_str().expect("op").to_owned(),
                payload["after"]["id"].as_i64().expect("id"),
            )
        })
        .collect();
    let expected: Vec<(String, i64)> = [("r", 1), ("r", 2), ("c", 3), ("u", 1)]
        .iter()
        .map(|(op, id)| ((*op).to_owned(), *id))
        .collect();
    assert_eq!(seen, expected);
    let updated = &records[3].value.as_ref().unwrap()["payload"];
    assert_eq!(updated["after"]["quantity"], 9);
    assert_eq!(
        updated["source"]["name"],
        s.prefix.as_str(),
        "topic.prefix names the source"
    );
    assert_eq!(
        s.query_one(&format!(
            "SELECT count(*)::text FROM pg_replication_slots WHERE slot_name = '{}'",
            s.slot
        ))
        .as_deref(),
        Some("1"),
        "the slot named by slot.name"
    );
}

/// A connector that runs both transforms Debezium users pair most: the
/// outbox EventRouter on the outbox table (picked by a TopicNameMatches
/// predicate) and ExtractNewRecordState, negated, on everything else.
fn outbox_and_unwrap_connector(s: &Scenario) -> serde_json::Value {
    json!({
        "name": "orders-connector",
        "config": {
            "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
            "plugin.name": "pgoutput",
            "database.hostname": s.pg.host(),
            "database.port": s.pg.port().to_string(),
            "database.user": s.pg.user(),
            "database.password": s.pg.password(),
            "database.dbname": s.db,
            "topic.prefix": s.prefix,
            "slot.name": s.slot,
            "publication.name": s.publication,
            "table.include.list": "public.orders,public.outbox",
            "transforms": "outbox,unwrap",
            "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
            "transforms.outbox.predicate": "isOutbox",
            "transforms.outbox.route.topic.replacement": format!("{}.events.${{routedByValue}}", s.prefix),
            "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState",
            "transforms.unwrap.predicate": "isOutbox",
            "transforms.unwrap.negate": "true",
            "transforms.unwrap.delete.tombstone.handling.mode": "rewrite",
            "transforms.unwrap.add.fields": "op,table",
            "predicates": "isOutbox",
            "predicates.isOutbox.type": "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
            "predicates.isOutbox.pattern": format!("{}\\.public\\.outbox", s.prefix),
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_debezium_connector_with_outbox_and_unwrap_imports_and_runs() {
    let dir = tempfile::tempdir().expect("temp dir");
    let pg = Postgres::shared();
    let kafka = Kafka::shared();
    let s = Scenario::new(pg, "dbzsmt");
    s.sql("CREATE TABLE orders (id int PRIMARY KEY, status text)");
    s.sql(
        "CREATE TABLE outbox (id uuid PRIMARY KEY, aggregatetype text NOT NULL, \
         aggregateid text NOT NULL, type text NOT NULL, payload jsonb)",
    );
    let connector = write(
        &dir,
        "orders-connector.json",
        &outbox_and_unwrap_connector(&s).to_string(),
    );
    let bootstrap = kafka.bootstrap_servers();
    let run = || {
        let connector = connector.clone();
        let bootstrap = bootstrap.clone();
        tokio::task::spawn_blocking(move || {
            pgcdc(
                &[
                    "run",
                    "--debezium-config",
                    path(&connector),
                    "--bootstrap-servers",
                    &bootstrap,
                    "--stop-when-caught-up",
                ],
                &[],
            )
        })
    };
    // The slot first (snapshot of the empty tables), then business transactions.
    let first = run().await.expect("join");
    assert_eq!(
        first.status.code(),
        Some(0),
        "stderr: {}",
        text(&first.stderr)
    );
    s.sql(
        "BEGIN; INSERT INTO orders VALUES (1, 'new'); \
         INSERT INTO outbox VALUES ('6f1b0f8e-0000-4000-8000-000000000001', 'order', '1', \
         'OrderCreated', '{\"id\": 1}'); COMMIT",
    );
    s.sql("BEGIN; DELETE FROM orders WHERE id = 1; DELETE FROM outbox; COMMIT");
    let second = run().await.expect("join");
    assert_eq!(
        second.status.code(),
        Some(0),
        "stderr: {}",
        text(&second.stderr)
    );

    // Unwrap on orders: the row, then the rewritten delete with __deleted.
    let orders = consume(&bootstrap, &s.topic("orders"), 2, Duration::from_secs(60)).await;
    let values: Vec<&serde_json::Value> = orders
        .iter()
        .map(|r| &r.value.as_ref().expect("a value")["payload"])
        .collect();
    assert_eq!(values.len(), 2, "{values:?}");
    assert_eq!(values[0]["id"], 1);
    assert_eq!(values[0]["status"], "new");
    assert_eq!(values[0]["__op"], "c");
    assert_eq!(values[0]["__table"], "orders");
    assert_eq!(values[1]["__op"], "d");
    assert_eq!(values[1]["__deleted"], "true");

    // The outbox row: one event on the routed topic, keyed by the aggregate
    // id, its payload as JsonConverter (the worker's default) writes the
    // jsonb column: a string under its schema; the delete of the outbox row
    // produces nothing.
    let events_topic = format!("{}.events.order", s.prefix);
    let events = common::consume_raw(&bootstrap, &events_topic, 2, Duration::from_secs(20)).await;
    assert_eq!(events.len(), 1, "one event, nothing for the delete");
    let key: serde_json::Value =
        serde_json::from_slice(events[0].key.as_deref().expect("key")).expect("JSON key");
    assert_eq!(
        key,
        json!({"schema": {"type": "string", "optional": false}, "payload": "1"})
    );
    let value: serde_json::Value =
        serde_json::from_slice(events[0].value.as_deref().expect("payload")).expect("JSON value");
    assert_eq!(value["payload"], json!("{\"id\": 1}"));
    assert_eq!(value["schema"]["name"], "io.debezium.data.Json");
    assert!(
        events[0]
            .headers
            .iter()
            .any(|(k, v)| k == "id" && v.as_slice() == b"6f1b0f8e-0000-4000-8000-000000000001"),
        "{:?}",
        events[0].headers
    );
    assert!(
        consume(&bootstrap, &s.topic("outbox"), 1, Duration::from_secs(2))
            .await
            .is_empty(),
        "the outbox table's own topic stays empty"
    );
}

#[test]
fn property_lists_take_one_entry_per_line_from_the_environment() {
    let output = pgcdc(
        &[
            "config",
            "show",
            "--pg-url",
            NOWHERE,
            "--topic-prefix",
            "app",
        ],
        &[
            // A trailing newline, as a YAML block scalar leaves, is harmless.
            (
                "PGCDC_KAFKA_PROPERTY",
                "linger.ms=50\ncompression.type=zstd\n",
            ),
            (
                "PGCDC_TOPIC_CONFIG",
                "cleanup.policy=compact,delete\r\nretention.ms=1000",
            ),
        ],
    );
    let stdout = text(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(0),
        "stderr: {}",
        text(&output.stderr)
    );
    let show = parse_show(&stdout);
    for (key, value, variable) in [
        ("kafka.linger.ms", "\"50\"", "PGCDC_KAFKA_PROPERTY"),
        ("kafka.compression.type", "\"zstd\"", "PGCDC_KAFKA_PROPERTY"),
        (
            "topic_config.cleanup.policy",
            "\"compact,delete\"",
            "PGCDC_TOPIC_CONFIG",
        ),
        (
            "topic_config.retention.ms",
            "\"1000\"",
            "PGCDC_TOPIC_CONFIG",
        ),
    ] {
        assert_eq!(
            show.get(key),
            Some(&(value.to_owned(), format!("env {variable}"))),
            "{key} in:\n{stdout}"
        );
    }
    // The variable is checked like the flag.
    let output = pgcdc(
        &["run", "--pg-url", NOWHERE, "--topic-prefix", "app"],
        &[("PGCDC_KAFKA_PROPERTY", "linger.ms=5\nacks=1")],
    );
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "stderr: {stderr}");
    assert!(
        stderr.contains("PGCDC_KAFKA_PROPERTY") && stderr.contains("acks=all"),
        "{stderr}"
    );
}

#[test]
fn topic_prefix_follows_kafkas_rules_and_avros_only_with_avro() {
    let show = |extra: &[&str]| {
        let mut args = vec!["config", "show", "--pg-url", NOWHERE];
        args.extend_from_slice(extra);
        pgcdc(&args, &[])
    };
    let json = show(&["--topic-prefix", "1app"]);
    assert_eq!(
        json.status.code(),
        Some(0),
        "Kafka and Debezium accept 1app: {}",
        text(&json.stderr)
    );
    let avro = show(&[
        "--topic-prefix",
        "1app",
        "--format",
        "avro",
        "--schema-registry-url",
        "http://127.0.0.1:1",
    ]);
    let stderr = text(&avro.stderr);
    assert_eq!(avro.status.code(), Some(2), "stderr: {stderr}");
    for needle in ["--topic-prefix = \"1app\"", "--format avro", "namespace"] {
        assert!(stderr.contains(needle), "stderr names {needle}:\n{stderr}");
    }
    let bad = show(&["--topic-prefix", "app/eu"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(text(&bad.stderr).contains("topic name"));

    // Too long for the heartbeat topic beside the default heartbeat prefix:
    // the prefix is to blame, not the default nobody chose.
    let long = "a".repeat(240);
    let output = show(&["--topic-prefix", &long]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "stderr: {stderr}");
    assert!(stderr.contains("--topic-prefix"), "{stderr}");
    assert!(stderr.contains("228 at most"), "{stderr}");
    assert!(!stderr.contains("--heartbeat-topics-prefix ="), "{stderr}");
    // A long heartbeat prefix chosen beside a short topic prefix is its own fault.
    let hb = "h".repeat(247);
    let output = show(&["--topic-prefix", "app", "--heartbeat-topics-prefix", &hb]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "stderr: {stderr}");
    assert!(stderr.contains("--heartbeat-topics-prefix"), "{stderr}");
    assert!(!stderr.contains("--topic-prefix ="), "{stderr}");
}

#[test]
fn status_and_snapshot_read_runs_config_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let pg = Postgres::shared();
    let s = Scenario::new(pg, "cfg_status");
    let file = write(
        &dir,
        "run.toml",
        &format!(
            "pg_url = {:?}\nslot = {:?}\ntopic_prefix = \"app\"\n\
             signal_data_collection = \"public.no_such_signals\"\n\
             format = \"json\"\n\n[kafka]\n\"linger.ms\" = 5\n",
            pg.url(&s.db),
            s.slot,
        ),
    );
    // No --pg-url and no --slot: both come from run's file, whose other
    // keys (topic_prefix, format, [kafka]) status skips.
    let status = pgcdc(&["status", "--config", path(&file)], &[]);
    let out = format!("{}{}", text(&status.stdout), text(&status.stderr));
    assert_eq!(status.status.code(), Some(1), "{out}");
    assert!(
        out.contains(&format!("replication slot {:?} does not exist", s.slot)),
        "status read the slot from the file: {out}"
    );
    let snapshot = pgcdc(&["snapshot", "--config", path(&file), "public.t"], &[]);
    let out = format!("{}{}", text(&snapshot.stdout), text(&snapshot.stderr));
    assert_eq!(snapshot.status.code(), Some(1), "{out}");
    assert!(
        out.contains("no_such_signals") && !out.contains("required"),
        "snapshot read the signal table from the file: {out}"
    );
    // A read-only connector takes Kafka signals only: the command refuses
    // and names the record to send, keyed by the file's topic prefix.
    let snapshot = pgcdc(
        &[
            "snapshot",
            "--config",
            path(&file),
            "--read-only",
            "public.t",
        ],
        &[],
    );
    let out = format!("{}{}", text(&snapshot.stdout), text(&snapshot.stderr));
    assert_eq!(snapshot.status.code(), Some(1), "{out}");
    assert!(
        out.contains("runs --read-only")
            && out.contains("topic \"app-signal\" with key \"app\"")
            && out.contains("\"execute-snapshot\""),
        "{out}"
    );
    // A key neither command knows is still an error.
    let typo = write(&dir, "typo.toml", "slott = \"x\"\n");
    let status = pgcdc(
        &["status", "--config", path(&typo), "--pg-url", NOWHERE],
        &[],
    );
    let stderr = text(&status.stderr);
    assert_eq!(status.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("did you mean \"slot\""), "{stderr}");
}
