//! What an existing publication carries, against what a run that does not
//! alter it snapshots and captures.
//!
//! A run streams an existing publication as an admin defined it wherever it
//! does not manage it ([`Kept`]): `--read-only` never alters it
//! ([`super::unmanaged`]), `--publication-autocreate-mode disabled` neither,
//! `all_tables` only creates a missing one, and `filtered` sets its tables
//! (published whole: row filters and column lists go) and options but never
//! its `publish` list. A publication the run creates carries everything.
//! Snapshots, initial and incremental, read the tables with plain SELECTs
//! and know nothing of the publication's row filters, column lists or
//! `publish` list; Debezium's `publication.autocreate.mode=disabled` uses an
//! existing publication as it is and checks none of this, so its topics
//! silently mix the two. Here each difference is named, with the
//! `ALTER PUBLICATION` an admin runs or the flag that makes the run agree:
//!
//! - **refused**, where the topic would hold wrong data once a snapshot
//!   reads the table (a run that never snapshots, `--snapshot-mode never`
//!   without a signal table or `--read-only`, streams what the publication
//!   carries, as its admin chose, and is only warned):
//!   - a row filter (`WHERE`, PostgreSQL 15+) on a selected table: a
//!     snapshot reads every row, the stream only the matching ones, so a
//!     row outside the filter stays in the topic as the snapshot read it,
//!     and its later updates and its delete never come;
//!   - `publish` without an operation the run captures (not in
//!     `--skipped-operations`): those changes never reach Kafka, and a row
//!     a snapshot read keeps its old value (or outlives its delete);
//! - **warned**, where only the shape differs and every value sent is right:
//!   - a column list on a selected table leaving out columns the selection
//!     keeps: snapshot rows carry them, streamed changes do not (their
//!     schema differs, the values of the published columns agree);
//!   - `publish_via_partition_root` other than `--publish-via-partition-root`
//!     with a partitioned table selected: the stream and the snapshot both
//!     follow the publication (the snapshot lists its tables from
//!     `pg_publication_tables`), so they agree with each other, but the
//!     changes go to the root's topic instead of the partitions' (or the
//!     reverse) from what the flag asked for.
//!
//! A publication `FOR ALL TABLES` (or `FOR TABLES IN SCHEMA`) cannot carry a
//! row filter nor a column list (PostgreSQL's grammar has no place for
//! them), but its `publish` list and partition root count as any other's.

use tokio_postgres::Client;

use super::{qualified, query_error, quote_ident, SetupError};
use crate::config::{PublicationAutocreateMode, SkippedOperations};
use crate::select::Selection;
use crate::source::options::PublicationOptions;

/// Why the run leaves an existing publication (partly) as it is: what its
/// `--publication-autocreate-mode` (or `--read-only`) does with one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kept {
    /// `--read-only`: never altered, whatever the mode.
    ReadOnly,
    /// `disabled`: never created nor altered.
    Disabled,
    /// `all_tables`: created when missing, an existing one used as it is.
    AllTables,
    /// `filtered`: its tables set to the selected ones, published whole,
    /// and its options to the flags'; its `publish` list kept.
    Filtered,
}

impl Kept {
    /// What a run in `mode` leaves of an existing publication, or under
    /// `read_only` (whatever the mode) all of it.
    pub fn of(read_only: bool, mode: PublicationAutocreateMode) -> Kept {
        match (read_only, mode) {
            (true, _) => Kept::ReadOnly,
            (false, PublicationAutocreateMode::Disabled) => Kept::Disabled,
            (false, PublicationAutocreateMode::AllTables) => Kept::AllTables,
            (false, PublicationAutocreateMode::Filtered) => Kept::Filtered,
        }
    }

    /// What leaves the publication as it is, as the refusal says it.
    pub fn why(&self) -> &'static str {
        match self {
            Kept::ReadOnly => {
                "--read-only never alters it (ALTER PUBLICATION is a write to the source)"
            }
            Kept::Disabled => "--publication-autocreate-mode disabled never alters it",
            Kept::AllTables => {
                "--publication-autocreate-mode all_tables never alters an existing publication \
                 (it only creates a missing one; filtered sets its tables, published whole)"
            }
            Kept::Filtered => {
                "--publication-autocreate-mode filtered sets its tables and options but never \
                 its publish list"
            }
        }
    }

    /// Whether `mismatch` outlives what the run does to the publication.
    pub fn keeps(&self, mismatch: &Mismatch) -> bool {
        match self {
            Kept::Filtered => matches!(mismatch, Mismatch::Operations { .. }),
            Kept::ReadOnly | Kept::Disabled | Kept::AllTables => true,
        }
    }
}

