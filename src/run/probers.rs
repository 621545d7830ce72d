//! The one construction path from a resolved configuration (`core::config::Resolved`) to a
//! prober: matrix cells (`run::matrix::Runner::prober`), commit bisects (`--config`, or the
//! same values as flags) and `bisect-config --good-rev` all come here, so one configuration is
//! built, run and keyed the same way by every command.
//!
//! What varies by caller is only *where* the steps run (`Place`: the launcher, ccache, the
//! ROCm toolchain's own `hipconfig` answer); everything that decides what is tested comes from
//! the configuration. CMake option spellings and where ggml lives in the checkout (ggml,
//! llama.cpp `ggml/`, lucebox `server/deps/llama.cpp/ggml`) are read from each probed tree, so
//! a range across the `AMDGPU_TARGETS` -> `GPU_TARGETS` rename builds for the target on both
//! sides.

use crate::core::build::{Backend, Recipe, TreeFacts};
use crate::core::config::{ProbeSpec, Resolved};
use crate::core::shell;
use crate::probe::container::{ContainerLauncher, Engine, GpuAccess};
use crate::probe::decode::GoodLogits;
use crate::probe::kinds::backend_ops::BackendOpsProber;
use crate::probe::kinds::ctest::CtestProber;
use crate::probe::launch::Launcher;
use crate::probe::repro::{ReproOptions, ReproProber};
use crate::probe::script::ScriptProber;
use crate::probe::{Phase, ProbeReport, ProbeRequest, Prober};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Where a configuration's steps run.
#[derive(Clone)]
pub struct Place {
    pub launcher: Arc<dyn Launcher>,
    /// Steps run in a container: its image carries ccache. Where a build's cache lives (the
    /// run's own; the shared one read-only) is `probe::ccache`'s rule, for host and container.
    pub in_container: bool,
    /// `HIPCXX` / `HIP_PATH` where the steps run (HIP only; `hipconfig_env`).
    pub hip_env: Vec<(String, String)>,
    /// CMake spellings for a checkout whose CMake files cannot be read.
    pub fallback_facts: TreeFacts,
    /// Where ggml is expected when the checkout cannot say (for the identity only).
    pub fallback_subdir: String,
}

impl Place {
    /// THE construction of a place: steps through `launcher` (a container's when
    /// `in_container`), with the toolchain that launcher reported (`hip_env`, HIP only) and no
    /// fallback spellings (`with_fallback` adds the `--bad` tree's).
    pub fn new(
        launcher: Arc<dyn Launcher>,
        in_container: bool,
        hip_env: Vec<(String, String)>,
    ) -> Place {
        Place {
            launcher,
            in_container,
            hip_env,
            fallback_facts: TreeFacts::default(),
            fallback_subdir: String::new(),
        }
    }

    /// The steps on this machine, no container, no toolchain answer.
    pub fn host() -> Place {
        Place::new(
            Arc::new(crate::probe::launch::HostLauncher),
            false,
            Vec::new(),
        )
    }

    /// What a checkout that cannot say is taken to be: `layout`'s ggml dir and `facts`.
    pub fn with_fallback(mut self, layout: crate::core::layout::Layout, facts: TreeFacts) -> Place {
        self.fallback_subdir = layout.ggml_dir().to_string();
        self.fallback_facts = facts;
        self
    }

    /// Whether builds go through ccache here.
    pub fn ccache(&self) -> bool {
        crate::probe::ccache::used(self.in_container)
    }
}

/// THE shared ccache directory of steps run in `image` by `engine` (one per engine and image,
/// under the work dir). Build steps read it read-only under their run's own cache; only a run
/// with `SETROWS_CCACHE_FILL=1` writes it (`probe::ccache`).
pub fn ccache_dir(work_dir: &Path, engine: &str, image: &str) -> std::path::PathBuf {
    work_dir
        .join("ccache")
        .join(crate::run::store::bisect_id(&[engine, image]))
}

/// THE container launcher for steps of one configuration: the engine answers, the image is
/// present (never pulled), its ccache is `ccache_dir`. `build_only`: a build needs no GPU, so
/// a build-only probe runs where none exists.
pub fn container_launcher(
    engine: Engine,
    image: &str,
    backend: Backend,
    build_only: bool,
    work_dir: &Path,
) -> Result<ContainerLauncher, crate::probe::container::ContainerError> {
    let gpu = if build_only {
        GpuAccess::None
    } else {
        GpuAccess::from(backend)
    };
    let ccache = ccache_dir(work_dir, engine.kind.as_str(), image);
    ContainerLauncher::new(engine, image, gpu, &ccache)
}

