//! The results every writer produces and every reader consumes: one serde schema.
//!
//! A result file outlives the binary that wrote it (CI artifacts, the state block of a GitHub
//! comment), so each one names its schema (`"schema": "setrows-bisect/<kind>/<version>"`) and
//! readers refuse what they do not know instead of guessing at field spellings. The JSON Schema
//! (`setrows-bisect schema KIND`) is generated from these same structs, so it cannot drift.
//!
//! Two layers live here: what the driver hands back while running (`ProbeRecord`,
//! `BisectRecord`), and the documents written to disk (`BisectResult`, `MatrixResults`,
//! `BisectConfigResult`). The first may change freely; the second only with a version bump.

use crate::core::build::{Backend, TreeFacts};
use crate::core::ccache::Ccache;
use crate::core::flaky::Assessment;
use crate::core::judge::{Finding, Observations};
use crate::core::matrix::Value as AxisValue;
use crate::core::outcome::{Outcome, Verdict};
use crate::core::range::CommitInfo;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

mod config;
mod endpoint;
mod invocation;
mod matrix;
mod plan;
mod reproducer;
/// Stored as the search ended it (`core::search`).
pub use crate::core::search::Conclusion;
pub use config::{BisectConfigResult, ConfigDetails, ConfigProbe};
pub use invocation::{web_url, Invocation, Tool};
pub use matrix::{Cell, ConfigRow, MatrixResults, Rev};
pub use plan::{plan_tag, PlanDocument, PlannedReproducer};
pub use reproducer::{
    EndpointAdvice, ReproducerInfo, DECODE_MODEL, DECODE_PROGRAM, FROM_REPRO_ARG,
};

/// The schema version every writer writes. Bump it (and teach [`read`] the old one, or refuse
/// it) whenever a field changes meaning or becomes required.
pub const VERSION: u32 = 1;

/// The kinds of result document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Bisect,
    Matrix,
    BisectConfig,
}

impl Kind {
    pub const ALL: [Kind; 3] = [Kind::Bisect, Kind::Matrix, Kind::BisectConfig];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Bisect => "bisect",
            Kind::Matrix => "matrix",
            Kind::BisectConfig => "bisect-config",
        }
    }

    pub fn parse(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// The value of the `schema` field for this kind at the current version.
    pub fn tag(self) -> String {
        format!("setrows-bisect/{}/{VERSION}", self.as_str())
    }

    /// The JSON Schema of this kind's document.
    pub fn json_schema(self) -> Schema {
        match self {
            Kind::Bisect => schemars::schema_for!(BisectResult),
            Kind::Matrix => schemars::schema_for!(MatrixResults),
            Kind::BisectConfig => schemars::schema_for!(BisectConfigResult),
        }
    }
}

fn tag_schema(kind: Kind) -> Schema {
    schemars::json_schema!({
        "type": "string",
        "const": kind.tag(),
        "description": "Which document this is and its version; readers refuse other values."
    })
}
fn bisect_tag(_: &mut SchemaGenerator) -> Schema {
    tag_schema(Kind::Bisect)
}
fn matrix_tag(_: &mut SchemaGenerator) -> Schema {
    tag_schema(Kind::Matrix)
}
fn config_tag(_: &mut SchemaGenerator) -> Schema {
    tag_schema(Kind::BisectConfig)
}

/// One run of one candidate, as the report shows it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProbeRecord {
    pub candidate: usize,
    pub sha: String,
    pub title: String,
    pub outcome: Outcome,
    pub verdict: Verdict,
    pub duration_s: f64,
    pub log: PathBuf,
    pub signature: Option<String>,
    /// Answered by the store (an earlier or interrupted run), not executed now.
    pub cached: bool,
    /// What ccache did for this run's build (`None`: no build ran now).
    #[serde(default)]
    pub ccache: Option<Ccache>,
    /// Built, but not tested: the outcome of this commit's byte-identical artifacts.
    #[serde(default)]
    pub reused_from: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BisectRecord {
    pub conclusion: Conclusion,
    pub probes: Vec<ProbeRecord>,
    /// Probe rounds the search asked for (each round is up to `jobs` candidates).
    pub steps: usize,
    /// Runs actually executed now (the rest came from the store).
    pub executed: usize,
    pub policy: String,
    pub predicate: String,
    pub elapsed_s: f64,
    /// Metadata of every probed candidate's representative and of the endpoints.
    pub commits: Vec<CommitInfo>,
    /// `--max-runs` ran out before the answer held at the requested confidence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<BudgetSpent>,
    /// What the search ran over: the range's candidates, or fewer groups of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grouping: Option<Grouping>,
    /// Seconds until the answer was known and told, before the endpoint check it rested on
    /// (`elapsed_s` is the checked answer's time). None: no check followed the answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_s: Option<f64>,
}

