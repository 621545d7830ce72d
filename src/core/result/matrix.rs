//! The matrix document: configurations x revisions, one cell each (`matrix-results.json`).

use super::*;

/// A revision checked out for the matrix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Rev {
    /// As the user wrote it.
    pub rev: String,
    pub sha: String,
    /// Tree id of the commit: with the prober identity, the key of stored results.
    #[serde(default)]
    pub tree: String,
    #[serde(skip)]
    pub checkout: PathBuf,
    #[serde(skip)]
    pub facts: TreeFacts,
}

/// One configuration at one revision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Cell {
    pub config: String,
    pub rev: String,
    pub sha: String,
    pub outcome: Outcome,
    pub signature: Option<String>,
    pub duration_s: f64,
    pub build_s: f64,
    pub test_s: f64,
    pub attempts: u32,
    pub log: PathBuf,
    /// Image, toolchain and device facts (absent in a compacted state block).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub provenance: BTreeMap<String, String>,
    /// Answered by the result store (an earlier run of the same tree and configuration).
    #[serde(default)]
    pub cached: bool,
    /// ccache's hits and misses for this cell's own build, as a bisect probe's (`BisectProbe`).
    /// Absent: no build ran for it now (a stored cell, an older result).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ccache: Option<Ccache>,
}

/// Everything a matrix run produced (the `matrix-results.json` file).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MatrixResults {
    #[schemars(schema_with = "matrix_tag")]
    pub schema: String,
    pub matrix: String,
    pub engine: String,
    pub revisions: Vec<Rev>,
    pub configs: Vec<ConfigRow>,
    pub cells: Vec<Cell>,
    /// `matrix --build-only`: every cell stopped after its build (`built` / `build_failed`),
    /// so a failed build is the finding here, not a skip.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub build_only: bool,
    /// `--apply`: the patches every cell's tree had applied before its build.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub applied: Vec<crate::core::applied::AppliedInfo>,
    /// How it was asked and by which build of the tool (absent in results of older versions).
    #[serde(flatten)]
    pub invocation: Invocation,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ConfigRow {
    pub id: String,
    pub label: String,
    pub backend: Backend,
    pub image: Option<String>,
}

impl ConfigRow {
    /// The row a results document keeps for a configuration it plans (a run, or a cut-off
    /// document written for a run that wrote none): the same fields whoever writes it.
    pub fn of(c: &crate::core::matrix::Config) -> ConfigRow {
        ConfigRow {
            id: c.id.clone(),
            label: c.label(),
            backend: c.backend,
            image: c.image.clone(),
        }
    }
}

impl MatrixResults {
    /// Every planned cell (each configuration at each revision) that has no row yet becomes an
    /// `infra_error` whose signature is `reason`: a cell the run never finished (its job was
    /// cancelled or timed out, its runner lost) must still show in the table, saying why, and
    /// never read as "not run" or vanish. The one rule for the workflow's cut-off step and the
    /// report's lost legs. Returns how many cells it added.
    pub fn cut_off(&mut self, reason: &str) -> usize {
        let mut added = Vec::new();
        for rev in &self.revisions {
            for c in &self.configs {
                if self
                    .cells
                    .iter()
                    .any(|x| x.config == c.id && x.sha == rev.sha)
                {
                    continue;
                }
                added.push(Cell {
                    config: c.id.clone(),
                    rev: rev.rev.clone(),
                    sha: rev.sha.clone(),
                    outcome: Outcome::InfraError,
                    signature: Some(reason.to_string()),
                    duration_s: 0.0,
                    build_s: 0.0,
                    test_s: 0.0,
                    attempts: 0,
                    log: PathBuf::new(),
                    provenance: BTreeMap::new(),
                    cached: false,
                    ccache: None,
                });
            }
        }
        let n = added.len();
        self.cells.extend(added);
        n
    }
}
