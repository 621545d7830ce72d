//! Figures for BENCHMARKS.md, "Flaky faults and multisection": success rate and runs per
//! answer of `--confidence 0.95` (the Session the CLI runs) against plain binary search and
//! `--repeat 3` on the same simulated histories, against the information limit
//! log2(N) / C(p), and waves with K = 1, 2, 4 slots.
//!
//! cargo run --release --example flaky_sim -- [trials] [candidates] [seed]

use setrows_bisect::core::evidence::Policy;
use setrows_bisect::core::evidence::{Deterministic, Fixed};
use setrows_bisect::core::search::EndpointCheck;
#[path = "../tests/sim/mod.rs"]
mod sim;
use sim::{batch, driver_trial, info_limit, trial, wilson, History, Summary};

fn arg(i: usize, default: u64) -> u64 {
    std::env::args()
        .nth(i)
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn right(s: &Summary) -> String {
    let (lo, hi) = wilson(s.right, s.trials);
    format!(
        "{:.1}% ({:.1}-{:.1})",
        100.0 * s.success_rate(),
        100.0 * lo,
        100.0 * hi
    )
}

fn row(p: f64, n: usize, name: &str, s: &Summary) {
    println!(
        "| {p} | {name} | {} | {:.1}% | {:.1}% | {:.1} | {:.2} | {:.3} |",
        right(s),
        100.0 * s.error_rate(),
        100.0 * f64::from(s.inconclusive) / f64::from(s.trials.max(1)),
        s.mean_runs,
        s.mean_runs / info_limit(n, p),
        s.mean_confidence
    );
}

fn main() {
    let started = std::time::Instant::now();
    let trials = arg(1, 2000) as u32;
    let n = arg(2, 1000) as usize;
    let seed = arg(3, 1);
    let first = EndpointCheck::First;
    let lazy = EndpointCheck::Lazy;
    let session = Policy::Confidence {
        confidence: 0.95,
        max_runs: None,
    };
    let capped = Policy::Confidence {
        confidence: 0.95,
        max_runs: Some(300),
    };
    let rates = [1.0, 0.5, 0.3, 0.1];
    println!("{trials} histories of {n} candidates per row (same planted culprits in every row), seed {seed}\n");
    println!(
        "| p | strategy | right (95% CI) | wrong | inconclusive | runs/answer | x log2(N)/C(p) | mean stated confidence |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let mut k1 = Vec::new();
    for p in rates {
        let plain = batch(n, p, trials, seed, |h: &History, s| {
            driver_trial(h, &Deterministic, lazy, 1, s)
        });
        row(
            p,
            n,
            "plain binary search (git bisect: 1 run, endpoints trusted)",
            &plain,
        );
        let rep = batch(n, p, trials, seed, |h: &History, s| {
            driver_trial(h, &Fixed(3), first, 1, s)
        });
        row(p, n, "`--repeat 3`", &rep);
        let capped = batch(n, p, trials, seed, |h: &History, s| {
            trial(h, capped, first, 1, s)
        });
        row(p, n, "`--confidence 0.95 --max-runs 300`", &capped);
        let full = batch(n, p, trials, seed, |h: &History, s| {
            trial(h, session, first, 1, s)
        });
        row(p, n, "`--confidence 0.95`", &full);
        k1.push(full);
    }
    println!(
        "\nMultisection, driver loop: K candidates per round, each run until decided; rounds = search rounds, sequential runs = sum over rounds of the slowest slot\n"
    );
    println!(
        "| p | policy | K | sequential runs (wall time in runs) | total runs | right | wrong |"
    );
    println!("|---|---|---|---|---|---|---|");
    for p in [1.0, 0.3] {
        for k in [1usize, 2, 4] {
            let s = if p == 1.0 {
                batch(n, p, trials, seed, |h: &History, s| {
                    driver_trial(h, &Deterministic, first, k, s)
                })
            } else {
                batch(n, p, trials, seed, |h: &History, s| {
                    driver_trial(h, &Fixed(3), first, k, s)
                })
            };
            let name = if p == 1.0 { "plain" } else { "`--repeat 3`" };
            println!(
                "| {p} | {name} | {k} | {:.1} | {:.1} | {:.1}% | {:.1}% |",
                s.mean_waves,
                s.mean_runs,
                100.0 * s.success_rate(),
                100.0 * s.error_rate()
            );
        }
    }
    println!(
        "\nMultisection, Session (`--confidence 0.95 --jobs K`: waves of K runs chosen jointly)\n"
    );
    println!("| p | K | waves of K runs | total runs | x log2(N)/C(p) | right (95% CI) | wrong |");
    println!("|---|---|---|---|---|---|---|");
    for (pi, p) in rates.into_iter().enumerate() {
        for k in [1usize, 2, 4] {
            let s = if k == 1 {
                k1[pi]
            } else {
                batch(n, p, trials, seed, |h: &History, s| {
                    trial(h, session, first, k, s)
                })
            };
            println!(
                "| {p} | {k} | {:.1} | {:.1} | {:.2} | {} | {:.1}% |",
                s.mean_waves,
                s.mean_runs,
                s.mean_runs / info_limit(n, p),
                right(&s),
                100.0 * s.error_rate()
            );
        }
    }
    eprintln!("{:.0} s", started.elapsed().as_secs_f64());
}
