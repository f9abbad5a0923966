//! The chunk in flight between its watermarks (DBLog's window), sans-IO:
//! which selected rows streamed changes replace, and what the high
//! watermark emits. See the parent module for the algorithm.

use std::collections::HashMap;

use crate::lsn::Lsn;
use crate::source::pgoutput::{Datum, Tuple};
use crate::source::signal::{KeyText, WINDOW_CLOSE, WINDOW_OPEN};

/// A chunk between its watermarks.
pub(super) struct Chunk {
    pub(super) id: String,
    pub(super) relation_id: u32,
    pub(super) key_positions: Vec<usize>,
    /// The selected rows in key order; `None` once a streamed change replaced it.
    pub(super) rows: Vec<Option<Tuple>>,
    pub(super) index: HashMap<KeyText, usize>,
    /// The stream passed the low watermark.
    pub(super) open: bool,
    /// The largest key selected, where the next chunk starts.
    pub(super) end: Option<KeyText>,
}

/// The chunk in flight, DBLog's window; sans-IO.
pub(super) enum Window {
    /// No chunk in flight.
    Idle,
    /// Watermarks written, the stream has not passed the high one yet.
    Pending(Chunk),
    /// Emitted at the high watermark; waiting for Kafka to acknowledge its
    /// transaction (`commit` is its end, once the Commit was read).
    Emitted {
        end: Option<KeyText>,
        commit: Option<Lsn>,
    },
}

impl Window {
    /// A new Relation message for `relation_id`: a pending chunk of it was
    /// selected with the old definition, so it is dropped and read again.
    pub(super) fn relation_changed(&mut self, relation_id: u32) {
        if matches!(self, Window::Pending(c) if c.relation_id == relation_id) {
            tracing::info!(
                relation_id,
                "table definition changed during a chunk window; reading the chunk again"
            );
            *self = Window::Idle;
        }
    }

    /// A streamed change of `relation_id` with these tuples (before and
    /// after images): inside a window, their keys leave the chunk.
    pub(super) fn observe(&mut self, relation_id: u32, tuples: &[&Tuple]) {
        let Window::Pending(chunk) = self else {
            return;
        };
        if !chunk.open || chunk.relation_id != relation_id {
            return;
        }
        for tuple in tuples {
            match key_of(tuple, &chunk.key_positions) {
                Some(key) if key.iter().all(Option::is_some) => {
                    if let Some(&i) = chunk.index.get(&key) {
                        chunk.rows[i] = None;
                    }
                }
                // A key we cannot read (a key column outside the replica
                // identity is null in a delete): any row of the chunk may be
                // the one changed, so the chunk is read again later rather
                // than risk emitting a row older than this change.
                _ => {
                    tracing::debug!(
                        relation_id,
                        "a change without a readable key during a chunk window; reading the chunk again"
                    );
                    *self = Window::Idle;
                    return;
                }
            }
        }
    }

    /// A streamed TRUNCATE of `relation_id`: inside a window, the chunk empties.
    pub(super) fn truncated(&mut self, relation_id: u32) {
        if let Window::Pending(chunk) = self {
            if chunk.open && chunk.relation_id == relation_id {
                chunk.rows.iter_mut().for_each(|r| *r = None);
            }
        }
    }

    /// The Commit of a transaction ending at `end_lsn` was read: the first
    /// after an emitted chunk is its high watermark's.
    pub(super) fn committed(&mut self, end_lsn: Lsn) {
        if let Window::Emitted { commit, .. } = self {
            commit.get_or_insert(end_lsn);
        }
    }

    /// The stream reached the progress row with `kind` for chunk `chunk_id`:
    /// the low watermark opens the window; the high one closes it and
    /// returns the rows no streamed change replaced, to emit now.
    pub(super) fn watermark(
        &mut self,
        kind: &str,
        chunk_id: Option<&str>,
    ) -> Option<(u32, Vec<Tuple>)> {
        let Window::Pending(chunk) = self else {
            return None;
        };
        if chunk_id != Some(chunk.id.as_str()) {
            return None;
        }
        if kind == WINDOW_OPEN {
            chunk.open = true;
        } else if kind == WINDOW_CLOSE && chunk.open {
            let relation_id = chunk.relation_id;
            let rows: Vec<Tuple> = std::mem::take(&mut chunk.rows)
                .into_iter()
                .flatten()
                .collect();
            let end = chunk.end.take();
            *self = Window::Emitted { end, commit: None };
            return Some((relation_id, rows));
        }
        None
    }
}

impl Window {
    /// A read-only chunk's rows go at `position` (the stream passed its
    /// high mark): returns the rows no streamed change replaced, and waits
    /// for Kafka to acknowledge `position`.
    pub(super) fn close_at(&mut self, position: Lsn) -> Option<(u32, Vec<Tuple>)> {
        let Window::Pending(chunk) = self else {
            return None;
        };
        let relation_id = chunk.relation_id;
        let rows = std::mem::take(&mut chunk.rows)
            .into_iter()
            .flatten()
            .collect();
        let end = chunk.end.take();
        *self = Window::Emitted {
            end,
            commit: Some(position),
        };
        Some((relation_id, rows))
    }
}

