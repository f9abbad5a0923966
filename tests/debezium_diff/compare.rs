//! The record-by-record comparison of pgcdc-kafka's output with Debezium's:
//! sans-IO, records in, [`Difference`]s out.
//!
//! Two records are equal when their topics, key bytes, value bytes and
//! headers (names, order, bytes) are equal, except for the volatile fields
//! [`mask_envelope`] and [`MASKED_HEADERS`] name: a key is compared byte for
//! byte (it decides the partition and compaction), a value structurally (JSON
//! objects key by key, with key order checked too, numbers as JSON numbers)
//! and then, once structurally equal, as text with the volatile values blanked,
//! so a formatting difference (a float printed with other digits, another
//! escape) still shows. Each difference names its place as a path:
//! `value/payload/after/c_float4`, `value/schema/fields[source]/fields[origin]`
//! (an array of Connect or Avro fields is indexed by field name), `headers/<name>`,
//! `key#bytes`, `headers#order`, `records` (the counts differ).

use std::collections::BTreeMap;
use std::fmt;

use regex::Regex;
use serde_json::{Map, Value as Json};

/// One Kafka record, as either side produced it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rec {
    pub topic: String,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Vec<u8>)>,
}

/// One way in which our record differs from Debezium's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    /// The converter/transform configuration compared (e.g. `json_schemas`).
    pub output: String,
    pub topic: String,
    /// The record's position in its topic (Debezium's order).
    pub index: usize,
    /// `c`, `u`, `d`, `t`, `m` (the envelope's op), `tombstone`, or `record`
    /// when the value has no op (a transform's output).
    pub kind: String,
    /// Debezium's key as text (ours when Debezium has no such record).
    pub key: String,
    pub path: String,
    pub ours: String,
    pub debezium: String,
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "[{}] {} #{} ({}) key {}: {}: ours {} vs debezium {}",
            self.output,
            self.topic,
            self.index,
            self.kind,
            self.key,
            self.path,
            self.ours,
            self.debezium
        )
    }
}

/// Headers whose value changes with every run: only their presence and
/// position are compared.
pub const MASKED_HEADERS: &[&str] = &["__debezium.context.runId"];

/// The envelope fields that differ between any two runs, relative to the
/// envelope (its `payload` when schemas are embedded): when the record was
/// processed, and which product (and version) wrote it, which must differ.
/// The source block's `ts_*` are the commit's time, read from the WAL, so
/// the same on both slots: compared.
const MASKED_ENVELOPE_FIELDS: &[&[&str]] =
    &[&["ts_ms"], &["ts_us"], &["ts_ns"], &["source", "version"]];

const MASK: &str = "<masked>";
const ABSENT: &str = "<absent>";

/// Compares the records of one output, topic by topic, in order.
pub fn compare_output(output: &str, ours: &[Rec], debezium: &[Rec]) -> (usize, Vec<Difference>) {
    let by_topic = |recs: &[Rec]| {
        let mut map: BTreeMap<String, Vec<Rec>> = BTreeMap::new();
        for r in recs {
            map.entry(r.topic.clone()).or_default().push(r.clone());
        }
        map
    };
    let (ours, debezium) = (by_topic(ours), by_topic(debezium));
    let mut topics: Vec<&String> = ours.keys().chain(debezium.keys()).collect();
    topics.sort();
    topics.dedup();
    let mut compared = 0;
    let mut diffs = Vec::new();
    for topic in topics {
        let empty = Vec::new();
        let o = ours.get(topic).unwrap_or(&empty);
        let d = debezium.get(topic).unwrap_or(&empty);
        if o.len() != d.len() {
            let first = d.first().or(o.first()).expect("a topic has a record");
            diffs.push(Difference {
                output: output.to_owned(),
                topic: topic.clone(),
                index: o.len().min(d.len()),
                kind: kind(first),
                key: key_text(first),
                path: "records".into(),
                ours: format!("{} records", o.len()),
                debezium: format!("{} records", d.len()),
            });
        }
        for (index, (o, d)) in o.iter().zip(d).enumerate() {
            compared += 1;
            let mut place = Place {
                output,
                topic,
                index,
                kind: kind(d),
                key: key_text(d),
                diffs: &mut diffs,
            };
            compare_record(&mut place, o, d);
        }
    }
    (compared, diffs)
}

