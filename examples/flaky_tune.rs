//! The prior on the reproduction rate, varied: what `--confidence 0.95` (the Session the CLI
//! runs) costs and how often it is wrong under each, on the same simulated histories as
//! `flaky_sim`. The default is the uniform prior.
//!
//! cargo run --release --example flaky_tune
#[path = "../tests/sim/mod.rs"]
mod sim;

use setrows_bisect::core::flaky::session::Mode;
use setrows_bisect::core::flaky::Beta;
use setrows_bisect::core::search::EndpointCheck;
use sim::{batch, trial, History};

fn main() {
    println!("| prior | p | wrong | runs/answer | stated confidence |");
    println!("|---|---|---|---|---|");
    for (name, prior) in [
        ("uniform (default)", Beta::UNIFORM),
        ("jeffreys", Beta { a: 0.5, b: 0.5 }),
        ("B(1,2)", Beta { a: 1.0, b: 2.0 }),
    ] {
        let mode = Mode::Adaptive {
            confidence: 0.95,
            prior,
        };
        for p in [1.0, 0.3, 0.1] {
            let s = batch(1000, p, 1000, 1, |h: &History, s| {
                trial(h, mode, EndpointCheck::First, 1, None, s)
            });
            println!(
                "| {name} | {p} | {:.1}% | {:.1} | {:.3} |",
                100.0 * s.error_rate(),
                s.mean_runs,
                s.mean_confidence
            );
        }
    }
}
