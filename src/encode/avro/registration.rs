//! What the Avro encoder registers, when, and under which subject.
//!
//! A table's schemas are registered the first time an event of a new
//! version of the table is encoded (its `Arc<TableSchema>` is new): the
//! value schema, then the key schema, so a refused change leaves no key
//! version behind. Records that do not depend on a table (messages,
//! transaction metadata, heartbeats) register theirs once; a transform's
//! derived schemas are registered by [`super::AvroEncoder::encode`] when
//! they differ from the last one of their topic and part.
//!
//! Every registration is a boxed future: the registry's HTTP future is
//! kilobytes and registering is rare, while every encode future that might
//! register would otherwise carry that space inline and copy it, on the hot
//! path too.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use futures::future::BoxFuture;

use super::evolution;
use super::{schema, AvroEncoder, EncodeError, RecordPart};
use crate::encode::options::SubjectNameStrategy;
use crate::encode::registry::{Registration, RegistryError, SchemaId};
use crate::event::envelope;
use crate::event::metadata::MetadataKind;
use crate::event::value::{ConnectSchema, ConnectType};
use crate::event::TableSchema;

/// One registered schema: what to write values with, and its id.
#[derive(Debug)]
pub(super) struct Registered {
    pub(super) connect: ConnectSchema,
    pub(super) avro: apache_avro::Schema,
    pub(super) id: SchemaId,
    /// The length of the last record written under it: the next one's
    /// buffer is sized from it rather than grown while it is written.
    last_len: AtomicUsize,
}

impl Registered {
    pub(super) fn new(connect: ConnectSchema, avro: apache_avro::Schema, id: SchemaId) -> Self {
        Registered {
            connect,
            avro,
            id,
            last_len: AtomicUsize::new(0),
        }
    }

    /// The buffer to allocate for the next record: an eighth more than the
    /// last one, so that most records fit.
    pub(super) fn capacity(&self) -> usize {
        match self.last_len.load(Ordering::Relaxed) {
            0 => 256,
            last => last + last / 8,
        }
    }

    /// A record of `len` bytes was written under it.
    pub(super) fn wrote(&self, len: usize) {
        self.last_len.store(len, Ordering::Relaxed);
    }
}

/// The registered schemas of one version of a table.
#[derive(Debug)]
pub(super) struct TableSchemas {
    pub(super) table: Arc<TableSchema>,
    pub(super) key: Option<Registered>,
    pub(super) value: Registered,
}

/// The registered schemas of records that do not depend on a table
/// (`<prefix>.message`, transaction boundaries, heartbeats).
#[derive(Debug)]
pub(super) struct MessageSchemas {
    pub(super) key: Registered,
    pub(super) value: Registered,
}

/// What a registration is for, to name it in errors.
pub(super) struct Target<'a> {
    /// `table public.t`, or what else the records carry.
    pub(super) what: &'a str,
    pub(super) topic: &'a str,
    /// The change that made the schema new, for the incompatibility error.
    pub(super) change: &'a str,
}

impl AvroEncoder {
    /// The registered schemas of `kind`, registered (value, then key) the
    /// first time.
    pub(super) async fn metadata_schemas(
        &mut self,
        kind: MetadataKind,
        topic: &str,
    ) -> Result<&MessageSchemas, EncodeError> {
        if !self.metadata.contains_key(&kind) {
            let schemas = self.register_metadata(kind, topic).await?;
            self.metadata.insert(kind, schemas);
        }
        Ok(&self.metadata[&kind])
    }

