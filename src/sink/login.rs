//! A Kafka login the broker refuses, told apart from an unreachable broker.
//!
//! librdkafka reports a refused SASL login (wrong user, password or
//! mechanism) only to the client's error callback. The requests themselves
//! go on failing as they would against an unreachable broker (transport
//! failures, timeouts), and the pipeline retries those with backoff. A
//! refused login fails every attempt the same way, so it ends the attempt
//! with [`LoginRefused`], which is not retryable and names the flags to fix.
//! [`LoginRefused::from_client_error`] is the one place that recognizes it,
//! for every client:
//!
//! - the producer's context publishes it as the sink's failure
//!   ([`super::kafka`]), which also ends waits beside the producer: the
//!   snapshot's flush, `init_transactions` of `--delivery exactly-once`,
//!   topic creation (`--topic-partitions` and friends);
//! - the look for an earlier run's topics, before the producer exists, is a
//!   consumer whose context is a [`LoginWatch`].
//!
//! The progress topic's clients of `--delivery exactly-once` run only after
//! `init_transactions` logged in, so they need no watch.
//!
//! Blocking calls that wait for a broker (metadata, `init_transactions`,
//! flush) are made in growing slices of their timeout ([`in_slices`]), so a
//! refusal stops them within about a second instead of after the whole
//! timeout.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::metadata::Metadata;
use rdkafka::{ClientConfig, ClientContext};

use super::client_log::KafkaLog;

/// The broker refused this connector's credentials.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "kafka refused this connector's credentials: {reason}; check --kafka-sasl-mechanism, \
     --kafka-sasl-username and the password (--kafka-sasl-password, \
     PGCDC_KAFKA_SASL_PASSWORD or --kafka-sasl-password-file)"
)]
pub struct LoginRefused {
    /// librdkafka's description (it names the broker and the mechanism,
    /// never the password).
    pub reason: String,
}

impl LoginRefused {
    /// The refusal a client-level error stands for, if it is one; logged.
    /// Every Kafka client context of the connector asks this.
    pub fn from_client_error(error: &KafkaError, reason: &str) -> Option<LoginRefused> {
        let refused = matches!(
            error.rdkafka_error_code(),
            Some(RDKafkaErrorCode::Authentication | RDKafkaErrorCode::SaslAuthenticationFailed)
        );
        if !refused {
            return None;
        }
        tracing::error!(reason, "kafka refused the credentials");
        Some(LoginRefused {
            reason: reason.to_owned(),
        })
    }
}

/// The context of a Kafka client that is not the producer: records the
/// first refused login and logs other client errors. librdkafka calls it
/// only while the client is polled, so it suits consumers (rust-rdkafka's
/// admin client never polls for client errors).
#[derive(Debug, Default)]
pub struct LoginWatch {
    refused: OnceLock<LoginRefused>,
    log: KafkaLog,
}

impl LoginWatch {
    /// The watch of a client made from `config`.
    pub fn for_config(config: &ClientConfig) -> Self {
        LoginWatch {
            refused: OnceLock::new(),
            log: KafkaLog::for_config(config),
        }
    }

    /// The refused login, if the broker refused one.
    pub fn refused(&self) -> Option<LoginRefused> {
        self.refused.get().cloned()
    }
}

impl ClientContext for LoginWatch {
    fn error(&self, error: KafkaError, reason: &str) {
        match LoginRefused::from_client_error(&error, reason) {
            Some(refused) => {
                let _ = self.refused.set(refused);
            }
            None => self.log.client_error(&error, reason),
        }
    }

    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        self.log.log(level, fac, message);
    }
}

impl rdkafka::consumer::ConsumerContext for LoginWatch {}

/// How a call made with [`in_slices`] ended without a result.
#[derive(Debug)]
pub enum Interrupted<E> {
    /// The broker refused the login.
    Refused(LoginRefused),
    /// The call failed otherwise (its last error).
    Failed(E),
}

/// The first slice of [`in_slices`]; each next one is twice as long.
const FIRST_SLICE: Duration = Duration::from_millis(250);

