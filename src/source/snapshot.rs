//! Reading a consistent snapshot of the published tables.
//!
//! The slot is created with `CREATE_REPLICATION_SLOT ... (SNAPSHOT 'export')`
//! on a replication connection; that returns the slot's consistent point and
//! the name of a snapshot that sees exactly the transactions committed before
//! it. Every worker connection imports it (`SET TRANSACTION SNAPSHOT` in a
//! `REPEATABLE READ` transaction), so all of them read the same state, and the
//! stream from the consistent point carries exactly the changes after it.
//!
//! Tables are split into chunks of pages by ctid range (`ctid >= '(a,0)' AND
//! ctid < '(b,0)'`, a TID range scan since PostgreSQL 14). That works the
//! same for tables with and without a primary key, reads pages sequentially,
//! and lets one big table keep every worker busy; the last chunk is open-ended
//! so rows on pages added after the size was measured are still read. Rows
//! are read with `COPY ... TO STDOUT`, one row at a time: memory stays
//! bounded whatever the table size. They come in text format, the same text
//! the value decoder parses for streamed changes, or in binary format
//! ([`copy_binary`]) when the stream reads binary values. A row's fields are
//! slices of the bytes the server sent (only a text field with an escape is
//! copied, unescaped), so a row costs one allocation, its list of fields.

use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::{BufMut, Bytes, BytesMut};
use futures::Stream;
use tokio_postgres::Client;

use crate::source::copy_binary::{self, Unit};
use crate::source::pgoutput::{Column, Datum, Form, Relation, ReplicaIdentity, Tuple, TupleWriter};
use crate::source::setup::{quote_ident, SetupError};

/// Session settings of snapshot connections: the same text rendering as the
/// replication connection's (`pipeline::SESSION_OPTIONS`).
pub const SESSION_SETTINGS: &str = "SET datestyle = ISO; SET intervalstyle = postgres; \
     SET timezone = UTC; SET extra_float_digits = 3; SET bytea_output = hex; \
     SET lc_monetary = 'C'; SET client_encoding = UTF8";

fn query_error(action: String) -> impl FnOnce(tokio_postgres::Error) -> SetupError {
    move |error| SetupError::Query { action, error }
}

