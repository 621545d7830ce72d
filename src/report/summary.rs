//! Result files (`bisect --json`, `matrix --json`) read into a small typed model and rendered as
//! markdown for people: the matrix table, the bisect verdict with its confidence, provenance,
//! and the command to reproduce.
//!
//! The readers are deliberately lenient (several spellings of a field, extra fields ignored): the
//! files are written by other parts of the tool that may grow, and a report that still renders
//! is worth more than a strict schema error on the nightly job. Everything from a file is
//! untrusted text and goes through `github::escape`.

use crate::github::body;
use serde_json::Value;
use sha2::Digest;
use std::collections::BTreeMap;

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

/// Fields dropped at each compaction level of the state block: first log text, then what a
/// resumed job can do without (provenance, metadata tables, per-phase timings, log paths).
const STATE_DROP: [&[&str]; 2] = [
    &["output_tail", "tail", "output", "stdout", "stderr"],
    &[
        "provenance",
        "candidate_classes",
        "commits",
        "configs",
        "build_s",
        "test_s",
        "attempts",
        "log",
        "log_path",
        "cached",
        "label",
        "image",
    ],
];

fn strip(v: &mut Value, drop: &[&str]) {
    match v {
        Value::Object(m) => {
            m.retain(|k, _| !drop.contains(&k.as_str()));
            m.values_mut().for_each(|x| strip(x, drop));
        }
        Value::Array(a) => a.iter_mut().for_each(|x| strip(x, drop)),
        _ => {}
    }
}

/// What the comment's state block keeps: the raw results minus bulky log text, so that a later
/// job (`--resume-from-issue`) can pick up from the comment alone. When that is larger than
/// [`body::MAX_STATE`], it is compacted (`"compacted": 1`: provenance and metadata dropped; the
/// outcomes stay); if even that does not fit, only the key remains (`"compacted": 2`).
pub fn state(key: &str, results: &[&ResultFile]) -> Value {
    let mut drop: Vec<&str> = Vec::new();
    for (level, fields) in STATE_DROP.iter().enumerate() {
        drop.extend_from_slice(fields);
        let raws: Vec<Value> = results
            .iter()
            .map(|r| {
                let mut v = r.raw.clone();
                strip(&mut v, &drop);
                v
            })
            .collect();
        let mut st = serde_json::json!({ "key": key, "results": raws });
        if level > 0 {
            st["compacted"] = Value::from(level);
        }
        if body::state_block(&st).len() <= body::MAX_STATE {
            return st;
        }
    }
    serde_json::json!({ "key": key, "results": [], "compacted": 2 })
}

mod render;
pub use render::render;

#[cfg(test)]
mod tests;
