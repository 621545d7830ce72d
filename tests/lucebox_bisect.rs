//! lucebox as a target (issue 26), through the real binary with default flags (the bundled
//! reproducer, the CPU, a real ggml from the environment), on a generated history shaped like
//! lucebox's: ggml vendored at `server/deps/llama.cpp/ggml` beside a `VENDOR.md`, application
//! commits between ggml commits, a data file elsewhere.
//!
//! Where both work, the bisection (which writes only ggml's directory and its note) and
//! whole-tree checkouts (the matrix's, of the culprit and its parent) agree; with the data
//! file's blob deleted from the object store, as the lucebox snapshot lacks one, a whole-tree
//! checkout stops at the first commit and the bisection still finds the culprit. The fork is
//! named in the result's provenance from its `VENDOR.md`.
//!
//! CI has no ggml source tree: the vendored "ggml" is a small CMake project handing over the
//! prebuilt libggml-python ggml (as in tests/repro_bisect.rs), and the fault is real code in
//! it from `FAULT_AT` on: every set_rows after the 400th leaves one wrong byte in its row.

mod common;
mod lucebox_history;

use common::{planted_fault, tools};
use lucebox_history::{build, History, Step, DATA, FORK, GGML};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// good = 1 (the vendoring commit), bad = last; ggml classes {1,2} {3,4} {5,6} {7,8}, as the
/// four candidates of lucebox ad69d12d..53859c26.
const STEPS: [Step; 9] = [
    Step::Start,
    Step::Vendor,
    Step::App,
    Step::Ggml,
    Step::App,
    Step::Fault,
    Step::App,
    Step::GgmlAndNote,
    Step::App,
];
const GOOD: usize = 1;
const FAULT_AT: usize = 5;

fn ggml_cmake_dir() -> Option<PathBuf> {
    tools::require(
        std::env::var_os("SETROWS_GGML_DIR").map(PathBuf::from),
        "libggml-python (SETROWS_GGML_DIR)",
        "scripts/setup.d/20-ggml.sh",
    )
}

/// The vendored ggml at step `n`: the wheel's headers, a CMakeLists.txt handing over its
/// libraries, a source note that changes each ggml step, the fault once it arrived.
fn shim(cmake_dir: &Path) -> impl Fn(&Path, usize, bool) + '_ {
    move |dir: &Path, n: usize, fault: bool| {
        let include = cmake_dir
            .ancestors()
            .nth(3)
            .expect("<prefix>/lib64/cmake/ggml")
            .join("include");
        std::fs::create_dir_all(dir.join("include")).unwrap();
        std::fs::create_dir_all(dir.join("src")).unwrap();
        for e in std::fs::read_dir(&include).expect("wheel include dir") {
            let e = e.unwrap();
            std::fs::copy(e.path(), dir.join("include").join(e.file_name())).unwrap();
        }
        let mut cmake = format!(
            "cmake_minimum_required(VERSION 3.14)\nproject(ggml_shim C CXX)\n\
             set(CMAKE_FIND_PACKAGE_TARGETS_GLOBAL ON)\n\
             find_package(ggml REQUIRED PATHS \"{}\" NO_DEFAULT_PATH)\n\
             add_library(ggml INTERFACE)\ntarget_link_libraries(ggml INTERFACE ggml::ggml ${{CMAKE_DL_LIBS}})\n",
            cmake_dir.display()
        );
        if fault {
            std::fs::write(dir.join("src/fault.cpp"), planted_fault(400)).unwrap();
            cmake.push_str(
                "target_sources(ggml INTERFACE \"${CMAKE_CURRENT_SOURCE_DIR}/src/fault.cpp\")\n",
            );
        }
        std::fs::write(dir.join("CMakeLists.txt"), cmake).unwrap();
        std::fs::write(dir.join("src/NOTES"), format!("ggml at step {n}\n")).unwrap();
    }
}

fn history(root: &Path) -> Option<History> {
    let cmake_dir = ggml_cmake_dir()?;
    if !common::have_cmake() {
        return None;
    }
    let ggml = shim(&cmake_dir);
    let h = build(&root.join("repo"), &STEPS, &ggml);
    Some(h)
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `setrows-bisect --good 1 --bad last --work-dir W --json J`: default flags otherwise.
fn bisect(h: &History, work: &Path, json: &Path) -> Output {
    Command::new(assert_cmd::cargo::cargo_bin("setrows-bisect"))
        .arg("--repo")
        .arg(&h.repo)
        .args(["--good", &h.shas[GOOD], "--bad", h.shas.last().unwrap()])
        .arg("--work-dir")
        .arg(work)
        .arg("--json")
        .arg(json)
        .env_remove("SETROWS_WORK_DIR")
        .env("GGML_NO_BACKTRACE", "1")
        .output()
        .expect("run setrows-bisect")
}

/// `setrows-bisect matrix` of one CPU cell running `args` at `revs`: whole-tree checkouts.
fn matrix(h: &History, root: &Path, name: &str, args: &Value, revs: &[&str]) -> (Output, PathBuf) {
    let conf = root.join("matrix.toml");
    std::fs::write(
        &conf,
        format!(
            "[probe]\nkind = \"replay\"\n[matrix]\nbackend = [\"cpu\"]\nparams = [\"same\"]\n\
             [params.same]\nargs = {args}\n"
        ),
    )
    .unwrap();
    let out_dir = root.join(format!("{name}-out"));
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("setrows-bisect"));
    cmd.args(["matrix", "--engine", "none"])
        .arg("--config")
        .arg(&conf)
        .arg("--repo")
        .arg(&h.repo)
        .arg("--out")
        .arg(&out_dir)
        .env("SETROWS_WORK_DIR", root.join(name))
        .env("GGML_NO_BACKTRACE", "1");
    for r in revs {
        cmd.args(["--rev", r]);
    }
    (cmd.output().expect("run setrows-bisect matrix"), out_dir)
}

