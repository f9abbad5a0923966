//! Avro through a Confluent-compatible schema registry, exactly as Kafka
//! Connect's AvroConverter writes Debezium events.
//!
//! Every key and value is the Confluent wire format: magic byte `0`, the
//! writer schema's id as 4 bytes big-endian, then the Avro binary encoding
//! of the Connect value under that schema. Schemas come from the Connect
//! schemas the event model already carries ([`schema`] translates them);
//! subjects follow `--subject-name-strategy`: `<topic>-key` / `<topic>-value`
//! (TopicNameStrategy, the default) or the record's full name
//! (RecordNameStrategy).
//!
//! Schema evolution: the pipeline hands every event its table's
//! [`TableSchema`](crate::event::TableSchema), a new `Arc` after each
//! Relation message (an `ALTER TABLE`). The first event of a new
//! `TableSchema` registers its value and key schemas (`registration.rs`)
//! before anything of it is encoded, so no message is ever
//! written with an id whose schema differs from the event's, and the change
//! that needs the new schema carries only the new one. The registry's
//! verdict decides the rest: an incompatible schema (HTTP 409) stops the
//! connector with [`EncodeError::Incompatible`] before the message is sent,
//! so the slot stays before the change; an unreachable registry is a
//! retryable error, which restarts the pipeline from the slot with backoff.
//!
//! Per event, schemas are looked up by relation id and `Arc` identity and
//! ids come from the registry client's cache: the hot path does no HTTP.

mod evolution;
mod registration;
pub mod schema;
pub mod value;
pub mod write;

use std::collections::HashMap;
use std::sync::Arc;

use foldhash::HashMap as FastMap;

use super::headers::HeaderWriter;
use super::options::{AvroLogicalTypes, EncodeOptions, HeaderConverter, SubjectNameStrategy};
use super::registry::{RegistryError, SchemaRegistry};
use super::{EncodeError, RecordPart};
use crate::checkpoint::TxnId;
use crate::event::envelope::{self, ConnectorInfo, Stamp};
use crate::event::metadata::{MetadataKind, MetadataRecord, TransactionBlock};
use crate::event::record::{Data, Record, RecordKey, RecordValue};
use crate::event::value::{ConnectSchema, Value};
use crate::event::{ChangeEvent, MessageEvent};
use crate::metrics::Metrics;
use crate::sink::EncodedRecord;
use registration::{MessageSchemas, Registered, TableSchemas, Target};

/// The Confluent wire format's first byte.
pub const MAGIC_BYTE: u8 = 0;

/// The static parts of every event's Avro schema, as the registry receives
/// them: they are what [`schema::avro_json`] derives from
/// [`crate::event::envelope`] (checked by this module's tests).
pub mod static_schemas {
    /// The `source` block, `io.debezium.connector.postgresql.Source`.
    pub const SOURCE: &str = include_str!("../../schemas/source.avsc");
    /// The `transaction` block, `event.block` (optional in the envelope).
    pub const TRANSACTION: &str = include_str!("../../schemas/transaction.avsc");
    /// Key of `<prefix>.message` records.
    pub const MESSAGE_KEY: &str = include_str!("../../schemas/message-key.avsc");
    /// Value of `<prefix>.message` records.
    pub const MESSAGE_VALUE: &str = include_str!("../../schemas/message-value.avsc");
    /// Key of transaction metadata records (`<prefix>.transaction`).
    pub const TRANSACTION_METADATA_KEY: &str =
        include_str!("../../schemas/transaction-metadata-key.avsc");
    /// Value of transaction metadata records (`<prefix>.transaction`).
    pub const TRANSACTION_METADATA_VALUE: &str =
        include_str!("../../schemas/transaction-metadata-value.avsc");
    /// Key of heartbeat records.
    pub const HEARTBEAT_KEY: &str = include_str!("../../schemas/heartbeat-key.avsc");
    /// Value of heartbeat records.
    pub const HEARTBEAT_VALUE: &str = include_str!("../../schemas/heartbeat-value.avsc");
}

