//! Where the next runs go: the culprit belief (p integrated out), the expected information of
//! a run at each candidate, and the stopping rule that keeps the stated confidence honest when
//! p is uncertain. The Session asks; this answers.

use super::*;

/// What the Session steers by: the culprit posterior and, per culprit position, the posterior
/// mean of the rate given that position. Same model and numbers as `posterior` (p integrated
/// out exactly against the Beta prior), computed in O(N + runs) with log-gamma tables so a
/// decision over 10,000 candidates stays cheap.
#[derive(Debug, Clone, PartialEq)]
pub struct Belief {
    /// `culprit[i]` = P(candidate i is the first bad one | all runs); 0 for the good endpoint.
    pub culprit: Vec<f64>,
    /// `rate_given[i]` = E[p | culprit = i, all runs]: the chance that one run of a bad
    /// candidate fails, if i is the culprit.
    pub rate_given: Vec<f64>,
    /// Posterior mean of the rate (mixed over culprit positions).
    pub rate_mean: f64,
}

/// `Belief` for `evidence`; `None` when the good endpoint failed (no position explains it).
pub fn belief(evidence: &[Evidence], prior: Beta) -> Option<Belief> {
    let n = evidence.len();
    if n < 2 {
        return None;
    }
    let first_fail = evidence.iter().position(|e| e.new > 0);
    if first_fail == Some(0) {
        return None;
    }
    let last = first_fail.unwrap_or(n - 1);
    let fails: usize = evidence.iter().map(|e| e.new as usize).sum();
    let passes: usize = evidence.iter().map(|e| e.old as usize).sum();
    // ln Γ(x + k) for k = 0..=len by the recurrence Γ(x + 1) = x Γ(x).
    let table = |x: f64, len: usize| {
        let mut t = Vec::with_capacity(len + 1);
        let mut acc = ln_gamma(x);
        for k in 0..=len {
            t.push(acc);
            acc += (x + k as f64).ln();
        }
        t
    };
    let (la, lb, lab) = (
        table(prior.a, fails),
        table(prior.b, passes),
        table(prior.a + prior.b, fails + passes),
    );
    let mut logw = vec![f64::NEG_INFINITY; n];
    let mut rate_given = vec![0.0; n];
    let (mut f, mut s) = (0usize, 0usize);
    for j in (0..n).rev() {
        f += evidence[j].new as usize;
        s += evidence[j].old as usize;
        rate_given[j] = (prior.a + f as f64) / (prior.a + prior.b + (f + s) as f64);
        if (1..=last).contains(&j) {
            // B(a + F_j, b + S_j); the constant B(a, b) cancels.
            logw[j] = la[f] + lb[s] - lab[f + s];
        }
    }
    let max = logw.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if !max.is_finite() {
        return None;
    }
    let mut culprit: Vec<f64> = logw.iter().map(|w| (w - max).exp()).collect();
    let total: f64 = culprit.iter().sum();
    culprit.iter_mut().for_each(|w| *w /= total);
    let rate_mean = culprit.iter().zip(&rate_given).map(|(w, r)| w * r).sum();
    Some(Belief {
        culprit,
        rate_given,
        rate_mean,
    })
}

/// Most runs one wave is planned for jointly (the information of a wave is computed over
/// (first failure, number of failures) classes, O(K^2) per evaluated wave, with
/// (K+1)(K+2)/2 prefix tables of N entries); slots beyond it repeat the planned runs.
pub const MAX_PLANNED: usize = 16;

/// Waves whose information is within this fraction of the best are equally good; among them
/// the candidate with the stablest key (most trailing zero bits of its first-parent depth, as
/// `search` does) is taken, so overlapping bisections of one history probe the same commits
/// and the result store answers the second one.
pub const STABLE_TOLERANCE: f64 = 0.01;

