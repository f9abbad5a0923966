//! The signal table (Debezium's `signal.data.collection`): how operators ask
//! a running connector for an incremental snapshot, and where the connector
//! writes the watermarks and progress of one.
//!
//! The table has Debezium's shape, `(id varchar(42) PRIMARY KEY, type
//! varchar(32) NOT NULL, data varchar(2048))`, and must be in the
//! publication: the connector reads signals from the replication stream, so
//! they take effect in commit order, exactly where they were inserted.
//!
//! - `execute-snapshot` with data `{"data-collections": ["public.t"], "type":
//!   "incremental"}` adds tables to the incremental snapshot;
//! - `stop-snapshot` with the same data removes them (all of them when
//!   `data-collections` is absent or empty);
//! - `"additional-conditions": [{"data-collection": "public.t", "filter":
//!   "region = 'eu'"}]` in `execute-snapshot` reads only the rows of a table
//!   that match its filter (Debezium's per-table conditions);
//! - `"type": "blocking"` asks for a blocking snapshot instead: the stream
//!   pauses while the tables are read again (`crate::pipeline`);
//! - `pause-snapshot` and `resume-snapshot` pause and resume a running
//!   incremental snapshot between chunks.
//!
//! The connector itself upserts one row per slot, id [`progress_row_id`],
//! whose `type` is `snapshot-window-open` or `snapshot-window-close` (the
//! watermarks around each chunk, Debezium's words) or `snapshot-progress`,
//! and whose `data` is the snapshot's progress as JSON ([`Progress`]). One
//! row, updated in place, keeps the table from growing with every chunk the
//! way Debezium's inserted watermark rows do, and makes it the durable record
//! from which a restarted connector resumes.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use tokio_postgres::Client;

use crate::source::setup::{quote_ident, SetupError};

/// The `type` of a signal that starts an incremental snapshot.
pub const EXECUTE_SNAPSHOT: &str = "execute-snapshot";
/// The `type` of a signal that stops (part of) an incremental snapshot.
pub const STOP_SNAPSHOT: &str = "stop-snapshot";
/// The `type` of a signal that pauses an incremental snapshot between chunks.
pub const PAUSE_SNAPSHOT: &str = "pause-snapshot";
/// The `type` of a signal that resumes a paused incremental snapshot.
pub const RESUME_SNAPSHOT: &str = "resume-snapshot";
/// The `type` of the progress row written before a chunk is read (low watermark).
pub const WINDOW_OPEN: &str = "snapshot-window-open";
/// The `type` of the progress row written after a chunk is read (high watermark).
pub const WINDOW_CLOSE: &str = "snapshot-window-close";
/// The `type` of the progress row written when a signal changes the table list.
pub const PROGRESS: &str = "snapshot-progress";

/// A signal table, `schema.table`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignalTable {
    pub schema: String,
    pub table: String,
}

impl SignalTable {
    /// Parses `schema.table`.
    pub fn parse(qualified: &str) -> Option<SignalTable> {
        let (schema, table) = qualified.split_once('.')?;
        (!schema.is_empty() && !table.is_empty()).then(|| SignalTable {
            schema: schema.to_owned(),
            table: table.to_owned(),
        })
    }

    /// The quoted name, for SQL.
    pub fn sql(&self) -> String {
        format!("{}.{}", quote_ident(&self.schema), quote_ident(&self.table))
    }

    /// Whether a relation of this schema and name is the signal table.
    pub fn is(&self, schema: &str, table: &str) -> bool {
        self.schema == schema && self.table == table
    }
}

impl std::fmt::Display for SignalTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.schema, self.table)
    }
}

/// A key in the text output format of its columns, `None` for NULL.
pub type KeyText = Vec<Option<String>>;

/// An incremental snapshot's progress, as the progress row's `data` holds it.
///
/// `last_key` is the largest key of the current table (`tables[0]`) whose
/// chunk Kafka has acknowledged; the next chunk starts after it. Any other
/// table of `tables` starts after its key in `resume_after`, if it has one:
/// the tables read in the same windows as the first
/// (`--incremental-snapshot-tables-in-flight`) keep theirs there, so a
/// connector reading one table at a time resumes them just as well.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Progress {
    /// Tables still to read, `schema.table`, the current one first.
    pub tables: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_key: Option<KeyText>,
    /// The chunk whose window this row opens or closes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunk: Option<String>,
    /// Tables of `tables` after the current one that start after a key
    /// rather than at their beginning: an interrupted initial snapshot
    /// resumed here had these rows in Kafka already, or the table is read
    /// alongside the current one and Kafka has its chunks up to that key
    /// (docs/SNAPSHOTS.md).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub resume_after: BTreeMap<String, KeyText>,
    /// Per table of `tables`, the `additional-conditions` filter its rows
    /// must match (an SQL boolean expression).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub conditions: BTreeMap<String, String>,
    /// A `pause-snapshot` signal holds the next chunk until `resume-snapshot`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
    /// The id of the `execute-snapshot` signal that started the snapshot:
    /// the id of its notifications, as Debezium's correlation id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal_id: Option<String>,
}

