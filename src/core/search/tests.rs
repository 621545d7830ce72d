use super::*;
use proptest::prelude::*;

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
fn bad_is_tested_when_the_walk_toward_it_makes_it_worth_it() {
    // A free slot: both endpoints in the first wave.
    let s = Search::new((0..100).collect(), EndpointCheck::First);
    assert_eq!(s.next(2), Step::Probe(vec![99, 0]));
    // One slot: the first midpoint; an old one no longer sends the search to --bad (half the
    // truthful culprits lie above it, and --bad would be a full build nobody needs).
    let Step::Probe(mid) = s.next(1) else {
        panic!()
    };
    assert!(mid[0] > 0 && mid[0] < 99, "{mid:?}");
    let mut old = s.clone();
    old.record(mid[0], Verdict::Old);
    assert_ne!(old.next(1), Step::Probe(vec![99]));
    // Old answers in a row walk toward --bad until it is worth building, and a --bad that
    // shows the old behaviour then stops the search, long before the walk's end.
    let mut walked = 1;
    loop {
        match old.next(1) {
            Step::Probe(p) if p == vec![99] => break,
            Step::Probe(p) => {
                walked += 1;
                old.record(p[0], Verdict::Old);
            }
            other => panic!("{other:?}"),
        }
    }
    assert!((2..ceil_log2(98) as usize).contains(&walked), "{walked}");
    old.record(99, Verdict::Old);
    assert_eq!(
        old.next(1),
        Step::BadEndpoint {
            which: Endpoint::Bad,
            got: Verdict::Old
        }
    );
    // A --bad whose build is incremental from a built neighbour is checked at once.
    let (mut cheap, mut now) = (s.clone(), vec![20_000; 100]);
    cheap.record(mid[0], Verdict::Old);
    now[99] = 200;
    cheap.set_costs(
        BuildCosts {
            fingerprints: vec![None; 100],
            now,
            per_probe: 300,
            ..Default::default()
        },
        8,
    );
    assert_eq!(cheap.next(1), Step::Probe(vec![99]));
    // A midpoint that reproduces proves the fault does: --bad waits until the answer needs it.
    let mut new = s.clone();
    new.record(mid[0], Verdict::New);
    let Step::Probe(next) = new.next(1) else {
        panic!()
    };
    assert!(next[0] < mid[0], "{next:?}");
}

/// Endpoint probes over every culprit position of a truthful range, one slot.
fn endpoint_probes(n: usize, ends: EndpointCheck, culprit: usize) -> (Step, usize) {
    let (step, probes) = run((0..n as u64).collect(), ends, 1, |i| {
        if i >= culprit {
            Verdict::New
        } else {
            Verdict::Old
        }
    });
    (
        step,
        probes.iter().filter(|&&i| i == 0 || i == n - 1).count(),
    )
}

#[test]
fn truthful_endpoints_cost_no_endpoint_probe() {
    let n = 300;
    let mut total = 0;
    for culprit in 1..n {
        let (step, ends) = endpoint_probes(n, EndpointCheck::First, culprit);
        assert_eq!(step, Step::Done(Answer::Found(culprit)));
        // No endpoint probe unless the answer touches one, or the culprit sits near the top,
        // where the search walked toward --bad through three old answers in a row.
        let touches = usize::from(culprit == 1) + usize::from(culprit == n - 1);
        if culprit < n * 3 / 4 {
            assert_eq!(ends, touches, "culprit {culprit}");
        }
        total += ends;
    }
    // Equal probe costs: 0.15 endpoint probes per bisection on average (the eager check after
    // an old first midpoint: 0.57); with build costs the check waits until --bad is cheap.
    assert!(
        total * 6 <= n,
        "{total} endpoint probes over {} culprits",
        n - 1
    );
}

#[test]
fn the_answer_next_to_bad_verifies_it() {
    for n in [3usize, 10, 300] {
        let (step, probes) = run((0..n as u64).collect(), EndpointCheck::First, 1, |i| {
            if i == n - 1 {
                Verdict::New
            } else {
                Verdict::Old
            }
        });
        assert_eq!(step, Step::Done(Answer::Found(n - 1)), "n={n}");
        assert!(probes.contains(&(n - 1)), "n={n}: {probes:?}");
    }
}

