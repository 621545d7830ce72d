//! Figures for BENCHMARKS.md, "Flaky faults and multisection": success rate and runs per
//! answer of the flakiness-aware policies against plain binary search on the same simulated
//! histories, and rounds with K = 1, 2, 4 slots.
//!
//! cargo run --release --example flaky_sim -- [trials] [candidates] [seed]

use setrows_bisect::core::evidence::{Deterministic, Fixed};
use setrows_bisect::core::flaky::session::Mode;
use setrows_bisect::core::flaky::Beta;
use setrows_bisect::core::search::EndpointCheck;
#[path = "../tests/sim/mod.rs"]
mod sim;
use sim::{batch, driver_trial, trial, History, Summary};

fn arg(i: usize, default: u64) -> u64 {
    std::env::args()
        .nth(i)
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn row(p: f64, name: &str, s: &Summary) {
    println!(
        "| {p} | {name} | {:.1}% | {:.1}% | {:.1}% | {:.1} | {:.3} |",
        100.0 * s.success_rate(),
        100.0 * s.error_rate(),
        100.0 * f64::from(s.inconclusive) / f64::from(s.trials.max(1)),
        s.mean_runs,
        s.mean_confidence
    );
}

fn main() {
    let trials = arg(1, 2000) as u32;
    let n = arg(2, 1000) as usize;
    let seed = arg(3, 1);
    let first = EndpointCheck::First;
    let lazy = EndpointCheck::Lazy;
    let session = Mode::Adaptive {
        confidence: 0.95,
        prior: Beta::UNIFORM,
    };
    println!("{trials} histories of {n} candidates per row (same planted culprits in every row), seed {seed}\n");
    println!(
        "| p | strategy | right | wrong | inconclusive | runs/answer | mean stated confidence |"
    );
    println!("|---|---|---|---|---|---|---|");
    for p in [1.0, 0.5, 0.3, 0.1] {
        let plain = batch(n, p, trials, seed, |h: &History, s| {
            driver_trial(h, &Deterministic, lazy, 1, s)
        });
        row(
            p,
            "plain binary search (git bisect: 1 run, endpoints trusted)",
            &plain,
        );
        let rep = batch(n, p, trials, seed, |h: &History, s| {
            driver_trial(h, &Fixed(3), first, 1, s)
        });
        row(p, "`--repeat 3`", &rep);
        let capped = batch(n, p, trials, seed, |h: &History, s| {
            trial(h, session, first, 1, Some(300), s)
        });
        row(p, "`--confidence 0.95 --max-runs 300` (Session)", &capped);
        let full = batch(n, p, trials, seed, |h: &History, s| {
            trial(h, session, first, 1, None, s)
        });
        row(
            p,
            "`--confidence 0.95` (Session: also re-runs the parent until the posterior says 0.95)",
            &full,
        );
    }
    println!("\nMultisection, driver loop: K candidates per round, each run until decided; rounds = search rounds, sequential runs = sum over rounds of the slowest slot\n");
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
    println!("\nMultisection, Session (spare slots re-run pending candidates), adaptive 0.95\n");
    println!("| p | K | waves of K runs | total runs | right | wrong |");
    println!("|---|---|---|---|---|---|");
    for p in [1.0, 0.3] {
        for k in [1usize, 2, 4] {
            let s = batch(n, p, trials, seed, |h: &History, s| {
                trial(h, session, first, k, None, s)
            });
            println!(
                "| {p} | {k} | {:.1} | {:.1} | {:.1}% | {:.1}% |",
                s.mean_waves,
                s.mean_runs,
                100.0 * s.success_rate(),
                100.0 * s.error_rate()
            );
        }
    }
}
