//! Artifact identity (issue 13) on the user's path: the real binary bisecting a generated
//! repository with a real C build (a program and the shared library it loads). Commits that
//! only change a comment in a compiled file are built, but their test does not run when the
//! build left byte-identical artifacts to a commit already tested; a code change is tested;
//! under `--confidence` every run is a run. The test appends to a counter file outside the
//! checkout, so the count of test runs is what really happened, not what the tool reports.

mod common;

use common::git;

use common::have_cmake;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::PathBuf;
use std::process::Command;

/// What a commit's compiled code is: A and B pass (B is different code), C fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Code {
    A,
    B,
    C,
}

fn val_c(code: Code, note: usize) -> String {
    // The comment is always one line, so no line number moves: only the comment differs.
    let body = match code {
        Code::A => "int val(void) { return 1; }",
        Code::B => "static volatile int k = 3; int val(void) { return k - 2; }",
        Code::C => "int val(void) { return 2; }",
    };
    format!("/* note {note} */\n{body}\n")
}

struct Repo {
    dir: tempfile::TempDir,
    /// (sha, code) per commit, in order.
    commits: Vec<(String, Code)>,
}

impl Repo {
    /// One commit per entry; each changes `src/val.c` (a compiled file), most of them only
    /// its comment.
    fn new(history: &[Code]) -> Repo {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path().join("repo");
        fs::create_dir_all(r.join("src")).unwrap();
        git(&r, &["init", "-q", "-b", "main"]);
        fs::write(
            r.join("CMakeLists.txt"),
            "cmake_minimum_required(VERSION 3.12)\nproject(p C)\n\
             add_library(val SHARED src/val.c)\nadd_executable(prog src/main.c)\n\
             target_link_libraries(prog PRIVATE val)\n",
        )
        .unwrap();
        fs::write(
            r.join("src/main.c"),
            "int val(void);\nint main(void) { return val() == 1 ? 0 : 1; }\n",
        )
        .unwrap();
        let mut commits = Vec::new();
        for (i, &code) in history.iter().enumerate() {
            fs::write(r.join("src/val.c"), val_c(code, i)).unwrap();
            git(&r, &["add", "-A"]);
            git(
                &r,
                &["commit", "-q", "-m", &format!("commit {i}: {code:?}")],
            );
            commits.push((git(&r, &["rev-parse", "HEAD"]), code));
        }
        Repo { dir, commits }
    }

    fn counter(&self) -> PathBuf {
        self.dir.path().join("test-runs")
    }

    /// Test runs so far, counted by the test itself.
    fn test_runs(&self) -> usize {
        fs::read_to_string(self.counter())
            .map(|t| t.lines().count())
            .unwrap_or(0)
    }

    /// Bisects the whole history with `extra` flags; returns (result JSON, stdout + stderr).
    fn bisect(&self, extra: &[&str]) -> (Value, String) {
        let json = self.dir.path().join("r.json");
        let _ = fs::remove_file(&json);
        let gen = if setrows_bisect::probe::exec::which("ninja").is_some() {
            " -G Ninja"
        } else {
            ""
        };
        let build = format!(
            "test -f build.ninja -o -f Makefile || cmake -S \"$SRC\" -B .{gen} >/dev/null; cmake --build ."
        );
        let script = format!("echo run >> {}; \"$WORK/prog\"", self.counter().display());
        let out = Command::new(assert_cmd::cargo::cargo_bin("setrows-bisect"))
            .arg("--repo")
            .arg(self.dir.path().join("repo"))
            .args(["--good", &self.commits[0].0])
            .args(["--bad", &self.commits.last().unwrap().0])
            .args(["--build", &build, "--script", &script])
            .arg("--work-dir")
            .arg(self.dir.path().join("work"))
            .arg("--json")
            .arg(&json)
            .args(extra)
            .env_remove("SETROWS_WORK_DIR")
            .output()
            .unwrap();
        let log = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        (common::read_json(&json), log)
    }

    fn code_of(&self, sha: &str) -> Code {
        self.commits.iter().find(|(s, _)| s == sha).unwrap().1
    }
}