/// Where differences are being collected: the record they belong to.
struct Place<'a> {
    output: &'a str,
    topic: &'a str,
    index: usize,
    kind: String,
    key: String,
    diffs: &'a mut Vec<Difference>,
}

impl Place<'_> {
    fn push(&mut self, path: String, ours: String, debezium: String) {
        self.diffs.push(Difference {
            output: self.output.to_owned(),
            topic: self.topic.to_owned(),
            index: self.index,
            kind: self.kind.clone(),
            key: self.key.clone(),
            path,
            ours,
            debezium,
        });
    }
}

fn compare_record(place: &mut Place<'_>, ours: &Rec, debezium: &Rec) {
    compare_bytes(
        place,
        "key",
        ours.key.as_deref(),
        debezium.key.as_deref(),
        false,
    );
    compare_bytes(
        place,
        "value",
        ours.value.as_deref(),
        debezium.value.as_deref(),
        true,
    );
    compare_headers(place, &ours.headers, &debezium.headers);
}

/// A key, value or header: equal bytes, or else the structural differences
/// of their JSON (with the envelope's volatile fields masked when
/// `envelope`), or else (structurally equal) a formatting difference.
fn compare_bytes(
    place: &mut Place<'_>,
    path: &str,
    ours: Option<&[u8]>,
    debezium: Option<&[u8]>,
    envelope: bool,
) {
    let (o, d) = match (ours, debezium) {
        (None, None) => return,
        (Some(o), Some(d)) if o == d => return,
        (Some(o), Some(d)) => (o, d),
        (o, d) => {
            place.push(path.to_owned(), show_bytes(o), show_bytes(d));
            return;
        }
    };
    let (Ok(mut oj), Ok(mut dj)) = (
        serde_json::from_slice::<Json>(o),
        serde_json::from_slice::<Json>(d),
    ) else {
        place.push(
            format!("{path}#bytes"),
            show_bytes(Some(o)),
            show_bytes(Some(d)),
        );
        return;
    };
    if envelope {
        mask_envelope(&mut oj, &mut dj);
    }
    let before = place.diffs.len();
    diff_json(place, path, &oj, &dj);
    for (ours, debezium) in number_formats(o, d) {
        place.push(format!("{path}#number-format"), ours, debezium);
    }
    if place.diffs.len() == before && envelope && blank_volatile(o) != blank_volatile(d) {
        place.push(
            format!("{path}#text"),
            show_bytes(Some(o)),
            show_bytes(Some(d)),
        );
    } else if place.diffs.len() == before && !envelope {
        // Structurally equal, different bytes: key bytes decide partitions.
        place.push(
            format!("{path}#bytes"),
            show_bytes(Some(o)),
            show_bytes(Some(d)),
        );
    }
}

/// Blanks the fields of [`MASKED_ENVELOPE_FIELDS`] present on both sides
/// of an envelope (a field present on one side only stays, and differs).
pub fn mask_envelope(ours: &mut Json, debezium: &mut Json) {
    fn envelope(v: &mut Json) -> Option<&mut Map<String, Json>> {
        let v = match v.get("payload") {
            Some(_) if v.get("schema").is_some() => v.get_mut("payload")?,
            _ => v,
        };
        let map = v.as_object_mut()?;
        (map.contains_key("op") && map.contains_key("source")).then_some(map)
    }
    fn at<'v>(map: &'v mut Map<String, Json>, path: &[&str]) -> Option<&'v mut Json> {
        let (last, parents) = path.split_last()?;
        let mut map = map;
        for p in parents {
            map = map.get_mut(*p)?.as_object_mut()?;
        }
        map.get_mut(*last)
    }
    let (Some(o), Some(d)) = (envelope(ours), envelope(debezium)) else {
        return;
    };
    for path in MASKED_ENVELOPE_FIELDS {
        if let (Some(o), Some(d)) = (at(o, path), at(d, path)) {
            *o = Json::from(MASK);
            *d = Json::from(MASK);
        }
    }
}

