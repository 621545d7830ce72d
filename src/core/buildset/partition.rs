//! THE group partition the search runs over: tree classes joined at the boundaries that touch
//! nothing the learned read sets hold (`group_starts`), split back into classes wherever a
//! group cannot be trusted as one (a member probed without a known read set, or two members
//! with different verdicts). Pure: the driver learns the boundaries and read sets
//! (`run::driver::groups`) and asks this for the partition and the search over it.

use super::{group_starts, Change, ReadSet};
use crate::core::outcome::Verdict;
use crate::core::search::{EndpointCheck, Search};
use std::collections::BTreeMap;

/// Contiguous groups over `n` candidates (tree classes, in range order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partition {
    /// First candidate of each group: ascending, beginning with 0.
    starts: Vec<usize>,
    /// Candidates that stand alone (`split`): no boundary next to them is ever joined.
    forced: Vec<bool>,
    n: usize,
}

/// What the groups are cut with: the differences between neighbouring candidates
/// (`boundaries[i]` between `i - 1` and `i`, `None`: unknown) and the union of the read sets.
#[derive(Clone, Copy)]
pub struct Cut<'a> {
    pub boundaries: &'a [Option<Vec<Change>>],
    pub union: &'a ReadSet,
}

impl Partition {
    /// Every candidate its own group (the whole tree decides).
    pub fn classes(n: usize) -> Partition {
        Partition {
            starts: (0..n).collect(),
            forced: vec![false; n],
            n,
        }
    }

    pub fn len(&self) -> usize {
        self.starts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.starts.is_empty()
    }

    pub fn starts(&self) -> &[usize] {
        &self.starts
    }

    pub fn members(&self, g: usize) -> std::ops::Range<usize> {
        self.starts[g]..self.starts.get(g + 1).copied().unwrap_or(self.n)
    }

    pub fn group_of(&self, i: usize) -> usize {
        self.starts.partition_point(|&s| s <= i) - 1
    }

    /// Group `g`'s members stand alone from the next regrouping on.
    pub fn split(&mut self, g: usize) {
        for i in self.members(g) {
            self.forced[i] = true;
        }
    }

    /// The groups from `cut` (`None`: unchanged), then split until no group holds two
    /// different verdicts of `known` (by candidate index). At least two groups over two or
    /// more candidates: the search must still see both endpoints (a partition finer than the
    /// classes is always exact).
    pub fn regroup(&mut self, cut: Option<Cut<'_>>, known: &BTreeMap<usize, Verdict>) {
        let recut = |p: &mut Partition| {
            if let Some(c) = cut {
                p.starts = group_starts(c.boundaries, c.union, &p.forced);
            }
            if p.starts.len() < 2 && p.n >= 2 {
                p.starts = vec![0, p.n - 1];
            }
        };
        recut(self);
        while let Some(g) = (0..self.len()).find(|&g| {
            let mut vs = known.range(self.members(g)).map(|(_, v)| *v);
            let first = vs.next();
            vs.any(|v| Some(v) != first)
        }) {
            self.split(g);
            if cut.is_none() {
                // Without boundaries a split group is its classes at once.
                let members = self.members(g);
                self.starts.splice(g..=g, members);
            }
            recut(self);
        }
    }

