//! Against rdkafka's in-process mock cluster: values arrive intact, come
//! back once each after their report, and a refused record gives its value
//! back.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers as _, Message};
use rdkafka::mocking::MockCluster;
use rdkafka::types::RDKafkaErrorCode;

use super::*;

/// Counts reports and keeps the recycled buffers, where the test still
/// reads them once the producer is gone.
#[derive(Default)]
struct Tally {
    delivered: AtomicUsize,
    failed: AtomicUsize,
    /// Each report's opaque, with the payload its message read then.
    reports: Mutex<Vec<(u32, Option<Vec<u8>>)>>,
    recycled: Mutex<Vec<Vec<u8>>>,
}

#[derive(Default)]
struct Counting(Arc<Tally>);

impl ClientContext for Counting {}

impl Deliveries for Counting {
    type Opaque = u32;

    fn delivery(&self, result: &DeliveryResult<'_>, opaque: u32) {
        let message = match result {
            Ok(message) => {
                self.0.delivered.fetch_add(1, Ordering::SeqCst);
                message
            }
            Err((_, message)) => {
                self.0.failed.fetch_add(1, Ordering::SeqCst);
                message
            }
        };
        let payload = message.payload().map(<[u8]>::to_vec);
        self.0.reports.lock().unwrap().push((opaque, payload));
    }

    fn recycle(&self, value: Vec<u8>) {
        self.0.recycled.lock().unwrap().push(value);
    }
}

fn config(bootstrap: &str) -> ClientConfig {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap)
        .set("linger.ms", "0")
        .set("enable.idempotence", "true");
    config
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn value(i: u32) -> Vec<u8> {
    // Some copied (under LEND_FROM), most lent, some past librdkafka's
    // own copy threshold, so both of its ways of writing a payload into a
    // request (copied, referenced) are used.
    let len = match i % 5 {
        0 => 70_000,
        1 => 100 + i as usize,
        _ => 3_000 + i as usize,
    };
    let mut value = Vec::with_capacity(len + 100);
    value.extend((0..len).map(|j| (j as u32).wrapping_mul(31).wrapping_add(i) as u8));
    value
}

#[test]
fn values_arrive_intact_and_come_back_once_after_their_report() {
    let cluster = MockCluster::new(1).expect("mock cluster");
    cluster.create_topic("t", 2, 1).expect("topic");
    let producer = Producer::new(&config(&cluster.bootstrap_servers()), Counting::default())
        .expect("producer");
    const N: u32 = 50;
    for i in 0..N {
        let key = format!("k{i}");
        let headers = [("h1", format!("v{i}").into_bytes()), ("h2", Vec::new())];
        let record = Record {
            topic: "t",
            partition: None,
            key: Some(key.as_bytes()),
            value: Some(value(i)),
            headers: &headers,
        };
        producer.send(record, i).expect("queued");
    }
    // A tombstone: a null value, nothing to recycle.
    let none: [(&str, &[u8]); 0] = [];
    let tombstone = Record {
        topic: "t",
        partition: Some(1),
        key: Some(b"gone".as_slice()),
        value: None,
        headers: &none,
    };
    producer.send(tombstone, N).expect("queued");
    let context = &producer.context().0;
    wait_for("every report", || {
        context.delivered.load(Ordering::SeqCst) == N as usize + 1
    });
    assert_eq!(context.failed.load(Ordering::SeqCst), 0);

    // Each report read its own value, and each buffer came back once.
    let mut reports = context.reports.lock().unwrap().clone();
    reports.sort_by_key(|(i, _)| *i);
    for (i, payload) in &reports[..N as usize] {
        assert_eq!(payload.as_deref(), Some(value(*i).as_slice()), "record {i}");
    }
    assert_eq!(reports[N as usize], (N, None));
    let mut recycled = context.recycled.lock().unwrap().clone();
    recycled.sort_by_key(|v| (v.len(), v.get(1).copied()));
    let mut expected: Vec<_> = (0..N).map(value).filter(|v| v.len() >= LEND_FROM).collect();
    expected.sort_by_key(|v| (v.len(), v.get(1).copied()));
    assert_eq!(recycled, expected);

    // And the broker has them as sent: key, value, headers.
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", cluster.bootstrap_servers())
        .set("group.id", "g")
        .set("auto.offset.reset", "earliest")
        .create()
        .expect("consumer");
    consumer.subscribe(&["t"]).expect("subscribe");
    let mut seen = 0;
    let deadline = Instant::now() + Duration::from_secs(30);
    while seen < N + 1 && Instant::now() < deadline {
        let Some(message) = consumer.poll(Duration::from_millis(100)) else {
            continue;
        };
        let message = message.expect("message");
        seen += 1;
        let key = std::str::from_utf8(message.key().expect("key")).expect("utf-8");
        if key == "gone" {
            assert_eq!(message.payload(), None);
            assert_eq!(message.partition(), 1);
            continue;
        }
        let i: u32 = key[1..].parse().expect("key number");
        assert_eq!(message.payload(), Some(value(i).as_slice()), "record {i}");
        let headers = message.headers().expect("headers");
        let h1 = headers.get(0);
        assert_eq!((h1.key, h1.value), ("h1", Some(format!("v{i}").as_bytes())));
        let h2 = headers.get(1);
        assert_eq!((h2.key, h2.value), ("h2", Some(&b""[..])));
    }
    assert_eq!(seen, N + 1, "every record is in the topic");
}

#[test]
fn a_refused_record_gives_its_value_back() {
    let cluster = MockCluster::new(1).expect("mock cluster");
    cluster.create_topic("t", 1, 1).expect("topic");
    let mut config = config(&cluster.bootstrap_servers());
    // One message fills the queue while the first waits out its linger.
    config
        .set("queue.buffering.max.messages", "1")
        .set("linger.ms", "60000")
        .remove("enable.idempotence");
    let producer = Producer::new(&config, Counting::default()).expect("producer");
    let no_headers: [(&str, &[u8]); 0] = [];
    let record = |value: Vec<u8>| Record {
        topic: "t",
        partition: None,
        key: None,
        value: Some(value),
        headers: &no_headers,
    };
    let first = vec![7; LEND_FROM];
    producer.send(record(first.clone()), 1).expect("queued");
    // Refused, lent or copied: the value comes back.
    for (value, opaque) in [(vec![8; LEND_FROM + 1], 2), (b"second".to_vec(), 22)] {
        let refused = producer
            .send(record(value.clone()), opaque)
            .expect_err("the queue is full");
        assert_eq!(
            refused.error,
            KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull)
        );
        assert_eq!((refused.value, refused.opaque), (Some(value), opaque));
    }

    let bad = Record {
        topic: "nul\0in name",
        ..record(b"third".to_vec())
    };
    let refused = producer.send(bad, 3).expect_err("not a topic name");
    assert_eq!(
        (refused.value.as_deref(), refused.opaque),
        (Some(&b"third"[..]), 3)
    );

    // Dropping the producer purges what it holds: the queued value is
    // reported (as purged) and handed back, never left with librdkafka.
    let tally = Arc::clone(&producer.context().0);
    assert!(
        tally.reports.lock().unwrap().is_empty(),
        "nothing reported yet"
    );
    drop(producer);
    assert_eq!(tally.failed.load(Ordering::SeqCst), 1);
    assert_eq!(*tally.reports.lock().unwrap(), [(1, Some(first.clone()))]);
    assert_eq!(*tally.recycled.lock().unwrap(), [first]);
}
