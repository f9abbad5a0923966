//! Topic contents against table contents, for tables of `(id int, v int)`:
//! what a compacting consumer keeps, and what the table holds.

use std::collections::BTreeMap;

use serde_json::{json, Value as Json};

use super::{Record, Scenario};

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
