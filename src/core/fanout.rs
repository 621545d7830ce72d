//! The bounded fan-out of a matrix run's new failures into bisects (issue 47 item 1).
//!
//! One broad regression fails hundreds of configurations at once; starting one twelve-hour GPU
//! bisect per configuration would queue most of them past GitHub's 24 h limit for self-hosted
//! jobs and post as many comments. So the fan-out is decided here, as a pure function of the
//! results, the previous fan-out record and the cap:
//! - a configuration's failure is its *first failing revision pair*: walking the revisions in
//!   order, the last revision where it passes and the first after it where it fails (skips and
//!   infrastructure errors are never verdicts, so they are stepped over);
//! - configurations that share a pair share one bisect (one range, one answer), run by the
//!   first of them in matrix order and naming the others;
//! - at most `max_bisects` bisects start, the largest groups first (each answers for all its
//!   configurations); the rest are over the cap and named as such;
//! - a failure already in the previous record is not started again (see [`covers`]).

use crate::core::result::MatrixResults;
use serde::{Deserialize, Serialize};

/// The tag of a fan-out record file.
pub const RECORD_SCHEMA: &str = "setrows-bisect/fanout/v1";

/// One configuration's failure: the adjacent pair (last pass, first failure).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub config: String,
    pub good: String,
    pub bad: String,
}

/// Configurations that share one first failing revision pair. `configs[0]` runs the bisect.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Group {
    pub good: String,
    pub bad: String,
    pub configs: Vec<String>,
}

impl Group {
    /// The configuration that runs the bisect: the first in matrix order.
    pub fn representative(&self) -> &str {
        &self.configs[0]
    }
}

/// A configuration bisected by an earlier fan-out (as the representative or named in it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub config: String,
    pub good: String,
    pub bad: String,
    /// Whether that bisect posts its verdict.
    pub post: bool,
}

/// What one fan-out decided, and what the next one dedups against (`bisected`, cumulative:
/// the previous record's entries and this run's started groups).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub schema: String,
    pub max_bisects: usize,
    pub post: bool,
    pub started: Vec<Group>,
    pub over_cap: Vec<Group>,
    pub already_bisected: Vec<Group>,
    pub bisected: Vec<Entry>,
}

/// Every configuration's first failing revision pair, in matrix order (file order, then each
/// file's configuration order). A configuration that fails before any pass has no pair (no
/// known good revision) and is left out, as is one that never fails.
pub fn failures(results: &[&MatrixResults]) -> Vec<Failure> {
    let mut out = Vec::new();
    for m in results {
        for c in &m.configs {
            let mut last_pass: Option<&str> = None;
            for rev in &m.revisions {
                let Some(cell) = m
                    .cells
                    .iter()
                    .find(|x| x.config == c.id && x.sha == rev.sha)
                else {
                    continue;
                };
                if cell.outcome == crate::core::outcome::Outcome::Pass {
                    last_pass = Some(&rev.sha);
                } else if cell.outcome.is_failure() {
                    if let Some(good) = last_pass {
                        out.push(Failure {
                            config: c.id.clone(),
                            good: good.to_string(),
                            bad: rev.sha.clone(),
                        });
                    }
                    break;
                }
            }
        }
    }
    out
}

/// THE rule for "already bisected": an earlier entry covers a failure when it is the same
/// configuration failing after the same last passing revision. The bad revision is not
/// compared: a nightly tests a moving branch, so tomorrow's first failure is a newer commit of
/// the same range, and the earlier bisect already answers where it broke. A bisect that did not
/// post does not cover a run that posts (its verdict reached no one).
pub fn covers(e: &Entry, f: &Failure, post: bool) -> bool {
    e.config == f.config && e.good == f.good && (e.post || !post)
}

/// Groups failures by their pair, in order of first appearance.
fn group(fs: &[&Failure]) -> Vec<Group> {
    let mut groups: Vec<Group> = Vec::new();
    for f in fs {
        match groups
            .iter_mut()
            .find(|g| g.good == f.good && g.bad == f.bad)
        {
            Some(g) => g.configs.push(f.config.clone()),
            None => groups.push(Group {
                good: f.good.clone(),
                bad: f.bad.clone(),
                configs: vec![f.config.clone()],
            }),
        }
    }
    groups
}

