//! `--dry-run --json FILE`: a bisection's plan, typed like the result documents so that
//! `setrows-bisect schema plan` describes exactly what is written (a workflow checks a plan
//! before it spends a runner on it).

use super::*;

/// The schema tag of a plan (`setrows-bisect/plan/1`).
pub fn plan_tag() -> String {
    format!("setrows-bisect/plan/{VERSION}")
}

fn plan_tag_schema(_: &mut SchemaGenerator) -> Schema {
    schemars::json_schema!({
        "type": "string",
        "const": plan_tag(),
        "description": "Which document this is and its version; readers refuse other values."
    })
}

/// What a bisection would do, from the same resolution a run uses; nothing was made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PlanDocument {
    #[schemars(schema_with = "plan_tag_schema")]
    pub schema: String,
    /// The same range a result states (`BisectRange`).
    pub range: BisectRange,
    /// The worst-case probe count the search keeps (endpoints included).
    pub expected_probes: usize,
    /// Which endpoints a run tests, in words.
    pub endpoints: String,
    /// Candidates the store already answers (null: the store key is known only once a run
    /// starts, e.g. in a container).
    pub stored: Option<usize>,
    pub predicate: String,
    /// `--regress build`: every probe stops after its build.
    pub build_only: bool,
    pub configuration: Option<ConfigurationInfo>,
    /// The bundled reproducer (null for a `--script` probe).
    pub reproducer: Option<PlannedReproducer>,
    /// What the user's `--repro-arg`s replaced of the default arguments, one line each.
    pub replaced: Vec<String>,
    pub work_dir: PathBuf,
    /// The image the steps run in (null: the host).
    pub image: Option<String>,
    /// The bundled reproducer's CMake line, spelled for the `--bad` tree.
    pub build: Option<Vec<String>>,
    /// The memory placement's switches (null: device memory).
    pub memory: Option<String>,
    /// The bisection's store key (null when unknown before a run).
    pub store_key: Option<String>,
}

/// The reproducer as a plan states it: its arguments and the command line they make.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PlannedReproducer {
    pub program: String,
    pub args: Vec<String>,
    pub source: String,
    pub command: String,
    /// How long a run is, in words (steps, checks).
    pub extent: String,
}

impl PlannedReproducer {
    pub fn of(r: &ReproducerInfo) -> PlannedReproducer {
        PlannedReproducer {
            program: r.program.clone(),
            args: r.args.clone(),
            source: r.source.clone(),
            command: r.command(),
            extent: r.extent(),
        }
    }
}
