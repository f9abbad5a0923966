//! Snapshot progress for people: a progress bar (rows and tables done, rate,
//! ETA) when stderr is an interactive terminal, structured `tracing` logs
//! every few seconds otherwise (a service's journal, a container's log).
//!
//! The ETA rests on the planner's row estimates (`pg_class.reltuples`),
//! which may be stale or unknown (`-1` for a table never analyzed); without
//! an estimate the bar counts rows without a length, and the logs leave the
//! ETA out. Numbers for machines are in the metrics, not here.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};

/// How often the structured progress log is written.
const LOG_EVERY: Duration = Duration::from_secs(5);

/// Every how many rows the bar or the log's clock is looked at: a clock
/// read per row was 1 % of an Avro snapshot's CPU, and the bar is drawn
/// five times a second whatever its position.
const LOOK_EVERY: u64 = 256;

/// The progress of one initial snapshot.
pub struct SnapshotProgress {
    bar: Option<ProgressBar>,
    started: Instant,
    last_log: Instant,
    rows: u64,
    estimated_rows: u64,
    tables: u64,
    tables_done: u64,
}

impl SnapshotProgress {
    /// Progress over `tables` tables of about `estimated_rows` rows (0 when
    /// unknown); a bar only when stderr is a terminal.
    pub fn new(tables: u64, estimated_rows: u64) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::with_draw_target(
                (estimated_rows > 0).then_some(estimated_rows),
                ProgressDrawTarget::stderr(),
            );
            // `wide_bar` takes what the terminal width leaves, so the line
            // never wraps (a wrapped line is redrawn as garbage).
            let template = if estimated_rows > 0 {
                "snapshot {wide_bar} {human_pos}/~{human_len} rows, {msg}, {rate}, ETA {eta}"
            } else {
                "snapshot {spinner} {human_pos} rows, {msg}, {rate}"
            };
            if let Ok(style) = ProgressStyle::with_template(template) {
                bar.set_style(style.with_key(
                    "rate",
                    |state: &ProgressState, w: &mut dyn std::fmt::Write| {
                        let _ = write!(w, "{:.0} rows/s", state.per_sec());
                    },
                ));
            }
            bar
        });
        let progress = SnapshotProgress {
            bar,
            started: Instant::now(),
            last_log: Instant::now(),
            rows: 0,
            estimated_rows,
            tables,
            tables_done: 0,
        };
        progress.set_message();
        if let Some(bar) = &progress.bar {
            // Only now: the first frame is drawn with its message.
            bar.enable_steady_tick(Duration::from_millis(200));
        }
        progress
    }

    fn set_message(&self) {
        if let Some(bar) = &self.bar {
            bar.set_message(format!("{}/{} tables", self.tables_done, self.tables));
        }
    }

    /// One more row read.
    pub fn row(&mut self) {
        self.rows += 1;
        if self.rows.is_multiple_of(LOOK_EVERY) {
            self.look();
        }
    }

    /// Moves the bar to the rows read, or logs them when it is time.
    fn look(&mut self) {
        match &self.bar {
            Some(bar) => {
                // Estimates can be low: the bar never claims more than 100%.
                if bar.length().is_some_and(|len| self.rows > len) {
                    bar.set_length(self.rows);
                }
                bar.set_position(self.rows);
            }
            None if self.last_log.elapsed() >= LOG_EVERY => {
                self.last_log = Instant::now();
                self.log();
            }
            None => {}
        }
    }

    /// One more table finished.
    pub fn table_done(&mut self) {
        self.tables_done += 1;
        if self.bar.is_some() {
            self.look();
        }
        self.set_message();
    }

    /// Rows per second so far.
    fn rate(&self) -> f64 {
        self.rows as f64 / self.started.elapsed().as_secs_f64().max(0.001)
    }

    /// Seconds left at the rate so far, if the estimate allows a guess.
    fn eta_secs(&self) -> Option<u64> {
        let rate = self.rate();
        (self.estimated_rows > self.rows && rate > 0.0)
            .then(|| ((self.estimated_rows - self.rows) as f64 / rate) as u64)
    }

    fn log(&self) {
        tracing::info!(
            rows = self.rows,
            estimated_rows = self.estimated_rows,
            tables_done = self.tables_done,
            tables = self.tables,
            rows_per_sec = self.rate() as u64,
            eta_secs = self.eta_secs(),
            "snapshot progress"
        );
    }

    /// The snapshot was read (or interrupted): clears the bar.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

impl Drop for SnapshotProgress {
    fn drop(&mut self) {
        self.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eta_needs_an_estimate_above_what_was_read() {
        let mut progress = SnapshotProgress {
            bar: None,
            started: Instant::now() - Duration::from_secs(10),
            last_log: Instant::now(),
            rows: 1000,
            estimated_rows: 3000,
            tables: 2,
            tables_done: 0,
        };
        // 100 rows/s, 2000 rows left.
        let eta = progress.eta_secs().expect("an estimate");
        assert!((19..=20).contains(&eta), "{eta}");
        progress.estimated_rows = 0;
        assert_eq!(progress.eta_secs(), None);
        progress.estimated_rows = 500;
        assert_eq!(progress.eta_secs(), None, "a stale estimate gives no ETA");
    }
}
