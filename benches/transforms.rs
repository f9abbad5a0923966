//! What the transforms cost on the record and encode path: events per
//! second of the Debezium envelope, unwrap and the outbox router, JSON
//! encoding, no Kafka.
//!
//! `cargo bench --bench transforms` (or `--profile dev` for a quick look;
//! absolute numbers then mean little, the ratios still do).

use std::sync::Arc;
use std::time::Instant;

use pgcdc_kafka::checkpoint::TxnId;
use pgcdc_kafka::config::RunConfig;
use pgcdc_kafka::encode::json::JsonEncoder;
use pgcdc_kafka::encode::Encoder;
use pgcdc_kafka::event::envelope::{self, ConnectorInfo, Stamp};
use pgcdc_kafka::event::record::Record;
use pgcdc_kafka::event::value::{ConnectSchema, ConnectType, Value};
use pgcdc_kafka::event::{ChangeEvent, ColumnSchema, Op, SnapshotMarker, SourceInfo, TableSchema};
use pgcdc_kafka::lsn::Lsn;

const STAMP: Stamp<'static> = Stamp {
    now_micros: 1,
    transaction: None,
};
use pgcdc_kafka::transform::Transforms;

const EVENTS: usize = 100_000;

fn table(name: &str, columns: &[(&str, ConnectSchema)]) -> Arc<TableSchema> {
    let topic = format!("bench.public.{name}");
    let columns: Vec<ColumnSchema> = columns
        .iter()
        .map(|(n, s)| ColumnSchema {
            name: (*n).to_owned(),
            type_oid: 0,
            type_modifier: -1,
            schema: s.clone(),
        })
        .collect();
    let row = envelope::row_schema(&topic, &columns);
    Arc::new(TableSchema {
        relation_id: name.len() as u32,
        schema: "public".into(),
        table: name.into(),
        qualified_name: format!("public.{name}").into(),
        key_schema: Some(envelope::key_schema(&topic, &[&columns[0]])),
        envelope_schema: envelope::envelope_schema(&topic, &row),
        row_schema: row,
        key_columns: vec![0],
        columns,
        topic: topic.into(),
        routed_key_field: None,
    })
}

fn event(table: &Arc<TableSchema>, row: Vec<Value>, i: usize) -> ChangeEvent {
    ChangeEvent {
        table: Arc::clone(table),
        op: Op::Create,
        before: None,
        after: Some(row),
        source: SourceInfo {
            origin: None,
            commit_time_micros: 1_700_000_000_000_000 + i as i64,
            xid: 1000 + i as u32,
            lsn: Lsn::new(0x1000_0000 + i as u64 * 64),
            last_commit_lsn: None,
            snapshot: SnapshotMarker::False,
        },
        unmapped_key: Default::default(),
    }
}

fn info() -> ConnectorInfo {
    ConnectorInfo {
        name: "bench".into(),
        db: "shop".into(),
        run_id: "0190a0b0-0000-7000-8000-000000000000".into(),
    }
}

fn report(what: &str, started: Instant, bytes: usize) {
    let secs = started.elapsed().as_secs_f64();
    println!(
        "{what:<40} {:>10.0} events/s {:>8.1} MB/s",
        EVENTS as f64 / secs,
        bytes as f64 / secs / 1e6
    );
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let string = || ConnectSchema::primitive(ConnectType::String);
    let items = table(
        "items",
        &[
            ("id", ConnectSchema::primitive(ConnectType::Int32)),
            ("name", string().optional()),
            (
                "qty",
                ConnectSchema::primitive(ConnectType::Int64).optional(),
            ),
            ("note", string().optional()),
            (
                "flag",
                ConnectSchema::primitive(ConnectType::Boolean).optional(),
            ),
        ],
    );
    let item = |i: usize| {
        vec![
            Value::Int32(i as i32),
            Value::String(format!("item {i}")),
            Value::Int64(i as i64 * 3),
            Value::String("a note of a few dozen characters, like most".into()),
            Value::Boolean(i.is_multiple_of(2)),
        ]
    };
    let outbox = table(
        "outbox",
        &[
            ("id", string()),
            ("aggregatetype", string().optional()),
            ("aggregateid", string().optional()),
            ("type", string().optional()),
            (
                "payload",
                ConnectSchema::named(ConnectType::String, "io.debezium.data.Json").optional(),
            ),
        ],
    );
    let outbox_row = |i: usize| {
        vec![
            Value::String(format!("00000000-0000-4000-8000-{i:012}")),
            Value::String(["Order", "Customer", "Invoice"][i % 3].into()),
            Value::String(format!("agg-{}", i % 1000)),
            Value::String("Created".into()),
            Value::String(format!(
                "{{\"id\": {i}, \"lines\": [{{\"sku\": \"A-1\", \"qty\": 2}}], \"total\": 19.99}}"
            )),
        ]
    };
    let config = |extra: &[&str]| {
        let mut args = vec!["--pg-url", "postgres://u@h/d", "--topic-prefix", "bench"];
        args.extend_from_slice(extra);
        RunConfig::from_args(args).expect("flags")
    };
    let txn = TxnId::from_u64(1);

    runtime.block_on(async {
        let mut encoder = Encoder::Json(JsonEncoder::uniform(info(), true));
        let events: Vec<ChangeEvent> = (0..EVENTS).map(|i| event(&items, item(i), i)).collect();
        let started = Instant::now();
        let mut bytes = 0;
        for e in &events {
            let r = encoder
                .encode(Record::change(e, STAMP, Vec::new()), txn)
                .await
                .expect("record");
            bytes += r.key.map_or(0, |k| k.len()) + r.value.map_or(0, |v| v.len());
        }
        report("debezium envelope (json, schemas)", started, bytes);

        for (what, extra) in [
            ("unwrap (json, schemas)", vec!["--envelope", "unwrap"]),
            (
                "unwrap + add.fields op,table,lsn,ts_ms",
                vec![
                    "--envelope",
                    "unwrap",
                    "--unwrap-add-fields",
                    "op,table,lsn,source.ts_ms",
                ],
            ),
        ] {
            let mut transforms = Transforms::new(&config(&extra).transform, info());
            let started = Instant::now();
            let mut bytes = 0;
            for e in &events {
                for r in transforms
                    .records(e, Vec::new(), false, STAMP)
                    .expect("records")
                {
                    let r = encoder.encode(r, txn).await.expect("encodes");
                    bytes += r.key.map_or(0, |k| k.len()) + r.value.map_or(0, |v| v.len());
                }
            }
            report(what, started, bytes);
        }

        let events: Vec<ChangeEvent> = (0..EVENTS)
            .map(|i| event(&outbox, outbox_row(i), i))
            .collect();
        let mut transforms = Transforms::new(
            &config(&["--outbox-table", "public.outbox"]).transform,
            info(),
        );
        let started = Instant::now();
        let mut bytes = 0;
        for e in &events {
            for r in transforms
                .records(e, Vec::new(), false, STAMP)
                .expect("records")
            {
                let r = encoder.encode(r, txn).await.expect("encodes");
                bytes += r.key.map_or(0, |k| k.len()) + r.value.map_or(0, |v| v.len());
            }
        }
        report("outbox (json, payload as-is)", started, bytes);
        let started = Instant::now();
        let mut bytes = 0;
        for e in &events {
            let r = encoder
                .encode(Record::change(e, STAMP, Vec::new()), txn)
                .await
                .expect("record");
            bytes += r.value.map_or(0, |v| v.len());
        }
        report("same outbox rows as envelopes", started, bytes);
    });
}
