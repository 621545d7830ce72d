//! BisectRecord that stays right when the fault shows up only some of the time.
//!
//! The model (syzkaller's, made explicit): there is one first bad candidate `c`; every
//! candidate before it never shows the new behaviour, every candidate from it on shows it on
//! each run independently with an unknown reproduction rate `p`. So one observed failure proves
//! "bad", while a pass only makes "good" more believable. Everything below follows from that
//! model and a prior on `p` (uniform unless told otherwise):
//!
//! * `rate_posterior`: what the runs at candidates *seen failing* say about `p` (a Beta).
//! * `FlakyRule`: per candidate, pass runs until the chance that a bad candidate passed that
//!   often, averaged over `p`'s posterior, is below this verdict's share of the error budget.
//!   The share is `(1 - confidence) / expected_good_verdicts`, because the answer is wrong as
//!   soon as one of the ~log2(N) "good" verdicts on its way was wrong.
//! * `posterior` / `belief`: the exact posterior over the culprit given *all* runs (p
//!   integrated out), so the report states the confidence in the answer it gives, not the
//!   confidence of each step.
//! * `Planner`: where the next runs tell the most about the culprit (expected information
//!   under `belief`); `session` runs there until one candidate holds the target confidence,
//!   integrated, integrated under a more cautious prior on p (`cautious_mass`) and with p at a
//!   lower bound (`robust_mass`), or the budget runs out and
//!   the answer is "inconclusive" with the candidates that remain. `FlakyRule` is now used
//!   only to call a never-failing bad endpoint good.
//!
//! Pure: no I/O. The driver feeds runs in and asks what to run next (`session::Session`).

use crate::core::evidence::{Decision, Evidence, Rule};
use crate::core::outcome::Verdict;
use crate::core::search::{ceil_log2, Conclusion};
use serde::{Deserialize, Serialize};

mod planner;
pub mod session;
pub use planner::*;

/// A Beta(a, b) distribution over the reproduction rate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Beta {
    pub a: f64,
    pub b: f64,
}

impl Beta {
    /// Uniform: nothing known about the rate. Deliberately weak, so a few lucky failures do not
    /// make a rare fault look reliable.
    pub const UNIFORM: Beta = Beta { a: 1.0, b: 1.0 };

    pub fn mean(&self) -> f64 {
        self.a / (self.a + self.b)
    }

    /// E[(1 - p)^k]: the chance that a bad candidate passes k runs in a row, averaged over what
    /// we believe about p. Heavier than (1 - mean)^k because a low rate is still possible.
    pub fn pass_streak(&self, k: u32) -> f64 {
        (ln_beta(self.a, self.b + f64::from(k)) - ln_beta(self.a, self.b)).exp()
    }

