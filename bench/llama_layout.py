#!/usr/bin/env python3
"""A llama.cpp-layout history made of real ggml commits, for bench/ggml_vs_git.sh.

    bench/llama_layout.py GGML_GIT_DIR GOOD BAD OUT [LLAMA_PER_GGML]

Every first-parent ggml commit in GOOD..BAD (GOOD included, as the root) becomes a commit whose
tree is llama.cpp's shape: the real ggml tree under ggml/, plus a root CMakeLists.txt and
llama-side files (src/llama*.cpp, common/, tools/). Between two ggml commits come 0..2*K
llama-only commits (K = LLAMA_PER_GGML, default 2: a third of the commits touch ggml/, the
rest src/, common/ or tools/), chosen by a fixed seed so every run builds the same history.
The project never ships ggml code: the trees are read from the caller's own clone (OUT uses
it as an alternate object store, then repacks so OUT stands alone).
"""
import os, random, subprocess, sys

mirror, good, bad, out = sys.argv[1:5]
k = int(sys.argv[5]) if len(sys.argv) > 5 else 2
rng = random.Random(13)

def git(*args, inp=None, cwd=out):
    r = subprocess.run(["git", *args], cwd=cwd, input=inp, capture_output=True, text=True, check=True)
    return r.stdout.strip()

os.makedirs(out)
git("init", "-q", "-b", "master")
objects = git("rev-parse", "--git-path", "objects", cwd=mirror)
objects = os.path.join(mirror, objects) if not os.path.isabs(objects) else objects
with open(os.path.join(out, ".git/objects/info/alternates"), "w") as f:
    f.write(os.path.abspath(objects) + "\n")

revs = [git("rev-parse", good + "^{commit}", cwd=mirror)]
revs += git("rev-list", "--first-parent", "--reverse", f"{good}..{bad}", cwd=mirror).split()

def blob(text):
    return git("hash-object", "-w", "--stdin", inp=text)

def tree(entries):
    lines = "".join(f"{mode} {kind} {sha}\t{name}\n" for name, (mode, kind, sha) in sorted(entries.items()))
    return git("mktree", inp=lines)

llama = {
    "src": {"llama.cpp": "// llama\n", "llama-model.cpp": "// model\n", "llama-vocab.cpp": "// vocab\n"},
    "common": {"common.cpp": "// common\n", "arg.cpp": "// args\n"},
    "tools": {"server.cpp": "// server\n", "cli.cpp": "// cli\n"},
}
root_cmake = blob("cmake_minimum_required(VERSION 3.14)\nproject(llama.cpp C CXX)\nadd_subdirectory(ggml)\n")
n_llama = 0

def commit(ggml_commit, msg, parent, date):
    ggml_tree = git("rev-parse", ggml_commit + "^{tree}", cwd=mirror)
    entries = {"CMakeLists.txt": ("100644", "blob", root_cmake), "ggml": ("040000", "tree", ggml_tree)}
    for d, files in llama.items():
        entries[d] = ("040000", "tree", tree({n: ("100644", "blob", blob(t)) for n, t in files.items()}))
    env = dict(os.environ, GIT_AUTHOR_NAME="bench", GIT_AUTHOR_EMAIL="bench@localhost",
               GIT_COMMITTER_NAME="bench", GIT_COMMITTER_EMAIL="bench@localhost",
               GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date)
    args = ["git", "commit-tree", tree(entries), "-m", msg] + (["-p", parent] if parent else [])
    return subprocess.run(args, cwd=out, env=env, capture_output=True, text=True, check=True).stdout.strip()

head = None
for n, rev in enumerate(revs):
    subject = git("log", "-1", "--format=%s", rev, cwd=mirror)
    date = git("log", "-1", "--format=%cI", rev, cwd=mirror)
    head = commit(rev, f"{subject}\n\nggml-org/ggml {rev}", head, date)
    if n == len(revs) - 1:
        break
    for _ in range(rng.randint(0, 2 * k)):
        d = rng.choice(sorted(llama))
        f = rng.choice(sorted(llama[d]))
        n_llama += 1
        llama[d][f] += f"// change {n_llama}\n"
        head = commit(rev, f"{d}: change {n_llama} in {f}", head, date)
git("update-ref", "refs/heads/master", head)
git("reset", "-q", "--hard", "master")
git("repack", "-a", "-d", "-q")
os.remove(os.path.join(out, ".git/objects/info/alternates"))
total = int(git("rev-list", "--count", "master"))
print(f"{out}: {total} commits ({len(revs)} with a ggml tree, {n_llama} llama-only); good = root, bad = master")
