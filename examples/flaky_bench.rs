//! Runs per answer of `--confidence 0.95` (the Session the CLI runs, through `tests/sim`) on
//! simulated histories, for N = 100, 400, 2,000 candidates and reproduction rates p = 0.1, 0.3,
//! 0.5, 1.0, against the information limit log2(N)/C(p): the table in BENCHMARKS.md that a
//! change to the planner or the stopping rule is judged by. Deterministic (fixed seeds, no
//! processes), so two builds of the search compare cell by cell on the same planted culprits
//! and the same run outcomes (history t of a cell uses seed `seed + t`, as `sim::batch` does).
//!
//! It uses only what `tests/sim` has had since b43f8cc, so the same file measures that tree.
//!
//! cargo run --release --example flaky_bench -- [trials] [trials at N = 2000] [seed]

use setrows_bisect::core::evidence::Policy;
use setrows_bisect::core::search::EndpointCheck;
#[path = "../tests/sim/mod.rs"]
mod sim;
use sim::{info_limit, trial, wilson, History, Rng};

fn arg(i: usize, default: u64) -> u64 {
    std::env::args()
        .nth(i)
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// One cell: the spread matters as well as the mean, because a user waits for the slow
/// bisections, so the 90th percentile and the worst are kept beside it.
struct Cell {
    trials: u32,
    right: u32,
    mean_runs: f64,
    p90_runs: u64,
    max_runs: u64,
}

/// One slot and `First` endpoints: what `bisect --confidence` does by default.
fn cell(n: usize, rate: f64, trials: u32, seed: u64) -> Cell {
    let policy = Policy::Confidence {
        confidence: 0.95,
        max_runs: None,
    };
    let mut runs = Vec::with_capacity(trials as usize);
    let mut right = 0;
    for t in 0..trials {
        let mut hist_rng = Rng::new(seed.wrapping_add(u64::from(t)));
        let h = History::random(n, rate, &mut hist_rng);
        let r = trial(&h, policy, EndpointCheck::First, 1, hist_rng.next_u64());
        right += u32::from(r.right);
        runs.push(r.runs);
    }
    runs.sort_unstable();
    // Nearest rank.
    let rank = ((0.9 * runs.len() as f64).ceil() as usize).max(1);
    Cell {
        trials,
        right,
        mean_runs: runs.iter().sum::<u64>() as f64 / f64::from(trials.max(1)),
        p90_runs: runs.get(rank - 1).copied().unwrap_or(0),
        max_runs: runs.last().copied().unwrap_or(0),
    }
}

fn main() {
    let started = std::time::Instant::now();
    let trials = arg(1, 400) as u32;
    let trials_2000 = arg(2, 200) as u32;
    let seed = arg(3, 1);
    println!(
        "`--confidence 0.95`, one slot, `First` endpoints; {trials} histories per cell ({trials_2000} at N = 2000), seed {seed}\n"
    );
    println!(
        "| N | p | log2(N)/C(p) | mean runs | x bound | p90 runs | max runs | right (95% CI) |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for n in [100usize, 400, 2000] {
        let t = if n >= 2000 { trials_2000 } else { trials };
        for p in [0.1, 0.3, 0.5, 1.0] {
            let c = cell(n, p, t, seed);
            let bound = info_limit(n, p);
            let (lo, hi) = wilson(c.right, c.trials);
            println!(
                "| {n} | {p} | {bound:.1} | {:.1} | {:.2} | {} | {} | {}/{} ({:.1}-{:.1}%) |",
                c.mean_runs,
                c.mean_runs / bound,
                c.p90_runs,
                c.max_runs,
                c.right,
                c.trials,
                100.0 * lo,
                100.0 * hi
            );
        }
    }
    eprintln!("{:.0} s", started.elapsed().as_secs_f64());
}