/// A set of the four operations a publication may publish.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Operations {
    pub insert: bool,
    pub update: bool,
    pub delete: bool,
    pub truncate: bool,
}

impl Operations {
    /// The operations a run emits: those not in `--skipped-operations`.
    pub fn captured(skipped: &SkippedOperations) -> Self {
        Operations {
            insert: !skipped.inserts,
            update: !skipped.updates,
            delete: !skipped.deletes,
            truncate: !skipped.truncates,
        }
    }

    /// The operations with their `publish` names and `--skipped-operations`
    /// letters.
    fn named(&self) -> [(bool, &'static str, char); 4] {
        [
            (self.insert, "insert", 'c'),
            (self.update, "update", 'u'),
            (self.delete, "delete", 'd'),
            (self.truncate, "truncate", 't'),
        ]
    }

    /// The `publish` list of these operations, as PostgreSQL spells it.
    fn publish_list(&self) -> String {
        let names: Vec<&str> = self
            .named()
            .into_iter()
            .filter(|(on, _, _)| *on)
            .map(|(_, name, _)| name)
            .collect();
        names.join(", ")
    }

    fn union(&self, other: &Operations) -> Operations {
        Operations {
            insert: self.insert || other.insert,
            update: self.update || other.update,
            delete: self.delete || other.delete,
            truncate: self.truncate || other.truncate,
        }
    }

    /// The operations in `wanted` that `self` lacks.
    fn lacking(&self, wanted: &Operations) -> Operations {
        Operations {
            insert: wanted.insert && !self.insert,
            update: wanted.update && !self.update,
            delete: wanted.delete && !self.delete,
            truncate: wanted.truncate && !self.truncate,
        }
    }

    fn is_empty(&self) -> bool {
        !(self.insert || self.update || self.delete || self.truncate)
    }
}

/// A table as the publication carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishedTable {
    pub schema: String,
    pub table: String,
    /// The row filter's expression, if any (PostgreSQL 15+).
    pub row_filter: Option<String>,
    /// The table's columns its column list leaves out (PostgreSQL 15+;
    /// generated columns are not counted).
    pub unpublished_columns: Vec<String>,
    /// A partitioned table or a partition: how the publication's
    /// `publish_via_partition_root` carries it decides its topic.
    pub partitioned: bool,
}

/// A publication's definition, as far as it decides what is streamed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shape {
    pub publish: Operations,
    pub via_root: bool,
    pub tables: Vec<PublishedTable>,
}

/// What the run expects of the publication.
#[derive(Debug, Clone)]
pub struct Expected<'a> {
    /// The operations it emits.
    pub captured: Operations,
    /// `--publish-via-partition-root`.
    pub via_root: bool,
    pub selection: &'a Selection,
}

/// One difference between the publication and the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mismatch {
    RowFilter {
        table: String,
        filter: String,
    },
    Operations {
        published: Operations,
        missing: Operations,
        captured: Operations,
    },
    ColumnList {
        table: String,
        columns: Vec<String>,
    },
    PartitionRoot {
        published: bool,
    },
}

impl Mismatch {
    /// Whether the topic would hold wrong data, not only differently
    /// shaped records, once a snapshot reads the table.
    pub fn spoils_snapshots(&self) -> bool {
        matches!(
            self,
            Mismatch::RowFilter { .. } | Mismatch::Operations { .. }
        )
    }

    /// Whether the run must not start: it may snapshot (`snapshots`, see
    /// `RunConfig::may_snapshot`) and a snapshot would make the topic wrong.
    /// A run that only streams carries what the publication publishes, as
    /// its admin chose (a row filter to stream one tenant, inserts only).
    pub fn refuses(&self, snapshots: bool) -> bool {
        snapshots && self.spoils_snapshots()
    }

    /// [`Self::detail`], saying so where only taking no snapshot keeps the
    /// difference from refusing the run.
    pub fn detail_for(&self, publication: &str, snapshots: bool) -> String {
        let detail = self.detail(publication);
        match self.spoils_snapshots() && !snapshots {
            true => format!(
                "{detail}. This run takes no snapshot (--snapshot-mode never, no signal table, \
                 not --read-only), so it streams what the publication carries; a snapshot \
                 taken later would not agree with it"
            ),
            false => detail,
        }
    }

