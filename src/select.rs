//! What is captured and where it goes: the schema, table and column filters,
//! custom message keys, and topic naming and routing, all as Debezium
//! defines them.
//!
//! Filters are comma-separated regular expressions (`\,` for a comma inside
//! one) that must match the whole name, ignoring case, as Debezium's
//! `schema.include.list`, `table.include.list` (against `schema.table`) and
//! `column.include.list` (against `schema.table.column`) do. An include list
//! admits only what matches; an exclude list admits everything else; giving
//! both of one kind is a configuration error.
//!
//! Topics are `<prefix><delimiter><schema><delimiter><table>`. A
//! `--topic-route REGEX=REPLACEMENT` whose regex matches that whole name
//! sends the table's records to the replacement instead (Debezium's
//! `ByLogicalTableRouter`, with Java's `$1` group syntax); the first route
//! that matches wins. Routed keys get one more field naming the original
//! topic, so rows of different tables with equal primary keys stay
//! distinct. Everything here is compiled once at start and consulted once
//! per Relation message, never per row.

use clap::Args;
use regex::{Regex, RegexBuilder};

use crate::naming;
use crate::options::{ConfigError, Invalid};

/// What is captured and how topics are named (the include/exclude lists,
/// `--message-key-columns`, `--topic-delimiter`, `--topic-route*`).
/// Flattened into `run`'s flags.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Selection and routing")]
pub struct SelectOptions {
    /// Schemas to capture: comma-separated regexes matching the whole schema
    /// name, ignoring case (`\,` for a comma in one); Debezium's schema.include.list.
    #[arg(long, env = "PGCDC_SCHEMA_INCLUDE_LIST")]
    pub schema_include_list: Option<String>,

    /// Schemas not to capture (schema.exclude.list); not with --schema-include-list.
    #[arg(long, env = "PGCDC_SCHEMA_EXCLUDE_LIST")]
    pub schema_exclude_list: Option<String>,

    /// Tables to capture: comma-separated regexes matching the whole
    /// `schema.table`, ignoring case (table.include.list).
    #[arg(long, env = "PGCDC_TABLE_INCLUDE_LIST")]
    pub table_include_list: Option<String>,

    /// Tables not to capture (table.exclude.list); not with --table-include-list.
    #[arg(long, env = "PGCDC_TABLE_EXCLUDE_LIST")]
    pub table_exclude_list: Option<String>,

    /// Columns to capture: regexes matching `schema.table.column`; the others
    /// vanish from schemas and values (column.include.list).
    #[arg(long, env = "PGCDC_COLUMN_INCLUDE_LIST")]
    pub column_include_list: Option<String>,

    /// Columns to leave out (column.exclude.list); key columns cannot be left out.
    #[arg(long, env = "PGCDC_COLUMN_EXCLUDE_LIST")]
    pub column_exclude_list: Option<String>,

    /// Logical decoding messages to write: comma-separated regexes matching
    /// the whole prefix, ignoring case (message.prefix.include.list).
    #[arg(long, env = "PGCDC_MESSAGE_PREFIX_INCLUDE_LIST")]
    pub message_prefix_include_list: Option<String>,

    /// Logical decoding messages not to write (message.prefix.exclude.list).
    #[arg(long, env = "PGCDC_MESSAGE_PREFIX_EXCLUDE_LIST")]
    pub message_prefix_exclude_list: Option<String>,

    /// Key columns per table, overriding the primary key (message.key.columns):
    /// `schema.table:col1,col2;schema2.table2:colA`, the table part a regex.
    #[arg(long, env = "PGCDC_MESSAGE_KEY_COLUMNS")]
    pub message_key_columns: Option<String>,

    /// Between the parts of topic names: <prefix><d><schema><d><table> (topic.delimiter).
    #[arg(long, env = "PGCDC_TOPIC_DELIMITER", default_value = ".")]
    pub topic_delimiter: String,

    /// REGEX=REPLACEMENT (repeatable; the first match wins): records whose
    /// default topic the regex matches go to the replacement, `$1` naming
    /// groups (Debezium's ByLogicalTableRouter topic.regex / topic.replacement).
    #[arg(long, env = "PGCDC_TOPIC_ROUTE")]
    pub topic_route: Vec<String>,

