//! "Kafka alone": the broker's side of the physical limit. The records the
//! connector wrote in a run are read back from its topic, or each of its
//! topics (keys, values, headers, partitions, tombstones included), and
//! produced again, to a new topic with as many partitions, by a bare
//! producer with the connector's own producer settings
//! (`RunConfig::producer_config` for the same arguments): no reading of
//! PostgreSQL, no decoding, no encoding. Its time
//! to the last acknowledgement is what Kafka on this machine needs for
//! those very records, and `min(pg_recvlogical, Kafka alone)` is the rate
//! no connector can beat here.
//!
//! The broker's CPU is measured for both writers from its process
//! (`/proc/<pid>/stat`): what it spends per record is the other half of a
//! shared machine's budget.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use pgcdc_kafka::config::RunConfig;
use pgcdc_kafka::sink::poller::PolledProducer;
use pgcdc_testcontainers::Kafka;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message, Timestamp};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};

use super::record_file::{RecordFile, RecordWriter, MIN_READ_BUFFER, READ_BUFFER};
use super::{proc_usage, Result};

/// What the bare producer took for the records of `topic`.
pub struct KafkaAlone {
    pub records: u64,
    pub bytes: u64,
    pub wall_s: f64,
    /// The broker's CPU seconds while it ran.
    pub broker_cpu_s: Option<f64>,
    /// The producer's own CPU seconds (this process: librdkafka's threads
    /// compressing and sending, the loop handing records over).
    pub producer_cpu_s: Option<f64>,
}

impl KafkaAlone {
    /// The progress line, beside the broker's CPU while the connector wrote.
    pub fn print(&self, format: &str, connector_broker_cpu: Option<f64>) {
        eprintln!(
            "  Kafka alone ({format}): {} records, {:.1} MB, {:.2} s, producer {} CPU s, broker {} CPU s (during the connector: {})",
            self.records,
            self.bytes as f64 / 1e6,
            self.wall_s,
            super::fmt_cpu(self.producer_cpu_s),
            super::fmt_cpu(self.broker_cpu_s),
            super::fmt_cpu(connector_broker_cpu),
        );
    }
}