/// The tables of a publication, by relation OID.
pub async fn publication_tables(
    client: &Client,
    publication: &str,
) -> Result<Vec<u32>, SetupError> {
    let rows = client
        .query(
            "SELECT c.oid FROM pg_publication_tables p \
             JOIN pg_namespace n ON n.nspname = p.schemaname \
             JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = p.tablename \
             WHERE p.pubname = $1 ORDER BY p.schemaname, p.tablename",
            &[&publication],
        )
        .await
        .map_err(query_error(format!(
            "listing the tables of publication {publication:?}"
        )))?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

/// A table's description as pgoutput would send it in a Relation message
/// for `publication`, read from the catalog (inside the snapshot, so it
/// matches the rows). Stored generated columns are in it only when the
/// publication publishes them (`publish_generated_columns = stored`, 18+),
/// as pgoutput does; virtual ones never are.
pub async fn relation_from_catalog(
    client: &Client,
    oid: u32,
    publication: &str,
) -> Result<Relation, SetupError> {
    let action = || format!("reading the definition of relation {oid}");
    let table = client
        .query_one(
            "SELECT n.nspname::text, c.relname::text, c.relreplident::text \
             FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = $1",
            &[&oid],
        )
        .await
        .map_err(query_error(action()))?;
    let replica_identity = match table.get::<_, String>(2).as_str() {
        "f" => ReplicaIdentity::Full,
        "i" => ReplicaIdentity::Index,
        "n" => ReplicaIdentity::Nothing,
        _ => ReplicaIdentity::Default,
    };
    // The key flag as pgoutput sets it: every column under FULL, the primary
    // key under DEFAULT, the replica identity index's columns under INDEX.
    let columns = client
        .query(
            "SELECT a.attname::text, a.atttypid, a.atttypmod, \
                    CASE c.relreplident \
                      WHEN 'f' THEN true \
                      WHEN 'd' THEN EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid \
                                            AND i.indisprimary AND a.attnum = ANY(i.indkey)) \
                      WHEN 'i' THEN EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid \
                                            AND i.indisreplident AND a.attnum = ANY(i.indkey)) \
                      ELSE false END \
             FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid \
             WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped \
               AND (a.attgenerated = '' OR a.attgenerated = 's' AND EXISTS ( \
                    SELECT 1 FROM pg_publication p \
                    WHERE p.pubname = $2 AND row_to_json(p)->>'pubgencols' = 's')) \
             ORDER BY a.attnum",
            &[&oid, &publication],
        )
        .await
        .map_err(query_error(action()))?;
    Ok(Relation {
        id: oid,
        namespace: table.get(0),
        name: table.get(1),
        replica_identity,
        columns: columns
            .iter()
            .map(|r| Column {
                is_key: r.get(3),
                name: r.get(0),
                type_oid: r.get(1),
                type_modifier: r.get(2),
            })
            .collect(),
    })
}

/// Opens a transaction on `client` that sees the exported snapshot.
pub async fn import_snapshot(client: &Client, snapshot_name: &str) -> Result<(), SetupError> {
    let sql = format!(
        "{SESSION_SETTINGS}; BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; \
         SET TRANSACTION SNAPSHOT '{}'",
        snapshot_name.replace('\'', "''")
    );
    client
        .batch_execute(&sql)
        .await
        .map_err(query_error(format!("importing snapshot {snapshot_name:?}")))
}

/// The number of pages of a relation now (at least what the snapshot sees).
pub async fn relation_pages(client: &Client, oid: u32) -> Result<u32, SetupError> {
    let pages: i64 = client
        .query_one(
            "SELECT pg_relation_size($1::oid) / current_setting('block_size')::bigint",
            &[&oid],
        )
        .await
        .map_err(query_error(format!("measuring relation {oid}")))?
        .get(0);
    Ok(u32::try_from(pages).unwrap_or(u32::MAX))
}

/// The planner's estimate of a relation's rows (`reltuples`), 0 when unknown.
pub async fn relation_row_estimate(client: &Client, oid: u32) -> Result<u64, SetupError> {
    let rows: f32 = client
        .query_one("SELECT reltuples FROM pg_class WHERE oid = $1", &[&oid])
        .await
        .map_err(query_error(format!(
            "estimating the rows of relation {oid}"
        )))?
        .get(0);
    Ok(if rows > 0.0 { rows as u64 } else { 0 })
}

/// A range of pages `[start, end)`; `end == None` reads to the end of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageRange {
    pub start: u32,
    pub end: Option<u32>,
}

/// Splits `pages` pages into chunks of `chunk_pages`, the last one open-ended.
pub fn plan_chunks(pages: u32, chunk_pages: u32) -> Vec<PageRange> {
    let chunk_pages = chunk_pages.max(1);
    let mut chunks = Vec::new();
    let mut start = 0u32;
    while pages.saturating_sub(start) > chunk_pages {
        let end = start + chunk_pages;
        chunks.push(PageRange {
            start,
            end: Some(end),
        });
        start = end;
    }
    chunks.push(PageRange { start, end: None });
    chunks
}

/// The COPY statement reading one chunk of a relation's published columns,
/// its values in `form`.
pub fn copy_statement(relation: &Relation, range: PageRange, form: Form) -> String {
    let columns: Vec<String> = relation
        .columns
        .iter()
        .map(|c| quote_ident(&c.name))
        .collect();
    let mut filter = format!("ctid >= '({},0)'::tid", range.start);
    if let Some(end) = range.end {
        filter.push_str(&format!(" AND ctid < '({end},0)'::tid"));
    }
    format!(
        "COPY (SELECT {} FROM {}.{} WHERE {filter}) TO STDOUT{}",
        if columns.is_empty() {
            "NULL".to_owned()
        } else {
            columns.join(", ")
        },
        quote_ident(&relation.namespace),
        quote_ident(&relation.name),
        match form {
            Form::Text => "",
            Form::Binary => " (FORMAT binary)",
        },
    )
}