fn probes(r: &Value) -> &Vec<Value> {
    r["probes"].as_array().expect("probes")
}

#[test]
fn identical_artifacts_skip_the_test_and_changed_code_runs_it() {
    if !have_cmake() {
        return;
    }
    use Code::*;
    let repo = Repo::new(&[A, A, A, A, B, B, B, B, C, C, C, C]);
    let culprit = repo.commits[8].0.clone();
    let (r, log) = repo.bisect(&[]);
    assert_eq!(r["first_bad"].as_str(), Some(culprit.as_str()), "{log}");
    let mut tested: BTreeSet<Code> = BTreeSet::new();
    let mut verdicts: BTreeMap<Code, String> = BTreeMap::new();
    let mut skipped = 0;
    for p in probes(&r) {
        let sha = p["sha"].as_str().unwrap();
        let code = repo.code_of(sha);
        let verdict = p["verdict"].as_str().unwrap().to_string();
        assert_eq!(p["cached"], false, "a fresh work dir: {p}");
        match p["reused_from"].as_str() {
            // (a) built, not tested: the outcome of an earlier commit with the same code.
            Some(from) => {
                assert!(
                    tested.contains(&code),
                    "reused before testing {code:?}: {log}"
                );
                assert_eq!(repo.code_of(from), code, "reused across code: {log}");
                assert_eq!(verdicts.get(&code), Some(&verdict), "{log}");
                let probe_log = fs::read_to_string(p["log"].as_str().unwrap()).unwrap();
                assert!(probe_log.contains("Building C object"), "{probe_log}");
                assert!(
                    probe_log.contains("test skipped: artifacts identical to"),
                    "{probe_log}"
                );
                skipped += 1;
            }
            // (b) code not tested yet: the test runs.
            None => {
                assert!(tested.insert(code), "{code:?} tested twice: {log}");
                verdicts.insert(code, verdict);
            }
        }
    }
    assert!(skipped >= 1, "no test was skipped: {log}");
    // (b) the search reaches code B after C was tested: different artifacts, so it ran.
    assert!(tested.contains(&B) && tested.contains(&C), "{log}");
    // What the test itself counted: one run per code version probed, none for the skips.
    assert_eq!(repo.test_runs(), tested.len(), "{log}");
    assert_eq!(
        r["executed"].as_u64(),
        Some(probes(&r).len() as u64),
        "skipped tests still count as executed probes (their build ran)"
    );
    assert!(
        log.contains("test skipped: artifacts identical to"),
        "the report marks them: {log}"
    );
    eprintln!(
        "measured: {} probes, {} tests run, {skipped} skipped; order {:?}",
        probes(&r).len(),
        repo.test_runs(),
        probes(&r)
            .iter()
            .map(|p| repo
                .commits
                .iter()
                .position(|c| c.0 == p["sha"].as_str().unwrap()))
            .collect::<Vec<_>>()
    );

    // A resumed (repeated) bisection answers everything from the store and runs nothing.
    let before = repo.test_runs();
    let (again, log) = repo.bisect(&[]);
    assert_eq!(again["first_bad"].as_str(), Some(culprit.as_str()), "{log}");
    assert_eq!(repo.test_runs(), before, "{log}");
    assert_eq!(again["executed"].as_u64(), Some(0), "{log}");
}

#[test]
fn under_confidence_every_run_runs_the_test() {
    if !have_cmake() {
        return;
    }
    use Code::*;
    let repo = Repo::new(&[A, A, A, C, C]);
    let (r, log) = repo.bisect(&["--confidence", "0.9", "--max-runs", "10"]);
    let ps = probes(&r);
    assert!(!ps.is_empty(), "{log}");
    assert!(ps.iter().all(|p| p["reused_from"].is_null()), "{log}");
    // Identical code was probed more than once (so a reuse would have been possible), and
    // every probe ran its test.
    let codes: BTreeSet<Code> = ps
        .iter()
        .map(|p| repo.code_of(p["sha"].as_str().unwrap()))
        .collect();
    assert!(ps.len() > codes.len(), "{log}");
    assert_eq!(repo.test_runs(), ps.len(), "{log}");
}
