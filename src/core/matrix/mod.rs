//! `matrix.toml`: the configurations a matrix run tests, and their deterministic expansion.
//!
//! The `[matrix]` table follows GitHub Actions matrix semantics so people who write workflows
//! read it without a manual: the cartesian product of the axes (each axis in file order), then
//! `exclude` (an entry removes every combination it matches on all its keys), then `include`
//! (an entry is merged into every combination whose *original* values it does not contradict,
//! and becomes a combination of its own when it fits none). Unknown keys are errors, and every
//! error names the file, line, column and key, because a typo in a nightly matrix otherwise
//! costs a night.
//!
//! Each configuration's id is a hash of its own values only, so adding an axis value or
//! reordering the file leaves the ids (and stored results, and GitHub comments that cite them)
//! of every other configuration unchanged.

use crate::core::build::{Backend, Launch, Memory, Recipe};
use crate::core::settings::DecodeSettings;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::ops::Range;
use toml::Spanned;

mod check;
mod expand;
mod position;
mod resolve;
pub use crate::core::build::DECODE_MEMORY;
pub use crate::core::kinds::{DecodeSettingsFrom, ProbeKind};
pub use check::typed;
use check::{check_type, scalar};
use expand::{expand, Axis, Combo};
use position::{err_no_span, key_of_toml_error, Ctx};
pub use position::{line_col, MatrixError};

/// One axis value: matrix values are strings, integers or booleans.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(untagged)]
pub enum Value {
    Bool(bool),
    Int(i64),
    Str(String),
}

impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Value::Bool(b) => write!(f, "{b}"),
            Value::Int(i) => write!(f, "{i}"),
            Value::Str(s) => f.write_str(s),
        }
    }
}

macro_rules! axes {
    ($($name:ident),* $(,)?) => {
        /// Keys a combination may carry, in expansion order.
        pub const AXES: &[&str] = &[$(stringify!($name)),*];

        #[derive(Debug, Default, Deserialize)]
        #[serde(deny_unknown_fields)]
        struct RawMatrix {
            $($name: Option<Spanned<Vec<Spanned<toml::Value>>>>,)*
            #[serde(default)]
            include: Vec<Spanned<RawRule>>,
            #[serde(default)]
            exclude: Vec<Spanned<RawRule>>,
        }

        #[derive(Debug, Deserialize)]
        #[serde(deny_unknown_fields)]
        struct RawRule {
            $($name: Option<Spanned<toml::Value>>,)*
        }

        impl RawMatrix {
            fn axes(&self) -> Vec<(&'static str, &Spanned<Vec<Spanned<toml::Value>>>)> {
                let mut v = Vec::new();
                $(if let Some(a) = &self.$name { v.push((stringify!($name), a)); })*
                v
            }
        }

        impl RawRule {
            fn pairs(&self) -> Vec<(&'static str, &Spanned<toml::Value>)> {
                let mut v = Vec::new();
                $(if let Some(a) = &self.$name { v.push((stringify!($name), a)); })*
                v
            }
        }
    };
}

axes!(
    backend,
    rocm,
    cuda,
    image,
    gfx,
    cuda_arch,
    wave_size,
    graphs,
    hip_no_vmm,
    rocwmma_fattn,
    memory,
    launch,
    params,
    // the decode probe's settings (`core::settings::SETTINGS`; tests/matrix_expand.rs checks
    // that these are exactly its axes)
    flash_attn,
    cache_type_k,
    cache_type_v,
    ctx_size,
    batch_size,
    ubatch_size,
    parallel,
    n_gpu_layers,
    weight_type,
    head_dim,
    gqa,
    n_head_kv,
    sliding_window,
);

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    revisions: Vec<String>,
    #[serde(default)]
    probe: RawProbe,
    #[serde(default)]
    images: BTreeMap<String, Spanned<String>>,
    #[serde(default)]
    matrix: RawMatrix,
    #[serde(default)]
    launch: BTreeMap<String, Launch>,
    #[serde(default)]
    params: BTreeMap<String, RawParams>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawParams {
    #[serde(default)]
    args: Vec<String>,
}

