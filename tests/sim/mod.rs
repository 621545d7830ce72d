//! Test and benchmark support, not library API: included by tests/flaky_stats.rs and the
//! examples (`#[path]`), so nothing a user runs depends on it.
//!
//! Simulated flaky histories: a planted first bad candidate and a reproduction rate, driven
//! through the real `flaky::session::Session` (and so the real `Search`). The statistical tests
//! and the `flaky_sim` example use it; nothing here runs a process.
//!
//! Seeded and self-contained (SplitMix64), so a figure in BENCHMARKS.md is reproducible
//! bit for bit from its command line.

#![allow(dead_code)]

use setrows_bisect::core::evidence::Policy;
use setrows_bisect::core::evidence::{Decision, Evidence, Rule};
use setrows_bisect::core::flaky::session::{Action, Session, SessionEnd};
use setrows_bisect::core::flaky::{evidence_from_runs, posterior, Beta};
use setrows_bisect::core::outcome::Verdict;
use setrows_bisect::core::result::Conclusion;
use setrows_bisect::core::search::{EndpointCheck, Search, Step};

/// SplitMix64: tiny, fast, good enough for Monte Carlo, and stable across versions (a crate's
/// generator may change its stream between releases and silently move the figures).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Uniform in [lo, hi).
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next_u64() % (hi - lo) as u64) as usize
    }
}

/// One simulated history: candidates 0..n, the first bad one at `culprit`.
#[derive(Debug, Clone, Copy)]
pub struct History {
    pub n: usize,
    pub culprit: usize,
    /// Chance that one run of a bad candidate shows the fault.
    pub rate: f64,
}

impl History {
    /// A uniformly placed culprit (never the good endpoint).
    pub fn random(n: usize, rate: f64, rng: &mut Rng) -> Self {
        History {
            n,
            culprit: rng.range(1, n),
            rate,
        }
    }

