//! Debezium for the tests that run it beside pgcdc-kafka (the
//! differential test, the takeover test): the Java runtime and the
//! runners' classpath, fetched and compiled by
//! `tests/debezium/fetch-debezium.sh` when the cache lacks them.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The runners' classpath, fetching Debezium and compiling the runners
/// first when the cache lacks them; once per test process, so that tests
/// running at once do not replace each other's compiled runners.
pub fn classpath() -> String {
    static CLASSPATH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    CLASSPATH.get_or_init(fetch).clone()
}

fn fetch() -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/debezium/fetch-debezium.sh");
    let out = Command::new("bash")
        .arg(&script)
        .stderr(Stdio::inherit())
        .output()
        .expect("bash runs");
    assert!(
        out.status.success(),
        "{} failed ({}); it needs mvn and a JDK 17+ javac",
        script.display(),
        out.status
    );
    String::from_utf8(out.stdout)
        .expect("UTF-8 classpath")
        .lines()
        .last()
        .expect("the classpath on the last line")
        .to_owned()
}

/// The first Java 21 or newer among `$PGCDC_JAVA_HOME`, `$JAVA_HOME`, the
/// `java` on `PATH` and `/usr/lib/jvm/*`. Debezium 3.6 runs on 17, but its
/// bytes depend on the JVM: Java 19 made `Float.toString` print the
/// shortest digits (JDK-4511638), so a `float4` reads `-1.1754944E-38` on
/// 21 and `-1.17549435E-38` on 17. The reference is Debezium as its own
/// images run it, on Java 21; the registry needs 21 already.
pub fn java() -> PathBuf {
    let var = |name| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let on_path = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("java"))
            .find(|java| java.is_file())
            .and_then(|java| std::fs::canonicalize(java).ok())
            .and_then(|java| Some(java.parent()?.parent()?.to_path_buf()))
    });
    let mut jvms: Vec<PathBuf> = std::fs::read_dir("/usr/lib/jvm")
        .map(|dir| dir.filter_map(|e| Some(e.ok()?.path())).collect())
        .unwrap_or_default();
    jvms.sort();
    let homes: Vec<PathBuf> = [var("PGCDC_JAVA_HOME"), var("JAVA_HOME"), on_path]
        .into_iter()
        .flatten()
        .chain(jvms)
        .collect();
    homes
        .iter()
        .find(|home| home.join("bin/java").is_file() && java_major(home).is_some_and(|v| v >= 21))
        .map(|home| home.join("bin/java"))
        .unwrap_or_else(|| {
            panic!(
                "no Java 21 or newer for Debezium's runner among {homes:?}; \
                 set PGCDC_JAVA_HOME to one (see README, Tests)"
            )
        })
}

/// The major version in a JDK's `release` file.
fn java_major(home: &Path) -> Option<u32> {
    let release = std::fs::read_to_string(home.join("release")).ok()?;
    let version = release
        .lines()
        .find_map(|l| l.strip_prefix("JAVA_VERSION="))?
        .trim_matches('"');
    version.split(['.', '+', '-']).next()?.parse().ok()
}