/// A row of COPY's text format that cannot be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed COPY row from {table}: {problem}; please report this")]
pub struct CopyFormatError {
    pub table: String,
    pub problem: &'static str,
}

/// Streams the rows of `statement`, a `COPY (select) TO STDOUT` in `form`
/// (text, or `(FORMAT binary)`), `select` reading `relation`'s columns in
/// order: each row's fields as text, unescaped, or as binary values, and
/// [`Datum::Null`] for NULL.
pub async fn copy_select(
    client: &Client,
    relation: &Relation,
    statement: String,
    form: Form,
) -> Result<impl Stream<Item = Result<Tuple, SnapshotReadError>>, SetupError> {
    let table = format!("{}.{}", relation.namespace, relation.name);
    let stream = client
        .copy_out(statement.as_str())
        .await
        .map_err(query_error(format!("reading {table}")))?;
    Ok(CopyRows::new(
        Box::pin(stream),
        table,
        relation.columns.len().max(1),
        form,
    ))
}

/// The rows of a COPY stream. Postgres sends a CopyData message per row
/// (the binary header comes with the first); a row split across messages is
/// put together in `partial`, and rows are read from there until it is
/// used up.
struct CopyRows<S> {
    chunks: S,
    /// What is left of the last message.
    buffer: Bytes,
    /// The start of a row whose end has not arrived yet.
    partial: BytesMut,
    table: String,
    /// Fields per row, for the capacity of each row's list.
    width: usize,
    form: Form,
    /// Binary only: the header, and the trailer, were read.
    header_read: bool,
    trailer_read: bool,
    done: bool,
}

impl<S> CopyRows<S> {
    fn new(chunks: S, table: String, width: usize, form: Form) -> Self {
        CopyRows {
            chunks,
            buffer: Bytes::new(),
            partial: BytesMut::new(),
            table,
            width,
            form,
            header_read: false,
            trailer_read: false,
            done: false,
        }
    }

    /// The whole unit at the start of `bytes`, if it has arrived: a text
    /// row is a line with its newline.
    fn next_unit(&self, bytes: &[u8]) -> Result<Option<Unit>, &'static str> {
        match self.form {
            Form::Text => Ok(bytes
                .iter()
                .position(|&b| b == b'\n')
                .map(|newline| Unit::Row(newline + 1))),
            Form::Binary if self.trailer_read && !bytes.is_empty() => {
                Err("data after the binary COPY trailer")
            }
            Form::Binary => copy_binary::next_unit(bytes, self.header_read),
        }
    }

    fn parse_row(&self, mut row: Bytes) -> Result<Tuple, &'static str> {
        match self.form {
            Form::Text => {
                row.truncate(row.len() - 1);
                parse_copy_row(row, self.width)
            }
            Form::Binary => copy_binary::parse_row(row, self.width),
        }
    }

    /// Ends the stream with `problem`: nothing after it is read.
    fn format_error(&mut self, problem: &'static str) -> Option<Result<Tuple, SnapshotReadError>> {
        self.done = true;
        self.buffer = Bytes::new();
        self.partial.clear();
        Some(Err(SnapshotReadError::Format(CopyFormatError {
            table: self.table.clone(),
            problem,
        })))
    }
}

