//! The bisection driver: the loop between the pure search, the result store and a prober.
//!
//! Its one caller is `run::bisect::execute` (every commit bisection, the `bisect-config`
//! follow-up included), with a `Plan` that `run::bisect::prepare` made:
//!
//! ```text
//! let record = bisect_commits(&plan, prober, &Deterministic, &store, events)?;
//! // record.conclusion: core::search::Conclusion (Found / Ambiguous / BadEndpoint),
//! // record.probes: every run, in order; `bisect_session` instead for --confidence
//! ```
//!
//! - `prober: &dyn Prober` runs one checked-out revision (script, bundled reproducer, host or
//!   container); its `identity()` keys the store.
//! - `rule: &dyn Rule` says when a candidate's runs are enough evidence (1 run, `--repeat N`,
//!   or a flakiness-aware rule); every run is stored. `run::bisect` picks it from the request's
//!   `Policy` (runs per commit), or runs `bisect_session` for `--confidence`.
//! - Results are consulted lazily: when the search asks for a candidate, stored runs are used
//!   first and only missing runs are executed. The search asks a stored candidate inside the
//!   open range before it builds anything, so a resumed run (or an overlapping bisection) first
//!   replays what is stored, then runs only what that leaves open, and never runs a probe twice.
//! - With one slot, the midpoint of least expected build time for the rest of the search is
//!   taken, within a probe budget that never passes git's (`core::search::BuildCosts`, costs
//!   learned from Ninja by `run::rebuild`).
//! - `--confidence` goes through `bisect_session` instead: `flaky::session::Session` hands out
//!   waves of `jobs` runs (spare slots re-run undecided candidates), with the same lazy store
//!   lookup, so all K slots work in every wave.
//! - `InfraError` is retried `INFRA_RETRIES` times, never stored, never a verdict; after that
//!   the driver returns `DriverError::Infra` (exit 3).

mod groups;
mod session;

use crate::core::evidence::{Decision, Evidence, Rule};
use crate::core::outcome::Verdict;
pub use crate::core::plan::Plan;
use crate::core::progress::{rounds_left, Event, Sink};
pub use crate::core::result::{BisectRecord, Conclusion, ProbeRecord};
use crate::core::search::Step;
use crate::probe::{ProbeReport, Prober};
use crate::run::git::{self, Candidate, CommitInfo};
pub use crate::run::slots::{DriverError, INFRA_RETRIES};
use crate::run::slots::{Hooks, Probing, RunSpec, Slot};
use crate::run::store::Store;
pub use session::bisect_session;
use std::sync::Mutex;

struct Shared<'a> {
    plan: &'a Plan,
    store: &'a Store,
    /// Where progress goes (`core::progress::Event`); run prints nothing itself.
    events: &'a dyn Sink,
    /// The one slot loop, and slot k of `--jobs K` (locked for the whole bisection).
    probing: Probing<'a>,
    slots: Vec<Slot>,
    /// Commit titles, looked up only for candidates that are probed (a 10,000-commit range
    /// should not cost 10,000 lookups).
    titles: Mutex<std::collections::HashMap<usize, String>>,
    records: Mutex<Vec<ProbeRecord>>,
    /// What building each candidate would cost, learned from the builds so far (`run::rebuild`).
    rebuild: Mutex<Option<crate::run::rebuild::RebuildModel>>,
    /// What a probe costs besides compiling (ms): the least seen in this bisection.
    overhead_ms: Mutex<Option<u64>>,
    /// What the search ran over, once it ended (the deterministic loop's groups).
    grouping: Mutex<Option<crate::core::result::Grouping>>,
    started: std::time::Instant,
    /// Seconds into the run when the answer was told, before the endpoint check it rests on.
    answered_s: Mutex<Option<f64>>,
}