/// How each configuration is tested.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawProbe {
    /// `replay` (the bundled reproducer, the default), `decode`, `script` or `backend-ops`.
    #[serde(default)]
    pub kind: ProbeKind,
    /// `backend-ops`: the ops `test-backend-ops -o` runs, one run each (`--op`).
    #[serde(default)]
    pub ops: Vec<String>,
    /// `backend-ops`: its `-p` filter of the cases' parameters (`--op-params`).
    pub op_params: Option<String>,
    /// `script`: build step, run in `$WORK`; sees `$SETROWS_CMAKE_ARGS`.
    pub build: Option<String>,
    /// `script`: the test, run in `$SRC`, `git bisect run` exit codes.
    pub script: Option<String>,
    #[serde(default, deserialize_with = "timeout_in_range")]
    pub timeout_s: Option<u64>,
    /// CMake targets the replay builds (default: the reproducer only).
    #[serde(default)]
    pub targets: Vec<String>,
    /// Extra `-D` options for every configuration's ggml build (e.g. `-DGGML_CUDA_FA=OFF` to keep
    /// CUDA builds short when flash attention is not what is being tested).
    #[serde(default)]
    pub cmake_args: Vec<String>,
}

impl RawProbe {
    /// What its kind's definition reads of the table (`core::kinds::Kind::spec`). A kind's
    /// value a matrix file has no key for stays unset, and its definition's `table_lacks`
    /// says so: a new kind's value is no new line here.
    #[allow(clippy::needless_update)]
    pub fn table(&self) -> crate::core::kinds::Table<'_> {
        crate::core::kinds::Table {
            build: self.build.as_deref(),
            script: self.script.as_deref(),
            ops: &self.ops,
            op_params: self.op_params.as_deref(),
            ..Default::default()
        }
    }
}

/// Longest probe timeout a file or flag may set: a week. 0 would kill every probe at once and a
/// larger value is a typo (minutes for seconds) that turns a hung GPU into a lost night or more,
/// so both are refused before the first probe instead.
pub const MAX_TIMEOUT_S: u64 = 7 * 24 * 3600;

/// `[probe] timeout_s` in 1..=MAX_TIMEOUT_S; the error is raised inside the TOML parse so that
/// it points at the value's line and column like every other error in the file.
fn timeout_in_range<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    let v = u64::deserialize(d)?;
    if v == 0 || v > MAX_TIMEOUT_S {
        return Err(serde::de::Error::custom(format!(
            "[probe] timeout_s = {v} is out of range (1 to {MAX_TIMEOUT_S} seconds, a week)"
        )));
    }
    Ok(Some(v))
}

/// One expanded configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Config {
    /// Stable short id: a hash of `values`.
    pub id: String,
    /// The combination as written (axis -> value).
    pub values: BTreeMap<String, Value>,
    pub backend: Backend,
    /// Container image; `None` runs on the host only.
    pub image: Option<String>,
    pub recipe: Recipe,
    pub launch: Launch,
    /// Reproducer flags from the `params` preset.
    pub repro_args: Vec<String>,
    /// The decode probe's settings (axes of `core::settings`), only values other than the
    /// default.
    pub settings: DecodeSettings,
}