    /// Key field added to routed records, holding their default topic (key.field.name).
    #[arg(
        long,
        env = "PGCDC_TOPIC_ROUTE_KEY_FIELD",
        default_value = "__dbz__physicalTableIdentifier"
    )]
    pub topic_route_key_field: String,

    /// Whether routed keys get --topic-route-key-field (key.enforce.uniqueness).
    #[arg(long, env = "PGCDC_TOPIC_ROUTE_KEY_UNIQUENESS", default_value_t = true, action = clap::ArgAction::Set)]
    pub topic_route_key_uniqueness: bool,
}

/// The selection and the topic router of `options` (with the legacy
/// `--table` list and the topic prefix), or every problem with them.
pub fn build(
    options: &SelectOptions,
    tables: &[String],
    prefix: &str,
) -> Result<(Selection, TopicRouter), ConfigError> {
    match (
        Selection::new(options, tables),
        TopicRouter::from_options(options, prefix),
    ) {
        (Ok(selection), Ok(router)) => Ok((selection, router)),
        (selection, router) => Err(ConfigError(
            selection
                .err()
                .into_iter()
                .chain(router.err())
                .flatten()
                .collect(),
        )),
    }
}

/// A filter over names: everything, an include list or an exclude list.
#[derive(Debug, Clone, Default)]
enum Filter {
    #[default]
    All,
    Include(Vec<Regex>),
    Exclude(Vec<Regex>),
}

impl Filter {
    fn admits(&self, name: &str) -> bool {
        match self {
            Filter::All => true,
            Filter::Include(patterns) => patterns.iter().any(|p| p.is_match(name)),
            Filter::Exclude(patterns) => !patterns.iter().any(|p| p.is_match(name)),
        }
    }

    fn is_all(&self) -> bool {
        matches!(self, Filter::All)
    }
}

/// Which tables and columns are captured, and which columns key a table.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    schemas: Filter,
    tables: Filter,
    columns: Filter,
    /// Logical decoding message prefixes.
    messages: Filter,
    /// `--message-key-columns`: a table pattern and its key column patterns.
    key_columns: Vec<(Regex, Vec<Regex>)>,
}

impl Selection {
    /// Compiles the filters of `config`, or names every flag and pattern
    /// that is wrong.
    pub fn new(options: &SelectOptions, tables: &[String]) -> Result<Self, Vec<Invalid>> {
        let mut problems = Vec::new();
        let filter = |include_flag: &'static str,
                      include: Option<&str>,
                      exclude_flag: &'static str,
                      exclude: Option<&str>,
                      problems: &mut Vec<Invalid>| {
            match (nonempty(include), nonempty(exclude)) {
                (Some(_), Some(exclude)) => {
                    problems.push(Invalid {
                        field: exclude_flag,
                        value: exclude.to_owned(),
                        constraint: format!(
                            "cannot be combined with --{include_flag}; give one of them"
                        ),
                    });
                    Filter::All
                }
                (Some(list), None) => Filter::Include(compile_list(include_flag, list, problems)),
                (None, Some(list)) => Filter::Exclude(compile_list(exclude_flag, list, problems)),
                (None, None) => Filter::All,
            }
        };
        let schemas = filter(
            "schema-include-list",
            options.schema_include_list.as_deref(),
            "schema-exclude-list",
            options.schema_exclude_list.as_deref(),
            &mut problems,
        );
        // `--table a.b,c.d` is an exact-name include list.
        let legacy_tables = (!tables.is_empty()).then(|| {
            tables
                .iter()
                .map(|t| regex::escape(t).replace(',', "\\,"))
                .collect::<Vec<_>>()
                .join(",")
        });
        if legacy_tables.is_some() && nonempty(options.table_include_list.as_deref()).is_some() {
            problems.push(Invalid {
                field: "table",
                value: tables.join(","),
                constraint:
                    "cannot be combined with --table-include-list; --table is an exact-name \
                             include list, put its tables into --table-include-list"
                        .to_owned(),
            });
        }
        let table_include = options
            .table_include_list
            .as_deref()
            .or(legacy_tables.as_deref());
        let tables = filter(
            if options.table_include_list.is_some() || legacy_tables.is_none() {
                "table-include-list"
            } else {
                "table"
            },
            table_include,
            "table-exclude-list",
            options.table_exclude_list.as_deref(),
            &mut problems,
        );
        let columns = filter(
            "column-include-list",
            options.column_include_list.as_deref(),
            "column-exclude-list",
            options.column_exclude_list.as_deref(),
            &mut problems,
        );
        let messages = filter(
            "message-prefix-include-list",
            options.message_prefix_include_list.as_deref(),
            "message-prefix-exclude-list",
            options.message_prefix_exclude_list.as_deref(),
            &mut problems,
        );
        let key_columns = match nonempty(options.message_key_columns.as_deref()) {
            None => Vec::new(),
            Some(spec) => parse_key_columns(spec, &mut problems),
        };
        if problems.is_empty() {
            Ok(Selection {
                schemas,
                tables,
                columns,
                messages,
                key_columns,
            })
        } else {
            Err(problems)
        }
    }