/// Writes records as Confluent's AvroConverter does, registering their
/// schemas first.
#[derive(Debug)]
pub struct AvroEncoder {
    info: ConnectorInfo,
    logical: AvroLogicalTypes,
    subjects: SubjectNameStrategy,
    registry: SchemaRegistry,
    tables: FastMap<u32, TableSchemas>,
    messages: Option<MessageSchemas>,
    message_topic: String,
    /// Where registrations and registry errors are counted.
    metrics: Option<Arc<Metrics>>,
    /// Registered schemas of transformed records, by topic and part.
    derived: HashMap<(Arc<str>, RecordPart), (Arc<ConnectSchema>, Registered)>,
    metadata: HashMap<MetadataKind, MessageSchemas>,
    headers: HeaderWriter,
}

impl AvroEncoder {
    /// An encoder using the registry `options` name.
    ///
    /// # Errors
    /// When the registry settings are invalid (nothing is sent yet: an
    /// unreachable registry shows at the first event).
    pub async fn from_options(
        options: &EncodeOptions,
        info: ConnectorInfo,
    ) -> Result<Self, EncodeError> {
        let url = options
            .schema_registry_url
            .as_deref()
            .ok_or(EncodeError::RegistrySetup(RegistryError::MissingUrl))?;
        let registry = SchemaRegistry::new(
            url,
            options.schema_registry_auth(),
            options.schema_registry_ca.as_deref(),
        )
        .await
        .map_err(EncodeError::RegistrySetup)?;
        let headers = HeaderWriter::new(options.header_converter(), options.value_schemas(), &info);
        Ok(AvroEncoder::new(
            info,
            registry,
            options.avro_logical_types,
            options.subject_name_strategy,
        )
        .with_headers(headers))
    }

    /// The same encoder, writing headers with `headers` (by default as
    /// Connect's `SimpleHeaderConverter`).
    pub fn with_headers(mut self, headers: HeaderWriter) -> Self {
        self.headers = headers;
        self
    }

    /// An encoder registering with `registry`.
    pub fn new(
        info: ConnectorInfo,
        registry: SchemaRegistry,
        logical: AvroLogicalTypes,
        subjects: SubjectNameStrategy,
    ) -> Self {
        AvroEncoder {
            message_topic: format!("{}.message", info.name),
            headers: HeaderWriter::new(HeaderConverter::Simple, true, &info),
            info,
            logical,
            subjects,
            registry,
            metrics: None,
            tables: FastMap::default(),
            messages: None,
            derived: HashMap::new(),
            metadata: HashMap::new(),
        }
    }

    /// An encoder with the same settings, registry (whose id cache they
    /// share) and metrics, and caches of its own: for another task.
    pub fn fork(&self) -> Self {
        let mut fork = AvroEncoder::new(
            self.info.clone(),
            self.registry.clone(),
            self.logical,
            self.subjects,
        )
        .with_headers(self.headers.clone());
        fork.metrics = self.metrics.clone();
        fork
    }

    /// `value` under a schema a transform derived (an unwrapped row, an
    /// outbox payload or envelope), as `part` of a record on `topic`; `what`
    /// names the records in errors. The schema is registered when it differs
    /// from the one last used for that topic and part, so a transform that
    /// keeps its `Arc`s registers once per schema version.
    ///
    /// # Errors
    /// See [`EncodeError`]: registering the schema may fail.
    pub async fn encode(
        &mut self,
        topic: &Arc<str>,
        part: RecordPart,
        schema: &Arc<ConnectSchema>,
        value: Value,
        what: &str,
    ) -> Result<Vec<u8>, EncodeError> {
        let key = (Arc::clone(topic), part);
        let fresh = self
            .derived
            .get(&key)
            .is_some_and(|(known, _)| Arc::ptr_eq(known, schema) || **known == **schema);
        if !fresh {
            let target = Target {
                what,
                topic,
                change: "the schema the transform derives from the table's current definition",
            };
            let registered = self.register(&target, part, schema).await?;
            self.derived
                .insert(key.clone(), (Arc::clone(schema), registered));
        }
        write(&self.derived[&key].1, value, self.logical, part, topic)
    }

