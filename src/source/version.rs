//! Which PostgreSQL the connector talks to, and what that version can do:
//! the one table of "feature -> oldest server version" that the replication
//! options ([`crate::source::replication::PluginOptions`]), the slot
//! creation syntax, the publication options and `check` all read, so a
//! version threshold is written down once.
//!
//! Versions are `server_version_num` values (`150004` for 15.4). The
//! oldest server the connector runs against is [`MIN_SUPPORTED`] (14);
//! older ones are refused before anything is created. A version of 0 means
//! "unknown" (a server that sent no `server_version`) and is taken as a
//! current one, which has every feature: asking for a feature the server
//! then lacks fails with the server's own error.
//!
//! The version thresholds come from the release notes and the docs of
//! [pgoutput's options](https://www.postgresql.org/docs/current/protocol-logical-replication.html#PROTOCOL-LOGICAL-REPLICATION-PARAMS),
//! [`CREATE_REPLICATION_SLOT`](https://www.postgresql.org/docs/current/protocol-replication.html#PROTOCOL-REPLICATION-CREATE-REPLICATION-SLOT)
//! and [`CREATE PUBLICATION`](https://www.postgresql.org/docs/current/sql-createpublication.html).

use std::fmt;

/// The oldest `server_version_num` the connector runs against: 14, for
/// pgoutput's `messages` option and the replication commands used.
pub const MIN_SUPPORTED: u32 = 140_000;

/// Something the connector uses, or may be asked to use, that not every
/// supported PostgreSQL has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Feature {
    /// pgoutput's `messages` option: `pg_logical_emit_message` in the stream.
    LogicalMessages,
    /// pgoutput's `binary` option: column values in binary send/recv format.
    Binary,
    /// Protocol version 2 with `streaming`: large transactions sent while
    /// still in progress.
    Streaming,
    /// Protocol version 3 with `two_phase`: prepared transactions decoded at
    /// PREPARE.
    TwoPhase,
    /// Protocol version 4 with `streaming 'parallel'`.
    ParallelStreaming,
    /// The `CREATE_REPLICATION_SLOT ... (SNAPSHOT 'export')` option list;
    /// older servers take the `EXPORT_SNAPSHOT` keyword instead.
    SlotOptionList,
    /// pgoutput's `origin` option (`any` or `none`).
    Origin,
    /// Logical decoding on a hot standby.
    StandbyDecoding,
    /// Slots created or altered with `failover = true`, synchronized to
    /// standbys.
    FailoverSlots,
    /// Stored generated columns in the stream (the publication's
    /// `publish_generated_columns`).
    GeneratedColumns,
}

impl Feature {
    /// Every feature, oldest first.
    pub const ALL: [Feature; 10] = [
        Feature::LogicalMessages,
        Feature::Binary,
        Feature::Streaming,
        Feature::SlotOptionList,
        Feature::TwoPhase,
        Feature::ParallelStreaming,
        Feature::Origin,
        Feature::StandbyDecoding,
        Feature::FailoverSlots,
        Feature::GeneratedColumns,
    ];

    /// The oldest `server_version_num` that has it.
    pub const fn min_version(self) -> u32 {
        match self {
            Feature::LogicalMessages | Feature::Binary | Feature::Streaming => 140_000,
            Feature::SlotOptionList | Feature::TwoPhase => 150_000,
            Feature::ParallelStreaming | Feature::Origin | Feature::StandbyDecoding => 160_000,
            Feature::FailoverSlots => 170_000,
            Feature::GeneratedColumns => 180_000,
        }
    }

    /// A short name for reports, e.g. `failover slots`.
    pub const fn name(self) -> &'static str {
        match self {
            Feature::LogicalMessages => "logical decoding messages",
            Feature::Binary => "binary column values",
            Feature::Streaming => "streaming of large transactions",
            Feature::TwoPhase => "two-phase transactions",
            Feature::ParallelStreaming => "parallel streaming",
            Feature::SlotOptionList => "slot option list",
            Feature::Origin => "origin filter",
            Feature::StandbyDecoding => "decoding on a standby",
            Feature::FailoverSlots => "failover slots",
            Feature::GeneratedColumns => "generated columns",
        }
    }
}

impl fmt::Display for Feature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} (PostgreSQL {}+)",
            self.name(),
            self.min_version() / 10_000
        )
    }
}

