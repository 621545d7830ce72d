//! Shared helpers for the bisect integration tests: real repositories from the demo's generator
//! (real C code, real CMake builds), the real binary, and a check that the tools exist.
#![allow(dead_code)]

#[path = "../tools/mod.rs"]
pub mod tools;

pub mod llama;

use assert_cmd::Command;
pub use setrows_bisect::cli::demo::history::{generate, History, HistorySpec, Layout};
use std::path::{Path, PathBuf};

/// True when cmake is available (the rule in tests/tools: required under CI).
pub fn have_cmake() -> bool {
    tools::require(
        setrows_bisect::probe::exec::which("cmake"),
        "cmake",
        "scripts/setup.d/00-base.sh",
    )
    .is_some()
}

/// True when cmake and ninja are available (the same rule: required under CI).
pub fn have_ninja() -> bool {
    have_cmake()
        && tools::require(
            setrows_bisect::probe::exec::which("ninja"),
            "ninja",
            "scripts/setup.d/00-base.sh",
        )
        .is_some()
}

pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub history: History,
}

impl Fixture {
    pub fn new(spec: &HistorySpec) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let history = generate(&dir.path().join("repo"), spec).expect("generate history");
        Fixture { dir, history }
    }
    pub fn repo(&self) -> PathBuf {
        self.dir.path().join("repo")
    }
    pub fn work(&self) -> PathBuf {
        self.dir.path().join("work")
    }
    pub fn sha(&self, i: usize) -> &str {
        &self.history.shas[i]
    }
    pub fn json_path(&self) -> PathBuf {
        self.dir.path().join("result.json")
    }
    /// `setrows-bisect` with repo, endpoints, the demo's build and test, work dir and --json set.
    pub fn bisect(&self, good: usize, bad: usize) -> Command {
        Command::from_std(self.bisect_std(good, bad))
    }
    /// The same as a plain `std::process::Command` (for spawning and killing).
    pub fn bisect_std(&self, good: usize, bad: usize) -> std::process::Command {
        self.bisect_script(good, bad, setrows_bisect::cli::demo::TEST_COMMAND)
    }
    /// With a different `--script`.
    pub fn bisect_script(&self, good: usize, bad: usize, script: &str) -> std::process::Command {
        let mut c = self.bisect_raw(&self.repo(), self.sha(good), self.sha(bad), &self.work());
        let args: Vec<std::ffi::OsString> = c.get_args().map(|a| a.to_owned()).collect();
        let mut fresh = std::process::Command::new(c.get_program());
        let mut it = args.into_iter();
        while let Some(a) = it.next() {
            if a == "--script" {
                it.next();
                fresh.arg("--script").arg(script);
            } else {
                fresh.arg(a);
            }
        }
        c = fresh;
        c.env_remove("SETROWS_WORK_DIR");
        c
    }
    /// With any repo path, revision strings and work dir (for bad inputs).
    pub fn bisect_raw(
        &self,
        repo: &Path,
        good: &str,
        bad: &str,
        work: &Path,
    ) -> std::process::Command {
        let mut c = std::process::Command::new(assert_cmd::cargo::cargo_bin("setrows-bisect"));
        c.arg("--repo")
            .arg(repo)
            .args(["--good", good, "--bad", bad])
            .arg("--build")
            .arg(setrows_bisect::cli::demo::build_command())
            .arg("--script")
            .arg(setrows_bisect::cli::demo::TEST_COMMAND)
            .arg("--work-dir")
            .arg(work)
            .arg("--json")
            .arg(self.json_path())
            .env_remove("SETROWS_WORK_DIR");
        c
    }
    pub fn result(&self) -> serde_json::Value {
        read_json(&self.json_path())
    }
}

pub fn read_json(p: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(p).expect("json result written");
    serde_json::from_str(&text).expect("valid json")
}

pub fn spec(commits: usize, bug_at: usize) -> HistorySpec {
    HistorySpec {
        commits,
        seed: 11,
        bug_at,
        fix_at: None,
        broken: None,
        unrelated_at: None,
        layout: Layout::Flat,
    }
}

/// `git ARGS` in `dir` with a fixed identity; panics on failure; the trimmed stdout.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@e")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@e")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// The source of a planted set_rows fault, real code a generated tree builds into its "ggml":
/// it wraps `ggml_backend_graph_compute` and, once `after` set_rows nodes have run, leaves one
/// wrong byte in each row a later set_rows writes (the report's "after many reuses").
pub fn planted_fault(after: u64) -> String {
    PLANTED_FAULT.replace("{AFTER}", &after.to_string())
}

const PLANTED_FAULT: &str = r#"// A planted fault: after {AFTER} set_rows nodes have been computed, each later set_rows leaves
// one wrong byte in the row it wrote (the pattern "after many reuses" of the upstream report).
#include "ggml.h"
#include "ggml-backend.h"
#include <dlfcn.h>
#include <cstdint>
#include <utility>
#include <vector>

extern "C" enum ggml_status ggml_backend_graph_compute(ggml_backend_t backend, struct ggml_cgraph * graph) {
    using compute_fn = enum ggml_status (*)(ggml_backend_t, struct ggml_cgraph *);
    static const compute_fn real = (compute_fn) dlsym(RTLD_NEXT, "ggml_backend_graph_compute");
    static long long set_rows = 0;
    // the rows written, read before the graph runs (its allocator may reuse the index memory)
    std::vector<std::pair<struct ggml_tensor *, int64_t>> written;
    for (int i = 0; i < ggml_graph_n_nodes(graph); i++) {
        struct ggml_tensor * t = ggml_graph_node(graph, i);
        if (t->op != GGML_OP_SET_ROWS || ++set_rows <= {AFTER}) {
            continue;
        }
        int64_t row = 0;
        if (t->src[1]->type == GGML_TYPE_I32) {
            int32_t r = 0;
            ggml_backend_tensor_get(t->src[1], &r, 0, sizeof(r));
            row = r;
        } else {
            ggml_backend_tensor_get(t->src[1], &row, 0, sizeof(row));
        }
        written.emplace_back(t, row);
    }
    const enum ggml_status status = real(backend, graph);
    for (auto & [t, row] : written) {
        unsigned char byte = 0;
        const size_t at = (size_t) row * t->nb[1];
        ggml_backend_tensor_get(t, &byte, at, 1);
        byte ^= 0x40;
        ggml_backend_tensor_set(t, &byte, at, 1);
    }
    return status;
}
"#;
