//! When a one-slot search builds `--bad`: only when the chance that it lies, times what the
//! rest of the search would spend walking toward it, outweighs what building it costs.
//!
//! An answer whose commit and parent were both observed is self-verifying: `--bad` matters
//! only when the answer is next to it (the search then tests it, as `--lazy-endpoints` does) or
//! when it lies, and a lying `--bad` shows itself as a search that only ever sees the old
//! behaviour, walking toward it. Building it as soon as one midpoint was old (the rule until
//! issue 22) cost a full cold build on about half the culprit positions of a truthful range,
//! the one probe `git bisect run` never makes. Here the check waits while it is unlikely to
//! pay: every old answer in a row raises the odds of a lie (a truthful culprit must then lie in
//! the shrinking top of the range), the walk toward `--bad` makes its build incremental, and
//! the check is made once `q * walk > cost * (1 - (1 - q) * t)`: `q` the posterior odds of a
//! lie, `walk` the expected cost of the midpoints left, `cost` building `--bad` now and `t`
//! the chance a truthful answer is next to it (the check is then needed anyway).
//!
//! `LIE_PRIOR` is the rate of lying `--bad` endpoints the rule is tuned for (BENCHMARKS.md
//! "Endpoint checks": the model's break-even rates and why 5%). A lie is never a wrong
//! answer: at the latest the search walks all the way to `--bad`, tests it there and stops.

use super::EndpointCheck;
use crate::core::outcome::Verdict;

/// The share of bisections whose `--bad` does not show the new behaviour (a probe script
/// that does not reproduce, a build that fails there) the rule is tuned for. `--confidence`
/// (flaky faults, where a lying `--bad` is likely) keeps the eager check of its own session.
pub const LIE_PRIOR: f64 = 0.05;

/// Whether to build `--bad` now. `groups` candidates, `lo` the last old one (every verdict
/// so far old, none new), `open` the untested candidates above it, `check` what building
/// `--bad` costs now and `walk` what the midpoints left are expected to cost (any one unit: ms,
/// or probes when builds are not costed). `walk` must be priced as those builds will really
/// run, each incremental from the probes around it (`Search::walk_cost`): priced from what is
/// built now, every far midpoint looks like a cold build, the walk looks dear and `--bad` was
/// built early on real ranges where git never builds it (issue 45, cases 1 and 3).
pub fn verify_bad_now(groups: usize, lo: usize, open: usize, check: f64, walk: f64) -> bool {
    if open == 0 || groups < 3 {
        return true;
    }
    // Culprit positions still consistent with a truthful --bad: (lo, groups - 1].
    let left = (groups - 1 - lo) as f64 / (groups - 1) as f64;
    let q = LIE_PRIOR / (LIE_PRIOR + (1.0 - LIE_PRIOR) * left);
    let touch = 1.0 / (open + 1) as f64;
    q * walk > check * (1.0 - (1.0 - q) * touch)
}

/// The endpoint check once the store was read: `--bad` is asked first to stop early when the
/// fault does not reproduce, and a stored result showing the new behaviour inside the range
/// (`stored`: group and verdict of each stored group, ascending) already says it does, so
/// `First` becomes `Lazy` (the answer still never rests on an untested endpoint). Not when
/// `--bad` is stored itself (it costs nothing to ask, and a resumed run must replay the killed
/// one) or already decided.
pub fn after_the_store(
    endpoints: EndpointCheck,
    stored: &[(usize, Verdict)],
    groups: usize,
    bad_decided: bool,
) -> EndpointCheck {
    let reproduced = stored.iter().any(|&(g, v)| v == Verdict::New && g > 0);
    let bad_stored = stored.last().map(|&(g, _)| g + 1) == Some(groups);
    match endpoints {
        EndpointCheck::First if reproduced && !bad_stored && !bad_decided => EndpointCheck::Lazy,
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_reproduction_makes_the_bad_check_lazy() {
        use EndpointCheck::{First, Lazy};
        let (old, new) = (Verdict::Old, Verdict::New);
        assert_eq!(after_the_store(First, &[(3, new)], 10, false), Lazy);
        assert_eq!(
            after_the_store(First, &[(3, old), (5, new)], 10, false),
            Lazy
        );
        // No reproduction inside the range: --bad is still asked first.
        assert_eq!(after_the_store(First, &[(3, old)], 10, false), First);
        assert_eq!(after_the_store(First, &[(0, new)], 10, false), First);
        assert_eq!(after_the_store(First, &[], 10, false), First);
        // --bad stored (free to ask) or decided: nothing to change.
        assert_eq!(
            after_the_store(First, &[(3, new), (9, new)], 10, false),
            First
        );
        assert_eq!(after_the_store(First, &[(3, new)], 10, true), First);
        // Lazy stays lazy.
        assert_eq!(after_the_store(Lazy, &[(9, old)], 10, false), Lazy);
    }

    #[test]
    fn a_truthful_looking_range_does_not_build_bad() {
        // 64 groups, one old midpoint at 32: half the culprits are still above it.
        assert!(!verify_bad_now(64, 32, 30, 1.0, 5.0));
        // Full builds: still not worth one.
        assert!(!verify_bad_now(64, 32, 30, 20_000.0, 100_000.0));
    }

    #[test]
    fn the_walk_toward_bad_makes_it_worth_checking() {
        // Probes cost the same: after four old answers in a row (top sixteenth left).
        assert!(!verify_bad_now(65, 56, 7, 1.0, 3.0));
        assert!(verify_bad_now(65, 60, 3, 1.0, 2.0));
        // A build of --bad that is incremental from a built neighbour is worth it earlier.
        assert!(verify_bad_now(65, 48, 15, 500.0, 80_000.0));
        // Nothing left open: the answer touches --bad.
        assert!(verify_bad_now(65, 63, 0, 1e9, 0.0));
    }

    #[test]
    fn a_cold_bad_is_not_built_against_an_incremental_walk() {
        // Issue 45's cases 1 and 3: four old midpoints in a row, --bad a full build (150 s)
        // away. Priced from what is built now, each of the 2 midpoints left looked like a
        // full build too (300 s of walk) and --bad was built; the walk's real builds are
        // incremental from their neighbours (about 40 s each), and git never builds --bad.
        assert!(verify_bad_now(65, 60, 3, 150_000.0, 300_000.0));
        assert!(!verify_bad_now(65, 60, 3, 150_000.0, 80_000.0));
    }
}
