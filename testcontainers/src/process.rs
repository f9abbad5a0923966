//! Running a service process so that it can never outlive the test process.
//!
//! Each service runs as the child of a tiny `bash` watchdog ([`WATCHDOG`]). The
//! watchdog's stdin is a pipe whose write end only we hold (std opens pipes
//! with `O_CLOEXEC`, so no other child inherits it). The watchdog:
//!
//! * prints the service's pid on its stdout, once;
//! * for every line `SIG` read from stdin sends that signal to the service
//!   (this is how [`Watched::stop`] stops it);
//! * on end of stdin, that is when our process died in any way, including
//!   `kill -9`, sends the service its stop signal, escalates to `SIGKILL` after
//!   the grace period, then removes the service's work dir;
//! * exits with the service's status when the service exits, so
//!   [`Watched::try_status`] tells whether the service still runs.
//!
//! The watchdog runs in its own process group, so a Ctrl-C at the terminal
//! reaches only the test process, whose death then stops everything cleanly.
//!
//! Work dirs live under [`work_root`] and are named `{owner pid}-{n}-{service}`;
//! creating one removes those whose owner is gone (left behind if the owner
//! died while its service was stopped).

use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::{Error, Result};

/// The watchdog; arguments: log, stop signal, grace seconds, work dir, command...
const WATCHDOG: &str = r#"
log=$1 stopsig=$2 grace=$3 dir=$4; shift 4
"$@" </dev/null >>"$log" 2>&1 &
svc=$!
echo "$svc"
exec 1>&2
(
  while read -r sig; do kill -s "$sig" "$svc" 2>/dev/null; done
  : >"$dir/.owner-gone"
  kill -s "$stopsig" "$svc" 2>/dev/null
  n=0
  while kill -0 "$svc" 2>/dev/null; do
    n=$((n + 1))
    [ "$n" -ge $((grace * 10)) ] && kill -s KILL "$svc" 2>/dev/null
    sleep 0.1
  done
) <&0 &
reader=$!
wait "$svc"; rc=$?
if [ -e "$dir/.owner-gone" ]; then
  wait "$reader"
  rm -rf -- "$dir"
else
  kill "$reader" 2>/dev/null
fi
exit "$rc"
"#;

/// How to (re)start one service process.
#[derive(Debug, Clone)]
pub(crate) struct Launch {
    pub service: &'static str,
    pub program: PathBuf,
    pub args: Vec<OsString>,
    /// The service's stdout and stderr go here.
    pub log: PathBuf,
    /// Current dir of the service; removed when the owner dies.
    pub work_dir: PathBuf,
    /// Signal sent when the owner dies, before `SIGKILL` after `grace`.
    pub stop_signal: &'static str,
    pub grace: Duration,
}

/// A running watchdog and its service.
#[derive(Debug)]
pub(crate) struct Watched {
    service: &'static str,
    child: Child,
    stdin: Option<ChildStdin>,
    pid: u32,
    log: PathBuf,
    grace: Duration,
}

impl Watched {
    pub fn spawn(launch: &Launch) -> Result<Self> {
        let log_file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&launch.log)
            .map_err(Error::io(format!("open log {}", launch.log.display())))?;
        let mut child = Command::new("bash")
            .arg("-c")
            .arg(WATCHDOG)
            .arg(format!("{}-watchdog", launch.service))
            .arg(&launch.log)
            .arg(launch.stop_signal)
            .arg(launch.grace.as_secs().max(1).to_string())
            .arg(&launch.work_dir)
            .arg(&launch.program)
            .args(&launch.args)
            .current_dir(&launch.work_dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log_file)
            .process_group(0)
            .spawn()
            .map_err(Error::io(format!(
                "start bash as the {} watchdog",
                launch.service
            )))?;
        let mut line = String::new();
        if let Some(out) = child.stdout.take() {
            BufReader::new(out)
                .read_line(&mut line)
                .map_err(Error::io("read the service pid from its watchdog"))?;
        }
        let stdin = child.stdin.take();
        let mut watched = Self {
            service: launch.service,
            child,
            stdin,
            pid: 0,
            log: launch.log.clone(),
            grace: launch.grace,
        };
        watched.pid = match line.trim().parse() {
            Ok(pid) => pid,
            Err(_) => return Err(watched.exited_error()),
        };
        Ok(watched)
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The exit status if the service (hence its watchdog) has exited.
    pub fn try_status(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(Some(status)) => Some(status.to_string()),
            Ok(None) => None,
            Err(e) => Some(format!("unknown: {e}")),
        }
    }

    /// `Err(Exited)` once the service has exited.
    pub fn check_alive(&mut self) -> Result<()> {
        match self.try_status() {
            None => Ok(()),
            Some(_) => Err(self.exited_error()),
        }
    }

    fn exited_error(&mut self) -> Error {
        Error::Exited {
            service: self.service,
            status: self.try_status().unwrap_or_else(|| "running".into()),
            log: self.log.clone(),
            tail: log_tail(&self.log),
        }
    }

    fn signal(&mut self, signal: &str) {
        if let Some(stdin) = self.stdin.as_mut() {
            // A failed write means the watchdog is gone, which `wait` will see.
            let _ = writeln!(stdin, "{signal}").and_then(|()| stdin.flush());
        }
    }

    /// Sends `signal`, waits up to `timeout` for the exit, then `SIGKILL`s.
    pub fn stop(&mut self, signal: &str, timeout: Duration) -> Result<()> {
        self.signal(signal);
        if self.wait(timeout) {
            return Ok(());
        }
        self.signal("KILL");
        if self.wait(Duration::from_secs(10)) {
            return Ok(());
        }
        Err(Error::Io {
            action: format!("stop {} (pid {}) even with SIGKILL", self.service, self.pid),
            source: std::io::Error::from(std::io::ErrorKind::TimedOut),
        })
    }

    fn wait(&mut self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if self.try_status().is_some() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }
}

