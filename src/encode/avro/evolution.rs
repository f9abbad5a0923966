//! What changed between two versions of a table, in an operator's words:
//! the `change` of a registry's refusal ([`super::EncodeError::Incompatible`])
//! and of the log line of a new schema version.

use crate::event::value::ConnectSchema;
use crate::event::TableSchema;

/// What changed from `previous` to `table`, in an operator's words.
pub(super) fn describe_change(previous: Option<&TableSchema>, table: &TableSchema) -> String {
    let Some(previous) = previous else {
        return "the table's current definition (the first this run has seen)".to_owned();
    };
    let mut changes = Vec::new();
    for column in &table.columns {
        match previous.columns.iter().find(|c| c.name == column.name) {
            None => changes.push(format!(
                "added column {} ({})",
                column.name,
                describe(&column.schema)
            )),
            Some(before) if before.schema != column.schema => changes.push(format!(
                "changed column {} from {} to {}",
                column.name,
                describe(&before.schema),
                describe(&column.schema)
            )),
            Some(_) => {}
        }
    }
    for column in &previous.columns {
        if !table.columns.iter().any(|c| c.name == column.name) {
            changes.push(format!("dropped column {}", column.name));
        }
    }
    let key = |t: &TableSchema| {
        t.key_columns
            .iter()
            .filter_map(|&i| t.columns.get(i).map(|c| c.name.as_str()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if key(previous) != key(table) {
        changes.push(format!(
            "changed the key from ({}) to ({})",
            key(previous),
            key(table)
        ));
    }
    if changes.is_empty() {
        "no column change".to_owned()
    } else {
        changes.join("; ")
    }
}

/// A column schema in a few words: `int32 optional`, `string io.debezium.data.Json`.
fn describe(schema: &ConnectSchema) -> String {
    let mut words = vec![schema.kind.as_str().to_owned()];
    if let Some(name) = &schema.name {
        words.push(name.clone());
    }
    for (key, value) in &schema.parameters {
        words.push(format!("{key}={value}"));
    }
    words.push(
        if schema.optional {
            "optional"
        } else {
            "required"
        }
        .to_owned(),
    );
    words.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode::avro::tests::table;
    use crate::event::value::ConnectType;

    #[test]
    fn changes_are_described() {
        let int = ConnectSchema::primitive(ConnectType::Int32);
        let text = ConnectSchema::primitive(ConnectType::String).optional();
        let v1 = table(
            &[
                ("id", int.clone()),
                ("a", int.clone().optional()),
                ("b", text.clone()),
            ],
            &[0],
        );
        let v2 = table(
            &[("id", int.clone()), ("a", text.clone()), ("c", text)],
            &[0],
        );
        assert_eq!(
            describe_change(Some(&v1), &v2),
            "changed column a from int32 optional to string optional; added column c (string \
             optional); dropped column b"
        );
        assert_eq!(describe_change(Some(&v1), &v1), "no column change");
        assert!(describe_change(None, &v1).contains("first"));
    }
}
