//! `bisect --plan-only`: what to probe next, given only what the result store holds.
//!
//! This is the seam for distributed multisection (a GitHub Actions matrix over self-hosted
//! runners): a planning job replays the merged store into a `Session` and prints the next wave
//! as JSON; the matrix runs one entry per runner; each runner uploads its store's
//! `results/<key>/run-NNNN.json` files as an artifact; merging is copying those files into one
//! store (the plan assigns every entry its own `run_index`, so two runners never write the same
//! file); then plan again, until the plan says `done`. A final ordinary `bisect` over the
//! merged store executes nothing and writes the report.
//!
//! Replay records every stored run of a candidate at once, so with more stored runs than the
//! policy needs (e.g. a store filled by `--confidence` and replanned without it) a decision can
//! differ from the driver's, which consumes stored runs one at a time.

use super::session::{Action, Mode, Session};
use super::Beta;
use crate::bisect::{BisectArgs, Prepared};
use crate::error::CliError;
use crate::store::StoreKey;
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
                Some(super::session::Conclusion::Found { culprit, .. }) => {
                    Some(r.candidates[*culprit].sha.clone())
                }
                _ => None,
            };
            json!({"done": true, "runs_stored": total, "conclusion": conclusion, "first_bad": first_bad})
        }
    })
}
