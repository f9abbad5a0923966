//! The window in flight between its watermarks (DBLog's), sans-IO: which
//! selected rows streamed changes replace, and what the high watermark
//! emits. A window holds one chunk of each table read in it (up to
//! `--incremental-snapshot-tables-in-flight`); a streamed change touches
//! only the chunk of its own relation. See the parent module for the
//! algorithm.

use std::collections::HashMap;

use crate::lsn::Lsn;
use crate::source::pgoutput::{Datum, Tuple};
use crate::source::signal::{KeyText, WINDOW_CLOSE, WINDOW_OPEN};

/// One table's chunk in a window.
pub(super) struct Chunk {
    /// `schema.table`, as the progress names it.
    pub(super) table: String,
    pub(super) relation_id: u32,
    pub(super) key_positions: Vec<usize>,
    /// The selected rows in key order; `None` once a streamed change replaced it.
    pub(super) rows: Vec<Option<Tuple>>,
    pub(super) index: HashMap<KeyText, usize>,
    /// The largest key selected, where the table's next chunk starts;
    /// `None` for its last chunk.
    pub(super) end: Option<KeyText>,
}

/// A chunk the window's close hands over: the rows no streamed change
/// replaced, to emit now.
pub(in crate::pipeline) struct Closed {
    pub(in crate::pipeline) table: String,
    pub(in crate::pipeline) relation_id: u32,
    pub(in crate::pipeline) rows: Vec<Tuple>,
    pub(in crate::pipeline) end: Option<KeyText>,
}

/// Where an emitted chunk ends, until Kafka acknowledges it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ChunkEnd {
    pub(super) table: String,
    pub(super) end: Option<KeyText>,
}

/// Which pending chunks a streamed change touches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Reach {
    /// Those of an open window (the stream passed the low watermark).
    Open,
    /// Any pending one: the chunks' snapshot did not see the change's
    /// transaction, so it is newer than their rows wherever it is streamed
    /// ([`super::visibility`]).
    Unseen,
}

/// The window in flight, DBLog's; sans-IO.
pub(super) enum Window {
    /// No window in flight.
    Idle,
    /// Watermarks written (read-only: the chunks read), the stream has not
    /// passed the high one yet.
    Pending {
        id: String,
        /// The stream passed the low watermark.
        open: bool,
        /// One per table, each of another relation.
        chunks: Vec<Chunk>,
    },
    /// Emitted at the high watermark; waiting for Kafka to acknowledge its
    /// transaction (`commit` is its end, once the Commit was read).
    Emitted {
        ends: Vec<ChunkEnd>,
        commit: Option<Lsn>,
    },
}

impl Window {
    /// Drops the pending chunk of `relation_id` (it is read again in a
    /// later window); the window goes on with the others, if any.
    fn drop_chunk(&mut self, relation_id: u32) {
        if let Window::Pending { chunks, .. } = self {
            chunks.retain(|c| c.relation_id != relation_id);
            if chunks.is_empty() {
                *self = Window::Idle;
            }
        }
    }

    /// A new Relation message for `relation_id`: a pending chunk of it was
    /// selected with the old definition, so it is dropped and read again.
    pub(super) fn relation_changed(&mut self, relation_id: u32) {
        let Window::Pending { chunks, .. } = self else {
            return;
        };
        if chunks.iter().any(|c| c.relation_id == relation_id) {
            tracing::info!(
                relation_id,
                "table definition changed during a chunk window; reading the chunk again"
            );
            self.drop_chunk(relation_id);
        }
    }

    /// The pending chunk of `relation_id`, if a change with `reach`
    /// touches it.
    fn chunk_in_reach(&mut self, reach: Reach, relation_id: u32) -> Option<&mut Chunk> {
        match self {
            Window::Pending { open, chunks, .. } if *open || reach == Reach::Unseen => {
                chunks.iter_mut().find(|c| c.relation_id == relation_id)
            }
            _ => None,
        }
    }

