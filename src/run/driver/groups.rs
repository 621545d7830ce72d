//! Build-aware candidates for the search loop: the range's tree classes grouped at the
//! boundaries that touch what probes were seen to read (`core::buildset` has the argument and
//! the partition, `run::buildset` the learning; here the two meet: read sets from the store,
//! boundaries from git). The search runs over groups; everything it reports (probe records,
//! the answer) is in the range's own candidate indices.
//!
//! A group's verdict is only taken from a member whose read set is known (it is then inside
//! the union the groups were cut with). A verdict from any other member (a failed build, a
//! result stored before read sets existed) splits that group back into tree classes, and
//! two members of one group with different verdicts (a flaky test, a read the build system
//! did not report) split it too: the search then sees exactly the whole-tree candidates there.

use super::{DriverError, Shared};
use crate::core::buildset::{Change, Cut, Partition, ReadSet};
use crate::core::outcome::Verdict;
use crate::core::result::Grouping;
use crate::core::search::{EndpointCheck, Search};
use crate::probe::ProbeReport;
use crate::run::buildset::{changes, ReadSets};
use crate::run::git::{GitError, Range};
use std::collections::BTreeMap;

pub(super) struct Groups {
    /// The prober says what its commands read (else whole tree, always).
    pub named: Option<Vec<String>>,
    pub sets: ReadSets,
    union: Option<ReadSet>,
    /// Differences between neighbouring candidates, computed once a read set is known.
    boundaries: Option<Vec<Option<Vec<Change>>>>,
    /// The groups (`core::buildset::Partition`: the rule; here only what it is fed).
    pub partition: Partition,
}

impl Groups {
    pub fn new(named: Option<Vec<String>>, sets: ReadSets, n: usize) -> Self {
        let union = if named.is_some() {
            sets.union_all()
        } else {
            None
        };
        Groups {
            named,
            sets,
            union,
            boundaries: None,
            partition: Partition::classes(n),
        }
    }

    pub fn len(&self) -> usize {
        self.partition.len()
    }

    /// The groups as the result states them: how many candidates were searched as how many
    /// groups, and why none were folded when none were.
    pub fn summary(&self) -> Grouping {
        let candidates = self.partition.members(self.len().saturating_sub(1)).end;
        let folded = self.len() < candidates;
        let read_files = self.union.as_ref().map_or(0, |u| u.files.len());
        let not_grouped = match (&self.named, read_files) {
            _ if folded => None,
            (None, _) => Some("the probe's test may read any file of the tree (a --script, or the tree's own test suite, whose commands the tool cannot follow), so every candidate is its own".into()),
            (Some(_), 0) => Some("no read set was learned (no Ninja build succeeded), so every candidate is its own".into()),
            (Some(_), _) => Some("every commit changes a file the probes' builds read".into()),
        };
        Grouping {
            candidates,
            groups: self.len(),
            read_files,
            not_grouped,
            starts: if folded {
                self.partition.starts().to_vec()
            } else {
                Vec::new()
            },
        }
    }

    pub fn members(&self, g: usize) -> std::ops::Range<usize> {
        self.partition.members(g)
    }

    /// Adds the read set of each probed tree to the union; a probed member without one splits
    /// its group. Returns true when the union grew.
    pub fn learn(&mut self, range: &Range, probed: &[usize]) -> bool {
        if self.named.is_none() {
            return false;
        }
        let mut grew = false;
        for &i in probed {
            match self.sets.get(&range.candidates[i].tree) {
                Some(s) => {
                    let u = self.union.get_or_insert_with(ReadSet::default);
                    if !u.covers(&s) {
                        u.union(&s);
                        grew = true;
                    }
                }
                None => {
                    let g = self.partition.group_of(i);
                    self.partition.split(g);
                }
            }
        }
        grew
    }