    /// What differs and what it does to the topic.
    pub fn detail(&self, publication: &str) -> String {
        match self {
            Mismatch::RowFilter { table, filter } => format!(
                "publication {publication:?} has the row filter WHERE {filter} on {table}: the \
                 stream carries only the rows matching it, but a snapshot reads every row, and \
                 a row outside it would stay in the topic with none of its later changes, nor \
                 its delete"
            ),
            Mismatch::Operations {
                published, missing, ..
            } => format!(
                "publication {publication:?} publishes only {} (publish = '{}'), not {}, which \
                 the run captures: those changes would never reach Kafka, and a row a snapshot \
                 read would keep its old value or outlive its delete",
                describe(published),
                published.publish_list(),
                missing.publish_list(),
            ),
            Mismatch::ColumnList { table, columns } => format!(
                "publication {publication:?} publishes {table} with a column list leaving out \
                 {}: snapshot rows carry those columns, streamed changes do not (the values of \
                 the published columns agree)",
                columns.join(", ")
            ),
            Mismatch::PartitionRoot { published } => format!(
                "publication {publication:?} has publish_via_partition_root = {published}, and \
                 the run expects {} (--publish-via-partition-root): the stream and the \
                 snapshot follow the publication, so partitioned tables go to the {} topics \
                 rather than the {} ones",
                !published,
                if *published { "root's" } else { "partitions'" },
                if *published { "partitions'" } else { "root's" },
            ),
        }
    }

