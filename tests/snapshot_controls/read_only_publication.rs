//! `--read-only` against a publication it may not change (docs/SNAPSHOTS.md,
//! "Read-only incremental snapshots"): an admin's publication with a row
//! filter on one table, a column list on another, `publish = 'insert'` and
//! `publish_via_partition_root = true` with a partitioned table selected.
//!
//! - `check --read-only` names each difference with the publication, the
//!   table and what to do: FAIL for the row filter and the missing
//!   operations (a snapshot's rows would go wrong), WARN for the column
//!   list and the partition root (only the records' shape differs);
//! - `run --read-only` refuses to start for the first two, naming both,
//!   before creating its slot;
//! - once an admin ran the statements the refusals name, `check` passes,
//!   still warning about the other two.
//!
//! Without `--read-only` the same publication is used as it is by
//! `--publication-autocreate-mode disabled`, and by `all_tables` (which
//! only creates a missing one): plain `check` and `run` report and refuse
//! the same, naming the mode; `filtered` publishes the tables whole itself
//! (SET TABLE) and refuses only the `publish` list, which it never sets.

use pgcdc_testcontainers::{Kafka, Postgres};
use serde_json::{json, Value as Json};

use super::common::process::run_binary;
use super::common::Scenario;
use super::read_only::kafka_signal;

/// One finding of `check`: status, detail, fix.
type Finding = (String, String, String);

/// Whether `check` passed, and its findings named `read-only`.
async fn read_only_findings(args: &[String]) -> (bool, Vec<Finding>) {
    findings_of(args, "read-only").await
}

/// Whether `check` passed, and its findings named `check`.
async fn findings_of(args: &[String], check: &str) -> (bool, Vec<Finding>) {
    let mut all = vec!["--log-format".into(), "json".into(), "check".into()];
    all.extend(args.iter().cloned());
    let (code, stdout, stderr) = run_binary(all).await;
    let report: Json = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("one JSON report ({e}): {stdout} {stderr}"));
    let text = |f: &Json, field: &str| f[field].as_str().unwrap_or("").to_owned();
    let findings = (report["findings"].as_array().expect("findings").iter())
        .filter(|f| f["check"] == check)
        .map(|f| (text(f, "status"), text(f, "detail"), text(f, "fix")))
        .collect();
    (code == Some(0), findings)
}

