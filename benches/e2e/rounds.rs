//! Medians over `--rounds`: one entry per (workload, format) with the
//! median of each figure and its value in every round, since one run on a
//! shared 2-core machine says little (BENCHMARKS.md, "run-to-run spread").

use serde_json::{json, Map, Value as Json};

/// Figures whose medians are reported: a top-level key, or `outer.inner`.
const FIGURES: &[&str] = &[
    "recvlogical_rows_per_s",
    "recvlogical_tcp_rows_per_s",
    "kafka_alone_rows_per_s",
    "limit_rows_per_s",
    "connector_rows_per_s",
    "ratio_to_recvlogical",
    "ratio_to_kafka_alone",
    "ratio_to_limit",
    "ratio_to_serial_limit",
    "connector_us_per_change",
    "walsender_us_per_change.recvlogical",
    "walsender_us_per_change.recvlogical_tcp",
    "walsender_us_per_change.recvlogical_binary",
    "walsender_us_per_change.connector",
    "broker_us_per_change",
    "kafka_alone_broker_us_per_change",
    "connector_peak_rss_mb",
    "debezium_rows_per_s",
    "debezium_us_per_change",
    "debezium_peak_rss_mb",
    "ratio_to_debezium",
];

/// Figures of the snapshot workload (s) whose medians are reported.
const SNAPSHOT_FIGURES: &[&str] = &[
    "copy_rows_per_s",
    "kafka_alone_rows_per_s",
    "connector_rows_per_s",
    "ratio_to_copy",
    "ratio_to_kafka_alone",
    "connector_us_per_row",
    "server_us_per_row",
    "broker_us_per_row",
    "kafka_alone_broker_us_per_row",
    "kafka_alone_producer_us_per_row",
    "load_average_1m",
    "connector_peak_rss_mb",
];

/// The backlog results grouped by workload and format, in first-seen order.
pub fn medians(results: &[Json]) -> Vec<Json> {
    grouped_medians(results, "recvlogical_s", FIGURES)
}

/// The snapshot results (s) grouped by format.
pub fn snapshot_medians(results: &[Json]) -> Vec<Json> {
    grouped_medians(results, "copy_s", SNAPSHOT_FIGURES)
}

/// The results that have `kind`, grouped by workload and format in
/// first-seen order, with the median of each of `figures`.
fn grouped_medians(results: &[Json], kind: &str, figures: &[&str]) -> Vec<Json> {
    let mut groups: Vec<((String, String), Vec<&Json>)> = Vec::new();
    for r in results.iter().filter(|r| r.get(kind).is_some()) {
        let key = (
            r["workload"].as_str().unwrap_or_default().to_owned(),
            r["format"].as_str().unwrap_or_default().to_owned(),
        );
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, runs)) => runs.push(r),
            None => groups.push((key, vec![r])),
        }
    }
    groups
        .into_iter()
        .map(|((workload, format), runs)| {
            let mut entry = Map::new();
            entry.insert("workload".into(), json!(workload));
            entry.insert("format".into(), json!(format));
            entry.insert("rounds".into(), json!(runs.len()));
            for figure in figures {
                let values: Vec<f64> = runs.iter().filter_map(|r| figure_of(r, figure)).collect();
                entry.insert(figure.replace('.', "_"), json!(median(&values)));
                entry.insert(
                    format!("{}_per_round", figure.replace('.', "_")),
                    json!(values),
                );
            }
            Json::Object(entry)
        })
        .collect()
}

fn figure_of(result: &Json, figure: &str) -> Option<f64> {
    figure
        .split('.')
        .try_fold(result, |value, key| value.get(key))
        .and_then(Json::as_f64)
}

/// The median (the mean of the middle two for an even count).
pub fn median(values: &[f64]) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2]),
        _ => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2.0),
    }
}

/// A median figure with `digits` decimals, or `n/a`.
fn num(m: &Json, key: &str, digits: usize) -> String {
    m[key]
        .as_f64()
        .map_or_else(|| "n/a".to_owned(), |v| format!("{v:.digits$}"))
}

