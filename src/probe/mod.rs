//! The seam between the search driver and whatever runs a test: a `Prober` turns one checked-out
//! revision into one `ProbeReport` in the shared outcome vocabulary.
//!
//! Implementations: the `--build/--script` prober (git-bisect-run semantics), the bundled
//! set_rows replay reproducer, each running on the host or in a container through a
//! `launch::Launcher`. The driver knows none of them, which keeps it testable and lets the
//! matrix and config bisection reuse it unchanged.

pub mod artifacts;
pub mod bundle;
pub mod ccache;
pub mod container;
pub mod decode;
pub mod device;
pub mod exec;
pub mod kinds;
pub mod launch;
pub mod reaper;
pub mod repro;
pub mod script;
pub mod secrets;
pub mod vendor;

use crate::core::build::{BuildError, TreeFacts};
use crate::core::ccache::Ccache;
use crate::core::layout::Layout;
use crate::core::outcome::{Outcome, SkipScope};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where ggml sits in a checkout on disk: `core::layout`'s rule asked of the file system.
pub fn layout(checkout: &Path) -> Layout {
    Layout::of(|p| checkout.join(p).exists())
}

/// The CMake spellings of the ggml in a checkout, wherever its layout puts it.
pub fn tree_facts(checkout: &Path) -> Result<TreeFacts, BuildError> {
    let root = checkout.join(layout(checkout).ggml_dir());
    if !root.join("CMakeLists.txt").is_file() {
        return Err(BuildError::NotGgml {
            path: checkout.display().to_string(),
        });
    }
    let mut text = String::new();
    for rel in crate::core::build::CMAKE_FILES {
        let p = root.join(rel);
        match std::fs::read_to_string(&p) {
            Ok(t) => {
                text.push_str(&t);
                text.push('\n');
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(BuildError::Read {
                    path: p.display().to_string(),
                    source,
                })
            }
        }
    }
    // The unified-memory knobs live in two source files, not in CMake (issue 26).
    let read = |rel: &str| std::fs::read_to_string(root.join(rel)).ok();
    let [hip_h, cu, old_cu] = crate::core::build::UNIFIED_FILES;
    Ok(TreeFacts::from_cmake_text(&text).with_unified(
        read(hip_h).as_deref(),
        read(cu).or_else(|| read(old_cu)).as_deref(),
    ))
}

/// What the bundled probes' own code reads of a checkout besides their build (which Ninja
/// reports): the layout markers, the files `tree_facts` takes the CMake spellings and memory
/// knobs from, the decode probe's llama.cpp check and the vendoring note, in every layout.
/// With it the replay and decode probes fold commits that change nothing they read, as a
/// `--script` probe does (issue 45: 53-78% of every real window were docs, CI, server,
/// python or other-backend commits, each probed as a candidate of its own).
pub fn own_reads() -> Vec<String> {
    let mut reads = Layout::markers();
    for l in [Layout::Lucebox, Layout::LlamaCpp, Layout::Ggml] {
        let files = crate::core::build::CMAKE_FILES
            .iter()
            .chain(crate::core::build::UNIFIED_FILES.iter());
        reads.extend(files.map(|r| l.path(r)));
        reads.extend(vendor::note_path(l.ggml_dir()));
    }
    reads.extend(["include/llama.h", "CMakeLists.txt"].map(String::from));
    reads.sort();
    reads.dedup();
    reads
}

/// Where a probe is in its life (checkout, build and the build's own count, test), for
/// progress events.
pub use crate::core::progress::Phase;

/// An environment as a prober's identity writes it (`K=V,K=V`). Cache locations (`CCACHE_*`:
/// `CCACHE_DIR` sits under the work dir) change nothing that is tested; keeping them out lets
/// runners with different work dirs share results (`--resume-from-issue`).
pub fn identity_env(v: &[(String, String)]) -> String {
    v.iter()
        .filter(|(k, _)| !k.starts_with("CCACHE_"))
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// A build step's output watcher ([`exec::run_watched`]): each status line with a count
/// (Ninja's `[n/N]`, Make's `[ NN%]`) becomes a [`Phase::BuildStep`]; nothing else is kept.
pub fn build_steps(phase: &dyn Fn(Phase)) -> impl Fn(&str) + '_ {
    move |line| {
        if let Some(count) = crate::core::progress::build_count(line) {
            phase(Phase::BuildStep(count));
        }
    }
}

