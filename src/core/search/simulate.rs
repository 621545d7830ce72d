//! The search replayed against a known history: what the tests check the search with and what
//! `--dry-run` promises before anything is built. One simulation for both, so the numbers a
//! user plans a night of builds on are the search's own, not a second model of it that drifts.

use super::{git_fewest, EndpointCheck, Search, Step};
use crate::core::outcome::Verdict;

/// How a replayed search ended, and what it probed on the way, wave by wave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replay {
    pub end: Step,
    pub waves: Vec<Vec<usize>>,
}

impl Replay {
    /// Every probe, in the order they were asked for.
    pub fn probes(&self) -> Vec<usize> {
        self.waves.concat()
    }
}

/// Drives a search over candidates keyed `keys` with `slots` slots, answering each probe with
/// `oracle`, until it stops asking.
pub fn replay(
    keys: Vec<u64>,
    ends: EndpointCheck,
    slots: usize,
    oracle: impl Fn(usize) -> Verdict,
) -> Replay {
    let mut s = Search::new(keys, ends);
    let mut waves = Vec::new();
    loop {
        match s.next(slots) {
            Step::Probe(wave) => {
                for &i in &wave {
                    s.record(i, oracle(i));
                }
                waves.push(wave);
            }
            end => return Replay { end, waves },
        }
    }
}

/// A truthful history of `n` candidates: old below `culprit`, new from it on.
pub fn truthful(culprit: usize) -> impl Fn(usize) -> Verdict {
    move |i| {
        if i >= culprit {
            Verdict::New
        } else {
            Verdict::Old
        }
    }
}

/// A `--bad` that does not show the new behaviour: every probe is old.
pub fn lying_bad(_: usize) -> Verdict {
    Verdict::Old
}

/// Probes until a search of `n` candidates with `slots` slots reports a `--bad` that does not
/// show the new behaviour (every probe old), when probes cost alike: the real search, replayed;
/// what `--dry-run` promises for a lying `--bad`.
pub fn lying_bad_probes(n: usize, slots: usize, ends: EndpointCheck) -> usize {
    replay((0..n as u64).collect(), ends, slots.max(1), lying_bad)
        .probes()
        .len()
}

/// The most probes a search of `n` candidates spends with `slots` slots, for any culprit, and
/// where they go; the bound `--dry-run` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorstCase {
    /// Midpoints over the open candidates (`n - 2`).
    pub midpoints: usize,
    /// The waves they take (one midpoint per wave with one slot).
    pub waves: usize,
    /// Endpoint probes: `--bad` or the endpoint next to the answer with one slot or
    /// `--lazy-endpoints`, with any number of slots (the first wave holds midpoints only).
    pub endpoints: usize,
    /// One midpoint more where one slot cuts off-centre to skip a rebuild
    /// (`costs::budget`), capped at git's fewest on the commits.
    pub off_centre: bool,
    pub total: usize,
}

/// The worst case of a search over `n` candidates that cover `commits` commits. Mirrors what
/// `Search::pick` guarantees: a wave of `slots` probes leaves at most the power of two at or
/// above an equal share of the span (the slack it allows for stable midpoints).
pub fn worst_case(n: usize, slots: usize, _ends: EndpointCheck, commits: usize) -> WorstCase {
    let open = n.saturating_sub(2);
    if open == 0 {
        return WorstCase {
            midpoints: 0,
            waves: 0,
            endpoints: n,
            off_centre: false,
            total: n,
        };
    }
    let slots = slots.max(1);
    // One endpoint at most, whatever the slots: `--bad` is built only after an old midpoint
    // (so `--good` never touches the answer), or because the answer touches it; the same
    // with `--lazy-endpoints`, so `_ends` does not change the bound. With more than one slot
    // it may share any wave but the first (which holds midpoints only), and that wave then
    // halves with one midpoint fewer, which can cost a later wave (360 candidates, 3 slots:
    // 15 probes, not 14); so every wave it could share is priced, and the most midpoints and
    // waves of any placement are the bound. On its own it is one probe and one wave more.
    let endpoints = 1;
    let alone = halving_waves(open, slots, None);
    let shared = if slots > 1 { 1..alone.1 } else { 0..0 };
    let (midpoints, waves) = shared
        .map(|k| {
            let (m, w) = halving_waves(open, slots, Some(k));
            (m, w.saturating_sub(1))
        })
        .fold(alone, |a, b| (a.0.max(b.0), a.1.max(b.1)));
    let halving = midpoints + endpoints;
    let off_centre = (halving + 1).min(git_fewest(commits));
    let off = slots == 1 && off_centre > halving;
    WorstCase {
        midpoints,
        waves,
        endpoints,
        off_centre: off,
        total: if off { off_centre } else { halving },
    }
}