/// Makes a blocking call that waits for a broker, `call(limit)`, in slices
/// of `timeout` that double from a quarter second, until it succeeds, fails
/// with an error `again` does not accept (only timeouts and transport
/// failures are worth another slice), `timeout` is spent, or `refused`
/// reports a refused login. Growing slices keep a slow but working cluster
/// from timing out every short slice.
pub fn in_slices<T, E>(
    timeout: Duration,
    mut call: impl FnMut(Duration) -> Result<T, E>,
    again: impl Fn(&E) -> bool,
    refused: impl Fn() -> Option<LoginRefused>,
) -> Result<T, Interrupted<E>> {
    let deadline = Instant::now() + timeout;
    let mut slice = FIRST_SLICE;
    loop {
        let started = Instant::now();
        let limit = slice.min(deadline.saturating_duration_since(started));
        let result = call(limit);
        if let Some(refused) = refused() {
            return Err(Interrupted::Refused(refused));
        }
        match result {
            Ok(value) => return Ok(value),
            Err(error) if !again(&error) || Instant::now() >= deadline => {
                return Err(Interrupted::Failed(error))
            }
            Err(_) => {
                // A call that gave up before its limit must not turn this
                // into a busy loop.
                std::thread::sleep(limit.saturating_sub(started.elapsed()));
                slice = slice.saturating_mul(2);
            }
        }
    }
}

/// A consumer without a group (polling it serves the error callback, where
/// a refused login shows; an admin client's never does) created from
/// `config`, and the cluster's metadata through it, waited for up to
/// `timeout` in [`in_slices`]. `config` must hold no producer-only keys
/// (see [`crate::sink::transactional::client_config`]).
pub fn watched_metadata(
    config: &ClientConfig,
    timeout: Duration,
) -> Result<(BaseConsumer<LoginWatch>, Metadata), Interrupted<KafkaError>> {
    let client: BaseConsumer<LoginWatch> = config
        .create_with_context(LoginWatch::for_config(config))
        .map_err(Interrupted::Failed)?;
    let metadata = in_slices(
        timeout,
        |limit| client.fetch_metadata(None, limit),
        is_wait_for_broker,
        || {
            while client.poll(Duration::ZERO).is_some() {}
            client.context().refused()
        },
    )?;
    Ok((client, metadata))
}

/// Whether a metadata request failed only because no broker answered in
/// time (worth another slice of [`in_slices`]).
pub fn is_wait_for_broker(error: &KafkaError) -> bool {
    matches!(
        error.rdkafka_error_code(),
        Some(
            RDKafkaErrorCode::BrokerTransportFailure
                | RDKafkaErrorCode::OperationTimedOut
                | RDKafkaErrorCode::RequestTimedOut
                | RDKafkaErrorCode::AllBrokersDown
        )
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_logins_are_told_from_other_client_errors() {
        let refused = KafkaError::Global(RDKafkaErrorCode::Authentication);
        assert!(LoginRefused::from_client_error(&refused, "SASL SCRAM-SHA-256 failed").is_some());
        let sasl = KafkaError::Global(RDKafkaErrorCode::SaslAuthenticationFailed);
        assert!(LoginRefused::from_client_error(&sasl, "x").is_some());
        let down = KafkaError::Global(RDKafkaErrorCode::AllBrokersDown);
        assert!(LoginRefused::from_client_error(&down, "x").is_none());

        let watch = LoginWatch::default();
        watch.error(down, "1/1 brokers are down");
        assert!(watch.refused().is_none());
        watch.error(refused, "first");
        watch.error(sasl, "second");
        assert_eq!(watch.refused().map(|r| r.reason).as_deref(), Some("first"));
    }

    #[test]
    fn slices_grow_and_stop_at_a_refusal() {
        let limits = std::cell::RefCell::new(Vec::new());
        let timed_out = KafkaError::MetadataFetch(RDKafkaErrorCode::OperationTimedOut);
        let result: Result<(), _> = in_slices(
            Duration::from_secs(60),
            |limit| {
                limits.borrow_mut().push(limit);
                std::thread::sleep(limit);
                Err(timed_out.clone())
            },
            is_wait_for_broker,
            || {
                (limits.borrow().len() == 3).then(|| LoginRefused {
                    reason: "refused".into(),
                })
            },
        );
        assert!(matches!(result, Err(Interrupted::Refused(_))));
        assert_eq!(
            limits.into_inner(),
            [250, 500, 1000].map(Duration::from_millis),
            "doubling slices, none after the refusal"
        );

        let mut calls = 0;
        let invalid = KafkaError::MetadataFetch(RDKafkaErrorCode::InvalidArgument);
        let result: Result<(), _> = in_slices(
            Duration::from_secs(60),
            |_| {
                calls += 1;
                Err(invalid.clone())
            },
            is_wait_for_broker,
            || None,
        );
        assert!(matches!(result, Err(Interrupted::Failed(_))));
        assert_eq!(calls, 1, "an error other than waiting is not retried");
    }
}
