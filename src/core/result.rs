//! The results every writer produces and every reader consumes: one serde schema.

use crate::core::build::{Backend, TreeFacts};
use crate::core::outcome::{Outcome, Verdict};
use crate::core::range::CommitInfo;
use crate::core::search::Endpoint;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// One run of one candidate, as the report shows it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProbeRecord {
    pub candidate: usize,
    pub sha: String,
    pub title: String,
    pub outcome: Outcome,
    pub verdict: Verdict,
    pub duration_s: f64,
    pub log: PathBuf,
    pub signature: Option<String>,
    /// Answered by the store (an earlier or interrupted run), not executed now.
    pub cached: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Conclusion {
    Found {
        index: usize,
    },
    /// The first new candidate is one of these (skips hide the boundary).
    Ambiguous {
        indices: Vec<usize>,
    },
    /// An endpoint does not behave as claimed.
    BadEndpoint {
        which: Endpoint,
        got: Verdict,
    },
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BisectOutcome {
    pub conclusion: Conclusion,
    pub probes: Vec<ProbeRecord>,
    /// Probe rounds the search asked for (each round is up to `jobs` candidates).
    pub steps: usize,
    /// Runs actually executed now (the rest came from the store).
    pub executed: usize,
    pub policy: String,
    pub predicate: String,
    pub elapsed_s: f64,
    /// Metadata of every probed candidate's representative and of the endpoints.
    pub commits: Vec<CommitInfo>,
}

impl BisectOutcome {
    pub fn info(&self, sha: &str) -> Option<&CommitInfo> {
        self.commits.iter().find(|c| c.sha == sha)
    }
}

/// A revision checked out for the matrix.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Rev {
    /// As the user wrote it.
    pub rev: String,
    pub sha: String,
    /// Tree id of the commit: with the prober identity, the key of stored results.
    #[serde(default)]
    pub tree: String,
    #[serde(skip)]
    pub checkout: PathBuf,
    #[serde(skip)]
    pub facts: TreeFacts,
}

/// One configuration at one revision.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Cell {
    pub config: String,
    pub rev: String,
    pub sha: String,
    pub outcome: Outcome,
    pub signature: Option<String>,
    pub duration_s: f64,
    pub build_s: f64,
    pub test_s: f64,
    pub attempts: u32,
    pub log: PathBuf,
    pub provenance: BTreeMap<String, String>,
    /// Answered by the result store (an earlier run of the same tree and configuration).
    #[serde(default)]
    pub cached: bool,
}

/// Everything a matrix run produced (the `matrix-results.json` file).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MatrixResults {
    pub matrix: String,
    pub engine: String,
    pub revisions: Vec<Rev>,
    pub configs: Vec<ConfigRow>,
    pub cells: Vec<Cell>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ConfigRow {
    pub id: String,
    pub label: String,
    pub backend: Backend,
    pub image: Option<String>,
}