/// Midpoints and waves to close `open` candidates with `slots` slots, where wave `shared` (if
/// any) gives one slot to an endpoint. Mirrors what `Search::pick` guarantees: a wave of `s`
/// midpoints leaves at most the power of two at or above an equal share of the span.
fn halving_waves(open: usize, slots: usize, shared: Option<usize>) -> (usize, usize) {
    let (mut span, mut midpoints, mut waves) = (open + 1, 0usize, 0usize);
    while span > 1 {
        let s = if shared == Some(waves) {
            slots - 1
        } else {
            slots
        };
        midpoints += s.min(span - 1);
        waves += 1;
        span = if span - 1 <= s {
            1
        } else {
            span.div_ceil(s + 1).next_power_of_two()
        };
    }
    (midpoints, waves)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::search::Conclusion;
    use proptest::prelude::*;

    fn keys(n: usize) -> Vec<u64> {
        (0..n as u64).collect()
    }

    fn both() -> impl Strategy<Value = EndpointCheck> {
        prop_oneof![Just(EndpointCheck::First), Just(EndpointCheck::Lazy)]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]

        /// The bound holds for every culprit and slot count, and the replay finds the culprit.
        #[test]
        fn the_worst_case_bounds_every_truthful_search(
            (n, culprit) in (2usize..400).prop_flat_map(|n| (Just(n), 1..n)),
            slots in 1usize..6,
            ends in both(),
        ) {
            let r = replay(keys(n), ends, slots, truthful(culprit));
            prop_assert_eq!(&r.end, &Step::Done(Conclusion::Found { index: culprit }));
            let w = worst_case(n, slots, ends, n - 1);
            prop_assert!(r.probes().len() <= w.total, "{} > {:?}", r.probes().len(), w);
            prop_assert!(r.waves.len() <= w.waves + w.endpoints, "{:?} {:?}", r.waves, w);
        }

        /// A lying `--bad` is reported, at the latest after the whole walk toward it.
        #[test]
        fn a_lying_bad_ends_within_the_worst_case(
            n in 3usize..400,
            slots in 1usize..6,
            ends in both(),
        ) {
            let r = replay(keys(n), ends, slots, lying_bad);
            let is_bad_endpoint = matches!(r.end, Step::Done(Conclusion::BadEndpoint { .. }));
            prop_assert!(is_bad_endpoint, "{:?}", r.end);
            prop_assert!(r.probes().len() <= worst_case(n, slots, ends, n - 1).total);
        }
    }

    /// The case proptest found: `--bad` took a slot of the second wave, the third wave left
    /// 16 candidates, not 8, and a fifth full wave followed (15 probes; the bound said 14).
    #[test]
    fn an_endpoint_sharing_a_wave_is_priced_in_the_bound() {
        let r = replay(keys(360), EndpointCheck::First, 3, truthful(337));
        assert_eq!(r.end, Step::Done(Conclusion::Found { index: 337 }));
        let w = worst_case(360, 3, EndpointCheck::First, 359);
        assert_eq!(r.probes().len(), 15);
        assert!(r.probes().len() <= w.total, "{:?} {w:?}", r.waves);
    }

    /// With one slot the bound is reached (a bound that is merely safe would mislead), or
    /// missed by one where the worst culprit sits away from both endpoints and the walk never
    /// made `--bad` worth a build.
    #[test]
    fn one_slot_reaches_the_bound() {
        for n in 2..=120 {
            for ends in [EndpointCheck::First, EndpointCheck::Lazy] {
                let worst = (1..n)
                    .map(|c| replay(keys(n), ends, 1, truthful(c)).probes().len())
                    .max()
                    .unwrap();
                let w = worst_case(n, 1, ends, n - 1);
                assert!(worst + 1 >= w.total, "n={n} {ends:?}: {worst} vs {w:?}");
            }
        }
    }

    #[test]
    fn the_off_centre_midpoint_is_capped_at_gits_fewest() {
        let plain = worst_case(33, 1, EndpointCheck::First, 32);
        assert!(!plain.off_centre);
        let many = worst_case(33, 1, EndpointCheck::First, 8 * 33);
        assert!(many.off_centre);
        assert_eq!(many.total, plain.total + 1);
        // Several slots never cut off-centre.
        assert!(!worst_case(33, 2, EndpointCheck::First, 8 * 33).off_centre);
        assert_eq!(worst_case(2, 1, EndpointCheck::First, 1).total, 2);
    }
}
