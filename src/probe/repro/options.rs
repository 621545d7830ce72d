//! What a `ReproProber` is built from: which bundled program, the recipe's CMake arguments, the
//! environments of build and run, the reproducer's arguments and the guard's expectations.
//! Public so the bisect driver and the matrix runner fill it from flags and matrix entries.

use super::Expectations;
use crate::probe::launch::Launcher;
use std::sync::Arc;
use std::time::Duration;

/// Which bundled reproducer a probe runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reproducer {
    /// `setrows-replay`: the cached-graph pattern through ggml (any backend).
    Replay,
    /// `setrows-kernel`: the standalone kernel (needs `-DGGML_CUDA=ON` or `-DGGML_HIP=ON`).
    Kernel,
    /// `decode-probe`: llama.cpp's own decode on the tool's tiny model (`probe::decode`),
    /// built against a llama.cpp tree.
    Decode,
}

impl Reproducer {
    pub fn target(self) -> &'static str {
        match self {
            Reproducer::Replay => crate::core::kinds::replay::PROGRAM,
            Reproducer::Kernel => "setrows-kernel",
            Reproducer::Decode => crate::probe::decode::TARGET,
        }
    }
}

/// Everything a `ReproProber` needs; public so the driver and the matrix runner fill it from
/// flags and matrix entries. `ReproOptions::new` gives working defaults for a CPU run.
#[derive(Clone)]
pub struct ReproOptions {
    /// Where ggml lives inside the checkout: "" for ggml-org/ggml, "ggml" for llama.cpp.
    pub ggml_subdir: String,
    /// Extra CMake arguments (backend recipe from `build.rs`, e.g. `-DGGML_HIP=ON`).
    pub cmake_args: Vec<String>,
    /// Environment of the configure and build steps.
    pub build_env: Vec<(String, String)>,
    /// Environment of the reproducer run (e.g. `GGML_CUDA_DISABLE_GRAPHS=1`).
    pub run_env: Vec<(String, String)>,
    pub reproducer: Reproducer,
    /// Arguments passed to the reproducer (`--repro-arg`).
    pub repro_args: Vec<String>,
    /// Parallel build jobs (`cmake --build -j`); `None` lets the generator decide.
    pub jobs: Option<usize>,
    pub build_timeout: Option<Duration>,
    pub run_timeout: Option<Duration>,
    pub launcher: Arc<dyn Launcher>,
    /// What the configuration asked for; a run that shows otherwise is `untestable`
    /// (`expect::mismatch`). Default: nothing asked, nothing checked.
    pub expect: Expectations,
    /// Stop after the build (`--regress build`, `matrix --build-only`): `Built`, no run, no GPU.
    pub build_only: bool,
    /// Why this tree cannot be probed in this configuration (a placement it has no knob for):
    /// the probe is a commit skip before anything is built.
    pub unavailable: Option<String>,
    /// The decode probe's settings: its model is written from them (`probe::decode::prepare`);
    /// its options are in `repro_args` already (`run::probers::repro_options`).
    pub settings: crate::core::settings::DecodeSettings,
    /// The decode probe's comparison with the `--good` commit's logits.
    pub good_logits: crate::probe::decode::GoodLogits,
}

impl ReproOptions {
    pub fn new(launcher: Arc<dyn Launcher>) -> Self {
        ReproOptions {
            ggml_subdir: String::new(),
            cmake_args: Vec::new(),
            build_env: Vec::new(),
            run_env: Vec::new(),
            reproducer: Reproducer::Replay,
            repro_args: Vec::new(),
            jobs: None,
            build_timeout: Some(Duration::from_secs(3600)),
            run_timeout: Some(Duration::from_secs(900)),
            launcher,
            expect: Expectations::default(),
            build_only: false,
            unavailable: None,
            settings: Default::default(),
            good_logits: crate::probe::decode::GoodLogits::Off,
        }
    }
}

impl std::fmt::Debug for ReproOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReproOptions")
            .field("ggml_subdir", &self.ggml_subdir)
            .field("cmake_args", &self.cmake_args)
            .field("reproducer", &self.reproducer)
            .field("repro_args", &self.repro_args)
            .field("expect", &self.expect)
            .field("launcher", &self.launcher.identity())
            .finish_non_exhaustive()
    }
}
