//! The one resolved configuration: everything a probe needs to be built and run the same way
//! everywhere (image, backend, recipe, launch environment, reproducer kind and arguments,
//! timeout). A matrix cell (`from_matrix`) and a commit bisect (`from_matrix` for `--config`,
//! `for_backend` for explicit flags, then `apply`) both end here, and `run::probers` makes the
//! prober from it: one construction path, so the same configuration reached either way has
//! the same `identity` and shares stored results, and two configurations never do.
//!
//! Pure: no files, processes or clap.

use crate::core::build::{Backend, Memory, Recipe};
use crate::core::matrix::{Config, RawProbe};
use crate::core::result::ConfigurationInfo;
use crate::core::settings::{DecodeSettings, Setting};

mod decode;
pub mod meaning;
pub mod options;
pub use crate::core::kinds::{ProbeKind, ProbeSpec};
pub use meaning::{meaningless, Meaningless};

/// The GPU target `--backend hip` means when no `--gpu-target` is given: the subject.
pub const DEFAULT_HIP_TARGET: &str = "gfx1151";

/// The `[probe]` table of a matrix, as its kind's definition reads it.
pub fn spec_of(probe: &RawProbe) -> ProbeSpec {
    probe.kind.def().spec(&probe.table())
}

/// A configuration with every value a probe needs, whatever it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    /// The matrix id (`None`: explicit flags only).
    pub id: Option<String>,
    pub label: Option<String>,
    /// The matrix file it came from (`None`: flags).
    pub source: Option<String>,
    pub backend: Backend,
    /// The image probes run in; `None`: the host.
    pub image: Option<String>,
    pub recipe: Recipe,
    /// Environment of the test step (launch settings, then `--launch-env`).
    pub launch_env: Vec<(String, String)>,
    pub probe: ProbeSpec,
    pub repro_args: Vec<String>,
    /// Seconds a step may take (`None`: the prober's defaults).
    pub timeout_s: Option<f64>,
    /// The probe stops after the build (`--regress build`, `matrix --build-only`): no test
    /// runs, the outcome is `built` or `build_failed`, and no GPU is needed.
    pub build_only: bool,
    /// The decode probe's llama.cpp settings and model (`core::settings`); empty: the defaults.
    pub settings: DecodeSettings,
    /// What the user's `--repro-arg`s replaced of the configuration's own arguments, one line
    /// each (`options::merge`): the plan's first lines. Not part of the identity.
    pub replaced: Vec<String>,
    /// `--apply`: patches applied to every probed tree before its build, in order (part of
    /// the identity: a patched tree's result never answers for the unpatched tree).
    pub applied: Vec<crate::core::applied::AppliedPatch>,
}

/// Explicit flags of a commit bisect; `None`/empty leaves the configuration's value.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Flags {
    pub backend: Option<Backend>,
    pub image: Option<String>,
    pub gpu_target: Option<String>,
    pub wave_size: Option<u32>,
    pub graphs: Option<bool>,
    /// `--memory device|unified|host`.
    pub memory: Option<Memory>,
    /// `K=V` pairs; a key already set is replaced, a new one appended.
    pub launch_env: Vec<(String, String)>,
    /// Appended after the configuration's own (CMake: the last wins).
    pub cmake_args: Vec<String>,
    /// Added to the configuration's reproducer arguments; one naming the same option as a
    /// configured one replaces it (`options::merge`).
    pub repro_args: Vec<String>,
    /// The probe a flag chose over the configuration's (`--script`/`--build`, `--probe-kind
    /// decode`, `--probe-kind backend-ops` with its `--op`s); `None`: the configuration's.
    pub probe: Option<ProbeSpec>,
    pub timeout_s: Option<f64>,
    /// The decode probe's settings given as flags (`--flash-attn on`), values parsed.
    pub settings: Vec<(&'static Setting, String)>,
}

