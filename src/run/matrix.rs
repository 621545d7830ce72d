//! Running configurations: one *cell* is one configuration probed at one revision, in the
//! configuration's image (or on the host with `--engine none`).
//!
//! The cell reuses the commit bisection's pieces unchanged: a `git::Checkout` of the revision,
//! a `Prober` (the `--build/--script` prober, or the bundled replay), and a `Launcher` that puts
//! the steps in the container. What the matrix adds is the mapping from a configuration to those
//! pieces (recipe -> CMake arguments, launch settings -> environment, image -> launcher, one
//! persistent build and ccache directory per (image, recipe)), infrastructure retries, and the
//! results table. Infrastructure errors stay what they are in the table: never a pass or fail.

pub mod ladder;
mod probers;
pub mod request;
mod wave;
use wave::reads_wave_size;

use crate::core::build::TreeFacts;
use crate::core::matrix::{Config, RawProbe};
use crate::probe::container::Engine;
use crate::probe::launch::{HostLauncher, Launcher};
use crate::probe::{Phase, ProbeReport, Prober, Reads};
use crate::run::slots::{DriverError, Hooks, Probing, RunSpec, Slot};
pub use probers::{hipconfig_env, parse_hip_env, ConfiguredProber};

pub use crate::core::result::{Cell, ConfigRow, MatrixResults, Rev};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub struct Runner {
    pub repo: PathBuf,
    pub work_dir: PathBuf,
    /// `None`: run on the host.
    pub engine: Option<Engine>,
    /// A dry run's engine that did not answer, in words: the plan still describes the
    /// containers a run would use, and says what it would lack (a run stops on it instead).
    pub engine_lacking: Option<String>,
    pub probe: RawProbe,
    pub timeout: Option<Duration>,
    /// Further attempts after an infrastructure error.
    pub retries: u32,
    pub log_dir: PathBuf,
    launchers: Mutex<HashMap<String, Arc<dyn Launcher>>>,
    hip_envs: Mutex<HashMap<String, Vec<(String, String)>>>,
    /// Where finished cells are stored and looked up (the bisection's store: a matrix cell and
    /// a bisection probe of the same tree and configuration are the same result).
    pub store: Option<crate::run::store::Store>,
    /// The matrix's one slot (`<work>/matrix`: its checkout and every build dir), locked from
    /// the first checkout on: one matrix run per work dir moves them.
    slot: Mutex<Option<Slot>>,
    /// Cells already run, by resolved identity (`shared_key`): a second configuration whose build
    /// and run are identical gets the first one's result instead of running again.
    shared: Mutex<HashMap<String, Cell>>,
    /// Per tree: whether its ggml reads `DFLASH_WAVE_SIZE` (so a wave size changes its build).
    reads_wave: Mutex<HashMap<String, bool>>,
    /// Every cell stops after its build (`matrix --build-only`, `bisect-config --regress
    /// build`): no test, no GPU passed to the container.
    pub build_only: bool,
    /// `--apply`: patches every cell's tree gets before its build (in each cell's identity).
    pub applied: Vec<crate::core::applied::AppliedPatch>,
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("another setrows-bisect matrix run is using {0} (its checkout and build directories); wait for it or pass a different --work-dir")]
    Busy(PathBuf),
    #[error(transparent)]
    Git(#[from] crate::run::git::GitError),
    /// The container engine asked for is not usable (infrastructure).
    #[error("{0}")]
    Engine(String),
    /// The work dir's store cannot be opened (the user's --work-dir: bad input).
    #[error("{0}")]
    WorkDir(String),
    /// A revision's tree could not be read (infrastructure).
    #[error("{0}")]
    Tree(String),
    /// The store refused a result.
    #[error(transparent)]
    Run(DriverError),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

fn short_hash(parts: &[&str]) -> String {
    crate::core::id::of_parts(parts, 12)
}

impl Runner {
    pub fn new(
        repo: PathBuf,
        work_dir: PathBuf,
        engine: Option<Engine>,
        probe: RawProbe,
        retries: u32,
        log_dir: PathBuf,
    ) -> Runner {
        let timeout = probe.timeout_s.map(Duration::from_secs);
        Runner {
            repo,
            work_dir,
            engine,
            engine_lacking: None,
            probe,
            timeout,
            retries,
            log_dir,
            launchers: Mutex::new(HashMap::new()),
            hip_envs: Mutex::new(HashMap::new()),
            store: None,
            slot: Mutex::new(None),
            shared: Mutex::new(HashMap::new()),
            reads_wave: Mutex::new(HashMap::new()),
            build_only: false,
            applied: Vec::new(),
        }
    }

    /// The configuration as it really builds and runs at `rev`: a wave size that nothing in the
    /// build reads (a bundled probe, replay or decode, on a tree whose ggml does not define
    /// `DFLASH_WAVE_SIZE`) is dropped, so `wave_size = [32, 64]` multiplies only the cells it
    /// changes.
    pub fn effective(&self, config: &Config, rev: &Rev) -> Config {
        let mut c = config.clone();
        let replay = self.probe.kind.is_bundled();
        if c.recipe.wave_size.is_some() && replay && !self.tree_reads_wave_size(rev) {
            c.recipe.wave_size = None;
        }
        c
    }

    fn tree_reads_wave_size(&self, rev: &Rev) -> bool {
        if rev.checkout.as_os_str().is_empty() {
            return true; // not checked out: cannot tell, so do not collapse
        }
        let key = format!("{}\n{}", rev.tree, rev.sha);
        if let Some(v) = self
            .reads_wave
            .lock()
            .ok()
            .and_then(|m| m.get(&key).copied())
        {
            return v;
        }
        let v = reads_wave_size(&rev.checkout);
        if let Ok(mut m) = self.reads_wave.lock() {
            m.insert(key, v);
        }
        v
    }

    /// What makes two cells the same run: the tree, and the configuration's resolved build and
    /// run (image, recipe, launch environment, reproducer arguments, the probe kind's line),
    /// not its id: THE identity of the store key (`Resolved::identity`), one string for both.
    /// Build-only, it leaves out what only a test reads (launch settings), so configurations
    /// that build alike are one cell's build.
    fn shared_key(&self, effective: &Config, rev: &Rev) -> String {
        let what = self.resolved(effective).identity();
        format!(
            "{}\n{}\n{}",
            if rev.tree.is_empty() {
                &rev.sha
            } else {
                &rev.tree
            },
            self.build_key(effective),
            what
        )
    }

    /// Resolves `rev` to a commit (nothing is written yet).
    pub fn resolve(&self, rev: &str) -> Result<Rev, RunError> {
        let repo = crate::run::git::open(&self.repo)?;
        let id = crate::run::git::resolve(&repo, rev, "--rev")?;
        let tree = repo
            .find_commit(id)
            .map(|c| c.tree_id().to_string())
            .unwrap_or_default();
        Ok(Rev {
            rev: rev.into(),
            sha: id.to_string(),
            tree,
            checkout: PathBuf::new(),
            facts: TreeFacts::default(),
        })
    }

    /// Moves the matrix slot's one private checkout to `rev` (never the user's tree). One
    /// directory for every revision, rewritten file by file, so that files which change get
    /// new mtimes and the persistent build directories rebuild them: a fresh directory per
    /// revision would hand the build system sources *older* than its last outputs.
    pub fn checkout(&self, rev: &mut Rev) -> Result<(), RunError> {
        let repo = crate::run::git::open(&self.repo)?;
        let guard = self.slot()?;
        let slot = guard.as_ref().ok_or_else(|| self.busy())?;
        slot.checkout(&repo, &rev.sha).map_err(slot_error)?;
        // A tree that is not ggml (a script probe's own project) keeps today's spelling.
        rev.facts = crate::probe::tree_facts(slot.src()).unwrap_or_default();
        rev.checkout = slot.src().to_path_buf();
        Ok(())
    }

    fn busy(&self) -> RunError {
        RunError::Busy(self.work_dir.join("matrix"))
    }

    /// The slot, locked on first use and held for the runner's life.
    fn slot(&self) -> Result<std::sync::MutexGuard<'_, Option<Slot>>, RunError> {
        let mut held = self.slot.lock().map_err(|_| self.busy())?;
        if held.is_none() {
            *held = Some(Slot::lock(self.work_dir.join("matrix")).map_err(slot_error)?);
        }
        Ok(held)
    }

    /// Key of the persistent build and ccache directories: (image, recipe).
    fn build_key(&self, config: &Config) -> String {
        let mut recipe = config.recipe.clone();
        recipe.ccache = crate::probe::ccache::used(self.engine.is_some());
        // A placement changes a build only through its CMake arguments (an old HIP tree's
        // GGML_HIP_UMA), which key the build tree inside this folder; the env knob and host
        // placement change the run alone. Keyed on the placement, device and unified cells
        // of one configuration built the same tree twice, cold (cells run one at a time, so
        // sharing the folder is safe).
        recipe.memory = crate::core::build::Memory::Device;
        short_hash(&[
            config.image.as_deref().unwrap_or("host"),
            &recipe.identity(),
        ])
    }

    fn launcher(&self, config: &Config) -> Result<Arc<dyn Launcher>, String> {
        let Some(engine) = &self.engine else {
            return Ok(Arc::new(HostLauncher));
        };
        let image = config.image.as_deref().ok_or_else(|| {
            format!(
                "configuration {} has no image (set `image`, or an [images] entry for {})",
                config.id,
                config.backend.as_str()
            )
        })?;
        // One launcher per image: build-only cells get no GPU (`run::probers::container_launcher`).
        let key = format!("{image}\n{}\n{}", config.backend.as_str(), self.build_only);
        let mut cache = self
            .launchers
            .lock()
            .map_err(|_| "launcher cache poisoned")?;
        if let Some(l) = cache.get(&key) {
            return Ok(l.clone());
        }
        // A missing image is said before any cell tries it (and never retried).
        engine.image_digest(image).map_err(|e| e.to_string())?;
        let l: Arc<dyn Launcher> = Arc::new(
            crate::run::probers::container_launcher(
                engine.clone(),
                image,
                config.backend,
                self.build_only,
                &self.work_dir,
            )
            .map_err(|e| e.to_string())?,
        );
        cache.insert(key, l.clone());
        Ok(l)
    }

    /// Where a configuration's steps run (its image's launcher, or the host), for
    /// `run::probers`. Errors are infrastructure and name the cause.
    fn place(&self, config: &Config) -> Result<crate::run::probers::Place, String> {
        let launcher = self.launcher(config)?;
        let hip_env = if crate::run::probers::needs_hipconfig(&self.resolved(config)) {
            self.hip_env(&launcher)?
        } else {
            Vec::new()
        };
        Ok(self.place_through(launcher, hip_env))
    }

    /// THE place rule of the matrix: steps through `launcher`, in a container whenever an
    /// engine runs the matrix (a configuration without an image is refused then, `launcher`).
    fn place_through(
        &self,
        launcher: Arc<dyn Launcher>,
        hip_env: Vec<(String, String)>,
    ) -> crate::run::probers::Place {
        let in_container = self.engine.is_some() || self.engine_lacking.is_some();
        crate::run::probers::Place::new(launcher, in_container, hip_env)
    }

    /// The configuration as `run::probers` takes it (timeout: the runner's).
    pub fn resolved(&self, config: &Config) -> crate::core::config::Resolved {
        let mut r = crate::core::config::Resolved::from_matrix(config, &self.probe, "matrix");
        r.timeout_s = self.timeout.map(|t| t.as_secs_f64());
        r.build_only = self.build_only;
        r.applied = self.applied.clone();
        r
    }

    /// The environment a configuration gives a script probe at `rev`.
    pub fn env(&self, config: &Config, rev: &Rev) -> Vec<(String, String)> {
        // A dry run makes no launcher and asks no toolchain: the spellings need only whether a
        // container runs the steps (it decides ccache).
        let place = self.place_through(Arc::new(HostLauncher), Vec::new());
        crate::run::probers::script_env(&self.resolved(config), &place, &rev.facts)
    }

    /// The prober for one configuration: `run::probers`, the construction every command uses.
    /// Errors are infrastructure (the engine or image is not usable) and name the cause.
    pub fn prober(&self, config: &Config, _rev: &Rev) -> Result<ConfiguredProber, String> {
        let place = self.place(config)?;
        Ok(crate::run::probers::prober(&self.resolved(config), &place))
    }

    /// `HIPCXX` and `HIP_PATH` as the image's own `hipconfig` reports them (asked once per
    /// launcher): ROCm versions differ in where clang lives, and the recipe must not guess.
    fn hip_env(&self, launcher: &Arc<dyn Launcher>) -> Result<Vec<(String, String)>, String> {
        let key = launcher.identity();
        if let Some(v) = self.hip_envs.lock().ok().and_then(|m| m.get(&key).cloned()) {
            return Ok(v);
        }
        let env = hipconfig_env(launcher.as_ref())?;
        if let Ok(mut m) = self.hip_envs.lock() {
            m.insert(key, env.clone());
        }
        Ok(env)
    }

    /// Runs one cell through the one slot loop: answered from the store when this (tree,
    /// configuration) has a run, else probed with `retries` further attempts after an
    /// infrastructure error, and stored. Never fails: what went wrong is the cell (an
    /// `InfraError` cell is never a pass or fail).
    ///
    /// Two configurations that resolve to the same build and run at this tree share one result:
    /// the second cell carries the first one's outcome and says so (`shared_with` in its
    /// provenance) instead of running twice.
    pub fn run_cell(&self, asked: &Config, rev: &Rev, phase: &dyn Fn(Phase)) -> Cell {
        let effective = self.effective(asked, rev);
        let key = self.shared_key(&effective, rev);
        let first = self.shared.lock().ok().and_then(|m| m.get(&key).cloned());
        if let Some(first) = first {
            let mut cell = first.clone();
            cell.config = asked.id.clone();
            cell.rev = rev.rev.clone();
            cell.provenance
                .insert("shared_with".into(), first.config.clone());
            if effective.recipe != asked.recipe {
                cell.provenance.insert(
                    "shared_because".into(),
                    "wave_size is not read by this build (no DFLASH_WAVE_SIZE in the tree)".into(),
                );
            }
            return cell;
        }
        let cell = self.run_cell_once(asked, &effective, rev, phase);
        if let Ok(mut m) = self.shared.lock() {
            m.insert(key, cell.clone());
        }
        cell
    }

    fn run_cell_once(
        &self,
        asked: &Config,
        config: &Config,
        rev: &Rev,
        phase: &dyn Fn(Phase),
    ) -> Cell {
        let build_dir = self
            .work_dir
            .join("matrix/build")
            .join(self.build_key(config));
        let log = self.log_dir.join(format!(
            "{}-{}.log",
            config.id,
            crate::core::range::short_sha(&rev.sha)
        ));
        let prober: Box<dyn Prober> = match self.prober(config, rev) {
            Ok(p) => Box::new(p),
            // Nothing a retry could change (no image here, no engine): one line, no attempt.
            Err(e) => {
                let report = ProbeReport::infra(e, &log);
                return Cell {
                    config: config.id.clone(),
                    rev: rev.rev.clone(),
                    sha: rev.sha.clone(),
                    outcome: report.outcome,
                    signature: report.signature,
                    duration_s: 0.0,
                    build_s: 0.0,
                    test_s: 0.0,
                    attempts: 0,
                    log,
                    provenance: Default::default(),
                    cached: false,
                    ccache: None,
                };
            }
        };
        let probing = Probing {
            identity: prober.identity(),
            slot_identity: prober.slot_identity(),
            prober: prober.as_ref(),
            store: self.store.as_ref().filter(|_| !rev.tree.is_empty()),
            attempts: self.retries + 1,
            backoff: Some(Duration::from_millis(500)),
            // Off: a matrix is the evidence for each (configuration, revision) cell, retried
            // on purpose; reusing there needs its own argument (issue 13 covers bisection).
            reuse_artifacts: false,
            // The whole tree: one checkout serves every cell (script cells too) and
            // `Runner::checkout` reads files of it.
            reads: Reads::Tree,
            // No `--path`: every blob is read.
            scope: None,
            // Cells run one at a time.
            turns_in: None,
            meter: Default::default(),
        };
        let mut cached = false;
        let stored = probing
            .stored(&rev.tree)
            .ok()
            .and_then(|runs| runs.into_iter().next());
        let (report, attempts) = match stored {
            Some(run) => {
                cached = true;
                // This run's results directory gets the stored log too.
                if let Some(parent) = log.parent() {
                    let _ = std::fs::create_dir_all(parent);
                }
                let _ = std::fs::copy(&run.report.log_path, &log);
                (run.report, 1)
            }
            None => match self.attempt(&probing, rev, &build_dir, &log, &config.id, phase) {
                Ok(a) => (a.report, a.attempts),
                Err(e) => (ProbeReport::infra(e.to_string(), &log), 1),
            },
        };
        let mut provenance = report.provenance.clone();
        if self.engine.is_none() {
            if let Ok(k) = std::fs::read_to_string("/proc/sys/kernel/osrelease") {
                provenance.insert("kernel".into(), k.trim().into());
            }
            provenance.insert("engine".into(), "none (host)".into());
        }
        if config.recipe != asked.recipe {
            provenance.insert(
                "wave_size".into(),
                "not read by this build (no DFLASH_WAVE_SIZE in the tree): not passed".into(),
            );
        }
        Cell {
            config: config.id.clone(),
            rev: rev.rev.clone(),
            sha: rev.sha.clone(),
            outcome: report.outcome,
            signature: report.signature.clone(),
            duration_s: report.duration_s,
            build_s: report.build_s,
            test_s: report.test_s,
            attempts,
            log,
            provenance,
            cached,
            ccache: if cached { None } else { report.ccache },
        }
    }

    /// One cell's run in the matrix slot (run index 0: a cell is one run of its tree).
    fn attempt(
        &self,
        probing: &Probing<'_>,
        rev: &Rev,
        build_dir: &std::path::Path,
        log: &std::path::Path,
        config_id: &str,
        phase: &dyn Fn(Phase),
    ) -> Result<crate::run::slots::Attempted, RunError> {
        let repo = crate::run::git::open(&self.repo)?;
        let guard = self.slot()?;
        let slot = guard.as_ref().ok_or_else(|| self.busy())?;
        let name = format!(
            "setrows-{}-{config_id}-{}",
            std::process::id(),
            &rev.sha[..8]
        );
        let run = RunSpec {
            repo: &repo,
            sha: &rev.sha,
            tree: &rev.tree,
            index: 0,
            name: &name,
            build: Some(build_dir),
            log: Some(log),
        };
        let hooks = Hooks {
            phase,
            infra: &|_, _| {},
        };
        probing.attempt_in(slot, &run, &hooks).map_err(slot_error)
    }
}

/// The slot's errors in the matrix's terms (a busy slot is another matrix run).
fn slot_error(e: DriverError) -> RunError {
    match e {
        DriverError::Busy(p) => RunError::Busy(p),
        DriverError::Git(g) => RunError::Git(g),
        DriverError::Io { path, source } => RunError::Io { path, source },
        other => RunError::Run(other),
    }
}
