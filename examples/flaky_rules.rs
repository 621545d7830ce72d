//! The stopping rules of earlier builds on any seed set, without building their trees: the
//! Session's loop for one slot and `First` endpoints (what `flaky_bench` measures), written
//! out here with the rule switchable. Same seeds as `flaky_bench` (history t of a cell is
//! seeded `seed + t`), and with seed 1 it reproduces that example's table for each build
//! (BENCHMARKS.md, "Runs per answer by N and p"), so a second seed set can be compared.
//!
//! * `b43f8cc`: the uniform-prior posterior and the Wilson rate bound at z = 2.
//! * `41a56fc`: also `cautious_mass` (Beta(1, 2)), the Wilson bound at z = 1.5.
//! * `now`: 41a56fc's rule with `Session::answer_run` (a run at the answer while nothing at or
//!   after it has passed, when it is expected to do more for the rule than the planner's pick).
//!
//! The endpoint rule is the Session's (`FlakyRule` on the bad endpoint until it fails); the
//! simulated histories have no untestable candidates.
//!
//! cargo run --release --example flaky_rules -- [rule] [N] [p] [trials] [seed]

use setrows_bisect::core::evidence::{Decision, Evidence, Rule};
use setrows_bisect::core::flaky::{
    belief, cautious_mass, expected_good_verdicts, expected_stop_evidence, rate_posterior,
    robust_mass, stop_masses, top_block, Beta, FlakyRule, Planner,
};
use setrows_bisect::core::outcome::Verdict;
#[path = "../tests/sim/mod.rs"]
mod sim;
use sim::{info_limit, wilson, History, Rng};

fn arg<T: std::str::FromStr>(i: usize, default: T) -> T {
    std::env::args()
        .nth(i)
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

const CONFIDENCE: f64 = 0.95;

/// The least of the masses `rule` asks to reach the confidence, for `block`.
fn least(rule: &str, ev: &[Evidence], block: &[usize], mass: f64) -> f64 {
    match rule {
        "b43f8cc" => mass.min(robust_mass(ev, block, 2.0)),
        _ => mass
            .min(cautious_mass(ev, block))
            .min(robust_mass(ev, block, 1.5)),
    }
}

/// Runs of one bisection of `h` under `rule`, and whether its answer was right.
fn bisect(h: &History, seed: u64, rule: &str) -> (u64, bool) {
    let n = h.n;
    let mut rng = Rng::new(seed);
    let mut ev = vec![Evidence::default(); n];
    let keys: Vec<u64> = (0..n as u64).collect();
    let testable = vec![true; n];
    let untestable = vec![false; n];
    let mut runs = 0;
    let answer = loop {
        let bad_shown = ev.iter().any(|e| e.new > 0);
        let x = if !bad_shown {
            let endpoint = FlakyRule::new(
                CONFIDENCE,
                rate_posterior(&ev, Beta::UNIFORM),
                expected_good_verdicts(n),
            );
            if endpoint.decide(&ev[n - 1]) == Decision::Decided(Verdict::Old) {
                break None;
            }
            n - 1
        } else if ev[0].runs() == 0 {
            0
        } else {
            let b = belief(&ev, Beta::UNIFORM).expect("the good endpoint never fails");
            let (block, mass) = top_block(&b.culprit, &untestable);
            if least(rule, &ev, &block, mass) >= CONFIDENCE {
                break block.first().copied();
            }
            let pick = Planner::new(&b, 1).pick(&[], 1, &testable, &keys)[0];
            let at = block[block.len() - 1];
            let clean = ev[at..].iter().all(|e| e.old == 0);
            let stop = stop_masses(&ev, &untestable, Beta::UNIFORM).expect("as above");
            let score = |x| expected_stop_evidence(&ev, &b, x, &untestable, Beta::UNIFORM);
            if rule == "now"
                && stop.mass >= 0.5
                && clean
                && at != pick
                && score(at) > score(pick) + 1e-12
            {
                at
            } else {
                pick
            }
        };
        ev[x].add(h.run(x, &mut rng));
        runs += 1;
    };
    (runs, answer == Some(h.culprit))
}

fn main() {
    let rule: String = arg(1, "now".to_string());
    assert!(
        ["b43f8cc", "41a56fc", "now"].contains(&rule.as_str()),
        "rule: b43f8cc, 41a56fc or now"
    );
    let n: usize = arg(2, 400);
    let p: f64 = arg(3, 0.3);
    let trials: u32 = arg(4, 400);
    let seed: u64 = arg(5, 1);
    let mut all = Vec::new();
    let mut right = 0;
    for t in 0..trials {
        let mut hist_rng = Rng::new(seed.wrapping_add(u64::from(t)));
        let h = History::random(n, p, &mut hist_rng);
        let (runs, ok) = bisect(&h, hist_rng.next_u64(), &rule);
        all.push(runs);
        right += u32::from(ok);
    }
    all.sort_unstable();
    let mean = all.iter().sum::<u64>() as f64 / f64::from(trials.max(1));
    let rank = ((0.9 * all.len() as f64).ceil() as usize).max(1);
    let (lo, hi) = wilson(right, trials);
    println!(
        "| {rule} | {n} | {p} | {:.1} | {mean:.1} | {:.2} | {} | {} | {right}/{trials} ({:.1}-{:.1}%) |",
        info_limit(n, p),
        mean / info_limit(n, p),
        all.get(rank - 1).copied().unwrap_or(0),
        all.last().copied().unwrap_or(0),
        100.0 * lo,
        100.0 * hi
    );
}
