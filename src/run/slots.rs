//! The one slot loop: every probe this tool runs (a bisection step, a `--probe` of a planned
//! wave, a validation re-run, a matrix cell) goes through `Probing::run_in`.
//!
//! A *slot* is a directory holding one private checkout and one persistent build dir, locked
//! with `flock` for as long as a `Slot` lives: two processes moving the same checkout would test
//! a tree that is neither commit. The loop checks the commit out, probes it, retries our own
//! machinery's failures (`InfraError`) a bounded number of times and stores the run before
//! handing it back, so that whoever asked for it (the search, a plan, validation) only ever
//! sees results that survive a kill, and the same tree asked for again is answered from disk.
//! Keeping this in one place is the point: four copies had drifted into four retry counts,
//! one without a lock and one that dropped infrastructure errors on the floor.

use crate::core::outcome::Outcome;
use crate::probe::artifacts::ArtifactIndex;
use crate::probe::{Phase, ProbeReport, ProbeRequest, Prober, Reads};
use crate::run::artifacts::StoredArtifacts;
use crate::run::git::{self, Checkout};
use crate::run::store::{Store, StoreError, StoreKey, StoredRun};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Attempts per probe when our own machinery fails, before giving up with exit 3.
pub const INFRA_RETRIES: u32 = 3;

/// Why a run could not produce a result. `Infra` is the machinery failing after every retry;
/// the CLI turns it (and everything here but a user's bad ref) into exit 3.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    #[error(transparent)]
    Git(#[from] git::GitError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("infrastructure failure probing {sha} ({attempts} attempts): {message}; log: {log}")]
    Infra {
        sha: String,
        attempts: u32,
        message: String,
        log: String,
    },
    /// An untestable reason no commit can change (`SkipScope::Systematic`): the run stops at
    /// the first probe that shows it, and that probe is not stored.
    #[error("configuration {} cannot be tested here: {reason}; every commit would say the same, so the run stops at its first probe ({}; nothing stored, so a run after the fix tests it again; log: {log})", configuration.as_deref().unwrap_or("(from flags)"), &sha[..sha.len().min(10)])]
    Systematic {
        sha: String,
        reason: String,
        /// The configuration id the probe named, if any.
        configuration: Option<String>,
        log: String,
    },
    #[error("another setrows-bisect is using {0}; wait for it or pass a different --work-dir")]
    Busy(PathBuf),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// A locked checkout + build directory. Dropping it releases the lock.
pub struct Slot {
    dir: PathBuf,
    checkout: Checkout,
    _lock: std::fs::File,
}

impl Slot {
    /// `<work>/checkouts/<repo+identity>/<name>`: one build dir configured by one prober's
    /// commands is never reused by another, so a stored result always comes from a build made
    /// by the commands in its key.
    pub fn dir(work_dir: &Path, repo_path: &Path, identity: &str, name: &str) -> PathBuf {
        let canon = std::fs::canonicalize(repo_path).unwrap_or(repo_path.to_path_buf());
        let key = crate::run::store::bisect_id(&[&canon.to_string_lossy(), identity]);
        work_dir.join("checkouts").join(key).join(name)
    }

    /// Locks `dir` without waiting: a second process gets `Busy` at once instead of
    /// queueing silently behind an hours-long bisection.
    pub fn lock(dir: PathBuf) -> Result<Slot, DriverError> {
        let ioe = |source| DriverError::Io {
            path: dir.clone(),
            source,
        };
        std::fs::create_dir_all(&dir).map_err(ioe)?;
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join("lock"))
            .map_err(ioe)?;
        use std::os::fd::AsRawFd;
        // SAFETY: flock on a file descriptor we own; released when the file is closed.
        let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            return Err(DriverError::Busy(dir));
        }
        // The lock was free, so whoever held it is gone; a step it left running (a SIGKILLed
        // tool whose supervisor had no time to act) must not race us in this checkout.
        let strays = crate::probe::exec::kill_strays_in(&dir);
        if strays > 0 {
            crate::run::events::note(format!(
                "{}: stopped {strays} process(es) a previous run left behind",
                dir.display()
            ));
        }
        // The lock file's time is the slot's last use (`setrows-bisect gc` reads it).
        let _ = f.set_modified(std::time::SystemTime::now());
        Ok(Slot {
            checkout: Checkout::new(dir.join("src"), dir.join("checkout.state")),
            dir,
            _lock: f,
        })
    }

    /// The checked-out tree.
    pub fn src(&self) -> &Path {
        &self.checkout.dir
    }

    pub fn build(&self) -> PathBuf {
        self.dir.join("build")
    }

    /// Moves the checkout to `sha` of `repo` (a no-op when it is there already).
    pub fn checkout(&self, repo: &git2::Repository, sha: &str) -> Result<(), DriverError> {
        Ok(self.checkout.checkout(repo, sha)?)
    }

    /// Moves the checkout to what a prober that `reads` this much reads of `sha`, tested at
    /// `scope` (`Checkout::checkout_reading`).
    pub fn checkout_reading(
        &self,
        repo: &git2::Repository,
        sha: &str,
        reads: Reads,
        scope: Option<&str>,
    ) -> Result<(), DriverError> {
        Ok(self.checkout.checkout_reading(repo, sha, reads, scope)?)
    }
}

