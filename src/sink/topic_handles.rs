//! The producer's topic handles: each topic looked up once per thread, not
//! once per message.
//!
//! A record that names its topic (`BaseProducer::send`) has rust-rdkafka
//! copy the name into a C string and librdkafka look the topic up, under
//! the client's write lock, by comparing the name with every topic the
//! client knows: a cost that grows with the pipeline's tables
//! (`cargo bench --bench enqueue`). A handle (librdkafka's
//! `rd_kafka_topic_t`, `BaseProducer::topic`) is that lookup done once.
//!
//! Each thread keeps its own handles: a send then takes no lock and writes
//! nothing that another core reads. A thread's handles go with the sink
//! (`ThreadLocal` owns every thread's), before the producer they keep alive.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

use foldhash::fast::RandomState;
use rdkafka::error::KafkaError;
use rdkafka::producer::{BaseProducer, BaseRecord, ProducerContext, ProducerTopic};
use thread_local::ThreadLocal;

/// A record as the sink hands it over.
type Record<'a, C> = BaseRecord<'a, [u8], [u8], <C as ProducerContext>::DeliveryOpaque>;

/// One thread's handles, by topic name.
type Handles<C> = HashMap<Box<str>, ProducerTopic<C>, RandomState>;

/// The handles of one producer's topics, by name, per thread.
pub(super) struct TopicHandles<C: ProducerContext + 'static> {
    producer: Arc<BaseProducer<C>>,
    threads: ThreadLocal<RefCell<Handles<C>>>,
}

impl<C: ProducerContext + 'static> TopicHandles<C> {
    pub(super) fn new(producer: Arc<BaseProducer<C>>) -> Self {
        TopicHandles {
            producer,
            threads: ThreadLocal::new(),
        }
    }

    /// Hands `record` to the producer through this thread's handle on its
    /// topic, made on first use. A name librdkafka refuses gets no handle:
    /// the record is then sent by name, and refused with librdkafka's
    /// reason.
    #[allow(clippy::result_large_err)] // rust-rdkafka's own send returns the record
    pub(super) fn send<'a>(
        &self,
        record: Record<'a, C>,
    ) -> Result<(), (KafkaError, Record<'a, C>)> {
        let topic = record.topic;
        let mut handles = self.threads.get_or_default().borrow_mut();
        if let Some(handle) = handles.get(topic) {
            return self.producer.send_to(handle, record);
        }
        match self.producer.topic(topic) {
            Ok(handle) => {
                let handle = handles.entry(topic.into()).or_insert(handle);
                self.producer.send_to(handle, record)
            }
            Err(_) => self.producer.send(record),
        }
    }

    /// How many handles this thread holds.
    #[cfg(test)]
    fn held(&self) -> usize {
        self.threads.get().map_or(0, |h| h.borrow().len())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use rdkafka::config::ClientConfig;
    use rdkafka::message::Message;
    use rdkafka::producer::{DeliveryResult, Producer, PurgeConfig};
    use rdkafka::types::RDKafkaErrorCode;
    use rdkafka::ClientContext;

    use super::*;

    /// Keeps the topic of every delivery report.
    #[derive(Default)]
    struct Topics(Mutex<Vec<String>>);

    impl ClientContext for Topics {}

    impl ProducerContext for Topics {
        type DeliveryOpaque = ();

        fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
            let topic = match result {
                Ok(message) => message.topic(),
                Err((_, message)) => message.topic(),
            };
            self.0.lock().unwrap().push(topic.to_owned());
        }
    }

    /// A producer without a broker: what it is given stays queued.
    fn producer() -> Arc<BaseProducer<Topics>> {
        let producer = ClientConfig::new()
            .set("log_level", "0")
            .create_with_context(Topics::default())
            .expect("producer");
        Arc::new(producer)
    }

    /// The topics of the records `producer` holds, purged and reported.
    fn purged(producer: &BaseProducer<Topics>) -> Vec<String> {
        producer.purge(PurgeConfig::default().queue().inflight());
        while producer.in_flight_count() > 0 {
            producer.poll(std::time::Duration::ZERO);
        }
        std::mem::take(&mut producer.context().0.lock().unwrap())
    }

    fn send(handles: &TopicHandles<Topics>, topic: &str) -> Result<(), KafkaError> {
        let record = BaseRecord::to(topic).payload(&b"v"[..]);
        handles.send(record).map_err(|(e, _)| e)
    }

    #[test]
    fn each_record_goes_to_its_topic_through_one_handle_per_name() {
        let producer = producer();
        let handles = TopicHandles::new(Arc::clone(&producer));
        let (a, b) = ("app.public.a", "app.public.b");
        // The same name in another allocation is the same topic.
        let a_again = String::from("app.public.a");
        for topic in [a, b, &a_again, b, a] {
            send(&handles, topic).expect("queued");
        }
        assert_eq!(handles.held(), 2);
        // A purge reports one topic's records after the other's.
        let mut topics = purged(&producer);
        topics.sort();
        assert_eq!(
            topics,
            [
                "app.public.a",
                "app.public.a",
                "app.public.a",
                "app.public.b",
                "app.public.b"
            ]
        );
    }

    #[test]
    fn every_thread_has_handles_of_its_own() {
        let producer = producer();
        let handles = TopicHandles::new(Arc::clone(&producer));
        let topic = "app.public.a";
        send(&handles, topic).expect("queued");
        std::thread::scope(|scope| {
            scope.spawn(|| {
                assert_eq!(handles.held(), 0);
                send(&handles, topic).expect("queued");
                assert_eq!(handles.held(), 1);
            });
        });
        assert_eq!(handles.held(), 1);
        assert_eq!(purged(&producer), ["app.public.a", "app.public.a"]);
    }

    #[test]
    fn a_name_librdkafka_refuses_is_refused_with_its_reason_and_gets_no_handle() {
        let producer = producer();
        let handles = TopicHandles::new(Arc::clone(&producer));
        // librdkafka takes topic names of at most 512 bytes.
        let long = "t".repeat(513);
        let error = send(&handles, &long).expect_err("refused");
        assert_eq!(
            error,
            KafkaError::MessageProduction(RDKafkaErrorCode::InvalidArgument)
        );
        assert_eq!(handles.held(), 0);
        assert!(purged(&producer).is_empty());
    }

    #[test]
    fn a_handle_takes_only_records_of_its_own_topic_and_producer() {
        let (producer, other) = (producer(), producer());
        let handle = producer.topic("app.public.a").expect("a handle");
        let refused = |result: Result<(), (KafkaError, Record<'_, Topics>)>| {
            let (error, _) = result.expect_err("refused");
            assert_eq!(
                error,
                KafkaError::MessageProduction(RDKafkaErrorCode::InvalidArgument)
            );
        };
        let record = BaseRecord::<[u8], [u8]>::to("app.public.b").payload(&b"v"[..]);
        refused(producer.send_to(&handle, record));
        let record = BaseRecord::<[u8], [u8]>::to("app.public.a").payload(&b"v"[..]);
        refused(other.send_to(&handle, record));
        assert!(purged(&producer).is_empty());
        assert!(purged(&other).is_empty());
    }
}
