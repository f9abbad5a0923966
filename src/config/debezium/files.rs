//! The two file forms: Kafka Connect connector JSON, and Debezium Server
//! `.properties` (whose prefixes are renamed to the connector's names).

use std::collections::BTreeMap;

use super::{map, Mapping};

/// The properties of a Kafka Connect connector JSON: `{"name", "config"}`
/// or the bare config object; values may be strings, numbers or booleans.
pub fn parse_connect_json(text: &str) -> Result<BTreeMap<String, String>, String> {
    let json: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))?;
    let object = json.as_object().ok_or("expected a JSON object")?;
    let (config, name) = match object.get("config") {
        Some(serde_json::Value::Object(config)) => (config, object.get("name")),
        Some(_) => return Err("\"config\" must be an object of connector properties".to_owned()),
        None => (object, None),
    };
    let mut properties = BTreeMap::new();
    if let Some(name) = name.and_then(|n| n.as_str()) {
        properties.insert("name".to_owned(), name.to_owned());
    }
    for (key, value) in config {
        let value = match value {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Number(n) => n.to_string(),
            serde_json::Value::Bool(b) => b.to_string(),
            _ => {
                return Err(format!(
                    "property {key:?} must be a string, number or boolean"
                ))
            }
        };
        properties.insert(key.clone(), value);
    }
    Ok(properties)
}

/// A Java `.properties` file: `key=value`, `key: value` or `key value`
/// lines, `#`/`!` comments, `\` line continuations and escapes.
pub fn parse_properties(text: &str) -> BTreeMap<String, String> {
    let mut properties = BTreeMap::new();
    let mut logical = String::new();
    for line in text.lines() {
        let line = line.trim_start();
        if logical.is_empty() && (line.is_empty() || line.starts_with('#') || line.starts_with('!'))
        {
            continue;
        }
        let continued = line.chars().rev().take_while(|&c| c == '\\').count() % 2 == 1;
        if continued {
            logical.push_str(&line[..line.len() - 1]);
            continue;
        }
        logical.push_str(line);
        let entry = std::mem::take(&mut logical);
        let (key, value) = split_property(&entry);
        properties.insert(unescape(&key), unescape(value.trim_start()));
    }
    properties
}

fn split_property(entry: &str) -> (String, &str) {
    let mut key = String::new();
    let mut chars = entry.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => {
                key.push(c);
                if let Some((_, next)) = chars.next() {
                    key.push(next);
                }
            }
            '=' | ':' => return (key, &entry[i + 1..]),
            c if c.is_whitespace() => {
                let rest = entry[i..].trim_start();
                let rest = rest
                    .strip_prefix('=')
                    .or_else(|| rest.strip_prefix(':'))
                    .unwrap_or(rest);
                return (key, rest);
            }
            c => key.push(c),
        }
    }
    (key, "")
}

fn unescape(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                match u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    Some(c) => out.push(c),
                    None => out.push_str(&hex),
                }
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    out
}