impl Progress {
    /// Records that the chunk of the current table ending at `end` was
    /// emitted: the next one starts after `end`, or, for the table's last
    /// chunk (`None`), the table is done. Returns the table that finished.
    pub fn chunk_done(&mut self, end: Option<KeyText>) -> Option<String> {
        let current = self.tables.first()?.clone();
        self.table_chunk_done(&current, end).then_some(current)
    }

    /// The key `table`'s next chunk starts after (`None`: at its beginning).
    pub fn after(&self, table: &str) -> Option<&KeyText> {
        match self.tables.first().is_some_and(|t| t == table) {
            true => self.last_key.as_ref(),
            false => self.resume_after.get(table),
        }
    }

    /// Records that the chunk of `table` ending at `end` was emitted: its
    /// next one starts after `end`, or, for its last chunk (`None`), the
    /// table is done and leaves the list, wherever it is in it. Returns
    /// whether it finished; a table no longer listed (stopped meanwhile) is
    /// left alone.
    pub fn table_chunk_done(&mut self, table: &str, end: Option<KeyText>) -> bool {
        let Some(position) = self.tables.iter().position(|t| t == table) else {
            return false;
        };
        match (end, position) {
            (Some(end), 0) => self.last_key = Some(end),
            (Some(end), _) => {
                self.resume_after.insert(table.to_owned(), end);
            }
            (None, 0) => {
                self.table_finished();
                return true;
            }
            (None, _) => {
                self.tables.remove(position);
                self.conditions.remove(table);
                self.resume_after.remove(table);
                return true;
            }
        }
        false
    }

    /// Leaves the current table: the next one starts at its beginning, or
    /// after its key in `resume_after`. Returns the table left.
    pub fn table_finished(&mut self) -> Option<String> {
        let finished = (!self.tables.is_empty()).then(|| self.tables.remove(0));
        if let Some(table) = &finished {
            self.conditions.remove(table);
        }
        if self.tables.is_empty() {
            // Finished: the same record as a snapshot never started.
            (self.paused, self.signal_id) = (false, None);
        }
        self.current_changed();
        finished
    }

    /// The current table is another one than before: it starts where
    /// `resume_after` says, else at its beginning.
    pub fn current_changed(&mut self) {
        self.last_key = self
            .tables
            .first()
            .and_then(|table| self.resume_after.remove(table));
    }

    /// Whether `other` resumes from the same place (the chunk id aside).
    pub fn same_position(&self, other: &Progress) -> bool {
        self.tables == other.tables
            && self.last_key == other.last_key
            && self.resume_after == other.resume_after
            && self.conditions == other.conditions
    }
}

/// `data` of the snapshot signals.
#[derive(Debug, Clone, Default, Deserialize)]
struct SignalData {
    #[serde(rename = "data-collections", default)]
    data_collections: Vec<String>,
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(rename = "additional-conditions", default)]
    additional_conditions: Vec<AdditionalCondition>,
    /// Debezium 2.0-2.2's single condition for every table named.
    #[serde(rename = "additional-condition", default)]
    additional_condition: Option<String>,
}

/// One of `execute-snapshot`'s `additional-conditions`.
#[derive(Debug, Clone, Deserialize)]
struct AdditionalCondition {
    #[serde(rename = "data-collection")]
    data_collection: String,
    filter: String,
}

/// How `execute-snapshot` reads its tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapshotKind {
    /// In chunks between watermarks, while the stream goes on.
    Incremental,
    /// The stream pauses while the tables are read whole.
    Blocking,
}

