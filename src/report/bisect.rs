//! A bisection's result document (assembled by `run::bisect`), in its one markdown rendering:
//! the terminal, `--report`, the GitHub comment and the job summary all show this.
//!
//! The wording follows the question asked: `first bad commit` for regressions, `first fixed
//! commit` for `--regress success`. When skipped candidates hide the boundary the report says
//! so and lists every commit that may be the answer, rather than guessing.

use super::document::Document;
use super::{code, code_cell, commit_link, compare_link, escape, icon, probe_note, secs};
use crate::core::result::{BisectProbe, BisectResult, Conclusion};
use reproduce::reproduce;

mod reproduce;

/// One line explaining a wrong endpoint: which, what it showed, what ran there and what to
/// try (`None` otherwise).
pub fn endpoint_message(b: &BisectResult) -> Option<String> {
    b.endpoint_advice().map(|a| a.line())
}

fn capitalized(s: &str) -> String {
    let mut cs = s.chars();
    cs.next()
        .map(|f| f.to_uppercase().chain(cs).collect())
        .unwrap_or_default()
}

/// The probe that shows the answer: the last run of the culprit (or of the last suspect, or of
/// the wrong endpoint).
fn answer_probe(b: &BisectResult) -> Option<&BisectProbe> {
    let t = b.target()?;
    b.probes.iter().rev().find(|p| p.sha == t)
}

/// The headline, the culprit with links, signature, confidence, range, configuration.
fn summary(b: &BisectResult) -> String {
    let term = escape::inline(&b.term);
    let url = b.invocation.repo_url.as_deref();
    let link = |sha: &str, n| commit_link(url, sha, n);
    let mut md = String::new();
    let headline = match &b.conclusion {
        Conclusion::Found { .. } => format!("{term} found"),
        Conclusion::Ambiguous { indices } => {
            format!(
                "inconclusive: the {term} is one of {} commits",
                indices.len()
            )
        }
        Conclusion::BadEndpoint { .. } => "stopped: an endpoint does not behave as claimed".into(),
    };
    md.push_str(&format!("## setrows-bisect: {headline}\n\n"));
    match (&b.conclusion, &b.first_bad) {
        (Conclusion::Found { .. }, Some(sha)) => {
            md.push_str(&format!("**{}:** {}", capitalized(&term), link(sha, 12)));
            if let Some(info) = b.info(sha) {
                md.push_str(&format!(" {}\n\n", escape::inline_short(&info.title, 120)));
                md.push_str(&format!(
                    "- commit: {} by {}, {}\n",
                    code(sha),
                    escape::inline_short(&info.author, 80),
                    escape::inline_short(&info.date, 40)
                ));
            } else {
                md.push_str(&format!("\n\n- commit: {}\n", code(sha)));
            }
            let members = b
                .candidate_classes
                .iter()
                .find(|c| &c.sha == sha)
                .map(|c| c.members.as_slice())
                .unwrap_or_default();
            if members.len() > 1 {
                let shown: Vec<String> = members[1..].iter().take(8).map(|m| link(m, 12)).collect();
                md.push_str(&format!(
                    "- {} later commits leave the tested tree unchanged and behave the same: {}\n",
                    members.len() - 1,
                    shown.join(", ")
                ));
            }
        }
        (Conclusion::BadEndpoint { .. }, _) => {
            if let Some(a) = b.endpoint_advice() {
                md.push_str(&escape::inline(&a.problem));
                md.push_str(".\n\n");
                md.push_str(&format!("- ran: {}\n", escape::inline(&a.ran)));
                for n in &a.next {
                    md.push_str(&format!("- try: {}\n", escape::inline(n)));
                }
                md.push('\n');
            }
        }
        _ if b.budget.is_some() => {
            md.push_str(&super::budget::render(b, &term, &link));
        }
        _ => {
            // Under `--regress build` a failed build is a verdict: only untestable ones skip.
            let why = if b.regress() == "build" {
                "untestable"
            } else {
                "build failed or untestable"
            };
            md.push_str(&format!(
                "Commits next to the boundary could not be tested ({why}), so the {term} is one of these {}:\n\n",
                b.candidates.len()
            ));
            for sha in b.candidates.iter().take(40) {
                let info = b.info(sha);
                md.push_str(&format!(
                    "- {} {}{}\n",
                    link(sha, 12),
                    info.map(|i| escape::inline_short(&i.title, 120))
                        .unwrap_or_default(),
                    info.map(|i| format!(
                        " ({}, {})",
                        escape::inline_short(&i.author, 80),
                        escape::inline_short(&i.date, 40)
                    ))
                    .unwrap_or_default()
                ));
            }
            if b.candidates.len() > 40 {
                md.push_str(&format!("- and {} more\n", b.candidates.len() - 40));
            }
            md.push('\n');
        }
    }
    if let Some(p) = answer_probe(b) {
        md.push_str(&format!(
            "- signature: {} {}{}\n",
            icon(p.outcome),
            p.outcome,
            p.signature
                .as_deref()
                .map(|s| format!(": {}", code(s)))
                .unwrap_or_default()
        ));
    }
    md.push_str(&format!("- confidence: {}\n", confidence(b)));
    if let Some(a) = &b.flaky {
        if let Some(c) = &a.confirmation {
            md.push_str(&format!(
                "- confirmation: {}\n",
                escape::inline(&c.line(a.runs, a.requested))
            ));
        }
    }
    let title = |sha: &str| {
        b.info(sha)
            .map(|i| format!(" {}", escape::inline_short(&i.title, 80)))
            .unwrap_or_default()
    };
    let r = &b.range;
    md.push_str(&format!(
        "- range: good {}{} .. bad {}{}{}\n",
        link(&r.good, 12),
        title(&r.good),
        link(&r.bad, 12),
        title(&r.bad),
        compare_link(url, &r.good, &r.bad)
            .map(|l| format!(" ({l})"))
            .unwrap_or_default()
    ));
    md.push_str(&format!(
        "- {} commits ({}), {} candidates after merging commits with identical {}\n",
        r.commits,
        if r.first_parent {
            "first-parent"
        } else {
            "full ancestry path"
        },
        r.candidates,
        r.path
            .as_deref()
            .map(|p| format!("{} trees", code(p)))
            .unwrap_or_else(|| "trees".into())
    ));
    if let Some(line) = grouping(b) {
        md.push_str(&format!("- {line}\n"));
    }
    md.push_str(&format!("- endpoints: {}\n", endpoints_tested(b)));
    md.push_str(&format!(
        "- predicate: {}; policy: {}\n",
        code(&b.predicate),
        escape::inline_short(&b.policy, 80)
    ));
    if !b.applied.is_empty() {
        let names: Vec<String> = b.applied.iter().map(|a| code(&a.given)).collect();
        md.push_str(&format!(
            "- applied to every probed tree before its build: {} (see Reproduce)\n",
            names.join(", ")
        ));
    }
    if let Some(line) = environment(b) {
        md.push_str(&format!("- environment: {line}\n"));
    }
    md.push_str(&format!(
        "- {} probes in {} steps ({} run now, {} from the result store), {}\n",
        b.probes.len(),
        b.steps,
        b.executed,
        b.probes.len().saturating_sub(b.executed),
        secs(b.elapsed_s)
    ));
    if let Some(a) = b.answer_s {
        md.push_str(&format!(
            "- the answer was known after {}; the endpoint check it rested on ended at {}\n",
            secs(a),
            secs(b.elapsed_s)
        ));
    }
    let built_now = b.probes.iter().filter(|p| !p.cached);
    if let Some(line) = super::ccache::line(built_now.filter_map(|p| p.ccache.as_ref())) {
        md.push_str(&format!("- {line}\n"));
    }
    md
}