/// Runs one bisection to its conclusion. See the module doc for the contract.
pub fn bisect_commits(
    plan: &Plan,
    prober: &dyn Prober,
    rule: &dyn Rule,
    store: &Store,
    events: &dyn Sink,
) -> Result<BisectRecord, DriverError> {
    let reuse = rule.one_run_decides();
    drive(
        plan,
        prober,
        store,
        events,
        rule.describe(),
        reuse,
        |shared| search_loop(shared, rule),
    )
    .map(|mut o| {
        o.policy = rule.describe();
        o
    })
}

/// Setup and teardown common to both loops: slot locks, journal, commit metadata.
fn drive(
    plan: &Plan,
    prober: &dyn Prober,
    store: &Store,
    events: &dyn Sink,
    policy: String,
    reuse_artifacts: bool,
    body: impl FnOnce(&Shared<'_>) -> Result<(Conclusion, usize), DriverError>,
) -> Result<BisectRecord, DriverError> {
    let started = std::time::Instant::now();
    let repo = git::open(&plan.repo_path)?;
    let cands = &plan.range.candidates;
    let jobs = plan.jobs.max(1);
    let probing = Probing {
        reuse_artifacts,
        scope: plan.range.spec.path.clone(),
        turns_in: Some(plan.work_dir.clone()),
        ..Probing::new(prober, store)
    };
    let slots = (0..jobs)
        .map(|s| {
            let dir = Slot::dir(
                &plan.work_dir,
                &plan.repo_path,
                &probing.slot_identity,
                &s.to_string(),
            );
            Slot::lock(dir)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let shared = Shared {
        plan,
        store,
        events,
        probing,
        slots,
        titles: Mutex::new(Default::default()),
        records: Mutex::new(Vec::new()),
        rebuild: Mutex::new(None),
        overhead_ms: Mutex::new(None),
        grouping: Mutex::new(None),
        started,
        answered_s: Mutex::new(None),
    };
    store.journal(&serde_json::json!({
        "event": "start", "at": now(), "good": plan.range.good, "bad": plan.range.bad,
        "candidates": cands.len(), "predicate": plan.predicate.describe(), "policy": policy,
        "jobs": jobs, "jobs_why": plan.jobs_why,
        // what `setrows-bisect log` shows as the configuration when no result was saved
        "argv": std::env::args().collect::<Vec<_>>(),
    }))?;
    if plan.jobs_why != "--jobs 1" {
        events.emit(Event::Note {
            text: plan.jobs_why.clone(),
        });
    }
    let (conclusion, steps) = body(&shared)?;
    drop(shared.slots);
    events.emit(Event::Finished);
    let probes = shared.records.into_inner().unwrap_or_default();
    let executed = probes.iter().filter(|p| !p.cached).count();
    let mut shas: Vec<String> = vec![plan.range.good.clone(), plan.range.bad.clone()];
    shas.extend(probes.iter().map(|p| p.sha.clone()));
    match &conclusion {
        Conclusion::Found { index } => shas.push(cands[*index].sha.clone()),
        Conclusion::Ambiguous { indices } => shas.extend(
            indices
                .iter()
                .flat_map(|&i| cands[i].members.iter().cloned()),
        ),
        Conclusion::BadEndpoint { .. } => {}
    }
    let mut commits = Vec::new();
    for sha in shas {
        if commits.iter().any(|c: &CommitInfo| c.sha == sha) {
            continue;
        }
        if let Ok(id) = git::Oid::from_str(&sha) {
            commits.push(git::commit_info(&repo, id)?);
        }
    }
    let answer: Vec<&str> = match &conclusion {
        Conclusion::Found { index } => vec![cands[*index].sha.as_str()],
        Conclusion::Ambiguous { indices } => {
            indices.iter().map(|&i| cands[i].sha.as_str()).collect()
        }
        Conclusion::BadEndpoint { .. } => vec![],
    };
    store.journal(&serde_json::json!({
        "event": "done", "at": now(), "conclusion": conclusion, "answer": answer,
    }))?;
    Ok(BisectRecord {
        conclusion,
        probes,
        steps,
        executed,
        policy,
        predicate: plan.predicate.describe(),
        elapsed_s: started.elapsed().as_secs_f64(),
        commits,
        budget: None,
        grouping: shared.grouping.into_inner().ok().flatten(),
        answer_s: shared.answered_s.into_inner().ok().flatten(),
    })
}

impl Shared<'_> {
    /// A round begins: what is left, and (after a verdict) the estimate of the time it takes
    /// from the durations of the probes seen so far.
    /// `probes_left` of the estimate take `rounds` rounds.
    fn round(&self, label: &str, steps_left: u32, probes_left: u32, rounds: u32) {
        let (done, measured): (usize, Vec<f64>) = self
            .records
            .lock()
            .map(|r| (r.len(), r.iter().map(|p| p.duration_s).collect()))
            .unwrap_or_default();
        self.events.emit(Event::Round {
            range: label.to_string(),
            steps_left,
            probes_done: done,
        });
        if done > 0 && probes_left > 0 {
            self.events
                .emit(Event::Estimate(crate::core::progress::estimate(
                    probes_left,
                    rounds,
                    &measured,
                )));
        }
    }
}

/// A conclusion over the search's groups, in candidates of the range.
fn in_candidates(groups: &groups::Groups, c: Conclusion) -> Conclusion {
    match c {
        Conclusion::Found { index: g } => Conclusion::Found {
            index: groups.members(g).start,
        },
        Conclusion::Ambiguous { indices: gs } => {
            let last = gs.len() - 1;
            let indices = gs
                .iter()
                .enumerate()
                .flat_map(|(k, &g)| {
                    let m = groups.members(g);
                    if k == last {
                        m.start..m.start + 1
                    } else {
                        m
                    }
                })
                .collect();
            Conclusion::Ambiguous { indices }
        }
        end @ Conclusion::BadEndpoint { .. } => end,
    }
}

impl Shared<'_> {
    /// The answer, told the moment the walk has it: on screen, in the journal (a killed run
    /// keeps it) and in the result, with the endpoint check still to come.
    fn tell(
        &self,
        answer: &Conclusion,
        checking: Vec<crate::core::search::Endpoint>,
    ) -> Result<(), DriverError> {
        let cands = &self.plan.range.candidates;
        let first_bad: Vec<String> = answer
            .candidates()
            .iter()
            .map(|&i| cands[i].sha.clone())
            .collect();
        let title = answer
            .candidates()
            .last()
            .map(|&i| title(self, i))
            .unwrap_or_default();
        let elapsed_s = self.started.elapsed().as_secs_f64();
        let measured: Vec<f64> = self
            .records
            .lock()
            .map(|r| {
                r.iter()
                    .filter(|p| !p.cached)
                    .map(|p| p.duration_s)
                    .collect()
            })
            .unwrap_or_default();
        let check_s = crate::core::progress::estimate(1, 1, &measured).seconds_left;
        self.store.journal(&serde_json::json!({
            "event": "answer", "at": now(), "first_bad": first_bad, "checking": checking,
            "elapsed_s": elapsed_s,
        }))?;
        if let Ok(mut a) = self.answered_s.lock() {
            *a = Some(elapsed_s);
        }
        self.events.emit(Event::Answer {
            first_bad,
            title,
            checking,
            elapsed_s,
            check_s,
        });
        Ok(())
    }
}

fn range_label(plan: &Plan) -> String {
    format!(
        "{}..{}",
        &plan.range.good[..10.min(plan.range.good.len())],
        &plan.range.bad[..10.min(plan.range.bad.len())]
    )
}

fn probe_thread_panicked(plan: &Plan) -> DriverError {
    DriverError::Io {
        path: plan.work_dir.clone(),
        source: std::io::Error::other("probe thread panicked"),
    }
}

/// Runs one wave: item k on job slot k, all at once (one slot: on this thread). Results come
/// back in the wave's order, so recording them is deterministic whatever finishes first.
fn in_slots<T: Sync>(
    plan: &Plan,
    wave: &[T],
    run: impl Fn(&T, usize) -> Result<Verdict, DriverError> + Sync,
) -> Vec<Result<Verdict, DriverError>> {
    if wave.len() <= 1 {
        return wave.iter().map(|item| run(item, 0)).collect();
    }
    std::thread::scope(|s| {
        let run = &run;
        let handles: Vec<_> = wave
            .iter()
            .enumerate()
            .map(|(slot, item)| s.spawn(move || run(item, slot)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(probe_thread_panicked(plan)))
            })
            .collect()
    })
}

