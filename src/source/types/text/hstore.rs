//! HSTORE values: Postgres's text output (`"a"=>"1", "b"=>NULL`) as Debezium's
//! JSON object string or as a Connect map (`hstore.handling.mode`), entries in the
//! order Debezium's Java `HashMap` iterates them.

use super::{quoted, Fault, Parsed};
use crate::event::value::Value;
use crate::source::types::{json_quote, HstoreHandling};

/// HSTORE text (`"a"=>"1", "b"=>NULL`) in its `hstore.handling.mode`: the JSON object
/// Debezium writes, or a Connect map. Either way the entries come in the iteration
/// order of the Java `HashMap` Debezium parses into (pgjdbc's `HStoreConverter`).
pub(super) fn decode_hstore(text: &str, mode: HstoreHandling) -> Parsed<Value> {
    let bad = Fault::Malformed("expected \"key\"=>\"value\" pairs");
    let mut pairs: Vec<(String, Option<String>)> = Vec::new();
    let mut rest = text.trim_start();
    while !rest.is_empty() {
        if !pairs.is_empty() {
            rest = rest.strip_prefix(',').ok_or(bad)?.trim_start();
        }
        let (key, used) = quoted(rest)?;
        rest = rest[used..]
            .trim_start()
            .strip_prefix("=>")
            .ok_or(bad)?
            .trim_start();
        let (value, used) = match rest.strip_prefix("NULL") {
            Some(_) => (None, 4),
            None => quoted(rest).map(|(value, used)| (Some(value), used))?,
        };
        rest = &rest[used..];
        pairs.push((key, value));
        rest = rest.trim_start();
    }
    Ok(hstore_value(pairs, mode))
}

/// HSTORE's `(key, value)` pairs, in the order Postgres keeps them, as
/// `hstore.handling.mode` wants them (the binary side's entry point too).
pub(in crate::source::types) fn hstore_value(
    pairs: Vec<(String, Option<String>)>,
    mode: HstoreHandling,
) -> Value {
    let keys: Vec<&str> = pairs.iter().map(|(k, _)| k.as_str()).collect();
    let order = java_hash_map_order(&keys);
    match mode {
        HstoreHandling::Json => {
            let members: Vec<String> = order
                .into_iter()
                .map(|i| {
                    let value = pairs[i]
                        .1
                        .as_deref()
                        .map_or_else(|| "null".to_owned(), json_quote);
                    format!("{}:{value}", json_quote(&pairs[i].0))
                })
                .collect();
            Value::String(format!("{{{}}}", members.join(",")))
        }
        HstoreHandling::Map => {
            let mut slots: Vec<Option<(String, Option<String>)>> =
                pairs.into_iter().map(Some).collect();
            Value::Map(
                order
                    .into_iter()
                    .filter_map(|i| slots[i].take())
                    .map(|(key, value)| (key, value.map_or(Value::Null, Value::String)))
                    .collect(),
            )
        }
    }
}