fn read_json(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).expect("written")).expect("json")
}

/// Every file under the bisection's checkout slots (relative to each slot's `src`).
fn checked_out(work: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![work.join("checkouts")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Some((_, rel)) = p.to_string_lossy().split_once("/src/") {
                out.push(rel.to_string());
            }
        }
    }
    out
}

#[test]
fn a_lucebox_bisect_writes_only_ggml_agrees_with_whole_trees_and_survives_a_missing_blob() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(h) = history(tmp.path()) else { return };

    // Both work: the bisection's answer, and whole-tree probes of the culprit and its parent.
    let json = tmp.path().join("r.json");
    let out = bisect(&h, &tmp.path().join("work"), &json);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(0), "{t}");
    assert!(t.contains("lucebox layout detected"), "{t}");
    let r = read_json(&json);
    assert_eq!(r["first_bad"], h.shas[FAULT_AT].as_str(), "{t}");
    assert_eq!(
        r["range"]["candidates"].as_u64(),
        Some(4),
        "{:#}",
        r["range"]
    );
    assert_eq!(r["range"]["path"], GGML);
    assert_eq!(
        r["provenance"]["ggml_vendor"], FORK,
        "{:#}",
        r["provenance"]
    );
    assert!(
        t.contains(&format!("vendored ggml (VENDOR.md) `{FORK}`")),
        "the report names the fork: {t}"
    );
    let files = checked_out(&tmp.path().join("work"));
    assert!(files.iter().any(|f| f.starts_with(GGML)), "{files:?}");
    assert!(
        files
            .iter()
            .all(|f| f.starts_with("server/deps/llama.cpp/ggml/")
                || f == "server/deps/llama.cpp/VENDOR.md"),
        "only ggml and its note were written: {files:?}"
    );
    let probe = |sha: &str| {
        r["probes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["sha"] == sha)
            .cloned()
            .unwrap_or_else(|| panic!("{sha} probed: {r:#}"))
    };
    let culprit = probe(&h.shas[FAULT_AT]);
    assert_eq!(culprit["outcome"], "wrong_result");
    let parent = &h.shas[FAULT_AT - 1];
    let (m, m_dir) = matrix(
        &h,
        tmp.path(),
        "whole",
        &r["reproducer"]["args"],
        &[&h.shas[FAULT_AT], parent],
    );
    assert!(m.status.code().is_some(), "{}", text(&m));
    let cells = read_json(&m_dir.join("matrix-results.json"))["cells"].clone();
    let cell = |sha: &str| {
        cells
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["sha"] == sha)
            .cloned()
            .unwrap_or_else(|| panic!("cell of {sha}: {cells:#}"))
    };
    let whole_culprit = cell(&h.shas[FAULT_AT]);
    assert_eq!(
        whole_culprit["outcome"], culprit["outcome"],
        "{whole_culprit:#}"
    );
    assert_eq!(whole_culprit["signature"], culprit["signature"]);
    assert_eq!(cell(parent)["outcome"], "pass");
    let whole_files: Vec<String> = {
        let mut v = Vec::new();
        let mut stack = vec![tmp.path().join("whole/matrix/src")];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                if e.path().is_dir() {
                    stack.push(e.path());
                } else {
                    v.push(e.path().to_string_lossy().into_owned());
                }
            }
        }
        v
    };
    assert!(
        whole_files.iter().any(|f| f.ends_with(DATA)),
        "the matrix's checkout is the whole tree"
    );

    // The data blob gone: a whole-tree checkout stops at once; the bisection does not.
    h.delete_data_blob();
    // A fresh work dir: a checkout moved from a neighbour would not re-read the unchanged file.
    let (m, _) = matrix(
        &h,
        tmp.path(),
        "whole-missing",
        &r["reproducer"]["args"],
        &[h.shas.last().unwrap()],
    );
    let mt = text(&m);
    assert_ne!(m.status.code(), Some(0), "{mt}");
    assert!(
        mt.contains(&format!("{DATA} (blob {})", h.data_blob)),
        "a whole-tree checkout reads the missing blob: {mt}"
    );
    let json = tmp.path().join("r2.json");
    let out = bisect(&h, &tmp.path().join("work2"), &json);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(0), "{t}");
    let r2 = read_json(&json);
    assert_eq!(r2["first_bad"], h.shas[FAULT_AT].as_str(), "{t}");
    assert_eq!(r2["provenance"]["ggml_vendor"], FORK);
}
