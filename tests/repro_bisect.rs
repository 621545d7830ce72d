//! The bundled reproducer through the real binary on a generated ggml history (issue 20): a
//! fault that starts only after 30,000 `set_rows` calls is found with default flags (the
//! default reproducer is the decode-reuse pattern); the replay's old 2,000-step run misses it,
//! and the contradicted `--bad` says what ran and what to try; a configuration that cannot run
//! here stops the bisection at its first probe (exit 3, nothing stored), while a commit that
//! cannot be tested stays a stored skip.
//!
//! CI has no ggml source tree, so each commit's "ggml" is a small tree whose CMakeLists.txt
//! hands over the prebuilt libggml-python ggml (its real headers and libraries), as in
//! tests/repro_prober.rs. The fault is real code in the tree from commit 5 on: it wraps
//! `ggml_backend_graph_compute` and, once 30,000 set_rows nodes have run (step 7,500 of the
//! replay's four buffers), leaves one wrong byte in each row set_rows writes.

mod common;

use common::{git, planted_fault, tools};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Commits of the history; the fault arrives in `FAULT_AT`, `BROKEN` has no ggml.h.
const COMMITS: usize = 8;
const FAULT_AT: usize = 5;
const BROKEN: usize = 2;

struct History {
    _tmp: tempfile::TempDir,
    repo: PathBuf,
    work: PathBuf,
    out: PathBuf,
    shas: Vec<String>,
}

fn ggml_dir() -> Option<PathBuf> {
    tools::require(
        std::env::var_os("SETROWS_GGML_DIR").map(PathBuf::from),
        "libggml-python (SETROWS_GGML_DIR)",
        "scripts/setup.d/20-ggml.sh",
    )
}

/// The shim's CMakeLists.txt, with the fault's source from `FAULT_AT` on.
fn cmake_lists(ggml: &Path, fault: bool) -> String {
    let mut t = format!(
        "cmake_minimum_required(VERSION 3.14)\nproject(ggml_shim C CXX)\n\
         set(CMAKE_FIND_PACKAGE_TARGETS_GLOBAL ON)\n\
         find_package(ggml REQUIRED PATHS \"{}\" NO_DEFAULT_PATH)\n\
         add_library(ggml INTERFACE)\ntarget_link_libraries(ggml INTERFACE ggml::ggml ${{CMAKE_DL_LIBS}})\n",
        ggml.display()
    );
    if fault {
        t.push_str(
            "target_sources(ggml INTERFACE \"${CMAKE_CURRENT_SOURCE_DIR}/src/fault.cpp\")\n",
        );
    }
    t
}

