//! Kafka records handed to librdkafka without a copy of their value.
//!
//! rdkafka's `BaseRecord` always produces with `RD_KAFKA_MSG_F_COPY`:
//! librdkafka allocates a message with room for the value and copies it
//! there, so every record's value is allocated and written twice (a JSON
//! record with embedded schemas is 3-4 kB, and that copy was about a sixth
//! of the connector's CPU). [`Producer::send`] hands librdkafka the value's
//! own buffer instead, and takes it back once librdkafka is done with it.
//!
//! # Who owns the value, when
//!
//! 1. [`Producer::send`] moves the value (a `Vec<u8>`) into a box together
//!    with the caller's per-record opaque ([`Deliveries::Opaque`]) and
//!    passes the box to librdkafka as the message opaque, the value's heap
//!    buffer as the message payload, without `F_COPY` or `F_FREE`: from
//!    then on librdkafka reads the payload and nobody writes it. A `Vec`'s
//!    buffer does not move when the `Vec` (or its box) does.
//! 2. librdkafka reports the message's delivery (acknowledged, failed,
//!    purged) exactly once, through rdkafka's delivery-report handling,
//!    which turns the opaque pointer back into the box. Only then does any
//!    Rust code own the box again; librdkafka no longer reads the payload
//!    (it frees its own copy-carrying messages right after the same report,
//!    so this is its contract for `F_COPY` messages as well).
//! 3. [`Lending`]'s delivery callback gives the caller's opaque to
//!    [`Deliveries::delivery`] (whose delivery result may still read the
//!    payload: the buffer is alive), and only after that returns hands the
//!    buffer to [`Deliveries::recycle`] or drops it.
//! 4. If librdkafka refuses the message ([`Producer::send`] returns
//!    [`Refused`]), it keeps nothing: the box is taken back at once and the
//!    value returned to the caller.
//!
//! Values under [`LEND_FROM`] bytes (Avro records, keys-only tombstones)
//! are copied as before: freeing a buffer on librdkafka's polling thread
//! hands it to the sending thread's malloc arena, whose later small
//! allocations then pay for sorting it, which costs more than a small copy.
//!
//! A message that is never reported (the producer is destroyed with it
//! still queued past rdkafka's purge and flush on drop) leaks its box and
//! buffer; it is never freed while librdkafka could read it.
//!
//! Topics are produced to through handles created once per name
//! (`rd_kafka_topic_new`) instead of by name: librdkafka looks a name up
//! under a lock for every message, and rdkafka allocates a C string of it
//! for every message too. The handles are destroyed before the producer.

use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::ptr::{self, NonNull};
use std::sync::{Mutex, PoisonError};

use rdkafka::bindings as rdsys;
use rdkafka::bindings::rd_kafka_vtype_t as vtype;
use rdkafka::client::{Client, OAuthToken};
use rdkafka::config::{ClientConfig, FromClientConfigAndContext, RDKafkaLogLevel};
use rdkafka::error::{KafkaError, KafkaResult};
use rdkafka::producer::{
    DeliveryResult, NoCustomPartitioner, Producer as _, ProducerContext, ThreadedProducer,
};
use rdkafka::statistics::Statistics;
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{ClientContext, IntoOpaque};

/// What the caller's producer context does with delivery reports; the rest
/// of librdkafka's callbacks come through its [`ClientContext`].
pub trait Deliveries: ClientContext {
    /// What the caller keeps with each record until its delivery report.
    type Opaque: Send + Sync;

    /// A record was delivered or failed for good. `result`'s message still
    /// reads the record's value here.
    fn delivery(&self, result: &DeliveryResult<'_>, opaque: Self::Opaque);

    /// The value buffer of a reported record, after [`Self::delivery`]:
    /// librdkafka is done with it. Dropped by default; a pool may take it.
    fn recycle(&self, value: Vec<u8>) {
        drop(value);
    }
}

/// One record's box while librdkafka holds it: the caller's opaque and the
/// buffer librdkafka reads the payload from. Private: only
/// [`Producer::send`] makes one, so every message of a [`Lending`]
/// producer carries a value owned this way.
pub struct Sent<O> {
    opaque: O,
    value: Option<Vec<u8>>,
}

/// The producer context that owns the values in flight (see the module
/// docs), wrapping the caller's context `C`.
pub struct Lending<C>(C);

impl<C: Deliveries> ClientContext for Lending<C> {
    const ENABLE_REFRESH_OAUTH_TOKEN: bool = C::ENABLE_REFRESH_OAUTH_TOKEN;

