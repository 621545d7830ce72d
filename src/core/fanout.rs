//! The bounded fan-out of a matrix run's new failures into bisects (issue 47 item 1).
//!
//! One broad regression fails hundreds of configurations at once; starting one twelve-hour GPU
//! bisect per configuration would queue most of them past GitHub's 24 h limit for self-hosted
//! jobs and post as many comments. So the fan-out is decided here, as a pure function of the
//! results, the previous fan-out record, the bisects that finished and the cap:
//! - a configuration's failure is its *first failing revision pair*: walking the revisions in
//!   order, the last revision where it passes and the first after it where it fails (skips and
//!   infrastructure errors are never verdicts, so they are stepped over). The walk starts from
//!   the configuration's last pass in earlier runs (the previous record's `last_pass`): the
//!   nightly tests one revision, master, so its pairs are night over night (it passed last
//!   night at A, it fails tonight at B: bisect A..B);
//! - configurations that share a pair share one bisect (one range, one answer), run by the
//!   first of them in matrix order and naming the others;
//! - at most `max_bisects` bisects start, the largest groups first (each answers for all its
//!   configurations); the rest are over the cap and named as such;
//! - a failure already bisected is not started again (see [`covers`]); one whose bisect an
//!   earlier run started but whose result never came (cancelled in the queue, failed, timed
//!   out, could not post) is started again.

use crate::core::result::MatrixResults;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The tag of a fan-out record file.
pub const RECORD_SCHEMA: &str = "setrows-bisect/fanout/v1";

/// The tag of the file a bisect of the fan-out's question leaves once its verdict is reported.
pub const FINISHED_SCHEMA: &str = "setrows-bisect/fanout-finished/v1";

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

/// A configuration whose bisect a fan-out started (as the representative or named in it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub config: String,
    pub good: String,
    pub bad: String,
    /// Whether that bisect posts its verdict.
    pub post: bool,
    /// Whether its result exists. A dispatch is no answer: the run may wait 24 h in the queue
    /// and be cancelled, fail, time out or fail to post. Absent in records written before
    /// results were looked for, so those entries are started once more.
    #[serde(default)]
    pub finished: bool,
}

/// A bisect's reported result, as bisect.yml's report job leaves it (`bisect-finished`): the
/// range it was asked and whether it posted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finished {
    pub schema: String,
    pub config: String,
    /// The other configurations the fan-out named in that bisect (its `shared_by`): one range,
    /// one answer for all of them.
    #[serde(default)]
    pub shared_by: Vec<String>,
    pub good: String,
    pub bad: String,
    pub post: bool,
}

/// What one fan-out decided, and what the next one starts from: `bisected` (cumulative: the
/// previous record's entries and this run's started groups) and `last_pass`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub schema: String,
    pub max_bisects: usize,
    pub post: bool,
    pub started: Vec<Group>,
    pub over_cap: Vec<Group>,
    pub already_bisected: Vec<Group>,
    /// Failures whose bisect an earlier run started and whose result never came: started
    /// again over the same range (they are in `started` or `over_cap` too).
    #[serde(default)]
    pub unfinished: Vec<Group>,
    pub bisected: Vec<Entry>,
    /// Each configuration's last passing revision in this and earlier runs: the good end of a
    /// failure that starts on a later night. `None` until a run with results wrote one.
    #[serde(default)]
    pub last_pass: Option<BTreeMap<String, String>>,
    /// Whether an earlier run's passes were there to compare tonight's failures with; without
    /// them a one-revision nightly has no pair, which the section says instead of "no newly
    /// failing configuration".
    #[serde(default)]
    pub compared: bool,
}