    /// Whether changes of `schema.table` are captured.
    pub fn includes_table(&self, schema: &str, table: &str) -> bool {
        self.schemas.admits(schema) && self.tables.admits(&format!("{schema}.{table}"))
    }

    /// Whether a column is captured (appears in schemas and values).
    pub fn includes_column(&self, schema: &str, table: &str, column: &str) -> bool {
        self.columns.is_all() || self.columns.admits(&format!("{schema}.{table}.{column}"))
    }

    /// Whether logical decoding messages with `prefix` are written.
    pub fn includes_message(&self, prefix: &str) -> bool {
        self.messages.admits(prefix)
    }

    /// Whether any schema or table filter is set (else every table is captured).
    pub fn filters_tables(&self) -> bool {
        !self.schemas.is_all() || !self.tables.is_all()
    }

    /// The `--message-key-columns` patterns for a table: the first entry
    /// whose table pattern matches `schema.table`.
    pub fn key_column_patterns(&self, schema: &str, table: &str) -> Option<&[Regex]> {
        let name = format!("{schema}.{table}");
        self.key_columns
            .iter()
            .find(|(table, _)| table.is_match(&name))
            .map(|(_, columns)| columns.as_slice())
    }
}

fn nonempty(s: Option<&str>) -> Option<&str> {
    s.filter(|s| !s.trim().is_empty())
}

/// A whole-name, case-insensitive pattern, as Debezium matches them.
fn anchored(pattern: &str) -> Result<Regex, regex::Error> {
    RegexBuilder::new(&format!("^(?:{pattern})$"))
        .case_insensitive(true)
        .build()
}

/// Splits at commas that are not escaped as `\,`.
fn split_list(list: &str) -> Vec<String> {
    let mut items = Vec::new();
    let mut current = String::new();
    let mut chars = list.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&',') => {
                current.push(',');
                chars.next();
            }
            ',' => items.push(std::mem::take(&mut current)),
            c => current.push(c),
        }
    }
    items.push(current);
    items
        .into_iter()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect()
}

/// Compiles a comma-separated list of whole-name, case-insensitive
/// patterns (`\,` for a comma in one), naming `flag` in each problem.
pub(crate) fn compile_list(
    flag: &'static str,
    list: &str,
    problems: &mut Vec<Invalid>,
) -> Vec<Regex> {
    split_list(list)
        .into_iter()
        .filter_map(|pattern| match anchored(&pattern) {
            Ok(regex) => Some(regex),
            Err(error) => {
                problems.push(Invalid {
                    field: flag,
                    value: pattern,
                    constraint: format!("is not a valid regular expression: {}", one_line(&error)),
                });
                None
            }
        })
        .collect()
}

