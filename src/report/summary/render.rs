//! Markdown for people: the matrix table, the bisect verdict with its confidence, provenance,
//! the command to reproduce, and folded log tails. Every string from a result file goes through
//! `github::escape`.

use super::{BisectResult, Cell, ResultFile, ResultKind};
use crate::core::outcome::Outcome;
use crate::report::document::Document;
use crate::report::escape::{self, inline, inline_short};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

fn icon(outcome: &str) -> &'static str {
    match serde_json::from_value::<Outcome>(Value::String(outcome.to_string())) {
        Ok(Outcome::Pass) => "✅",
        Ok(o) if o.is_failure() => "❌",
        Ok(o) if o.is_skip() => "⏭️",
        Ok(_) => "⚠️",
        Err(_) => "❔",
    }
}

fn is_failure(outcome: &str) -> bool {
    serde_json::from_value::<Outcome>(Value::String(outcome.to_string()))
        .is_ok_and(Outcome::is_failure)
}

fn secs(d: Option<f64>) -> String {
    match d {
        Some(s) if s >= 120.0 => format!("{:.1} min", s / 60.0),
        Some(s) => format!("{s:.1} s"),
        None => "–".into(),
    }
}

fn provenance_table(p: &BTreeMap<String, BTreeSet<String>>) -> Option<String> {
    if p.is_empty() {
        return None;
    }
    let mut s = String::from("<details><summary>Provenance</summary>\n\n| | |\n|---|---|\n");
    for (k, vs) in p {
        let v: Vec<String> = vs.iter().map(|x| inline_short(x, 120)).collect();
        s.push_str(&format!("| {} | {} |\n", inline(k), v.join("<br>")));
    }
    s.push_str("\n</details>");
    Some(s)
}

fn reproduce(cmd: &str) -> String {
    reproduce_as("**Reproduce:**", cmd)
}

fn reproduce_as(title: &str, cmd: &str) -> String {
    format!(
        "{title}\n\n{}",
        escape::code_block(cmd).replacen("text\n", "sh\n", 1)
    )
}

fn render_matrix(
    cells: &[Cell],
    commands: &[String],
    prov: &BTreeMap<String, BTreeSet<String>>,
    doc: &mut Document,
) {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for c in cells {
        *counts.entry(c.outcome.as_str()).or_default() += 1;
    }
    let tally: Vec<String> = counts
        .iter()
        .map(|(o, n)| format!("{} {} {}", icon(o), n, inline(o)))
        .collect();
    let mut md = format!(
        "## setrows-bisect: configuration matrix\n\n**{} cell(s):** {}\n\n",
        cells.len(),
        tally.join(" · ")
    );
    md.push_str(
        "| configuration | revision | outcome | signature | time |\n|---|---|---|---|---|\n",
    );
    let mut sorted: Vec<&Cell> = cells.iter().collect();
    sorted.sort_by(|a, b| (&a.config, &a.revision).cmp(&(&b.config, &b.revision)));
    for c in &sorted {
        let name = match &c.label {
            Some(l) => format!("{} ({})", inline_short(l, 100), escape::sha(&c.config, 12)),
            None => inline_short(&c.config, 80),
        };
        md.push_str(&format!(
            "| {} | {} | {} {} | {} | {} |\n",
            name,
            escape::sha(&c.revision, 10),
            icon(&c.outcome),
            inline(&c.outcome),
            c.signature
                .as_deref()
                .map(|s| inline_short(s, 100))
                .unwrap_or_default(),
            secs(c.duration_s)
        ));
    }
    doc.push_markdown(md);
    if let Some(t) = provenance_table(prov) {
        doc.push_markdown(t);
    }
    for c in commands {
        doc.push_markdown(reproduce(c));
    }
    for c in sorted.iter().filter(|c| is_failure(&c.outcome)) {
        if let Some(tail) = c.output_tail.as_deref().filter(|t| !t.trim().is_empty()) {
            let rev: String = c.revision.chars().take(10).collect();
            doc.push_log(
                format!("{} @ {} — {} (log tail)", c.config, rev, c.outcome),
                tail,
            );
        }
    }
}

