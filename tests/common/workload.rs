//! A randomized, reproducible write load for the fault tests: transactions
//! that insert and update rows of several `(id, version, note)` tables, so a
//! row's committed versions are exactly `1..=version`, run at once
//! ([`Workload::run_blocking`]) or continuously on a connection of their own
//! ([`write_continuously`]) while the test injects faults.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use pgcdc_testcontainers::Postgres;

use super::Scenario;

/// xorshift64: enough randomness for kill timings and workloads, and
/// reproducible from the printed seed.
pub struct XorShift(pub u64);

impl XorShift {
    /// Seeded from the environment variable `env` when set, else from the
    /// clock; returns the seed too, for the test to print.
    pub fn seeded(env: &str) -> (Self, u64) {
        let seed = std::env::var(env)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0x9E37_79B9, |d| d.as_nanos() as u64)
            });
        (XorShift(seed.max(1)), seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Source tables of the workload: `version` starts at 1 and every update
/// adds 1, so a row's committed versions are exactly `1..=version`.
pub fn create_tables(s: &Scenario, tables: &[&str]) {
    for table in tables {
        s.sql(&format!(
            "CREATE TABLE {table} (id bigint PRIMARY KEY, version bigint NOT NULL, note text NOT NULL)"
        ));
    }
}

/// Generates transactions that insert and update rows of several tables.
pub struct Workload {
    tables: Vec<String>,
    /// Committed ids per table.
    ids: Vec<Vec<i64>>,
    next_id: i64,
    rng: XorShift,
    /// A `(xid bigint, changes int)` table each transaction also logs
    /// itself into, when set.
    txn_log: Option<String>,
}

/// One transaction to run; [`Workload::committed`] once it committed.
pub struct PlannedTxn {
    pub sql: String,
    inserted: Vec<(usize, i64)>,
    changes: u64,
}

impl Workload {
    pub fn new(tables: &[&str], seed: u64) -> Self {
        Workload {
            tables: tables.iter().map(|t| t.to_string()).collect(),
            ids: vec![Vec::new(); tables.len()],
            next_id: 1,
            rng: XorShift(seed.max(1)),
            txn_log: None,
        }
    }

    /// Every transaction also inserts `(txid, changes)` into `table`, so the
    /// test can tell which transactions committed and how large they were.
    pub fn with_txn_log(mut self, table: &str) -> Self {
        self.txn_log = Some(table.to_owned());
        self
    }

    /// The tables already hold ids `1..=rows` each (at version 1).
    pub fn with_existing_rows(mut self, rows: i64) -> Self {
        self.ids = vec![(1..=rows).collect(); self.tables.len()];
        self.next_id = rows + 1;
        self
    }

    /// A transaction of 3 to 6 row changes across the tables: inserts of new
    /// ids and `version = version + 1` updates (a row may be updated twice,
    /// or inserted and updated, in one transaction).
    pub fn plan(&mut self) -> PlannedTxn {
        let statements = 3 + self.rng.below(4);
        let mut sql = String::from("BEGIN;");
        let mut inserted: Vec<(usize, i64)> = Vec::new();
        for _ in 0..statements {
            let t = self.rng.below(self.tables.len());
            let table = &self.tables[t];
            let candidates: Vec<i64> = self.ids[t]
                .iter()
                .copied()
                .chain(inserted.iter().filter(|(i, _)| *i == t).map(|(_, id)| *id))
                .collect();
            if candidates.len() < 4 || self.rng.below(3) == 0 {
                let id = self.next_id;
                self.next_id += 1;
                sql += &format!("INSERT INTO {table} VALUES ({id}, 1, 'row {id}');");
                inserted.push((t, id));
            } else {
                let id = candidates[self.rng.below(candidates.len())];
                sql += &format!("UPDATE {table} SET version = version + 1 WHERE id = {id};");
            }
        }
        if let Some(log) = &self.txn_log {
            sql +=
                &format!("INSERT INTO {log} VALUES (txid_current() % 4294967296, {statements});");
        }
        sql += "COMMIT;";
        PlannedTxn {
            sql,
            inserted,
            changes: statements as u64,
        }
    }

    /// Records `txn` as committed; returns its row changes.
    pub fn committed(&mut self, txn: PlannedTxn) -> u64 {
        for (t, id) in txn.inserted {
            self.ids[t].push(id);
        }
        txn.changes
    }

    /// Runs `count` transactions through `s.sql`; returns the row changes.
    pub fn run_blocking(&mut self, s: &Scenario, count: usize) -> u64 {
        (0..count)
            .map(|_| {
                let txn = self.plan();
                s.sql(&txn.sql);
                self.committed(txn)
            })
            .sum()
    }
}

/// What [`write_continuously`] committed.
#[derive(Debug, Default)]
pub struct WriterStats {
    pub transactions: u64,
    pub changes: u64,
}

/// Commits workload transactions on one connection until `stop` is set.
pub async fn write_continuously(
    pg: &'static Postgres,
    db: String,
    mut workload: Workload,
    stop: Arc<AtomicBool>,
) -> WriterStats {
    let client = pg
        .connect(&db)
        .await
        .unwrap_or_else(|e| panic!("writer connects: {}", e.report()));
    let mut stats = WriterStats::default();
    while !stop.load(Ordering::Relaxed) {
        let txn = workload.plan();
        client
            .batch_execute(&txn.sql)
            .await
            .unwrap_or_else(|e| panic!("writer transaction failed: {e}: {}", txn.sql));
        stats.changes += workload.committed(txn);
        stats.transactions += 1;
        // Pacing, not waiting for anything: a steady stream the debug build
        // keeps up with, rather than as fast as Postgres commits.
        tokio::time::sleep(Duration::from_millis(4)).await;
    }
    stats
}
