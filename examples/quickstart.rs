//! Quickstart: starts a private PostgreSQL and Kafka on loopback (the same
//! launcher the tests use), runs pgcdc-kafka against them, makes a few
//! changes and prints the Kafka messages they became.
//!
//! ```text
//! cargo run --example quickstart
//! ```
//!
//! Everything it starts stops when it exits.

use std::time::{Duration, Instant};

use pgcdc_kafka::config::RunConfig;
use pgcdc_kafka::pipeline::{self, Shutdown};
use pgcdc_testcontainers::{Kafka, Postgres};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};

const TOPIC: &str = "app.public.customers";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    println!("starting PostgreSQL (wal_level=logical) and Kafka (KRaft) on 127.0.0.1 ...");
    let pg = Postgres::launch()?;
    let kafka = Kafka::launch()?;
    pg.execute("postgres", "CREATE DATABASE shop")?;
    pg.execute(
        "shop",
        "CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL, email text)",
    )?;
    println!("  postgres: {}", pg.url("shop"));
    println!("  kafka:    {}", kafka.bootstrap_servers());

    let config = RunConfig::from_args([
        "--pg-url",
        &pg.url("shop"),
        "--bootstrap-servers",
        &kafka.bootstrap_servers(),
        "--topic-prefix",
        "app",
        "--json-key-schemas",
        "false",
        "--json-value-schemas",
        "false",
    ])?;
    config.validate()?;
    println!("\nrunning: pgcdc-kafka run --pg-url {} --bootstrap-servers {} --topic-prefix app --json-key-schemas false --json-value-schemas false", config.pg_url, config.bootstrap_servers);
    let (stop, shutdown) = Shutdown::new();
    let connector = tokio::spawn(pipeline::run(config, shutdown));

    // The connector creates its slot on start; changes made after that are streamed.
    let deadline = Instant::now() + Duration::from_secs(60);
    while pg
        .query(
            "shop",
            "SELECT 1 FROM pg_replication_slots WHERE slot_name = 'pgcdc'",
        )?
        .is_empty()
    {
        anyhow::ensure!(
            Instant::now() < deadline,
            "the connector did not create its slot"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let changes = [
        "INSERT INTO customers VALUES (1, 'Ann', 'ann@example.com'), (2, 'Bob', NULL)",
        "UPDATE customers SET email = 'bob@example.com' WHERE id = 2",
        "DELETE FROM customers WHERE id = 1",
    ];
    println!("\nchanges made in PostgreSQL:");
    for sql in changes {
        println!("  {sql}");
        pg.execute("shop", sql)?;
    }

    println!("\nmessages on topic {TOPIC}:");
    let bootstrap = kafka.bootstrap_servers();
    let printed = tokio::task::spawn_blocking(move || print_topic(&bootstrap, 5)).await??;

    let _ = stop.send(true);
    let summary = connector.await??;
    println!(
        "\n{printed} messages; connector stopped after {} transactions, slot confirmed at {}",
        summary.transactions,
        pgcdc_kafka::or_unknown(&summary.confirmed_lsn)
    );
    Ok(())
}

fn print_topic(bootstrap: &str, count: usize) -> anyhow::Result<usize> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "quickstart")
        .set("enable.auto.commit", "false")
        .create()?;
    let deadline = Instant::now() + Duration::from_secs(60);
    while consumer
        .fetch_metadata(Some(TOPIC), Duration::from_secs(5))?
        .topics()
        .iter()
        .all(|t| t.partitions().is_empty())
    {
        anyhow::ensure!(Instant::now() < deadline, "topic {TOPIC} never appeared");
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut assignment = TopicPartitionList::new();
    assignment.add_partition_offset(TOPIC, 0, Offset::Beginning)?;
    consumer.assign(&assignment)?;
    let mut printed = 0;
    while printed < count && Instant::now() < deadline {
        let Some(message) = consumer.poll(Duration::from_millis(200)) else {
            continue;
        };
        let message = message?;
        let text = |b: Option<&[u8]>| {
            b.map_or("null (tombstone)".to_owned(), |b| {
                String::from_utf8_lossy(b).into_owned()
            })
        };
        println!("  key:   {}", text(message.key()));
        println!("  value: {}\n", text(message.payload()));
        printed += 1;
    }
    Ok(printed)
}
