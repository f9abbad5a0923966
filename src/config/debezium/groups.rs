//! Properties that map together: the connection URL, the converters, the
//! topic settings and the transforms.

use std::collections::BTreeMap;

/// Debezium's TLS file properties and the libpq URL parameters they become.
const TLS_FILES: [(&str, &str); 3] = [
    ("database.sslrootcert", "sslrootcert"),
    ("database.sslcert", "sslcert"),
    ("database.sslkey", "sslkey"),
];
use super::Mapping;

/// `${provider:path:key}`: Kafka Connect resolves these, we cannot.
pub(super) fn is_config_provider(value: &str) -> bool {
    let v = value.trim();
    v.starts_with("${") && v.ends_with('}') && v.contains(':')
}

/// database.* into pg_url.
pub(super) fn map_connection(properties: &BTreeMap<String, String>, mapping: &mut Mapping) {
    let get = |k: &str| properties.get(k).filter(|v| !is_config_provider(v));
    let parts = [
        "database.hostname",
        "database.port",
        "database.user",
        "database.password",
        "database.dbname",
    ];
    if !parts.iter().any(|p| properties.contains_key(*p)) {
        return;
    }
    let Some(host) = get("database.hostname") else {
        mapping.reject(
            "database.hostname",
            "",
            "is required with the other database.* properties",
        );
        return;
    };
    let port = match get("database.port").map(|p| p.trim().parse::<u16>()) {
        None => 5432,
        Some(Ok(port)) => port,
        Some(Err(_)) => {
            mapping.reject(
                "database.port",
                properties["database.port"].as_str(),
                "expects a port number",
            );
            return;
        }
    };
    let mut url = match url::Url::parse("postgres://localhost") {
        Ok(url) => url,
        Err(_) => return,
    };
    let host = host.trim();
    let host_ok = if host.contains(':') && !host.starts_with('[') {
        url.set_host(Some(&format!("[{host}]"))).is_ok()
    } else {
        url.set_host(Some(host)).is_ok()
    };
    if !host_ok {
        mapping.reject("database.hostname", host, "is not a host name or address");
        return;
    }
    let _ = url.set_port(Some(port));
    if let Some(user) = get("database.user") {
        let _ = url.set_username(user);
    }
    if let Some(password) = get("database.password") {
        let _ = url.set_password(Some(password));
    }
    if let Some(dbname) = get("database.dbname") {
        url.set_path(&format!("/{}", percent_encode_path(dbname)));
    }
    match properties.get("database.sslmode").map(|m| m.trim()) {
        None => {}
        Some(mode @ ("disable" | "allow" | "prefer" | "require" | "verify-ca" | "verify-full")) => {
            url.query_pairs_mut().append_pair("sslmode", mode);
        }
        Some(other) => mapping.reject(
            "database.sslmode",
            other,
            "expects disable, allow, prefer, require, verify-ca or verify-full",
        ),
    }
    for (property, parameter) in TLS_FILES {
        if let Some(path) = get(property) {
            url.query_pairs_mut().append_pair(parameter, path.trim());
        }
    }
    let from: Vec<&str> = parts
        .iter()
        .copied()
        .chain(["database.sslmode"])
        .chain(TLS_FILES.iter().map(|(p, _)| *p))
        .filter(|p| properties.contains_key(*p))
        .collect();
    mapping.set("pg_url", url.to_string(), &from.join(", "));
}

