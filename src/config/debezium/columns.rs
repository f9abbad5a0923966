//! Debezium's column mapper properties, whose names carry their argument:
//! `column.truncate.to.<N>.chars`, `column.mask.with.<N>.chars`,
//! `column.mask.hash.<ALGORITHM>.with.salt.<SALT>` and its `v2` form. Each
//! becomes one value of the matching `--column-*` flag, in the order the
//! file lists them (Debezium's own order among the kinds is kept by
//! [`crate::source::column_mappers`]).

use std::collections::BTreeMap;

use super::Mapping;
use crate::source::column_mappers::is_supported_algorithm;

/// Maps every `column.truncate.*` and `column.mask.*` property.
pub(super) fn map_column_mappers(properties: &BTreeMap<String, String>, mapping: &mut Mapping) {
    for (property, columns) in properties {
        if let Some(rest) = property.strip_prefix("column.truncate.to.") {
            match count(rest) {
                Some(n) if n > 0 => {
                    mapping.set("column_truncate_to", format!("{n}={columns}"), property)
                }
                _ => mapping.reject(
                    property,
                    columns,
                    "expects column.truncate.to.<N>.chars with N a positive number of characters",
                ),
            }
        } else if let Some(rest) = property.strip_prefix("column.mask.with.") {
            match count(rest) {
                Some(n) => mapping.set("column_mask_with", format!("{n}={columns}"), property),
                None => mapping.reject(
                    property,
                    columns,
                    "expects column.mask.with.<N>.chars with N a number of characters",
                ),
            }
        } else if let Some(rest) = property.strip_prefix("column.mask.hash.") {
            let (key, rest) = match rest.strip_prefix("v2.") {
                Some(rest) => ("column_mask_hash_v2", rest),
                None => ("column_mask_hash", rest),
            };
            match rest.split_once(".with.salt.") {
                Some((algorithm, salt))
                    if !algorithm.contains('.') && is_supported_algorithm(algorithm) =>
                {
                    mapping.set(key, format!("{algorithm}:{salt}={columns}"), property)
                }
                Some((algorithm, _)) if !algorithm.contains('.') => mapping.reject(
                    property,
                    columns,
                    format!("hash algorithm {algorithm:?} is not supported: use MD5, SHA-224, SHA-256, SHA-384, SHA-512, SHA-512/224 or SHA-512/256"),
                ),
                _ => mapping.reject(property, columns, "expects column.mask.hash.[v2.]<ALGORITHM>.with.salt.<SALT>"),
            }
        } else if property.starts_with("column.mask.") {
            mapping.reject(property, columns, "expects column.mask.with.<N>.chars or column.mask.hash.[v2.]<ALGORITHM>.with.salt.<SALT>");
        }
    }
}

/// `<N>.chars`: N.
fn count(rest: &str) -> Option<usize> {
    rest.strip_suffix(".chars")
        .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|n| n.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::super::map;
    use super::*;

    #[test]
    fn column_mapper_properties_become_flags() {
        let properties: BTreeMap<String, String> = [
            ("column.truncate.to.20.chars", "public.t.a,public.t.b"),
            ("column.mask.with.5.chars", "public.t.c"),
            (
                "column.mask.hash.SHA-256.with.salt.CzQMA0cB5K",
                "public.t.d",
            ),
            ("column.mask.hash.v2.MD5.with.salt.s.a.l.t", "public.t.e"),
            ("column.propagate.source.type", "public.t.f"),
            ("datatype.propagate.source.type", ".+\\.numeric"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let m = map(&properties);
        assert!(m.rejected.is_empty(), "{:?}", m.rejected);
        let value = |key: &str| -> Vec<String> {
            m.mapped
                .iter()
                .filter(|x| x.key == key)
                .map(|x| x.value.clone())
                .collect()
        };
        assert_eq!(value("column_truncate_to"), ["20=public.t.a,public.t.b"]);
        assert_eq!(value("column_mask_with"), ["5=public.t.c"]);
        assert_eq!(value("column_mask_hash"), ["SHA-256:CzQMA0cB5K=public.t.d"]);
        assert_eq!(value("column_mask_hash_v2"), ["MD5:s.a.l.t=public.t.e"]);
        assert_eq!(value("column_propagate_source_type"), ["public.t.f"]);
        assert_eq!(value("datatype_propagate_source_type"), [".+\\.numeric"]);
    }

    #[test]
    fn malformed_column_mapper_properties_are_rejected() {
        let properties: BTreeMap<String, String> = [
            "column.truncate.to.0.chars",
            "column.truncate.to.x.chars",
            "column.mask.with.5",
            "column.mask.hash.SHA3-256.with.salt.x",
            "column.mask.hash.SHA-256",
            "column.mask.other",
        ]
        .into_iter()
        .map(|k| (k.to_owned(), "public.t.c".to_owned()))
        .collect();
        let m = map(&properties);
        assert_eq!(m.rejected.len(), 6, "{:?}", m.rejected);
        assert!(m.mapped.iter().all(|x| !x.key.starts_with("column_")));
    }
}
