//! The documented deviations from Debezium (`tests/debezium/deviations.toml`)
//! and how a [`Difference`] is recognised as one of them.
//!
//! Each `[[deviation]]` says why we differ: `name`, `reason`, `switch` (the
//! setting that restores Debezium's bytes, `""` for none) and optionally
//! `status` (`to-fix` while a fix is pending). Its `[[deviation.where]]`
//! blocks say where the difference shows: `paths` (globs over
//! [`Difference::path`]: `*` is any text without `/`, `**` any text at all),
//! and optionally `outputs`, `kinds` (record kinds: `c`, `u`, `d`, `t`, `m`,
//! `tombstone`, `record`) and `topics` (a regex matched against the whole
//! topic name; `{prefix}` stands for the run's topic prefix). A difference is
//! documented when one block of some deviation matches it on every selector
//! the block gives. A deviation the test cannot observe says why in
//! `not_compared` instead (the connector stops rather than writing a record,
//! the field is masked), and has no `where`.
//!
//! The file must stay honest both ways: an undocumented difference fails the
//! test, and so does a deviation that matched nothing (stale: its fix
//! landed, remove the entry) or that says neither where it shows nor why it
//! is not compared.

use std::fmt::Write as _;

use regex::Regex;
use serde::Deserialize;

use super::compare::Difference;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    deviation: Vec<Entry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    name: String,
    reason: String,
    #[serde(default)]
    switch: Option<String>,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    not_compared: Option<String>,
    #[serde(default, rename = "where")]
    places: Vec<WhereEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WhereEntry {
    paths: Vec<String>,
    #[serde(default)]
    outputs: Vec<String>,
    #[serde(default)]
    kinds: Vec<String>,
    #[serde(default)]
    topics: Option<String>,
}

/// One deviation, its `where` blocks compiled.
#[derive(Debug)]
pub struct Deviation {
    pub name: String,
    pub reason: String,
    pub switch: Option<String>,
    pub status: Option<String>,
    pub not_compared: Option<String>,
    places: Vec<Place>,
}

/// One `[[deviation.where]]` block.
#[derive(Debug)]
struct Place {
    paths: Vec<Regex>,
    outputs: Vec<String>,
    kinds: Vec<String>,
    topics: Option<Regex>,
}

impl Place {
    fn matches(&self, d: &Difference) -> bool {
        self.paths.iter().any(|p| p.is_match(&d.path))
            && (self.outputs.is_empty() || self.outputs.contains(&d.output))
            && (self.kinds.is_empty() || self.kinds.contains(&d.kind))
            && self.topics.as_ref().is_none_or(|t| t.is_match(&d.topic))
    }
}

impl Deviation {
    /// Whether `d` is this deviation.
    pub fn matches(&self, d: &Difference) -> bool {
        self.places.iter().any(|p| p.matches(d))
    }

    /// Why the entry fails the run whatever the differences: it says neither
    /// where it shows nor why it is not compared, or both.
    fn malformed(&self) -> Option<&'static str> {
        match (self.places.is_empty(), self.not_compared.is_some()) {
            (true, false) => Some(
                "says neither where it shows ([[deviation.where]]) nor why it is not compared \
                 (not_compared)",
            ),
            (false, true) => Some("has both [[deviation.where]] and not_compared"),
            _ => None,
        }
    }
}

/// Parses the deviations file; `prefix` replaces `{prefix}` in topic regexes.
///
/// # Panics
/// On a malformed file or selector, naming the entry.
pub fn parse(text: &str, prefix: &str) -> Vec<Deviation> {
    let file: File = toml::from_str(text).unwrap_or_else(|e| panic!("deviations.toml: {e}"));
    file.deviation
        .into_iter()
        .map(|e| {
            let name = e.name;
            let places = e
                .places
                .into_iter()
                .map(|w| Place {
                    paths: w.paths.iter().map(|p| glob(p)).collect(),
                    outputs: w.outputs,
                    kinds: w.kinds,
                    topics: w.topics.map(|t| {
                        let t = t.replace("{prefix}", &regex::escape(prefix));
                        Regex::new(&format!("^(?:{t})$"))
                            .unwrap_or_else(|err| panic!("deviation {name}: topics: {err}"))
                    }),
                })
                .collect();
            Deviation {
                name,
                reason: e.reason,
                switch: e.switch,
                status: e.status,
                not_compared: e.not_compared,
                places,
            }
        })
        .collect()
}

