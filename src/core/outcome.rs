//! The one vocabulary for what a probe did, and the predicate that turns it into old/new.
//!
//! Every part of the tool (host runs, container runs, the bundled reproducer, the matrix, the
//! GitHub report) speaks in these words, so a result stored by one part means the same to all.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::fmt;

/// What happened when a probe ran. Classification lives with whoever ran the probe; the
/// meaning of each word is fixed here.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The test ran and reported success.
    Pass,
    /// The test ran to completion and reported a wrong result (non-zero exit, no signal).
    WrongResult,
    /// A GPU memory fault / illegal access / hipError / cudaError was reported.
    GpuFault,
    /// Killed by a signal, aborted, or exited >= 128.
    Crash,
    /// Ran past its timeout and was killed.
    Hang,
    /// The build step failed: a skip, never a verdict.
    BuildFailed,
    /// The test declared itself unable to test this revision (exit 125, or the reproducer's
    /// "unsupported" exit 3): a skip, never a verdict.
    Untestable,
    /// Our own machinery failed (container engine down, disk full, git error): retried, never a
    /// verdict, never stored as a result.
    InfraError,
}

impl Outcome {
    pub const ALL: [Outcome; 8] = [
        Outcome::Pass,
        Outcome::WrongResult,
        Outcome::GpuFault,
        Outcome::Crash,
        Outcome::Hang,
        Outcome::BuildFailed,
        Outcome::Untestable,
        Outcome::InfraError,
    ];

    /// A failure of the code under test (as opposed to a skip or an infrastructure problem).
    pub fn is_failure(self) -> bool {
        matches!(
            self,
            Outcome::WrongResult | Outcome::GpuFault | Outcome::Crash | Outcome::Hang
        )
    }

    /// Outcomes that can never decide between old and new.
    pub fn is_skip(self) -> bool {
        matches!(self, Outcome::BuildFailed | Outcome::Untestable)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::WrongResult => "wrong_result",
            Outcome::GpuFault => "gpu_fault",
            Outcome::Crash => "crash",
            Outcome::Hang => "hang",
            Outcome::BuildFailed => "build_failed",
            Outcome::Untestable => "untestable",
            Outcome::InfraError => "infra_error",
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which side of the boundary a probe landed on, in the terms of the question being asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Behaves like the `--good` endpoint.
    Old,
    /// Behaves like the `--bad` endpoint.
    New,
    /// Cannot tell (build failed, untestable).
    Skip,
}

impl Verdict {
    /// The word reports, progress lines and JUnit use (the JSON's spelling).
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Old => "old",
            Verdict::New => "new",
            Verdict::Skip => "skip",
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What counts as "new" behaviour (cargo-bisect-rustc's `--regress`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Regress {
    /// New = any failure (wrong result, fault, crash, hang). Finds the first bad commit.
    Error,
    /// New = success; old = failing. Finds the commit that fixed it.
    Success,
    /// New = a crash or GPU fault (signals/aborts) only; wrong results and hangs count as old.
    Crash,
}

impl Regress {
    /// The words the report uses for the boundary commit.
    pub fn culprit_term(self) -> &'static str {
        match self {
            Regress::Success => "first fixed commit",
            _ => "first bad commit",
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Regress::Error => "error",
            Regress::Success => "success",
            Regress::Crash => "crash",
        }
    }
}

/// Maps an outcome (plus the probe's output, for `--match`) to old/new/skip.
///
/// A failure whose output does not match the required signature counts as "not this bug":
/// old for `error`/`crash`, and (for `success`) not the failure whose fix we look for, so new.
/// This follows cargo-bisect-rustc: a different failure is baseline behaviour, not a skip,
/// so an unrelated breakage cannot be mistaken for the bug.
#[derive(Debug, Clone)]
pub struct Predicate {
    pub regress: Regress,
    pub signature: Option<regex::Regex>,
}

impl Predicate {
    pub fn new(regress: Regress, signature: Option<regex::Regex>) -> Self {
        Predicate { regress, signature }
    }

    /// Stable text identifying the predicate, part of nothing stored (results are stored raw,
    /// so changing `--regress` or `--match` reuses every probe).
    pub fn describe(&self) -> String {
        match &self.signature {
            Some(re) => format!("regress={} match={}", self.regress.as_str(), re.as_str()),
            None => format!("regress={}", self.regress.as_str()),
        }
    }

    fn bug_present(&self, outcome: Outcome, output: &str) -> bool {
        let kind_ok = match self.regress {
            Regress::Error | Regress::Success => outcome.is_failure(),
            Regress::Crash => matches!(outcome, Outcome::Crash | Outcome::GpuFault),
        };
        kind_ok && self.signature.as_ref().is_none_or(|re| re.is_match(output))
    }

    pub fn judge(&self, outcome: Outcome, output: &str) -> Verdict {
        if outcome.is_skip() || outcome == Outcome::InfraError {
            return Verdict::Skip;
        }
        let present = self.bug_present(outcome, output);
        match (self.regress, present) {
            (Regress::Success, true) => Verdict::Old,
            (Regress::Success, false) => Verdict::New,
            (_, true) => Verdict::New,
            (_, false) => Verdict::Old,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_mode() {
        let p = Predicate::new(Regress::Error, None);
        assert_eq!(p.judge(Outcome::Pass, ""), Verdict::Old);
        for o in [
            Outcome::WrongResult,
            Outcome::GpuFault,
            Outcome::Crash,
            Outcome::Hang,
        ] {
            assert_eq!(p.judge(o, ""), Verdict::New, "{o}");
        }
        assert_eq!(p.judge(Outcome::BuildFailed, ""), Verdict::Skip);
        assert_eq!(p.judge(Outcome::Untestable, ""), Verdict::Skip);
        assert_eq!(p.judge(Outcome::InfraError, ""), Verdict::Skip);
    }

    #[test]
    fn success_mode_inverts() {
        let p = Predicate::new(Regress::Success, None);
        assert_eq!(p.judge(Outcome::Pass, ""), Verdict::New);
        assert_eq!(p.judge(Outcome::WrongResult, ""), Verdict::Old);
        assert_eq!(p.judge(Outcome::BuildFailed, ""), Verdict::Skip);
    }

    #[test]
    fn crash_mode_only_signals() {
        let p = Predicate::new(Regress::Crash, None);
        assert_eq!(p.judge(Outcome::WrongResult, ""), Verdict::Old);
        assert_eq!(p.judge(Outcome::Hang, ""), Verdict::Old);
        assert_eq!(p.judge(Outcome::Crash, ""), Verdict::New);
        assert_eq!(p.judge(Outcome::GpuFault, ""), Verdict::New);
    }

    #[test]
    fn signature_must_match() {
        let re = regex::Regex::new("Memory access fault").unwrap();
        let p = Predicate::new(Regress::Error, Some(re));
        assert_eq!(
            p.judge(Outcome::Crash, "Memory access fault by GPU node-1"),
            Verdict::New
        );
        assert_eq!(p.judge(Outcome::Crash, "segfault elsewhere"), Verdict::Old);
        let p = Predicate::new(Regress::Success, Some(regex::Regex::new("sig").unwrap()));
        assert_eq!(p.judge(Outcome::WrongResult, "sig"), Verdict::Old);
        assert_eq!(p.judge(Outcome::WrongResult, "other"), Verdict::New);
    }
}
