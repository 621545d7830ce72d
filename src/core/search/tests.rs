use super::*;
use proptest::prelude::*;

mod costs;
mod endpoints;

/// Drive a search against a fixed oracle (`simulate::replay`); returns (answer or endpoint
/// error, probes), checking that every wave fits the slots and nothing is probed twice.
fn run(
    keys: Vec<u64>,
    ends: EndpointCheck,
    slots: usize,
    oracle: impl Fn(usize) -> Verdict,
) -> (Step, Vec<usize>) {
    let r = simulate::replay(keys, ends, slots, oracle);
    for wave in &r.waves {
        assert!(!wave.is_empty() && wave.len() <= slots, "{wave:?}");
    }
    let probes = r.probes();
    let mut seen = std::collections::HashSet::new();
    for i in &probes {
        assert!(seen.insert(*i), "probed {i} twice");
    }
    (r.end, probes)
}

/// Brute force: the honest answer for a monotone history with skips.
fn expected(n: usize, first_new: usize, skips: &[bool]) -> Conclusion {
    let hi = (first_new..n).find(|&i| !skips[i]).unwrap();
    let lo = (0..first_new).rev().find(|&i| !skips[i]).unwrap();
    let mut set: Vec<usize> = (lo + 1..hi).filter(|&i| skips[i]).collect();
    if set.is_empty() {
        Conclusion::Found { index: hi }
    } else {
        set.push(hi);
        Conclusion::Ambiguous { indices: set }
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

    /// An answer announced while only endpoint checks remain is the answer those checks then
    /// confirm (endpoints that hold), and a search that ends on an endpoint-only wave always
    /// announced it first: the user reads it before the check, never a different one after.
    #[test]
    fn the_provisional_answer_is_the_answer_when_the_endpoints_hold(
        (n, first_new, mut skips, base) in history(),
        lazy in any::<bool>(),
        slots in 1usize..5,
    ) {
        skips[0] = false;
        skips[n - 1] = false;
        let oracle = |i: usize| {
            if skips[i] { Verdict::Skip } else if i >= first_new { Verdict::New } else { Verdict::Old }
        };
        let ends = if lazy { EndpointCheck::Lazy } else { EndpointCheck::First };
        let mut s = Search::new((0..n as u64).map(|i| base + i).collect(), ends);
        let (mut announced, mut last_wave) = (None, Vec::new());
        let end = loop {
            if announced.is_none() {
                announced = s.provisional();
            }
            match s.next(slots) {
                Step::Probe(wave) => {
                    for &i in &wave {
                        s.record(i, oracle(i));
                    }
                    last_wave = wave;
                }
                Step::Done(c) => break c,
            }
        };
        if let Some((answer, pending)) = &announced {
            prop_assert_eq!(answer, &end);
            prop_assert!(!pending.is_empty());
        }
        if !last_wave.is_empty() && last_wave.iter().all(|&i| i == 0 || i == n - 1) {
            prop_assert!(announced.is_some(), "ended on {:?} unannounced", last_wave);
        }
    }

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
        prop_assert_eq!(step, Step::Done(Conclusion::Found { index: first_new }));
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
                Step::Done(a) => { prop_assert_eq!(a, Conclusion::Found { index: first_new }); break; }
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
            Step::Done(Conclusion::Found { index: h }) => {
                prop_assert_eq!(v(h), Verdict::New);
                prop_assert_eq!(v(h - 1), Verdict::Old);
            }
            Step::Done(Conclusion::Ambiguous { indices: set }) => {
                let h = *set.last().unwrap();
                prop_assert_eq!(v(h), Verdict::New);
                for &i in &set[..set.len() - 1] { prop_assert_eq!(v(i), Verdict::Skip); }
                prop_assert_eq!(v(set[0] - 1), Verdict::Old);
            }
            Step::Done(Conclusion::BadEndpoint { which: Endpoint::Bad, got }) => prop_assert_eq!(got, v(n - 1)),
            Step::Done(Conclusion::BadEndpoint { which: Endpoint::Good, got }) => prop_assert_eq!(got, v(0)),
            Step::Probe(_) => prop_assert!(false),
        }
    }
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

/// Mean probe counts against exact halving (the stable-midpoint cost argument).
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

#[test]
fn stored_candidates_are_asked_first_wherever_they_lie() {
    let keys: Vec<u64> = (1000..1300).collect();
    let mut s = Search::new(keys, EndpointCheck::Lazy);
    let Step::Probe(first) = s.next(1) else {
        panic!()
    };
    assert_ne!(first, vec![130]);
    // The stored candidate nearest the middle wins, inside the window or not.
    s.set_cheap(130);
    s.set_cheap(10);
    assert_eq!(s.next(1), Step::Probe(vec![130]));
    let mut t = Search::new((1000..1300).collect(), EndpointCheck::Lazy);
    t.set_cheap(10);
    assert_eq!(t.next(1), Step::Probe(vec![10]));
    // Once answered it is no longer open: the search goes on from the range it left.
    t.record(10, Verdict::Old);
    let Step::Probe(next) = t.next(1) else {
        panic!()
    };
    assert!(
        next[0] > 10 + 290 * 3 / 8 && next[0] < 10 + 290 * 5 / 8,
        "{next:?}"
    );
}

/// The progress line's bound holds: before every step of a search with one slot, `steps_left`
/// is at least the probes still to come, endpoints included (a two-candidate range probes both
/// endpoints, and said "~0 steps left" before them), and it reaches 0 only when nothing is left.
#[test]
fn steps_left_bounds_the_probes_still_to_come_endpoints_included() {
    for n in 2..=40usize {
        for first_new in 1..n {
            for ends in [EndpointCheck::First, EndpointCheck::Lazy] {
                let oracle = |i: usize| {
                    if i >= first_new {
                        Verdict::New
                    } else {
                        Verdict::Old
                    }
                };
                let mut s = Search::new((0..n as u64).collect(), ends);
                let mut bounds = Vec::new();
                let mut probes = Vec::new();
                while let Step::Probe(wave) = s.next(1) {
                    bounds.push(s.steps_left());
                    for i in wave {
                        probes.push(i);
                        s.record(i, oracle(i));
                    }
                }
                for (k, bound) in bounds.iter().enumerate() {
                    let to_come = (probes.len() - k) as u32;
                    assert!(
                        *bound >= to_come,
                        "n={n} first_new={first_new} {ends:?}: step {k} said {bound} left, {to_come} came ({probes:?})"
                    );
                }
                assert_eq!(s.steps_left(), 0, "n={n} first_new={first_new} {ends:?}");
            }
        }
    }
}