fn render_bisect(b: &BisectResult, doc: &mut Document) {
    let range = match (&b.good, &b.bad) {
        (Some(g), Some(bad)) => format!("{}..{}", escape::sha(g, 10), escape::sha(bad, 10)),
        _ => "(range not recorded)".into(),
    };
    let mut md = format!("## setrows-bisect: bisect {range}\n\n");
    let mut facts = Vec::new();
    if let Some(c) = &b.config {
        facts.push(format!("configuration {}", inline_short(c, 80)));
    }
    if let Some(r) = &b.regress {
        facts.push(format!("regress = {}", inline_short(r, 80)));
    }
    if !facts.is_empty() {
        md.push_str(&format!("{}\n\n", facts.join(" · ")));
    }
    let term = match (&b.term, b.regress.as_deref()) {
        (Some(t), _) => {
            let mut cs = t.chars();
            cs.next()
                .map(|f| f.to_uppercase().chain(cs).collect::<String>())
                .unwrap_or_default()
        }
        (None, Some("success")) => "First fixed commit".into(),
        (None, _) => "First bad commit".into(),
    };
    let term = inline(&term);
    match &b.first_bad {
        Some(sha) => {
            md.push_str(&format!("**{term}: {}**", escape::sha(sha, 12)));
            if let Some(s) = &b.first_bad_subject {
                md.push_str(&format!(" — {}", inline_short(s, 120)));
            }
            md.push_str("\n\n");
        }
        None if b.conclusion.as_deref() == Some("bad_endpoint") => {
            md.push_str(
                "**Stopped:** an endpoint does not behave as claimed (see its probe below); \
                 check --good/--bad and the predicate.\n\n",
            );
        }
        None => {
            md.push_str("**Inconclusive:** no single commit could be identified");
            if !b.candidates.is_empty() {
                let shown: Vec<String> = b
                    .candidates
                    .iter()
                    .take(20)
                    .map(|c| escape::sha(c, 10))
                    .collect();
                md.push_str(&format!("; it is one of {}", shown.join(", ")));
                if b.candidates.len() > 20 {
                    md.push_str(&format!(" and {} more", b.candidates.len() - 20));
                }
            }
            md.push_str(".\n\n");
        }
    }
    let mut stats = Vec::new();
    if let Some(c) = &b.confidence {
        stats.push(format!("confidence {}", inline_short(c, 60)));
    }
    stats.push(format!("{} probe(s)", b.probes.len()));
    if let Some(s) = b.steps {
        stats.push(format!("{s} step(s)"));
    }
    if let Some(n) = b.candidate_count {
        stats.push(format!("{n} candidate commit(s)"));
    }
    if let Some(p) = &b.policy {
        stats.push(format!("policy {}", inline_short(p, 60)));
    }
    if b.elapsed_s.is_some() {
        stats.push(format!("{} elapsed", secs(b.elapsed_s)));
    }
    md.push_str(&format!("{}\n\n", stats.join(" · ")));
    if !b.probes.is_empty() {
        md.push_str(
            "| # | commit | outcome | verdict | signature | time |\n|---|---|---|---|---|---|\n",
        );
        for (i, p) in b.probes.iter().enumerate() {
            md.push_str(&format!(
                "| {} | {} | {} {} | {} | {} | {} |\n",
                i + 1,
                escape::sha(&p.sha, 10),
                icon(&p.outcome),
                inline(&p.outcome),
                p.verdict.as_deref().map(inline).unwrap_or_default(),
                p.signature
                    .as_deref()
                    .map(|s| inline_short(s, 100))
                    .unwrap_or_default(),
                secs(p.duration_s)
            ));
        }
    }
    doc.push_markdown(md);
    let prov = b
        .provenance
        .iter()
        .map(|(k, v)| (k.clone(), BTreeSet::from([v.clone()])))
        .collect();
    if let Some(t) = provenance_table(&prov) {
        doc.push_markdown(t);
    }
    // The file's own command line when it records one; otherwise the question rebuilt from the
    // range and predicate (the prober flags of the original run are not in the file).
    let derived = b.command.is_none();
    let cmd = b.command.clone().or_else(|| {
        let (g, bad) = (b.good.as_ref()?, b.bad.as_ref()?);
        let mut c = format!("setrows-bisect --good {g} --bad {bad}");
        if let Some(r) = &b.regress {
            c.push_str(&format!(" --regress {r}"));
        }
        let matcher = b.predicate.as_deref().and_then(|p| p.split_once(" match="));
        if let Some((_, re)) = matcher {
            c.push_str(&format!(" --match '{}'", re.replace('\'', r"'\''")));
        }
        Some(c)
    });
    if let Some(c) = cmd {
        doc.push_markdown(if derived {
            reproduce_as(
                "**Re-run this bisection** (with the original run's prober flags, e.g. \
                 `--backend`, `--build`/`--script`, if it used any):",
                &c,
            )
        } else {
            reproduce(&c)
        });
    }
    let culprit = b.first_bad.as_deref();
    for p in b
        .probes
        .iter()
        .filter(|p| Some(p.sha.as_str()) == culprit || is_failure(&p.outcome))
        .take(3)
    {
        if let Some(tail) = p.output_tail.as_deref().filter(|t| !t.trim().is_empty()) {
            let rev: String = p.sha.chars().take(10).collect();
            doc.push_log(format!("{rev} — {} (log tail)", p.outcome), tail);
        }
    }
}

/// The markdown for all results sharing one key (several matrix files are merged into one
/// table; a bisect key has one file).
pub fn render(results: &[&ResultFile], run_url: Option<&str>) -> Document {
    let mut doc = Document::default();
    let mut cells = Vec::new();
    let mut commands = Vec::new();
    let mut prov: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for r in results {
        match &r.kind {
            ResultKind::Bisect(b) => render_bisect(b, &mut doc),
            ResultKind::Matrix(m) => {
                cells.extend(m.cells.iter().cloned());
                if let Some(c) = &m.command {
                    if !commands.contains(c) {
                        commands.push(c.clone());
                    }
                }
                for (k, v) in m
                    .provenance
                    .iter()
                    .chain(m.cells.iter().flat_map(|c| c.provenance.iter()))
                {
                    prov.entry(k.clone()).or_default().insert(v.clone());
                }
            }
        }
    }
    if results
        .iter()
        .any(|r| matches!(r.kind, ResultKind::Matrix(_)))
    {
        let mut m = Document::default();
        render_matrix(&cells, &commands, &prov, &mut m);
        doc.sections.splice(0..0, m.sections);
    }
    if let Some(url) = run_url {
        doc.push_markdown(format!("<sub>Posted by setrows-bisect from [this workflow run]({url}); logs and JSON are in its artifacts.</sub>"));
    } else {
        doc.push_markdown("<sub>Posted by setrows-bisect.</sub>");
    }
    doc
}
