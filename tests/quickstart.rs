//! The README's quickstart (`cargo run --example quickstart`), run with
//! the binary this test was built with: it must keep working on a fresh
//! machine, with the real binary and its default output format.

#[path = "../examples/quickstart.rs"]
mod quickstart;

#[test]
fn the_quickstart_shows_the_snapshot_the_changes_and_the_connectors_log() {
    let shown = quickstart::run(std::path::Path::new(env!("CARGO_BIN_EXE_pgcdc-kafka")))
        .unwrap_or_else(|e| panic!("the quickstart: {e:#}"));
    let ops: Vec<Option<String>> = shown
        .messages
        .iter()
        .map(|(_, value)| {
            let value: serde_json::Value = serde_json::from_str(value.as_deref()?).ok()?;
            // The default format: JSON with the schema embedded.
            assert!(value["schema"].is_object(), "{value}");
            value["payload"]["op"].as_str().map(str::to_owned)
        })
        .collect();
    let expected = ["r", "r", "c", "u", "d"]
        .map(|op| Some(op.to_owned()))
        .into_iter()
        .chain([None])
        .collect::<Vec<_>>();
    assert_eq!(ops, expected, "snapshot, insert, update, delete, tombstone");
    let log = shown.log.join("\n");
    for needle in ["starting pgcdc-kafka", "snapshot", "starting replication"] {
        assert!(log.contains(needle), "{needle} in the log:\n{log}");
    }
    assert!(
        shown.summary.contains("stopped (on request)"),
        "{}",
        shown.summary
    );
}