/// A path glob as an anchored regex: `**` any text, `*` any text without `/`.
fn glob(pattern: &str) -> Regex {
    let mut re = String::from("^");
    let mut rest = pattern;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("**") {
            re.push_str(".*");
            rest = r;
        } else if let Some(r) = rest.strip_prefix('*') {
            re.push_str("[^/]*");
            rest = r;
        } else {
            let c = rest.chars().next().expect("not empty");
            re.push_str(&regex::escape(&c.to_string()));
            rest = &rest[c.len_utf8()..];
        }
    }
    re.push('$');
    Regex::new(&re).expect("an escaped glob is a valid regex")
}

/// The verdict over one run's differences.
#[derive(Debug, Default)]
pub struct Verdict {
    /// Per deviation (file order): the differences it explains.
    pub documented: Vec<(usize, Vec<Difference>)>,
    pub undocumented: Vec<Difference>,
    /// Deviations that explained nothing, or are malformed.
    pub stale: Vec<String>,
}

impl Verdict {
    pub fn failed(&self) -> bool {
        !self.undocumented.is_empty() || !self.stale.is_empty()
    }
}

/// Files each difference under the first deviation that matches it.
pub fn judge(deviations: &[Deviation], diffs: Vec<Difference>) -> Verdict {
    let mut documented: Vec<(usize, Vec<Difference>)> =
        (0..deviations.len()).map(|i| (i, Vec::new())).collect();
    let mut undocumented = Vec::new();
    for d in diffs {
        match deviations.iter().position(|dev| dev.matches(&d)) {
            Some(i) => documented[i].1.push(d),
            None => undocumented.push(d),
        }
    }
    let stale = deviations
        .iter()
        .zip(&documented)
        .filter_map(|(dev, (_, found))| match dev.malformed() {
            Some(problem) => Some(format!("{}: {problem}", dev.name)),
            None if found.is_empty() && dev.not_compared.is_none() => Some(format!(
                "{}: documented but no longer occurs; remove it",
                dev.name
            )),
            None => None,
        })
        .collect();
    Verdict {
        documented,
        undocumented,
        stale,
    }
}

/// The report: every deviation with its count and an example, the
/// undocumented differences grouped by where they show (with a count and an
/// example each) and then listed one by one, and the stale entries.
pub fn report(deviations: &[Deviation], verdict: &Verdict, list_limit: usize) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "documented deviations:");
    for (i, found) in &verdict.documented {
        let dev = &deviations[*i];
        let status = dev.status.as_deref().unwrap_or("deliberate");
        match &dev.not_compared {
            Some(why) => {
                let _ = writeln!(out, "  {} [{status}]: not compared: {why}", dev.name);
            }
            None => {
                let _ = writeln!(
                    out,
                    "  {} [{status}]: {} differences",
                    dev.name,
                    found.len()
                );
            }
        }
        let _ = writeln!(out, "      why: {}", dev.reason);
        if let Some(switch) = dev.switch.as_deref().filter(|s| !s.is_empty()) {
            let _ = writeln!(out, "      switch: {switch}");
        }
        if let Some(example) = found.first() {
            let _ = writeln!(out, "      e.g. {example}");
        }
    }
    if !verdict.undocumented.is_empty() {
        let _ = writeln!(out, "UNDOCUMENTED differences, by output, kind and path:");
        let mut groups: Vec<(String, usize, &Difference)> = Vec::new();
        for d in &verdict.undocumented {
            let group = format!("{} {} {}", d.output, d.kind, general_path(&d.path));
            match groups.iter_mut().find(|(g, _, _)| *g == group) {
                Some((_, n, _)) => *n += 1,
                None => groups.push((group, 1, d)),
            }
        }
        for (group, n, example) in &groups {
            let _ = writeln!(out, "  {group}: {n}\n      e.g. {example}");
        }
        let _ = writeln!(out, "UNDOCUMENTED differences, one by one:");
        for d in verdict.undocumented.iter().take(list_limit) {
            let _ = writeln!(out, "  {d}");
        }
        if verdict.undocumented.len() > list_limit {
            let _ = writeln!(
                out,
                "  ... and {} more",
                verdict.undocumented.len() - list_limit
            );
        }
    }
    for s in &verdict.stale {
        let _ = writeln!(out, "STALE deviation {s}");
    }
    out
}