    /// The bytes of `record`, in transaction `txn` (see
    /// [`super::Encoder::encode`]).
    ///
    /// # Errors
    /// See [`EncodeError`]: registering a schema may fail.
    pub async fn record(
        &mut self,
        record: Record<'_>,
        txn: TxnId,
    ) -> Result<EncodedRecord, EncodeError> {
        let Record {
            topic,
            key,
            value,
            headers,
        } = record;
        let key = match key {
            Some(key) => self.record_key(&topic, key).await?,
            None => None,
        };
        let value = match value {
            Some(value) => self.record_value(&topic, value).await?,
            None => None,
        };
        Ok(EncodedRecord {
            headers: self.headers.write(headers),
            topic,
            key,
            value,
            txn,
            partition: None,
            created_micros: None,
        })
    }

    /// The bytes of a record's key, on a record bound for `topic`; `None`
    /// for a null key.
    ///
    /// # Errors
    /// See [`EncodeError`]: registering a schema may fail.
    async fn record_key(
        &mut self,
        topic: &Arc<str>,
        key: RecordKey<'_>,
    ) -> Result<Option<Vec<u8>>, EncodeError> {
        match key {
            RecordKey::Table(event) => self.key(event).await,
            RecordKey::Message(message) => self.message_key(message).await.map(Some),
            RecordKey::Metadata(record) => self.metadata_key(record, topic).await.map(Some),
            RecordKey::Data(data) => self.data(topic, RecordPart::Key, data).await.map(Some),
        }
    }

    /// The bytes of a record's value, on a record bound for `topic`; `None`
    /// for a transform's null value, which AvroConverter writes as no
    /// value at all (a Kafka tombstone), whatever its schema.
    ///
    /// # Errors
    /// See [`EncodeError`]: registering a schema may fail.
    async fn record_value(
        &mut self,
        topic: &Arc<str>,
        value: RecordValue<'_>,
    ) -> Result<Option<Vec<u8>>, EncodeError> {
        if matches!(
            &value,
            RecordValue::Data(Data {
                value: Value::Null,
                ..
            })
        ) {
            return Ok(None);
        }
        let bytes = match value {
            RecordValue::Envelope(event, stamp) => {
                self.value(event, stamp.transaction, stamp.now_micros).await
            }
            RecordValue::Message(message, stamp) => {
                self.message_value(message, stamp.transaction, stamp.now_micros)
                    .await
            }
            RecordValue::Metadata(record) => self.metadata_value(record, topic).await,
            RecordValue::Data(data) => self.data(topic, RecordPart::Value, data).await,
        };
        bytes.map(Some)
    }

    /// A transform's data, under its schema.
    async fn data(
        &mut self,
        topic: &Arc<str>,
        part: RecordPart,
        data: Data,
    ) -> Result<Vec<u8>, EncodeError> {
        self.encode(topic, part, &data.schema, data.value, &data.what)
            .await
    }

    /// The key bytes, `None` for a null key.
    ///
    /// # Errors
    /// See [`EncodeError`]: registering the table's schemas may fail.
    pub async fn key(&mut self, event: &ChangeEvent) -> Result<Option<Vec<u8>>, EncodeError> {
        if event.key_fields().is_none() {
            return Ok(None);
        }
        let logical = self.logical;
        let schemas = self.table_schemas(&event.table).await?;
        let Some(registered) = &schemas.key else {
            return Ok(None);
        };
        let mut out = wire_header(registered);
        if let Ok(written) = write::write_key(&mut out, &registered.connect, event, logical) {
            registered.wrote(out.len());
            return Ok(written.then_some(out));
        }
        let key = envelope::key_value(event).unwrap_or(Value::Null);
        write(
            registered,
            key,
            logical,
            RecordPart::Key,
            &event.table.topic,
        )
        .map(Some)
    }

