//! What a bisection ranges over: candidates (runs of commits that test the same tree), in
//! order, and the commit metadata reports show. Built by `run::git`; plain data here so the
//! search, the report and the result schema can use it without git.

use serde::{Deserialize, Serialize};

/// Title, author and date of a commit, for reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CommitInfo {
    pub sha: String,
    pub title: String,
    pub author: String,
    /// RFC 3339, in the author's own offset.
    pub date: String,
}

impl CommitInfo {
    pub fn short(&self) -> &str {
        short_sha(&self.sha)
    }
}

/// A commit id as people read it in logs, progress and container names: its first 10
/// characters (whole when shorter), the one length everywhere a sha is cut for display.
pub fn short_sha(sha: &str) -> &str {
    sha.get(..10).unwrap_or(sha)
}

/// One thing to test: a run of consecutive commits with the same tested tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Candidate {
    /// The representative (first member): the commit actually checked out and probed.
    pub sha: String,
    /// Id of the tested tree (the `--path` subtree, or the root tree); `absent` when the
    /// path does not exist at these commits. The result store is keyed by it.
    pub tree: String,
    /// Stable search key (first-parent depth of the representative).
    pub depth: u64,
    /// Every commit of the class, oldest first (`members[0] == sha`).
    pub members: Vec<String>,
}

/// How to enumerate `good..bad`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RangeSpec {
    pub first_parent: bool,
    /// Subtree whose content decides equivalence; `None` = the whole tree.
    pub path: Option<String>,
}

/// The ordered candidates of one bisection. Candidate 0 holds `good`, the last one `bad`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Range {
    pub good: String,
    pub bad: String,
    pub spec: RangeSpec,
    /// Commits in the range, endpoints included, before tree-class collapsing.
    pub commits: usize,
    pub candidates: Vec<Candidate>,
}
