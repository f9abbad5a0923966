//! librdkafka's log lines and client-level errors, as the connector logs
//! them: one mapping for every Kafka client (the producer, the admin and
//! consumer clients), through [`KafkaLog`].
//!
//! # Levels
//!
//! The connector's levels mean something (docs/OPERATIONS.md): ERROR is
//! data at risk or the connector stopping, WARN something unexpected that
//! it recovers from. librdkafka logs a broker it cannot reach at its own
//! error level on every reconnect, although it recovers by itself; a record
//! that is really lost reaches the connector as a failed delivery report,
//! and that is logged at ERROR where it is handled ([`super::kafka`]). So
//! librdkafka's levels map one step down at the top: emergency to error
//! become WARN, warning stays WARN, notice and info are INFO, debug DEBUG.
//!
//! # One line per fact
//!
//! librdkafka tells a failed connection twice, to the log callback (`FAIL`)
//! and to the error callback, with the same text; the error callback's copy
//! of a transport failure goes to DEBUG. A line repeated on every retry
//! (the same broker refusing the connection each second) is logged once;
//! the copies within [`REPEAT_WINDOW`] after it are counted, and the next
//! copy after the window is logged with that count (`suppressed`).
//! Repeats are told apart from new lines by their text without
//! librdkafka's own `(after 12ms in state CONNECT, ...)` suffix.
//!
//! Lines about an unreachable broker carry a `hint` naming the brokers of
//! `--bootstrap-servers`, the one flag that decides where the connector
//! looks.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use rdkafka::config::RDKafkaLogLevel;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::ClientConfig;

/// How long copies of a logged line are counted rather than logged.
pub const REPEAT_WINDOW: Duration = Duration::from_secs(60);

/// The connector's log of one Kafka client: knows the brokers it was given.
#[derive(Debug, Clone, Default)]
pub struct KafkaLog {
    /// `bootstrap.servers` of the client, for the hint on unreachable brokers.
    bootstrap_servers: String,
}

/// The level a line is logged at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Warn,
    Info,
    Debug,
}

impl KafkaLog {
    /// The log of a client made from `config`.
    pub fn for_config(config: &ClientConfig) -> Self {
        KafkaLog {
            bootstrap_servers: config.get("bootstrap.servers").unwrap_or("").to_owned(),
        }
    }

    /// The hint on a line about an unreachable broker.
    pub fn hint(&self) -> String {
        format!(
            "check that the brokers of --bootstrap-servers ({}) are up and reachable from here",
            self.bootstrap_servers
        )
    }

    /// librdkafka's log callback.
    pub fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        // `--skip-delivered` sets enable.gapless.guarantee on purpose (see
        // `RunConfig::skips_delivered`); a warning that it is experimental
        // at every start would teach operators to ignore warnings.
        if fac == "CONFWARN" && message.contains("enable.gapless.guarantee is experimental") {
            return;
        }
        let level = match level {
            RDKafkaLogLevel::Emerg
            | RDKafkaLogLevel::Alert
            | RDKafkaLogLevel::Critical
            | RDKafkaLogLevel::Error
            | RDKafkaLogLevel::Warning => Level::Warn,
            RDKafkaLogLevel::Notice | RDKafkaLogLevel::Info => Level::Info,
            RDKafkaLogLevel::Debug => Level::Debug,
        };
        let unreachable = is_connection_failure(message);
        self.emit(level, fac, message, unreachable);
    }

    /// librdkafka's error callback, for the errors no caller handles (a
    /// refused login is handled before: see [`super::login`]), logged with
    /// `fac="client"`. A transport failure was logged by the log callback
    /// already, with the same text.
    pub fn client_error(&self, error: &KafkaError, reason: &str) {
        let code = error.rdkafka_error_code();
        let level = match code {
            Some(RDKafkaErrorCode::BrokerTransportFailure) => Level::Debug,
            // Reaching the end of a partition is what a tail reader waits for.
            Some(RDKafkaErrorCode::PartitionEOF) => Level::Debug,
            _ if matches!(error, KafkaError::PartitionEOF(_)) => Level::Debug,
            _ => Level::Warn,
        };
        let unreachable = matches!(
            code,
            Some(
                RDKafkaErrorCode::AllBrokersDown
                    | RDKafkaErrorCode::BrokerTransportFailure
                    | RDKafkaErrorCode::Resolve
            )
        ) || is_connection_failure(reason);
        self.emit(level, "client", &format!("{error}: {reason}"), unreachable);
    }

    fn emit(&self, level: Level, fac: &str, message: &str, unreachable: bool) {
        let Some(suppressed) = REPEATS.admit(level, fac, message, Instant::now()) else {
            return;
        };
        let hint = unreachable.then(|| self.hint());
        let hint = hint.as_deref();
        // Only when there were copies: most lines have none.
        let suppressed = (suppressed > 0).then_some(suppressed);
        match level {
            Level::Warn => tracing::warn!(
                target: "librdkafka",
                fac,
                suppressed,
                hint,
                "{message}"
            ),
            Level::Info => {
                tracing::info!(target: "librdkafka", fac, suppressed, hint, "{message}")
            }
            Level::Debug => {
                tracing::debug!(target: "librdkafka", fac, suppressed, hint, "{message}")
            }
        }
    }
}

