//! pgoutput's options for `START_REPLICATION`
//! ([reference](https://www.postgresql.org/docs/current/protocol-logical-replication.html#PROTOCOL-LOGICAL-REPLICATION-PARAMS)),
//! chosen in this one place from the server's version and what the run
//! asks for ([`PluginRequest`]).
//!
//! What every run sends today: protocol version 1, the publication, and
//! `messages 'true'` (14+, which the connector requires). The rest is
//! asked for, never assumed, and refused with
//! [`Unsupported`](crate::source::version::Unsupported) when the server is
//! too old, before `START_REPLICATION` is sent:
//!
//! - protocol versions 2-4 (streamed, two-phase and parallel-streamed
//!   transactions, 14+/15+/16+), the seam for streaming large
//!   transactions: the decoder does not read their stream messages yet, so
//!   nothing asks for them;
//! - `binary` (14+, `--pgoutput-binary`, `auto` by default): values in
//!   the types' binary send format, read by `source::types::decode_binary`;
//!   the run asks for it only when it decodes every published column's
//!   type (`source::binary_mode`);
//! - `origin` (16+, `--origin-filter`): `none` drops changes that a
//!   subscription (or any session with a replication origin) applied.
//!   Debezium has no such filter, so by default the connector sends no
//!   `origin` (the server's default, `any`).

use crate::source::version::{Feature, ServerVersion, Unsupported};

/// pgoutput's `proto_version`: which messages the stream may carry.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum ProtoVersion {
    /// Whole transactions, each sent after it commits.
    #[default]
    V1,
    /// Adds streamed transactions (`streaming 'on'`).
    V2,
    /// Adds two-phase transactions (`two_phase 'on'`).
    V3,
    /// Adds parallel streaming (`streaming 'parallel'`).
    V4,
}

impl ProtoVersion {
    /// The number `proto_version` takes.
    pub const fn number(self) -> u32 {
        match self {
            ProtoVersion::V1 => 1,
            ProtoVersion::V2 => 2,
            ProtoVersion::V3 => 3,
            ProtoVersion::V4 => 4,
        }
    }

    /// The server feature it needs, beyond what every supported server has.
    const fn feature(self) -> Option<Feature> {
        match self {
            ProtoVersion::V1 => None,
            ProtoVersion::V2 => Some(Feature::Streaming),
            ProtoVersion::V3 => Some(Feature::TwoPhase),
            ProtoVersion::V4 => Some(Feature::ParallelStreaming),
        }
    }
}

/// pgoutput's `origin` option (`--origin-filter`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// Every change, whatever its origin (the server's default).
    Any,
    /// Only changes without a replication origin: not those a
    /// subscription applied.
    None,
}

/// `--pgoutput-binary`: whether values travel in binary (the choice is
/// `source::binary_mode::choose`'s).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PgoutputBinary {
    /// Binary when every published column's type has a binary decoder and
    /// no signal table is read; text otherwise, saying why at INFO.
    #[default]
    Auto,
    /// Binary, refused at start while a published column's type has no
    /// binary decoder.
    #[value(alias = "true")]
    On,
    /// Text, as Debezium reads values.
    #[value(alias = "false")]
    Off,
}

/// What a run asks of pgoutput beyond what every supported server sends;
/// the default is today's behaviour (protocol 1, text values, no origin).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PluginRequest {
    pub proto_version: ProtoVersion,
    pub binary: bool,
    /// `None`: not sent (the server takes `any`).
    pub origin: Option<Origin>,
}

/// The options `START_REPLICATION` sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginOptions {
    pub proto_version: ProtoVersion,
    pub publication: String,
    pub messages: bool,
    pub binary: bool,
    pub origin: Option<Origin>,
}

impl PluginOptions {
    /// The options for a server of `version` and what the run asks, or
    /// which asked-for feature the server lacks.
    pub fn for_server(
        version: ServerVersion,
        publication: &str,
        request: &PluginRequest,
    ) -> Result<Self, Unsupported> {
        if let Some(feature) = request.proto_version.feature() {
            version.require(feature, "a protocol version above 1", "ask for version 1")?;
        }
        if request.binary {
            version.require(Feature::Binary, "--pgoutput-binary", "run without it")?;
        }
        if request.origin.is_some() {
            version.require(Feature::Origin, "--origin-filter", "run without it")?;
        }
        Ok(PluginOptions {
            proto_version: request.proto_version,
            publication: publication.to_owned(),
            messages: version.has(Feature::LogicalMessages),
            binary: request.binary,
            origin: request.origin,
        })
    }