fn one_line(error: &regex::Error) -> String {
    error
        .to_string()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// `schema.table:col1,col2;schema2.table2:colA`, the table part a regex.
fn parse_key_columns(spec: &str, problems: &mut Vec<Invalid>) -> Vec<(Regex, Vec<Regex>)> {
    const FLAG: &str = "message-key-columns";
    let mut entries = Vec::new();
    for entry in spec.split(';').map(str::trim).filter(|e| !e.is_empty()) {
        let Some((table, columns)) = entry.rsplit_once(':') else {
            problems.push(Invalid {
                field: FLAG,
                value: entry.to_owned(),
                constraint: "must be schema.table:column[,column...] (entries separated by ';')"
                    .to_owned(),
            });
            continue;
        };
        let table = match anchored(table.trim()) {
            Ok(regex) => regex,
            Err(error) => {
                problems.push(Invalid {
                    field: FLAG,
                    value: table.trim().to_owned(),
                    constraint: format!("is not a valid regular expression: {}", one_line(&error)),
                });
                continue;
            }
        };
        let columns = compile_list(FLAG, columns, problems);
        if columns.is_empty() {
            problems.push(Invalid {
                field: FLAG,
                value: entry.to_owned(),
                constraint: "names no key column".to_owned(),
            });
            continue;
        }
        entries.push((table, columns));
    }
    entries
}

/// Topic names: the default `<prefix><d><schema><d><table>`, and routes.
#[derive(Debug, Clone)]
pub struct TopicRouter {
    prefix: String,
    delimiter: String,
    routes: Vec<(Regex, String)>,
    /// The key field naming the original topic on routed records, if any.
    key_field: Option<String>,
}

impl TopicRouter {
    /// Default names only, with `.` between the parts.
    pub fn new(prefix: &str) -> Self {
        TopicRouter {
            prefix: prefix.to_owned(),
            delimiter: ".".to_owned(),
            routes: Vec::new(),
            key_field: None,
        }
    }

    /// The router `options` describe under `prefix`, or every flag that is wrong.
    pub fn from_options(options: &SelectOptions, prefix: &str) -> Result<Self, Vec<Invalid>> {
        let mut problems = Vec::new();
        if options.topic_delimiter.is_empty()
            || !options
                .topic_delimiter
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        {
            problems.push(Invalid {
                field: "topic-delimiter",
                value: options.topic_delimiter.clone(),
                constraint: "must be one or more of the characters Kafka allows in topic names \
                             (letters, digits, '.', '_', '-')"
                    .to_owned(),
            });
        }
        let mut routes = Vec::new();
        for route in &options.topic_route {
            let Some((pattern, replacement)) = route.split_once('=') else {
                problems.push(Invalid {
                    field: "topic-route",
                    value: route.clone(),
                    constraint: "must be REGEX=REPLACEMENT".to_owned(),
                });
                continue;
            };
            let regex = match anchored(pattern) {
                Ok(regex) => regex,
                Err(error) => {
                    problems.push(Invalid {
                        field: "topic-route",
                        value: pattern.to_owned(),
                        constraint: format!(
                            "is not a valid regular expression: {}",
                            one_line(&error)
                        ),
                    });
                    continue;
                }
            };
            match java_replacement(replacement, regex.captures_len() - 1) {
                Ok(replacement) => routes.push((regex, replacement)),
                Err(problem) => problems.push(Invalid {
                    field: "topic-route",
                    value: replacement.to_owned(),
                    constraint: problem,
                }),
            }
        }
        let uniqueness = options.topic_route_key_uniqueness && !routes.is_empty();
        if uniqueness && options.topic_route_key_field.trim().is_empty() {
            problems.push(Invalid {
                field: "topic-route-key-field",
                value: options.topic_route_key_field.clone(),
                constraint: "must name a key field (or pass --topic-route-key-uniqueness false)"
                    .to_owned(),
            });
        }
        if !problems.is_empty() {
            return Err(problems);
        }
        Ok(TopicRouter {
            prefix: prefix.to_owned(),
            delimiter: options.topic_delimiter.clone(),
            routes,
            key_field: uniqueness.then(|| options.topic_route_key_field.clone()),
        })
    }

    /// The default topic of a table, `<prefix>.<schema>.<table>`, with every
    /// character Kafka does not allow in a topic name replaced by `_`, as
    /// Debezium's `TopicNamingStrategy.sanitizedTopicName` does (routes see
    /// the sanitized name).
    pub fn table_topic(&self, schema: &str, table: &str) -> String {
        naming::table_topic(&self.prefix, &self.delimiter, schema, table)
    }

    /// The topic a table's records go to: routed, or the default.
    pub fn topic_for(&self, schema: &str, table: &str) -> String {
        let topic = self.table_topic(schema, table);
        self.route(&topic).unwrap_or(topic)
    }

    /// The topic of `pg_logical_emit_message` records.
    pub fn message_topic(&self) -> String {
        naming::message_topic(&self.prefix, &self.delimiter)
    }

    /// Where records of `topic` go when a route matches it.
    pub fn route(&self, topic: &str) -> Option<String> {
        self.routes.iter().find_map(|(regex, replacement)| {
            let captures = regex.captures(topic)?;
            let mut routed = String::new();
            captures.expand(replacement, &mut routed);
            Some(routed)
        })
    }

    /// The key field added to routed records, if key uniqueness is on.
    pub fn key_field(&self) -> Option<&str> {
        self.key_field.as_deref()
    }
}

/// Translates a Java `Matcher.replaceFirst` replacement (`$1`, `${name}`,
/// `\$`) into the `regex` crate's syntax (`${1}`, `${name}`, `$$`).
pub(crate) fn java_replacement(java: &str, groups: usize) -> Result<String, String> {
    let mut out = String::new();
    let mut chars = java.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('$') => out.push_str("$$"),
                Some(c) => out.push(c),
                None => return Err("ends in a lone backslash".to_owned()),
            },
            '$' => match chars.peek().copied() {
                Some('{') => {
                    chars.next();
                    let name: String = chars.by_ref().take_while(|&c| c != '}').collect();
                    if name.is_empty() {
                        return Err("has an empty group name ${}".to_owned());
                    }
                    out.push_str(&format!("${{{name}}}"));
                }
                Some(d) if d.is_ascii_digit() => {
                    // Java reads as many digits as still name an existing group.
                    chars.next();
                    let mut group = d.to_digit(10).unwrap_or(0) as usize;
                    while let Some(next) = chars.peek().and_then(|c| c.to_digit(10)) {
                        let longer = group * 10 + next as usize;
                        if longer > groups {
                            break;
                        }
                        group = longer;
                        chars.next();
                    }
                    if group > groups {
                        return Err(format!(
                            "refers to group ${group}, but the regex has {groups} groups"
                        ));
                    }
                    out.push_str(&format!("${{{group}}}"));
                }
                _ => {
                    return Err(
                        "has a '$' that is not a group reference; write \\$ for a literal '$'"
                            .to_owned(),
                    )
                }
            },
            c => out.push(c),
        }
    }
    Ok(out)
}

