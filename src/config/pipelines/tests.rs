use super::*;

/// Writes `text` as a config file of its own and loads it with `flags`.
fn load_file(text: &str, flags: &[&str]) -> Result<Vec<Pipeline>, crate::config::LoadError> {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("pipelines.toml");
    std::fs::write(&file, text).expect("write the config file");
    let mut args = vec!["--config".to_owned(), file.display().to_string()];
    args.extend(flags.iter().map(|f| (*f).to_owned()));
    load(args)
}

/// The problems' lines, as the operator reads them.
fn lines(error: &crate::config::LoadError) -> Vec<String> {
    error.0.iter().map(ToString::to_string).collect()
}

const TWO: &str = r#"
bootstrap_servers = "k1:9092"
snapshot_mode = "never"
[kafka]
"linger.ms" = 10
"batch.size" = 1000

[pipelines.orders]
pg_url = "postgres://u@db1/shop"
slot = "orders"
topic_prefix = "shop"
table = ["public.orders"]

[pipelines.billing]
pg_url = "postgres://u@db2/billing"
slot = "billing"
topic_prefix = "billing"
format = "avro"
schema_registry_url = "http://127.0.0.1:8081"
[pipelines.billing.kafka]
"linger.ms" = 50
"#;

#[test]
fn each_pipeline_layers_its_table_over_the_shared_keys() {
    let pipelines = load_file(TWO, &["--slot", "from_flag", "--max-run", "1h"]).expect("valid");
    let names: Vec<&str> = pipelines.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["billing", "orders"]);
    let [billing, orders] = &pipelines[..] else {
        panic!("two pipelines")
    };
    assert_eq!(orders.config.pg_url.dbname(), "shop");
    assert_eq!(billing.config.pg_url.dbname(), "billing");
    // The pipeline's own table is above the flag.
    assert_eq!(orders.config.slot_name, "orders");
    assert_eq!(billing.config.slot_name, "billing");
    // Shared keys and flags reach every pipeline.
    for p in &pipelines {
        assert_eq!(p.config.bootstrap_servers, "k1:9092");
        assert_eq!(p.config.snapshot_mode, crate::config::SnapshotMode::Never);
        assert_eq!(p.config.max_run, Some(std::time::Duration::from_secs(3600)));
    }
    assert_eq!(orders.config.tables, ["public.orders"]);
    assert!(billing.config.tables.is_empty());
    assert_eq!(billing.config.encode.format, crate::config::Format::Avro);
    assert_eq!(orders.config.encode.format, crate::config::Format::Json);
    // librdkafka properties merge per key, the pipeline's last.
    let property = |p: &Pipeline, key: &str| {
        p.config
            .kafka_properties
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
    };
    assert_eq!(property(orders, "linger.ms").as_deref(), Some("10"));
    assert_eq!(property(billing, "linger.ms").as_deref(), Some("50"));
    assert_eq!(property(billing, "batch.size").as_deref(), Some("1000"));
    assert_eq!(
        orders.origins.of("slot_name"),
        Origin::Pipeline {
            path: match &orders.origins.of("bootstrap_servers") {
                Origin::File(path) => path.clone(),
                other => panic!("bootstrap_servers from the file, not {other}"),
            },
            name: "orders".to_owned()
        }
    );
}

#[test]
fn a_file_without_pipelines_is_one_named_default() {
    let pipelines = load_file(
        "pg_url = \"postgres://u@h/d\"\ntopic_prefix = \"app\"\n",
        &["--slot", "s1"],
    )
    .expect("valid");
    assert_eq!(pipelines.len(), 1);
    assert_eq!(pipelines[0].name.as_str(), DEFAULT_PIPELINE);
    assert_eq!(pipelines[0].config.slot_name, "s1");
    assert_eq!(pipelines[0].config.topic_prefix, "app");
}

