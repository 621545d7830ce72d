//! Where the runs of `--confidence 0.95` go on simulated histories (one cell): the runs before
//! the answer became the likeliest for good (the search) and after it (the confirmation), and
//! of those, how many at the answer's parent and at or after the answer. A tuning aid beside
//! `flaky_bench` (same seeds: history t of the cell is seeded `seed + t`).
//!
//! cargo run --release --example flaky_where -- [N] [p] [trials] [seed]

use setrows_bisect::core::evidence::Policy;
use setrows_bisect::core::flaky::session::{Action, Session};
use setrows_bisect::core::flaky::Confirmation;
use setrows_bisect::core::search::EndpointCheck;
#[path = "../tests/sim/mod.rs"]
mod sim;
use sim::{info_limit, History, Rng};

fn arg<T: std::str::FromStr>(i: usize, default: T) -> T {
    std::env::args()
        .nth(i)
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let n: usize = arg(1, 400);
    let p: f64 = arg(2, 0.3);
    let trials: u64 = arg(3, 400);
    let seed: u64 = arg(4, 1);
    let policy = Policy::Confidence {
        confidence: 0.95,
        max_runs: None,
    };
    let (mut runs, mut right, mut conf, mut parent, mut after, mut endpoint) =
        (0u64, 0u64, 0u64, 0u64, 0u64, 0u64);
    let mut all = Vec::new();
    for t in 0..trials {
        let mut hist_rng = Rng::new(seed.wrapping_add(t));
        let h = History::random(n, p, &mut hist_rng);
        let mut rng = Rng::new(hist_rng.next_u64());
        let mut s = Session::new((0..n as u64).collect(), EndpointCheck::First, policy);
        let mut log = Vec::new();
        while let Action::Run(ix) = s.next(1) {
            for i in ix {
                let v = h.run(i, &mut rng);
                s.record(i, v);
                log.push((i, v));
            }
        }
        let answer = s.conclusion().and_then(|c| c.culprit()).unwrap_or(0);
        right += u64::from(answer == h.culprit);
        runs += s.runs();
        all.push(s.runs());
        if let Some(c) = Confirmation::of(n, &log, &[answer]) {
            conf += c.runs;
            parent += c.at_parent;
        }
        after += log.iter().filter(|r| r.0 >= answer).count() as u64;
        endpoint += log.iter().filter(|r| r.0 == n - 1 || r.0 == 0).count() as u64;
    }
    let t = trials as f64;
    all.sort_unstable();
    println!(
        "N={n} p={p}: mean {:.1} ({:.2}x) p90 {} right {right}/{trials}; confirmation {:.1} (parent {:.1}); runs at/after answer {:.1}; endpoints {:.1}",
        runs as f64 / t,
        runs as f64 / t / info_limit(n, p),
        all[(0.9 * t).ceil() as usize - 1],
        conf as f64 / t,
        parent as f64 / t,
        after as f64 / t,
        endpoint as f64 / t
    );
}
