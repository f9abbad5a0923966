//! The relation cache: from pgoutput Relation messages to [`TableSchema`]s,
//! and from tuples to rows of Connect values.
//!
//! A column's schema is required (not optional) only when no event can carry
//! a null in it: NOT NULL (or primary key), present in every before-image
//! (a key column, or REPLICA IDENTITY FULL), and able to carry the
//! unchanged-TOAST placeholder (or, under FULL, never without its value:
//! the old row fills it in). Debezium marks every NOT NULL column required
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
//!
//! The [`Selection`] decides which relations and columns are captured: a
//! filtered-out column is dropped from the schema and from every row (the
//! cache maps captured columns to their positions in the tuple), and a key
//! column can never be dropped. The [`TopicRouter`] names each table's topic.
//! The [`ColumnMappers`] (Debezium's truncation, masking, hashing and
//! source-type parameters) change a column's schema once here, and each of
//! its decoded values, in every row image.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use foldhash::HashMap as FastMap;

use crate::event::envelope;
use crate::event::value::{ConnectSchema, ConnectType, Field, Value};
use crate::event::{ChangeEvent, ColumnSchema, Op, Row, SourceInfo, TableSchema, UnmappedKey};
use crate::lsn::Lsn;
use crate::naming::{adjust_schema_name, is_topic_char, is_valid_topic, SchemaNameAdjustment};
use crate::select::{Selection, SelectionError, TopicRouter};
use crate::source::column_mappers::{ColumnMappers, ColumnMapping, SourceColumn};
use crate::source::pgoutput::{Column, Datum, Relation, ReplicaIdentity, Tuple};
use crate::source::types::{self, PgType, TypeRegistry, ValueError, ValueOptions};

/// What the catalog says about one column of a relation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogColumn {
    pub name: String,
    pub not_null: bool,
    /// 1-based position in the primary key, if the column is part of it.
    pub primary_key_position: Option<i32>,
    /// The DEFAULT expression (`pg_get_expr`), which Debezium declares as
    /// the field's schema default.
    pub default_expression: Option<String>,
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
}

/// The tables seen on the stream, by relation id.
#[derive(Debug, Clone)]
pub struct RelationCache {
    options: ValueOptions,
    types: TypeRegistry,
    tables: FastMap<u32, Arc<TableSchema>>,
    /// How each relation's tuples become rows: one lookup per tuple.
    decoding: FastMap<u32, Decoding>,
    mappers: Arc<ColumnMappers>,
    schema_names: SchemaNameAdjustment,
    /// What each schema was built from, to rebuild it when types change.
    definitions: FastMap<u32, (Relation, Vec<CatalogColumn>)>,
    /// Relations the table filters leave out.
    excluded: HashSet<u32>,
    selection: Arc<Selection>,
    router: Arc<TopicRouter>,
}

/// How the tuples of one relation become rows.
#[derive(Debug, Clone)]
struct Decoding {
    /// The relation's column count on the wire.
    width: usize,
    /// The positions of the captured columns among them.
    positions: Vec<usize>,
    /// The captured columns' resolved types, in column order.
    types: Vec<PgType>,
    /// Their mappings, in column order (empty without rules).
    mappings: Vec<Option<ColumnMapping>>,
    /// Whether a column's type is or holds an enum: the only rows
    /// [`RelationCache::has_unknown_enum_label`] has to look through.
    enums: bool,
}

impl Decoding {
    /// The mapping of captured column `i`, if a rule maps it.
    fn mapping(&self, i: usize) -> Option<&ColumnMapping> {
        self.mappings.get(i).and_then(Option::as_ref)
    }
}

