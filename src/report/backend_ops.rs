//! The report's test-backend-ops section (issue 46): what a ggml maintainer asks a reporter
//! for. The failing case lines of the probe that shows the failure (first few), the cases
//! passed and failed per op at every probe, and the line to paste in the built tree.

use super::{code, escape, short};
use crate::core::result::BisectResult;

/// Failing case lines shown (the JSON keeps `core::backend_ops::KEPT_FAILURES`).
const SHOWN: usize = 5;

/// `None` for other probes, or when no probe's log could be read.
pub fn render(b: &BisectResult) -> Option<String> {
    let s = b.backend_ops.as_ref()?;
    if s.probes.is_empty() {
        return None;
    }
    let mut md = String::from("### test-backend-ops\n\n");
    // The failing side of the answer: the culprit for a regression, its parent's side (the
    // last failing probe) for a fix search.
    let failing = b
        .target()
        .and_then(|t| s.at(t))
        .filter(|r| !r.failures.is_empty())
        .or_else(|| {
            s.probes
                .iter()
                .rev()
                .map(|p| &p.run)
                .find(|r| !r.failures.is_empty())
        });
    let failing_sha = failing.and_then(|f| {
        s.probes
            .iter()
            .find(|p| &p.run == f)
            .map(|p| p.sha.as_str())
    });
    if let (Some(run), Some(sha)) = (failing, failing_sha) {
        md.push_str(&format!(
            "Failing cases on {} at {} (first {} of {}):\n\n",
            code(&run.device),
            short(sha, 10),
            run.failures.len().min(SHOWN),
            run.ops.iter().map(|o| o.failed).sum::<u32>()
        ));
        let lines: Vec<String> = run
            .failures
            .iter()
            .take(SHOWN)
            .map(|c| c.signature())
            .collect();
        md.push_str(&escape::code_block(&lines.join("\n")));
        md.push_str("\n\nThe first of them again, in the tree built at that commit:\n\n");
        md.push_str(&escape::code_block(&run.reproducer()).replacen("text\n", "sh\n", 1));
        md.push_str("\n\n");
    } else {
        md.push_str("No probe had a failing case.\n\n");
    }
    md.push_str(
        "| commit | op | passed | failed | not run on the device |\n|---|---|---|---|---|\n",
    );
    for p in &s.probes {
        for o in &p.run.ops {
            md.push_str(&format!(
                "| {} | {} | {} | {} | {} |\n",
                short(&p.sha, 10),
                code(&o.op),
                o.passed,
                o.failed,
                o.not_run
            ));
        }
    }
    Some(md)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::backend_ops::{BackendOpsRun, Case, OpCount};
    use crate::core::result::{BackendOpsProbe, BackendOpsSection};

    #[test]
    fn the_section_shows_failing_lines_counts_and_the_line_to_paste() {
        let mut b = crate::report::tests::bisect_found();
        let target = b.target().unwrap().to_string();
        let case = Case {
            op: "SET_ROWS".into(),
            params: "type=f16,ne=[5,1,1,1]".into(),
            error: Some("NMSE over its limit".into()),
        };
        b.backend_ops = Some(BackendOpsSection {
            ops: vec!["SET_ROWS".into()],
            op_params: None,
            probes: vec![BackendOpsProbe {
                sha: target,
                run: BackendOpsRun {
                    device: "ROCm0".into(),
                    ops: vec![OpCount {
                        op: "SET_ROWS".into(),
                        passed: 40,
                        failed: 1,
                        not_run: 2,
                    }],
                    failures: vec![case],
                    devices: vec!["ROCm0".into(), "CPU".into()],
                    op_params: None,
                },
            }],
        });
        let md = render(&b).unwrap();
        assert!(
            md.contains("SET_ROWS(type=f16,ne=[5,1,1,1]): NMSE over its limit"),
            "{md}"
        );
        assert!(
            md.contains(
                "test-backend-ops test -o SET_ROWS -p '^type=f16,ne=\\[5,1,1,1\\]$' -b ROCm0"
            ),
            "{md}"
        );
        assert!(md.contains("| `SET_ROWS` | 40 | 1 | 2 |"), "{md}");
        assert!(crate::report::bisect::markdown(&b).contains("### test-backend-ops"));
        b.backend_ops = None;
        assert_eq!(render(&b), None);
    }
}