impl<S> Stream for CopyRows<S>
where
    S: Stream<Item = Result<Bytes, tokio_postgres::Error>> + Unpin,
{
    type Item = Result<Tuple, SnapshotReadError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            // Rows are slices of the message while no row is split.
            let in_partial = !this.partial.is_empty();
            let pending: &[u8] = if in_partial {
                &this.partial
            } else {
                &this.buffer
            };
            match this.next_unit(pending) {
                Err(problem) => return Poll::Ready(this.format_error(problem)),
                Ok(Some(unit)) => {
                    let bytes = if in_partial {
                        this.partial.split_to(unit.size()).freeze()
                    } else {
                        this.buffer.split_to(unit.size())
                    };
                    match unit {
                        Unit::Header(_) => this.header_read = true,
                        Unit::Trailer(_) => this.trailer_read = true,
                        Unit::Row(_) => {
                            let row = this.parse_row(bytes);
                            return Poll::Ready(match row {
                                Ok(row) => Some(Ok(row)),
                                Err(problem) => this.format_error(problem),
                            });
                        }
                    }
                    continue;
                }
                Ok(None) => {}
            }
            if !this.buffer.is_empty() {
                this.partial.extend_from_slice(&this.buffer);
                this.buffer = Bytes::new();
                continue;
            }
            if this.done {
                return Poll::Ready(None);
            }
            match ready!(Pin::new(&mut this.chunks).poll_next(cx)) {
                Some(Ok(bytes)) => this.buffer = bytes,
                Some(Err(error)) => {
                    this.done = true;
                    let table = this.table.clone();
                    return Poll::Ready(Some(Err(SnapshotReadError::Copy { table, error })));
                }
                None if !this.partial.is_empty() => {
                    // COPY's text format ends every row with a newline.
                    return Poll::Ready(this.format_error(match this.form {
                        Form::Text => "the last row has no end of line",
                        Form::Binary => "the last row is cut short",
                    }));
                }
                None if this.form == Form::Binary && !this.trailer_read => {
                    return Poll::Ready(this.format_error("the binary COPY output has no trailer"));
                }
                None => this.done = true,
            }
        }
    }
}

/// Failures while reading snapshot rows.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotReadError {
    #[error("reading {table} failed")]
    Copy {
        table: String,
        #[source]
        error: tokio_postgres::Error,
    },
    #[error(transparent)]
    Format(CopyFormatError),
}

/// Parses one line of COPY text format (without its newline) into a row
/// of about `width` fields. A line without a backslash (no escapes, no
/// `\N`) is the row's buffer, its fields slices of it; any other line's
/// fields are unescaped into a buffer of the row's own, `\N` as
/// [`Datum::Null`]. UTF-8 is checked where the values are decoded, as for
/// the stream's.
pub fn parse_copy_row(line: Bytes, width: usize) -> Result<Tuple, &'static str> {
    if !line.contains(&b'\\') {
        let tabs = line.iter().enumerate().filter(|&(_, &b)| b == b'\t');
        let ends = tabs.map(|(i, _)| i).chain([line.len()]);
        let mut start = 0;
        let fields = ends.map(|end| {
            let field = start..end;
            start = end + 1;
            Some(field)
        });
        return Tuple::of_ranges(line.clone(), width, Form::Text, fields)
            .ok_or("a field outside its line");
    }
    let mut row = TupleWriter::default();
    for field in line.split(|&b| b == b'\t') {
        if field == b"\\N" {
            row.push(Datum::Null);
        } else {
            row.text_with(|out| unescape(field, out))?;
        }
    }
    Ok(row.finish())
}

