//! `pgcdc-kafka config show`: the effective configuration as a TOML file
//! that `--config` accepts, every value with where it came from, secrets
//! redacted.

use std::any::TypeId;
use std::fmt::Write;

use clap::{Arg, ArgMatches, Command};
use toml::Value;

use super::layers::raw_values;
use super::setting::{is_secret_name, ArgIndex, Origins, Shape};

/// Written in place of a secret.
pub const REDACTED: &str = "<redacted>";

/// [`render`] on one line, for the start-up log: `key=value` pairs joined
/// by `, ` (table entries as `kafka.linger.ms="5"`), origins left out,
/// secrets redacted as in `config show`.
pub fn one_line(cmd: &Command, matches: &ArgMatches, origins: &Origins) -> String {
    let mut table = String::new();
    let mut pairs = Vec::new();
    for line in render(cmd, matches, origins).lines() {
        let line = line.trim();
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            table = format!("{name}.");
            continue;
        }
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let setting = line.rsplit_once("  # ").map_or(line, |(s, _)| s);
        if let Some((key, value)) = setting.split_once(" = ") {
            pairs.push(format!("{table}{}={value}", key.trim_matches('"')));
        }
    }
    pairs.join(", ")
}

/// Renders `matches` (the final parse of `cmd`, defaults included).
pub fn render(cmd: &Command, matches: &ArgMatches, origins: &Origins) -> String {
    let index = ArgIndex::new(cmd);
    let mut out = String::from(
        "# Effective configuration of pgcdc-kafka; each value's origin follows it.\n\
         # Secrets are redacted: put them back (or in the environment) before\n\
         # using this file with --config.\n",
    );
    let mut tables = String::new();
    for info in &index.args {
        let Some(arg) = cmd.get_arguments().find(|a| a.get_id().as_str() == info.id) else {
            continue;
        };
        let values = raw_values(matches, &info.id);
        let origin = origins.of(&info.id);
        if info.shape == Shape::KeyValue {
            if values.is_empty() {
                continue;
            }
            let _ = writeln!(tables, "\n[{}]", info.key);
            for entry in &values {
                let (key, value) = entry.split_once('=').unwrap_or((entry.as_str(), ""));
                let (key, value) = (key.trim(), value.trim());
                let value = if is_secret_name(key) { REDACTED } else { value };
                let _ = writeln!(
                    tables,
                    "{} = {}  # {}",
                    quoted(key),
                    quoted(value),
                    origins.of_entry(&info.id, key)
                );
            }
            continue;
        }
        let rendered: Vec<String> = values
            .iter()
            .map(|v| {
                if info.secret {
                    quoted(&redact(&info.id, v))
                } else {
                    typed(arg, v)
                }
            })
            .collect();
        match (info.shape, rendered.as_slice()) {
            (_, []) => {
                let _ = writeln!(out, "# {} is not set", info.key);
            }
            (Shape::List, _) => {
                let _ = writeln!(out, "{} = [{}]  # {origin}", info.key, rendered.join(", "));
            }
            (_, [one]) => {
                let _ = writeln!(out, "{} = {one}  # {origin}", info.key);
            }
            (_, many) => {
                let _ = writeln!(out, "{} = [{}]  # {origin}", info.key, many.join(", "));
            }
        }
    }
    out.push_str(&tables);
    out
}

/// A value as a TOML literal of the argument's type.
fn typed(arg: &Arg, value: &str) -> String {
    let parser = arg.get_value_parser().type_id();
    let is = |t: TypeId| parser == t;
    let boolean = is(TypeId::of::<bool>()) || !arg.get_action().takes_values();
    let integer = [
        TypeId::of::<u8>(),
        TypeId::of::<u16>(),
        TypeId::of::<u32>(),
        TypeId::of::<u64>(),
        TypeId::of::<usize>(),
        TypeId::of::<i8>(),
        TypeId::of::<i16>(),
        TypeId::of::<i32>(),
        TypeId::of::<i64>(),
    ]
    .into_iter()
    .any(is);
    let literal =
        (boolean && matches!(value, "true" | "false")) || (integer && value.parse::<i64>().is_ok());
    if literal {
        value.to_owned()
    } else {
        quoted(value)
    }
}

fn quoted(s: &str) -> String {
    Value::String(s.to_owned()).to_string()
}

/// A secret argument's value with the secret part replaced: the password
/// of the PostgreSQL URL, anything else whole.
pub fn redact(id: &str, value: &str) -> String {
    if id == "pg_url" {
        redact_pg_url(value)
    } else {
        REDACTED.to_owned()
    }
}

/// The URL (or `key=value` connection string) with its password replaced.
pub fn redact_pg_url(url: &str) -> String {
    if let Ok(mut parsed) = url::Url::parse(url) {
        if parsed.password().is_some() {
            let _ = parsed.set_password(Some("redacted"));
        }
        let pairs: Vec<(String, String)> = parsed
            .query_pairs()
            .map(|(k, v)| {
                let v = if is_secret_name(&k) {
                    "redacted".into()
                } else {
                    v.into_owned()
                };
                (k.into_owned(), v)
            })
            .collect();
        if !pairs.is_empty() {
            parsed.query_pairs_mut().clear().extend_pairs(pairs);
        }
        return parsed.to_string();
    }
    url.split_whitespace()
        .map(|part| match part.split_once('=') {
            Some((k, _)) if is_secret_name(k) => format!("{k}={REDACTED}"),
            _ => part.to_owned(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pg_url_passwords_are_redacted_in_every_form() {
        assert_eq!(
            redact_pg_url("postgres://cdc:s3cret@db:5432/shop"),
            "postgres://cdc:redacted@db:5432/shop"
        );
        let query = redact_pg_url("postgres://cdc@db/shop?password=s3cret&sslmode=disable");
        assert!(
            !query.contains("s3cret") && query.contains("sslmode=disable"),
            "{query}"
        );
        let dsn = redact_pg_url("host=db user=cdc password=s3cret dbname=shop");
        assert_eq!(dsn, "host=db user=cdc password=<redacted> dbname=shop");
    }
}
