//! The report's test-backend-ops section (issue 46): what a ggml maintainer asks a reporter
//! for. The failing case lines of the probe that shows the failure (first few), the cases
//! passed and failed per op at every probe, and the line to paste in the built tree.

use crate::core::kinds::backend_ops::BackendOpsRun;
use crate::core::result::BisectResult;
use crate::report::{code, escape, short};

/// Failing case lines shown (the JSON keeps `core::kinds::backend_ops::KEPT_FAILURES`).
const SHOWN: usize = 5;

/// `None` for other probes, or when no probe's log could be read.
pub fn render(b: &BisectResult) -> Option<String> {
    let s = b.backend_ops.as_ref()?;
    if s.probes.is_empty() {
        return None;
    }
    let mut md = String::from("### test-backend-ops\n\n");
    // The failing side of the answer: the culprit for a regression, its parent's side (the
    // last failing probe) for a fix search. A run that died before it printed a case (its
    // output unflushed) failed too, with no case line: its probe's signature says how.
    let fails = |r: &BackendOpsRun| r.ops.iter().any(|o| o.failed > 0);
    let failing = b
        .target()
        .and_then(|t| s.probes.iter().find(|p| p.sha == t))
        .filter(|p| fails(&p.run))
        .or_else(|| s.probes.iter().rev().find(|p| fails(&p.run)));
    if let Some(p) = failing {
        let run = &p.run;
        let mut lines: Vec<String> = run
            .failures
            .iter()
            .take(SHOWN)
            .map(|c| c.signature())
            .collect();
        if lines.is_empty() {
            let died = b
                .probes
                .iter()
                .find(|q| q.sha == p.sha)
                .and_then(|q| q.signature.clone())
                .unwrap_or_else(|| "died before it printed a case".into());
            lines.push(died);
        }
        md.push_str(&format!(
            "Failing cases on {} at {} (first {} of {}):\n\n",
            code(&run.device),
            short(&p.sha, 10),
            lines.len(),
            run.ops.iter().map(|o| o.failed).sum::<u32>()
        ));
        md.push_str(&escape::code_block(&lines.join("\n")));
        let again = if run.failures.is_empty() {
            "The same run, in the tree built at that commit (it died before naming its case):"
        } else {
            "The first of them again, in the tree built at that commit:"
        };
        md.push_str(&format!("\n\n{again}\n\n"));
        if !b.applied.is_empty() {
            // The case may exist only in the patched tree (a fix's own test case).
            md.push_str(&format!(
                "(that tree with the applied patches: {} in the checkout before the build)\n\n",
                code(
                    &crate::core::applied::apply_lines(&b.applied)
                        .trim_end()
                        .replace('\n', " && ")
                )
            ));
        }
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
    use crate::core::kinds::backend_ops::{BackendOpsRun, Case, OpCount};
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

    /// REPEAT at llama.cpp #15631 on the H100: a segfault before stdout was flushed, so no
    /// case line, one failed case in the counts; the section names the crash, not "no failing case".
    #[test]
    fn a_run_that_died_before_printing_a_case_is_the_failing_side() {
        let mut b = crate::report::tests::bisect_found();
        let target = b.target().unwrap().to_string();
        let died = "REPEAT: crash (signal 11) in a case it had not printed";
        for p in b.probes.iter_mut().filter(|p| p.sha == target) {
            p.signature = Some(died.into());
        }
        b.backend_ops = Some(BackendOpsSection {
            ops: vec!["REPEAT".into()],
            op_params: None,
            probes: vec![BackendOpsProbe {
                sha: target,
                run: BackendOpsRun {
                    device: "CUDA0".into(),
                    ops: vec![OpCount {
                        op: "REPEAT".into(),
                        passed: 0,
                        failed: 1,
                        not_run: 0,
                    }],
                    failures: vec![],
                    devices: vec![],
                    op_params: None,
                },
            }],
        });
        let md = render(&b).unwrap();
        assert!(!md.contains("No probe had a failing case"), "{md}");
        assert!(md.contains(died), "{md}");
        assert!(
            md.contains("test-backend-ops test -o REPEAT -b CUDA0"),
            "{md}"
        );
    }
}