impl Slot {
    /// `Checkout::unsettle`: before an applied patch changes the checkout.
    pub fn unsettle(&self) -> Result<Option<String>, DriverError> {
        Ok(self.checkout.unsettle()?)
    }

    /// `Checkout::restore`: the patched `paths` back to `sha`'s own.
    pub fn restore(
        &self,
        repo: &git2::Repository,
        sha: &str,
        paths: &[String],
        state: Option<String>,
    ) -> Result<(), DriverError> {
        Ok(self.checkout.restore(repo, sha, paths, state)?)
    }
}

/// One run to make: commit `sha` of `repo` (the user's, or validation's scratch repository),
/// whose tested tree `tree` keys the store, as run `index` of that tree.
pub struct RunSpec<'a> {
    pub repo: &'a git2::Repository,
    pub sha: &'a str,
    pub tree: &'a str,
    pub index: usize,
    /// Names the run's processes/containers (made unique per attempt here).
    pub name: &'a str,
    /// Another build dir than the slot's (the matrix keeps one per image and recipe).
    pub build: Option<&'a Path>,
    /// Another log than the store's (the matrix writes into `--out`); the stored result
    /// gets a copy in the store, since `--out` directories come and go.
    pub log: Option<&'a Path>,
}

/// What was seen while running, for progress lines and the journal.
pub struct Hooks<'a> {
    pub phase: &'a dyn Fn(Phase),
    /// `(attempt, message)` after each infrastructure error.
    pub infra: &'a dyn Fn(u32, &str),
}

impl Hooks<'_> {
    pub const QUIET: Hooks<'static> = Hooks {
        phase: &|_| {},
        infra: &|_, _| {},
    };
}

/// The hooks of a probe run outside the driver (the `--compare-good` recording, `--probe`):
/// no journal and no retry event of its own, so each infrastructure retry is a note,
/// `"{who}: infrastructure error (attempt N): MSG"`; the phases go where the caller says.
/// `Hooks` borrows its closures, so these own them and lend them out (`hooks`).
pub struct Noting<'a> {
    phase: Box<dyn Fn(Phase) + 'a>,
    infra: Box<InfraHook<'a>>,
}

/// `Hooks::infra`'s shape: `(attempt, message)`.
type InfraHook<'a> = dyn Fn(u32, &str) + 'a;

impl<'a> Noting<'a> {
    pub fn new(
        events: &'a dyn crate::core::progress::Sink,
        who: String,
        phase: impl Fn(Phase) + 'a,
    ) -> Self {
        Noting {
            phase: Box::new(phase),
            infra: Box::new(move |attempt, msg| {
                events.emit(crate::core::progress::Event::Note {
                    text: format!("{who}: infrastructure error (attempt {attempt}): {msg}"),
                })
            }),
        }
    }

    pub fn hooks(&self) -> Hooks<'_> {
        Hooks {
            phase: &*self.phase,
            infra: &*self.infra,
        }
    }
}

/// The last report (an `InfraError` when every attempt failed) and how many attempts it took.
pub struct Attempted {
    pub report: ProbeReport,
    pub attempts: u32,
}

/// How runs are made: by which prober, into which store, with how many attempts.
pub struct Probing<'a> {
    pub prober: &'a dyn Prober,
    /// `prober.identity()`, computed once: it keys the store and can be costly to build.
    pub identity: String,
    /// `prober.slot_identity()`: it names the slots (`Slot::dir`).
    pub slot_identity: String,
    /// `None` only for the matrix's `--fresh`: runs nothing from, and stores nothing into, it.
    pub store: Option<&'a Store>,
    pub attempts: u32,
    /// Pause between attempts (doubling): a container engine that is restarting needs a
    /// moment; a missing `sh` does not, so bisections retry at once.
    pub backoff: Option<Duration>,
    /// Answer a run from the stored run of byte-identical artifacts (`run::artifacts`) instead
    /// of testing: only where one run decides a commit, never where runs repeat on purpose.
    pub reuse_artifacts: bool,
    /// What of each commit the checkout writes (`prober.reads()`, unless the caller's slot
    /// serves more than this prober).
    pub reads: Reads,
    /// The tested tree (the range's `--path`, given or detected): a blob absent outside it is
    /// not written rather than fatal.
    pub scope: Option<String>,
    /// The bisection's work dir, where builds are measured for `--jobs auto`
    /// (`run::jobs::record`) and GPU tests take turns (`run::jobs::GpuTurn`); `None` outside
    /// a bisection (a matrix cell probes one configuration at a time).
    pub turns_in: Option<PathBuf>,
    pub meter: crate::run::jobs::Meter,
}