/// The deterministic / `--repeat` loop: each proposed group gathers runs (on one member)
/// until the rule decides, and the round waits for all of them. Groups are the range's tree
/// classes joined where the build reads nothing that changes (`groups`); every index leaving
/// this function is a candidate index of the range.
fn search_loop(shared: &Shared<'_>, rule: &dyn Rule) -> Result<(Conclusion, usize), DriverError> {
    let plan = shared.plan;
    let jobs = plan.jobs.max(1);
    let repo = git::open(&plan.repo_path)?;
    let mut groups = shared.groups()?;
    let mut known: std::collections::BTreeMap<usize, Verdict> = Default::default();
    let mut endpoints = plan.endpoints;
    let mut search = shared.search(&mut groups, &repo, &mut endpoints, &known)?;
    let mut shown = 0usize;
    let label = range_label(plan);
    let mut steps = 0usize;
    let mut told: Option<Conclusion> = None;
    let conclusion = loop {
        if groups.len() != shown && groups.len() < plan.range.candidates.len() {
            shown = groups.len();
            shared.events.emit(Event::Grouped {
                candidates: plan.range.candidates.len(),
                groups: shown,
            });
            shared.store.journal(&serde_json::json!({
                "event": "groups", "at": now(), "candidates": plan.range.candidates.len(), "groups": shown,
            }))?;
        }
        if told.is_none() {
            if let Some((answer, checking)) = search.provisional() {
                let answer = in_candidates(&groups, answer);
                shared.tell(&answer, checking)?;
                told = Some(answer);
            }
        }
        match search.next(jobs) {
            Step::Probe(batch) => {
                // A round is announced only when one runs: the last word is the verdict.
                let steps_left = search.steps_left();
                shared.round(
                    &label,
                    steps_left,
                    steps_left,
                    rounds_left(steps_left, jobs),
                );
                steps += 1;
                let stored = shared.stored_keys();
                let members: Vec<usize> = batch
                    .iter()
                    .map(|&g| shared.pick(&groups, g, &stored))
                    .collect();
                let verdicts = in_slots(plan, &members, |&i, slot| decide(shared, rule, i, slot));
                for (&i, v) in members.iter().zip(verdicts) {
                    known.insert(i, v?);
                }
                groups.learn(&plan.range, &members);
                search = shared.search(&mut groups, &repo, &mut endpoints, &known)?;
            }
            Step::Done(end) => break in_candidates(&groups, end),
        }
    };
    if let (Some(_), Conclusion::BadEndpoint { which, got }) = (&told, &conclusion) {
        // As loud as the answer it takes back.
        shared.events.emit(Event::AnswerWithdrawn {
            which: *which,
            got: *got,
        });
    }
    if let Ok(mut g) = shared.grouping.lock() {
        *g = Some(groups.summary());
    }
    Ok((conclusion, steps))
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339()
}