/// Expected information about the culprit from waves of runs, under a `Belief`.
///
/// One run at x fails with probability P(c <= x) p: bad candidates are the ones at or after
/// the culprit, and only they ever fail (a Z-channel). Its information about c is
/// I = h(sum_{c<=x} P(c) E[p|c]) - sum_{c<=x} P(c) h(E[p|c]) (h = binary entropy), exact for one
/// run. A wave of K runs at x_1 <= ... <= x_K is scored the same way with the runs of one wave
/// taken as independent given c at rate E[p|c] (exact for K = 1; for repeats of one candidate
/// it slightly overrates them, which only steers the choice: the posterior stays exact).
pub struct Planner<'a> {
    belief: &'a Belief,
    k: usize,
    /// `pre[idx(s, t)][x + 1]` = sum_{c <= x} P(c) m_c^s (1 - m_c)^t for s + t <= k.
    pre: Vec<Vec<f64>>,
    /// `hpre[x + 1]` = sum_{c <= x} P(c) h(m_c) (nats).
    hpre: Vec<f64>,
    binom: Vec<Vec<f64>>,
}

fn xlnx(x: f64) -> f64 {
    if x > 0.0 {
        x * x.ln()
    } else {
        0.0
    }
}

/// Binary entropy in nats.
fn entropy(q: f64) -> f64 {
    -xlnx(q) - xlnx(1.0 - q)
}

impl<'a> Planner<'a> {
    /// For waves of up to `k` runs (clamped to 1..=MAX_PLANNED).
    pub fn new(belief: &'a Belief, k: usize) -> Self {
        let k = k.clamp(1, MAX_PLANNED);
        let n = belief.culprit.len();
        let mut pre = Vec::with_capacity((k + 1) * (k + 2) / 2);
        for s in 0..=k {
            for t in 0..=(k - s) {
                let mut acc = 0.0;
                let mut v = Vec::with_capacity(n + 1);
                v.push(0.0);
                for c in 0..n {
                    let (w, m) = (belief.culprit[c], belief.rate_given[c]);
                    if w > 0.0 {
                        acc += w * m.powi(s as i32) * (1.0 - m).powi(t as i32);
                    }
                    v.push(acc);
                }
                pre.push(v);
            }
        }
        let mut hpre = Vec::with_capacity(n + 1);
        hpre.push(0.0);
        let mut acc = 0.0;
        for c in 0..n {
            acc += belief.culprit[c] * entropy(belief.rate_given[c]);
            hpre.push(acc);
        }
        let mut binom = vec![vec![0.0; k + 1]; k + 1];
        for a in 0..=k {
            binom[a][0] = 1.0;
            for b in 1..=a {
                binom[a][b] = binom[a - 1][b - 1] + if b < a { binom[a - 1][b] } else { 0.0 };
            }
        }
        Planner {
            belief,
            k,
            pre,
            hpre,
            binom,
        }
    }

    fn idx(&self, s: usize, t: usize) -> usize {
        // Rows s = 0..=k hold k - s + 1 entries each.
        s * (self.k + 1) - s * (s.saturating_sub(1)) / 2 + t
    }

    /// sum over c in (lo, hi] (positions; `lo` = None for "from the start").
    fn range(&self, s: usize, t: usize, lo: Option<usize>, hi: usize) -> f64 {
        let v = &self.pre[self.idx(s, t)];
        v[hi + 1] - lo.map_or(0.0, |l| v[l + 1])
    }

