//! The vacuous-pass guard: what a configuration asked for, compared with what the reproducer
//! and the build say really ran. A configuration that asked for CUDA graphs on a binary built
//! without them, for a wave size the device code does not run, or for a GPU the binary has no
//! code for, did not test what it names: its run is `untestable` with the reason, never a
//! `pass` (nor a `wrong_result` or `gpu_fault` that a verdict would pin on the wrong
//! configuration).
//!
//! Pure: the reproducer's `SETROWS_RESULT` facts (format 2, `repro-kernels/README.md`) and, for
//! what the features cannot prove, the build's compile definitions (`CompileDefs`, read from
//! `compile_commands.json` by the prober that knows its build dir).

use super::ReproSummary;
use crate::core::build::{Backend, Memory, Recipe};
use crate::core::outcome::SkipScope;
use crate::core::settings::DecodeSettings;
use serde::{Deserialize, Serialize};

/// What a configuration asked for. `Default` asks nothing, so nothing is checked.
#[derive(Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Expectations {
    /// The backend the run must have used (a GPU recipe that silently ran on the CPU proves
    /// nothing about the GPU).
    pub backend: Option<Backend>,
    /// `GGML_CUDA_GRAPHS` / `GGML_HIP_GRAPHS` really on (`true`) or really off (`false`).
    pub graphs: Option<bool>,
    /// Wave size of the device code that ran (checked where the reproducer reports it: the kernel).
    pub wave_size: Option<u32>,
    /// `gfx1151`, or CUDA's `90`: the binary must carry code for it.
    pub gpu_target: Option<String>,
    /// A placement other than the default (issue 26): every persistent buffer and output of
    /// the replay must be where the runtime says it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<Memory>,
    /// The decode probe's settings other than the default: the run's reported `settings` must
    /// not contradict them.
    #[serde(default, skip_serializing_if = "DecodeSettings::is_empty")]
    pub settings: DecodeSettings,
}

/// The derived text of before the `memory` field, and the field only when asked: the reproducer
/// identity hashes this text, so every stored result from before the axis keeps its key.
impl std::fmt::Debug for Expectations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("Expectations");
        d.field("backend", &self.backend)
            .field("graphs", &self.graphs)
            .field("wave_size", &self.wave_size)
            .field("gpu_target", &self.gpu_target);
        if let Some(m) = &self.memory {
            d.field("memory", m);
        }
        if !self.settings.is_empty() {
            d.field("settings", &self.settings);
        }
        d.finish()
    }
}

impl Expectations {
    /// What a build recipe asks for (the matrix and the bisect driver call this).
    pub fn from_recipe(recipe: &Recipe) -> Expectations {
        Expectations {
            backend: Some(recipe.backend),
            graphs: recipe.graphs,
            wave_size: recipe.wave_size,
            gpu_target: recipe.gpu_target.clone(),
            memory: (!recipe.memory.is_device()).then_some(recipe.memory),
            settings: DecodeSettings::default(),
        }
    }

    /// `backend=hip graphs=on wave_size=32 gpu_target=gfx1151`, the asked-for facts only.
    pub fn describe(&self) -> String {
        let mut v = Vec::new();
        if let Some(b) = self.backend {
            v.push(format!("backend={}", b.as_str()));
        }
        if let Some(g) = self.graphs {
            v.push(format!("graphs={}", if g { "on" } else { "off" }));
        }
        if let Some(w) = self.wave_size {
            v.push(format!("wave_size={w}"));
        }
        if let Some(t) = &self.gpu_target {
            v.push(format!("gpu_target={t}"));
        }
        if let Some(m) = self.memory {
            v.push(format!("memory={}", m.as_str()));
        }
        v.extend(self.settings.labels());
        v.join(" ")
    }

    /// A reproducer identity as people read it: its ` expect=` part (hashed as the struct's
    /// debug text, which must stay for stored results to stay valid) spelled as settings.
    pub fn readable_in(&self, identity: &str) -> String {
        identity.replace(
            &format!(" expect={self:?}"),
            &format!(" expect=[{}]", self.describe()),
        )
    }

    pub fn is_empty(&self) -> bool {
        *self == Expectations::default()
    }

    /// Whether the guard needs the build's compile definitions: graphs asked on a GPU backend
    /// (HIP never lists graphs in its features; CUDA only from ggml's feature API on).
    pub fn needs_compile_defs(&self) -> bool {
        self.graphs.is_some() && matches!(self.backend, Some(Backend::Hip | Backend::Cuda))
    }
}

