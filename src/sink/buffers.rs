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
//! no buffer larger than [`LARGEST_KEPT`]: a rare huge value does not pin
//! its memory. Buffers in flight are bounded by the in-flight byte bound.

use std::sync::{Mutex, PoisonError};

/// Idle buffers kept at most, in bytes of capacity.
pub const IDLE_BYTES: usize = 16 * 1024 * 1024;
/// Buffers larger than this are freed rather than kept.
pub const LARGEST_KEPT: usize = 256 * 1024;

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
    pub fn give(&self, mut buffer: Vec<u8>) {
        let capacity = buffer.capacity();
        if capacity == 0 || capacity > LARGEST_KEPT {
            return;
        }
        buffer.clear();
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        if idle.bytes + capacity <= IDLE_BYTES {
            idle.bytes += capacity;
            idle.buffers.push(buffer);
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

/// [`Pool::take`] of the process's pool.
pub fn take(capacity: usize) -> Vec<u8> {
    POOL.take(capacity)
}

/// [`Pool::give`] to the process's pool.
pub fn give(buffer: Vec<u8>) {
    POOL.give(buffer);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_given_back_is_taken_again_empty() {
        let pool = Pool::new();
        let mut buffer = pool.take(100);
        assert!(buffer.capacity() >= 100);
        buffer.extend_from_slice(b"a record");
        let at = buffer.as_ptr();
        pool.give(buffer);
        assert_eq!(pool.idle().0, 1);
        let again = pool.take(50);
        assert_eq!((again.as_ptr(), again.len()), (at, 0));
        assert_eq!(pool.idle(), (0, 0));
    }

    #[test]
    fn a_buffer_too_small_is_replaced() {
        let pool = Pool::new();
        pool.give(Vec::with_capacity(10));
        let buffer = pool.take(1000);
        assert!(buffer.capacity() >= 1000);
        assert_eq!(pool.idle(), (0, 0), "the small one is freed");
    }

    #[test]
    fn idle_memory_is_bounded() {
        let pool = Pool::new();
        pool.give(Vec::with_capacity(LARGEST_KEPT + 1));
        assert_eq!(pool.idle(), (0, 0), "too large to keep");
        let n = IDLE_BYTES / LARGEST_KEPT;
        for _ in 0..n + 3 {
            pool.give(Vec::with_capacity(LARGEST_KEPT));
        }
        let (count, bytes) = pool.idle();
        assert!(bytes <= IDLE_BYTES, "{bytes} bytes kept");
        assert_eq!(count, bytes / LARGEST_KEPT);
        assert!(count >= n - 1, "kept up to the bound: {count}");
    }
}
