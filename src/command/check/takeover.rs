//! The takeover part of `check` (with `--takeover-debezium`): Debezium's
//! stored offset can be read, and (with `--format avro`) the registry
//! accepts the schemas `run` would register under every existing subject:
//! the same dry run `run` makes before its first record.

use std::time::Duration;

use super::Report;
use crate::config::RunConfig;
use crate::lsn::Lsn;
use crate::source::setup;
use crate::takeover::{self, subjects};

pub(super) async fn check_takeover(config: &RunConfig, timeout: Duration, report: &mut Report) {
    let options = config.takeover.clone();
    let prefix = config.topic_prefix.clone();
    let producer = config.producer_config();
    let loaded =
        tokio::task::spawn_blocking(move || takeover::load(&options, &prefix, &producer)).await;
    match loaded {
        Ok(Ok(Some(offset))) => report.pass(
            "debezium offset",
            format!(
                "stored offset read: lsn_commit {}, lsn_proc {}, last message {}",
                offset.commit(),
                offset
                    .lsn_proc
                    .map_or_else(|| "none".to_owned(), |l| Lsn::new(l).to_string()),
                offset.message_type.as_deref().unwrap_or("unknown")
            ),
        ),
        Ok(Ok(None)) => return,
        Ok(Err(e)) => {
            report.fail(
                "debezium offset",
                crate::error_chain(&e),
                "see the message; --takeover-debezium names the offsets topic or file:<path>",
            );
            return;
        }
        Err(e) => {
            report.fail("debezium offset", e.to_string(), "report this as a bug");
            return;
        }
    }
    let sql = match tokio::time::timeout(timeout, setup::connect(&config.pg())).await {
        Ok(Ok(sql)) => sql,
        // The PostgreSQL findings say why.
        _ => return,
    };
    match subjects::dry_run(config, &sql).await {
        Ok(checked) => {
            for c in &checked {
                match subjects::refusal(c) {
                    Some(refused) => report.fail(
                        "schema dry run",
                        format!("the registry refuses the next schema of {refused}"),
                        subjects::FIX,
                    ),
                    None => report.pass(
                        "schema dry run",
                        format!(
                            "subject {:?} accepts the schema run would register",
                            c.subject
                        ),
                    ),
                }
            }
        }
        Err(e) => report.fail(
            "schema dry run",
            crate::error_chain(&e),
            "check --schema-registry-url and the publication",
        ),
    }
}
