use super::*;

fn ev(old: u32, new: u32) -> Evidence {
    Evidence { old, new, skip: 0 }
}

#[test]
fn ln_gamma_matches_factorials() {
    let mut fact = 1.0f64;
    for n in 1..20u32 {
        // Γ(n) = (n-1)!
        assert!((ln_gamma(f64::from(n)) - fact.ln()).abs() < 1e-10, "n={n}");
        fact *= f64::from(n);
    }
    assert!((ln_gamma(0.5) - std::f64::consts::PI.sqrt().ln()).abs() < 1e-10);
}

#[test]
fn pass_streak_known_values() {
    // One failure, no passes: Beta(2,1); E[(1-p)^k] = 2 / ((k+1)(k+2)).
    let b = Beta { a: 2.0, b: 1.0 };
    for k in 0..30u32 {
        let want = 2.0 / f64::from((k + 1) * (k + 2));
        assert!((b.pass_streak(k) - want).abs() < 1e-9, "k={k}");
    }
}

#[test]
fn a_failure_is_bad_at_once() {
    let p = FlakyRule::new(0.95, Beta::UNIFORM, 10);
    assert_eq!(p.decide(&ev(7, 1)), Decision::Decided(Verdict::New));
    assert_eq!(p.decide(&ev(0, 0)), Decision::RunAgain);
    let skip = Evidence {
        old: 0,
        new: 0,
        skip: 1,
    };
    assert_eq!(p.decide(&skip), Decision::Decided(Verdict::Skip));
}

#[test]
fn lower_rate_needs_more_passes() {
    let reliable = Beta { a: 21.0, b: 1.0 }; // 20 failures in 20 runs
    let half = Beta { a: 11.0, b: 11.0 };
    let rare = Beta { a: 3.0, b: 21.0 };
    let k = |b| FlakyRule::new(0.95, b, 10).passes_needed();
    let (kr, kh, kx) = (k(reliable), k(half), k(rare));
    assert!(kr < kh && kh < kx, "{kr} {kh} {kx}");
    // A known-reliable fault is nearly git bisect: a few runs, not one.
    assert!(kr <= 3, "{kr}");
    let pol = FlakyRule::new(0.95, half, 10);
    assert_eq!(pol.decide(&ev(kh - 1, 0)), Decision::RunAgain);
    assert_eq!(pol.decide(&ev(kh, 0)), Decision::Decided(Verdict::Old));
}

#[test]
fn passes_needed_is_the_first_sufficient_streak() {
    for (a, b) in [(1.0, 1.0), (2.0, 1.0), (7.0, 30.0), (50.0, 2.0)] {
        let pol = FlakyRule::new(0.95, Beta { a, b }, 11);
        let k = pol.passes_needed();
        let first = (1..).find(|&k| Beta { a, b }.pass_streak(k) <= pol.per_verdict_error);
        assert_eq!(Some(k), first, "Beta({a},{b})");
    }
}

#[test]
fn more_verdicts_or_confidence_need_more_passes() {
    let b = Beta { a: 4.0, b: 6.0 };
    let k = |c, g| FlakyRule::new(c, b, g).passes_needed();
    assert!(k(0.95, 20) > k(0.95, 5));
    assert!(k(0.99, 10) > k(0.9, 10));
}

#[test]
fn rate_uses_only_candidates_seen_failing() {
    let e = [ev(5, 0), ev(3, 0), ev(2, 1), ev(0, 4)];
    let r = rate_posterior(&e, Beta::UNIFORM);
    assert_eq!(r, Beta { a: 6.0, b: 3.0 });
}

#[test]
fn posterior_matches_hand_computation() {
    // 0 good endpoint, 1 passed twice, 2 failed once. Culprit is 1 or 2.
    // c=1: B(1+1, 1+2)/B(1,1) = B(2,3) = 1/12; c=2: B(2,1) = 1/2.
    let e = [ev(1, 0), ev(2, 0), ev(0, 1)];
    let post = posterior(&e, Beta::UNIFORM).unwrap();
    let (w1, w2) = (1.0 / 12.0, 0.5);
    assert!((post.culprit[1] - w1 / (w1 + w2)).abs() < 1e-9);
    assert!((post.culprit[2] - w2 / (w1 + w2)).abs() < 1e-9);
    assert_eq!(post.culprit[0], 0.0);
    assert!((post.confidence(&Conclusion::Found { index: 2 }) - 6.0 / 7.0).abs() < 1e-9);
}

