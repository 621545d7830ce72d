//! `--dry-run`: what a bisection would do, in English, from the same preparation a real run
//! uses (`run::bisect::prepare` in `Mode::DryRun`, which makes nothing) and the plan run
//! assembles from it (`run::bisect::plan_document`: the promises of the search, the store
//! hits, the identity), so that what it promises is what a run does. Rendering only.

use crate::core::search::EndpointCheck;
use crate::error::CliError;
use crate::run::bisect::{PlanFacts, Planned, Prepared, Where};
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
                    "ccache: a cache of this run's own, removed when it ends (your own is not used)"
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
                "ccache: a cache of this run's own, over {} read-only{}",
                ccache_dir.display(),
                if crate::probe::ccache::fills_shared() {
                    " (this run fills it: SETROWS_CCACHE_FILL=1)"
                } else {
                    ""
                }
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
            crate::core::shell::line(args)
        );
    }
}

/// `--dry-run`: what the bisection would do, in the words people read: the plan run assembled
/// (`run::bisect::PlanFacts`, whose document is the `--dry-run --json` one) and the resolved
/// facts of the same preparation a real run uses.
pub(super) fn dry_run(
    p: &Prepared,
    facts: &PlanFacts,
    github: &crate::cli::report::BisectPostArgs,
) -> anyhow::Result<String> {
    let r = &p.plan.range;
    let n = r.candidates.len();
    let doc = &facts.document;
    let planned = p
        .planned
        .as_ref()
        .ok_or_else(|| CliError::infra("a dry run without a plan"))?;
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
    let _ = writeln!(
        out,
        "expected probes: up to {} with {} slot(s): {}{}",
        doc.expected_probes,
        p.plan.jobs,
        estimate(facts, n, p.plan.jobs, p.plan.endpoints),
        if confidence {
            "; --confidence re-runs passes, so more"
        } else {
            ""
        }
    );
    let _ = writeln!(out, "slots: {}", p.plan.jobs_why);
    let _ = writeln!(out, "endpoints: {}", doc.endpoints);
    if planned.records_good {
        let _ = writeln!(
            out,
            "--compare-good: a run first probes --good {} to record its logits (one probe more), then compares every probe's with them",
            crate::core::range::short_sha(&r.good)
        );
    }
    let build_only = p.plan.predicate.regress.build_only();
    let _ = writeln!(
        out,
        "{}",
        lying_bad(facts, p.plan.jobs, p.plan.endpoints, build_only)
    );
    match (&facts.unknown, doc.stored) {
        (Some(why), _) => {
            let _ = writeln!(out, "already in the store: not counted ({why})");
        }
        (None, stored) => {
            let stored = stored.unwrap_or(0);
            let _ = writeln!(out, "already in the store: {stored} of {n} candidates");
        }
    }
    if let Some(issue) = github.resume_from_issue.as_deref() {
        let issue = if issue.is_empty() {
            "the --post-to issue"
        } else {
            issue
        };
        // Said in the plan: a resume that will never seed anything is found at 2 a.m.
        // otherwise, after the first hour of probes that a signed state would have saved.
        let check = match crate::github::options::state_keys() {
            Ok((_, Some(_))) => "if its state is signed with this repository's key".to_string(),
            Ok((_, None)) => format!(
                "but {} is not set, so no state can be checked and the run probes from its local store",
                crate::github::signing::PUBLIC_KEY_ENV
            ),
            Err(e) => format!("but {e}"),
        };
        let _ = writeln!(
            out,
            "resume: a run first seeds the store from {issue}'s comment, {check} (a dry run reads and writes nothing there)"
        );
    }
    let _ = writeln!(out, "predicate: {}", p.plan.predicate.describe());
    for a in &p.applied {
        let _ = writeln!(
            out,
            "applied before every build: {} (a tree it does not apply to is a skip)",
            crate::core::applied::describe_info(a)
        );
    }
    if build_only {
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
    // A build question runs no reproducer: the plan names only what runs.
    if let Some(r) = p.reproducer.as_ref().filter(|_| !build_only) {
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
    if let Some(key) = &doc.store_key {
        let _ = writeln!(
            out,
            "store key of these probes: {key} (results stored under it are reused)"
        );
    }
    if let Some(hint) = &p.reproduce {
        let _ = writeln!(out, "one probe, by hand:");
        for line in hint.replace("{sha}", "SHA").lines() {
            let _ = writeln!(out, "  {line}");
        }
    }
    Ok(out)
}

/// Where the worst-case probe count comes from, in words. The endpoints are not a flat "+2":
/// with one slot the first midpoint goes first and `--bad` is built only when it does not
/// reproduce (or the answer touches it), with several slots as with one (the first wave holds
/// midpoints); with --lazy-endpoints only the endpoint next to the answer is tested. With one slot and
/// Ninja builds the search may cut off-centre to skip a rebuild (`core::search::budget`): one
/// midpoint more, never past git's fewest on the commits.
fn estimate(facts: &PlanFacts, n: usize, jobs: usize, ends: EndpointCheck) -> String {
    let w = &facts.worst;
    if w.midpoints == 0 {
        return "the endpoints, no commit between them".to_string();
    }
    let how = if jobs <= 1 {
        format!("ceil(log2 {})", n - 1)
    } else {
        format!("{} wave(s) of up to {jobs}", w.waves)
    };
    let why = if ends == EndpointCheck::Lazy {
        "plus the endpoint next to the answer (--lazy-endpoints)"
    } else {
        "plus --bad once the walk toward it makes that worth a build, or the endpoint next to \
         the answer"
    };
    let mids = w.midpoints;
    if w.off_centre {
        format!(
            "{mids} midpoint(s), {how}, {why}; one more where cutting off-centre saves a \
             rebuild (never more than git's {})",
            facts.git_fewest
        )
    } else {
        format!("{mids} midpoint(s), {how}, {why}")
    }
}

/// The worst case of a `--bad` that does not show the new behaviour: every midpoint is then
/// old, and the search walks toward `--bad` until it builds it (`core::search::endpoint`).
/// With equal probe costs that point is exact (the real search, replayed); with build costs it
/// comes earlier when `--bad` is an incremental build, never later than the whole walk, which
/// the estimate bounds.
/// A build question refuses `--confidence` (a rebuild answers the same), so its plan does not
/// offer it.
fn lying_bad(facts: &PlanFacts, jobs: usize, ends: EndpointCheck, build_only: bool) -> String {
    let lazy = ends == EndpointCheck::Lazy;
    let probes = facts.lying_bad;
    format!(
        "if --bad {}: reported after {probes} probe(s) when builds cost alike, \
         at most {} (the walk all the way to it){}",
        if build_only {
            "builds"
        } else {
            "does not reproduce"
        },
        facts.worst.total.max(probes),
        if lazy || jobs > 1 || build_only {
            ""
        } else {
            "; --confidence tests it first"
        }
    )
}