/// What a signal-table row asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Signal {
    /// `execute-snapshot` of these tables, signal `id`, with per-table
    /// filters (`additional-conditions`).
    ExecuteSnapshot {
        id: String,
        tables: Vec<String>,
        kind: SnapshotKind,
        conditions: BTreeMap<String, String>,
    },
    /// `stop-snapshot` of these tables (every table when empty).
    StopSnapshot { tables: Vec<String> },
    /// `pause-snapshot`.
    PauseSnapshot,
    /// `resume-snapshot`.
    ResumeSnapshot,
    /// The connector's own progress row.
    Window { kind: String, progress: Progress },
    /// A signal this connector does not act on, and why.
    Ignored { kind: String, reason: String },
    /// Another connector's watermark or progress row (a second slot, or a
    /// Debezium connector sharing the table): not for us, and not a mistake.
    Foreign,
}

/// Interprets a signal-table row. `progress_id` is this connector's own row.
pub fn parse(id: &str, kind: &str, data: Option<&str>, progress_id: &str) -> Signal {
    if id == progress_id {
        return match data.map(serde_json::from_str::<Progress>) {
            Some(Ok(progress)) => Signal::Window {
                kind: kind.to_owned(),
                progress,
            },
            _ => Signal::Ignored {
                kind: kind.to_owned(),
                reason: "the progress row's data is not valid progress JSON".into(),
            },
        };
    }
    if [WINDOW_OPEN, WINDOW_CLOSE, PROGRESS].contains(&kind) {
        return Signal::Foreign;
    }
    let ignored = |reason: &str| Signal::Ignored {
        kind: kind.to_owned(),
        reason: reason.to_owned(),
    };
    if ![
        EXECUTE_SNAPSHOT,
        STOP_SNAPSHOT,
        PAUSE_SNAPSHOT,
        RESUME_SNAPSHOT,
    ]
    .contains(&kind)
    {
        return ignored("only execute-snapshot, stop-snapshot, pause-snapshot and resume-snapshot signals are supported");
    }
    let parsed = match data.filter(|d| !d.trim().is_empty()).map(serde_json::from_str::<SignalData>) {
        None => SignalData::default(),
        Some(Ok(parsed)) => parsed,
        Some(Err(_)) => return ignored("data is not a JSON object with \"data-collections\" (and \"additional-conditions\" as [{\"data-collection\": ..., \"filter\": ...}])"),
    };
    let snapshot_kind = match parsed
        .kind
        .as_deref()
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        None | Some("incremental") => SnapshotKind::Incremental,
        Some("blocking") if kind == EXECUTE_SNAPSHOT => SnapshotKind::Blocking,
        Some(_) => {
            return ignored(
                "\"type\" must be \"incremental\" (or \"blocking\" for execute-snapshot)",
            )
        }
    };
    let tables = parsed.data_collections;
    match kind {
        EXECUTE_SNAPSHOT => {
            if tables.is_empty() {
                return ignored("execute-snapshot names no table in \"data-collections\"");
            }
            let mut conditions: BTreeMap<String, String> = parsed
                .additional_conditions
                .into_iter()
                .filter(|c| !c.filter.trim().is_empty())
                .map(|c| (c.data_collection, c.filter))
                .collect();
            if let Some(filter) = parsed.additional_condition.filter(|f| !f.trim().is_empty()) {
                for table in &tables {
                    conditions
                        .entry(table.clone())
                        .or_insert_with(|| filter.clone());
                }
            }
            if let Some(stray) = conditions.keys().find(|t| !tables.contains(t)) {
                return ignored(&format!(
                    "additional-conditions names {stray:?}, which is not in \"data-collections\""
                ));
            }
            Signal::ExecuteSnapshot {
                id: id.to_owned(),
                tables,
                kind: snapshot_kind,
                conditions,
            }
        }
        STOP_SNAPSHOT => Signal::StopSnapshot { tables },
        PAUSE_SNAPSHOT => Signal::PauseSnapshot,
        _ => Signal::ResumeSnapshot,
    }
}

/// The id of the progress row of the connector using `slot`: at most 42
/// characters, as the signal table's `id varchar(42)` allows.
pub fn progress_row_id(slot: &str) -> String {
    let id = format!("pgcdc-{slot}");
    if id.len() <= 42 {
        return id;
    }
    // FNV-1a: stable across builds, unlike std's hasher.
    let hash = slot.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("pgcdc-{}-{hash:016x}", &slot[..19])
}

fn query_error(action: String) -> impl FnOnce(tokio_postgres::Error) -> SetupError {
    move |error| SetupError::Query { action, error }
}

