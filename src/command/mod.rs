//! One module per subcommand of `pgcdc-kafka`: what each does with its
//! parsed flags and which exit code it ends with. `main.rs` only parses the
//! command line (through the configuration layers) and dispatches here.
//!
//! Exit codes: 0 success (a stop on request or at `--max-run`, a caught-up
//! bounded run that delivered everything, a check that passed); 1 an error
//! that stopped it (or a failed check); 2 invalid flags or configuration;
//! [`EXIT_INCOMPLETE`] (3) a `--stop-when-caught-up` run that reached its
//! target but stopped before Kafka acknowledged all it had read. With
//! several pipelines `run` exits with the worst of theirs (1 over 3 over
//! 0) once the last has stopped, and `check` fails if any pipeline fails.

pub mod check;
pub mod config;
pub mod fleet;
pub mod run;
pub mod snapshot;
pub mod status;

use crate::config::pipelines::PipelineName;
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

/// Prints one pipeline's report: as text headed by its name (on the same
/// line when `inline`), or as one JSON object with a `pipeline` field.
pub fn print_named_report<R: std::fmt::Display + serde::Serialize>(
    format: LogFormat,
    pipeline: &PipelineName,
    report: &R,
    inline: bool,
) {
    match format {
        LogFormat::Text if inline => println!("pipeline {pipeline}: {report}"),
        LogFormat::Text => println!("pipeline {pipeline}:\n{report}"),
        LogFormat::Json => print_report(format, &Named { pipeline, report }),
    }
}

/// A report with the pipeline it is about.
#[derive(serde::Serialize)]
struct Named<'a, R> {
    pipeline: &'a PipelineName,
    #[serde(flatten)]
    report: &'a R,
}

impl<R: std::fmt::Display> std::fmt::Display for Named<'_, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "pipeline {}: {}", self.pipeline, self.report)
    }
}
