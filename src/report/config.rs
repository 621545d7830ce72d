//! A configuration bisection: the first failing value along one axis at a fixed commit, then
//! (with `--good-rev`) the commit bisection in that configuration, rendered by `bisect`.

use super::document::Document;
use super::{code, escape, icon, short};
use crate::core::result::{BisectConfigResult, Conclusion};
use crate::core::search::Endpoint;

fn conclusion(c: &BisectConfigResult) -> String {
    let axis = code(&c.axis);
    let value = |i: usize| code(c.ladder.get(i).map(String::as_str).unwrap_or("?"));
    match &c.conclusion {
        Conclusion::Found { index } => format!(
            "first failing {axis} at {}: {} (configuration {})",
            short(&c.sha, 10),
            value(*index),
            c.first_failing_config
                .as_ref()
                .map(|d| code(&d.id))
                .unwrap_or_else(|| "?".into())
        ),
        Conclusion::Ambiguous { indices } => format!(
            "the first failing {axis} is one of {} (skips hide the boundary)",
            indices
                .iter()
                .map(|&i| value(i))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Conclusion::BadEndpoint { which, got } => {
            let (i, claim) = match which {
                Endpoint::Good => (0, "the first value should behave as old"),
                Endpoint::Bad => (
                    c.ladder.len().saturating_sub(1),
                    "the last value should behave as new",
                ),
            };
            format!(
                "{claim}, but {axis}={} was {got:?}: nothing to bisect on this ladder",
                value(i)
            )
        }
    }
}

/// Appends the ladder, its probes and any commit bisection to `doc`.
pub fn render(c: &BisectConfigResult, doc: &mut Document) {
    let mut md = format!(
        "## setrows-bisect: configuration bisection {} at {}\n\n{}\n\n| {} | id | outcome | verdict | signature |\n|---|---|---|---|---|\n",
        code(&c.axis),
        short(&c.sha, 10),
        conclusion(c),
        escape::inline(&c.axis)
    );
    for p in &c.probes {
        md.push_str(&format!(
            "| {} | {} | {} {} | {} | {} |\n",
            code(&p.value),
            code(&p.config),
            icon(p.cell.outcome),
            p.cell.outcome,
            p.verdict,
            p.cell
                .signature
                .as_deref()
                .map(|s| escape::inline_short(s, 100))
                .unwrap_or_default()
        ));
    }
    doc.push_markdown(md);
    if let Some(b) = &c.commit_bisect {
        let id = c
            .first_failing_config
            .as_ref()
            .map(|d| code(&d.id))
            .unwrap_or_default();
        doc.push_markdown(format!("### First bad commit in configuration {id}"));
        super::bisect::render(b, doc);
    }
}

/// The whole report as one markdown text (terminal and `bisect-config.md`).
pub fn markdown(c: &BisectConfigResult) -> String {
    let mut doc = Document::default();
    render(c, &mut doc);
    doc.to_markdown(None)
}