impl Resolved {
    /// A matrix configuration with the matrix's `[probe]` settings.
    pub fn from_matrix(c: &Config, probe: &RawProbe, file: &str) -> Resolved {
        let kind = spec_of(probe);
        Resolved {
            id: Some(c.id.clone()),
            label: Some(c.label()),
            source: Some(file.to_string()),
            backend: c.backend,
            image: c.image.clone(),
            recipe: c.recipe.clone(),
            launch_env: c.launch.env(),
            // A `[params.*]` preset is the replay's arguments: nothing test-backend-ops reads.
            repro_args: if kind.def().takes_repro_args() {
                c.repro_args.clone()
            } else {
                Vec::new()
            },
            probe: kind,
            timeout_s: probe.timeout_s.map(|t| t as f64),
            build_only: false,
            settings: c.settings.clone(),
            replaced: Vec::new(),
            applied: Vec::new(),
        }
    }

    /// No configuration: `backend`'s plain recipe on the host, the bundled reproducer.
    pub fn for_backend(backend: Backend) -> Resolved {
        Resolved {
            id: None,
            label: None,
            source: None,
            backend,
            image: None,
            recipe: Recipe::new(backend),
            launch_env: Vec::new(),
            probe: ProbeSpec::default(),
            repro_args: Vec::new(),
            timeout_s: None,
            build_only: false,
            settings: DecodeSettings::default(),
            replaced: Vec::new(),
            applied: Vec::new(),
        }
    }

    /// Applies explicit flags; returns one line per value a flag changed (`--wave-size 64
    /// (configuration: 32)`), which the report shows. A flag equal to the configuration's value
    /// changes nothing and is not listed.
    pub fn apply(&mut self, f: &Flags) -> Vec<String> {
        let mut changed = Vec::new();
        let show = |v: Option<String>| v.unwrap_or_else(|| "unset".into());
        if let Some(b) = f.backend.filter(|b| *b != self.backend) {
            changed.push(format!(
                "--backend {} (configuration: {})",
                b.as_str(),
                self.backend.as_str()
            ));
            let old = std::mem::replace(&mut self.recipe, Recipe::new(b));
            // Keep what a backend change does not invalidate.
            self.recipe.extra_cmake_args = old.extra_cmake_args;
            self.recipe.graphs = old.graphs;
            self.recipe.memory = old.memory;
            self.backend = b;
        }
        if let Some(i) = f.image.as_ref().filter(|i| Some(*i) != self.image.as_ref()) {
            changed.push(format!(
                "--image {i} (configuration: {})",
                show(self.image.clone())
            ));
            self.image = Some(i.clone());
        }
        if let Some(t) = f
            .gpu_target
            .as_ref()
            .filter(|t| Some(*t) != self.recipe.gpu_target.as_ref())
        {
            changed.push(format!(
                "--gpu-target {t} (configuration: {})",
                show(self.recipe.gpu_target.clone())
            ));
            self.recipe.gpu_target = Some(t.clone());
        }
        if let Some(w) = f.wave_size.filter(|w| Some(*w) != self.recipe.wave_size) {
            changed.push(format!(
                "--wave-size {w} (configuration: {})",
                show(self.recipe.wave_size.map(|w| w.to_string()))
            ));
            self.recipe.wave_size = Some(w);
        }
        if let Some(g) = f.graphs.filter(|g| Some(*g) != self.recipe.graphs) {
            let onoff = |b: bool| if b { "on" } else { "off" }.to_string();
            changed.push(format!(
                "--graphs {} (configuration: {})",
                onoff(g),
                show(self.recipe.graphs.map(onoff))
            ));
            self.recipe.graphs = Some(g);
        }
        if let Some(m) = f.memory.filter(|m| *m != self.recipe.memory) {
            changed.push(format!(
                "--memory {} (configuration: {})",
                m.as_str(),
                self.recipe.memory.as_str()
            ));
            self.recipe.memory = m;
        }
        for (k, v) in &f.launch_env {
            match self.launch_env.iter_mut().find(|(n, _)| n == k) {
                Some((_, old)) if old == v => {}
                Some((_, old)) => {
                    changed.push(format!("--launch-env {k}={v} (configuration: {k}={old})"));
                    *old = v.clone();
                }
                None => {
                    changed.push(format!("--launch-env {k}={v} (configuration: unset)"));
                    self.launch_env.push((k.clone(), v.clone()));
                }
            }
        }
        for a in &f.cmake_args {
            if !self.recipe.extra_cmake_args.contains(a) {
                changed.push(format!("--cmake-arg {a} (added)"));
                self.recipe.extra_cmake_args.push(a.clone());
            }
        }
        // `--build` alone is a build-only probe's own build (the command line allows it with
        // `--regress build` only): no test to name.
        if let Some(new) = f.probe.as_ref().filter(|p| **p != self.probe) {
            let def = new.def();
            // A script replaces the configuration's probe whatever it was; a bundled kind
            // says which it replaced, and another kind's arguments mean nothing to it (a
            // user's are added below).
            let was = if def.is_bundled() {
                self.probe.name()
            } else {
                "its own probe"
            };
            changed.push(format!("{} (configuration: {was})", def.flag_line(new)));
            if def.is_bundled() {
                self.repro_args.clear();
            }
            self.probe = new.clone();
        }
        // Added to the configuration's arguments (after the probe kind is known: its program's
        // options decide what names the same setting); a default is replaced only by the same
        // option, and `replaced` says which.
        if !f.repro_args.is_empty() {
            let table = options::options_of(&self.probe).map_or(&[][..], |(_, t)| t);
            let (merged, replaced) = options::merge(&self.repro_args, &f.repro_args, table);
            if merged != self.repro_args {
                changed.push(format!(
                    "--repro-arg {} (configuration: {})",
                    f.repro_args.join(" "),
                    self.repro_args.join(" ")
                ));
            }
            self.repro_args = merged;
            self.replaced = replaced;
        }
        changed.extend(self.apply_settings(&f.settings));
        if let Some(t) = f.timeout_s.filter(|t| Some(*t) != self.timeout_s) {
            changed.push(format!(
                "--timeout {t} (configuration: {})",
                show(self.timeout_s.map(|t| t.to_string()))
            ));
            self.timeout_s = Some(t);
        }
        changed
    }