/// A table the filters admit whose definition cannot be captured as asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectionError {
    #[error("column {column:?} of {table} is part of its key, so it cannot be left out; change --column-include-list / --column-exclude-list to keep it, or key the table by other columns with --message-key-columns")]
    ExcludedKeyColumn { table: String, column: String },
    #[error("table {table} would go to topic {topic:?}, which is not a valid Kafka topic name (1-249 of letters, digits, '.', '_', '-'); fix --topic-route or --topic-prefix")]
    InvalidTopic { table: String, topic: String },
    #[error("the key of {table} already has a column named {field:?}, the field --topic-route adds to routed keys; choose another --topic-route-key-field")]
    KeyFieldConflict { table: String, field: String },
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `run`'s flags that the selection reads.
    #[derive(clap::Parser)]
    struct Flags {
        #[command(flatten)]
        select: SelectOptions,
        #[arg(long = "table", value_delimiter = ',')]
        tables: Vec<String>,
    }

    fn config(args: &[&str]) -> Flags {
        use clap::Parser;
        Flags::try_parse_from(std::iter::once("run").chain(args.iter().copied()))
            .expect("arguments parse")
    }

    impl Flags {
        fn selection(&self) -> Result<Selection, Vec<Invalid>> {
            Selection::new(&self.select, &self.tables)
        }

        fn router(&self) -> Result<TopicRouter, Vec<Invalid>> {
            TopicRouter::from_options(&self.select, "app")
        }
    }

    fn selection(args: &[&str]) -> Selection {
        config(args).selection().expect("valid selection")
    }

    #[test]
    fn table_filters_match_whole_names_ignoring_case() {
        let s = selection(&["--table-include-list", "public.orders,inv\\..*"]);
        assert!(s.includes_table("public", "orders"));
        assert!(s.includes_table("PUBLIC", "Orders"));
        assert!(!s.includes_table("public", "orders_archive"), "anchored");
        assert!(s.includes_table("inv", "anything"));
        assert!(!s.includes_table("public", "customers"));

        let s = selection(&["--schema-exclude-list", "audit"]);
        assert!(!s.includes_table("audit", "log"));
        assert!(s.includes_table("auditing", "log"));
    }

    #[test]
    fn escaped_commas_stay_in_the_pattern() {
        let s = selection(&["--table-include-list", "public\\.t[0-9]{1\\,2}"]);
        assert!(s.includes_table("public", "t12"));
        assert!(!s.includes_table("public", "t123"));
    }

    #[test]
    fn legacy_table_flag_is_an_exact_include_list() {
        let s = selection(&["--table", "public.a_b,public.c"]);
        assert!(s.includes_table("public", "a_b"));
        assert!(
            !s.includes_table("public", "aXb"),
            "'.' and '_' are literal"
        );
        assert!(!s.includes_table("public", "d"));
    }

    #[test]
    fn columns_match_schema_table_column() {
        let s = selection(&["--column-exclude-list", "public\\.users\\.(password|ssn)"]);
        assert!(!s.includes_column("public", "users", "password"));
        assert!(s.includes_column("public", "users", "name"));
        assert!(s.includes_column("public", "other", "password"));
    }

    #[test]
    fn key_columns_parse_debezium_syntax() {
        let s = selection(&["--message-key-columns", "public.a:x,y;(.*)\\.b:z"]);
        let a = s.key_column_patterns("public", "a").expect("entry for a");
        assert_eq!(a.len(), 2);
        assert!(a[1].is_match("y"));
        assert!(s.key_column_patterns("other", "b").is_some());
        assert!(s.key_column_patterns("public", "c").is_none());
    }

    #[test]
    fn invalid_settings_name_flag_and_pattern() {
        let problems = config(&[
            "--table-include-list",
            "public.(a",
            "--schema-include-list",
            "s",
            "--schema-exclude-list",
            "t",
            "--message-key-columns",
            "public.a",
        ])
        .selection()
        .expect_err("invalid");
        let fields: Vec<_> = problems
            .iter()
            .map(|p| (p.field, p.value.as_str()))
            .collect();
        assert_eq!(
            fields,
            [
                ("schema-exclude-list", "t"),
                ("table-include-list", "public.(a"),
                ("message-key-columns", "public.a"),
            ]
        );
    }

    #[test]
    fn routes_use_java_group_syntax_and_first_match_wins() {
        let r = config(&[
            "--topic-route",
            "app\\.public\\.shard_(\\d+)=app.shards",
            "--topic-route",
            "(.*)\\.public\\.(.*)=$1.all_$2",
            "--topic-delimiter",
            ".",
        ])
        .router()
        .expect("valid");
        assert_eq!(r.route("app.public.shard_1").as_deref(), Some("app.shards"));
        assert_eq!(
            r.route("app.public.orders").as_deref(),
            Some("app.all_orders")
        );
        assert_eq!(r.route("app.other.orders"), None);
        assert_eq!(r.key_field(), Some("__dbz__physicalTableIdentifier"));

        assert_eq!(java_replacement("$10x", 1).as_deref(), Ok("${1}0x"));
        assert_eq!(java_replacement("\\$1", 1).as_deref(), Ok("$$1"));
        assert!(java_replacement("$2", 1).is_err());
    }

    #[test]
    fn table_topics_replace_what_kafka_does_not_allow() {
        let r = config(&[]).router().expect("valid");
        assert_eq!(r.table_topic("public", "orders"), "app.public.orders");
        assert_eq!(
            r.table_topic("Schéma", "my \"table\" 😀"),
            "app.Sch_ma.my__table____"
        );
        assert!(crate::naming::is_valid_topic(&r.table_topic("ü", "☃")));
    }

    #[test]
    fn delimiter_shapes_topics() {
        let r = config(&["--topic-delimiter", "_"]).router().expect("valid");
        assert_eq!(r.table_topic("public", "t"), "app_public_t");
        assert_eq!(r.message_topic(), "app_message");
        assert_eq!(r.key_field(), None, "no routes, no key field");
        assert!(config(&["--topic-delimiter", "/"]).router().is_err());
    }
}
