//! The result of a bisection, as a person pastes it into an issue (markdown) and as a machine
//! reads it (`--json`). Pure functions of the outcome: rendering never touches git or disk.
//!
//! The wording follows the question asked: `first bad commit` for regressions, `first fixed
//! commit` for `--regress success`. When skipped candidates hide the boundary the report says
//! so and lists every commit that may be the answer, rather than guessing.

use crate::core::outcome::{Predicate, Verdict};
use crate::core::range::{Candidate, Range};
use crate::core::result::{BisectOutcome, Conclusion};
use crate::core::search::Endpoint;
use crate::error::exit;
use serde_json::{json, Value};

/// Exit code for a conclusion: 0 found, 1 inconclusive (ambiguous, or an endpoint that does
/// not behave as claimed).
pub fn exit_code(c: &Conclusion) -> i32 {
    match c {
        Conclusion::Found { .. } => exit::FOUND,
        _ => exit::INCONCLUSIVE,
    }
}

fn verdict_text(v: Verdict) -> &'static str {
    match v {
        Verdict::Old => "old",
        Verdict::New => "new",
        Verdict::Skip => "skip",
    }
}

/// One line explaining a wrong endpoint, naming it and what it showed.
pub fn endpoint_message(range: &Range, which: Endpoint, got: Verdict, o: &BisectOutcome) -> String {
    let (flag, sha, claimed) = match which {
        Endpoint::Good => ("--good", &range.good, "old"),
        Endpoint::Bad => ("--bad", &range.bad, "new"),
    };
    let cand_sha = match which {
        Endpoint::Good => &range.candidates[0].sha,
        Endpoint::Bad => &range.candidates[range.candidates.len() - 1].sha,
    };
    let seen = o
        .probes
        .iter()
        .rev()
        .find(|p| &p.sha == cand_sha)
        .map(|p| {
            format!(
                "{}{}",
                p.outcome,
                p.signature
                    .as_deref()
                    .map(|s| format!(": {s}"))
                    .unwrap_or_default()
            )
        })
        .unwrap_or_else(|| "?".into());
    let what = match got {
        Verdict::Skip => "could not be tested".to_string(),
        v => format!("shows the {} behaviour", verdict_text(v)),
    };
    format!(
        "{flag} {} {what} ({seen}), but it must show the {claimed} behaviour; check the endpoints, --regress and --match",
        &sha[..sha.len().min(12)]
    )
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

/// The machine-readable result (`--json FILE`).
pub fn json(range: &Range, predicate: &Predicate, o: &BisectOutcome) -> Value {
    let first_bad = match &o.conclusion {
        Conclusion::Found { index } => Value::String(range.candidates[*index].sha.clone()),
        _ => Value::Null,
    };
    let sus = suspects(range, &o.conclusion);
    json!({
        "first_bad": first_bad,
        "term": predicate.regress.culprit_term(),
        "conclusion": o.conclusion,
        "exit_code": exit_code(&o.conclusion),
        "candidates": sus.iter().map(|c| c.sha.clone()).collect::<Vec<_>>(),
        "candidate_classes": sus.iter().map(|c| json!({
            "sha": c.sha, "tree": c.tree, "members": c.members,
        })).collect::<Vec<_>>(),
        "range": {
            "good": range.good, "bad": range.bad,
            "first_parent": range.spec.first_parent, "path": range.spec.path,
            "commits": range.commits, "candidates": range.candidates.len(),
        },
        "steps": o.steps,
        "executed": o.executed,
        "probes": o.probes.iter().map(|p| json!({
            "sha": p.sha, "outcome": p.outcome, "verdict": p.verdict,
            "duration_s": p.duration_s, "log": p.log, "signature": p.signature,
            "cached": p.cached,
        })).collect::<Vec<_>>(),
        "predicate": o.predicate,
        "policy": o.policy,
        "elapsed_s": o.elapsed_s,
        "commits": o.commits,
    })
}

fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// The markdown report. `reproduce` is a shell snippet with `{sha}` for the commit to probe.
pub fn markdown(
    range: &Range,
    predicate: &Predicate,
    o: &BisectOutcome,
    reproduce: Option<&str>,
) -> String {
    let term = predicate.regress.culprit_term();
    let short = |s: &str| s[..s.len().min(12)].to_string();
    let mut md = String::new();
    let headline = match &o.conclusion {
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
    match &o.conclusion {
        Conclusion::Found { index } => {
            let c = &range.candidates[*index];
            if let Some(info) = o.info(&c.sha) {
                md.push_str(&format!("**{term}:** `{}` {}\n\n", info.sha, info.title));
                md.push_str(&format!(
                    "- author: {}\n- date: {}\n",
                    info.author, info.date
                ));
            } else {
                md.push_str(&format!("**{term}:** `{}`\n\n", c.sha));
            }
            if c.members.len() > 1 {
                md.push_str(&format!(
                    "- {} later commits leave the tested tree unchanged and behave the same: {}\n",
                    c.members.len() - 1,
                    c.members[1..]
                        .iter()
                        .take(8)
                        .map(|m| format!("`{}`", short(m)))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        }
        Conclusion::Ambiguous { indices } => {
            md.push_str(&format!(
                "Commits next to the boundary could not be tested (build failed or untestable), so the {term} is one of these {}:\n\n",
                indices.len()
            ));
            for &i in indices {
                let c = &range.candidates[i];
                let info = o.info(&c.sha);
                md.push_str(&format!(
                    "- `{}` {}{}\n",
                    c.sha,
                    info.map(|i| i.title.as_str()).unwrap_or(""),
                    info.map(|i| format!(" ({}, {})", i.author, i.date))
                        .unwrap_or_default()
                ));
            }
            md.push('\n');
        }
        Conclusion::BadEndpoint { which, got } => {
            md.push_str(&endpoint_message(range, *which, *got, o));
            md.push_str("\n\n");
        }
    }
    let g = o.info(&range.good);
    let b = o.info(&range.bad);
    md.push_str(&format!(
        "- range: good `{}` {} .. bad `{}` {}\n",
        short(&range.good),
        g.map(|i| i.title.as_str()).unwrap_or(""),
        short(&range.bad),
        b.map(|i| i.title.as_str()).unwrap_or("")
    ));
    md.push_str(&format!(
        "- {} commits ({}), {} candidates after merging commits with identical {}\n",
        range.commits,
        if range.spec.first_parent {
            "first-parent"
        } else {
            "full ancestry path"
        },
        range.candidates.len(),
        range
            .spec
            .path
            .as_ref()
            .map(|p| format!("`{p}` trees"))
            .unwrap_or_else(|| "trees".into())
    ));
    md.push_str(&format!(
        "- predicate: {}; policy: {}\n- {} probes in {} steps ({} run now, {} from the result store), {:.1}s\n\n",
        o.predicate,
        o.policy,
        o.probes.len(),
        o.steps,
        o.executed,
        o.probes.len() - o.executed,
        o.elapsed_s
    ));
    md.push_str("| # | commit | title | outcome | verdict | duration | signature |\n");
    md.push_str("|---|--------|-------|---------|---------|----------|-----------|\n");
    for (n, p) in o.probes.iter().enumerate() {
        let title: String = p.title.chars().take(50).collect();
        md.push_str(&format!(
            "| {} | `{}` | {} | {} | {} | {:.1}s{} | {} |\n",
            n + 1,
            &p.sha[..p.sha.len().min(10)],
            cell(&title),
            p.outcome,
            verdict_text(p.verdict),
            p.duration_s,
            if p.cached { " (stored)" } else { "" },
            cell(p.signature.as_deref().unwrap_or(""))
        ));
    }
    let target = match &o.conclusion {
        Conclusion::Found { index } => Some(range.candidates[*index].sha.as_str()),
        Conclusion::Ambiguous { indices } => {
            indices.last().map(|&i| range.candidates[i].sha.as_str())
        }
        Conclusion::BadEndpoint {
            which: Endpoint::Good,
            ..
        } => Some(range.good.as_str()),
        Conclusion::BadEndpoint {
            which: Endpoint::Bad,
            ..
        } => Some(range.bad.as_str()),
    };
    if let (Some(tpl), Some(sha)) = (reproduce, target) {
        md.push_str(&format!(
            "\nReproduce the probe of `{}`:\n\n```sh\n{}\n```\n",
            short(sha),
            tpl.replace("{sha}", sha)
        ));
    }
    if let Some(log) = o
        .probes
        .iter()
        .rev()
        .find(|p| Some(p.sha.as_str()) == target)
        .map(|p| p.log.display().to_string())
    {
        md.push_str(&format!("\nIts log: `{log}`\n"));
    }
    md
}