/// Whether `cfg`'s steps need the ROCm toolchain's own answer (`hipconfig_env`): the bundled
/// reproducer (the replay, or the decode probe with its llama.cpp) built for HIP. One rule for
/// bisect and matrix.
pub fn needs_hipconfig(cfg: &Resolved) -> bool {
    cfg.probe.def().is_bundled() && cfg.backend == Backend::Hip
}

/// The recipe as built at `place` (ccache on where it is available).
pub fn recipe_at(cfg: &Resolved, place: &Place) -> Recipe {
    let mut r = cfg.recipe.clone();
    r.ccache = place.ccache();
    r
}

/// Where ggml lives in a checkout, and its CMake spellings.
pub fn tree_at(checkout: &Path, fallback: &TreeFacts) -> (String, TreeFacts) {
    let sub = crate::probe::layout(checkout).ggml_dir();
    let facts = crate::probe::tree_facts(checkout).unwrap_or_else(|_| fallback.clone());
    (sub.to_string(), facts)
}

/// The environment a script probe sees (and a replay's identity names): launch settings, the
/// recipe's CMake arguments for this tree, the reproducer flags, the configuration id.
/// A build-only probe gets no test settings (launch environment, reproducer arguments): its
/// identity leaves them out, so its build must not be able to read them.
pub fn script_env(cfg: &Resolved, place: &Place, facts: &TreeFacts) -> Vec<(String, String)> {
    let recipe = recipe_at(cfg, place);
    let mut env = if cfg.build_only {
        Vec::new()
    } else {
        cfg.recipe.run_env(&cfg.launch_env, facts)
    };
    env.push((
        "SETROWS_CMAKE_ARGS".into(),
        shell::line(&recipe.cmake_args(facts)),
    ));
    if !cfg.build_only {
        env.push((
            "SETROWS_REPRO_ARGS".into(),
            shell::line(&cfg.recipe.reproducer_args(&cfg.repro_args)),
        ));
    }
    if let Some(id) = &cfg.id {
        env.push(("SETROWS_CONFIG_ID".into(), id.clone()));
    }
    env.push(("SETROWS_BACKEND".into(), cfg.backend.as_str().into()));
    env.push(("GGML_NO_BACKTRACE".into(), "1".into()));
    if place.ccache() {
        // CMake (3.17+) reads these from the environment: a script's own build uses ccache too.
        env.push(("CMAKE_C_COMPILER_LAUNCHER".into(), "ccache".into()));
        env.push(("CMAKE_CXX_COMPILER_LAUNCHER".into(), "ccache".into()));
    }
    env
}

fn timeout(cfg: &Resolved) -> Option<Duration> {
    cfg.timeout_s.map(Duration::from_secs_f64)
}

/// The prober of `cfg` at `place`. Infallible: what could fail (the engine, the image, the ROCm
/// toolchain) was settled when `place` was made.
pub fn prober(cfg: &Resolved, place: &Place) -> ConfiguredProber {
    prober_comparing(cfg, place, GoodLogits::Off)
}

/// `prober`, with the decode probe's comparison with the `--good` commit's logits
/// (`run::bisect::good`); ignored by other probes.
pub fn prober_comparing(cfg: &Resolved, place: &Place, good: GoodLogits) -> ConfiguredProber {
    let inner: Box<dyn Prober> = match &cfg.probe {
        ProbeSpec::Script { build, script } => Box::new(PerTreeScript {
            base: ScriptProber {
                build: build.clone(),
                script: script.clone(),
                timeout: timeout(cfg),
                launcher: Box::new(SharedLauncher(place.launcher.clone())),
                env: Vec::new(),
                build_only: cfg.build_only,
            },
            cfg: cfg.clone(),
            place: place.clone(),
        }),
        ProbeSpec::BackendOps { ops, op_params } => Box::new(BackendOpsProber {
            launcher: place.launcher.clone(),
            recipe: recipe_at(cfg, place),
            ops: ops.clone(),
            op_params: op_params.clone(),
            fallback: place.fallback_facts.clone(),
            build_env: tree_build_env(cfg, place),
            run_env: tree_run_env(cfg),
            run_timeout: timeout(cfg),
            build_only: cfg.build_only,
        }),
        ProbeSpec::Ctest { regex } => Box::new(CtestProber {
            launcher: place.launcher.clone(),
            recipe: recipe_at(cfg, place),
            regex: regex.clone(),
            fallback: place.fallback_facts.clone(),
            build_env: tree_build_env(cfg, place),
            run_env: tree_run_env(cfg),
            run_timeout: timeout(cfg),
            build_only: cfg.build_only,
        }),
        ProbeSpec::Replay | ProbeSpec::Decode => Box::new(PerTreeRepro::new(
            ReproOptions {
                good_logits: good,
                ..repro_options(cfg, place)
            },
            recipe_at(cfg, place),
            place.fallback_facts.clone(),
        )),
    };
    ConfiguredProber {
        inner,
        config_identity: cfg.identity(),
        config_id: cfg.id.clone(),
        // A --script may test on any device, whatever backend the configuration defaults to.
        test_uses_gpu: !cfg.probe.def().is_bundled()
            || cfg.backend != crate::core::build::Backend::Cpu,
        applied: cfg.applied.clone(),
        builds_here: !place.in_container,
    }
}