#[test]
fn more_passes_at_the_parent_raise_confidence() {
    let conf = |passes| {
        let e = [ev(1, 0), ev(passes, 0), ev(0, 3)];
        posterior(&e, Beta::UNIFORM)
            .unwrap()
            .confidence(&Conclusion::Found { index: 2 })
    };
    assert!(conf(1) < conf(5) && conf(5) < conf(20));
    assert!(conf(20) > 0.99);
}

#[test]
fn nothing_after_the_first_failure_can_be_the_culprit() {
    let e = [ev(1, 0), ev(0, 1), ev(4, 0), ev(0, 1)];
    let post = posterior(&e, Beta::UNIFORM).unwrap();
    assert_eq!(post.culprit[2], 0.0);
    assert_eq!(post.culprit[3], 0.0);
    assert!((post.culprit[1] - 1.0).abs() < 1e-12);
}

#[test]
fn failing_good_endpoint_has_no_posterior() {
    assert!(posterior(&[ev(0, 1), ev(0, 1)], Beta::UNIFORM).is_none());
}

#[test]
fn credible_set_holds_the_mass() {
    let post = Posterior {
        culprit: vec![0.0, 0.1, 0.5, 0.3, 0.1],
        rate_mean: 0.5,
        rate: Beta::UNIFORM,
    };
    let (set, mass) = post.credible_set(0.75);
    assert_eq!(set, vec![2, 3]);
    assert!((mass - 0.8).abs() < 1e-12);
    assert!(
        (post.confidence(&Conclusion::Ambiguous {
            indices: vec![1, 2]
        }) - 0.6)
            .abs()
            < 1e-12
    );
}

#[test]
fn quantile_of_uniform_is_identity() {
    let q = Beta::UNIFORM.quantile(0.3);
    assert!((q - 0.3).abs() < 1e-3, "{q}");
    // Beta(2,1): CDF x^2.
    let q = Beta { a: 2.0, b: 1.0 }.quantile(0.25);
    assert!((q - 0.5).abs() < 1e-3, "{q}");
}

/// Evidence with `runs[i] = (passes, failures)`.
fn evs(runs: &[(u32, u32)]) -> Vec<Evidence> {
    runs.iter().map(|&(o, f)| ev(o, f)).collect()
}

/// The posterior straight from its definition (B(a + F_j, b + S_j) per culprit position, no
/// Gamma tables): the reference `belief`'s fast recurrence is checked against.
fn reference(evidence: &[Evidence], prior: Beta) -> (Vec<f64>, f64) {
    let n = evidence.len();
    let last = evidence.iter().position(|e| e.new > 0).unwrap_or(n - 1);
    let mut suffix = vec![(0.0, 0.0); n + 1];
    let (mut f, mut s) = (0.0f64, 0.0f64);
    for i in (0..n).rev() {
        f += f64::from(evidence[i].new);
        s += f64::from(evidence[i].old);
        suffix[i] = (f, s);
    }
    let mut logw = vec![f64::NEG_INFINITY; n];
    for (j, w) in logw.iter_mut().enumerate().take(last + 1).skip(1) {
        let (fj, sj) = suffix[j];
        *w = ln_beta(prior.a + fj, prior.b + sj);
    }
    let max = logw.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let weights: Vec<f64> = logw.iter().map(|w| (w - max).exp()).collect();
    let total: f64 = weights.iter().sum();
    let culprit: Vec<f64> = weights.iter().map(|w| w / total).collect();
    let rate_mean = (1..=last)
        .map(|j| {
            let (fj, sj) = suffix[j];
            culprit[j] * (prior.a + fj) / (prior.a + prior.b + fj + sj)
        })
        .sum();
    (culprit, rate_mean)
}

#[test]
fn belief_is_the_exact_posterior() {
    let cases = [
        evs(&[(1, 0), (2, 0), (0, 1)]),
        evs(&[(1, 0), (3, 0), (0, 0), (2, 1), (0, 0), (0, 4)]),
        evs(&[(0, 0), (0, 0), (5, 0), (0, 0), (1, 0)]),
    ];
    for e in &cases {
        for prior in [Beta::UNIFORM, Beta { a: 0.5, b: 2.0 }] {
            let (want, want_rate) = reference(e, prior);
            let got = belief(e, prior).unwrap();
            for (a, b) in want.iter().zip(&got.culprit) {
                assert!((a - b).abs() < 1e-9, "{:?} vs {:?}", want, got.culprit);
            }
            assert!((want_rate - got.rate_mean).abs() < 1e-9);
        }
    }
    assert!(belief(&evs(&[(0, 1), (0, 1)]), Beta::UNIFORM).is_none());
}

