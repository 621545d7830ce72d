//! The `bisect-config` document: the first failing value along one configuration axis at a
//! fixed commit, and with `--good-rev` the commit bisection in that configuration.

use super::*;

/// `bisect-config`: the first failing value along one ordered axis at a fixed commit, and with
/// `--good-rev` the commit bisection in that configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BisectConfigResult {
    #[schemars(schema_with = "config_tag")]
    pub schema: String,
    pub axis: String,
    pub ladder: Vec<String>,
    pub rev: String,
    pub sha: String,
    pub predicate: String,
    /// Indices are into `ladder`.
    pub conclusion: Conclusion,
    pub exit_code: i32,
    pub first_failing: Option<String>,
    pub first_failing_config: Option<ConfigDetails>,
    /// In ladder order.
    pub probes: Vec<ConfigProbe>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit_bisect: Option<Box<BisectResult>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ConfigProbe {
    pub value: String,
    pub config: String,
    pub verdict: Verdict,
    pub cell: Cell,
}

/// One configuration spelled out: what `matrix --list --format json` prints, and the culprit
/// configuration of a `bisect-config` run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ConfigDetails {
    pub id: String,
    pub label: String,
    pub values: BTreeMap<String, AxisValue>,
    pub backend: Backend,
    pub image: Option<String>,
    pub cmake_args: Vec<String>,
    pub launch_env: Vec<String>,
    pub repro_args: Vec<String>,
}

impl ConfigDetails {
    /// `c` spelled out as its probes get it (today's CMake and environment spellings).
    pub fn of(c: &crate::core::matrix::Config) -> ConfigDetails {
        ConfigDetails {
            id: c.id.clone(),
            label: c.label(),
            values: c.values.clone(),
            backend: c.backend,
            image: c.image.clone(),
            cmake_args: c.recipe.cmake_args(&Default::default()),
            launch_env: c
                .recipe
                .run_env(&c.launch.env(), &Default::default())
                .into_iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect(),
            repro_args: c.recipe.reproducer_args(&c.repro_args),
        }
    }
}