/// The build step's environment for a kind that builds the tree's own program: HIP's
/// toolchain variables where the backend is HIP.
fn tree_build_env(cfg: &Resolved, place: &Place) -> Vec<(String, String)> {
    if cfg.backend == Backend::Hip {
        place.hip_env.clone()
    } else {
        Vec::new()
    }
}

/// The test step's environment: the configuration's launch environment, none for a build-only
/// probe (it runs no test).
fn tree_run_env(cfg: &Resolved) -> Vec<(String, String)> {
    if cfg.build_only {
        Vec::new()
    } else {
        cfg.launch_env.clone()
    }
}

/// The bundled reproducer's options for `cfg` at `place` (CMake arguments are per tree).
pub fn repro_options(cfg: &Resolved, place: &Place) -> ReproOptions {
    let mut opts = ReproOptions::new(place.launcher.clone());
    opts.ggml_subdir = place.fallback_subdir.clone();
    if cfg.probe == ProbeSpec::Decode {
        opts.reproducer = crate::probe::repro::Reproducer::Decode;
    }
    if cfg.backend == Backend::Hip {
        opts.build_env.extend(place.hip_env.iter().cloned());
    }
    opts.run_env = cfg.launch_env.clone();
    opts.run_env.push(("GGML_NO_BACKTRACE".into(), "1".into()));
    opts.repro_args = cfg.recipe.reproducer_args(&cfg.reproducer_args());
    opts.settings = cfg.settings.clone();
    opts.build_only = cfg.build_only;
    if let Some(t) = timeout(cfg) {
        opts.run_timeout = Some(t);
        // A build is never cut shorter than the default hour by a short test timeout.
        opts.build_timeout = opts.build_timeout.map(|b| b.max(t)).or(Some(t));
    }
    expectations(cfg, &mut opts);
    opts
}

/// THE place where what a reproducer is expected to report (backend, graphs, wave size, GPU
/// target) is derived from the configuration; the guard in `probe::repro` compares its report
/// with these. Everything that builds a `ReproOptions` from a configuration goes through here.
fn expectations(cfg: &Resolved, opts: &mut ReproOptions) {
    opts.expect = crate::probe::repro::Expectations::from_recipe(&cfg.recipe);
    if cfg.probe.def().takes_decode_settings() {
        opts.expect.settings = cfg.settings.clone();
    }
}

/// The bundled reproducer with the ggml location and CMake spellings of each probed tree. The
/// tree is already part of the store key, so the identity names the recipe, not one tree's
/// spellings.
pub struct PerTreeRepro {
    opts: ReproOptions,
    recipe: Recipe,
    fallback: TreeFacts,
    identity: String,
    for_people: String,
    slot_identity: String,
}

impl PerTreeRepro {
    pub fn new(opts: ReproOptions, recipe: Recipe, fallback: TreeFacts) -> Self {
        let mut named = opts.clone();
        named.cmake_args = recipe.cmake_args(&TreeFacts::default());
        let named = ReproProber::new(named);
        let tail = format!(" cmake_spellings=per-tree recipe={}", recipe.identity());
        let identity = format!("{}{tail}", named.identity());
        let for_people = format!("{}{tail}", opts.expect.readable_in(&named.identity()));
        let slot_identity = format!("{}{tail}", named.slot_identity());
        PerTreeRepro {
            opts,
            recipe,
            fallback,
            identity,
            for_people,
            slot_identity,
        }
    }