/// A path with array indexes generalised, for grouping.
fn general_path(path: &str) -> String {
    static INDEX: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    INDEX
        .get_or_init(|| Regex::new(r"\[[0-9]+\]").expect("regex"))
        .replace_all(path, "[*]")
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn diff(output: &str, kind: &str, topic: &str, path: &str) -> Difference {
        Difference {
            output: output.into(),
            topic: topic.into(),
            index: 0,
            kind: kind.into(),
            key: "{}".into(),
            path: path.into(),
            ours: "1".into(),
            debezium: "2".into(),
        }
    }

    const FILE: &str = r#"
        [[deviation]]
        name = "float4-digits"
        reason = "issue 21 item 1"
        status = "to-fix"
        [[deviation.where]]
        paths = ["value/payload/after/c_float4", "value/payload/before/c_float4"]
        outputs = ["json_schemas"]

        [[deviation]]
        name = "context-headers"
        reason = "issue 21 item 1"
        switch = ""
        [[deviation.where]]
        paths = ["headers/__debezium.context.*"]
        kinds = ["c", "tombstone"]
        topics = '{prefix}\.public\..*'

        [[deviation]]
        name = "two-places"
        reason = "test"
        [[deviation.where]]
        paths = ["value/**/source/**"]
        [[deviation.where]]
        paths = ["value/other"]
        kinds = ["m"]
    "#;

    #[test]
    fn selectors_of_a_block_must_all_match() {
        let devs = parse(FILE, "p.x");
        let taskid = "headers/__debezium.context.taskId";
        let v = judge(
            &devs,
            vec![
                diff("json_schemas", "c", "t", "value/payload/after/c_float4"),
                diff("json_plain", "c", "t", "value/payload/after/c_float4"),
                diff("json_schemas", "c", "p.x.public.t", taskid),
                diff("json_schemas", "m", "p.x.public.t", taskid),
                diff("json_schemas", "c", "pZx.public.t", taskid),
                diff("json_schemas", "c", "t", "value/payload/source/origin"),
                diff("json_schemas", "c", "t", "value/payload/sourcex/origin"),
                diff("json_schemas", "m", "t", "value/other"),
                diff("json_schemas", "c", "t", "value/other"),
            ],
        );
        let counts: Vec<usize> = v.documented.iter().map(|(_, d)| d.len()).collect();
        assert_eq!(counts, [1, 1, 2]);
        let undocumented: Vec<(&str, &str)> = v
            .undocumented
            .iter()
            .map(|d| (d.output.as_str(), d.path.as_str()))
            .collect();
        assert_eq!(
            undocumented,
            [
                ("json_plain", "value/payload/after/c_float4"),
                ("json_schemas", taskid),
                ("json_schemas", taskid),
                ("json_schemas", "value/payload/sourcex/origin"),
                ("json_schemas", "value/other"),
            ]
        );
        assert!(v.failed());
    }

    #[test]
    fn a_deviation_that_no_longer_occurs_fails_the_run() {
        let devs = parse(FILE, "p");
        let v = judge(
            &devs,
            vec![diff(
                "json_schemas",
                "c",
                "t",
                "value/payload/after/c_float4",
            )],
        );
        assert!(v.undocumented.is_empty());
        assert_eq!(v.stale.len(), 2, "{:?}", v.stale);
        assert!(v.failed());
        let text = report(&devs, &v, 10);
        assert!(text.contains("STALE deviation context-headers"), "{text}");
    }

    #[test]
    fn an_entry_says_where_it_shows_or_why_it_is_not_compared() {
        let devs = parse(
            r#"
            [[deviation]]
            name = "nowhere"
            reason = "r"
            switch = "--x"

            [[deviation]]
            name = "masked"
            reason = "r"
            not_compared = "the comparator masks it"
            "#,
            "p",
        );
        let v = judge(&devs, vec![]);
        assert_eq!(v.stale.len(), 1, "{:?}", v.stale);
        assert!(
            v.stale[0].starts_with("nowhere: says neither"),
            "{:?}",
            v.stale
        );
        let text = report(&devs, &v, 1);
        assert!(
            text.contains("masked [deliberate]: not compared: the comparator masks it"),
            "{text}"
        );
    }

    #[test]
    fn globs() {
        assert!(glob("a/*/c").is_match("a/b/c"));
        assert!(!glob("a/*/c").is_match("a/b/x/c"));
        assert!(glob("a/**/c").is_match("a/b/x/c"));
        assert!(glob("v/fields[after]/x").is_match("v/fields[after]/x"));
        assert!(!glob("v/fields[after]/x").is_match("v/fieldsa/x"));
    }
}
