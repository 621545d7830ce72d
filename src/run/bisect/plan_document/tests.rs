//! The dry run's promises (`plan_document::facts`: `simulate::worst_case`, `lying_bad_probes`)
//! against the real search.
use crate::core::outcome::Verdict;
use crate::core::search::simulate::{lying_bad_probes, worst_case as estimate};
use crate::core::search::{budget, BuildCosts, Conclusion, EndpointCheck, Search, Step};

fn ends(lazy: bool) -> EndpointCheck {
    if lazy {
        EndpointCheck::Lazy
    } else {
        EndpointCheck::First
    }
}

/// Probes the real search spends finding `culprit` among `n` candidates.
fn probes(n: usize, culprit: usize, jobs: usize, lazy: bool) -> usize {
    probes_costed(n, culprit, jobs, lazy, None)
}

/// The same with build costs (a hot header changing every `every` candidates) and the
/// budget the driver gives for `commits` (`run::driver::groups::set_costs`).
fn probes_costed(
    n: usize,
    culprit: usize,
    jobs: usize,
    lazy: bool,
    costed: Option<(usize, usize)>,
) -> usize {
    let ends = if lazy {
        EndpointCheck::Lazy
    } else {
        EndpointCheck::First
    };
    let mut s = Search::new((0..n as u64).collect(), ends);
    let mut count = 0;
    loop {
        if let Some((every, commits)) = costed {
            let made = (0..n).filter(|&i| s.verdict(i).is_some()).count();
            let mids = (1..n - 1).filter(|&i| s.verdict(i).is_some()).count();
            let open = s.verdict(0).is_none() || s.verdict(n - 1).is_none();
            let costs = BuildCosts {
                weights: vec![20_000, 300],
                fingerprints: (0..n)
                    .map(|i| Some(vec![(i / every) as u64, i as u64]))
                    .collect(),
                now: (0..n)
                    .map(|i| if (i / every) % 2 == 0 { 300 } else { 20_300 })
                    .collect(),
                per_probe: 500,
            };
            if made > 0 {
                s.set_costs(costs, budget(commits, n, made, mids, open));
            }
        }
        match s.next(jobs) {
            Step::Probe(wave) => {
                for i in wave {
                    count += 1;
                    let v = if i >= culprit {
                        Verdict::New
                    } else {
                        Verdict::Old
                    };
                    s.record(i, v);
                }
            }
            Step::Done(Conclusion::Found { index: i }) => {
                assert_eq!(i, culprit);
                return count;
            }
            other => panic!("n={n} culprit={culprit}: {other:?}"),
        }
    }
}

/// The promised count is a bound the search keeps for every culprit position, and with
/// one slot it is reached (a bound that is merely safe would still mislead there). With
/// several slots it is the guarantee `pick` gives, not the typical case.
#[test]
fn estimate_bounds_the_real_search() {
    for n in 2..=100 {
        for jobs in 1..=5 {
            for lazy in [false, true] {
                let e = estimate(n, jobs, ends(lazy), n - 1);
                let worst = (1..n).map(|c| probes(n, c, jobs, lazy)).max().unwrap();
                assert!(
                    worst <= e.total,
                    "n={n} jobs={jobs} lazy={lazy}: {worst} probes > {:?}",
                    e
                );
                // One slot: reached, or one short where the worst culprit sits away
                // from both endpoints and the walk never made --bad worth a build.
                if jobs == 1 {
                    assert!(worst + 1 >= e.total, "n={n} lazy={lazy}: {worst}, {:?}", e);
                }
            }
        }
    }
}

/// The lying-`--bad` line is the real search's count, and never above the bound.
#[test]
fn a_lying_bad_costs_what_the_dry_run_says() {
    for n in [3usize, 10, 100, 301] {
        for (jobs, lazy) in [(1, false), (1, true), (2, false)] {
            let e = estimate(n, jobs, ends(lazy), n - 1);
            let said = lying_bad_probes(n, jobs, ends(lazy));
            let mut s = Search::new(
                (0..n as u64).collect(),
                if lazy {
                    EndpointCheck::Lazy
                } else {
                    EndpointCheck::First
                },
            );
            let mut count = 0;
            let step = loop {
                match s.next(jobs) {
                    Step::Probe(w) => {
                        for i in w {
                            count += 1;
                            s.record(i, Verdict::Old);
                        }
                    }
                    other => break other,
                }
            };
            assert!(
                matches!(step, Step::Done(Conclusion::BadEndpoint { .. })),
                "{step:?}"
            );
            assert_eq!(said, count, "n={n} jobs={jobs} lazy={lazy}");
            assert!(count <= e.total, "n={n} jobs={jobs}: {count} > {}", e.total);
        }
    }
    // One slot: fewer than the whole walk (the eager --confidence check: 2).
    assert_eq!(lying_bad_probes(301, 1, ends(false)), 3);
}

/// With build costs the search may spend the one midpoint of slack the estimate names
/// (commits far more than candidates, as when most commits change nothing built), and
/// never more.
#[test]
fn the_off_centre_midpoint_is_in_the_estimate() {
    let mut used_slack = false;
    for n in [9usize, 17, 33, 60] {
        for lazy in [false, true] {
            let commits = 8 * n;
            let plain = estimate(n, 1, ends(lazy), n - 1).total;
            let e = estimate(n, 1, ends(lazy), commits);
            for every in [3, 5] {
                let worst = (1..n)
                    .map(|c| probes_costed(n, c, 1, lazy, Some((every, commits))))
                    .max()
                    .unwrap();
                assert!(worst <= e.total, "n={n} lazy={lazy}: {worst} > {:?}", e);
                used_slack |= worst > plain;
            }
        }
    }
    assert!(used_slack, "no history here made the search cut off-centre");
}
