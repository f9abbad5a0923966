//! Record value buffers, reused: the encoder writes each record's value
//! into one ([`take`]), librdkafka reads it from there until the record's
//! delivery report (`pgcdc_produce` lends it without a copy), and the
//! report hands it back here ([`give`]) for a later record.
//!
//! # Why
//!
//! Values are most of the connector's memory: up to `--max-in-flight-bytes`
//! of them wait for Kafka's acknowledgement. They are allocated on the
//! runtime's worker threads and freed on librdkafka's polling thread, and
//! glibc's malloc returns a freed block to the arena of the thread that
//! allocated it: as the pipeline's task moves between workers, each
//! worker's arena grew to the whole in-flight bound, and peak RSS reached
//! 1.5-2.5 times it. A buffer that comes back here is reused by whichever
//! thread encodes next, so the values in flight and the idle ones here are
//! all there is; it is also already mapped and cache-warm, where a fresh
//! block of a trimmed heap costs page faults.
//!
//! # Bounds
//!
//! At most [`IDLE_BYTES`] of idle buffers are kept (the rest are freed), and
//! only buffers from [`SMALLEST_KEPT`] to [`LARGEST_KEPT`] bytes: small
//! values (Avro's) cost malloc little, and a rare huge value does not pin
//! its memory. Buffers in flight are bounded by the in-flight byte bound.
//!
//! # Locking
//!
//! Each side goes through a [`Local`] cache that moves buffers to and from
//! the shared pool [`BATCH`] at a time: one lock per batch, not per record,
//! so the polling thread handing back a burst of acknowledged buffers and
//! the encoder taking them seldom meet on the lock.

use std::sync::{Mutex, PoisonError};

/// Idle buffers kept at most, in bytes of capacity.
pub const IDLE_BYTES: usize = 8 * 1024 * 1024;
/// Buffers smaller than this are freed rather than kept.
pub const SMALLEST_KEPT: usize = 1024;
/// Buffers larger than this are freed rather than kept.
pub const LARGEST_KEPT: usize = 256 * 1024;
/// Buffers moved between a [`Local`] cache and the pool at once.
pub const BATCH: usize = 64;

/// The idle buffers of the process (shared by every pipeline: a buffer is
/// plain memory, whichever run filled it).
static POOL: Pool = Pool::new();

/// A free list of byte buffers.
#[derive(Debug)]
pub struct Pool {
    idle: Mutex<Idle>,
}

#[derive(Debug)]
struct Idle {
    buffers: Vec<Vec<u8>>,
    /// Their capacities summed.
    bytes: usize,
}

impl Pool {
    pub const fn new() -> Self {
        Pool {
            idle: Mutex::new(Idle {
                buffers: Vec::new(),
                bytes: 0,
            }),
        }
    }

    /// An empty buffer of at least `capacity` bytes: the one given back
    /// last, or a new one.
    pub fn take(&self, capacity: usize) -> Vec<u8> {
        let reused = {
            let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
            let buffer = idle.buffers.pop();
            if let Some(buffer) = &buffer {
                idle.bytes -= buffer.capacity();
            }
            buffer
        };
        match reused {
            // Too small: a new one, rather than a reallocation that would
            // copy the old contents for nothing.
            Some(buffer) if buffer.capacity() >= capacity => buffer,
            _ => Vec::with_capacity(capacity),
        }
    }

    /// Keeps `buffer` for a later [`Self::take`], within the bounds.
    pub fn give(&self, buffer: Vec<u8>) {
        self.give_all(&mut vec![buffer]);
    }

    /// Moves up to `n` idle buffers into `into` (the last given first).
    fn take_some(&self, into: &mut Vec<Vec<u8>>, n: usize) {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        let from = idle.buffers.len().saturating_sub(n);
        let taken: usize = idle.buffers[from..].iter().map(Vec::capacity).sum();
        idle.bytes -= taken;
        into.extend(idle.buffers.drain(from..).rev());
    }