fn h2(q: f64) -> f64 {
    if q <= 0.0 || q >= 1.0 {
        0.0
    } else {
        -q * q.log2() - (1.0 - q) * (1.0 - q).log2()
    }
}

/// Brute force: enumerate every outcome of a wave (runs independent given c at E[p | c]).
fn brute_information(b: &Belief, at: &[usize]) -> f64 {
    let k = at.len();
    let mut hy = 0.0;
    for pattern in 0..(1u32 << k) {
        let mut p = 0.0;
        for (c, &w) in b.culprit.iter().enumerate() {
            let m = b.rate_given[c];
            let mut l = w;
            for (r, &x) in at.iter().enumerate() {
                let fail = pattern >> r & 1 == 1;
                l *= match (x >= c, fail) {
                    (true, true) => m,
                    (true, false) => 1.0 - m,
                    (false, true) => 0.0,
                    (false, false) => 1.0,
                };
            }
            p += l;
        }
        if p > 0.0 {
            hy -= p * p.log2();
        }
    }
    let hyc: f64 = b
        .culprit
        .iter()
        .enumerate()
        .map(|(c, &w)| w * at.iter().filter(|&&x| x >= c).count() as f64 * h2(b.rate_given[c]))
        .sum();
    hy - hyc
}

#[test]
fn one_run_carries_the_z_channel_information() {
    let e = evs(&[
        (1, 0),
        (2, 0),
        (0, 0),
        (1, 0),
        (0, 0),
        (0, 0),
        (0, 2),
        (0, 0),
        (0, 3),
    ]);
    let b = belief(&e, Beta::UNIFORM).unwrap();
    let pl = Planner::new(&b, 1);
    for x in 0..e.len() {
        // h(P(fail)) - E_c[h(fail | c)].
        let q: f64 = (0..=x).map(|c| b.culprit[c] * b.rate_given[c]).sum();
        let a: f64 = (0..=x).map(|c| b.culprit[c] * h2(b.rate_given[c])).sum();
        let want = h2(q) - a;
        assert!((pl.information(&[x]) - want).abs() < 1e-9, "x={x}");
    }
}

#[test]
fn wave_information_matches_enumeration() {
    let e = evs(&[
        (1, 0),
        (2, 0),
        (0, 0),
        (1, 0),
        (0, 0),
        (3, 0),
        (0, 0),
        (0, 0),
        (0, 1),
        (0, 2),
    ]);
    let b = belief(&e, Beta::UNIFORM).unwrap();
    let pl = Planner::new(&b, 4);
    for at in [
        vec![3],
        vec![2, 5],
        vec![4, 4],
        vec![1, 3, 7],
        vec![2, 2, 6, 8],
        vec![5, 6, 7, 9],
    ] {
        let (got, want) = (pl.information(&at), brute_information(&b, &at));
        assert!((got - want).abs() < 1e-9, "{at:?}: {got} vs {want}");
    }
}

/// Uniform culprit over 1..n-1, the bad endpoint seen failing `fails` of `fails + passes`.
fn flat(n: usize, fails: u32, passes: u32) -> Belief {
    let mut e = vec![Evidence::default(); n];
    e[n - 1] = ev(passes, fails);
    belief(&e, Beta::UNIFORM).unwrap()
}

#[test]
fn a_reliable_fault_is_cut_at_the_median() {
    let b = flat(101, 40, 0);
    let keys: Vec<u64> = (1..=101).map(|k| k * 3).collect(); // no power of two dominates
    let wave = Planner::new(&b, 1).pick(&[], 1, &[true; 101], &keys);
    assert_eq!(wave.len(), 1);
    assert!((45..=55).contains(&wave[0]), "{wave:?}");
}