    /// The value bytes of the event's envelope, processed at `now_micros`.
    ///
    /// # Errors
    /// See [`EncodeError`]: registering the table's schemas may fail.
    pub async fn value(
        &mut self,
        event: &ChangeEvent,
        transaction: Option<&TransactionBlock>,
        now_micros: i64,
    ) -> Result<Vec<u8>, EncodeError> {
        let logical = self.logical;
        self.table_schemas(&event.table).await?;
        // Looked up again beside the connector info, which the lookup's
        // borrow of the whole encoder would otherwise make a clone of.
        let (schemas, info) = (&self.tables[&event.table.relation_id], &self.info);
        let registered = &schemas.value;
        let mut out = wire_header(registered);
        let direct = write::write_envelope(
            &mut out,
            &registered.connect,
            event,
            info,
            transaction,
            now_micros,
            logical,
        );
        if direct.is_ok() {
            registered.wrote(out.len());
            return Ok(out);
        }
        let value = envelope::envelope_value(event, info, transaction, now_micros);
        write(
            registered,
            value,
            logical,
            RecordPart::Value,
            &event.table.topic,
        )
    }

    /// The key bytes of a logical decoding message record.
    ///
    /// # Errors
    /// See [`EncodeError`].
    pub async fn message_key(&mut self, message: &MessageEvent) -> Result<Vec<u8>, EncodeError> {
        let key = envelope::message_key(message);
        let (logical, topic) = (self.logical, self.message_topic.clone());
        let schemas = self.message_schemas().await?;
        write(&schemas.key, key, logical, RecordPart::Key, &topic)
    }

    /// The value bytes of a logical decoding message record.
    ///
    /// # Errors
    /// See [`EncodeError`].
    pub async fn message_value(
        &mut self,
        message: &MessageEvent,
        transaction: Option<&TransactionBlock>,
        now_micros: i64,
    ) -> Result<Vec<u8>, EncodeError> {
        let (logical, topic, info) = (self.logical, self.message_topic.clone(), self.info.clone());
        let schemas = self.message_schemas().await?;
        let registered = &schemas.value;
        let mut out = wire_header(registered);
        let stamp = Stamp {
            now_micros,
            transaction,
        };
        let direct = write::write_message(
            &mut out,
            &registered.connect,
            message,
            &info,
            stamp,
            logical,
        );
        if direct.is_ok() {
            return Ok(out);
        }
        let value = envelope::message_value(message, &info, transaction, now_micros);
        write(registered, value, logical, RecordPart::Value, &topic)
    }

    /// The key bytes of a transaction boundary or heartbeat record bound
    /// for `topic`.
    ///
    /// # Errors
    /// See [`EncodeError`].
    pub async fn metadata_key(
        &mut self,
        record: MetadataRecord<'_>,
        topic: &str,
    ) -> Result<Vec<u8>, EncodeError> {
        let logical = self.logical;
        let schemas = self.metadata_schemas(record.kind(), topic).await?;
        write(&schemas.key, record.key(), logical, RecordPart::Key, topic)
    }

    /// The value bytes of a transaction boundary or heartbeat record bound
    /// for `topic`.
    ///
    /// # Errors
    /// See [`EncodeError`].
    pub async fn metadata_value(
        &mut self,
        record: MetadataRecord<'_>,
        topic: &str,
    ) -> Result<Vec<u8>, EncodeError> {
        let logical = self.logical;
        let schemas = self.metadata_schemas(record.kind(), topic).await?;
        let value = record.value();
        write(&schemas.value, value, logical, RecordPart::Value, topic)
    }

    /// Counts registrations and registry errors into `metrics`.
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }
}