    fn log(&self, level: RDKafkaLogLevel, fac: &str, log_message: &str) {
        self.0.log(level, fac, log_message);
    }

    fn stats(&self, statistics: Statistics) {
        self.0.stats(statistics);
    }

    fn stats_raw(&self, statistics: &[u8]) {
        self.0.stats_raw(statistics);
    }

    fn error(&self, error: KafkaError, reason: &str) {
        self.0.error(error, reason);
    }

    fn generate_oauth_token(
        &self,
        oauthbearer_config: Option<&str>,
    ) -> Result<OAuthToken, Box<dyn std::error::Error>> {
        self.0.generate_oauth_token(oauthbearer_config)
    }
}

impl<C: Deliveries> ProducerContext<NoCustomPartitioner> for Lending<C> {
    type DeliveryOpaque = Box<Sent<C::Opaque>>;

    fn delivery(&self, result: &DeliveryResult<'_>, sent: Box<Sent<C::Opaque>>) {
        let Sent { opaque, value } = *sent;
        self.0.delivery(result, opaque);
        // Only now: `result` was the last reader of the payload.
        if let Some(value) = value {
            self.0.recycle(value);
        }
    }
}

/// A record for [`Producer::send`]: the value is moved in (librdkafka reads
/// it until the delivery report); the key and headers are copied by
/// librdkafka during the call.
pub struct Record<'a, N, V> {
    pub topic: &'a str,
    /// `None`: the configured partitioner chooses.
    pub partition: Option<i32>,
    /// `None`: a null key.
    pub key: Option<&'a [u8]>,
    /// `None`: a null value (a tombstone).
    pub value: Option<Vec<u8>>,
    pub headers: &'a [(N, V)],
}

/// A record librdkafka did not take: the value and the opaque come back.
pub struct Refused<O> {
    pub error: KafkaError,
    pub value: Option<Vec<u8>>,
    pub opaque: O,
}

impl<O> std::fmt::Debug for Refused<O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Refused")
            .field("error", &self.error)
            .finish_non_exhaustive()
    }
}

/// A topic handle of the producer's client (`rd_kafka_topic_new`).
struct TopicHandle(NonNull<rdsys::rd_kafka_topic_t>);

// SAFETY: librdkafka's topic handles are reference-counted objects meant to
// be shared between threads (produce calls from any thread take the
// topic's own locks); this one is only used through `Producer`, which
// destroys it before its client.
unsafe impl Send for TopicHandle {}

impl Drop for TopicHandle {
    fn drop(&mut self) {
        // SAFETY: the handle came from `rd_kafka_topic_new` and is destroyed
        // once, here; `Producer::drop` runs this while the client lives.
        unsafe { rdsys::rd_kafka_topic_destroy(self.0.as_ptr()) };
    }
}

/// A threaded librdkafka producer whose records' values are not copied.
pub struct Producer<C: Deliveries + 'static> {
    /// Emptied in `Drop`, before `producer` (and its client) goes.
    topics: Mutex<HashMap<Box<str>, TopicHandle>>,
    producer: ThreadedProducer<Lending<C>>,
}