/// Gathers evidence for candidate `i` (stored runs first, then new runs on `slot`) until the
/// rule decides.
fn decide(sh: &Shared<'_>, rule: &dyn Rule, i: usize, slot: usize) -> Result<Verdict, DriverError> {
    let cand: &Candidate = &sh.plan.range.candidates[i];
    let stored = sh.probing.stored(&cand.tree)?;
    let mut ev = Evidence::default();
    let mut run_index = 0usize;
    let mut stored_iter = stored.into_iter();
    loop {
        if let Decision::Decided(v) = rule.decide(&ev) {
            return Ok(v);
        }
        let (report, cached) = match stored_iter.next() {
            Some(run) => (run.report, true),
            None => (execute(sh, i, run_index, slot)?, false),
        };
        ev.add(note(sh, i, &report, cached, run_index)?);
        run_index += 1;
    }
}

/// Judges one run of candidate `i`, shows it, journals it and keeps it for the report.
fn note(
    sh: &Shared<'_>,
    i: usize,
    report: &ProbeReport,
    cached: bool,
    run_index: usize,
) -> Result<Verdict, DriverError> {
    let cand: &Candidate = &sh.plan.range.candidates[i];
    let verdict = sh.plan.predicate.judge(report.outcome, &report.output_tail);
    let rec = ProbeRecord {
        candidate: i,
        sha: cand.sha.clone(),
        title: title(sh, i),
        outcome: report.outcome,
        verdict,
        duration_s: report.duration_s,
        log: report.log_path.clone(),
        signature: report.signature.clone(),
        cached,
        // A stored run's build was paid (and counted) when it ran.
        ccache: if cached { None } else { report.ccache },
        reused_from: report.reused_from.clone(),
    };
    sh.events.emit(Event::Verdict {
        sha: cand.sha.clone(),
        title: rec.title.clone(),
        outcome: report.outcome,
        verdict,
        duration_s: report.duration_s,
        cached,
        reused_from: report.reused_from.clone(),
        signature: report.signature.clone(),
    });
    sh.store.journal(&serde_json::json!({
        "event": "probe", "at": now(), "sha": cand.sha, "tree": cand.tree, "run": run_index,
        "outcome": report.outcome, "verdict": verdict, "cached": cached,
        "reused_from": report.reused_from,
    }))?;
    if let Ok(mut r) = sh.records.lock() {
        r.push(rec);
    }
    Ok(verdict)
}