/// The Confluent wire format's first five bytes: the magic byte and the
/// schema id, big-endian.
fn wire_header(registered: &Registered) -> Vec<u8> {
    let mut out = Vec::with_capacity(registered.capacity());
    out.push(MAGIC_BYTE);
    out.extend_from_slice(&registered.id.0.to_be_bytes());
    out
}

/// `value` in the Confluent wire format under `registered`.
///
/// Written by [`write::write_value`]; a value that does not fit goes through
/// apache-avro instead, whose error says where it does not fit.
fn write(
    registered: &Registered,
    value: Value,
    logical: AvroLogicalTypes,
    part: RecordPart,
    topic: &str,
) -> Result<Vec<u8>, EncodeError> {
    let mut out = wire_header(registered);
    if write::write_value(&mut out, &registered.connect, &value, logical).is_ok() {
        registered.wrote(out.len());
        return Ok(out);
    }
    let avro = value::avro_value(&registered.connect, value, logical).map_err(|source| {
        EncodeError::Value {
            part,
            topic: topic.to_owned(),
            source,
        }
    })?;
    let encode_error = |source| EncodeError::Encode {
        part,
        topic: topic.to_owned(),
        source,
    };
    let writer = apache_avro::writer::datum::GenericDatumWriter::builder(&registered.avro)
        .build()
        .map_err(encode_error)?;
    out.truncate(5);
    writer
        .write_value_ref(&mut out, &avro)
        .map_err(encode_error)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode::registry::SchemaId;
    use crate::event::value::ConnectType;
    use crate::event::{ColumnSchema, TableSchema};

    /// A table `app.public.t` of `columns`, keyed by the columns at `key`
    /// (also for the schema-change tests in `evolution`).
    pub(in crate::encode::avro) fn table(
        columns: &[(&str, ConnectSchema)],
        key: &[usize],
    ) -> TableSchema {
        let columns: Vec<ColumnSchema> = columns
            .iter()
            .map(|(name, schema)| ColumnSchema {
                name: (*name).to_owned(),
                type_oid: 0,
                type_modifier: -1,
                schema: schema.clone(),
            })
            .collect();
        let topic = "app.public.t";
        let row = envelope::row_schema(topic, &columns);
        let key_columns: Vec<&ColumnSchema> = key.iter().map(|&i| &columns[i]).collect();
        TableSchema {
            relation_id: 1,
            schema: "public".into(),
            table: "t".into(),
            qualified_name: "public.t".into(),
            topic: topic.into(),
            key_schema: (!key.is_empty()).then(|| envelope::key_schema(topic, &key_columns)),
            envelope_schema: envelope::envelope_schema(topic, &row),
            row_schema: row,
            key_columns: key.to_vec(),
            routed_key_field: None,
            columns,
        }
    }

    #[test]
    fn static_schemas_are_what_the_envelope_derives() {
        let derive = |connect: &ConnectSchema| {
            schema::avro_json(connect, AvroLogicalTypes::Debezium)
                .expect("translates")
                .to_string()
        };
        let compact = |text: &str| {
            serde_json::from_str::<serde_json::Value>(text)
                .expect("valid JSON")
                .to_string()
        };
        assert_eq!(
            derive(&envelope::source_schema()),
            compact(static_schemas::SOURCE)
        );
        let transaction = ConnectSchema {
            optional: false,
            ..envelope::transaction_schema()
        };
        assert_eq!(derive(&transaction), compact(static_schemas::TRANSACTION));
        assert_eq!(
            derive(&envelope::message_key_schema()),
            compact(static_schemas::MESSAGE_KEY)
        );
        assert_eq!(
            derive(&envelope::message_value_schema()),
            compact(static_schemas::MESSAGE_VALUE)
        );
        for (kind, key, value) in [
            (
                MetadataKind::Transaction,
                static_schemas::TRANSACTION_METADATA_KEY,
                static_schemas::TRANSACTION_METADATA_VALUE,
            ),
            (
                MetadataKind::Heartbeat,
                static_schemas::HEARTBEAT_KEY,
                static_schemas::HEARTBEAT_VALUE,
            ),
        ] {
            let (key_schema, value_schema) = kind.schemas();
            assert_eq!(derive(&key_schema), compact(key), "{kind:?} key");
            assert_eq!(derive(&value_schema), compact(value), "{kind:?} value");
        }
        for avsc in [
            static_schemas::SOURCE,
            static_schemas::TRANSACTION,
            static_schemas::MESSAGE_KEY,
            static_schemas::MESSAGE_VALUE,
            static_schemas::TRANSACTION_METADATA_KEY,
            static_schemas::TRANSACTION_METADATA_VALUE,
            static_schemas::HEARTBEAT_KEY,
            static_schemas::HEARTBEAT_VALUE,
        ] {
            apache_avro::Schema::parse_str(avsc).expect("valid Avro");
        }
    }

    #[test]
    fn writes_the_wire_format_that_apache_avro_reads_back() {
        let numeric = ConnectSchema::named(ConnectType::Bytes, schema::DECIMAL_NAME)
            .with_version(1)
            .with_parameter("scale", "2")
            .with_parameter(schema::DECIMAL_PRECISION_PARAMETER, "10");
        let t = table(
            &[
                ("id", ConnectSchema::primitive(ConnectType::Int16)),
                ("price", numeric.optional()),
            ],
            &[0],
        );
        let avro =
            schema::avro_schema(&t.envelope_schema, AvroLogicalTypes::Debezium).expect("schema");
        let registered = Registered::new(
            t.envelope_schema.clone(),
            avro.parsed.clone(),
            SchemaId(0x0102_0304),
        );
        let event = ChangeEvent {
            table: Arc::new(t),
            op: crate::event::Op::Create,
            before: None,
            after: Some(vec![Value::Int16(-3), Value::Bytes(vec![0x30, 0x39])]),
            source: crate::event::SourceInfo {
                origin: None,
                commit_time_micros: 1_700_000_000_123_456,
                xid: 42,
                lsn: crate::lsn::Lsn::new(0x1000),
                last_commit_lsn: None,
                snapshot: crate::event::SnapshotMarker::False,
            },
            unmapped_key: Default::default(),
        };
        let info = ConnectorInfo {
            name: "app".into(),
            db: "shop".into(),
            run_id: "0190a0b0-0000-7000-8000-000000000000".into(),
        };
        let value = envelope::envelope_value(&event, &info, None, 5);
        let bytes = write(
            &registered,
            value,
            AvroLogicalTypes::Debezium,
            RecordPart::Value,
            "app.public.t",
        )
        .expect("writes");
        assert_eq!(&bytes[..5], &[0, 1, 2, 3, 4]);
        let reread = apache_avro::Schema::parse_str(&avro.json).expect("parses");
        let decoded = apache_avro::reader::datum::GenericDatumReader::builder(&reread)
            .build()
            .expect("reader")
            .read_value(&mut &bytes[5..])
            .expect("decodes");
        let apache_avro::types::Value::Record(fields) = decoded else {
            panic!("a record: {decoded:?}");
        };
        use apache_avro::types::Value as A;
        assert_eq!(fields[0], ("before".into(), A::Union(0, Box::new(A::Null))));
        assert_eq!(
            fields[1],
            (
                "after".into(),
                A::Union(
                    1,
                    Box::new(A::Record(vec![
                        ("id".into(), A::Int(-3)),
                        (
                            "price".into(),
                            A::Union(
                                1,
                                Box::new(A::Decimal(apache_avro::Decimal::from(vec![0x30, 0x39])))
                            )
                        ),
                    ]))
                )
            )
        );
        assert_eq!(fields[4], ("op".into(), A::String("c".into())));
    }
}