impl Drop for Watched {
    /// Closing stdin makes the watchdog stop the service and remove its work
    /// dir; wait for that so a dropped service is really gone.
    fn drop(&mut self) {
        self.stdin = None;
        let grace = self.grace + Duration::from_secs(2);
        if !self.wait(grace) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A restartable local service: its launch recipe and the running process.
#[derive(Debug)]
pub(crate) struct Local {
    pub launch: Launch,
    running: Mutex<Option<Watched>>,
}

impl Local {
    pub fn new(launch: Launch) -> Self {
        Self {
            launch,
            running: Mutex::new(None),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Watched>> {
        // A panic while holding the lock cannot leave the Option inconsistent.
        self.running.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Spawns the service unless it runs; then polls `probe` until it returns
    /// `Ok`, the service exits, or `timeout` passes.
    pub fn start(
        &self,
        timeout: Duration,
        probe: impl FnMut() -> Result<(), String>,
    ) -> Result<()> {
        {
            let mut running = self.lock();
            if let Some(w) = running.as_mut() {
                if w.try_status().is_none() {
                    return Ok(());
                }
            }
            *running = Some(Watched::spawn(&self.launch)?);
        }
        let alive = || match self.lock().as_mut() {
            Some(w) => w.check_alive(),
            None => Ok(()),
        };
        let log = &self.launch.log;
        let result = poll_ready(self.launch.service, timeout, probe, alive, log, || {
            log_tail(log)
        });
        result.map_err(|mut e| {
            // The work dir goes when the service is dropped: keep the log
            // beside it (swept with the work dirs once we are gone).
            if let Error::Exited { log, .. } | Error::NotReady { log, .. } = &mut e {
                let kept = self.launch.work_dir.with_extension("log");
                if fs::copy(&*log, &kept).is_ok() {
                    *log = kept;
                }
            }
            e
        })
    }

    /// Stops the service with `signal` (no-op when not running).
    pub fn stop(&self, signal: &str, timeout: Duration) -> Result<()> {
        match self.lock().take() {
            Some(mut w) => {
                let result = w.stop(signal, timeout);
                // Dropping an exited watchdog returns at once.
                drop(w);
                result
            }
            None => Ok(()),
        }
    }

    pub fn pid(&self) -> Option<u32> {
        let mut running = self.lock();
        let w = running.as_mut()?;
        w.try_status().is_none().then_some(w.pid())
    }
}

/// Polls `probe` every 100 ms until it passes, `alive` fails, or `timeout`.
pub(crate) fn poll_ready(
    service: &'static str,
    timeout: Duration,
    mut probe: impl FnMut() -> Result<(), String>,
    mut alive: impl FnMut() -> Result<()>,
    log: &Path,
    tail: impl Fn() -> String,
) -> Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        let last = match probe() {
            Ok(()) => return Ok(()),
            Err(last) => last,
        };
        alive()?;
        if Instant::now() >= deadline {
            return Err(Error::NotReady {
                service,
                timeout,
                last,
                log: log.to_path_buf(),
                tail: tail(),
            });
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

impl Drop for Local {
    /// Stops the service (through its watchdog, which removes the work dir
    /// when it ran), then removes the work dir of a stopped or exited one.
    fn drop(&mut self) {
        drop(self.lock().take());
        let _ = fs::remove_dir_all(&self.launch.work_dir);
    }
}

/// A free TCP port on 127.0.0.1, never the same one twice in this process.
/// Whether this process runs as root (then servers that refuse root, like
/// PostgreSQL, run as their own user).
pub(crate) fn is_root() -> Result<bool> {
    use std::os::unix::fs::MetadataExt;
    let me = fs::metadata("/proc/self").map_err(Error::io("stat /proc/self"))?;
    Ok(me.uid() == 0)
}

pub(crate) fn free_port() -> Result<u16> {
    static HANDED_OUT: Mutex<Vec<u16>> = Mutex::new(Vec::new());
    let mut handed_out = HANDED_OUT.lock().unwrap_or_else(|e| e.into_inner());
    for _ in 0..50 {
        let port = TcpListener::bind(("127.0.0.1", 0))
            .and_then(|l| l.local_addr())
            .map_err(Error::io("bind a free port on 127.0.0.1"))?
            .port();
        if !handed_out.contains(&port) {
            handed_out.push(port);
            return Ok(port);
        }
    }
    Err(Error::Io {
        action: "find an unused free port on 127.0.0.1".into(),
        source: std::io::Error::from(std::io::ErrorKind::AddrInUse),
    })
}

/// The dir holding every service's work dir: `$PGCDC_SERVICES_TMP`, else
/// `$TMPDIR/pgcdc-services-{uid}` (per user, as each user's sweep must be
/// able to remove what it finds).
pub fn work_root() -> PathBuf {
    use std::os::unix::fs::MetadataExt;
    std::env::var_os("PGCDC_SERVICES_TMP")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let uid = fs::metadata("/proc/self").map(|m| m.uid()).unwrap_or(0);
            std::env::temp_dir().join(format!("pgcdc-services-{uid}"))
        })
}

/// Calls `prepare` with a fresh work dir for `service` (after sweeping those of
/// dead owners); removes the dir again if `prepare` fails.
pub(crate) fn with_work_dir<T>(
    service: &str,
    prepare: impl FnOnce(&Path) -> Result<T>,
) -> Result<T> {
    let dir = work_dir(service)?;
    let result = prepare(&dir);
    if result.is_err() {
        let _ = fs::remove_dir_all(&dir);
    }
    result
}

fn work_dir(service: &str) -> Result<PathBuf> {
    static N: AtomicU64 = AtomicU64::new(0);
    let root = work_root();
    fs::create_dir_all(&root).map_err(Error::io(format!("create dir {}", root.display())))?;
    sweep(&root);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let dir = root.join(format!("{}-{n}-{service}", std::process::id()));
    if dir.exists() {
        fs::remove_dir_all(&dir).map_err(Error::io(format!("clear {}", dir.display())))?;
    }
    fs::create_dir(&dir).map_err(Error::io(format!("create dir {}", dir.display())))?;
    Ok(dir)
}

fn sweep(root: &Path) {
    let Ok(entries) = fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let owner = name
            .to_str()
            .and_then(|n| n.split('-').next()?.parse::<u32>().ok());
        if let Some(owner) = owner {
            if !Path::new("/proc").join(owner.to_string()).exists() {
                // Best effort: another user's dir may not be ours to remove.
                let path = entry.path();
                let _ = match path.is_dir() {
                    true => fs::remove_dir_all(path),
                    false => fs::remove_file(path),
                };
            }
        }
    }
}

/// The last 40 lines (at most 8 KiB) of a log file, or why it can't be read.
pub(crate) fn log_tail(path: &Path) -> String {
    let read = || -> std::io::Result<String> {
        let mut f = File::open(path)?;
        let len = f.metadata()?.len();
        f.seek(SeekFrom::Start(len.saturating_sub(8192)))?;
        let mut buf = Vec::new();
        f.read_to_end(&mut buf)?;
        let text = String::from_utf8_lossy(&buf).into_owned();
        let lines: Vec<&str> = text.lines().collect();
        Ok(lines[lines.len().saturating_sub(40)..].join("\n"))
    };
    read().unwrap_or_else(|e| format!("(log unreadable: {e})"))
}

/// Runs a helper command to completion; a failure carries its output's tail.
pub(crate) fn run(command: &mut Command, hint: &str) -> Result<String> {
    let shown = format!("{command:?}").replace('"', "");
    let output = command.stdin(Stdio::null()).output().map_err(|source| {
        if source.kind() == std::io::ErrorKind::NotFound {
            Error::MissingTool {
                program: command.get_program().to_string_lossy().into_owned(),
                hint: hint.to_owned(),
            }
        } else {
            Error::io(format!("run {shown}"))(source)
        }
    })?;
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    if output.status.success() {
        return Ok(text);
    }
    let lines: Vec<&str> = text.lines().collect();
    Err(Error::Command {
        command: shown,
        status: output.status.to_string(),
        output: lines[lines.len().saturating_sub(40)..].join("\n"),
        hint: hint.to_owned(),
    })
}

/// Runs `fut` to completion on a private runtime in a scoped thread, so it
/// works both from plain threads and from inside another tokio runtime.
pub(crate) fn block_on<F>(fut: F) -> Result<F::Output>
where
    F: std::future::Future + Send,
    F::Output: Send,
{
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map(|rt| rt.block_on(fut))
                    .map_err(Error::io("build a tokio runtime"))
            })
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}