    /// A streamed change of `relation_id` with these tuples (before and
    /// after images): inside a window (or before it, when the chunk's
    /// snapshot did not see it: `reach`), their keys leave its chunk.
    pub(super) fn observe(&mut self, reach: Reach, relation_id: u32, tuples: &[&Tuple]) {
        let Some(chunk) = self.chunk_in_reach(reach, relation_id) else {
            return;
        };
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
                    self.drop_chunk(relation_id);
                    return;
                }
            }
        }
    }

    /// A streamed TRUNCATE of `relation_id`: inside a window (or before
    /// it: `reach`), its chunk empties.
    pub(super) fn truncated(&mut self, reach: Reach, relation_id: u32) {
        if let Some(chunk) = self.chunk_in_reach(reach, relation_id) {
            chunk.rows.iter_mut().for_each(|r| *r = None);
        }
    }

    /// `stop-snapshot` of `tables`: their chunks leave the window, pending
    /// or emitted (an acknowledgement must not record a stopped table,
    /// which a later signal may request again from its beginning).
    pub(super) fn forget(&mut self, tables: &[String]) {
        match self {
            Window::Idle => {}
            Window::Pending { chunks, .. } => {
                chunks.retain(|c| !tables.contains(&c.table));
                if chunks.is_empty() {
                    *self = Window::Idle;
                }
            }
            Window::Emitted { ends, .. } => ends.retain(|e| !tables.contains(&e.table)),
        }
    }

    /// The Commit of a transaction ending at `end_lsn` was read: the first
    /// after an emitted window is its high watermark's.
    pub(super) fn committed(&mut self, end_lsn: Lsn) {
        if let Window::Emitted { commit, .. } = self {
            commit.get_or_insert(end_lsn);
        }
    }

    /// The stream reached the progress row with `kind` for window `id`:
    /// the low watermark opens the window; the high one closes it and
    /// returns, per chunk, the rows no streamed change replaced.
    pub(super) fn watermark(&mut self, kind: &str, id: Option<&str>) -> Option<Vec<Closed>> {
        let Window::Pending {
            id: pending, open, ..
        } = self
        else {
            return None;
        };
        if id != Some(pending.as_str()) {
            return None;
        }
        if kind == WINDOW_OPEN {
            *open = true;
        } else if kind == WINDOW_CLOSE && *open {
            return self.close(None);
        }
        None
    }

    /// Closes a pending window: its chunks' remaining rows, and the window
    /// waits for Kafka to acknowledge `commit`.
    fn close(&mut self, commit: Option<Lsn>) -> Option<Vec<Closed>> {
        let Window::Pending { chunks, .. } = self else {
            return None;
        };
        let closed: Vec<Closed> = std::mem::take(chunks)
            .into_iter()
            .map(|chunk| Closed {
                table: chunk.table,
                relation_id: chunk.relation_id,
                rows: chunk.rows.into_iter().flatten().collect(),
                end: chunk.end,
            })
            .collect();
        let ends = closed
            .iter()
            .map(|c| ChunkEnd {
                table: c.table.clone(),
                end: c.end.clone(),
            })
            .collect();
        *self = Window::Emitted { ends, commit };
        Some(closed)
    }

    /// A read-only window's rows go at `position` (the stream passed its
    /// high mark): returns the rows no streamed change replaced, and waits
    /// for Kafka to acknowledge `position`.
    pub(super) fn close_at(&mut self, position: Lsn) -> Option<Vec<Closed>> {
        self.close(Some(position))
    }
}