impl RelationCache {
    pub fn new(prefix: impl Into<String>, options: ValueOptions, types: TypeRegistry) -> Self {
        let prefix = prefix.into();
        RelationCache {
            router: Arc::new(TopicRouter::new(&prefix)),
            options,
            types,
            tables: FastMap::default(),
            decoding: FastMap::default(),
            mappers: Arc::default(),
            schema_names: SchemaNameAdjustment::None,
            definitions: FastMap::default(),
            excluded: HashSet::new(),
            selection: Arc::default(),
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

    /// Filters tables and columns, keys tables and names their topics as
    /// `selection` and `router` say (by default: everything, primary keys,
    /// `<prefix>.<schema>.<table>`).
    pub fn with_selection(mut self, selection: Arc<Selection>, router: Arc<TopicRouter>) -> Self {
        self.selection = selection;
        self.router = router;
        self
    }

    /// Adjusts the schema names derived from topics (`--schema-name-adjustment-mode`).
    pub fn with_schema_names(mut self, adjustment: SchemaNameAdjustment) -> Self {
        self.schema_names = adjustment;
        self
    }

    /// What is captured (tables, columns, logical messages).
    pub fn selection(&self) -> &Selection {
        &self.selection
    }

    /// Truncates, masks, hashes and annotates columns as `mappers` say.
    pub fn with_mappers(mut self, mappers: Arc<ColumnMappers>) -> Self {
        self.mappers = mappers;
        self
    }

    /// Whether the table of a Relation message is captured; remembers the
    /// answer, so [`RelationCache::is_excluded`] can drop its changes.
    pub fn admits(&mut self, relation: &Relation) -> bool {
        let admitted = self
            .selection
            .includes_table(&relation.namespace, &relation.name);
        if admitted {
            self.excluded.remove(&relation.id);
        } else {
            self.excluded.insert(relation.id);
            self.tables.remove(&relation.id);
            self.definitions.remove(&relation.id);
        }
        admitted
    }

    /// Whether changes of this relation are dropped by the table filters.
    pub fn is_excluded(&self, relation_id: u32) -> bool {
        self.excluded.contains(&relation_id)
    }

    /// Replaces the schema of a relation from its Relation message and the
    /// catalog's view of its columns. Fails when the selection cannot be
    /// honoured for this table (a key column excluded, an invalid routed topic).
    pub fn update(
        &mut self,
        relation: &Relation,
        catalog: &[CatalogColumn],
    ) -> Result<Arc<TableSchema>, SelectionError> {
        let qualified = format!("{}.{}", relation.namespace, relation.name);
        let physical_topic = self.router.table_topic(&relation.namespace, &relation.name);
        if !qualified.chars().all(is_topic_char) {
            tracing::warn!(
                table = %qualified,
                topic = %physical_topic,
                "the table's name has characters Kafka does not allow in a topic name; they are replaced by '_'"
            );
        }
        let routed = self.router.route(&physical_topic);
        let topic: Arc<str> = routed.as_deref().unwrap_or(&physical_topic).into();
        if !is_valid_topic(&topic) {
            return Err(SelectionError::InvalidTopic {
                table: qualified,
                topic: topic.to_string(),
            });
        }
        let by_name: HashMap<&str, &CatalogColumn> =
            catalog.iter().map(|c| (c.name.as_str(), c)).collect();

        let named = |topic: &str| adjust_schema_name(topic, self.schema_names);
        let (positions, mut columns, column_types) = self.captured_columns(relation, &by_name);
        // Debezium's keys are never mapped: their schema is the column's own.
        let unmapped_columns = columns.clone();
        let mappings = self.mappings_of(relation, &positions, &column_types);
        for (column, mapping) in columns.iter_mut().zip(&mappings) {
            if let Some(mapping) = mapping {
                mapping.alter_schema(&mut column.schema);
            }
        }
        let not_null = |name: &str| is_not_null(&by_name, name);
        let (natural_key, custom) = self.key_names(relation, catalog, &by_name, &qualified);
        let key_names = custom.clone().unwrap_or(natural_key);
        let position_of = |name: &str| columns.iter().position(|c| c.name == name);
        let mut key_columns = Vec::with_capacity(key_names.len());
        for name in &key_names {
            match position_of(name) {
                Some(i) => key_columns.push(i),
                None => {
                    return Err(SelectionError::ExcludedKeyColumn {
                        table: qualified,
                        column: (*name).to_owned(),
                    })
                }
            }
        }

        let routed_key_field = match (routed.is_some(), self.router.key_field()) {
            (true, Some(field)) if !key_columns.is_empty() => {
                if key_names.contains(&field) {
                    return Err(SelectionError::KeyFieldConflict {
                        table: qualified,
                        field: field.to_owned(),
                    });
                }
                Some((field.to_owned(), physical_topic.clone()))
            }
            _ => None,
        };
        let key_schema = (!key_columns.is_empty()).then(|| {
            let key_cols: Vec<&ColumnSchema> =
                key_columns.iter().map(|&i| &unmapped_columns[i]).collect();
            let mut schema = envelope::key_schema(&named(&topic), &key_cols);
            if custom.is_some() {
                // A chosen key column may be nullable, unlike a primary key.
                for field in &mut schema.fields {
                    field.schema.optional = !not_null(&field.name);
                }
            }
            if let Some((field, _)) = &routed_key_field {
                schema.fields.push(Field {
                    name: field.clone(),
                    schema: ConnectSchema::primitive(ConnectType::String),
                });
            }
            schema
        });
        // As ByLogicalTableRouter: the key and envelope are named after the
        // routed topic, the row struct keeps the table's own name.
        let row_schema = envelope::row_schema(&named(&physical_topic), &columns);
        let envelope_schema = envelope::envelope_schema(&named(&topic), &row_schema);
        let table = Arc::new(TableSchema {
            relation_id: relation.id,
            schema: relation.namespace.clone(),
            table: relation.name.clone(),
            qualified_name: format!("{}.{}", relation.namespace, relation.name).into(),
            topic,
            columns,
            key_columns,
            key_schema,
            routed_key_field,
            row_schema,
            envelope_schema,
        });
        self.excluded.remove(&relation.id);
        self.tables.insert(relation.id, Arc::clone(&table));
        let decoding = Decoding {
            width: relation.columns.len(),
            positions,
            enums: column_types.iter().any(PgType::holds_enum),
            types: column_types,
            mappings,
        };
        self.decoding.insert(relation.id, decoding);
        self.definitions
            .insert(relation.id, (relation.clone(), catalog.to_vec()));
        Ok(table)
    }

    /// The captured columns of `relation` (after the column filters): their
    /// positions in the Relation message, their schemas and their types.
    fn captured_columns(
        &self,
        relation: &Relation,
        by_name: &HashMap<&str, &CatalogColumn>,
    ) -> (Vec<usize>, Vec<ColumnSchema>, Vec<PgType>) {
        // Positions (in the Relation message) of the captured columns.
        let positions: Vec<usize> = relation
            .columns
            .iter()
            .enumerate()
            .filter(|(_, c)| {
                self.selection
                    .includes_column(&relation.namespace, &relation.name, &c.name)
            })
            .map(|(i, _)| i)
            .collect();

        let full_identity = relation.replica_identity == ReplicaIdentity::Full;
        let mut column_types = Vec::with_capacity(positions.len());
        let not_null = |name: &str| is_not_null(by_name, name);
        let columns: Vec<ColumnSchema> = positions
            .iter()
            .map(|&position| {
                let c = &relation.columns[position];
                let ty = self.types.resolve(c.type_oid, c.type_modifier);
                // Outside REPLICA IDENTITY FULL a before-image holds only the
                // identity columns: the others are unknown there, so null.
                let in_every_before_image = full_identity || c.is_key;
                // An unchanged TOASTed value is null where its type cannot carry
                // the placeholder (numeric, arrays of numbers, ...); under FULL
                // the old row always holds it, so `after` never lacks it, and a
                // value too short to be moved out of line is always sent.
                let placeholder_is_null = !full_identity
                    && ty.can_be_toasted(c.type_modifier)
                    && types::unavailable_value(&ty, c.type_modifier, &self.options) == Value::Null;
                // Debezium declares every NOT NULL column required and fills
                // the before-image with zeros (`--debezium-compat`).
                let known =
                    in_every_before_image || self.options.compat.before_image_unknown_columns;
                let required = not_null(&c.name) && known && !placeholder_is_null;
                let mut schema = types::column_schema(&ty, c.type_modifier, &self.options);
                schema.optional = !required;
                schema.default = self.column_default(c, &ty, by_name);
                column_types.push(ty);
                ColumnSchema {
                    name: c.name.clone(),
                    type_oid: c.type_oid,
                    type_modifier: c.type_modifier,
                    schema,
                }
            })
            .collect();

        (positions, columns, column_types)
    }

    /// The mapper of each captured column (at `positions`, of `types`).
    fn mappings_of(
        &self,
        relation: &Relation,
        positions: &[usize],
        types: &[PgType],
    ) -> Vec<Option<ColumnMapping>> {
        if self.mappers.is_empty() {
            return Vec::new();
        }
        positions
            .iter()
            .zip(types)
            .map(|(&p, ty)| {
                let c = &relation.columns[p];
                let column =
                    SourceColumn::new(&c.name, c.type_oid, ty, c.type_modifier, &self.types);
                self.mappers
                    .mapping_for(&relation.namespace, &relation.name, column)
            })
            .collect()
    }

    /// The schema default Debezium declares for column `c` of type `ty`: its
    /// DEFAULT, for built-in types and enums (a domain has none).
    fn column_default(
        &self,
        c: &Column,
        ty: &PgType,
        by_name: &HashMap<&str, &CatalogColumn>,
    ) -> Option<Value> {
        let expression = by_name
            .get(c.name.as_str())?
            .default_expression
            .as_deref()?;
        let builtin_or_enum =
            PgType::from_builtin_oid(c.type_oid).is_some() || matches!(ty, PgType::Enum { .. });
        builtin_or_enum
            .then(|| types::column_default(ty, c.type_modifier, expression, &self.options))
            .flatten()
    }

    /// The key columns' names: Postgres's key (the primary key, else the
    /// replica identity index), and the `--message-key-columns` choice when
    /// one matches.
    fn key_names<'r>(
        &self,
        relation: &'r Relation,
        catalog: &[CatalogColumn],
        by_name: &HashMap<&str, &CatalogColumn>,
        qualified: &str,
    ) -> (Vec<&'r str>, Option<Vec<&'r str>>) {
        // The key columns as Postgres defines them, by name, before filtering.
        let mut natural_key: Vec<(i32, &str)> = relation
            .columns
            .iter()
            .filter_map(|c| {
                by_name
                    .get(c.name.as_str())
                    .and_then(|i| i.primary_key_position)
                    .map(|p| (p, c.name.as_str()))
            })
            .collect();
        natural_key.sort_unstable();
        let mut natural_key: Vec<&str> = natural_key.into_iter().map(|(_, n)| n).collect();
        // A table dropped since this change was written is gone from the
        // catalog: its primary key is then read from the Relation message,
        // whose identity columns under REPLICA IDENTITY DEFAULT are the
        // primary key's (under FULL they are every column: no key is known).
        let dropped = catalog.is_empty() && !relation.columns.is_empty();
        if dropped {
            tracing::warn!(
                table = %qualified,
                replica_identity = ?relation.replica_identity,
                "the table is no longer in the catalog (dropped since this change was written): \
                 its key is taken from the replica identity (none under FULL: null keys) and \
                 every column is optional"
            );
        }
        let identity_is_the_key = relation.replica_identity == ReplicaIdentity::Index
            || (dropped && relation.replica_identity == ReplicaIdentity::Default);
        if natural_key.is_empty() && identity_is_the_key {
            natural_key = relation
                .columns
                .iter()
                .filter(|c| c.is_key)
                .map(|c| c.name.as_str())
                .collect();
        }
        let custom = self
            .selection
            .key_column_patterns(&relation.namespace, &relation.name)
            .map(|patterns| {
                relation
                    .columns
                    .iter()
                    .filter(|c| patterns.iter().any(|p| p.is_match(&c.name)))
                    .map(|c| c.name.as_str())
                    .collect::<Vec<_>>()
            })
            .filter(|names| {
                if names.is_empty() {
                    tracing::warn!(table = %qualified, "--message-key-columns names no column of this table; keying it by its primary key");
                }
                !names.is_empty()
            });
        (natural_key, custom)
    }

    /// The names of the captured columns of `tuple` that are TOASTed and
    /// unchanged (sent without their value).
    pub fn unchanged_columns<'t>(&self, table: &'t TableSchema, tuple: &Tuple) -> Vec<&'t str> {
        // Most tuples have none: no lookup for them.
        if !tuple.iter().any(|d| matches!(d, Datum::UnchangedToast)) {
            return Vec::new();
        }
        let Some(decoding) = self.decoding.get(&table.relation_id) else {
            return Vec::new();
        };
        (decoding.positions.iter())
            .zip(&table.columns)
            .filter(|(&p, _)| matches!(tuple.get(p), Some(Datum::UnchangedToast)))
            .map(|(_, c)| c.name.as_str())
            .collect()
    }

    /// Replaces the user-defined types and rebuilds every table's schema
    /// with them (e.g. after `ALTER TYPE ... ADD VALUE`, which sends no new
    /// Relation message).
    pub fn replace_types(&mut self, types: TypeRegistry) -> Result<(), SelectionError> {
        self.types = types;
        let definitions: Vec<_> = self.definitions.values().cloned().collect();
        for (relation, catalog) in definitions {
            self.update(&relation, &catalog)?;
        }
        Ok(())
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
        let Some(decoding) = self.decoding.get(&relation_id).filter(|d| d.enums) else {
            return false;
        };
        // A mapped (masked, hashed, truncated) value is no label any more.
        (decoding.types.iter().zip(row).enumerate())
            .any(|(i, (ty, v))| unknown(ty, v) && decoding.mapping(i).is_none())
    }

    /// The Relation message (or catalog reading) the schema of `relation_id`
    /// was built from: its columns are the ones a tuple of it carries.
    pub fn relation(&self, relation_id: u32) -> Option<&Relation> {
        self.definitions.get(&relation_id).map(|(r, _)| r)
    }

    /// Positions in a tuple of `table` of its key columns, in key order.
    pub fn key_positions(&self, table: &TableSchema) -> Option<Vec<usize>> {
        let positions = &self.decoding.get(&table.relation_id)?.positions;
        table
            .key_columns
            .iter()
            .map(|&k| positions.get(k).copied())
            .collect()
    }

    /// The current schema of a relation.
    pub fn get(&self, relation_id: u32, lsn: Lsn) -> Result<&Arc<TableSchema>, RowError> {
        self.tables
            .get(&relation_id)
            .ok_or_else(|| RowErrorKind::UnknownRelation { relation_id, lsn }.into())
    }

    /// Decodes a tuple of `table` read by a snapshot query (initial or
    /// incremental) into a row: as [`Self::decode_row`], except that under
    /// `--debezium-compat date-infinity` a DATE `±infinity` takes the day
    /// number Debezium's snapshot writes, which reads it through pgjdbc
    /// rather than its streaming parser ([`types::compat`]).
    pub fn decode_read_row(
        &self,
        table: &TableSchema,
        tuple: &Tuple,
        lsn: Lsn,
    ) -> Result<Row, RowError> {
        let mut row = self.decode_row(table, tuple, lsn)?;
        if self.options.compat.date_infinity {
            if let Some(decoding) = self.decoding.get(&table.relation_id) {
                for (value, ty) in row.iter_mut().zip(&decoding.types) {
                    if matches!(ty, PgType::Date) {
                        types::compat::snapshot_date(value);
                    }
                }
            }
        }
        Ok(row)
    }

    /// The `op: "r"` event of `tuple`, a row of `table` read by a snapshot
    /// query (initial, incremental or blocking), with `source`.
    pub fn read_event(
        &self,
        table: &Arc<TableSchema>,
        tuple: &Tuple,
        source: SourceInfo,
    ) -> Result<ChangeEvent, RowError> {
        Ok(ChangeEvent {
            after: Some(self.decode_read_row(table, tuple, source.lsn)?),
            unmapped_key: UnmappedKey {
                before: None,
                after: self.unmapped_key(table, Some(tuple), source.lsn)?,
            },
            table: Arc::clone(table),
            op: Op::Read,
            before: None,
            source,
        })
    }

    /// Decodes a tuple of `table` into a row. `old` marks a before-image,
    /// whose columns outside the replica identity arrive as NULL.
    pub fn decode_row(
        &self,
        table: &TableSchema,
        tuple: &Tuple,
        lsn: Lsn,
    ) -> Result<Row, RowError> {
        let decoding =
            self.decoding
                .get(&table.relation_id)
                .ok_or(RowErrorKind::UnknownRelation {
                    relation_id: table.relation_id,
                    lsn,
                })?;
        if tuple.len() != decoding.width {
            return Err(RowErrorKind::ColumnCount {
                lsn,
                schema: table.schema.clone(),
                table: table.table.clone(),
                expected: decoding.width,
                found: tuple.len(),
            }
            .into());
        }
        // Sized up front: collecting Results would grow the row from 4
        // values by doubling, copying a wide row four times.
        let mut row = Vec::with_capacity(table.columns.len());
        let columns = table.columns.iter().zip(&decoding.types);
        for (i, ((column, ty), &p)) in columns.zip(&decoding.positions).enumerate() {
            // `p` is below the width, which is the tuple's (checked above).
            let datum = tuple.get(p).unwrap_or(Datum::Null);
            self.decode_datum_into(table, column, ty, datum, lsn, &mut row)?;
            if let (Some(mapping), Some(value)) = (decoding.mapping(i), row.last_mut()) {
                *value = mapping.apply(std::mem::replace(value, Value::Null));
            }
        }
        Ok(row)
    }

    /// The key columns' values of `tuple` before the column mappers, when
    /// a mapper changes one of them (else `None`: the row's values are the
    /// key's). Debezium never masks, hashes or truncates a key.
    pub fn unmapped_key(
        &self,
        table: &TableSchema,
        tuple: Option<&Tuple>,
        lsn: Lsn,
    ) -> Result<Option<Vec<Value>>, RowError> {
        let Some(tuple) = tuple else {
            return Ok(None);
        };
        let Some(decoding) = self.decoding.get(&table.relation_id) else {
            return Ok(None);
        };
        if !(table.key_columns.iter()).any(|&i| decoding.mapping(i).is_some()) {
            return Ok(None);
        }
        let (types, positions) = (&decoding.types, &decoding.positions);
        let mut key = Vec::with_capacity(table.key_columns.len());
        for &i in &table.key_columns {
            match (table.columns.get(i), types.get(i), positions.get(i)) {
                (Some(column), Some(ty), Some(&p)) => match tuple.get(p) {
                    Some(datum) => {
                        self.decode_datum_into(table, column, ty, datum, lsn, &mut key)?
                    }
                    None => key.push(Value::Null),
                },
                _ => key.push(Value::Null),
            }
        }
        Ok(Some(key))
    }

    /// Decodes `datum`, a value of `column`, onto the end of `values`. The
    /// value is written in place rather than returned: moving each of a wide
    /// row's values up through layers of `Result` cost a visible share of
    /// decoding it (BENCHMARKS.md, "Wide rows").
    fn decode_datum_into(
        &self,
        table: &TableSchema,
        column: &ColumnSchema,
        ty: &PgType,
        datum: Datum<'_>,
        lsn: Lsn,
        values: &mut Vec<Value>,
    ) -> Result<(), RowError> {
        let failed = |error| RowErrorKind::Value {
            lsn,
            schema: table.schema.clone(),
            table: table.table.clone(),
            column: column.name.clone(),
            error,
        };
        let value = match datum {
            // Only a before-image leaves a required column null: the column is
            // outside the replica identity, and NOT NULL made it required
            // under `--debezium-compat before-image-unknown-columns`.
            Datum::Null
                if self.options.compat.before_image_unknown_columns && !column.schema.optional =>
            {
                types::compat::unknown_column_value(ty, column.type_modifier, &self.options)
            }
            Datum::Null => match &column.schema.default {
                // What Connect's converters write for it (`types::compat`).
                Some(default) if self.options.compat.explicit_null_with_default => default.clone(),
                _ => Value::Null,
            },
            Datum::UnchangedToast => {
                types::unavailable_value(ty, column.type_modifier, &self.options)
            }
            Datum::Text(bytes) => {
                let text = std::str::from_utf8(bytes).map_err(|_| failed(ValueError::NotUtf8))?;
                return self
                    .push_decoded(table, column, values, |opts, out| {
                        types::decode_text_into(ty, column.type_modifier, text, opts, out)
                    })
                    .map_err(|error| failed(error).into());
            }
            Datum::Binary(bytes) => {
                return self
                    .push_decoded(table, column, values, |opts, out| {
                        types::decode_binary_into(ty, column.type_modifier, bytes, opts, out)
                    })
                    .map_err(|error| failed(error).into());
            }
        };
        values.push(value);
        Ok(())
    }

    /// Pushes what `decode` (a value's text or binary decoder, under the
    /// options it is given) makes of a value of `column` onto `values`.
    /// Only a NUMERIC `NaN` / `±Infinity` that `--debezium-compat
    /// numeric-nan-infinity` made null decodes to null: in an optional
    /// column that is logged, as Debezium warns; in a required one Debezium
    /// fails the record, so it is decoded again under strict options and
    /// the error stands.
    fn push_decoded(
        &self,
        table: &TableSchema,
        column: &ColumnSchema,
        values: &mut Vec<Value>,
        decode: impl Fn(&ValueOptions, &mut Vec<Value>) -> Result<(), ValueError>,
    ) -> Result<(), ValueError> {
        decode(&self.options, values)?;
        if values.last() != Some(&Value::Null) {
            return Ok(());
        }
        if !column.schema.optional {
            values.pop();
            let strict = ValueOptions {
                special_numeric: types::SpecialNumeric::Fail,
                ..self.options.clone()
            };
            return decode(&strict, values);
        }
        tracing::warn!(
            schema = %table.schema,
            table = %table.table,
            column = %column.name,
            "a NUMERIC NaN or Infinity is written as null, as Debezium does \
             (--debezium-compat numeric-nan-infinity); the value is lost"
        );
        Ok(())
    }
}

/// Whether the catalog says column `name` never holds NULL (NOT NULL, or
/// part of the primary key).
fn is_not_null(by_name: &HashMap<&str, &CatalogColumn>, name: &str) -> bool {
    by_name
        .get(name)
        .is_some_and(|i| i.not_null || i.primary_key_position.is_some())
}

#[cfg(test)]
mod tests;
