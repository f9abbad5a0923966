//! The Kafka half of `check`: the brokers answer, the login works, and
//! the topics `run` would write exist or may be created.

use std::collections::BTreeSet;
use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, ResourceSpecifier, TopicReplication};
use rdkafka::error::RDKafkaErrorCode;

use super::postgres::TableInfo;
use super::{list, Report};
use crate::config::RunConfig;
use crate::sink::client_log::LoggingContext;
use crate::sink::login::{self, Interrupted};
use crate::sink::transactional;

/// What the blocking Kafka probe found.
struct KafkaFacts {
    brokers: Vec<i32>,
    existing: BTreeSet<String>,
    auto_create: Option<bool>,
    /// The outcome of a validate-only CreateTopics for the missing topics.
    creatable: Option<Result<(), String>>,
}

/// The topics the tables' records go to (after --topic-delimiter and
/// --topic-route), each once.
fn table_topics(config: &RunConfig, tables: &[TableInfo]) -> Vec<String> {
    let router = crate::select::TopicRouter::from_options(&config.select, &config.topic_prefix)
        .unwrap_or_else(|_| crate::select::TopicRouter::new(&config.topic_prefix));
    let mut topics: Vec<String> = tables
        .iter()
        .map(|t| match t.name.split_once('.') {
            Some((schema, table)) => router.topic_for(schema, table),
            None => format!("{}.{}", config.topic_prefix, t.name),
        })
        .collect();
    topics.sort();
    topics.dedup();
    topics
}

pub(super) async fn check_kafka(
    config: &RunConfig,
    tables: Option<&[TableInfo]>,
    timeout: Duration,
    report: &mut Report,
) {
    let topics = table_topics(config, tables.unwrap_or_default());
    let client_config = config.producer_config();
    let servers = config.bootstrap_servers.clone();
    // librdkafka's admin calls and client teardown block: keep them off the runtime.
    let probe =
        tokio::task::spawn_blocking(move || probe_kafka(&client_config, &topics, timeout)).await;
    let facts = match probe {
        Ok(Ok(facts)) => facts,
        Ok(Err(error)) => {
            report.fail(
                "kafka",
                format!("no metadata from {servers}: {error}"),
                "check --bootstrap-servers, that the brokers run and are reachable from here, \
                 and the security settings in --kafka-property; the topic check was skipped",
            );
            return;
        }
        Err(join) => {
            report.fail(
                "kafka",
                format!("the Kafka probe failed: {join}"),
                "report this as a bug",
            );
            return;
        }
    };
    report.pass(
        "kafka",
        format!(
            "{servers} answered: {} broker(s) {:?}",
            facts.brokers.len(),
            facts.brokers
        ),
    );
    let Some(tables) = tables else {
        return;
    };
    let expected = table_topics(config, tables);
    let missing: Vec<&str> = expected
        .iter()
        .filter(|t| !facts.existing.contains(*t))
        .map(String::as_str)
        .collect();
    if missing.is_empty() {
        report.pass("topics", format!("all {} topics exist", expected.len()));
        return;
    }
    let create_fix = format!(
        "create them (kafka-topics.sh --create --topic {} ...), or set \
         auto.create.topics.enable=true on the brokers",
        missing[0]
    );
    match (facts.auto_create, &facts.creatable) {
        (Some(false), _) => report.fail(
            "topics",
            format!(
                "{} missing and the brokers do not auto-create topics: {}",
                missing.len(),
                list(&missing)
            ),
            create_fix,
        ),
        (_, Some(Err(reason))) => report.fail(
            "topics",
            format!(
                "{} missing and creating them would be refused ({reason}): {}",
                missing.len(),
                list(&missing)
            ),
            format!("grant this principal CREATE on the cluster or the topics, or {create_fix}"),
        ),
        (Some(true), _) => report.pass(
            "topics",
            format!(
                "{} of {} do not exist yet; the brokers create them on first write \
                 (auto.create.topics.enable=true, with the brokers' default partitions)",
                missing.len(),
                expected.len()
            ),
        ),
        (None, _) => report.warn(
            "topics",
            format!(
                "{} missing, and the brokers' auto.create.topics.enable could not be read: {}",
                missing.len(),
                list(&missing)
            ),
            create_fix,
        ),
    }
}

fn probe_kafka(
    config: &rdkafka::ClientConfig,
    topics: &[String],
    timeout: Duration,
) -> Result<KafkaFacts, String> {
    // Metadata through a watched consumer: a refused login is reported as
    // such, naming the credentials, instead of as a timeout.
    let (_, metadata) = login::watched_metadata(&transactional::client_config(config), timeout)
        .map_err(|interrupted| match interrupted {
            Interrupted::Refused(refused) => refused.to_string(),
            // KafkaError's Display already names its code, its only source.
            Interrupted::Failed(e) => {
                format!("{e} (waited {})", humantime::format_duration(timeout))
            }
        })?;
    let admin: AdminClient<LoggingContext> = config
        .create_with_context(LoggingContext::for_config(config))
        .map_err(|e: rdkafka::error::KafkaError| e.to_string())?;
    let brokers: Vec<i32> = metadata.brokers().iter().map(|b| b.id()).collect();
    let existing: BTreeSet<String> = metadata
        .topics()
        .iter()
        .filter(|t| t.error().is_none())
        .map(|t| t.name().to_owned())
        .collect();
    let options = AdminOptions::new().request_timeout(Some(timeout));
    let auto_create = brokers.first().and_then(|&id| {
        let resource = ResourceSpecifier::Broker(id);
        let results =
            futures::executor::block_on(admin.describe_configs([&resource], &options)).ok()?;
        let config = results.into_iter().next()?.ok()?;
        let value = config.get("auto.create.topics.enable")?.value.clone()?;
        Some(value == "true")
    });
    let missing: Vec<&String> = topics.iter().filter(|t| !existing.contains(*t)).collect();
    let creatable = (!missing.is_empty() && auto_create != Some(false)).then(|| {
        let new_topics: Vec<NewTopic<'_>> = missing
            .iter()
            .map(|t| NewTopic::new(t, -1, TopicReplication::Fixed(-1)))
            .collect();
        let options = AdminOptions::new()
            .request_timeout(Some(timeout))
            .validate_only(true);
        match futures::executor::block_on(admin.create_topics(&new_topics, &options)) {
            Err(error) => Err(error.to_string()),
            Ok(results) => results
                .into_iter()
                .find_map(|r| match r {
                    Err((_, RDKafkaErrorCode::TopicAlreadyExists)) | Ok(_) => None,
                    Err((topic, code)) => Some(format!("{topic}: {code}")),
                })
                .map_or(Ok(()), Err),
        }
    });
    Ok(KafkaFacts {
        brokers,
        existing,
        auto_create,
        creatable,
    })
}
