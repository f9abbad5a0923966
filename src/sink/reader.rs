//! The consumer the connector reads its own topics with (the tails of the
//! data topics, the progress topic).
//!
//! Dropping it takes about 0.1 s: rust-rdkafka closes a consumer that has
//! a `group.id` (librdkafka's `assign` needs one) by polling in 100 ms
//! steps for a close that takes a few milliseconds. Closing it first in
//! 1 ms polls saved that, but then rust-rdkafka's drop closed it a second
//! time and logged `Failed to close consumer queue on drop` at ERROR on
//! every exit; dropping it on a thread of its own would race the
//! process's exit (and TLS's cleanup) with librdkafka's. So the close is
//! rust-rdkafka's, and each read of the tails makes its own consumer and
//! drops it on its blocking thread after answering
//! (`sink::at_least_once`): the close then overlaps the stream.

use rdkafka::consumer::BaseConsumer;

use super::client_log::LoggingContext;

/// A consumer of the connector's own topics.
pub type Reader = BaseConsumer<LoggingContext>;
