//! The outbox event router: each row inserted into an outbox table becomes
//! one event on a topic chosen by the row, as Debezium's `EventRouter` SMT
//! routes it.
//!
//! For a row inserted (or read by the snapshot) into a table named by
//! `--outbox-table`:
//! - topic: `--outbox-route-topic-replacement` with `${routedByValue}`
//!   replaced by the `--outbox-route-by-field` column (default
//!   `outbox.event.<aggregatetype>`); characters Kafka does not allow in a
//!   topic name become `_`; a null routing value stops the connector (the row
//!   has no topic; Debezium fails on it too);
//! - key: the `--outbox-field-event-key` column (default `aggregateid`), so
//!   the events of one aggregate share a partition and keep commit order;
//! - value: the `--outbox-field-payload` column, or, when
//!   `--outbox-additional-placement` puts columns in the envelope, a struct
//!   `{payload, <alias>...}` named `<topic>.<routedByValue>.Value`;
//! - headers: `id` (the `--outbox-field-event-id` column), `eventType` only
//!   when Debezium 1.x's `--outbox-field-event-type` names a column the
//!   table has and no additional header already carries it (Debezium 2.x
//!   and 3.x add none), then each additional `header` column under its
//!   alias, written by the header converter.
//!
//! Encoding is the configured converters' ([`crate::encode`]), as for
//! Debezium's records: key and value are Connect data under the columns'
//! schemas. With `--format avro` they are Confluent Avro (a `jsonb` payload
//! is an Avro string named `io.debezium.data.Json`, a `bytea` one Avro
//! bytes), registered under the routed topic's subjects. With `--format
//! json` they are what JsonConverter writes for them (`EventRouterDelegate`
//! hands the converter the key column's value under its schema and the
//! payload column's value under its schema): the key a JSON string (`"o-1"`,
//! or `{"schema":{"type":"string","optional":false},"payload":"o-1"}` with
//! key schemas), a `jsonb` or `text` payload a JSON string holding its text,
//! a `bytea` payload its base64, wrapped in `{schema, payload}` with value
//! schemas. A null payload is a null under the payload's schema (in Avro no
//! value at all), as the converters write Debezium's.
//!
//! Deletes of outbox rows (applications delete rows once written) produce
//! nothing, and neither do their tombstones or truncates; an update of an
//! outbox row is skipped with a warning (Debezium's
//! `table.op.invalid.behavior=warn`).

use std::collections::HashMap;
use std::sync::Arc;

use super::options::TransformOptions;
use super::{intern, AdditionalField, Placement, Topic, TransformError};
use crate::event::record::{Data, Header, Record, RecordKey, RecordValue};
use crate::event::value::{ConnectSchema, ConnectType, Field, Value};
use crate::event::{ChangeEvent, Op, TableSchema};

/// The placeholder `--outbox-route-topic-replacement` substitutes.
pub const ROUTED_BY_VALUE: &str = "${routedByValue}";
/// The header carrying the event id, as Debezium names it.
pub const ID_HEADER: &str = "id";
/// The header carrying the event type.
pub const TYPE_HEADER: &str = "eventType";
/// Kafka's longest topic name.
const MAX_TOPIC_LENGTH: usize = 249;

/// The column names the router reads.
#[derive(Debug, Clone)]
struct Columns {
    id: String,
    key: String,
    /// Debezium 1.x's event type column (`--outbox-field-event-type`).
    kind: Option<String>,
    payload: String,
    route: String,
}