    /// The reproducer as configured for the tree checked out at `checkout`.
    pub fn for_tree(&self, checkout: &Path) -> ReproProber {
        let (sub, facts) = tree_at(checkout, &self.fallback);
        let mut opts = self.opts.clone();
        opts.ggml_subdir = sub;
        opts.cmake_args = self.recipe.cmake_args(&facts);
        // unified memory: the env where this tree reads it, or the tree cannot have it
        opts.run_env = self.recipe.run_env(&opts.run_env, &facts);
        opts.unavailable = self.recipe.memory_unavailable(&facts);
        ReproProber::new(opts)
    }
}

impl Prober for PerTreeRepro {
    fn identity(&self) -> String {
        self.identity.clone()
    }

    fn slot_identity(&self) -> String {
        self.slot_identity.clone()
    }

    fn identity_for_people(&self) -> String {
        self.for_people.clone()
    }

    fn probe(&self, req: &ProbeRequest<'_>, phase: &dyn Fn(Phase)) -> ProbeReport {
        self.for_tree(req.checkout).probe(req, phase)
    }

    // What the probe's steps read of the checkout is what its build read (Ninja says, after
    // each build) and `own_reads`: its test runs the program the build made.
    fn named_inputs(&self) -> Option<Vec<String>> {
        Some(crate::probe::own_reads())
    }

    // The replay builds `$SRC/<ggml dir>` and nothing else of the tree (`tree_at` finds that
    // dir with the same `ggml_subdir` the checkout uses to write it); the decode probe builds
    // the whole llama.cpp tree.
    fn reads(&self) -> crate::probe::Reads {
        match self.opts.reproducer {
            crate::probe::repro::Reproducer::Decode => crate::probe::Reads::Tree,
            _ => crate::probe::Reads::Ggml,
        }
    }
}

/// A build + test script with the configuration's environment, `SETROWS_CMAKE_ARGS` spelled
/// for each probed tree.
pub struct PerTreeScript {
    base: ScriptProber,
    cfg: Resolved,
    place: Place,
}

impl PerTreeScript {
    pub fn for_tree(&self, checkout: &Path) -> ScriptProber {
        let (_, facts) = tree_at(checkout, &self.place.fallback_facts);
        ScriptProber {
            build: self.base.build.clone(),
            script: self.base.script.clone(),
            timeout: self.base.timeout,
            launcher: Box::new(SharedLauncher(self.place.launcher.clone())),
            env: script_env(&self.cfg, &self.place, &facts),
            build_only: self.base.build_only,
        }
    }
}

impl Prober for PerTreeScript {
    fn identity(&self) -> String {
        self.base.identity()
    }

    fn named_inputs(&self) -> Option<Vec<String>> {
        self.base.named_inputs()
    }

    fn probe(&self, req: &ProbeRequest<'_>, phase: &dyn Fn(Phase)) -> ProbeReport {
        self.for_tree(req.checkout).probe(req, phase)
    }
}

/// Shares one launcher (and its cached provenance) between probers.
pub struct SharedLauncher(pub Arc<dyn Launcher>);

impl Launcher for SharedLauncher {
    fn identity(&self) -> String {
        self.0.identity()
    }
    fn command(&self, job: &crate::probe::launch::ShellJob) -> crate::probe::launch::Cmd {
        self.0.command(job)
    }
    fn work_in_step(&self, job: &crate::probe::launch::ShellJob) -> String {
        self.0.work_in_step(job)
    }
    fn cleanup(&self, job: &crate::probe::launch::ShellJob) {
        self.0.cleanup(job)
    }
    fn provenance(&self) -> std::collections::BTreeMap<String, String> {
        self.0.provenance()
    }
    fn infra_failure(&self, exit_code: Option<i32>, output: &str) -> Option<String> {
        self.0.infra_failure(exit_code, output)
    }
}

/// A prober of one configuration (the machinery's failures were classified by the probe itself,
/// step by step: `probe::step_infra_failure`). Its identity adds the configuration's
/// (`Resolved::identity`), so stored results of one configuration are never reused for
/// another, and each report's provenance names the configuration id.
pub struct ConfiguredProber {
    pub inner: Box<dyn Prober>,
    pub config_identity: String,
    pub config_id: Option<String>,
    pub test_uses_gpu: bool,
    /// `--apply`: what the slot loop applies before each probe (`Prober::applied`).
    pub applied: Vec<crate::core::applied::AppliedPatch>,
    /// Not in a container (`Prober::builds_here`).
    pub builds_here: bool,
}

