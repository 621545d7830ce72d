//! Culprit validation: is the answer of a bisection believable?
//!
//! Kernel CI's lesson is that bisection of real (flaky, noisy) failures produces plausible but
//! wrong culprits. So after a verdict the culprit and its parent are run again several times,
//! the culprit is reverted on top of the bad endpoint where it reverts cleanly (the fault must
//! go away), and two cheap smells are checked: a change whose built libraries are identical to
//! its parent's cannot have changed behaviour, and a change that only touches docs, tests,
//! examples or another GPU backend cannot have broken this one.
//!
//! The judging is pure (`judge`, `classify`); the effects are small and separate: the paths a
//! commit changed, hashes of build outputs, and the revert, done in a scratch repository that
//! borrows the user's objects (alternates) so the user's repository is never written.

use crate::core::evidence::Evidence;
use crate::core::flaky::Beta;
pub use crate::core::judge::{
    classify, classify_for, judge, run_limit, Finding, Observations, PathClass, Revert, Validation,
};
use crate::core::plan::Plan;
use crate::core::result::{BisectRecord, Conclusion, ValidationResult};
use crate::run::slots::{DriverError, Hooks, Probing, RunSpec, Slot};
use crate::run::store::Store;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Paths a commit changed against its first parent (all paths of a root commit).
pub fn changed_paths(
    repo: &git2::Repository,
    commit: git2::Oid,
) -> Result<Vec<String>, ValidateError> {
    let c = repo
        .find_commit(commit)
        .map_err(git(format!("reading commit {commit}")))?;
    let tree = c.tree().map_err(git(format!("reading tree of {commit}")))?;
    let parent = match c.parent(0) {
        Ok(p) => Some(
            p.tree()
                .map_err(git(format!("reading parent tree of {commit}")))?,
        ),
        Err(_) => None,
    };
    let diff = repo
        .diff_tree_to_tree(parent.as_ref(), Some(&tree), None)
        .map_err(git(format!("diffing {commit}")))?;
    let mut out: Vec<String> = diff
        .deltas()
        .flat_map(|d| [d.old_file().path(), d.new_file().path()])
        .flatten()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    out.sort();
    out.dedup();
    Ok(out)
}

