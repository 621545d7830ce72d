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
    /// The build step failed: a skip, never a verdict, except for `--regress build`, where it
    /// is the new behaviour itself.
    BuildFailed,
    /// The test declared itself unable to test this revision (exit 125, or the reproducer's
    /// "unsupported" exit 3): a skip, never a verdict. Its `SkipScope` says whether another
    /// commit could do better.
    Untestable,
    /// Our own machinery failed (container engine down, disk full, git error): retried, never a
    /// verdict, never stored as a result.
    InfraError,
    /// The build succeeded and no test ran: a build-only probe (`--regress build`,
    /// `matrix --build-only`). Not a `pass`, which says a test ran and succeeded.
    Built,
}

impl Outcome {
    pub const ALL: [Outcome; 9] = [
        Outcome::Pass,
        Outcome::WrongResult,
        Outcome::GpuFault,
        Outcome::Crash,
        Outcome::Hang,
        Outcome::BuildFailed,
        Outcome::Untestable,
        Outcome::InfraError,
        Outcome::Built,
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
            Outcome::Built => "built",
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether an `Untestable` reason depends on the commit probed. The search can step around a
/// commit that cannot be tested; it cannot step around a configuration that cannot run here,
/// and probing every commit to prove that again (minutes per HIP build) helps nobody.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SkipScope {
    /// This commit cannot be tested (an old tree without the option, no `ggml_set_rows` yet,
    /// a script's exit 125): a skip, and the search goes on around it.
    #[default]
    Commit,
    /// No commit can be tested in this configuration on this machine (graphs asked and not
    /// built, a toolchain that cannot target the GPU, no GPU, a missing toolchain, reproducer
    /// arguments it rejects): the run stops after the first probe that shows it, and the probe
    /// is not stored, so a run after the environment is fixed tests the commit again.
    Systematic,
}

impl SkipScope {
    pub fn is_commit(&self) -> bool {
        *self == SkipScope::Commit
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
    /// Cannot tell (build failed, untestable; a build-only run when a test was asked).
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
    /// New = the build fails; old = it builds. No test runs: the probe stops after the build,
    /// so a failing build is the answer here, not a skip.
    Build,
}

impl Regress {
    /// The words the report uses for the boundary commit.
    pub fn culprit_term(self) -> &'static str {
        match self {
            Regress::Success => "first fixed commit",
            Regress::Build => "first failing build",
            _ => "first bad commit",
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Regress::Error => "error",
            Regress::Success => "success",
            Regress::Crash => "crash",
            Regress::Build => "build",
        }
    }

    /// Whether the question is about the build alone: probes stop after the build (their
    /// identity says so, so build-only results never answer a test question or the reverse).
    pub fn build_only(self) -> bool {
        self == Regress::Build
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

    /// Stable text naming the predicate: written into the result document
    /// (`BisectResult::predicate`, which `regress()` reads back), never into a store key
    /// (probes are stored raw, so changing `--regress` or `--match` reuses every one).
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
            Regress::Build => outcome == Outcome::BuildFailed,
        };
        kind_ok && self.signature.as_ref().is_none_or(|re| re.is_match(output))
    }

    pub fn judge(&self, outcome: Outcome, output: &str) -> Verdict {
        if self.regress == Regress::Build {
            // The build is the question: its failure decides (a different build error than
            // `--match` asks for is old, as for tests); anything that got past the build,
            // `built` or a test's outcome, built. Untestable (a toolchain that cannot target
            // the GPU) and machinery failures still say nothing.
            return match outcome {
                Outcome::Untestable | Outcome::InfraError => Verdict::Skip,
                o if self.bug_present(o, output) => Verdict::New,
                _ => Verdict::Old,
            };
        }
        // A build-only run says nothing about a test.
        if outcome.is_skip() || matches!(outcome, Outcome::InfraError | Outcome::Built) {
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
    fn build_mode_judges_the_build_alone() {
        let p = Predicate::new(Regress::Build, None);
        assert_eq!(p.judge(Outcome::BuildFailed, "error: x"), Verdict::New);
        assert_eq!(p.judge(Outcome::Built, ""), Verdict::Old);
        // Past the build: it built, whatever the test said.
        assert_eq!(p.judge(Outcome::Pass, ""), Verdict::Old);
        assert_eq!(p.judge(Outcome::GpuFault, ""), Verdict::Old);
        assert_eq!(p.judge(Outcome::Untestable, ""), Verdict::Skip);
        assert_eq!(p.judge(Outcome::InfraError, ""), Verdict::Skip);
        let only = Predicate::new(Regress::Build, Some(regex::Regex::new("hip").unwrap()));
        assert_eq!(
            only.judge(Outcome::BuildFailed, "error: hip.h"),
            Verdict::New
        );
        assert_eq!(
            only.judge(Outcome::BuildFailed, "error: cpu.c"),
            Verdict::Old
        );
        // A build-only run never answers a test question.
        for r in [Regress::Error, Regress::Success, Regress::Crash] {
            assert_eq!(
                Predicate::new(r, None).judge(Outcome::Built, ""),
                Verdict::Skip
            );
        }
        assert!(Regress::Build.build_only() && !Regress::Error.build_only());
        assert!(!Outcome::Built.is_skip() && !Outcome::Built.is_failure());
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
