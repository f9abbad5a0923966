//! What handing one record to librdkafka costs, by how the topic is
//! given, as the number of topics the producer knows grows (one per
//! captured table), on one core:
//!
//! - by name (`BaseProducer::send`): rust-rdkafka copies the name into a C
//!   string, librdkafka finds the topic under its client's write lock by
//!   comparing the name with each topic it knows;
//! - by handle (`BaseProducer::send_to`), found by name in a map, as the
//!   sink does (`src/sink/topic_handles.rs`).
//!
//! The producer has no broker, so records only queue; each sample's are
//! purged afterwards, untimed. The record is workload (a)'s size in Avro
//! (about 150 bytes), so that the topic's share shows.
//!
//! `cargo bench --bench enqueue`

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer, ProducerTopic, PurgeConfig};
use rdkafka::ClientConfig;

const PAYLOAD: [u8; 150] = [b'x'; 150];

fn producer() -> Arc<BaseProducer> {
    let producer: BaseProducer = ClientConfig::new()
        // No broker: records stay queued until purged.
        .set("queue.buffering.max.messages", "2147483647")
        .set("queue.buffering.max.kbytes", "2147483647")
        .set("log_level", "0")
        .create()
        .expect("a producer");
    Arc::new(producer)
}

/// Purges what `producer` holds and serves the purge's reports.
fn purge(producer: &BaseProducer) {
    producer.purge(PurgeConfig::default().queue().inflight());
    while producer.in_flight_count() > 0 {
        producer.poll(Duration::ZERO);
    }
}

fn enqueue(c: &mut Criterion) {
    let producer = producer();
    let mut group = c.benchmark_group("enqueue");
    group.throughput(Throughput::Elements(1));
    for topics in [1, 10, 100, 500] {
        let names: Vec<Arc<str>> = (0..topics)
            .map(|i| format!("app.public.table_{i:04}").into())
            .collect();
        let handles: HashMap<Arc<str>, ProducerTopic, foldhash::fast::RandomState> = names
            .iter()
            .map(|name| (Arc::clone(name), producer.topic(name).expect("a handle")))
            .collect();
        let run = |by_handle: bool, iters: u64| {
            let started = Instant::now();
            for i in 0..iters as usize {
                let name = &names[i % topics];
                let record = BaseRecord::<[u8], [u8]>::to(name).payload(&PAYLOAD[..]);
                let sent = if by_handle {
                    producer.send_to(&handles[&**name], record)
                } else {
                    producer.send(record)
                };
                sent.map_err(|(e, _)| e).expect("queued");
            }
            let took = started.elapsed();
            purge(&producer);
            took
        };
        group.bench_function(BenchmarkId::new("by name", topics), |b| {
            b.iter_custom(|iters| run(false, iters))
        });
        group.bench_function(BenchmarkId::new("by handle", topics), |b| {
            b.iter_custom(|iters| run(true, iters))
        });
    }
    group.finish();
}

criterion_group!(benches, enqueue);
criterion_main!(benches);
