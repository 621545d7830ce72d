//! The prior on the reproduction rate, varied: what `--confidence 0.95` (the Session the CLI
//! runs) costs and how often it is wrong under each, on the same simulated histories as
//! `flaky_sim`. The default is the uniform prior.
//!
//! cargo run --release --example flaky_tune -- [trials] [candidates] [slots] [priors]
//!
//! `priors`: how many of (uniform, Jeffreys, Beta(1, 2)) to try, in that order (default 3).
#[path = "../tests/sim/mod.rs"]
mod sim;

use setrows_bisect::core::evidence::Policy;
use setrows_bisect::core::flaky::session::Session;
use setrows_bisect::core::flaky::Beta;
use setrows_bisect::core::search::EndpointCheck;
use sim::{batch, info_limit, trial_of, wilson, History};

fn arg(i: usize, default: u64) -> u64 {
    std::env::args()
        .nth(i)
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let trials = arg(1, 1000) as u32;
    let n = arg(2, 1000) as usize;
    let slots = arg(3, 1) as usize;
    let priors = arg(4, 3) as usize;
    println!("{trials} histories of {n} candidates, K = {slots}\n");
    println!("| prior | p | right (95% CI) | wrong | runs/answer | x log2(N)/C(p) | waves | stated confidence |");
    println!("|---|---|---|---|---|---|---|---|");
    for (name, prior) in [
        ("uniform (default)", Beta::UNIFORM),
        ("jeffreys", Beta { a: 0.5, b: 0.5 }),
        ("B(1,2)", Beta { a: 1.0, b: 2.0 }),
    ]
    .into_iter()
    .take(priors)
    {
        let policy = Policy::Confidence {
            confidence: 0.95,
            max_runs: None,
        };
        for p in [1.0, 0.5, 0.3, 0.1] {
            let s = batch(n, p, trials, 1, |h: &History, s| {
                let keys = (0..h.n as u64).collect();
                let session = Session::with_prior(keys, EndpointCheck::First, policy, prior);
                trial_of(h, session, slots, s)
            });
            let (lo, hi) = wilson(s.right, s.trials);
            println!(
                "| {name} | {p} | {:.1}% ({:.1}-{:.1}) | {:.1}% | {:.1} | {:.2} | {:.1} | {:.3} |",
                100.0 * s.success_rate(),
                100.0 * lo,
                100.0 * hi,
                100.0 * s.error_rate(),
                s.mean_runs,
                s.mean_runs / info_limit(n, p),
                s.mean_waves,
                s.mean_confidence
            );
        }
    }
}
