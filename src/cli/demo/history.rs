//! Generates a small but real git history: a C ring-buffer library (the `ggml_set_rows` access
//! pattern) with a CMake build and a test program, a few hundred commits long, with a
//! behaviour change planted at one commit, optionally a fix later, a range where the build is
//! broken, and an unrelated failure (for `--match`). Commits are written straight into the
//! object database with git2, so hundreds of commits take well under a second; dates and
//! authors are fixed, so the same spec always gives the same shas.

use git2::{Repository, Signature, Time};
use std::collections::BTreeMap;
use std::path::Path;

const RINGBUF_H: &str = include_str!("ringbuf.h");
const RINGBUF_C: &str = include_str!("ringbuf.c.in");
const TEST_C: &str = include_str!("test_ringbuf.c");

const WRAP_GOOD: &str = "((pos % rb->n_rows) + rb->n_rows) % rb->n_rows";
/// The planted regression: a "faster" wrap that is only right for power-of-two rings.
const WRAP_BAD: &str = "pos & (rb->n_rows - 1)";
/// The broken-build range: a tuning constant used before the header defining it landed.
const BROKEN: &str = "static const int rb_tuning = RB_TUNING_DEFAULT;\n";

/// Where the library lives in the tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// `src/`, `include/`, `tests/` at the top.
    Flat,
    /// llama.cpp's shape: the library under `ggml/` (with `ggml/src`, `ggml/include`), an
    /// application `src/llama.cpp` on top; most commits do not touch `ggml/`.
    LlamaCpp,
}

#[derive(Debug, Clone)]
pub struct HistorySpec {
    /// Number of commits (commit 0 is the initial import).
    pub commits: usize,
    /// Picks filler changes and authors.
    pub seed: u64,
    /// First commit with the wrong wrap.
    pub bug_at: usize,
    /// First commit where the wrap is right again.
    pub fix_at: Option<usize>,
    /// The build fails for commits in `[start, end)`.
    pub broken: Option<(usize, usize)>,
    /// From this commit on, the write counter is off (a different failure signature).
    pub unrelated_at: Option<usize>,
    pub layout: Layout,
}

/// xorshift64*: small, deterministic, no dependency.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

impl HistorySpec {
    /// The demo's history: the planted change somewhere in the middle half, chosen by the seed,
    /// and a broken-build range elsewhere.
    pub fn from_seed(seed: u64, commits: usize) -> Self {
        let commits = commits.max(40);
        let mut rng = Rng::new(seed);
        let q = commits / 4;
        let bug_at = q + rng.below((2 * q) as u64) as usize;
        let len = 6 + rng.below(6) as usize;
        // The broken range sits well before or after the change, never touching it.
        let start = if rng.below(2) == 0 && bug_at > len + 12 {
            4 + rng.below((bug_at - len - 10) as u64) as usize
        } else {
            let lo = bug_at + 4;
            lo + rng.below((commits - lo - len - 2).max(1) as u64) as usize
        };
        HistorySpec {
            commits,
            seed,
            bug_at,
            fix_at: None,
            broken: Some((start, start + len)),
            unrelated_at: None,
            layout: Layout::Flat,
        }
    }

    fn is_bad(&self, i: usize) -> bool {
        let before_fix = match self.fix_at {
            Some(f) => i < f,
            None => true,
        };
        i >= self.bug_at && before_fix
    }

    fn lib_prefix(&self) -> &'static str {
        match self.layout {
            Layout::Flat => "",
            Layout::LlamaCpp => "ggml/",
        }
    }
}

/// The generated repository.
#[derive(Debug, Clone)]
pub struct History {
    /// `shas[i]` is commit i; `shas[0]` the initial import, the last one `main`'s tip.
    pub shas: Vec<String>,
}

const AUTHORS: &[(&str, &str)] = &[
    ("Ada Ring", "ada@example.org"),
    ("Bo Buffer", "bo@example.org"),
    ("Cy Index", "cy@example.org"),
    ("Di Kernel", "di@example.org"),
];

fn cmake_files(spec: &HistorySpec, files: &mut BTreeMap<String, String>) {
    let lib = "add_library(ringbuf STATIC src/ringbuf.c)\ntarget_include_directories(ringbuf PUBLIC include)\n";
    let test = "add_executable(ringbuf_test tests/test_ringbuf.c)\ntarget_link_libraries(ringbuf_test PRIVATE ringbuf)\n";
    let head = "cmake_minimum_required(VERSION 3.13)\nproject(ringbuf C)\n";
    match spec.layout {
        Layout::Flat => {
            files.insert("CMakeLists.txt".into(), format!("{head}{lib}{test}"));
        }
        Layout::LlamaCpp => {
            files.insert(
                "CMakeLists.txt".into(),
                format!("{head}add_subdirectory(ggml)\n{test}"),
            );
            files.insert("ggml/CMakeLists.txt".into(), lib.into());
            files.insert(
                "src/llama.cpp".into(),
                "// The application layer; the demo test does not build it.\n".into(),
            );
        }
    }
}

fn library_source(spec: &HistorySpec, i: usize) -> String {
    RINGBUF_C
        .replace(
            "/*@WRAP@*/",
            if spec.is_bad(i) { WRAP_BAD } else { WRAP_GOOD },
        )
        .replace(
            "/*@BROKEN@*/\n",
            if spec.broken.is_some_and(|(a, b)| i >= a && i < b) {
                BROKEN
            } else {
                ""
            },
        )
        .replace(
            "/*@WRITES@*/",
            if spec.unrelated_at.is_some_and(|u| i >= u) {
                "(uint64_t)n + 1"
            } else {
                "(uint64_t)n"
            },
        )
}

