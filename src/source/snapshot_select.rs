//! Which tables a snapshot reads, and with which `SELECT`: Debezium's
//! `snapshot.include.collection.list` and `snapshot.select.statement.overrides`.
//!
//! - `--snapshot-include-collection-list` (regexes matching the whole
//!   `schema.table`, case-insensitive, as the table filters): the initial
//!   snapshot reads only the captured tables that match. The others are
//!   still streamed. Blocking snapshots read the tables their signal names.
//! - `--snapshot-select-statement-override schema.table=SELECT ...`: the
//!   initial and blocking snapshots read that table's rows with this
//!   statement instead of the whole table. Its columns are taken by name:
//!   the statement must return every captured column of the table (more
//!   are ignored), typically `SELECT * FROM t WHERE ...`. Such a table is
//!   read in one piece (a statement has no key order to resume from), like
//!   a table without a primary key.
//!
//! Incremental snapshots use neither: their per-table filter is the
//! signal's `additional-conditions`, as in Debezium.

use std::collections::BTreeMap;

use clap::Args;
use regex::Regex;

use crate::options::Invalid;
use crate::source::pgoutput::Relation;
use crate::source::sql::quote_ident;

/// `--snapshot-include-collection-list`, `--snapshot-select-statement-override`.
#[derive(Debug, Clone, Default, Args)]
pub struct SnapshotSelectOptions {
    /// Comma-separated regexes matching `schema.table`: the initial
    /// snapshot reads only the captured tables that match; the others are
    /// only streamed (snapshot.include.collection.list).
    #[arg(
        help_heading = "Snapshot",
        long,
        env = "PGCDC_SNAPSHOT_INCLUDE_COLLECTION_LIST"
    )]
    pub snapshot_include_collection_list: Option<String>,

    /// schema.table=SELECT ... (repeatable): the initial and blocking
    /// snapshots read the table's rows with this statement, whose columns
    /// are taken by name (snapshot.select.statement.overrides.<schema>.<table>).
    #[arg(
        help_heading = "Snapshot",
        long = "snapshot-select-statement-override",
        env = "PGCDC_SNAPSHOT_SELECT_STATEMENT_OVERRIDES",
        value_delimiter = '\n'
    )]
    pub snapshot_select_statement_overrides: Vec<String>,
}

/// The parsed options.
#[derive(Debug, Clone, Default)]
pub struct SnapshotSelect {
    include: Option<Vec<Regex>>,
    /// `schema.table` -> statement.
    overrides: BTreeMap<String, String>,
}

impl SnapshotSelectOptions {
    /// Parses the options, or says what is wrong with each.
    pub fn parse(&self) -> Result<SnapshotSelect, Vec<Invalid>> {
        let mut problems = Vec::new();
        let include = self
            .snapshot_include_collection_list
            .as_deref()
            .filter(|l| !l.trim().is_empty())
            .map(|list| {
                crate::select::compile_list("snapshot-include-collection-list", list, &mut problems)
            });
        let mut overrides = BTreeMap::new();
        for entry in self
            .snapshot_select_statement_overrides
            .iter()
            .filter(|e| !e.trim().is_empty())
        {
            let parsed = entry
                .split_once('=')
                .map(|(table, select)| (table.trim(), select.trim()))
                .filter(|(table, select)| {
                    table
                        .split_once('.')
                        .is_some_and(|(s, t)| !s.is_empty() && !t.is_empty())
                        && !select.is_empty()
                });
            match parsed {
                Some((table, select)) => {
                    overrides.insert(table.to_owned(), select.to_owned());
                }
                None => problems.push(Invalid {
                    field: "snapshot-select-statement-override",
                    value: entry.clone(),
                    constraint: "must be schema.table=SELECT ... (one per flag), e.g. \
                                 public.orders=SELECT * FROM public.orders WHERE archived = false"
                        .to_owned(),
                }),
            }
        }
        if problems.is_empty() {
            Ok(SnapshotSelect { include, overrides })
        } else {
            Err(problems)
        }
    }
}