/// Whether librdkafka's line says a broker could not be reached.
fn is_connection_failure(message: &str) -> bool {
    [
        "Connection refused",
        "Connect to ",
        "brokers are down",
        "Failed to resolve",
        "Connection timed out",
    ]
    .iter()
    .any(|needle| message.contains(needle))
}

/// The text that makes two lines copies of each other: without
/// librdkafka's `(after 0ms in state CONNECT, 3 identical error(s)
/// suppressed)`, which changes on every copy.
fn repeat_key(fac: &str, message: &str) -> String {
    let text = match message.rfind(" (after ") {
        Some(at) if message.ends_with(')') => &message[..at],
        _ => message,
    };
    format!("{fac} {text}")
}

/// Lines logged within [`REPEAT_WINDOW`], shared by every client of the
/// process (a broker down is down for all of them).
static REPEATS: Repeats = Repeats(Mutex::new(None));

struct Repeats(Mutex<Option<HashMap<String, Seen>>>);

#[derive(Debug, Clone, Copy)]
struct Seen {
    logged: Instant,
    suppressed: u64,
}

impl Repeats {
    /// Whether to log the line now, with the number of copies suppressed
    /// since it was last logged; `None` to count it instead. DEBUG lines
    /// are always logged (they are asked for).
    fn admit(&self, level: Level, fac: &str, message: &str, now: Instant) -> Option<u64> {
        if level == Level::Debug {
            return Some(0);
        }
        let mut seen = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let seen = seen.get_or_insert_with(HashMap::new);
        // Lines not seen for a while are forgotten: the map stays as small
        // as the set of lines of the last window.
        seen.retain(|_, s| now.duration_since(s.logged) < REPEAT_WINDOW * 2);
        match seen.entry(repeat_key(fac, message)) {
            std::collections::hash_map::Entry::Occupied(mut entry) => {
                let s = entry.get_mut();
                if now.duration_since(s.logged) < REPEAT_WINDOW {
                    s.suppressed += 1;
                    None
                } else {
                    let suppressed = s.suppressed;
                    *s = Seen {
                        logged: now,
                        suppressed: 0,
                    };
                    Some(suppressed)
                }
            }
            std::collections::hash_map::Entry::Vacant(entry) => {
                entry.insert(Seen {
                    logged: now,
                    suppressed: 0,
                });
                Some(0)
            }
        }
    }
}

/// The context of a Kafka client with no callbacks of its own (admin
/// clients): librdkafka's lines through [`KafkaLog`].
#[derive(Debug, Clone, Default)]
pub struct LoggingContext(pub KafkaLog);

impl LoggingContext {
    /// The context of a client made from `config`.
    pub fn for_config(config: &ClientConfig) -> Self {
        LoggingContext(KafkaLog::for_config(config))
    }
}

impl rdkafka::ClientContext for LoggingContext {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        self.0.log(level, fac, message);
    }

    fn error(&self, error: KafkaError, reason: &str) {
        self.0.client_error(&error, reason);
    }
}

impl rdkafka::consumer::ConsumerContext for LoggingContext {}

#[cfg(test)]
mod tests {
    use super::*;

    const REFUSED: &str =
        "127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: Connection refused";

    #[test]
    fn copies_differ_only_in_librdkafkas_suffix() {
        let first = format!("{REFUSED} (after 0ms in state CONNECT)");
        let later =
            format!("{REFUSED} (after 1ms in state CONNECT, 4 identical error(s) suppressed)");
        assert_eq!(repeat_key("FAIL", &first), repeat_key("FAIL", &later));
        assert_ne!(repeat_key("FAIL", &first), repeat_key("ERROR", &first));
        assert_eq!(repeat_key("FAIL", "no suffix"), "FAIL no suffix");
    }

    #[test]
    fn a_repeated_line_is_logged_once_per_window_with_the_count() {
        let repeats = Repeats(Mutex::new(None));
        let t0 = Instant::now();
        let at = |secs| t0 + Duration::from_secs(secs);
        assert_eq!(repeats.admit(Level::Warn, "FAIL", REFUSED, at(0)), Some(0));
        for s in 1..=5 {
            assert_eq!(repeats.admit(Level::Warn, "FAIL", REFUSED, at(s)), None);
        }
        // Another line is not a copy.
        assert_eq!(repeats.admit(Level::Warn, "FAIL", "other", at(5)), Some(0));
        assert_eq!(
            repeats.admit(Level::Warn, "FAIL", REFUSED, at(61)),
            Some(5),
            "after the window, logged with the copies it suppressed"
        );
        assert_eq!(repeats.admit(Level::Warn, "FAIL", REFUSED, at(62)), None);
        // Asked-for detail is never suppressed.
        assert_eq!(
            repeats.admit(Level::Debug, "FAIL", REFUSED, at(62)),
            Some(0)
        );
    }

    #[test]
    fn connection_failures_are_recognized() {
        assert!(is_connection_failure(REFUSED));
        assert!(is_connection_failure("1/1 brokers are down"));
        assert!(!is_connection_failure(
            "Configuration property enable.gapless.guarantee is experimental"
        ));
    }
}
