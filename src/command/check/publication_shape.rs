//! `check`: an existing publication against what `run` snapshots and
//! captures (`setup::shape`), for every mode that leaves it (partly) as it
//! is: a FAIL where `run` refuses to start (a row filter, a missing captured
//! operation: the topic would hold wrong data), a WARN where only the
//! records' shape differs (a column list, another partition root).
//!
//! Under `--read-only` the read-only findings carry the same lines (named
//! `read-only`); here the others, named `publication`.

use std::time::Duration;

use tokio_postgres::Client;

use super::Report;
use crate::config::RunConfig;
use crate::select::Selection;
use crate::source::setup::shape::{self, Kept};
use crate::source::{catalog, setup};

const CHECK: &str = "publication";

/// The shape findings of a run without `--read-only`.
pub(super) async fn check_publication_shape(
    config: &RunConfig,
    timeout: Duration,
    report: &mut Report,
) {
    if config.signal_channels.read_only {
        return;
    }
    // A server that cannot be reached, a catalog that cannot be read, or a
    // missing publication was reported by the PostgreSQL checks.
    let Ok(Ok(client)) = tokio::time::timeout(timeout, setup::connect(&config.pg())).await else {
        return;
    };
    if !matches!(
        catalog::publication(&client, &config.publication_name).await,
        Ok(Some(_))
    ) {
        return;
    }
    let kept = Kept::of(false, config.publication.publication_autocreate_mode);
    report_shape(&client, config, kept, CHECK, report).await;
}

/// The existing publication's differences from the run that outlive what
/// `run` does to it (`kept`), one finding each under `check`; a PASS when
/// there are none.
pub(super) async fn report_shape(
    client: &Client,
    config: &RunConfig,
    kept: Kept,
    check: &'static str,
    report: &mut Report,
) {
    let publication = &config.publication_name;
    let selection = Selection::new(&config.select, &config.tables).unwrap_or_default();
    let captured = shape::Operations::captured(&config.skipped_operations);
    let options = &config.publication;
    let found = shape::mismatches(client, publication, options, captured, &selection, kept).await;
    let found = match found {
        Ok(found) => found,
        Err(error) => {
            let fix = "connect as a role that may read pg_publication and pg_publication_tables";
            report.fail(check, crate::error_chain(&error), fix);
            return;
        }
    };
    let snapshots = config.may_snapshot();
    for mismatch in &found {
        let detail = mismatch.detail_for(publication, snapshots);
        let fix = mismatch.fix(publication);
        match mismatch.refuses(snapshots) {
            true => report.fail(check, format!("{detail}; {}", kept.why()), fix),
            false => report.warn(check, detail, fix),
        }
    }
    if kept == Kept::Filtered {
        if let Ok(narrowed) = shape::narrowed_tables(client, publication, &selection).await {
            if !narrowed.is_empty() {
                report.info(
                    check,
                    format!(
                        "run publishes {} whole (ALTER PUBLICATION ... SET TABLE drops their row \
                         filter or column list, which would hide rows or columns the snapshots \
                         read)",
                        narrowed.join(", ")
                    ),
                );
            }
        }
    }
    if found.is_empty() {
        report.pass(
            check,
            format!(
                "publication {publication:?} carries every row, column and captured operation \
                 of the selected tables, as the snapshots read them"
            ),
        );
    }
}
