//! `--debezium-config`: a Debezium PostgreSQL connector configuration
//! (Kafka Connect JSON, or a Debezium Server `.properties` file) mapped onto
//! our flags.
//!
//! Every property is either mapped, accepted and ignored for a stated
//! reason, or rejected; a rejected property fails the run before anything
//! connects, each one listed with why. The mapping is data ([`PROPERTIES`],
//! [`PREFIXES`]) plus a few groups that need several properties at once
//! (the connection URL, converters, transforms, topic creation), and it
//! names our settings by their file keys: a key whose flag this build does
//! not have is reported as "not supported by this build", never a panic.
//! `docs/DEBEZIUM_CONFIG.md` is checked against [`mapping_table`].

use std::collections::BTreeMap;
use std::path::Path;

use super::setting::{self, ArgIndex, Origin, Problem, Setting, Shape};

mod columns;
mod files;
mod groups;
mod rules;
mod snapshots;

pub use files::{map_server, parse_connect_json, parse_properties};
pub use rules::{mapping_table, rule, Rule, DEBEZIUM_36_PROPERTIES, PREFIXES, PROPERTIES};

use columns::map_column_mappers;
use groups::{is_config_provider, map_connection, map_converters, map_topics, map_transforms};
use rules::DEBEZIUM_DEFAULTS;
use Rule::*;

/// A mapped value: our key, its value, the properties it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapped {
    pub key: String,
    pub value: String,
    pub from: String,
}

/// A property that is rejected, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    pub property: String,
    /// The value, unless it is secret.
    pub value: Option<String>,
    pub reason: String,
}

/// The outcome of mapping one configuration.
#[derive(Debug, Default)]
pub struct Mapping {
    pub mapped: Vec<Mapped>,
    /// Accepted without effect: property and reason.
    pub ignored: Vec<(String, String)>,
    pub rejected: Vec<Rejected>,
}

impl Mapping {
    fn set(&mut self, key: &str, value: impl Into<String>, from: &str) {
        self.mapped.push(Mapped {
            key: key.to_owned(),
            value: value.into(),
            from: from.to_owned(),
        });
    }

    fn reject(&mut self, property: &str, value: &str, reason: impl Into<String>) {
        self.rejected.push(Rejected {
            property: property.to_owned(),
            value: (!setting::is_secret_name(property)).then(|| value.to_owned()),
            reason: reason.into(),
        });
    }
}

/// Reads a connector configuration file into settings, every problem, and
/// the properties accepted without effect (with the reason).
pub(super) fn read(path: &Path, index: &ArgIndex) -> (Vec<Setting>, Vec<Problem>, Ignored) {
    let text = match setting::read_file(path, "--debezium-config") {
        Ok(text) => text,
        Err(problem) => return (Vec::new(), vec![problem], Vec::new()),
    };
    let is_json = path.extension().is_some_and(|e| e == "json")
        || (path.extension().is_none_or(|e| e != "properties")
            && text.trim_start().starts_with('{'));
    let properties = if is_json {
        match parse_connect_json(&text) {
            Ok(properties) => properties,
            Err(message) => {
                return (
                    Vec::new(),
                    vec![Problem {
                        field: "--debezium-config".to_owned(),
                        value: Some(path.display().to_string()),
                        message,
                        origin: None,
                    }],
                    Vec::new(),
                )
            }
        }
    } else {
        parse_properties(&text)
    };
    let mapping = if is_json {
        map(&properties)
    } else {
        map_server(&properties)
    };
    let (settings, problems) = to_settings(&mapping, index);
    (settings, problems, mapping.ignored)
}

/// Properties accepted without effect: name and reason.
pub type Ignored = Vec<(String, String)>;

/// Turns a mapping into settings of `index`'s arguments.
pub(super) fn to_settings(mapping: &Mapping, index: &ArgIndex) -> (Vec<Setting>, Vec<Problem>) {
    let mut problems: Vec<Problem> = mapping
        .rejected
        .iter()
        .map(|r| Problem {
            field: r.property.clone(),
            value: r.value.clone(),
            message: format!("not supported: {}", r.reason),
            origin: None,
        })
        .collect();
    let mut settings: Vec<Setting> = Vec::new();
    for m in &mapping.mapped {
        let origin = Origin::Debezium(m.from.clone());
        let Some(info) = index.by_name(&m.key) else {
            problems.push(Problem {
                field: m.from.clone(),
                value: None,
                message: format!(
                    "maps to {:?}, which is not supported by this build (it has no --{} flag)",
                    m.key,
                    m.key.replace('_', "-")
                ),
                origin: None,
            });
            continue;
        };
        match settings.iter_mut().find(|s| s.id == info.id) {
            Some(existing) if matches!(info.shape, Shape::List | Shape::KeyValue) => {
                existing.values.push(m.value.clone());
            }
            Some(existing) if existing.values.first() != Some(&m.value) => {
                problems.push(Problem {
                    field: m.from.clone(),
                    value: (!info.secret).then(|| m.value.clone()),
                    message: format!(
                        "conflicts with {}, which sets {} differently",
                        existing.origin, info.key
                    ),
                    origin: None,
                });
            }
            Some(_) => {}
            None => settings.push(Setting {
                id: info.id.clone(),
                values: vec![m.value.clone()],
                origin,
            }),
        }
    }
    (settings, problems)
}

