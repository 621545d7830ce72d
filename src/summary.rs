//! Result files (`bisect --json`, `matrix --json`) read into a small typed model and rendered as
//! markdown for people: the matrix table, the bisect verdict with its confidence, provenance,
//! and the command to reproduce.
//!
//! The readers are deliberately lenient (several spellings of a field, extra fields ignored): the
//! files are written by other parts of the tool that may grow, and a report that still renders
//! is worth more than a strict schema error on the nightly job. Everything from a file is
//! untrusted text and goes through `github::escape`.

use crate::github::body::Document;
use crate::github::escape::{self, inline, inline_short};
use crate::outcome::Outcome;
use serde_json::Value;
use sha2::Digest;
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Clone, PartialEq)]
pub struct Probe {
    pub sha: String,
    pub outcome: String,
    /// old / new / skip, when the file records how the predicate judged it.
    pub verdict: Option<String>,
    pub duration_s: Option<f64>,
    pub log_path: Option<String>,
    pub signature: Option<String>,
    pub output_tail: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct BisectResult {
    pub id: Option<String>,
    pub first_bad: Option<String>,
    pub first_bad_subject: Option<String>,
    /// "first bad commit" / "first fixed commit".
    pub term: Option<String>,
    /// found / ambiguous / bad_endpoint (`conclusion.kind` in `bisect --json`).
    pub conclusion: Option<String>,
    pub candidates: Vec<String>,
    pub candidate_count: Option<u64>,
    pub probes: Vec<Probe>,
    pub steps: Option<u64>,
    pub good: Option<String>,
    pub bad: Option<String>,
    pub regress: Option<String>,
    pub config: Option<String>,
    pub predicate: Option<String>,
    pub policy: Option<String>,
    pub elapsed_s: Option<f64>,
    pub confidence: Option<String>,
    pub command: Option<String>,
    pub provenance: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    pub config: String,
    /// Human-readable configuration (from the file's `configs` table), when known.
    pub label: Option<String>,
    pub revision: String,
    pub outcome: String,
    pub signature: Option<String>,
    pub duration_s: Option<f64>,
    pub log_path: Option<String>,
    pub output_tail: Option<String>,
    pub provenance: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct MatrixResult {
    pub cells: Vec<Cell>,
    pub command: Option<String>,
    pub provenance: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ResultKind {
    Bisect(Box<BisectResult>),
    Matrix(MatrixResult),
}

/// One result file: what it says, and the raw JSON (kept for the comment's state block).
#[derive(Debug, Clone, PartialEq)]
pub struct ResultFile {
    pub kind: ResultKind,
    pub raw: Value,
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ParseError(String);

/// First of `names` present in `v` as text (strings as they are, numbers printed, objects by
/// their `sha`/`id`/`name`).
fn text_at(v: &Value, names: &[&str]) -> Option<String> {
    names.iter().find_map(|n| as_text(v.get(*n)?))
}

fn as_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Object(_) => text_at(v, &["sha", "commit", "id", "name"]),
        _ => None,
    }
}

fn num_at(v: &Value, names: &[&str]) -> Option<f64> {
    names.iter().find_map(|n| {
        let x = v.get(*n)?;
        x.as_f64().or_else(|| x.as_str()?.trim().parse().ok())
    })
}

fn map_at(v: &Value, name: &str) -> BTreeMap<String, String> {
    match v.get(name) {
        Some(Value::Object(m)) => m
            .iter()
            .filter_map(|(k, x)| match x {
                Value::Null => None,
                Value::String(s) => Some((k.clone(), s.clone())),
                other => Some((k.clone(), other.to_string())),
            })
            .collect(),
        _ => BTreeMap::new(),
    }
}

/// Fields may sit on the entry itself or in a nested `report` (a stored `ProbeReport`).
fn merged(v: &Value) -> Value {
    let mut out = v.clone();
    if let (Some(Value::Object(inner)), Value::Object(o)) = (v.get("report").cloned(), &mut out) {
        for (k, x) in inner {
            o.entry(k).or_insert(x);
        }
    }
    out
}

fn probe(v: &Value) -> Probe {
    let v = merged(v);
    Probe {
        sha: text_at(&v, &["sha", "commit", "revision", "rev"]).unwrap_or_else(|| "?".into()),
        outcome: text_at(&v, &["outcome", "result"]).unwrap_or_else(|| "unknown".into()),
        verdict: text_at(&v, &["verdict"]),
        duration_s: num_at(&v, &["duration_s", "duration", "duration_secs", "secs"]),
        log_path: text_at(&v, &["log_path", "log"]),
        signature: text_at(&v, &["signature"]),
        output_tail: text_at(&v, &["output_tail", "tail"]),
    }
}

fn cell(v: &Value) -> Cell {
    let v = merged(v);
    let p = probe(&v);
    Cell {
        config: text_at(&v, &["config_id", "config", "id", "name"]).unwrap_or_else(|| "?".into()),
        label: text_at(&v, &["label"]),
        revision: p.sha,
        outcome: p.outcome,
        signature: p.signature,
        duration_s: p.duration_s,
        log_path: p.log_path,
        output_tail: p.output_tail,
        provenance: map_at(&v, "provenance"),
    }
}

fn list(v: &Value, names: &[&str]) -> Vec<Value> {
    names
        .iter()
        .find_map(|n| v.get(*n)?.as_array().cloned())
        .unwrap_or_default()
}

/// Reads one result document. `origin` names it in errors (usually the file path).
pub fn parse(v: Value, origin: &str) -> Result<ResultFile, ParseError> {
    if !v.is_object() {
        return Err(ParseError(format!("{origin}: expected a JSON object")));
    }
    let declared = text_at(&v, &["kind", "type"]).unwrap_or_default();
    let is_matrix = declared == "matrix" || (declared.is_empty() && v.get("cells").is_some());
    let is_bisect = declared == "bisect"
        || (declared.is_empty() && (v.get("probes").is_some() || v.get("first_bad").is_some()));
    let kind = if is_matrix {
        // `matrix --json` keeps labels in a `configs` table keyed by id.
        let labels: BTreeMap<String, String> = list(&v, &["configs"])
            .iter()
            .filter_map(|c| Some((text_at(c, &["id"])?, text_at(c, &["label"])?)))
            .collect();
        let cells = list(&v, &["cells", "results"])
            .iter()
            .map(|c| {
                let mut c = cell(c);
                if c.label.is_none() {
                    c.label = labels.get(&c.config).cloned();
                }
                c
            })
            .collect();
        ResultKind::Matrix(MatrixResult {
            cells,
            command: text_at(&v, &["command", "reproduce"]),
            provenance: map_at(&v, "provenance"),
        })
    } else if is_bisect {
        let range = v.get("range").cloned().unwrap_or(Value::Null);
        let (mut good, mut bad) = (
            text_at(&range, &["good", "old"]),
            text_at(&range, &["bad", "new"]),
        );
        if let Some(s) = range.as_str() {
            if let Some((g, b)) = s.split_once("..") {
                good = Some(g.to_string());
                bad = Some(b.trim_start_matches('.').to_string());
            }
        }
        if let Some([g, b]) = range.as_array().map(Vec::as_slice) {
            good = as_text(g);
            bad = as_text(b);
        }
        let candidates_v = v.get("candidates").cloned().unwrap_or(Value::Null);
        let candidates: Vec<String> = candidates_v
            .as_array()
            .map(|a| a.iter().filter_map(as_text).collect())
            .unwrap_or_default();
        // `bisect --json`: `candidates` are the remaining suspects, `range.candidates` the
        // number of distinct trees the range had.
        let candidate_count = candidates_v
            .as_u64()
            .or(num_at(&v, &["candidate_count"]).map(|n| n as u64))
            .or(range.get("candidates").and_then(Value::as_u64))
            .or((!candidates.is_empty()).then_some(candidates.len() as u64));
        let first_bad = v.get("first_bad").and_then(as_text);
        // Title of the culprit from the `commits` metadata table, if the file has one.
        let title_from_table = first_bad.as_ref().and_then(|fb| {
            list(&v, &["commits"])
                .iter()
                .find(|c| text_at(c, &["sha"]).as_deref() == Some(fb.as_str()))
                .and_then(|c| text_at(c, &["title", "subject"]))
        });
        let predicate = text_at(&v, &["predicate"]);
        let regress = text_at(&v, &["regress"]).or_else(|| {
            let p = predicate.as_deref()?;
            let r = p
                .split_whitespace()
                .find_map(|w| w.strip_prefix("regress="))?;
            Some(r.to_string())
        });
        ResultKind::Bisect(Box::new(BisectResult {
            id: text_at(&v, &["id", "bisect_id"]),
            first_bad_subject: v
                .get("first_bad")
                .and_then(|f| text_at(f, &["subject", "summary", "title"]))
                .or_else(|| text_at(&v, &["first_bad_subject", "subject"]))
                .or(title_from_table),
            first_bad,
            term: text_at(&v, &["term"]),
            conclusion: v.get("conclusion").and_then(|c| match c {
                Value::Object(_) => text_at(c, &["kind"]),
                other => as_text(other),
            }),
            candidates,
            candidate_count,
            probes: list(&v, &["probes"]).iter().map(probe).collect(),
            steps: num_at(&v, &["steps"]).map(|n| n as u64),
            good: good.or_else(|| text_at(&v, &["good"])),
            bad: bad.or_else(|| text_at(&v, &["bad"])),
            regress,
            config: text_at(&v, &["config_id", "config"]),
            predicate,
            policy: text_at(&v, &["policy"]),
            elapsed_s: num_at(&v, &["elapsed_s"]),
            confidence: text_at(&v, &["confidence"]),
            command: text_at(&v, &["command", "reproduce"]),
            provenance: map_at(&v, "provenance"),
        }))
    } else {
        return Err(ParseError(format!(
            "{origin}: neither a bisect result (first_bad / probes) nor a matrix result (cells)"
        )));
    };
    Ok(ResultFile { kind, raw: v })
}

fn key_safe(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .collect::<String>()
        .split('-')
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("-")
}

impl ResultFile {
    /// The comment key: `matrix` for every matrix file (fan-out jobs merge into one comment),
    /// `bisect:<id>` for a bisect, the id derived from range, config and predicate when the
    /// file has none, so a rerun of the same question edits the same comment.
    pub fn key(&self) -> String {
        match &self.kind {
            ResultKind::Matrix(_) => "matrix".to_string(),
            ResultKind::Bisect(b) => {
                let id =
                    b.id.as_deref()
                        .map(key_safe)
                        .filter(|s| !s.is_empty() && s.len() <= 64);
                let id = id.unwrap_or_else(|| {
                    let q = format!(
                        "{}|{}|{}|{}",
                        b.good.as_deref().unwrap_or(""),
                        b.bad.as_deref().unwrap_or(""),
                        b.config.as_deref().unwrap_or(""),
                        b.regress.as_deref().unwrap_or("")
                    );
                    hex::encode(&sha2::Sha256::digest(q.as_bytes())[..6])
                });
                format!("bisect:{id}")
            }
        }
    }
}

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
    format!(
        "**Reproduce:**\n\n{}",
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
        doc.push_markdown(reproduce(&c));
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

/// What the comment's state block keeps: the raw results minus bulky log text, so that a later
/// job (`--resume-from-issue`) can pick up from the comment alone.
pub fn state(key: &str, results: &[&ResultFile]) -> Value {
    fn strip(v: &mut Value) {
        match v {
            Value::Object(m) => {
                m.retain(|k, _| {
                    !matches!(
                        k.as_str(),
                        "output_tail" | "tail" | "output" | "stdout" | "stderr"
                    )
                });
                m.values_mut().for_each(strip);
            }
            Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let raws: Vec<Value> = results
        .iter()
        .map(|r| {
            let mut v = r.raw.clone();
            strip(&mut v);
            v
        })
        .collect();
    serde_json::json!({ "key": key, "results": raws })
}

#[cfg(test)]
mod tests;
