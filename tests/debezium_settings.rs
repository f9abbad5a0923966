//! A realistic Debezium 3.x configuration (issue 21 item 3): a Debezium
//! Server `application.properties` with masking, v1 and v2 hashing,
//! truncation, source-type parameters, a heartbeat topic, a logical message
//! filter, skip.messages.without.change, ExtractNewRecordState and Kafka
//! Connect's RegexRouter, plus the 3.x settings a current config carries
//! (lsn.flush.mode, offset.mismatch.strategy, extended headers, schema name
//! adjustment). pgcdc-kafka must accept it unchanged, snapshot and stream a
//! few rows, and write what Debezium writes: the expected hashes were
//! computed with Java's `MessageDigest` the way Debezium's `MaskStrings`
//! does (v2: the UTF-8 text; v1: the `ObjectOutputStream` form of the
//! string).

mod common;

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::process::LogDir;
use common::{consume, Scenario};
use pgcdc_testcontainers::{Kafka, Postgres};

const BIN: &str = env!("CARGO_BIN_EXE_pgcdc-kafka");

/// SHA-256 over "CzQMA0cB5K" then "ann@example.com" / "bob@example.com".
const ANN_EMAIL_V2: &str = "73123ac0b06ee4009f26a60b756934d7420b0b2e9f2044c9bf17bb87b0ab1daf";
const BOB_EMAIL_V2: &str = "a42c38b96e1047973472000303353860c3f55aae81aa395d0c4aa2ad077e3c5b";
/// SHA-256 over "CzQMA0cB5K" then Java's serialization of "+1 555 0100" /
/// "+1 555 0199", cut to the column's 12 characters.
const ANN_PHONE_V1: &str = "709d31d09ed2";
const BOB_PHONE_V1: &str = "1c7acc3e2289";

/// The Debezium Server configuration for `s`. In a `.properties` file a
/// backslash escapes the next character, so a regex's `\.` is written
/// `\\.` there.
fn properties(s: &Scenario, bootstrap: &str) -> String {
    let prefix = &s.prefix;
    format!(
        "\
debezium.sink.type=kafka
debezium.sink.kafka.producer.bootstrap.servers={bootstrap}
debezium.sink.kafka.producer.key.serializer=org.apache.kafka.common.serialization.StringSerializer
debezium.sink.kafka.producer.value.serializer=org.apache.kafka.common.serialization.StringSerializer
debezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector
debezium.source.offset.storage.file.filename=data/offsets.dat
debezium.source.offset.flush.interval.ms=0
debezium.source.plugin.name=pgoutput
debezium.source.database.hostname={host}
debezium.source.database.port={port}
debezium.source.database.user={user}
debezium.source.database.password={password}
debezium.source.database.dbname={db}
debezium.source.topic.prefix={prefix}
debezium.source.slot.name={slot}
debezium.source.publication.name={publication}
debezium.source.publication.autocreate.mode=filtered
debezium.source.table.include.list=public.customers
debezium.source.snapshot.mode=initial
debezium.source.column.mask.with.6.chars=public.customers.ssn
debezium.source.column.mask.hash.v2.SHA-256.with.salt.CzQMA0cB5K=public.customers.email
debezium.source.column.mask.hash.SHA-256.with.salt.CzQMA0cB5K=public.customers.phone
debezium.source.column.truncate.to.5.chars=public.customers.notes
debezium.source.column.propagate.source.type=public.customers.tier
debezium.source.heartbeat.interval.ms=200
debezium.source.topic.heartbeat.prefix=hb
debezium.source.skip.messages.without.change=true
debezium.source.message.prefix.include.list=keep\\\\..*
debezium.source.lsn.flush.mode=connector
debezium.source.offset.mismatch.strategy=trust_slot
debezium.source.extended.headers.enabled=true
debezium.source.schema.name.adjustment.mode=avro
debezium.source.tombstones.on.delete=false
debezium.format.key=json
debezium.format.value=json
debezium.transforms=unwrap,route
debezium.transforms.unwrap.type=io.debezium.transforms.ExtractNewRecordState
debezium.transforms.unwrap.add.fields=op
debezium.transforms.route.type=org.apache.kafka.connect.transforms.RegexRouter
debezium.transforms.route.regex={escaped}\\\\.public\\\\.(.*)
debezium.transforms.route.replacement={prefix}.cdc.$1
quarkus.log.console.json=false
",
        host = s.pg.host(),
        port = s.pg.port(),
        user = s.pg.user(),
        password = s.pg.password(),
        db = s.db,
        slot = s.slot,
        publication = s.publication,
        escaped = regex::escape(prefix).replace('\\', "\\\\"),
    )
}