    /// The option list as `START_REPLICATION` takes it.
    ///
    /// ```
    /// use pgcdc_kafka::source::replication::{PluginOptions, PluginRequest};
    /// use pgcdc_kafka::source::version::ServerVersion;
    ///
    /// let default = PluginRequest::default();
    /// let options = PluginOptions::for_server(ServerVersion(150_004), "pub", &default)
    ///     .expect("15 takes the defaults");
    /// assert_eq!(
    ///     options.render(),
    ///     r#"proto_version '1', publication_names '"pub"', messages 'true'"#
    /// );
    /// ```
    pub fn render(&self) -> String {
        // publication_names is a list of identifiers inside a string literal.
        let publication = crate::source::sql::quote_ident(&self.publication).replace('\'', "''");
        let mut out = format!(
            "proto_version '{}', publication_names '{publication}'",
            self.proto_version.number()
        );
        if self.messages {
            out.push_str(", messages 'true'");
        }
        if self.binary {
            out.push_str(", binary 'true'");
        }
        match self.proto_version {
            ProtoVersion::V1 => {}
            ProtoVersion::V2 => out.push_str(", streaming 'on'"),
            ProtoVersion::V3 => out.push_str(", streaming 'on', two_phase 'on'"),
            ProtoVersion::V4 => out.push_str(", streaming 'parallel', two_phase 'on'"),
        }
        match self.origin {
            None => {}
            Some(Origin::Any) => out.push_str(", origin 'any'"),
            Some(Origin::None) => out.push_str(", origin 'none'"),
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(version: u32, request: PluginRequest) -> Result<String, Unsupported> {
        PluginOptions::for_server(ServerVersion(version), "p", &request).map(|o| o.render())
    }

    const BASE: &str = r#"proto_version '1', publication_names '"p"', messages 'true'"#;

    #[test]
    fn the_default_is_the_same_on_every_supported_version() {
        for version in [140_013, 150_008, 160_004, 170_002, 180_001, 0] {
            assert_eq!(
                render(version, PluginRequest::default()).expect("defaults"),
                BASE,
                "server {version}"
            );
        }
    }

    #[test]
    fn the_publication_is_quoted_as_an_identifier_in_a_literal() {
        let options = PluginOptions::for_server(
            ServerVersion(150_000),
            "it's Big",
            &PluginRequest::default(),
        )
        .expect("defaults");
        assert!(
            options
                .render()
                .contains(r#"publication_names '"it''s Big"'"#),
            "{}",
            options.render()
        );
    }

    #[test]
    fn asked_for_options_render_where_the_server_has_them() {
        let binary = PluginRequest {
            binary: true,
            ..PluginRequest::default()
        };
        assert_eq!(
            render(140_000, binary).expect("binary on 14"),
            format!("{BASE}, binary 'true'")
        );
        let streaming = PluginRequest {
            proto_version: ProtoVersion::V2,
            ..PluginRequest::default()
        };
        assert_eq!(
            render(140_000, streaming).expect("streaming on 14"),
            BASE.replace("'1'", "'2'") + ", streaming 'on'"
        );
        let two_phase = PluginRequest {
            proto_version: ProtoVersion::V3,
            ..PluginRequest::default()
        };
        assert_eq!(
            render(150_000, two_phase).expect("two-phase on 15"),
            BASE.replace("'1'", "'3'") + ", streaming 'on', two_phase 'on'"
        );
        let parallel = PluginRequest {
            proto_version: ProtoVersion::V4,
            origin: Some(Origin::None),
            ..PluginRequest::default()
        };
        assert_eq!(
            render(160_000, parallel).expect("parallel streaming and origin on 16"),
            BASE.replace("'1'", "'4'") + ", streaming 'parallel', two_phase 'on', origin 'none'"
        );
    }

    #[test]
    fn asked_for_options_are_refused_on_older_servers() {
        let origin = PluginRequest {
            origin: Some(Origin::Any),
            ..PluginRequest::default()
        };
        let error = render(150_004, origin).expect_err("origin needs 16");
        assert_eq!(error.feature, Feature::Origin);
        assert!(
            error.to_string().contains("origin filter (PostgreSQL 16+)"),
            "{error}"
        );
        assert!(error.to_string().contains("PostgreSQL 15.4"), "{error}");
        let two_phase = PluginRequest {
            proto_version: ProtoVersion::V3,
            ..PluginRequest::default()
        };
        assert_eq!(
            render(140_010, two_phase).map_err(|e| e.feature),
            Err(Feature::TwoPhase)
        );
        let parallel = PluginRequest {
            proto_version: ProtoVersion::V4,
            ..PluginRequest::default()
        };
        assert_eq!(
            render(150_000, parallel).map_err(|e| e.feature),
            Err(Feature::ParallelStreaming)
        );
        let binary = PluginRequest {
            binary: true,
            ..PluginRequest::default()
        };
        assert_eq!(
            render(130_000, binary).map_err(|e| e.feature),
            Err(Feature::Binary)
        );
    }
}
