//! JUnit XML for CI test reporting, through nextest's `quick-junit` (escaping, attribute
//! layout and rerun elements are its job). One `<testsuite>` per comment key.
//!
//! What counts as a failure follows the question asked:
//! - a matrix cell is a test of one configuration at one revision: a failing outcome is a
//!   `<failure>`, an untestable or unbuildable one `<skipped>`, an infrastructure error an
//!   `<error>`; infrastructure retries before the final attempt are reruns (`<rerunError>`, or
//!   `<flakyError>` when the final attempt passed);
//! - a bisection probe is evidence, not a test: a new-behaviour probe of a bisection that found
//!   its answer is expected (that is how the answer was found), so it passes with the outcome
//!   in its output; several runs of one commit are one case with the earlier failing runs as
//!   reruns; only the probes of an endpoint that contradicts the question fail. The `verdict`
//!   case passes when the answer was found and is an `<error>` when it is inconclusive.

use crate::core::outcome::{Outcome, Verdict};
use crate::core::result::{AnyResult, BisectResult, Cell, Conclusion};
use crate::core::search::Endpoint;
use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestRerun, TestSuite};
use std::time::Duration;

fn secs(s: f64) -> Duration {
    Duration::try_from_secs_f64(s.max(0.0)).unwrap_or_default()
}

/// The non-success kind of an outcome, or `None` for what is not a failure (pass, skips).
fn failing_kind(o: Outcome) -> Option<NonSuccessKind> {
    if o == Outcome::InfraError {
        Some(NonSuccessKind::Error)
    } else if o.is_failure() {
        Some(NonSuccessKind::Failure)
    } else {
        None
    }
}

fn message(o: Outcome, signature: Option<&str>) -> String {
    match signature {
        Some(s) => format!("{o}: {s}"),
        None => o.to_string(),
    }
}

/// A run answered by another commit's byte-identical artifacts: the verdict stands, but a CI
/// reader should know this commit's test never ran.
fn reused_note(reused_from: Option<&str>) -> String {
    reused_from
        .map(|sha| {
            let short: String = sha
                .chars()
                .filter(char::is_ascii_hexdigit)
                .take(12)
                .collect();
            format!(" [test skipped: artifacts identical to {short}]")
        })
        .unwrap_or_default()
}

/// `build_only`: the cell is a compile check (`matrix --build-only`), where a failed build is
/// the failure the check exists to find.
fn cell_case(classname: &str, name: String, c: &Cell, build_only: bool) -> TestCase {
    let msg = message(c.outcome, c.signature.as_deref());
    let mut status = if build_only && c.outcome == Outcome::BuildFailed {
        let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
        s.set_message(msg.clone()).set_type(c.outcome.as_str());
        s
    } else if c.outcome.is_skip() {
        let mut s = TestCaseStatus::skipped();
        s.set_message(msg.clone());
        s
    } else if let Some(kind) = failing_kind(c.outcome) {
        let mut s = TestCaseStatus::non_success(kind);
        s.set_message(msg.clone()).set_type(c.outcome.as_str());
        s
    } else {
        TestCaseStatus::success()
    };
    // Attempts before the last one ended in infrastructure errors (that is what is retried).
    for _ in 1..c.attempts {
        let mut r = TestRerun::new(NonSuccessKind::Error);
        r.set_message("infrastructure error, retried")
            .set_type("infra_error");
        status.add_rerun(r);
    }
    let mut t = TestCase::new(name, status);
    t.set_classname(classname.to_string())
        .set_time(secs(c.duration_s))
        .set_system_out(msg);
    t
}