    /// Expected information (bits) about the culprit from one run at each of `at` (at most
    /// `k` runs; sorted ascending, repeats allowed).
    pub fn information(&self, at: &[usize]) -> f64 {
        let k = at.len();
        if k == 0 {
            return 0.0;
        }
        debug_assert!(k <= self.k && at.windows(2).all(|w| w[0] <= w[1]));
        // Group g holds the culprits in (at[g-1], at[g]]: for them runs g.. can fail (k - g
        // of them), the earlier ones cannot. An outcome is determined up to permutation by
        // its first failing run f and its number of failures s; P(one outcome of (f, s)) =
        // sum_{g <= f} sum_{c in g} P(c) m^s (1-m)^(k-g-s).
        let mut hy = 0.0;
        let mut p0 = 1.0 - self.range(0, 0, None, at[k - 1]);
        let mut acc = vec![0.0; k + 1];
        for f in 0..k {
            let lo = if f == 0 { None } else { Some(at[f - 1]) };
            let active = k - f;
            p0 += self.range(0, active, lo, at[f]);
            for (s, a) in acc.iter_mut().enumerate().take(active + 1).skip(1) {
                *a += self.range(s, active - s, lo, at[f]);
            }
            let ways = &self.binom[active - 1];
            for (s, &a) in acc.iter().enumerate().take(active + 1).skip(1) {
                hy -= ways[s - 1] * xlnx(a.max(0.0));
            }
        }
        hy -= xlnx(p0.max(0.0));
        let hyc: f64 = at.iter().map(|&x| self.hpre[x + 1]).sum();
        ((hy - hyc) / std::f64::consts::LN_2).max(0.0)
    }

    /// Greedy wave: `wave` (runs already decided, e.g. endpoint checks) plus `free` more runs,
    /// each the candidate (among `allowed`) that adds the most information to the runs chosen
    /// before it. `keys` steer ties (see `STABLE_TOLERANCE`). Stops early when no run adds
    /// information. Deterministic: a function of its arguments.
    pub fn pick(&self, wave: &[usize], free: usize, allowed: &[bool], keys: &[u64]) -> Vec<usize> {
        let mut chosen: Vec<usize> = wave.to_vec();
        let n = self.belief.culprit.len();
        // Runs after the first failure tell only what a run at it tells: never better.
        let last = self
            .belief
            .culprit
            .iter()
            .rposition(|&w| w > 0.0)
            .unwrap_or(n - 1);
        let mut planned = 0;
        while planned < free {
            if chosen.len() >= self.k {
                // Beyond what is planned jointly: repeat the planned runs in order.
                let extra = chosen[chosen.len() - self.k];
                chosen.push(extra);
                planned += 1;
                continue;
            }
            let mut base = chosen.clone();
            base.sort_unstable();
            let before = self.information(&base);
            let mut scored: Vec<(usize, f64)> = Vec::new();
            let mut trial = Vec::with_capacity(base.len() + 1);
            for x in (1..=last).filter(|&x| allowed[x]) {
                trial.clear();
                let at = base.partition_point(|&b| b <= x);
                trial.extend_from_slice(&base[..at]);
                trial.push(x);
                trial.extend_from_slice(&base[at..]);
                scored.push((x, self.information(&trial) - before));
            }
            let best = scored.iter().map(|s| s.1).fold(0.0f64, f64::max);
            if best <= 1e-12 {
                break;
            }
            let floor = best * (1.0 - STABLE_TOLERANCE);
            let (x, _) = scored
                .iter()
                .copied()
                .filter(|s| s.1 >= floor)
                .max_by(|a, b| {
                    stable_rank(keys[a.0])
                        .cmp(&stable_rank(keys[b.0]))
                        .then(a.1.total_cmp(&b.1))
                        .then(b.0.cmp(&a.0))
                })
                .expect("best is in the list");
            chosen.push(x);
            planned += 1;
        }
        chosen.sort_unstable();
        chosen
    }
}

fn stable_rank(key: u64) -> u32 {
    if key == 0 {
        64
    } else {
        key.trailing_zeros()
    }
}

/// Candidates that no run can tell apart: each one with the untestable candidates
/// (`untestable[i]`: only skips seen) right before it. Returns the block holding the most
/// posterior mass (the first of equals) and that mass.
pub fn top_block(culprit: &[f64], untestable: &[bool]) -> (Vec<usize>, f64) {
    let n = culprit.len();
    let (mut best, mut best_mass) = (Vec::new(), -1.0);
    let (mut cur, mut mass) = (Vec::new(), 0.0);
    for j in 1..n {
        cur.push(j);
        mass += culprit[j];
        if !untestable[j] || j == n - 1 {
            if mass > best_mass {
                best_mass = mass;
                best = std::mem::take(&mut cur);
            } else {
                cur.clear();
            }
            mass = 0.0;
        }
    }
    (best, best_mass.clamp(0.0, 1.0))
}

