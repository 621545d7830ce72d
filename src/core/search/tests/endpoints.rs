//! The endpoint checks: when `--bad` and `--good` are probed, and how a lying endpoint is
//! reported.

use super::*;

#[test]
fn with_two_slots_the_wave_that_builds_bad_keeps_halving() {
    let mut s = Search::new((0..100).collect(), EndpointCheck::First);
    let mut bad_wave = None;
    for _ in 0..20 {
        match s.next(2) {
            Step::Probe(w) if w.contains(&99) => {
                bad_wave = Some(w);
                break;
            }
            Step::Probe(w) => w.iter().for_each(|&i| s.record(i, Verdict::Old)),
            other => panic!("{other:?}"),
        }
    }
    let w = bad_wave.expect("a walk of old answers reaches --bad");
    assert_eq!(w.len(), 2, "{w:?}");
    assert!(w[0] > 0 && w[0] < 99 && s.verdict(w[0]).is_none(), "{w:?}");
    assert!(!w.contains(&0), "{w:?}");
}

#[test]
fn bad_is_tested_when_the_walk_toward_it_makes_it_worth_it() {
    // Several slots: the first wave holds midpoints, no endpoint (until issue 45 it held
    // only --bad and --good, two full builds a truthful range never needs).
    let s = Search::new((0..100).collect(), EndpointCheck::First);
    let Step::Probe(first) = s.next(2) else {
        panic!()
    };
    assert_eq!(first.len(), 2, "{first:?}");
    assert!(first.iter().all(|&i| i > 0 && i < 99), "{first:?}");
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
        Step::Done(Conclusion::BadEndpoint {
            which: Endpoint::Bad,
            got: Verdict::Old
        })
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

/// Issue 45: the walk toward `--bad` is priced as its builds will run, each from the probes
/// around it. Here every open candidate costs a full build from what is built now (50 s), but
/// each object changes once in the range, so after the first midpoint the rest are
/// incremental: three old verdicts in a row no longer buy a 41 s `--bad` build that the
/// walk's real cost (about one build) does not justify. Priced from what is built now (the
/// rule until issue 45: four 51 s midpoints) it was built.
#[test]
fn bad_waits_for_a_walk_priced_incrementally() {
    let n = 101;
    let mut s = Search::new((0..n as u64).collect(), EndpointCheck::First);
    for old in [50, 75, 87] {
        s.record(old, Verdict::Old);
    }
    let mut now = vec![50_000; n];
    now[n - 1] = 40_000;
    let changes_at = |k: usize| 10 * k + 5;
    s.set_costs(
        BuildCosts {
            weights: vec![10_000; 10],
            fingerprints: (0..n)
                .map(|i| Some((0..10).map(|k| u64::from(i >= changes_at(k))).collect()))
                .collect(),
            now,
            per_probe: 1_000,
        },
        8,
    );
    let Step::Probe(p) = s.next(1) else { panic!() };
    assert!(p[0] > 87 && p[0] < 100, "--bad built early: {p:?}");
    // The same range with the walk's midpoints really full builds (every object changes at
    // every commit): their expected 3.5 builds outweigh --bad, which is built.
    let mut dear = s.clone();
    let mut now = vec![50_000; n];
    now[n - 1] = 40_000;
    dear.set_costs(
        BuildCosts {
            weights: vec![5_000; 10],
            fingerprints: (0..n).map(|i| Some(vec![i as u64; 10])).collect(),
            now,
            per_probe: 1_000,
        },
        8,
    );
    assert_eq!(dear.next(1), Step::Probe(vec![n - 1]));
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
        assert_eq!(step, Step::Done(Conclusion::Found { index: culprit }));
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
        assert_eq!(
            step,
            Step::Done(Conclusion::Found { index: n - 1 }),
            "n={n}"
        );
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
                Step::Done(Conclusion::BadEndpoint {
                    which: Endpoint::Bad,
                    got: Verdict::Old
                }),
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
        Step::Done(Conclusion::BadEndpoint {
            which: Endpoint::Bad,
            got: Verdict::Old
        })
    );
    let mut s = Search::new(vec![0, 1, 2, 3], EndpointCheck::First);
    s.record(3, Verdict::New);
    s.record(0, Verdict::New);
    assert_eq!(
        s.next(1),
        Step::Done(Conclusion::BadEndpoint {
            which: Endpoint::Good,
            got: Verdict::New
        })
    );
}

#[test]
fn lazy_endpoint_checked_when_culprit_is_next_to_it() {
    // Everything new: the answer would be candidate 1, which depends on the good endpoint.
    let (step, probes) = run((0..9).collect(), EndpointCheck::Lazy, 1, |_| Verdict::New);
    assert_eq!(
        step,
        Step::Done(Conclusion::BadEndpoint {
            which: Endpoint::Good,
            got: Verdict::New
        })
    );
    assert!(probes.contains(&0));
}
