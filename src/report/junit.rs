//! JUnit XML for CI test reporting: each matrix cell and each bisect probe is a test case, so
//! the CI's test view shows which configuration/commit failed and how.

use crate::core::outcome::Outcome;
use crate::report::summary::{ResultFile, ResultKind};
use serde_json::Value;

/// Escapes text for XML attributes and content; drops characters XML 1.0 cannot carry.
pub fn xml_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => {}
            c => out.push(c),
        }
    }
    out
}

struct Case {
    classname: String,
    name: String,
    outcome: String,
    time: f64,
    signature: Option<String>,
    output: Option<String>,
}

impl Case {
    fn xml(&self) -> String {
        let mut s = format!(
            "    <testcase classname=\"{}\" name=\"{}\" time=\"{:.3}\"",
            xml_escape(&self.classname),
            xml_escape(&self.name),
            self.time
        );
        let msg = xml_escape(self.signature.as_deref().unwrap_or(&self.outcome));
        let parsed = serde_json::from_value::<Outcome>(Value::String(self.outcome.clone())).ok();
        let inner = match parsed {
            Some(Outcome::Pass) => String::new(),
            Some(o) if o.is_failure() => format!(
                "      <failure message=\"{msg}\" type=\"{}\"/>\n",
                xml_escape(&self.outcome)
            ),
            Some(o) if o.is_skip() => format!(
                "      <skipped message=\"{}\"/>\n",
                xml_escape(&self.outcome)
            ),
            _ => format!(
                "      <error message=\"{msg}\" type=\"{}\"/>\n",
                xml_escape(&self.outcome)
            ),
        };
        let out = self
            .output
            .as_deref()
            .filter(|o| !o.is_empty())
            .map(|o| format!("      <system-out>{}</system-out>\n", xml_escape(o)))
            .unwrap_or_default();
        if inner.is_empty() && out.is_empty() {
            s.push_str("/>\n");
        } else {
            s.push_str(&format!(">\n{inner}{out}    </testcase>\n"));
        }
        s
    }
}

fn cases(r: &ResultFile) -> Vec<Case> {
    match &r.kind {
        ResultKind::Matrix(m) => m
            .cells
            .iter()
            .map(|c| Case {
                classname: format!("matrix.{}", c.config),
                name: c.revision.clone(),
                outcome: c.outcome.clone(),
                time: c.duration_s.unwrap_or(0.0),
                signature: c.signature.clone(),
                output: c.output_tail.clone(),
            })
            .collect(),
        ResultKind::Bisect(b) => {
            let class = r.key();
            let mut v: Vec<Case> = b
                .probes
                .iter()
                .map(|p| Case {
                    classname: class.clone(),
                    name: format!("probe {}", p.sha),
                    outcome: p.outcome.clone(),
                    time: p.duration_s.unwrap_or(0.0),
                    signature: p.signature.clone(),
                    output: p.output_tail.clone(),
                })
                .collect();
            // The verdict itself: an inconclusive bisect is an error in CI terms.
            v.push(Case {
                classname: class,
                name: "verdict".into(),
                outcome: if b.first_bad.is_some() {
                    "pass".into()
                } else {
                    "inconclusive".into()
                },
                time: 0.0,
                signature: Some(match &b.first_bad {
                    Some(s) => format!("first bad commit {s}"),
                    None => "no single commit identified".into(),
                }),
                output: None,
            });
            v
        }
    }
}

/// One `<testsuite>` per comment key (matrix files from fan-out jobs merge into one suite).
pub fn render(results: &[ResultFile]) -> String {
    let mut groups: Vec<(String, Vec<Case>)> = Vec::new();
    for r in results {
        let key = r.key();
        let cs = cases(r);
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => v.extend(cs),
            None => groups.push((key, cs)),
        }
    }
    let mut suites = String::new();
    let (mut total, mut failures, mut errors, mut skipped) = (0, 0, 0, 0);
    for (key, cs) in groups {
        let count = |f: &dyn Fn(Option<Outcome>) -> bool| {
            cs.iter()
                .filter(|c| f(serde_json::from_value(Value::String(c.outcome.clone())).ok()))
                .count()
        };
        let f = count(&|o| o.is_some_and(Outcome::is_failure));
        let s = count(&|o| o.is_some_and(Outcome::is_skip));
        let e = count(&|o| o.is_none() || o == Some(Outcome::InfraError));
        let time: f64 = cs.iter().map(|c| c.time).sum();
        suites.push_str(&format!(
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{f}\" errors=\"{e}\" skipped=\"{s}\" time=\"{time:.3}\">\n",
            xml_escape(&key),
            cs.len()
        ));
        for c in &cs {
            suites.push_str(&c.xml());
        }
        suites.push_str("  </testsuite>\n");
        total += cs.len();
        failures += f;
        errors += e;
        skipped += s;
    }
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"setrows-bisect\" tests=\"{total}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"{skipped}\">\n{suites}</testsuites>\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::summary::parse;
    use serde_json::json;

    #[test]
    fn cells_become_cases_with_escaped_text() {
        let v = json!({"cells": [
            {"config_id": "rocm<6.4>", "revision": "abc", "outcome": "gpu_fault", "signature": "fault \"x\" & \u{1} y", "duration_s": 2.0},
            {"config_id": "rocm-7", "revision": "abc", "outcome": "pass", "duration_s": 1.0},
            {"config_id": "rocm-7", "revision": "def", "outcome": "build_failed"},
            {"config_id": "rocm-7", "revision": "fed", "outcome": "infra_error"}
        ]});
        let x = render(&[parse(v, "m").unwrap()]);
        assert!(
            x.contains("tests=\"4\" failures=\"1\" errors=\"1\" skipped=\"1\""),
            "{x}"
        );
        assert!(x.contains("classname=\"matrix.rocm&lt;6.4&gt;\""), "{x}");
        assert!(
            x.contains("message=\"fault &quot;x&quot; &amp;  y\""),
            "{x}"
        );
        assert!(!x.contains('\u{1}'));
    }

    #[test]
    fn inconclusive_bisect_is_an_error_case() {
        let v = json!({"probes": [{"sha": "a", "outcome": "pass"}], "candidates": ["b", "c"]});
        let x = render(&[parse(v, "b").unwrap()]);
        assert!(x.contains("name=\"verdict\""), "{x}");
        assert!(
            x.contains("<error message=\"no single commit identified\" type=\"inconclusive\"/>"),
            "{x}"
        );
    }
}