    /// Registers the schemas of `kind` (boxed, as [`Self::register`]).
    fn register_metadata<'a>(
        &'a mut self,
        kind: MetadataKind,
        topic: &'a str,
    ) -> BoxFuture<'a, Result<MessageSchemas, EncodeError>> {
        Box::pin(async move {
            let target = Target {
                what: kind.describe(),
                topic,
                change: "the record schema, which never changes",
            };
            let (key_schema, value_schema) = kind.schemas();
            let value = self
                .register_now(&target, RecordPart::Value, &value_schema)
                .await?;
            let key = self
                .register_now(&target, RecordPart::Key, &key_schema)
                .await?;
            Ok(MessageSchemas { key, value })
        })
    }

    /// The registered schemas of `table`, registering them first when this
    /// version of the table is new: the value schema, then the key schema
    /// (the value is the one that evolves, so a refused change leaves no key
    /// version behind).
    pub(super) async fn table_schemas(
        &mut self,
        table: &Arc<TableSchema>,
    ) -> Result<&TableSchemas, EncodeError> {
        let fresh = |cached: &TableSchemas| Arc::ptr_eq(&cached.table, table);
        if self.tables.get(&table.relation_id).is_some_and(fresh) {
            // Looked up twice (a returned borrow may not fall through), but
            // not moved out and back in on every event.
            return Ok(&self.tables[&table.relation_id]);
        }
        let previous = self.tables.remove(&table.relation_id).map(|p| p.table);
        // Boxed, as [`Self::register`].
        let schemas = Box::pin(self.register_table(table, previous)).await?;
        Ok(self
            .tables
            .entry(table.relation_id)
            .insert_entry(schemas)
            .into_mut())
    }

    async fn register_table(
        &mut self,
        table: &Arc<TableSchema>,
        previous: Option<Arc<TableSchema>>,
    ) -> Result<TableSchemas, EncodeError> {
        let what = format!("table {}.{}", table.schema, table.table);
        let change = evolution::describe_change(previous.as_deref(), table);
        let target = Target {
            what: &what,
            topic: &table.topic,
            change: &change,
        };
        let value = self
            .register_now(&target, RecordPart::Value, &table.envelope_schema)
            .await?;
        let key = match &table.key_schema {
            Some(key) => Some(self.register_now(&target, RecordPart::Key, key).await?),
            None => None,
        };
        if previous.is_some() {
            tracing::info!(
                topic = %table.topic,
                schema_id = %value.id,
                %change,
                "table schema changed"
            );
        }
        Ok(TableSchemas {
            table: Arc::clone(table),
            key,
            value,
        })
    }

    pub(super) async fn message_schemas(&mut self) -> Result<&MessageSchemas, EncodeError> {
        let schemas = match self.messages.take() {
            Some(schemas) => schemas,
            None => self.register_messages().await?,
        };
        Ok(self.messages.insert(schemas))
    }

    /// Registers the schemas of `<prefix>.message` records (boxed, as
    /// [`Self::register`]).
    fn register_messages(&mut self) -> BoxFuture<'_, Result<MessageSchemas, EncodeError>> {
        Box::pin(async move {
            let topic = self.message_topic.clone();
            let target = Target {
                what: "logical decoding messages",
                topic: &topic,
                change: "the message schema, which never changes",
            };
            let value = self
                .register_now(
                    &target,
                    RecordPart::Value,
                    &envelope::message_value_schema(),
                )
                .await?;
            let key = self
                .register_now(&target, RecordPart::Key, &envelope::message_key_schema())
                .await?;
            Ok(MessageSchemas { key, value })
        })
    }

    /// The subject of `part` of records on `topic` described by `connect`.
    fn subject(&self, topic: &str, part: RecordPart, connect: &ConnectSchema) -> String {
        // Only a struct has a record name to register under.
        let record = connect
            .name
            .as_deref()
            .filter(|_| connect.kind == ConnectType::Struct);
        crate::naming::subject(
            self.subjects == SubjectNameStrategy::Record,
            topic,
            part,
            record,
        )
    }

    /// Registers `connect` as `part` of `target`'s records. Boxed: the
    /// registry's HTTP future is kilobytes and registering is rare, while
    /// every encode future that may register would otherwise carry (and
    /// copy) it, on the hot path too.
    pub(super) fn register<'a>(
        &'a mut self,
        target: &'a Target<'_>,
        part: RecordPart,
        connect: &'a ConnectSchema,
    ) -> BoxFuture<'a, Result<Registered, EncodeError>> {
        Box::pin(self.register_now(target, part, connect))
    }

    async fn register_now(
        &mut self,
        target: &Target<'_>,
        part: RecordPart,
        connect: &ConnectSchema,
    ) -> Result<Registered, EncodeError> {
        let avro =
            schema::avro_schema(connect, self.logical).map_err(|source| EncodeError::Schema {
                part,
                topic: target.topic.to_owned(),
                source,
            })?;
        let subject = self.subject(target.topic, part, connect);
        // Boxed: the HTTP future is large and registering is rare; inline, it
        // would be copied with every encode future, on the hot path too.
        let registered = Box::pin(self.registry.register(&subject, &avro.json)).await;
        if let Some(metrics) = &self.metrics {
            match &registered {
                Ok(registration) if registration.first => metrics.schema_registered(),
                Ok(_) => {}
                Err(_) => metrics.schema_registry_error(),
            }
        }
        let Registration { id, first } = match registered {
            Ok(registration) => registration,
            Err(RegistryError::Incompatible { message, .. }) => {
                return Err(EncodeError::Incompatible {
                    part,
                    what: target.what.to_owned(),
                    topic: target.topic.to_owned(),
                    subject,
                    change: target.change.to_owned(),
                    reason: message,
                })
            }
            Err(source) => {
                return Err(EncodeError::Registry {
                    part,
                    topic: target.topic.to_owned(),
                    subject,
                    source,
                })
            }
        };
        if first {
            tracing::debug!(%subject, schema_id = %id, "schema registered");
        }
        Ok(Registered::new(connect.clone(), avro.parsed, id))
    }
}
