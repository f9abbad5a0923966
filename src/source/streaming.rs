//! How large transactions are received: whole after their commit
//! (pgoutput protocol 1), or streamed while they run (protocol 2,
//! `streaming 'on'`, PostgreSQL 14+) into a bounded local spool until their
//! Stream Commit. Flattened into `run`'s flags; the spool itself is the
//! pipeline's (`src/pipeline/stream/spool.rs`), which says why chunks wait
//! there for the commit.

use std::path::PathBuf;

use clap::Args;

use crate::options::{Invalid, Problems};

/// [`StreamingOptions::spool_memory_bytes`]' default: 16 MiB.
pub const DEFAULT_SPOOL_MEMORY_BYTES: usize = 16 * 1024 * 1024;

/// Whether in-progress transactions are streamed, and where they wait.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Operations")]
pub struct StreamingOptions {
    /// Receive a transaction larger than the server's
    /// logical_decoding_work_mem while it runs (pgoutput protocol 2,
    /// streaming 'on'), instead of the server spilling it to its disk and
    /// sending it after COMMIT. Its changes wait in a local spool and go to
    /// Kafka at its commit, in commit order, exactly as unstreamed; an
    /// aborted one is dropped. Off: protocol 1.
    #[arg(long, env = "PGCDC_STREAM_IN_PROGRESS", default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub stream_in_progress: bool,

    /// Bytes of streamed, uncommitted changes the spool keeps in memory
    /// (all open transactions together); beyond it they go to files in
    /// --spool-dir. 0: always on disk.
    #[arg(long, env = "PGCDC_SPOOL_MEMORY_BYTES", default_value_t = DEFAULT_SPOOL_MEMORY_BYTES)]
    pub spool_memory_bytes: usize,

    /// Directory of the spool's files (one per streamed transaction past
    /// the memory bound, removed at its commit or abort, and the pipeline's
    /// leftovers at every start). Default: pgcdc-kafka-spool in the
    /// system's temp dir.
    #[arg(long, env = "PGCDC_SPOOL_DIR")]
    pub spool_dir: Option<PathBuf>,
}

impl Default for StreamingOptions {
    fn default() -> Self {
        StreamingOptions {
            stream_in_progress: true,
            spool_memory_bytes: DEFAULT_SPOOL_MEMORY_BYTES,
            spool_dir: None,
        }
    }
}

impl StreamingOptions {
    /// The spool directory of the pipeline streaming `slot` from `database`:
    /// one per slot, so pipelines sharing `--spool-dir` never clear each
    /// other's files.
    pub fn spool_dir_for(&self, database: &str, slot: &str) -> PathBuf {
        let base = self
            .spool_dir
            .clone()
            .unwrap_or_else(|| std::env::temp_dir().join("pgcdc-kafka-spool"));
        // Slot names are [a-z0-9_]; the database name may hold anything.
        let database: String = database
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' {
                    c
                } else {
                    '-'
                }
            })
            .collect();
        base.join(format!("{database}.{slot}"))
    }

    /// The problems of these options.
    pub fn problems(&self) -> Vec<Invalid> {
        let mut problems = Problems::default();
        if let Some(dir) = &self.spool_dir {
            problems.check(
                !dir.as_os_str().is_empty(),
                "spool-dir",
                "",
                "must name a directory (or be left unset for the system's temp dir)",
            );
            problems.check(
                !dir.is_file(),
                "spool-dir",
                dir.display().to_string(),
                "is a file; name a directory the connector may create files in",
            );
        }
        problems.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_slot_has_its_own_spool_dir() {
        let options = StreamingOptions {
            spool_dir: Some("/var/spool/pgcdc".into()),
            ..StreamingOptions::default()
        };
        assert_eq!(
            options.spool_dir_for("shop/eu", "pgcdc"),
            PathBuf::from("/var/spool/pgcdc/shop-eu.pgcdc")
        );
        let default = StreamingOptions::default().spool_dir_for("db", "slot");
        assert!(
            default.starts_with(std::env::temp_dir()),
            "{}",
            default.display()
        );
    }

    #[test]
    fn a_file_is_not_a_spool_dir() {
        let file = std::env::current_exe().expect("the test binary");
        let options = StreamingOptions {
            spool_dir: Some(file),
            ..StreamingOptions::default()
        };
        let problems = options.problems();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].field, "spool-dir");
        assert!(problems[0].constraint.contains("is a file"), "{problems:?}");
    }
}