/// Every configuration's first failing revision pair, in matrix order (file order, then each
/// file's configuration order). The walk starts from the configuration's pass in `earlier`
/// (an earlier run's last pass), so a configuration failing from this run's first revision has
/// a pair when it passed before. One that fails with no pass before it (in this run or
/// earlier) has no known good revision and is left out, as is one that never fails, and one
/// that fails at the very revision it passed at earlier (no range to bisect).
pub fn failures(
    results: &[&MatrixResults],
    earlier: Option<&BTreeMap<String, String>>,
) -> Vec<Failure> {
    let mut out = Vec::new();
    for m in results {
        for c in &m.configs {
            let mut last_pass: Option<&str> =
                earlier.and_then(|e| e.get(&c.id)).map(|s| s.as_str());
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
                    if let Some(good) = last_pass.filter(|g| *g != rev.sha) {
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

/// `earlier` updated with each configuration's last pass in `results`.
fn last_passes(
    results: &[&MatrixResults],
    earlier: Option<&BTreeMap<String, String>>,
) -> BTreeMap<String, String> {
    let mut out = earlier.cloned().unwrap_or_default();
    for m in results {
        for rev in &m.revisions {
            for cell in m.cells.iter().filter(|x| x.sha == rev.sha) {
                if cell.outcome == crate::core::outcome::Outcome::Pass {
                    out.insert(cell.config.clone(), rev.sha.clone());
                }
            }
        }
    }
    out
}

/// THE rule for "already bisected": a finished entry covers a failure when it is the same
/// configuration failing after the same last passing revision. The bad revision is not
/// compared: a nightly tests a moving branch, so tomorrow's first failure is a newer commit of
/// the same range, and the earlier bisect already answers where it broke. A bisect that did not
/// post does not cover a run that posts (its verdict reached no one). An entry that is not
/// finished covers nothing: its range is started again (see [`plan`]).
pub fn covers(e: &Entry, f: &Failure, post: bool) -> bool {
    e.finished && same_question(e, f, post)
}

/// The same configuration after the same last pass, asked by a run that posts at most as
/// much as the entry's bisect.
fn same_question(e: &Entry, f: &Failure, post: bool) -> bool {
    e.config == f.config && e.good == f.good && (e.post || !post)
}

/// The previous record's entries, each finished when its result exists, and every result that
/// no entry names (a bisect of the same question started by hand answers it as well).
fn with_results(earlier: &[Entry], finished: &[Finished]) -> Vec<Entry> {
    let names = |r: &Finished, c: &str| r.config == c || r.shared_by.iter().any(|s| s == c);
    let answers = |e: &Entry, r: &Finished| {
        names(r, &e.config) && r.good == e.good && r.bad == e.bad && (r.post || !e.post)
    };
    let mut out: Vec<Entry> = earlier
        .iter()
        .map(|e| Entry {
            finished: e.finished || finished.iter().any(|r| answers(e, r)),
            ..e.clone()
        })
        .collect();
    for r in finished {
        for config in std::iter::once(&r.config).chain(&r.shared_by) {
            let e = Entry {
                config: config.clone(),
                good: r.good.clone(),
                bad: r.bad.clone(),
                post: r.post,
                finished: true,
            };
            if !out.contains(&e) {
                out.push(e);
            }
        }
    }
    out
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

/// The fan-out plan (see the module doc). `finished`: the results of bisects that reported
/// since (any run's; those no entry names count too). `post`: whether this run's bisects post.
pub fn plan(
    results: &[&MatrixResults],
    previous: Option<&Record>,
    finished: &[Finished],
    max_bisects: usize,
    post: bool,
) -> Record {
    let earlier = with_results(previous.map_or(&[], |r| &r.bisected), finished);
    let passes = previous.and_then(|r| r.last_pass.as_ref());
    let mut done: Vec<&Failure> = Vec::new();
    let mut retried: Vec<Failure> = Vec::new();
    let mut new: Vec<Failure> = Vec::new();
    let all = failures(results, passes);
    for f in &all {
        if earlier.iter().any(|e| covers(e, f, post)) {
            done.push(f);
        } else if let Some(e) = earlier.iter().find(|e| same_question(e, f, post)) {
            // Started again over the range it was started with: the same bisect.yml
            // concurrency group and comment, so a run still queued is replaced, not doubled,
            // and its result finishes the entry.
            let again = Failure {
                bad: e.bad.clone(),
                ..f.clone()
            };
            retried.push(again.clone());
            new.push(again);
        } else {
            new.push(f.clone());
        }
    }
    let new: Vec<&Failure> = new.iter().collect();
    let mut groups = group(&new);
    // Largest first; the sort is stable, so ties keep matrix order.
    groups.sort_by_key(|g| std::cmp::Reverse(g.configs.len()));
    let over_cap = groups.split_off(max_bisects.min(groups.len()));
    let mut bisected = earlier;
    for g in &groups {
        for c in &g.configs {
            let e = Entry {
                config: c.clone(),
                good: g.good.clone(),
                bad: g.bad.clone(),
                post,
                finished: false,
            };
            if !bisected.contains(&e) {
                bisected.push(e);
            }
        }
    }
    let last_pass = (previous.is_some_and(|r| r.last_pass.is_some()) || !results.is_empty())
        .then(|| last_passes(results, passes));
    Record {
        schema: RECORD_SCHEMA.into(),
        max_bisects,
        post,
        started: groups,
        over_cap,
        already_bisected: group(&done),
        unfinished: group(&retried.iter().collect::<Vec<_>>()),
        bisected,
        last_pass,
        compared: passes.is_some(),
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
    let none = r.started.is_empty() && r.over_cap.is_empty() && r.already_bisected.is_empty();
    if !r.compared {
        out.push_str(&format!("\n{NO_EARLIER}\n"));
    } else if none {
        out.push_str("\nNo newly failing configuration.\n");
    }
    list(
        &r.started,
        "bisect started (the first configuration runs it)",
        &mut out,
    );
    list(&r.over_cap, "not bisected: over the cap", &mut out);
    list(
        &r.unfinished,
        "started, not finished (an earlier run started it and no result came; started again)",
        &mut out,
    );
    list(&r.already_bisected, "already bisected", &mut out);
    out
}

/// What the section and `fan-out` say when no earlier run left passes to compare with.
pub const NO_EARLIER: &str =
    "No earlier results to compare with: new failures start from the next night.";

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
        let f = failures(&[&m], None);
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
        let r = plan(&[&m], None, &[], 1, true);
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
        let r0 = plan(&[&m], None, &[], 0, true);
        assert!(r0.started.is_empty() && r0.over_cap.len() == 3);
    }

    /// The result bisect.yml leaves for each bisect a record started.
    fn reported(r: &Record) -> Vec<Finished> {
        r.started
            .iter()
            .map(|g| Finished {
                schema: FINISHED_SCHEMA.into(),
                config: g.configs[0].clone(),
                shared_by: g.configs[1..].to_vec(),
                good: g.good.clone(),
                bad: g.bad.clone(),
                post: r.post,
            })
            .collect()
    }

    #[test]
    fn a_failure_already_bisected_is_not_started_again_even_as_the_branch_moves() {
        let night1 = results(&["g", "m1"], &[("x", &[P, F]), ("y", &[P, F])]);
        let r1 = plan(&[&night1], None, &[], 3, true);
        assert_eq!(r1.started.len(), 1);
        // The next night: master moved (m2), the same failure, and a new one (z).
        let night2 = results(
            &["g", "m2"],
            &[("x", &[P, F]), ("y", &[P, F]), ("z", &[P, F])],
        );
        let r2 = plan(&[&night2], Some(&r1), &reported(&r1), 3, true);
        assert_eq!(r2.started.len(), 1);
        assert_eq!(r2.started[0].configs, ["z"]);
        assert_eq!(r2.already_bisected[0].configs, ["x", "y"]);
        // Cumulative: the third night still knows x and y.
        let r3 = plan(&[&night2], Some(&r2), &reported(&r2), 3, true);
        assert!(r3.started.is_empty());
        assert_eq!(r3.already_bisected[0].configs, ["x", "y", "z"]);
        // Another last passing revision is another failure.
        let other = results(&["h", "m2"], &[("x", &[P, F])]);
        assert_eq!(plan(&[&other], Some(&r3), &[], 3, true).started.len(), 1);
    }

    #[test]
    fn a_one_revision_nightly_pairs_last_nights_pass_with_tonights_failure() {
        let night1 = results(&["a"], &[("x", &[P]), ("y", &[P]), ("z", &[F])]);
        let r1 = plan(&[&night1], None, &[], 3, true);
        assert!(!r1.compared && r1.started.is_empty());
        let md = markdown(&r1);
        assert!(md.contains(NO_EARLIER), "{md}");
        assert!(!md.contains("No newly failing"), "{md}");
        // Night 2: master moved to b; x breaks. z never passed: no known good.
        let night2 = results(&["b"], &[("x", &[F]), ("y", &[P]), ("z", &[F])]);
        let r2 = plan(&[&night2], Some(&r1), &[], 3, true);
        assert!(r2.compared);
        assert_eq!(
            r2.started,
            [Group {
                good: "a".into(),
                bad: "b".into(),
                configs: vec!["x".into()]
            }]
        );
        // Night 3: master moved to c, x still fails; its bisect reported: nothing starts.
        let night3 = results(&["c"], &[("x", &[F]), ("y", &[P]), ("z", &[F])]);
        let r3 = plan(&[&night3], Some(&r2), &reported(&r2), 3, true);
        assert!(r3.started.is_empty(), "{r3:?}");
        assert_eq!(r3.already_bisected[0].configs, ["x"]);
        assert_eq!(r3.last_pass.as_ref().unwrap()["x"], "a");
        assert_eq!(r3.last_pass.as_ref().unwrap()["y"], "c");
        assert!(markdown(&r3).contains("already bisected"));
        // A night that passes at the revision it fails at tonight has no range.
        let same = results(&["a"], &[("x", &[F])]);
        assert!(plan(&[&same], Some(&r1), &[], 3, true).started.is_empty());
        // A previous record without passes (written before they were kept) compares nothing.
        let old = Record {
            last_pass: None,
            ..r2.clone()
        };
        assert!(!plan(&[&night3], Some(&old), &[], 3, true).compared);
        // No results and nothing earlier: still nothing to compare with next time.
        assert!(plan(&[], None, &[], 3, true).last_pass.is_none());
    }

    #[test]
    fn a_started_bisect_without_a_result_is_started_again_over_its_range() {
        let night1 = results(&["a"], &[("x", &[P]), ("y", &[P])]);
        let r1 = plan(&[&night1], None, &[], 3, true);
        let night2 = results(&["b"], &[("x", &[F]), ("y", &[F])]);
        let r2 = plan(&[&night2], Some(&r1), &[], 3, true);
        assert_eq!(r2.started[0].configs, ["x", "y"]);
        // Night 3 (master at c): the bisect of a..b never reported. It starts again over
        // a..b, its own range, and the section says why.
        let night3 = results(&["c"], &[("x", &[F]), ("y", &[F])]);
        let r3 = plan(&[&night3], Some(&r2), &[], 3, true);
        assert_eq!(r3.started, r2.started);
        assert_eq!(r3.unfinished, r2.started);
        assert!(r3.already_bisected.is_empty());
        assert!(r3.bisected.iter().all(|e| !e.finished));
        assert_eq!(r3.bisected.len(), 2, "{:?}", r3.bisected);
        let md = markdown(&r3);
        assert!(md.contains("started, not finished"), "{md}");
        // Over the cap it is still named as not finished, and not recorded as started again.
        let capped = plan(&[&night3], Some(&r2), &[], 0, true);
        assert_eq!(capped.over_cap, r2.started);
        assert_eq!(capped.unfinished, r2.started);
        // The representative's result answers for the configurations it named.
        let r4 = plan(&[&night3], Some(&r3), &reported(&r3), 3, true);
        assert!(r4.started.is_empty() && r4.unfinished.is_empty());
        assert_eq!(r4.already_bisected[0].configs, ["x", "y"]);
        // A result that did not post does not finish a bisect that was to post.
        let mut quiet = reported(&r3);
        quiet[0].post = false;
        assert_eq!(
            plan(&[&night3], Some(&r3), &quiet, 3, true).started.len(),
            1
        );
        // A result of the same question that no record started (run by hand) counts too.
        let by_hand = plan(&[&night3], Some(&r1), &reported(&r3), 3, true);
        assert!(by_hand.started.is_empty(), "{by_hand:?}");
    }

    #[test]
    fn a_record_written_before_results_were_looked_for_still_reads() {
        let old = r#"{"schema": "setrows-bisect/fanout/v1", "max_bisects": 3, "post": true,
            "started": [], "over_cap": [], "already_bisected": [],
            "bisected": [{"config": "x", "good": "a", "bad": "b", "post": true}]}"#;
        let r: Record = serde_json::from_str(old).unwrap();
        assert!(!r.bisected[0].finished && r.last_pass.is_none() && !r.compared);
    }

    #[test]
    fn a_bisect_that_did_not_post_does_not_cover_one_that_posts() {
        let m = results(&["g", "b"], &[("x", &[P, F])]);
        let dry = plan(&[&m], None, &[], 3, false);
        assert!(!dry.bisected[0].post);
        let done = reported(&dry);
        assert_eq!(plan(&[&m], Some(&dry), &done, 3, true).started.len(), 1);
        assert!(plan(&[&m], Some(&dry), &done, 3, false).started.is_empty());
        let posted = plan(&[&m], None, &[], 3, true);
        let done = reported(&posted);
        assert!(plan(&[&m], Some(&posted), &done, 3, false)
            .started
            .is_empty());
    }

    #[test]
    fn groups_span_results_files_and_the_section_names_over_the_cap() {
        let a = results(&["g", "b"], &[("x", &[P, F])]);
        let b = results(&["g", "b"], &[("y", &[P, F])]);
        let c = results(&["g", "c"], &[("z", &[P, F])]);
        let r = plan(&[&a, &b, &c], None, &[], 1, true);
        assert_eq!(r.started[0].configs, ["x", "y"]);
        let md = markdown(&r);
        assert!(md.contains("not bisected: over the cap"), "{md}");
        assert!(md.contains("`z`") && md.contains("`x`, `y`"), "{md}");
        assert!(!md.contains("already bisected"), "{md}");
    }
}
