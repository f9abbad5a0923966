use super::*;

fn parse(args: &[&str]) -> RunConfig {
    let mut argv = vec!["--pg-url", "postgres://u:secret@db:5433/shop"];
    argv.extend_from_slice(args);
    RunConfig::from_args(argv).expect("arguments parse")
}

#[test]
fn the_older_json_schemas_flag_sets_both_sides() {
    let both = parse(&["--topic-prefix", "app", "--json-schemas", "false"]);
    assert!(!both.encode.key_schemas() && !both.encode.value_schemas());
    let value_only = parse(&["--topic-prefix", "app", "--json-value-schemas", "false"]);
    assert!(value_only.encode.key_schemas() && !value_only.encode.value_schemas());
    let mut argv = vec!["--pg-url", "postgres://u@db/shop", "--topic-prefix", "app"];
    argv.extend(["--json-schemas", "false", "--json-key-schemas", "true"]);
    assert!(
        RunConfig::from_args(argv).is_err(),
        "the shorthand and a side flag conflict"
    );
}

#[test]
fn avro_needs_a_prefix_that_is_an_avro_namespace() {
    let json = parse(&["--topic-prefix", "my-app"]);
    assert!(json.validate().is_ok(), "'-' is fine for JSON topics");
    let avro = parse(&[
        "--topic-prefix",
        "my-app",
        "--format",
        "avro",
        "--schema-registry-url",
        "http://127.0.0.1:8081",
    ]);
    let error = avro.validate().expect_err("'-' is not valid in Avro names");
    assert!(error.to_string().contains("namespace"), "{error}");
    let fine = parse(&[
        "--topic-prefix",
        "my_app.eu1",
        "--format",
        "avro",
        "--schema-registry-url",
        "http://127.0.0.1:8081",
    ]);
    assert!(fine.validate().is_ok());
}

#[test]
fn a_json_prefix_needs_only_kafkas_topic_rules() {
    for prefix in ["1app", "my-app", "_x.y", "a".repeat(228).as_str()] {
        let c = parse(&["--topic-prefix", prefix]);
        assert!(c.validate().is_ok(), "{prefix} is a fine JSON prefix");
    }
    for prefix in ["", "a b", "a/b", ".."] {
        let c = parse(&["--topic-prefix", prefix]);
        let err = c.validate().expect_err("not a topic name");
        let fields: Vec<_> = err.0.iter().map(|i| i.field).collect();
        assert_eq!(fields, ["topic-prefix"], "{prefix:?}: {err}");
    }
}

#[test]
fn the_setting_that_makes_the_heartbeat_topic_too_long_is_blamed() {
    let long = "a".repeat(229);
    let err = parse(&["--topic-prefix", &long])
        .validate()
        .expect_err("heartbeat topic of 250 characters");
    let fields: Vec<_> = err.0.iter().map(|i| i.field).collect();
    assert_eq!(fields, ["topic-prefix"], "{err}");
    let hb = "h".repeat(246);
    let err = parse(&["--topic-prefix", "app", "--heartbeat-topics-prefix", &hb])
        .validate()
        .expect_err("heartbeat topic of 250 characters");
    let fields: Vec<_> = err.0.iter().map(|i| i.field).collect();
    assert_eq!(fields, ["heartbeat-topics-prefix"], "{err}");
}

#[test]
fn every_run_flag_has_one_of_the_help_headings() {
    use clap::CommandFactory;
    let cmd = LoadArgs::command();
    for arg in cmd.get_arguments() {
        if matches!(arg.get_id().as_str(), "help" | "version") {
            continue;
        }
        let heading = arg.get_help_heading();
        assert!(
            heading.is_some_and(|h| help::ALL.contains(&h)),
            "--{} has heading {heading:?}, not one of {:?}",
            arg.get_id(),
            help::ALL
        );
    }
}

#[test]
fn url_accessors_and_redaction() {
    let c = parse(&["--topic-prefix", "app"]);
    assert_eq!(c.pg_url.host(), "db");
    assert_eq!(c.pg_url.port(), 5433);
    assert_eq!(c.pg_url.dbname(), "shop");
    assert_eq!(c.pg_url.password(), "secret");
    assert!(!format!("{:?}", c.pg_url).contains("secret"));
}

#[test]
fn reports_every_invalid_field() {
    let c = parse(&[
        "--topic-prefix",
        "9bad prefix",
        "--slot",
        "Bad-Slot",
        "--kafka-property",
        "acks=1",
    ]);
    let err = c.validate().expect_err("invalid");
    let fields: Vec<_> = err.0.iter().map(|i| i.field).collect();
    assert_eq!(fields, ["topic-prefix", "slot", "kafka-property"]);
    assert!(err.to_string().contains("acks=all"));
}

#[test]
fn skipped_operations_parse_like_debezium() {
    assert_eq!(
        parse(&["--topic-prefix", "a"]).skipped_operations,
        SkippedOperations {
            truncates: true,
            ..Default::default()
        }
    );
    let none = parse(&["--topic-prefix", "a", "--skipped-operations", "none"]);
    assert_eq!(none.skipped_operations, SkippedOperations::default());
    let some = parse(&["--topic-prefix", "a", "--skipped-operations", "c,d"]);
    assert!(some.skipped_operations.inserts && some.skipped_operations.deletes);
    assert!(RunConfig::from_args([
        "--pg-url",
        "postgres://h/d",
        "--topic-prefix",
        "a",
        "--skipped-operations",
        "x"
    ])
    .is_err());
}

