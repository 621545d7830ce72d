//! The on-disk result store: every probe result is written here *before* the search uses it,
//! so a bisect killed at any moment (SIGINT or SIGKILL) resumes by re-running the same command,
//! and a second bisect over an overlapping range answers from disk instead of rebuilding.
//!
//! A result is keyed by what was tested, not by which commit was checked out: the id of the
//! tested tree plus the prober's identity (commands, configuration, relevant environment,
//! launcher). Two commits with the same tested tree share results. Each run is one JSON file,
//! written to a temp file and renamed into place, so a reader sees a whole result or none.
//! `InfraError` is never stored: it says nothing about the code under test.
//!
//! Layout under the work dir:
//! ```text
//! results/<key>/run-0000.json   one file per run of one (tree, prober identity)
//! logs/<key16>-<run>.log        the probe's full output
//! journal/<bisect-id>.jsonl     append-only record of what one bisection did, in order
//! ```

use crate::core::outcome::Outcome;
use crate::probe::ProbeReport;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("work dir {path} is not writable: {source} (pass --work-dir DIR)")]
    Unwritable {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("result store {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("refusing to store an infrastructure error as a result")]
    InfraNotStored,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Hex sha256 of what was tested.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct StoreKey(pub String);

impl StoreKey {
    pub fn new(tested_tree: &str, prober_identity: &str) -> Self {
        let mut h = Sha256::new();
        h.update(b"setrows-bisect result v1\0");
        h.update(tested_tree.as_bytes());
        h.update(b"\0");
        h.update(prober_identity.as_bytes());
        StoreKey(hex::encode(h.finalize()))
    }
}

/// One stored run: the report plus what it was a report of.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StoredRun {
    pub tree: String,
    pub identity: String,
    /// The commit that was checked out (any member of the tree class would do).
    pub commit: String,
    pub recorded_at: String,
    pub report: ProbeReport,
}

#[derive(Debug)]
pub struct Store {
    root: PathBuf,
    journal: Mutex<Option<(PathBuf, fs::File)>>,
}

/// The default work dir: `$XDG_CACHE_HOME/setrows-bisect`, else `~/.cache/setrows-bisect`.
pub fn default_work_dir() -> PathBuf {
    dirs::cache_dir()
        .unwrap_or_else(|| std::env::temp_dir().join("setrows-bisect-cache"))
        .join("setrows-bisect")
}

impl Store {
    /// Creates the work dir if needed and proves it writable before any work is done.
    pub fn open(root: &Path) -> Result<Store, StoreError> {
        let unwritable = |source| StoreError::Unwritable {
            path: root.to_path_buf(),
            source,
        };
        fs::create_dir_all(root.join("results")).map_err(unwritable)?;
        tempfile::NamedTempFile::new_in(root).map_err(unwritable)?;
        Ok(Store {
            root: root.to_path_buf(),
            journal: Mutex::new(None),
        })
    }

    /// The store at `root` as it is, for reading only (`--dry-run`): nothing is created, and a
    /// work dir that does not exist yet holds no results.
    pub fn at(root: &Path) -> Store {
        Store {
            root: root.to_path_buf(),
            journal: Mutex::new(None),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// THE store's file layout: `results/<key>/run-NNNN.json`, `logs/`, `journal/<id>.jsonl`
    /// and `journal/<id>.result.json` (what `show` and `log` read), spelled here only.
    pub fn results_dir(&self) -> PathBuf {
        self.root.join("results")
    }

    /// The directory of one key's runs.
    pub fn dir(&self, key: &StoreKey) -> PathBuf {
        self.results_dir().join(&key.0)
    }

    /// The journal directory (`open_journal`, `result_path`).
    pub fn journal_dir(&self) -> PathBuf {
        self.root.join("journal")
    }

    /// Where a bisection's final result is kept.
    pub fn result_path(&self, id: &str) -> PathBuf {
        self.journal_dir().join(format!("{id}.result.json"))
    }

    /// All stored runs for `key`, in the order they were recorded. Unreadable files are
    /// skipped (and reported on stderr): they can only come from outside interference, and
    /// the probe will simply run again.
    pub fn load(&self, key: &StoreKey) -> Result<Vec<StoredRun>, StoreError> {
        let dir = self.dir(key);
        let entries = match fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io(&dir)(e)),
        };
        let mut names: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("run-") && n.ends_with(".json"))
            })
            .collect();
        names.sort();
        let mut runs = Vec::new();
        for p in names {
            let text = fs::read_to_string(&p).map_err(io(&p))?;
            match serde_json::from_str::<StoredRun>(&text) {
                Ok(r) if r.report.outcome != Outcome::InfraError => runs.push(r),
                Ok(_) => {}
                Err(e) => crate::run::events::note(format!(
                    "warning: ignoring unreadable result {}: {e}",
                    p.display()
                )),
            }
        }
        Ok(runs)
    }

    /// Run `index` of `key`, when it is on disk and readable.
    pub fn load_run(&self, key: &StoreKey, index: usize) -> Option<StoredRun> {
        let path = self.dir(key).join(format!("run-{index:04}.json"));
        serde_json::from_slice(&fs::read(path).ok()?).ok()
    }

    /// Where run `index` of `key` logs its output.
    pub fn log_path(&self, key: &StoreKey, index: usize) -> PathBuf {
        self.root
            .join("logs")
            .join(format!("{}-{index}.log", &key.0[..16]))
    }

    /// Whether run `index` of `key` is on disk (readable or not): seeding from elsewhere
    /// (`--resume-from-issue`) never overwrites a local result.
    pub fn has_run(&self, key: &StoreKey, index: usize) -> bool {
        self.dir(key).join(format!("run-{index:04}.json")).exists()
    }

    /// Stores run `index` atomically (temp file, fsync, rename). Refuses infrastructure errors.
    pub fn save(&self, key: &StoreKey, index: usize, run: &StoredRun) -> Result<(), StoreError> {
        if run.report.outcome == Outcome::InfraError {
            return Err(StoreError::InfraNotStored);
        }
        let dir = self.dir(key);
        fs::create_dir_all(&dir).map_err(io(&dir))?;
        let target = dir.join(format!("run-{index:04}.json"));
        let body = serde_json::to_vec_pretty(run).map_err(|e| StoreError::Io {
            path: target.clone(),
            source: std::io::Error::other(e),
        })?;
        write_atomic(&target, &body).map_err(io(&target))
    }

    /// Starts (or continues) the journal of one bisection; `id` is stable for the same command.
    pub fn open_journal(&self, id: &str) -> Result<PathBuf, StoreError> {
        let dir = self.journal_dir();
        fs::create_dir_all(&dir).map_err(io(&dir))?;
        let path = dir.join(format!("{id}.jsonl"));
        let f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(io(&path))?;
        if let Ok(mut j) = self.journal.lock() {
            *j = Some((path.clone(), f));
        }
        Ok(path)
    }

    /// Appends one event (one JSON line) to the open journal, if any.
    pub fn journal(&self, event: &serde_json::Value) -> Result<(), StoreError> {
        let Ok(mut guard) = self.journal.lock() else {
            return Ok(());
        };
        if let Some((path, f)) = guard.as_mut() {
            let mut line = serde_json::to_string(event).unwrap_or_default();
            line.push('\n');
            f.write_all(line.as_bytes()).map_err(io(path))?;
        }
        Ok(())
    }
}