/// The connector, running until killed (this test's own child only).
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_debezium_3_server_config_with_masks_heartbeats_and_regex_router_runs() {
    let pg = Postgres::shared();
    let kafka = Kafka::shared();
    let bootstrap = kafka.bootstrap_servers();
    let s = Scenario::new(pg, "dbzset");
    s.sql(
        "CREATE TABLE customers (id int PRIMARY KEY, email text, phone varchar(12), \
         ssn char(11), notes text, tier text)",
    );
    s.sql("ALTER TABLE customers REPLICA IDENTITY FULL");
    s.sql(
        "INSERT INTO customers VALUES \
         (1, 'ann@example.com', '+1 555 0100', '123-45-6789', 'hello world', 'gold')",
    );

    // The properties and the connector's log: kept when the test fails.
    let logs = LogDir::new("dbzset");
    let dir = logs.dir();
    let file = dir.join("application.properties");
    std::fs::write(&file, properties(&s, &bootstrap)).expect("write the properties");
    let log = std::fs::File::create(dir.join("pgcdc.log")).expect("log file");
    let child = Command::new(BIN)
        .args(["run", "--debezium-config"])
        .arg(&file)
        .env_remove("PGCDC_PG_URL")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("the binary starts");
    let _running = Running(child);

    let routed = format!("{}.cdc.customers", s.prefix);
    let snapshot = consume(&bootstrap, &routed, 1, Duration::from_secs(90)).await;
    assert_eq!(
        snapshot.len(),
        1,
        "the snapshot row on the RegexRouter's topic; log: {}",
        std::fs::read_to_string(dir.join("pgcdc.log")).unwrap_or_default()
    );

    s.sql(
        "INSERT INTO customers VALUES \
         (2, 'bob@example.com', '+1 555 0199', '987-65-4321', 'hi', 'silver')",
    );
    // Changes no column: skip.messages.without.change drops it (FULL identity).
    s.sql("UPDATE customers SET notes = notes WHERE id = 1");
    s.sql("UPDATE customers SET tier = 'platinum' WHERE id = 1");
    s.sql("SELECT pg_logical_emit_message(false, 'drop.me', 'filtered out')");
    s.sql("SELECT pg_logical_emit_message(false, 'keep.me', 'written')");

    let records = consume(&bootstrap, &routed, 3, Duration::from_secs(60)).await;
    let rows: Vec<&serde_json::Value> = records
        .iter()
        .map(|r| &r.value.as_ref().expect("a value")["payload"])
        .collect();
    assert_eq!(
        rows.len(),
        3,
        "snapshot, insert, the one real update: {rows:?}"
    );
    let ops: Vec<&str> = rows
        .iter()
        .map(|r| r["__op"].as_str().unwrap_or("?"))
        .collect();
    assert_eq!(ops, ["r", "c", "u"], "the no-op update is skipped");
    let (ann, bob, ann_updated) = (rows[0], rows[1], rows[2]);
    assert_eq!(ann["email"], ANN_EMAIL_V2, "v2 hash");
    assert_eq!(bob["email"], BOB_EMAIL_V2, "v2 hash");
    assert_eq!(ann["phone"], ANN_PHONE_V1, "v1 hash, cut to varchar(12)");
    assert_eq!(bob["phone"], BOB_PHONE_V1, "v1 hash, cut to varchar(12)");
    assert_eq!(ann["ssn"], "******");
    assert_eq!(bob["ssn"], "******");
    assert_eq!(ann["notes"], "hello", "truncated to 5");
    assert_eq!(bob["notes"], "hi");
    assert_eq!(ann_updated["tier"], "platinum");
    assert_eq!(ann_updated["email"], ANN_EMAIL_V2);
    assert_eq!(records[0].key.as_ref().expect("a key")["payload"]["id"], 1);

    let schema = &records[0].value.as_ref().expect("a value")["schema"];
    let field = |name: &str| {
        schema["fields"]
            .as_array()
            .and_then(|fields| fields.iter().find(|f| f["field"] == name))
            .cloned()
            .unwrap_or_else(|| panic!("field {name} in {schema}"))
    };
    assert_eq!(field("email")["parameters"]["masked"], "true");
    assert_eq!(field("notes")["parameters"]["truncateLength"], "5");
    let tier = field("tier");
    assert_eq!(tier["parameters"]["__debezium.source.column.type"], "TEXT");
    assert_eq!(tier["parameters"]["__debezium.source.column.name"], "tier");
    assert_eq!(
        schema["name"],
        format!("{}.public.customers.Value", s.prefix).replace('-', "_"),
        "RegexRouter leaves schema names alone"
    );
    assert!(
        records[1]
            .header("__debezium.context.connectorName")
            .is_some(),
        "extended headers"
    );

    let messages = consume(
        &bootstrap,
        &format!("{}.message", s.prefix),
        1,
        Duration::from_secs(30),
    )
    .await;
    let prefixes: Vec<&str> = messages
        .iter()
        .filter_map(|m| m.key.as_ref()?["payload"]["prefix"].as_str())
        .collect();
    assert_eq!(prefixes, ["keep.me"], "message.prefix.include.list filters");

    let heartbeats = consume(
        &bootstrap,
        &format!("hb.{}", s.prefix),
        1,
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(
        heartbeats.len(),
        1,
        "a heartbeat on topic.heartbeat.prefix's topic"
    );
}
