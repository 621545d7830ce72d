//! Running configurations: one *cell* is one configuration probed at one revision, in the
//! configuration's image (or on the host with `--engine none`).
//!
//! The cell reuses the commit bisection's pieces unchanged: a `git::Checkout` of the revision,
//! a `Prober` (the `--build/--script` prober, or the bundled replay), and a `Launcher` that puts
//! the steps in the container. What the matrix adds is the mapping from a configuration to those
//! pieces (recipe -> CMake arguments, launch settings -> environment, image -> launcher, one
//! persistent build and ccache directory per (image, recipe)), infrastructure retries, and the
//! results table. Infrastructure errors stay what they are in the table: never a pass or fail.

use crate::core::build::{Backend, TreeFacts};
use crate::core::matrix::{Config, RawProbe};
use crate::core::outcome::Outcome;
use crate::probe::container::{ContainerLauncher, Engine, GpuAccess};
use crate::probe::exec::shell_words;
use crate::probe::launch::{Cmd, HostLauncher, Launcher, ShellJob};
use crate::probe::{Phase, ProbeReport, ProbeRequest, Prober};

pub use crate::core::result::{Cell, ConfigRow, MatrixResults, Rev};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Shares one launcher (and its cached provenance) between the probers of many cells.
struct Shared(Arc<dyn Launcher>);

impl Launcher for Shared {
    fn identity(&self) -> String {
        self.0.identity()
    }
    fn command(&self, job: &ShellJob) -> Cmd {
        self.0.command(job)
    }
    fn cleanup(&self, job: &ShellJob) {
        self.0.cleanup(job)
    }
    fn provenance(&self) -> BTreeMap<String, String> {
        self.0.provenance()
    }
    fn infra_failure(&self, exit_code: Option<i32>, output: &str) -> Option<String> {
        self.0.infra_failure(exit_code, output)
    }
}

/// A prober whose launcher may veto its verdict: a step that "failed" because the engine did
/// (exit 125 with the engine's error, a full disk) is an `InfraError`, whatever the prober
/// concluded from the exit code alone.
pub struct InfraAware {
    inner: Box<dyn Prober>,
    launcher: Arc<dyn Launcher>,
    /// The configuration's environment: the script prober leaves its `env` out of its identity,
    /// but here it *is* the configuration (recipe arguments, launch settings, reproducer flags),
    /// so stored results of one configuration are never reused for another.
    config_identity: String,
}

impl Prober for InfraAware {
    fn identity(&self) -> String {
        format!(
            "{}\nconfig:\n{}",
            self.inner.identity(),
            self.config_identity
        )
    }

    fn probe(&self, req: &ProbeRequest<'_>, phase: &dyn Fn(Phase)) -> ProbeReport {
        let mut report = self.inner.probe(req, phase);
        if !matches!(report.outcome, Outcome::InfraError | Outcome::Pass) {
            let why = self
                .launcher
                .infra_failure(report.exit_code, &report.output_tail)
                .or_else(|| {
                    crate::probe::container::disk_full(&report.output_tail)
                        .then(|| "disk full: no space left on device".to_string())
                });
            if let Some(why) = why {
                report.outcome = Outcome::InfraError;
                report.signature = Some(why);
            }
        }
        report
    }
}

