//! The report's "Reproduce" section: the command line that asked the question, the prober's
//! own steps for the commit the answer hinges on, and where its log and report are.

use super::{answer_probe, target};
use crate::core::result::BisectResult;
use crate::report::{code, escape, short};

/// How to see it again: the command line that ran (recorded argv), else the question rebuilt
/// from range and predicate; then the prober's own steps and where the log is.
pub(super) fn reproduce(b: &BisectResult) -> Option<String> {
    let target = target(b)?;
    let mut md = String::from("### Reproduce\n\n");
    if b.invocation.argv.len() > 1 {
        let mut argv = b.invocation.argv.clone();
        argv[0] = "setrows-bisect".into();
        md.push_str("The bisection (the command line that produced this report):\n\n");
        md.push_str(
            &escape::code_block(&crate::report::shell_line(&argv)).replacen("text\n", "sh\n", 1),
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
            // `show` reads the default work dir unless told otherwise: name the run's own
            // (already in the command line above), or the hint points at nothing.
            let id = escape::sha(id, 16).trim_matches('`').to_string();
            let mut show = vec!["setrows-bisect".to_string(), "show".into(), id];
            if let Some(d) = work_dir_arg(&b.invocation.argv) {
                show.extend(["--work-dir".to_string(), d]);
            }
            md.push_str(&format!(" ({})", code(&crate::report::shell_line(&show))));
        }
        md.push_str(".\n");
    }
    Some(md)
}

/// The `--work-dir` a recorded command line named, if any.
fn work_dir_arg(argv: &[String]) -> Option<String> {
    let mut it = argv.iter();
    while let Some(a) = it.next() {
        if a == "--work-dir" {
            return it.next().cloned();
        }
        if let Some(d) = a.strip_prefix("--work-dir=") {
            return Some(d.to_string());
        }
    }
    None
}
