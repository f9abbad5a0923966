//! "Kafka alone": the broker's side of the physical limit. The records the
//! connector wrote in a run are read back from its topic (keys, values,
//! headers, partitions, tombstones included) and produced again, to a new
//! topic with as many partitions, by a bare producer with the connector's
//! own producer settings (`RunConfig::producer_config` for the same
//! arguments): no reading of PostgreSQL, no decoding, no encoding. Its time
//! to the last acknowledgement is what Kafka on this machine needs for
//! those very records, and `min(pg_recvlogical, Kafka alone)` is the rate
//! no connector can beat here.
//!
//! The broker's CPU is measured for both writers from its process
//! (`/proc/<pid>/stat`): what it spends per record is the other half of a
//! shared machine's budget.

use std::time::{Duration, Instant};

use pgcdc_kafka::config::RunConfig;
use pgcdc_testcontainers::Kafka;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Header, Headers, Message, OwnedHeaders};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};

use super::{proc_usage, Result};

/// One record as the connector wrote it.
struct Record {
    partition: i32,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Vec<(String, Vec<u8>)>,
}

/// What the bare producer took for the records of `topic`.
pub struct KafkaAlone {
    pub records: u64,
    pub bytes: u64,
    pub wall_s: f64,
    /// The broker's CPU seconds while it ran.
    pub broker_cpu_s: Option<f64>,
}

impl KafkaAlone {
    /// The progress line, beside the broker's CPU while the connector wrote.
    pub fn print(&self, format: &str, connector_broker_cpu: Option<f64>) {
        eprintln!(
            "  Kafka alone ({format}): {} records, {:.1} MB, {:.2} s, broker {} CPU s (during the connector: {})",
            self.records,
            self.bytes as f64 / 1e6,
            self.wall_s,
            super::fmt_cpu(self.broker_cpu_s),
            super::fmt_cpu(connector_broker_cpu),
        );
    }
}

/// The broker's CPU seconds so far (utime + stime), when its process is
/// visible.
pub fn broker_cpu(kafka: &Kafka) -> Option<f64> {
    kafka.pid().and_then(proc_usage).map(|(cpu, _)| cpu)
}

/// Reads every record of `topic` back, then produces them again with the
/// producer settings the connector derives from `run_args` (its flags after
/// `run`).
pub fn run(kafka: &Kafka, topic: &str, run_args: &[String]) -> Result<KafkaAlone> {
    let bootstrap = kafka.bootstrap_servers();
    let (records, partitions) = read_all(&bootstrap, topic)?;
    let target = format!("{topic}.kafka_alone");
    kafka.create_topic(&target, partitions)?;
    let producer: ThreadedProducer<DefaultProducerContext> = connector_producer_config(run_args)?
        .set("bootstrap.servers", &bootstrap)
        .create()?;
    let bytes = records
        .iter()
        .map(|r| {
            let headers: usize = r.headers.iter().map(|(k, v)| k.len() + v.len()).sum();
            (r.key.as_ref().map_or(0, Vec::len) + r.value.as_ref().map_or(0, Vec::len) + headers)
                as u64
        })
        .sum();
    let cpu_before = broker_cpu(kafka);
    let started = Instant::now();
    for r in &records {
        let mut headers = OwnedHeaders::new_with_capacity(r.headers.len());
        for (name, value) in &r.headers {
            headers = headers.insert(Header {
                key: name,
                value: Some(value),
            });
        }
        let mut record: BaseRecord<'_, [u8], [u8]> = BaseRecord::to(&target)
            .partition(r.partition)
            .headers(headers);
        if let Some(key) = &r.key {
            record = record.key(&key[..]);
        }
        if let Some(value) = &r.value {
            record = record.payload(&value[..]);
        }
        while let Err((_, back)) = producer.send(record) {
            record = back;
            std::thread::sleep(Duration::from_micros(100));
        }
    }
    producer.flush(Duration::from_secs(300))?;
    let wall_s = started.elapsed().as_secs_f64();
    let broker_cpu_s = cpu_before.zip(broker_cpu(kafka)).map(|(a, b)| b - a);
    Ok(KafkaAlone {
        records: records.len() as u64,
        bytes,
        wall_s,
        broker_cpu_s,
    })
}

/// The connector's producer settings for the same `run` arguments.
fn connector_producer_config(run_args: &[String]) -> Result<ClientConfig> {
    let config = RunConfig::from_args(run_args)
        .map_err(|e| format!("the connector arguments {run_args:?}: {e}"))?;
    Ok(config.producer_config())
}

/// Every record of `topic` from the start, and its partition count.
fn read_all(bootstrap: &str, topic: &str) -> Result<(Vec<Record>, i32)> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "pgcdc-bench-kafka-alone")
        .set("enable.auto.commit", "false")
        .set("fetch.max.bytes", "52428800")
        .create()?;
    let timeout = Duration::from_secs(10);
    let metadata = consumer.fetch_metadata(Some(topic), timeout)?;
    let partitions: Vec<i32> = metadata
        .topics()
        .first()
        .map(|t| t.partitions().iter().map(|p| p.id()).collect())
        .unwrap_or_default();
    if partitions.is_empty() {
        return Err(format!("topic {topic} has no partitions").into());
    }
    let mut assignment = TopicPartitionList::new();
    let mut remaining = 0;
    for &partition in &partitions {
        let (low, high) = consumer.fetch_watermarks(topic, partition, timeout)?;
        remaining += (high - low).max(0);
        assignment.add_partition_offset(topic, partition, Offset::Beginning)?;
    }
    consumer.assign(&assignment)?;
    let mut records = Vec::with_capacity(remaining as usize);
    let deadline = Instant::now() + Duration::from_secs(600);
    while (records.len() as i64) < remaining {
        if Instant::now() > deadline {
            return Err(format!(
                "read {} of {remaining} records of {topic} in 600 s",
                records.len()
            )
            .into());
        }
        let Some(message) = consumer.poll(Duration::from_millis(500)) else {
            continue;
        };
        let message = message?;
        let headers = message.headers().map_or_else(Vec::new, |h| {
            h.iter()
                .map(|h| (h.key.to_owned(), h.value.unwrap_or_default().to_vec()))
                .collect()
        });
        records.push(Record {
            partition: message.partition(),
            key: message.key().map(<[u8]>::to_vec),
            value: message.payload().map(<[u8]>::to_vec),
            headers,
        });
    }
    Ok((records, partitions.len() as i32))
}