/// The outbox router of one pipeline attempt.
pub struct OutboxRouter {
    /// `(schema, table)` of each outbox table.
    tables: Vec<(String, String)>,
    columns: Columns,
    replacement: Arc<str>,
    additional: Vec<(AdditionalField, &'static str)>,
    /// Whether the type column goes into [`TYPE_HEADER`].
    type_header: bool,
    resolved: HashMap<u32, OutboxTable>,
}

/// One version of an outbox table, its columns found by name.
struct OutboxTable {
    table: Arc<TableSchema>,
    name: String,
    /// Names the records in errors.
    what: Arc<str>,
    id: usize,
    key: usize,
    kind: Option<usize>,
    payload: usize,
    route: usize,
    /// Column index and header name or envelope field of each additional column.
    headers: Vec<(usize, &'static str)>,
    envelope: Vec<(usize, String)>,
    key_schema: Arc<ConnectSchema>,
    payload_schema: Arc<ConnectSchema>,
    /// By routing value: the topic and (with envelope fields) the value schema.
    routes: HashMap<String, Route>,
}

struct Route {
    topic: Topic,
    envelope: Option<Arc<ConnectSchema>>,
}

impl OutboxRouter {
    /// The router `options` set up.
    pub fn new(options: &TransformOptions) -> Self {
        let additional: Vec<(AdditionalField, &'static str)> = options
            .outbox_additional_placement
            .0
            .iter()
            .map(|f| (f.clone(), intern(&f.alias)))
            .collect();
        let type_header = options
            .outbox_field_event_type
            .as_ref()
            .is_some_and(|kind| {
                !additional.iter().any(|(f, alias)| {
                    f.placement == Placement::Header && (f.column == *kind || *alias == TYPE_HEADER)
                })
            });
        OutboxRouter {
            tables: options
                .outbox_tables
                .iter()
                .filter_map(|t| t.split_once('.'))
                .map(|(s, t)| (s.to_owned(), t.to_owned()))
                .collect(),
            columns: Columns {
                id: options.outbox_field_event_id.clone(),
                key: options.outbox_field_event_key.clone(),
                kind: options.outbox_field_event_type.clone(),
                payload: options.outbox_field_payload.clone(),
                route: options.outbox_route_by_field.clone(),
            },
            replacement: options.outbox_route_topic_replacement.as_str().into(),
            additional,
            type_header,
            resolved: HashMap::new(),
        }
    }

    /// Whether `table` is an outbox table.
    pub fn routes(&self, table: &TableSchema) -> bool {
        self.tables
            .iter()
            .any(|(s, t)| *s == table.schema && *t == table.table)
    }

    /// The current version of `table`, its columns resolved.
    fn resolve(&mut self, table: &Arc<TableSchema>) -> Result<&mut OutboxTable, TransformError> {
        let stale = self
            .resolved
            .get(&table.relation_id)
            .is_none_or(|r| !Arc::ptr_eq(&r.table, table));
        if stale {
            let resolved = self.resolve_columns(table)?;
            self.resolved.insert(table.relation_id, resolved);
        }
        Ok(self
            .resolved
            .get_mut(&table.relation_id)
            .expect("inserted above"))
    }

    fn resolve_columns(&self, table: &Arc<TableSchema>) -> Result<OutboxTable, TransformError> {
        let name = format!("{}.{}", table.schema, table.table);
        let find = |column: &str| table.columns.iter().position(|c| c.name == column);
        let require = |column: &str, flag: &'static str| {
            find(column).ok_or_else(|| TransformError::MissingColumn {
                table: name.clone(),
                column: column.to_owned(),
                flag,
            })
        };
        let id = require(&self.columns.id, "--outbox-field-event-id")?;
        let key = require(&self.columns.key, "--outbox-field-event-key")?;
        let payload = require(&self.columns.payload, "--outbox-field-payload")?;
        let route = require(&self.columns.route, "--outbox-route-by-field")?;
        let kind = self
            .columns
            .kind
            .as_deref()
            .and_then(find)
            .filter(|_| self.type_header);
        let mut headers = Vec::new();
        let mut envelope = Vec::new();
        for (field, alias) in &self.additional {
            let column = require(&field.column, "--outbox-additional-placement")?;
            match field.placement {
                Placement::Header => headers.push((column, *alias)),
                Placement::Envelope => envelope.push((column, field.alias.clone())),
            }
        }
        Ok(OutboxTable {
            // A null aggregate id gives a null Kafka key, so the key schema
            // never holds a null (Debezium's is required for a NOT NULL column).
            key_schema: Arc::new(ConnectSchema {
                optional: false,
                ..table.columns[key].schema.clone()
            }),
            payload_schema: Arc::new(table.columns[payload].schema.clone()),
            table: Arc::clone(table),
            what: format!("outbox events of table {name}").into(),
            name,
            id,
            key,
            kind,
            payload,
            route,
            headers,
            envelope,
            routes: HashMap::new(),
        })
    }

    /// The records of `event`: see the module documentation.
    pub fn records<'e>(
        &mut self,
        event: &'e ChangeEvent,
        mut headers: Vec<Header<'e>>,
    ) -> Result<Vec<Record<'e>>, TransformError> {
        match event.op {
            Op::Create | Op::Read => {}
            Op::Update => {
                tracing::warn!(
                    table = %format!("{}.{}", event.table.schema, event.table.table),
                    lsn = %event.source.lsn,
                    "update of an outbox row ignored; outbox tables are expected to receive inserts only"
                );
                return Ok(Vec::new());
            }
            Op::Delete | Op::Truncate => return Ok(Vec::new()),
        }
        let Some(row) = event.after.as_ref() else {
            return Ok(Vec::new());
        };
        let replacement = Arc::clone(&self.replacement);
        let table = self.resolve(&event.table)?;
        let column = |i: usize| row.get(i).unwrap_or(&Value::Null);

