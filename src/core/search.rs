//! The pure search core: given ordered candidates and the verdicts seen so far, say what to
//! probe next or what the answer is. No git, no processes, no clocks: everything here is a
//! function of its inputs, so it is tested exhaustively against brute force.
//!
//! Candidate 0 is the `--good` endpoint and candidate `n-1` the `--bad` one. Candidates are
//! already deduplicated by tested tree, so every index is a distinct thing to test.
//!
//! Midpoints are *stable*: instead of the exact middle we take, inside the window that cannot
//! cost an extra step, the candidate whose stable key (its first-parent depth in the
//! repository) has the most trailing zero bits. Two bisections over overlapping ranges of the
//! same history therefore tend to probe the same commits, and the result store answers the
//! second one. The window is chosen so that the worst case stays `ceil(log2(range))` probes,
//! the same as an exact binary search (and `git bisect`).

use crate::core::outcome::Verdict;
use serde::{Deserialize, Serialize};

/// When the endpoints are tested.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EndpointCheck {
    /// Test `--bad` then `--good` before anything else: a wrong endpoint is reported at once.
    First,
    /// Assume the endpoints, and test one only when the answer depends on it (the culprit is
    /// next to it). Same trust at the end, fewer probes; a wrong endpoint is found late.
    Lazy,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Endpoint {
    Good,
    Bad,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Answer {
    /// The first candidate with new behaviour, all its predecessors back to an old one tested.
    Found(usize),
    /// Skipped candidates hide the boundary: the first new one is one of these (ascending; the
    /// last one is the first tested-new candidate).
    Ambiguous(Vec<usize>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Probe these candidates next (one per free slot; at least one).
    Probe(Vec<usize>),
    Done(Answer),
    /// An endpoint does not behave as claimed; `got` is what it showed.
    BadEndpoint {
        which: Endpoint,
        got: Verdict,
    },
}

/// State of one bisection. Cheap to rebuild from stored results: the driver replays the store
/// into it, so a killed run resumes exactly where it was.
#[derive(Debug, Clone)]
pub struct Search {
    keys: Vec<u64>,
    verdicts: Vec<Option<Verdict>>,
    endpoints: EndpointCheck,
}

impl Search {
    /// `keys[i]` is a stable position for candidate i (first-parent depth); it only steers
    /// which of several equally good midpoints is taken.
    pub fn new(keys: Vec<u64>, endpoints: EndpointCheck) -> Self {
        assert!(keys.len() >= 2, "a search needs both endpoints");
        let n = keys.len();
        Search {
            keys,
            verdicts: vec![None; n],
            endpoints,
        }
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    pub fn record(&mut self, index: usize, verdict: Verdict) {
        self.verdicts[index] = Some(verdict);
    }

    pub fn verdict(&self, index: usize) -> Option<Verdict> {
        self.verdicts[index]
    }

    /// Current bounds: (last old before the first new, first new). Unknown endpoints count as
    /// what they claim to be.
    pub fn bounds(&self) -> (usize, usize) {
        let n = self.len();
        let hi = (1..n)
            .find(|&i| self.verdicts[i] == Some(Verdict::New))
            .unwrap_or(n - 1);
        let lo = (0..hi)
            .rev()
            .find(|&i| self.verdicts[i] == Some(Verdict::Old))
            .unwrap_or(0);
        (lo, hi)
    }

    /// Probes an exact binary search still needs in the worst case (a progress estimate).
    pub fn steps_left(&self) -> u32 {
        let (lo, hi) = self.bounds();
        let open = (lo + 1..hi).filter(|&i| self.verdicts[i].is_none()).count();
        ceil_log2(open + 1)
    }

    /// What to do next, proposing up to `slots` probes at once (multisection when > 1).
    pub fn next(&self, slots: usize) -> Step {
        let slots = slots.max(1);
        let n = self.len();
        let (good, bad) = (self.verdicts[0], self.verdicts[n - 1]);
        if let Some(got @ (Verdict::Old | Verdict::Skip)) = bad {
            return Step::BadEndpoint {
                which: Endpoint::Bad,
                got,
            };
        }
        if let Some(got @ (Verdict::New | Verdict::Skip)) = good {
            return Step::BadEndpoint {
                which: Endpoint::Good,
                got,
            };
        }
        if self.endpoints == EndpointCheck::First {
            let mut ends = Vec::new();
            if bad.is_none() {
                ends.push(n - 1);
            }
            if good.is_none() {
                ends.push(0);
            }
            if !ends.is_empty() {
                ends.truncate(slots);
                return Step::Probe(ends);
            }
        }
        let (lo, hi) = self.bounds();
        let open: Vec<usize> = (lo + 1..hi)
            .filter(|&i| self.verdicts[i].is_none())
            .collect();
        if open.is_empty() {
            // The answer now depends on the endpoints it touches: test them before claiming it.
            let mut ends = Vec::new();
            if hi == n - 1 && bad.is_none() {
                ends.push(n - 1);
            }
            if lo == 0 && good.is_none() {
                ends.push(0);
            }
            if !ends.is_empty() {
                ends.truncate(slots);
                return Step::Probe(ends);
            }
            let skipped: Vec<usize> = (lo + 1..hi)
                .filter(|&i| self.verdicts[i] == Some(Verdict::Skip))
                .collect();
            return Step::Done(if skipped.is_empty() {
                Answer::Found(hi)
            } else {
                let mut set = skipped;
                set.push(hi);
                Answer::Ambiguous(set)
            });
        }
        Step::Probe(self.pick(lo, hi, &open, slots))
    }

    /// Choose up to `slots` distinct probes splitting (lo, hi) into `slots + 1` parts.
    fn pick(&self, lo: usize, hi: usize, open: &[usize], slots: usize) -> Vec<usize> {
        let parts = slots.min(open.len()) + 1;
        let span = hi - lo;
        let mut chosen: Vec<usize> = Vec::with_capacity(parts - 1);
        for j in 1..parts {
            // Target j/parts of the way; every part may grow up to the power-of-two budget
            // that keeps the worst-case number of rounds unchanged.
            let target2 = 2 * lo * parts + 2 * j * span; // 2 * parts * target
            let part = span.div_ceil(parts);
            let budget = 1usize << ceil_log2(part);
            let slack = budget.saturating_sub(part);
            let (wlo, whi) = if parts == 2 {
                // Both halves must stay within the budget (worst case unchanged), and the split
                // within 3/8..5/8 so the expected number of probes stays that of an exact halving
                // (the budget alone allows 256/44 splits of 300, which costs git's lucky 8th step).
                let mid = lo + span / 2;
                let near = (span / 8).max(1);
                (
                    hi.saturating_sub(budget).max(mid.saturating_sub(near)),
                    (lo + budget).min(mid + near),
                )
            } else {
                let t = target2 / (2 * parts);
                (t.saturating_sub(slack / 2), t + slack / 2)
            };
            let best = open
                .iter()
                .copied()
                .filter(|m| !chosen.contains(m))
                .filter(|&m| m >= wlo && m <= whi)
                .max_by(|&a, &b| {
                    let da = (2 * a * parts).abs_diff(target2);
                    let db = (2 * b * parts).abs_diff(target2);
                    tz(self.keys[a])
                        .cmp(&tz(self.keys[b]))
                        .then(db.cmp(&da))
                        .then(b.cmp(&a))
                })
                .or_else(|| {
                    open.iter()
                        .copied()
                        .filter(|m| !chosen.contains(m))
                        .min_by_key(|&m| ((2 * m * parts).abs_diff(target2), m))
                });
            if let Some(m) = best {
                chosen.push(m);
            }
        }
        chosen.sort_unstable();
        chosen
    }
}

fn tz(key: u64) -> u32 {
    if key == 0 {
        64
    } else {
        key.trailing_zeros()
    }
}

/// ceil(log2(x)) for x >= 1; 0 for x <= 1.
pub fn ceil_log2(x: usize) -> u32 {
    if x <= 1 {
        0
    } else {
        usize::BITS - (x - 1).leading_zeros()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Drive a search against a fixed oracle; returns (answer or endpoint error, probes).
    fn run(
        keys: Vec<u64>,
        ends: EndpointCheck,
        slots: usize,
        oracle: impl Fn(usize) -> Verdict,
    ) -> (Step, Vec<usize>) {
        let mut s = Search::new(keys, ends);
        let mut probes = Vec::new();
        loop {
            match s.next(slots) {
                Step::Probe(ix) => {
                    assert!(!ix.is_empty() && ix.len() <= slots);
                    for i in ix {
                        assert!(s.verdict(i).is_none(), "probed {i} twice");
                        probes.push(i);
                        s.record(i, oracle(i));
                    }
                }
                other => return (other, probes),
            }
        }
    }

    /// Brute force: the honest answer for a monotone history with skips.
    fn expected(n: usize, first_new: usize, skips: &[bool]) -> Answer {
        let hi = (first_new..n).find(|&i| !skips[i]).unwrap();
        let lo = (0..first_new).rev().find(|&i| !skips[i]).unwrap();
        let mut set: Vec<usize> = (lo + 1..hi).filter(|&i| skips[i]).collect();
        if set.is_empty() {
            Answer::Found(hi)
        } else {
            set.push(hi);
            Answer::Ambiguous(set)
        }
    }

    fn history() -> impl Strategy<Value = (usize, usize, Vec<bool>, u64)> {
        (2usize..300).prop_flat_map(|n| {
            (
                Just(n),
                1..n,
                proptest::collection::vec(proptest::bool::weighted(0.2), n),
                0u64..10_000,
            )
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn monotone_with_skips_matches_brute_force(
            (n, first_new, mut skips, base) in history(),
            lazy in any::<bool>(),
            slots in 1usize..5,
        ) {
            skips[0] = false;
            skips[n - 1] = false;
            let keys: Vec<u64> = (0..n as u64).map(|i| base + i).collect();
            let ends = if lazy { EndpointCheck::Lazy } else { EndpointCheck::First };
            let (step, _) = run(keys, ends, slots, |i| {
                if skips[i] { Verdict::Skip } else if i >= first_new { Verdict::New } else { Verdict::Old }
            });
            prop_assert_eq!(step, Step::Done(expected(n, first_new, &skips)));
        }

        #[test]
        fn never_more_probes_than_binary_search(
            (n, first_new, _skips, base) in history(),
        ) {
            let keys: Vec<u64> = (0..n as u64).map(|i| base + i).collect();
            let (step, probes) = run(keys, EndpointCheck::Lazy, 1, |i| {
                if i >= first_new { Verdict::New } else { Verdict::Old }
            });
            prop_assert_eq!(step, Step::Done(Answer::Found(first_new)));
            let interior = probes.iter().filter(|&&i| i != 0 && i != n - 1).count() as u32;
            prop_assert!(interior <= ceil_log2(n - 1), "{} probes for {} candidates", interior, n);
        }

        #[test]
        fn multisection_rounds_shrink_like_k_plus_one(
            (n, first_new, _skips, base) in history(),
            slots in 2usize..5,
        ) {
            let keys: Vec<u64> = (0..n as u64).map(|i| base + i).collect();
            let mut s = Search::new(keys, EndpointCheck::Lazy);
            let mut rounds = 0u32;
            loop {
                match s.next(slots) {
                    Step::Probe(ix) => {
                        if !ix.iter().all(|&i| i == 0 || i == n - 1) { rounds += 1; }
                        for i in ix { s.record(i, if i >= first_new { Verdict::New } else { Verdict::Old }); }
                    }
                    Step::Done(a) => { prop_assert_eq!(a, Answer::Found(first_new)); break; }
                    other => prop_assert!(false, "{:?}", other),
                }
            }
            // Within one round of the ideal ceil(log_{k+1}(n-1)).
            let ideal = ((n - 1) as f64).ln() / ((slots + 1) as f64).ln();
            prop_assert!(f64::from(rounds) <= ideal.ceil() + 1.0, "{} rounds, ideal {}", rounds, ideal);
        }

        #[test]
        fn arbitrary_verdicts_terminate_with_a_consistent_boundary(
            verdicts in proptest::collection::vec(0u8..3, 2..120),
        ) {
            let n = verdicts.len();
            let v = |i: usize| match verdicts[i] { 0 => Verdict::Old, 1 => Verdict::New, _ => Verdict::Skip };
            let keys: Vec<u64> = (0..n as u64).collect();
            let (step, _) = run(keys, EndpointCheck::First, 1, v);
            match step {
                Step::Done(Answer::Found(h)) => {
                    prop_assert_eq!(v(h), Verdict::New);
                    prop_assert_eq!(v(h - 1), Verdict::Old);
                }
                Step::Done(Answer::Ambiguous(set)) => {
                    let h = *set.last().unwrap();
                    prop_assert_eq!(v(h), Verdict::New);
                    for &i in &set[..set.len() - 1] { prop_assert_eq!(v(i), Verdict::Skip); }
                    prop_assert_eq!(v(set[0] - 1), Verdict::Old);
                }
                Step::BadEndpoint { which: Endpoint::Bad, got } => prop_assert_eq!(got, v(n - 1)),
                Step::BadEndpoint { which: Endpoint::Good, got } => prop_assert_eq!(got, v(0)),
                Step::Probe(_) => prop_assert!(false),
            }
        }
    }

    #[test]
    fn endpoints_first_probes_bad_then_good() {
        let s = Search::new(vec![0, 1, 2, 3], EndpointCheck::First);
        assert_eq!(s.next(1), Step::Probe(vec![3]));
        assert_eq!(s.next(2), Step::Probe(vec![3, 0]));
    }

    #[test]
    fn wrong_endpoints_are_reported() {
        let mut s = Search::new(vec![0, 1, 2, 3], EndpointCheck::First);
        s.record(3, Verdict::Old);
        assert_eq!(
            s.next(1),
            Step::BadEndpoint {
                which: Endpoint::Bad,
                got: Verdict::Old
            }
        );
        let mut s = Search::new(vec![0, 1, 2, 3], EndpointCheck::First);
        s.record(3, Verdict::New);
        s.record(0, Verdict::New);
        assert_eq!(
            s.next(1),
            Step::BadEndpoint {
                which: Endpoint::Good,
                got: Verdict::New
            }
        );
    }

    #[test]
    fn lazy_endpoint_checked_when_culprit_is_next_to_it() {
        // Everything new: the answer would be candidate 1, which depends on the good endpoint.
        let (step, probes) = run((0..9).collect(), EndpointCheck::Lazy, 1, |_| Verdict::New);
        assert_eq!(
            step,
            Step::BadEndpoint {
                which: Endpoint::Good,
                got: Verdict::New
            }
        );
        assert!(probes.contains(&0));
    }

    #[test]
    fn stable_midpoints_are_shared_by_overlapping_ranges() {
        // Depths 1000..1300; two bisections with different good endpoints.
        let keys_a: Vec<u64> = (1000..1300).collect();
        let keys_b: Vec<u64> = (1020..1300).collect();
        let a = Search::new(keys_a.clone(), EndpointCheck::Lazy);
        let b = Search::new(keys_b.clone(), EndpointCheck::Lazy);
        let (Step::Probe(pa), Step::Probe(pb)) = (a.next(1), b.next(1)) else {
            panic!()
        };
        assert_eq!(
            keys_a[pa[0]], keys_b[pb[0]],
            "first probes should be the same commit"
        );
        assert_eq!(keys_a[pa[0]] % 128, 0);
    }

    #[test]
    fn ceil_log2_values() {
        assert_eq!(
            [1, 2, 3, 4, 5, 8, 9, 300].map(ceil_log2),
            [0, 1, 2, 2, 3, 3, 4, 9]
        );
    }
}

#[cfg(test)]
mod expected_probes {
    use super::*;

    /// Mean interior probes over every culprit position: ours vs an exact-halving search.
    fn means(n: usize, base: u64) -> (f64, f64) {
        let (mut ours, mut exact) = (0usize, 0usize);
        for first_new in 1..n {
            let mut s = Search::new(
                (0..n as u64).map(|i| base + i).collect(),
                EndpointCheck::Lazy,
            );
            while let Step::Probe(ix) = s.next(1) {
                for i in ix {
                    if i != 0 && i != n - 1 {
                        ours += 1;
                    }
                    s.record(
                        i,
                        if i >= first_new {
                            Verdict::New
                        } else {
                            Verdict::Old
                        },
                    );
                }
            }
            let (mut lo, mut hi) = (0, n - 1);
            while hi - lo > 1 {
                let m = (lo + hi) / 2;
                exact += 1;
                if m >= first_new {
                    hi = m
                } else {
                    lo = m
                }
            }
        }
        let k = (n - 1) as f64;
        (ours as f64 / k, exact as f64 / k)
    }

    #[test]
    fn stable_midpoints_cost_almost_nothing_on_average() {
        for (n, base) in [(50, 7), (101, 0), (300, 1000), (301, 12345), (1000, 3)] {
            let (ours, exact) = means(n, base);
            eprintln!("n={n}: ours {ours:.3} exact {exact:.3}");
            assert!(
                ours <= exact + 0.15,
                "n={n}: {ours:.3} probes on average vs {exact:.3}"
            );
        }
    }
}
