//! What the incremental snapshot's `IN_PROGRESS` notifications say about
//! the table being read, besides the chunk's end: Debezium's `maximum_key`
//! (the largest key when the table's reading began), and, from the
//! planner's row estimate, `total_rows`, `total_chunks` and `chunk_index`.
//! Read once per table (when its first chunk of this run is selected), with
//! two read-only statements.

use tokio_postgres::{Client, SimpleQueryMessage};

use crate::source::pgoutput::Relation;
use crate::source::setup::{quote_ident, SetupError};

/// The table being read, as its notifications describe it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct TableInfo {
    /// `schema.table`, as the snapshot names it.
    pub(super) table: String,
    /// The largest key (matching the table's filter) when its reading
    /// began, as text; `None` for an empty table.
    pub(super) maximum_key: Option<Vec<Option<String>>>,
    /// The planner's estimate (`pg_class.reltuples`); `None` before the
    /// table was ever analyzed.
    pub(super) estimated_rows: Option<u64>,
    /// Chunks of this table emitted by this run.
    pub(super) chunks: u64,
    /// Rows of this table emitted by this run (`total_rows_scanned`).
    pub(super) rows: u64,
}

impl TableInfo {
    /// Reads it for `table` (`relation`, keyed by `key_names`, filtered by
    /// `filter`).
    pub(super) async fn read(
        sql: &Client,
        table: &str,
        relation: &Relation,
        key_names: &[&str],
        filter: Option<&str>,
    ) -> Result<TableInfo, SetupError> {
        let error = |error| SetupError::Query {
            action: format!("reading the largest key and row estimate of {table}"),
            error,
        };
        let keys: Vec<String> = key_names.iter().map(|k| quote_ident(k)).collect();
        let descending: Vec<String> = keys.iter().map(|k| format!("{k} DESC")).collect();
        let filter = filter.map(|f| format!(" WHERE ({f})")).unwrap_or_default();
        let query = format!(
            "SELECT {} FROM {}.{}{filter} ORDER BY {} LIMIT 1",
            keys.join(", "),
            quote_ident(&relation.namespace),
            quote_ident(&relation.name),
            descending.join(", "),
        );
        let maximum_key = sql
            .simple_query(&query)
            .await
            .map_err(error)?
            .into_iter()
            .find_map(|m| match m {
                SimpleQueryMessage::Row(row) => Some(
                    (0..row.len())
                        .map(|i| row.get(i).map(str::to_owned))
                        .collect(),
                ),
                _ => None,
            });
        let estimate: f32 = sql
            .query_one(
                "SELECT reltuples FROM pg_class WHERE oid = $1",
                &[&relation.id],
            )
            .await
            .map_err(error)?
            .get(0);
        Ok(TableInfo {
            table: table.to_owned(),
            maximum_key,
            estimated_rows: (estimate >= 0.0).then_some(estimate as u64),
            chunks: 0,
            rows: 0,
        })
    }

    /// The notification fields: `maximum_key`, and with an estimate
    /// `total_rows`, `total_chunks` (at `chunk_size` rows each, at least
    /// the chunks already emitted) and `chunk_index` (from 1).
    pub(super) fn fields(&self, chunk_size: u32) -> Vec<(&'static str, String)> {
        let maximum_key = match &self.maximum_key {
            Some(key) => key
                .iter()
                .map(|k| k.as_deref().unwrap_or("<null>"))
                .collect::<Vec<_>>()
                .join(","),
            None => "<null>".to_owned(),
        };
        let mut fields = vec![
            ("maximum_key", maximum_key),
            ("chunk_index", self.chunks.to_string()),
        ];
        if let Some(rows) = self.estimated_rows {
            let chunks = rows.div_ceil(u64::from(chunk_size.max(1)));
            fields.push(("total_rows", rows.to_string()));
            fields.push(("total_chunks", chunks.max(self.chunks).to_string()));
        }
        fields
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_estimate_chunks_and_never_fall_behind_the_index() {
        let mut info = TableInfo {
            table: "public.t".into(),
            maximum_key: Some(vec![Some("9".into()), None]),
            estimated_rows: Some(1000),
            chunks: 1,
            rows: 300,
        };
        let fields = info.fields(300);
        assert_eq!(
            fields,
            [
                ("maximum_key", "9,<null>".to_owned()),
                ("chunk_index", "1".to_owned()),
                ("total_rows", "1000".to_owned()),
                ("total_chunks", "4".to_owned()),
            ]
        );
        info.chunks = 6;
        assert_eq!(info.fields(300)[3], ("total_chunks", "6".to_owned()));
        info.estimated_rows = None;
        info.maximum_key = None;
        assert_eq!(
            info.fields(300),
            [
                ("maximum_key", "<null>".to_owned()),
                ("chunk_index", "6".to_owned())
            ],
            "never analyzed: no estimate"
        );
    }
}