/// The text of a value with every `ts_*` and `version` value blanked, for
/// the formatting check after a structural comparison (which masked only
/// the named envelope fields, so a user column called `version` is still
/// compared there).
fn blank_volatile(bytes: &[u8]) -> String {
    static VOLATILE: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    let re = VOLATILE.get_or_init(|| {
        Regex::new(r#""(ts_ms|ts_us|ts_ns|version)":("[^"]*"|-?[0-9]+)"#).expect("regex")
    });
    re.replace_all(&String::from_utf8_lossy(bytes), "\"$1\":0")
        .into_owned()
}

fn compare_headers(
    place: &mut Place<'_>,
    ours: &[(String, Vec<u8>)],
    debezium: &[(String, Vec<u8>)],
) {
    let names = |h: &[(String, Vec<u8>)]| h.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    let (on, dn) = (names(ours), names(debezium));
    for (name, value) in debezium {
        match ours.iter().find(|(n, _)| n == name) {
            None => place.push(
                format!("headers/{name}"),
                ABSENT.into(),
                show_bytes(Some(value)),
            ),
            Some(_) if MASKED_HEADERS.contains(&name.as_str()) => {}
            Some((_, ov)) => compare_bytes(
                place,
                &format!("headers/{name}"),
                Some(ov),
                Some(value),
                false,
            ),
        }
    }
    for (name, value) in ours {
        if !dn.contains(name) {
            place.push(
                format!("headers/{name}"),
                show_bytes(Some(value)),
                ABSENT.into(),
            );
        }
    }
    let common = |a: &[String], b: &[String]| {
        a.iter()
            .filter(|n| b.contains(n))
            .cloned()
            .collect::<Vec<_>>()
    };
    let (oc, dc) = (common(&on, &dn), common(&dn, &on));
    if oc != dc {
        place.push("headers#order".into(), oc.join(","), dc.join(","));
    }
}

/// The structural differences between two JSON values under `path`.
fn diff_json(place: &mut Place<'_>, path: &str, ours: &Json, debezium: &Json) {
    match (ours, debezium) {
        (Json::Object(o), Json::Object(d)) => {
            for (k, dv) in d {
                let sub = format!("{path}/{k}");
                match o.get(k) {
                    Some(ov) => diff_json(place, &sub, ov, dv),
                    None => place.push(sub, ABSENT.into(), show(dv)),
                }
            }
            for (k, ov) in o {
                if !d.contains_key(k) {
                    place.push(format!("{path}/{k}"), show(ov), ABSENT.into());
                }
            }
            let order = |a: &Map<String, Json>, b: &Map<String, Json>| {
                a.keys()
                    .filter(|k| b.contains_key(*k))
                    .cloned()
                    .collect::<Vec<_>>()
            };
            let (oo, dd) = (order(o, d), order(d, o));
            if oo != dd {
                place.push(format!("{path}#order"), oo.join(","), dd.join(","));
            }
        }
        (Json::Array(o), Json::Array(d))
            if field_names(o).is_some() && field_names(d).is_some() =>
        {
            // Connect fields: matched by name, so one missing field does
            // not shift every later one.
            let (on, dn) = (
                field_names(o).unwrap_or_default(),
                field_names(d).unwrap_or_default(),
            );
            for (name, dv) in dn.iter().zip(d) {
                let sub = format!("{path}[{name}]");
                match on.iter().position(|n| n == name) {
                    Some(i) => diff_json(place, &sub, &o[i], dv),
                    None => place.push(sub, ABSENT.into(), show(dv)),
                }
            }
            for (name, ov) in on.iter().zip(o) {
                if !dn.contains(name) {
                    place.push(format!("{path}[{name}]"), show(ov), ABSENT.into());
                }
            }
            let (oc, dc): (Vec<_>, Vec<_>) = (
                on.iter().filter(|n| dn.contains(n)).cloned().collect(),
                dn.iter().filter(|n| on.contains(n)).cloned().collect(),
            );
            if oc != dc {
                place.push(format!("{path}#order"), oc.join(","), dc.join(","));
            }
        }
        (Json::Array(o), Json::Array(d)) => {
            if o.len() != d.len() {
                place.push(format!("{path}#len"), show(ours), show(debezium));
                return;
            }
            for (i, (ov, dv)) in o.iter().zip(d).enumerate() {
                diff_json(place, &format!("{path}[{i}]"), ov, dv);
            }
        }
        (o, d) if o == d => {}
        (o, d) => place.push(path.to_owned(), show(o), show(d)),
    }
}

/// The floating-point literals that write the same number differently on
/// the two sides (`-1.1754944e-38` vs `-1.1754944E-38`, `1.0E7` vs
/// `10000000.0`): JSON readers see equal numbers, so [`diff_json`] does not,
/// but the bytes differ. Each pair once.
fn number_formats(ours: &[u8], debezium: &[u8]) -> Vec<(String, String)> {
    let by_value = |bytes: &[u8]| {
        let mut map = std::collections::HashMap::new();
        for literal in float_literals(&String::from_utf8_lossy(bytes)) {
            if let Ok(v) = literal.parse::<f64>() {
                map.entry(v.to_bits()).or_insert(literal);
            }
        }
        map
    };
    let (o, d) = (by_value(ours), by_value(debezium));
    let mut pairs: Vec<(String, String)> = o
        .iter()
        .filter_map(|(bits, ol)| {
            let dl = d.get(bits)?;
            (ol != dl).then(|| (ol.clone(), dl.clone()))
        })
        .collect();
    pairs.sort();
    pairs
}

/// The number literals of a JSON text with a fraction or an exponent, in
/// order, skipping string contents.
fn float_literals(text: &str) -> Vec<String> {
    let mut literals = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some((start, c)) = chars.next() {
        match c {
            '"' => {
                while let Some((_, c)) = chars.next() {
                    match c {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        _ => {}
                    }
                }
            }
            '-' | '0'..='9' => {
                let mut end = start + c.len_utf8();
                while let Some(&(i, c)) = chars.peek() {
                    if !(c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-')) {
                        break;
                    }
                    end = i + c.len_utf8();
                    chars.next();
                }
                let literal = &text[start..end];
                if literal.contains(['.', 'e', 'E']) {
                    literals.push(literal.to_owned());
                }
            }
            _ => {}
        }
    }
    literals
}

/// The names of an array of Connect field schemas (`field`) or Avro record
/// fields (`name`).
fn field_names(items: &[Json]) -> Option<Vec<String>> {
    if items.is_empty() {
        return None;
    }
    items
        .iter()
        .map(|i| {
            i.get("field")
                .or_else(|| i.get("name"))
                .and_then(Json::as_str)
                .map(str::to_owned)
        })
        .collect()
}

fn show(v: &Json) -> String {
    let text = v.to_string();
    shorten(text)
}

fn show_bytes(b: Option<&[u8]>) -> String {
    match b {
        None => "null".into(),
        Some(b) => match std::str::from_utf8(b) {
            Ok(text) => shorten(format!("{text:?}")),
            Err(_) => format!(
                "0x{}",
                b.iter().map(|b| format!("{b:02x}")).collect::<String>()
            ),
        },
    }
}

fn shorten(text: String) -> String {
    const MAX: usize = 160;
    match text.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

/// The record kind a difference is filed under (see [`Difference::kind`]).
fn kind(r: &Rec) -> String {
    let Some(value) = &r.value else {
        return "tombstone".into();
    };
    let Ok(v) = serde_json::from_slice::<Json>(value) else {
        return "record".into();
    };
    let payload = match v.get("schema") {
        Some(_) => &v["payload"],
        None => &v,
    };
    payload
        .get("op")
        .and_then(Json::as_str)
        .map_or_else(|| "record".into(), str::to_owned)
}

fn key_text(r: &Rec) -> String {
    let Some(key) = &r.key else {
        return "null".into();
    };
    match serde_json::from_slice::<Json>(key) {
        Ok(v) => shorten(
            match v.get("schema") {
                Some(_) => &v["payload"],
                None => &v,
            }
            .to_string(),
        ),
        Err(_) => show_bytes(Some(key)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rec(topic: &str, key: Json, value: Option<Json>, headers: &[(&str, &str)]) -> Rec {
        Rec {
            topic: topic.into(),
            key: Some(key.to_string().into_bytes()),
            value: value.map(|v| v.to_string().into_bytes()),
            headers: headers
                .iter()
                .map(|(n, v)| (n.to_string(), v.as_bytes().to_vec()))
                .collect(),
        }
    }

    fn envelope(after: Json, ts: u64, version: &str) -> Json {
        json!({
            "schema": {"type": "struct", "fields": [
                {"type": "struct", "field": "after", "fields": [
                    {"type": "int32", "field": "id"}, {"type": "float", "field": "f"}]},
                {"type": "struct", "field": "source", "fields": [
                    {"type": "string", "field": "version"}, {"type": "int64", "field": "ts_ms"}]}]},
            "payload": {"before": null, "after": after,
                "source": {"version": version, "ts_ms": 7, "lsn": 10},
                "op": "c", "ts_ms": ts}
        })
    }

    fn paths(diffs: &[Difference]) -> Vec<&str> {
        diffs.iter().map(|d| d.path.as_str()).collect()
    }

    #[test]
    fn volatile_fields_and_run_ids_are_masked_and_nothing_else() {
        let d = rec(
            "p.public.t",
            json!({"id": 1}),
            Some(envelope(json!({"id": 1, "f": 1.5}), 100, "3.6.1.Final")),
            &[("__debezium.context.runId", "a")],
        );
        let o = rec(
            "p.public.t",
            json!({"id": 1}),
            Some(envelope(json!({"id": 1, "f": 1.5}), 200, "pgcdc-kafka 1")),
            &[("__debezium.context.runId", "b")],
        );
        let (n, diffs) = compare_output("json", std::slice::from_ref(&o), std::slice::from_ref(&d));
        assert_eq!((n, diffs), (1, vec![]));

        // A data value, a key, a header and the record count all still count.
        let o2 = rec(
            "p.public.t",
            json!({"id": 2}),
            Some(envelope(json!({"id": 1, "f": 1.25}), 200, "x")),
            &[],
        );
        let (_, diffs) = compare_output("json", &[o2, o], &[d]);
        assert_eq!(
            paths(&diffs),
            [
                "records",
                "key/id",
                "value/payload/after/f",
                "headers/__debezium.context.runId"
            ],
            "{diffs:#?}"
        );
    }

    #[test]
    fn a_masked_field_missing_on_one_side_is_a_difference() {
        let d = envelope(json!({"id": 1, "f": 1.5}), 100, "v");
        let mut o = d.clone();
        o["payload"].as_object_mut().unwrap().remove("ts_ms");
        let (_, diffs) = compare_output(
            "json",
            &[rec("t", json!(1), Some(o), &[])],
            &[rec("t", json!(1), Some(d), &[])],
        );
        assert_eq!(paths(&diffs), ["value/payload/ts_ms"]);
    }

    #[test]
    fn connect_fields_are_matched_by_name_and_order_checked() {
        let d = envelope(json!({"id": 1, "f": 1.5}), 1, "v");
        let mut o = d.clone();
        let fields = o["schema"]["fields"][0]["fields"].as_array_mut().unwrap();
        fields.reverse();
        fields[0]["optional"] = json!(true);
        let (_, diffs) = compare_output(
            "json",
            &[rec("t", json!(1), Some(o), &[])],
            &[rec("t", json!(1), Some(d), &[])],
        );
        assert_eq!(
            paths(&diffs),
            [
                "value/schema/fields[after]/fields[f]/optional",
                "value/schema/fields[after]/fields#order"
            ]
        );
    }

    #[test]
    fn avro_record_fields_are_matched_by_name() {
        let schema = |extra: bool| {
            let mut fields = vec![json!({"name": "id", "type": "int"})];
            if extra {
                fields.push(json!({"name": "origin", "type": ["null", "string"]}));
            }
            fields.push(json!({"name": "lsn", "type": "long"}));
            json!({"schema": {"type": "record", "name": "Source", "fields": fields}, "payload": {}})
        };
        let (_, diffs) = compare_output(
            "avro",
            &[rec("t", json!(1), Some(schema(false)), &[])],
            &[rec("t", json!(1), Some(schema(true)), &[])],
        );
        assert_eq!(paths(&diffs), ["value/schema/fields[origin]"]);
    }

    #[test]
    fn formatting_differences_show_as_text_and_bytes() {
        let d = Rec {
            topic: "t".into(),
            key: Some(br#"{"id":1.0}"#.to_vec()),
            value: Some(br#"{"op":"c","source":{},"ts_ms":1,"s":"\u00e9"}"#.to_vec()),
            headers: vec![],
        };
        let o = Rec {
            key: Some(br#"{"id": 1.0}"#.to_vec()),
            value: Some(
                "{\"op\":\"c\",\"source\":{},\"ts_ms\":2,\"s\":\"é\"}"
                    .as_bytes()
                    .to_vec(),
            ),
            ..d.clone()
        };
        let (_, diffs) = compare_output("json", &[o], &[d]);
        assert_eq!(paths(&diffs), ["key#bytes", "value#text"]);
    }

    #[test]
    fn one_number_written_two_ways_is_a_difference_even_beside_others() {
        let d = br#"{"op":"c","source":{},"a":-1.1754944E-38,"b":1.0E7,"s":"1.5e3","c":2.5,"n":1}"#;
        let o = br#"{"op":"c","source":{},"a":-1.1754944e-38,"b":10000000.0,"s":"1.5e3","c":2.5,"n":2}"#;
        let rec = |v: &[u8]| Rec {
            topic: "t".into(),
            key: None,
            value: Some(v.to_vec()),
            headers: vec![],
        };
        let (_, diffs) = compare_output("json", &[rec(o)], &[rec(d)]);
        let found: Vec<(&str, &str, &str)> = diffs
            .iter()
            .map(|d| (d.path.as_str(), d.ours.as_str(), d.debezium.as_str()))
            .collect();
        assert_eq!(
            found,
            [
                ("value/n", "2", "1"),
                ("value#number-format", "-1.1754944e-38", "-1.1754944E-38"),
                ("value#number-format", "10000000.0", "1.0E7"),
            ]
        );
    }

    #[test]
    fn header_presence_and_order() {
        let d = rec("t", json!(1), None, &[("a", "1"), ("b", "2"), ("c", "3")]);
        let o = rec("t", json!(1), None, &[("b", "2"), ("a", "1"), ("x", "9")]);
        let (_, diffs) = compare_output("json", &[o], &[d]);
        assert_eq!(paths(&diffs), ["headers/c", "headers/x", "headers#order"]);
        assert_eq!(diffs[0].kind, "tombstone");
    }
}