/// The result's `store_runs` section: the stored runs of `trees` (the tested trees of the
/// probed candidates) under `identity`, in store order; what `--resume-from-issue` seeds a
/// fresh store from (`run::bisect::Resume`). Log text is left out, except with `keep_match_text`
/// the output tail of failures: a `--match` predicate judges by it, so a resumed run without
/// it would judge differently.
pub fn store_runs<'a>(
    store: &Store,
    trees: impl IntoIterator<Item = &'a str>,
    identity: &str,
    keep_match_text: bool,
) -> Result<crate::core::result::StoreRuns, StoreError> {
    let mut seen = std::collections::BTreeSet::new();
    let mut runs = Vec::new();
    for tree in trees {
        if !seen.insert(tree) {
            continue;
        }
        let key = StoreKey::new(tree, identity);
        for (index, run) in store.load(&key)?.into_iter().enumerate() {
            let r = run.report;
            // A failed build is what `--regress build --match` reads, as a test failure is for
            // the other questions.
            let judged =
                r.outcome.is_failure() || r.outcome == crate::core::outcome::Outcome::BuildFailed;
            let keep = keep_match_text && judged && !r.output_tail.is_empty();
            runs.push(crate::core::result::StoreRunEntry {
                tree: run.tree,
                commit: run.commit,
                run: index,
                recorded_at: run.recorded_at,
                outcome: r.outcome,
                signature: r.signature,
                exit_code: r.exit_code,
                signal: r.signal,
                duration_s: r.duration_s,
                match_text: keep.then_some(r.output_tail),
            });
        }
    }
    Ok(crate::core::result::StoreRuns {
        version: 1,
        identity: identity.to_string(),
        runs,
    })
}