fn bisect_cases(class: &str, b: &BisectResult) -> Vec<TestCase> {
    let wrong_endpoint = match &b.conclusion {
        Conclusion::BadEndpoint { which, .. } => Some(match which {
            Endpoint::Good => b.range.good.as_str(),
            Endpoint::Bad => b.range.bad.as_str(),
        }),
        _ => None,
    };
    // One case per commit, in the order first probed.
    let mut order: Vec<&str> = Vec::new();
    for p in &b.probes {
        if !order.contains(&p.sha.as_str()) {
            order.push(&p.sha);
        }
    }
    let mut v: Vec<TestCase> = order
        .into_iter()
        .map(|sha| {
            let runs: Vec<_> = b.probes.iter().filter(|p| p.sha == sha).collect();
            let last = runs[runs.len() - 1];
            let decisive = runs
                .iter()
                .find(|p| p.verdict == Verdict::New)
                .copied()
                .unwrap_or(last);
            let msg = message(decisive.outcome, decisive.signature.as_deref());
            let mut status = if Some(sha) == wrong_endpoint {
                let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
                s.set_message(format!("endpoint does not behave as claimed: {msg}"))
                    .set_type(decisive.outcome.as_str());
                s
            } else if decisive.outcome == Outcome::InfraError {
                let mut s = TestCaseStatus::non_success(NonSuccessKind::Error);
                s.set_message(msg.clone()).set_type("infra_error");
                s
            } else if decisive.verdict == Verdict::Skip {
                let mut s = TestCaseStatus::skipped();
                s.set_message(msg.clone());
                s
            } else {
                TestCaseStatus::success()
            };
            for p in runs.iter().filter(|p| !std::ptr::eq(**p, decisive)) {
                if let Some(kind) = failing_kind(p.outcome) {
                    let mut r = TestRerun::new(kind);
                    r.set_message(message(p.outcome, p.signature.as_deref()))
                        .set_type(p.outcome.as_str())
                        .set_time(secs(p.duration_s));
                    status.add_rerun(r);
                }
            }
            let title = b
                .info(sha)
                .map(|i| format!(" {}", i.title))
                .unwrap_or_default();
            let mut t = TestCase::new(format!("probe {sha}{title}"), status);
            let verdicts: Vec<String> = runs
                .iter()
                .map(|p| {
                    let v = p.verdict.as_str().to_string();
                    format!(
                        "{} ({v}){}",
                        message(p.outcome, p.signature.as_deref()),
                        reused_note(p.reused_from.as_deref())
                    )
                })
                .collect();
            t.set_classname(class.to_string())
                .set_time(secs(runs.iter().map(|p| p.duration_s).sum()))
                .set_system_out(verdicts.join("\n"));
            t
        })
        .collect();
    v.push(verdict_case(
        class,
        b.first_bad.as_ref().map(|s| format!("{} {s}", b.term)),
        "no single commit identified",
    ));
    v
}

fn verdict_case(class: &str, found: Option<String>, otherwise: &str) -> TestCase {
    let status = match &found {
        Some(_) => TestCaseStatus::success(),
        None => {
            let mut s = TestCaseStatus::non_success(NonSuccessKind::Error);
            s.set_message(otherwise).set_type("inconclusive");
            s
        }
    };
    let mut t = TestCase::new("verdict", status);
    t.set_classname(class.to_string())
        .set_system_out(found.unwrap_or_else(|| otherwise.to_string()));
    t
}

fn cases(r: &AnyResult) -> Vec<TestCase> {
    let class = super::key(r);
    match r {
        AnyResult::Matrix(m) => m
            .cells
            .iter()
            .map(|c| {
                cell_case(
                    &format!("matrix.{}", c.config),
                    c.sha.clone(),
                    c,
                    m.build_only,
                )
            })
            .collect(),
        AnyResult::Bisect(b) => bisect_cases(&class, b),
        AnyResult::BisectConfig(c) => {
            let mut v: Vec<TestCase> = c
                .probes
                .iter()
                .map(|p| {
                    // like a bisection probe: a failing value past the boundary is expected
                    let mut cell = p.cell.clone();
                    if c.first_failing.is_some() && p.verdict == Verdict::New {
                        cell.outcome = Outcome::Pass;
                    }
                    let mut t = cell_case(&class, format!("{}={}", c.axis, p.value), &cell, false);
                    t.set_system_out(message(p.cell.outcome, p.cell.signature.as_deref()));
                    t
                })
                .collect();
            v.push(verdict_case(
                &class,
                c.first_failing
                    .as_ref()
                    .map(|f| format!("first failing {} {f}", c.axis)),
                "no single value identified",
            ));
            if let Some(b) = &c.commit_bisect {
                v.extend(bisect_cases(&class, b));
            }
            v
        }
    }
}