/// How many of the range's candidates the search ran over, and why fewer: a commit that
/// changes nothing the probe's build read behaves as its neighbour (`core::buildset` has the
/// argument), so the two are one candidate. A reader who times the tool against
/// `git bisect run` sees here where probes were saved, and why none were when none were.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Grouping {
    /// The range's candidates (commits with identical tested trees already merged).
    pub candidates: usize,
    /// The groups the search ran over at its end.
    pub groups: usize,
    /// Files in what the probes' builds were seen to read (0: none learned).
    pub read_files: usize,
    /// Why nothing was folded, when nothing was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_grouped: Option<String>,
    /// The candidate each group begins with (range order; empty when nothing was folded): a
    /// candidate not listed behaves as the one before it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub starts: Vec<usize>,
}

/// What a `--confidence` bisection knew when `--max-runs` stopped it: not "untestable" but
/// "undecided", with where the first bad commit most likely is and what settling it would cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BudgetSpent {
    /// Runs made (stored and new) and the limit.
    pub runs: u64,
    pub max_runs: u64,
    /// The requested confidence, and how much of the posterior the candidates below hold.
    pub confidence: f64,
    pub mass: f64,
    /// The likeliest first bad commits, most likely first: (commit, posterior probability).
    pub candidates: Vec<CandidateMass>,
    /// Estimated runs still needed: the posterior's remaining entropy over the Z-channel
    /// capacity at the estimated reproduction rate, times the search's measured overhead.
    pub more_runs: Option<u64>,
    /// Estimated reproduction rate of the fault.
    pub rate: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CandidateMass {
    pub sha: String,
    pub probability: f64,
}

impl BisectRecord {
    /// How far a `--confidence` bisection's answer can be trusted, from every run it made
    /// (`None` for a bad endpoint, whose runs contradict the model).
    pub fn assess(&self, candidates: usize, requested: f64) -> Option<Assessment> {
        if let Conclusion::BadEndpoint { .. } = self.conclusion {
            return None;
        }
        let runs = self.probes.iter().map(|p| (p.candidate, p.verdict));
        Assessment::of(candidates, runs, &self.conclusion, requested)
    }

    pub fn info(&self, sha: &str) -> Option<&CommitInfo> {
        self.commits.iter().find(|c| c.sha == sha)
    }
}

/// `bisect --json`: everything a person or a later job needs to act on a bisection without the
/// work dir that produced it (the comment renders from this alone).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BisectResult {
    #[schemars(schema_with = "bisect_tag")]
    pub schema: String,
    /// The culprit when one was found (null when inconclusive).
    pub first_bad: Option<String>,
    /// "first bad commit", or "first fixed commit" for `--regress success`.
    pub term: String,
    pub conclusion: Conclusion,
    /// What the command exited with (before any failure to post).
    pub exit_code: i32,
    /// The commits that may be the answer: the culprit, or every one skips hide it among.
    pub candidates: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub candidate_classes: Vec<CandidateClass>,
    pub range: BisectRange,
    pub steps: usize,
    pub executed: usize,
    pub probes: Vec<BisectProbe>,
    /// `regress=<error|success|crash>[ match=<regex>]`.
    pub predicate: String,
    pub policy: String,
    pub elapsed_s: f64,
    /// Seconds until the answer was known and told, before the endpoint check it rested on
    /// (`elapsed_s` is the checked answer's). Absent: no check followed the answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_s: Option<f64>,
    /// Metadata of the endpoints and every probed commit (absent in a compacted state block).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub commits: Vec<CommitInfo>,
    /// Shell lines that repeat the probe of the answer (the prober's own steps), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reproduce: Option<String>,
    /// `--confidence`: how sure the answer is and the estimated reproduction rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<FlakySchema>")]
    pub flaky: Option<Assessment>,
    /// `--validate N`: the culprit re-run, its parent, and the revert check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation: Option<ValidationResult>,
    /// The stored runs behind the probes, so `--resume-from-issue` repeats none of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store_runs: Option<StoreRuns>,
    /// The configuration the probes ran in (`--config ID` and/or explicit configuration flags).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configuration: Option<ConfigurationInfo>,
    /// `--max-runs` spent before the answer held (the candidates and their probabilities).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<BudgetSpent>,
    /// The candidates folded by what the probes' builds read (absent: results of older versions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grouping: Option<Grouping>,
    /// The bundled reproducer every probe ran, with its arguments (absent: a `--script`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reproducer: Option<ReproducerInfo>,
    /// An endpoint that contradicts the question: what ran there and what to try.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<EndpointAdvice>,
    /// `--probe-kind backend-ops`: each probe's cases (issue 46; absent for other probes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend_ops: Option<BackendOpsSection>,
    /// `--apply`: the patches every probed tree had applied before its build.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub applied: Vec<crate::core::applied::AppliedInfo>,
    /// How it was asked and by which build of the tool (absent in results of older versions).
    #[serde(flatten)]
    pub invocation: Invocation,
}