/// A tuple's key, `None` when a key column is not sent as text.
pub(in crate::pipeline) fn key_of(tuple: &Tuple, positions: &[usize]) -> Option<KeyText> {
    positions
        .iter()
        .map(|&p| match tuple.get(p)? {
            Datum::Text(b) => Some(Some(String::from_utf8_lossy(b).into_owned())),
            Datum::Null => Some(None),
            Datum::UnchangedToast | Datum::Binary(_) => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(values: &[&str]) -> Tuple {
        Tuple::new(values.iter().map(|v| Datum::Text(v.as_bytes())))
    }

    /// A chunk of `table`, relation `relation_id`, rows keyed `keys` (key
    /// in column 0), ending at the last key.
    fn chunk(table: &str, relation_id: u32, keys: std::ops::RangeInclusive<i32>) -> Chunk {
        let rows: Vec<Tuple> = keys.map(|k| text(&[&k.to_string(), "v"])).collect();
        let index = rows
            .iter()
            .enumerate()
            .map(|(i, t)| (key_of(t, &[0]).expect("key"), i))
            .collect();
        let end = rows.last().and_then(|t| key_of(t, &[0]));
        Chunk {
            table: table.into(),
            relation_id,
            key_positions: vec![0],
            rows: rows.into_iter().map(Some).collect(),
            index,
            end,
        }
    }

    /// A pending window "c1" of relation 7 with rows keyed 1..=4.
    fn pending() -> Window {
        Window::Pending {
            id: "c1".into(),
            open: false,
            chunks: vec![chunk("public.a", 7, 1..=4)],
        }
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
        window.observe(Reach::Open, 7, &[&text(&["1", "x"])]);
        assert!(
            window.watermark(WINDOW_CLOSE, Some("c1")).is_none(),
            "closing needs an open window"
        );
        assert!(window.watermark(WINDOW_OPEN, Some("other")).is_none());
        window.watermark(WINDOW_OPEN, Some("c1"));
        window.observe(Reach::Open, 7, &[&text(&["2", "x"])]);
        window.observe(Reach::Open, 8, &[&text(&["3", "x"])]);
        let old_key = text(&["4", "v"]);
        window.observe(Reach::Open, 7, &[&old_key, &text(&["9", "v"])]);
        let closed = window
            .watermark(WINDOW_CLOSE, Some("c1"))
            .expect("the high watermark emits");
        assert_eq!(closed.len(), 1);
        assert_eq!(closed[0].relation_id, 7);
        assert_eq!(
            keys(&closed[0].rows),
            ["1", "3"],
            "2 and 4 changed in the window; 3 is another table's"
        );
        assert!(matches!(window, Window::Emitted { commit: None, .. }));
        window.committed(Lsn::new(100));
        window.committed(Lsn::new(200));
        assert!(matches!(window, Window::Emitted { commit: Some(l), .. } if l == Lsn::new(100)));
    }

    #[test]
    fn changes_the_snapshot_did_not_see_win_before_the_low_watermark_too() {
        let mut window = pending();
        // Committed in the WAL before the low watermark, invisible to the
        // select: its key leaves the chunk although the window is not open.
        window.observe(Reach::Unseen, 7, &[&text(&["2", "x"])]);
        window.truncated(Reach::Open, 7);
        window.watermark(WINDOW_OPEN, Some("c1"));
        let closed = window.watermark(WINDOW_CLOSE, Some("c1")).expect("closes");
        assert_eq!(
            keys(&closed[0].rows),
            ["1", "3", "4"],
            "2 left the chunk; a seen TRUNCATE before the low watermark did nothing"
        );
        window.observe(Reach::Unseen, 7, &[&text(&["1", "x"])]);
        assert!(
            matches!(window, Window::Emitted { .. }),
            "an emitted window is past reach"
        );
    }

    #[test]
    fn a_window_of_several_tables_keeps_each_tables_changes_to_its_chunk() {
        let mut window = Window::Pending {
            id: "w".into(),
            open: false,
            chunks: vec![
                chunk("public.a", 7, 1..=4),
                chunk("public.b", 8, 1..=3),
                chunk("public.c", 9, 1..=2),
            ],
        };
        window.observe(Reach::Open, 8, &[&text(&["1", "x"])]);
        window.watermark(WINDOW_OPEN, Some("w"));
        // Key 2 of a, key 3 of b, and a delete then reinsert of c's 1.
        window.observe(Reach::Open, 7, &[&text(&["2", "x"])]);
        window.observe(Reach::Open, 8, &[&text(&["3", "x"])]);
        window.observe(Reach::Open, 9, &[&text(&["1", "v"])]);
        window.observe(Reach::Open, 9, &[&text(&["1", "y"])]);
        // A new definition of b: its chunk is read again, the others go on.
        window.relation_changed(8);
        window.truncated(Reach::Open, 10);
        let closed = window.watermark(WINDOW_CLOSE, Some("w")).expect("closes");
        let by_table: Vec<(&str, Vec<String>, Option<KeyText>)> = closed
            .iter()
            .map(|c| (c.table.as_str(), keys(&c.rows), c.end.clone()))
            .collect();
        assert_eq!(
            by_table,
            [
                (
                    "public.a",
                    vec!["1".into(), "3".into(), "4".into()],
                    Some(vec![Some("4".into())])
                ),
                ("public.c", vec!["2".into()], Some(vec![Some("2".into())])),
            ],
            "each change removed its key from its own table's chunk only"
        );
        let Window::Emitted { ends, .. } = &window else {
            panic!("emitted");
        };
        assert_eq!(
            ends.iter().map(|e| e.table.as_str()).collect::<Vec<_>>(),
            ["public.a", "public.c"],
            "b's dropped chunk is not recorded"
        );
    }

    #[test]
    fn stopped_tables_leave_the_window_pending_or_emitted() {
        let mut window = Window::Pending {
            id: "w".into(),
            open: true,
            chunks: vec![chunk("public.a", 7, 1..=2), chunk("public.b", 8, 1..=2)],
        };
        window.forget(&["public.a".into()]);
        window.observe(Reach::Open, 8, &[&text(&["1", "x"])]);
        let closed = window.close_at(Lsn::new(10)).expect("closes");
        assert_eq!(closed.len(), 1);
        assert_eq!(
            (closed[0].table.as_str(), keys(&closed[0].rows)),
            ("public.b", vec!["2".into()])
        );
        window.forget(&["public.b".into()]);
        assert!(matches!(&window, Window::Emitted { ends, .. } if ends.is_empty()));
        let mut window = pending();
        window.forget(&["public.a".into()]);
        assert!(matches!(window, Window::Idle), "no chunk left: no window");
    }

    #[test]
    fn unreadable_keys_truncates_and_new_definitions_reset_the_window() {
        let mut window = pending();
        window.watermark(WINDOW_OPEN, Some("c1"));
        window.observe(Reach::Open, 7, &[&Tuple::new([Datum::Null, Datum::Null])]);
        assert!(
            matches!(window, Window::Idle),
            "a null key may be any row: read again"
        );

        let mut window = pending();
        window.watermark(WINDOW_OPEN, Some("c1"));
        window.truncated(Reach::Open, 7);
        let closed = window.watermark(WINDOW_CLOSE, Some("c1")).expect("closes");
        assert!(
            closed[0].rows.is_empty(),
            "a truncate in the window empties the chunk"
        );

        let mut window = pending();
        window.relation_changed(8);
        assert!(matches!(window, Window::Pending { .. }));
        window.relation_changed(7);
        assert!(
            matches!(window, Window::Idle),
            "rows of the old definition are read again"
        );
    }

    #[test]
    fn a_read_only_chunk_closes_at_a_position_without_watermarks() {
        let mut window = pending();
        if let Window::Pending { open, .. } = &mut window {
            *open = true;
        }
        window.observe(Reach::Open, 7, &[&text(&["3", "x"])]);
        let closed = window.close_at(Lsn::new(500)).expect("closes");
        assert_eq!(
            (closed[0].relation_id, keys(&closed[0].rows)),
            (7, vec!["1".into(), "2".into(), "4".into()])
        );
        assert!(matches!(window, Window::Emitted { commit: Some(l), .. } if l == Lsn::new(500)));
        assert!(
            window.close_at(Lsn::new(600)).is_none(),
            "only a pending window closes"
        );
    }

    #[test]
    fn keys_are_read_from_text_datums() {
        let tuple = Tuple::new([Datum::Text(b"7"), Datum::Null, Datum::Text(b"x")]);
        assert_eq!(
            key_of(&tuple, &[0, 1]),
            Some(vec![Some("7".to_owned()), None])
        );
        let toasted = Tuple::new([Datum::UnchangedToast]);
        assert_eq!(key_of(&toasted, &[0]), None);
    }
}