/// The fan-out plan (see the module doc). `post`: whether this run's bisects post.
pub fn plan(
    results: &[&MatrixResults],
    previous: Option<&Record>,
    max_bisects: usize,
    post: bool,
) -> Record {
    let earlier: &[Entry] = previous.map_or(&[], |r| &r.bisected);
    let all = failures(results);
    let (done, new): (Vec<&Failure>, Vec<&Failure>) = all
        .iter()
        .partition(|f| earlier.iter().any(|e| covers(e, f, post)));
    let mut groups = group(&new);
    // Largest first; the sort is stable, so ties keep matrix order.
    groups.sort_by_key(|g| std::cmp::Reverse(g.configs.len()));
    let over_cap = groups.split_off(max_bisects.min(groups.len()));
    let mut bisected = earlier.to_vec();
    for g in &groups {
        for c in &g.configs {
            bisected.push(Entry {
                config: c.clone(),
                good: g.good.clone(),
                bad: g.bad.clone(),
                post,
            });
        }
    }
    Record {
        schema: RECORD_SCHEMA.into(),
        max_bisects,
        post,
        started: groups,
        over_cap,
        already_bisected: group(&done),
        bisected,
    }
}

/// The markdown section the results comment shows for a fan-out record.
pub fn markdown(r: &Record) -> String {
    let short = |s: &str| s.chars().take(12).collect::<String>();
    let list = |gs: &[Group], title: &str, out: &mut String| {
        if gs.is_empty() {
            return;
        }
        let n: usize = gs.iter().map(|g| g.configs.len()).sum();
        out.push_str(&format!(
            "\n**{title}** ({} ranges, {n} configurations)\n\n",
            gs.len()
        ));
        for g in gs {
            out.push_str(&format!(
                "- `{}..{}`: {}\n",
                short(&g.good),
                short(&g.bad),
                g.configs
                    .iter()
                    .map(|c| format!("`{c}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    };
    let mut out = format!(
        "### New failures: bisects (at most {} per run{})\n",
        r.max_bisects,
        if r.post { "" } else { ", not posting" }
    );
    if r.started.is_empty() && r.over_cap.is_empty() && r.already_bisected.is_empty() {
        out.push_str("\nNo newly failing configuration.\n");
    }
    list(
        &r.started,
        "bisect started (the first configuration runs it)",
        &mut out,
    );
    list(&r.over_cap, "not bisected: over the cap", &mut out);
    list(&r.already_bisected, "already bisected", &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::outcome::Outcome;
    use crate::core::result::MatrixResults;

    fn results(revs: &[&str], rows: &[(&str, &[Outcome])]) -> MatrixResults {
        let mut v = serde_json::json!({
            "schema": crate::core::result::Kind::Matrix.tag(),
            "matrix": "matrix.toml", "engine": "podman",
            "revisions": revs.iter().map(|s| serde_json::json!({"rev": s, "sha": s})).collect::<Vec<_>>(),
            "configs": rows.iter().map(|(id, _)| serde_json::json!({"id": id, "label": id, "backend": "hip", "image": null})).collect::<Vec<_>>(),
            "cells": [],
        });
        let mut cells = vec![];
        for (id, outs) in rows {
            for (sha, o) in revs.iter().zip(outs.iter()) {
                cells.push(serde_json::json!({"config": id, "rev": sha, "sha": sha, "outcome": o.as_str(),
                    "signature": null, "duration_s": 0.0, "build_s": 0.0, "test_s": 0.0, "attempts": 1, "log": "x"}));
            }
        }
        v["cells"] = cells.into();
        match crate::core::result::read(v).unwrap() {
            crate::core::result::AnyResult::Matrix(m) => m,
            _ => unreachable!(),
        }
    }

    use Outcome::{BuildFailed as B, GpuFault as F, InfraError as I, Pass as P, Untestable as U};

    #[test]
    fn the_pair_is_last_pass_then_first_failure_stepping_over_skips() {
        let m = results(
            &["a", "b", "c", "d"],
            &[
                ("x", &[P, F, F, F]),
                ("y", &[P, I, B, F]),
                ("z", &[F, P, F, F]), // fails before any pass: no known good
                ("w", &[P, P, U, P]), // never fails
                ("v", &[P, P, P, F]),
            ],
        );
        let f = failures(&[&m]);
        let pairs: Vec<_> = f
            .iter()
            .map(|f| (f.config.as_str(), f.good.as_str(), f.bad.as_str()))
            .collect();
        assert_eq!(pairs, [("x", "a", "b"), ("y", "a", "d"), ("v", "c", "d")]);
    }

    #[test]
    fn configurations_sharing_a_pair_share_one_bisect_and_the_cap_bounds_the_rest() {
        let m = results(
            &["a", "b", "c"],
            &[
                ("x1", &[P, F, F]),
                ("y1", &[P, P, F]),
                ("x2", &[P, F, F]),
                ("y2", &[P, P, F]),
                ("y3", &[P, P, F]),
                ("z", &[P, I, F]),
            ],
        );
        let r = plan(&[&m], None, 1, true);
        assert_eq!(r.started.len(), 1);
        // The largest group first; its representative is the first in matrix order.
        assert_eq!(r.started[0].configs, ["y1", "y2", "y3"]);
        assert_eq!(r.started[0].representative(), "y1");
        assert_eq!(
            (r.started[0].good.as_str(), r.started[0].bad.as_str()),
            ("b", "c")
        );
        assert_eq!(r.over_cap.len(), 2);
        assert_eq!(r.over_cap[0].configs, ["x1", "x2"]);
        assert_eq!(r.over_cap[1].configs, ["z"]);
        // Only what started is recorded: over-cap groups are tried again next time.
        assert_eq!(r.bisected.len(), 3);
        let r0 = plan(&[&m], None, 0, true);
        assert!(r0.started.is_empty() && r0.over_cap.len() == 3);
    }

    #[test]
    fn a_failure_already_bisected_is_not_started_again_even_as_the_branch_moves() {
        let night1 = results(&["g", "m1"], &[("x", &[P, F]), ("y", &[P, F])]);
        let r1 = plan(&[&night1], None, 3, true);
        assert_eq!(r1.started.len(), 1);
        // The next night: master moved (m2), the same failure, and a new one (z).
        let night2 = results(
            &["g", "m2"],
            &[("x", &[P, F]), ("y", &[P, F]), ("z", &[P, F])],
        );
        let r2 = plan(&[&night2], Some(&r1), 3, true);
        assert_eq!(r2.started.len(), 1);
        assert_eq!(r2.started[0].configs, ["z"]);
        assert_eq!(r2.already_bisected[0].configs, ["x", "y"]);
        // Cumulative: the third night still knows x and y.
        let r3 = plan(&[&night2], Some(&r2), 3, true);
        assert!(r3.started.is_empty());
        assert_eq!(r3.already_bisected[0].configs, ["x", "y", "z"]);
        // Another last passing revision is another failure.
        let other = results(&["h", "m2"], &[("x", &[P, F])]);
        assert_eq!(plan(&[&other], Some(&r3), 3, true).started.len(), 1);
    }

    #[test]
    fn a_bisect_that_did_not_post_does_not_cover_one_that_posts() {
        let m = results(&["g", "b"], &[("x", &[P, F])]);
        let dry = plan(&[&m], None, 3, false);
        assert!(!dry.bisected[0].post);
        assert_eq!(plan(&[&m], Some(&dry), 3, true).started.len(), 1);
        assert!(plan(&[&m], Some(&dry), 3, false).started.is_empty());
        let posted = plan(&[&m], None, 3, true);
        assert!(plan(&[&m], Some(&posted), 3, false).started.is_empty());
    }

    #[test]
    fn groups_span_results_files_and_the_section_names_over_the_cap() {
        let a = results(&["g", "b"], &[("x", &[P, F])]);
        let b = results(&["g", "b"], &[("y", &[P, F])]);
        let c = results(&["g", "c"], &[("z", &[P, F])]);
        let r = plan(&[&a, &b, &c], None, 1, true);
        assert_eq!(r.started[0].configs, ["x", "y"]);
        let md = markdown(&r);
        assert!(md.contains("not bisected: over the cap"), "{md}");
        assert!(md.contains("`z`") && md.contains("`x`, `y`"), "{md}");
        assert!(!md.contains("already bisected"), "{md}");
    }
}