/// Inserts or replaces the row `id` of the signal table.
pub async fn upsert(
    client: &Client,
    table: &SignalTable,
    id: &str,
    kind: &str,
    data: &str,
) -> Result<(), SetupError> {
    client
        .execute(
            &format!(
                "INSERT INTO {} (id, type, data) VALUES ($1, $2, $3) \
                 ON CONFLICT (id) DO UPDATE SET type = EXCLUDED.type, data = EXCLUDED.data",
                table.sql()
            ),
            &[&id, &kind, &data],
        )
        .await
        .map(|_| ())
        .map_err(query_error(format!(
            "writing row {id:?} of signal table {table}"
        )))
}

/// Deletes the row `id` of the signal table.
pub async fn delete(client: &Client, table: &SignalTable, id: &str) -> Result<(), SetupError> {
    client
        .execute(
            &format!("DELETE FROM {} WHERE id = $1", table.sql()),
            &[&id],
        )
        .await
        .map(|_| ())
        .map_err(query_error(format!(
            "deleting row {id:?} of signal table {table}"
        )))
}

/// The progress recorded in the row `id`, if there is one.
pub async fn read_progress(
    client: &Client,
    table: &SignalTable,
    id: &str,
) -> Result<Option<Progress>, SetupError> {
    let row = client
        .query_opt(
            &format!("SELECT data::text FROM {} WHERE id = $1", table.sql()),
            &[&id],
        )
        .await
        .map_err(query_error(format!(
            "reading row {id:?} of signal table {table}"
        )))?;
    Ok(row
        .and_then(|r| r.get::<_, Option<String>>(0))
        .and_then(|data| serde_json::from_str(&data).ok()))
}

/// Whether `table` is in `publication`.
pub async fn is_published(
    client: &Client,
    publication: &str,
    schema: &str,
    table: &str,
) -> Result<bool, SetupError> {
    client
        .query_opt(
            "SELECT 1 FROM pg_publication_tables \
             WHERE pubname = $1 AND schemaname = $2 AND tablename = $3",
            &[&publication, &schema, &table],
        )
        .await
        .map(|row| row.is_some())
        .map_err(query_error(format!(
            "looking up {schema}.{table} in publication {publication:?}"
        )))
}