impl Prober for ConfiguredProber {
    // A wrapper must pass on what its prober reads, or build-aware candidates silently turn
    // off (the whole tree is assumed) for every bisect built through this path.
    // The files an applied patch touches are read: two commits that differ only there are
    // two trees once patched (or one the patch applies to and one it does not).
    fn named_inputs(&self) -> Option<Vec<String>> {
        let mut named = self.inner.named_inputs()?;
        named.extend(crate::run::apply::files(&self.applied));
        Some(named)
    }

    // Likewise what of the tree it reads: a wrapper that dropped it would write whole trees.
    // A patch may touch any file, so a patched probe's checkout is the whole tree.
    fn reads(&self) -> crate::probe::Reads {
        if self.applied.is_empty() {
            self.inner.reads()
        } else {
            crate::probe::Reads::Tree
        }
    }

    fn applied(&self) -> &[crate::core::applied::AppliedPatch] {
        &self.applied
    }

    fn test_uses_gpu(&self) -> bool {
        self.test_uses_gpu
    }

    fn builds_here(&self) -> bool {
        self.builds_here
    }

    fn identity(&self) -> String {
        format!(
            "{}\nconfig:\n{}",
            self.inner.identity(),
            self.config_identity
        )
    }

    fn identity_for_people(&self) -> String {
        format!(
            "{}\nconfig:\n{}",
            self.inner.identity_for_people(),
            self.config_identity
        )
    }

    fn slot_identity(&self) -> String {
        format!(
            "{}\nconfig:\n{}",
            self.inner.slot_identity(),
            self.config_identity
        )
    }

    fn probe(&self, req: &ProbeRequest<'_>, phase: &dyn Fn(Phase)) -> ProbeReport {
        let mut report = self.inner.probe(req, phase);
        if let Some(id) = &self.config_id {
            report.provenance.insert("configuration".into(), id.clone());
        }
        if let Some(fork) = crate::probe::vendor::of_checkout(req.checkout) {
            report.provenance.insert("ggml_vendor".into(), fork);
        }
        report
    }
}

/// `HIPCXX` and `HIP_PATH` as `hipconfig` reports them where `launcher` runs (an image or the
/// host): ROCm versions differ in where clang lives, and a recipe must not guess.
pub fn hipconfig_env(launcher: &dyn Launcher) -> Result<Vec<(String, String)>, String> {
    let key = launcher.identity();
    let dir = tempfile::tempdir().map_err(|e| format!("temp dir: {e}"))?;
    let job = crate::probe::launch::ShellJob {
        script: "echo \"HIPCXX=$(hipconfig -l)/clang\"; echo \"HIP_PATH=$(hipconfig -R)\"".into(),
        src: dir.path().into(),
        work: dir.path().into(),
        cwd_is_work: true,
        env: Vec::new(),
        timeout: Some(Duration::from_secs(120)),
        name: format!("setrows-hipconfig-{}", std::process::id()),
        ccache: false,
        host_ccache_env: Vec::new(),
    };
    let log = dir.path().join("hipconfig.log");
    let r = crate::probe::exec::run(&launcher.command(&job), job.timeout, &log, &|| {
        launcher.cleanup(&job)
    })
    .map_err(|e| format!("running hipconfig in {key}: {e}"))?;
    let env = parse_hip_env(&r.output);
    if !r.success() || env.len() != 2 {
        // One line: the shell's or hipconfig's own first complaint, not its whole output.
        let said = r
            .output
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .map(|l| l.chars().take(160).collect::<String>())
            .unwrap_or_else(|| "no output".into());
        return Err(format!(
            "hipconfig in {} did not give HIPCXX and HIP_PATH (is ROCm installed there?): {said}",
            key.lines().next().unwrap_or("")
        ));
    }
    Ok(env)
}

/// `HIPCXX=/abs/clang` and `HIP_PATH=/abs` lines; anything else (an empty `hipconfig` answer
/// gives `HIPCXX=/clang`) is left out, so the caller sees fewer than two and reports it.
pub fn parse_hip_env(output: &str) -> Vec<(String, String)> {
    output
        .lines()
        .filter_map(|l| l.trim().split_once('='))
        .filter(|(k, v)| ["HIPCXX", "HIP_PATH"].contains(k) && v.len() > 1 && v.starts_with('/'))
        .filter(|(k, v)| *k != "HIPCXX" || *v != "/clang")
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[cfg(test)]
mod tests;