    /// `--backend hip` without a GPU target means the subject, gfx1151. Returns the note to
    /// print when it filled the target in.
    pub fn default_target(&mut self) -> Option<String> {
        (self.backend == Backend::Hip && self.recipe.gpu_target.is_none()).then(|| {
            self.recipe.gpu_target = Some(DEFAULT_HIP_TARGET.into());
            format!("--backend hip: building for {DEFAULT_HIP_TARGET} (the Strix Halo subject; --gpu-target to change)")
        })
    }

    /// What the probe's store key says about the configuration: every value that changes a
    /// build or a run, and nothing that only names it (id, label, file) or bounds it (timeout),
    /// so `--config ID` and the same values given as flags share results.
    pub fn identity(&self) -> String {
        let mut recipe = self.recipe.clone();
        // Whether ccache wraps the compiler is where the probe runs, not what it tests.
        recipe.ccache = false;
        if self.build_only {
            // What only the test reads (launch settings, reproducer arguments, the test
            // script) is left out: configurations that build alike share one build's result.
            let probe = self.probe.identity(true);
            return format!(
                "configuration v1 build-only (no test runs)\nbackend={}\nimage={}\nrecipe={}\nprobe={probe}\n{}",
                self.backend.as_str(),
                self.image.as_deref().unwrap_or("host"),
                recipe.identity(),
                crate::core::applied::identity(&self.applied),
            );
        }
        let probe = self.probe.identity(false);
        // Only values other than the default are held: a configuration that sets none keeps
        // the key every result stored before the settings was written under.
        let decode = if self.settings.is_empty() {
            String::new()
        } else {
            format!("decode={}\n", self.settings.labels().join(" "))
        };
        let applied = crate::core::applied::identity(&self.applied);
        format!(
            "configuration v1\nbackend={}\nimage={}\nrecipe={}\nlaunch={:?}\nrepro_args={:?}\nprobe={probe}\n{decode}{applied}",
            self.backend.as_str(),
            self.image.as_deref().unwrap_or("host"),
            recipe.identity(),
            self.launch_env,
            self.repro_args,
        )
    }