#[test]
fn a_rare_fault_is_probed_below_the_median() {
    // The Z-channel's best input makes "bad" less likely than "good": a failure is proof, a
    // pass is weak, so the probe sits where P(culprit <= x) is about 0.4, not 0.5.
    let b = flat(1001, 10, 90);
    let all = vec![true; 1001];
    let keys: Vec<u64> = (0..1001).collect();
    let x = Planner::new(&b, 1).pick(&[], 1, &all, &keys)[0];
    let below: f64 = b.culprit[..=x].iter().sum();
    assert!((0.33..0.47).contains(&below), "x={x}, P(c<=x)={below}");
}

#[test]
fn stable_keys_win_among_equally_good_probes() {
    let b = flat(101, 40, 0);
    let keys: Vec<u64> = (0..101).collect();
    let x = Planner::new(&b, 1).pick(&[], 1, &[true; 101], &keys)[0];
    // 48 = 16 * 3 is within a percent of the best information; 50 is not as round.
    assert_eq!(x, 48);
}

#[test]
fn the_parent_of_a_likely_culprit_is_what_gets_run() {
    // 10 failed, 9 passed once, everything before passed a lot: only c = 9 vs 10 is open.
    let mut runs = vec![(6, 0); 9];
    runs[0] = (1, 0);
    runs.extend([(1, 0), (0, 3), (0, 0), (0, 0), (0, 5)]);
    let e = evs(&runs);
    let b = belief(&e, Beta::UNIFORM).unwrap();
    let keys: Vec<u64> = (0..e.len() as u64).collect();
    let allowed = vec![true; e.len()];
    assert_eq!(Planner::new(&b, 1).pick(&[], 1, &allowed, &keys), vec![9]);
    // With more slots the parent is worth several runs at once.
    let wave = Planner::new(&b, 3).pick(&[], 3, &allowed, &keys);
    assert!(wave.iter().filter(|&&x| x == 9).count() >= 2, "{wave:?}");
}

#[test]
fn a_wave_splits_the_posterior_instead_of_stacking() {
    let b = flat(1000, 40, 0);
    let keys: Vec<u64> = (0..1000).map(|k| k * 3 + 1).collect();
    let wave = Planner::new(&b, 3).pick(&[], 3, &[true; 1000], &keys);
    assert_eq!(wave.len(), 3);
    // A reliable fault: three runs split 1000 candidates about in quarters.
    for (x, want) in wave.iter().zip([250, 500, 750]) {
        assert!(x.abs_diff(want) < 80, "{wave:?}");
    }
}

#[test]
fn untestable_candidates_are_never_picked() {
    let b = flat(101, 40, 0);
    let keys: Vec<u64> = (0..101).collect();
    let mut allowed = vec![true; 101];
    for a in &mut allowed[30..70] {
        *a = false;
    }
    let x = Planner::new(&b, 1).pick(&[], 1, &allowed, &keys)[0];
    assert!(!(30..70).contains(&x), "{x}");
}

#[test]
fn skipped_candidates_share_a_block_with_the_next_one() {
    let culprit = [0.0, 0.01, 0.3, 0.3, 0.35, 0.04];
    let untestable = [false, false, true, true, false, false];
    let (block, mass) = top_block(&culprit, &untestable);
    assert_eq!(block, vec![2, 3, 4]);
    assert!((mass - 0.95).abs() < 1e-12);
    let (block, _) = top_block(&culprit, &[false; 6]);
    assert_eq!(block, vec![4]);
}

#[test]
fn robust_mass_takes_the_rate_at_its_lower_bound() {
    // Wilson: 8 failures in 10 runs, z = 2 -> about 0.484.
    let lo = wilson_lower(8, 10, 2.0);
    assert!((lo - 0.484).abs() < 0.002, "{lo}");
    assert_eq!(wilson_lower(0, 0, 2.0), 0.0);
    // 9 passed twice, 10 failed 4 of 5 runs, the bad endpoint failed 4 of 5.
    let mut runs = vec![(20, 0); 9];
    runs.extend([(2, 0), (1, 4), (1, 4)]);
    let e = evs(&runs);
    let integrated = belief(&e, Beta::UNIFORM).unwrap().culprit[10];
    let robust = robust_mass(&e, &[10], 2.0);
    // A lower rate makes the two passes at 9 prove less.
    assert!(robust < integrated, "{robust} vs {integrated}");
    let p = wilson_lower(8, 10, 2.0);
    let want = 1.0 / (1.0 + (1.0 - p).powi(2));
    assert!((robust - want).abs() < 0.01, "{robust} vs {want}");
}