    /// Keeps what fits of `buffers` (emptied), within the bounds.
    fn give_all(&self, buffers: &mut Vec<Vec<u8>>) {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        for mut buffer in buffers.drain(..) {
            let capacity = buffer.capacity();
            if (SMALLEST_KEPT..=LARGEST_KEPT).contains(&capacity)
                && idle.bytes + capacity <= IDLE_BYTES
            {
                buffer.clear();
                idle.bytes += capacity;
                idle.buffers.push(buffer);
            }
        }
    }

    /// Idle buffers and their bytes, for tests.
    #[cfg(test)]
    fn idle(&self) -> (usize, usize) {
        let idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        (idle.buffers.len(), idle.bytes)
    }
}

impl Default for Pool {
    fn default() -> Self {
        Pool::new()
    }
}

/// One side's cache of the process's pool: takes and gives back buffers a
/// [`BATCH`] at a time.
#[derive(Debug, Default)]
pub struct Local {
    buffers: Vec<Vec<u8>>,
}

impl Local {
    /// An empty buffer of at least `capacity` bytes.
    pub fn take(&mut self, capacity: usize) -> Vec<u8> {
        if self.buffers.is_empty() {
            POOL.take_some(&mut self.buffers, BATCH);
        }
        match self.buffers.pop() {
            // Too small: a new one, rather than a reallocation that would
            // copy the old contents for nothing.
            Some(buffer) if buffer.capacity() >= capacity => buffer,
            _ => Vec::with_capacity(capacity),
        }
    }

    /// Keeps `buffer` for a later take, here or (past a batch) in the pool.
    pub fn give(&mut self, buffer: Vec<u8>) {
        if !(SMALLEST_KEPT..=LARGEST_KEPT).contains(&buffer.capacity()) {
            return;
        }
        self.buffers.push(buffer);
        if self.buffers.len() >= BATCH {
            POOL.give_all(&mut self.buffers);
        }
    }
}

impl Drop for Local {
    fn drop(&mut self) {
        POOL.give_all(&mut self.buffers);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_given_back_is_taken_again_empty() {
        let pool = Pool::new();
        let mut buffer = pool.take(2000);
        assert!(buffer.capacity() >= 2000);
        buffer.extend_from_slice(b"a record");
        let at = buffer.as_ptr();
        pool.give(buffer);
        assert_eq!(pool.idle().0, 1);
        let again = pool.take(1500);
        assert_eq!((again.as_ptr(), again.len()), (at, 0));
        assert_eq!(pool.idle(), (0, 0));
    }

    #[test]
    fn a_buffer_too_small_is_replaced() {
        let pool = Pool::new();
        pool.give(Vec::with_capacity(SMALLEST_KEPT));
        let buffer = pool.take(SMALLEST_KEPT * 2);
        assert!(buffer.capacity() >= SMALLEST_KEPT * 2);
        assert_eq!(pool.idle(), (0, 0), "the small one is freed");
    }

    #[test]
    fn idle_memory_is_bounded() {
        let pool = Pool::new();
        pool.give(Vec::with_capacity(LARGEST_KEPT + 1));
        pool.give(Vec::with_capacity(SMALLEST_KEPT - 1));
        assert_eq!(pool.idle(), (0, 0), "too large or too small to keep");
        let n = IDLE_BYTES / LARGEST_KEPT;
        for _ in 0..n + 3 {
            pool.give(Vec::with_capacity(LARGEST_KEPT));
        }
        let (count, bytes) = pool.idle();
        assert!(bytes <= IDLE_BYTES, "{bytes} bytes kept");
        assert_eq!(count, bytes / LARGEST_KEPT);
        assert!(count >= n - 1, "kept up to the bound: {count}");
    }

    #[test]
    fn local_caches_move_batches_through_the_pool() {
        // The process's pool, shared with other tests: only what this test
        // can tell apart is checked (its buffers' odd capacity).
        const ODD: usize = SMALLEST_KEPT + 7;
        let mut giver = Local::default();
        for _ in 0..BATCH {
            giver.give(Vec::with_capacity(ODD));
        }
        assert!(giver.buffers.is_empty(), "a full batch goes to the pool");
        let mut taker = Local::default();
        let buffer = taker.take(ODD);
        assert!(buffer.capacity() >= ODD && buffer.is_empty());
        assert!(!taker.buffers.is_empty(), "taken a batch at a time");
    }
}