impl<'a> Probing<'a> {
    pub fn new(prober: &'a dyn Prober, store: &'a Store) -> Self {
        Probing {
            prober,
            identity: prober.identity(),
            slot_identity: prober.slot_identity(),
            store: Some(store),
            attempts: INFRA_RETRIES,
            backoff: None,
            reuse_artifacts: false,
            reads: prober.reads(),
            scope: None,
            turns_in: None,
            meter: Default::default(),
        }
    }

    /// `prober.probe`, measuring the build when it runs alone and, with a work dir, holding
    /// the GPU's turn from the test step on (only the tests take turns: the builds of
    /// concurrent slots overlap, which is what `--jobs K` is for).
    pub fn probe_taking_turns(&self, req: &ProbeRequest<'_>, phase: &dyn Fn(Phase)) -> ProbeReport {
        let Some(work) = &self.turns_in else {
            return self.prober.probe(req, phase);
        };
        let measuring = self.meter.begin();
        let turn = std::sync::Mutex::new(None);
        let gpu = self.prober.test_uses_gpu();
        let report = self.prober.probe(req, &|p| {
            match p {
                Phase::Build => measuring.build_starts(),
                Phase::Test => {
                    if let Some((cpu, wall)) = measuring.build_ended(self.prober.builds_here()) {
                        crate::run::jobs::record(work, cpu, wall);
                    }
                    if gpu {
                        let t = crate::run::jobs::GpuTurn::take(work);
                        if let Ok(mut held) = turn.lock() {
                            *held = t;
                        }
                    }
                }
                _ => {}
            }
            phase(p)
        });
        drop(turn);
        report
    }

    pub fn key(&self, tree: &str) -> StoreKey {
        StoreKey::new(tree, &self.identity)
    }

    /// Stored runs of `tree` under this prober, in run-index order.
    pub fn stored(&self, tree: &str) -> Result<Vec<StoredRun>, DriverError> {
        match self.store {
            Some(s) => Ok(s.load(&self.key(tree))?),
            None => Ok(Vec::new()),
        }
    }

    /// The run index after the highest stored one (0 when none): new runs go after every
    /// stored file, never into a gap an interrupted wave left, so the store's order is the
    /// order the runs were used in and a replay consumes them exactly as the first pass did.
    pub fn next_index(&self, tree: &str) -> usize {
        let Some(s) = self.store else { return 0 };
        std::fs::read_dir(s.root().join("results").join(&self.key(tree).0))
            .into_iter()
            .flatten()
            .filter_map(|e| {
                let name = e.ok()?.file_name();
                let n = name.to_str()?.strip_prefix("run-")?.strip_suffix(".json")?;
                n.parse::<usize>().ok()
            })
            .map(|n| n + 1)
            .max()
            .unwrap_or(0)
    }

    /// Where run `index` of `tree` logs, unless the spec names another log.
    pub fn log_path(&self, run: &RunSpec<'_>) -> PathBuf {
        match (run.log, self.store) {
            (Some(l), _) => l.to_path_buf(),
            (None, Some(s)) => s.log_path(&self.key(run.tree), run.index),
            (None, None) => std::env::temp_dir().join(format!("{}.log", run.name)),
        }
    }

