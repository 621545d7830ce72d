//! THE plan of a dry run, assembled in one place beside the result document (`document.rs`):
//! the `--dry-run --json` document (`core::result::PlanDocument`) and what its text says
//! beyond it. What the search promises (the worst case, a lying `--bad`, which endpoints are
//! tested) and what the store already holds are worked out here, in run, from the same
//! preparation a real run uses; `cli::bisect::dry_run` only says them in English.

use super::{Planned, Prepared, Where};
use crate::core::result::{BisectRange, PlanDocument, PlannedReproducer};
use crate::core::search::{simulate, EndpointCheck};
use crate::error::CliError;

/// A dry run's answer: the document, and the lines of its text that the document holds only
/// as figures.
pub struct PlanFacts {
    pub document: PlanDocument,
    /// How the worst-case probe count (`document.expected_probes`) comes about, in words.
    pub estimate: String,
    /// The worst case of a `--bad` that does not show the new behaviour, in words.
    pub lying_bad: String,
    /// Why stored results cannot be counted before a run starts (`None`: they are, in
    /// `document.stored`).
    pub unknown: Option<String>,
}

/// The plan of `p`, prepared in `Mode::DryRun`: nothing is made; the store is only read.
pub fn facts(p: &Prepared) -> anyhow::Result<PlanFacts> {
    let r = &p.plan.range;
    let n = r.candidates.len();
    let identity = p.prober.identity();
    let planned = p
        .planned
        .as_ref()
        .ok_or_else(|| CliError::infra("a dry run without a plan"))?;
    let unknown = unknown_key(planned);
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
    let e = estimate(n, p.plan.jobs, p.plan.endpoints, r.commits);
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
        expected_probes: e.total,
        endpoints: endpoints(p),
        stored: unknown.is_none().then_some(stored),
        predicate: p.plan.predicate.describe(),
        build_only: p.plan.predicate.regress.build_only(),
        configuration: p.configuration.clone(),
        reproducer: p.reproducer.as_ref().map(PlannedReproducer::of),
        replaced: planned.replaced.clone(),
        work_dir: p.plan.work_dir.clone(),
        image: planned.image().map(str::to_string),
        build: planned.build.clone(),
        memory: planned.memory.clone(),
        store_key: unknown
            .is_none()
            .then(|| crate::run::store::bisect_id(&[&identity])),
    };
    Ok(PlanFacts {
        lying_bad: lying_bad(n, p.plan.jobs, p.plan.endpoints, &e),
        estimate: e.detail,
        unknown,
        document,
    })
}

/// Which endpoints a run tests, in words (a user must know when neither will be).
fn endpoints(p: &Prepared) -> String {
    let confidence = matches!(p.runs, crate::core::evidence::Policy::Confidence { .. });
    match (p.plan.endpoints, p.plan.jobs) {
        (EndpointCheck::Lazy, _) => "neither is tested up front; only the one next to the answer, when the answer touches it (--lazy-endpoints)".into(),
        _ if confidence => "--bad is tested first (--confidence); --good when the answer touches it".into(),
        (EndpointCheck::First, 1) => "--bad when the walk toward it makes that worth a build or the answer touches it, --good only when the answer touches it; an answer whose commit and parent were both probed tests neither".into(),
        (EndpointCheck::First, _) => "--good and --bad are both tested, in the first wave".into(),
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

/// The worst-case probe count a dry run promises, and where it comes from.
struct Estimate {
    total: usize,
    detail: String,
}

/// Mirrors `EndpointCheck` in core::search: the endpoints are not a flat "+2". With one slot
/// the first midpoint goes first and `--bad` is built only when it does not reproduce (or the
/// answer touches it); with a free slot both endpoints share the first wave; with
/// --lazy-endpoints only the endpoint next to the answer is tested. A user deciding whether a
/// range is worth a night of builds needs the bound the search keeps, not a rough guess.
/// With one slot and Ninja builds the search may cut off-centre to skip a rebuild
/// (`core::search::budget`): one midpoint more, never past git's fewest on `commits`.
fn estimate(n: usize, jobs: usize, ends: EndpointCheck, commits: usize) -> Estimate {
    let w = simulate::worst_case(n, jobs, ends, commits);
    let lazy = ends == EndpointCheck::Lazy;
    if w.midpoints == 0 {
        return Estimate {
            total: w.total,
            detail: "the endpoints, no commit between them".to_string(),
        };
    }
    let how = if jobs <= 1 {
        format!("ceil(log2 {})", n - 1)
    } else {
        format!("{} wave(s) of up to {jobs}", w.waves)
    };
    let why = match (lazy, w.endpoints) {
        (true, _) => "plus the endpoint next to the answer (--lazy-endpoints)",
        (false, 1) => {
            "plus --bad once the walk toward it makes that worth a build, or the endpoint \
             next to the answer"
        }
        (false, _) => "plus --good and --bad in the first wave",
    };
    let mids = w.midpoints;
    let detail = if w.off_centre {
        format!(
            "{mids} midpoint(s), {how}, {why}; one more where cutting off-centre saves a \
             rebuild (never more than git's {})",
            crate::core::search::git_fewest(commits)
        )
    } else {
        format!("{mids} midpoint(s), {how}, {why}")
    };
    Estimate {
        total: w.total,
        detail,
    }
}

/// The worst case of a `--bad` that does not show the new behaviour: every midpoint is then
/// old, and the search walks toward `--bad` until it builds it (`core::search::endpoint`).
/// With equal probe costs that point is exact (the real search, replayed); with build costs it
/// comes earlier when `--bad` is an incremental build, never later than the whole walk, which
/// `estimate` bounds.
fn lying_bad(n: usize, jobs: usize, ends: EndpointCheck, e: &Estimate) -> String {
    let lazy = ends == EndpointCheck::Lazy;
    let keys = (0..n as u64).collect();
    let r = simulate::replay(keys, ends, jobs.max(1), simulate::lying_bad);
    let probes = r.probes().len();
    format!(
        "if --bad does not reproduce: reported after {probes} probe(s) when builds cost alike, \
         at most {} (the walk all the way to it){}",
        e.total.max(probes),
        if lazy || jobs > 1 {
            ""
        } else {
            "; --confidence tests it first"
        }
    )
}

#[cfg(test)]
mod tests;
