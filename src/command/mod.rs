//! One module per subcommand of `pgcdc-kafka`: what each does with its
//! parsed flags and which exit code it ends with. `main.rs` only parses the
//! command line (through the configuration layers) and dispatches here.
//!
//! Exit codes: 0 success (a stop on request or at `--max-run`, a caught-up
//! bounded run that delivered everything, a check that passed); 1 an error
//! that stopped it (or a failed check); 2 invalid flags or configuration;
//! [`EXIT_INCOMPLETE`] (3) a `--stop-when-caught-up` run that reached its
//! target but stopped before Kafka acknowledged all it had read.

pub mod check;
pub mod config;
pub mod run;
pub mod snapshot;
pub mod status;

use crate::config::LogFormat;

/// A bounded run that reached its target with records Kafka had not
/// acknowledged when the drain ended (a failed delivery, or
/// `--shutdown-timeout` spent waiting): not a success for a scheduler, though
/// nothing is lost (the slot stays before them and the next run sends them).
pub const EXIT_INCOMPLETE: u8 = 3;

/// Prints a command's report on stdout: as text, or as one JSON object with
/// --log-format json.
pub fn print_report<R: std::fmt::Display + serde::Serialize>(format: LogFormat, report: &R) {
    match format {
        LogFormat::Text => println!("{report}"),
        LogFormat::Json => match serde_json::to_string(report) {
            Ok(json) => println!("{json}"),
            Err(error) => tracing::warn!(%error, "cannot serialize the report"),
        },
    }
}
