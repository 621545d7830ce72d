//! The one slot loop as the CLI shows it: validation and `--probe` runs are locked, stored and
//! retried like the bisection's own, and an infrastructure failure in any of them is exit 3.
//! Real git repositories, the real binary, `--script` probes.

mod gitcommit;

use gitcommit::commit_all;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const COMMITS: usize = 10;
const BUG_AT: usize = 6;

struct Repo {
    dir: tempfile::TempDir,
    shas: Vec<String>,
}

/// One new file per commit (so the culprit reverts cleanly onto the bad end); commit BUG_AT
/// adds `bug_path`, which the test script fails on.
fn generate(bug_path: &str) -> Repo {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("repo");
    let repo = git2::Repository::init(&path).unwrap();
    let mut shas = Vec::new();
    for i in 0..COMMITS {
        if i == BUG_AT {
            let f = path.join(bug_path);
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(f, "bug\n").unwrap();
        } else {
            std::fs::create_dir_all(path.join("changes")).unwrap();
            std::fs::write(path.join("changes").join(i.to_string()), format!("{i}\n")).unwrap();
        }
        shas.push(commit_all(&repo, &format!("change {i}")));
    }
    Repo { dir, shas }
}

impl Repo {
    fn path(&self) -> PathBuf {
        self.dir.path().join("repo")
    }
    fn work(&self) -> PathBuf {
        self.dir.path().join("work")
    }
    fn calls(&self) -> PathBuf {
        self.dir.path().join("calls")
    }
    /// Deterministic: fails where `bug_path` exists; every execution is counted.
    fn script(&self, bug_path: &str) -> String {
        format!(
            "echo x >> '{}'; test ! -f '{bug_path}'",
            self.calls().display()
        )
    }
    fn cmd(&self, bug_path: &str, extra: &[&str]) -> Command {
        let mut c = Command::new(assert_cmd::cargo::cargo_bin("setrows-bisect"));
        c.arg("--repo")
            .arg(self.path())
            .args(["--good", &self.shas[0], "--bad", &self.shas[COMMITS - 1]])
            .arg("--script")
            .arg(self.script(bug_path))
            .arg("--work-dir")
            .arg(self.work())
            .args(extra)
            .env_remove("SETROWS_WORK_DIR");
        c
    }
}

