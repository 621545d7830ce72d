//! Least expected build time: which midpoint to build when builds cost different amounts.
//!
//! On a real ggml range almost all of a probe is compiling, and what a build costs depends on
//! what was built before: an object is compiled again only when its inputs differ from every
//! version already compiled (ccache, Ninja). A header that every big unit includes changes
//! every few commits, so a probe is either a full rebuild or a few seconds, and a plain
//! halving pays full rebuilds it could have avoided by cutting a little off-centre.
//!
//! The choice minimises the expected build time of the whole rest of the search, culprits
//! uniform over the open candidates: the cost of building a midpoint now (from the builds
//! really made) plus the best expected cost of the two searches it leaves. The future is
//! costed with one relaxation that makes it a small dynamic program over intervals: inside an
//! interval, everything at or outside its ends counts as built (in a bisection every earlier
//! probe lies there, so this can only be cheaper than the truth). `bench/build_cost_bound.py`
//! is the same computation over whole ranges; on three real 300-commit ggml ranges it put
//! this rule within 1-8% of the lower bound for any exact search (BENCHMARKS.md).
//!
//! A probe budget keeps the number of probes honest: the expected-cost optimum may cut
//! off-centre, but never so far that the worst case exceeds `depth` probes; each probe also
//! costs a fixed `per_probe` (test, link, checkout), so with minutes-long GPU tests it stays a
//! plain halving.

/// Above this many open candidates the cubic program is skipped (the ordinary window rule
/// decides); by then the interval is several halvings from its end anyway.
pub const MAX_OPEN: usize = 128;

/// What building each candidate costs, object by object, in milliseconds of wall time.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BuildCosts {
    /// Compile time of each object.
    pub weights: Vec<u64>,
    /// Per candidate, per object: a fingerprint of what the object compiles there. `None`
    /// when unknown: such a candidate shares nothing with any other.
    pub fingerprints: Vec<Option<Vec<u64>>>,
    /// Per candidate: building it now, given the builds really made so far.
    pub now: Vec<u64>,
    /// What every probe costs besides compiling (test, link, checkout).
    pub per_probe: u64,
}

/// The probes the search may still spend on midpoints: whatever keeps the whole bisection
/// within `git bisect`'s fewest probes on the same `commits` (floor(log2)), counting the
/// `made` probes so far and one for an endpoint still untested (`EndpointCheck` tests one
/// when the answer touches it), and at most one midpoint more than an exact halving of the
/// `groups` needs (what `--dry-run` promises). Cutting off-centre to skip a full rebuild can
/// therefore never cost more probes than git. `Search` never goes below what an exact halving
/// of the open range needs, so where git's count is that tight this is the plain halving.
pub fn budget(
    commits: usize,
    groups: usize,
    made: usize,
    midpoints_made: usize,
    endpoint_open: bool,
) -> u32 {
    let halving = super::ceil_log2(groups.saturating_sub(1)) as usize;
    let by_git = git_fewest(commits).saturating_sub(made + usize::from(endpoint_open));
    let by_halving = (halving + 1).saturating_sub(midpoints_made);
    by_git.min(by_halving) as u32
}

/// The fewest probes `git bisect` spends on `commits`: floor(log2).
pub fn git_fewest(commits: usize) -> usize {
    (usize::BITS - 1 - commits.max(1).leading_zeros()) as usize
}

