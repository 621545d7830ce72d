//! Figures for BENCHMARKS.md, "Flaky faults and multisection": success rate and runs per
//! answer of the adaptive policy against plain binary search on the same simulated histories,
//! and rounds with K = 1, 2, 4 slots.
//!
//! cargo run --release --example flaky_sim -- [trials] [candidates] [seed]

use setrows_bisect::flaky::session::Mode;
use setrows_bisect::flaky::Beta;
use setrows_bisect::search::EndpointCheck;
use setrows_bisect::sim::batch;

fn arg(i: usize, default: u64) -> u64 {
    std::env::args()
        .nth(i)
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let trials = arg(1, 2000) as u32;
    let n = arg(2, 1000) as usize;
    let seed = arg(3, 1);
    let adaptive = Mode::Adaptive {
        confidence: 0.95,
        prior: Beta::UNIFORM,
    };
    let ends = EndpointCheck::First;
    println!("{trials} histories of {n} candidates per row, culprit uniform, seed {seed}, endpoints tested first\n");
    println!("| p | mode | right | wrong | inconclusive | runs/answer | mean stated confidence |");
    println!("|---|---|---|---|---|---|---|");
    for p in [1.0, 0.5, 0.3, 0.1] {
        for (name, mode, budget) in [
            ("plain binary search (1 run)", Mode::Repeat(1), None),
            ("--repeat 3", Mode::Repeat(3), None),
            ("--confidence 0.95", adaptive, None),
            ("--confidence 0.95 --max-runs 300", adaptive, Some(300)),
        ] {
            let s = batch(n, p, mode, ends, 1, budget, trials, seed);
            println!(
                "| {p} | {name} | {:.1}% | {:.1}% | {:.1}% | {:.1} | {:.3} |",
                100.0 * s.success_rate(),
                100.0 * s.error_rate(),
                100.0 * f64::from(s.inconclusive) / f64::from(trials),
                s.mean_runs,
                s.mean_confidence
            );
        }
    }
    println!("\nMultisection: K runs at once per round (--jobs K), adaptive 0.95\n");
    println!("| p | K | rounds (waves of K runs) | runs/answer | right | wrong |");
    println!("|---|---|---|---|---|---|");
    for p in [1.0, 0.3] {
        for k in [1usize, 2, 4] {
            let mode = if p == 1.0 { Mode::Repeat(1) } else { adaptive };
            let s = batch(n, p, mode, ends, k, None, trials, seed);
            println!(
                "| {p}{} | {k} | {:.2} | {:.1} | {:.1}% | {:.1}% |",
                if p == 1.0 { " (plain, 1 run)" } else { "" },
                s.mean_waves,
                s.mean_runs,
                100.0 * s.success_rate(),
                100.0 * s.error_rate()
            );
        }
    }
}