#[test]
fn a_lying_bad_is_reported_within_the_walk() {
    for n in [3usize, 10, 64, 300] {
        for ends in [EndpointCheck::First, EndpointCheck::Lazy] {
            let (step, probes) = run((0..n as u64).collect(), ends, 1, |_| Verdict::Old);
            assert_eq!(
                step,
                Step::BadEndpoint {
                    which: Endpoint::Bad,
                    got: Verdict::Old
                },
                "n={n}"
            );
            // At most the walk all the way to --bad: the midpoints and --bad itself.
            assert!(
                probes.len() as u32 <= ceil_log2(n - 1) + 1,
                "n={n} {ends:?}: {probes:?}"
            );
            assert_eq!(probes.last(), Some(&(n - 1)));
        }
    }
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

/// Costs where only `now` matters: no objects, so the future costs nothing.
fn now_only(now: Vec<u64>) -> BuildCosts {
    BuildCosts {
        fingerprints: vec![None; now.len()],
        now,
        ..Default::default()
    }
}

#[test]
fn the_cheapest_build_within_the_budget_is_taken() {
    let n = 300;
    let mut s = Search::new((1000..1000 + n as u64).collect(), EndpointCheck::Lazy);
    let Step::Probe(stable) = s.next(1) else {
        panic!()
    };
    let mut now = vec![100; n];
    // 160 keeps the worst case (9 probes for 298 culprit positions) and is cheaper; 5 is
    // cheaper still but would leave 294 positions to 8 probes.
    now[160] = 3;
    now[5] = 0;
    s.set_costs(now_only(now.clone()), 9);
    assert_ne!(stable, vec![160]);
    assert_eq!(s.next(1), Step::Probe(vec![160]));
    // Equal costs fall back to the stable key.
    now[160] = 100;
    now[5] = 100;
    s.set_costs(now_only(now), 9);
    assert_eq!(s.next(1), Step::Probe(stable));
}

#[test]
fn costs_never_exceed_the_probe_budget() {
    // Whatever the builds cost, the worst case over every culprit stays within the budget the
    // driver gives (the halving's worst case, or one more when `budget` allows it), with the
    // budget shrinking by one per probe as the driver does. Every answer stays exact.
    let worst = |n: usize, seed: Option<u64>, slack: u32| {
        let plain = ceil_log2(n - 1);
        (1..n)
            .step_by(if n > 40 { 3 } else { 1 })
            .map(|culprit| {
                let mut s = Search::new((0..n as u64).collect(), EndpointCheck::Lazy);
                let mut probes = 0u32;
                loop {
                    if let Some(seed) = seed {
                        let h = |i: usize, o: u64| {
                            (i as u64 / (2 + o)).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ seed ^ o
                        };
                        let costs = BuildCosts {
                            weights: vec![700, 50, 5],
                            fingerprints: (0..n)
                                .map(|i| Some((0..3).map(|o| h(i, o) >> 60).collect()))
                                .collect(),
                            now: (0..n).map(|i| (h(i, 7) >> 17) % 900).collect(),
                            per_probe: (seed % 3) * 40,
                        };
                        s.set_costs(costs, (plain + slack).saturating_sub(probes));
                    }
                    match s.next(1) {
                        Step::Probe(b) => {
                            // The budget is for midpoints; endpoints are `EndpointCheck`'s.
                            probes += u32::from(b[0] != 0 && b[0] != n - 1);
                            let v = if b[0] >= culprit {
                                Verdict::New
                            } else {
                                Verdict::Old
                            };
                            s.record(b[0], v);
                        }
                        Step::Done(Answer::Found(f)) => {
                            assert_eq!(f, culprit);
                            break probes;
                        }
                        other => panic!("{other:?}"),
                    }
                }
            })
            .max()
            .unwrap()
    };
    for n in [2usize, 3, 17, 40, 100] {
        let plain = worst(n, None, 0);
        assert!(plain <= ceil_log2(n - 1), "n={n}");
        for seed in 0..3u64 {
            assert!(worst(n, Some(seed), 0) <= plain, "n={n} seed={seed}");
            assert!(worst(n, Some(seed), 1) <= plain + 1, "n={n} seed={seed}");
        }
    }
}