    /// Regroups from the union (the boundaries read from git once), then the search over the
    /// groups from `known` (verdicts by candidate index).
    pub fn search(
        &mut self,
        repo: &git2::Repository,
        range: &Range,
        endpoints: EndpointCheck,
        known: &BTreeMap<usize, Verdict>,
    ) -> Result<Search, GitError> {
        let cands = &range.candidates;
        if self.union.is_some() && self.boundaries.is_none() {
            let mut b = vec![None];
            for w in cands.windows(2) {
                b.push(Some(changes(repo, &w[0].sha, &w[1].sha)?));
            }
            self.boundaries = Some(b);
        }
        let cut = match (&self.boundaries, &self.union) {
            (Some(boundaries), Some(union)) => Some(Cut { boundaries, union }),
            _ => None,
        };
        self.partition.regroup(cut, known);
        let depths: Vec<u64> = cands.iter().map(|c| c.depth).collect();
        Ok(self.partition.search(&depths, endpoints, known))
    }
}

impl Shared<'_> {
    pub(super) fn groups(&self) -> Result<Groups, DriverError> {
        let named = self.probing.prober.named_inputs();
        let sets = crate::run::buildset::ReadSets::new(self.store.root(), &self.probing.identity);
        Ok(Groups::new(named, sets, self.plan.range.candidates.len()))
    }

    /// The search over the current groups, with groups whose result is stored marked cheap,
    /// and the endpoint check the stored verdicts call for (`core::search::after_the_store`).
    pub(super) fn search(
        &self,
        groups: &mut Groups,
        repo: &git2::Repository,
        endpoints: &mut crate::core::search::EndpointCheck,
        known: &std::collections::BTreeMap<usize, Verdict>,
    ) -> Result<crate::core::search::Search, DriverError> {
        use crate::core::search::after_the_store;
        let mut search = groups.search(repo, &self.plan.range, *endpoints, known)?;
        // One listing of the store per round, not one lookup per candidate.
        let stored = self.stored_keys();
        if stored.is_empty() {
            return Ok(search);
        }
        let mut cheap = Vec::new();
        let mut verdicts = Vec::new();
        for g in 0..groups.len() {
            let i = self.pick(groups, g, &stored);
            let tree = &self.plan.range.candidates[i].tree;
            if !stored.contains(std::ffi::OsStr::new(&self.probing.key(tree).0)) {
                continue;
            }
            if let Some(run) = self.probing.stored(tree)?.first() {
                cheap.push(g);
                let v = self
                    .plan
                    .predicate
                    .judge(run.report.outcome, &run.report.output_tail);
                verdicts.push((g, v));
            }
        }
        let bad_decided = search.verdict(search.len() - 1).is_some();
        let ends = after_the_store(*endpoints, &verdicts, groups.len(), bad_decided);
        if ends != *endpoints {
            *endpoints = ends;
            search = groups.search(repo, &self.plan.range, *endpoints, known)?;
        }
        for &g in &cheap {
            search.set_cheap(g);
        }
        self.set_costs(&mut search, groups, repo, &cheap, &stored);
        Ok(search)
    }

    /// What building each group costs under the rebuild model, when there is one, and the
    /// probes the search may still spend on midpoints (`core::search::budget`).
    fn set_costs(
        &self,
        search: &mut crate::core::search::Search,
        groups: &Groups,
        repo: &git2::Repository,
        cheap: &[usize],
        stored: &std::collections::HashSet<std::ffi::OsString>,
    ) {
        use crate::core::search::{budget, BuildCosts, MAX_OPEN};
        let Ok(mut model) = self.rebuild.lock() else {
            return;
        };
        let Some(model) = model.as_mut() else {
            return;
        };
        let cands = &self.plan.range.candidates;
        let (lo, hi) = search.bounds();
        let n = groups.len();
        let sha = |g: usize| &cands[self.pick(groups, g, stored)].sha;
        let mut now = vec![0; n];
        for g in (lo + 1..hi).filter(|g| !cheap.contains(g)) {
            now[g] = model.cost(repo, sha(g));
        }
        // --bad, while untested: the search weighs building it against the walk toward it.
        if search.verdict(n - 1).is_none() && !cheap.contains(&(n - 1)) && hi == n - 1 {
            now[n - 1] = model.cost(repo, sha(n - 1));
        }
        // Fingerprints for the interval program only where it runs (`MAX_OPEN`): the open
        // range's and, since what lies outside it counts as built there, as many groups again
        // on each side (a header's versions are contiguous runs of commits; the far ones only
        // cost lookups on a 10,000-commit range).
        let mut fingerprints = vec![None; n];
        if hi - lo <= MAX_OPEN + 1 {
            let reach = hi - lo;
            for (g, f) in fingerprints
                .iter_mut()
                .enumerate()
                .take((hi + reach + 1).min(n))
                .skip(lo.saturating_sub(reach))
            {
                *f = Some(model.fingerprints(repo, sha(g)));
            }
        }
        let made = (0..n).filter(|&g| search.verdict(g).is_some()).count();
        let midpoints_made = (1..n - 1).filter(|&g| search.verdict(g).is_some()).count();
        let endpoint_open = search.verdict(0).is_none() || search.verdict(n - 1).is_none();
        let per_probe = self.overhead_ms.lock().ok().and_then(|o| *o).unwrap_or(0);
        let costs = BuildCosts {
            weights: model.weights(),
            fingerprints,
            now,
            per_probe,
        };
        let depth = budget(cands.len() - 1, n, made, midpoints_made, endpoint_open);
        search.set_costs(costs, depth);
    }

    /// The member of group `g` to ask: one with stored runs and a known read set (a result an
    /// earlier bisection paid for), else the group's first commit.
    pub(super) fn pick(
        &self,
        groups: &Groups,
        g: usize,
        stored: &std::collections::HashSet<std::ffi::OsString>,
    ) -> usize {
        let cands = &self.plan.range.candidates;
        let members = groups.members(g);
        if members.len() > 1 {
            for i in members.clone() {
                let tree = &cands[i].tree;
                if stored.contains(std::ffi::OsStr::new(&self.probing.key(tree).0))
                    && groups.sets.get(tree).is_some()
                {
                    return i;
                }
            }
        }
        members.start
    }

    /// The store's result directories (see `pick`).
    pub(super) fn stored_keys(&self) -> std::collections::HashSet<std::ffi::OsString> {
        std::fs::read_dir(self.store.results_dir())
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name())
            .collect()
    }

    /// After a run whose build succeeded, what Ninja recorded (asked once): what the build read,
    /// saved per tree for `groups` when the prober can name its own reads, and what it compiled,
    /// for the rebuild costs (`run::rebuild`), with this commit's objects now built.
    pub(super) fn learn_build(
        &self,
        repo: &git2::Repository,
        index: usize,
        slot: usize,
        report: &ProbeReport,
    ) {
        use crate::core::outcome::Outcome;
        if matches!(report.outcome, Outcome::BuildFailed | Outcome::InfraError) {
            return;
        }
        let s = &self.slots[slot];
        let build = crate::run::buildset::NinjaBuild::read(&s.build(), s.src());
        let cand = &self.plan.range.candidates[index];
        if let (Some(named), Some(b)) = (self.probing.prober.named_inputs(), &build) {
            if let Some(set) = crate::run::buildset::learn(b, &named) {
                let sets =
                    crate::run::buildset::ReadSets::new(self.store.root(), &self.probing.identity);
                let _ = sets.save(&cand.tree, &set);
            }
        }
        let Ok(mut model) = self.rebuild.lock() else {
            return;
        };
        // What the build itself reported (a container's builds use the image's ccache even
        // where the host has none).
        let ccache = matches!(
            report.ccache,
            Some(crate::core::ccache::Ccache::Used { .. })
        );
        if let Some(mut fresh) = build
            .as_ref()
            .and_then(|b| crate::run::rebuild::RebuildModel::learn(b, ccache))
        {
            match model.take() {
                Some(old) => fresh.inherit(repo, old),
                None => fresh.calibrate(report.build_s),
            }
            *model = Some(fresh);
        }
        // What a probe costs besides compiling: the least seen (a test skipped for identical
        // artifacts says nothing about the test).
        if report.reused_from.is_none() && report.test_s > 0.0 {
            let rest = ((report.duration_s - report.build_s).max(0.0) * 1000.0) as u64;
            if let Ok(mut o) = self.overhead_ms.lock() {
                *o = Some(o.map_or(rest, |o: u64| o.min(rest)));
            }
        }
        if let Some(m) = model.as_mut() {
            m.built(repo, &cand.sha);
        }
    }
}
