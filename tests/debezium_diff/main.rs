//! The differential test against Debezium (issue 21 item 2): Debezium
//! 3.6.1.Final, embedded, and pgcdc-kafka decode the same workload from
//! slots at the same LSN, and their records are compared one by one: topic,
//! key bytes, value, headers, with only the volatile fields masked
//! (`compare.rs`). Every difference must be a deviation documented in
//! `tests/debezium/deviations.toml`, and every deviation there must still
//! occur (`deviations.rs`).
//!
//! One slot is created and copied (`pg_copy_logical_replication_slot`), so
//! all slots share one confirmed position, checked before the workload runs:
//! one for Debezium, one per pgcdc-kafka configuration. Debezium runs once
//! and converts each SourceRecord for every output the way a Kafka Connect
//! worker would (`tests/debezium/DebeziumDiffRunner.java`); pgcdc-kafka runs
//! once per output, bounded (`--stop-when-caught-up`), into the real Kafka,
//! and its topics are read back from where each run began.
//!
//! Outputs: `json_schemas`, `json_plain` and `json_key_plain` (JsonConverter
//! with schemas on both sides, on neither, on the value only), each with
//! headers written by a JsonConverter as Debezium Server does, and
//! `json_simple_headers` with Kafka Connect's default `SimpleHeaderConverter`
//! (pgcdc-kafka's `--header-converter json|simple`); `avro` (Confluent's
//! AvroConverter and `--format avro`, both against the same Apicurio
//! registry; each side's key and value decoded with its writer schema and
//! compared as `{schema, payload}` documents, so the schemas are compared
//! too); `unwrap` (ExtractNewRecordState, `--envelope unwrap`),
//! `unwrap_rewrite` (the same with deletes rewritten and envelope fields
//! added as fields and headers), `transactions` (transaction metadata: the
//! BEGIN/END topic and each event's `transaction` block, from a second
//! Debezium run), `outbox` (EventRouter, `--outbox-table`).

#[path = "../common/mod.rs"]
mod common;
mod compare;
mod deviations;
mod engine;
mod workload;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::avro_reader::{plain, AvroReader};
use common::{read_raw_from, topics_matching, ReadUntil, Scenario, TIMEOUT};
use compare::{Difference, Rec};
use pgcdc_testcontainers::{unique_name, Kafka, Postgres, SchemaRegistry};

const BIN: &str = env!("CARGO_BIN_EXE_pgcdc-kafka");

const JSON_CONVERTER: &str = "org.apache.kafka.connect.json.JsonConverter";
const SIMPLE_HEADER_CONVERTER: &str = "org.apache.kafka.connect.storage.SimpleHeaderConverter";
const AVRO_CONVERTER: &str = "io.confluent.connect.avro.AvroConverter";

/// One configuration compared: pgcdc-kafka's flags, Debezium's output
/// settings, and which of our topics belong to it.
struct Case {
    output: &'static str,
    /// Keys and values are Confluent-framed Avro.
    avro: bool,
    pgcdc: Vec<String>,
    /// Connector settings of the Debezium run this case reads (one run per
    /// distinct set, each on its own slot).
    engine: &'static [(&'static str, &'static str)],
    debezium: Vec<(String, String)>,
    ours: Box<dyn Fn(&str) -> bool + Send + Sync>,
}

/// What every Debezium run sets beyond the connection: truncates are
/// compared too (both skip them by default).
const ENGINE_BASE: &[(&str, &str)] = &[("skipped.operations", "none")];

/// The Debezium run of the transaction metadata case.
const WITH_TRANSACTIONS: &[(&str, &str)] = &[("provide.transaction.metadata", "true")];

/// The Debezium run of the column mapper cases (issue 21 item 3): every
/// kind of truncation, masking, hashing (v1 and v2, a key column too, an
/// unchanged-TOAST placeholder too) and the source-type parameters on every
/// type of `all_types`. `audit.note` is both truncated and masked: the
/// first rule (truncation) must win, as in Debezium. pgcdc-kafka reads the
/// same properties through `--debezium-config`.
const COLUMN_MAPPERS: &[(&str, &str)] = &[
    (
        "column.truncate.to.3.chars",
        "public.all_types.c_text,public.all_types.c_bytea,public.audit.note,public.docs_full.body",
    ),
    (
        "column.mask.with.4.chars",
        "public.accounts.owner,public.all_types.c_enum,public.all_types.c_int2,public.audit.note",
    ),
    (
        "column.mask.hash.SHA-256.with.salt.CzQMA0cB5K",
        "public.all_types.c_varchar,public.all_types.c_email,public.by_index.code",
    ),
    (
        "column.mask.hash.v2.SHA-256.with.salt.CzQMA0cB5K",
        "public.all_types.c_char,public.all_types.c_name,public.accounts.note",
    ),
    (
        "column.mask.hash.v2.MD5.with.salt.pepper",
        "public.docs.body",
    ),
    ("column.propagate.source.type", "public.all_types.*"),
    (
        "datatype.propagate.source.type",
        "public.audit.numeric,public.accounts.int4",
    ),
];

