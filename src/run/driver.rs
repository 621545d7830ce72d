//! The bisection driver: the loop between the pure search, the result store and a prober.
//!
//! Library API (used by the CLI, the demo, and callers such as config bisection):
//!
//! ```text
//! let plan = Plan::new(repo_path, range, predicate, EndpointCheck::First, jobs, work_dir);
//! let outcome = bisect_commits(&plan, &prober, &policy, &store, &progress)?;
//! // outcome.answer: Found / Ambiguous / BadEndpoint, outcome.probes: every run, in order
//! ```
//!
//! - `prober: &dyn Prober` runs one checked-out revision (script, bundled reproducer, host or
//!   container); its `identity()` keys the store.
//! - `policy: &dyn Policy` says when a candidate's runs are enough evidence (1 run, `--repeat
//!   N`, or a flakiness-aware policy); every run is stored.
//! - Results are consulted lazily: when the search asks for a candidate, stored runs are used
//!   first and only missing runs are executed. A resumed run therefore replays the exact same
//!   sequence of decisions as the run that was killed, and arrives at the same answer.
//! - `--confidence` goes through `bisect_session` instead: `flaky::session::Session` hands out
//!   waves of `jobs` runs (spare slots re-run undecided candidates), with the same lazy store
//!   lookup, so all K slots work in every wave.
//! - `InfraError` is retried `INFRA_RETRIES` times, never stored, never a verdict; after that
//!   the driver returns `DriverError::Infra` (exit 3).

use crate::core::evidence::{Decision, Evidence, Policy};
use crate::core::flaky::session::{Action, Conclusion as SessionConclusion, Mode, Session};
use crate::core::flaky::Beta;
use crate::core::outcome::{Outcome, Verdict};
pub use crate::core::plan::Plan;
pub use crate::core::result::{BisectOutcome, Conclusion, ProbeRecord};
use crate::core::search::{Answer, Search, Step};
use crate::probe::{ProbeReport, ProbeRequest, Prober};
use crate::run::git::{self, Candidate, Checkout, CommitInfo};
use crate::run::progress::Progress;
use crate::run::store::{Store, StoreError, StoreKey, StoredRun};
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Attempts per probe when our own machinery fails, before giving up with exit 3.
pub const INFRA_RETRIES: u32 = 3;