    /// The search over the groups (`depths`: each candidate's first-parent depth, the
    /// search's stable keys), with every verdict of `known` recorded on its group.
    pub fn search(
        &self,
        depths: &[u64],
        endpoints: EndpointCheck,
        known: &BTreeMap<usize, Verdict>,
    ) -> Search {
        let keys = self.starts.iter().map(|&s| depths[s]).collect();
        let mut search = Search::new(keys, endpoints);
        for (&i, &v) in known {
            search.record(self.group_of(i), v);
        }
        search
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn change(path: &str) -> Change {
        Change {
            path: path.into(),
            listing: None,
        }
    }

    /// `n` candidates; each boundary touches the read file, another file, or is unknown.
    fn history() -> impl Strategy<Value = (usize, Vec<u8>, BTreeMap<usize, Verdict>, Vec<usize>)> {
        (2usize..40).prop_flat_map(|n| {
            let verdict = prop_oneof![Just(Verdict::Old), Just(Verdict::New), Just(Verdict::Skip)];
            (
                Just(n),
                prop::collection::vec(0u8..3, n),
                prop::collection::btree_map(0..n, verdict, 0..n.min(8)),
                prop::collection::vec(0..n, 0..3),
            )
        })
    }

    fn boundaries(kinds: &[u8]) -> Vec<Option<Vec<Change>>> {
        kinds
            .iter()
            .enumerate()
            .map(|(i, k)| match (i, k) {
                (0, _) => None,
                (_, 0) => Some(vec![change("read.c")]),
                (_, 1) => Some(vec![change("docs/x.md")]),
                _ => None,
            })
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]

        /// Whatever was learned: the groups cover the range contiguously, there are at least
        /// two, no group holds two different verdicts, a cut boundary that touches the read
        /// set always separates groups, and a split group's members stand alone.
        #[test]
        fn groups_are_contiguous_consistent_and_cut_where_reads_change(
            (n, kinds, known, splits) in history(),
            with_cut in any::<bool>(),
        ) {
            let mut union = ReadSet::default();
            union.add_file("read.c");
            let b = boundaries(&kinds);
            let cut = with_cut.then_some(Cut { boundaries: &b, union: &union });
            let mut p = Partition::classes(n);
            p.regroup(cut, &BTreeMap::new());
            for &i in &splits {
                let g = p.group_of(i);
                p.split(g);
            }
            let split: Vec<usize> = splits
                .iter()
                .flat_map(|&i| {
                    let mut q = Partition::classes(n);
                    q.regroup(cut, &BTreeMap::new());
                    q.members(q.group_of(i)).collect::<Vec<_>>()
                })
                .collect();
            p.regroup(cut, &known);
            prop_assert!(p.len() >= 2);
            prop_assert_eq!(p.starts()[0], 0);
            let mut next = 0;
            for g in 0..p.len() {
                let m = p.members(g);
                prop_assert_eq!(m.start, next);
                prop_assert!(!m.is_empty());
                next = m.end;
                let vs: Vec<Verdict> = known.range(m.clone()).map(|(_, v)| *v).collect();
                prop_assert!(vs.windows(2).all(|w| w[0] == w[1]), "group {g}: {vs:?}");
                for i in m.clone() {
                    prop_assert_eq!(p.group_of(i), g);
                }
            }
            prop_assert_eq!(next, n);
            if with_cut {
                for (i, k) in kinds.iter().enumerate().skip(1) {
                    if *k != 1 {
                        prop_assert!(p.starts().contains(&i), "boundary {i} joined");
                    }
                }
                for &i in &split {
                    prop_assert!(p.starts().contains(&i), "split member {i} joined");
                }
            } else {
                prop_assert_eq!(p.len(), n, "without a cut the groups are the classes");
            }
        }

        /// The search over the groups answers what the search over the classes answers when
        /// the behaviour changes only at a boundary that touches the read set (the argument in
        /// `core::buildset`): the group holding the first new class starts at that class.
        #[test]
        fn the_search_over_groups_finds_the_first_new_class(
            (n, kinds, _, _) in history(),
            at in 1usize..40,
        ) {
            let mut kinds = kinds;
            let at = 1 + at % (n - 1);
            kinds[at] = 0; // the change reads read.c
            let mut union = ReadSet::default();
            union.add_file("read.c");
            let b = boundaries(&kinds);
            let mut p = Partition::classes(n);
            let mut known = BTreeMap::new();
            p.regroup(Some(Cut { boundaries: &b, union: &union }), &known);
            let depths: Vec<u64> = (0..n as u64).collect();
            let answer = loop {
                let s = p.search(&depths, EndpointCheck::First, &known);
                match s.next(1) {
                    crate::core::search::Step::Probe(w) => {
                        for g in w {
                            let i = p.members(g).start;
                            known.insert(i, if i >= at { Verdict::New } else { Verdict::Old });
                        }
                    }
                    crate::core::search::Step::Done(a) => break a,
                }
                p.regroup(Some(Cut { boundaries: &b, union: &union }), &known);
            };
            let crate::core::search::Conclusion::Found { index: g } = answer else {
                panic!("{answer:?}")
            };
            prop_assert_eq!(p.members(g).start, at);
        }
    }
}
