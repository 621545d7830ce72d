//! Alternatives to the driver policy's defaults (error split across ceil(log2 N)+1 verdicts,
//! uniform prior on the rate), measured on the same simulated histories as `flaky_sim`.
//!
//! cargo run --release --example flaky_tune
use setrows_bisect::core::flaky::{AdaptivePolicy, Beta};
use setrows_bisect::core::search::EndpointCheck;
use setrows_bisect::sim::{batch, driver_trial, History};
fn main() {
    println!("| variant | p | wrong | runs/answer | stated confidence |");
    println!("|---|---|---|---|---|");
    for (name, g_mul, prior) in [
        ("base", 1u32, Beta::UNIFORM),
        ("G*2", 2, Beta::UNIFORM),
        ("jeffreys", 1, Beta { a: 0.5, b: 0.5 }),
        ("B(1,2)", 1, Beta { a: 1.0, b: 2.0 }),
    ] {
        for p in [1.0, 0.3, 0.1] {
            let s = batch(1000, p, 1000, 1, |h: &History, s| {
                let g = setrows_bisect::core::flaky::expected_good_verdicts(h.n) * g_mul;
                driver_trial(
                    h,
                    &AdaptivePolicy::with(0.95, g, prior, None),
                    EndpointCheck::First,
                    1,
                    s,
                )
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