/// A server's `server_version_num`; 0 when unknown (taken as current).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ServerVersion(pub u32);

impl ServerVersion {
    /// From a catalog's `int4` `server_version_num`.
    pub fn from_num(num: i32) -> Self {
        ServerVersion(u32::try_from(num).unwrap_or(0))
    }

    /// Whether the server has `feature`.
    ///
    /// ```
    /// use pgcdc_kafka::source::version::{Feature, ServerVersion};
    ///
    /// assert!(ServerVersion(170_002).has(Feature::FailoverSlots));
    /// assert!(!ServerVersion(160_004).has(Feature::FailoverSlots));
    /// assert!(ServerVersion(0).has(Feature::FailoverSlots), "unknown: taken as current");
    /// ```
    pub fn has(self, feature: Feature) -> bool {
        self.0 == 0 || self.0 >= feature.min_version()
    }

    /// Whether the connector runs against it at all ([`MIN_SUPPORTED`]).
    pub fn is_supported(self) -> bool {
        self.0 == 0 || self.0 >= MIN_SUPPORTED
    }

    /// `feature`, or the error that names it, what it needs and this
    /// server's version.
    /// `instead` is the other way out than upgrading, e.g. `run without
    /// --slot-failover`.
    pub fn require(
        self,
        feature: Feature,
        asked_by: &'static str,
        instead: &'static str,
    ) -> Result<(), Unsupported> {
        if self.has(feature) {
            Ok(())
        } else {
            Err(Unsupported {
                feature,
                server: self,
                asked_by,
                instead,
            })
        }
    }
}

impl fmt::Display for ServerVersion {
    /// `15.4` (10 and later number their versions major.minor).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            0 => f.write_str("unknown"),
            n => write!(f, "{}.{}", n / 10_000, n % 10_000),
        }
    }
}

/// A feature was asked for that the server's version does not have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{asked_by} needs {feature}, and this server is PostgreSQL {server}; upgrade the server, or {instead}")]
pub struct Unsupported {
    pub feature: Feature,
    pub server: ServerVersion,
    /// What asked for it, e.g. `--publish-generated-columns`.
    pub asked_by: &'static str,
    /// The way out other than upgrading.
    pub instead: &'static str,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_are_the_documented_ones() {
        let needs = |f: Feature| f.min_version() / 10_000;
        assert_eq!(needs(Feature::LogicalMessages), 14);
        assert_eq!(needs(Feature::Binary), 14);
        assert_eq!(needs(Feature::Streaming), 14);
        assert_eq!(needs(Feature::SlotOptionList), 15);
        assert_eq!(needs(Feature::TwoPhase), 15);
        assert_eq!(needs(Feature::ParallelStreaming), 16);
        assert_eq!(needs(Feature::Origin), 16);
        assert_eq!(needs(Feature::StandbyDecoding), 16);
        assert_eq!(needs(Feature::FailoverSlots), 17);
        assert_eq!(needs(Feature::GeneratedColumns), 18);
        let mut sorted = Feature::ALL;
        sorted.sort_by_key(|f| f.min_version());
        assert_eq!(sorted, Feature::ALL, "ALL is oldest first");
    }

    #[test]
    fn a_version_has_what_it_reached() {
        let v14 = ServerVersion(140_013);
        assert!(v14.is_supported());
        assert!(v14.has(Feature::LogicalMessages));
        assert!(!v14.has(Feature::SlotOptionList));
        assert!(ServerVersion(150_000).has(Feature::SlotOptionList));
        assert!(!ServerVersion(130_020).is_supported());
        assert!(ServerVersion(0).is_supported());
        assert!(Feature::ALL.iter().all(|f| ServerVersion(180_001).has(*f)));
    }

    #[test]
    fn the_refusal_names_the_setting_the_need_and_the_server() {
        let error = ServerVersion(170_004)
            .require(
                Feature::GeneratedColumns,
                "--publish-generated-columns",
                "run without --publish-generated-columns",
            )
            .expect_err("17 has no generated columns in the stream");
        assert_eq!(
            error.to_string(),
            "--publish-generated-columns needs generated columns (PostgreSQL 18+), and this \
             server is PostgreSQL 17.4; upgrade the server, or run without \
             --publish-generated-columns"
        );
        assert_eq!(ServerVersion(140_000).to_string(), "14.0");
        assert_eq!(ServerVersion(0).to_string(), "unknown");
    }
}
