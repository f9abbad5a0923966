//! The `--config` TOML file: one key per flag (its long name with '-' ->
//! '_'), arrays for list flags, tables for `key=value` flags (`[kafka]`).
//! Unknown keys are errors, with the closest known key as a hint; a
//! command that shares `run`'s file skips `run`'s keys it does not have.
//! A `[pipelines.<name>]` table declares one of several pipelines: it is
//! read by [`super::pipelines`], never as settings here.

use std::path::Path;

use toml::Value;

use super::setting::{self, ArgIndex, Origin, Problem, Setting, Shape};

/// Reads the file into settings, and every problem with it; keys of
/// `shared` (another command's arguments, see
/// [`super::layers::resolve_shared`]) that `index` lacks are skipped.
pub(super) fn read(
    path: &Path,
    index: &ArgIndex,
    shared: Option<&ArgIndex>,
) -> (Vec<Setting>, Vec<Problem>) {
    let text = match setting::read_file(path, "--config") {
        Ok(text) => text,
        Err(problem) => return (Vec::new(), vec![problem]),
    };
    parse(&text, path, index, shared)
}

/// Parses the file's text (`path` names it in origins and errors).
pub(super) fn parse(
    text: &str,
    path: &Path,
    index: &ArgIndex,
    shared: Option<&ArgIndex>,
) -> (Vec<Setting>, Vec<Problem>) {
    let table: toml::Table = match text.parse() {
        Ok(table) => table,
        Err(e) => {
            return (
                Vec::new(),
                vec![Problem {
                    field: "--config".to_owned(),
                    value: Some(path.display().to_string()),
                    message: format!("not valid TOML: {}", e.to_string().trim()),
                    origin: None,
                }],
            )
        }
    };
    let shared_keys = table
        .iter()
        .filter(|(key, _)| key.as_str() != super::pipelines::PIPELINES_KEY);
    parse_table(shared_keys, &Origin::File(path.to_owned()), index, shared)
}

/// One table's keys as settings (`origin` names where they are), and every
/// problem with them.
pub(super) fn parse_table<'a>(
    table: impl IntoIterator<Item = (&'a String, &'a Value)>,
    origin: &Origin,
    index: &ArgIndex,
    shared: Option<&ArgIndex>,
) -> (Vec<Setting>, Vec<Problem>) {
    let mut settings = Vec::new();
    let mut problems = Vec::new();
    for (key, value) in table {
        let field = match origin {
            Origin::Pipeline { name, .. } => format!("pipelines.{name}.{key}"),
            _ => key.clone(),
        };
        let problem = |message: String| Problem {
            field: field.clone(),
            value: None,
            message,
            origin: Some(origin.clone()),
        };
        let Some(info) = index.by_key(key) else {
            if shared.is_some_and(|s| s.by_key(key).is_some()) {
                continue;
            }
            let hint = index
                .suggest(key)
                .map(|k| format!("; did you mean {k:?}?"))
                .unwrap_or_else(|| "; `pgcdc-kafka config show` lists every key".to_owned());
            problems.push(problem(format!("unknown key{hint}")));
            continue;
        };
        let values = match (info.shape, value) {
            (Shape::KeyValue, Value::Table(entries)) => entries
                .iter()
                .map(|(k, v)| scalar(v).map(|v| format!("{k}={v}")))
                .collect::<Result<Vec<_>, _>>(),
            (Shape::KeyValue, Value::Array(items)) | (Shape::List, Value::Array(items)) => {
                items.iter().map(scalar).collect()
            }
            (Shape::KeyValue, _) => Err(format!(
                "expects a table of properties, e.g. [{key}] with \"name\" = \"value\" lines"
            )),
            (Shape::Switch, Value::Boolean(b)) => Ok(vec![b.to_string()]),
            (Shape::Switch, _) => Err("expects true or false".to_owned()),
            (_, Value::Array(_)) => Err("takes one value, not an array".to_owned()),
            (_, value) => scalar(value).map(|v| vec![v]),
        };
        match values {
            Ok(values) => settings.push(Setting {
                id: info.id.clone(),
                values,
                origin: origin.clone(),
            }),
            Err(message) => problems.push(problem(message)),
        }
    }
    (settings, problems)
}

/// A TOML scalar as the flag's text.
fn scalar(value: &Value) -> Result<String, String> {
    match value {
        Value::String(s) => Ok(s.clone()),
        Value::Integer(i) => Ok(i.to_string()),
        Value::Float(f) => Ok(f.to_string()),
        Value::Boolean(b) => Ok(b.to_string()),
        Value::Datetime(d) => Ok(d.to_string()),
        Value::Array(_) | Value::Table(_) => {
            Err("expects a string, number or boolean here, not an array or table".to_owned())
        }
    }
}
