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

use crate::cli::bisect::{BisectArgs, Prepared};
use crate::core::flaky::session::{self, Action, Mode, Session};
use crate::core::flaky::Beta;
use crate::core::outcome::Outcome;
use crate::error::CliError;
use crate::run::store::{StoreKey, StoredRun};
use serde_json::json;

/// The next wave for `--jobs K` slots as JSON (`done: false` with `probes`, or `done: true`
/// with the conclusion and the first bad commit when there is one).
pub fn plan_next(args: &BisectArgs, p: &Prepared) -> anyhow::Result<serde_json::Value> {
    let r = &p.plan.range;
    let mode = match (args.confidence, args.repeat) {
        (Some(c), _) => Mode::Adaptive {
            confidence: c,
            prior: Beta::UNIFORM,
        },
        (None, Some(n)) => Mode::Repeat(n.max(1)),
        (None, None) => Mode::Repeat(1),
    };
    let keys = r.candidates.iter().map(|c| c.depth).collect();
    let mut s = Session::new(keys, p.plan.endpoints, mode, args.max_runs);
    let identity = p.prober.identity();
    let mut stored = Vec::with_capacity(r.candidates.len());
    for (i, c) in r.candidates.iter().enumerate() {
        let runs = p
            .store
            .load(&StoreKey::new(&c.tree, &identity))
            .map_err(|e| CliError::infra(e.to_string()))?;
        stored.push(runs.len());
        for run in runs {
            let v = p
                .plan
                .predicate
                .judge(run.report.outcome, &run.report.output_tail);
            s.record(i, v);
        }
    }
    let total: usize = stored.iter().sum();
    Ok(match s.next(p.plan.jobs) {
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
            let first_bad = match &conclusion {
                Some(session::Conclusion::Found { culprit, .. }) => {
                    Some(r.candidates[*culprit].sha.clone())
                }
                _ => None,
            };
            json!({"done": true, "runs_stored": total, "conclusion": conclusion, "first_bad": first_bad})
        }
    })
}

/// Attempts when our own machinery fails, as in the driver.
const INFRA_ATTEMPTS: u32 = 3;

/// `--probe SHA --run-index R`: one run of one planned candidate, stored under run index R
/// (the driver's numbering), reported as JSON. The checkout and build dir are private to
/// planned probes (`<work>/checkouts/planned`), so a runner can also hold a normal bisection.
pub fn probe_one(
    p: &Prepared,
    sha: &str,
    run_index: Option<usize>,
) -> anyhow::Result<serde_json::Value> {
    let r = &p.plan.range;
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
    let identity = p.prober.identity();
    let key = StoreKey::new(&cand.tree, &identity);
    let infra = |e: &dyn std::fmt::Display| CliError::infra(e.to_string());
    let index = match run_index {
        Some(i) => i,
        None => p.store.load(&key).map_err(|e| infra(&e))?.len(),
    };
    let dir = p.plan.work_dir.join("checkouts").join("planned");
    let src = dir.join("src");
    let build = dir.join("build");
    let repo = crate::run::git::open(&p.plan.repo_path).map_err(crate::cli::bisect::git_error)?;
    let log = p.store.log_path(&key, index);
    let mut last = String::new();
    for _ in 0..INFRA_ATTEMPTS {
        crate::run::git::Checkout::new(src.clone(), dir.join("checkout.state"))
            .checkout(&repo, &cand.sha)
            .map_err(crate::cli::bisect::git_error)?;
        let name = format!(
            "setrows-planned-{}-{index}-{}",
            &cand.sha[..10],
            std::process::id()
        );
        let req = crate::probe::ProbeRequest {
            commit: &cand.sha,
            checkout: &src,
            build_dir: &build,
            log_path: &log,
            run_name: &name,
        };
        let report = p.prober.probe(&req, &|_| {});
        if report.outcome == Outcome::InfraError {
            last = report.signature.unwrap_or_default();
            continue;
        }
        let verdict = p.plan.predicate.judge(report.outcome, &report.output_tail);
        let run = StoredRun {
            tree: cand.tree.clone(),
            identity: identity.clone(),
            commit: cand.sha.clone(),
            recorded_at: chrono::Utc::now().to_rfc3339(),
            report,
        };
        p.store.save(&key, index, &run).map_err(|e| infra(&e))?;
        return Ok(json!({
            "sha": cand.sha, "run_index": index, "outcome": run.report.outcome,
            "verdict": verdict, "result_dir": p.store.root().join("results").join(&key.0),
        }));
    }
    Err(CliError::infra(format!(
        "infrastructure failure probing {} ({INFRA_ATTEMPTS} attempts): {last}; log: {}",
        cand.sha,
        log.display()
    )))
}