fn count_lines(p: &Path) -> usize {
    std::fs::read_to_string(p)
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

/// Every `results/<key>/run-N.json` in the store.
fn stored_runs(work: &Path) -> usize {
    std::fs::read_dir(work.join("results"))
        .into_iter()
        .flatten()
        .flat_map(|d| std::fs::read_dir(d.unwrap().path()).into_iter().flatten())
        .filter(|f| {
            let name = f.as_ref().unwrap().file_name();
            let n = name.to_string_lossy();
            n.starts_with("run-") && n.ends_with(".json")
        })
        .count()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn an_infrastructure_error_during_validate_exits_3() {
    let r = generate("BUG");
    // The bisection itself is stored first, so the validating command below answers it from
    // the store and only validation's extra runs need a shell.
    let out = r.cmd("BUG", &[]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let before = stored_runs(&r.work());
    // No `sh` on PATH: every validation run fails to start. That is our machinery, not the code
    // under test: exit 3, never a verdict from the runs that are left.
    let out = r
        .cmd("BUG", &["--validate", "2"])
        .env("PATH", "/nonexistent")
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("infrastructure failure probing"), "{err}");
    assert!(err.contains("3 attempts"), "{err}");
    assert!(
        err.contains("validate parent"),
        "validation had started: {err}"
    );
    assert!(
        err.contains("infrastructure error (attempt 3/3)"),
        "each attempt is reported: {err}"
    );
    assert!(!err.contains("DOUBTFUL"), "{err}");
    assert_eq!(stored_runs(&r.work()), before, "nothing stored from infra");
}

#[test]
fn validation_runs_are_stored_and_a_second_command_reuses_them() {
    let r = generate("BUG");
    let out = r.cmd("BUG", &[]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (bisect_runs, bisect_calls) = (stored_runs(&r.work()), count_lines(&r.calls()));
    let first_json = r.dir.path().join("first.json");
    let out = r
        .cmd("BUG", &["--validate", "2", "--json"])
        .arg(&first_json)
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let v1 = setrows_json(&first_json);
    assert_eq!(v1["validation"]["confirmed"], true, "{v1}");
    // The bisection's runs of culprit and parent were used, not repeated...
    assert!(err.contains("[stored]"), "{err}");
    // ...and what validation ran (more runs of them, the revert) went into the store.
    let runs = stored_runs(&r.work());
    let calls = count_lines(&r.calls());
    assert!(calls > bisect_calls, "validation ran probes");
    assert_eq!(
        runs - bisect_runs,
        calls - bisect_calls,
        "every validation run is stored"
    );
    // The identical command executes nothing and reaches the same validation.
    let second_json = r.dir.path().join("second.json");
    let out = r
        .cmd("BUG", &["--validate", "2", "--json"])
        .arg(&second_json)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(count_lines(&r.calls()), calls, "nothing re-run");
    assert_eq!(stored_runs(&r.work()), runs);
    let v2 = setrows_json(&second_json);
    assert_eq!(v2["validation"], v1["validation"]);
}

fn setrows_json(p: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

#[test]
fn a_vulkan_only_culprit_of_a_script_bisect_is_not_called_irrelevant() {
    // A --script may build any backend: a culprit under ggml/src/ggml-vulkan/ must not be
    // judged "not built for this test" as if the test were HIP.
    let bug = "ggml/src/ggml-vulkan/set-rows.comp";
    let r = generate(bug);
    let j = r.dir.path().join("v.json");
    let out = r
        .cmd(bug, &["--validate", "1", "--json"])
        .arg(&j)
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let v = setrows_json(&j);
    assert_eq!(v["first_bad"], r.shas[BUG_AT]);
    let val = &v["validation"];
    assert_eq!(val["confirmed"], true, "{val}");
    let kinds: Vec<&str> = val["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["kind"].as_str().unwrap())
        .collect();
    assert!(!kinds.contains(&"only_irrelevant_paths"), "{kinds:?}");
    assert!(kinds.contains(&"backend_unknown"), "{kinds:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("backend unknown: path relevance not judged"),
        "the markdown says so"
    );
}

#[test]
fn two_concurrent_probes_in_one_work_dir_do_not_share_a_slot() {
    let r = generate("BUG");
    let started = r.dir.path().join("started");
    // The first probe holds its slot until the test lets it go.
    let release = r.dir.path().join("release");
    let slow = format!(
        "touch '{}'; while [ ! -f '{}' ]; do sleep 0.05; done; test ! -f BUG",
        started.display(),
        release.display()
    );
    let probe = |sha: &str| {
        let mut c = Command::new(assert_cmd::cargo::cargo_bin("setrows-bisect"));
        c.arg("--repo")
            .arg(r.path())
            .args(["--good", &r.shas[0], "--bad", &r.shas[COMMITS - 1]])
            .args(["--script", &slow, "--probe", sha])
            .arg("--work-dir")
            .arg(r.work())
            .env_remove("SETROWS_WORK_DIR")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        c
    };
    let mut first = probe(&r.shas[3]).spawn().unwrap();
    let t0 = std::time::Instant::now();
    while !started.exists() {
        assert!(
            t0.elapsed().as_secs() < 60,
            "first probe never started: {:?}",
            first.try_wait()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // Without the lock the second probe would run in the same checkout and wait on the
    // release too: give it a bounded time, then let both go.
    let mut second = probe(&r.shas[7]).spawn().unwrap();
    let t1 = std::time::Instant::now();
    while second.try_wait().unwrap().is_none() && t1.elapsed().as_secs() < 30 {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::fs::write(&release, "").unwrap();
    let second = second.wait_with_output().unwrap();
    let first = first.wait_with_output().unwrap();
    let err = stderr(&second);
    assert_eq!(second.status.code(), Some(3), "{err}");
    assert!(err.contains("another setrows-bisect is using"), "{err}");
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    let v: serde_json::Value = serde_json::from_slice(&first.stdout).unwrap();
    assert_eq!(v["run_index"], 0);
    assert_eq!(
        stored_runs(&r.work()),
        1,
        "only the probe that ran is stored"
    );
}