/// One revision to test, already checked out by the driver.
#[derive(Debug, Clone)]
pub struct ProbeRequest<'a> {
    /// Full sha of the commit probed (the representative of its tree class).
    pub commit: &'a str,
    /// Source checkout of that commit (the prober must not modify it).
    pub checkout: &'a Path,
    /// Persistent build directory, reused between probes so builds are incremental.
    pub build_dir: &'a Path,
    /// Where this probe's log goes (created by the prober).
    pub log_path: &'a Path,
    /// Unique name for this probe run (container names, temp files).
    pub run_name: &'a str,
    /// Outcomes of identical artifacts tested before (`artifacts`); `None` where every run
    /// must really run (`--confidence`, `--repeat`, `--validate`, the matrix).
    pub artifacts: Option<&'a dyn artifacts::ArtifactIndex>,
}

/// Everything a probe tells us; stored verbatim, keyed by what was tested.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeReport {
    pub outcome: Outcome,
    /// A short failure signature (assert text, fault line, mismatch line), if any.
    pub signature: Option<String>,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub duration_s: f64,
    pub build_s: f64,
    pub test_s: f64,
    pub log_path: PathBuf,
    /// The last lines of output, enough for `--match` and for the report.
    pub output_tail: String,
    /// Image digest, compiler, GPU name, ... as far as the prober can tell.
    #[serde(default)]
    pub provenance: BTreeMap<String, String>,
    /// What ccache did for this probe's build; absent when no build ran (or in runs stored
    /// before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ccache: Option<Ccache>,
    /// What the test executed, hashed (`artifacts`), when it could be accounted for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_digest: Option<String>,
    /// The commit whose identical artifacts' outcome this is: the test did not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reused_from: Option<String>,
    /// For `Untestable`: whether the reason is this commit's or the configuration's on this
    /// machine (`Systematic`: never stored, and the run stops).
    #[serde(default, skip_serializing_if = "SkipScope::is_commit")]
    pub skip_scope: SkipScope,
}

impl ProbeReport {
    /// A report for a failure of our own machinery; never stored, never a verdict.
    pub fn infra(message: impl Into<String>, log_path: &Path) -> Self {
        ProbeReport {
            outcome: Outcome::InfraError,
            signature: Some(message.into()),
            exit_code: None,
            signal: None,
            duration_s: 0.0,
            build_s: 0.0,
            test_s: 0.0,
            log_path: log_path.to_path_buf(),
            output_tail: String::new(),
            provenance: BTreeMap::new(),
            ccache: None,
            artifact_digest: None,
            reused_from: None,
            skip_scope: SkipScope::Commit,
        }
    }

    /// An `Untestable` whose reason holds for every commit in this configuration here.
    pub fn is_systematic(&self) -> bool {
        self.outcome == Outcome::Untestable && self.skip_scope == SkipScope::Systematic
    }
}

/// Whether a finished step failed for a reason of the machinery rather than of the code under
/// test, so the prober reports `InfraError` (retried, never stored): one rule for every
/// launcher (a full disk, see `exec::out_of_space`) plus the launcher's own (a container
/// engine's errors).
pub fn step_infra_failure(launcher: &dyn launch::Launcher, r: &exec::RunResult) -> Option<String> {
    exec::out_of_space(r).or_else(|| launcher.infra_failure(r.exit_code, &r.output))
}

/// A test step's run as the report records it: its time, status and signal, or `None` with the
/// report's signature saying why the step says nothing of the tree (it could not start, or its
/// launcher failed: `step_infra_failure`). One rule for every prober that runs a test step.
pub fn test_step(
    report: &mut ProbeReport,
    launcher: &dyn launch::Launcher,
    ran: std::io::Result<exec::RunResult>,
) -> Option<exec::RunResult> {
    let r = match ran {
        Err(e) => {
            report.signature = Some(format!("test step could not run: {e}"));
            return None;
        }
        Ok(r) => r,
    };
    if let Some(why) = step_infra_failure(launcher, &r) {
        report.signature = Some(format!("test step: {why}"));
        return None;
    }
    report.test_s = r.duration.as_secs_f64();
    report.duration_s = report.build_s + report.test_s;
    report.exit_code = r.exit_code;
    report.signal = r.signal;
    Some(r)
}

pub trait Prober: Send + Sync {
    /// Stable text naming exactly what is run (commands, configuration, reproducer source hash,
    /// relevant environment, launcher/image). Part of the result store key: when it changes,
    /// nothing stored is reused.
    fn identity(&self) -> String;

    /// The identity as people read it (`--dry-run`): the same facts, with no internal
    /// structure's debug spelling. The hashed `identity` keeps its text, so stored results
    /// stay valid.
    fn identity_for_people(&self) -> String {
        self.identity()
    }

