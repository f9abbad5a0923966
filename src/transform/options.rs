//! The transforms' options: Debezium's outbox EventRouter and
//! ExtractNewRecordState (`--envelope unwrap`). Flattened into `run`'s
//! flags; the transforms are built from these alone, and check themselves.

use clap::Args;

use super::{
    parse_additional_placement, parse_metadata_fields, AdditionalPlacement, DeleteHandling,
    EnvelopeMode, MetadataFields,
};
use crate::options::{Invalid, Problems};

/// Which transforms apply, and how (`--outbox-*`, `--envelope`, `--unwrap-*`).
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Transforms")]
pub struct TransformOptions {
    /// Outbox tables (schema.table, repeatable or comma separated): each row
    /// inserted into one becomes an event on the topic its routing column
    /// names (Debezium's outbox EventRouter); their deletes produce nothing.
    #[arg(
        long = "outbox-table",
        env = "PGCDC_OUTBOX_TABLE",
        value_delimiter = ','
    )]
    pub outbox_tables: Vec<String>,

    /// Outbox column with the event id, sent as the `id` header (table.field.event.id).
    #[arg(long, env = "PGCDC_OUTBOX_FIELD_EVENT_ID", default_value = "id")]
    pub outbox_field_event_id: String,

    /// Outbox column with the record key, the aggregate id (table.field.event.key).
    #[arg(
        long,
        env = "PGCDC_OUTBOX_FIELD_EVENT_KEY",
        default_value = "aggregateid"
    )]
    pub outbox_field_event_key: String,

    /// Outbox column sent as the `eventType` header, as Debezium 1.x's
    /// table.field.event.type did. Unset by default: Debezium 2.x and 3.x
    /// add no such header (place the column with --outbox-additional-placement
    /// type:header:eventType instead).
    #[arg(long, env = "PGCDC_OUTBOX_FIELD_EVENT_TYPE")]
    pub outbox_field_event_type: Option<String>,

    /// Outbox column with the payload, the record value as it is (table.field.event.payload).
    #[arg(long, env = "PGCDC_OUTBOX_FIELD_PAYLOAD", default_value = "payload")]
    pub outbox_field_payload: String,

    /// Outbox column whose value names the topic (route.by.field).
    #[arg(
        long,
        env = "PGCDC_OUTBOX_ROUTE_BY_FIELD",
        default_value = "aggregatetype"
    )]
    pub outbox_route_by_field: String,

    /// Topic of outbox events; ${routedByValue} is the routing column's value
    /// (route.topic.replacement).
    #[arg(
        long,
        env = "PGCDC_OUTBOX_ROUTE_TOPIC_REPLACEMENT",
        default_value = "outbox.event.${routedByValue}"
    )]
    pub outbox_route_topic_replacement: String,

    /// More outbox columns for each event: column:header[:alias] adds a
    /// header, column:envelope[:alias] makes the value {payload, alias...}
    /// (table.fields.additional.placement).
    #[arg(long, env = "PGCDC_OUTBOX_ADDITIONAL_PLACEMENT", default_value = "", value_parser = parse_additional_placement)]
    pub outbox_additional_placement: AdditionalPlacement,

    /// Value of records of non-outbox tables: debezium (the change event
    /// envelope) or unwrap (the row itself, as ExtractNewRecordState).
    #[arg(long, env = "PGCDC_ENVELOPE", value_enum, default_value = "debezium")]
    pub envelope: EnvelopeMode,

    /// With --envelope unwrap, what a delete becomes: drop, tombstone,
    /// rewrite (the before row with __deleted "true") or rewrite-with-tombstone
    /// (delete.tombstone.handling.mode).
    #[arg(
        long,
        env = "PGCDC_UNWRAP_DELETE_HANDLING",
        value_enum,
        default_value = "tombstone"
    )]
    pub unwrap_delete_handling: DeleteHandling,

    /// With --envelope unwrap, envelope fields added to the value as
    /// __<name>: e.g. op,table,lsn,source.ts_ms (add.fields).
    #[arg(long, env = "PGCDC_UNWRAP_ADD_FIELDS", default_value = "", value_parser = parse_metadata_fields)]
    pub unwrap_add_fields: MetadataFields,

    /// With --envelope unwrap, envelope fields added as __<name> headers (add.headers).
    #[arg(long, env = "PGCDC_UNWRAP_ADD_HEADERS", default_value = "", value_parser = parse_metadata_fields)]
    pub unwrap_add_headers: MetadataFields,
}

impl TransformOptions {
    /// Every problem of these options.
    pub fn validate(&self) -> Vec<Invalid> {
        let mut p = Problems::default();
        for table in &self.outbox_tables {
            p.check(
                table
                    .split_once('.')
                    .is_some_and(|(s, t)| !s.is_empty() && !t.is_empty()),
                "outbox-table",
                table,
                "must be schema.table",
            );
        }
        for (field, value) in [
            ("outbox-field-event-id", &self.outbox_field_event_id),
            ("outbox-field-event-key", &self.outbox_field_event_key),
            ("outbox-field-payload", &self.outbox_field_payload),
            ("outbox-route-by-field", &self.outbox_route_by_field),
            (
                "outbox-route-topic-replacement",
                &self.outbox_route_topic_replacement,
            ),
        ]
        .into_iter()
        .chain(
            self.outbox_field_event_type
                .as_ref()
                .map(|value| ("outbox-field-event-type", value)),
        ) {
            p.check(
                !value.trim().is_empty(),
                field,
                value,
                "must name a column (or a topic)",
            );
        }
        let unwrapping = self.envelope == EnvelopeMode::Unwrap;
        p.check(
            unwrapping
                || (self.unwrap_add_fields.0.is_empty() && self.unwrap_add_headers.0.is_empty()),
            "unwrap-add-fields",
            "",
            "and --unwrap-add-headers need --envelope unwrap",
        );
        p.0
    }
}
