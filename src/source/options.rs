//! How the source side manages its publication: the options `setup`
//! applies when it makes sure the publication exists. Flattened into `run`'s
//! flags.

use clap::Args;

/// How the connector treats its publication (Debezium's
/// `publication.autocreate.mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Deserialize)]
#[value(rename_all = "snake_case")]
#[serde(rename_all = "snake_case")]
pub enum PublicationAutocreateMode {
    /// Create it FOR ALL TABLES (or FOR TABLE the --table list) if missing.
    AllTables,
    /// Create it, or alter it, to publish exactly the selected tables.
    Filtered,
    /// Never create or alter it: it must exist.
    Disabled,
}

/// Whether and how the publication is created or altered.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Selection and routing")]
pub struct PublicationOptions {
    /// all_tables (create FOR ALL TABLES if missing), filtered (create or
    /// alter it to exactly the selected tables), or disabled (it must exist);
    /// Debezium's publication.autocreate.mode.
    #[arg(
        long,
        env = "PGCDC_PUBLICATION_AUTOCREATE_MODE",
        value_enum,
        default_value = "all_tables"
    )]
    pub publication_autocreate_mode: PublicationAutocreateMode,

    /// Publish changes of partitions as their partitioned root table
    /// (publish_via_partition_root), set when the publication is created or altered.
    #[arg(long, env = "PGCDC_PUBLISH_VIA_PARTITION_ROOT", default_value_t = false, action = clap::ArgAction::Set)]
    pub publish_via_partition_root: bool,

    /// Stream stored generated columns too (publish_generated_columns =
    /// stored, PostgreSQL 18+), set when the publication is created or
    /// altered. Off: they are left out on every version, as before 18.
    #[arg(long, env = "PGCDC_PUBLISH_GENERATED_COLUMNS", default_value_t = false, action = clap::ArgAction::Set)]
    pub publish_generated_columns: bool,
}

impl PublicationOptions {
    /// The `WITH (...)` of `CREATE PUBLICATION` for these options, with its
    /// leading space; empty when every option is the server's default.
    pub fn with_clause(&self) -> &'static str {
        match (
            self.publish_via_partition_root,
            self.publish_generated_columns,
        ) {
            (false, false) => "",
            (true, false) => " WITH (publish_via_partition_root = true)",
            (false, true) => " WITH (publish_generated_columns = stored)",
            (true, true) => {
                " WITH (publish_via_partition_root = true, publish_generated_columns = stored)"
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_with_clause_names_only_what_differs_from_the_default() {
        let options = |via_root, generated| PublicationOptions {
            publication_autocreate_mode: PublicationAutocreateMode::AllTables,
            publish_via_partition_root: via_root,
            publish_generated_columns: generated,
        };
        assert_eq!(options(false, false).with_clause(), "");
        assert_eq!(
            options(false, true).with_clause(),
            " WITH (publish_generated_columns = stored)"
        );
        assert_eq!(
            options(true, true).with_clause(),
            " WITH (publish_via_partition_root = true, publish_generated_columns = stored)"
        );
    }
}
