//! Metrics of streamed in-progress transactions (`--stream-in-progress`,
//! [`crate::pipeline`]'s spool): how many ended and how, and what the spool
//! holds. Recording is a relaxed atomic add or store, as everywhere in
//! [`super`]; the spool updates its gauges once per message it takes in,
//! never per byte.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use super::exposition::U64Gauge;
use super::names;

impl super::Metrics {
    /// The streamed-transaction series.
    pub fn streamed(&self) -> &StreamedMetrics {
        &self.exposition.streamed
    }
}

/// A label set of one fixed pair (`outcome`, `medium`).
type Label = [(&'static str, &'static str); 1];

/// The streamed-transaction series of one [`super::Metrics`].
#[derive(Debug, Default)]
pub struct StreamedMetrics {
    transactions: Family<Label, Counter>,
    subtransaction_aborts: Counter,
    spool: Family<Label, U64Gauge>,
}

impl StreamedMetrics {
    /// A streamed transaction committed (its changes go to Kafka now).
    pub fn committed(&self) {
        self.transactions
            .get_or_create(&[("outcome", "committed")])
            .inc();
    }

    /// A streamed transaction aborted (its spooled changes are dropped).
    pub fn aborted(&self) {
        self.transactions
            .get_or_create(&[("outcome", "aborted")])
            .inc();
    }

    /// A subtransaction of a streamed transaction was rolled back.
    pub fn subtransaction_aborted(&self) {
        self.subtransaction_aborts.inc();
    }

    /// What the spool holds now, in memory and on disk.
    pub fn spooled(&self, memory: u64, disk: u64) {
        self.spool
            .get_or_create(&[("medium", "memory")])
            .set(memory);
        self.spool.get_or_create(&[("medium", "disk")]).set(disk);
    }

    /// Registers the series (from [`super::exposition::Exposition::new`]),
    /// each label value present from the start so a scrape shows zeros.
    pub(super) fn register(&self, r: &mut Registry) {
        for outcome in ["committed", "aborted"] {
            let _ = self.transactions.get_or_create(&[("outcome", outcome)]);
        }
        self.spooled(0, 0);
        let counter_base = |name: &'static str| name.strip_suffix("_total").unwrap_or(name);
        r.register(
            counter_base(names::STREAMED_TRANSACTIONS),
            "Streamed in-progress transactions that ended, by outcome (committed, aborted)",
            self.transactions.clone(),
        );
        r.register(
            counter_base(names::STREAMED_SUBTRANSACTION_ABORTS),
            "Subtransactions of streamed transactions rolled back",
            self.subtransaction_aborts.clone(),
        );
        r.register(
            names::SPOOL_BYTES,
            "Bytes of open streamed transactions held by the spool, by medium (memory, disk)",
            self.spool.clone(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::super::Metrics;

    #[test]
    fn a_scrape_shows_the_streamed_series_with_their_labels() {
        let metrics = Metrics::new();
        let page = metrics.render(true);
        for line in [
            "pgcdc_streamed_transactions_total{outcome=\"committed\"} 0",
            "pgcdc_streamed_transactions_total{outcome=\"aborted\"} 0",
            "pgcdc_streamed_subtransaction_aborts_total 0",
            "pgcdc_spool_bytes{medium=\"memory\"} 0",
            "pgcdc_spool_bytes{medium=\"disk\"} 0",
        ] {
            assert!(page.lines().any(|l| l == line), "{line} in\n{page}");
        }
        let streamed = metrics.streamed();
        streamed.committed();
        streamed.committed();
        streamed.aborted();
        streamed.subtransaction_aborted();
        streamed.spooled(1024, 4096);
        let page = metrics.render(true);
        for line in [
            "pgcdc_streamed_transactions_total{outcome=\"committed\"} 2",
            "pgcdc_streamed_transactions_total{outcome=\"aborted\"} 1",
            "pgcdc_streamed_subtransaction_aborts_total 1",
            "pgcdc_spool_bytes{medium=\"memory\"} 1024",
            "pgcdc_spool_bytes{medium=\"disk\"} 4096",
        ] {
            assert!(page.lines().any(|l| l == line), "{line} in\n{page}");
        }
        assert!(
            page.contains("# TYPE pgcdc_streamed_transactions_total counter"),
            "{page}"
        );
    }
}
