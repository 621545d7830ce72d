//! `--resume-from-issue`: the comment's state block carries the stored runs behind a
//! bisection, so a scheduled job with an empty work dir can seed its result store from the
//! comment alone and not repeat a single probe. The command line reads the block (the issue is
//! an input, like the repository) and hands it down in the request ([`Resume`]); `prepare`
//! seeds the store with it once the prober, and so the identity of its runs, is known.
//!
//! The bisect JSON gets a [`FIELD`] section (`run::store::store_runs` writes it): the prober
//! identity once, then per run what
//! `store::StoredRun` needs (tree id, commit, run index, outcome, signature, exit status,
//! duration). Log text is left out, except the output tail of failures when the predicate has a
//! `--match` regex: there the tail is what decides the verdict, so without it a resumed run
//! would judge differently.
//!
//! The state block reaches here only when it carries this repository's signature
//! (`github::signing`: anyone who may write to the repository can edit our comment).
//! It is still checked as untrusted input: runs are checked (hex ids, known outcome, bounded
//! index), only runs with the current prober identity are seeded, and a run already on disk is
//! never overwritten.

use crate::core::outcome::Outcome;
use crate::core::progress::{Event, Sink};
use crate::core::result::StoreRunEntry;
use crate::error::CliError;
use crate::probe::ProbeReport;
use crate::run::store::{Store, StoreError, StoreKey, StoredRun};
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;

/// `--resume-from-issue`: the state block of the bisection's comment as the command line read
/// it (`{"key", "results": [bisect result...]}`), and where it was read, for the line that says
/// what seeding did.
pub struct Resume {
    pub state: Value,
    /// `KEY on OWNER/REPO#N`.
    pub from: String,
}

/// Name of the section in the bisect result (and so in the state block).
pub const FIELD: &str = "store_runs";

/// Runs beyond this index are refused when seeding (a forged state cannot make us write
/// millions of files).
const MAX_RUN_INDEX: usize = 10_000;

/// What seeding did, for the one line the user sees.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Seeded {
    /// Runs written to the local store.
    pub written: usize,
    /// Runs the local store already had.
    pub present: usize,
    /// Runs recorded with another prober identity (other commands or environment): unusable.
    pub other_identity: usize,
    /// Entries that were not valid runs.
    pub invalid: usize,
    /// The state was compacted so far that the runs were dropped (`"compacted": 2`).
    pub dropped_by_compaction: bool,
}

fn hex_id(s: &str) -> Option<&str> {
    ((4..=64).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_hexdigit())).then_some(s)
}

/// The tested tree is `absent` when the `--path` subtree does not exist at a commit.
fn tree_id(s: &str) -> Option<&str> {
    hex_id(s).or((s == "absent").then_some(s))
}

fn stored_run(store: &Store, v: &Value, identity: &str) -> Option<(StoreKey, usize, StoredRun)> {
    let e = StoreRunEntry::deserialize(v).ok()?;
    let tree = tree_id(&e.tree)?;
    let commit = hex_id(&e.commit)?;
    if e.run > MAX_RUN_INDEX || e.outcome == Outcome::InfraError {
        return None;
    }
    let key = StoreKey::new(tree, identity);
    let report = ProbeReport {
        outcome: e.outcome,
        signature: e.signature.clone(),
        exit_code: e.exit_code,
        signal: e.signal,
        duration_s: e.duration_s,
        build_s: 0.0,
        test_s: 0.0,
        log_path: store.log_path(&key, e.run),
        output_tail: e.match_text.clone().unwrap_or_default(),
        provenance: BTreeMap::from([("resumed_from".to_string(), "issue comment".to_string())]),
        ccache: None,
        artifact_digest: None,
        reused_from: None,
        skip_scope: Default::default(),
    };
    let run = StoredRun {
        tree: tree.to_string(),
        identity: identity.to_string(),
        commit: commit.to_string(),
        recorded_at: e.recorded_at.clone(),
        report,
    };
    Some((key, e.run, run))
}

/// What seeding reads of a state block: only each result's `store_runs`, and each run on its
/// own, so that one forged entry (or a result of another kind, or one written before result
/// schemas) costs that entry, not the resume.
#[derive(Deserialize)]
struct ResumeState {
    #[serde(default)]
    results: Vec<Value>,
    #[serde(default)]
    compacted: Option<u8>,
}

#[derive(Deserialize)]
struct ResumeView {
    identity: String,
    #[serde(default)]
    runs: Vec<Value>,
}

impl Resume {
    /// Writes the block's runs of the prober `identity` into `store` (a run already there is
    /// kept) and says what it did.
    pub(super) fn seed(
        &self,
        store: &Store,
        identity: &str,
        events: &dyn Sink,
    ) -> anyhow::Result<()> {
        let seeded =
            seed(store, &self.state, identity).map_err(|e| CliError::infra(e.to_string()))?;
        events.emit(Event::Note {
            text: format!("{} ({})", seeded.line(), self.from),
        });
        Ok(())
    }
}

