//! `--dry-run`: what a bisection would do, in English, from the same preparation a real run
//! uses (`run::bisect::prepare` in `Mode::DryRun`, which makes nothing), so that what it
//! promises (candidates, probes, store hits, identity) is what a run does.

use crate::core::result::{BisectRange, PlanDocument, PlannedReproducer};
use crate::core::search::{simulate, EndpointCheck};
use crate::error::CliError;
use crate::run::bisect::{Planned, Prepared, Where};
use std::fmt::Write;

/// Where the steps would run, ccache, the toolchain and the build, in words.
fn place_lines(planned: &Planned, out: &mut String) {
    match &planned.place {
        Where::Host { ccache } => {
            let _ = writeln!(out, "runs: on the host");
            let _ = writeln!(
                out,
                "{}",
                if *ccache {
                    "ccache: your own cache (CCACHE_DIR, else ccache's default)"
                } else {
                    "ccache: not installed here, builds run without it"
                }
            );
        }
        Where::NoEngine { image } => {
            let _ = writeln!(
                out,
                "runs: in image {image}, but no container engine answers here; a run would stop before its first probe (install podman or docker)"
            );
        }
        Where::Image {
            image,
            engine,
            digest,
            ccache_dir,
        } => {
            let _ = match digest {
                Some(d) => writeln!(
                    out,
                    "runs: in image {image} with {engine} (present, {})",
                    d.chars().take(19).collect::<String>()
                ),
                None => writeln!(
                    out,
                    "runs: in image {image} with {engine}: the image is missing here; a run would stop before its first probe (build it: containers/README.md; it is never pulled)"
                ),
            };
            let _ = writeln!(
                out,
                "ccache: {} (made when a run starts)",
                ccache_dir.display()
            );
        }
    }
    // Without an engine there is nowhere to ask.
    if planned.asks_toolchain && !matches!(planned.place, Where::NoEngine { .. }) {
        let _ = writeln!(
            out,
            "toolchain: a run asks hipconfig where the steps run for HIP's clang and HIP_PATH"
        );
    }
    if let Some(args) = &planned.build {
        let _ = writeln!(
            out,
            "build: cmake {} (spelled per probed tree)",
            crate::probe::exec::shell_words(args)
        );
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

/// Which endpoints a run tests, in words (a user must know when neither will be).
fn endpoints_line(p: &Prepared) -> String {
    let confidence = matches!(p.runs, crate::core::evidence::Policy::Confidence { .. });
    match (p.plan.endpoints, p.plan.jobs) {
        (EndpointCheck::Lazy, _) => "endpoints: neither is tested up front; only the one next to the answer, when the answer touches it (--lazy-endpoints)".into(),
        _ if confidence => "endpoints: --bad is tested first (--confidence); --good when the answer touches it".into(),
        (EndpointCheck::First, 1) => "endpoints: --bad when the walk toward it makes that worth a build or the answer touches it, --good only when the answer touches it; an answer whose commit and parent were both probed tests neither".into(),
        (EndpointCheck::First, _) => "endpoints: --good and --bad are both tested, in the first wave".into(),
    }
}

/// `--dry-run`: what the bisection would do, from the same resolution a real run uses: the
/// text people read and the same facts as JSON (`--dry-run --json FILE`: `core::result::PlanDocument`).
pub(super) fn dry_run(
    p: &Prepared,
    github: &crate::cli::report::BisectPostArgs,
) -> anyhow::Result<(String, PlanDocument)> {
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
    let confidence = matches!(p.runs, crate::core::evidence::Policy::Confidence { .. });
    let mut out = String::new();
    // What the user's arguments replaced comes first: it changes what every probe runs.
    for line in &planned.replaced {
        let _ = writeln!(out, "{line}");
    }
    let _ = writeln!(out, "range: {}..{}", r.good, r.bad);
    let _ = writeln!(
        out,
        "commits: {} ({}), candidates: {n} (commits with identical tested trees merged{})",
        r.commits,
        if r.spec.first_parent {
            "first-parent"
        } else {
            "full ancestry"
        },
        r.spec
            .path
            .as_deref()
            .map(|p| format!(", tested tree: {p}/"))
            .unwrap_or_default()
    );
    let e = estimate(n, p.plan.jobs, p.plan.endpoints, r.commits);
    let _ = writeln!(
        out,
        "expected probes: up to {} with {} slot(s): {}{}",
        e.total,
        p.plan.jobs,
        e.detail,
        if confidence {
            "; --confidence re-runs passes, so more"
        } else {
            ""
        }
    );
    let _ = writeln!(out, "{}", endpoints_line(p));
    if planned.records_good {
        let _ = writeln!(
            out,
            "--compare-good: a run first probes --good {} to record its logits (one probe more), then compares every probe's with them",
            crate::core::range::short_sha(&r.good)
        );
    }
    let _ = writeln!(out, "{}", lying_bad(n, p.plan.jobs, p.plan.endpoints, &e));
    match &unknown {
        None => {
            let _ = writeln!(out, "already in the store: {stored} of {n} candidates");
        }
        Some(why) => {
            let _ = writeln!(out, "already in the store: not counted ({why})");
        }
    }
    if let Some(issue) = github.resume_from_issue.as_deref() {
        let issue = if issue.is_empty() {
            "the --post-to issue"
        } else {
            issue
        };
        let _ = writeln!(
            out,
            "resume: a run first seeds the store from {issue}'s comment (a dry run reads and writes nothing there)"
        );
    }
    let _ = writeln!(out, "predicate: {}", p.plan.predicate.describe());
    if p.plan.predicate.regress.build_only() {
        let _ = writeln!(
            out,
            "build only: each probe stops after the build, no test runs (new = build_failed, old = built; untestable is a skip)"
        );
    }
    if let Some(c) = &p.configuration {
        let origin = match &c.id {
            Some(id) => format!("{id} from {}", c.source),
            None => "set by flags".into(),
        };
        let place = c
            .image
            .as_deref()
            .map_or("on the host".into(), |i| format!("in image {i}"));
        let _ = writeln!(out, "configuration: {origin}, {place}");
        let _ = writeln!(out, "  settings: {}", c.settings.join(" "));
        for o in &c.overrides {
            let _ = writeln!(out, "  overridden by flag: {o}");
        }
    }
    if let Some(r) = &p.reproducer {
        let _ = writeln!(out, "reproducer: {} ({})", r.command(), r.extent());
        let _ = writeln!(out, "  arguments: {}", r.source);
        if r.is_decode() {
            let _ = writeln!(
                out,
                "  model: {} is written by the tool into the work dir (a tiny random-weight llama GGUF, fixed seed; nothing is downloaded)",
                crate::core::result::DECODE_MODEL
            );
        }
    }
    let _ = writeln!(out, "work dir: {}", p.plan.work_dir.display());
    place_lines(planned, &mut out);
    if let Some(m) = &planned.memory {
        let _ = writeln!(out, "{m}");
    }
    if unknown.is_none() {
        let _ = writeln!(
            out,
            "store key of these probes: {} (results stored under it are reused)",
            crate::run::store::bisect_id(&[&identity])
        );
    }
    if let Some(hint) = &p.reproduce {
        let _ = writeln!(out, "one probe, by hand:");
        for line in hint.replace("{sha}", "SHA").lines() {
            let _ = writeln!(out, "  {line}");
        }
    }
    let json = PlanDocument {
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
        endpoints: endpoints_line(p)
            .trim_start_matches("endpoints: ")
            .to_string(),
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
    Ok((out, json))
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