/// Maps a Kafka Connect connector configuration.
pub fn map(properties: &BTreeMap<String, String>) -> Mapping {
    let mut mapping = Mapping::default();
    for (property, value) in properties {
        if is_config_provider(value) {
            mapping.reject(
                property,
                value,
                "Kafka Connect config provider placeholders are not resolved: put the value in the file, or set it by flag or environment variable",
            );
            continue;
        }
        match rule(property) {
            Some(To(key)) => mapping.set(key, value.clone(), property),
            Some(Millis(key)) => match value.trim().parse::<u64>() {
                Ok(ms) => mapping.set(key, format!("{ms}ms"), property),
                Err(_) => mapping.reject(property, value, "expects a number of milliseconds"),
            },
            Some(Via(key, convert)) => match convert(value.trim()) {
                Ok(v) => mapping.set(key, v, property),
                Err(reason) => mapping.reject(property, value, reason),
            },
            Some(Ignore(reason)) => mapping.ignored.push((property.clone(), reason.to_owned())),
            Some(Only(accepted, reason)) => {
                if accepted.contains(&value.trim()) {
                    mapping.ignored.push((
                        property.clone(),
                        format!("{value} is what pgcdc-kafka does"),
                    ));
                } else {
                    mapping.reject(
                        property,
                        value,
                        format!("{reason} (accepted: {})", accepted.join(", ")),
                    );
                }
            }
            Some(Reject(reason)) => mapping.reject(property, value, reason),
            Some(Group(_)) => {}
            None => mapping.reject(
                property,
                value,
                "not a property of the Debezium PostgreSQL connector that pgcdc-kafka knows",
            ),
        }
    }
    map_connection(properties, &mut mapping);
    map_converters(properties, &mut mapping);
    map_transforms(properties, &mut mapping);
    map_topics(properties, &mut mapping);
    map_column_mappers(properties, &mut mapping);
    snapshots::map_snapshot_controls(properties, &mut mapping);
    for (property, key, default) in DEBEZIUM_DEFAULTS {
        if !properties.contains_key(*property) {
            mapping.set(key, *default, &format!("{property} (Debezium's default)"));
        }
    }
    mapping
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn value_of<'a>(m: &'a Mapping, key: &str) -> Vec<&'a str> {
        m.mapped
            .iter()
            .filter(|x| x.key == key)
            .map(|x| x.value.as_str())
            .collect()
    }

    #[test]
    fn the_connection_becomes_one_url() {
        let m = map(&props(&[
            ("database.hostname", "db.example"),
            ("database.port", "5433"),
            ("database.user", "cdc"),
            ("database.password", "p@ss word"),
            ("database.dbname", "shop"),
            ("database.sslmode", "verify-full"),
            ("database.sslrootcert", "/etc/pg/ca.pem"),
            ("database.sslcert", "/etc/pg/client.pem"),
            ("database.sslkey", "/etc/pg/client-key.pem"),
        ]));
        assert!(m.rejected.is_empty(), "{:?}", m.rejected);
        let url = value_of(&m, "pg_url")[0];
        let parsed: crate::config::PgUrl = url.parse().expect("a libpq URL");
        assert_eq!(parsed.config().get_user(), Some("cdc"));
        assert_eq!(parsed.config().get_password(), Some(&b"p@ss word"[..]));
        assert_eq!(parsed.config().get_dbname(), Some("shop"));
        assert_eq!(parsed.config().get_ports(), [5433]);
        let tls = parsed.tls();
        assert_eq!(tls.mode, crate::source::tls::SslMode::VerifyFull);
        assert_eq!(
            tls.root_cert.as_deref(),
            Some(std::path::Path::new("/etc/pg/ca.pem"))
        );
        assert_eq!(
            tls.cert.as_deref(),
            Some(std::path::Path::new("/etc/pg/client.pem"))
        );
        assert_eq!(
            tls.key.as_deref(),
            Some(std::path::Path::new("/etc/pg/client-key.pem"))
        );
    }

    #[test]
    fn every_unsupported_property_is_listed_with_its_reason() {
        let m = map(&props(&[
            (
                "connector.class",
                "io.debezium.connector.mysql.MySqlConnector",
            ),
            ("plugin.name", "decoderbufs"),
            ("snapshot.mode", "always"),
            ("no.such.property", "x"),
            ("database.password", "${file:/secrets:pw}"),
            ("tasks.max", "1"),
        ]));
        let rejected: Vec<&str> = m.rejected.iter().map(|r| r.property.as_str()).collect();
        assert_eq!(
            rejected,
            [
                "connector.class",
                "database.password",
                "no.such.property",
                "plugin.name",
                "snapshot.mode",
                // The password came without the host it is for.
                "database.hostname",
            ]
        );
        assert!(m.rejected.iter().all(|r| !r.reason.is_empty()));
        assert!(
            m.rejected
                .iter()
                .find(|r| r.property == "database.password")
                .unwrap()
                .value
                .is_none(),
            "secret values are not repeated"
        );
        assert!(m.ignored.iter().any(|(p, _)| p == "tasks.max"));
    }

    #[test]
    fn converters_and_transforms_map_onto_flags() {
        let m = map(&props(&[
            ("key.converter", "io.confluent.connect.avro.AvroConverter"),
            ("value.converter", "io.confluent.connect.avro.AvroConverter"),
            (
                "value.converter.schema.registry.url",
                "http://registry:8081",
            ),
            ("value.converter.basic.auth.user.info", "u:p"),
            ("value.converter.basic.auth.credentials.source", "USER_INFO"),
            (
                "value.converter.value.subject.name.strategy",
                "io.confluent.kafka.serializers.subject.RecordNameStrategy",
            ),
            ("transforms", "route,unwrap"),
            (
                "transforms.route.type",
                "io.debezium.transforms.ByLogicalTableRouter",
            ),
            ("transforms.route.topic.regex", "(.*)_shard[0-9]+"),
            ("transforms.route.topic.replacement", "$1"),
            (
                "transforms.unwrap.type",
                "io.debezium.transforms.ExtractNewRecordState",
            ),
            ("transforms.unwrap.drop.tombstones", "false"),
            ("transforms.unwrap.delete.handling.mode", "rewrite"),
            ("snapshot.mode", "never"),
            ("status.update.interval.ms", "2500"),
            ("topic.prefix", "app"),
            ("topic.transaction", "tx"),
            ("topic.creation.default.cleanup.policy", "compact"),
            ("producer.override.linger.ms", "20"),
        ]));
        assert!(m.rejected.is_empty(), "{:?}", m.rejected);
        assert_eq!(value_of(&m, "format"), ["avro"]);
        assert_eq!(
            value_of(&m, "header_converter"),
            ["simple"],
            "a Kafka Connect worker's default header converter"
        );
        assert_eq!(
            value_of(&m, "schema_registry_url"),
            ["http://registry:8081"]
        );
        assert_eq!(value_of(&m, "schema_registry_basic_auth"), ["u:p"]);
        assert_eq!(value_of(&m, "subject_name_strategy"), ["record"]);
        assert_eq!(value_of(&m, "topic_route"), ["(.*)_shard[0-9]+=$1"]);
        assert_eq!(value_of(&m, "envelope"), ["unwrap"]);
        assert_eq!(
            value_of(&m, "unwrap_delete_handling"),
            ["rewrite-with-tombstone"]
        );
        assert_eq!(value_of(&m, "snapshot_mode"), ["no_data"]);
        assert_eq!(value_of(&m, "status_interval"), ["2500ms"]);
        assert_eq!(value_of(&m, "transaction_topic"), ["app.tx"]);
        assert_eq!(value_of(&m, "topic_config"), ["cleanup.policy=compact"]);
        assert_eq!(value_of(&m, "kafka_property"), ["linger.ms=20"]);
        assert_eq!(
            value_of(&m, "slot"),
            ["debezium"],
            "Debezium's default slot name"
        );
    }

    #[test]
    fn other_transform_types_are_rejected_by_name() {
        let m = map(&props(&[
            ("transforms", "x"),
            (
                "transforms.x.type",
                "org.apache.kafka.connect.transforms.InsertField$Value",
            ),
        ]));
        assert_eq!(m.rejected.len(), 1);
        assert!(
            m.rejected[0].reason.contains("InsertField$Value"),
            "{:?}",
            m.rejected
        );
    }

    #[test]
    fn regex_routers_become_topic_renames_listed_last() {
        let router = [
            (
                "transforms.route.type",
                "org.apache.kafka.connect.transforms.RegexRouter",
            ),
            ("transforms.route.regex", "app\\.public\\.(.*)"),
            ("transforms.route.replacement", "cdc.$1"),
            (
                "transforms.unwrap.type",
                "io.debezium.transforms.ExtractNewRecordState",
            ),
        ];
        let last = map(&props(
            &[&router[..], &[("transforms", "unwrap,route")]].concat(),
        ));
        assert!(last.rejected.is_empty(), "{:?}", last.rejected);
        assert_eq!(
            value_of(&last, "topic_rename"),
            ["app\\.public\\.(.*)=cdc.$1"]
        );
        let first = map(&props(
            &[&router[..], &[("transforms", "route,unwrap")]].concat(),
        ));
        assert_eq!(first.rejected.len(), 1, "{:?}", first.rejected);
        assert!(first.rejected[0].reason.contains("list RegexRouters last"));
    }

    #[test]
    fn debezium_server_properties_are_read_with_their_prefixes() {
        let text = "\
# Debezium Server\n\
debezium.sink.type=kafka\n\
debezium.sink.kafka.producer.bootstrap.servers=kafka:9092\n\
debezium.sink.kafka.producer.key.serializer=org.apache.kafka.common.serialization.StringSerializer\n\
debezium.sink.kafka.producer.compression.type = zstd\n\
debezium.source.connector.class=io.debezium.connector.postgresql.PostgresConnector\n\
debezium.source.offset.storage.file.filename=data/offsets.dat\n\
debezium.source.database.hostname=db\n\
debezium.source.database.user=cdc\n\
debezium.source.database.password=s3cr\\\n\
   et\n\
debezium.source.database.dbname=shop\n\
debezium.source.topic.prefix=app\n\
debezium.source.plugin.name=pgoutput\n\
debezium.source.slot.name=server_slot\n\
debezium.format.value=json\n\
debezium.format.value.schemas.enable=false\n\
debezium.format.header=json\n\
debezium.source.snapshot.mode=fancy\n\
quarkus.log.level=INFO\n";
        let properties = parse_properties(text);
        assert_eq!(properties["debezium.source.database.password"], "s3cret");
        let m = map_server(&properties);
        assert_eq!(value_of(&m, "bootstrap_servers"), ["kafka:9092"]);
        assert_eq!(value_of(&m, "kafka_property"), ["compression.type=zstd"]);
        assert_eq!(value_of(&m, "topic_prefix"), ["app"]);
        assert_eq!(value_of(&m, "slot"), ["server_slot"]);
        assert_eq!(value_of(&m, "format"), ["json"]);
        assert_eq!(value_of(&m, "json_value_schemas"), ["false"]);
        assert_eq!(
            value_of(&m, "json_key_schemas"),
            Vec::<&str>::new(),
            "a value-only setting leaves the key schemas at Debezium's default"
        );
        assert_eq!(value_of(&m, "header_converter"), ["json"]);
        assert!(value_of(&m, "pg_url")[0].starts_with("postgres://cdc:s3cret@db:5432/shop"));
        let rejected: Vec<&str> = m.rejected.iter().map(|r| r.property.as_str()).collect();
        assert_eq!(
            rejected,
            ["debezium.source.snapshot.mode"],
            "named as in the file"
        );
    }

    #[test]
    fn every_debezium_3_6_property_is_mapped_ignored_or_refused() {
        let missing: Vec<&str> = DEBEZIUM_36_PROPERTIES
            .iter()
            .copied()
            .filter(|p| {
                // A name ending in '.' takes an argument: try one.
                let probe = match p.ends_with('.') {
                    true => format!("{p}1.chars"),
                    false => (*p).to_owned(),
                };
                rule(&probe).is_none()
            })
            .collect();
        assert!(missing.is_empty(), "no rule for {missing:?}");
    }

    #[test]
    fn every_property_the_docs_name_is_handled_or_refused() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/DEBEZIUM_CONFIG.md");
        let docs = std::fs::read_to_string(path).expect("docs/DEBEZIUM_CONFIG.md");
        let named: Vec<&str> = docs
            .lines()
            .filter_map(|l| l.strip_prefix("| `"))
            .filter_map(|l| l.split_once('`').map(|(name, _)| name))
            .collect();
        assert!(
            named.len() > 150,
            "the table lists {} properties",
            named.len()
        );
        for name in named {
            let probe = name.replace('*', "x");
            assert!(
                rule(&probe).is_some(),
                "docs/DEBEZIUM_CONFIG.md names {name}, which the import does not know"
            );
        }
    }

    #[test]
    fn the_docs_table_is_current() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/DEBEZIUM_CONFIG.md");
        let docs = std::fs::read_to_string(path).expect("docs/DEBEZIUM_CONFIG.md");
        let table = mapping_table();
        if docs.contains(&table) {
            return;
        }
        // The table is the page's last section: PGCDC_BLESS=1 rewrites it.
        if std::env::var_os("PGCDC_BLESS").is_some() {
            let start = docs.find("| Debezium property |").unwrap_or(docs.len());
            std::fs::write(path, format!("{}{table}", &docs[..start])).expect("write the docs");
        }
        panic!("docs/DEBEZIUM_CONFIG.md does not show the current mapping; run this test with PGCDC_BLESS=1 to rewrite its table");
    }
}
