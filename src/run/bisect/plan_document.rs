//! THE plan of a dry run, assembled in one place beside the result document (`document.rs`):
//! the `--dry-run --json` document (`core::result::PlanDocument`) and the figures its text
//! says beyond it. What the search promises (the worst case and a lying `--bad`, from
//! `core::search::simulate`; which endpoints are tested) and what the store already holds are
//! worked out here, in run, by `carry_out` from the same preparation a real run uses;
//! `cli::bisect::dry_run` only says them in English.

use super::{Planned, Prepared, Where};
use crate::core::result::{BisectRange, PlanDocument, PlannedReproducer};
use crate::core::search::simulate::{self, WorstCase};
use crate::core::search::EndpointCheck;
use crate::error::CliError;

/// A dry run's answer: the document, and the figures behind its promises.
pub struct PlanFacts {
    pub document: PlanDocument,
    /// Where the worst-case probe count (`document.expected_probes`) comes from.
    pub worst: WorstCase,
    /// Probes until a `--bad` that does not show the new behaviour is reported, when builds
    /// cost alike (never above `worst.total` in words: the walk all the way to it).
    pub lying_bad: usize,
    /// git's fewest probes on the range's commits: the cap of an off-centre midpoint.
    pub git_fewest: usize,
    /// Why stored results cannot be counted before a run starts (`None`: they are, in
    /// `document.stored`).
    pub unknown: Option<String>,
}

/// The plan of `p`, prepared in `Mode::DryRun`: nothing is made; the store is only read.
pub(super) fn facts(p: &Prepared) -> anyhow::Result<PlanFacts> {
    let r = &p.plan.range;
    let n = r.candidates.len();
    let planned = p
        .planned
        .as_ref()
        .ok_or_else(|| CliError::infra("a dry run without a plan"))?;
    let endpoints = endpoints(p);
    let unknown = unknown_key(planned);
    let identity = p.prober.identity();
    let mut stored = 0usize;
    if unknown.is_none() {
        for c in &r.candidates {
            let key = crate::run::store::StoreKey::new(&c.tree, &identity);
            if !p
                .store
                .load(&key)
                .map_err(|e| CliError::infra(e.to_string()))?
                .is_empty()
            {
                stored += 1;
            }
        }
    }
    let store_key = unknown
        .is_none()
        .then(|| crate::run::store::bisect_id(&[&identity]));
    let image = planned.image().map(str::to_string);
    // What the search promises: its worst case, and the walk toward a lying --bad.
    let worst = simulate::worst_case(n, p.plan.jobs, p.plan.endpoints, r.commits);
    let lying_bad = simulate::lying_bad_probes(n, p.plan.jobs, p.plan.endpoints);
    let document = PlanDocument {
        schema: crate::core::result::plan_tag(),
        range: BisectRange {
            good: r.good.clone(),
            bad: r.bad.clone(),
            first_parent: r.spec.first_parent,
            path: r.spec.path.clone(),
            commits: r.commits,
            candidates: n,
        },
        expected_probes: worst.total,
        endpoints,
        stored: unknown.is_none().then_some(stored),
        predicate: p.plan.predicate.describe(),
        build_only: p.plan.predicate.regress.build_only(),
        configuration: p.configuration.clone(),
        reproducer: p.reproducer.as_ref().map(PlannedReproducer::of),
        replaced: planned.replaced.clone(),
        work_dir: p.plan.work_dir.clone(),
        image,
        build: planned.build.clone(),
        memory: planned.memory.clone(),
        store_key,
    };
    Ok(PlanFacts {
        document,
        worst,
        lying_bad,
        git_fewest: crate::core::search::git_fewest(r.commits),
        unknown,
    })
}

/// Which endpoints a run tests, in words (a user must know when neither will be).
fn endpoints(p: &Prepared) -> String {
    let confidence = matches!(p.runs, crate::core::evidence::Policy::Confidence { .. });
    match (p.plan.endpoints, p.plan.jobs) {
        (EndpointCheck::Lazy, _) => "neither is tested up front; only the one next to the answer, when the answer touches it (--lazy-endpoints)".into(),
        _ if confidence => "--bad is tested first (--confidence); --good when the answer touches it".into(),
        (EndpointCheck::First, _) => "--bad when the walk toward it makes that worth a build or the answer touches it, --good only when the answer touches it; an answer whose commit and parent were both probed tests neither".into(),
    }
}

/// Why stored results cannot be counted before a run starts (`None`: they can).
fn unknown_key(planned: &Planned) -> Option<String> {
    if planned.records_good {
        return Some(
            "the key names the --good commit's logits, which a run records first (--compare-good)"
                .into(),
        );
    }
    match &planned.place {
        Where::NoEngine { .. } => {
            Some("the key names the container, and none can start here".into())
        }
        Where::Image { engine, .. } => Some(format!(
            "the key names the {engine} container the run starts"
        )),
        Where::Host { .. } if planned.asks_toolchain => {
            Some("the key names HIP's clang, which hipconfig gives when a run starts".into())
        }
        Where::Host { .. } => None,
    }
}

#[cfg(test)]
mod tests;