/// What the build's compile commands define, counted over ggml's CUDA/HIP sources.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompileDefs {
    /// Where the facts came from (for the reason text).
    pub source: String,
    /// Compile commands of files under `ggml-cuda/` or `ggml-hip/`.
    pub backend_commands: usize,
    /// Of those, how many define `GGML_HIP_GRAPHS`.
    pub hip_graphs: usize,
    /// Of those, how many define `GGML_CUDA_USE_GRAPHS`.
    pub cuda_graphs: usize,
}

fn defines(command: &str, name: &str) -> bool {
    let pat = format!("-D{name}");
    command.match_indices(&pat).any(|(i, _)| {
        let after = command[i + pat.len()..].chars().next();
        match after {
            None => true,
            Some(c) if c.is_whitespace() || c == '"' || c == '\'' => true,
            // `-DX=1` defines it; `-DX=0` is still "defined" to the preprocessor (#ifdef)
            Some('=') => true,
            _ => false,
        }
    })
}

impl CompileDefs {
    /// From the text of a `compile_commands.json` (`command` or `arguments` entries).
    pub fn from_compile_commands(source: &str, json: &str) -> Option<CompileDefs> {
        let entries: Vec<serde_json::Value> = serde_json::from_str(json).ok()?;
        let mut d = CompileDefs {
            source: source.to_string(),
            ..CompileDefs::default()
        };
        for e in entries {
            let file = e.get("file").and_then(|f| f.as_str()).unwrap_or("");
            if !(file.contains("ggml-cuda/") || file.contains("ggml-hip/")) {
                continue;
            }
            let cmd = match (e.get("command"), e.get("arguments")) {
                (Some(serde_json::Value::String(c)), _) => c.clone(),
                (_, Some(serde_json::Value::Array(a))) => a
                    .iter()
                    .filter_map(|x| x.as_str())
                    .collect::<Vec<_>>()
                    .join(" "),
                _ => continue,
            };
            d.backend_commands += 1;
            d.hip_graphs += usize::from(defines(&cmd, "GGML_HIP_GRAPHS"));
            d.cuda_graphs += usize::from(defines(&cmd, "GGML_CUDA_USE_GRAPHS"));
        }
        Some(d)
    }
}

/// The backend a result says it ran on: the registry name (format 2), the kernel's `api`, or the
/// device name's prefix (format 1: `CUDA0`, `ROCm0`, `CPU`).
fn ran_backend(r: &ReproSummary) -> Option<Backend> {
    let name = [r.backend_reg.as_deref(), r.api.as_deref(), Some(&r.backend)]
        .into_iter()
        .flatten()
        .find(|s| !s.is_empty())?
        .to_ascii_lowercase();
    if name.starts_with("cuda") {
        Some(Backend::Cuda)
    } else if name.starts_with("rocm") || name.starts_with("hip") {
        Some(Backend::Hip)
    } else if name.starts_with("cpu") {
        Some(Backend::Cpu)
    } else {
        None
    }
}

/// `amdgcn-amd-amdhsa--gfx1151:sramecc-:xnack-` → `gfx1151`; `sm_90` stays.
fn bare_arch(s: &str) -> String {
    let s = s.rsplit("--").next().unwrap_or(s);
    s.split(':').next().unwrap_or(s).trim().to_ascii_lowercase()
}

/// CUDA `90`, `90-real`, `90a` against the compiled list `900` / `890,900`.
fn cuda_arch_compiled(target: &str, compiled: &str) -> bool {
    let t: String = target
        .split('-')
        .next()
        .unwrap_or(target)
        .chars()
        .filter(char::is_ascii_digit)
        .collect();
    compiled
        .split([',', ';', ' '])
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .any(|a| a == format!("{t}0") || a == t)
}

/// What the probed tree's CMake files offer, read by the prober from the checkout: whether a
/// reason is the commit's or the configuration's depends on it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TreeOptions {
    /// The tree declares the graphs option of the asked backend (`GGML_CUDA_GRAPHS`,
    /// `GGML_HIP_GRAPHS`): graphs asked and not built is then the configuration's doing (a
    /// later `-D...=OFF`, a toolchain that turns them off), not an old tree's.
    pub graphs_option: bool,
}