/// The finding of `status` whose detail contains `detail`.
fn finding<'a>(findings: &'a [Finding], status: &str, detail: &str) -> &'a Finding {
    findings
        .iter()
        .find(|(s, d, _)| s == status && d.contains(detail))
        .unwrap_or_else(|| panic!("a {status} about {detail:?}: {findings:#?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_reports_a_publication_that_differs_from_the_run() {
    let kafka = Kafka::shared();
    let s = Scenario::new(Postgres::shared(), "ropub");
    let version: i32 = (s.query_one("SHOW server_version_num"))
        .and_then(|v| v.parse().ok())
        .expect("a version");
    if version < 150_000 {
        println!("row filters and column lists need PostgreSQL 15; server is {version}: skipped");
        return;
    }
    s.sql("CREATE TABLE t (id int PRIMARY KEY, v int)");
    s.sql("CREATE TABLE u (id int PRIMARY KEY, v int, note text)");
    s.sql("CREATE TABLE p (id int PRIMARY KEY, v int) PARTITION BY RANGE (id)");
    s.sql("CREATE TABLE p1 PARTITION OF p FOR VALUES FROM (0) TO (1000)");
    let publication = &s.publication;
    s.sql(&format!(
        "CREATE PUBLICATION {publication} FOR TABLE t WHERE (id > 10), u (id, v), p \
         WITH (publish = 'insert', publish_via_partition_root = true)"
    ));
    let args = s.args(
        &kafka.bootstrap_servers(),
        &["--read-only", "--signal-enabled-channels", "kafka"],
    );
    // The signal topic exists, as check wants it.
    let signals = format!("{}-signal", s.prefix);
    kafka_signal(kafka, &signals, "someone-else", json!({"type": "log"})).await;

    let (passed, findings) = read_only_findings(&args).await;
    assert!(!passed, "check fails: {findings:#?}");
    let quoted = format!("publication {publication:?}");
    let (_, detail, fix) = finding(&findings, "fail", "row filter");
    assert!(
        detail.contains(&quoted)
            && detail.contains("WHERE (id > 10) on \"public\".\"t\"")
            && fix.contains(&format!(
                "ALTER PUBLICATION \"{publication}\" DROP TABLE \"public\".\"t\""
            )),
        "the row filter, its table and the fix: {detail} | {fix}"
    );
    let (_, detail, fix) = finding(&findings, "fail", "publishes only inserts");
    assert!(
        detail.contains(&quoted)
            && detail.contains("not update, delete")
            && fix.contains("SET (publish = 'insert, update, delete')")
            && fix.contains("--skipped-operations u,d,t"),
        "the missing operations and the fix: {detail} | {fix}"
    );
    let (_, detail, fix) = finding(&findings, "warn", "column list");
    assert!(
        detail.contains("\"public\".\"u\"")
            && detail.contains("leaving out note")
            && fix.contains("--column-exclude-list public.u.note"),
        "the column list only warns: {detail} | {fix}"
    );
    let (_, _, fix) = finding(&findings, "warn", "publish_via_partition_root = true");
    assert!(
        fix.contains("--publish-via-partition-root true"),
        "the partition root only warns: {fix}"
    );

    // run --read-only refuses, naming the two, and creates nothing.
    let error = s.start_args(args.clone()).wait_for_error().await;
    let error = pgcdc_kafka::error_chain(&error);
    println!("run --read-only with a publication it cannot change: {error}");
    assert!(
        error.contains("--read-only never alters it")
            && error.contains("WHERE (id > 10) on \"public\".\"t\"")
            && error.contains("publishes only inserts")
            && !error.contains("column list"),
        "run names what makes the data wrong, not what only warns: {error}"
    );
    let slots = format!(
        "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '{}'",
        s.slot
    );
    assert_eq!(s.query_one(&slots).as_deref(), Some("0"), "no slot created");

    // The statements the refusals name, as an admin would run them.
    s.sql(&format!(
        "ALTER PUBLICATION {publication} SET (publish = 'insert, update, delete')"
    ));
    s.sql(&format!(
        "BEGIN; ALTER PUBLICATION {publication} DROP TABLE t; \
         ALTER PUBLICATION {publication} ADD TABLE t; COMMIT"
    ));
    let (_, findings) = read_only_findings(&args).await;
    assert!(
        !findings.iter().any(|(status, _, _)| status == "fail"),
        "nothing refused once fixed: {findings:#?}"
    );
    finding(&findings, "warn", "column list");
    finding(&findings, "warn", "publish_via_partition_root");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modes_that_keep_a_publication_report_what_differs() {
    let started = std::time::Instant::now();
    let kafka = Kafka::shared();
    let s = Scenario::new(Postgres::shared(), "keptpub");
    let version: i32 = (s.query_one("SHOW server_version_num"))
        .and_then(|v| v.parse().ok())
        .expect("a version");
    if version < 150_000 {
        println!("row filters and column lists need PostgreSQL 15; server is {version}: skipped");
        return;
    }
    s.sql("CREATE TABLE t (id int PRIMARY KEY, v int)");
    s.sql("CREATE TABLE u (id int PRIMARY KEY, v int, note text)");
    let publication = &s.publication;
    s.sql(&format!(
        "CREATE PUBLICATION {publication} FOR TABLE t WHERE (id > 10), u (id, v) \
         WITH (publish = 'insert')"
    ));
    let mode = |mode: &str| {
        s.args(
            &kafka.bootstrap_servers(),
            &["--publication-autocreate-mode", mode],
        )
    };
    let slots = format!(
        "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '{}'",
        s.slot
    );

    // disabled and all_tables use it as it is: check and run as read-only.
    let (_, findings) = findings_of(&mode("disabled"), "publication").await;
    let (_, detail, fix) = finding(&findings, "fail", "row filter");
    assert!(
        detail.contains("WHERE (id > 10) on \"public\".\"t\"")
            && detail.contains("--publication-autocreate-mode disabled never alters it")
            && fix.contains("DROP TABLE \"public\".\"t\""),
        "plain check names the row filter and the mode: {detail} | {fix}"
    );
    finding(&findings, "fail", "publishes only inserts");
    finding(&findings, "warn", "leaving out note");
    for (flag, named) in [
        (
            "disabled",
            "--publication-autocreate-mode disabled never alters it",
        ),
        (
            "all_tables",
            "--publication-autocreate-mode all_tables never alters an existing publication",
        ),
    ] {
        let error = s.start_args(mode(flag)).wait_for_error().await;
        let error = pgcdc_kafka::error_chain(&error);
        assert!(
            error.contains(named)
                && error.contains("WHERE (id > 10) on \"public\".\"t\"")
                && error.contains("publishes only inserts")
                && !error.contains("column list"),
            "{flag}: run refuses what makes the data wrong: {error}"
        );
        assert_eq!(s.query_one(&slots).as_deref(), Some("0"), "no slot created");
    }

    // A run that never snapshots streams what the publication carries: a
    // row filter (one tenant's rows) or an insert-only publication is then
    // the admin's choice, warned about, not refused.
    let mut streaming_only = mode("all_tables");
    streaming_only.extend(["--snapshot-mode", "never"].map(String::from));
    let (_, findings) = findings_of(&streaming_only, "publication").await;
    for what in ["row filter", "publishes only inserts"] {
        let (_, detail, _) = finding(&findings, "warn", what);
        assert!(
            detail.contains("takes no snapshot"),
            "says why it only warns: {detail}"
        );
    }
    assert!(
        !findings.iter().any(|(status, _, _)| status == "fail"),
        "nothing refused without a snapshot: {findings:#?}"
    );
    let running = s.start_args(streaming_only);
    s.await_slot().await;
    running.stop().await;
    s.sql(&format!("SELECT pg_drop_replication_slot('{}')", s.slot));

    // filtered publishes the tables whole and refuses only the publish list.
    let (_, findings) = findings_of(&mode("filtered"), "publication").await;
    let (_, detail, _) = finding(&findings, "fail", "publishes only inserts");
    assert!(
        detail.contains("filtered sets its tables and options but never its publish list"),
        "{detail}"
    );
    assert!(
        !findings
            .iter()
            .any(|(_, d, _)| d.contains("row filter WHERE")),
        "filtered drops the row filter itself: {findings:#?}"
    );
    let error = s.start_args(mode("filtered")).wait_for_error().await;
    let error = pgcdc_kafka::error_chain(&error);
    assert!(
        error.contains("publishes only inserts") && !error.contains("row filter"),
        "filtered refuses only the publish list: {error}"
    );
    let narrowed = format!(
        "SELECT count(*) FROM pg_publication_tables WHERE pubname = '{publication}' \
         AND (rowfilter IS NOT NULL OR NOT 'note' = ANY(attnames) AND tablename = 'u')"
    );
    assert_eq!(
        s.query_one(&narrowed).as_deref(),
        Some("0"),
        "filtered published t and u whole"
    );
    s.sql(&format!(
        "ALTER PUBLICATION {publication} SET (publish = 'insert, update, delete')"
    ));
    let (_, findings) = findings_of(&mode("disabled"), "publication").await;
    assert!(
        !findings.iter().any(|(status, _, _)| status != "pass"),
        "nothing left to report once published whole with every operation: {findings:#?}"
    );
    finding(&findings, "pass", "carries every row");
    println!(
        "disabled, all_tables and filtered against a kept publication: {:.1}s",
        started.elapsed().as_secs_f64()
    );
}