    pub fn run(&self, i: usize, rng: &mut Rng) -> Verdict {
        if i >= self.culprit && rng.next_f64() < self.rate {
            Verdict::New
        } else {
            Verdict::Old
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Trial {
    pub conclusion: SessionEnd,
    pub runs: u64,
    pub waves: u32,
    /// The stated culprit is the planted one.
    pub right: bool,
    /// A culprit was stated and it is not the planted one (inconclusive is neither).
    pub wrong: bool,
}

/// Drive one session over `h`; the stream of runs comes from `seed`.
pub fn trial(
    h: &History,
    policy: Policy,
    endpoints: EndpointCheck,
    slots: usize,
    seed: u64,
) -> Trial {
    let s = Session::new((0..h.n as u64).collect(), endpoints, policy);
    trial_of(h, s, slots, seed)
}

/// `trial` with a session made by the caller (another prior: `examples/flaky_tune.rs`).
#[allow(dead_code)]
pub fn trial_of(h: &History, mut s: Session, slots: usize, seed: u64) -> Trial {
    let mut rng = Rng::new(seed);
    while let Action::Run(ix) = s.next(slots) {
        for i in ix {
            let v = h.run(i, &mut rng);
            s.record(i, v);
        }
    }
    let conclusion = s.conclusion().cloned().unwrap_or(SessionEnd {
        conclusion: Conclusion::Ambiguous {
            indices: Vec::new(),
        },
        confidence: Some(0.0),
        rate: None,
        inconclusive: true,
    });
    judge(h, conclusion, s.runs(), s.waves())
}

/// The loop `run::driver::bisect_commits` runs (each proposed candidate is run until the rule
/// decides; a round lasts as long as its slowest candidate), with the answer's confidence
/// computed afterwards from every run. This is what the CLI does without `--confidence`
/// (plain bisection and `--repeat N`); `--confidence` is `trial` (the Session). `waves` counts sequential runs:
/// the sum over rounds of the most runs any slot made.
pub fn driver_trial(
    h: &History,
    rule: &dyn Rule,
    endpoints: EndpointCheck,
    slots: usize,
    seed: u64,
) -> Trial {
    let mut rng = Rng::new(seed);
    let mut search = Search::new((0..h.n as u64).collect(), endpoints);
    let mut runs: Vec<(usize, Verdict)> = Vec::new();
    let mut waves = 0u32;
    let answer = loop {
        match search.next(slots) {
            Step::Probe(ix) => {
                let mut longest = 0u32;
                for i in ix {
                    let mut ev = Evidence::default();
                    let v = loop {
                        if let Decision::Decided(v) = rule.decide(&ev) {
                            break v;
                        }
                        let r = h.run(i, &mut rng);
                        ev.add(r);
                        runs.push((i, r));
                    };
                    longest = longest.max(ev.runs());
                    search.record(i, v);
                }
                waves += longest;
            }
            Step::Done(end) => break end,
        }
    };
    let total = runs.len() as u64;
    let post = posterior(&evidence_from_runs(h.n, runs), Beta::UNIFORM);
    let (confidence, rate) = match &answer {
        Conclusion::BadEndpoint { .. } => (None, None),
        a => (
            post.as_ref().map(|p| p.confidence(a)),
            post.as_ref().map(|p| p.rate_mean),
        ),
    };
    // With no skips in the history, an ambiguous answer means the budget ran out.
    let inconclusive = matches!(answer, Conclusion::Ambiguous { .. });
    let conclusion = SessionEnd {
        confidence: if inconclusive {
            Some(confidence.unwrap_or(0.0))
        } else {
            confidence
        },
        conclusion: answer,
        rate,
        inconclusive,
    };
    judge(h, conclusion, total, waves)
}

fn judge(h: &History, conclusion: SessionEnd, runs: u64, waves: u32) -> Trial {
    let (right, wrong) = match &conclusion.conclusion {
        // The budget ran out: the credible set is no claim about the culprit.
        _ if conclusion.inconclusive => (false, false),
        Conclusion::Found { index } => (*index == h.culprit, *index != h.culprit),
        // The budget ran out before an endpoint could be settled (the policy turns the
        // missing runs into skips): no claim about the culprit, so not a wrong answer.
        Conclusion::BadEndpoint {
            got: Verdict::Skip, ..
        } => (false, false),
        // A bad endpoint claim about a history whose endpoints are right is a wrong answer.
        Conclusion::BadEndpoint { .. } => (false, true),
        Conclusion::Ambiguous { indices } => (false, !indices.contains(&h.culprit)),
    };
    Trial {
        conclusion,
        runs,
        waves,
        right,
        wrong,
    }
}

/// Aggregate over many trials.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Summary {
    pub trials: u32,
    pub right: u32,
    pub wrong: u32,
    pub inconclusive: u32,
    pub mean_runs: f64,
    pub mean_waves: f64,
    /// Mean stated confidence over the answers given (found culprits).
    pub mean_confidence: f64,
}

impl Summary {
    pub fn success_rate(&self) -> f64 {
        f64::from(self.right) / f64::from(self.trials.max(1))
    }
    pub fn error_rate(&self) -> f64 {
        f64::from(self.wrong) / f64::from(self.trials.max(1))
    }
}

/// `trials` histories of `n` candidates with rate `rate`; trial t uses history seed
/// `seed + t` and run seed derived from it, so two modes given the same `seed` see the same
/// planted culprits.
pub fn batch(
    n: usize,
    rate: f64,
    trials: u32,
    seed: u64,
    run: impl Fn(&History, u64) -> Trial,
) -> Summary {
    let mut sum = Summary {
        trials,
        ..Default::default()
    };
    let (mut runs, mut waves, mut conf, mut answered) = (0u64, 0u64, 0.0f64, 0u32);
    for t in 0..trials {
        let mut hist_rng = Rng::new(seed.wrapping_add(u64::from(t)));
        let h = History::random(n, rate, &mut hist_rng);
        let r = run(&h, hist_rng.next_u64());
        runs += r.runs;
        waves += u64::from(r.waves);
        sum.right += u32::from(r.right);
        sum.wrong += u32::from(r.wrong);
        sum.inconclusive += u32::from(!r.right && !r.wrong);
        if let (Conclusion::Found { .. }, Some(c)) =
            (&r.conclusion.conclusion, r.conclusion.confidence)
        {
            conf += c;
            answered += 1;
        }
    }
    let t = f64::from(trials.max(1));
    sum.mean_runs = runs as f64 / t;
    sum.mean_waves = waves as f64 / t;
    sum.mean_confidence = conf / f64::from(answered.max(1));
    sum
}

/// Capacity of the Z-channel a run is (a bad candidate fails with probability p, a good one
/// never), in bits per run: log2(1 + p (1-p)^((1-p)/p)).
pub fn capacity(p: f64) -> f64 {
    if p >= 1.0 {
        return 1.0;
    }
    (1.0 + p * (1.0 - p).powf((1.0 - p) / p)).log2()
}

/// Fewest runs any strategy needs on average to single out one of `n` candidates at rate p:
/// log2(n) / C(p).
pub fn info_limit(n: usize, p: f64) -> f64 {
    (n as f64).log2() / capacity(p)
}

/// Wilson 95% interval for `k` successes in `n` trials.
pub fn wilson(k: u32, n: u32) -> (f64, f64) {
    let (k, n) = (f64::from(k), f64::from(n.max(1)));
    let z = 1.96f64;
    let ph = k / n;
    let d = 1.0 + z * z / n;
    let c = (ph + z * z / (2.0 * n)) / d;
    let h = z / d * (ph * (1.0 - ph) / n + z * z / (4.0 * n * n)).sqrt();
    ((c - h).max(0.0), (c + h).min(1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rng_is_uniform_enough() {
        let mut r = Rng::new(7);
        let n = 100_000;
        let below: usize = (0..n).filter(|_| r.next_f64() < 0.3).count();
        let frac = below as f64 / n as f64;
        assert!((frac - 0.3).abs() < 0.01, "{frac}");
    }

    #[test]
    fn history_runs_have_the_planted_rate() {
        let mut r = Rng::new(1);
        let h = History {
            n: 10,
            culprit: 4,
            rate: 0.5,
        };
        assert!((0..1000).all(|_| h.run(3, &mut r) == Verdict::Old));
        let fails = (0..10_000)
            .filter(|_| h.run(4, &mut r) == Verdict::New)
            .count();
        assert!((4700..5300).contains(&fails), "{fails}");
    }

    #[test]
    fn information_limits_match_the_issue() {
        // Issue 13: about 31, 56 and 182 runs for 1,000 commits at p = 0.5, 0.3, 0.1.
        for (p, want) in [(1.0, 10.0), (0.5, 31.0), (0.3, 56.3), (0.1, 181.9)] {
            let got = info_limit(1000, p);
            assert!((got - want).abs() < 0.5, "p={p}: {got}");
        }
        let (lo, hi) = wilson(95, 100);
        assert!(
            (lo - 0.888).abs() < 0.002 && (hi - 0.978).abs() < 0.002,
            "{lo} {hi}"
        );
    }

    #[test]
    fn same_seed_same_figures() {
        let run = |h: &History, seed| trial(h, Policy::Repeat(1), EndpointCheck::First, 1, seed);
        let a = batch(100, 0.5, 50, 9, run);
        let b = batch(100, 0.5, 50, 9, run);
        assert_eq!(a, b);
    }
}