impl Config {
    /// `hip rocm=6.4.1 gfx=gfx1151 ...` in axis order (the id is separate).
    pub fn label(&self) -> String {
        AXES.iter()
            .filter_map(|k| self.values.get(*k).map(|v| (k, v)))
            // a default is no value, as in the id
            .filter(|(k, v)| !is_default(k, v))
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// A parsed and expanded matrix file.
#[derive(Debug, Clone)]
pub struct Matrix {
    pub file: String,
    pub revisions: Vec<String>,
    pub probe: RawProbe,
    pub configs: Vec<Config>,
    /// Each axis's values in file order (the ladders `bisect-config` walks).
    pub axis_values: BTreeMap<String, Vec<Value>>,
    images: BTreeMap<String, String>,
    launch: BTreeMap<String, Launch>,
    params: BTreeMap<String, Vec<String>>,
}

pub fn parse(file: &str, text: &str) -> Result<Matrix, MatrixError> {
    let cx = Ctx { file, text };
    let raw: RawFile = toml::from_str(text).map_err(|e| {
        let span = e.span();
        let key = key_of_toml_error(text, e.message(), span.clone());
        // toml's messages can span lines ("invalid table header\nexpected `.`, `]`"); an
        // error is one line on the terminal like every other.
        let one_line = e.message().split_whitespace().collect::<Vec<_>>().join(" ");
        cx.err(span.unwrap_or(0..0), &key, one_line)
    })?;
    if let Some((key, why)) = raw.probe.kind.def().table_lacks(&raw.probe.table()) {
        return Err(err_no_span(file, key, why));
    }
    if let Some(p) = &raw.probe.op_params {
        if let Err(e) = regex::Regex::new(p) {
            let e = e.to_string().lines().last().unwrap_or("").to_string();
            return Err(err_no_span(
                file,
                "probe.op_params",
                format!("not a regex: {e}"),
            ));
        }
    }
    let mut axis_values = BTreeMap::new();
    let mut axes: Vec<Axis<'_>> = Vec::new();
    for (name, list) in raw.matrix.axes() {
        if list.get_ref().is_empty() {
            return Err(cx.err(
                list.span(),
                &format!("matrix.{name}"),
                "an axis needs at least one value",
            ));
        }
        let mut vals = Vec::new();
        for v in list.get_ref() {
            let value = scalar(&cx, &format!("matrix.{name}"), v)?;
            check_type(&cx, name, &value, v.span())?;
            vals.push((value, v.span()));
        }
        axis_values.insert(
            name.to_string(),
            vals.iter().map(|(v, _)| v.clone()).collect(),
        );
        axes.push((name, vals));
    }
    let rules = |list: &[Spanned<RawRule>], what: &str| -> Result<Vec<Combo>, MatrixError> {
        let mut out = Vec::new();
        for (i, r) in list.iter().enumerate() {
            let pairs = r.get_ref().pairs();
            if pairs.is_empty() {
                return Err(cx.err(
                    r.span(),
                    &format!("matrix.{what}[{i}]"),
                    "an empty rule matches everything",
                ));
            }
            let mut c = Combo::new();
            for (k, v) in pairs {
                let key = format!("matrix.{what}[{i}].{k}");
                let value = scalar(&cx, &key, v)?;
                check_type(&cx, k, &value, v.span())?;
                c.insert(k.to_string(), (value, v.span()));
            }
            out.push(c);
        }
        Ok(out)
    };
    let excludes = rules(&raw.matrix.exclude, "exclude")?;
    let includes = rules(&raw.matrix.include, "include")?;
    for (i, ex) in excludes.iter().enumerate() {
        for (k, (_, span)) in ex {
            if !axis_values.contains_key(k) {
                return Err(cx.err(
                    span.clone(),
                    &format!("matrix.exclude[{i}].{k}"),
                    format!("`{k}` is not an axis of the matrix, so this rule can never match"),
                ));
            }
        }
    }
    let combos = expand(&axes, &excludes, &includes);
    let images: BTreeMap<String, String> = raw
        .images
        .iter()
        .map(|(k, v)| (k.clone(), v.get_ref().clone()))
        .collect();
    for (k, v) in &raw.images {
        if Backend::parse(k).is_none() {
            return Err(cx.err(
                v.span(),
                &format!("images.{k}"),
                "images are keyed by backend: hip, cuda or cpu",
            ));
        }
    }
    let mut m = Matrix {
        file: file.into(),
        revisions: raw.revisions,
        probe: raw.probe,
        configs: Vec::new(),
        axis_values,
        images,
        launch: raw.launch,
        params: raw.params.into_iter().map(|(k, v)| (k, v.args)).collect(),
    };
    let mut seen = std::collections::HashSet::new();
    for combo in combos {
        let config = m.resolve(&cx, &combo)?;
        if seen.insert(config.id.clone()) {
            m.configs.push(config);
        }
    }
    Ok(m)
}

/// Whether `value` is the default of `axis`, which a configuration's id and label leave out:
/// configurations from before an axis existed (`memory`, the decode settings) keep their ids,
/// and the comments and stored runs that cite them.
pub fn is_default(axis: &str, value: &Value) -> bool {
    if axis == "memory" {
        return value.to_string() == Memory::Device.as_str();
    }
    crate::core::settings::by_axis(axis).is_some_and(|s| s.is_default(&value.to_string()))
}

/// Short stable id of a combination's values.
pub fn config_id(values: &BTreeMap<String, Value>) -> String {
    let mut values = values.clone();
    values.retain(|k, v| !is_default(k, v));
    let canon = serde_json::to_string(&values).unwrap_or_default();
    crate::core::id::of_text(&canon, 8)
}

impl Matrix {
    /// The reproducer arguments of `[params.NAME]` (`None`: no such table).
    pub fn params(&self, name: &str) -> Option<&[String]> {
        self.params.get(name).map(Vec::as_slice)
    }
    /// The configuration with one axis set to `value` (for config bisection): re-resolved so the
    /// image, recipe and id follow.
    pub fn with_value(
        &self,
        base: &Config,
        axis: &str,
        value: &Value,
    ) -> Result<Config, MatrixError> {
        let text = String::new();
        let cx = Ctx {
            file: &self.file,
            text: &text,
        };
        let mut combo: Combo = base
            .values
            .iter()
            .map(|(k, v)| (k.clone(), (v.clone(), 0..0)))
            .collect();
        combo.insert(axis.to_string(), (value.clone(), 0..0));
        check_type(&cx, axis, value, 0..0)?;
        self.resolve(&cx, &combo)
    }

    pub fn find(&self, id: &str) -> Option<&Config> {
        self.configs.iter().find(|c| c.id == id)
    }
}
