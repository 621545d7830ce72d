//! The comment's state block: the typed results behind the comment, so a later job
//! (`--resume-from-issue`, `report --load-state`) can pick up from the comment alone.
//!
//! The block must fit in half a comment ([`body::MAX_STATE`]), while a nightly matrix can hold
//! hundreds of cells. Rather than drop the report, the results are compacted: first what a
//! resumed job can do without (provenance, commit metadata, reproduce snippets), keeping every
//! outcome (`"compacted": 1`); if even that does not fit, only the key remains
//! (`"compacted": 2`). A compacted result is still a valid document of its schema.

use super::body;
use crate::core::result::AnyResult;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct State {
    pub key: String,
    pub results: Vec<AnyResult>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compacted: Option<u8>,
}

/// Level 1: drops the parts of each result that only a person reading the full report needs.
fn compact(r: &mut AnyResult) {
    match r {
        AnyResult::Bisect(b) => {
            b.commits.clear();
            b.candidate_classes.clear();
            b.reproduce = None;
        }
        AnyResult::Matrix(m) => m.cells.iter_mut().for_each(|c| c.provenance.clear()),
        AnyResult::BisectConfig(c) => {
            c.probes.iter_mut().for_each(|p| p.cell.provenance.clear());
            if let Some(b) = &mut c.commit_bisect {
                b.commits.clear();
                b.candidate_classes.clear();
                b.reproduce = None;
            }
        }
    }
}

fn fits(st: &State) -> bool {
    let v = serde_json::to_value(st).unwrap_or_default();
    body::state_block(&v).len() <= body::MAX_STATE
}

/// The state for comment `key` holding `results`, compacted until it fits.
pub fn state(key: &str, results: &[&AnyResult]) -> State {
    let mut st = State {
        key: key.to_string(),
        results: results.iter().map(|r| (*r).clone()).collect(),
        compacted: None,
    };
    if fits(&st) {
        return st;
    }
    st.results.iter_mut().for_each(compact);
    st.compacted = Some(1);
    if fits(&st) {
        return st;
    }
    State {
        key: key.to_string(),
        results: Vec::new(),
        compacted: Some(2),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::outcome::Outcome;
    use crate::report::tests::{cell, matrix};

    fn big_matrix(n: usize, with_provenance: bool) -> AnyResult {
        let cells = (0..n)
            .map(|i| {
                let mut c = cell(&format!("cfg{i:04}"), "53859c2000", Outcome::Pass);
                if with_provenance {
                    c.provenance
                        .insert("image".into(), "localhost/setrows-rocm:6.4.1".into());
                    c.provenance
                        .insert("image_digest".into(), format!("sha256:{}", "0".repeat(64)));
                }
                c
            })
            .collect();
        AnyResult::Matrix(matrix(cells))
    }

    #[test]
    fn large_state_is_compacted_to_fit() {
        let r = big_matrix(150, true);
        let st = state("matrix", &[&r]);
        assert_eq!(st.compacted, Some(1));
        let AnyResult::Matrix(m) = &st.results[0] else {
            panic!("not a matrix")
        };
        assert_eq!(m.cells.len(), 150);
        assert!(m.cells[0].provenance.is_empty());
        assert_eq!(m.cells[149].outcome, Outcome::Pass);
        // The compacted state reads back as typed results.
        let v = serde_json::to_value(&st).unwrap();
        let back: State = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(back, st);
        let doc = crate::report::render(&[&r]);
        assert!(
            body::assemble("matrix", &doc, Some(&v), None)
                .unwrap()
                .len()
                <= body::MAX_BODY
        );

        let huge = big_matrix(3000, false);
        let st = state("matrix", &[&huge]);
        assert_eq!((st.compacted, st.results.len()), (Some(2), 0));
        let v = serde_json::to_value(&st).unwrap();
        let doc = crate::report::render(&[&huge]);
        assert!(
            body::assemble("matrix", &doc, Some(&v), None)
                .unwrap()
                .len()
                <= body::MAX_BODY
        );

        let small = big_matrix(2, true);
        assert_eq!(state("matrix", &[&small]).compacted, None);
    }
}
