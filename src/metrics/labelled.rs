//! Several pipelines' scrape pages as one: every sample gets a
//! `pipeline="<name>"` label, and each metric family is written once (its
//! `# HELP`/`# TYPE` lines, then the samples of every pipeline), as the
//! text format requires. Metric names stay what they are for one pipeline.
//!
//! The process's own series (`process_*`: memory, CPU, file descriptors)
//! describe the process, not a pipeline: they are written once, unlabelled,
//! so that summing over pipelines does not count the process twice.
//!
//! Pipeline names are validated ([`crate::config::pipelines::PipelineName`]:
//! lowercase letters, digits, '_'), so they need no escaping in a label.

/// The label that tells pipelines apart.
pub const PIPELINE_LABEL: &str = "pipeline";

/// Families whose samples belong to the process rather than to a pipeline.
const PROCESS_PREFIX: &str = "process_";

/// One family of a page: its comment lines and its samples.
#[derive(Debug, Default)]
struct Family<'a> {
    name: &'a str,
    /// The page it was first seen on: its comments are taken from there.
    page: usize,
    comments: Vec<&'a str>,
    samples: Vec<String>,
}

/// The pages `(pipeline, page)` merged into one, families in the order of
/// their first appearance.
pub fn merge(pages: &[(String, String)]) -> String {
    let mut families: Vec<Family<'_>> = Vec::new();
    for (index, (pipeline, page)) in pages.iter().enumerate() {
        let mut current: Option<usize> = None;
        for line in page.lines().filter(|l| !l.is_empty() && *l != "# EOF") {
            if let Some(comment) = line.strip_prefix("# ") {
                let name = comment.split(' ').nth(1).unwrap_or_default();
                let at = match families.iter().position(|f| f.name == name) {
                    Some(at) => at,
                    None => {
                        families.push(Family {
                            name,
                            page: index,
                            ..Family::default()
                        });
                        families.len() - 1
                    }
                };
                if families[at].page == index {
                    families[at].comments.push(line);
                }
                current = Some(at);
                continue;
            }
            let Some(at) = current else { continue };
            let family = &mut families[at];
            if family.name.starts_with(PROCESS_PREFIX) {
                if index == 0 {
                    family.samples.push(line.to_owned());
                }
            } else {
                family.samples.push(with_label(line, pipeline));
            }
        }
    }
    let mut out = String::with_capacity(pages.iter().map(|(_, p)| p.len()).sum());
    for family in &families {
        for line in &family.comments {
            out.push_str(line);
            out.push('\n');
        }
        for line in &family.samples {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// `line` (a sample) with `pipeline="<pipeline>"` as its first label.
fn with_label(line: &str, pipeline: &str) -> String {
    let end = line.find(['{', ' ']).unwrap_or(line.len());
    let (name, rest) = line.split_at(end);
    match rest.strip_prefix('{') {
        Some(labels) if labels.starts_with('}') => {
            format!("{name}{{{PIPELINE_LABEL}=\"{pipeline}\"{labels}")
        }
        Some(labels) => format!("{name}{{{PIPELINE_LABEL}=\"{pipeline}\",{labels}"),
        None => format!("{name}{{{PIPELINE_LABEL}=\"{pipeline}\"}}{rest}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_every_sample_and_writes_each_family_once() {
        let a = "# HELP x_total X.\n# TYPE x_total counter\nx_total 1\n\
                 # HELP t Table.\n# TYPE t gauge\nt{table=\"p.a\"} 2\n\
                 # HELP process_rss RSS.\n# TYPE process_rss gauge\nprocess_rss 100\n";
        let b = "# HELP x_total X.\n# TYPE x_total counter\nx_total 3\n\
                 # HELP t Table.\n# TYPE t gauge\n\
                 # HELP process_rss RSS.\n# TYPE process_rss gauge\nprocess_rss 100\n\
                 # HELP only_b B.\n# TYPE only_b gauge\nonly_b{} 4\n";
        let merged = merge(&[("a".into(), a.into()), ("b".into(), b.into())]);
        assert_eq!(
            merged,
            "# HELP x_total X.\n# TYPE x_total counter\n\
             x_total{pipeline=\"a\"} 1\nx_total{pipeline=\"b\"} 3\n\
             # HELP t Table.\n# TYPE t gauge\nt{pipeline=\"a\",table=\"p.a\"} 2\n\
             # HELP process_rss RSS.\n# TYPE process_rss gauge\nprocess_rss 100\n\
             # HELP only_b B.\n# TYPE only_b gauge\nonly_b{pipeline=\"b\"} 4\n"
        );
    }

    #[test]
    fn a_real_page_keeps_its_families_and_gains_the_label() {
        let m = crate::metrics::Metrics::new();
        m.event("public.a", "c", 10);
        let page = m.render(true);
        let merged = merge(&[("orders".into(), page.clone())]);
        let types = |text: &str| text.lines().filter(|l| l.starts_with("# TYPE")).count();
        assert_eq!(types(&merged), types(&page));
        assert!(
            merged.contains(
                "\npgcdc_events_total{pipeline=\"orders\",table=\"public.a\",op=\"c\"} 1\n"
            ),
            "{merged}"
        );
        assert!(
            merged.contains("\npgcdc_ready{pipeline=\"orders\"} 1\n"),
            "{merged}"
        );
        for line in merged.lines().filter(|l| !l.starts_with('#')) {
            assert!(
                line.starts_with(PROCESS_PREFIX) || line.contains("{pipeline=\"orders\""),
                "{line}"
            );
        }
    }
}
