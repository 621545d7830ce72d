//! The pure search core: given ordered candidates and the verdicts seen so far, say what to
//! probe next or what the answer is. No git, no processes, no clocks: everything here is a
//! function of its inputs, so it is tested exhaustively against brute force.
//!
//! Candidate 0 is the `--good` endpoint and candidate `n-1` the `--bad` one. Candidates are
//! already deduplicated by tested tree, so every index is a distinct thing to test.
//!
//! Midpoints are *stable*: instead of the exact middle we take, inside the window that cannot
//! cost an extra step, the candidate whose stable key (its first-parent depth in the
//! repository) has the most trailing zero bits. Two bisections over overlapping ranges of the
//! same history therefore tend to probe the same commits, and the result store answers the
//! second one. The window is chosen so that the worst case stays `ceil(log2(range))` probes,
//! the same as an exact binary search (and `git bisect`).
//!
//! Once the driver knows what builds cost (`set_costs`, learned from Ninja), one slot instead
//! takes the midpoint of least expected build time for the rest of the search (`costs`),
//! within a probe budget the driver gives: at most one probe over the halving, never past
//! git's fewest on the range.

use crate::core::outcome::Verdict;
pub use costs::{budget, git_fewest, BuildCosts, MAX_OPEN};
use serde::{Deserialize, Serialize};

/// When the endpoints are tested.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EndpointCheck {
    /// Test `--bad` when it is worth it (the endpoint that usually lies: a fault that does not
    /// reproduce there). With one slot, a midpoint that shows the new behaviour proves the
    /// fault reproduces inside the range, and an answer whose commit and parent were both
    /// tested needs no endpoint; so `--bad` is built only when the answer touches it, or while
    /// every verdict is old once the odds that it lies times the walk toward it outweigh its
    /// build (`endpoint`): cheap when it is incremental from a built neighbour, likely after
    /// several old answers in a row. A truthful range then usually costs no endpoint probe; a
    /// lying `--bad` costs at most the walk toward it, never a wrong answer. With several slots
    /// the same rule holds, and the other slots of `--bad`'s wave keep halving: the first
    /// wave holds midpoints (until issue 45 it held only the endpoints, so `--jobs K` spent
    /// its first round on two full builds that a truthful range never needed). (Until issue 22 `--bad` was built right
    /// after the first old midpoint: a full cold build on half the culprit positions.)
    First,
    /// Assume the endpoints, and test one only when the answer depends on it (the culprit is
    /// next to it). Same trust at the end, fewer probes; a wrong endpoint is found late.
    Lazy,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Endpoint {
    Good,
    Bad,
}

/// How a search ended, as every result stores it (a commit bisect, a `flaky::session::Session`,
/// bisect-config): indices are into the candidates (bisect) or the ladder (bisect-config).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Conclusion {
    /// The first candidate with new behaviour, all its predecessors back to an old one tested.
    Found { index: usize },
    /// The first new candidate is one of these (ascending; skips or, in a flaky session, the
    /// posterior hide the boundary; the last one is the first tested-new candidate).
    Ambiguous { indices: Vec<usize> },
    /// An endpoint does not behave as claimed.
    BadEndpoint { which: Endpoint, got: Verdict },
}

impl Conclusion {
    /// The candidates a search narrowed the answer to: one is `Found`, more `Ambiguous`.
    pub fn among(mut candidates: Vec<usize>) -> Conclusion {
        if candidates.len() == 1 {
            Conclusion::Found {
                index: candidates.remove(0),
            }
        } else {
            Conclusion::Ambiguous {
                indices: candidates,
            }
        }
    }

    /// The candidates it names (empty for a bad endpoint).
    pub fn candidates(&self) -> &[usize] {
        match self {
            Conclusion::Found { index } => std::slice::from_ref(index),
            Conclusion::Ambiguous { indices } => indices,
            Conclusion::BadEndpoint { .. } => &[],
        }
    }
}

/// A search's next move: probe more, or the end of the search (one type for it: `Conclusion`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Probe these candidates next (one per free slot; at least one).
    Probe(Vec<usize>),
    Done(Conclusion),
}