impl SnapshotSelect {
    /// Whether the initial snapshot reads `schema.table`.
    pub fn includes(&self, schema: &str, table: &str) -> bool {
        let name = format!("{schema}.{table}");
        self.include
            .as_ref()
            .is_none_or(|patterns| patterns.iter().any(|p| p.is_match(&name)))
    }

    /// The override of `schema.table`, if any.
    pub fn statement(&self, schema: &str, table: &str) -> Option<&str> {
        self.overrides
            .get(&format!("{schema}.{table}"))
            .map(String::as_str)
    }

    /// The COPY reading `relation`'s columns, by name, from `select`'s rows.
    pub fn copy_of(relation: &Relation, select: &str) -> String {
        let columns: Vec<String> = relation
            .columns
            .iter()
            .map(|c| format!("o.{}", quote_ident(&c.name)))
            .collect();
        format!(
            "COPY (SELECT {} FROM ({select}\n) AS o) TO STDOUT",
            columns.join(", ")
        )
    }

    /// The COPY reading every row of `relation` that matches `filter`, or
    /// its override when it has one (a blocking snapshot).
    pub fn copy_filtered(&self, relation: &Relation, filter: Option<&str>) -> String {
        if let Some(select) = self.statement(&relation.namespace, &relation.name) {
            return Self::copy_of(relation, select);
        }
        let table = format!(
            "{}.{}",
            quote_ident(&relation.namespace),
            quote_ident(&relation.name)
        );
        let select = match filter {
            Some(filter) => format!("SELECT * FROM {table} WHERE ({filter}\n)"),
            None => format!("SELECT * FROM {table}"),
        };
        Self::copy_of(relation, &select)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::pgoutput::{Column, ReplicaIdentity};

    fn relation() -> Relation {
        Relation {
            id: 1,
            namespace: "public".into(),
            name: "orders".into(),
            replica_identity: ReplicaIdentity::Default,
            columns: ["id", "note"]
                .iter()
                .map(|n| Column {
                    is_key: *n == "id",
                    name: (*n).into(),
                    type_oid: 25,
                    type_modifier: -1,
                })
                .collect(),
        }
    }

    #[test]
    fn overrides_and_the_include_list_parse_and_apply() {
        let options = SnapshotSelectOptions {
            snapshot_include_collection_list: Some("public\\.ord.*,inventory\\.items".into()),
            snapshot_select_statement_overrides: vec![
                "public.orders=SELECT * FROM public.orders WHERE id > 2, 3".into(),
            ],
        };
        let select = options.parse().expect("valid");
        assert!(select.includes("public", "orders"));
        assert!(
            select.includes("INVENTORY", "items"),
            "case-insensitive, as Debezium"
        );
        assert!(!select.includes("public", "lines"));
        assert_eq!(
            select.statement("public", "orders"),
            Some("SELECT * FROM public.orders WHERE id > 2, 3"),
            "commas belong to the statement"
        );
        assert_eq!(
            SnapshotSelect::copy_of(&relation(), "SELECT * FROM x -- note"),
            "COPY (SELECT o.\"id\", o.\"note\" FROM (SELECT * FROM x -- note\n) AS o) TO STDOUT",
            "columns by name; a trailing comment cannot swallow the rest"
        );
        assert!(SnapshotSelect::default().includes("any", "table"));
        assert!(select
            .copy_filtered(&relation(), Some("ignored"))
            .contains("WHERE id > 2, 3"));
        assert!(SnapshotSelect::default()
            .copy_filtered(&relation(), Some("note = 'x'"))
            .contains("FROM \"public\".\"orders\" WHERE (note = 'x'\n)"));
    }

    #[test]
    fn bad_entries_name_the_flag_and_the_form() {
        let problems = SnapshotSelectOptions {
            snapshot_include_collection_list: Some("public.(".into()),
            snapshot_select_statement_overrides: vec!["orders=SELECT 1".into(), "public.t=".into()],
        }
        .parse()
        .expect_err("invalid");
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert_eq!(problems[0].field, "snapshot-include-collection-list");
        assert!(problems[1].constraint.contains("schema.table=SELECT"));
    }
}
