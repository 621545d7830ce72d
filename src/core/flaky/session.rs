//! One bisection with repeated runs, as a pure state machine the driver (and the simulation)
//! steps through: ask `next(slots)` for a wave of runs, `record` each run's verdict, repeat.
//!
//! `--confidence C` (`Policy::Confidence`) is probabilistic bisection: every decision is made
//! from the exact posterior over the first bad candidate given every run so far (the
//! reproduction rate integrated out, `flaky::belief`). Each run goes where it is expected to
//! tell the most about the culprit (`flaky::Planner`: a failure at i proves the culprit is at
//! or before i, a pass makes "after i" likelier by how likely a bad candidate was to fail), and
//! the answer is given as soon as one candidate holds C of the posterior, so it is wrong with
//! probability at most 1 - C under the model. A wave of `slots` runs is chosen jointly (greedy
//! by information, so a wave splits the posterior instead of stacking on one candidate; repeats
//! of one candidate are chosen when they are worth more).
//!
//! `--repeat N` (`Policy::Repeat`, N = 1 is git bisect) is the search's binary search with N runs
//! per candidate; slots the search leaves free go to more runs of its pending candidates.
//!
//! Nothing is forgotten: every run is kept as evidence, and `Policy::Confidence` decides from the
//! evidence alone, so replaying a stored journal through `record` (in waves as the driver does,
//! or all at once as `--plan-only` does) resumes exactly.

use super::{
    belief, expected_good_verdicts, expected_stop_evidence, posterior, rate_posterior, stop_masses,
    Beta, FlakyRule, Planner, PosteriorRule, StopMasses,
};
use crate::core::evidence::{Decision, Evidence, Fixed, Policy, Rule};
use crate::core::outcome::Verdict;
use crate::core::search::{Conclusion, Endpoint, EndpointCheck, Search, Step};
use serde::Serialize;

/// How a session ended: THE conclusion of a search (`core::result::Conclusion`, what the
/// result document stores), with what the posterior says about it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionEnd {
    #[serde(flatten)]
    pub conclusion: Conclusion,
    /// P(the answer | all runs); `None` for an endpoint, or when the runs contradict the model
    /// (cannot happen after a successful search). With `inconclusive`: the share of the
    /// posterior the candidates hold.
    pub confidence: Option<f64>,
    /// Posterior mean reproduction rate.
    pub rate: Option<f64>,
    /// `--max-runs` ran out before the answer was believable: the conclusion is `Ambiguous`
    /// over the fewest candidates that hold the requested confidence.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub inconclusive: bool,
}

impl SessionEnd {
    fn answer(conclusion: Conclusion, confidence: Option<f64>, rate: Option<f64>) -> SessionEnd {
        SessionEnd {
            conclusion,
            confidence,
            rate,
            inconclusive: false,
        }
    }

    fn endpoint(which: Endpoint, got: Verdict) -> SessionEnd {
        SessionEnd {
            conclusion: Conclusion::BadEndpoint { which, got },
            confidence: None,
            rate: None,
            inconclusive: false,
        }
    }