/// Expected cost of finishing when `pos[c]` is probed next, for each inner index `c` of
/// `pos` (= [last old, open candidates..., first new], search indices): `now + per_probe`
/// plus the relaxed optimum of what is left, with `depth` probes left including this one.
/// `None` when there are too many open candidates; infinite where the budget cannot hold.
pub fn scores(costs: &BuildCosts, pos: &[usize], depth: u32) -> Option<Vec<f64>> {
    let p = pos.len();
    if p < 3 || p - 2 > MAX_OPEN || depth == 0 {
        return None;
    }
    let objects = costs.weights.len();
    // First and last candidate index of each (object, fingerprint), once; then per inner
    // candidate the span sharing its fingerprint (its own index alone when unknown).
    let mut runs: Vec<std::collections::HashMap<u64, (usize, usize)>> =
        vec![Default::default(); objects];
    for (j, f) in costs.fingerprints.iter().enumerate() {
        for (o, &v) in f.iter().flatten().enumerate() {
            let e = runs[o].entry(v).or_insert((j, j));
            e.1 = j;
        }
    }
    let mut span = vec![(0usize, 0usize); p * objects];
    for (k, &i) in pos.iter().enumerate() {
        let f = costs.fingerprints.get(i).and_then(|f| f.as_ref());
        for o in 0..objects {
            span[k * objects + o] = f.map_or((i, i), |f| runs[o][&f[o]]);
        }
    }
    // Relaxed cost of probing pos[c] inside (pos[a], pos[b]).
    let lb = |c: usize, a: usize, b: usize| -> f64 {
        let mut sum = costs.per_probe;
        for o in 0..objects {
            let (first, last) = span[c * objects + o];
            if first > pos[a] && last < pos[b] {
                sum += costs.weights[o];
            }
        }
        sum as f64
    };
    let d_max = depth as usize;
    let at = |a: usize, b: usize, d: usize| (a * p + b) * (d_max + 1) + d;
    let mut e = vec![f64::INFINITY; p * p * (d_max + 1)];
    for a in 0..p - 1 {
        for d in 0..=d_max {
            e[at(a, a + 1, d)] = 0.0;
        }
    }
    for len in 2..p {
        for a in 0..p - len {
            let b = a + len;
            let need = super::ceil_log2(len) as usize;
            for c in a + 1..b {
                let now = lb(c, a, b);
                for d in need.max(1)..=d_max {
                    let v = now
                        + ((c - a) as f64 * e[at(a, c, d - 1)]
                            + (b - c) as f64 * e[at(c, b, d - 1)])
                            / len as f64;
                    if v < e[at(a, b, d)] {
                        e[at(a, b, d)] = v;
                    }
                }
            }
        }
    }
    let last = p - 1;
    Some(
        (1..last)
            .map(|c| {
                let now = costs.now.get(pos[c]).copied().unwrap_or(0) + costs.per_probe;
                now as f64
                    + (c as f64 * e[at(0, c, d_max - 1)]
                        + (last - c) as f64 * e[at(c, last, d_max - 1)])
                        / last as f64
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_keeps_the_bisection_within_gits_fewest() {
        // 300 commits: git probes 8 or 9 times. One midpoint made, --good still untested:
        // 6 more midpoints, 8 in all with the endpoint.
        assert_eq!(budget(300, 75, 1, 1, true), 6);
        assert_eq!(budget(300, 75, 2, 1, false), 6);
        assert_eq!(budget(300, 75, 9, 8, true), 0);
        assert_eq!(budget(1, 2, 0, 0, false), 0);
        // 10 groups over 300 commits: git's count leaves room, the halving's + 1 does not.
        assert_eq!(budget(300, 10, 1, 1, true), 4);
    }

    /// Candidates 0..n, one object whose input (a hot header) changes at `at`: 0..at and
    /// at..n are two builds; 0..at is built.
    fn hot_header(n: usize, at: usize, per_probe: u64) -> BuildCosts {
        BuildCosts {
            weights: vec![1000],
            fingerprints: (0..n).map(|i| Some(vec![u64::from(i >= at)])).collect(),
            now: (0..n).map(|i| if i >= at { 1000 } else { 0 }).collect(),
            per_probe,
        }
    }

    fn best(s: &[f64]) -> usize {
        (0..s.len()).min_by(|&a, &b| s[a].total_cmp(&s[b])).unwrap() + 1
    }

    #[test]
    fn a_full_rebuild_is_avoided_by_cutting_off_centre() {
        // 16 culprit positions (candidates 1..=16); the halving cuts at 8, which would
        // rebuild everything; 5 is built already and still within one probe of slack.
        let pos: Vec<usize> = (0..17).collect();
        let s = scores(&hot_header(17, 6, 10), &pos, 5).unwrap();
        assert_eq!(best(&s), 5, "{s:?}");
        // With minutes per probe the halving wins: its 4 probes for every culprit beat 4.2
        // expected after an off-centre cut, whatever one build costs.
        let s = scores(&hot_header(17, 6, 1_000_000), &pos, 5).unwrap();
        assert_eq!(best(&s), 8, "{s:?}");
    }

    #[test]
    fn the_budget_is_a_hard_limit() {
        let pos: Vec<usize> = (0..17).collect();
        let costs = hot_header(17, 2, 0);
        // 16 culprit positions: 4 probes exactly; probing 1 leaves 15 (needs 4 more): over.
        let s = scores(&costs, &pos, 4).unwrap();
        assert!(s[0].is_infinite());
        assert!(s[7].is_finite());
        assert!(scores(&costs, &pos, 0).is_none());
    }
}
