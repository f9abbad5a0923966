//! `pgcdc-kafka config show`: the configuration `run` would use with the
//! same flags, as a TOML file for `--config`, each value followed by where it
//! came from; secrets redacted ([`crate::config::show`]).

use clap::ArgMatches;

use crate::config::{show, Origins};

/// The `config show` text: the resolved settings, then the Debezium
/// properties that were accepted without effect.
pub fn render(
    cmd: &clap::Command,
    matches: &ArgMatches,
    origins: &Origins,
    ignored: &[(String, String)],
) -> String {
    let mut text = show::render(cmd, matches, origins);
    if !ignored.is_empty() {
        text.push_str("\n# Debezium properties accepted without effect:\n");
        for (property, reason) in ignored {
            text.push_str(&format!("#   {property}: {reason}\n"));
        }
    }
    text
}
