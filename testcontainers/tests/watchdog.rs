//! No leaked processes: services die with the process that started them, even
//! when it is killed with SIGKILL.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn gone_within(pid: &str, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if !Path::new("/proc").join(pid).exists() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

#[test]
fn services_die_with_a_killed_owner() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_pgcdc-services"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn pgcdc-services");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = Vec::new();
    for line in BufReader::new(stdout).lines() {
        let line = line.expect("read line");
        if line == "READY" {
            break;
        }
        lines.push(line);
    }
    let value = |key: &str| {
        lines
            .iter()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
            .unwrap_or_else(|| panic!("no {key} in {lines:?}"))
            .to_owned()
    };
    let (pg_pid, kafka_pid) = (value("PG_PID"), value("KAFKA_PID"));
    assert!(Path::new("/proc").join(&pg_pid).exists());
    let work_dirs: Vec<std::path::PathBuf> = std::fs::read_dir(pgcdc_testcontainers::work_root())
        .expect("work root")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().contains(&format!("/{}-", child.id())))
        .collect();
    assert_eq!(work_dirs.len(), 2, "{work_dirs:?}");

    child.kill().expect("SIGKILL pgcdc-services");
    child.wait().expect("reap");

    assert!(
        gone_within(&pg_pid, Duration::from_secs(10)),
        "postgres {pg_pid} outlived its owner"
    );
    assert!(
        gone_within(&kafka_pid, Duration::from_secs(10)),
        "kafka {kafka_pid} outlived its owner"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while work_dirs.iter().any(|d| d.exists()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        work_dirs.iter().all(|d| !d.exists()),
        "work dirs left: {work_dirs:?}"
    );
}
