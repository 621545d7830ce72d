//! How the process ends: the exit codes, and the two kinds of failure the command line tells
//! apart by them (bad input from the user, 2; the machinery, 3). Anything else that reaches
//! `main` is treated as infrastructure. docs/results.md ("Exit codes") is their user-facing
//! table; a test below keeps it and `Exit` the same.

/// Every code the binary exits with. Decided here and nowhere else, so a script that reads the
/// code (CI, `git bisect run`, a nightly job) can trust one table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// The command did its work; a search found its answer.
    Ok,
    /// A search ended without one answer: skips hide the boundary, or an endpoint does not
    /// behave as claimed.
    Inconclusive,
    /// `matrix --build-only`: a cell's build failed, the finding a compile check exists to
    /// report. It shares 1 with `Inconclusive`: both are answers, neither is a crash of ours.
    BuildFailed,
    /// Bad flag, file, key or ref; nothing was run.
    Usage,
    /// The machinery failed after retries; never a verdict.
    Infra,
    /// Ctrl-C (or SIGTERM/SIGHUP): the shell's 128 + SIGINT, which a caller already reads as
    /// "stopped by the user"; finished probes are stored.
    Interrupted,
    /// The step supervisor (the binary re-run as a step's group leader) could not start its
    /// step, or cannot tell how it ended: the shell's "command not found", so the step reads
    /// as not run, never as a test that failed on its own.
    StepLost,
    /// The step supervisor found the tool gone: it kills its tree and leaves as a SIGKILLed
    /// process would, the death the tool itself met.
    Orphaned,
    /// The step supervisor ends as its step did, so the tool reads the step's own code.
    Step(i32),
}

impl Exit {
    /// The tool's own codes, in the order docs/results.md lists them; the supervisor's are the
    /// step's and are left out.
    pub const TOOL: [Exit; 6] = [
        Exit::Ok,
        Exit::Inconclusive,
        Exit::BuildFailed,
        Exit::Usage,
        Exit::Infra,
        Exit::Interrupted,
    ];

    /// The number the process exits with. `const`: a forked child calls it before exec, where
    /// nothing but plain arithmetic is safe.
    pub const fn code(self) -> i32 {
        match self {
            Exit::Ok => 0,
            Exit::Inconclusive | Exit::BuildFailed => 1,
            Exit::Usage => 2,
            Exit::Infra => 3,
            Exit::Interrupted => 130,
            Exit::StepLost => 127,
            Exit::Orphaned => 137,
            Exit::Step(code) => code,
        }
    }

    /// A search's end (commit bisect and bisect-config): anything short of one answer is
    /// inconclusive. Told as a bool because this module sits under every layer and names none.
    pub fn of_search(found: bool) -> Exit {
        match found {
            true => Exit::Ok,
            false => Exit::Inconclusive,
        }
    }

    /// An error that reached `main`: the first `CliError` in its chain decides.
    pub fn of_error(err: &anyhow::Error) -> Exit {
        for cause in err.chain() {
            if let Some(e) = cause.downcast_ref::<CliError>() {
                return match e {
                    CliError::Usage(_) => Exit::Usage,
                    CliError::Infra(_) => Exit::Infra,
                };
            }
        }
        Exit::Infra
    }

    /// A command line clap refused, or one it answered itself: `--help` and `--version` are
    /// answers (0); help shown because nothing was asked is a usage error, as clap has it.
    pub fn of_parse_error(e: &clap::Error) -> Exit {
        match e.use_stderr() {
            true => Exit::Usage,
            false => Exit::Ok,
        }
    }

    /// The code a result document recorded (a number there: the JSON's contract). Documents
    /// are written from `code()`, so an unknown number means a document from elsewhere: not a
    /// verdict of ours.
    pub fn recorded(code: i32) -> Exit {
        Exit::TOOL
            .into_iter()
            .find(|e| e.code() == code)
            .unwrap_or(Exit::Infra)
    }

    /// A failure after the result was in (posting it, say): success becomes the failure, so
    /// the job is red; an answer other than success keeps its own code, which says more.
    pub fn then_failed(self, failure: Exit) -> Exit {
        match self {
            Exit::Ok => failure,
            other => other,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Bad flag, file, key or ref: the message names it.
    #[error("{0}")]
    Usage(String),
    /// The machinery failed (git, disk, container engine, network) after retries.
    #[error("{0}")]
    Infra(String),
}

impl CliError {
    pub fn usage(msg: impl Into<String>) -> anyhow::Error {
        CliError::Usage(msg.into()).into()
    }
    pub fn infra(msg: impl Into<String>) -> anyhow::Error {
        CliError::Infra(msg.into()).into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The codes of docs/results.md's table, in its order.
    fn documented() -> Vec<i32> {
        let text = include_str!("../docs/results.md");
        let table = text
            .split("## Exit codes")
            .nth(1)
            .expect("docs/results.md has an \"Exit codes\" section");
        table
            .lines()
            .skip_while(|l| !l.starts_with('|'))
            .take_while(|l| l.starts_with('|'))
            .filter_map(|l| l.trim_matches('|').split('|').next()?.trim().parse().ok())
            .collect()
    }

    #[test]
    fn the_results_chapter_lists_every_code_of_the_tool() {
        let mut codes: Vec<i32> = Exit::TOOL.iter().map(|e| e.code()).collect();
        codes.dedup();
        assert_eq!(documented(), codes);
    }

    #[test]
    fn a_recorded_code_reads_back_as_itself() {
        for e in Exit::TOOL {
            assert_eq!(Exit::recorded(e.code()).code(), e.code());
        }
        assert_eq!(Exit::recorded(42), Exit::Infra);
    }

    #[test]
    fn a_failure_after_the_answer_keeps_an_inconclusive_answer() {
        assert_eq!(Exit::Ok.then_failed(Exit::Infra), Exit::Infra);
        assert_eq!(
            Exit::Inconclusive.then_failed(Exit::Infra),
            Exit::Inconclusive
        );
    }
}
