//! The store's half of artifact identity (`probe::artifacts`): which stored run tested
//! artifacts with a given digest.
//!
//! `artifacts/<prober>/<digest>` holds a pointer (result key, run index, commit) to the stored
//! run of the commit that produced them; `<prober>` is a hash of the prober's identity, so a
//! digest is only ever answered by runs of the same commands, configuration and launcher. A
//! pointer is written (atomically) after the run it points to, so a kill in between only loses
//! a chance to skip a test; a pointer to a run that is gone or unreadable is a miss.

use crate::core::outcome::Outcome;
use crate::probe::artifacts::{ArtifactHit, ArtifactIndex};
use crate::run::store::{bisect_id, write_atomic, Store, StoreError, StoreKey};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

#[derive(Debug)]
pub struct StoredArtifacts<'a> {
    store: &'a Store,
    identity: &'a str,
}

#[derive(Serialize, Deserialize)]
struct Pointer {
    key: String,
    run: usize,
    commit: String,
}

impl<'a> StoredArtifacts<'a> {
    pub fn new(store: &'a Store, identity: &'a str) -> Self {
        StoredArtifacts { store, identity }
    }

    /// Only digests we computed (hex) name files: nothing else can reach outside the folder.
    fn path(&self, digest: &str) -> Option<PathBuf> {
        let hex = !digest.is_empty() && digest.bytes().all(|b| b.is_ascii_hexdigit());
        hex.then(|| {
            self.store
                .root()
                .join("artifacts")
                .join(bisect_id(&["artifacts", self.identity]))
                .join(digest)
        })
    }

    /// Notes that run `run` of `key` (commit `commit`) tested artifacts with `digest`. The first
    /// run of a digest stays its answer: later runs of the same artifacts were reuses of it.
    pub fn record(
        &self,
        digest: &str,
        key: &StoreKey,
        run: usize,
        commit: &str,
    ) -> Result<(), StoreError> {
        let Some(path) = self.path(digest) else {
            return Ok(());
        };
        if path.exists() {
            return Ok(());
        }
        let io = |source| StoreError::Io {
            path: path.clone(),
            source,
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let body = serde_json::to_vec(&Pointer {
            key: key.0.clone(),
            run,
            commit: commit.to_string(),
        })
        .map_err(|e| io(std::io::Error::other(e)))?;
        write_atomic(&path, &body).map_err(io)
    }
}

impl ArtifactIndex for StoredArtifacts<'_> {
    fn lookup(&self, digest: &str) -> Option<ArtifactHit> {
        let text = std::fs::read(self.path(digest)?).ok()?;
        let p: Pointer = serde_json::from_slice(&text).ok()?;
        let run = self.store.load_run(&StoreKey(p.key), p.run)?;
        (run.identity == self.identity
            && run.report.outcome != Outcome::InfraError
            && run.report.reused_from.is_none()
            && run.commit == p.commit)
            .then_some(ArtifactHit {
                commit: run.commit,
                report: run.report,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::ProbeReport;
    use crate::run::store::StoredRun;

    fn run(identity: &str, outcome: Outcome) -> StoredRun {
        let mut report = ProbeReport::infra("", "x.log".as_ref());
        report.outcome = outcome;
        report.artifact_digest = Some("ab12".into());
        StoredRun {
            tree: "t1".into(),
            identity: identity.into(),
            commit: "c1".into(),
            recorded_at: "now".into(),
            report,
        }
    }

    #[test]
    fn a_recorded_digest_answers_only_its_own_prober() {
        let d = tempfile::tempdir().unwrap();
        let store = Store::open(d.path()).unwrap();
        let key = StoreKey::new("t1", "id");
        store.save(&key, 0, &run("id", Outcome::Crash)).unwrap();
        let index = StoredArtifacts::new(&store, "id");
        assert!(index.lookup("ab12").is_none(), "nothing recorded yet");
        index.record("ab12", &key, 0, "c1").unwrap();
        let hit = index.lookup("ab12").expect("recorded");
        assert_eq!(
            (hit.commit.as_str(), hit.report.outcome),
            ("c1", Outcome::Crash)
        );
        // The first run of a digest stays its answer.
        index
            .record("ab12", &StoreKey::new("t2", "id"), 0, "c2")
            .unwrap();
        assert_eq!(index.lookup("ab12").unwrap().commit, "c1");
        assert!(StoredArtifacts::new(&store, "other")
            .lookup("ab12")
            .is_none());
        assert!(index.lookup("../../results").is_none());
        assert!(index.lookup("cd34").is_none());
    }
}
