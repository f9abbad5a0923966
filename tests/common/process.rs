//! The connector binary as a child process, for the tests that kill it
//! (`kill -9`, SIGTERM) and restart it, with its log in a temp dir.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use pgcdc_testcontainers::unique_name;

use super::{wait_for, wait_until, Scenario, TIMEOUT};

const BIN: &str = env!("CARGO_BIN_EXE_pgcdc-kafka");

/// One `pgcdc-kafka run` process, stderr to `log`. Killed (by pid) on drop
/// if still running, so a failing test leaves nothing behind.
pub struct ConnectorProcess {
    child: Mutex<Child>,
    pid: u32,
    log: PathBuf,
    pub started: Instant,
}

impl ConnectorProcess {
    pub fn spawn(args: &[String], log: PathBuf) -> Self {
        Self::spawn_with_env(args, log, &[])
    }

    /// [`Self::spawn`], with `env` set for the process (e.g. a fault hook).
    pub fn spawn_with_env(args: &[String], log: PathBuf, env: &[(&str, String)]) -> Self {
        let stderr = File::create(&log).expect("create connector log");
        let child = Command::new(BIN)
            .arg("run")
            .args(args)
            .env("PGCDC_LOG", "info")
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("connector binary starts");
        ConnectorProcess {
            pid: child.id(),
            child: Mutex::new(child),
            log,
            started: Instant::now(),
        }
    }

    fn child(&self) -> std::sync::MutexGuard<'_, Child> {
        self.child.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The exit status if the process has ended.
    pub fn exited(&self) -> Option<ExitStatus> {
        self.child().try_wait().expect("try_wait")
    }

    pub fn log_text(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Panics, with the log, if the process has ended by itself.
    pub fn assert_running(&self, when: &str) {
        if let Some(status) = self.exited() {
            panic!(
                "the connector (pid {}) exited by itself ({status}) {when}; its log {}:\n{}",
                self.pid,
                self.log.display(),
                self.log_text()
            );
        }
    }

    fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.pid.to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill {signal} {} failed", self.pid);
    }

    /// `kill -9`, then reaps the process.
    pub fn kill_9(&self) -> ExitStatus {
        self.signal("-9");
        self.child().wait().expect("wait for the killed connector")
    }

    /// Waits up to `timeout` for the process to exit by itself.
    pub async fn wait_exit(&self, timeout: Duration) -> ExitStatus {
        wait_for(timeout, "the connector to exit", || async {
            self.exited()
                .ok_or_else(|| format!("still running; its log:\n{}", self.log_text()))
        })
        .await
    }

    /// Waits until this process streams under whatever load is running: the
    /// slot of `s` is confirmed past the WAL position of now. Panics, with
    /// the log, if the process exits meanwhile.
    pub async fn await_streaming(&self, s: &Scenario) {
        let now = s.current_lsn();
        wait_until(
            TIMEOUT,
            "the connector to stream (slot confirmed past now)",
            || async {
                self.assert_running("while waiting for it to stream");
                s.confirmed_flush_lsn().is_some_and(|c| c > now)
            },
        )
        .await;
    }

    /// SIGTERM, then waits up to `timeout` for the exit.
    pub async fn terminate(&self, timeout: Duration) -> ExitStatus {
        self.signal("-TERM");
        self.wait_exit(timeout).await
    }

    /// SIGTERM; asserts a clean exit (code 0) within `timeout`.
    pub async fn terminate_cleanly(&self, timeout: Duration) {
        let status = self.terminate(timeout).await;
        assert_eq!(
            status.code(),
            Some(0),
            "graceful exit on SIGTERM; log:\n{}",
            self.log_text()
        );
    }
}

impl Drop for ConnectorProcess {
    fn drop(&mut self) {
        if self.exited().is_none() {
            let _ = Command::new("kill")
                .args(["-9", &self.pid.to_string()])
                .status();
            let _ = self.child().wait();
        }
    }
}

/// A temp dir for the connector logs; removed when the test passes.
pub struct LogDir(PathBuf);

impl LogDir {
    pub fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(unique_name(name));
        fs::create_dir_all(&dir).expect("create log dir");
        LogDir(dir)
    }

    pub fn path(&self, instance: usize) -> PathBuf {
        self.0.join(format!("connector-{instance:02}.log"))
    }

    pub fn dir(&self) -> &Path {
        &self.0
    }
}

impl Drop for LogDir {
    fn drop(&mut self) {
        // PGCDC_KEEP_LOGS keeps them after a passing test too, to study one.
        if !std::thread::panicking() && std::env::var_os("PGCDC_KEEP_LOGS").is_none() {
            let _ = fs::remove_dir_all(&self.0);
        }
    }
}

/// Runs `pgcdc-kafka <args>` to completion: exit code, stdout and stderr.
pub async fn run_binary(args: Vec<String>) -> (Option<i32>, String, String) {
    let output = tokio::task::spawn_blocking(move || {
        Command::new(BIN)
            .args(&args)
            .env_remove("PGCDC_LOG_FORMAT")
            .output()
            .expect("binary runs")
    })
    .await
    .expect("join");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}
