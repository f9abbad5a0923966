//! The Kafka service: messages go through, and a private broker keeps its data
//! across a clean stop and a kill.

use std::time::{Duration, Instant};

use pgcdc_testcontainers::{unique_name, Kafka};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};

fn produce(kafka: &Kafka, topic: &str, value: &str) {
    let producer: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", kafka.bootstrap_servers())
        .set("message.timeout.ms", "30000")
        .create()
        .expect("producer");
    producer
        .send(BaseRecord::to(topic).key("k").payload(value))
        .map_err(|(e, _)| e)
        .expect("enqueue");
    producer.flush(Duration::from_secs(30)).expect("delivered");
}

/// All values of partition 0 of `topic`, polling until `expected` arrived.
fn consume(kafka: &Kafka, topic: &str, expected: usize) -> Vec<String> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", kafka.bootstrap_servers())
        .set("group.id", unique_name("group"))
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let mut partitions = TopicPartitionList::new();
    partitions
        .add_partition_offset(topic, 0, Offset::Beginning)
        .expect("partition");
    consumer.assign(&partitions).expect("assign");
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut values = Vec::new();
    while values.len() < expected && Instant::now() < deadline {
        if let Some(message) = consumer.poll(Duration::from_millis(200)) {
            let message = message.expect("message");
            values.push(String::from_utf8_lossy(message.payload().unwrap_or_default()).into());
        }
    }
    values
}

#[test]
fn produces_and_consumes() {
    let kafka = Kafka::shared();
    let topic = unique_name("roundtrip");
    produce(kafka, &topic, "hello");
    assert_eq!(consume(kafka, &topic, 1), ["hello"]);
}

#[test]
fn creates_topics_with_partitions() {
    let kafka = Kafka::shared();
    let topic = unique_name("created");
    kafka.create_topic(&topic, 3).expect("create topic");
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", kafka.bootstrap_servers())
        .create()
        .expect("client");
    let metadata = consumer
        .fetch_metadata(Some(&topic), Duration::from_secs(10))
        .expect("metadata");
    assert_eq!(metadata.topics()[0].partitions().len(), 3);
    assert!(
        kafka.create_topic(&topic, 3).is_err(),
        "topic exists already"
    );
}

#[test]
fn private_broker_survives_stop_and_kill() {
    let kafka = Kafka::launch().expect("launch kafka");
    let servers = kafka.bootstrap_servers();
    let topic = unique_name("restart");
    produce(&kafka, &topic, "before-stop");

    kafka.stop().expect("stop");
    assert!(kafka.pid().is_none());
    kafka.start().expect("start after stop");
    assert_eq!(kafka.bootstrap_servers(), servers);
    produce(&kafka, &topic, "after-stop");

    kafka.kill().expect("kill");
    kafka.start().expect("start after kill");
    produce(&kafka, &topic, "after-kill");

    assert_eq!(
        consume(&kafka, &topic, 3),
        ["before-stop", "after-stop", "after-kill"]
    );
}