fn history() -> Option<History> {
    let ggml = ggml_dir()?;
    if !common::have_cmake() {
        return None;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let repo = tmp.path().join("repo");
    std::fs::create_dir_all(repo.join("include")).expect("mkdir");
    let include = ggml
        .ancestors()
        .nth(3)
        .expect("<prefix>/lib64/cmake/ggml")
        .join("include");
    let mut shas = Vec::new();
    git(&repo, &["init", "-q", "-b", "main"]);
    for i in 0..COMMITS {
        let headers = repo.join("include");
        if i == BROKEN {
            std::fs::remove_file(headers.join("ggml.h")).expect("break the tree");
        } else {
            for e in std::fs::read_dir(&include).expect("wheel include dir") {
                let e = e.expect("entry");
                std::fs::copy(e.path(), headers.join(e.file_name())).expect("copy header");
            }
        }
        if i == FAULT_AT {
            std::fs::create_dir_all(repo.join("src")).expect("mkdir src");
            std::fs::write(repo.join("src/fault.cpp"), planted_fault(30_000)).expect("fault");
        }
        std::fs::write(
            repo.join("CMakeLists.txt"),
            cmake_lists(&ggml, i >= FAULT_AT),
        )
        .expect("CMakeLists.txt");
        std::fs::write(repo.join("NOTES"), format!("revision {i}\n")).expect("notes");
        git(&repo, &["add", "-A"]);
        git(&repo, &["commit", "-q", "-m", &format!("revision {i}")]);
        shas.push(git(&repo, &["rev-parse", "HEAD"]));
    }
    Some(History {
        repo,
        work: tmp.path().join("work"),
        out: tmp.path().join("out"),
        shas,
        _tmp: tmp,
    })
}

impl History {
    /// `setrows-bisect --repo R --good 0 --bad last --work-dir W` and `extra`: nothing else.
    fn bisect(&self, extra: &[&str]) -> Output {
        std::fs::create_dir_all(&self.out).expect("out dir");
        Command::new(assert_cmd::cargo::cargo_bin("setrows-bisect"))
            .arg("--repo")
            .arg(&self.repo)
            .args(["--good", &self.shas[0], "--bad", &self.shas[COMMITS - 1]])
            .arg("--work-dir")
            .arg(&self.work)
            .args(extra)
            .env_remove("SETROWS_WORK_DIR")
            .env("GGML_NO_BACKTRACE", "1")
            .output()
            .expect("run setrows-bisect")
    }

    fn json(&self, name: &str) -> Value {
        let text = std::fs::read_to_string(self.out.join(name)).expect("result written");
        serde_json::from_str(&text).expect("valid json")
    }

    /// Stored run files and probe logs under the work dir's store.
    fn stored(&self) -> (usize, usize) {
        let count = |dir: PathBuf, ext: &str| {
            walk(&dir)
                .iter()
                .filter(|p| p.extension().is_some_and(|e| e == ext))
                .filter(|p| {
                    ext != "json"
                        || p.file_name()
                            .is_some_and(|n| n.to_string_lossy().starts_with("run-"))
                })
                .count()
        };
        (
            count(self.work.join("results"), "json"),
            count(self.work.join("logs"), "log"),
        )
    }
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

const DECODE_REUSE: [&str; 8] = [
    "--mode",
    "reuse",
    "--steps",
    "100000",
    "--ring-rows",
    "256",
    "--check-every",
    "1",
];

#[test]
fn default_flags_find_a_fault_that_starts_after_30000_set_rows() {
    let Some(h) = history() else { return };
    let dry = h.bisect(&["--dry-run"]);
    let dry_text = text(&dry);
    assert!(dry.status.success(), "{dry_text}");
    assert!(
        dry_text.contains(&format!(
            "reproducer: setrows-replay {}",
            DECODE_REUSE.join(" ")
        )),
        "--dry-run names the reproducer's arguments:\n{dry_text}"
    );
    assert!(
        dry_text.contains("100000 steps, checked every step"),
        "{dry_text}"
    );

    let out = h.bisect(&["--json", h.out.join("r.json").to_str().unwrap()]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(0), "{t}");
    let r = h.json("r.json");
    assert_eq!(r["first_bad"], h.shas[FAULT_AT].as_str(), "{t}");
    assert_eq!(r["reproducer"]["args"], serde_json::json!(DECODE_REUSE));
    let culprit = r["probes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["sha"] == h.shas[FAULT_AT].as_str())
        .expect("the culprit was probed");
    assert_eq!(culprit["outcome"], "wrong_result");
    let sig = culprit["signature"].as_str().unwrap_or_default();
    assert!(
        sig.starts_with("step=7500 "),
        "caught where it starts: {sig}"
    );
    assert!(
        t.contains(&format!("setrows-replay {}", DECODE_REUSE.join(" "))),
        "the report shows the reproducer:\n{t}"
    );
}

#[test]
fn a_short_run_misses_it_and_the_contradiction_says_what_ran_and_what_to_try() {
    let Some(h) = history() else { return };
    let json = h.out.join("short.json");
    let report = h.out.join("short.md");
    let out = h.bisect(&[
        "--repro-arg=--steps",
        "--repro-arg=2000",
        "--json",
        json.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
    ]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    let line = String::from_utf8_lossy(&out.stderr)
        .lines()
        .find(|l| l.contains("--bad") && l.contains("must show the new behaviour"))
        .map(str::to_string)
        .unwrap_or_else(|| panic!("no endpoint line:\n{t}"));
    for want in [
        "shows the old behaviour (pass)",
        "Ran: setrows-replay --mode reuse --ring-rows 256 --check-every 1 --steps 2000 (2000 steps, checked every step; arguments: --repro-arg)",
        "the default configuration (backend=cpu) on the host",
        "the default run: no --repro-arg",
        "--repro-arg=--steps --repro-arg=8000",
        "--config ID",
        "--repeat N",
        "--confidence",
    ] {
        assert!(line.contains(want), "{want:?} missing from: {line}");
    }
    let r = h.json("short.json");
    assert_eq!(r["schema"], "setrows-bisect/bisect/1");
    assert_eq!(r["conclusion"]["kind"], "bad_endpoint");
    let e = &r["endpoint"];
    assert!(e["ran"].as_str().unwrap().contains("2000 steps"), "{e}");
    let next: Vec<&str> = e["next"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(next.iter().any(|n| n.contains("--config ID")), "{next:?}");
    let md = std::fs::read_to_string(&report).expect("report written");
    assert!(md.contains("- ran: "), "{md}");
    assert!(md.contains("- try: a longer run:"), "{md}");
}

#[test]
fn a_configuration_that_cannot_run_stops_at_its_first_probe_and_stores_nothing() {
    let Some(h) = history() else { return };
    // As a flag, graphs on the CPU means nothing: refused before anything runs (exit 2).
    let flag = h.bisect(&["--graphs", "on", "--backend", "cpu"]);
    assert_eq!(flag.status.code(), Some(2), "{}", text(&flag));
    assert!(text(&flag).contains("--graphs on means nothing for --backend cpu"));
    assert_eq!(h.stored(), (0, 0));
    let m = h.out.join("cpu-graphs.toml");
    std::fs::write(
        &m,
        "[probe]\nkind = \"replay\"\n\n[matrix]\nbackend = [\"cpu\"]\ngraphs = [true]\n",
    )
    .expect("matrix file");
    let list = Command::new(assert_cmd::cargo::cargo_bin("setrows-bisect"))
        .args(["matrix", "--list", "--matrix"])
        .arg(&m)
        .output()
        .expect("matrix --list");
    let listed = String::from_utf8_lossy(&list.stdout).to_string();
    let id = listed
        .split_whitespace()
        .next()
        .expect("one configuration")
        .to_string();
    let m = m.to_string_lossy().to_string();
    let args = [
        "--matrix",
        &m,
        "--config",
        &id,
        "--repro-arg=--steps",
        "--repro-arg=50",
    ];
    // A configuration file asking it is refused by the same rule, before anything runs.
    let out = h.bisect(&args);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(2), "{t}");
    let errors: Vec<&str> = t.lines().filter(|l| l.contains("error:")).collect();
    assert_eq!(errors.len(), 1, "one line:\n{t}");
    let config = format!("--config {id}");
    for want in [
        config.as_str(),
        "--graphs on means nothing for --backend cpu",
    ] {
        assert!(
            errors[0].contains(want),
            "{want:?} missing from: {}",
            errors[0]
        );
    }
    assert_eq!(h.stored(), (0, 0), "nothing ran, nothing was stored");
}

#[test]
fn a_commit_that_cannot_be_tested_stays_a_stored_skip() {
    let Some(h) = history() else { return };
    let out = h.bisect(&[
        "--probe",
        &h.shas[BROKEN],
        "--repro-arg=--steps",
        "--repro-arg=50",
    ]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(0), "{t}");
    let v: Value = serde_json::from_slice(&out.stdout).expect("probe json");
    assert_eq!(v["outcome"], "untestable", "{t}");
    assert_eq!(
        h.stored().0,
        1,
        "a commit's own reason is its stored result"
    );
}

/// The matrix keeps going past a configuration that cannot run here: that cell is `untestable`
/// with the reason and its build reported, the other cell runs, and a second run tests the
/// systematic cell again (it was not stored) while the other is answered from the store.
#[test]
fn a_matrix_cell_that_cannot_run_is_untestable_and_not_stored() {
    let Some(h) = history() else { return };
    let conf = h.out.join("matrix.toml");
    std::fs::create_dir_all(&h.out).expect("out dir");
    std::fs::write(
        &conf,
        "[probe]\nkind = \"replay\"\n[matrix]\nbackend = [\"cpu\"]\ngraphs = [true, false]\n\
         params = [\"short\"]\n[params.short]\nargs = [\"--steps\", \"50\"]\n",
    )
    .expect("matrix.toml");
    let run = || {
        let out = Command::new(assert_cmd::cargo::cargo_bin("setrows-bisect"))
            .args(["matrix", "--engine", "none", "--rev", &h.shas[0]])
            .arg("--config")
            .arg(&conf)
            .arg("--repo")
            .arg(&h.repo)
            .arg("--out")
            .arg(h.out.join("m"))
            .env("SETROWS_WORK_DIR", &h.work)
            .env("GGML_NO_BACKTRACE", "1")
            .output()
            .expect("run setrows-bisect matrix");
        assert!(out.status.success(), "{}", text(&out));
        let doc = std::fs::read_to_string(h.out.join("m/matrix-results.json")).expect("results");
        let r: Value = serde_json::from_str(&doc).expect("json");
        let cell = |graphs: bool| {
            let id = r["configs"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| {
                    c["label"]
                        .as_str()
                        .is_some_and(|l| l.contains(&format!("graphs={graphs}")))
                })
                .and_then(|c| c["id"].as_str())
                .expect("config")
                .to_string();
            r["cells"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["config"] == id.as_str())
                .cloned()
                .expect("cell")
        };
        (cell(true), cell(false))
    };
    let (on, off) = run();
    assert_eq!(on["outcome"], "untestable", "{on:#}");
    assert!(
        on["signature"]
            .as_str()
            .is_some_and(|s| s.contains("CPU backend has no graphs")),
        "{on:#}"
    );
    assert!(on["build_s"].as_f64().unwrap() > 0.0, "{on:#}");
    let md = std::fs::read_to_string(h.out.join("m/matrix-results.md")).expect("markdown");
    assert!(md.contains("CPU backend has no graphs"), "{md}");
    assert_eq!(off["outcome"], "pass", "{off:#}");
    let (on, off) = run();
    assert_eq!(
        on["cached"], false,
        "the systematic cell runs again: {on:#}"
    );
    assert_eq!(on["outcome"], "untestable");
    assert_eq!(off["cached"], true, "{off:#}");
}