    /// What the report says about the configuration.
    pub fn info(&self, overrides: Vec<String>) -> ConfigurationInfo {
        let mut settings = vec![format!("backend={}", self.backend.as_str())];
        if let Some(t) = &self.recipe.gpu_target {
            settings.push(format!("gpu_target={t}"));
        }
        if let Some(w) = self.recipe.wave_size {
            settings.push(format!("wave_size={w}"));
        }
        if let Some(g) = self.recipe.graphs {
            settings.push(format!("graphs={g}"));
        }
        if !self.recipe.memory.is_device() {
            settings.push(format!("memory={}", self.recipe.memory.as_str()));
        }
        settings.extend(self.launch_env.iter().map(|(k, v)| format!("{k}={v}")));
        settings.extend(self.recipe.extra_cmake_args.iter().cloned());
        settings.extend(self.settings.labels());
        ConfigurationInfo {
            id: self.id.clone(),
            label: self.label.clone(),
            source: self.source.clone().unwrap_or_else(|| "flags".into()),
            image: self.image.clone(),
            settings,
            overrides,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) const M: &str = r#"
[probe]
kind = "replay"
timeout_s = 60
[images]
hip = "localhost/setrows-rocm:{rocm}"
[matrix]
backend = ["hip"]
rocm = ["6.4.1"]
gfx = ["gfx1151"]
wave_size = [32]
graphs = [true]
launch = ["serialized"]
params = ["p"]
[launch.serialized]
hip_launch_blocking = true
[params.p]
args = ["--steps", "7"]
"#;

    pub(super) fn hip() -> Resolved {
        let m = crate::core::matrix::parse("m.toml", M).unwrap();
        Resolved::from_matrix(&m.configs[0], &m.probe, &m.file)
    }

    #[test]
    fn the_same_values_through_flags_are_the_same_identity() {
        let from_matrix = hip();
        let mut from_flags = Resolved::for_backend(Backend::Hip);
        let overrides = from_flags.apply(&Flags {
            image: Some("localhost/setrows-rocm:6.4.1".into()),
            wave_size: Some(32),
            graphs: Some(true),
            launch_env: vec![("HIP_LAUNCH_BLOCKING".into(), "1".into())],
            repro_args: vec!["--steps".into(), "7".into()],
            timeout_s: Some(5.0),
            ..Flags::default()
        });
        assert_eq!(
            from_flags
                .default_target()
                .as_deref()
                .map(|n| n.contains("gfx1151")),
            Some(true)
        );
        assert_eq!(from_flags.identity(), from_matrix.identity());
        assert!(!overrides.is_empty());
        // Another wave size is another configuration.
        let mut w64 = hip();
        let o = w64.apply(&Flags {
            wave_size: Some(64),
            ..Flags::default()
        });
        assert_eq!(o, vec!["--wave-size 64 (configuration: 32)".to_string()]);
        assert_ne!(w64.identity(), from_matrix.identity());
        // A build-only probe of the same configuration is another store key; what only the
        // test reads (launch settings) does not split build-only keys.
        let mut built = hip();
        built.build_only = true;
        assert_ne!(built.identity(), from_matrix.identity());
        let mut other_launch = built.clone();
        other_launch.launch_env.clear();
        other_launch.repro_args.clear();
        assert_eq!(other_launch.identity(), built.identity());
    }

    #[test]
    fn flags_equal_to_the_configuration_are_not_overrides() {
        let mut c = hip();
        let o = c.apply(&Flags {
            gpu_target: Some("gfx1151".into()),
            wave_size: Some(32),
            launch_env: vec![("HIP_LAUNCH_BLOCKING".into(), "1".into())],
            ..Flags::default()
        });
        assert!(o.is_empty(), "{o:?}");
        let o = c.apply(&Flags {
            launch_env: vec![
                ("HIP_LAUNCH_BLOCKING".into(), "0".into()),
                ("AMD_SERIALIZE_KERNEL".into(), "3".into()),
            ],
            cmake_args: vec!["-DGGML_CUDA_FA=OFF".into()],
            graphs: Some(false),
            ..Flags::default()
        });
        assert_eq!(
            o,
            vec![
                "--graphs off (configuration: on)",
                "--launch-env HIP_LAUNCH_BLOCKING=0 (configuration: HIP_LAUNCH_BLOCKING=1)",
                "--launch-env AMD_SERIALIZE_KERNEL=3 (configuration: unset)",
                "--cmake-arg -DGGML_CUDA_FA=OFF (added)",
            ]
        );
        let info = c.info(o);
        assert_eq!(info.id.as_deref(), Some(c.id.as_deref().unwrap()));
        assert!(info.settings.contains(&"wave_size=32".to_string()));
        assert!(info.settings.contains(&"-DGGML_CUDA_FA=OFF".to_string()));
    }
}