    /// What names this prober's checkouts and build trees: the identity without what only a
    /// run reads and no build depends on, so probers that build alike share their builds
    /// (`--compare-good`'s recording of the good commit and the probes compared with it).
    fn slot_identity(&self) -> String {
        self.identity()
    }

    /// Build and test one revision. Never panics; failures of the machinery come back as
    /// `Outcome::InfraError`.
    fn probe(&self, req: &ProbeRequest<'_>, phase: &dyn Fn(Phase)) -> ProbeReport;

    /// Whether the test step runs on the GPU, so concurrent probes (`--jobs K`) take turns
    /// at it (`run::jobs::GpuTurn`): two tests on one device would time and fault each other.
    /// True unless known otherwise: waiting costs a test's time, a shared device a wrong verdict.
    fn test_uses_gpu(&self) -> bool {
        true
    }

    /// Whether its builds' processes are this process's descendants, so their CPU time can be
    /// read (`run::jobs`). False in a container: the engine runs them.
    fn builds_here(&self) -> bool {
        true
    }

    /// Checkout paths (relative) this prober's own commands read besides what its build system
    /// reports (`run::buildset` asks Ninja for the rest). `None`: it cannot say what it reads,
    /// so commits are grouped by their whole tree (the default, always exact).
    fn named_inputs(&self) -> Option<Vec<String>> {
        None
    }

    /// What of a commit's tree this prober reads, so a checkout writes only that: a blob
    /// missing outside it (a partial clone, a pruned data file) cannot stop the probe.
    fn reads(&self) -> Reads {
        Reads::Tree
    }

    /// The patches (`--apply`) the slot loop applies to each checkout before this prober
    /// runs and takes off after (`run::apply`); their ids are in the identity.
    fn applied(&self) -> &[crate::core::applied::AppliedPatch] {
        &[]
    }
}

/// What of a commit's tree a prober reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reads {
    /// Everything (a user's build and test may read any file).
    Tree,
    /// ggml's directory as `core::layout::Layout::of` finds it in the commit, and the
    /// vendoring note beside it (`vendor::NOTE`); the whole tree where ggml is its root.
    Ggml,
}

#[cfg(test)]
mod tests {
    use super::*;

    // An excerpt of src/ggml-hip/CMakeLists.txt before ggml-org/ggml a3fde8df.
    const BEFORE_A3FDE8DF: &str = "    # Forward AMDGPU_TARGETS to CMAKE_HIP_ARCHITECTURES.\n    \
        if (AMDGPU_TARGETS AND NOT CMAKE_HIP_ARCHITECTURES)\n        \
        set(CMAKE_HIP_ARCHITECTURES ${AMDGPU_TARGETS})\noption(GGML_HIP \"ggml: use HIP\" OFF)";

    #[test]
    fn detect_reads_llama_cpp_layout_and_rejects_non_ggml() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("ggml/src/ggml-hip")).unwrap();
        std::fs::create_dir_all(d.path().join("ggml/include")).unwrap();
        std::fs::write(
            d.path().join("ggml/CMakeLists.txt"),
            "option(GGML_HIP \"\" OFF)",
        )
        .unwrap();
        std::fs::write(
            d.path().join("ggml/src/ggml-hip/CMakeLists.txt"),
            BEFORE_A3FDE8DF,
        )
        .unwrap();
        let f = tree_facts(d.path()).unwrap();
        assert_eq!(f.hip_targets_var, "AMDGPU_TARGETS");
        let empty = tempfile::tempdir().unwrap();
        let err = tree_facts(empty.path()).unwrap_err().to_string();
        assert!(err.contains("not a ggml source tree"), "{err}");
    }

    #[test]
    fn a_lucebox_checkout_is_read_at_its_vendored_ggml() {
        let d = tempfile::tempdir().unwrap();
        let ggml = d.path().join("server/deps/llama.cpp/ggml");
        std::fs::create_dir_all(ggml.join("src/ggml-hip")).unwrap();
        std::fs::create_dir_all(ggml.join("include")).unwrap();
        std::fs::write(ggml.join("CMakeLists.txt"), "option(GGML_HIP \"\" OFF)").unwrap();
        std::fs::write(ggml.join("src/ggml-hip/CMakeLists.txt"), BEFORE_A3FDE8DF).unwrap();
        // The lucebox root is a CMake project of its own, which says nothing about ggml.
        std::fs::write(d.path().join("CMakeLists.txt"), "project(lucebox)\n").unwrap();
        assert_eq!(layout(d.path()), Layout::Lucebox);
        let f = tree_facts(d.path()).unwrap();
        assert_eq!(f.hip_targets_var, "AMDGPU_TARGETS");
    }
}
