//! One bisection with repeated runs, as a pure state machine the driver (and the simulation)
//! steps through: ask `next(slots)` for a wave of runs, `record` each run's verdict, repeat.
//!
//! `--confidence C` (`Mode::Adaptive`) is probabilistic bisection: every decision is made
//! from the exact posterior over the first bad candidate given every run so far (the
//! reproduction rate integrated out, `flaky::belief`). Each run goes where it is expected to
//! tell the most about the culprit (`flaky::Planner`: a failure at i proves the culprit is at
//! or before i, a pass makes "after i" likelier by how likely a bad candidate was to fail), and
//! the answer is given as soon as one candidate holds C of the posterior, so it is wrong with
//! probability at most 1 - C under the model. A wave of `slots` runs is chosen jointly (greedy
//! by information, so a wave splits the posterior instead of stacking on one candidate; repeats
//! of one candidate are chosen when they are worth more).
//!
//! `--repeat N` (`Mode::Repeat`, N = 1 is git bisect) is the search's binary search with N runs
//! per candidate; slots the search leaves free go to more runs of its pending candidates.
//!
//! Nothing is forgotten: every run is kept as evidence, and `Mode::Adaptive` decides from the
//! evidence alone, so replaying a stored journal through `record` (in waves as the driver does,
//! or all at once as `--plan-only` does) resumes exactly.