/// What is wrong with a signal table for incremental snapshots, each with
/// the fix; empty when it is usable.
pub async fn problems(
    client: &Client,
    table: &SignalTable,
    publication: &str,
) -> Result<Vec<(String, String)>, SetupError> {
    let name = table.to_string();
    let row = client
        .query_opt(
            "SELECT c.oid, \
                    has_table_privilege(c.oid, 'SELECT') AND has_table_privilege(c.oid, 'INSERT') \
                    AND has_table_privilege(c.oid, 'UPDATE') AND has_table_privilege(c.oid, 'DELETE'), \
                    EXISTS (SELECT 1 FROM pg_index i JOIN pg_attribute a \
                              ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0] \
                            WHERE i.indrelid = c.oid AND i.indisunique AND i.indnkeyatts = 1 \
                              AND a.attname = 'id'), \
                    (SELECT count(*) FROM pg_attribute a WHERE a.attrelid = c.oid \
                       AND a.attname IN ('id', 'type', 'data') AND NOT a.attisdropped) \
             FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = $1 AND c.relname = $2",
            &[&table.schema, &table.table],
        )
        .await
        .map_err(query_error(format!("inspecting signal table {name}")))?;
    let Some(row) = row else {
        return Ok(vec![(
            format!("signal table {name} does not exist"),
            format!(
                "CREATE TABLE {} (id varchar(42) PRIMARY KEY, type varchar(32) NOT NULL, data varchar(2048))",
                table.sql()
            ),
        )]);
    };
    let mut problems = Vec::new();
    if row.get::<_, i64>(3) < 3 {
        problems.push((
            format!("signal table {name} lacks an id, type or data column"),
            "give it Debezium's columns (id varchar(42) PRIMARY KEY, type varchar(32) NOT NULL, data varchar(2048))".to_owned(),
        ));
    }
    if !row.get::<_, bool>(2) {
        problems.push((
            format!("signal table {name} has no primary key or unique index on id alone"),
            format!("ALTER TABLE {} ADD PRIMARY KEY (id)", table.sql()),
        ));
    }
    if !row.get::<_, bool>(1) {
        problems.push((
            format!("this role may not SELECT, INSERT, UPDATE and DELETE in signal table {name}, where watermarks and progress are written"),
            format!("GRANT SELECT, INSERT, UPDATE, DELETE ON {} TO <the connector's role>", table.sql()),
        ));
    }
    let publication_exists = super::catalog::publication(client, publication)
        .await
        .map_err(query_error(format!(
            "looking up publication {publication:?}"
        )))?
        .is_some();
    // A missing publication is created at the first start (and checked as such).
    if publication_exists && !is_published(client, publication, &table.schema, &table.table).await?
    {
        problems.push((
            format!("signal table {name} is not in publication {publication:?}, so signals are never read"),
            format!("ALTER PUBLICATION {} ADD TABLE {}", quote_ident(publication), table.sql()),
        ));
    }
    Ok(problems)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_debezium_signals() {
        let data = r#"{"data-collections": ["public.t1", "public.t2"], "type": "incremental"}"#;
        assert_eq!(
            parse("x", EXECUTE_SNAPSHOT, Some(data), "pgcdc-s"),
            Signal::ExecuteSnapshot {
                id: "x".into(),
                tables: vec!["public.t1".into(), "public.t2".into()],
                kind: SnapshotKind::Incremental,
                conditions: BTreeMap::new(),
            }
        );
        assert_eq!(
            parse("x", STOP_SNAPSHOT, None, "pgcdc-s"),
            Signal::StopSnapshot { tables: vec![] }
        );
        assert!(matches!(
            parse(
                "x",
                EXECUTE_SNAPSHOT,
                Some(r#"{"data-collections": ["a.b"], "type": "blocking"}"#),
                "p"
            ),
            Signal::ExecuteSnapshot {
                kind: SnapshotKind::Blocking,
                ..
            }
        ));
        assert!(matches!(
            parse("x", STOP_SNAPSHOT, Some(r#"{"type": "blocking"}"#), "p"),
            Signal::Ignored { .. }
        ));
        assert_eq!(
            parse("x", PAUSE_SNAPSHOT, Some(r#"{"type": "incremental"}"#), "p"),
            Signal::PauseSnapshot
        );
        assert_eq!(
            parse("x", RESUME_SNAPSHOT, None, "p"),
            Signal::ResumeSnapshot
        );
        assert!(matches!(
            parse("x", "log", Some("{}"), "p"),
            Signal::Ignored { .. }
        ));
        assert_eq!(
            parse("pgcdc-other", WINDOW_OPEN, Some("{}"), "pgcdc-s"),
            Signal::Foreign,
            "another slot's progress row is silently skipped"
        );
        assert!(matches!(
            parse("x", EXECUTE_SNAPSHOT, Some("not json"), "p"),
            Signal::Ignored { .. }
        ));
    }

    #[test]
    fn additional_conditions_filter_the_tables_they_name() {
        let data = r#"{"data-collections": ["public.a", "public.b"],
            "additional-conditions": [{"data-collection": "public.a", "filter": "id > 10"}]}"#;
        let Signal::ExecuteSnapshot { conditions, .. } =
            parse("x", EXECUTE_SNAPSHOT, Some(data), "p")
        else {
            panic!("an execute-snapshot signal");
        };
        assert_eq!(
            conditions,
            BTreeMap::from([("public.a".into(), "id > 10".into())])
        );
        let old = r#"{"data-collections": ["public.a"], "additional-condition": "x = 1"}"#;
        assert!(matches!(
            parse("x", EXECUTE_SNAPSHOT, Some(old), "p"),
            Signal::ExecuteSnapshot { conditions, .. } if conditions["public.a"] == "x = 1"
        ));
        let stray = r#"{"data-collections": ["public.a"],
            "additional-conditions": [{"data-collection": "public.c", "filter": "true"}]}"#;
        assert!(matches!(
            parse("x", EXECUTE_SNAPSHOT, Some(stray), "p"),
            Signal::Ignored { reason, .. } if reason.contains("public.c")
        ));
        let mut progress = Progress {
            tables: vec!["public.a".into()],
            conditions,
            ..Progress::default()
        };
        progress.table_finished();
        assert!(
            progress.conditions.is_empty(),
            "a finished table's filter goes with it"
        );
    }

    #[test]
    fn chunks_advance_the_key_and_the_last_one_finishes_the_table() {
        let mut progress = Progress {
            tables: vec!["public.a".into(), "public.b".into()],
            last_key: Some(vec![Some("10".into())]),
            chunk: Some("c".into()),
            ..Progress::default()
        };
        assert_eq!(progress.chunk_done(Some(vec![Some("20".into())])), None);
        assert_eq!(progress.last_key, Some(vec![Some("20".into())]));
        assert!(!progress.same_position(&Progress::default()));
        assert_eq!(progress.chunk_done(None), Some("public.a".into()));
        assert_eq!(progress.tables, ["public.b"]);
        assert_eq!(progress.last_key, None);
        assert_eq!(progress.chunk_done(None), Some("public.b".into()));
        assert!(
            progress.same_position(&Progress::default()),
            "no table left: finished, whatever the chunk id"
        );
        assert_eq!(progress.chunk_done(None), None, "nothing left to finish");
    }

    #[test]
    fn tables_in_flight_keep_their_own_keys_and_finish_in_any_order() {
        let key = |k: &str| vec![Some(k.to_owned())];
        let names = |p: &Progress| p.tables.clone();
        let mut progress = Progress {
            tables: ["public.a", "public.b", "public.c", "public.d"]
                .map(String::from)
                .to_vec(),
            conditions: BTreeMap::from([("public.b".into(), "v > 1".into())]),
            ..Progress::default()
        };
        assert!(!progress.table_chunk_done("public.a", Some(key("10"))));
        assert!(!progress.table_chunk_done("public.b", Some(key("20"))));
        assert_eq!(progress.after("public.a"), Some(&key("10")));
        assert_eq!(progress.after("public.b"), Some(&key("20")));
        assert_eq!(progress.after("public.c"), None, "from its beginning");
        assert_eq!(progress.last_key, Some(key("10")), "the current table's");

        assert!(
            progress.table_chunk_done("public.b", None),
            "b finished first"
        );
        assert_eq!(names(&progress), ["public.a", "public.c", "public.d"]);
        assert!(progress.conditions.is_empty() && progress.resume_after.is_empty());
        assert_eq!(progress.after("public.a"), Some(&key("10")));

        assert!(!progress.table_chunk_done("public.c", Some(key("5"))));
        // Read by a connector that reads one table at a time: the same keys.
        let row = serde_json::to_string(&progress).expect("serializes");
        let reread: Progress = serde_json::from_str(&row).expect("parses");
        assert_eq!(reread, progress);

        assert!(progress.table_chunk_done("public.a", None));
        assert_eq!(names(&progress), ["public.c", "public.d"]);
        assert_eq!(progress.last_key, Some(key("5")), "c goes on after its key");
        assert!(progress.resume_after.is_empty());

        assert!(
            !progress.table_chunk_done("public.a", Some(key("99"))),
            "a table no longer listed (stopped) is not recorded"
        );
        assert_eq!(progress.after("public.a"), None);
        assert!(!progress.resume_after.contains_key("public.a"));
        assert_eq!(progress.chunk_done(None), Some("public.c".into()));
        assert_eq!(progress.chunk_done(None), Some("public.d".into()));
        assert_eq!(progress.chunk_done(None), None);
    }

    #[test]
    fn a_table_resumed_after_a_key_starts_there_when_its_turn_comes() {
        let mut progress = Progress {
            tables: vec!["public.a".into(), "public.b".into(), "public.c".into()],
            resume_after: BTreeMap::from([("public.b".into(), vec![Some("300".into())])]),
            ..Progress::default()
        };
        assert_eq!(progress.chunk_done(None), Some("public.a".into()));
        assert_eq!(progress.last_key, Some(vec![Some("300".into())]));
        assert!(progress.resume_after.is_empty());
        assert_eq!(progress.chunk_done(None), Some("public.b".into()));
        assert_eq!(progress.last_key, None, "public.c starts at its beginning");
    }

    #[test]
    fn progress_rows_round_trip_and_fit_the_id_column() {
        let progress = Progress {
            tables: vec!["public.t".into()],
            last_key: Some(vec![Some("42".into()), None]),
            chunk: Some("c-1".into()),
            resume_after: BTreeMap::from([("public.u".into(), vec![Some("7".into())])]),
            conditions: BTreeMap::from([("public.t".into(), "v > 1".into())]),
            paused: true,
            signal_id: Some("ad-hoc".into()),
        };
        let data = serde_json::to_string(&progress).expect("serializes");
        assert_eq!(
            parse("pgcdc-s", WINDOW_OPEN, Some(&data), "pgcdc-s"),
            Signal::Window {
                kind: WINDOW_OPEN.into(),
                progress
            }
        );
        assert_eq!(progress_row_id("s"), "pgcdc-s");
        let long = "a".repeat(54);
        let id = progress_row_id(&long);
        assert!(id.len() <= 42, "{id}");
        assert_ne!(id, progress_row_id(&"b".repeat(54)));
    }
}