/// The CMake option that turns graphs on for `backend` (`None`: it has no graphs).
pub fn graphs_option(backend: Backend) -> Option<&'static str> {
    match backend {
        Backend::Cuda => Some("GGML_CUDA_GRAPHS"),
        Backend::Hip => Some("GGML_HIP_GRAPHS"),
        Backend::Cpu => None,
    }
}

/// Why a run does not test what was asked, and whether another commit could.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    pub reason: String,
    pub scope: SkipScope,
}

/// Where a reason comes from, which decides its scope.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Source {
    /// The configuration against this machine or toolchain: no commit changes it.
    Configuration,
    /// Graphs asked and not built: the configuration's unless the tree lacks the option.
    GraphsNotBuilt,
    /// Nothing in the build could prove the asked graphs (e.g. a tree whose GPU sources sit
    /// elsewhere): this tree's.
    Unproven,
}

/// Why the run does not test what was asked (`None`: it does, or nothing was asked).
/// `result` is the reproducer's summary line; `defs` the build's compile definitions, when read.
pub fn mismatch(
    exp: &Expectations,
    result: Option<&ReproSummary>,
    defs: Option<&CompileDefs>,
) -> Option<String> {
    find(exp, result, defs).map(|(reason, _)| reason)
}

/// `mismatch` with its scope: systematic unless the reason depends on what this commit's tree
/// offers (graphs asked of a tree without the option, or a build that cannot prove them).
pub fn mismatch_in(
    exp: &Expectations,
    result: Option<&ReproSummary>,
    defs: Option<&CompileDefs>,
    tree: &TreeOptions,
) -> Option<Mismatch> {
    let (reason, source) = find(exp, result, defs)?;
    let scope = match source {
        Source::Configuration => SkipScope::Systematic,
        Source::GraphsNotBuilt if tree.graphs_option => SkipScope::Systematic,
        Source::GraphsNotBuilt | Source::Unproven => SkipScope::Commit,
    };
    Some(Mismatch { reason, scope })
}

fn find(
    exp: &Expectations,
    result: Option<&ReproSummary>,
    defs: Option<&CompileDefs>,
) -> Option<(String, Source)> {
    let config = |s: String| Some((s, Source::Configuration));
    if exp.is_empty() {
        return None;
    }
    if exp.graphs == Some(true) && exp.backend == Some(Backend::Cpu) {
        return config("graphs asked for, but the CPU backend has no graphs".into());
    }
    if let Some(r) = result {
        if let (Some(want), Some(got)) = (exp.backend, ran_backend(r)) {
            if want != got {
                return config(format!(
                    "asked for the {} backend, but the reproducer ran on {} ({})",
                    want.as_str(),
                    got.as_str(),
                    r.device
                ));
            }
        }
    }
    if let Some(g) = exp.graphs {
        if let Some(why) = graphs_mismatch(exp.backend, g, result, defs) {
            return Some(why);
        }
    }
    if let Some(m) = exp.memory {
        if let Some(why) = memory_mismatch(m, result) {
            return config(why);
        }
    }
    if let Some(why) = settings_mismatch(&exp.settings, result) {
        // what llama.cpp made of a setting is the tree's (it may turn flash attention off
        // for a shape it has no kernel for): a skip of this commit
        return Some((why, Source::Unproven));
    }
    let r = result?;
    if let Some(w) = exp.wave_size {
        for (what, got) in [
            ("the device code runs wave size", r.wave_size),
            (
                "the kernel was compiled with DFLASH_WAVE_SIZE",
                r.dflash_wave_size,
            ),
        ] {
            if let Some(got) = got.filter(|g| *g != w) {
                return config(format!("wave size {w} asked for, but {what} {got}"));
            }
        }
    }
    if let Some(t) = exp.gpu_target.as_deref() {
        let arch = r.arch.as_deref().map(bare_arch);
        if let Some(a) = arch.filter(|a| exp.backend == Some(Backend::Hip) && *a != bare_arch(t)) {
            return config(format!(
                "GPU target {t} asked for, but the device code that ran is {a}"
            ));
        }
        if exp.backend == Some(Backend::Cuda) {
            if let Some(c) = r.compiled_archs.as_deref() {
                if !cuda_arch_compiled(t, c) {
                    return config(format!(
                        "CUDA arch {t} asked for, but the library was compiled for {c}"
                    ));
                }
            }
        }
    }
    None
}