use super::{
    belief, expected_good_verdicts, posterior, rate_posterior, robust_mass, top_block, Beta,
    FlakyPolicy, Planner, PosteriorRule, RATE_MARGIN_Z,
};
use crate::core::evidence::{Decision, Evidence, Fixed, Policy};
use crate::core::outcome::Verdict;
use crate::core::search::{Endpoint, EndpointCheck, Search, Step};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Mode {
    /// `--confidence C`: probabilistic bisection; the answer is given once the posterior
    /// confidence in it reaches C.
    Adaptive { confidence: f64, prior: Beta },
    /// `--repeat N` (N = 1 is git bisect): fixed runs, the answer is given as soon as the
    /// search ends. Its confidence is still computed (uniform prior) so the report can say
    /// how little a single pass proves.
    Repeat(u32),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Conclusion {
    Found {
        culprit: usize,
        /// P(this is the first bad candidate | all runs); `None` when the runs contradict the
        /// model (cannot happen after a successful search).
        confidence: Option<f64>,
        /// Posterior mean reproduction rate.
        rate: Option<f64>,
    },
    /// Skipped candidates hide the boundary (search's `Answer::Ambiguous`).
    Ambiguous {
        candidates: Vec<usize>,
        confidence: Option<f64>,
        rate: Option<f64>,
    },
    /// `--max-runs` ran out before the answer was believable: the fewest candidates that hold
    /// the requested confidence, and how much they hold.
    Inconclusive {
        candidates: Vec<usize>,
        mass: f64,
        rate: Option<f64>,
    },
    BadEndpoint {
        which: Endpoint,
        got: Verdict,
    },
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
    /// `Mode::Repeat` only.
    search: Search,
    keys: Vec<u64>,
    endpoints: EndpointCheck,
    evidence: Vec<Evidence>,
    mode: Mode,
    max_runs: Option<u64>,
    runs: u64,
    waves: u32,
    /// `Mode::Repeat`: proposed by the search, not decided yet.
    pending: Vec<usize>,
    conclusion: Option<Conclusion>,
}

/// Only skips seen: the candidate cannot be tested (exit 125), so it is not run again.
fn untestable(e: &Evidence) -> bool {
    e.skip > 0 && e.old == 0 && e.new == 0
}

impl Session {
    pub fn new(
        keys: Vec<u64>,
        endpoints: EndpointCheck,
        mode: Mode,
        max_runs: Option<u64>,
    ) -> Self {
        let n = keys.len();
        Session {
            search: Search::new(keys.clone(), endpoints),
            keys,
            endpoints,
            evidence: vec![Evidence::default(); n],
            mode,
            max_runs,
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
    pub fn conclusion(&self) -> Option<&Conclusion> {
        self.conclusion.as_ref()
    }

    fn prior(&self) -> Beta {
        match self.mode {
            Mode::Adaptive { prior, .. } => prior,
            Mode::Repeat(_) => Beta::UNIFORM,
        }
    }

    /// The rule for one candidate right now (for `Mode::Adaptive`, the posterior rule; its
    /// per-candidate part only calls the bad endpoint good).
    pub fn policy(&self) -> Box<dyn Policy> {
        match self.mode {
            Mode::Adaptive { confidence, prior } => Box::new(PosteriorRule {
                confidence,
                endpoint: FlakyPolicy::new(
                    confidence,
                    rate_posterior(&self.evidence, prior),
                    expected_good_verdicts(self.evidence.len()),
                ),
            }),
            Mode::Repeat(n) => Box::new(Fixed(n.max(1))),
        }
    }

    fn budget_left(&self) -> Option<u64> {
        self.max_runs.map(|m| m.saturating_sub(self.runs))
    }

    fn finish(&mut self, c: Conclusion) -> Action {
        self.conclusion = Some(c);
        self.pending.clear();
        Action::Finished
    }

    fn inconclusive(&mut self) -> Action {
        let target = match self.mode {
            Mode::Adaptive { confidence, .. } => confidence,
            Mode::Repeat(_) => 0.95,
        };
        let c = match posterior(&self.evidence, self.prior()) {
            Some(post) => {
                let (candidates, mass) = post.credible_set(target);
                Conclusion::Inconclusive {
                    candidates,
                    mass,
                    rate: Some(post.rate_mean),
                }
            }
            None => Conclusion::BadEndpoint {
                which: Endpoint::Good,
                got: Verdict::New,
            },
        };
        self.finish(c)
    }

    /// What to do next with `slots` runs available at once.
    pub fn next(&mut self, slots: usize) -> Action {
        let slots = slots.max(1);
        if self.conclusion.is_some() {
            return Action::Finished;
        }
        match self.mode {
            Mode::Adaptive { confidence, prior } => self.next_posterior(slots, confidence, prior),
            Mode::Repeat(n) => self.next_search(slots, n.max(1)),
        }
    }

    /// `Mode::Adaptive`: a function of the evidence (and the budget) alone.
    fn next_posterior(&mut self, slots: usize, confidence: f64, prior: Beta) -> Action {
        let n = self.evidence.len();
        let bad = n - 1;
        let ev = &self.evidence;
        if ev[0].new > 0 {
            return self.finish(Conclusion::BadEndpoint {
                which: Endpoint::Good,
                got: Verdict::New,
            });
        }
        for (which, i) in [(Endpoint::Bad, bad), (Endpoint::Good, 0)] {
            if untestable(&ev[i]) {
                return self.finish(Conclusion::BadEndpoint {
                    which,
                    got: Verdict::Skip,
                });
            }
        }
        // Any failure proves the bad endpoint bad (everything after a bad candidate is bad).
        let bad_shown = ev.iter().any(|e| e.new > 0);
        if !bad_shown && self.policy().decide(&ev[bad]) == Decision::Decided(Verdict::Old) {
            return self.finish(Conclusion::BadEndpoint {
                which: Endpoint::Bad,
                got: Verdict::Old,
            });
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
        if forced.is_empty() {
            let unt: Vec<bool> = testable.iter().map(|t| !t).collect();
            let (block, mass) = top_block(&b.culprit, &unt);
            if mass >= confidence && robust_mass(ev, &block, RATE_MARGIN_Z) >= confidence {
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
                    let c = if block.len() == 1 {
                        Conclusion::Found {
                            culprit: block[0],
                            confidence,
                            rate,
                        }
                    } else {
                        Conclusion::Ambiguous {
                            candidates: block,
                            confidence,
                            rate,
                        }
                    };
                    return self.finish(c);
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
        let wave = planner.pick(&forced, free, &testable, &self.keys);
        if wave.is_empty() {
            // Nothing left that a run could tell (every informative candidate untestable).
            return self.inconclusive();
        }
        self.waves += 1;
        Action::Run(wave)
    }

    /// `Mode::Repeat`: the search's binary search, `runs` per candidate.
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
                Step::BadEndpoint { which, got } => {
                    return self.finish(Conclusion::BadEndpoint { which, got })
                }
                Step::Done(answer) => {
                    let post = posterior(&self.evidence, self.prior());
                    let confidence = post.as_ref().map(|p| p.confidence(&answer));
                    let rate = post.as_ref().map(|p| p.rate_mean);
                    let c = match answer {
                        crate::core::search::Answer::Found(culprit) => Conclusion::Found {
                            culprit,
                            confidence,
                            rate,
                        },
                        crate::core::search::Answer::Ambiguous(candidates) => {
                            Conclusion::Ambiguous {
                                candidates,
                                confidence,
                                rate,
                            }
                        }
                    };
                    return self.finish(c);
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
mod tests {
    use super::*;

    fn drive(s: &mut Session, slots: usize, mut run: impl FnMut(usize) -> Verdict) {
        while let Action::Run(ix) = s.next(slots) {
            assert!(!ix.is_empty() && ix.len() <= slots);
            for i in ix {
                let v = run(i);
                s.record(i, v);
            }
        }
    }

    fn adaptive(c: f64) -> Mode {
        Mode::Adaptive {
            confidence: c,
            prior: Beta::UNIFORM,
        }
    }

    #[test]
    fn deterministic_fault_is_found_with_confidence() {
        let mut s = Session::new(
            (0..65).collect(),
            EndpointCheck::First,
            adaptive(0.95),
            None,
        );
        drive(
            &mut s,
            1,
            |i| if i >= 40 { Verdict::New } else { Verdict::Old },
        );
        match s.conclusion().unwrap() {
            Conclusion::Found {
                culprit,
                confidence,
                ..
            } => {
                assert_eq!(*culprit, 40);
                assert!(confidence.unwrap() >= 0.95);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn plain_bisect_states_its_low_confidence() {
        let mut s = Session::new(
            (0..65).collect(),
            EndpointCheck::First,
            Mode::Repeat(1),
            None,
        );
        drive(
            &mut s,
            1,
            |i| if i >= 40 { Verdict::New } else { Verdict::Old },
        );
        let Some(Conclusion::Found {
            culprit,
            confidence,
            ..
        }) = s.conclusion()
        else {
            panic!()
        };
        assert_eq!(*culprit, 40);
        // One pass at the parent cannot make a possibly-rare fault unlikely.
        assert!(confidence.unwrap() < 0.95);
    }

    #[test]
    fn budget_exhaustion_is_inconclusive_with_candidates() {
        let mut s = Session::new(
            (0..200).collect(),
            EndpointCheck::First,
            adaptive(0.95),
            Some(6),
        );
        drive(&mut s, 1, |i| {
            if i >= 120 {
                Verdict::New
            } else {
                Verdict::Old
            }
        });
        assert_eq!(s.runs(), 6);
        match s.conclusion().unwrap() {
            Conclusion::Inconclusive {
                candidates, mass, ..
            } => {
                assert!(candidates.contains(&120), "{candidates:?}");
                assert!(*mass >= 0.95);
                assert!(candidates.len() > 1);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_failure_at_the_reinforced_parent_moves_the_answer() {
        // Candidate 30 fails only on its 4th run: the search first settles on 31 and then must
        // discover 30 while reinforcing.
        let mut runs30 = 0;
        let mut s = Session::new((0..64).collect(), EndpointCheck::First, adaptive(0.9), None);
        drive(&mut s, 1, |i| match i {
            30 => {
                runs30 += 1;
                if runs30 >= 4 {
                    Verdict::New
                } else {
                    Verdict::Old
                }
            }
            i if i > 30 => Verdict::New,
            _ => Verdict::Old,
        });
        assert!(matches!(
            s.conclusion(),
            Some(Conclusion::Found { culprit: 30, .. })
        ));
    }

    #[test]
    fn replayed_evidence_is_not_run_again() {
        let oracle = |i: usize| if i >= 10 { Verdict::New } else { Verdict::Old };
        let mut first = Session::new(
            (0..32).collect(),
            EndpointCheck::First,
            adaptive(0.95),
            None,
        );
        let mut journal = Vec::new();
        drive(&mut first, 2, |i| {
            journal.push(i);
            oracle(i)
        });
        let mut second = Session::new(
            (0..32).collect(),
            EndpointCheck::First,
            adaptive(0.95),
            None,
        );
        for &i in &journal {
            second.record(i, oracle(i));
        }
        let mut fresh = 0;
        drive(&mut second, 2, |i| {
            fresh += 1;
            oracle(i)
        });
        assert_eq!(fresh, 0);
        assert_eq!(first.conclusion(), second.conclusion());
    }

    /// A seeded flaky oracle: candidates from `culprit` on fail with probability `p`.
    fn flaky(culprit: usize, p: f64, seed: u64) -> impl FnMut(usize) -> Verdict {
        let mut state = seed;
        move |i| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let u = (state >> 11) as f64 / (1u64 << 53) as f64;
            if i >= culprit && u < p {
                Verdict::New
            } else {
                Verdict::Old
            }
        }
    }

    #[test]
    fn resuming_wave_by_wave_replays_the_same_decisions() {
        // The driver replays a stored journal wave by wave: each wave the Session asks for is
        // answered from the store. The waves asked must be the first run's, in order.
        let keys: Vec<u64> = (0..300).collect();
        let mut first = Session::new(keys.clone(), EndpointCheck::First, adaptive(0.95), None);
        let mut oracle = flaky(170, 0.4, 5);
        let mut waves = Vec::new();
        while let Action::Run(ix) = first.next(3) {
            let got: Vec<Verdict> = ix.iter().map(|&i| oracle(i)).collect();
            for (&i, &v) in ix.iter().zip(&got) {
                first.record(i, v);
            }
            waves.push((ix, got));
        }
        let mut second = Session::new(keys, EndpointCheck::First, adaptive(0.95), None);
        for (ix, got) in &waves {
            assert_eq!(second.next(3), Action::Run(ix.clone()));
            for (&i, &v) in ix.iter().zip(got) {
                second.record(i, v);
            }
        }
        assert_eq!(second.next(3), Action::Finished);
        assert_eq!(first.conclusion(), second.conclusion());
        assert!(matches!(
            first.conclusion(),
            Some(Conclusion::Found { culprit: 170, .. })
        ));
    }

    #[test]
    fn a_reliable_fault_costs_a_few_runs_more_than_git_bisect() {
        // p = 1 with the rate unknown: ceil(log2 N) + 2 endpoint runs is what git bisect
        // spends; the Session must also make the passes believable, which costs some more.
        for culprit in [1, 17, 300, 512, 998, 999] {
            let mut s = Session::new(
                (0..1000).collect(),
                EndpointCheck::First,
                adaptive(0.95),
                None,
            );
            drive(&mut s, 1, |i| {
                if i >= culprit {
                    Verdict::New
                } else {
                    Verdict::Old
                }
            });
            assert!(
                matches!(s.conclusion(), Some(Conclusion::Found { culprit: c, .. }) if *c == culprit),
                "{:?}",
                s.conclusion()
            );
            assert!(s.runs() <= 30, "culprit {culprit}: {} runs", s.runs());
        }
    }

    #[test]
    fn a_skipped_parent_leaves_an_ambiguous_answer() {
        let mut s = Session::new((0..40).collect(), EndpointCheck::First, adaptive(0.9), None);
        drive(&mut s, 1, |i| match i {
            20 => Verdict::Skip,
            i if i >= 21 => Verdict::New,
            _ => Verdict::Old,
        });
        match s.conclusion().unwrap() {
            Conclusion::Ambiguous {
                candidates,
                confidence,
                ..
            } => {
                assert_eq!(candidates, &vec![20, 21]);
                assert!(confidence.unwrap() >= 0.9);
            }
            other => panic!("{other:?}"),
        }
        // Skipped candidates are not run again.
        assert_eq!(s.evidence()[20].runs(), 1);
    }

    #[test]
    fn endpoints_that_lie_are_reported() {
        let mut s = Session::new(
            (0..50).collect(),
            EndpointCheck::First,
            adaptive(0.95),
            None,
        );
        drive(&mut s, 2, |_| Verdict::New);
        assert_eq!(
            s.conclusion(),
            Some(&Conclusion::BadEndpoint {
                which: Endpoint::Good,
                got: Verdict::New
            })
        );
        let mut s = Session::new(
            (0..50).collect(),
            EndpointCheck::First,
            adaptive(0.95),
            None,
        );
        drive(&mut s, 1, |_| Verdict::Old);
        assert_eq!(
            s.conclusion(),
            Some(&Conclusion::BadEndpoint {
                which: Endpoint::Bad,
                got: Verdict::Old
            })
        );
        // Only the bad endpoint ran: it is checked first.
        assert_eq!(s.evidence()[49].runs() as u64, s.runs());
    }

    #[test]
    fn a_rare_fault_is_found_near_the_information_limit() {
        // p = 0.2 over 256 candidates: log2(256) / C(0.2) = 8 / 0.117 = 68 runs at best.
        let mut total = 0;
        for seed in 0..10 {
            let mut s = Session::new(
                (0..256).collect(),
                EndpointCheck::First,
                adaptive(0.95),
                None,
            );
            drive(&mut s, 1, flaky(100 + seed as usize, 0.2, seed));
            total += s.runs();
        }
        assert!(total / 10 < 2 * 68 + 20, "{} runs per answer", total / 10);
    }

    #[test]
    fn spare_slots_repeat_pending_candidates() {
        let mut s = Session::new(
            (0..1000).collect(),
            EndpointCheck::Lazy,
            adaptive(0.95),
            None,
        );
        let Action::Run(ix) = s.next(4) else { panic!() };
        assert_eq!(ix.len(), 4);
        let Action::Run(ix) = Session::new(
            (0..1000).collect(),
            EndpointCheck::Lazy,
            Mode::Repeat(1),
            None,
        )
        .next(4) else {
            panic!()
        };
        let mut d = ix.clone();
        d.dedup();
        assert_eq!(d.len(), 4, "plain bisect never repeats: {ix:?}");
    }
}