        let routed = match column(table.route) {
            Value::Null => {
                return Err(TransformError::NullRoute {
                    table: table.name.clone(),
                    column: table.table.columns[table.route].name.clone(),
                    lsn: event.source.lsn,
                })
            }
            Value::String(s) => s.clone(),
            other => other.to_text().unwrap_or_default(),
        };
        if !table.routes.contains_key(&routed) {
            let route = new_route(table, &replacement, &routed, event)?;
            table.routes.insert(routed.clone(), route);
        }
        let route = &table.routes[&routed];
        let data = |schema: &Arc<ConnectSchema>, value: Value| Data {
            schema: Arc::clone(schema),
            value,
            what: Arc::clone(&table.what),
        };

        let key = match column(table.key) {
            Value::Null => None,
            value => Some(RecordKey::Data(data(&table.key_schema, value.clone()))),
        };
        let payload = column(table.payload);
        let value = match &route.envelope {
            Some(schema) => {
                let mut fields = vec![("payload".to_owned(), payload.clone())];
                fields.extend(
                    table
                        .envelope
                        .iter()
                        .map(|(i, alias)| (alias.clone(), column(*i).clone())),
                );
                data(schema, Value::Struct(fields))
            }
            None => data(&table.payload_schema, payload.clone()),
        };

        // Each header under its column's schema (what a JSON header
        // converter writes beside the value).
        let header = |name, i: usize| {
            let schema = table.table.columns.get(i).map(|c| c.schema.clone());
            let schema = schema.unwrap_or_else(|| ConnectSchema::primitive(ConnectType::String));
            Header::value(name, column(i).clone(), Arc::new(schema))
        };
        headers.push(header(ID_HEADER, table.id));
        if let Some(kind) = table.kind {
            headers.push(header(TYPE_HEADER, kind));
        }
        for (i, name) in &table.headers {
            headers.push(header(name, *i));
        }
        Ok(vec![Record {
            topic: Arc::clone(&route.topic),
            key,
            value: Some(RecordValue::Data(value)),
            headers,
        }])
    }
}

/// The topic (and envelope schema) of rows routed by `routed`.
fn new_route(
    table: &OutboxTable,
    replacement: &str,
    routed: &str,
    event: &ChangeEvent,
) -> Result<Route, TransformError> {
    let topic = topic_name(&replacement.replace(ROUTED_BY_VALUE, routed));
    if topic.len() > MAX_TOPIC_LENGTH || topic.is_empty() {
        return Err(TransformError::TopicTooLong {
            table: table.name.clone(),
            lsn: event.source.lsn,
            length: topic.len(),
        });
    }
    let envelope = (!table.envelope.is_empty()).then(|| {
        let columns = &table.table.columns;
        let mut fields = vec![Field {
            name: "payload".to_owned(),
            schema: columns[table.payload].schema.clone(),
        }];
        fields.extend(table.envelope.iter().map(|(i, alias)| Field {
            name: alias.clone(),
            schema: columns[*i].schema.clone(),
        }));
        // Debezium names it after the row schema with the routing value
        // before its last part; the value is made a valid Avro name part.
        let name = format!("{}.{}.Value", table.table.topic, name_part(routed));
        Arc::new(ConnectSchema::structure(&name, fields))
    });
    Ok(Route {
        topic: topic.into(),
        envelope,
    })
}

/// `name` with every character Kafka does not allow in a topic name as `_`.
fn topic_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// `value` as one part of an Avro name: letters, digits and `_`, not
/// starting with a digit.
fn name_part(value: &str) -> String {
    let mut part: String = value
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if !part.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        part.insert(0, '_');
    }
    part
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_and_name_parts_are_sanitized() {
        assert_eq!(topic_name("outbox.event.Order"), "outbox.event.Order");
        assert_eq!(topic_name("outbox.event.a b/ü"), "outbox.event.a_b__");
        assert_eq!(name_part("purchase-order"), "purchase_order");
        assert_eq!(name_part("1st"), "_1st");
    }
}