/// The configuration of a commit bisect: which one, from where, and what flags changed in it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ConfigurationInfo {
    /// The matrix configuration id (absent: explicit flags only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// The matrix file (`embedded matrix.toml` for the binary's copy), or `flags`.
    pub source: String,
    /// The image the probes ran in (absent: the host).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// `backend=hip`, `gpu_target=gfx1151`, `wave_size=32`, launch variables, extra CMake args.
    pub settings: Vec<String>,
    /// Explicit flags that changed a value of the configuration, as `--flag V (configuration: W)`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overrides: Vec<String>,
}

impl BisectResult {
    pub fn info(&self, sha: &str) -> Option<&CommitInfo> {
        self.commits.iter().find(|c| c.sha == sha)
    }

    /// `regress=` of the predicate (`error` when it does not say).
    pub fn regress(&self) -> &str {
        self.predicate
            .split_whitespace()
            .find_map(|w| w.strip_prefix("regress="))
            .unwrap_or("error")
    }

    /// The `--match` regex of the predicate, if any.
    pub fn matcher(&self) -> Option<&str> {
        self.predicate.split_once(" match=").map(|(_, re)| re)
    }
}

/// Mirror of `flaky::Assessment` for the JSON Schema (the pure model does not derive it).
#[derive(JsonSchema)]
#[allow(dead_code)]
struct FlakySchema {
    confidence: f64,
    requested: f64,
    rate: f64,
    rate_low: f64,
    rate_high: f64,
    runs: u64,
    confirmation: Option<ConfirmationSchema>,
}

/// Mirror of `flaky::Confirmation` for the JSON Schema.
#[derive(JsonSchema)]
#[allow(dead_code)]
struct ConfirmationSchema {
    runs: u64,
    at_parent: u64,
    from: f64,
    to: f64,
    rule: Option<StopReadingsSchema>,
}

