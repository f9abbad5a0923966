//! Records the git commit the binary is built from, for `--version`, the
//! start-up log line and the `pgcdc_build_info` metric.
//!
//! `PGCDC_GIT_COMMIT` wins when set (a Docker build has no `.git`: pass it as
//! a build argument); otherwise `git rev-parse`, and "unknown" when neither
//! answers (a source tarball), so the build never depends on git.

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let output = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(output.stdout).ok()?;
    let text = text.trim();
    (output.status.success() && !text.is_empty()).then(|| text.to_owned())
}

fn main() {
    println!("cargo:rerun-if-env-changed=PGCDC_GIT_COMMIT");
    let commit = std::env::var("PGCDC_GIT_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .or_else(|| git(&["rev-parse", "--short=12", "HEAD"]))
        .unwrap_or_else(|| "unknown".to_owned());
    // Rerun when HEAD moves: HEAD itself, and the branch it points to.
    // Only existing files are named, since a missing one reruns every build.
    for path in [
        git(&["rev-parse", "--git-path", "HEAD"]),
        git(&["symbolic-ref", "-q", "HEAD"]).and_then(|r| git(&["rev-parse", "--git-path", &r])),
    ]
    .into_iter()
    .flatten()
    {
        if Path::new(&path).exists() {
            println!("cargo:rerun-if-changed={path}");
        }
    }
    println!("cargo:rustc-env=PGCDC_GIT_COMMIT={commit}");
}