/// Decode settings the run did not use: only a finished run's line can prove them, and a run
/// that asked for some and reports no `settings` at all proves none of them.
fn settings_mismatch(want: &DecodeSettings, r: Option<&ReproSummary>) -> Option<String> {
    let r = r?;
    if want.is_empty()
        || r.status == "usage"
        || r.status == "unsupported"
        || r.status == "untestable"
    {
        return None;
    }
    match &r.settings {
        None => Some(format!(
            "decode settings {} asked for, but the decode probe reports no settings",
            want.labels().join(" ")
        )),
        Some(effective) => want.contradicted_by(effective),
    }
}

/// A placement that did not take effect: asked of the configuration, so no commit does better
/// (the knob is spelled for each tree; a tree without one is a commit skip before the build).
/// Only a finished run's line can prove it; a run without one proves nothing either way.
fn memory_mismatch(want: Memory, r: Option<&ReproSummary>) -> Option<String> {
    let r = r?;
    if r.status == "usage" || r.status == "unsupported" {
        return None; // the classifier says why; no placement was made
    }
    let Some(m) = &r.memory else {
        return Some(format!(
            "memory {} asked for, but the reproducer reports no placement (a replay from before the placement proof, or a llama.cpp whose llama_context_params has no cb_eval to see its buffers)",
            want.as_str()
        ));
    };
    if m.pointer_api.is_none() {
        return Some(format!(
            "memory {} asked for, but the reproducer was built without a GPU runtime to ask where its buffers are",
            want.as_str()
        ));
    }
    let kind = want.pointer_kind();
    m.buffers
        .iter()
        .filter(|b| b.role == "persistent" || b.role == "output")
        .find(|b| b.pointer.as_deref() != Some(kind) || (want == Memory::Host && !b.is_host))
        .map(|b| {
            format!(
                "memory {} asked for, but {} is {} memory ({} buffer, {})",
                want.as_str(),
                b.name,
                b.pointer.as_deref().unwrap_or("unknown"),
                b.buft,
                m.pointer_api.as_deref().unwrap_or("")
            )
        })
}

fn graphs_mismatch(
    backend: Option<Backend>,
    want: bool,
    r: Option<&ReproSummary>,
    defs: Option<&CompileDefs>,
) -> Option<(String, Source)> {
    let onoff = if want { "on" } else { "off" };
    let not_built = |s: String| Some((s, Source::GraphsNotBuilt));
    let from_build = |macro_name: &str, count: fn(&CompileDefs) -> usize| {
        let Some(d) = defs.filter(|d| d.backend_commands > 0) else {
            return Some((format!(
                "graphs {onoff} asked for, but nothing proves it: no compile commands of ggml's GPU sources to read {macro_name} from{}",
                defs.map(|d| format!(" ({})", d.source)).unwrap_or_default()
            ), Source::Unproven));
        };
        let n = count(d);
        match (want, n) {
            (true, 0) => not_built(format!(
                "graphs on asked for, but none of the {} ggml GPU compile commands defines {macro_name} ({})",
                d.backend_commands, d.source
            )),
            (false, n) if n > 0 => not_built(format!(
                "graphs off asked for, but {n} of the {} ggml GPU compile commands define {macro_name} ({})",
                d.backend_commands, d.source
            )),
            _ => None,
        }
    };
    match backend {
        // ggml's HIP build defines GGML_HIP_GRAPHS and never lists USE_GRAPHS: the build proves it.
        Some(Backend::Hip) => from_build("GGML_HIP_GRAPHS", |d| d.hip_graphs),
        Some(Backend::Cuda) => {
            match r.and_then(|r| r.features.as_ref().zip(r.features_source.as_deref())) {
                Some((f, "ggml_backend_get_features")) => {
                    let listed = f.contains_key("USE_GRAPHS");
                    match (want, listed) {
                    (true, false) => not_built(
                        "CUDA graphs on asked for, but the backend's features do not list USE_GRAPHS (built without GGML_CUDA_GRAPHS)".into(),
                    ),
                    (false, true) => not_built(
                        "CUDA graphs off asked for, but the backend's features list USE_GRAPHS".into(),
                    ),
                    _ => None,
                }
                }
                // ggml too old for the feature API (or a format-1 line): the build has to say.
                _ => from_build("GGML_CUDA_USE_GRAPHS", |d| d.cuda_graphs),
            }
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests;