/// What commit `i` is about (the special commits get titles a maintainer might write).
fn title(spec: &HistorySpec, i: usize, filler: u64, seq: usize) -> String {
    if i == 0 {
        return "ringbuf: initial import".into();
    }
    if i == spec.bug_at {
        return "ringbuf: speed up index wrap".into();
    }
    if spec.fix_at == Some(i) {
        return "ringbuf: restore modulo wrap for non power-of-two rings".into();
    }
    if let Some((a, b)) = spec.broken {
        if i == a {
            return "ringbuf: add tuning knob".into();
        }
        if i == b {
            return "ringbuf: define RB_TUNING_DEFAULT".into();
        }
    }
    if spec.unrelated_at == Some(i) {
        return "ringbuf: count writes including flushes".into();
    }
    match (spec.layout, filler) {
        (Layout::LlamaCpp, 0 | 1) => format!("llama: refactor sampling step {seq}"),
        (_, 0) => format!("docs: changelog entry {seq}"),
        (_, 1) => format!("tests: clarify comment {seq}"),
        _ => format!("build: bump build sequence to {seq}"),
    }
}

/// Writes the history into a new repository at `dir` (created; must not hold a repository)
/// and checks out its tip on branch `main`.
pub fn generate(dir: &Path, spec: &HistorySpec) -> Result<History, git2::Error> {
    std::fs::create_dir_all(dir)
        .map_err(|e| git2::Error::from_str(&format!("{}: {e}", dir.display())))?;
    let mut opts = git2::RepositoryInitOptions::new();
    opts.initial_head("main");
    let repo = Repository::init_opts(dir, &opts)?;
    let mut rng = Rng::new(spec.seed ^ 0x5eed);
    let lib = spec.lib_prefix();
    let mut files: BTreeMap<String, String> = BTreeMap::new();
    cmake_files(spec, &mut files);
    files.insert(format!("{lib}include/ringbuf.h"), RINGBUF_H.into());
    files.insert("tests/test_ringbuf.c".into(), TEST_C.into());
    files.insert(
        "README.md".into(),
        "# ringbuf\n\nA ring of rows written by index.\n".into(),
    );
    files.insert("docs/CHANGELOG.md".into(), "# Changelog\n".into());
    let mut build_seq = 0usize;
    let mut parent: Option<git2::Oid> = None;
    let mut shas = Vec::with_capacity(spec.commits);
    let base_time = 1_700_000_000i64;
    for i in 0..spec.commits {
        let filler = rng.below(3);
        if i > 0 {
            match (spec.layout, filler) {
                (Layout::LlamaCpp, 0 | 1) => {
                    let e = files.entry("src/llama.cpp".into()).or_default();
                    e.push_str(&format!("// step {i}\n"));
                }
                (_, 0) => {
                    let e = files.entry("docs/CHANGELOG.md".into()).or_default();
                    e.push_str(&format!("- change {i}\n"));
                }
                (_, 1) => {
                    let t = files.entry("tests/test_ringbuf.c".into()).or_default();
                    t.push_str(&format!("/* reviewed in change {i} */\n"));
                }
                _ => build_seq += 1,
            }
        }
        files.insert(
            format!("{lib}src/build_info.h"),
            format!("#define RB_BUILD_SEQ {build_seq}\n"),
        );
        files.insert(format!("{lib}src/ringbuf.c"), library_source(spec, i));
        let tree_id = write_tree(&repo, &files, "")?;
        let tree = repo.find_tree(tree_id)?;
        let (name, email) = AUTHORS[rng.below(AUTHORS.len() as u64) as usize];
        let sig = Signature::new(name, email, &Time::new(base_time + 3600 * i as i64, 0))?;
        let seq = match filler {
            2 => build_seq,
            _ => i,
        };
        let msg = format!("{}\n", title(spec, i, filler, seq));
        let parents: Vec<git2::Commit<'_>> = match parent {
            Some(p) => vec![repo.find_commit(p)?],
            None => vec![],
        };
        let refs: Vec<&git2::Commit<'_>> = parents.iter().collect();
        let id = repo.commit(Some("HEAD"), &sig, &sig, &msg, &tree, &refs)?;
        parent = Some(id);
        shas.push(id.to_string());
    }
    let mut co = git2::build::CheckoutBuilder::new();
    co.force();
    repo.checkout_head(Some(&mut co))?;
    Ok(History { shas })
}

/// Writes the files under `prefix` as a tree (blobs and subtrees), returning its id.
fn write_tree(
    repo: &Repository,
    files: &BTreeMap<String, String>,
    prefix: &str,
) -> Result<git2::Oid, git2::Error> {
    let mut tb = repo.treebuilder(None)?;
    let mut subdirs: Vec<&str> = Vec::new();
    for (path, content) in files.range(prefix.to_string()..) {
        let Some(rest) = path.strip_prefix(prefix) else {
            break;
        };
        match rest.split_once('/') {
            None => {
                let blob = repo.blob(content.as_bytes())?;
                tb.insert(rest, blob, 0o100644)?;
            }
            Some((dir, _)) => {
                if subdirs.last() != Some(&dir) {
                    subdirs.push(dir);
                }
            }
        }
    }
    for dir in subdirs {
        let sub = write_tree(repo, files, &format!("{prefix}{dir}/"))?;
        tb.insert(dir, sub, 0o040000)?;
    }
    tb.write()
}