/// Kafka Connect's RegexRouter.
const REGEX_ROUTER: &str = "org.apache.kafka.connect.transforms.RegexRouter";

/// [`COLUMN_MAPPERS`] as a Kafka Connect connector file for pgcdc-kafka's
/// `--debezium-config` (its flags override the slot and publication),
/// written into `work`.
fn column_mapper_config(work: &Path) -> String {
    let config: serde_json::Map<String, serde_json::Value> = COLUMN_MAPPERS
        .iter()
        .map(|(k, v)| (k.to_string(), serde_json::Value::from(*v)))
        .collect();
    let path = work.join("column-mappers.json");
    std::fs::write(&path, serde_json::json!({ "config": config }).to_string())
        .expect("write the column mapper config");
    path.display().to_string()
}

/// Settings from `(key, value)` pairs.
fn settings<'a>(pairs: impl IntoIterator<Item = &'a (&'a str, &'a str)>) -> Vec<(String, String)> {
    pairs
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// JsonConverter for key and value, with `schemas.enable` = `key` and
/// `value`, and headers written by a JsonConverter (with the value's
/// `schemas.enable`, as Debezium Server writes them) or, with `simple`,
/// Kafka Connect's default `SimpleHeaderConverter`: what pgcdc-kafka's
/// `--header-converter json|simple` stands for.
fn json_converters(key: &str, value: &str, simple: bool) -> Vec<(String, String)> {
    let headers: &[(&str, &str)] = match simple {
        true => &[("header.converter", SIMPLE_HEADER_CONVERTER)],
        false => &[
            ("header.converter", JSON_CONVERTER),
            ("header.converter.schemas.enable", value),
        ],
    };
    settings(
        [
            ("key.converter", JSON_CONVERTER),
            ("key.converter.schemas.enable", key),
            ("value.converter", JSON_CONVERTER),
            ("value.converter.schemas.enable", value),
        ]
        .iter()
        .chain(headers),
    )
}

/// AvroConverter for key and value against `registry`, and the default
/// header converter (pgcdc-kafka's default with `--format avro`).
fn avro_converters(registry: &str) -> Vec<(String, String)> {
    settings(&[
        ("key.converter", AVRO_CONVERTER),
        ("key.converter.schema.registry.url", registry),
        ("value.converter", AVRO_CONVERTER),
        ("value.converter.schema.registry.url", registry),
        ("header.converter", SIMPLE_HEADER_CONVERTER),
    ])
}

fn cases(prefix: &str, outbox_type: &str, registry: &str, work: &Path) -> Vec<Case> {
    let case = |output, avro, pgcdc: &[&str], debezium| Case {
        output,
        avro,
        pgcdc: pgcdc.iter().map(|s| s.to_string()).collect(),
        engine: &[],
        debezium,
        ours: Box::new({
            let p = format!("{prefix}.");
            move |t: &str| t.starts_with(&p)
        }),
    };
    let with = |mut base: Vec<(String, String)>, more: &[(&str, &str)]| {
        base.extend(settings(more));
        base
    };
    let schemas = |on: &'static str| json_converters(on, on, false);
    let outbox_topics = format!("{}\\.public\\.outbox", regex::escape(prefix));
    let mappers = column_mapper_config(work);
    let route_regex = format!("{}\\.public\\.(accounts|audit)", regex::escape(prefix));
    let route_replacement = format!("{prefix}.routed.$1");
    let rename = format!("{route_regex}={route_replacement}");
    let outbox_topic = format!("outbox.event.{outbox_type}");
    vec![
        Case {
            engine: COLUMN_MAPPERS,
            ..case(
                "mapped_json",
                false,
                &[
                    "--json-schemas",
                    "true",
                    "--header-converter",
                    "json",
                    "--debezium-config",
                    &mappers,
                    "--topic-rename",
                    &rename,
                ],
                with(
                    schemas("true"),
                    &[
                        ("transforms", "route"),
                        ("transforms.route.type", REGEX_ROUTER),
                        ("transforms.route.regex", &route_regex),
                        ("transforms.route.replacement", &route_replacement),
                    ],
                ),
            )
        },
        Case {
            engine: COLUMN_MAPPERS,
            ..case(
                "mapped_avro",
                true,
                &[
                    "--format",
                    "avro",
                    "--schema-registry-url",
                    registry,
                    "--debezium-config",
                    &mappers,
                ],
                avro_converters(registry),
            )
        },
        case(
            "json_schemas",
            false,
            &["--json-schemas", "true"],
            schemas("true"),
        ),
        case(
            "json_plain",
            false,
            &["--json-schemas", "false"],
            schemas("false"),
        ),
        case(
            "json_key_plain",
            false,
            &[
                "--json-key-schemas",
                "false",
                "--json-value-schemas",
                "true",
            ],
            json_converters("false", "true", false),
        ),
        case(
            "json_simple_headers",
            false,
            &["--json-schemas", "true", "--header-converter", "simple"],
            json_converters("true", "true", true),
        ),
        case(
            "avro",
            true,
            &["--format", "avro", "--schema-registry-url", registry],
            avro_converters(registry),
        ),
        case(
            "unwrap",
            false,
            &["--json-schemas", "true", "--envelope", "unwrap"],
            with(
                schemas("true"),
                &[
                    ("transforms", "unwrap"),
                    (
                        "transforms.unwrap.type",
                        "io.debezium.transforms.ExtractNewRecordState",
                    ),
                ],
            ),
        ),
        case(
            "unwrap_rewrite",
            false,
            &[
                "--json-schemas",
                "true",
                "--envelope",
                "unwrap",
                "--unwrap-delete-handling",
                "rewrite",
                "--unwrap-add-fields",
                "op,table,lsn,source.ts_ms",
                "--unwrap-add-headers",
                "db,op",
            ],
            with(
                schemas("true"),
                &[
                    ("transforms", "unwrap"),
                    (
                        "transforms.unwrap.type",
                        "io.debezium.transforms.ExtractNewRecordState",
                    ),
                    (
                        "transforms.unwrap.delete.tombstone.handling.mode",
                        "rewrite",
                    ),
                    ("transforms.unwrap.add.fields", "op,table,lsn,source.ts_ms"),
                    ("transforms.unwrap.add.headers", "db,op"),
                ],
            ),
        ),
        Case {
            engine: WITH_TRANSACTIONS,
            ..case(
                "transactions",
                false,
                &[
                    "--json-schemas",
                    "true",
                    "--provide-transaction-metadata",
                    "true",
                ],
                schemas("true"),
            )
        },
        Case {
            ours: Box::new(move |t: &str| t == outbox_topic),
            ..case(
                "outbox",
                false,
                &["--json-schemas", "true", "--outbox-table", "public.outbox"],
                with(
                    schemas("true"),
                    &[
                        ("topics", &outbox_topics),
                        ("transforms", "outbox"),
                        (
                            "transforms.outbox.type",
                            "io.debezium.transforms.outbox.EventRouter",
                        ),
                    ],
                ),
            )
        },
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_records_as_debezium_except_documented_deviations() {
    let kafka = Kafka::shared();
    let bootstrap = kafka.bootstrap_servers();
    let pg = Postgres::shared();
    let s = Scenario::new(pg, "dbzdiff");
    let outbox_type = unique_name("order");
    let registry = SchemaRegistry::shared();
    let work = std::env::temp_dir().join(unique_name("dbzdiff"));
    std::fs::create_dir_all(&work).expect("work dir");
    let cases = cases(&s.prefix, &outbox_type, &registry.url(), &work);

    let (ddl, extensions) = workload::schema(|ext| {
        pg.execute(&s.db, &format!("CREATE EXTENSION IF NOT EXISTS {ext}"))
            .map_err(|e| eprintln!("extension {ext} unavailable, its column left out: {e}"))
            .is_ok()
    });
    for statement in &ddl {
        s.sql(statement);
    }
    s.sql(&format!(
        "CREATE PUBLICATION {} FOR ALL TABLES",
        s.publication
    ));

    // One slot per Debezium run and per pgcdc-kafka run, all copies of the
    // first: all at one position.
    let runs = debezium_runs(&cases, &s.slot);
    let slots: Vec<String> = cases
        .iter()
        .map(|c| format!("{}_{}", s.slot, c.output))
        .collect();
    create_slots(&s, runs.iter().map(|r| &r.slot).chain(&slots));

    for statement in workload::changes(&extensions, &outbox_type) {
        s.sql(&statement);
    }

    let started = std::time::Instant::now();
    let engines = runs.len();
    let debezium = spawn_debezium(&s, runs, work.clone());
    let mut ours: BTreeMap<&str, Vec<Rec>> = BTreeMap::new();
    for (case, slot) in cases.iter().zip(&slots) {
        let mut args = s.args(
            &bootstrap,
            &[
                "--snapshot-mode",
                "never",
                "--skipped-operations",
                "none",
                "--stop-when-caught-up",
            ],
        );
        replace_flag(&mut args, "--slot", slot);
        args.extend(case.pgcdc.iter().cloned());
        ours.insert(
            case.output,
            run_pgcdc(&bootstrap, &args, &case.ours, &work).await,
        );
    }
    let debezium = debezium.await.expect("debezium runner thread");
    eprintln!(
        "{engines} debezium {} and {} pgcdc-kafka runs took {:.1?}",
        engine::DEBEZIUM_VERSION,
        cases.len(),
        started.elapsed()
    );

    let mut compared = 0;
    let mut diffs = Vec::new();
    let reader = AvroReader::new(registry);
    for case in &cases {
        let (ours, debezium) = match case.avro {
            true => (
                avro_as_json(&reader, &ours[case.output]),
                avro_as_json(&reader, &debezium[case.output]),
            ),
            false => (ours[case.output].clone(), debezium[case.output].clone()),
        };
        let (n, d) = compare::compare_output(case.output, &ours, &debezium);
        eprintln!(
            "{}: {} records ours, {} Debezium's; {n} compared, {} differences",
            case.output,
            ours.len(),
            debezium.len(),
            d.len()
        );
        compared += n;
        diffs.extend(d);
    }
    assert_all_documented(&s.prefix, compared, diffs, &work);
    let _ = std::fs::remove_dir_all(&work);
}

/// One Debezium run per distinct [`Case::engine`], each feeding the outputs
/// of its cases, on slot `<slot>_dbz<n>`.
fn debezium_runs(cases: &[Case], slot: &str) -> Vec<engine::Run> {
    let mut engines: Vec<&[(&str, &str)]> = Vec::new();
    for case in cases {
        if !engines.contains(&case.engine) {
            engines.push(case.engine);
        }
    }
    engines
        .iter()
        .enumerate()
        .map(|(i, engine)| engine::Run {
            slot: format!("{slot}_dbz{i}"),
            settings: settings(ENGINE_BASE.iter().chain(*engine)),
            outputs: cases
                .iter()
                .filter(|c| c.engine == *engine)
                .map(|c| engine::Output {
                    name: c.output,
                    settings: c.debezium.clone(),
                })
                .collect(),
        })
        .collect()
}

/// Runs `runs` one after the other on a blocking thread (beside the
/// pgcdc-kafka runs: two cores) and returns every output's records.
fn spawn_debezium(
    s: &Scenario,
    runs: Vec<engine::Run>,
    work: PathBuf,
) -> tokio::task::JoinHandle<BTreeMap<String, Vec<Rec>>> {
    let (host, port) = (s.pg.host().to_owned(), s.pg.port());
    let (user, password) = (s.pg.user().to_owned(), s.pg.password().to_owned());
    let (db, publication, prefix) = (s.db.clone(), s.publication.clone(), s.prefix.clone());
    tokio::task::spawn_blocking(move || {
        let source = engine::Source {
            host: &host,
            port,
            user: &user,
            password: &password,
            database: &db,
            publication: &publication,
        };
        let mut records = BTreeMap::new();
        for (i, run) in runs.iter().enumerate() {
            let dir = work.join(format!("debezium-{i}"));
            std::fs::create_dir_all(&dir).expect("debezium work dir");
            records.extend(engine::run(
                &source,
                &prefix,
                workload::STOP_PREFIX,
                run,
                &dir,
            ));
        }
        records
    })
}

/// Judges `diffs` against `tests/debezium/deviations.toml`, prints the
/// report and the `N records compared, M differences` line, and fails on an
/// undocumented difference or a stale deviation (all undocumented ones are
/// also written to `<work>/undocumented.txt`).
fn assert_all_documented(prefix: &str, compared: usize, diffs: Vec<Difference>, work: &Path) {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/debezium/deviations.toml");
    let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let deviations = deviations::parse(&text, prefix);
    let total = diffs.len();
    let verdict = deviations::judge(&deviations, diffs);
    println!("{}", deviations::report(&deviations, &verdict, 300));
    let listing = work.join("undocumented.txt");
    let lines: Vec<String> = verdict.undocumented.iter().map(|d| d.to_string()).collect();
    std::fs::write(&listing, lines.join("\n")).expect("write undocumented.txt");
    println!(
        "{compared} records compared, {total} differences ({} undocumented, {} stale deviations)",
        verdict.undocumented.len(),
        verdict.stale.len()
    );
    assert!(
        !verdict.failed(),
        "{} undocumented differences and {} stale deviations (above; all of them in {})",
        verdict.undocumented.len(),
        verdict.stale.len(),
        listing.display()
    );
}

/// Creates the first of `slots` (pgoutput) and the others as its copies,
/// and checks that all are at one confirmed position.
fn create_slots<'a>(s: &Scenario, slots: impl IntoIterator<Item = &'a String>) {
    let mut slots = slots.into_iter();
    let first = slots.next().expect("a slot");
    s.sql(&format!(
        "SELECT pg_create_logical_replication_slot('{first}', 'pgoutput')"
    ));
    for slot in slots {
        s.sql(&format!(
            "SELECT pg_copy_logical_replication_slot('{first}', '{slot}')"
        ));
    }
    let positions = s.query_one(&format!(
        "SELECT string_agg(DISTINCT confirmed_flush_lsn::text, ',') FROM pg_replication_slots \
         WHERE slot_name LIKE '{}%'",
        s.slot
    ));
    assert!(
        positions.as_deref().is_some_and(|p| !p.contains(',')),
        "every slot at one confirmed position: {positions:?}"
    );
}

/// Sets the value following `flag` in `args`.
fn replace_flag(args: &mut [String], flag: &str, value: &str) {
    let at = args
        .iter()
        .position(|a| a == flag)
        .unwrap_or_else(|| panic!("{flag} in {args:?}"));
    args[at + 1] = value.to_owned();
}

/// The records with each key and value decoded with its writer schema, as
/// JSON `{"schema": <the writer schema>, "payload": <the datum>}`.
fn avro_as_json(reader: &AvroReader<'_>, records: &[Rec]) -> Vec<Rec> {
    let document = |bytes: &Vec<u8>| {
        let (_, schema, datum) = reader.decode_with_schema(bytes);
        serde_json::json!({"schema": schema, "payload": plain(&datum)})
            .to_string()
            .into_bytes()
    };
    records
        .iter()
        .map(|r| Rec {
            topic: r.topic.clone(),
            key: r.key.as_ref().map(document),
            value: r.value.as_ref().map(document),
            headers: r.headers.clone(),
        })
        .collect()
}

/// Runs pgcdc-kafka with `args` until caught up, and returns what it wrote
/// to the topics `ours` selects (per topic, in order).
async fn run_pgcdc(
    bootstrap: &str,
    args: &[String],
    ours: &(dyn Fn(&str) -> bool + Send + Sync),
    work: &Path,
) -> Vec<Rec> {
    // Every run writes the same topic names: read only past where it began.
    let before = topics_matching(bootstrap, |_| true).await;
    let args = args.to_vec();
    let output =
        tokio::task::spawn_blocking(move || Command::new(BIN).arg("run").args(&args).output())
            .await
            .expect("join")
            .expect("pgcdc-kafka runs");
    let log = work.join(unique_name("pgcdc.log"));
    let _ = std::fs::write(&log, &output.stderr);
    assert!(
        output.status.success(),
        "pgcdc-kafka exits 0 ({}); stderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let after = topics_matching(bootstrap, |_| true).await;
    let mut records = Vec::new();
    for (topic, highs) in after {
        if !ours(&topic) {
            continue;
        }
        let from = before.get(&topic).cloned().unwrap_or_default();
        let from: Vec<i64> = (0..highs.len())
            .map(|p| from.get(p).copied().unwrap_or(0))
            .collect();
        let count: i64 = highs.iter().zip(&from).map(|(h, f)| h - f).sum();
        if count == 0 {
            continue;
        }
        let count = usize::try_from(count).expect("high watermark past the start");
        let read = read_raw_from(bootstrap, &topic, from, ReadUntil::count(count, TIMEOUT)).await;
        assert_eq!(read.len(), count, "read all of {topic}");
        records.extend(read.into_iter().map(|r| Rec {
            topic: topic.clone(),
            key: r.key,
            value: r.value,
            headers: r.headers,
        }));
    }
    records
}