fn percent_encode_path(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// key.converter / value.converter and their properties into format,
/// json_key_schemas / json_value_schemas and the registry settings.
pub(super) fn map_converters(properties: &BTreeMap<String, String>, mapping: &mut Mapping) {
    const JSON: &str = "org.apache.kafka.connect.json.JsonConverter";
    const AVRO: &str = "io.confluent.connect.avro.AvroConverter";
    let mut formats: Vec<(&str, &str)> = Vec::new();
    for side in ["key", "value"] {
        let property = format!("{side}.converter");
        let Some(class) = properties.get(&property) else {
            continue;
        };
        let format = match class.trim() {
            JSON => "json",
            AVRO => "avro",
            "io.apicurio.registry.utils.converter.AvroConverter" => {
                mapping.reject(&property, class, "use io.confluent.connect.avro.AvroConverter with the registry's Confluent-compatible API (Apicurio: /apis/ccompat/v7)");
                continue;
            }
            other => {
                mapping.reject(
                    &property,
                    other,
                    format!("only {JSON} and {AVRO} are supported"),
                );
                continue;
            }
        };
        formats.push((side, format));
        let prefix = format!("{side}.converter.");
        for (p, value) in properties
            .range(prefix.clone()..)
            .take_while(|(p, _)| p.starts_with(&prefix))
        {
            map_converter_property(format, class, p, &p[prefix.len()..], value, mapping);
        }
    }
    if let [(_, key), (_, value)] = formats.as_slice() {
        if key != value {
            mapping.reject(
                "key.converter",
                key,
                format!(
                    "keys and values use one format in pgcdc-kafka; value.converter is {value}"
                ),
            );
        }
    }
    if let Some((_, format)) = formats.first() {
        let from: Vec<String> = formats
            .iter()
            .map(|(side, _)| format!("{side}.converter"))
            .collect();
        mapping.set("format", *format, &from.join(", "));
    }
    // Without header.converter a Kafka Connect worker writes headers with
    // its default SimpleHeaderConverter: so does the imported run.
    if !properties.contains_key("header.converter") {
        mapping.set(
            "header_converter",
            "simple",
            "header.converter (Kafka Connect's default)",
        );
    }
    // Properties of a side whose converter is not set belong to the
    // worker's converter: say so rather than drop them silently.
    for side in ["key", "value"] {
        let prefix = format!("{side}.converter.");
        if !properties.contains_key(&format!("{side}.converter")) {
            for (p, value) in properties
                .range(prefix.clone()..)
                .take_while(|(p, _)| p.starts_with(&prefix))
            {
                mapping.reject(
                    p,
                    value,
                    format!(
                        "set {side}.converter too, so it is clear which converter it configures"
                    ),
                );
            }
        }
    }
}

/// One `<side>.converter.<option>` property of a `format` converter (`class`).
fn map_converter_property(
    format: &str,
    class: &str,
    p: &str,
    option: &str,
    value: &str,
    mapping: &mut Mapping,
) {
    match (format, option) {
        // Each side keeps its own setting: a value-only `false` must not
        // change the key bytes (partitions, compaction) on migration.
        ("json", "schemas.enable") if p.starts_with("key.") => {
            mapping.set("json_key_schemas", value.trim().to_owned(), p)
        }
        ("json", "schemas.enable") => mapping.set("json_value_schemas", value.trim().to_owned(), p),
        ("json", "schemas.cache.size" | "decimal.format" | "replace.null.with.default") => {
            mapping.ignored.push((
                p.to_owned(),
                "not configurable for the JSON format".to_owned(),
            ));
        }
        ("avro", "schema.registry.url") => {
            let first = value
                .split(',')
                .next()
                .unwrap_or_default()
                .trim()
                .to_owned();
            mapping.set("schema_registry_url", first, p);
        }
        ("avro", "basic.auth.user.info") => {
            mapping.set("schema_registry_basic_auth", value.to_owned(), p)
        }
        ("avro", "basic.auth.credentials.source") if value.trim() == "USER_INFO" => {
            mapping.ignored.push((
                p.to_owned(),
                "USER_INFO is how --schema-registry-basic-auth works".to_owned(),
            ));
        }
        ("avro", "key.subject.name.strategy" | "value.subject.name.strategy") => {
            match value.trim() {
                "io.confluent.kafka.serializers.subject.TopicNameStrategy" => {
                    mapping.set("subject_name_strategy", "topic", p)
                }
                "io.confluent.kafka.serializers.subject.RecordNameStrategy" => {
                    mapping.set("subject_name_strategy", "record", p)
                }
                other => mapping.reject(
                    p,
                    other,
                    "only TopicNameStrategy and RecordNameStrategy are supported",
                ),
            }
        }
        ("avro", "auto.register.schemas") if value.trim() == "true" => {
            mapping
                .ignored
                .push((p.to_owned(), "schemas are always registered".to_owned()));
        }
        (
            "avro",
            "schemas.enable"
            | "schemas.cache.size"
            | "schema.cache.size"
            | "connect.meta.data"
            | "enhanced.avro.schema.support",
        ) => {
            mapping.ignored.push((
                p.to_owned(),
                "not configurable: schemas are written as the AvroConverter's defaults write them"
                    .to_owned(),
            ));
        }
        _ => mapping.reject(
            p,
            value,
            format!("converter property not supported with {class}"),
        ),
    }
}

/// topic.prefix-dependent and prefixed topic settings, heartbeats, the
/// table list and producer overrides.
pub(super) fn map_topics(properties: &BTreeMap<String, String>, mapping: &mut Mapping) {
    let prefix = properties
        .get("topic.prefix")
        .or_else(|| properties.get("database.server.name"));
    if !properties.contains_key("topic.prefix") {
        if let Some(name) = properties.get("database.server.name") {
            mapping.set("topic_prefix", name.clone(), "database.server.name");
        }
    } else if properties.contains_key("database.server.name") {
        mapping.ignored.push((
            "database.server.name".to_owned(),
            "topic.prefix is set".to_owned(),
        ));
    }
    if let Some(suffix) = properties.get("topic.transaction") {
        match prefix {
            Some(prefix) => {
                let delimiter = properties.get("topic.delimiter").map_or(".", |d| d.as_str());
                mapping.set("transaction_topic", format!("{prefix}{delimiter}{suffix}"), "topic.prefix, topic.delimiter, topic.transaction")
            }
            None => mapping.reject("topic.transaction", suffix, "needs topic.prefix in the same file (the topic is <topic.prefix>.<topic.transaction>)"),
        }
    }
    if let Some(ms) = properties.get("heartbeat.interval.ms") {
        match ms.trim().parse::<u64>() {
            Ok(0) => mapping.ignored.push((
                "heartbeat.interval.ms".to_owned(),
                "0 leaves heartbeats off".to_owned(),
            )),
            Ok(ms) => mapping.set(
                "heartbeat_interval",
                format!("{ms}ms"),
                "heartbeat.interval.ms",
            ),
            Err(_) => mapping.reject(
                "heartbeat.interval.ms",
                ms,
                "expects a number of milliseconds",
            ),
        }
    }
    if let Some(tables) = properties.get("table.include.list") {
        mapping.set("table_include_list", tables.clone(), "table.include.list");
    }
    for (p, value) in properties {
        if let Some(name) = p.strip_prefix("topic.creation.default.") {
            if !matches!(name, "partitions" | "replication.factor") {
                mapping.set("topic_config", format!("{name}={value}"), p);
            }
        }
        if let Some(name) = p.strip_prefix("producer.override.") {
            match name {
                "bootstrap.servers" => mapping.set("bootstrap_servers", value.clone(), p),
                "key.serializer" | "value.serializer" => {
                    mapping.ignored.push((
                        p.clone(),
                        "pgcdc-kafka serializes keys and values itself".to_owned(),
                    ));
                }
                _ => mapping.set("kafka_property", format!("{name}={value}"), p),
            }
        }
    }
}

/// The transforms, by type.
pub(super) fn map_transforms(properties: &BTreeMap<String, String>, mapping: &mut Mapping) {
    let listed: Vec<&str> = properties
        .get("transforms")
        .map(|t| {
            t.split(',')
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .collect()
        })
        .unwrap_or_default();
    for (p, _) in properties
        .iter()
        .filter(|(p, _)| p.starts_with("transforms."))
    {
        let name = p["transforms.".len()..]
            .split('.')
            .next()
            .unwrap_or_default();
        if !listed.contains(&name) {
            mapping.ignored.push((p.clone(), format!("transform {name:?} is not in transforms, so Kafka Connect does not apply it either")));
        }
    }
    for &name in &listed {
        map_transform(properties, &listed, name, mapping);
    }
}

/// One listed transform `name`: its type's options, then what the type
/// needs beyond them.
fn map_transform(
    properties: &BTreeMap<String, String>,
    listed: &[&str],
    name: &str,
    mapping: &mut Mapping,
) {
    let prefix = format!("transforms.{name}.");
    let options: BTreeMap<&str, &str> = properties
        .range(prefix.clone()..)
        .take_while(|(p, _)| p.starts_with(&prefix))
        .map(|(p, v)| (&p[prefix.len()..], v.as_str()))
        .collect();
    let property = |option: &str| format!("{prefix}{option}");
    let Some(kind) = options.get("type").map(|t| t.trim()) else {
        mapping.reject(
            &property("type"),
            "",
            format!("transform {name:?} is listed in transforms but has no type"),
        );
        return;
    };
    let targets: &[(&str, &str)] = match kind {
        "io.debezium.transforms.ByLogicalTableRouter" => &[
            ("key.enforce.uniqueness", "topic_route_key_uniqueness"),
            ("key.field.name", "topic_route_key_field"),
        ],
        "io.debezium.transforms.outbox.EventRouter" => &[
            ("table.field.event.id", "outbox_field_event_id"),
            ("table.field.event.key", "outbox_field_event_key"),
            ("table.field.event.payload", "outbox_field_payload"),
            ("route.by.field", "outbox_route_by_field"),
            ("route.topic.replacement", "outbox_route_topic_replacement"),
            (
                "table.fields.additional.placement",
                "outbox_additional_placement",
            ),
        ],
        REGEX_ROUTER => &[],
        "io.debezium.transforms.ExtractNewRecordState" => &[
            ("delete.tombstone.handling.mode", "unwrap_delete_handling"),
            ("add.fields", "unwrap_add_fields"),
            ("add.headers", "unwrap_add_headers"),
        ],
        other => {
            mapping.reject(&property("type"), other, format!("transform type {other} is not supported (supported: ByLogicalTableRouter, outbox EventRouter, ExtractNewRecordState, RegexRouter)"));
            return;
        }
    };
    for (option, value) in &options {
        let p = property(option);
        if let Some((_, key)) = targets.iter().find(|(o, _)| o == option) {
            mapping.set(key, (*value).to_owned(), &p);
            continue;
        }
        match (kind, *option) {
            (_, "type") => {}
            // Checked below, with the predicate they name.
            (
                "io.debezium.transforms.outbox.EventRouter"
                | "io.debezium.transforms.ExtractNewRecordState",
                "predicate" | "negate",
            ) => {}
            (_, "predicate" | "negate") => mapping.reject(
                &p,
                value,
                format!("predicates are supported on the outbox EventRouter and ExtractNewRecordState only, not on {kind}"),
            ),
            (
                "io.debezium.transforms.ByLogicalTableRouter",
                "topic.regex" | "topic.replacement",
            ) => {}
            ("io.debezium.transforms.outbox.EventRouter", "table.field.event.type") => {
                mapping.ignored.push((
                    p,
                    format!("Debezium 3.x adds no header from it (1.x added eventType); to keep that header: table.fields.additional.placement={value}:header:eventType, or --outbox-field-event-type {value}"),
                ));
            }
            (REGEX_ROUTER, "regex" | "replacement") => {}
            (
                "io.debezium.transforms.ExtractNewRecordState",
                "drop.tombstones" | "delete.handling.mode",
            ) => {}
            (
                "io.debezium.transforms.ExtractNewRecordState",
                "add.fields.prefix" | "add.headers.prefix",
            ) if *value == "__" => {
                mapping
                    .ignored
                    .push((p, "__ is the prefix pgcdc-kafka uses".to_owned()));
            }
            _ => mapping.reject(&p, value, format!("option not supported for {kind}")),
        }
    }
    match kind {
        "io.debezium.transforms.ByLogicalTableRouter" => map_router(&options, &prefix, mapping),
        REGEX_ROUTER => map_regex_router(properties, listed, name, &options, &prefix, mapping),
        "io.debezium.transforms.outbox.EventRouter" => {
            map_outbox(properties, &options, kind, &property, mapping)
        }
        _ => map_unwrap(properties, listed, &options, &property, mapping),
    }
}

/// Kafka Connect's RegexRouter.
const REGEX_ROUTER: &str = "org.apache.kafka.connect.transforms.RegexRouter";

/// RegexRouter: its regex and replacement become one `--topic-rename`, which
/// renames topics after every other transform: so it must be listed after
/// them.
fn map_regex_router(
    properties: &BTreeMap<String, String>,
    listed: &[&str],
    name: &str,
    options: &BTreeMap<&str, &str>,
    prefix: &str,
    mapping: &mut Mapping,
) {
    let later_other = listed.iter().skip_while(|n| **n != name).skip(1).find(|n| {
        properties
            .get(&format!("transforms.{n}.type"))
            .is_none_or(|t| t.trim() != REGEX_ROUTER)
    });
    if let Some(other) = later_other {
        mapping.reject(
            "transforms",
            properties.get("transforms").map_or("", String::as_str),
            format!("RegexRouter {name:?} is listed before transform {other:?}; pgcdc-kafka renames topics after every other transform, so list RegexRouters last"),
        );
        return;
    }
    match (options.get("regex"), options.get("replacement")) {
        (Some(regex), Some(replacement)) => mapping.set(
            "topic_rename",
            format!("{regex}={replacement}"),
            &format!("{prefix}regex, {prefix}replacement"),
        ),
        _ => mapping.reject(
            &format!("{prefix}regex"),
            "",
            "RegexRouter needs regex and replacement",
        ),
    }
}

/// ByLogicalTableRouter: its regex and replacement become one `--topic-route`.
fn map_router(options: &BTreeMap<&str, &str>, prefix: &str, mapping: &mut Mapping) {
    let property = |option: &str| format!("{prefix}{option}");
    match (options.get("topic.regex"), options.get("topic.replacement")) {
        (Some(regex), Some(replacement)) => mapping.set(
            "topic_route",
            format!("{regex}={replacement}"),
            &format!("{prefix}topic.regex, {prefix}topic.replacement"),
        ),
        _ => mapping.reject(
            &property("topic.regex"),
            "",
            "ByLogicalTableRouter needs topic.regex and topic.replacement",
        ),
    }
}

/// The outbox EventRouter: which table is the outbox, from its predicate or
/// from `table.include.list`.
fn map_outbox(
    properties: &BTreeMap<String, String>,
    options: &BTreeMap<&str, &str>,
    kind: &str,
    property: &dyn Fn(&str) -> String,
    mapping: &mut Mapping,
) {
    match options.get("predicate") {
        Some(predicate) => {
            if options.get("negate").is_some_and(|n| n.trim() == "true") {
                mapping.reject(&property("negate"), "true", "a negated predicate on the outbox EventRouter is not supported; name the outbox topic in the predicate instead");
                return;
            }
            match outbox_tables_of(properties, predicate.trim()) {
                Ok(tables) => mapping.set(
                    "outbox_table",
                    tables.join(","),
                    &format!("table.include.list, {}", property("predicate")),
                ),
                Err(reason) => {
                    mapping.reject(&property("predicate"), predicate, reason)
                }
            }
        }
        None => match properties.get("table.include.list").map(|t| t.trim()) {
            Some(table) if !table.is_empty() && !table.contains(',') => {
                mapping.set("outbox_table", table.to_owned(), "table.include.list");
            }
            _ => mapping.reject(&property("type"), kind, "the outbox EventRouter needs table.include.list to name exactly one table, the outbox table, or a TopicNameMatches predicate naming the outbox topic"),
        },
    }
}

/// ExtractNewRecordState: `--envelope unwrap`, its predicate (only the
/// outbox router's, negated) and the deprecated delete options.
fn map_unwrap(
    properties: &BTreeMap<String, String>,
    listed: &[&str],
    options: &BTreeMap<&str, &str>,
    property: &dyn Fn(&str) -> String,
    mapping: &mut Mapping,
) {
    if let Some(predicate) = options.get("predicate").map(|p| p.trim()) {
        // Our unwrap applies to every table the outbox router does
        // not take: the same split as "not the outbox topic".
        let negated = options.get("negate").is_some_and(|n| n.trim() == "true");
        let outbox_predicate = listed.iter().any(|other| {
            properties
                .get(&format!("transforms.{other}.type"))
                .is_some_and(|t| t.trim() == "io.debezium.transforms.outbox.EventRouter")
                && properties
                    .get(&format!("transforms.{other}.predicate"))
                    .is_some_and(|p| p.trim() == predicate)
        });
        if !(negated && outbox_predicate) {
            mapping.reject(&property("predicate"), predicate, "ExtractNewRecordState takes only the negation of the outbox EventRouter's predicate (negate=true): it then applies to every table but the outbox");
            return;
        }
    }
    mapping.set("envelope", "unwrap", &property("type"));
    let legacy_mode = options.get("delete.handling.mode").map(|m| m.trim());
    let legacy_drop = options.get("drop.tombstones").map(|m| m.trim());
    if legacy_mode.is_some() || legacy_drop.is_some() {
        if options.contains_key("delete.tombstone.handling.mode") {
            mapping.reject(&property("delete.handling.mode"), legacy_mode.unwrap_or_default(), "set either delete.tombstone.handling.mode or the deprecated delete.handling.mode/drop.tombstones");
            return;
        }
        let keep_tombstones = match legacy_drop {
            None | Some("true") => false,
            Some("false") => true,
            Some(other) => {
                mapping.reject(&property("drop.tombstones"), other, "expects true or false");
                return;
            }
        };
        let mode = match (legacy_mode.unwrap_or("none"), keep_tombstones) {
            ("none", false) => "tombstone",
            ("none", true) => "delete-to-tombstone",
            ("drop", _) => {
                if keep_tombstones {
                    "tombstone"
                } else {
                    "drop"
                }
            }
            ("rewrite", false) => "rewrite",
            ("rewrite", true) => "rewrite-with-tombstone",
            (other, _) => {
                mapping.reject(
                    &property("delete.handling.mode"),
                    other,
                    "expects none, drop or rewrite",
                );
                return;
            }
        };
        let from: Vec<String> = ["delete.handling.mode", "drop.tombstones"]
            .iter()
            .filter(|o| options.contains_key(**o))
            .map(|o| property(o))
            .collect();
        mapping.set("unwrap_delete_handling", mode, &from.join(", "));
    }
}

/// The tables of `table.include.list` whose default topic
/// (`<topic.prefix>.<schema>.<table>`) the TopicNameMatches predicate
/// `name` matches: the outbox tables its EventRouter applies to.
fn outbox_tables_of(
    properties: &BTreeMap<String, String>,
    name: &str,
) -> Result<Vec<String>, String> {
    let kind = properties
        .get(&format!("predicates.{name}.type"))
        .map(|t| t.trim());
    if kind != Some("org.apache.kafka.connect.transforms.predicates.TopicNameMatches") {
        return Err(format!(
            "predicate {name:?} must be of type org.apache.kafka.connect.transforms.predicates.TopicNameMatches (found {})",
            kind.unwrap_or("none")
        ));
    }
    let pattern = properties
        .get(&format!("predicates.{name}.pattern"))
        .ok_or_else(|| format!("predicate {name:?} has no pattern"))?;
    let regex = regex::Regex::new(&format!("^(?:{pattern})$"))
        .map_err(|e| format!("predicate {name:?}: pattern {pattern:?} is not a regex: {e}"))?;
    let prefix = properties
        .get("topic.prefix")
        .or_else(|| properties.get("database.server.name"))
        .map(|p| p.trim())
        .ok_or("the predicate's topics need topic.prefix")?;
    let tables: Vec<String> = properties
        .get("table.include.list")
        .map(|list| {
            list.split(',')
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .unwrap_or_default()
        .into_iter()
        .filter(|table| regex.is_match(&format!("{prefix}.{table}")))
        .collect();
    match tables.is_empty() {
        true => Err(format!(
            "predicate {name:?} (pattern {pattern:?}) matches the topic of no table in table.include.list"
        )),
        false => Ok(tables),
    }
}
