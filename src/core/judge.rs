//! Validation verdicts: given what re-running the culprit, its parent and a revert observed, is
//! the answer believable? Pure; the runs themselves are `run::validate`'s.

use crate::core::evidence::Evidence;
use crate::core::flaky::Beta;
use serde::{Deserialize, Serialize};
use std::fmt;

/// What a changed path can do to the backend under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PathClass {
    /// Compiled into what is tested (core ggml, the backend's sources, build files, headers).
    Relevant,
    /// Sources of a backend that is not built for the test (Vulkan, Metal, ... for HIP).
    OtherBackend,
    Docs,
    Tests,
    Examples,
    /// CI configuration and helper scripts.
    Tooling,
}

impl PathClass {
    pub fn can_matter(self) -> bool {
        self == PathClass::Relevant
    }
}

/// ggml's backends and the source directories each one compiles. HIP and MUSA build the CUDA
/// sources (`src/ggml-cuda/`), which is why a CUDA-looking change can break HIP.
fn backend_dirs(backend: &str) -> &'static [&'static str] {
    match backend {
        "hip" => &["ggml-cuda", "ggml-hip"],
        "cuda" => &["ggml-cuda"],
        "musa" => &["ggml-cuda", "ggml-musa"],
        "cpu" => &[],
        "vulkan" => &["ggml-vulkan"],
        "metal" => &["ggml-metal"],
        "sycl" => &["ggml-sycl"],
        "opencl" => &["ggml-opencl"],
        _ => &[],
    }
}

/// Classifies one path of a ggml tree (or of llama.cpp, whose copy lives under `ggml/`) for a
/// test of `backend` (`hip`, `cuda`, `cpu`, ...). The CPU backend is always relevant: every
/// test graph is scheduled with it and reference results come from it.
pub fn classify(path: &str, backend: &str) -> PathClass {
    let p = path.strip_prefix("ggml/").unwrap_or(path);
    let first = p.split('/').next().unwrap_or("");
    match first {
        "docs" => return PathClass::Docs,
        "tests" => return PathClass::Tests,
        "examples" => return PathClass::Examples,
        ".github" | "ci" | "scripts" | ".devops" => return PathClass::Tooling,
        _ => {}
    }
    let file = p.rsplit('/').next().unwrap_or(p);
    if !p.contains('/')
        && (file.ends_with(".md")
            || matches!(file, "LICENSE" | "AUTHORS" | "CODEOWNERS" | ".gitignore"))
    {
        return PathClass::Docs;
    }
    if let Some(rest) = p.strip_prefix("src/") {
        let dir = rest.split('/').next().unwrap_or("");
        if rest.contains('/') && dir.starts_with("ggml-") && dir != "ggml-cpu" {
            return if backend_dirs(backend).contains(&dir) {
                PathClass::Relevant
            } else {
                PathClass::OtherBackend
            };
        }
    }
    PathClass::Relevant
}

/// `classify` for a backend that may be unknown: with `None` (a `--script` bisect, which may
/// build Vulkan as well as HIP) no backend directory can be called irrelevant.
pub fn classify_for(path: &str, backend: Option<&str>) -> PathClass {
    match (backend, classify(path, backend.unwrap_or(""))) {
        (None, PathClass::OtherBackend) => PathClass::Relevant,
        (_, c) => c,
    }
}

/// How reverting the culprit on top of the bad endpoint went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Revert {
    /// A commit (in the scratch repository) holding bad-with-culprit-reverted.
    Clean {
        commit: String,
    },
    Conflicts {
        paths: Vec<String>,
    },
    /// Merge commits (several parents) are not reverted: which side to keep is a guess.
    NotSingle,
}

/// Everything validation observed about one answer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Observations {
    pub culprit: Evidence,
    pub parent: Evidence,
    /// Runs of the bad endpoint with the culprit reverted, when it reverted cleanly.
    pub reverted: Option<Evidence>,
    pub revert: Option<Revert>,
    /// Build outputs identical to the parent's (`None`: not compared).
    pub identical_build: Option<bool>,
    /// Paths the culprit changed, classified.
    pub paths: Vec<(String, PathClass)>,
    /// The backend the test exercises; `None` for a `--script`, which may build any backend,
    /// so no backend's sources are called irrelevant (`classify_for`).
    #[serde(default)]
    pub backend: Option<String>,
}

