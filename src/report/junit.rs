//! JUnit XML for CI test reporting: each matrix cell and each bisect probe is a test case, so
//! the CI's test view shows which configuration/commit failed and how.

use crate::core::outcome::Outcome;
use crate::core::result::{AnyResult, BisectResult, Cell};

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

/// What a test case reports: a probe outcome, or a verdict (an inconclusive one is an error).
#[derive(Clone, Copy)]
enum Status {
    Probe(Outcome),
    Found,
    Inconclusive,
}

impl Status {
    fn failure(self) -> bool {
        matches!(self, Status::Probe(o) if o.is_failure())
    }
    fn skipped(self) -> bool {
        matches!(self, Status::Probe(o) if o.is_skip())
    }
    fn error(self) -> bool {
        matches!(
            self,
            Status::Probe(Outcome::InfraError) | Status::Inconclusive
        )
    }
    fn text(self) -> &'static str {
        match self {
            Status::Probe(o) => o.as_str(),
            Status::Found => "pass",
            Status::Inconclusive => "inconclusive",
        }
    }
}

struct Case {
    classname: String,
    name: String,
    status: Status,
    time: f64,
    signature: Option<String>,
}

impl Case {
    fn xml(&self) -> String {
        let mut s = format!(
            "    <testcase classname=\"{}\" name=\"{}\" time=\"{:.3}\"",
            xml_escape(&self.classname),
            xml_escape(&self.name),
            self.time
        );
        let kind = self.status.text();
        let msg = xml_escape(self.signature.as_deref().unwrap_or(kind));
        let inner = if self.status.failure() {
            format!("      <failure message=\"{msg}\" type=\"{kind}\"/>\n")
        } else if self.status.skipped() {
            format!("      <skipped message=\"{kind}\"/>\n")
        } else if self.status.error() {
            format!("      <error message=\"{msg}\" type=\"{kind}\"/>\n")
        } else {
            String::new()
        };
        if inner.is_empty() {
            s.push_str("/>\n");
        } else {
            s.push_str(&format!(">\n{inner}    </testcase>\n"));
        }
        s
    }
}

fn cell_case(classname: String, name: String, c: &Cell) -> Case {
    Case {
        classname,
        name,
        status: Status::Probe(c.outcome),
        time: c.duration_s,
        signature: c.signature.clone(),
    }
}

fn bisect_cases(class: &str, b: &BisectResult) -> Vec<Case> {
    let mut v: Vec<Case> = b
        .probes
        .iter()
        .map(|p| Case {
            classname: class.to_string(),
            name: format!("probe {}", p.sha),
            status: Status::Probe(p.outcome),
            time: p.duration_s,
            signature: p.signature.clone(),
        })
        .collect();
    v.push(Case {
        classname: class.to_string(),
        name: "verdict".into(),
        status: if b.first_bad.is_some() {
            Status::Found
        } else {
            Status::Inconclusive
        },
        time: 0.0,
        signature: Some(match &b.first_bad {
            Some(s) => format!("{} {s}", b.term),
            None => "no single commit identified".into(),
        }),
    });
    v
}

fn cases(r: &AnyResult) -> Vec<Case> {
    let class = super::key(r);
    match r {
        AnyResult::Matrix(m) => m
            .cells
            .iter()
            .map(|c| cell_case(format!("matrix.{}", c.config), c.sha.clone(), c))
            .collect(),
        AnyResult::Bisect(b) => bisect_cases(&class, b),
        AnyResult::BisectConfig(c) => {
            let mut v: Vec<Case> = c
                .probes
                .iter()
                .map(|p| cell_case(class.clone(), format!("{}={}", c.axis, p.value), &p.cell))
                .collect();
            v.push(Case {
                classname: class.clone(),
                name: "verdict".into(),
                status: if c.first_failing.is_some() {
                    Status::Found
                } else {
                    Status::Inconclusive
                },
                time: 0.0,
                signature: Some(match &c.first_failing {
                    Some(f) => format!("first failing {} {f}", c.axis),
                    None => "no single value identified".into(),
                }),
            });
            if let Some(b) = &c.commit_bisect {
                v.extend(bisect_cases(&class, b));
            }
            v
        }
    }
}

/// One `<testsuite>` per comment key (matrix files from fan-out jobs merge into one suite).
pub fn render(results: &[&AnyResult]) -> String {
    let mut groups: Vec<(String, Vec<Case>)> = Vec::new();
    for r in results {
        let key = super::key(r);
        let cs = cases(r);
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => v.extend(cs),
            None => groups.push((key, cs)),
        }
    }
    let mut suites = String::new();
    let (mut total, mut failures, mut errors, mut skipped) = (0, 0, 0, 0);
    for (key, cs) in groups {
        let f = cs.iter().filter(|c| c.status.failure()).count();
        let s = cs.iter().filter(|c| c.status.skipped()).count();
        let e = cs.iter().filter(|c| c.status.error()).count();
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
    use crate::report::tests::{bisect_found, cell, matrix};

    #[test]
    fn cells_become_cases_with_escaped_text() {
        let mut bad = cell("rocm<6.4>", "abc", Outcome::GpuFault);
        bad.signature = Some("fault \"x\" & \u{1} y".into());
        let m = matrix(vec![
            bad,
            cell("rocm-7", "abc", Outcome::Pass),
            cell("rocm-7", "def", Outcome::BuildFailed),
            cell("rocm-7", "fed", Outcome::InfraError),
        ]);
        let x = render(&[&AnyResult::Matrix(m)]);
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
        let mut b = bisect_found();
        b.first_bad = None;
        let x = render(&[&AnyResult::Bisect(Box::new(b))]);
        assert!(x.contains("name=\"verdict\""), "{x}");
        assert!(
            x.contains("<error message=\"no single commit identified\" type=\"inconclusive\"/>"),
            "{x}"
        );
    }
}
