//! One row's column values: a [`Tuple`], read one [`Datum`] at a time.
//!
//! A tuple holds the bytes its values live in (the message it was decoded
//! from, a line of COPY output, or a buffer a [`TupleWriter`] filled) and,
//! per column, the value's kind and where its bytes are. Values are borrowed
//! from it: a row of fifty columns is one reference to its message, not
//! fifty, so decoding and dropping a row costs no atomic count per column
//! (BENCHMARKS.md, "Wide rows: one count per row").

use std::fmt;
use std::ops::Range;

use bytes::{BufMut, Bytes, BytesMut};

/// The column values of one row, in the relation's column order.
#[derive(Clone, Default)]
pub struct Tuple {
    /// The bytes every value is a range of.
    data: Bytes,
    columns: Vec<Column>,
}

/// Where one column's value is. Invariant: every range lies within the
/// tuple's `data`.
#[derive(Clone, Debug)]
pub(super) enum Column {
    Null,
    UnchangedToast,
    Text(Range<usize>),
    Binary(Range<usize>),
}

/// The form a value's bytes are in: its type's text output or its binary
/// send format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    Text,
    Binary,
}

/// One column value of a [`Tuple`], borrowed from it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Datum<'a> {
    /// `n`: SQL NULL.
    Null,
    /// `u`: a TOASTed value that did not change and was not sent.
    UnchangedToast,
    /// `t`: the value in the type's text output format.
    Text(&'a [u8]),
    /// `b`: the value in the type's binary format.
    Binary(&'a [u8]),
}

impl fmt::Debug for Datum<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Datum::Null => f.write_str("Null"),
            Datum::UnchangedToast => f.write_str("UnchangedToast"),
            Datum::Text(bytes) => write!(f, "Text(b\"{}\")", bytes.escape_ascii()),
            Datum::Binary(bytes) => write!(f, "Binary(b\"{}\")", bytes.escape_ascii()),
        }
    }
}

impl Tuple {
    /// A tuple of `datums`, their bytes copied into one buffer.
    pub fn new<'a>(datums: impl IntoIterator<Item = Datum<'a>>) -> Tuple {
        let mut writer = TupleWriter::default();
        for datum in datums {
            writer.push(datum);
        }
        writer.finish()
    }

    /// A tuple of values in `form` and NULLs that are ranges of `data`
    /// (`None` for NULL), without copying them; `None` when a range is not
    /// within `data`. `width`: how many fields to make room for.
    pub fn of_ranges(
        data: Bytes,
        width: usize,
        form: Form,
        fields: impl IntoIterator<Item = Option<Range<usize>>>,
    ) -> Option<Tuple> {
        let mut columns = Vec::with_capacity(width);
        for field in fields {
            columns.push(match field {
                None => Column::Null,
                Some(range) => {
                    data.get(range.clone())?;
                    match form {
                        Form::Text => Column::Text(range),
                        Form::Binary => Column::Binary(range),
                    }
                }
            });
        }
        Some(Tuple { data, columns })
    }

    /// A tuple whose `columns` lie within `data` (the decoder's, which
    /// checked every length against the message).
    pub(super) fn from_checked(data: Bytes, columns: Vec<Column>) -> Tuple {
        Tuple { data, columns }
    }

    /// The number of columns.
    #[inline]
    pub fn len(&self) -> usize {
        self.columns.len()
    }

    /// Whether the tuple has no columns.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.columns.is_empty()
    }

    /// The value of column `index` (0-based), if the tuple has one.
    #[inline]
    pub fn get(&self, index: usize) -> Option<Datum<'_>> {
        self.columns.get(index).map(|column| self.datum(column))
    }

    /// The values, in column order.
    #[inline]
    pub fn iter(&self) -> impl ExactSizeIterator<Item = Datum<'_>> + '_ {
        self.columns.iter().map(|column| self.datum(column))
    }

    /// The values, each copied out of the tuple.
    pub fn to_vec(&self) -> Vec<Datum<'_>> {
        self.iter().collect()
    }

    #[inline]
    fn datum(&self, column: &Column) -> Datum<'_> {
        // The ranges lie within `data` (the invariant of `Column`): the empty
        // slice is never taken.
        let bytes = |range: &Range<usize>| self.data.get(range.clone()).unwrap_or_default();
        match column {
            Column::Null => Datum::Null,
            Column::UnchangedToast => Datum::UnchangedToast,
            Column::Text(range) => Datum::Text(bytes(range)),
            Column::Binary(range) => Datum::Binary(bytes(range)),
        }
    }

    /// Replaces each [`Datum::UnchangedToast`] of this new row with the
    /// value `old` holds at the same position, where `old` has one (a
    /// `REPLICA IDENTITY FULL` old row carries every TOASTed value inline;
    /// a key-only old row has them as [`Datum::Null`], which is left
    /// alone). This is what Debezium does with an update's old tuple, so
    /// `after` is complete whenever the message holds the values. Returns
    /// how many values were filled.
    pub fn fill_unchanged_from(&mut self, old: &Tuple) -> usize {
        fn fill<'a>((new, old): (Datum<'a>, Option<Datum<'a>>)) -> Option<Datum<'a>> {
            match (new, old) {
                (Datum::UnchangedToast, Some(old @ (Datum::Text(_) | Datum::Binary(_)))) => {
                    Some(old)
                }
                _ => None,
            }
        }
        let pairs = || self.iter().enumerate().map(|(i, new)| (new, old.get(i)));
        let filled = pairs().filter(|&pair| fill(pair).is_some()).count();
        if filled > 0 {
            let merged = Tuple::new(pairs().map(|pair| fill(pair).unwrap_or(pair.0)));
            *self = merged;
        }
        filled
    }
}