/// The order in which a `java.util.HashMap` filled with `keys` (in order) iterates them,
/// as indices into `keys`; a repeated key keeps its first position with the last value.
/// Exact for Java 8+ unless nine or more keys share a bucket of a table of 64 or more.
fn java_hash_map_order(keys: &[&str]) -> Vec<usize> {
    let hashes: Vec<usize> = keys
        .iter()
        .map(|k| {
            let h = k
                .encode_utf16()
                .fold(0u32, |h, c| h.wrapping_mul(31).wrapping_add(u32::from(c)));
            (h ^ (h >> 16)) as usize
        })
        .collect();
    let resize = |buckets: &mut Vec<Vec<usize>>| {
        let cap = buckets.len() * 2;
        let mut next = vec![Vec::new(); cap];
        for &i in buckets.iter().flatten() {
            next[hashes[i] & (cap - 1)].push(i);
        }
        *buckets = next;
    };
    let mut buckets: Vec<Vec<usize>> = vec![Vec::new(); 16];
    let mut size = 0;
    for (i, key) in keys.iter().enumerate() {
        let cap = buckets.len();
        let bucket = &mut buckets[hashes[i] & (cap - 1)];
        if let Some(slot) = bucket.iter_mut().find(|j| keys[**j] == *key) {
            *slot = i;
            continue;
        }
        bucket.push(i);
        // A ninth node in a bin makes a small table grow instead of treeifying.
        if bucket.len() > 8 && cap < 64 {
            resize(&mut buckets);
        }
        size += 1;
        if size > buckets.len() * 3 / 4 {
            resize(&mut buckets);
        }
    }
    buckets.concat()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::types::{decode_text, PgType, ValueError, ValueOptions};

    fn s(v: &str) -> Value {
        Value::String(v.to_owned())
    }

    fn with(o: &ValueOptions, text: &str) -> Value {
        decode_text(&PgType::Hstore, -1, text, o)
            .unwrap_or_else(|e| panic!("{text:?} should decode: {e}"))
    }

    fn opts() -> ValueOptions {
        ValueOptions::default()
    }

    fn ok(text: &str) -> Value {
        with(&opts(), text)
    }

    fn fails(text: &str) -> ValueError {
        decode_text(&PgType::Hstore, -1, text, &opts()).expect_err("text should be rejected")
    }

    #[test]
    fn hstore_as_debezium_json() {
        let h = ok;
        assert_eq!(h(r#""a"=>"1", "b"=>NULL"#), s(r#"{"a":"1","b":null}"#));
        assert_eq!(h(""), s("{}"));
        assert_eq!(
            h(r#""a\"b"=>"x\\y", "tab"=>"	""#),
            s(r#"{"a\"b":"x\\y","tab":"\t"}"#)
        );
        // Key order of java.util.HashMap for the same insertions (checked against Java 17).
        let keys = ["a", "b", "key", "zz", "Key 1", "ä", "10", "a\"b"];
        let literal: Vec<String> = keys
            .iter()
            .map(|k| format!("\"{}\"=>\"v\"", k.replace('"', "\\\"")))
            .collect();
        let json = h(&literal.join(", "));
        let expected = ["zz", "Key 1", "a\\\"b", "a", "b", "ä", "key", "10"]
            .map(|k| format!("\"{k}\":\"v\""))
            .join(",");
        assert_eq!(json, s(&format!("{{{expected}}}")));
        let many: Vec<String> = (0..40).map(|i| format!("k{i}")).collect();
        let refs: Vec<&str> = many.iter().map(String::as_str).collect();
        let order: Vec<&str> = java_hash_map_order(&refs)
            .into_iter()
            .map(|i| refs[i])
            .collect();
        let java = "k31 k30 k11 k33 k10 k32 k13 k35 k12 k34 k15 k37 k14 k36 k17 k39 k16 k38 k19 k18 k0 k1 k2 k3 \
                    k20 k4 k5 k22 k6 k21 k7 k24 k8 k23 k9 k26 k25 k28 k27 k29";
        assert_eq!(order, java.split_whitespace().collect::<Vec<_>>());
        let unicode = ["x", "y", "hello world", "ключ", "😀", "", "A", "a"];
        let order: Vec<&str> = java_hash_map_order(&unicode)
            .into_iter()
            .map(|i| unicode[i])
            .collect();
        assert_eq!(order, ["", "A", "a", "ключ", "x", "😀", "y", "hello world"]);
        assert_eq!(json_quote("\u{1}\u{8}é"), "\"\\u0001\\bé\"");
        for bad in [r#""a"=>"1" "b"=>"2""#, r#""a"=>1"#, r#"a=>"1""#, r#""a""#] {
            fails(bad);
        }
    }

    #[test]
    fn hstore_as_a_map() {
        let map = ValueOptions {
            hstore_handling: HstoreHandling::Map,
            ..opts()
        };
        let h = |t| with(&map, t);
        assert_eq!(
            h(r#""b"=>NULL, "a"=>"1""#),
            Value::Map(vec![("a".into(), s("1")), ("b".into(), Value::Null)])
        );
        assert_eq!(h(""), Value::Map(vec![]));
        // A repeated key keeps its first position with the last value, as HashMap.put does.
        assert_eq!(
            h(r#""k"=>"1", "k"=>"2""#),
            Value::Map(vec![("k".into(), s("2"))])
        );
        // The same order as the JSON mode.
        let keys = ["zz", "Key 1", "a", "b", "ä", "key", "10"];
        let literal: Vec<String> = keys.iter().map(|k| format!("\"{k}\"=>\"v\"")).collect();
        let Value::Map(entries) = h(&literal.join(", ")) else {
            panic!("a map")
        };
        let order: Vec<&str> = entries.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(order, ["zz", "Key 1", "a", "b", "ä", "key", "10"]);
        let json = ok(&literal.join(", "));
        let expected = order
            .iter()
            .map(|k| format!("\"{k}\":\"v\""))
            .collect::<Vec<_>>();
        assert_eq!(json, s(&format!("{{{}}}", expected.join(","))));
    }
}