/// How far below its estimate the reproduction rate is taken when deciding to stop, in
/// standard errors (Wilson score bound). See `robust_mass` and `cautious_mass`.
pub const RATE_MARGIN_Z: f64 = 1.5;

/// Lower Wilson score bound for a rate seen `k` times in `n` runs (0 when n = 0).
pub fn wilson_lower(k: u32, n: u32, z: f64) -> f64 {
    if n == 0 {
        return 0.0;
    }
    let (k, n) = (f64::from(k), f64::from(n));
    let ph = k / n;
    let d = 1.0 + z * z / n;
    let c = (ph + z * z / (2.0 * n)) / d;
    let h = z / d * (ph * (1.0 - ph) / n + z * z / (4.0 * n * n)).sqrt();
    (c - h).max(0.0)
}

/// Posterior mass of `block` (ascending; its last candidate the one that was tested) with
/// the reproduction rate fixed at a pessimistic value instead of integrated out: the lower
/// Wilson bound (`z` standard errors) of the rate seen at and after the block's last
/// candidate.
///
/// Why: the integrated posterior is calibrated on average over the prior on p, not for each
/// p. With a rare fault the few failures seen can make it look more reproducible than it is,
/// every pass then counts too much, and the answer is wrong more often than it claims (at
/// p = 0.1, 9.7% wrong at a stated 0.95). With p known the posterior is calibrated for that p
/// whatever the stopping rule, and a pass at a good-looking candidate proves less the smaller
/// p is, so the mass at a lower bound of p is a lower bound of the mass at the true p
/// whenever the bound holds. The Session stops only when this, `cautious_mass` and the
/// integrated mass all reach the target. Alone it needed z = 2 (0.5-2.5% wrong, 1.6x the
/// information limit), and that margin costs most where the fault is common enough to have
/// been seen often: at N = 400, p = 0.3 the rate was taken near 0.15 and the answer's parent
/// ran about 28 times to confirm it (the "23 times until the answer holds"). Beside
/// `cautious_mass`, which guards the answers given on few runs, z = 1.5 keeps every cell of
/// the benchmark at least 95% right (BENCHMARKS.md, "Runs per answer by N and p").
pub fn robust_mass(evidence: &[Evidence], block: &[usize], z: f64) -> f64 {
    let n = evidence.len();
    let Some(&h) = block.last() else {
        return 0.0;
    };
    let last = evidence.iter().position(|e| e.new > 0).unwrap_or(n - 1);
    let (fh, sh) = evidence[h..]
        .iter()
        .fold((0u32, 0u32), |(f, s), e| (f + e.new, s + e.old));
    let p = wilson_lower(fh, fh + sh, z).min(1.0 - 1e-12);
    if p <= 0.0 {
        return 0.0;
    }
    let (lp, lq) = (p.ln(), (1.0 - p).ln());
    let mut logw = vec![f64::NEG_INFINITY; n];
    let (mut f, mut s) = (0.0f64, 0.0f64);
    for j in (1..n).rev() {
        f += f64::from(evidence[j].new);
        s += f64::from(evidence[j].old);
        if j <= last {
            logw[j] = f * lp + s * lq;
        }
    }
    let max = logw.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let total: f64 = logw.iter().map(|w| (w - max).exp()).sum();
    let mass: f64 = block.iter().map(|&j| (logw[j] - max).exp()).sum();
    (mass / total).clamp(0.0, 1.0)
}

/// The prior on the reproduction rate of the stopping rule's second opinion (`cautious_mass`):
/// Beta(1, 2), as if one more run of a bad candidate had passed.
pub const STOP_PRIOR: Beta = Beta { a: 1.0, b: 2.0 };