    /// What makes the publication and the run agree: what an admin runs,
    /// or the flag to change.
    pub fn fix(&self, publication: &str) -> String {
        let pub_sql = quote_ident(publication);
        let re_add = |table: &str| {
            format!(
                "have an admin run BEGIN; ALTER PUBLICATION {pub_sql} DROP TABLE {table}; \
                 ALTER PUBLICATION {pub_sql} ADD TABLE {table}; COMMIT;"
            )
        };
        match self {
            Mismatch::RowFilter { table, .. } => format!(
                "{} (the table published whole), or leave it out of the selection \
                 (--table-exclude-list)",
                re_add(table)
            ),
            Mismatch::Operations {
                published,
                missing,
                captured,
            } => {
                let letters: Vec<String> = missing
                    .named()
                    .into_iter()
                    .filter(|(on, _, _)| *on)
                    .map(|(_, _, letter)| letter.to_string())
                    .collect();
                let skipped = Operations {
                    insert: !captured.insert,
                    update: !captured.update,
                    delete: !captured.delete,
                    truncate: !captured.truncate,
                }
                .union(missing);
                let skipped: Vec<String> = skipped
                    .named()
                    .into_iter()
                    .filter(|(on, _, _)| *on)
                    .map(|(_, _, letter)| letter.to_string())
                    .collect();
                format!(
                    "have an admin run ALTER PUBLICATION {pub_sql} SET (publish = '{}'); or, \
                     to leave {} out on purpose, run with --skipped-operations {}",
                    published.union(captured).publish_list(),
                    letters.join(","),
                    skipped.join(","),
                )
            }
            Mismatch::ColumnList { table, columns } => format!(
                "{} (every column published), or leave the columns out of the run too \
                 (--column-exclude-list {})",
                re_add(table),
                columns
                    .iter()
                    .map(|c| format!("{}.{c}", table.replace('"', "")))
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            Mismatch::PartitionRoot { published } => format!(
                "run with --publish-via-partition-root {published}, or have an admin run \
                 ALTER PUBLICATION {pub_sql} SET (publish_via_partition_root = {});",
                !published
            ),
        }
    }
}

/// How `publish` reads in a sentence.
fn describe(operations: &Operations) -> String {
    match operations.is_empty() {
        true => "nothing".to_owned(),
        false => operations.publish_list().replace(", ", "s, ") + "s",
    }
}

/// The differences between `shape` and what the run expects, the
/// publication-wide ones first, then per selected table in name order.
pub fn compare(shape: &Shape, expected: &Expected<'_>) -> Vec<Mismatch> {
    let mut found = Vec::new();
    let missing = shape.publish.lacking(&expected.captured);
    if !missing.is_empty() {
        found.push(Mismatch::Operations {
            published: shape.publish,
            missing,
            captured: expected.captured,
        });
    }
    let selection = expected.selection;
    let partitioned = (shape.tables.iter())
        .any(|t| t.partitioned && selection.includes_table(&t.schema, &t.table));
    if partitioned && shape.via_root != expected.via_root {
        found.push(Mismatch::PartitionRoot {
            published: shape.via_root,
        });
    }
    for published in &shape.tables {
        let (schema, table) = (&published.schema, &published.table);
        if !selection.includes_table(schema, table) {
            continue;
        }
        let name = qualified(schema, table);
        if let Some(filter) = &published.row_filter {
            found.push(Mismatch::RowFilter {
                table: name.clone(),
                filter: filter.clone(),
            });
        }
        let columns: Vec<String> = (published.unpublished_columns.iter())
            .filter(|c| selection.includes_column(schema, table, c))
            .cloned()
            .collect();
        if !columns.is_empty() {
            found.push(Mismatch::ColumnList {
                table: name,
                columns,
            });
        }
    }
    found
}

/// Reads `publication`'s shape (it exists).
pub async fn read(client: &Client, publication: &str) -> Result<Shape, SetupError> {
    let action = || format!("reading the definition of publication {publication:?}");
    let row = client
        .query_one(
            "SELECT pubinsert, pubupdate, pubdelete, pubtruncate, pubviaroot, \
                    current_setting('server_version_num')::int >= 150000 \
             FROM pg_publication WHERE pubname = $1",
            &[&publication],
        )
        .await
        .map_err(query_error(action()))?;
    let publish = Operations {
        insert: row.get(0),
        update: row.get(1),
        delete: row.get(2),
        truncate: row.get(3),
    };
    // Row filters and column lists came with PostgreSQL 15, and with them
    // pg_publication_tables' rowfilter and attnames.
    let (filter, unpublished) = match row.get::<_, bool>(5) {
        false => ("NULL::text", "'{}'::text[]"),
        true => (
            "pt.rowfilter",
            "ARRAY(SELECT a.attname::text FROM pg_attribute a WHERE a.attrelid = c.oid \
               AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = '' \
               AND NOT a.attname = ANY(pt.attnames) ORDER BY a.attnum)",
        ),
    };
    let tables = client
        .query(
            &format!(
                "SELECT pt.schemaname::text, pt.tablename::text, {filter}, {unpublished}, \
                        c.relkind = 'p' OR c.relispartition \
                 FROM pg_publication_tables pt \
                 JOIN pg_namespace n ON n.nspname = pt.schemaname \
                 JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = pt.tablename \
                 WHERE pt.pubname = $1 ORDER BY 1, 2"
            ),
            &[&publication],
        )
        .await
        .map_err(query_error(action()))?
        .iter()
        .map(|r| PublishedTable {
            schema: r.get(0),
            table: r.get(1),
            row_filter: r.get(2),
            unpublished_columns: r.get(3),
            partitioned: r.get(4),
        })
        .collect();
    Ok(Shape {
        publish,
        via_root: row.get(4),
        tables,
    })
}

/// The differences between existing `publication` and a run with these
/// `options`, `captured` operations and `selection`, as far as they outlive
/// what the run does to it (`kept`).
pub async fn mismatches(
    client: &Client,
    publication: &str,
    options: &PublicationOptions,
    captured: Operations,
    selection: &Selection,
    kept: Kept,
) -> Result<Vec<Mismatch>, SetupError> {
    let shape = read(client, publication).await?;
    let expected = Expected {
        captured,
        via_root: options.publish_via_partition_root,
        selection,
    };
    let mut found = compare(&shape, &expected);
    found.retain(|m| kept.keeps(m));
    Ok(found)
}

/// The selected tables `publication` publishes with a row filter or a
/// column list: `filtered` publishes them whole (SET TABLE drops both).
pub async fn narrowed_tables(
    client: &Client,
    publication: &str,
    selection: &Selection,
) -> Result<Vec<String>, SetupError> {
    let shape = read(client, publication).await?;
    Ok((shape.tables.iter())
        .filter(|t| selection.includes_table(&t.schema, &t.table))
        .filter(|t| t.row_filter.is_some() || !t.unpublished_columns.is_empty())
        .map(|t| qualified(&t.schema, &t.table))
        .collect())
}

/// Logs every difference that only changes the records' shape at WARN, and
/// returns the error listing those that make the data wrong, if any
/// (`snapshots`: whether the run may snapshot, [`Mismatch::refuses`]).
pub fn refuse_or_warn(
    publication: &str,
    kept: Kept,
    found: &[Mismatch],
    snapshots: bool,
) -> Option<SetupError> {
    let mut refused = Vec::new();
    for mismatch in found {
        let detail = mismatch.detail_for(publication, snapshots);
        let fix = mismatch.fix(publication);
        match mismatch.refuses(snapshots) {
            true => refused.push(format!("{detail}; {fix}")),
            false => tracing::warn!(publication, fix = %fix, "{detail}"),
        }
    }
    (!refused.is_empty()).then(|| SetupError::PublicationShape {
        publication: publication.to_owned(),
        why: kept.why(),
        problems: refused.join(". "),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::select::SelectOptions;

    /// The selection `run` would make of these flags.
    fn selection(args: &[&str]) -> Selection {
        #[derive(clap::Parser)]
        struct Flags {
            #[command(flatten)]
            select: SelectOptions,
        }
        use clap::Parser;
        let flags = Flags::try_parse_from(std::iter::once("run").chain(args.iter().copied()))
            .expect("arguments parse");
        Selection::new(&flags.select, &[]).expect("a selection")
    }

    const ALL: Operations = Operations {
        insert: true,
        update: true,
        delete: true,
        truncate: true,
    };

    fn table(name: &str, row_filter: Option<&str>, unpublished: &[&str]) -> PublishedTable {
        PublishedTable {
            schema: "public".into(),
            table: name.into(),
            row_filter: row_filter.map(str::to_owned),
            unpublished_columns: unpublished.iter().map(|c| c.to_string()).collect(),
            partitioned: false,
        }
    }

    fn partitioned(name: &str) -> PublishedTable {
        PublishedTable {
            partitioned: true,
            ..table(name, None, &[])
        }
    }

    fn shape(publish: Operations, via_root: bool, tables: Vec<PublishedTable>) -> Shape {
        Shape {
            publish,
            via_root,
            tables,
        }
    }

    fn expected(selection: &Selection) -> Expected<'_> {
        Expected {
            captured: Operations::captured(&SkippedOperations {
                truncates: true,
                ..SkippedOperations::default()
            }),
            via_root: false,
            selection,
        }
    }

    #[test]
    fn a_publication_carrying_everything_matches() {
        let all = Selection::default();
        let published = shape(ALL, false, vec![table("t", None, &[])]);
        assert_eq!(compare(&published, &expected(&all)), vec![]);
    }

    #[test]
    fn a_row_filter_refuses_and_names_the_table_and_the_fix() {
        let all = Selection::default();
        let published = shape(ALL, false, vec![table("t", Some("(id > 10)"), &[])]);
        let found = compare(&published, &expected(&all));
        assert_eq!(
            found,
            vec![Mismatch::RowFilter {
                table: "\"public\".\"t\"".into(),
                filter: "(id > 10)".into()
            }]
        );
        assert!(found[0].refuses(true));
        let detail = found[0].detail("pub");
        assert!(
            detail.contains("WHERE (id > 10) on \"public\".\"t\""),
            "{detail}"
        );
        let fix = found[0].fix("pub");
        assert!(
            fix.contains("ALTER PUBLICATION \"pub\" DROP TABLE \"public\".\"t\"")
                && fix.contains("--table-exclude-list"),
            "{fix}"
        );
    }

    #[test]
    fn only_selected_tables_and_columns_count() {
        let selection = selection(&[
            "--table-exclude-list",
            "public\\.filtered",
            "--column-exclude-list",
            "public\\.t\\.secret",
        ]);
        let published = shape(
            ALL,
            false,
            vec![
                table("filtered", Some("(id > 10)"), &[]),
                table("t", None, &["secret"]),
            ],
        );
        assert_eq!(compare(&published, &expected(&selection)), vec![]);
        let wider = shape(ALL, false, vec![table("t", None, &["secret", "note"])]);
        let found = compare(&wider, &expected(&selection));
        assert_eq!(
            found,
            vec![Mismatch::ColumnList {
                table: "\"public\".\"t\"".into(),
                columns: vec!["note".into()]
            }]
        );
        assert!(!found[0].refuses(true), "a column list only warns");
        assert!(
            found[0]
                .fix("pub")
                .contains("--column-exclude-list public.t.note"),
            "{}",
            found[0].fix("pub")
        );
    }

    #[test]
    fn missing_captured_operations_refuse_unless_skipped() {
        let all = Selection::default();
        let inserts = Operations {
            insert: true,
            ..Operations::default()
        };
        let published = shape(inserts, false, vec![table("t", None, &[])]);
        let found = compare(&published, &expected(&all));
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].refuses(true));
        let detail = found[0].detail("pub");
        assert!(
            detail.contains("publishes only inserts (publish = 'insert'), not update, delete"),
            "{detail}"
        );
        let fix = found[0].fix("pub");
        assert!(
            fix.contains("SET (publish = 'insert, update, delete')")
                && fix.contains("--skipped-operations u,d,t"),
            "{fix}"
        );
        // Truncates are skipped by default; updates and deletes here too.
        let skip = Expected {
            captured: Operations::captured(&SkippedOperations {
                updates: true,
                deletes: true,
                truncates: true,
                inserts: false,
            }),
            ..expected(&all)
        };
        assert_eq!(compare(&published, &skip), vec![]);
    }