#[derive(Debug, thiserror::Error)]
pub enum ValidateError {
    #[error("{context}: {source}")]
    Git {
        context: String,
        source: git2::Error,
    },
    /// A validation run failed: the slot is busy, or the machinery failed after retries.
    #[error(transparent)]
    Run(#[from] DriverError),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

fn git(context: String) -> impl FnOnce(git2::Error) -> ValidateError {
    move |source| ValidateError::Git { context, source }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ValidateError + '_ {
    move |source| ValidateError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// SHA-256 of every library and executable under `build_dir` (relative path -> hex), the
/// things whose bytes decide behaviour. Object files and logs are left out: they embed paths
/// and timestamps that differ between identical builds.
pub fn hash_outputs(build_dir: &Path) -> Result<BTreeMap<String, String>, ValidateError> {
    use sha2::{Digest, Sha256};
    use std::os::unix::fs::PermissionsExt;
    let mut out = BTreeMap::new();
    let mut stack = vec![build_dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).map_err(io(&dir))? {
            let entry = entry.map_err(io(&dir))?;
            let path = entry.path();
            let meta = std::fs::symlink_metadata(&path).map_err(io(&path))?;
            if meta.is_dir() {
                if path.file_name().is_some_and(|n| n != "CMakeFiles") {
                    stack.push(path);
                }
                continue;
            }
            if !meta.is_file() {
                continue;
            }
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy())
                .unwrap_or_default();
            let lib = name.ends_with(".so")
                || name.contains(".so.")
                || name.ends_with(".a")
                || name.ends_with(".dylib");
            let exe = meta.permissions().mode() & 0o111 != 0 && !name.ends_with(".sh");
            if !(lib || exe) {
                continue;
            }
            let bytes = std::fs::read(&path).map_err(io(&path))?;
            let rel = path
                .strip_prefix(build_dir)
                .unwrap_or(&path)
                .to_string_lossy()
                .into_owned();
            out.insert(rel, hex::encode(Sha256::digest(&bytes)));
        }
    }
    Ok(out)
}

/// Reverts `culprit` onto `onto` in a scratch repository at `scratch` that reads the user's
/// objects through alternates and writes only its own. Returns the scratch repository (to
/// check the result out from) and what happened.
pub fn revert_in_scratch(
    repo_path: &Path,
    culprit: &str,
    onto: &str,
    scratch: &Path,
) -> Result<(git2::Repository, Revert), ValidateError> {
    let user = git2::Repository::open(repo_path)
        .map_err(git(format!("opening {}", repo_path.display())))?;
    let objects = user.path().join("objects");
    let scratch_repo = if scratch.join("HEAD").exists() {
        git2::Repository::open_bare(scratch)
            .map_err(git(format!("opening {}", scratch.display())))?
    } else {
        std::fs::create_dir_all(scratch).map_err(io(scratch))?;
        git2::Repository::init_bare(scratch)
            .map_err(git(format!("creating {}", scratch.display())))?
    };
    let alt = scratch.join("objects/info/alternates");
    std::fs::create_dir_all(scratch.join("objects/info")).map_err(io(scratch))?;
    std::fs::write(&alt, format!("{}\n", objects.display())).map_err(io(&alt))?;
    // Re-open so the object database picks up the alternates file.
    let scratch_repo = {
        drop(scratch_repo);
        git2::Repository::open_bare(scratch)
            .map_err(git(format!("opening {}", scratch.display())))?
    };
    let revert = revert_in(&scratch_repo, culprit, onto)?;
    Ok((scratch_repo, revert))
}

fn revert_in(repo: &git2::Repository, culprit: &str, onto: &str) -> Result<Revert, ValidateError> {
    let oid = |s: &str| git2::Oid::from_str(s).map_err(git(format!("parsing {s}")));
    let c = repo
        .find_commit(oid(culprit)?)
        .map_err(git(format!("reading {culprit}")))?;
    let bad = repo
        .find_commit(oid(onto)?)
        .map_err(git(format!("reading {onto}")))?;
    if c.parent_count() != 1 {
        return Ok(Revert::NotSingle);
    }
    let mut index = repo
        .revert_commit(&c, &bad, 0, None)
        .map_err(git(format!("reverting {culprit} onto {onto}")))?;
    if index.has_conflicts() {
        let mut paths: Vec<String> = index
            .conflicts()
            .map_err(git("listing conflicts".into()))?
            .flatten()
            .filter_map(|cf| cf.our.or(cf.their).or(cf.ancestor))
            .map(|e| String::from_utf8_lossy(&e.path).into_owned())
            .collect();
        paths.sort();
        paths.dedup();
        return Ok(Revert::Conflicts { paths });
    }
    let tree_id = index
        .write_tree_to(repo)
        .map_err(git("writing the reverted tree".into()))?;
    let tree = repo
        .find_tree(tree_id)
        .map_err(git("reading the reverted tree".into()))?;
    // A fixed signature and time: the same revert is the same commit, so its probes are
    // stored and reused like any other tree.
    let sig = git2::Signature::new(
        "setrows-bisect",
        "setrows-bisect@localhost",
        &git2::Time::new(0, 0),
    )
    .map_err(git("signature".into()))?;
    let msg = format!("Revert {culprit} on top of {onto} (setrows-bisect validation)");
    let commit = repo
        .commit(None, &sig, &sig, &msg, &tree, &[&bad])
        .map_err(git("writing the revert commit".into()))?;
    Ok(Revert::Clean {
        commit: commit.to_string(),
    })
}

/// What the effectful validation needs from the bisection that produced the answer.
/// Runs are `runs` each at least, more for rare faults (`run_limit`).
pub struct Setup<'a> {
    pub repo_path: &'a Path,
    pub prober: &'a dyn crate::probe::Prober,
    /// The bisection's store: a validation run of a tree is a run of that tree like any
    /// other, used by later bisections and validations alike.
    pub store: &'a Store,
    pub predicate: &'a crate::core::outcome::Predicate,
    /// The subtree that keys runs (`--path`), as in the bisected range.
    pub path: Option<&'a str>,
    /// Runs of the culprit, of its parent and of the reverted bad endpoint (each).
    pub runs: u32,
    /// Validation's slot and scratch repository live under here.
    pub work_dir: &'a Path,
    /// Backend the test exercises, for path classification (`hip`, `cuda`, `cpu`, ...);
    /// `None` when unknown (a `--script`): then no backend's sources count as irrelevant.
    pub backend: Option<&'a str>,
    /// Reproduction rate estimated by the bisection.
    pub rate: Beta,
}