pub struct Runner {
    pub repo: PathBuf,
    pub work_dir: PathBuf,
    /// `None`: run on the host.
    pub engine: Option<Engine>,
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
    /// Held from the first checkout on: one matrix run per work dir moves its checkout.
    lock: Mutex<Option<std::fs::File>>,
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("another setrows-bisect matrix run is using {0} (its checkout and build directories); wait for it or pass a different --work-dir")]
    Busy(PathBuf),
    #[error(transparent)]
    Git(#[from] crate::run::git::GitError),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

fn short_hash(parts: &[&str]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0]);
    }
    hex::encode(&h.finalize()[..6])
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
            probe,
            timeout,
            retries,
            log_dir,
            launchers: Mutex::new(HashMap::new()),
            hip_envs: Mutex::new(HashMap::new()),
            store: None,
            lock: Mutex::new(None),
        }
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

    /// Moves the one private checkout of this repository to `rev` (never the user's tree).
    /// One directory for every revision, rewritten file by file, so that files which change
    /// get new mtimes and the persistent build directories rebuild them: a fresh directory per
    /// revision would hand the build system sources *older* than its last outputs.
    pub fn checkout(&self, rev: &mut Rev) -> Result<(), RunError> {
        self.lock_work_dir()?;
        let repo = crate::run::git::open(&self.repo)?;
        let canon = std::fs::canonicalize(&self.repo).unwrap_or(self.repo.clone());
        let base = self
            .work_dir
            .join("matrix/src")
            .join(short_hash(&[&canon.to_string_lossy()]));
        std::fs::create_dir_all(&base).map_err(|source| RunError::Io {
            path: base.clone(),
            source,
        })?;
        let co = crate::run::git::Checkout::new(base.join("tree"), base.join("state"));
        co.checkout(&repo, &rev.sha)?;
        // A tree that is not ggml (a script probe's own project) keeps today's spelling.
        rev.facts = crate::probe::tree_facts(&co.dir).unwrap_or_default();
        rev.checkout = co.dir;
        Ok(())
    }

    fn lock_work_dir(&self) -> Result<(), RunError> {
        let mut held = self
            .lock
            .lock()
            .map_err(|_| RunError::Busy(self.work_dir.clone()))?;
        if held.is_some() {
            return Ok(());
        }
        let dir = self.work_dir.join("matrix");
        let io = |source| RunError::Io {
            path: dir.clone(),
            source,
        };
        std::fs::create_dir_all(&dir).map_err(io)?;
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join("lock"))
            .map_err(io)?;
        use std::os::fd::AsRawFd;
        // SAFETY: flock on a descriptor we own; released when the file is closed.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            return Err(RunError::Busy(dir));
        }
        *held = Some(f);
        Ok(())
    }

    /// Key of the persistent build and ccache directories: (image, recipe).
    fn build_key(&self, config: &Config) -> String {
        let mut recipe = config.recipe.clone();
        recipe.ccache = self.engine.is_some() || crate::probe::script::which("ccache").is_some();
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
        let gpu = GpuAccess::from(config.backend);
        let key = format!("{image}\n{gpu:?}\n{}", self.build_key(config));
        let mut cache = self
            .launchers
            .lock()
            .map_err(|_| "launcher cache poisoned")?;
        if let Some(l) = cache.get(&key) {
            return Ok(l.clone());
        }
        let ccache = self
            .work_dir
            .join("matrix/ccache")
            .join(self.build_key(config));
        let l: Arc<dyn Launcher> = Arc::new(
            ContainerLauncher::new(engine.clone(), image, gpu, &ccache)
                .map_err(|e| e.to_string())?,
        );
        cache.insert(key, l.clone());
        Ok(l)
    }

    /// The environment a configuration gives both steps.
    pub fn env(&self, config: &Config, rev: &Rev) -> Vec<(String, String)> {
        let mut recipe = config.recipe.clone();
        recipe.ccache = self.engine.is_some() || crate::probe::script::which("ccache").is_some();
        let mut env = config.launch.env();
        env.push((
            "SETROWS_CMAKE_ARGS".into(),
            shell_words(&recipe.cmake_args(&rev.facts)),
        ));
        env.push(("SETROWS_REPRO_ARGS".into(), shell_words(&config.repro_args)));
        env.push(("SETROWS_CONFIG_ID".into(), config.id.clone()));
        env.push(("SETROWS_BACKEND".into(), config.backend.as_str().into()));
        env.push(("GGML_NO_BACKTRACE".into(), "1".into()));
        if self.engine.is_none() && recipe.ccache {
            let dir = self
                .work_dir
                .join("matrix/ccache")
                .join(self.build_key(config));
            env.push(("CCACHE_DIR".into(), dir.to_string_lossy().into_owned()));
        }
        env
    }

    /// The prober for one configuration: its image's launcher, its recipe and launch settings.
    /// Errors are infrastructure (the engine or image is not usable) and name the cause.
    pub fn prober(&self, config: &Config, rev: &Rev) -> Result<InfraAware, String> {
        let launcher = self.launcher(config)?;
        let env = self.env(config, rev);
        let config_identity = env
            .iter()
            .filter(|(k, _)| k != "CCACHE_DIR")
            .map(|(k, v)| format!("{k}={v}\n"))
            .collect();
        let inner: Box<dyn Prober> = match self.probe.kind.as_deref().unwrap_or("replay") {
            "script" => Box::new(crate::probe::script::ScriptProber {
                build: self.probe.build.clone(),
                script: self.probe.script.clone().unwrap_or_default(),
                timeout: self.timeout,
                launcher: Box::new(Shared(launcher.clone())),
                env,
            }),
            "replay" => {
                let mut recipe = config.recipe.clone();
                recipe.ccache =
                    self.engine.is_some() || crate::probe::script::which("ccache").is_some();
                let mut opts = crate::probe::repro::ReproOptions::new(launcher.clone());
                opts.ggml_subdir = if rev.checkout.join("ggml/CMakeLists.txt").is_file() {
                    "ggml".into()
                } else {
                    String::new()
                };
                opts.cmake_args = recipe.cmake_args(&rev.facts);
                opts.build_env = env
                    .iter()
                    .filter(|(k, _)| k == "CCACHE_DIR")
                    .cloned()
                    .collect();
                if config.backend == Backend::Hip {
                    opts.build_env.extend(self.hip_env(&launcher)?);
                }
                opts.run_env = config.launch.env();
                opts.run_env.push(("GGML_NO_BACKTRACE".into(), "1".into()));
                opts.repro_args = config.repro_args.clone();
                if let Some(t) = self.timeout {
                    opts.build_timeout = Some(t);
                    opts.run_timeout = Some(t);
                }
                Box::new(crate::probe::repro::ReproProber::new(opts))
            }
            other => return Err(format!("unknown probe kind `{other}`")),
        };
        Ok(InfraAware {
            inner,
            launcher,
            config_identity,
        })
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

    /// Runs one cell, retrying infrastructure errors. Never fails: what went wrong is the cell.
    pub fn run_cell(&self, config: &Config, rev: &Rev, phase: &dyn Fn(Phase)) -> Cell {
        let build_dir = self
            .work_dir
            .join("matrix/build")
            .join(self.build_key(config));
        let log = self
            .log_dir
            .join(format!("{}-{}.log", config.id, &rev.sha[..10]));
        // One log per cell and run (attempts append to it); not the previous run's.
        let _ = std::fs::remove_file(&log);
        let mut attempts = 0;
        let mut cached = false;
        let report = loop {
            attempts += 1;
            let report = match self.stored(config, rev) {
                Some(r) => {
                    cached = true;
                    // This run's results directory gets the stored log too.
                    if let Some(parent) = log.parent() {
                        let _ = std::fs::create_dir_all(parent);
                    }
                    let _ = std::fs::copy(&r.log_path, &log);
                    r
                }
                None => self.attempt(config, rev, &build_dir, &log, attempts, phase),
            };
            if report.outcome != Outcome::InfraError || attempts > self.retries {
                break report;
            }
            std::thread::sleep(Duration::from_millis(500 << attempts.min(6)));
        };
        let mut provenance = report.provenance.clone();
        if self.engine.is_none() {
            if let Ok(k) = std::fs::read_to_string("/proc/sys/kernel/osrelease") {
                provenance.insert("kernel".into(), k.trim().into());
            }
            provenance.insert("engine".into(), "none (host)".into());
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
        }
    }

    fn store_key(&self, config: &Config, rev: &Rev) -> Option<crate::run::store::StoreKey> {
        let prober = self.prober(config, rev).ok()?;
        (!rev.tree.is_empty())
            .then(|| crate::run::store::StoreKey::new(&rev.tree, &prober.identity()))
    }

    /// The first stored run of this (tree, configuration), if any.
    fn stored(&self, config: &Config, rev: &Rev) -> Option<ProbeReport> {
        let store = self.store.as_ref()?;
        let key = self.store_key(config, rev)?;
        store.load(&key).ok()?.into_iter().next().map(|r| r.report)
    }

    fn save(&self, config: &Config, rev: &Rev, report: &ProbeReport) {
        let (Some(store), Some(key)) = (self.store.as_ref(), self.store_key(config, rev)) else {
            return;
        };
        // The log moves into the store with the result: `--out` directories come and go.
        let mut report = report.clone();
        let stored_log = store.log_path(&key, 0);
        let copied = stored_log
            .parent()
            .map(std::fs::create_dir_all)
            .and_then(Result::ok)
            .and_then(|_| std::fs::copy(&report.log_path, &stored_log).ok());
        if copied.is_some() {
            report.log_path = stored_log;
        }
        let run = crate::run::store::StoredRun {
            tree: rev.tree.clone(),
            identity: self
                .prober(config, rev)
                .map(|p| p.identity())
                .unwrap_or_default(),
            commit: rev.sha.clone(),
            recorded_at: chrono::Utc::now().to_rfc3339(),
            report,
        };
        if let Err(e) = store.save(&key, 0, &run) {
            eprintln!(
                "setrows-bisect: warning: result of {} not stored: {e}",
                config.id
            );
        }
    }

    fn attempt(
        &self,
        config: &Config,
        rev: &Rev,
        build_dir: &Path,
        log: &Path,
        attempt: u32,
        phase: &dyn Fn(Phase),
    ) -> ProbeReport {
        let prober = match self.prober(config, rev) {
            Ok(p) => p,
            Err(e) => return ProbeReport::infra(e, log),
        };
        let run_name = format!(
            "setrows-{}-{}-{}-{attempt}",
            std::process::id(),
            config.id,
            &rev.sha[..8]
        );
        let req = ProbeRequest {
            commit: &rev.sha,
            checkout: &rev.checkout,
            build_dir,
            log_path: log,
            run_name: &run_name,
        };
        let report = prober.probe(&req, phase);
        if report.outcome != Outcome::InfraError {
            self.save(config, rev, &report);
        }
        report
    }
}