#[test]
fn a_shared_slot_is_refused_naming_both_pipelines() {
    let text = r#"
[pipelines.a]
pg_url = "postgres://u@db1:5432/one"
topic_prefix = "one"
slot = "cdc"
[pipelines.b]
pg_url = "postgres://u@db1:5432/two"
topic_prefix = "two"
slot = "cdc"
[pipelines.c]
pg_url = "postgres://u@db2:5432/two"
topic_prefix = "three"
slot = "cdc"
"#;
    let error = load_file(text, &[]).expect_err("a shared slot");
    // Slots are per server: c's "cdc" is on another one.
    assert_eq!(
        lines(&error),
        [
            "pipelines.b.slot: uses replication slot \"cdc\" on db1:5432 as pipeline \"a\" \
             does; give each pipeline its own slot (one slot has one reader)"
        ]
    );
}

#[test]
fn a_prefix_shared_on_one_database_is_refused() {
    let text = r#"
topic_prefix = "app"
pg_url = "postgres://u@db1/shop"
[pipelines.a]
slot = "a"
table = ["public.x"]
[pipelines.b]
slot = "b"
table = ["public.y"]
"#;
    let error = load_file(text, &[]).expect_err("a shared prefix");
    let lines = lines(&error);
    assert_eq!(lines.len(), 2, "{lines:#?}");
    assert!(
        lines[0].starts_with(
            "pipelines.b.topic_prefix: streams database \"shop\" on db1:5432 to topic \
             prefix \"app\" as pipeline \"a\" does"
        ),
        "{lines:#?}"
    );
    // The connector name defaults to the prefix: the transactional ids clash too.
    assert!(
        lines[1].starts_with("pipelines.b.connector_name: has connector name \"app\""),
        "{lines:#?}"
    );
}

#[test]
fn names_and_tables_are_checked() {
    let text = r#"
[pipelines.Orders]
slot = "x"
[pipelines.ok]
pg_url = "postgres://u@h/d"
topic_prefix = "ok"
slott = "y"
metrics_addr = "127.0.0.1:9000"
[pipelines.flat]
pipelines = 1
"#;
    let error = load_file(text, &[]).expect_err("bad pipelines");
    let lines = lines(&error);
    let expected = [
        "pipelines.Orders (from file ",
        "pipelines.flat.pipelines (from file ",
        "pipelines.ok.metrics_addr (from file ",
        "pipelines.ok.slott (from file ",
    ];
    for (line, start) in lines.iter().zip(expected) {
        assert!(line.starts_with(start), "{start} in {lines:#?}");
    }
    assert!(
        lines[0].contains("is not a valid pipeline name"),
        "{lines:#?}"
    );
    assert!(lines[2].contains("set it at the top"), "{lines:#?}");
    assert!(lines[3].contains("did you mean \"slot\"?"), "{lines:#?}");
    // flat lacks pg_url and topic_prefix: required, named with the pipeline.
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("pipelines.flat: pg_url: is required")),
        "{lines:#?}"
    );
}

#[test]
fn a_duplicate_pipeline_name_is_a_toml_error_naming_it() {
    let text = "[pipelines.a]\nslot = \"x\"\n[pipelines.a]\nslot = \"y\"\n";
    let error = load_file(text, &[]).expect_err("a duplicate table");
    let text = error.to_string();
    assert!(text.contains("not valid TOML"), "{text}");
    assert!(text.contains("pipelines.a"), "{text}");
}

#[test]
fn pipeline_names() {
    for good in ["a", "orders_eu", "p1", &"x".repeat(MAX_NAME_LEN)] {
        assert!(good.parse::<PipelineName>().is_ok(), "{good}");
    }
    for bad in [
        "",
        "1a",
        "_a",
        "Orders",
        "a-b",
        "a.b",
        "ä",
        &"x".repeat(MAX_NAME_LEN + 1),
    ] {
        assert!(bad.parse::<PipelineName>().is_err(), "{bad}");
    }
}
