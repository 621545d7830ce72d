//! `--probe-kind ctest` (issue 57) end to end with the real binary: a generated CMake project
//! with a CTest suite (as ggml and llama.cpp ship theirs), a history in which one commit breaks
//! one test, and the bisect the user types. The tree's tests are configured, built and run by
//! ctest itself; the failing test's name and its first error line are the signature, and a
//! commit whose tree has no test matching `--ctest` is a skip that says so.

mod common;

use common::git;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

const CMAKE: &str = "cmake_minimum_required(VERSION 3.14)
project(sums C)
enable_testing()
add_executable(test-other tests/test-other.c)
add_test(NAME test-other COMMAND test-other)
";

const SUM_TEST: &str = "add_executable(test-sum tests/test-sum.c sum.c)
add_test(NAME test-sum COMMAND test-sum)
";

const TEST_SUM_C: &str = "#include <stdio.h>
int sum(int a, int b);
int main(void) {
    int s = sum(2, 2);
    printf(\"checking sum(2, 2)\\n\");
    if (s != 4) {
        printf(\"test-sum.c: error: sum(2, 2) is %d, expected 4\\n\", s);
        return 1;
    }
    return 0;
}
";

/// c0: the suite with test-sum (passing); c1 docs; c2 takes test-sum out of the suite (a tree
/// without the test); c3 puts it back; c4 breaks sum; c5 docs.
fn make_repo(dir: &Path) -> Vec<String> {
    let repo = dir.join("sums");
    std::fs::create_dir_all(repo.join("tests")).unwrap();
    let with = format!("{CMAKE}{SUM_TEST}");
    std::fs::write(repo.join("CMakeLists.txt"), &with).unwrap();
    std::fs::write(
        repo.join("tests/test-other.c"),
        "int main(void) { return 0; }\n",
    )
    .unwrap();
    std::fs::write(repo.join("tests/test-sum.c"), TEST_SUM_C).unwrap();
    std::fs::write(
        repo.join("sum.c"),
        "int sum(int a, int b) { return a + b; }\n",
    )
    .unwrap();
    std::fs::write(repo.join("README.md"), "sums\n").unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    let commit = |msg: &str| {
        git(&repo, &["add", "-A"]);
        git(&repo, &["commit", "-q", "-m", msg]);
        git(&repo, &["rev-parse", "HEAD"])
    };
    let mut shas = vec![commit("sum and its test")];
    std::fs::write(repo.join("README.md"), "sums, a library\n").unwrap();
    shas.push(commit("docs"));
    std::fs::write(repo.join("CMakeLists.txt"), CMAKE).unwrap();
    shas.push(commit("tests: test-sum out of the suite for now"));
    std::fs::write(repo.join("CMakeLists.txt"), &with).unwrap();
    shas.push(commit("tests: test-sum back"));
    std::fs::write(
        repo.join("sum.c"),
        "int sum(int a, int b) { return a + b + (a == b); }\n",
    )
    .unwrap();
    shas.push(commit("sum: a fast path for equal terms"));
    std::fs::write(repo.join("README.md"), "sums, a small library\n").unwrap();
    shas.push(commit("docs again"));
    shas
}

fn tool(repo: &Path, work: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(assert_cmd::cargo::cargo_bin("setrows-bisect"))
        .arg("--repo")
        .arg(repo)
        .args(["--probe-kind", "ctest", "--ctest", "^test-sum$"])
        .args(args)
        .arg("--work-dir")
        .arg(work)
        .env_remove("SETROWS_WORK_DIR")
        .output()
        .expect("run setrows-bisect");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The bisect names the commit that broke test-sum, with the test and its first error line as
/// the signature; the report prints the ctest line the probes ran.
#[test]
fn a_bisect_names_the_commit_that_broke_the_test() {
    assert!(
        common::have_cmake(),
        "cmake builds the generated suite (scripts/setup.d/00-base.sh)"
    );
    let tmp = tempfile::tempdir().unwrap();
    let shas = make_repo(tmp.path());
    let repo = tmp.path().join("sums");
    let work = tmp.path().join("work");
    let json = tmp.path().join("r.json");
    let report = tmp.path().join("r.md");
    let (code, out, err) = tool(
        &repo,
        &work,
        &[
            "--good",
            &shas[0],
            "--bad",
            &shas[5],
            "--json",
            json.to_str().unwrap(),
            "--report",
            report.to_str().unwrap(),
        ],
    );
    assert_eq!(code, Some(0), "{out}{err}");
    let r: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(r["first_bad"], shas[4].as_str(), "{out}{err}");
    let culprit = r["probes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["sha"] == shas[4].as_str())
        .expect("the culprit was probed");
    assert_eq!(culprit["outcome"], "wrong_result", "{culprit}");
    assert_eq!(
        culprit["signature"],
        "test-sum: test-sum.c: error: sum(2, 2) is 5, expected 4"
    );
    assert_eq!(r["reproducer"]["program"], "ctest", "{}", r["reproducer"]);
    let md = std::fs::read_to_string(&report).unwrap();
    assert!(
        md.contains("ctest -R '^test-sum$' --output-on-failure"),
        "{md}"
    );
}

/// A tree without a test matching `--ctest` is a skip, and it says why.
#[test]
fn a_tree_without_the_test_is_a_skip_with_its_reason() {
    assert!(
        common::have_cmake(),
        "cmake builds the generated suite (scripts/setup.d/00-base.sh)"
    );
    let tmp = tempfile::tempdir().unwrap();
    let shas = make_repo(tmp.path());
    let repo = tmp.path().join("sums");
    let work = tmp.path().join("work");
    let (code, out, err) = tool(
        &repo,
        &work,
        &["--good", &shas[0], "--bad", &shas[5], "--probe", &shas[2]],
    );
    assert_eq!(code, Some(0), "{out}{err}");
    let j: Value = serde_json::from_str(&out).expect("--probe prints JSON");
    assert_eq!(j["outcome"], "untestable", "{j}");
    let run = Path::new(j["result_dir"].as_str().unwrap()).join("run-0000.json");
    let stored: Value = serde_json::from_str(&std::fs::read_to_string(&run).unwrap()).unwrap();
    assert_eq!(
        stored["report"]["signature"], "no test matches ctest -R '^test-sum$' in this tree",
        "{stored}"
    );
}

/// `--ctest` belongs to the ctest probe, and the ctest probe needs it: one line each, exit 2,
/// before any work.
#[test]
fn the_flag_and_the_kind_go_together() {
    let tmp = tempfile::tempdir().unwrap();
    let shas = make_repo(tmp.path());
    let repo = tmp.path().join("sums");
    let run = |args: &[&str]| {
        let out = Command::new(assert_cmd::cargo::cargo_bin("setrows-bisect"))
            .arg("--repo")
            .arg(&repo)
            .args(["--good", &shas[0], "--bad", &shas[5]])
            .args(args)
            .arg("--work-dir")
            .arg(tmp.path().join("work"))
            .env_remove("SETROWS_WORK_DIR")
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, err) = run(&["--ctest", "x"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("add --probe-kind ctest"), "{err}");
    let (code, err) = run(&["--probe-kind", "ctest"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--probe-kind ctest needs --ctest REGEX"),
        "{err}"
    );
}