/// Waits until Kafka acknowledged every record, the way the connector's
/// end of a run does (`KafkaSink::flush`): librdkafka's flush with no wait
/// sends what lingers, then the in-flight count is watched in 1 ms steps.
/// rust-rdkafka's own flush waits in 100 ms polls that the producer's
/// thread answers first, so it ends up to 100 ms late: a handicap the
/// reference would carry and the connector not.
fn drain(producer: &BaseProducer, timeout: Duration) -> Result<()> {
    let deadline = Instant::now() + timeout;
    let _ = producer.flush(Duration::ZERO);
    while producer.in_flight_count() > 0 {
        if Instant::now() >= deadline {
            return Err(format!(
                "{} records not acknowledged within {timeout:?}",
                producer.in_flight_count()
            )
            .into());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

/// The broker's CPU seconds so far (utime + stime), when its process is
/// visible.
pub fn broker_cpu(kafka: &Kafka) -> Option<f64> {
    kafka.pid().and_then(proc_usage).map(|(cpu, _)| cpu)
}

/// Reads every record of `topic` back, then produces them again with the
/// producer settings the connector derives from `run_args` (its flags after
/// `run`).
///
/// The records are read first, untimed, into a file on disk
/// ([`super::record_file`]), and the timed producer reads them from it one
/// buffer at a time: the harness's memory stays one buffer whatever the
/// topic holds. The file was just written, so it is read from the page
/// cache; what that costs the timed loop is a copy of the records into a
/// buffer that stays in the CPU's cache, where holding every record in
/// memory cost a read of each from RAM. A consumer reading ahead on another
/// thread instead would decompress every batch and ask the broker for it
/// while the producer is timed, on the same two cores: the reference would
/// then carry a reader's CPU that it is there to leave out.
pub fn run(kafka: &Kafka, topic: &str, run_args: &[String]) -> Result<KafkaAlone> {
    run_many(kafka, &[topic.to_owned()], run_args)
}

/// [`run`] for the records of several topics (one per table of a run),
/// each produced again to a twin of its own: the bare producer takes one
/// record of each topic in turn, as a connector does whose tables change
/// in turn. Each topic's file is read through its share of the buffer.
pub fn run_many(kafka: &Kafka, topics: &[String], run_args: &[String]) -> Result<KafkaAlone> {
    let bootstrap = kafka.bootstrap_servers();
    let mut files = Vec::with_capacity(topics.len());
    let mut writers = Vec::with_capacity(topics.len());
    for topic in topics {
        let (file, writer) = RecordFile::create(topic)?;
        files.push(file);
        writers.push(writer);
    }
    let read = read_all(&bootstrap, topics, writers)?;
    let targets: Vec<String> = topics.iter().map(|t| format!("{t}.kafka_alone")).collect();
    // The twins, grouped by partition count, each group in one request.
    let mut twins: BTreeMap<i32, Vec<&str>> = BTreeMap::new();
    for (target, &partitions) in targets.iter().zip(&read.partitions) {
        twins.entry(partitions).or_default().push(target);
    }
    for (partitions, names) in &twins {
        kafka.create_topics(names, *partitions)?;
    }
    // Served by the connector's own polling thread, and given topic
    // handles as the connector's sink gives them: by name, librdkafka
    // would look each record's topic up among all the twins, a handicap
    // the reference would carry and the connector not.
    let producer = PolledProducer::start(
        connector_producer_config(run_args)?
            .set("bootstrap.servers", &bootstrap)
            .create::<BaseProducer>()?,
    )?;
    let buffer = (READ_BUFFER / topics.len()).max(MIN_READ_BUFFER);
    let mut sources = Vec::with_capacity(topics.len());
    for (target, file) in targets.iter().zip(files) {
        sources.push((producer.shared().topic(target)?, file.reader(buffer)?));
    }
    let mut produced = 0u64;
    let cpu_before = broker_cpu(kafka);
    let own_before = proc_usage(std::process::id());
    let started = Instant::now();
    while !sources.is_empty() {
        let mut i = 0;
        while i < sources.len() {
            let (target, records) = &mut sources[i];
            let Some(r) = records.next_record()? else {
                sources.remove(i);
                continue;
            };
            let mut record: BaseRecord<'_, [u8], [u8]> =
                BaseRecord::to(target.name()).partition(r.partition);
            if let Some(timestamp) = r.timestamp {
                record = record.timestamp(timestamp);
            }
            if let Some(headers) = r.headers {
                record = record.headers(headers);
            }
            if let Some(key) = r.key {
                record = record.key(key);
            }
            if let Some(value) = r.value {
                record = record.payload(value);
            }
            while let Err((_, back)) = producer.send_to(target, record) {
                record = back;
                std::thread::sleep(Duration::from_micros(100));
            }
            produced += 1;
            i += 1;
        }
    }
    drain(&producer, Duration::from_secs(300))?;
    let wall_s = started.elapsed().as_secs_f64();
    let broker_cpu_s = cpu_before.zip(broker_cpu(kafka)).map(|(a, b)| b - a);
    let producer_cpu_s = own_before
        .zip(proc_usage(std::process::id()))
        .map(|((a, _), (b, _))| b - a);
    if produced != read.records {
        return Err(format!(
            "read {} records of {topics:?} but produced {produced} from the record files",
            read.records
        )
        .into());
    }
    Ok(KafkaAlone {
        records: produced,
        bytes: read.bytes,
        wall_s,
        broker_cpu_s,
        producer_cpu_s,
    })
}

/// The connector's producer settings for the same `run` arguments.
fn connector_producer_config(run_args: &[String]) -> Result<ClientConfig> {
    let config = RunConfig::from_args(run_args)
        .map_err(|e| format!("the connector arguments {run_args:?}: {e}"))?;
    Ok(config.producer_config())
}

/// What [`read_all`] wrote.
struct Read {
    records: u64,
    /// Keys, values and headers (names and values).
    bytes: u64,
    /// Each topic's partition count.
    partitions: Vec<i32>,
}

/// Writes every record of each of `topics` from the start into its writer
/// (`out`, in the same order), with one consumer.
fn read_all(bootstrap: &str, topics: &[String], mut out: Vec<RecordWriter>) -> Result<Read> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "pgcdc-bench-kafka-alone")
        .set("enable.auto.commit", "false")
        .set("fetch.max.bytes", "52428800")
        .create()?;
    let timeout = Duration::from_secs(10);
    let mut assignment = TopicPartitionList::new();
    let mut remaining = 0;
    let mut counts = Vec::with_capacity(topics.len());
    let mut index = HashMap::with_capacity(topics.len());
    for (i, topic) in topics.iter().enumerate() {
        let metadata = consumer.fetch_metadata(Some(topic), timeout)?;
        let partitions: Vec<i32> = metadata
            .topics()
            .first()
            .map(|t| t.partitions().iter().map(|p| p.id()).collect())
            .unwrap_or_default();
        if partitions.is_empty() {
            return Err(format!("topic {topic} has no partitions").into());
        }
        for &partition in &partitions {
            let (low, high) = consumer.fetch_watermarks(topic, partition, timeout)?;
            remaining += (high - low).max(0) as u64;
            assignment.add_partition_offset(topic, partition, Offset::Beginning)?;
        }
        counts.push(partitions.len() as i32);
        index.insert(topic.as_str(), i);
    }
    consumer.assign(&assignment)?;
    let (mut records, mut bytes) = (0u64, 0u64);
    let deadline = Instant::now() + Duration::from_secs(600);
    while records < remaining {
        if Instant::now() > deadline {
            return Err(
                format!("read {records} of {remaining} records of {topics:?} in 600 s").into(),
            );
        }
        let Some(message) = consumer.poll(Duration::from_millis(500)) else {
            continue;
        };
        let message = message?;
        let writer = index
            .get(message.topic())
            .and_then(|&i| out.get_mut(i))
            .ok_or_else(|| format!("a record of topic {} was not asked for", message.topic()))?;
        let headers: Vec<(&str, Option<&[u8]>)> = message
            .headers()
            .map(|h| h.iter().map(|h| (h.key, h.value)).collect())
            .unwrap_or_default();
        let (key, value) = (message.key(), message.payload());
        bytes += (key.map_or(0, <[u8]>::len)
            + value.map_or(0, <[u8]>::len)
            + headers
                .iter()
                .map(|(k, v)| k.len() + v.map_or(0, <[u8]>::len))
                .sum::<usize>()) as u64;
        // The connector gives its change records their time (so librdkafka
        // reads no clock for them): so does the reference.
        let timestamp = match message.timestamp() {
            Timestamp::CreateTime(ms) => Some(ms),
            _ => None,
        };
        writer.write(message.partition(), timestamp, key, value, &headers)?;
        records += 1;
    }
    for writer in out {
        writer.finish()?;
    }
    Ok(Read {
        records,
        bytes,
        partitions: counts,
    })
}
