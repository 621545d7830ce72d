#!/usr/bin/env python3
"""How much compile work can any exact bisection of a real ggml range save over `git bisect run`?

    bench/build_cost_bound.py GGML_GIT_DIR GOOD BAD [--build-dir DIR] [--fix SHA] [--lie-prior P]

Issue 13 asks for <= 0.5x `git bisect run`'s wall time on real 300-commit ggml ranges with a CPU
test. Almost all of that time is compiling, so this computes, in one cost model, the compile work
of `git bisect run` and a LOWER BOUND on the compile work of every exact search strategy:

* Cost model (the one `src/run/rebuild.rs` orders midpoints by): one real build of the range's
  middle commit with bench/ggml/build.sh, no ccache; `ninja -t deps` says which checkout files each
  object read, `.ninja_log` how long it took. Probing commit c after the set S was built costs the
  summed time of the objects whose inputs' blob ids at c differ from those at every commit of S
  (ccache and Ninja's own incremental build reuse the rest). The first probe is cold: everything.
* `git bisect run`: an exact halving of the first-parent list, as git does (git's own pick can be a
  neighbouring commit), each culprit position in turn.
* Lower bound: candidates are groups of commits with identical inputs (no build tells them apart),
  culprits are the groups' first commits, uniformly. In a bisection every probe so far lies at or
  outside the open interval (l, r], so pretending that EVERY commit outside it was built can only
  make a probe cheaper; with that relaxation the optimal expected (and worst-case) cost over
  intervals is a small dynamic program. The first probe costs the full cold build. Probes that a
  strategy spends outside the interval (endpoint checks) or on skipped builds only add cost, so
  the DP is below the compile work of any strategy that returns the exact culprit group.

* The tool's midpoint rules, replayed in the same model for every culprit group: the one before
  this benchmark existed (cheapest build now inside the no-extra-step window) and the one now in
  src/core/search/costs.rs (least expected build time: true cost now plus the relaxed optimum
  after, within its probe budget; the first probe, made before anything was learned, is the
  middle), each with its endpoint probes: `--bad` right after an old first midpoint (the rule
  until issue 22), only when the answer touches it (`--lazy-endpoints`), or priced as
  src/core/search/endpoint.rs does (`--lie-prior`); `--good` when the answer touches it. Also
  for a lying `--bad` (every verdict old), and the expected cost at a few lying rates.

Prints all of it, the ratios to git, a full build's core use (so the compile-work bound becomes
a wall-time bound), and for --fix the sequence git takes with the model's cost per build (to
hold the model against a measured run). Nothing here runs the tool; it is the yardstick.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from functools import lru_cache

HERE = os.path.dirname(os.path.abspath(__file__))


def git(repo, *args):
    return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True, text=True).stdout


def build_once(repo, sha, build_dir):
    """Builds `sha` with the benchmark's build script, no ccache, one job at a time (so Ninja's
    times are each object's own compile time, not time shared with others), then once more
    from clean with Ninja's default parallelism to see how much of the cores a build uses."""
    src = os.path.join(build_dir, "src")
    os.makedirs(src, exist_ok=True)
    archive = subprocess.run(["git", "-C", repo, "archive", sha], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", src], input=archive, check=True)
    out = os.path.join(build_dir, "build")
    os.makedirs(out, exist_ok=True)
    env = dict(os.environ, SRC=src, CCACHE_DISABLE="1")
    env.pop("CMAKE_C_COMPILER_LAUNCHER", None)
    env.pop("CMAKE_CXX_COMPILER_LAUNCHER", None)
    script = os.path.join(HERE, "ggml", "build.sh")
    subprocess.run(["sh", script], cwd=out, env=dict(env, CMAKE_BUILD_PARALLEL_LEVEL="1"), check=True)
    log = os.path.join(out, ".ninja_log")
    os.replace(log, log + ".j1")
    subprocess.run(["ninja", "-C", out, "-t", "clean"], check=True, capture_output=True)
    t0 = time.monotonic()
    child = subprocess.Popen(["sh", script], cwd=out, env=env)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.monotonic() - t0
    assert status == 0, "the parallel build failed"
    with open(os.path.join(out, "parallel-build"), "w") as f:
        f.write(f"{wall:.2f} {usage.ru_utime + usage.ru_stime:.2f} {os.cpu_count()}\n")
    os.replace(log + ".j1", log)
    return src, out


def objects_of(build, src):
    """[(weight_ms, [checkout-relative inputs])] from Ninja's deps log and build log."""
    times = {}
    with open(os.path.join(build, ".ninja_log")) as log:
        for line in log:
            if line.startswith("#"):
                continue
            start, end, _mtime, target, _hash = line.rstrip("\n").split("\t")
            times[target] = int(end) - int(start)
    deps = subprocess.run(["ninja", "-C", build, "-t", "deps"], check=True, capture_output=True,
                          text=True).stdout
    objects, target, inputs = [], None, []
    root = os.path.realpath(src) + os.sep

    def flush():
        if target and inputs:
            objects.append((max(times.get(target, 0), 1), sorted(set(inputs))))

    for line in deps.splitlines():
        m = re.match(r"^(\S.*): #deps", line)
        if m:
            flush()
            target, inputs = m.group(1), []
        elif line.strip():
            p = line.strip()
            p = os.path.realpath(p if os.path.isabs(p) else os.path.join(build, p))
            if p.startswith(root):
                inputs.append(p[len(root):])
    flush()
    return objects


def blob_ids(repo, sha, paths):
    listing = git(repo, "ls-tree", "-r", sha)
    ids = {}
    for line in listing.splitlines():
        meta, path = line.split("\t", 1)
        ids[path] = meta.split()[2]
    return tuple(ids.get(p) for p in paths)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("repo")
    ap.add_argument("good")
    ap.add_argument("bad")
    ap.add_argument("--build-dir", help="reuse this directory's earlier build (else a temp one)")
    ap.add_argument("--fix", help="a culprit to print git's build sequence for")
    ap.add_argument("--per-probe", type=float, default=0.0,
                    help="seconds every probe costs besides compiling (test, link), for every policy")
    ap.add_argument("--lie-prior", type=float, default=0.05,
                    help="LIE_PRIOR of src/core/search/endpoint.rs, for the priced --bad check")
    a = ap.parse_args()

    commits = [git(a.repo, "rev-parse", a.good + "^{commit}").strip()]
    commits += git(a.repo, "rev-list", "--first-parent", "--reverse", f"{a.good}..{a.bad}").split()
    n = len(commits) - 1
    mid = commits[len(commits) // 2]
    bdir = a.build_dir or tempfile.mkdtemp(prefix="cost-bound-")
    src, out = os.path.join(bdir, "src"), os.path.join(bdir, "build")
    if not os.path.exists(os.path.join(out, ".ninja_log")):
        src, out = build_once(a.repo, mid, bdir)
    objects = objects_of(out, src)
    paths = sorted({p for _, ins in objects for p in ins})
    col = {p: i for i, p in enumerate(paths)}
    blobs = [blob_ids(a.repo, c, paths) for c in commits]
    # fp[c][o]: what object o compiles at commit c.
    fp = [tuple(tuple(b[col[p]] for p in ins) for _, ins in objects) for b in blobs]
    weight = [w for w, _ in objects]
    per_probe = int(a.per_probe * 1000)
    full = sum(weight)

    # Groups: runs of commits whose every object compiles the same inputs.
    group_of, starts = [], []
    for i in range(len(commits)):
        if i == 0 or fp[i] != fp[i - 1]:
            starts.append(i)
        group_of.append(len(starts) - 1)
    g = len(starts) - 1  # groups 1..g can hold the culprit; group 0 is the good endpoint's
    gfp = [fp[s] for s in starts]

    # --- git bisect run over commits, the true model (every build so far counts: ccache) ---
    def git_run(culprit):
        lo, hi, seen, cost, seq = 0, n, [set() for _ in objects], 0, []
        while hi - lo > 1:
            x = lo + (hi - lo + 1) // 2  # git: the newer of two equal halves
            c = sum(w for o, w in enumerate(weight) if fp[x][o] not in seen[o])
            for o in range(len(objects)):
                seen[o].add(fp[x][o])
            cost += c + per_probe
            seq.append((commits[x][:8], c))
            if x >= culprit:
                hi = x
            else:
                lo = x
        return cost, seq

    culprits = [s for s in starts[1:]]
    git_costs = [git_run(c)[0] for c in culprits]
    git_mean = sum(git_costs) / len(git_costs)

    # --- lower bound: DP over group intervals, everything outside (l, r) counted as built ---
    first_idx, last_idx = [dict() for _ in objects], [dict() for _ in objects]
    for gi, f in enumerate(gfp):
        for o, v in enumerate(f):
            first_idx[o].setdefault(v, gi)
            last_idx[o][v] = gi

    def lb_cost(c, l, r):
        return per_probe + sum(w for o, w in enumerate(weight)
                               if not (first_idx[o][gfp[c][o]] <= l or last_idx[o][gfp[c][o]] >= r))

    sys.setrecursionlimit(100000)

    @lru_cache(maxsize=None)
    def expected(l, r):
        if r - l <= 1:
            return 0.0
        return min(lb_cost(c, l, r) + ((c - l) * expected(l, c) + (r - c) * expected(c, r)) / (r - l)
                   for c in range(l + 1, r))

    @lru_cache(maxsize=None)
    def worst(l, r):
        if r - l <= 1:
            return 0
        return min(lb_cost(c, l, r) + max(worst(l, c), worst(c, r)) for c in range(l + 1, r))

    @lru_cache(maxsize=None)
    def expected_within(l, r, d):
        """The relaxed optimum when at most d more probes may be spent on (l, r]."""
        if r - l <= 1:
            return 0.0
        if (r - l - 1).bit_length() > d:
            return float("inf")
        return min(lb_cost(c, l, r) + ((c - l) * expected_within(l, c, d - 1)
                   + (r - c) * expected_within(c, r, d - 1)) / (r - l) for c in range(l + 1, r))

    # src/core/search/costs.rs `budget`: the whole bisection within git's fewest probes
    # (floor(log2(commits))), one kept for an endpoint still untested, and at most one midpoint
    # more than an exact halving of the groups.
    git_fewest = n.bit_length() - 1
    halving = (g - 1).bit_length()

    def choose_planned(l, r, seen, made, mids, endpoint_open):
        """The tool now: the first probe (no model yet) is the middle; then the true cost now
        plus the relaxed optimum after, within the budget less the probes made."""
        if made == 0:
            return (l + r) // 2
        d = max(min(git_fewest - made - int(endpoint_open), halving + 1 - mids), (r - l - 1).bit_length())
        return min(range(l + 1, r), key=lambda c: (true_cost(c, seen) + per_probe
                   + ((c - l) * expected_within(l, c, d - 1) + (r - c) * expected_within(c, r, d - 1)) / (r - l),
                   abs(2 * c - l - r)))

    def choose_window(l, r, seen, made, mids, endpoint_open):
        """The tool's rule: among midpoints that add no step, the cheapest to build."""
        k = (r - l - 1).bit_length()  # steps left
        ok = [c for c in range(l + 1, r) if max(c - l, r - c) <= 1 << max(k - 1, 0)]
        return min(ok, key=lambda c: (true_cost(c, seen), abs(2 * c - l - r)))

    def true_cost(c, seen):
        return sum(w for o, w in enumerate(weight) if gfp[c][o] not in seen[o])

    # When `--bad` (group g) is built, with one slot (src/core/search.rs `EndpointCheck`):
    # "eager" right after an old first midpoint (the rule until issue 22), "priced" by
    # src/core/search/endpoint.rs `verify_bad_now` (mirrored below), "lazy" only when the
    # answer touches it. Every policy tests --bad when the answer touches it and --good when
    # the answer touches it; git trusts both.
    def verify_bad_now(groups, lo, open_, check, per_mid):
        if open_ == 0 or groups < 3:
            return True
        left = (groups - 1 - lo) / (groups - 1)
        q = a.lie_prior / (a.lie_prior + (1 - a.lie_prior) * left)
        touch = 1 / (open_ + 1)
        walk = (open_).bit_length() * per_mid  # ceil(log2(open + 1))
        return q * walk > check * (1 - (1 - q) * touch)

    def bad_now(policy, l, r, seen, made, first_old):
        if r != g:
            return False  # a new verdict inside: the fault reproduces in the range
        if policy == "eager":
            return first_old
        if policy == "priced" and made > 0 and l > 0:
            open_ = list(range(l + 1, r))
            per_mid = sum(true_cost(c, seen) + per_probe for c in open_) / max(len(open_), 1)
            return verify_bad_now(g + 1, l, len(open_), true_cost(g, seen) + per_probe, per_mid)
        return False

    def group_run(culprit_group, choose, policy="lazy"):
        """One bisection with the culprit in group `culprit_group` (g + 1: --bad lies, every
        verdict old). Returns (compile cost, probes, endpoint probes, lie reported)."""
        l, r, seen, cost, probes, mids, ends = 0, g, [set() for _ in objects], 0, 0, 0, 0
        bad_done = good_done = False
        first_old = False

        def probe(c):
            nonlocal cost, probes
            probes += 1
            cost += true_cost(c, seen) + per_probe
            for o in range(len(objects)):
                seen[o].add(gfp[c][o])

        while True:
            if not bad_done and (r - l <= 1 or bad_now(policy, l, r, seen, probes, first_old)):
                if r == g:
                    probe(g)
                    ends += 1
                    bad_done = True
                    if culprit_group > g:
                        return cost, probes, ends, True
                    first_old = False
                    continue
            if r - l <= 1:
                if l == 0 and not good_done:
                    probe(0)
                    ends += 1
                    good_done = True
                break
            c = choose(l, r, seen, probes, mids, not (bad_done and good_done))
            probe(c)
            mids += 1
            first_old = mids == 1 and c < culprit_group
            l, r = (l, c) if c >= culprit_group else (c, r)
        return cost, probes, ends, False

    policy = {}
    for name, ch, ep in (("cheapest now inside the no-extra-step window, --bad eager (third session)", choose_window, "eager"),
                         ("least expected build time, --bad eager (before issue 22)", choose_planned, "eager"),
                         ("least expected build time, --lazy-endpoints", choose_planned, "lazy"),
                         ("least expected build time, --bad priced (the tool now)", choose_planned, "priced")):
        runs = [group_run(cg, ch, ep) for cg in range(1, g + 1)]
        lie = group_run(g + 1, ch, ep)
        assert lie[3], name
        policy[name] = (sum(c for c, *_ in runs) / g, max(p for _, p, *_ in runs),
                        sum(p for _, p, *_ in runs) / g, sum(e for *_, e, _ in runs) / g, lie)

    lb_mean = min(full + per_probe + ((c * expected(0, c) + (g - c) * expected(c, g)) / g) for c in range(1, g))
    lb_worst = min(full + per_probe + max(worst(0, c), worst(c, g)) for c in range(1, g))

    print(f"range {commits[0][:8]}..{commits[-1][:8]}: {n} commits, {g} candidate groups, "
          f"{len(objects)} objects read {len(paths)} checkout files; full build {full / 1000:.1f} s "
          f"(one job at a time, no ccache, model build of {mid[:8]})")
    print(f"git bisect run, mean over the {len(culprits)} group starts: {git_mean / 1000:.1f} s compile "
          f"(min {min(git_costs) / 1000:.1f}, max {max(git_costs) / 1000:.1f})")
    print(f"lower bound, any exact search: mean {lb_mean / 1000:.1f} s ({lb_mean / git_mean:.2f}x git), "
          f"worst case {lb_worst / 1000:.1f} s ({lb_worst / max(git_costs):.2f}x git's worst)")
    eager = policy["least expected build time, --bad eager (before issue 22)"]
    for name, (mean, most, avg, ends, lie) in policy.items():
        print(f"policy {name}: mean {mean / 1000:.1f} s ({mean / git_mean:.2f}x git), "
              f"probes mean {avg:.2f}, max {most}, endpoint probes mean {ends:.2f}; "
              f"a lying --bad: {lie[1]} probes, {lie[0] / 1000:.1f} s")
        at = lambda p: (1 - p) * mean + p * lie[0]
        print("    expected at lying rate " + ", ".join(f"{p:.0%}: {at(p) / 1000:.1f} s ({at(p) / git_mean:.2f}x git)"
                                                   for p in (0.0, 0.05, 0.10, 0.20)))
        if (eager[4][0] - eager[0]) != (lie[0] - mean):
            # (1-p) mean + p lie = (1-p) eager_mean + p eager_lie
            p = (eager[0] - mean) / ((lie[0] - mean) - (eager[4][0] - eager[0]))
            print(f"    break-even lying rate against the eager check: {p:.0%}")
    wall, cpu, cores = open(os.path.join(out, "parallel-build")).read().split()
    used = float(cpu) / float(wall)
    print(f"a full build with Ninja's default -j on {cores} cores: {float(wall):.1f} s wall, "
          f"{float(cpu):.1f} s CPU, {used:.2f} cores busy")
    print(f"wall time of any exact search >= its CPU work / {cores} cores; git's wall ~ its CPU work / "
          f"{used:.2f}; so no strategy's mean wall is below {lb_mean / git_mean * used / int(cores):.2f}x "
          f"git's, even with every core busy through every build")
    if a.fix:
        fix = git(a.repo, "rev-parse", a.fix + "^{commit}").strip()
        if fix in commits:
            cost, seq = git_run(commits.index(fix))
            print(f"git for {fix[:8]}: {cost / 1000:.1f} s: " +
                  " ".join(f"{s}:{c / 1000:.1f}" for s, c in seq))
            tool, probes, ends, _ = group_run(group_of[commits.index(fix)], choose_planned, "priced")
            print(f"the tool now for {fix[:8]}: {tool / 1000:.1f} s ({tool / cost:.2f}x git's), "
                  f"{probes} probes ({ends} of an endpoint), git {len(seq)}")


if __name__ == "__main__":
    main()