/// How many candidates the search ran over and why: where probes were saved against a plain
/// bisection of every candidate, or why none were.
fn grouping(b: &BisectResult) -> Option<String> {
    let g = b.grouping.as_ref()?;
    Some(match &g.not_grouped {
        None => format!(
            "searched as {} groups: {} of the {} candidates change nothing the probes' builds read ({} files, learned from Ninja after each build) and joined a neighbour",
            g.groups,
            g.candidates - g.groups,
            g.candidates,
            g.read_files
        ),
        Some(why) => format!("not grouped: {why}"),
    })
}

/// Which endpoints a probe tested (by candidate position, else by commit): a reader must know
/// when the answer rests on neither.
fn endpoints_tested(b: &BisectResult) -> String {
    let r = &b.range;
    let last = r.candidates.saturating_sub(1);
    let tested = |pos: usize, sha: &str| {
        b.probes.iter().any(|p| match p.candidate {
            Some(c) => c == pos,
            None => p.sha == sha,
        })
    };
    match (tested(0, &r.good), tested(last, &r.bad)) {
        (true, true) => "both tested".into(),
        (false, true) => "--bad tested, --good not (the answer did not need it)".into(),
        (true, false) => "--good tested, --bad not (the answer did not need it)".into(),
        (false, false) => "neither was tested: the answer rests on the probes between them (its commit and its parent were both probed, or it is the inconclusive set above)".into(),
    }
}

