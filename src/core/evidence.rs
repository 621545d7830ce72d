//! How many runs of one candidate it takes to believe a verdict.
//!
//! A GPU fault that reproduces half the time turns a single passing run into weak evidence.
//! The driver keeps every run of every candidate (stored, so nothing is lost) and asks a
//! `Rule` whether the evidence so far is enough. The deterministic rule is git bisect's: the
//! first run decides. The flakiness-aware rules live in `flaky`.

use crate::core::outcome::Verdict;
use serde::{Deserialize, Serialize};

/// Verdicts seen so far for one candidate (infrastructure errors never count).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    pub old: u32,
    pub new: u32,
    pub skip: u32,
}

impl Evidence {
    pub fn add(&mut self, v: Verdict) {
        match v {
            Verdict::Old => self.old += 1,
            Verdict::New => self.new += 1,
            Verdict::Skip => self.skip += 1,
        }
    }
    pub fn runs(&self) -> u32 {
        self.old + self.new + self.skip
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Decided(Verdict),
    /// Run this candidate again before deciding.
    RunAgain,
}

/// THE policy: runs per commit, the one setting `--repeat` and `--confidence` choose between
/// (a request carries it; the result's `policy` says it in words). A repeat is the search's
/// loop with a per-candidate `Rule`; a confidence is a `flaky::session::Session`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Policy {
    /// `--repeat N` (N = 1 is git bisect's one run): N old runs decide old, one new decides new.
    Repeat(u32),
    /// `--confidence C`: runs until the answer holds at C, at most `max_runs` in all.
    Confidence {
        confidence: f64,
        max_runs: Option<u64>,
    },
}

pub trait Rule: Send + Sync {
    fn decide(&self, ev: &Evidence) -> Decision;
    /// Text for the report ("1 run per commit", "adaptive, 95% confidence").
    fn describe(&self) -> String;
    /// Whether one run decides every candidate. Only then may a run be answered by the
    /// outcome of byte-identical artifacts (`probe::artifacts`): where runs repeat, the
    /// repetition is the point.
    fn one_run_decides(&self) -> bool {
        false
    }
}

/// git bisect's rule: one run decides. Any observed new behaviour wins over old (a fault seen
/// once is real); skips decide only when nothing else was seen.
#[derive(Debug, Clone, Copy)]
pub struct Deterministic;

impl Rule for Deterministic {
    fn decide(&self, ev: &Evidence) -> Decision {
        Fixed(1).decide(ev)
    }
    fn describe(&self) -> String {
        "1 run per commit".into()
    }
    fn one_run_decides(&self) -> bool {
        true
    }
}

/// `--repeat N`: N runs per candidate; a single new-behaviour run decides new; N old runs decide old.
#[derive(Debug, Clone, Copy)]
pub struct Fixed(pub u32);

impl Rule for Fixed {
    fn decide(&self, ev: &Evidence) -> Decision {
        if ev.new > 0 {
            Decision::Decided(Verdict::New)
        } else if ev.old >= self.0.max(1) {
            Decision::Decided(Verdict::Old)
        } else if ev.skip > 0 && ev.old == 0 {
            Decision::Decided(Verdict::Skip)
        } else {
            Decision::RunAgain
        }
    }
    fn describe(&self) -> String {
        format!("{} runs per commit", self.0.max(1))
    }
    fn one_run_decides(&self) -> bool {
        self.0 <= 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(old: u32, new: u32, skip: u32) -> Evidence {
        Evidence { old, new, skip }
    }

    #[test]
    fn deterministic_first_run_decides() {
        let p = Deterministic;
        assert_eq!(p.decide(&ev(0, 0, 0)), Decision::RunAgain);
        assert_eq!(p.decide(&ev(1, 0, 0)), Decision::Decided(Verdict::Old));
        assert_eq!(p.decide(&ev(0, 1, 0)), Decision::Decided(Verdict::New));
        assert_eq!(p.decide(&ev(0, 0, 1)), Decision::Decided(Verdict::Skip));
    }

    #[test]
    fn fixed_repeat_needs_all_passes() {
        let p = Fixed(3);
        assert_eq!(p.decide(&ev(2, 0, 0)), Decision::RunAgain);
        assert_eq!(p.decide(&ev(3, 0, 0)), Decision::Decided(Verdict::Old));
        assert_eq!(p.decide(&ev(2, 1, 0)), Decision::Decided(Verdict::New));
    }
}