/// Something that makes the answer doubtful (or, for `RevertFixes`, confirms it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Finding {
    /// The parent showed the new behaviour: the culprit is earlier. Decisive.
    ParentFailed {
        failures: u32,
        runs: u32,
    },
    /// The culprit never showed the new behaviour in validation; `chance` is how likely that
    /// is for a bad commit at the estimated rate.
    CulpritDidNotReproduce {
        runs: u32,
        chance: f64,
    },
    /// The bad endpoint still fails with the culprit reverted: not (the only) cause.
    RevertStillFails {
        failures: u32,
        runs: u32,
    },
    /// The bad endpoint stops failing with the culprit reverted; `chance` is how likely those
    /// passes would be if the fault were still there.
    RevertFixes {
        runs: u32,
        chance: f64,
    },
    RevertConflicts {
        paths: Vec<String>,
    },
    /// Libraries and executables are byte-identical to the parent's build.
    IdenticalBuild,
    /// Only docs, tests, examples, tooling or other backends changed.
    OnlyIrrelevantPaths {
        paths: Vec<String>,
    },
    /// Not a doubt, a limit: without a known backend, changes to backend sources count as
    /// relevant, so a culprit in another backend's directory is not flagged.
    BackendUnknown,
}

impl Finding {
    /// Whether this finding casts doubt on the answer.
    pub fn suspicious(&self) -> bool {
        !matches!(
            self,
            Finding::RevertFixes { .. } | Finding::RevertConflicts { .. } | Finding::BackendUnknown
        )
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Finding::ParentFailed { failures, runs } => write!(f, "the parent failed {failures} of {runs} runs: the first bad commit is earlier than the answer"),
            Finding::CulpritDidNotReproduce { runs, chance } => write!(f, "the culprit passed all {runs} validation runs ({:.1}% likely for a bad commit at the estimated rate)", 100.0 * chance),
            Finding::RevertStillFails { failures, runs } => write!(f, "with the culprit reverted the bad endpoint still failed {failures} of {runs} runs: it is not the only cause"),
            Finding::RevertFixes { runs, chance } => write!(f, "with the culprit reverted the bad endpoint passed {runs} of {runs} runs ({:.2}% likely if the fault were still there)", 100.0 * chance),
            Finding::RevertConflicts { paths } => write!(f, "the culprit does not revert cleanly onto the bad endpoint (conflicts in {})", paths.join(", ")),
            Finding::IdenticalBuild => f.write_str("the culprit's built libraries and programs are byte-identical to its parent's: it cannot have changed behaviour"),
            Finding::OnlyIrrelevantPaths { paths } => write!(f, "the culprit only touches files that are not built for this test: {}", paths.join(", ")),
            Finding::BackendUnknown => f.write_str("backend unknown: path relevance not judged (backend sources count as relevant)"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Validation {
    pub findings: Vec<Finding>,
    /// No suspicious finding, the culprit failed and the parent did not.
    pub confirmed: bool,
}

/// Judges what validation observed, with the reproduction rate estimated by the bisection.
pub fn judge(obs: &Observations, rate: Beta) -> Validation {
    let mut findings = Vec::new();
    let runs = |e: &Evidence| e.old + e.new;
    if obs.parent.new > 0 {
        findings.push(Finding::ParentFailed {
            failures: obs.parent.new,
            runs: runs(&obs.parent),
        });
    }
    if obs.culprit.new == 0 && obs.culprit.old > 0 {
        findings.push(Finding::CulpritDidNotReproduce {
            runs: obs.culprit.old,
            chance: rate.pass_streak(obs.culprit.old),
        });
    }
    if let Some(r) = &obs.reverted {
        if r.new > 0 {
            findings.push(Finding::RevertStillFails {
                failures: r.new,
                runs: runs(r),
            });
        } else if r.old > 0 {
            findings.push(Finding::RevertFixes {
                runs: r.old,
                chance: rate.pass_streak(r.old),
            });
        }
    }
    if let Some(Revert::Conflicts { paths }) = &obs.revert {
        findings.push(Finding::RevertConflicts {
            paths: paths.clone(),
        });
    }
    if obs.identical_build == Some(true) {
        findings.push(Finding::IdenticalBuild);
    }
    if !obs.paths.is_empty() && obs.paths.iter().all(|(_, c)| !c.can_matter()) {
        findings.push(Finding::OnlyIrrelevantPaths {
            paths: obs.paths.iter().map(|(p, _)| p.clone()).collect(),
        });
    }
    if obs.backend.is_none() && !obs.paths.is_empty() {
        findings.push(Finding::BackendUnknown);
    }
    let confirmed = obs.culprit.new > 0 && !findings.iter().any(Finding::suspicious);
    Validation {
        findings,
        confirmed,
    }
}

/// How many runs validation allows one commit: at least `n` (kernel CI's 3), more when the
/// estimated rate makes `n` passes weak evidence: until a bad commit would have shown the fault
/// with 95% probability, capped at 20 n so a rare fault cannot make validation endless.
pub fn run_limit(n: u32, rate: Beta) -> u32 {
    let n = n.max(1);
    let cap = n.saturating_mul(20);
    let needed = (1..=cap)
        .find(|&k| rate.pass_streak(k) <= 0.05)
        .unwrap_or(cap);
    needed.max(n)
}