/// Mirror of `flaky::StopReadings` for the JSON Schema.
#[derive(JsonSchema)]
#[allow(dead_code)]
struct StopReadingsSchema {
    cautious: f64,
    robust: f64,
    rate_bound: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CandidateClass {
    pub sha: String,
    pub tree: String,
    /// Later commits that test the same tree (they behave the same).
    pub members: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BisectRange {
    pub good: String,
    pub bad: String,
    pub first_parent: bool,
    pub path: Option<String>,
    pub commits: usize,
    /// Distinct tested trees in the range.
    pub candidates: usize,
}

/// What test-backend-ops said at each probe: per op the cases passed and failed, the first
/// failing case lines, and the line a user pastes in the built tree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BackendOpsSection {
    pub ops: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op_params: Option<String>,
    pub probes: Vec<BackendOpsProbe>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BackendOpsProbe {
    pub sha: String,
    /// `core::kinds::backend_ops::BackendOpsRun`: device, per-op counts, first failing cases.
    #[schemars(with = "serde_json::Value")]
    pub run: crate::core::kinds::backend_ops::BackendOpsRun,
}

impl BackendOpsSection {
    /// The probe at `sha`, when its log was read.
    pub fn at(&self, sha: &str) -> Option<&crate::core::kinds::backend_ops::BackendOpsRun> {
        self.probes.iter().find(|p| p.sha == sha).map(|p| &p.run)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BisectProbe {
    pub sha: String,
    pub outcome: Outcome,
    pub verdict: Verdict,
    pub duration_s: f64,
    pub log: PathBuf,
    pub signature: Option<String>,
    /// Answered by the result store rather than run now.
    #[serde(default)]
    pub cached: bool,
    /// Position in the range: 0 is the good endpoint, `range.candidates - 1` the bad one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate: Option<usize>,
    /// ccache's hits and misses for this probe's own build, or that it is not installed.
    /// Absent: no build ran for it now (a stored probe, a test-only probe, an older result).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ccache: Option<Ccache>,
    /// Built but not tested: the artifacts were byte-identical to this commit's, whose
    /// outcome this is (issue 13).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reused_from: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ValidationResult {
    /// Runs asked for per check (`--validate N`).
    pub runs: u32,
    pub confirmed: bool,
    #[schemars(with = "Vec<serde_json::Value>")]
    pub findings: Vec<Finding>,
    #[schemars(with = "serde_json::Value")]
    pub observations: Observations,
}

/// The `store_runs` section: the prober identity once, then what a store needs per run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StoreRuns {
    pub version: u32,
    pub identity: String,
    pub runs: Vec<StoreRunEntry>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StoreRunEntry {
    pub tree: String,
    pub commit: String,
    pub run: usize,
    #[serde(default)]
    pub recorded_at: String,
    pub outcome: Outcome,
    #[serde(default)]
    pub signature: Option<String>,
    #[serde(default)]
    pub exit_code: Option<i32>,
    #[serde(default)]
    pub signal: Option<i32>,
    #[serde(default)]
    pub duration_s: f64,
    /// The output tail of a failure, kept only when a `--match` regex judges it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_text: Option<String>,
}

/// Any result document, as a reader gets it from [`read`].
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
// A handful of these exist per run; boxing Matrix would change every writer for no gain.
#[allow(clippy::large_enum_variant)]
pub enum AnyResult {
    Bisect(Box<BisectResult>),
    Matrix(MatrixResults),
    BisectConfig(Box<BisectConfigResult>),
}

impl AnyResult {
    pub fn kind(&self) -> Kind {
        match self {
            AnyResult::Bisect(_) => Kind::Bisect,
            AnyResult::Matrix(_) => Kind::Matrix,
            AnyResult::BisectConfig(_) => Kind::BisectConfig,
        }
    }
}

impl<'de> Deserialize<'de> for AnyResult {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = serde_json::Value::deserialize(d)?;
        read(v).map_err(serde::de::Error::custom)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("no \"schema\" field: not a setrows-bisect result, or one written before result schemas existed (expected one of {known})", known = known())]
    NoSchema,
    #[error("schema {0:?} is not one this setrows-bisect reads (it reads {known})", known = known())]
    Unknown(String),
    #[error("not a valid {schema} document: {message}")]
    Invalid { schema: String, message: String },
}

fn known() -> String {
    Kind::ALL.map(Kind::tag).join(", ")
}

/// Reads one result document: the `schema` field decides the type, then the whole document must
/// match it. Nothing is guessed from the shape.
pub fn read(v: serde_json::Value) -> Result<AnyResult, ReadError> {
    let tag = match v.get("schema") {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(other) => return Err(ReadError::Unknown(other.to_string())),
        None => return Err(ReadError::NoSchema),
    };
    let kind = Kind::ALL
        .into_iter()
        .find(|k| k.tag() == tag)
        .ok_or_else(|| ReadError::Unknown(tag.clone()))?;
    let invalid = |e: serde_json::Error| ReadError::Invalid {
        schema: tag.clone(),
        message: e.to_string(),
    };
    Ok(match kind {
        Kind::Bisect => AnyResult::Bisect(Box::new(serde_json::from_value(v).map_err(invalid)?)),
        Kind::Matrix => AnyResult::Matrix(serde_json::from_value(v).map_err(invalid)?),
        Kind::BisectConfig => {
            AnyResult::BisectConfig(Box::new(serde_json::from_value(v).map_err(invalid)?))
        }
    })
}