/// Posterior mass of `block` with p integrated out against `STOP_PRIOR` instead of the
/// uniform prior the planner and the report use.
///
/// Why: the uniform prior's posterior is calibrated only on average over p, and at a given
/// moderate p it is wrong more often than it claims (at N = 400, p = 0.3: 34 of 400 answers
/// wrong when it alone decides). Its wrong answers are given early, on the few runs seen at
/// the bad candidates, where one imagined pass lowers the rate estimate most; as those runs
/// accumulate the imagined pass stops mattering, so unlike a wider Wilson margin it costs
/// little once the rate is known. Simulated (same 400 histories): with it and the Wilson bound
/// at z = 1.5, 75.7 runs per answer and 386 right at N = 400, p = 0.3, where the Wilson bound
/// at z = 2 alone took 81.6 runs for 385 right; it costs about two runs when the fault always
/// reproduces (20.5 instead of 18.5 at N = 400, p = 1).
pub fn cautious_mass(evidence: &[Evidence], block: &[usize]) -> f64 {
    belief(evidence, STOP_PRIOR).map_or(0.0, |b| {
        block
            .iter()
            .filter_map(|&j| b.culprit.get(j))
            .sum::<f64>()
            .min(1.0)
    })
}

/// What the stopping rule sees in `evidence`: the block of candidates holding the most of
/// the posterior under `prior` (`top_block`), that mass, and the smallest of the three masses
/// the rule asks to reach the confidence (that one, `cautious_mass`, `robust_mass`). The
/// Session stops when the last is at least the confidence; `None` when the runs contradict
/// the model.
pub fn stop_masses(evidence: &[Evidence], untestable: &[bool], prior: Beta) -> Option<StopMasses> {
    let b = belief(evidence, prior)?;
    let (block, mass) = top_block(&b.culprit, untestable);
    let least =
        mass.min(cautious_mass(evidence, &block))
            .min(robust_mass(evidence, &block, RATE_MARGIN_Z));
    Some(StopMasses { block, mass, least })
}

/// See `stop_masses`.
#[derive(Debug, Clone, PartialEq)]
pub struct StopMasses {
    pub block: Vec<usize>,
    pub mass: f64,
    pub least: f64,
}

/// The expected evidence for the answer after one more run at `x`: E[-ln(1 - least)] over the
/// run's two outcomes (`stop_masses`' `least`; the chance of a failure at x from `b`, the
/// belief the planner steers by). Log odds are the currency a run pays in: a pass at the
/// answer's parent multiplies the odds against it by about (1 - p), whatever they were.
pub fn expected_stop_evidence(
    evidence: &[Evidence],
    b: &Belief,
    x: usize,
    untestable: &[bool],
    prior: Beta,
) -> f64 {
    let fail: f64 = (1..=x.min(b.culprit.len() - 1))
        .map(|j| b.culprit[j] * b.rate_given[j])
        .sum();
    let mut after = evidence.to_vec();
    [(Verdict::New, fail), (Verdict::Old, 1.0 - fail)]
        .into_iter()
        .filter(|&(_, chance)| chance > 0.0)
        .map(|(v, chance)| {
            after[x].add(v);
            let least = stop_masses(&after, untestable, prior).map_or(0.0, |s| s.least);
            after[x] = evidence[x];
            chance * -(1.0 - least).max(1e-300).ln()
        })
        .sum()
}

/// The Session's rule for `--confidence`, as the report describes it. `decide` is the
/// per-candidate rule still used for one thing: when the bad endpoint, never seen failing,
/// has passed often enough to be called good (a bad endpoint).
#[derive(Debug, Clone, Copy)]
pub struct PosteriorRule {
    pub confidence: f64,
    pub endpoint: FlakyRule,
}

impl Rule for PosteriorRule {
    fn decide(&self, ev: &Evidence) -> Decision {
        self.endpoint.decide(ev)
    }

    fn describe(&self) -> String {
        format!(
            "probabilistic bisection, {:.1}% confidence (each run where it tells the most about the first bad commit; the answer is given once it holds {:.1}% of the posterior)",
            self.confidence * 100.0,
            self.confidence * 100.0
        )
    }
}