    /// The first bad candidate, when the session found one.
    pub fn culprit(&self) -> Option<usize> {
        match self.conclusion {
            Conclusion::Found { index } => Some(index),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Run each listed candidate once, all at the same time (an index may appear several
    /// times: runs of one commit on several slots), `record` every result, then ask again.
    Run(Vec<usize>),
    Finished,
}

#[derive(Debug, Clone)]
pub struct Session {
    /// `Policy::Repeat` only.
    search: Search,
    keys: Vec<u64>,
    endpoints: EndpointCheck,
    evidence: Vec<Evidence>,
    policy: Policy,
    /// Over the reproduction rate: uniform (every rate alike before the first run) unless a
    /// tuning experiment asks for another (`with_prior`).
    prior: Beta,
    runs: u64,
    waves: u32,
    /// `Policy::Repeat`: proposed by the search, not decided yet.
    pending: Vec<usize>,
    conclusion: Option<SessionEnd>,
}

/// Only skips seen: the candidate cannot be tested (exit 125), so it is not run again.
fn untestable(e: &Evidence) -> bool {
    e.skip > 0 && e.old == 0 && e.new == 0
}

impl Session {
    pub fn new(keys: Vec<u64>, endpoints: EndpointCheck, policy: Policy) -> Self {
        Self::with_prior(keys, endpoints, policy, Beta::UNIFORM)
    }

    /// The session under another prior over the reproduction rate (`examples/flaky_tune.rs`).
    pub fn with_prior(
        keys: Vec<u64>,
        endpoints: EndpointCheck,
        policy: Policy,
        prior: Beta,
    ) -> Self {
        let n = keys.len();
        Session {
            search: Search::new(keys.clone(), endpoints),
            keys,
            endpoints,
            evidence: vec![Evidence::default(); n],
            policy,
            prior,
            runs: 0,
            waves: 0,
            pending: Vec::new(),
            conclusion: None,
        }
    }

    /// One run of candidate `i` (a stored one when resuming, or a fresh one).
    pub fn record(&mut self, i: usize, v: Verdict) {
        self.evidence[i].add(v);
        self.runs += 1;
    }

    pub fn evidence(&self) -> &[Evidence] {
        &self.evidence
    }
    pub fn runs(&self) -> u64 {
        self.runs
    }
    /// Waves handed out so far (rounds of parallel runs).
    pub fn waves(&self) -> u32 {
        self.waves
    }
    pub fn conclusion(&self) -> Option<&SessionEnd> {
        self.conclusion.as_ref()
    }

    /// The rule for one candidate right now (for `Policy::Confidence`, the posterior rule; its
    /// per-candidate part only calls the bad endpoint good).
    pub fn rule(&self) -> Box<dyn Rule> {
        match self.policy {
            Policy::Confidence { confidence, .. } => Box::new(PosteriorRule {
                confidence,
                endpoint: FlakyRule::new(
                    confidence,
                    rate_posterior(&self.evidence, self.prior),
                    expected_good_verdicts(self.evidence.len()),
                ),
            }),
            Policy::Repeat(n) => Box::new(Fixed(n.max(1))),
        }
    }

    fn budget_left(&self) -> Option<u64> {
        match self.policy {
            Policy::Confidence {
                max_runs: Some(m), ..
            } => Some(m.saturating_sub(self.runs)),
            _ => None,
        }
    }

    fn finish(&mut self, c: SessionEnd) -> Action {
        self.conclusion = Some(c);
        self.pending.clear();
        Action::Finished
    }

    fn inconclusive(&mut self) -> Action {
        let target = match self.policy {
            Policy::Confidence { confidence, .. } => confidence,
            Policy::Repeat(_) => 0.95,
        };
        let c = match posterior(&self.evidence, self.prior) {
            Some(post) => {
                let (candidates, mass) = post.credible_set(target);
                SessionEnd {
                    conclusion: Conclusion::Ambiguous {
                        indices: candidates,
                    },
                    confidence: Some(mass),
                    rate: Some(post.rate_mean),
                    inconclusive: true,
                }
            }
            None => SessionEnd::endpoint(Endpoint::Good, Verdict::New),
        };
        self.finish(c)
    }

    /// What to do next with `slots` runs available at once.
    pub fn next(&mut self, slots: usize) -> Action {
        let slots = slots.max(1);
        if self.conclusion.is_some() {
            return Action::Finished;
        }
        match self.policy {
            Policy::Confidence { confidence, .. } => self.next_posterior(slots, confidence),
            Policy::Repeat(n) => self.next_search(slots, n.max(1)),
        }
    }

    /// `Policy::Confidence`: a function of the evidence (and the budget) alone.
    fn next_posterior(&mut self, slots: usize, confidence: f64) -> Action {
        let prior = self.prior;
        let n = self.evidence.len();
        let bad = n - 1;
        let ev = &self.evidence;
        if ev[0].new > 0 {
            return self.finish(SessionEnd::endpoint(Endpoint::Good, Verdict::New));
        }
        for (which, i) in [(Endpoint::Bad, bad), (Endpoint::Good, 0)] {
            if untestable(&ev[i]) {
                return self.finish(SessionEnd::endpoint(which, Verdict::Skip));
            }
        }
        // Any failure proves the bad endpoint bad (everything after a bad candidate is bad).
        let bad_shown = ev.iter().any(|e| e.new > 0);
        if !bad_shown && self.rule().decide(&ev[bad]) == Decision::Decided(Verdict::Old) {
            return self.finish(SessionEnd::endpoint(Endpoint::Bad, Verdict::Old));
        }
        let Some(b) = belief(ev, prior) else {
            return self.inconclusive();
        };
        let testable: Vec<bool> = ev.iter().map(|e| !untestable(e)).collect();
        // Endpoint checks: `First` runs the bad endpoint until it fails, then the good one
        // once (both in the first wave when there are two slots). The model takes the good
        // endpoint as good, so more passes there would say nothing about the culprit; a
        // failure there at any time ends the bisection.
        let mut forced = Vec::new();
        if self.endpoints == EndpointCheck::First {
            if !bad_shown {
                forced.push(bad);
            }
            if ev[0].runs() == 0 && (bad_shown || slots >= 2) {
                forced.push(0);
            }
        }
        let unt: Vec<bool> = testable.iter().map(|t| !t).collect();
        let stop = stop_masses(ev, &unt, prior);
        if let (true, Some(StopMasses { block, mass, least })) = (forced.is_empty(), &stop) {
            let (block, mass) = (block.clone(), *mass);
            if *least >= confidence {
                // `Lazy`: an answer next to an endpoint is given only once that endpoint has
                // shown what it claims.
                if block.last() == Some(&bad) && !bad_shown {
                    forced.push(bad);
                }
                if block.first() == Some(&1) && ev[0].runs() == 0 {
                    forced.push(0);
                }
                if forced.is_empty() {
                    let (confidence, rate) = (Some(mass), Some(b.rate_mean));
                    return self.finish(SessionEnd::answer(
                        Conclusion::among(block),
                        confidence,
                        rate,
                    ));
                }
            }
        }
        if self.budget_left() == Some(0) {
            return self.inconclusive();
        }
        let cap = self
            .budget_left()
            .map_or(slots, |left| slots.min(left as usize))
            .max(1);
        forced.truncate(cap);
        let planner = Planner::new(&b, cap);
        let free = cap - forced.len();
        let mut wave = planner.pick(&forced, free, &testable, &self.keys);
        if let (true, [x], Some(stop)) = (forced.is_empty(), wave.as_slice(), &stop) {
            if let Some(at) = self.answer_run(&b, *x, stop, &unt) {
                wave = vec![at];
            }
        }
        if wave.is_empty() {
            // Nothing left that a run could tell (every informative candidate untestable).
            return self.inconclusive();
        }
        self.waves += 1;
        Action::Run(wave)
    }

    /// A run at the answer instead of the planner's `pick`, when one run is asked for, the
    /// answer holds at least half of the posterior, no run at or after it has passed yet, and
    /// the run there is expected to bring the stopping rule further (`expected_stop_evidence`).
    ///
    /// Why: the planner scores a run by what it tells about where the culprit is, and a run at
    /// the answer, already seen failing, tells almost nothing about that; but the stopping
    /// rule also needs the rate, and while every run at or after the answer has failed the
    /// runs cannot tell a fault that always reproduces from a flaky one that happened to fail
    /// each time. With p = 1 the planner alone ran the parent again and again (8 times at
    /// N = 400) until the cautious mass held, where a mix of failures at the answer and passes
    /// at the parent gets there about two runs sooner; with a flaky fault the first pass at the
    /// answer shows it, and from then on the planner alone decides, as before (simulated:
    /// BENCHMARKS.md, "Runs per answer by N and p").
    fn answer_run(
        &self,
        b: &super::Belief,
        pick: usize,
        stop: &StopMasses,
        untestable: &[bool],
    ) -> Option<usize> {
        let at = *stop.block.last()?;
        let ev = &self.evidence;
        let clean = ev[at..].iter().all(|e| e.old == 0);
        if stop.mass < 0.5 || !clean || at == pick || untestable[at] {
            return None;
        }
        let score = |x| expected_stop_evidence(ev, b, x, untestable, self.prior);
        (score(at) > score(pick) + 1e-12).then_some(at)
    }

    /// `Policy::Repeat`: the search's binary search, `runs` per candidate.
    fn next_search(&mut self, slots: usize, runs: u32) -> Action {
        loop {
            let policy = Fixed(runs);
            let mut still = Vec::new();
            for &i in &self.pending {
                match policy.decide(&self.evidence[i]) {
                    Decision::Decided(v) => self.search.record(i, v),
                    Decision::RunAgain => still.push(i),
                }
            }
            self.pending = still;
            if self.budget_left() == Some(0) {
                return self.inconclusive();
            }
            if !self.pending.is_empty() {
                return self.repeat_wave(slots, runs);
            }
            match self.search.next(slots) {
                Step::Probe(ix) => self.pending = ix,
                Step::Done(Conclusion::BadEndpoint { which, got }) => {
                    return self.finish(SessionEnd::endpoint(which, got))
                }
                Step::Done(answer) => {
                    let post = posterior(&self.evidence, self.prior);
                    let confidence = post.as_ref().map(|p| p.confidence(&answer));
                    let rate = post.as_ref().map(|p| p.rate_mean);
                    return self.finish(SessionEnd::answer(answer, confidence, rate));
                }
            }
        }
    }

    /// Spread up to `slots` runs over the pending candidates: one each, then extra runs to
    /// those that still need them, round robin.
    fn repeat_wave(&mut self, slots: usize, runs: u32) -> Action {
        let cap = self
            .budget_left()
            .map_or(slots, |b| slots.min(b as usize))
            .max(1);
        let needs: Vec<u32> = self
            .pending
            .iter()
            .map(|&i| runs.saturating_sub(self.evidence[i].old).max(1))
            .collect();
        let mut given = vec![0u32; self.pending.len()];
        let mut out = Vec::with_capacity(cap);
        while out.len() < cap {
            let before = out.len();
            for (k, &i) in self.pending.iter().enumerate() {
                if out.len() < cap && given[k] < needs[k] {
                    given[k] += 1;
                    out.push(i);
                }
            }
            if out.len() == before {
                break;
            }
        }
        out.sort_unstable();
        self.waves += 1;
        Action::Run(out)
    }
}

#[cfg(test)]
mod tests;
