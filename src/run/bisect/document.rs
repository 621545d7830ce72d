//! THE result document of a finished bisection, assembled in one place: the driver's outcome
//! as `core::result::BisectResult`, then what the run adds to it (flaky assessment,
//! configuration, reproducer, endpoint advice, validation, the stored runs behind the probes,
//! the stamp). Rendering and writing it are the command line's (`report::bisect`).

use super::Prepared;
use crate::core::evidence::Policy;
use crate::core::range::{Candidate, Range};
use crate::core::result::{
    BisectProbe, BisectRange, BisectRecord, BisectResult, CandidateClass, Conclusion, Kind,
};
use crate::error::{CliError, Exit};

/// The document of `outcome`, complete: validation runs here (`--validate`), and the result is
/// stamped and saved for `show` before it is returned.
pub(super) fn assemble(
    p: &Prepared,
    outcome: &BisectRecord,
    events: &dyn crate::core::progress::Sink,
) -> anyhow::Result<BisectResult> {
    let r = &p.plan.range;
    let mut result = of_outcome(r, outcome, p);
    // Each kind's own section, read back from its probes' logs (test-backend-ops' cases).
    crate::probe::kinds::add_sections(&mut result, &p.probe);
    if let Policy::Confidence { confidence, .. } = p.runs {
        result.flaky = outcome.assess(r.candidates.len(), confidence);
    }
    result.configuration = p.configuration.clone();
    result.reproducer = p.reproducer.clone();
    result.endpoint = result.endpoint_advice();
    if let Some(a) = &result.flaky {
        events.emit(crate::core::progress::Event::Note { text: a.line() });
    }
    result.validation = crate::run::validate::after_bisect(
        &p.plan,
        p.prober.as_ref(),
        &p.store,
        outcome,
        p.validate,
        p.backend.map(|b| b.as_str()),
        events,
    )?;
    // The stored runs behind the probes: what --resume-from-issue seeds a fresh store from.
    let trees = outcome
        .probes
        .iter()
        .filter_map(|pr| r.candidates.get(pr.candidate).map(|c| c.tree.as_str()));
    let keep_text = p.plan.predicate.signature.is_some();
    result.store_runs = Some(
        crate::run::store::store_runs(&p.store, trees, &p.prober.identity(), keep_text)
            .map_err(|e| CliError::infra(e.to_string()))?,
    );
    if result.validation.as_ref().is_some_and(|v| !v.confirmed) {
        result.exit_code = Exit::Inconclusive.code();
    }
    // argv, tool version, the repository's web URL, provenance; saved for `show` and `log`.
    crate::run::stamp::finish_bisect(&mut result, &p.store, &p.plan.repo_path, &p.id)
        .map_err(|e| CliError::infra(e.to_string()))?;
    Ok(result)
}

fn suspects<'a>(range: &'a Range, c: &Conclusion) -> Vec<&'a Candidate> {
    match c {
        Conclusion::Found { index } => vec![&range.candidates[*index]],
        Conclusion::Ambiguous { indices } => {
            indices.iter().map(|&i| &range.candidates[i]).collect()
        }
        Conclusion::BadEndpoint { .. } => vec![],
    }
}

/// The driver's outcome as a document. The prober's reproduce snippet (`{sha}` for the commit
/// to probe) is filled in with the commit the answer hinges on.
fn of_outcome(range: &Range, o: &BisectRecord, p: &Prepared) -> BisectResult {
    let sus = suspects(range, &o.conclusion);
    let mut r = BisectResult {
        schema: Kind::Bisect.tag(),
        first_bad: match &o.conclusion {
            Conclusion::Found { index } => Some(range.candidates[*index].sha.clone()),
            _ => None,
        },
        term: p.plan.predicate.regress.culprit_term().into(),
        conclusion: o.conclusion.clone(),
        exit_code: Exit::of_search(matches!(o.conclusion, Conclusion::Found { .. })).code(),
        candidates: sus.iter().map(|c| c.sha.clone()).collect(),
        candidate_classes: sus
            .iter()
            .map(|c| CandidateClass {
                sha: c.sha.clone(),
                tree: c.tree.clone(),
                members: c.members.clone(),
            })
            .collect(),
        range: BisectRange {
            good: range.good.clone(),
            bad: range.bad.clone(),
            first_parent: range.spec.first_parent,
            path: range.spec.path.clone(),
            commits: range.commits,
            candidates: range.candidates.len(),
        },
        steps: o.steps,
        executed: o.executed,
        probes: o
            .probes
            .iter()
            .map(|p| BisectProbe {
                sha: p.sha.clone(),
                outcome: p.outcome,
                verdict: p.verdict,
                duration_s: p.duration_s,
                log: p.log.clone(),
                signature: p.signature.clone(),
                cached: p.cached,
                candidate: Some(p.candidate),
                ccache: p.ccache,
                reused_from: p.reused_from.clone(),
            })
            .collect(),
        predicate: o.predicate.clone(),
        policy: o.policy.clone(),
        elapsed_s: o.elapsed_s,
        answer_s: o.answer_s,
        commits: o.commits.clone(),
        reproduce: None,
        flaky: None,
        validation: None,
        store_runs: None,
        configuration: None,
        budget: o.budget.clone(),
        grouping: o.grouping.clone(),
        reproducer: None,
        endpoint: None,
        backend_ops: None,
        applied: p.applied.clone(),
        invocation: Default::default(),
    };
    if let (Some(tpl), Some(sha)) = (p.reproduce.as_deref(), r.target().map(str::to_string)) {
        r.reproduce = Some(tpl.replace("{sha}", &sha));
    }
    r
}
