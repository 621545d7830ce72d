//! The report's one line on ccache: whether the builds run now were cheap because they hit the
//! cache, or paid in full because there was none (issue 13). Stored probes built in an earlier
//! run; their builds are not this run's cost, so they are left out.

use crate::core::ccache::{Ccache, Total};

fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The line over the builds run now (a bisect's probes, a matrix's cells; stored ones left out
/// by the caller); `None` when there were none.
pub(super) fn line<'a>(builds: impl IntoIterator<Item = &'a Ccache>) -> Option<String> {
    let t = Total::of(builds);
    if t.used == 0 {
        return (t.without > 0).then(|| "ccache: not used (not installed)".to_string());
    }
    let mut line = format!(
        "ccache: {}, {}",
        count(t.hits, "hit", "hits"),
        count(t.misses, "miss", "misses")
    );
    match t.hit_percent() {
        Some(p) => line.push_str(&format!(" ({p}% hit)")),
        None => line.push_str(" (nothing compiled)"),
    }
    line.push_str(&format!(" over {}", count(t.used, "build", "builds")));
    if t.without > 0 {
        let n = count(t.without, "build", "builds");
        line.push_str(&format!("; not used (not installed) for {n}"));
    }
    Some(line)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::result::BisectResult;

    /// The bisect report's own call.
    fn line(b: &BisectResult) -> Option<String> {
        super::line(
            b.probes
                .iter()
                .filter(|p| !p.cached)
                .filter_map(|p| p.ccache.as_ref()),
        )
    }

    fn with(probes: &[(Option<Ccache>, bool)]) -> BisectResult {
        let mut b = crate::report::tests::bisect_found();
        let template = b.probes[0].clone();
        b.probes = probes
            .iter()
            .map(|&(ccache, cached)| {
                let mut p = template.clone();
                p.ccache = ccache;
                p.cached = cached;
                p
            })
            .collect();
        b
    }

    #[test]
    fn counts_only_builds_run_now_and_says_when_ccache_is_missing() {
        let used = |hits, misses| Some(Ccache::Used { hits, misses });
        let b = with(&[
            (used(800, 90), false),
            (used(12, 5), false),
            (used(1000, 0), true),
            (None, false),
        ]);
        assert_eq!(
            line(&b).as_deref(),
            Some("ccache: 812 hits, 95 misses (90% hit) over 2 builds")
        );
        let b = with(&[(Some(Ccache::NotInstalled), false), (None, true)]);
        assert_eq!(
            line(&b).as_deref(),
            Some("ccache: not used (not installed)")
        );
        let b = with(&[(used(0, 0), false)]);
        assert_eq!(
            line(&b).as_deref(),
            Some("ccache: 0 hits, 0 misses (nothing compiled) over 1 build")
        );
        let b = with(&[(used(1, 1), false), (Some(Ccache::NotInstalled), false)]);
        assert_eq!(
            line(&b).as_deref(),
            Some("ccache: 1 hit, 1 miss (50% hit) over 1 build; not used (not installed) for 1 build")
        );
        assert_eq!(line(&with(&[(used(3, 0), true), (None, false)])), None);
    }

    /// A matrix says what ccache did for the builds it ran now, as a bisect does; stored cells and
    /// cells without a build are left out.
    #[test]
    fn a_matrix_says_what_ccache_did() {
        use crate::core::outcome::Outcome;
        use crate::report::tests::{cell, matrix, CULPRIT};
        let mut a = cell("hip", CULPRIT, Outcome::Untestable);
        a.ccache = Some(Ccache::Used {
            hits: 170,
            misses: 12,
        });
        let mut stored = cell("cpu", CULPRIT, Outcome::Pass);
        stored.cached = true;
        stored.ccache = Some(Ccache::Used {
            hits: 0,
            misses: 90,
        });
        let md = matrix(vec![a, stored, cell("x", CULPRIT, Outcome::Pass)]).markdown();
        assert!(
            md.contains("ccache: 170 hits, 12 misses (93% hit) over 1 build"),
            "{md}"
        );
        let md = matrix(vec![cell("x", CULPRIT, Outcome::Pass)]).markdown();
        assert!(!md.contains("ccache"), "{md}");
    }
}
