//! The `process_*` metrics every Prometheus client library exports, under
//! their standard names (<https://prometheus.io/docs/instrumenting/writing_clientlibs/#process-metrics>):
//! CPU seconds, resident and virtual memory, open and maximum file
//! descriptors, start time. Read from `/proc/self` with the `procfs` crate
//! at each scrape, as the `prometheus` crate's process collector does
//! (prometheus-client, our registry, has none).
//!
//! They describe the process, not one connector: in a process that runs
//! several pipelines (the tests) every registry shows the same values.
//! Elsewhere than on Linux the collector exports nothing.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;

use super::names;

/// The collector registered in every [`super::Metrics`]' registry.
#[derive(Debug, Default)]
pub(super) struct ProcessCollector;

/// One reading of `/proc/self`.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct ProcessStats {
    pub cpu_seconds: f64,
    pub resident_memory_bytes: u64,
    pub virtual_memory_bytes: u64,
    pub open_fds: u64,
    /// `None` when unlimited.
    pub max_fds: Option<u64>,
    /// Unix seconds.
    pub start_time_seconds: f64,
}

impl ProcessStats {
    /// Reads `/proc/self`; `None` where it cannot be read.
    #[cfg(target_os = "linux")]
    pub fn read() -> Option<Self> {
        use procfs::process::{LimitValue, Process};
        let me = Process::myself().ok()?;
        let stat = me.stat().ok()?;
        let ticks = procfs::ticks_per_second() as f64;
        let boot = procfs::boot_time_secs().ok()?;
        Some(ProcessStats {
            cpu_seconds: (stat.utime + stat.stime) as f64 / ticks,
            resident_memory_bytes: stat.rss.saturating_mul(procfs::page_size()),
            virtual_memory_bytes: stat.vsize,
            open_fds: me.fd_count().ok()? as u64,
            max_fds: match me.limits().ok()?.max_open_files.soft_limit {
                LimitValue::Value(n) => Some(n),
                LimitValue::Unlimited => None,
            },
            start_time_seconds: boot as f64 + stat.starttime as f64 / ticks,
        })
    }

    /// Not read elsewhere than on Linux.
    #[cfg(not(target_os = "linux"))]
    pub fn read() -> Option<Self> {
        None
    }
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        use prometheus_client::metrics::MetricType::{Counter, Gauge};
        let Some(p) = ProcessStats::read() else {
            return Ok(());
        };
        // The encoder appends a counter's `_total` (see exposition.rs).
        let cpu = names::PROCESS_CPU_SECONDS.strip_suffix("_total");
        debug_assert!(cpu.is_some(), "a counter's name ends in _total");
        encoder
            .encode_descriptor(
                cpu.unwrap_or(names::PROCESS_CPU_SECONDS),
                "Total user and system CPU time spent in seconds",
                None,
                Counter,
            )?
            .encode_counter::<prometheus_client::encoding::NoLabelSet, f64, f64>(
                &p.cpu_seconds,
                None,
            )?;
        let gauges: [(&str, &str, f64); 4] = [
            (
                names::PROCESS_RESIDENT_MEMORY,
                "Resident memory size in bytes",
                p.resident_memory_bytes as f64,
            ),
            (
                names::PROCESS_VIRTUAL_MEMORY,
                "Virtual memory size in bytes",
                p.virtual_memory_bytes as f64,
            ),
            (
                names::PROCESS_OPEN_FDS,
                "Number of open file descriptors",
                p.open_fds as f64,
            ),
            (
                names::PROCESS_START_TIME,
                "Start time of the process since unix epoch in seconds",
                p.start_time_seconds,
            ),
        ];
        for (name, help, value) in gauges {
            encoder
                .encode_descriptor(name, help, None, Gauge)?
                .encode_gauge(&value)?;
        }
        if let Some(max) = p.max_fds {
            encoder
                .encode_descriptor(
                    names::PROCESS_MAX_FDS,
                    "Maximum number of open file descriptors",
                    None,
                    Gauge,
                )?
                .encode_gauge(&(max as f64))?;
        }
        Ok(())
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn a_scrape_lists_the_process_under_the_standard_names() {
        let page = super::super::Metrics::new().render(true);
        for (name, kind) in [
            (names::PROCESS_CPU_SECONDS, "counter"),
            (names::PROCESS_RESIDENT_MEMORY, "gauge"),
            (names::PROCESS_VIRTUAL_MEMORY, "gauge"),
            (names::PROCESS_OPEN_FDS, "gauge"),
            (names::PROCESS_START_TIME, "gauge"),
        ] {
            assert!(
                page.contains(&format!("# TYPE {name} {kind}\n")),
                "{name} {kind} in\n{page}"
            );
            assert!(
                page.lines().any(|l| l.starts_with(&format!("{name} "))),
                "a sample of {name}"
            );
        }
    }

    #[test]
    fn reads_this_process() {
        let p = ProcessStats::read().expect("/proc/self is readable");
        assert!(p.resident_memory_bytes > 0);
        assert!(p.virtual_memory_bytes >= p.resident_memory_bytes);
        assert!(p.open_fds >= 3, "stdin, stdout, stderr at least");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            .as_secs_f64();
        assert!(
            p.start_time_seconds <= now + 1.0 && p.start_time_seconds > now - 86_400.0,
            "started within the last day: {} vs {now}",
            p.start_time_seconds
        );
    }
}
