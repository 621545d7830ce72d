//! Least-rebuild midpoints: what building a candidate would cost, given what this bisection
//! has already built.
//!
//! On a real ggml range most probes are build time, and most of a build is a few large
//! translation units (ggml-cpu's ops.cpp, repack.cpp, ggml-quants.c). An object has to be
//! compiled again only when the content of what it reads differs from every version already
//! compiled (ccache answers the rest by content; without ccache only the last build of the slot
//! counts, which is what Ninja's own incremental build reuses). Ninja records both halves of
//! that: `ninja -t deps` lists what each object read (its depfile), `.ninja_log` how long it
//! took. So the cost of a candidate is the summed compile time of the objects whose inputs,
//! read as blob ids from the candidate's git tree, form a combination not compiled yet.
//!
//! The estimate steers which midpoint is taken and when `--bad` is built (`core::search`,
//! within the probe budget); a wrong estimate costs time, never correctness.

use crate::run::buildset::NinjaBuild;
use git2::{Oid, Repository};
use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::path::Path;

/// One compiled object: its compile time and the checkout paths it read.
#[derive(Debug, Clone)]
struct Object {
    /// Ninja's output name: an object keeps the compile time of its first (cold) build.
    target: String,
    weight_ms: u64,
    inputs: Vec<usize>,
}

#[derive(Debug, Default)]
pub struct RebuildModel {
    /// Checkout-relative paths some object reads.
    paths: Vec<String>,
    objects: Vec<Object>,
    /// Commits built so far, oldest first.
    built: Vec<String>,
    /// Input fingerprints already compiled, per object (from `built` under this model).
    seen: Vec<HashSet<u64>>,
    /// Whether an object compiled by any earlier build is reused (ccache), or only the last.
    ccache: bool,
    /// Fingerprints per commit, computed once (a candidate is costed in several rounds).
    memo: HashMap<String, Vec<u64>>,
    /// Wall milliseconds per millisecond of Ninja's job times (jobs overlap on several
    /// cores), from the first build's measured build time; 1 until known.
    scale: f64,
}

impl RebuildModel {
    /// What the Ninja build compiled from the checkout. `None` when no object read a
    /// checkout file.
    pub fn learn(build: &NinjaBuild, ccache: bool) -> Option<Self> {
        let mut model = RebuildModel {
            ccache,
            scale: 1.0,
            ..Default::default()
        };
        let mut index: HashMap<String, usize> = HashMap::new();
        for (dir, deps) in &build.dirs {
            let times = std::fs::read_to_string(dir.join(".ninja_log"))
                .map(|t| log_times(&t))
                .unwrap_or_default();
            for (target, deps) in parse_deps(deps) {
                let mut inputs: Vec<usize> = deps
                    .iter()
                    .filter_map(|d| crate::run::buildset::relative(dir, d, &build.roots))
                    .map(|rel| {
                        let next = model.paths.len();
                        *index.entry(rel.clone()).or_insert_with(|| {
                            model.paths.push(rel);
                            next
                        })
                    })
                    .collect();
                if inputs.is_empty() {
                    continue;
                }
                inputs.sort_unstable();
                inputs.dedup();
                model.objects.push(Object {
                    target: target.to_string(),
                    weight_ms: times.get(target).copied().unwrap_or(0).max(1),
                    inputs,
                });
            }
        }
        (!model.objects.is_empty()).then_some(model)
    }

    /// Puts the costs in wall time: `build_s` is what the build this model was learned from
    /// took, every object compiled (the first, cold one).
    pub fn calibrate(&mut self, build_s: f64) {
        let jobs: u64 = self.objects.iter().map(|o| o.weight_ms).sum();
        if build_s > 0.0 && jobs > 0 {
            self.scale = build_s * 1000.0 / jobs as f64;
        }
    }

    /// Each object's compile time (wall ms).
    pub fn weights(&self) -> Vec<u64> {
        self.objects
            .iter()
            .map(|o| self.wall(o.weight_ms))
            .collect()
    }

    fn wall(&self, job_ms: u64) -> u64 {
        (job_ms as f64 * self.scale).round() as u64
    }

    /// Takes over the commits an earlier model saw built (a relearned model keeps the
    /// history, re-read with its own objects and inputs), and each known object's compile
    /// time: `.ninja_log` keeps the latest one, and an object recompiled from ccache or
    /// not at all since is logged as fast as a cache hit, which is not what compiling
    /// new inputs costs. When the objects read the same paths as before (most probes), the
    /// fingerprints already computed stay valid and are kept: a relearned model would
    /// otherwise read every candidate's blobs again after every probe.
    pub fn inherit(&mut self, repo: &Repository, old: RebuildModel) {
        self.scale = old.scale;
        let first: HashMap<&str, u64> = old
            .objects
            .iter()
            .map(|o| (o.target.as_str(), o.weight_ms))
            .collect();
        for o in &mut self.objects {
            if let Some(&w) = first.get(o.target.as_str()) {
                o.weight_ms = w;
            }
        }
        let same_inputs = self.paths == old.paths
            && self.objects.len() == old.objects.len()
            && self
                .objects
                .iter()
                .zip(&old.objects)
                .all(|(a, b)| a.inputs == b.inputs);
        if same_inputs {
            self.memo = old.memo;
        }
        for sha in old.built {
            self.built(repo, &sha);
        }
    }

