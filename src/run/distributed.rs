//! `bisect --plan-only`: what to probe next, given only what the result store holds.
//!
//! This is the seam for distributed multisection (a GitHub Actions matrix over self-hosted
//! runners): a planning job replays the merged store into a `Session` and prints the next wave
//! as JSON; the matrix runs one entry per runner; each runner uploads its store's
//! `results/<key>/run-NNNN.json` files as an artifact; merging is copying those files into one
//! store (the plan assigns every entry its own `run_index`, so two runners never write the same
//! file); then plan again, until the plan says `done`. A final ordinary `bisect` over the
//! merged store, with the same `--jobs K` as the plans (the search's waves depend on K),
//! executes nothing and writes the report.
//!
//! A runner executes one entry with `bisect --probe SHA --run-index R` (same flags otherwise,
//! its own `--work-dir`), which stores exactly `results/<key>/run-R.json`.
//!
//! Replay records every stored run of a candidate at once, so with more stored runs than the
//! policy needs (e.g. a store filled by `--confidence` and replanned without it) a decision can
//! differ from the driver's, which consumes stored runs one at a time.

use crate::core::evidence::Policy;
use crate::core::flaky::session::{Action, Session};
use crate::core::plan::Plan;
use crate::core::progress::{Event, Sink};
use crate::error::CliError;
use crate::probe::Prober;
use crate::run::slots::{DriverError, Noting, Probing, RunSpec, Slot};
use crate::run::store::{Store, StoreKey};
use serde_json::json;

/// The next wave for `--jobs K` slots as JSON (`done: false` with `probes`, or `done: true`
/// with the conclusion and the first bad commit when there is one).
pub fn plan_next(
    plan: &Plan,
    prober: &dyn Prober,
    store: &Store,
    policy: Policy,
) -> anyhow::Result<serde_json::Value> {
    let r = &plan.range;
    let keys = r.candidates.iter().map(|c| c.depth).collect();
    let mut s = Session::new(keys, plan.endpoints, policy);
    let identity = prober.identity();
    let mut stored = Vec::with_capacity(r.candidates.len());
    for (i, c) in r.candidates.iter().enumerate() {
        let runs = store
            .load(&StoreKey::new(&c.tree, &identity))
            .map_err(|e| CliError::infra(e.to_string()))?;
        stored.push(runs.len());
        for run in runs {
            let v = plan
                .predicate
                .judge(run.report.outcome, &run.report.output_tail);
            s.record(i, v);
        }
    }
    let total: usize = stored.iter().sum();
    Ok(match s.next(plan.jobs) {
        Action::Run(ix) => {
            let mut next = stored.clone();
            let probes: Vec<serde_json::Value> = ix
                .into_iter()
                .map(|i| {
                    let c = &r.candidates[i];
                    let run_index = next[i];
                    next[i] += 1;
                    json!({"candidate": i, "sha": c.sha, "tree": c.tree, "run_index": run_index})
                })
                .collect();
            json!({"done": false, "runs_stored": total, "probes": probes})
        }
        Action::Finished => {
            let conclusion = s.conclusion().cloned();
            let first_bad = conclusion
                .as_ref()
                .and_then(|c| c.culprit())
                .map(|i| r.candidates[i].sha.clone());
            json!({"done": true, "runs_stored": total, "conclusion": conclusion, "first_bad": first_bad})
        }
    })
}

/// The slot `--probe` runs in (one per prober and repository: a runner probes one commit).
pub const PLANNED_SLOT: &str = "planned";

/// `--probe SHA --run-index R`: one run of one planned candidate through the one slot loop,
/// stored under run index R (the driver's numbering), reported as JSON. Its slot is private to
/// planned probes (`planned`), so a runner can also hold a normal bisection, and locked like
/// every slot, so two `--probe`s in one work dir never share a checkout.
pub fn probe_one(
    plan: &Plan,
    prober: &dyn Prober,
    store: &Store,
    sha: &str,
    run_index: Option<usize>,
    events: &dyn Sink,
) -> anyhow::Result<serde_json::Value> {
    let r = &plan.range;
    let cand = r
        .candidates
        .iter()
        .find(|c| c.members.iter().any(|m| m.starts_with(sha)) && sha.len() >= 7)
        .ok_or_else(|| {
            CliError::usage(format!(
                "--probe {sha}: not a commit of the range {}..{} (use a sha from --plan-only)",
                &r.good[..10.min(r.good.len())],
                &r.bad[..10.min(r.bad.len())]
            ))
        })?;
    let fail = |e: DriverError| match e {
        DriverError::Git(g) if g.is_usage() => CliError::usage(g.to_string()),
        e => CliError::infra(e.to_string()),
    };
    let probing = Probing {
        scope: r.spec.path.clone(),
        // Planned probes of one wave may run side by side on this host: their tests take turns.
        turns_in: Some(plan.work_dir.clone()),
        ..Probing::new(prober, store)
    };
    let index = run_index.unwrap_or_else(|| probing.next_index(&cand.tree));
    let dir = Slot::dir(
        &plan.work_dir,
        &plan.repo_path,
        &probing.slot_identity,
        PLANNED_SLOT,
    );
    let slot = Slot::lock(dir).map_err(fail)?;
    let repo = crate::run::git::open(&plan.repo_path).map_err(|e| fail(e.into()))?;
    let name = format!(
        "setrows-planned-{}-{index}-{}",
        crate::core::range::short_sha(&cand.sha),
        std::process::id()
    );
    let run = RunSpec {
        repo: &repo,
        sha: &cand.sha,
        tree: &cand.tree,
        index,
        name: &name,
        build: None,
        log: None,
    };
    // A runner's log says where its one probe is (a killed runner's last line names the phase).
    let short = crate::core::range::short_sha(&cand.sha);
    // Each phase once (the build's own count is not a new phase here).
    let last = std::sync::Mutex::new("");
    let phase = |ph: crate::probe::Phase| {
        let name = ph.as_str();
        if last
            .lock()
            .is_ok_and(|mut l| std::mem::replace(&mut *l, name) != name)
        {
            events.emit(Event::Note {
                text: format!("probe {short}: {name}"),
            });
        }
    };
    let hooks = Noting::new(events, format!("probe {short}"), phase);
    let report = probing.run_in(&slot, &run, &hooks.hooks()).map_err(fail)?;
    let verdict = plan.predicate.judge(report.outcome, &report.output_tail);
    let key = StoreKey::new(&cand.tree, &probing.identity);
    Ok(json!({
        "sha": cand.sha, "run_index": index, "outcome": report.outcome,
        "verdict": verdict, "result_dir": store.dir(&key),
    }))
}