/// A tuple's key, `None` when a key column is not sent as text.
pub(in crate::pipeline) fn key_of(tuple: &Tuple, positions: &[usize]) -> Option<KeyText> {
    positions
        .iter()
        .map(|&p| match tuple.0.get(p)? {
            Datum::Text(b) => Some(Some(String::from_utf8_lossy(b).into_owned())),
            Datum::Null => Some(None),
            Datum::UnchangedToast | Datum::Binary(_) => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;

    fn text(values: &[&str]) -> Tuple {
        Tuple(
            values
                .iter()
                .map(|v| Datum::Text(Bytes::copy_from_slice(v.as_bytes())))
                .collect(),
        )
    }

    /// A pending chunk of relation 7 with rows keyed 1..=4 (key in column 0).
    fn pending() -> Window {
        let rows: Vec<Tuple> = (1..=4).map(|k| text(&[&k.to_string(), "v"])).collect();
        let index = rows
            .iter()
            .enumerate()
            .map(|(i, t)| (key_of(t, &[0]).expect("key"), i))
            .collect();
        Window::Pending(Chunk {
            id: "c1".into(),
            relation_id: 7,
            key_positions: vec![0],
            rows: rows.into_iter().map(Some).collect(),
            index,
            open: false,
            end: Some(vec![Some("4".into())]),
        })
    }

    fn keys(rows: &[Tuple]) -> Vec<String> {
        rows.iter()
            .map(|t| key_of(t, &[0]).expect("key")[0].clone().expect("not null"))
            .collect()
    }

    #[test]
    fn changes_inside_the_window_win_over_the_chunk() {
        let mut window = pending();
        // Before the low watermark: the select already saw it.
        window.observe(7, &[&text(&["1", "x"])]);
        assert!(
            window.watermark(WINDOW_CLOSE, Some("c1")).is_none(),
            "closing needs an open window"
        );
        assert!(window.watermark(WINDOW_OPEN, Some("other")).is_none());
        window.watermark(WINDOW_OPEN, Some("c1"));
        window.observe(7, &[&text(&["2", "x"])]);
        window.observe(8, &[&text(&["3", "x"])]);
        let old_key = text(&["4", "v"]);
        window.observe(7, &[&old_key, &text(&["9", "v"])]);
        let (relation, rows) = window
            .watermark(WINDOW_CLOSE, Some("c1"))
            .expect("the high watermark emits");
        assert_eq!(relation, 7);
        assert_eq!(
            keys(&rows),
            ["1", "3"],
            "2 and 4 changed in the window; 3 is another table's"
        );
        assert!(matches!(window, Window::Emitted { commit: None, .. }));
        window.committed(Lsn::new(100));
        window.committed(Lsn::new(200));
        assert!(matches!(window, Window::Emitted { commit: Some(l), .. } if l == Lsn::new(100)));
    }

    #[test]
    fn unreadable_keys_truncates_and_new_definitions_reset_the_window() {
        let mut window = pending();
        window.watermark(WINDOW_OPEN, Some("c1"));
        window.observe(7, &[&Tuple(vec![Datum::Null, Datum::Null])]);
        assert!(
            matches!(window, Window::Idle),
            "a null key may be any row: read again"
        );

        let mut window = pending();
        window.watermark(WINDOW_OPEN, Some("c1"));
        window.truncated(7);
        let (_, rows) = window.watermark(WINDOW_CLOSE, Some("c1")).expect("closes");
        assert!(
            rows.is_empty(),
            "a truncate in the window empties the chunk"
        );

        let mut window = pending();
        window.relation_changed(8);
        assert!(matches!(window, Window::Pending(_)));
        window.relation_changed(7);
        assert!(
            matches!(window, Window::Idle),
            "rows of the old definition are read again"
        );
    }

    #[test]
    fn a_read_only_chunk_closes_at_a_position_without_watermarks() {
        let mut window = pending();
        if let Window::Pending(chunk) = &mut window {
            chunk.open = true;
        }
        window.observe(7, &[&text(&["3", "x"])]);
        let (relation, rows) = window.close_at(Lsn::new(500)).expect("closes");
        assert_eq!(
            (relation, keys(&rows)),
            (7, vec!["1".into(), "2".into(), "4".into()])
        );
        assert!(matches!(window, Window::Emitted { commit: Some(l), .. } if l == Lsn::new(500)));
        assert!(
            window.close_at(Lsn::new(600)).is_none(),
            "only a pending chunk closes"
        );
    }

    #[test]
    fn keys_are_read_from_text_datums() {
        let tuple = Tuple(vec![
            Datum::Text(Bytes::from_static(b"7")),
            Datum::Null,
            Datum::Text(Bytes::from_static(b"x")),
        ]);
        assert_eq!(
            key_of(&tuple, &[0, 1]),
            Some(vec![Some("7".to_owned()), None])
        );
        let toasted = Tuple(vec![Datum::UnchangedToast]);
        assert_eq!(key_of(&toasted, &[0]), None);
    }
}