/// One `<testsuite>` per comment key (matrix files from fan-out jobs merge into one suite).
pub fn render(results: &[&AnyResult]) -> String {
    let mut groups: Vec<(String, Vec<TestCase>)> = Vec::new();
    for r in results {
        let key = super::key(r);
        let cs = cases(r);
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => v.extend(cs),
            None => groups.push((key, cs)),
        }
    }
    let mut report = Report::new("setrows-bisect");
    for (key, cs) in groups {
        let mut suite = TestSuite::new(key);
        suite.add_test_cases(cs);
        report.add_test_suite(suite);
    }
    report
        .to_string()
        .unwrap_or_else(|e| format!("<!-- JUnit serialization failed: {e} -->\n"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::{bisect_found, cell, matrix};

    #[test]
    fn cells_become_cases_with_escaped_text_and_retries_as_reruns() {
        let mut bad = cell("rocm<6.4>", "abc", Outcome::GpuFault);
        bad.signature = Some("fault \"x\" & \u{1} y".into());
        let mut retried = cell("rocm-7", "abc", Outcome::Pass);
        retried.attempts = 2;
        let m = matrix(vec![
            bad,
            retried,
            cell("rocm-7", "def", Outcome::BuildFailed),
            cell("rocm-7", "fed", Outcome::InfraError),
        ]);
        let x = render(&[&AnyResult::Matrix(m)]);
        assert!(
            x.contains("tests=\"4\" skipped=\"1\" errors=\"1\" failures=\"1\""),
            "{x}"
        );
        assert!(x.contains("classname=\"matrix.rocm&lt;6.4&gt;\""), "{x}");
        assert!(x.contains("fault &quot;x&quot; &amp;"), "{x}");
        assert!(!x.contains('\u{1}'));
        assert!(x.contains("<flakyError"), "a retried pass is flaky: {x}");
        assert!(x.contains("<skipped"), "{x}");
    }

    #[test]
    fn a_compile_check_fails_on_a_failed_build_and_keeps_its_own_suite() {
        let mut m = matrix(vec![
            cell("hip-a", "abc", Outcome::Built),
            cell("hip-a", "def", Outcome::BuildFailed),
            cell("hip-b", "def", Outcome::Untestable),
        ]);
        m.build_only = true;
        let x = render(&[&AnyResult::Matrix(m.clone())]);
        assert!(
            x.contains("tests=\"3\" skipped=\"1\" errors=\"0\" failures=\"1\""),
            "{x}"
        );
        assert!(x.contains("type=\"build_failed\""), "{x}");
        assert!(x.contains("<testsuite name=\"matrix-build\""), "{x}");
        let md = m.markdown();
        assert!(md.contains("(build only: no test ran)"), "{md}");
        assert!(
            md.contains("✅ built") && md.contains("❌ build_failed"),
            "{md}"
        );
        // The same cells in a GPU matrix: a failed build is a skip there.
        m.build_only = false;
        let x = render(&[&AnyResult::Matrix(m)]);
        assert!(
            x.contains("skipped=\"2\" errors=\"0\" failures=\"0\""),
            "{x}"
        );
    }

    #[test]
    fn a_found_bisection_has_no_failures_and_an_inconclusive_one_errs() {
        let b = bisect_found();
        let x = render(&[&AnyResult::Bisect(Box::new(b.clone()))]);
        assert!(x.contains("errors=\"0\" failures=\"0\""), "{x}");
        assert!(x.contains("gpu_fault: Memory access fault"), "{x}");
        let mut b = b;
        b.first_bad = None;
        b.conclusion = Conclusion::Ambiguous {
            indices: vec![1, 2],
        };
        let x = render(&[&AnyResult::Bisect(Box::new(b))]);
        assert!(x.contains("name=\"verdict\""), "{x}");
        assert!(
            x.contains("<error message=\"no single commit identified\" type=\"inconclusive\""),
            "{x}"
        );
    }

    #[test]
    fn reruns_of_one_commit_are_one_case() {
        let mut b = bisect_found();
        let mut again = b.probes[1].clone();
        again.outcome = Outcome::Crash;
        b.probes.insert(1, again);
        let x = render(&[&AnyResult::Bisect(Box::new(b))]);
        assert_eq!(x.matches("<testcase").count(), 3, "{x}");
        assert!(x.contains("<flakyFailure"), "{x}");
    }
}