    /// Lower end of the central `mass` interval (bisection on the CDF; for the report).
    pub fn quantile(&self, q: f64) -> f64 {
        let (mut lo, mut hi) = (0.0f64, 1.0f64);
        for _ in 0..60 {
            let mid = 0.5 * (lo + hi);
            if self.cdf(mid) < q {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        0.5 * (lo + hi)
    }

    /// Regularised incomplete beta by midpoint integration of the density in log space; only
    /// used for report intervals, where three digits are plenty.
    fn cdf(&self, x: f64) -> f64 {
        if x <= 0.0 {
            return 0.0;
        }
        if x >= 1.0 {
            return 1.0;
        }
        let steps = 2000;
        let lb = ln_beta(self.a, self.b);
        let dens = |t: f64| ((self.a - 1.0) * t.ln() + (self.b - 1.0) * (1.0 - t).ln() - lb).exp();
        let total: f64 = (0..steps)
            .map(|i| dens((i as f64 + 0.5) / steps as f64))
            .sum::<f64>()
            / steps as f64;
        let part: f64 = (0..steps)
            .map(|i| dens(x * (i as f64 + 0.5) / steps as f64))
            .sum::<f64>()
            * x
            / steps as f64;
        (part / total).clamp(0.0, 1.0)
    }
}

/// ln Γ(x) for x > 0 (Lanczos, g = 7): the Beta functions below need it and std has none stable.
#[allow(clippy::excessive_precision)]
pub fn ln_gamma(x: f64) -> f64 {
    const C: [f64; 9] = [
        0.999_999_999_999_809_93,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_13,
        -176.615_029_162_140_59,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_571_6e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection keeps the approximation accurate for small priors (Jeffreys' 0.5).
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let t = x + 7.5;
    let sum = C[1..]
        .iter()
        .enumerate()
        .fold(C[0], |acc, (i, c)| acc + c / (x + i as f64 + 1.0));
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + sum.ln()
}

pub fn ln_beta(a: f64, b: f64) -> f64 {
    ln_gamma(a) + ln_gamma(b) - ln_gamma(a + b)
}

/// Posterior on the rate from the candidates that have failed at least once (they are surely
/// bad, so all their runs are draws of the fault). Stopping at the first failure does not bias
/// this: the likelihood of "k passes then a failure" is the same Beta kernel.
pub fn rate_posterior(evidence: &[Evidence], prior: Beta) -> Beta {
    evidence
        .iter()
        .filter(|e| e.new > 0)
        .fold(prior, |acc, e| Beta {
            a: acc.a + f64::from(e.new),
            b: acc.b + f64::from(e.old),
        })
}

/// How many "good" verdicts an answer over `candidates` candidates rests on: one per halving,
/// plus the good endpoint. The per-verdict error budget is the total divided by this.
pub fn expected_good_verdicts(candidates: usize) -> u32 {
    ceil_log2(candidates.saturating_sub(1)).max(1) + 1
}

/// The flakiness-aware per-candidate rule. Built per decision from the current rate posterior,
/// because the trait's `decide` sees only one candidate's evidence.
#[derive(Debug, Clone, Copy)]
pub struct FlakyRule {
    confidence: f64,
    /// Largest acceptable chance that a bad candidate is called good.
    per_verdict_error: f64,
    rate: Beta,
}

impl FlakyRule {
    /// `confidence` in (0, 1): the target for the final answer, split evenly across
    /// `expected_good_verdicts` good verdicts.
    pub fn new(confidence: f64, rate: Beta, expected_good_verdicts: u32) -> Self {
        let confidence = confidence.clamp(0.5, 0.999_999);
        FlakyRule {
            confidence,
            per_verdict_error: (1.0 - confidence) / f64::from(expected_good_verdicts.max(1)),
            rate,
        }
    }

    /// Passes needed before a candidate is believed good (with the current rate posterior).
    pub fn passes_needed(&self) -> u32 {
        // pass_streak falls monotonically in k: bisect for the first k that is small enough.
        let (mut lo, mut hi) = (1u32, 1_000_000u32);
        if self.rate.pass_streak(hi) > self.per_verdict_error {
            return hi;
        }
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.rate.pass_streak(mid) <= self.per_verdict_error {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        lo
    }
}

impl Rule for FlakyRule {
    fn decide(&self, ev: &Evidence) -> Decision {
        if ev.new > 0 {
            Decision::Decided(Verdict::New)
        } else if ev.old == 0 {
            if ev.skip > 0 {
                Decision::Decided(Verdict::Skip)
            } else {
                Decision::RunAgain
            }
        } else if self.rate.pass_streak(ev.old) <= self.per_verdict_error {
            Decision::Decided(Verdict::Old)
        } else {
            Decision::RunAgain
        }
    }

    fn describe(&self) -> String {
        format!(
            "adaptive, {:.1}% confidence (a pass is re-run until P(bad) <= {:.2}%)",
            self.confidence * 100.0,
            self.per_verdict_error * 100.0
        )
    }
}

/// Per-candidate evidence rebuilt from a run list `(candidate, verdict)` (the driver's probe
/// records), for `posterior` after the search.
pub fn evidence_from_runs(
    candidates: usize,
    runs: impl IntoIterator<Item = (usize, Verdict)>,
) -> Vec<Evidence> {
    let mut ev = vec![Evidence::default(); candidates];
    for (i, v) in runs {
        if let Some(e) = ev.get_mut(i) {
            e.add(v);
        }
    }
    ev
}

/// What the report says about an answer reached with `--confidence`: the posterior
/// confidence in it and the estimated reproduction rate, from every run of the bisection.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Assessment {
    pub confidence: f64,
    pub requested: f64,
    /// Posterior mean reproduction rate and a 90% interval for it.
    pub rate: f64,
    pub rate_low: f64,
    pub rate_high: f64,
    pub runs: u64,
    /// The runs spent after the search had its answer, so a reader sees how much of the time
    /// went on making it believable rather than on finding it. Absent in documents written
    /// before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirmation: Option<Confirmation>,
}

/// The tail of the runs that only raised the answer's posterior: from the run after which the
/// answer was the likeliest candidate and stayed so, to the last run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Confirmation {
    /// Runs made after the answer became (for good) the likeliest.
    pub runs: u64,
    /// Of those, the runs at the answer's parent (the commit right before it).
    pub at_parent: u64,
    /// P(answer) when it became the likeliest, and after the last run.
    pub from: f64,
    pub to: f64,
    /// Why the confirmation lasted as long as it did: the stopping rule's two other readings
    /// of the answer after the last run (`stop_masses`). Absent in documents written before
    /// they were recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<StopReadings>,
}

/// The answer's mass as the stopping rule's second and third opinions read it: with one more
/// pass imagined at a bad candidate (`cautious_mass`), and with the rate at its lower bound
/// (`robust_mass`; `rate_bound` is that bound, from the runs at and after the answer). The
/// answer is given when these and P(answer) all reach the requested confidence, so the lowest
/// of the three is the one the last runs were spent on.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StopReadings {
    pub cautious: f64,
    pub robust: f64,
    pub rate_bound: f64,
}

impl StopReadings {
    /// For `block` (ascending) given `evidence`.
    pub fn of(evidence: &[Evidence], block: &[usize]) -> Option<Self> {
        let &last = block.last()?;
        let (f, s) = evidence
            .get(last..)?
            .iter()
            .fold((0, 0), |(f, s), e| (f + e.new, s + e.old));
        Some(StopReadings {
            cautious: cautious_mass(evidence, block),
            robust: robust_mass(evidence, block, RATE_MARGIN_Z),
            rate_bound: wilson_lower(f, f + s, RATE_MARGIN_Z),
        })
    }
}

impl Confirmation {
    /// Replays the runs in order through the posterior. `None` when the answer never became
    /// the likeliest, or when the runs contradict the model.
    pub fn of(candidates: usize, runs: &[(usize, Verdict)], answer: &[usize]) -> Option<Self> {
        let first = *answer.first()?;
        let mut ev = vec![Evidence::default(); candidates];
        // (runs made when the answer last became the likeliest, P(answer) then)
        let mut since: Option<(usize, f64)> = None;
        let mut to = 0.0;
        for (k, &(i, v)) in runs.iter().enumerate() {
            if let Some(e) = ev.get_mut(i) {
                e.add(v);
            }
            let Some(b) = belief(&ev, Beta::UNIFORM) else {
                since = None;
                continue;
            };
            let mass: f64 = answer.iter().filter_map(|&j| b.culprit.get(j)).sum();
            let rival = (0..b.culprit.len())
                .filter(|j| !answer.contains(j))
                .map(|j| b.culprit[j])
                .fold(0.0f64, f64::max);
            if mass > rival {
                since.get_or_insert((k + 1, mass));
            } else {
                since = None;
            }
            to = mass;
        }
        let (start, from) = since?;
        let tail = &runs[start..];
        Some(Confirmation {
            runs: tail.len() as u64,
            at_parent: tail.iter().filter(|&&(i, _)| i + 1 == first).count() as u64,
            from,
            to,
            rule: StopReadings::of(&ev, answer),
        })
    }

    /// One line for the report: where the time after the answer went, and why (the posterior
    /// the stopping rule needed, in each of its three readings).
    pub fn line(&self, total: u64, requested: f64) -> String {
        let why = self.rule.map_or(String::new(), |r| {
            format!(
                "; the rule also asks the requested confidence with one more pass imagined at a bad commit ({:.2} at the end) and with the reproduction rate at its lower bound, {:.2} ({:.2} at the end)",
                r.cautious, r.rate_bound, r.robust
            )
        });
        format!(
            "confirming the answer took {} of {} runs ({} at its parent): P(answer) rose from {:.2}, when it became the likeliest, to {:.2} (requested {:.2}){why}",
            self.runs, total, self.at_parent, self.from, self.to, requested
        )
    }
}

impl Assessment {
    /// `None` when the runs contradict the model (the good endpoint failed).
    pub fn of(
        candidates: usize,
        runs: impl IntoIterator<Item = (usize, Verdict)>,
        answer: &Conclusion,
        requested: f64,
    ) -> Option<Self> {
        let runs: Vec<(usize, Verdict)> = runs.into_iter().collect();
        let total = runs.len() as u64;
        let confirmation = Confirmation::of(candidates, &runs, answer.candidates());
        let post = posterior(&evidence_from_runs(candidates, runs), Beta::UNIFORM)?;
        Some(Assessment {
            confidence: post.confidence(answer),
            requested,
            rate: post.rate_mean,
            rate_low: post.rate.quantile(0.05),
            rate_high: post.rate.quantile(0.95),
            runs: total,
            confirmation,
        })
    }

    /// One line for the terminal and the markdown report.
    pub fn line(&self) -> String {
        let verdict = if self.confidence >= self.requested {
            "meets"
        } else {
            "BELOW"
        };
        format!(
            "confidence in this answer: {:.1}% ({verdict} the requested {:.1}%); estimated reproduction rate {:.2} (90% interval {:.2}-{:.2}) from {} runs",
            100.0 * self.confidence,
            100.0 * self.requested,
            self.rate,
            self.rate_low,
            self.rate_high,
            self.runs
        )
    }
}

/// The posterior over which candidate is the first bad one, given every run so far.
#[derive(Debug, Clone, PartialEq)]
pub struct Posterior {
    /// `culprit[i]` = P(candidate i is the first bad one). Index 0 (the good endpoint) is 0.
    pub culprit: Vec<f64>,
    /// Posterior mean of the reproduction rate (mixed over culprit positions).
    pub rate_mean: f64,
    /// The rate posterior given the most likely culprit (for an interval in the report).
    pub rate: Beta,
}

/// Exact posterior under the model, `p` integrated out against `prior`. Returns `None` when the
/// runs contradict the model (the good endpoint failed): no culprit position explains them.
///
/// For a culprit at j the likelihood is 0 if anything before j failed, otherwise
/// B(a + F_j, b + S_j) / B(a, b) where F_j, S_j are failures and passes at j and after.
pub fn posterior(evidence: &[Evidence], prior: Beta) -> Option<Posterior> {
    // One computation of the culprit weights (`belief`, the planner's); this adds the rate
    // interval at the most likely culprit for the report.
    let b = belief(evidence, prior)?;
    let best = (1..b.culprit.len()).max_by(|&x, &y| b.culprit[x].total_cmp(&b.culprit[y]))?;
    let (f, s) = evidence[best..].iter().fold((0.0, 0.0), |(f, s), e| {
        (f + f64::from(e.new), s + f64::from(e.old))
    });
    Some(Posterior {
        culprit: b.culprit,
        rate_mean: b.rate_mean,
        rate: Beta {
            a: prior.a + f,
            b: prior.b + s,
        },
    })
}

impl Posterior {
    /// Probability that the answer is right: the culprit mass on the candidates it names.
    pub fn confidence(&self, answer: &Conclusion) -> f64 {
        answer
            .candidates()
            .iter()
            .filter_map(|&i| self.culprit.get(i))
            .sum::<f64>()
            .min(1.0)
    }

    /// The fewest candidates that together hold at least `mass` of the posterior (ascending):
    /// what is left to look at when the budget ran out.
    pub fn credible_set(&self, mass: f64) -> (Vec<usize>, f64) {
        let mut order: Vec<usize> = (0..self.culprit.len())
            .filter(|&i| self.culprit[i] > 0.0)
            .collect();
        order.sort_by(|&x, &y| self.culprit[y].total_cmp(&self.culprit[x]).then(x.cmp(&y)));
        let mut set = Vec::new();
        let mut acc = 0.0;
        for i in order {
            if acc >= mass {
                break;
            }
            acc += self.culprit[i];
            set.push(i);
        }
        set.sort_unstable();
        (set, acc.min(1.0))
    }
}

#[cfg(test)]
mod tests;
