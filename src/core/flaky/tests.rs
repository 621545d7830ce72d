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
    let p = FlakyPolicy::new(0.95, Beta::UNIFORM, 10);
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
    let k = |b| FlakyPolicy::new(0.95, b, 10).passes_needed();
    let (kr, kh, kx) = (k(reliable), k(half), k(rare));
    assert!(kr < kh && kh < kx, "{kr} {kh} {kx}");
    // A known-reliable fault is nearly git bisect: a few runs, not one.
    assert!(kr <= 3, "{kr}");
    let pol = FlakyPolicy::new(0.95, half, 10);
    assert_eq!(pol.decide(&ev(kh - 1, 0)), Decision::RunAgain);
    assert_eq!(pol.decide(&ev(kh, 0)), Decision::Decided(Verdict::Old));
}

#[test]
fn passes_needed_is_the_first_sufficient_streak() {
    for (a, b) in [(1.0, 1.0), (2.0, 1.0), (7.0, 30.0), (50.0, 2.0)] {
        let pol = FlakyPolicy::new(0.95, Beta { a, b }, 11);
        let k = pol.passes_needed();
        let first = (1..).find(|&k| Beta { a, b }.pass_streak(k) <= pol.per_verdict_error);
        assert_eq!(Some(k), first, "Beta({a},{b})");
    }
}

#[test]
fn more_verdicts_or_confidence_need_more_passes() {
    let b = Beta { a: 4.0, b: 6.0 };
    let k = |c, g| FlakyPolicy::new(c, b, g).passes_needed();
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
    assert!((post.confidence(&Answer::Found(2)) - 6.0 / 7.0).abs() < 1e-9);
}

#[test]
fn more_passes_at_the_parent_raise_confidence() {
    let conf = |passes| {
        let e = [ev(1, 0), ev(passes, 0), ev(0, 3)];
        posterior(&e, Beta::UNIFORM)
            .unwrap()
            .confidence(&Answer::Found(2))
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
    assert!((post.confidence(&Answer::Ambiguous(vec![1, 2])) - 0.6).abs() < 1e-12);
}

#[test]
fn quantile_of_uniform_is_identity() {
    let q = Beta::UNIFORM.quantile(0.3);
    assert!((q - 0.3).abs() < 1e-3, "{q}");
    // Beta(2,1): CDF x^2.
    let q = Beta { a: 2.0, b: 1.0 }.quantile(0.25);
    assert!((q - 0.5).abs() < 1e-3, "{q}");
}