impl<C: Deliveries + 'static> Producer<C> {
    /// A producer of `config` reporting deliveries to `context`.
    pub fn new(config: &ClientConfig, context: C) -> KafkaResult<Self> {
        Ok(Producer {
            topics: Mutex::new(HashMap::new()),
            producer: ThreadedProducer::from_config_and_context(config, Lending(context))?,
        })
    }

    /// The rdkafka producer, for everything but sending (transactions,
    /// flush, purge, the in-flight count).
    pub fn threaded(&self) -> &ThreadedProducer<Lending<C>> {
        &self.producer
    }

    /// The caller's context.
    pub fn context(&self) -> &C {
        &self.producer.context().0
    }

    /// The rdkafka client.
    pub fn client(&self) -> &Client<Lending<C>> {
        self.producer.client()
    }

    /// Enqueues `record` without waiting, its value lent to librdkafka until
    /// the delivery report (see the module docs); `opaque` comes back with
    /// the report. Refused (a full queue, a fatal producer error, a bad
    /// topic name): nothing is kept, and the value and opaque come back.
    pub fn send<N: AsRef<str>, V: AsRef<[u8]>>(
        &self,
        record: Record<'_, N, V>,
        opaque: C::Opaque,
    ) -> Result<(), Refused<C::Opaque>> {
        let Record {
            topic,
            partition,
            key,
            value,
            headers,
        } = record;
        let rkt = match self.topic(topic) {
            Ok(rkt) => rkt,
            Err(error) => {
                return Err(Refused {
                    error,
                    value,
                    opaque,
                })
            }
        };
        let headers = match Headers::of(headers) {
            Ok(headers) => headers,
            Err(error) => {
                return Err(Refused {
                    error,
                    value,
                    opaque,
                })
            }
        };
        // A small value is copied after all: the copy costs less than
        // freeing the buffer on librdkafka's polling thread, into the
        // sending thread's malloc arena, would.
        let (lent, copied) = match value {
            Some(value) if value.len() < LEND_FROM => (None, Some(value)),
            value => (value, None),
        };
        let sent = Box::new(Sent {
            opaque,
            value: lent,
        });
        // The payload points into the lent value's heap buffer, which stays
        // where it is while the box is librdkafka's (step 1 of the module
        // docs), or into the copied one, which outlives the call.
        let payload = sent
            .value
            .as_deref()
            .or(copied.as_deref())
            .map(|v| (v.as_ptr(), v.len()));
        let flags = if copied.is_some() {
            rdsys::RD_KAFKA_MSG_F_COPY
        } else {
            0
        };
        let opaque = sent.into_ptr();
        let mut vus = [vu(vtype::RD_KAFKA_VTYPE_END, Union { i: 0 }); 7];
        let mut n = 0;
        let mut push = |vtype, u| {
            vus[n] = vu(vtype, u);
            n += 1;
        };
        push(vtype::RD_KAFKA_VTYPE_RKT, Union { rkt });
        push(
            vtype::RD_KAFKA_VTYPE_PARTITION,
            Union {
                i32_: partition.unwrap_or(PARTITION_UNASSIGNED),
            },
        );
        // No F_FREE: a lent buffer is freed after the delivery report.
        push(vtype::RD_KAFKA_VTYPE_MSGFLAGS, Union { i: flags });
        if let Some((ptr, size)) = payload {
            let mem = rdsys::rd_kafka_vu_s__bindgen_ty_1__bindgen_ty_1 {
                ptr: ptr.cast_mut().cast::<c_void>(),
                size,
            };
            push(vtype::RD_KAFKA_VTYPE_VALUE, Union { mem });
        }
        if let Some(key) = key {
            // Keys are always copied into the message (`rd_kafka_msg_new00`).
            let mem = rdsys::rd_kafka_vu_s__bindgen_ty_1__bindgen_ty_1 {
                ptr: key.as_ptr().cast_mut().cast::<c_void>(),
                size: key.len(),
            };
            push(vtype::RD_KAFKA_VTYPE_KEY, Union { mem });
        }
        push(vtype::RD_KAFKA_VTYPE_OPAQUE, Union { ptr: opaque });
        if let Some(list) = headers.ptr() {
            push(vtype::RD_KAFKA_VTYPE_HEADERS, Union { headers: list });
        }
        // SAFETY: `vus[..n]` holds initialized entries whose pointers are
        // valid for the call (the topic handle lives in `self.topics`, the
        // key and headers are borrowed or owned here); the payload and the
        // opaque stay valid until the delivery report (module docs).
        let error = unsafe { rdsys::rd_kafka_produceva(self.native(), vus.as_ptr(), n) };
        if error.is_null() {
            // The message owns the header list now.
            headers.given();
            return Ok(());
        }
        // SAFETY: `error` is the non-null error object produceva returned.
        let code = unsafe { rdsys::rd_kafka_error_code(error) };
        // SAFETY: the same object, destroyed once and not used again.
        unsafe { rdsys::rd_kafka_error_destroy(error) };
        // SAFETY: librdkafka refused the message and kept no reference to
        // its opaque (no delivery report comes for it): the pointer is the
        // box made above, taken back exactly once.
        let sent = unsafe { Box::<Sent<C::Opaque>>::from_ptr(opaque) };
        // `headers` is still ours on failure and is destroyed as it drops.
        Err(Refused {
            error: KafkaError::MessageProduction(RDKafkaErrorCode::from(code)),
            value: sent.value.or(copied),
            opaque: sent.opaque,
        })
    }

    /// The handle of `topic`, created at its first record.
    fn topic(&self, topic: &str) -> KafkaResult<*mut rdsys::rd_kafka_topic_t> {
        let mut topics = self.topics.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(handle) = topics.get(topic) {
            return Ok(handle.0.as_ptr());
        }
        let name = CString::new(topic)?;
        // SAFETY: a live client and a NUL-terminated name; a null
        // configuration takes the producer's default topic settings, as a
        // produce by name does.
        let rkt =
            unsafe { rdsys::rd_kafka_topic_new(self.native(), name.as_ptr(), ptr::null_mut()) };
        let Some(rkt) = NonNull::new(rkt) else {
            // SAFETY: reads librdkafka's thread-local error of the failed call.
            let code = unsafe { rdsys::rd_kafka_last_error() };
            return Err(KafkaError::MessageProduction(RDKafkaErrorCode::from(code)));
        };
        topics.insert(topic.into(), TopicHandle(rkt));
        Ok(rkt.as_ptr())
    }

    fn native(&self) -> *mut rdsys::rd_kafka_t {
        self.producer.client().native_ptr()
    }
}