/// A Debezium Server `application.properties`: `debezium.source.*` are the
/// connector's properties, `debezium.sink.kafka.producer.*` the producer's,
/// `debezium.format.*` the converters, `debezium.transforms*` the
/// transforms.
pub fn map_server(properties: &BTreeMap<String, String>) -> Mapping {
    let mut connector: BTreeMap<String, String> = BTreeMap::new();
    // Connector-form name -> the file's own name, for messages.
    let mut names: BTreeMap<String, String> = BTreeMap::new();
    let mut outside = Mapping::default();
    for (property, value) in properties {
        let renamed = if let Some(p) = property.strip_prefix("debezium.source.") {
            match p {
                p if p.starts_with("offset.") => {
                    outside.ignored.push((
                        property.clone(),
                        "pgcdc-kafka resumes from the replication slot; to continue after the offset Debezium stored, pass --takeover-debezium file:<its offset.storage.file.filename> (or its offset.storage.topic)".to_owned(),
                    ));
                    None
                }
                _ => Some(p.to_owned()),
            }
        } else if let Some(p) = property.strip_prefix("debezium.sink.kafka.producer.") {
            Some(format!("producer.override.{p}"))
        } else if let Some(p) = property.strip_prefix("debezium.transforms") {
            Some(format!("transforms{p}"))
        } else if let Some(p) = property.strip_prefix("debezium.predicates") {
            Some(format!("predicates{p}"))
        } else if let Some(side) = property
            .strip_prefix("debezium.format.")
            .filter(|s| matches!(*s, "key" | "value" | "header"))
        {
            let class = match value.trim() {
                "json" => "org.apache.kafka.connect.json.JsonConverter",
                "avro" => "io.confluent.connect.avro.AvroConverter",
                other => {
                    outside.reject(
                        property,
                        other,
                        "only the json and avro formats are supported",
                    );
                    continue;
                }
            };
            let name = format!("{side}.converter");
            names.insert(name.clone(), property.clone());
            connector.insert(name, class.to_owned());
            continue;
        } else if let Some(rest) = property.strip_prefix("debezium.format.") {
            match rest.split_once('.') {
                Some((side @ ("key" | "value"), option)) => {
                    Some(format!("{side}.converter.{option}"))
                }
                _ => {
                    outside.reject(property, value, "only debezium.format.key, debezium.format.value and their options are supported");
                    None
                }
            }
        } else if property == "debezium.sink.type" {
            if value.trim() != "kafka" {
                outside.reject(
                    property,
                    value,
                    "pgcdc-kafka writes to Kafka only (debezium.sink.type=kafka)",
                );
            } else {
                outside.ignored.push((
                    property.clone(),
                    "the Kafka sink is what pgcdc-kafka is".to_owned(),
                ));
            }
            None
        } else if property.starts_with("debezium.sink.") {
            outside.reject(property, value, "only the Kafka sink's producer settings (debezium.sink.kafka.producer.*) can be imported");
            None
        } else if property.starts_with("quarkus.") {
            outside.ignored.push((
                property.clone(),
                "a Quarkus runtime setting of Debezium Server (logging, HTTP)".to_owned(),
            ));
            None
        } else {
            outside.reject(property, value, "not a Debezium Server property that pgcdc-kafka knows (connector properties start with debezium.source.)");
            None
        };
        if let Some(name) = renamed {
            names.insert(name.clone(), property.clone());
            connector.insert(name, value.clone());
        }
    }
    // Debezium Server writes headers with a JsonConverter unless
    // debezium.format.header says otherwise.
    connector
        .entry("header.converter".to_owned())
        .or_insert_with(|| "org.apache.kafka.connect.json.JsonConverter".to_owned());
    map_renamed(&connector, &names, outside)
}

/// Maps the connector-form `connector` properties, then names each
/// property in the messages as the file spelled it (`names`), and adds what
/// `outside` found among the properties that are not the connector's.
fn map_renamed(
    connector: &BTreeMap<String, String>,
    names: &BTreeMap<String, String>,
    outside: Mapping,
) -> Mapping {
    let mut mapping = map(connector);
    let rename = |s: &str| {
        s.split(", ")
            .map(|part| {
                let (name, rest) = part.split_once(' ').map_or((part, ""), |(n, r)| (n, r));
                let name = names.get(name).map_or(name, String::as_str);
                if rest.is_empty() {
                    name.to_owned()
                } else {
                    format!("{name} {rest}")
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    for m in &mut mapping.mapped {
        m.from = rename(&m.from);
    }
    for r in &mut mapping.rejected {
        r.property = rename(&r.property);
    }
    for (p, _) in &mut mapping.ignored {
        *p = rename(p);
    }
    mapping.ignored.extend(outside.ignored);
    mapping.rejected.extend(outside.rejected);
    mapping
}