#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    #[error(transparent)]
    Git(#[from] git::GitError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("infrastructure failure probing {sha} ({attempts} attempts): {message}; log: {log}")]
    Infra {
        sha: String,
        attempts: u32,
        message: String,
        log: String,
    },
    #[error("another setrows-bisect is using {0}; wait for it or pass a different --work-dir")]
    Busy(PathBuf),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// One checkout + build dir per (repository, prober identity, slot): a build dir configured
/// by one `--build` command is never reused by another, so a stored result always comes
/// from a build made by the commands in its key.
fn slot_dir(plan: &Plan, identity: &str, slot: usize) -> PathBuf {
    let canon = std::fs::canonicalize(&plan.repo_path).unwrap_or(plan.repo_path.clone());
    let key = crate::run::store::bisect_id(&[&canon.to_string_lossy(), identity]);
    plan.work_dir
        .join("checkouts")
        .join(key)
        .join(slot.to_string())
}

/// Holds an exclusive lock on a slot directory for as long as it lives.
struct SlotLock(#[allow(dead_code)] std::fs::File);

fn lock_slot(dir: &Path) -> Result<SlotLock, DriverError> {
    let ioe = |source| DriverError::Io {
        path: dir.to_path_buf(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(ioe)?;
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join("lock"))
        .map_err(ioe)?;
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a file descriptor we own; released when the file is closed.
    let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        return Err(DriverError::Busy(dir.to_path_buf()));
    }
    Ok(SlotLock(f))
}

struct Shared<'a> {
    plan: &'a Plan,
    prober: &'a dyn Prober,
    store: &'a Store,
    progress: &'a Progress,
    identity: String,
    /// Commit titles, looked up only for candidates that are probed (a 10,000-commit range
    /// should not cost 10,000 lookups).
    titles: Mutex<std::collections::HashMap<usize, String>>,
    records: Mutex<Vec<ProbeRecord>>,
}

/// Runs one bisection to its conclusion. See the module doc for the contract.
pub fn bisect_commits(
    plan: &Plan,
    prober: &dyn Prober,
    policy: &dyn Policy,
    store: &Store,
    progress: &Progress,
) -> Result<BisectOutcome, DriverError> {
    drive(plan, prober, store, progress, policy.describe(), |shared| {
        search_loop(shared, policy)
    })
    .map(|mut o| {
        o.policy = policy.describe();
        o
    })
}

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
    progress: &Progress,
) -> Result<BisectOutcome, DriverError> {
    let mode = Mode::Adaptive {
        confidence,
        prior: Beta::UNIFORM,
    };
    let describe = |s: Option<&Session>| {
        let base = match s {
            Some(s) => s.policy().describe(),
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
    let outcome = drive(plan, prober, store, progress, describe(None), |shared| {
        let (c, steps, session) = session_loop(shared, mode, max_runs)?;
        last_policy = describe(Some(&session));
        Ok((c, steps))
    })?;
    Ok(BisectOutcome {
        policy: last_policy,
        ..outcome
    })
}

/// Setup and teardown common to both loops: slot locks, journal, commit metadata.
fn drive(
    plan: &Plan,
    prober: &dyn Prober,
    store: &Store,
    progress: &Progress,
    policy: String,
    body: impl FnOnce(&Shared<'_>) -> Result<(Conclusion, usize), DriverError>,
) -> Result<BisectOutcome, DriverError> {
    let started = std::time::Instant::now();
    let repo = git::open(&plan.repo_path)?;
    let cands = &plan.range.candidates;
    let jobs = plan.jobs.max(1);
    let identity = prober.identity();
    let locks = (0..jobs)
        .map(|s| lock_slot(&slot_dir(plan, &identity, s)))
        .collect::<Result<Vec<_>, _>>()?;
    let shared = Shared {
        plan,
        prober,
        store,
        progress,
        identity,
        titles: Mutex::new(Default::default()),
        records: Mutex::new(Vec::new()),
    };
    store.journal(&serde_json::json!({
        "event": "start", "at": now(), "good": plan.range.good, "bad": plan.range.bad,
        "candidates": cands.len(), "predicate": plan.predicate.describe(), "policy": policy,
    }))?;
    let (conclusion, steps) = body(&shared)?;
    drop(locks);
    progress.finish();
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
    store.journal(&serde_json::json!({"event": "done", "at": now(), "conclusion": conclusion}))?;
    Ok(BisectOutcome {
        conclusion,
        probes,
        steps,
        executed,
        policy,
        predicate: plan.predicate.describe(),
        elapsed_s: started.elapsed().as_secs_f64(),
        commits,
    })
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

/// The deterministic / `--repeat` loop: each proposed candidate gathers runs until the policy
/// decides, and the round waits for all of them.
fn search_loop(
    shared: &Shared<'_>,
    policy: &dyn Policy,
) -> Result<(Conclusion, usize), DriverError> {
    let plan = shared.plan;
    let jobs = plan.jobs.max(1);
    let mut search = Search::new(
        plan.range.candidates.iter().map(|c| c.depth).collect(),
        plan.endpoints,
    );
    let label = range_label(plan);
    let mut steps = 0usize;
    let conclusion = loop {
        let done = shared.records.lock().map(|r| r.len()).unwrap_or(0);
        shared.progress.steps(search.steps_left(), done, &label);
        match search.next(jobs) {
            Step::Probe(batch) => {
                steps += 1;
                let verdicts = in_slots(plan, &batch, |&i, slot| decide(shared, policy, i, slot));
                for (&i, v) in batch.iter().zip(verdicts) {
                    search.record(i, v?);
                }
            }
            Step::Done(Answer::Found(i)) => break Conclusion::Found { index: i },
            Step::Done(Answer::Ambiguous(ix)) => break Conclusion::Ambiguous { indices: ix },
            Step::BadEndpoint { which, got } => break Conclusion::BadEndpoint { which, got },
        }
    };
    Ok((conclusion, steps))
}

/// The `--confidence` loop over `Session` waves. Per candidate, stored runs are loaded the
/// first time the session asks for it and consumed (in run-index order) before anything is
/// executed; new runs are numbered after the last stored one.
fn session_loop(
    shared: &Shared<'_>,
    mode: Mode,
    max_runs: Option<u64>,
) -> Result<(Conclusion, usize, Session), DriverError> {
    let plan = shared.plan;
    let cands = &plan.range.candidates;
    let jobs = plan.jobs.max(1);
    let mut session = Session::new(
        cands.iter().map(|c| c.depth).collect(),
        plan.endpoints,
        mode,
        max_runs,
    );
    let mut stored: Vec<Option<VecDeque<StoredRun>>> = vec![None; cands.len()];
    let mut consumed = vec![0usize; cands.len()];
    let mut next_free = vec![0usize; cands.len()];
    let label = range_label(plan);
    loop {
        let done = shared.records.lock().map(|r| r.len()).unwrap_or(0);
        shared
            .progress
            .steps(waves_left(session.evidence(), jobs), done, &label);
        let wave = match session.next(jobs) {
            Action::Run(wave) => wave,
            Action::Finished => break,
        };
        let mut fresh: Vec<(usize, usize)> = Vec::new();
        for i in wave {
            let key = StoreKey::new(&cands[i].tree, &shared.identity);
            let dir = shared.store.root().join("results").join(&key.0);
            let queue = match &mut stored[i] {
                Some(q) => q,
                slot => {
                    next_free[i] = after_last_run(&dir);
                    slot.insert(shared.store.load(&key)?.into())
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
            let cand = &cands[i];
            let key = StoreKey::new(&cand.tree, &shared.identity);
            let report = execute(shared, i, cand, &key, run_index, slot)?;
            note(shared, i, &report, false, run_index)
        };
        let verdicts = in_slots(plan, &fresh, |&(i, r), slot| run_one(i, r, slot));
        for (&(i, _), v) in fresh.iter().zip(verdicts) {
            session.record(i, v?);
        }
    }
    let conclusion = match session.conclusion().cloned() {
        Some(SessionConclusion::Found { culprit, .. }) => Conclusion::Found { index: culprit },
        Some(SessionConclusion::Ambiguous { candidates, .. })
        | Some(SessionConclusion::Inconclusive { candidates, .. }) => Conclusion::Ambiguous {
            indices: candidates,
        },
        Some(SessionConclusion::BadEndpoint { which, got }) => {
            Conclusion::BadEndpoint { which, got }
        }
        // `next` returns Finished only with a conclusion; an empty answer is the honest one.
        None => Conclusion::Ambiguous {
            indices: (1..cands.len()).collect(),
        },
    };
    let waves = session.waves() as usize;
    Ok((conclusion, waves, session))
}

/// The run index after the highest stored one in `dir` (0 when none). New runs go after every
/// stored file, never into a gap an interrupted wave left, so the store's order is the order the
/// runs were used in and a replay consumes them exactly as the first pass did.
fn after_last_run(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| {
            let name = e.ok()?.file_name();
            let n = name.to_str()?.strip_prefix("run-")?.strip_suffix(".json")?;
            n.parse::<usize>().ok()
        })
        .map(|n| n + 1)
        .max()
        .unwrap_or(0)
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

fn now() -> String {
    chrono::Utc::now().to_rfc3339()
}

/// Gathers evidence for candidate `i` (stored runs first, then new runs on `slot`) until the
/// policy decides.
fn decide(
    sh: &Shared<'_>,
    policy: &dyn Policy,
    i: usize,
    slot: usize,
) -> Result<Verdict, DriverError> {
    let cand: &Candidate = &sh.plan.range.candidates[i];
    let key = StoreKey::new(&cand.tree, &sh.identity);
    let stored = sh.store.load(&key)?;
    let mut ev = Evidence::default();
    let mut run_index = 0usize;
    let mut stored_iter = stored.into_iter();
    loop {
        if let Decision::Decided(v) = policy.decide(&ev) {
            return Ok(v);
        }
        let (report, cached) = match stored_iter.next() {
            Some(run) => (run.report, true),
            None => (execute(sh, i, cand, &key, run_index, slot)?, false),
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
    };
    sh.progress.line(&format!(
        "{} {} {}{}  ({:.1}s){}",
        &cand.sha[..10],
        report.outcome,
        verdict_word(verdict),
        if cached { " [stored]" } else { "" },
        report.duration_s,
        report
            .signature
            .as_deref()
            .map(|s| format!("  {s}"))
            .unwrap_or_default()
    ));
    sh.store.journal(&serde_json::json!({
        "event": "probe", "at": now(), "sha": cand.sha, "tree": cand.tree, "run": run_index,
        "outcome": report.outcome, "verdict": verdict, "cached": cached,
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

fn verdict_word(v: Verdict) -> &'static str {
    match v {
        Verdict::Old => "-> old",
        Verdict::New => "-> new",
        Verdict::Skip => "-> skip",
    }
}

/// Checks out and probes `cand` on `slot`, retrying infrastructure failures, and stores the
/// result before returning it.
fn execute(
    sh: &Shared<'_>,
    index: usize,
    cand: &Candidate,
    key: &StoreKey,
    run_index: usize,
    slot: usize,
) -> Result<ProbeReport, DriverError> {
    let dir = slot_dir(sh.plan, &sh.identity, slot);
    let src = dir.join("src");
    let build = dir.join("build");
    let log = sh.store.log_path(key, run_index);
    let title = &title(sh, index);
    let short = &cand.sha[..10];
    let mut last = String::new();
    for attempt in 1..=INFRA_RETRIES {
        sh.progress.phase(slot, short, title, "checkout");
        let repo = git::open(&sh.plan.repo_path)?;
        Checkout::new(src.clone(), dir.join("checkout.state")).checkout(&repo, &cand.sha)?;
        let _ = std::fs::remove_file(&log);
        let run_name = format!("setrows-{}-{}-{}", short, run_index, std::process::id());
        let req = ProbeRequest {
            commit: &cand.sha,
            checkout: &src,
            build_dir: &build,
            log_path: &log,
            run_name: &run_name,
        };
        let report = sh
            .prober
            .probe(&req, &|p| sh.progress.phase(slot, short, title, p.as_str()));
        if report.outcome != Outcome::InfraError {
            sh.store.save(
                key,
                run_index,
                &StoredRun {
                    tree: cand.tree.clone(),
                    identity: sh.identity.clone(),
                    commit: cand.sha.clone(),
                    recorded_at: now(),
                    report: report.clone(),
                },
            )?;
            return Ok(report);
        }
        last = report.signature.unwrap_or_default();
        sh.progress.line(&format!(
            "{short}: infrastructure error (attempt {attempt}/{INFRA_RETRIES}): {last}"
        ));
        sh.store.journal(&serde_json::json!({
            "event": "infra_error", "at": now(), "sha": cand.sha, "attempt": attempt, "message": last,
        }))?;
    }
    Err(DriverError::Infra {
        sha: cand.sha.clone(),
        attempts: INFRA_RETRIES,
        message: last,
        log: log.display().to_string(),
    })
}