impl<C: Deliveries + 'static> Drop for Producer<C> {
    fn drop(&mut self) {
        // Topic handles go before the client they belong to.
        self.topics
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }
}

type Union = rdsys::rd_kafka_vu_s__bindgen_ty_1;

/// Values from this many bytes are lent; smaller ones are copied
/// (`RD_KAFKA_MSG_F_COPY`) and their buffer dropped on the sending thread.
pub const LEND_FROM: usize = 1024;

/// `RD_KAFKA_PARTITION_UA`: the partitioner chooses (not in the bindings).
const PARTITION_UNASSIGNED: i32 = -1;

fn vu(vtype: vtype, u: Union) -> rdsys::rd_kafka_vu_t {
    rdsys::rd_kafka_vu_t { vtype, u }
}

/// A header list being handed to librdkafka: destroyed on drop unless
/// [`Headers::given`] says the message took it.
struct Headers(Option<NonNull<rdsys::rd_kafka_headers_t>>);

impl Headers {
    /// The list of `headers` (none for an empty slice): names and values
    /// are copied into it.
    fn of<N: AsRef<str>, V: AsRef<[u8]>>(headers: &[(N, V)]) -> KafkaResult<Self> {
        if headers.is_empty() {
            return Ok(Headers(None));
        }
        // SAFETY: allocates an empty list; never null (librdkafka aborts
        // on allocation failure).
        let list = unsafe { rdsys::rd_kafka_headers_new(headers.len()) };
        let list = Headers(NonNull::new(list));
        let Some(ptr) = list.0 else {
            return Err(KafkaError::MessageProduction(RDKafkaErrorCode::Fail));
        };
        for (name, value) in headers {
            let (name, value) = (name.as_ref(), value.as_ref());
            let (name_len, value_len) = (isize_of(name.len())?, isize_of(value.len())?);
            // SAFETY: a list we own; the name and value are read (copied)
            // during the call, with their lengths given, so neither needs a
            // terminating NUL.
            let err = unsafe {
                rdsys::rd_kafka_header_add(
                    ptr.as_ptr(),
                    name.as_ptr().cast(),
                    name_len,
                    value.as_ptr().cast(),
                    value_len,
                )
            };
            if err != rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
                return Err(KafkaError::MessageProduction(RDKafkaErrorCode::from(err)));
            }
        }
        Ok(list)
    }

    fn ptr(&self) -> Option<*mut rdsys::rd_kafka_headers_t> {
        self.0.map(NonNull::as_ptr)
    }

    /// librdkafka took the list with the message.
    fn given(mut self) {
        self.0 = None;
    }
}

impl Drop for Headers {
    fn drop(&mut self) {
        if let Some(list) = self.0 {
            // SAFETY: a list we made and still own (not given to a message).
            unsafe { rdsys::rd_kafka_headers_destroy(list.as_ptr()) };
        }
    }
}

fn isize_of(len: usize) -> KafkaResult<isize> {
    isize::try_from(len)
        .map_err(|_| KafkaError::MessageProduction(RDKafkaErrorCode::MessageSizeTooLarge))
}

#[cfg(test)]
mod tests;