#[test]
fn value_handling_flags_reach_the_value_options() {
    let defaults = parse(&["--topic-prefix", "a"]).value_options();
    assert_eq!(defaults, ValueOptions::default());
    let c = parse(&[
        "--topic-prefix",
        "a",
        "--binary-handling",
        "base64-url-safe",
        "--time-precision",
        "adaptive_time_microseconds",
        "--hstore-handling",
        "map",
    ]);
    let o = c.value_options();
    assert_eq!(o.binary_handling, BinaryHandling::Base64UrlSafe);
    assert_eq!(o.time_precision, TimePrecision::AdaptiveTimeMicroseconds);
    assert_eq!(o.hstore_handling, HstoreHandling::Map);
    let connect = parse(&["--topic-prefix", "a", "--time-precision", "connect"]);
    assert_eq!(
        connect.value_options().time_precision,
        TimePrecision::Connect
    );
    for (flag, bad) in [
        ("--binary-handling", "utf8"),
        ("--time-precision", "micro"),
        ("--hstore-handling", "text"),
    ] {
        let err = RunConfig::from_args([
            "--pg-url",
            "postgres://h/d",
            "--topic-prefix",
            "a",
            flag,
            bad,
        ])
        .expect_err("unknown mode rejected");
        assert!(err.to_string().contains("possible values"), "{err}");
    }
}

#[test]
fn transaction_metadata_and_heartbeat_flags() {
    let c = parse(&["--topic-prefix", "app"]);
    assert!(!c.metadata.provide_transaction_metadata);
    assert_eq!(c.names().transaction_topic(), "app.transaction");
    assert!(c.metadata.heartbeat_interval.is_zero());
    assert_eq!(c.names().heartbeat_topic(), "__debezium-heartbeat.app");
    c.validate().expect("valid");
    let c = parse(&[
        "--topic-prefix",
        "app",
        "--provide-transaction-metadata",
        "true",
        "--transaction-topic",
        "txns",
        "--heartbeat-interval",
        "10s",
        "--heartbeat-topics-prefix",
        "hb",
    ]);
    assert!(c.metadata.provide_transaction_metadata);
    assert_eq!(c.names().transaction_topic(), "txns");
    assert_eq!(c.metadata.heartbeat_interval, Duration::from_secs(10));
    assert_eq!(c.names().heartbeat_topic(), "hb.app");
    c.validate().expect("valid");
    let bad = parse(&[
        "--topic-prefix",
        "app",
        "--transaction-topic",
        "a b",
        "--heartbeat-topics-prefix",
        "x/y",
        "--heartbeat-action-query",
        "INSERT INTO hb DEFAULT VALUES",
    ]);
    let err = bad.validate().expect_err("invalid");
    let fields: Vec<_> = err.0.iter().map(|i| i.field).collect();
    assert_eq!(
        fields,
        [
            "transaction-topic",
            "heartbeat-topics-prefix",
            "heartbeat-action-query"
        ]
    );
    assert!(err.to_string().contains("--heartbeat-interval"));
}

#[test]
fn pass_through_properties_override_defaults_but_not_guarantees() {
    let c = parse(&["--topic-prefix", "app", "--kafka-property", "linger.ms=50"]);
    c.validate().expect("valid");
    let pc = c.producer_config();
    assert_eq!(pc.get("linger.ms"), Some("50"));
    assert_eq!(pc.get("enable.idempotence"), Some("true"));
}

#[test]
fn pgoutput_binary_is_auto_by_default_and_on_is_refused_with_a_signal_table() {
    use crate::source::replication::PgoutputBinary;
    let auto = parse(&["--topic-prefix", "app"]);
    assert_eq!(
        auto.pgoutput_binary,
        PgoutputBinary::Auto,
        "binary where it can by default"
    );
    for (flags, expected) in [
        (&["--pgoutput-binary"][..], PgoutputBinary::On),
        (&["--pgoutput-binary", "on"][..], PgoutputBinary::On),
        (&["--pgoutput-binary=true"][..], PgoutputBinary::On),
        (&["--pgoutput-binary", "off"][..], PgoutputBinary::Off),
        (&["--pgoutput-binary=false"][..], PgoutputBinary::Off),
        (&["--pgoutput-binary", "auto"][..], PgoutputBinary::Auto),
    ] {
        let config = parse(&[&["--topic-prefix", "app"][..], flags].concat());
        assert_eq!(config.pgoutput_binary, expected, "{flags:?}");
        assert!(config.validate().is_ok());
    }
    let with_signals = |mode: &str| {
        parse(&[
            "--topic-prefix",
            "app",
            "--pgoutput-binary",
            mode,
            "--signal-data-collection",
            "public.signals",
        ])
        .validate()
    };
    assert!(with_signals("auto").is_ok(), "auto reads text with signals");
    let error = with_signals("on")
        .expect_err("binary values and a signal table")
        .to_string();
    assert!(
        error.contains("--pgoutput-binary") && error.contains("--signal-data-collection"),
        "{error}"
    );
}

#[test]
fn incremental_snapshot_tables_in_flight_is_between_one_and_sixty_four() {
    let flag = "--incremental-snapshot-tables-in-flight";
    let default = parse(&["--topic-prefix", "a"]);
    assert_eq!(
        default.incremental_snapshot_tables_in_flight, 1,
        "one table at a time unless asked"
    );
    for (value, valid) in [("0", false), ("1", true), ("64", true), ("65", false)] {
        let result = parse(&["--topic-prefix", "a", flag, value]).validate();
        match result {
            Ok(_) => assert!(valid, "{value} is accepted"),
            Err(error) => {
                assert!(!valid, "{value} is refused: {error}");
                assert!(error.to_string().contains(&flag[2..]), "{error}");
            }
        }
    }
}
