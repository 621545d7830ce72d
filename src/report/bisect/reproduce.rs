//! The report's "Reproduce" section: the command line that asked the question, the prober's
//! own steps for the commit the answer hinges on, and where its log and report are.

use super::answer_probe;
use crate::core::result::{BisectResult, DECODE_MODEL};
use crate::report::{code, escape, short};

/// How to see it again: the command line that ran (recorded argv), else the question rebuilt
/// from range and predicate; then the prober's own steps and where the log is.
pub(super) fn reproduce(b: &BisectResult) -> Option<String> {
    let target = b.target()?;
    let mut md = String::from("### Reproduce\n\n");
    if b.invocation.argv.len() > 1 {
        let mut argv = b.invocation.argv.clone();
        argv[0] = "setrows-bisect".into();
        md.push_str("The bisection (the command line that produced this report):\n\n");
        md.push_str(
            &escape::code_block(&crate::core::shell::line(&argv)).replacen("text\n", "sh\n", 1),
        );
        md.push_str("\n\n");
    } else {
        let mut c = format!(
            "setrows-bisect --good {} --bad {} --regress {}",
            b.range.good,
            b.range.bad,
            b.regress()
        );
        if let Some(re) = b.matcher() {
            c.push_str(&format!(" --match '{}'", re.replace('\'', r"'\''")));
        }
        md.push_str(
            "The bisection (rebuilt from the result, which predates recorded command lines: add the \
             original run's prober flags, e.g. `--repo`, `--backend`, `--repro-arg`, `--build`/`--script`):\n\n",
        );
        md.push_str(&escape::code_block(&c).replacen("text\n", "sh\n", 1));
        md.push_str("\n\n");
    }
    if let Some(r) = &b.reproducer {
        let what = r.what_ran();
        md.push_str(&format!(
            "Every probe ran {what} ({}; arguments: {}):\n\n",
            escape::inline(&r.extent()),
            escape::inline(&r.source)
        ));
        md.push_str(&escape::code_block(&r.command()).replacen("text\n", "sh\n", 1));
        md.push_str("\n\n");
        if !r.build_args.is_empty() {
            md.push_str(&format!(
                "built with these CMake arguments beside the tool's own: {}\n\n",
                escape::inline(&crate::core::shell::line(&r.build_args))
            ));
        }
        if r.is_decode() {
            md.push_str(&format!(
                "{}: the tiny random-weight llama model setrows-bisect writes for every decode probe \
                 (the same bytes every run), in each probe's build folder under the work dir.\n\n",
                code(DECODE_MODEL)
            ));
        }
    }
    if !b.applied.is_empty() {
        md.push_str(&applied(b));
    }
    if let Some(snippet) = &b.reproduce {
        md.push_str(&format!("One probe of {}, by hand:\n\n", short(target, 12)));
        md.push_str(&escape::code_block(snippet).replacen("text\n", "sh\n", 1));
        md.push_str("\n\n");
    }
    if let Some(p) = answer_probe(b) {
        md.push_str(&format!(
            "Its log: {} in the work dir",
            code(&crate::report::log_place(&p.log))
        ));
        if let Some(id) = &b.invocation.id {
            // `show` reads the default work dir unless told otherwise: a run with its own
            // says so (the path is in the command line above; the log line stays path-free).
            let id = escape::sha(id, 16).trim_matches('`').to_string();
            let show = code(&crate::core::shell::line(&[
                "setrows-bisect".into(),
                "show".into(),
                id,
            ]));
            if names_work_dir(&b.invocation.argv) {
                md.push_str(&format!(" ({show} with the same `--work-dir`)"));
            } else {
                md.push_str(&format!(" ({show})"));
            }
        }
        md.push_str(".\n");
    }
    Some(md)
}

/// Whether a recorded command line named its own `--work-dir`.
fn names_work_dir(argv: &[String]) -> bool {
    argv.iter()
        .any(|a| a == "--work-dir" || a.starts_with("--work-dir="))
}

/// `--apply`: what every probed tree had applied before its build, and the lines that apply
/// the saved copies in a checkout of a commit (a tree one does not apply to was a skip).
pub(crate) fn applied(b: &BisectResult) -> String {
    let mut md = String::from("Every probed tree had these patches applied before its build (a tree one did not apply to was skipped):\n\n");
    for a in &b.applied {
        md.push_str(&format!(
            "- {}\n",
            escape::inline(&crate::core::applied::describe_info(a))
        ));
    }
    md.push_str("\nIn a checkout of a commit, before the build:\n\n");
    md.push_str(
        &escape::code_block(crate::core::applied::apply_lines(&b.applied).trim_end())
            .replacen("text\n", "sh\n", 1),
    );
    md.push_str("\n\n");
    md
}
