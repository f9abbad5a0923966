//! Topic contents against table contents, for tables of `(id int, v int)`:
//! what a compacting consumer keeps, and what the table holds.

use std::collections::BTreeMap;

use serde_json::{json, Value as Json};

use pgcdc_testcontainers::Kafka;

use super::{consume_all, record_count, wait_until, Record, Scenario, TIMEOUT};

/// The latest state per key a compacting consumer would keep: the last
/// create/update/read wins, a delete or tombstone removes the key.
pub fn latest_by_key(records: &[Record]) -> BTreeMap<i64, Json> {
    let mut state = BTreeMap::new();
    for r in records {
        let Some(key) = r.key.as_ref() else { continue };
        let id = key["payload"]["id"].as_i64().expect("integer key");
        match r.value.as_ref().map(|v| &v["payload"]) {
            None => {
                state.remove(&id);
            }
            Some(p) if p["op"] == "d" => {
                state.remove(&id);
            }
            Some(p) => {
                // The columns the comparison reads from the table.
                state.insert(id, json!({"id": p["after"]["id"], "v": p["after"]["v"]}));
            }
        }
    }
    state
}

/// `table`'s rows as [`latest_by_key`] keeps them.
pub fn table_state(s: &Scenario, table: &str) -> BTreeMap<i64, Json> {
    s.pg.query(&s.db, &format!("SELECT id::text, v::text FROM {table}"))
        .expect("query")
        .into_iter()
        .map(|row| {
            let id: i64 = row[0].as_deref().unwrap().parse().unwrap();
            let v: i64 = row[1].as_deref().unwrap().parse().unwrap();
            (id, json!({"id": id, "v": v}))
        })
        .collect()
}

/// Waits until `table`'s topic, kept as [`latest_by_key`] keeps it, equals
/// the table's rows as they are now.
pub async fn wait_for_topic_to_equal_table(kafka: &Kafka, s: &Scenario, table: &str) {
    let expected = table_state(s, table);
    let topic = s.topic(table);
    wait_until(
        TIMEOUT,
        &format!("topic of {table} to equal the table"),
        || {
            let bootstrap = kafka.bootstrap_servers();
            let topic = topic.clone();
            let expected = &expected;
            async move { latest_by_key(&consume_all(&bootstrap, &topic, TIMEOUT).await) == *expected }
        },
    )
    .await;
}

/// Snapshot reads (`op: "r"`) per key: `(initial, incremental)` counts.
pub fn reads_per_key(records: &[Record]) -> BTreeMap<i64, (usize, usize)> {
    let mut reads: BTreeMap<i64, (usize, usize)> = BTreeMap::new();
    for r in records {
        let Some(payload) = r.value.as_ref().map(|v| &v["payload"]) else {
            continue;
        };
        if payload["op"] != "r" {
            continue;
        }
        let id = payload["after"]["id"].as_i64().expect("integer id");
        let entry = reads.entry(id).or_default();
        match payload["source"]["snapshot"] == "incremental" {
            true => entry.1 += 1,
            false => entry.0 += 1,
        }
    }
    reads
}

/// The records in the topics of `tables` (offsets: under exactly-once,
/// commit markers and aborted records count too).
pub async fn records_in(kafka: &Kafka, s: &Scenario, tables: &[&str]) -> usize {
    let mut total = 0;
    for table in tables {
        total += record_count(&kafka.bootstrap_servers(), &s.topic(table)).await;
    }
    total
}