/// How far the answer can be trusted, in one line.
fn confidence(b: &BisectResult) -> String {
    if let Some(a) = &b.flaky {
        return escape::inline(&a.line());
    }
    if let Some(v) = &b.validation {
        return format!(
            "{} by validation ({} runs each of the culprit, its parent and the reverted bad endpoint)",
            if v.confirmed { "confirmed" } else { "DOUBTFUL" },
            v.runs
        );
    }
    match &b.conclusion {
        // A build question refuses --confidence: a rebuild of the same tree answers the same.
        Conclusion::Found { .. } if b.regress() == "build" => {
            "deterministic: one build decided each commit (no test ran)".into()
        }
        Conclusion::Found { .. } => format!(
            "deterministic ({}): one run decided each commit; for an intermittent fault re-run with `--confidence 0.95` or check with `--validate 5`",
            escape::inline_short(&b.policy, 60)
        ),
        Conclusion::Ambiguous { .. } => "no single commit: skips hide the boundary".into(),
        Conclusion::BadEndpoint { .. } => "none: the endpoints contradict the question".into(),
    }
}

/// Provenance keys worth a reader's eye, in the order they read best, with their labels.
const FACTS: &[(&str, &str)] = &[
    ("backend", "backend"),
    ("device", "device"),
    ("gpu", "GPU"),
    ("arch", "arch"),
    ("gfx", "arch"),
    ("rocm", "ROCm"),
    ("hip", "HIP runtime"),
    ("amdgpu_driver", "amdgpu driver"),
    ("nvcc", "CUDA toolkit"),
    ("cuda", "CUDA"),
    ("cuda_driver", "NVIDIA driver"),
    ("cuda_driver_api", "driver's CUDA"),
    ("driver", "driver"),
    ("kernel", "kernel"),
    ("compiler", "compiler"),
    ("ggml_version", "ggml"),
    ("ggml_vendor", "vendored ggml (VENDOR.md)"),
    ("engine", "engine"),
    ("image", "image"),
    ("image_digest", "image digest"),
];

/// The probe environment (GPU, toolchain, image), from the answer probe's stored provenance.
fn environment(b: &BisectResult) -> Option<String> {
    let p = &b.invocation.provenance;
    let facts: Vec<String> = FACTS
        .iter()
        .filter_map(|(k, label)| p.get(*k).map(|v| format!("{label} {}", code(v))))
        .collect();
    (!facts.is_empty()).then(|| facts.join(", "))
}

/// Every probe, in the order they ran.
fn probe_table(b: &BisectResult) -> String {
    let url = b.invocation.repo_url.as_deref();
    let mut md = String::from("| # | commit | title | outcome | verdict | time | signature |\n");
    md.push_str("|---|---|---|---|---|---|---|\n");
    for (n, p) in b.probes.iter().enumerate() {
        md.push_str(&format!(
            "| {} | {} | {} | {} {} | {} | {}{} | {} |\n",
            n + 1,
            commit_link(url, &p.sha, 10),
            b.info(&p.sha)
                .map(|i| escape::cell_short(&i.title, 50))
                .unwrap_or_default(),
            icon(p.outcome),
            p.outcome,
            p.verdict.as_str(),
            secs(p.duration_s),
            probe_note(p.cached, p.reused_from.as_deref()),
            p.signature
                .as_deref()
                .map(|s| code_cell(&s.chars().take(100).collect::<String>()))
                .unwrap_or_default()
        ));
    }
    md
}

/// What the checks after the search said: the validation findings.
fn checks(b: &BisectResult) -> Option<String> {
    let v = b.validation.as_ref()?;
    let mut md = format!(
        "**Validation** ({} runs each of the culprit, its parent and the bad endpoint with the culprit reverted): {}\n",
        v.runs,
        if v.confirmed { "confirmed" } else { "DOUBTFUL" }
    );
    for f in &v.findings {
        md.push_str(&format!("- {}\n", escape::inline(&f.to_string())));
    }
    Some(md)
}

/// Appends the bisection to `doc`, most important first: the comment cuts from the end.
pub fn render(b: &BisectResult, doc: &mut Document) {
    doc.push_markdown(summary(b));
    if let Some(md) = super::configuration::render(b) {
        doc.push_markdown(md);
    }
    if let Some(md) = checks(b) {
        doc.push_markdown(md);
    }
    if let Some((mermaid, text)) = super::timeline::render(b) {
        doc.push_markdown("### Probes over the range");
        doc.push_picture(mermaid, text);
    }
    doc.push_markdown(probe_table(b));
    for md in super::kinds::sections(b) {
        doc.push_markdown(md);
    }
    if let Some(md) = reproduce(b) {
        doc.push_markdown(md);
    }
    if let Some(t) = &b.invocation.tool {
        doc.push_markdown(format!("<sub>{}</sub>", escape::inline(&t.line())));
    }
}

/// The whole report as one markdown text for the terminal and `--report` files (pictures as
/// text).
pub fn markdown(b: &BisectResult) -> String {
    let mut doc = Document::default();
    render(b, &mut doc);
    doc.for_terminal().to_markdown(None)
}