/// Validation's runs: one locked slot, the bisection's store and prober.
struct Runs<'a> {
    setup: &'a Setup<'a>,
    probing: Probing<'a>,
    slot: Slot,
    progress: &'a dyn Fn(&str),
}

impl Runs<'_> {
    /// Gathers evidence for `sha` (from `repo`, the user's or the scratch one) up to
    /// `run_limit` runs, stored runs of its tree first, stopping once a failure has been seen
    /// and at least `stop_on_failure_after` runs were used (one failure settles a parent or a
    /// revert; the culprit still gets its `n` runs). New runs go through the one slot loop:
    /// stored, and an infrastructure failure is an error, never left out. Also says whether
    /// the slot's build dir now holds this tree's build.
    fn probe_n(
        &self,
        repo: &git2::Repository,
        sha: &str,
        role: &str,
        stop_on_failure_after: u32,
    ) -> Result<(Evidence, String, bool), ValidateError> {
        let tree = crate::run::git::tested_tree_of(repo, sha, self.setup.path)
            .map_err(DriverError::from)?;
        let mut stored = self.probing.stored(&tree)?.into_iter();
        let mut next = self.probing.next_index(&tree);
        let short = &sha[..sha.len().min(10)];
        let name = format!("setrows-validate-{short}-{}", std::process::id());
        let mut ev = Evidence::default();
        let mut built = false;
        let limit = run_limit(self.setup.runs, self.setup.rate);
        for i in 0..limit {
            if ev.new > 0 && ev.runs() >= stop_on_failure_after {
                break;
            }
            let (report, cached) = match stored.next() {
                Some(run) => (run.report, true),
                None => {
                    let run = RunSpec {
                        repo,
                        sha,
                        tree: &tree,
                        index: next,
                        name: &name,
                        build: None,
                        log: None,
                    };
                    next += 1;
                    let hooks = Hooks {
                        phase: &|_| {},
                        infra: &|attempt, msg| {
                            (self.progress)(&format!(
                                "validate {role} {short}: infrastructure error (attempt {attempt}/{}): {msg}",
                                self.probing.attempts
                            ))
                        },
                    };
                    let r = self.probing.run_in(&self.slot, &run, &hooks)?;
                    built = true;
                    (r, false)
                }
            };
            let v = self
                .setup
                .predicate
                .judge(report.outcome, &report.output_tail);
            (self.progress)(&format!(
                "validate {role} {short} run {}: {} ({v}){}",
                i + 1,
                report.outcome,
                if cached { " [stored]" } else { "" }
            ));
            ev.add(v);
        }
        Ok((ev, tree, built))
    }

    /// Hashes of the build outputs of `tree`: measured now when the slot just built it,
    /// else as measured when it last did (kept next to the slot), so a validation answered
    /// from the store compares the same builds as the one that ran them.
    fn outputs(&self, tree: &str, built: bool) -> Option<BTreeMap<String, String>> {
        let file = self
            .setup
            .work_dir
            .join("validate")
            .join("outputs")
            .join(format!("{}.json", self.probing.key(tree).0));
        if built {
            let h = hash_outputs(&self.slot.build()).ok()?;
            if let Some(dir) = file.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            let _ = std::fs::write(&file, serde_json::to_string(&h).unwrap_or_default());
            return Some(h);
        }
        serde_json::from_str(&std::fs::read_to_string(&file).ok()?).ok()
    }
}

