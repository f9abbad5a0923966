//! The stream side of read-only incremental snapshots: a window's chunks
//! (read by [`super::chunk_read`]) are emitted once the stream passed their
//! high mark. The reasoning is in [`super::read_only`]; it holds for any
//! number of tables read under the snapshot, since a streamed change is
//! placed against the snapshot, whatever its table.

use super::window::Window;
use super::Incremental;
use crate::pipeline::stream::Stream;
use crate::pipeline::PipelineError;

impl Stream<'_> {
    /// The stream passed the read-only window's high mark: its chunks' rows
    /// go now, in a transaction of their own at the position read (as the
    /// kafka channel's blocking snapshot's do), so the slot is not confirmed
    /// past it before Kafka has them.
    pub(super) async fn emit_read_only_chunk(
        &mut self,
        inc: &mut Incremental,
    ) -> Result<(), PipelineError> {
        let passed = (inc.read_only.as_ref()).is_some_and(|r| r.passed_high_mark(self.received));
        if !passed {
            return Ok(());
        }
        let position = self.received;
        let Some(closed) = inc.window.close_at(position) else {
            return Ok(());
        };
        if let Some(streamed) = inc.read_only.as_mut() {
            streamed.high = None;
        }
        inc.chunks_emitted(&closed, &self.notifier);
        let txn = self.delivery.begin();
        self.delivery.open_batch()?;
        let source = (position, txn, 0, crate::event::now_micros());
        for chunk in &closed {
            self.emit_chunk(chunk.relation_id, &chunk.rows, source)
                .await?;
        }
        self.delivery.commit(txn, position);
        debug_assert!(matches!(
            inc.window,
            Window::Emitted {
                commit: Some(_),
                ..
            }
        ));
        Ok(())
    }
}
