//! Least expected build time: the midpoint taken under build costs, within the probe budget.

use super::*;

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
                        Step::Done(Conclusion::Found { index: f }) => {
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