/// Appends COPY text field `raw` to `out`, its escapes replaced by the
/// bytes they stand for.
fn unescape(raw: &[u8], out: &mut BytesMut) -> Result<(), &'static str> {
    let mut i = 0;
    while i < raw.len() {
        let b = raw[i];
        if b != b'\\' {
            out.put_u8(b);
            i += 1;
            continue;
        }
        let Some(&next) = raw.get(i + 1) else {
            return Err("a field ends in a lone backslash");
        };
        i += 2;
        match next {
            b'b' => out.put_u8(0x08),
            b'f' => out.put_u8(0x0c),
            b'n' => out.put_u8(b'\n'),
            b'r' => out.put_u8(b'\r'),
            b't' => out.put_u8(b'\t'),
            b'v' => out.put_u8(0x0b),
            b'0'..=b'7' => {
                let mut value = u32::from(next - b'0');
                let mut digits = 1;
                while digits < 3 {
                    match raw.get(i) {
                        Some(&d @ b'0'..=b'7') => {
                            value = value * 8 + u32::from(d - b'0');
                            i += 1;
                            digits += 1;
                        }
                        _ => break,
                    }
                }
                out.put_u8((value & 0xFF) as u8);
            }
            b'x' => {
                let hex = |b: u8| (b as char).to_digit(16);
                let Some(first) = raw.get(i).copied().and_then(hex) else {
                    return Err("\\x is not followed by a hex digit");
                };
                i += 1;
                let mut value = first;
                if let Some(second) = raw.get(i).copied().and_then(hex) {
                    value = value * 16 + second;
                    i += 1;
                }
                out.put_u8(value as u8);
            }
            other => out.put_u8(other),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(s: &'static [u8]) -> Datum<'static> {
        Datum::Text(s)
    }

    #[test]
    fn parses_copy_text_escapes_and_nulls() {
        let line = Bytes::from_static(b"1\t\\N\ta\\tb\\nc\\\\d\t\\101\\x42\t");
        assert_eq!(
            parse_copy_row(line, 5).expect("valid"),
            Tuple::new([
                text(b"1"),
                Datum::Null,
                text(b"a\tb\nc\\d"),
                text(b"AB"),
                text(b""),
            ])
        );
        assert!(parse_copy_row(Bytes::from_static(b"ends\\"), 1).is_err());
    }

    #[test]
    fn rows_are_slices_of_what_the_server_sent_even_across_messages() {
        let first = Bytes::from_static(b"1\tann\n2\tb");
        let chunks: Vec<Result<Bytes, tokio_postgres::Error>> = vec![
            Ok(first.clone()),
            Ok(Bytes::from_static(b"ob\n")),
            Ok(Bytes::from_static(b"3\t\\N\n4\tc\\\\d\n")),
        ];
        let rows = CopyRows::new(
            futures::stream::iter(chunks),
            "public.t".into(),
            2,
            Form::Text,
        );
        let rows: Vec<Tuple> =
            futures::executor::block_on(futures::StreamExt::collect::<Vec<_>>(rows))
                .into_iter()
                .map(|r| r.expect("valid rows"))
                .collect();
        assert_eq!(
            rows,
            vec![
                Tuple::new([text(b"1"), text(b"ann")]),
                Tuple::new([text(b"2"), text(b"bob")]),
                Tuple::new([text(b"3"), Datum::Null]),
                Tuple::new([text(b"4"), text(b"c\\d")]),
            ]
        );
        let Some(Datum::Text(ann)) = rows[0].get(1) else {
            panic!("a text field")
        };
        assert!(
            first.as_ptr_range().contains(&ann.as_ptr()),
            "a field without escapes is not copied"
        );
        let truncated: Vec<Result<Bytes, tokio_postgres::Error>> =
            vec![Ok(Bytes::from_static(b"1\tann\n2\tb"))];
        let rows = CopyRows::new(
            futures::stream::iter(truncated),
            "public.t".into(),
            2,
            Form::Text,
        );
        let rows = futures::executor::block_on(futures::StreamExt::collect::<Vec<_>>(rows));
        assert!(
            matches!(rows.as_slice(), [Ok(_), Err(SnapshotReadError::Format(_))]),
            "a last row without its end of line is an error, not dropped"
        );
    }

    /// The rows `chunks` make, read in `form`.
    fn read_rows(chunks: Vec<Vec<u8>>, form: Form) -> Vec<Result<Tuple, SnapshotReadError>> {
        let chunks = chunks
            .into_iter()
            .map(|chunk| Ok::<_, tokio_postgres::Error>(Bytes::from(chunk)));
        let rows = CopyRows::new(futures::stream::iter(chunks), "public.t".into(), 2, form);
        futures::executor::block_on(futures::StreamExt::collect::<Vec<_>>(rows))
    }

    #[test]
    fn binary_rows_are_read_whole_however_the_messages_cut_them() {
        let mut all = copy_binary::test_header(b"");
        all.extend(copy_binary::test_row(&[Some(&[0, 0, 0, 1]), Some(b"ann")]));
        all.extend(copy_binary::test_row(&[Some(&[0, 0, 0, 2]), None]));
        all.extend((-1i16).to_be_bytes());
        let expected = vec![
            Tuple::new([Datum::Binary(&[0, 0, 0, 1]), Datum::Binary(b"ann")]),
            Tuple::new([Datum::Binary(&[0, 0, 0, 2]), Datum::Null]),
        ];
        // In one message, cut in two at every place, and a byte a message.
        let mut splits = vec![vec![all.clone()]];
        splits.extend((1..all.len()).map(|cut| vec![all[..cut].to_vec(), all[cut..].to_vec()]));
        splits.push(all.iter().map(|&b| vec![b]).collect());
        for chunks in splits {
            let cuts: Vec<usize> = chunks.iter().map(Vec::len).collect();
            let rows: Vec<Tuple> = read_rows(chunks, Form::Binary)
                .into_iter()
                .map(|row| row.expect("valid rows"))
                .collect();
            assert_eq!(rows, expected, "messages of {cuts:?} bytes");
        }
        let untrailed = all[..all.len() - 2].to_vec();
        assert!(
            matches!(
                read_rows(vec![untrailed.clone()], Form::Binary).as_slice(),
                [Ok(_), Ok(_), Err(SnapshotReadError::Format(_))]
            ),
            "a stream without its trailer is an error, not a complete chunk"
        );
        let cut_short = untrailed[..untrailed.len() - 1].to_vec();
        assert!(matches!(
            read_rows(vec![cut_short], Form::Binary).as_slice(),
            [Ok(_), Err(SnapshotReadError::Format(_))]
        ));
        let mut after = all.clone();
        after.extend(copy_binary::test_row(&[None, None]));
        assert!(matches!(
            read_rows(vec![after], Form::Binary).last(),
            Some(Err(SnapshotReadError::Format(_)))
        ));
        assert!(
            matches!(
                read_rows(vec![b"1\tann\n".to_vec()], Form::Binary).as_slice(),
                [Err(SnapshotReadError::Format(_))]
            ),
            "text is not read as binary"
        );
    }

    #[test]
    fn chunks_cover_every_page_with_an_open_end() {
        assert_eq!(
            plan_chunks(0, 10),
            vec![PageRange {
                start: 0,
                end: None
            }]
        );
        assert_eq!(
            plan_chunks(25, 10),
            vec![
                PageRange {
                    start: 0,
                    end: Some(10)
                },
                PageRange {
                    start: 10,
                    end: Some(20)
                },
                PageRange {
                    start: 20,
                    end: None
                },
            ]
        );
        assert_eq!(
            plan_chunks(20, 10).len(),
            2,
            "an exact multiple ends with one open chunk"
        );
    }

    #[test]
    fn copy_statement_quotes_names() {
        let relation = Relation {
            id: 1,
            namespace: "Sales".into(),
            name: "order \"lines\"".into(),
            replica_identity: ReplicaIdentity::Default,
            columns: vec![Column {
                is_key: true,
                name: "id".into(),
                type_oid: 23,
                type_modifier: -1,
            }],
        };
        let range = PageRange {
            start: 4,
            end: Some(8),
        };
        assert_eq!(
            copy_statement(&relation, range, Form::Text),
            "COPY (SELECT \"id\" FROM \"Sales\".\"order \"\"lines\"\"\" WHERE ctid >= '(4,0)'::tid AND ctid < '(8,0)'::tid) TO STDOUT"
        );
        assert!(
            copy_statement(&relation, range, Form::Binary).ends_with(" TO STDOUT (FORMAT binary)")
        );
    }
}