    /// The loop: checkout, probe, retry infrastructure errors, store. An `InfraError` report
    /// comes back (never stored) when every attempt failed, and a systematic `Untestable` at
    /// once (never stored, never retried: the same machine says the same); callers that must
    /// not turn either into a verdict use `run_in`.
    pub fn attempt_in(
        &self,
        slot: &Slot,
        run: &RunSpec<'_>,
        hooks: &Hooks<'_>,
    ) -> Result<Attempted, DriverError> {
        let log = self.log_path(run);
        let build = run.build.map_or_else(|| slot.build(), Path::to_path_buf);
        // This run's log, not a previous run's; attempts write after one another.
        let _ = std::fs::remove_file(&log);
        let index = match (self.reuse_artifacts, self.store) {
            (true, Some(store)) => Some(StoredArtifacts::new(store, &self.identity)),
            _ => None,
        };
        let mut attempt = 0;
        loop {
            attempt += 1;
            (hooks.phase)(Phase::Checkout);
            slot.checkout_reading(run.repo, run.sha, self.reads, self.scope.as_deref())?;
            // An applied patch goes on after the checkout and comes off after the probe: the
            // slot's checkout is reused, and the next probe must start from its own commit.
            let applied = self.prober.applied();
            let state = if applied.is_empty() {
                None
            } else {
                Some(slot.unsettle()?)
            };
            let refused = match state {
                Some(_) => crate::run::apply::apply(slot.src(), applied).err(),
                None => None,
            };
            let name = format!("{}-{attempt}", run.name);
            let req = ProbeRequest {
                commit: run.sha,
                checkout: slot.src(),
                build_dir: &build,
                log_path: &log,
                run_name: &name,
                artifacts: index.as_ref().map(|i| i as &dyn ArtifactIndex),
            };
            let report = match &refused {
                // A tree the patch does not apply to is a skip with git apply's reason.
                Some(why) => {
                    let _ = std::fs::write(&log, format!("{why}\n"));
                    let mut r = ProbeReport::infra(why.clone(), &log);
                    r.outcome = Outcome::Untestable;
                    r.skip_scope = crate::core::outcome::SkipScope::Commit;
                    r
                }
                None => self.probe_taking_turns(&req, hooks.phase),
            };
            if let Some(state) = state {
                slot.restore(run.repo, run.sha, &crate::run::apply::files(applied), state)?;
            }
            // A reason of this machine or configuration is no result of the tree: stored, it
            // would answer for the tree after the environment is fixed ("no AMD GPU" forever).
            if report.is_systematic() {
                return Ok(Attempted {
                    report,
                    attempts: attempt,
                });
            }
            if report.outcome != Outcome::InfraError {
                let report = self.save(run, report)?;
                return Ok(Attempted {
                    report,
                    attempts: attempt,
                });
            }
            (hooks.infra)(attempt, report.signature.as_deref().unwrap_or_default());
            if attempt >= self.attempts.max(1) {
                return Ok(Attempted {
                    report,
                    attempts: attempt,
                });
            }
            if let Some(pause) = self.backoff {
                std::thread::sleep(pause * (1 << attempt.min(6)));
            }
        }
    }

    /// `attempt_in`, with an exhausted infrastructure failure as `DriverError::Infra` and a
    /// systematic untestable as `DriverError::Systematic`: the result of every caller whose
    /// answer is a verdict (exit 3, never a silent drop, never a probe per commit to prove it).
    pub fn run_in(
        &self,
        slot: &Slot,
        run: &RunSpec<'_>,
        hooks: &Hooks<'_>,
    ) -> Result<ProbeReport, DriverError> {
        let a = self.attempt_in(slot, run, hooks)?;
        if a.report.is_systematic() {
            return Err(DriverError::Systematic {
                sha: run.sha.to_string(),
                reason: a.report.signature.clone().unwrap_or_default(),
                configuration: a.report.provenance.get("configuration").cloned(),
                log: a.report.log_path.display().to_string(),
            });
        }
        if a.report.outcome != Outcome::InfraError {
            return Ok(a.report);
        }
        Err(DriverError::Infra {
            sha: run.sha.to_string(),
            attempts: a.attempts,
            message: a.report.signature.unwrap_or_default(),
            log: a.report.log_path.display().to_string(),
        })
    }

    fn save(&self, run: &RunSpec<'_>, mut report: ProbeReport) -> Result<ProbeReport, DriverError> {
        let Some(store) = self.store else {
            return Ok(report);
        };
        let key = self.key(run.tree);
        if run.log.is_some() {
            let stored_log = store.log_path(&key, run.index);
            let copied = stored_log
                .parent()
                .map(std::fs::create_dir_all)
                .and_then(Result::ok)
                .and_then(|_| std::fs::copy(&report.log_path, &stored_log).ok());
            if copied.is_some() {
                report.log_path = stored_log;
            }
        }
        let stored = StoredRun {
            tree: run.tree.to_string(),
            identity: self.identity.clone(),
            commit: run.sha.to_string(),
            recorded_at: chrono::Utc::now().to_rfc3339(),
            report,
        };
        store.save(&key, run.index, &stored)?;
        if let (Some(digest), None) = (&stored.report.artifact_digest, &stored.report.reused_from) {
            StoredArtifacts::new(store, &self.identity).record(digest, &key, run.index, run.sha)?;
        }
        let mut report = stored.report;
        if let Some(l) = run.log {
            // The caller reads the log it asked for; the store keeps its own copy.
            report.log_path = l.to_path_buf();
        }
        Ok(report)
    }
}