/// Stable id for a bisection: same inputs, same journal (a resumed run appends to it).
pub fn bisect_id(parts: &[&str]) -> String {
    crate::core::id::of_parts(parts, 16)
}

/// Writes `bytes` to `path` so that a reader (or a resumed run after a crash or power loss)
/// sees the old file or the whole new one: a temp file in the same directory, fsynced, renamed,
/// then the directory fsynced (the rename is durable only once the directory entry is).
/// Every file the tool writes as a result goes through here.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::Builder::new().prefix(".tmp-").tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    fs::File::open(dir).and_then(|d| d.sync_all())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn report(outcome: Outcome) -> ProbeReport {
        ProbeReport {
            outcome,
            signature: None,
            exit_code: Some(0),
            signal: None,
            duration_s: 1.0,
            build_s: 0.5,
            test_s: 0.5,
            log_path: "x.log".into(),
            output_tail: "ok".into(),
            provenance: BTreeMap::new(),
            ccache: None,
            artifact_digest: None,
            reused_from: None,
            skip_scope: Default::default(),
        }
    }

    #[test]
    fn roundtrip_in_order_and_infra_refused() {
        let d = tempfile::tempdir().unwrap();
        let s = Store::open(d.path()).unwrap();
        let k = StoreKey::new("tree", "id");
        assert_ne!(k, StoreKey::new("tree", "id2"));
        let run = |o| StoredRun {
            tree: "tree".into(),
            identity: "id".into(),
            commit: "c".into(),
            recorded_at: "now".into(),
            report: report(o),
        };
        s.save(&k, 0, &run(Outcome::Pass)).unwrap();
        s.save(&k, 1, &run(Outcome::Crash)).unwrap();
        assert!(matches!(
            s.save(&k, 2, &run(Outcome::InfraError)),
            Err(StoreError::InfraNotStored)
        ));
        let got: Vec<Outcome> = s
            .load(&k)
            .unwrap()
            .iter()
            .map(|r| r.report.outcome)
            .collect();
        assert_eq!(got, vec![Outcome::Pass, Outcome::Crash]);
        assert!(s.load(&StoreKey::new("other", "id")).unwrap().is_empty());
    }

    #[test]
    fn unwritable_work_dir_is_a_clear_error() {
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("file");
        fs::write(&file, "").unwrap();
        let err = Store::open(&file.join("sub")).unwrap_err();
        assert!(err.to_string().contains("not writable"), "{err}");
    }
}
