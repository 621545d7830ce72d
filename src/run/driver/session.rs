//! The `--confidence` driver loop: `flaky::session::Session` hands out waves of `--jobs` runs
//! and this loop answers each from the store first, running the rest on the job slots. It is
//! separate from the deterministic loop because its store reading differs: runs are consumed
//! one wave at a time, in run-index order, rather than all at once per candidate.

use super::{drive, execute, in_slots, note, range_label, Shared};
use crate::core::evidence::{Evidence, Policy};
use crate::core::flaky::session::{Action, Session, SessionEnd};
use crate::core::flaky::Beta;
use crate::core::plan::Plan;
use crate::core::progress::Sink;
use crate::core::result::{BisectRecord, BudgetSpent, CandidateMass, Conclusion};
use crate::probe::Prober;
use crate::run::slots::DriverError;
use crate::run::store::{Store, StoredRun};
use std::collections::VecDeque;

/// `--confidence C` (and `--max-runs`): the bisection is driven by `flaky::session::Session`,
/// which hands out waves of `plan.jobs` runs. Slots the search's proposals leave free re-run
/// undecided candidates, so K slots shorten the wall time instead of waiting on one candidate's
/// repeated runs; at the end the culprit's parent is re-run until the answer holds at C.
///
/// Same contract as `bisect_commits`: every run is stored before it is recorded, a run the
/// session asks for is answered by the store first (so a resumed bisection replays the same
/// waves and reaches the same answer), infrastructure failures are retried.
pub fn bisect_session(
    plan: &Plan,
    prober: &dyn Prober,
    confidence: f64,
    max_runs: Option<u64>,
    store: &Store,
    events: &dyn Sink,
) -> Result<BisectRecord, DriverError> {
    let policy = Policy::Confidence {
        confidence,
        max_runs,
    };
    let describe = |s: Option<&Session>| {
        let base = match s {
            Some(s) => s.rule().describe(),
            None => format!("adaptive, {:.1}% confidence", confidence * 100.0),
        };
        let cap = max_runs
            .map(|m| format!(", at most {m} runs"))
            .unwrap_or_default();
        format!(
            "{base}{cap}; waves of {} runs, the culprit's parent re-run until the answer holds",
            plan.jobs.max(1)
        )
    };
    let mut last_policy = describe(None);
    let mut budget = None;
    // Never reuse by artifacts: the Session re-runs commits on purpose (flaky faults).
    let outcome = drive(
        plan,
        prober,
        store,
        events,
        describe(None),
        false,
        |shared| {
            let (c, steps, session) = session_loop(shared, policy)?;
            last_policy = describe(Some(&session));
            budget = budget_spent(plan, &session, confidence, max_runs);
            Ok((c, steps))
        },
    )?;
    Ok(BisectRecord {
        policy: last_policy,
        budget,
        ..outcome
    })
}

/// Mean runs per answer over the information limit, measured on 2,000 simulated histories
/// per rate (BENCHMARKS.md, flaky section: 1.57-1.99x); the estimate below uses the upper end.
const MEASURED_OVERHEAD: f64 = 2.0;

/// When `--max-runs` ended the session undecided: the likeliest first bad commits with their
/// posterior probabilities, and a run estimate from the information still missing. `None`
/// when the session reached an answer (or the runs contradict the model).
fn budget_spent(
    plan: &Plan,
    session: &Session,
    confidence: f64,
    max_runs: Option<u64>,
) -> Option<BudgetSpent> {
    let Some(SessionEnd {
        inconclusive: true,
        confidence: Some(mass),
        rate,
        ..
    }) = session.conclusion()
    else {
        return None;
    };
    let post = crate::core::flaky::posterior(session.evidence(), Beta::UNIFORM)?;
    let mut ranked: Vec<(usize, f64)> = post
        .culprit
        .iter()
        .copied()
        .enumerate()
        .filter(|&(_, p)| p > 0.0)
        .collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    // Entropy (bits) of where the culprit is: what the remaining runs must resolve.
    let entropy: f64 = ranked.iter().map(|&(_, p)| -p * p.log2()).sum();
    let p = rate.unwrap_or(post.rate_mean).clamp(1e-3, 1.0);
    let capacity = z_channel_capacity(p);
    let more_runs =
        (capacity > 0.0).then(|| (MEASURED_OVERHEAD * entropy / capacity).ceil() as u64);
    let cands = &plan.range.candidates;
    Some(BudgetSpent {
        runs: session.runs(),
        max_runs: max_runs.unwrap_or(session.runs()),
        confidence,
        mass: *mass,
        candidates: ranked
            .iter()
            .take(10)
            .map(|&(i, p)| CandidateMass {
                sha: cands[i].sha.clone(),
                probability: p,
            })
            .collect(),
        more_runs,
        rate: *rate,
    })
}