/// State of one bisection. Cheap to rebuild from stored results: the driver replays the store
/// into it, so a killed run resumes exactly where it was.
#[derive(Debug, Clone)]
pub struct Search {
    keys: Vec<u64>,
    verdicts: Vec<Option<Verdict>>,
    endpoints: EndpointCheck,
    /// Candidates whose result is stored: free to ask, so one inside the open range is taken
    /// before anything is built, wherever it lies.
    cheap: Vec<bool>,
    /// What building each candidate costs (`costs`), and the probes the search may still
    /// spend on midpoints: with them one slot takes the least expected build time.
    costs: Option<(BuildCosts, u32)>,
}

impl Search {
    /// `keys[i]` is a stable position for candidate i (first-parent depth); it only steers
    /// which of several equally good midpoints is taken.
    pub fn new(keys: Vec<u64>, endpoints: EndpointCheck) -> Self {
        assert!(keys.len() >= 2, "a search needs both endpoints");
        let n = keys.len();
        Search {
            keys,
            verdicts: vec![None; n],
            endpoints,
            cheap: vec![false; n],
            costs: None,
        }
    }

    /// Marks candidate `index` as free to probe (its result is stored). An open free
    /// candidate is asked before any midpoint is built: its answer costs nothing, and even
    /// off-centre it only shrinks the range (a repeated or overlapping bisection then runs
    /// only what the stored ones leave open).
    pub fn set_cheap(&mut self, index: usize) {
        self.cheap[index] = true;
    }

