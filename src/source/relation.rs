//! The relation cache: from pgoutput Relation messages to [`TableSchema`]s,
//! and from tuples to rows of Connect values.
//!
//! A column's schema is required (not optional) only when no event can carry
//! a null in it: NOT NULL (or primary key), present in every before-image
//! (a key column, or REPLICA IDENTITY FULL), and able to carry the
//! unchanged-TOAST placeholder. Debezium marks every NOT NULL column required
//! and then fills unknown before-image values with zeros and empty strings,
//! indistinguishable from data; we keep them null and say so in the schema.
//!
//! Postgres sends a Relation message before the first change of a table in a
//! session and again after its definition changes, so the cache is the
//! stream's own, always-current description of each table: names, type OIDs
//! and modifiers all come from it. Two facts the message lacks come from the
//! catalog when a Relation message arrives (never per row): which columns
//! are NOT NULL (so their schema is not optional, as Debezium declares them)
//! and the primary key (Debezium keys by the primary key, not by the replica
//! identity, which under FULL covers every column).

use std::collections::HashMap;
use std::sync::Arc;

use crate::event::envelope;
use crate::event::value::Value;
use crate::event::{ColumnSchema, Row, TableSchema};
use crate::lsn::Lsn;
use crate::source::pgoutput::{Datum, Relation, ReplicaIdentity, Tuple};
use crate::source::types::{self, PgType, TypeRegistry, ValueError, ValueOptions};

/// What the catalog says about one column of a relation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogColumn {
    pub name: String,
    pub not_null: bool,
    /// 1-based position in the primary key, if the column is part of it.
    pub primary_key_position: Option<i32>,
}

/// A tuple that does not fit its relation (boxed: it travels on the cold path).
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct RowError(Box<RowErrorKind>);

impl RowError {
    /// What went wrong.
    pub fn kind(&self) -> &RowErrorKind {
        &self.0
    }
}

impl From<RowErrorKind> for RowError {
    fn from(kind: RowErrorKind) -> Self {
        RowError(Box::new(kind))
    }
}

/// The ways a tuple can fail to fit its relation.
#[derive(Debug, thiserror::Error)]
pub enum RowErrorKind {
    #[error("change at LSN {lsn} refers to relation {relation_id}, which no Relation message described; the stream is out of order (please report this)")]
    UnknownRelation { relation_id: u32, lsn: Lsn },
    #[error("change at LSN {lsn} in {schema}.{table} has {found} columns, its Relation message {expected}")]
    ColumnCount {
        lsn: Lsn,
        schema: String,
        table: String,
        expected: usize,
        found: usize,
    },
    #[error("cannot decode column {column:?} of {schema}.{table} at LSN {lsn}")]
    Value {
        lsn: Lsn,
        schema: String,
        table: String,
        column: String,
        #[source]
        error: ValueError,
    },
    #[error("column {column:?} of {schema}.{table} arrived in binary format at LSN {lsn}; pgcdc-kafka streams pgoutput's text format only")]
    Binary {
        lsn: Lsn,
        schema: String,
        table: String,
        column: String,
    },
}

/// The tables seen on the stream, by relation id.
#[derive(Debug)]
pub struct RelationCache {
    prefix: String,
    options: ValueOptions,
    types: TypeRegistry,
    tables: HashMap<u32, Arc<TableSchema>>,
    /// Each relation's resolved column types, in column order.
    column_types: HashMap<u32, Vec<PgType>>,
    /// What each schema was built from, to rebuild it when types change.
    definitions: HashMap<u32, (Relation, Vec<CatalogColumn>)>,
}

impl RelationCache {
    pub fn new(prefix: impl Into<String>, options: ValueOptions, types: TypeRegistry) -> Self {
        RelationCache {
            prefix: prefix.into(),
            options,
            types,
            tables: HashMap::new(),
            column_types: HashMap::new(),
            definitions: HashMap::new(),
        }
    }

    /// The user-defined types known so far (enums, domains, ...).
    pub fn types_mut(&mut self) -> &mut TypeRegistry {
        &mut self.types
    }

    /// Whether every type OID of the relation is resolvable without the catalog.
    pub fn knows_types_of(&self, relation: &Relation) -> bool {
        relation
            .columns
            .iter()
            .all(|c| self.types.is_known(c.type_oid))
    }

