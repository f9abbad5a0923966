//! The JsonConverter's own forms, shared by the record writer and the
//! header converter: a Connect schema as JSON, a value as JSON, and the
//! `{"schema":…,"payload":…}` envelope.

use serde_json::{Map, Value as Json};

use crate::event::value::{ConnectSchema, ConnectType, Value};

/// A Connect schema as the JsonConverter writes it; `field` names a struct field.
pub fn schema_json(schema: &ConnectSchema, field: Option<&str>) -> Json {
    let mut m = Map::new();
    m.insert("type".into(), Json::from(schema.kind.as_str()));
    match schema.kind {
        ConnectType::Struct => {
            let fields = schema
                .fields
                .iter()
                .map(|f| schema_json(&f.schema, Some(&f.name)))
                .collect();
            m.insert("fields".into(), Json::Array(fields));
        }
        ConnectType::Array => {
            if let Some(items) = &schema.items {
                m.insert("items".into(), schema_json(items, None));
            }
        }
        ConnectType::Map => {
            if let Some((keys, values)) = schema.map.as_deref() {
                m.insert("keys".into(), schema_json(keys, None));
                m.insert("values".into(), schema_json(values, None));
            }
        }
        _ => {}
    }
    m.insert("optional".into(), Json::Bool(schema.optional));
    if let Some(name) = &schema.name {
        m.insert("name".into(), Json::from(name.as_str()));
    }
    if let Some(version) = schema.version {
        m.insert("version".into(), Json::from(version));
    }
    if let Some(doc) = &schema.doc {
        m.insert("doc".into(), Json::from(doc.as_str()));
    }
    if !schema.parameters.is_empty() {
        let params = schema
            .parameters_in_connect_order()
            .map(|(k, v)| (k.to_owned(), Json::from(v)))
            .collect();
        m.insert("parameters".into(), Json::Object(params));
    }
    if let Some(default) = &schema.default {
        m.insert("default".into(), value_json(default));
    }
    if let Some(field) = field {
        m.insert("field".into(), Json::from(field));
    }
    Json::Object(m)
}

/// A Connect value as the JsonConverter writes it (its JSON form,
/// [`Value`]'s `Serialize`).
pub fn value_json(value: &Value) -> Json {
    // Serializing a Value cannot fail: every map key is a string.
    serde_json::to_value(value).unwrap_or(Json::Null)
}

/// A record as the JsonConverter writes it: `{"schema":<schema>,"payload":
/// <payload>}`, or the bare payload without a schema. `payload` appends the
/// payload and returns whether there is one (`false`: a null key, `None`).
pub(in crate::encode) fn enveloped(
    schema: Option<&str>,
    payload: impl FnOnce(&mut Vec<u8>) -> bool,
) -> Option<Vec<u8>> {
    enveloped_in(schema, 512, payload)
}

/// As [`enveloped`], in a buffer with room for `payload_capacity` bytes
/// besides the schema (a buffer that grows copies what it holds).
pub(in crate::encode) fn enveloped_in(
    schema: Option<&str>,
    payload_capacity: usize,
    payload: impl FnOnce(&mut Vec<u8>) -> bool,
) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(schema.map_or(0, str::len) + payload_capacity);
    if let Some(schema) = schema {
        out.extend_from_slice(b"{\"schema\":");
        out.extend_from_slice(schema.as_bytes());
        out.extend_from_slice(b",\"payload\":");
    }
    if !payload(&mut out) {
        return None;
    }
    if schema.is_some() {
        out.push(b'}');
    }
    Some(out)
}