fn title(sh: &Shared<'_>, i: usize) -> String {
    if let Some(t) = sh.titles.lock().ok().and_then(|m| m.get(&i).cloned()) {
        return t;
    }
    let t = git::open(&sh.plan.repo_path)
        .ok()
        .and_then(|repo| {
            let id = git::Oid::from_str(&sh.plan.range.candidates[i].sha).ok()?;
            let c = repo.find_commit(id).ok()?;
            c.summary().map(str::to_string)
        })
        .unwrap_or_default();
    if let Ok(mut m) = sh.titles.lock() {
        m.insert(i, t.clone());
    }
    t
}

/// Runs candidate `index` once more on job slot `slot` through the one slot loop, with the
/// bisection's progress line and journal.
fn execute(
    sh: &Shared<'_>,
    index: usize,
    run_index: usize,
    slot: usize,
) -> Result<ProbeReport, DriverError> {
    let cand = &sh.plan.range.candidates[index];
    let title = &title(sh, index);
    let short = crate::core::range::short_sha(&cand.sha);
    let repo = git::open(&sh.plan.repo_path)?;
    let name = format!("setrows-{short}-{run_index}-{}", std::process::id());
    let journal_err = Mutex::new(None);
    let run = RunSpec {
        repo: &repo,
        sha: &cand.sha,
        tree: &cand.tree,
        index: run_index,
        name: &name,
        build: None,
        log: None,
    };
    let probe = crate::run::events::Probe::new(sh.events, slot, &cand.sha, title);
    let hooks = Hooks {
        phase: &|p| probe.phase(p),
        infra: &|attempt, msg| {
            sh.events.emit(Event::Retry {
                sha: cand.sha.clone(),
                attempt,
                attempts: sh.probing.attempts,
                message: msg.to_string(),
            });
            let r = sh.store.journal(&serde_json::json!({
                "event": "infra_error", "at": now(), "sha": cand.sha, "attempt": attempt, "message": msg,
            }));
            if let (Err(e), Ok(mut slot)) = (r, journal_err.lock()) {
                slot.get_or_insert(e);
            }
        },
    };
    let report = sh.probing.run_in(&sh.slots[slot], &run, &hooks);
    if let Some(e) = journal_err.into_inner().ok().flatten() {
        return Err(e.into());
    }
    if let Ok(r) = &report {
        sh.learn_build(&repo, index, slot, r);
    }
    report
}