    /// What building each candidate costs, and how many probes may still go to midpoints
    /// (`costs::budget`; never below what an exact halving of the open range needs). With
    /// one slot the midpoint of least expected build time for the rest of the search is taken
    /// (`costs`); with more, the cheapest to build now inside the window.
    pub fn set_costs(&mut self, costs: BuildCosts, depth: u32) {
        self.costs = Some((costs, depth));
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    pub fn record(&mut self, index: usize, verdict: Verdict) {
        self.verdicts[index] = Some(verdict);
    }

    pub fn verdict(&self, index: usize) -> Option<Verdict> {
        self.verdicts[index]
    }

    /// Current bounds: (last old before the first new, first new). Unknown endpoints count as
    /// what they claim to be.
    pub fn bounds(&self) -> (usize, usize) {
        let n = self.len();
        let hi = (1..n)
            .find(|&i| self.verdicts[i] == Some(Verdict::New))
            .unwrap_or(n - 1);
        let lo = (0..hi)
            .rev()
            .find(|&i| self.verdicts[i] == Some(Verdict::Old))
            .unwrap_or(0);
        (lo, hi)
    }

    /// Probes an exact binary search still needs in the worst case (a progress estimate),
    /// the endpoints included: an untested endpoint next to the answer is probed before the
    /// answer is claimed, so a range with nothing between its endpoints still has steps left.
    pub fn steps_left(&self) -> u32 {
        let n = self.len();
        let (lo, hi) = self.bounds();
        let open = (lo + 1..hi).filter(|&i| self.verdicts[i].is_none()).count();
        let bad_open = hi == n - 1 && self.verdicts[n - 1].is_none();
        let good_open = lo == 0 && self.verdicts[0].is_none();
        // Midpoints end next to one endpoint at most; with none left, both may still be due.
        let ends = match open {
            0 => u32::from(bad_open) + u32::from(good_open),
            _ => u32::from(bad_open || good_open),
        };
        ceil_log2(open + 1) + ends
    }

    /// The answer the search already holds while only endpoint checks remain: what it will
    /// conclude if those endpoints behave as claimed, and which they are. A user waits for the
    /// check, but need not wait to read the answer. `None` while a midpoint is still open.
    pub fn provisional(&self) -> Option<(Conclusion, Vec<Endpoint>)> {
        let n = self.len();
        let (lo, hi) = self.bounds();
        if (lo + 1..hi).any(|i| self.verdicts[i].is_none()) {
            return None;
        }
        let mut ends = Vec::new();
        if lo == 0 && self.verdicts[0].is_none() {
            ends.push(Endpoint::Good);
        }
        if hi == n - 1 && self.verdicts[n - 1].is_none() {
            ends.push(Endpoint::Bad);
        }
        if ends.is_empty() {
            return None;
        }
        let mut set: Vec<usize> = (lo + 1..hi)
            .filter(|&i| self.verdicts[i] == Some(Verdict::Skip))
            .collect();
        set.push(hi);
        Some((Conclusion::among(set), ends))
    }

    /// What to do next, proposing up to `slots` probes at once (multisection when > 1).
    pub fn next(&self, slots: usize) -> Step {
        let slots = slots.max(1);
        let n = self.len();
        let (good, bad) = (self.verdicts[0], self.verdicts[n - 1]);
        if let Some(got @ (Verdict::Old | Verdict::Skip)) = bad {
            return Step::Done(Conclusion::BadEndpoint {
                which: Endpoint::Bad,
                got,
            });
        }
        if let Some(got @ (Verdict::New | Verdict::Skip)) = good {
            return Step::Done(Conclusion::BadEndpoint {
                which: Endpoint::Good,
                got,
            });
        }
        if self.endpoints == EndpointCheck::First && bad.is_none() {
            let inside = |v| (1..n - 1).any(|i| self.verdicts[i] == Some(v));
            if inside(Verdict::Old) && !inside(Verdict::New) && self.bad_worth_checking() {
                // The other slots keep halving beside it.
                let (lo, hi) = self.bounds();
                let open: Vec<usize> = (lo + 1..hi)
                    .filter(|&i| self.verdicts[i].is_none())
                    .collect();
                let mut wave = if slots > 1 && !open.is_empty() {
                    self.pick(lo, hi, &open, slots - 1)
                } else {
                    Vec::new()
                };
                wave.push(n - 1);
                return Step::Probe(wave);
            }
        }
        let (lo, hi) = self.bounds();
        let open: Vec<usize> = (lo + 1..hi)
            .filter(|&i| self.verdicts[i].is_none())
            .collect();
        if open.is_empty() {
            // The answer now depends on the endpoints it touches: test them before claiming it.
            let mut ends = Vec::new();
            if hi == n - 1 && bad.is_none() {
                ends.push(n - 1);
            }
            if lo == 0 && good.is_none() {
                ends.push(0);
            }
            if !ends.is_empty() {
                ends.truncate(slots);
                return Step::Probe(ends);
            }
            let skipped: Vec<usize> = (lo + 1..hi)
                .filter(|&i| self.verdicts[i] == Some(Verdict::Skip))
                .collect();
            let mut set = skipped;
            set.push(hi);
            return Step::Done(Conclusion::among(set));
        }
        Step::Probe(self.pick(lo, hi, &open, slots))
    }

    /// One slot, every verdict so far old: whether building `--bad` now is worth it
    /// (`endpoint::verify_bad_now`), in build time when costs are known, else in probes.
    fn bad_worth_checking(&self) -> bool {
        let n = self.len();
        let (lo, hi) = self.bounds();
        let open: Vec<usize> = (lo + 1..hi)
            .filter(|&i| self.verdicts[i].is_none())
            .collect();
        let stored = |i: usize| self.cheap[i];
        let halvings = f64::from(ceil_log2(open.len() + 1));
        let (check, walk) = match &self.costs {
            Some((c, depth)) => {
                let now = |i: usize| {
                    if stored(i) {
                        0.0
                    } else {
                        c.now.get(i).copied().unwrap_or(0) as f64 + c.per_probe as f64
                    }
                };
                let walk = Self::walk_cost(c, lo, hi, &open, *depth).unwrap_or_else(|| {
                    halvings * open.iter().map(|&i| now(i)).sum::<f64>() / open.len().max(1) as f64
                });
                (now(n - 1), walk)
            }
            None => (if stored(n - 1) { 0.0 } else { 1.0 }, halvings),
        };
        endpoint::verify_bad_now(n, lo, open.len(), check, walk)
    }

    /// What the midpoints left are expected to cost as the builds will really run: the least
    /// expected build time of the rest of the search (`costs::scores`), in which each later
    /// midpoint is built from the probes around it, so mostly incremental. `None` above
    /// `MAX_OPEN` open candidates (the caller then prices each from what is built now).
    fn walk_cost(c: &BuildCosts, lo: usize, hi: usize, open: &[usize], depth: u32) -> Option<f64> {
        let mut pos = Vec::with_capacity(open.len() + 2);
        pos.push(lo);
        pos.extend_from_slice(open);
        pos.push(hi);
        let depth = depth.max(ceil_log2(open.len() + 1));
        costs::scores(c, &pos, depth)?
            .into_iter()
            .filter(|s| s.is_finite())
            .min_by(f64::total_cmp)
    }

    /// Choose up to `slots` distinct probes splitting (lo, hi) into `slots + 1` parts.
    fn pick(&self, lo: usize, hi: usize, open: &[usize], slots: usize) -> Vec<usize> {
        let parts = slots.min(open.len()) + 1;
        let span = hi - lo;
        let cost = |m: usize| {
            self.costs
                .as_ref()
                .and_then(|(c, _)| c.now.get(m).copied())
                .unwrap_or(0)
        };
        // One slot, costs known: least expected build time within the probe budget (only
        // computed when no stored candidate answers first).
        let planned = || match &self.costs {
            Some((costs, depth)) if parts == 2 => {
                let mut pos = Vec::with_capacity(open.len() + 2);
                pos.push(lo);
                pos.extend_from_slice(open);
                pos.push(hi);
                let depth = (*depth).max(ceil_log2(open.len() + 1));
                costs::scores(costs, &pos, depth)
            }
            _ => None,
        };
        let mut chosen: Vec<usize> = Vec::with_capacity(parts - 1);
        for j in 1..parts {
            // Target j/parts of the way; every part may grow up to the power-of-two budget
            // that keeps the worst-case number of rounds unchanged.
            let target2 = 2 * lo * parts + 2 * j * span; // 2 * parts * target
            let part = span.div_ceil(parts);
            let budget = 1usize << ceil_log2(part);
            let slack = budget.saturating_sub(part);
            let (wlo, whi) = if parts == 2 {
                // Both halves must stay within the budget (worst case unchanged), and the split
                // within 3/8..5/8 so the expected number of probes stays that of an exact halving
                // (the budget alone allows 256/44 splits of 300, which costs git's lucky 8th step).
                let mid = lo + span / 2;
                let near = (span / 8).max(1);
                (
                    hi.saturating_sub(budget).max(mid.saturating_sub(near)),
                    (lo + budget).min(mid + near),
                )
            } else {
                let t = target2 / (2 * parts);
                (t.saturating_sub(slack / 2), t + slack / 2)
            };
            let near = |m: usize| ((2 * m * parts).abs_diff(target2), m);
            let free = open
                .iter()
                .copied()
                .filter(|&m| self.cheap[m] && !chosen.contains(&m))
                .min_by_key(|&m| near(m));
            let best = free
                .or_else(|| {
                    let scores = planned()?;
                    (0..open.len())
                        .filter(|&k| scores[k].is_finite())
                        .min_by(|&a, &b| {
                            scores[a]
                                .total_cmp(&scores[b])
                                .then(tz(self.keys[open[b]]).cmp(&tz(self.keys[open[a]])))
                                .then(near(open[a]).cmp(&near(open[b])))
                        })
                        .map(|k| open[k])
                })
                .or_else(|| {
                    open.iter()
                        .copied()
                        .filter(|m| !chosen.contains(m))
                        .filter(|&m| m >= wlo && m <= whi)
                        .max_by(|&a, &b| {
                            cost(b)
                                .cmp(&cost(a))
                                .then(tz(self.keys[a]).cmp(&tz(self.keys[b])))
                                .then(near(b).cmp(&near(a)))
                        })
                })
                .or_else(|| {
                    open.iter()
                        .copied()
                        .filter(|m| !chosen.contains(m))
                        .min_by_key(|&m| ((2 * m * parts).abs_diff(target2), m))
                });
            if let Some(m) = best {
                chosen.push(m);
            }
        }
        chosen.sort_unstable();
        chosen
    }
}

fn tz(key: u64) -> u32 {
    if key == 0 {
        64
    } else {
        key.trailing_zeros()
    }
}

/// ceil(log2(x)) for x >= 1; 0 for x <= 1.
pub fn ceil_log2(x: usize) -> u32 {
    if x <= 1 {
        0
    } else {
        usize::BITS - (x - 1).leading_zeros()
    }
}

mod costs;
pub mod endpoint;
pub use endpoint::after_the_store;
pub mod simulate;
#[cfg(test)]
mod tests;