/// Bits one run carries about a commit that shows the fault with probability `p` and never
/// shows it when good (a Z-channel): log2(1 + p (1-p)^((1-p)/p)).
fn z_channel_capacity(p: f64) -> f64 {
    if p >= 1.0 {
        return 1.0;
    }
    (1.0 + p * (1.0 - p).powf((1.0 - p) / p)).log2()
}

/// The `--confidence` loop over `Session` waves. Per candidate, stored runs are loaded the
/// first time the session asks for it and consumed (in run-index order) before anything is
/// executed; new runs are numbered after the last stored one.
fn session_loop(
    shared: &Shared<'_>,
    policy: Policy,
) -> Result<(Conclusion, usize, Session), DriverError> {
    let plan = shared.plan;
    let cands = &plan.range.candidates;
    let jobs = plan.jobs.max(1);
    let mut session = Session::new(
        cands.iter().map(|c| c.depth).collect(),
        plan.endpoints,
        policy,
    );
    let mut stored: Vec<Option<VecDeque<StoredRun>>> = vec![None; cands.len()];
    let mut consumed = vec![0usize; cands.len()];
    let mut next_free = vec![0usize; cands.len()];
    let label = range_label(plan);
    loop {
        let waves = waves_left(session.evidence(), jobs);
        shared.round(&label, waves, waves * jobs as u32, waves);
        let wave = match session.next(jobs) {
            Action::Run(wave) => wave,
            Action::Finished => break,
        };
        let mut fresh: Vec<(usize, usize)> = Vec::new();
        for i in wave {
            let queue = match &mut stored[i] {
                Some(q) => q,
                slot => {
                    next_free[i] = shared.probing.next_index(&cands[i].tree);
                    slot.insert(shared.probing.stored(&cands[i].tree)?.into())
                }
            };
            if let Some(run) = queue.pop_front() {
                let v = note(shared, i, &run.report, true, consumed[i]);
                consumed[i] += 1;
                session.record(i, v?);
                continue;
            }
            fresh.push((i, next_free[i]));
            next_free[i] += 1;
            consumed[i] += 1;
        }
        let run_one = |i: usize, run_index: usize, slot: usize| {
            let report = execute(shared, i, run_index, slot)?;
            note(shared, i, &report, false, run_index)
        };
        let verdicts = in_slots(plan, &fresh, |&(i, r), slot| run_one(i, r, slot));
        for (&(i, _), v) in fresh.iter().zip(verdicts) {
            session.record(i, v?);
        }
    }
    let conclusion = match session.conclusion() {
        Some(end) => end.conclusion.clone(),
        // `next` returns Finished only with a conclusion; an empty answer is the honest one.
        None => Conclusion::Ambiguous {
            indices: (1..cands.len()).collect(),
        },
    };
    let waves = session.waves() as usize;
    Ok((conclusion, waves, session))
}

/// Rough rounds still needed, for the progress line: the gap between the last candidate seen
/// only passing and the first seen failing, cut K+1 ways per wave.
fn waves_left(ev: &[Evidence], jobs: usize) -> u32 {
    let hi = ev.iter().position(|e| e.new > 0).unwrap_or(ev.len());
    let lo = ev[..hi].iter().rposition(|e| e.old > 0).unwrap_or(0);
    let mut gap = hi.saturating_sub(lo + 1);
    let mut waves = 0;
    while gap > 0 {
        gap /= jobs + 1;
        waves += 1;
    }
    waves
}