    #[test]
    fn partition_root_warns_only_with_a_partitioned_table_selected() {
        let all = Selection::default();
        let published = shape(ALL, true, vec![table("t", None, &[])]);
        assert_eq!(compare(&published, &expected(&all)), vec![]);
        let published = shape(ALL, true, vec![table("t", None, &[]), partitioned("p")]);
        let without_p = selection(&["--table-exclude-list", "public\\.p"]);
        assert_eq!(compare(&published, &expected(&without_p)), vec![]);
        let found = compare(&published, &expected(&all));
        assert_eq!(found, vec![Mismatch::PartitionRoot { published: true }]);
        assert!(!found[0].refuses(true));
        assert!(found[0].detail("pub").contains("go to the root's topics"));
        assert!(found[0]
            .fix("pub")
            .contains("--publish-via-partition-root true"));
    }

    #[test]
    fn refusals_make_one_error_and_warnings_do_not() {
        let found = vec![
            Mismatch::PartitionRoot { published: true },
            Mismatch::RowFilter {
                table: "\"public\".\"t\"".into(),
                filter: "(id > 10)".into(),
            },
        ];
        assert!(refuse_or_warn("pub", Kept::ReadOnly, &found[..1], true).is_none());
        assert!(
            refuse_or_warn("pub", Kept::AllTables, &found, false).is_none(),
            "a run that never snapshots streams what a row filter lets through"
        );
        assert!(found[1]
            .detail_for("pub", false)
            .contains("takes no snapshot"));
        assert!(!found[1]
            .detail_for("pub", true)
            .contains("takes no snapshot"));
        let error = refuse_or_warn("pub", Kept::ReadOnly, &found, true).expect("refused");
        let text = error.to_string();
        assert!(
            text.contains("row filter")
                && text.contains("--read-only never alters it")
                && !text.contains("publish_via_partition_root"),
            "{text}"
        );
        assert!(!error.is_retryable());
        let error = refuse_or_warn("pub", Kept::Disabled, &found, true).expect("refused");
        let text = error.to_string();
        assert!(
            text.contains("--publication-autocreate-mode disabled never alters it"),
            "the refusal names the mode that keeps the publication: {text}"
        );
    }

    #[test]
    fn filtered_keeps_only_the_publish_list() {
        let all = Selection::default();
        let inserts = Operations {
            insert: true,
            ..Operations::default()
        };
        let published = shape(
            inserts,
            true,
            vec![table("t", Some("(id > 10)"), &["note"]), partitioned("p")],
        );
        let found = compare(&published, &expected(&all));
        assert_eq!(found.len(), 4, "{found:?}");
        for kept in [Kept::ReadOnly, Kept::Disabled, Kept::AllTables] {
            assert!(found.iter().all(|m| kept.keeps(m)), "{kept:?} keeps all");
        }
        // filtered sets the tables (whole) and publish_via_partition_root.
        let kept: Vec<&Mismatch> = found.iter().filter(|m| Kept::Filtered.keeps(m)).collect();
        assert!(
            matches!(kept[..], [Mismatch::Operations { .. }]),
            "filtered keeps only the publish list: {kept:?}"
        );
    }
}
