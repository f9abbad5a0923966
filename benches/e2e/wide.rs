//! Workload (e): a wide table, 50 columns of numerics, timestamps, integers
//! and text, as reporting tables often are: the per-column cost of decoding
//! and encoding dominates instead of the per-row cost.

use std::sync::LazyLock;

const NUMERICS: usize = 16;
const TIMESTAMPS: usize = 16;
const INTEGERS: usize = 9;
const TEXTS: usize = 8;

/// `bench`: the key and 49 more columns.
pub static TABLE: LazyLock<String> = LazyLock::new(|| {
    let mut columns = vec!["id bigint PRIMARY KEY".to_owned()];
    columns.extend((1..=NUMERICS).map(|k| format!("n{k} numeric(12,2) NOT NULL")));
    columns.extend((1..=TIMESTAMPS).map(|k| format!("t{k} timestamptz NOT NULL")));
    columns.extend((1..=INTEGERS).map(|k| format!("i{k} int")));
    columns.extend((1..=TEXTS).map(|k| format!("s{k} text")));
    format!("CREATE TABLE bench ({})", columns.join(", "))
});

/// The select list of one row, from the series value `i`.
pub static ROW: LazyLock<String> = LazyLock::new(|| {
    let mut values = vec!["i".to_owned()];
    values.extend((1..=NUMERICS).map(|k| format!("((i * {k}) % 10000000) / 100.0")));
    values.extend((1..=TIMESTAMPS).map(|k| format!("now() - (i * {k}) * interval '1 second'")));
    values.extend((1..=INTEGERS).map(|k| format!("(i % {})::int", 1000 * k)));
    values.extend((1..=TEXTS).map(|k| format!("left(md5((i + {k})::text), {})", 4 * k)));
    values.join(", ")
});