/// `HIPCXX` and `HIP_PATH` as `hipconfig` reports them where `launcher` runs (an image or the
/// host): ROCm versions differ in where clang lives, and a recipe must not guess.
pub fn hipconfig_env(launcher: &dyn Launcher) -> Result<Vec<(String, String)>, String> {
    let key = launcher.identity();
    let dir = tempfile::tempdir().map_err(|e| format!("temp dir: {e}"))?;
    let job = ShellJob {
        script: "echo \"HIPCXX=$(hipconfig -l)/clang\"; echo \"HIP_PATH=$(hipconfig -R)\"".into(),
        src: dir.path().into(),
        work: dir.path().into(),
        cwd_is_work: true,
        env: Vec::new(),
        timeout: Some(Duration::from_secs(120)),
        name: format!("setrows-hipconfig-{}", std::process::id()),
    };
    let log = dir.path().join("hipconfig.log");
    let r = crate::probe::exec::run(&launcher.command(&job), job.timeout, &log, &|| {
        launcher.cleanup(&job)
    })
    .map_err(|e| format!("running hipconfig in {key}: {e}"))?;
    let env = parse_hip_env(&r.output);
    if !r.success() || env.len() != 2 {
        return Err(format!(
            "hipconfig in {key} did not give HIPCXX and HIP_PATH (is this a ROCm image?): {}",
            r.output.trim()
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
mod tests {
    use super::*;
    use crate::probe::launch::HostLauncher;

    #[test]
    fn hipconfig_answer_or_a_clear_error() {
        match crate::probe::script::which("hipconfig") {
            Some(_) => {
                let env = hipconfig_env(&HostLauncher).expect("hipconfig on PATH answers");
                assert_eq!(env.len(), 2, "{env:?}");
            }
            None => {
                let err = hipconfig_env(&HostLauncher).unwrap_err();
                assert!(err.contains("did not give HIPCXX and HIP_PATH"), "{err}");
            }
        }
        assert_eq!(
            parse_hip_env("HIPCXX=/opt/rocm/llvm/bin/clang\nHIP_PATH=/opt/rocm\nnoise\n"),
            vec![
                ("HIPCXX".to_string(), "/opt/rocm/llvm/bin/clang".to_string()),
                ("HIP_PATH".to_string(), "/opt/rocm".to_string())
            ]
        );
        assert!(parse_hip_env("HIPCXX=/clang\nHIP_PATH=\n").is_empty());
    }
}
