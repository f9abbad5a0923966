//! Secrets by reference: a fleet's configs topic is read by every
//! instance and by anyone allowed to read it, so it never holds a
//! password. A record's string values may contain `${env:VAR}` (an
//! environment variable of the instance) and `${file:/path}` (a file on
//! the instance, e.g. a mounted Kubernetes secret; a trailing newline is
//! dropped), resolved by each instance before the record is parsed.
//!
//! `fleet apply` refuses a secret written as a literal ([`literals`]): a
//! setting whose name says password, secret or basic_auth, a Kafka
//! property like `sasl.password`, or a password inside `pg_url`.

use toml::Value;

use crate::config::setting::is_secret_name;

/// One reference, as written between `${` and `}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reference<'a> {
    Env(&'a str),
    File(&'a str),
}

/// Resolves one reference on this instance.
pub fn resolve_here(reference: &Reference<'_>) -> Result<String, String> {
    match reference {
        Reference::Env(var) => std::env::var(var).map_err(|_| {
            format!("refers to ${{env:{var}}}, which is not set on this instance; set {var} in its environment")
        }),
        Reference::File(path) => std::fs::read_to_string(path)
            .map(|text| text.trim_end_matches(['\n', '\r']).to_owned())
            .map_err(|e| {
                format!("refers to ${{file:{path}}}, which cannot be read on this instance ({e}); mount the file there")
            }),
    }
}

/// `text` with every reference replaced by what `resolve` makes of it.
pub fn substitute(
    text: &str,
    resolve: &dyn Fn(&Reference<'_>) -> Result<String, String>,
) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find('}')
            .ok_or_else(|| "has a '${' without its closing '}'".to_owned())?;
        let inner = &after[..end];
        let reference = parse(inner).ok_or_else(|| {
            format!(
                "has ${{{inner}}}, which is not a reference: use ${{env:VAR}} or ${{file:/absolute/path}}"
            )
        })?;
        out.push_str(&resolve(&reference)?);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

fn parse(inner: &str) -> Option<Reference<'_>> {
    if let Some(var) = inner.strip_prefix("env:") {
        let ok = !var.is_empty() && var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        return ok.then_some(Reference::Env(var));
    }
    let path = inner.strip_prefix("file:")?;
    path.starts_with('/').then_some(Reference::File(path))
}

/// Resolves every reference in every string of `table` (nested tables and
/// arrays included); the problems as `(key, message)`.
pub fn resolve_table(
    table: &mut toml::Table,
    resolve: &dyn Fn(&Reference<'_>) -> Result<String, String>,
) -> Vec<(String, String)> {
    let mut problems = Vec::new();
    for (key, value) in table.iter_mut() {
        resolve_value(key, value, resolve, &mut problems);
    }
    problems
}

fn resolve_value(
    key: &str,
    value: &mut Value,
    resolve: &dyn Fn(&Reference<'_>) -> Result<String, String>,
    problems: &mut Vec<(String, String)>,
) {
    match value {
        Value::String(text) => match substitute(text, resolve) {
            Ok(resolved) => *text = resolved,
            Err(message) => problems.push((key.to_owned(), message)),
        },
        Value::Array(items) => {
            for item in items {
                resolve_value(key, item, resolve, problems);
            }
        }
        Value::Table(inner) => {
            for (k, v) in inner.iter_mut() {
                resolve_value(&format!("{key}.{k}"), v, resolve, problems);
            }
        }
        _ => {}
    }
}

/// The keys of `table` that hold a secret as a literal rather than by
/// reference, each with what to do.
pub fn literals(table: &toml::Table) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let hint = |key: &str| {
        format!(
            "holds a literal secret, and the configs topic is readable by every instance; \
             write a reference instead, resolved on each instance: {key} = \"${{env:VAR}}\" \
             or \"${{file:/path/to/secret}}\""
        )
    };
    for (key, value) in table {
        match value {
            Value::Table(inner) => {
                for (k, v) in inner {
                    if is_secret_name(k) && !is_reference(v) {
                        found.push((format!("{key}.{k}"), hint(&format!("{key}.\"{k}\""))));
                    }
                }
            }
            _ if key == "pg_url" => {
                if let Some(password) = value.as_str().and_then(url_password) {
                    if !is_reference_text(password) {
                        found.push((
                            key.clone(),
                            "has a literal password, and the configs topic is readable by \
                             every instance; write postgres://user:${env:PGPASSWORD}@host/db \
                             (or ${file:/path}), or leave it out and set pg_password = \
                             \"${env:VAR}\""
                                .to_owned(),
                        ));
                    }
                }
            }
            // `pg_password_file` and the like hold a path, resolved on
            // each instance, never the secret.
            _ if key.ends_with("_file") => {}
            _ if is_secret_name(key) && !is_reference(value) => {
                found.push((key.clone(), hint(key)))
            }
            _ => {}
        }
    }
    found
}

fn is_reference(value: &Value) -> bool {
    value.as_str().is_some_and(is_reference_text)
}

/// Whether `text` is one reference and nothing else.
fn is_reference_text(text: &str) -> bool {
    text.strip_prefix("${")
        .and_then(|t| t.strip_suffix('}'))
        .is_some_and(|inner| !inner.contains('}') && parse(inner).is_some())
}

/// The password of a URL (`scheme://user:password@host`) or of a libpq
/// key/value string (`password=...`), if it has one.
fn url_password(url: &str) -> Option<&str> {
    if let Some((_, rest)) = url.split_once("://") {
        let authority = rest.split(['/', '?']).next().unwrap_or(rest);
        let userinfo = authority.rsplit_once('@')?.0;
        return userinfo
            .split_once(':')
            .map(|(_, p)| p)
            .filter(|p| !p.is_empty());
    }
    url.split_whitespace()
        .find_map(|kv| kv.strip_prefix("password="))
        .filter(|p| !p.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake(reference: &Reference<'_>) -> Result<String, String> {
        match reference {
            Reference::Env("PW") => Ok("s3cret".into()),
            Reference::File("/run/pw") => Ok("fromfile".into()),
            other => Err(format!("{other:?} missing")),
        }
    }

    #[test]
    fn references_are_substituted_anywhere_in_a_string() {
        assert_eq!(
            substitute("postgres://u:${env:PW}@h/db", &fake).as_deref(),
            Ok("postgres://u:s3cret@h/db")
        );
        assert_eq!(
            substitute("${file:/run/pw}", &fake).as_deref(),
            Ok("fromfile")
        );
        assert_eq!(substitute("plain", &fake).as_deref(), Ok("plain"));
        assert!(substitute("${nope}", &fake)
            .expect_err("bad")
            .contains("${env:VAR}"));
        assert!(substitute("${file:relative}", &fake).is_err());
        assert!(substitute("${env:PW", &fake)
            .expect_err("open")
            .contains("closing"));
        assert!(substitute("${env:OTHER}", &fake).is_err());
    }

    #[test]
    fn literal_secrets_are_found_and_references_pass() {
        let table: toml::Table = r#"
            pg_url = "postgres://cdc:hunter2@db/shop"
            kafka_sasl_password = "plain"
            schema_registry_basic_auth = "${env:PW}"
            [kafka]
            "sasl.password" = "x"
            "linger.ms" = 5
        "#
        .parse()
        .expect("toml");
        let keys: Vec<String> = literals(&table).into_iter().map(|(k, _)| k).collect();
        assert_eq!(
            keys,
            ["kafka.sasl.password", "kafka_sasl_password", "pg_url"]
        );
        let fine: toml::Table = r#"
            pg_url = "postgres://cdc:${env:PW}@db/shop"
            pg_password = "${file:/run/pw}"
            pg_password_file = "/etc/pgcdc/secrets/orders/pg-password"
        "#
        .parse()
        .expect("toml");
        assert!(literals(&fine).is_empty());
        let kv: toml::Table = "pg_url = \"host=db password=x dbname=d\""
            .parse()
            .expect("toml");
        assert_eq!(literals(&kv).len(), 1);
        let without: toml::Table = "pg_url = \"postgres://cdc@db/shop\"".parse().expect("toml");
        assert!(literals(&without).is_empty());
    }

    #[test]
    fn a_table_is_resolved_in_place_with_every_problem() {
        let mut table: toml::Table = r#"
            pg_url = "postgres://u:${env:PW}@h/d"
            pg_password = "${env:MISSING}"
            [kafka]
            "sasl.password" = "${file:/run/pw}"
        "#
        .parse()
        .expect("toml");
        let problems = resolve_table(&mut table, &fake);
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].0, "pg_password");
        assert_eq!(table["pg_url"].as_str(), Some("postgres://u:s3cret@h/d"));
        assert_eq!(table["kafka"]["sasl.password"].as_str(), Some("fromfile"));
    }
}