    /// Replaces the schema of a relation from its Relation message and the
    /// catalog's view of its columns.
    pub fn update(&mut self, relation: &Relation, catalog: &[CatalogColumn]) -> Arc<TableSchema> {
        let topic: Arc<str> =
            format!("{}.{}.{}", self.prefix, relation.namespace, relation.name).into();
        let by_name: HashMap<&str, &CatalogColumn> =
            catalog.iter().map(|c| (c.name.as_str(), c)).collect();

        let full_identity = relation.replica_identity == ReplicaIdentity::Full;
        let mut primary_key: Vec<(i32, usize)> = Vec::new();
        let mut column_types = Vec::with_capacity(relation.columns.len());
        let columns: Vec<ColumnSchema> = relation
            .columns
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let info = by_name.get(c.name.as_str());
                if let Some(pos) = info.and_then(|i| i.primary_key_position) {
                    primary_key.push((pos, i));
                }
                let ty = self.types.resolve(c.type_oid, c.type_modifier);
                let not_null = info.is_some_and(|i| i.not_null || i.primary_key_position.is_some());
                // Outside REPLICA IDENTITY FULL a before-image holds only the
                // identity columns: the others are unknown there, so null.
                let in_every_before_image = full_identity || c.is_key;
                // An unchanged TOASTed value is null where its type cannot carry
                // the placeholder (numeric, arrays of numbers, ...).
                let placeholder_is_null = ty.is_varlena()
                    && types::unavailable_value(&ty, c.type_modifier, &self.options) == Value::Null;
                let required = not_null && in_every_before_image && !placeholder_is_null;
                let mut schema = types::column_schema(&ty, c.type_modifier, &self.options);
                schema.optional = !required;
                column_types.push(ty);
                ColumnSchema {
                    name: c.name.clone(),
                    type_oid: c.type_oid,
                    type_modifier: c.type_modifier,
                    schema,
                }
            })
            .collect();

        primary_key.sort_unstable();
        let key_columns: Vec<usize> = if !primary_key.is_empty() {
            primary_key.into_iter().map(|(_, i)| i).collect()
        } else if relation.replica_identity == ReplicaIdentity::Index {
            relation
                .columns
                .iter()
                .enumerate()
                .filter(|(_, c)| c.is_key)
                .map(|(i, _)| i)
                .collect()
        } else {
            Vec::new()
        };

        let key_schema = (!key_columns.is_empty()).then(|| {
            let key_cols: Vec<&ColumnSchema> = key_columns.iter().map(|&i| &columns[i]).collect();
            envelope::key_schema(&topic, &key_cols)
        });
        let row_schema = envelope::row_schema(&topic, &columns);
        let envelope_schema = envelope::envelope_schema(&topic, &row_schema);
        let table = Arc::new(TableSchema {
            relation_id: relation.id,
            schema: relation.namespace.clone(),
            table: relation.name.clone(),
            topic,
            columns,
            key_columns,
            key_schema,
            row_schema,
            envelope_schema,
        });
        self.tables.insert(relation.id, Arc::clone(&table));
        self.column_types.insert(relation.id, column_types);
        self.definitions
            .insert(relation.id, (relation.clone(), catalog.to_vec()));
        table
    }

    /// Replaces the user-defined types and rebuilds every table's schema
    /// with them (e.g. after `ALTER TYPE ... ADD VALUE`, which sends no new
    /// Relation message).
    pub fn replace_types(&mut self, types: TypeRegistry) {
        self.types = types;
        let definitions: Vec<_> = self.definitions.values().cloned().collect();
        for (relation, catalog) in definitions {
            self.update(&relation, &catalog);
        }
    }

    /// Whether a decoded row holds an enum value its schema does not list:
    /// the enum gained a label since the types were loaded.
    pub fn has_unknown_enum_label(&self, relation_id: u32, row: &Row) -> bool {
        fn unknown(ty: &PgType, value: &Value) -> bool {
            match (ty, value) {
                (PgType::Enum { labels, .. }, Value::String(s)) => !labels.iter().any(|l| l == s),
                (PgType::Modified { base, .. }, v) => unknown(base, v),
                (PgType::Array(element), Value::Array(items)) => {
                    items.iter().any(|item| unknown(element, item))
                }
                _ => false,
            }
        }
        self.column_types
            .get(&relation_id)
            .is_some_and(|types| types.iter().zip(row).any(|(ty, v)| unknown(ty, v)))
    }

    /// The current schema of a relation.
    pub fn get(&self, relation_id: u32, lsn: Lsn) -> Result<&Arc<TableSchema>, RowError> {
        self.tables
            .get(&relation_id)
            .ok_or_else(|| RowErrorKind::UnknownRelation { relation_id, lsn }.into())
    }

    /// Decodes a tuple of `table` into a row. `old` marks a before-image,
    /// whose columns outside the replica identity arrive as NULL.
    pub fn decode_row(
        &self,
        table: &TableSchema,
        tuple: &Tuple,
        lsn: Lsn,
    ) -> Result<Row, RowError> {
        if tuple.0.len() != table.columns.len() {
            return Err(RowErrorKind::ColumnCount {
                lsn,
                schema: table.schema.clone(),
                table: table.table.clone(),
                expected: table.columns.len(),
                found: tuple.0.len(),
            }
            .into());
        }
        let types =
            self.column_types
                .get(&table.relation_id)
                .ok_or(RowErrorKind::UnknownRelation {
                    relation_id: table.relation_id,
                    lsn,
                })?;
        table
            .columns
            .iter()
            .zip(types)
            .zip(&tuple.0)
            .map(|((column, ty), datum)| self.decode_datum(table, column, ty, datum, lsn))
            .collect()
    }

    fn decode_datum(
        &self,
        table: &TableSchema,
        column: &ColumnSchema,
        ty: &PgType,
        datum: &Datum,
        lsn: Lsn,
    ) -> Result<Value, RowError> {
        let failed = |error| RowErrorKind::Value {
            lsn,
            schema: table.schema.clone(),
            table: table.table.clone(),
            column: column.name.clone(),
            error,
        };
        match datum {
            Datum::Null => Ok(Value::Null),
            Datum::UnchangedToast => Ok(types::unavailable_value(
                ty,
                column.type_modifier,
                &self.options,
            )),
            Datum::Text(bytes) => {
                let text = std::str::from_utf8(bytes).map_err(|_| failed(ValueError::NotUtf8))?;
                types::decode_text(ty, column.type_modifier, text, &self.options)
                    .map_err(|error| failed(error).into())
            }
            Datum::Binary(_) => Err(RowErrorKind::Binary {
                lsn,
                schema: table.schema.clone(),
                table: table.table.clone(),
                column: column.name.clone(),
            }
            .into()),
        }
    }
}