/// Re-runs the culprit and its parent, reverts the culprit onto `bad` and runs that, compares
/// build outputs and classifies the changed paths; then judges.
pub fn validate_culprit(
    setup: &Setup<'_>,
    culprit: &str,
    bad: &str,
    progress: &dyn Fn(&str),
) -> Result<(Observations, Validation), ValidateError> {
    let repo = git2::Repository::open(setup.repo_path)
        .map_err(git(format!("opening {}", setup.repo_path.display())))?;
    let cid = git2::Oid::from_str(culprit).map_err(git(format!("parsing {culprit}")))?;
    let parent = repo
        .find_commit(cid)
        .map_err(git(format!("reading {culprit}")))?
        .parent_id(0)
        .ok()
        .map(|p| p.to_string());
    let mut obs = Observations {
        paths: changed_paths(&repo, cid)?
            .into_iter()
            .map(|p| {
                let c = classify_for(&p, setup.backend);
                (p, c)
            })
            .collect(),
        backend: setup.backend.map(str::to_string),
        ..Default::default()
    };
    let probing = Probing {
        scope: setup.path.map(str::to_string),
        ..Probing::new(setup.prober, setup.store)
    };
    let dir = Slot::dir(
        setup.work_dir,
        setup.repo_path,
        &probing.slot_identity,
        "validate",
    );
    let runs = Runs {
        setup,
        slot: Slot::lock(dir)?,
        probing,
        progress,
    };
    let mut parent_hash = None;
    if let Some(p) = &parent {
        let (ev, tree, built) = runs.probe_n(&repo, p, "parent", 1)?;
        obs.parent = ev;
        parent_hash = runs.outputs(&tree, built);
    }
    let (ev, tree, built) = runs.probe_n(&repo, culprit, "culprit", setup.runs)?;
    obs.culprit = ev;
    // A build question's culprit is a failed build: what its build dir holds is what the
    // parent's build left there, so "identical to the parent's" would be no smell at all.
    let compare = !setup.predicate.regress.build_only();
    if let (true, Some(a), Some(b)) = (compare, parent_hash, runs.outputs(&tree, built)) {
        if !a.is_empty() && !b.is_empty() {
            obs.identical_build = Some(a == b);
        }
    }
    let scratch = setup.work_dir.join("validate").join("scratch.git");
    let (scratch_repo, revert) = revert_in_scratch(setup.repo_path, culprit, bad, &scratch)?;
    if let Revert::Clean { commit } = &revert {
        obs.reverted = Some(runs.probe_n(&scratch_repo, commit, "reverted", 1)?.0);
    }
    obs.revert = Some(revert);
    let v = judge(&obs, setup.rate);
    Ok((obs, v))
}

/// The CLI's `--validate N` step after a bisection: validates a found culprit and returns what
/// the result records (`None` when off or nothing was found); the report renders it. Errors are the machinery's (exit 3), an infrastructure failure of any run included.
pub fn after_bisect(
    plan: &Plan,
    prober: &dyn crate::probe::Prober,
    store: &Store,
    outcome: &BisectRecord,
    runs: u32,
    backend: Option<&str>,
    events: &dyn crate::core::progress::Sink,
) -> anyhow::Result<Option<ValidationResult>> {
    let Conclusion::Found { index } = &outcome.conclusion else {
        return Ok(None);
    };
    if runs == 0 {
        return Ok(None);
    }
    let r = &plan.range;
    let ev = crate::core::flaky::evidence_from_runs(
        r.candidates.len(),
        outcome.probes.iter().map(|x| (x.candidate, x.verdict)),
    );
    let setup = Setup {
        repo_path: &plan.repo_path,
        prober,
        store,
        predicate: &plan.predicate,
        path: r.spec.path.as_deref(),
        runs,
        work_dir: &plan.work_dir,
        backend,
        rate: crate::core::flaky::rate_posterior(&ev, Beta::UNIFORM),
    };
    let say = |l: &str| {
        events.emit(crate::core::progress::Event::Note {
            text: l.to_string(),
        })
    };
    let (obs, v) = validate_culprit(&setup, &r.candidates[*index].sha, &r.bad, &say)
        .map_err(|e| crate::error::CliError::infra(e.to_string()))?;
    for f in &v.findings {
        say(&format!("validation: {f}"));
    }
    Ok(Some(ValidationResult {
        runs,
        confirmed: v.confirmed,
        findings: v.findings,
        observations: obs,
    }))
}

#[cfg(test)]
mod tests;