#[test]
fn cautious_mass_weighs_the_passes_as_if_one_more_bad_run_had_passed() {
    // 0..9 passed twice, 10 failed once in 2 runs, the bad endpoint 11 once in 2.
    let few = |bad: (u32, u32)| {
        let mut runs = vec![(2, 0); 10];
        runs.extend([(1, 1), bad]);
        evs(&runs)
    };
    let e = few((1, 1));
    let integrated = belief(&e, Beta::UNIFORM).unwrap().culprit[10];
    let cautious = cautious_mass(&e, &[10]);
    assert!(cautious < integrated, "{cautious} vs {integrated}");
    let want = belief(&e, STOP_PRIOR).unwrap().culprit[10];
    assert!((cautious - want).abs() < 1e-12, "{cautious} vs {want}");
    // With the rate seen over many runs (13 failures in 42 at and after 10) the imagined
    // pass matters much less.
    let e = few((28, 12));
    let (i2, c2) = (
        belief(&e, Beta::UNIFORM).unwrap().culprit[10],
        cautious_mass(&e, &[10]),
    );
    assert!(c2 < i2, "{c2} vs {i2}");
    assert!(
        (i2 - c2) / i2 < 0.5 * (integrated - cautious) / integrated,
        "few runs: {cautious} vs {integrated}; many: {c2} vs {i2}"
    );
}

#[test]
fn confirmation_counts_the_runs_after_the_answer_led() {
    use Verdict::{New, Old};
    // Candidates 0 (good) .. 4 (bad); the answer is 3, its parent 2.
    let runs = [
        (4, New), // 1..4 equally likely: 3 does not lead
        (0, Old), // the good endpoint says nothing about the culprit
        (2, Old), // 3 and 4 tie: still no lead
        (3, New), // 3 leads from here on
        (2, Old),
        (2, Old),
        (1, Old),
    ];
    let c = Confirmation::of(5, &runs, &[3]).expect("3 leads at the end");
    assert_eq!((c.runs, c.at_parent), (3, 2));
    let after = |k: usize| {
        let e = evidence_from_runs(5, runs[..k].iter().copied());
        belief(&e, Beta::UNIFORM).unwrap().culprit[3]
    };
    assert!((c.from - after(4)).abs() < 1e-12, "{c:?}");
    assert!((c.to - after(runs.len())).abs() < 1e-12, "{c:?}");
    assert!(c.from < c.to, "{c:?}");
    // Why it took that long: the stopping rule's other two readings after the last run.
    let e = evidence_from_runs(5, runs.iter().copied());
    let r = c.rule.expect("an answer has readings");
    assert_eq!(r.cautious, cautious_mass(&e, &[3]));
    assert_eq!(r.robust, robust_mass(&e, &[3], RATE_MARGIN_Z));
    // Runs at and after 3: two failures in two runs.
    assert_eq!(r.rate_bound, wilson_lower(2, 2, RATE_MARGIN_Z));
    assert_eq!(
        c.line(7, 0.95),
        format!(
            "confirming the answer took 3 of 7 runs (2 at its parent): P(answer) rose from {:.2}, when it became the likeliest, to {:.2} (requested 0.95); the rule also asks the requested confidence with one more pass imagined at a bad commit ({:.2} at the end) and with the reproduction rate at its lower bound, {:.2} ({:.2} at the end)",
            c.from, c.to, r.cautious, r.rate_bound, r.robust
        )
    );
    // Before its own failure the answer only ties its parent (runs 1 to 3 above); the count
    // starts at the run that breaks the tie.
    // An answer that never led has no confirmation.
    assert_eq!(Confirmation::of(5, &[(4, New)], &[3]), None);
}

#[test]
fn the_assessment_carries_the_confirmation() {
    use Verdict::{New, Old};
    let runs = vec![(4, New), (0, Old), (3, New), (2, Old), (2, Old)];
    let a = Assessment::of(5, runs.clone(), &Conclusion::Found { index: 3 }, 0.95).unwrap();
    assert_eq!(a.confirmation, Confirmation::of(5, &runs, &[3]));
    // 3 leads once its parent has passed once more than it (the 4th run): one run follows.
    assert_eq!(a.confirmation.map(|c| (c.runs, c.at_parent)), Some((1, 1)));
}
