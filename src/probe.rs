//! The seam between the search driver and whatever runs a test: a `Prober` turns one checked-out
//! revision into one `ProbeReport` in the shared outcome vocabulary.
//!
//! Implementations: the `--build/--script` prober (git-bisect-run semantics), the bundled
//! set_rows replay reproducer, each running on the host or in a container through a
//! `launch::Launcher`. The driver knows none of them, which keeps it testable and lets the
//! matrix and config bisection reuse it unchanged.

use crate::outcome::Outcome;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where a probe is in its life, for the progress bar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Checkout,
    Build,
    Test,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Checkout => "checkout",
            Phase::Build => "build",
            Phase::Test => "test",
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
        }
    }
}

pub trait Prober: Send + Sync {
    /// Stable text naming exactly what is run (commands, configuration, reproducer source hash,
    /// relevant environment, launcher/image). Part of the result store key: when it changes,
    /// nothing stored is reused.
    fn identity(&self) -> String;

    /// Build and test one revision. Never panics; failures of the machinery come back as
    /// `Outcome::InfraError`.
    fn probe(&self, req: &ProbeRequest<'_>, phase: &dyn Fn(Phase)) -> ProbeReport;
}
