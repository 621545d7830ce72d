//! The report's section of each probe kind that has one (issue 57), one file per kind as
//! `core::kinds` defines it.

use crate::core::result::BisectResult;

pub mod backend_ops;

/// The kinds' own sections of a bisection's report, in the registry's order: none for a kind
/// without one, or when its probes left nothing to show.
pub fn sections(b: &BisectResult) -> Vec<String> {
    [backend_ops::render(b)].into_iter().flatten().collect()
}
