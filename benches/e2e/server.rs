//! The walsender's CPU: what the server spends decoding a slot for a reader.
//! A thread scans `/proc` every 20 ms for `postgres: walsender` processes
//! and keeps each one's last utime + stime; the sum over the processes it
//! saw is the server's CPU for the reader that ran meanwhile (the CPU a
//! walsender spends in the last ≤ 20 ms before it exits is missed). Only
//! with local services (`/proc` shows the server's processes).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

pub struct WalsenderCpu {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<HashMap<u32, f64>>,
}

impl WalsenderCpu {
    /// Starts watching; every walsender that exists now or appears later counts
    /// from its start (so start it before the reader, with no other reader).
    pub fn watch() -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let mut seen = HashMap::new();
            loop {
                for (pid, cpu) in walsenders() {
                    seen.insert(pid, cpu);
                }
                if flag.load(Ordering::Relaxed) {
                    return seen;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        WalsenderCpu { stop, thread }
    }

    /// CPU seconds of the walsenders seen, or `None` when none was.
    pub fn stop(self) -> Option<f64> {
        self.stop.store(true, Ordering::Relaxed);
        let seen = self.thread.join().unwrap_or_default();
        (!seen.is_empty()).then(|| seen.values().sum())
    }
}

/// (pid, CPU seconds) of every `postgres: walsender` process.
fn walsenders() -> Vec<(u32, f64)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.starts_with(b"postgres: walsender"))
        })
        .filter_map(|pid| Some((pid, super::proc_usage(pid)?.0)))
        .collect()
}