/// Writes the runs of a state block (`{"key", "results": [bisect result...]}`, as
/// `load_state` returns it) into `store`, for the prober `identity` only.
fn seed(store: &Store, state: &Value, identity: &str) -> Result<Seeded, StoreError> {
    let st = ResumeState::deserialize(state).unwrap_or(ResumeState {
        results: Vec::new(),
        compacted: None,
    });
    let mut out = Seeded {
        dropped_by_compaction: st.compacted == Some(2),
        ..Seeded::default()
    };
    for result in &st.results {
        let Some(section) = result
            .get(FIELD)
            .and_then(|s| ResumeView::deserialize(s).ok())
        else {
            continue;
        };
        if section.identity != identity {
            out.other_identity += section.runs.len();
            continue;
        }
        for v in &section.runs {
            match stored_run(store, v, identity) {
                None => out.invalid += 1,
                Some((key, index, _)) if store.has_run(&key, index) => out.present += 1,
                Some((key, index, run)) => {
                    store.save(&key, index, &run)?;
                    out.written += 1;
                }
            }
        }
    }
    Ok(out)
}

impl Seeded {
    pub fn line(&self) -> String {
        let mut s = format!(
            "seeded {} stored run(s) from the issue comment ({} already here)",
            self.written, self.present
        );
        if self.other_identity > 0 {
            s.push_str(&format!(
                "; {} run(s) were made by another build/test command or environment and are not reused",
                self.other_identity
            ));
        }
        if self.invalid > 0 {
            s.push_str(&format!("; {} invalid entr(ies) ignored", self.invalid));
        }
        if self.dropped_by_compaction {
            s.push_str("; the comment's state was too large to keep the runs");
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn report(outcome: Outcome, tail: &str) -> ProbeReport {
        ProbeReport {
            outcome,
            signature: Some("boom".into()),
            exit_code: Some(1),
            signal: None,
            duration_s: 1.5,
            build_s: 1.0,
            test_s: 0.5,
            log_path: "/x.log".into(),
            output_tail: tail.into(),
            provenance: BTreeMap::new(),
            ccache: None,
            artifact_digest: None,
            reused_from: None,
            skip_scope: Default::default(),
        }
    }

    #[test]
    fn runs_roundtrip_through_a_state_block_into_an_empty_store() {
        let a = tempfile::tempdir().unwrap();
        let src = Store::open(a.path()).unwrap();
        let tree = "ab".repeat(20);
        let key = StoreKey::new(&tree, "id-1");
        for (i, o) in [Outcome::Pass, Outcome::WrongResult]
            .into_iter()
            .enumerate()
        {
            let run = StoredRun {
                tree: tree.clone(),
                identity: "id-1".into(),
                commit: "cd".repeat(20),
                recorded_at: "t".into(),
                report: report(o, "the tail\n"),
            };
            src.save(&key, i, &run).unwrap();
        }
        let section =
            crate::run::store::store_runs(&src, [tree.as_str(), tree.as_str()], "id-1", true)
                .unwrap();
        assert_eq!(section.runs.len(), 2, "{section:?}");
        assert!(section.runs[0].match_text.is_none(), "passes keep no text");
        let state = json!({"key": "bisect:x", "results": [{ FIELD: section }]});

        let b = tempfile::tempdir().unwrap();
        let dst = Store::open(b.path()).unwrap();
        let s = seed(&dst, &state, "id-1").unwrap();
        assert_eq!((s.written, s.present, s.invalid), (2, 0, 0));
        let runs = dst.load(&key).unwrap();
        assert_eq!(runs[1].report.outcome, Outcome::WrongResult);
        assert_eq!(runs[1].report.output_tail, "the tail\n");
        assert_eq!(seed(&dst, &state, "id-1").unwrap().present, 2);
        // Another prober identity: nothing is written.
        let c = tempfile::tempdir().unwrap();
        let other = Store::open(c.path()).unwrap();
        let s = seed(&other, &state, "id-2").unwrap();
        assert_eq!((s.written, s.other_identity), (0, 2));
    }

    #[test]
    fn forged_entries_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let store = Store::open(d.path()).unwrap();
        let ok = json!({"tree": "ab".repeat(20), "commit": "cd".repeat(20), "run": 0, "outcome": "pass"});
        let mut bad = Vec::new();
        for (field, value) in [
            ("tree", json!("../../etc")),
            ("commit", json!("HEAD")),
            ("run", json!(1_000_000)),
            ("outcome", json!("infra_error")),
            ("outcome", json!("nonsense")),
        ] {
            let mut v = ok.clone();
            v[field] = value;
            bad.push(v);
        }
        let state = json!({"results": [{ FIELD: {"identity": "i", "runs": bad} }]});
        let s = seed(&store, &state, "i").unwrap();
        assert_eq!((s.written, s.invalid), (0, 5));
    }
}