pub fn print_medians(medians: &[Json]) {
    if medians.iter().all(|m| m["rounds"].as_u64() < Some(2)) {
        return;
    }
    let rounds = |m: &Json, key: &str| {
        let values: Vec<String> = m[format!("{key}_per_round")]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Json::as_f64)
            .map(|v| format!("{v:.2}"))
            .collect();
        values.join(", ")
    };
    println!("\nMedians over the rounds (rows/s; CPU in µs per change; the limit is min(pg_recvlogical over the Unix socket, Kafka alone)):");
    println!("\n| workload | format | rounds | pg_recvlogical (Unix socket / TCP) | Kafka alone | connector | ratio to the limit (per round) | connector CPU | walsender (pg_recvlogical Unix / TCP / connector) | broker (connector / Kafka alone) | peak RSS MB |");
    println!("|---|---|---:|---:|---:|---:|---|---:|---:|---:|---:|");
    for m in medians {
        println!(
            "| {} | {} | {} | {} / {} | {} | {} | {} ({}) | {} | {} / {} / {} | {} / {} | {} |",
            m["workload"].as_str().unwrap_or_default(),
            m["format"].as_str().unwrap_or_default(),
            m["rounds"],
            num(m, "recvlogical_rows_per_s", 0),
            num(m, "recvlogical_tcp_rows_per_s", 0),
            num(m, "kafka_alone_rows_per_s", 0),
            num(m, "connector_rows_per_s", 0),
            num(m, "ratio_to_limit", 2),
            rounds(m, "ratio_to_limit"),
            num(m, "connector_us_per_change", 2),
            num(m, "walsender_us_per_change_recvlogical", 2),
            num(m, "walsender_us_per_change_recvlogical_tcp", 2),
            num(m, "walsender_us_per_change_connector", 2),
            num(m, "broker_us_per_change", 2),
            num(m, "kafka_alone_broker_us_per_change", 2),
            num(m, "connector_peak_rss_mb", 0),
        );
    }
    for m in medians
        .iter()
        .filter(|m| m["ratio_to_serial_limit"].is_number())
    {
        println!(
            "\n{} ({}): nothing may reach Kafka before the server sent the commit, so its serial limit is pg_recvlogical then Kafka alone: ratio {} ({})",
            m["workload"].as_str().unwrap_or_default(),
            m["format"].as_str().unwrap_or_default(),
            num(m, "ratio_to_serial_limit", 2),
            rounds(m, "ratio_to_serial_limit"),
        );
    }
    if medians.iter().any(|m| m["debezium_rows_per_s"].is_number()) {
        println!(
            "\nAgainst Debezium 3.6 embedded, producing to Kafka (medians; CPU in µs per change):"
        );
        println!("\n| workload | format | Debezium rows/s | connector rows/s | connector / Debezium (per round) | Debezium CPU | connector CPU | Debezium peak RSS MB | connector peak RSS MB |");
        println!("|---|---|---:|---:|---|---:|---:|---:|---:|");
        for m in medians
            .iter()
            .filter(|m| m["debezium_rows_per_s"].is_number())
        {
            println!(
                "| {} | {} | {} | {} | {} ({}) | {} | {} | {} | {} |",
                m["workload"].as_str().unwrap_or_default(),
                m["format"].as_str().unwrap_or_default(),
                num(m, "debezium_rows_per_s", 0),
                num(m, "connector_rows_per_s", 0),
                num(m, "ratio_to_debezium", 2),
                rounds(m, "ratio_to_debezium"),
                num(m, "debezium_us_per_change", 2),
                num(m, "connector_us_per_change", 2),
                num(m, "debezium_peak_rss_mb", 0),
                num(m, "connector_peak_rss_mb", 0),
            );
        }
    }
}

/// The snapshot medians as a table (with at least two rounds).
pub fn print_snapshot_medians(medians: &[Json]) {
    if medians.iter().all(|m| m["rounds"].as_u64() < Some(2)) {
        return;
    }
    println!("\nSnapshot medians over the rounds (rows/s; CPU in µs per row):");
    println!("\n| workload | format | rounds | COPY | Kafka alone | connector | ratio to Kafka alone | ratio to COPY | connector CPU | server CPU | broker (connector / Kafka alone) | load average |");
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for m in medians {
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} / {} | {} |",
            m["workload"].as_str().unwrap_or_default(),
            m["format"].as_str().unwrap_or_default(),
            m["rounds"],
            num(m, "copy_rows_per_s", 0),
            num(m, "kafka_alone_rows_per_s", 0),
            num(m, "connector_rows_per_s", 0),
            num(m, "ratio_to_kafka_alone", 2),
            num(m, "ratio_to_copy", 2),
            num(m, "connector_us_per_row", 2),
            num(m, "server_us_per_row", 2),
            num(m, "broker_us_per_row", 2),
            num(m, "kafka_alone_broker_us_per_row", 2),
            num(m, "load_average_1m", 2),
        );
    }
}
