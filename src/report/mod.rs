//! Results -> text. One renderer per result kind, used by every destination: the terminal,
//! `--report`/`.md` files, the GitHub comment and the job summary. They build a [`Document`]
//! so the comment can cut logs and trailing sections to fit GitHub's limit while the other
//! destinations print it whole; a second renderer per destination is how wording drifted before.
//!
//! Everything taken from a result file is untrusted (commit titles, signatures, paths) and goes
//! through [`escape`]; rendering never touches git, disk or the network.
pub mod bisect;
pub mod budget;
mod ccache;
pub mod config;
pub mod configuration;
pub mod document;
pub mod escape;
pub mod junit;
pub mod kinds;
pub mod matrix;
#[cfg(test)]
pub(crate) mod tests;
pub mod timeline;

use crate::core::outcome::Outcome;
use crate::core::result::{AnyResult, MatrixResults};
use document::Document;

/// All results sharing one comment key: matrix files (one per fan-out job) merge into one table
/// placed first, then every other result in order.
pub fn render(results: &[&AnyResult]) -> Document {
    let mut doc = Document::default();
    let matrices: Vec<&MatrixResults> = results
        .iter()
        .filter_map(|r| match r {
            AnyResult::Matrix(m) => Some(m),
            _ => None,
        })
        .collect();
    if !matrices.is_empty() {
        matrix::render(&matrices, &mut doc);
    }
    for r in results {
        match r {
            AnyResult::Bisect(b) => bisect::render(b, &mut doc),
            AnyResult::BisectConfig(c) => config::render(c, &mut doc),
            AnyResult::Matrix(_) => {}
        }
    }
    doc
}

/// The comment key: `matrix` for every matrix file (fan-out jobs share one comment), otherwise
/// derived from the question asked, so a rerun of the same question edits the same comment.
pub fn key(r: &AnyResult) -> String {
    match r {
        // A compile check (`--build-only`) keeps its own comment: it must not replace the
        // GPU matrix's table, nor merge `built` cells into it.
        AnyResult::Matrix(m) if m.build_only => "matrix-build".into(),
        AnyResult::Matrix(_) => "matrix".into(),
        AnyResult::Bisect(b) => bisect_key(
            &b.range.good,
            &b.range.bad,
            &b.predicate,
            configuration_id(r),
        ),
        AnyResult::BisectConfig(c) => format!(
            "bisect-config:{}",
            short_hash(&format!("{}|{}|{}", c.axis, c.sha, c.predicate))
        ),
    }
}

/// The matrix configuration a bisection ran in (`--config ID`), which is part of its question.
pub fn configuration_id(r: &AnyResult) -> Option<&str> {
    match r {
        AnyResult::Bisect(b) => b.configuration.as_ref()?.id.as_deref(),
        _ => None,
    }
}

/// The key a result's comment had before the configuration was part of a bisection's key:
/// `Some` only where the two differ (a bisection with a configuration id), so the comment an
/// earlier version posted is still found (`github::Former`).
pub fn former_key(r: &AnyResult) -> Option<String> {
    match r {
        AnyResult::Bisect(b) if configuration_id(r).is_some() => {
            Some(bisect_key(&b.range.good, &b.range.bad, &b.predicate, None))
        }
        _ => None,
    }
}

/// The key of a bisection, known before it runs (`--resume-from-issue` looks the comment up).
/// The same range bisected in two configurations (matrix.yml starts one bisection per newly
/// failing configuration, all over the same range) is two questions with two answers, so the
/// configuration id is hashed in; without one the hashed text keeps the layout of the first
/// release (an empty configuration slot included), so those comments keep their key.
pub fn bisect_key(good: &str, bad: &str, predicate: &str, configuration: Option<&str>) -> String {
    // `Predicate::describe` is `regress=R[ match=RE]`; the signature may contain spaces. A
    // bisect with another --match is another question, so it gets its own comment; without one
    // the key is what it always was (the empty slot), so existing comments keep their key.
    let regress = predicate
        .split_whitespace()
        .find_map(|w| w.strip_prefix("regress="))
        .unwrap_or("");
    let signature = predicate
        .split_once(" match=")
        .map(|(_, re)| re)
        .unwrap_or("");
    let text = match configuration {
        Some(id) => format!("{good}|{bad}|{signature}|{regress}|config={id}"),
        None => format!("{good}|{bad}|{signature}|{regress}"),
    };
    format!("bisect:{}", short_hash(&text))
}

fn short_hash(text: &str) -> String {
    crate::core::id::of_text(text, 12)
}

/// One glyph per outcome class, so a long table is scannable: passed (or built, where only
/// the build was asked), failed, or could not be tested (build failure, untestable,
/// infrastructure).
pub(crate) fn icon(o: Outcome) -> &'static str {
    match o {
        Outcome::Pass | Outcome::Built => "✅",
        o if o.is_failure() => "❌",
        _ => "⚠️",
    }
}

pub(crate) fn secs(s: f64) -> String {
    if s >= 120.0 {
        format!("{:.1} min", s / 60.0)
    } else {
        format!("{s:.1} s")
    }
}

/// Untrusted text as one code span (nothing renders inside), cut to 300 characters.
pub(crate) fn code(text: &str) -> String {
    let cut: String = text.chars().take(300).collect();
    let ellipsis = if cut.len() < text.len() { "…" } else { "" };
    format!("{}{ellipsis}", escape::span(&cut, false))
}

/// [`code`] for a table cell.
pub(crate) fn code_cell(text: &str) -> String {
    let cut: String = text.chars().take(300).collect();
    let ellipsis = if cut.len() < text.len() { "…" } else { "" };
    format!("{}{ellipsis}", escape::span(&cut, true))
}

/// A commit id shortened to `n`; whatever else is escaped.
pub(crate) fn short(sha: &str, n: usize) -> String {
    escape::sha(sha, n)
}

/// What answered a probe besides running it now: the store, and/or the outcome of another
/// commit's byte-identical artifacts (issue 13; the build ran, the test did not).
pub(crate) fn probe_note(cached: bool, reused_from: Option<&str>) -> String {
    let stored = if cached { " (stored)" } else { "" };
    match reused_from {
        Some(sha) => format!(
            "{stored} (test skipped: artifacts identical to {})",
            short(sha, 10)
        ),
        None => stored.to_string(),
    }
}

pub use crate::core::result::web_url;

fn is_sha(s: &str) -> bool {
    (7..=64).contains(&s.len()) && s.chars().all(|c| c.is_ascii_hexdigit())
}

/// A commit id shortened to `n`, linked to its page on `repo_url` when there is one.
pub(crate) fn commit_link(repo_url: Option<&str>, sha: &str, n: usize) -> String {
    match web_url(repo_url) {
        Some(url) if is_sha(sha) => format!("[{}]({url}/commit/{sha})", short(sha, n)),
        _ => short(sha, n),
    }
}

/// The compare view of `good...bad` on `repo_url`, as a markdown link, when there is one.
pub(crate) fn compare_link(repo_url: Option<&str>, good: &str, bad: &str) -> Option<String> {
    let url = web_url(repo_url)?;
    (is_sha(good) && is_sha(bad)).then(|| format!("[compare]({url}/compare/{good}...{bad})"))
}

/// A probe log's place: relative to the work dir (`logs/...`), which means something wherever
/// the report is read; an absolute path from another machine does not.
pub(crate) fn log_place(log: &std::path::Path) -> String {
    let s = log.to_string_lossy();
    match s.rfind("/logs/") {
        Some(i) => s[i + 1..].to_string(),
        None => log
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_else(|| s.into_owned()),
    }
}