impl PartialEq for Tuple {
    fn eq(&self, other: &Tuple) -> bool {
        self.iter().eq(other.iter())
    }
}

impl Eq for Tuple {}

impl fmt::Debug for Tuple {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// Builds [`Tuple`]s by copying their values into one buffer, which it
/// reuses from one tuple to the next.
#[derive(Default)]
pub struct TupleWriter {
    buf: BytesMut,
    columns: Vec<Column>,
}

impl TupleWriter {
    /// Adds `datum` as the next column.
    pub fn push(&mut self, datum: Datum<'_>) {
        match datum {
            Datum::Null => self.columns.push(Column::Null),
            Datum::UnchangedToast => self.columns.push(Column::UnchangedToast),
            Datum::Text(bytes) => self.text(bytes),
            Datum::Binary(bytes) => {
                let range = self.append(bytes);
                self.columns.push(Column::Binary(range));
            }
        }
    }

    /// Adds a text value.
    pub fn text(&mut self, bytes: &[u8]) {
        let range = self.append(bytes);
        self.columns.push(Column::Text(range));
    }

    /// Adds a text value that `write` appends to the buffer it is given
    /// (unescaping as it goes, say); on an error nothing is added.
    pub fn text_with<E>(
        &mut self,
        write: impl FnOnce(&mut BytesMut) -> Result<(), E>,
    ) -> Result<(), E> {
        let start = self.buf.len();
        match write(&mut self.buf) {
            Ok(()) => {
                self.columns.push(Column::Text(start..self.buf.len()));
                Ok(())
            }
            Err(e) => {
                self.buf.truncate(start);
                Err(e)
            }
        }
    }

    /// Copies `bytes` into the buffer; where they are.
    fn append(&mut self, bytes: &[u8]) -> Range<usize> {
        let start = self.buf.len();
        self.buf.put_slice(bytes);
        start..self.buf.len()
    }

    /// The tuple written so far; the writer starts the next one empty.
    pub fn finish(&mut self) -> Tuple {
        Tuple {
            data: self.buf.split().freeze(),
            columns: std::mem::take(&mut self.columns),
        }
    }
}

#[cfg(test)]
#[allow(clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn a_written_tuple_reads_back_its_values_in_order() {
        let mut writer = TupleWriter::default();
        writer.text(b"1");
        writer.push(Datum::Null);
        writer.push(Datum::Binary(&[0, 42]));
        writer.push(Datum::UnchangedToast);
        writer
            .text_with(|buf| {
                buf.put_slice(b"a\tb");
                Ok::<_, ()>(())
            })
            .expect("written");
        assert_eq!(
            writer.text_with(|buf| {
                buf.put_slice(b"dropped");
                Err("bad")
            }),
            Err("bad")
        );
        let tuple = writer.finish();
        assert_eq!(
            tuple.to_vec(),
            [
                Datum::Text(b"1"),
                Datum::Null,
                Datum::Binary(&[0, 42]),
                Datum::UnchangedToast,
                Datum::Text(b"a\tb"),
            ]
        );
        assert_eq!(tuple.get(4), Some(Datum::Text(b"a\tb")));
        assert_eq!(tuple.get(5), None);
        writer.text(b"next");
        assert_eq!(writer.finish().to_vec(), [Datum::Text(b"next")]);
        assert_eq!(
            tuple.get(0),
            Some(Datum::Text(b"1")),
            "the first tuple is unchanged"
        );
    }

    #[test]
    fn ranges_outside_the_data_are_refused() {
        let data = Bytes::from_static(b"12\tann");
        let fields = [Some(0..2), None, Some(3..6)];
        let tuple =
            Tuple::of_ranges(data.clone(), 3, Form::Text, fields.clone()).expect("within the data");
        assert_eq!(
            tuple,
            Tuple::new([Datum::Text(b"12"), Datum::Null, Datum::Text(b"ann")])
        );
        let tuple = Tuple::of_ranges(data.clone(), 3, Form::Binary, fields).expect("within");
        assert_eq!(
            tuple,
            Tuple::new([Datum::Binary(b"12"), Datum::Null, Datum::Binary(b"ann")])
        );
        assert_eq!(Tuple::of_ranges(data, 1, Form::Text, [Some(3..7)]), None);
    }

    #[test]
    fn unchanged_values_are_filled_from_a_full_old_row_only() {
        let mut new = Tuple::new([
            Datum::Text(b"1"),
            Datum::UnchangedToast,
            Datum::UnchangedToast,
        ]);
        let key_only = Tuple::new([Datum::Text(b"1"), Datum::Null, Datum::Null]);
        assert_eq!(new.fill_unchanged_from(&key_only), 0);
        let full = Tuple::new([Datum::Text(b"1"), Datum::Text(b"big"), Datum::Null]);
        assert_eq!(new.fill_unchanged_from(&full), 1);
        assert_eq!(
            new.to_vec(),
            [
                Datum::Text(b"1"),
                Datum::Text(b"big"),
                Datum::UnchangedToast
            ]
        );
    }
}