    /// Records that `sha` was built: its objects now cost nothing to compile again (with
    /// ccache), or only its own (without: Ninja reuses the slot's last build only).
    pub fn built(&mut self, repo: &Repository, sha: &str) {
        let fps = self.fingerprints(repo, sha);
        if !self.ccache {
            self.built.clear();
            self.seen.clear();
        }
        self.built.push(sha.to_string());
        self.seen.resize_with(self.objects.len(), HashSet::new);
        for (seen, fp) in self.seen.iter_mut().zip(fps) {
            seen.insert(fp);
        }
    }

    /// Estimated compile time (wall ms) of building `sha` now.
    pub fn cost(&mut self, repo: &Repository, sha: &str) -> u64 {
        let fps = self.fingerprints(repo, sha);
        let jobs = self
            .objects
            .iter()
            .zip(fps)
            .enumerate()
            .filter(|(k, (_, fp))| !self.seen.get(*k).is_some_and(|s| s.contains(fp)))
            .map(|(_, (o, _))| o.weight_ms)
            .sum();
        self.wall(jobs)
    }

    /// Per object, a fingerprint of the inputs it compiles at `sha` (what `cost` compares).
    pub fn fingerprints(&mut self, repo: &Repository, sha: &str) -> Vec<u64> {
        if let Some(f) = self.memo.get(sha) {
            return f.clone();
        }
        let tree = Oid::from_str(sha)
            .and_then(|id| repo.find_commit(id))
            .and_then(|c| c.tree())
            .ok();
        let blobs: Vec<Option<Oid>> = self
            .paths
            .iter()
            .map(|p| {
                let t = tree.as_ref()?;
                t.get_path(Path::new(p)).ok().map(|e| e.id())
            })
            .collect();
        let fps: Vec<u64> = self
            .objects
            .iter()
            .map(|o| {
                let mut h = std::collections::hash_map::DefaultHasher::new();
                for &i in &o.inputs {
                    blobs[i].hash(&mut h);
                }
                h.finish()
            })
            .collect();
        self.memo.insert(sha.to_string(), fps.clone());
        fps
    }
}

/// `ninja -t deps` output: each target line (`obj.o: #deps N, deps mtime T (VALID)`) followed
/// by its indented dependencies.
fn parse_deps(text: &str) -> Vec<(&str, Vec<&str>)> {
    let mut out: Vec<(&str, Vec<&str>)> = Vec::new();
    for line in text.lines() {
        if line.starts_with(char::is_whitespace) {
            if let Some((_, deps)) = out.last_mut() {
                let d = line.trim();
                if !d.is_empty() {
                    deps.push(d);
                }
            }
        } else if let Some((target, rest)) = line.split_once(": #deps") {
            let _ = rest;
            out.push((target, Vec::new()));
        }
    }
    out
}

/// `.ninja_log` (v5/v6: `start end mtime output hash`, tab-separated, ms): the latest
/// duration of each output.
fn log_times(text: &str) -> HashMap<String, u64> {
    let mut out = HashMap::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let f: Vec<&str> = line.split('\t').collect();
        if f.len() < 4 {
            continue;
        }
        if let (Ok(start), Ok(end)) = (f[0].parse::<u64>(), f[1].parse::<u64>()) {
            out.insert(f[3].to_string(), end.saturating_sub(start));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ninja_deps_and_log_are_read() {
        let deps = "a.o: #deps 2, deps mtime 1 (VALID)\n    /s/a.c\n    /s/x.h\n\nb.o: #deps 1, deps mtime 1 (STALE)\n    /s/b.c\n\n";
        let parsed = parse_deps(deps);
        assert_eq!(
            parsed,
            vec![("a.o", vec!["/s/a.c", "/s/x.h"]), ("b.o", vec!["/s/b.c"])]
        );
        let log =
            "# ninja log v5\n0\t900\t0\ta.o\tff\n10\t30\t0\tb.o\tee\n1000\t1500\t0\ta.o\tff\n";
        let t = log_times(log);
        assert_eq!((t["a.o"], t["b.o"]), (500, 20));
    }

    /// An object Ninja recompiled from ccache is logged at a cache hit's time; the model
    /// learned after that build still costs compiling it at the cold build's time.
    #[test]
    fn a_relearned_model_keeps_the_cold_compile_times() {
        let d = tempfile::tempdir().unwrap();
        let (src, build) = (d.path().join("src"), d.path().join("build"));
        std::fs::create_dir_all(&build).unwrap();
        let deps = format!(
            "a.o: #deps 1, deps mtime 1 (VALID)\n    {}/a.c\n\n",
            src.display()
        );
        let ninja = NinjaBuild {
            dirs: vec![(build.clone(), deps)],
            roots: vec![src],
        };
        let log = build.join(".ninja_log");
        std::fs::write(&log, "# ninja log v5\n0\t900\t0\ta.o\tff\n").unwrap();
        let cold = RebuildModel::learn(&ninja, true).unwrap();
        std::fs::write(
            &log,
            "# ninja log v5\n0\t900\t0\ta.o\tff\n1000\t1020\t0\ta.o\tee\n",
        )
        .unwrap();
        let mut warm = RebuildModel::learn(&ninja, true).unwrap();
        assert_eq!(warm.weights(), vec![20]);
        let repo = Repository::init(d.path().join("repo")).unwrap();
        warm.inherit(&repo, cold);
        assert_eq!(warm.weights(), vec![900]);
    }
}
