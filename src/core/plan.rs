//! The resolved question of one commit bisection: range, predicate, endpoint policy, slots.

use crate::core::outcome::Predicate;
use crate::core::range::Range;
use crate::core::search::EndpointCheck;
use std::path::PathBuf;

/// Everything the driver needs to know about one bisection besides the prober and policy.
pub struct Plan {
    pub repo_path: PathBuf,
    pub range: Range,
    pub predicate: Predicate,
    pub endpoints: EndpointCheck,
    /// Parallel probes (one checkout + build dir per slot): `--jobs K`, or what `--jobs auto`
    /// chose (`core::jobs::choose`).
    pub jobs: usize,
    /// Why `jobs` is what it is, one line (the dry run and the progress line say it).
    pub jobs_why: String,
    /// Where checkouts and build dirs live (`<work>/checkouts/<repo-hash>/<slot>/{src,build}`).
    pub work_dir: PathBuf,
}
