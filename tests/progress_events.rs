//! Progress as events (issue 36 item 3, issue 37 item 5), as the real binary shows them: a
//! bisection of a small real repository whose `--build` prints Ninja's `[n/N]` status lines
//! shows the build's progress and, after the first verdict, an estimate of what is left; as
//! plain lines when stderr is not a terminal, as JSON lines under `SETROWS_PROGRESS=json`.
//! The events change neither the exit code nor the result.

mod gitcommit;

use gitcommit::commit_all;
use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Output};

const COMMITS: usize = 40;
const BUG_AT: usize = 23;

/// A build that reports ten Ninja-like steps, and a test that fails from BUG_AT on.
const BUILD: &str =
    "i=1; while [ $i -le 10 ]; do echo \"[$i/10] Building C object obj$i.o\"; i=$((i+1)); done";
const SCRIPT: &str = "test ! -f BUG";

struct Repo {
    dir: tempfile::TempDir,
    shas: Vec<String>,
}

fn generate() -> Repo {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("repo");
    let repo = git2::Repository::init(&path).unwrap();
    let mut shas = Vec::new();
    for i in 0..COMMITS {
        std::fs::write(path.join("n"), format!("{i}\n")).unwrap();
        if i == BUG_AT {
            std::fs::write(path.join("BUG"), "bug\n").unwrap();
        }
        shas.push(commit_all(&repo, &format!("change {i}")));
    }
    Repo { dir, shas }
}

impl Repo {
    /// A bisection of the whole range in its own work dir `work`, writing its JSON result.
    fn cmd(&self, work: &str) -> Command {
        let mut c = Command::new(assert_cmd::cargo::cargo_bin("setrows-bisect"));
        c.arg("--repo")
            .arg(self.dir.path().join("repo"))
            .args(["--good", &self.shas[0], "--bad", &self.shas[COMMITS - 1]])
            .args(["--build", BUILD, "--script", SCRIPT])
            .arg("--work-dir")
            .arg(self.dir.path().join(work))
            .arg("--json")
            .arg(self.result_path(work))
            .env_remove("SETROWS_WORK_DIR")
            .env_remove("SETROWS_PROGRESS");
        c
    }

    fn result_path(&self, work: &str) -> PathBuf {
        self.dir.path().join(format!("{work}.json"))
    }

    fn first_bad(&self, work: &str) -> Value {
        let text = std::fs::read_to_string(self.result_path(work)).unwrap();
        serde_json::from_str::<Value>(&text).unwrap()["first_bad"].clone()
    }
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn position(lines: &[&str], what: &str, pred: impl Fn(&str) -> bool) -> usize {
    lines
        .iter()
        .position(|l| pred(l))
        .unwrap_or_else(|| panic!("no {what} line in:\n{}", lines.join("\n")))
}

#[test]
fn plain_lines_show_the_build_progress_and_an_estimate_after_the_first_verdict() {
    let r = generate();
    let out = r.cmd("work").output().unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(r.first_bad("work"), r.shas[BUG_AT].as_str(), "{err}");
    let lines: Vec<&str> = err.lines().collect();
    // The build's own count, per probe: every tenth of a ten-step build is news.
    let first_bad = &r.shas[BUG_AT][..10];
    let progress: Vec<&&str> = lines
        .iter()
        .filter(|l| l.contains("job 0: build") && l.contains("/10] "))
        .collect();
    assert!(
        progress.iter().any(|l| l.ends_with("[3/10] 30%")),
        "no [3/10] line:\n{err}"
    );
    assert!(
        progress.iter().any(|l| l.ends_with("[10/10] 100%")),
        "no [10/10] line:\n{err}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("job 0: built") && l.contains(" in ")),
        "no built line:\n{err}"
    );
    // The first verdict line, then the estimate: probes left and the time they take.
    let verdict = position(&lines, "verdict", |l| l.contains(" -> "));
    let estimate = position(&lines, "estimate", |l| l.contains("] about "));
    assert!(
        verdict < estimate,
        "estimate before the first verdict:\n{err}"
    );
    let est = lines[estimate];
    assert!(
        est.contains("probes left, ~") || est.contains("probe left, ~"),
        "the estimate has no time: {est}"
    );
    // The build's progress comes before the probe's verdict.
    let built = position(&lines, "[3/10]", |l| l.ends_with("[3/10] 30%"));
    assert!(built < verdict, "{err}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains(first_bad) && l.contains("-> new")),
        "{err}"
    );
    // Nothing of the events reaches stdout (the report).
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains("[3/10]"), "{stdout}");
}

#[test]
fn json_lines_carry_the_same_events_and_change_no_result() {
    let r = generate();
    let plain = r.cmd("plain").output().unwrap();
    assert_eq!(plain.status.code(), Some(0), "{}", stderr(&plain));
    let out = r
        .cmd("json")
        .env("SETROWS_PROGRESS", "json")
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), plain.status.code(), "{err}");
    assert_eq!(r.first_bad("json"), r.first_bad("plain"));
    assert_eq!(r.first_bad("json"), r.shas[BUG_AT].as_str());
    // Every line that looks like JSON is one event object with a kind and a time.
    let events: Vec<Value> = err
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str::<Value>(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert!(!events.is_empty(), "{err}");
    for e in &events {
        assert!(e["event"].is_string(), "{e}");
        assert!(e["elapsed_s"].is_number(), "{e}");
    }
    // No plain progress line is left in JSON mode.
    assert!(!err.contains("job 0:"), "{err}");
    let kind = |k: &str| -> Vec<&Value> { events.iter().filter(|e| e["event"] == k).collect() };
    assert!(!kind("started").is_empty(), "{err}");
    assert!(!kind("round").is_empty(), "{err}");
    assert!(!kind("probe_started").is_empty(), "{err}");
    assert!(!kind("building").is_empty(), "{err}");
    assert!(!kind("built").is_empty(), "{err}");
    assert!(!kind("testing").is_empty(), "{err}");
    let progress = kind("build_progress");
    assert!(
        progress
            .iter()
            .any(|e| e["done"] == 3 && e["total"] == 10 && e["tool"] == "ninja" && e["slot"] == 0),
        "{err}"
    );
    // One verdict per probe the result lists, with the outcome and verdict words of the JSON.
    let verdicts = kind("verdict");
    let result: Value =
        serde_json::from_str(&std::fs::read_to_string(r.result_path("json")).unwrap()).unwrap();
    let probes = result["probes"].as_array().expect("probes");
    assert_eq!(verdicts.len(), probes.len(), "{err}");
    let culprit = verdicts
        .iter()
        .find(|v| v["sha"] == r.shas[BUG_AT].as_str())
        .expect("the culprit was probed");
    assert_eq!(culprit["verdict"], "new");
    assert_eq!(culprit["outcome"], "wrong_result");
    // After the first verdict: the estimate, in probes and (measured) seconds.
    let first_verdict = events.iter().position(|e| e["event"] == "verdict").unwrap();
    let estimate = events
        .iter()
        .position(|e| e["event"] == "estimate")
        .expect("an estimate");
    assert!(first_verdict < estimate, "{err}");
    let e = &events[estimate];
    assert!(e["probes_left"].as_u64().unwrap() > 0, "{e}");
    assert!(e["seconds_left"].as_f64().unwrap() >= 0.0, "{e}");
    assert_eq!(kind("finished").len(), 1, "{err}");
}

#[test]
fn an_unknown_setrows_progress_is_refused_before_anything_runs() {
    let r = generate();
    let out = r
        .cmd("bad")
        .env("SETROWS_PROGRESS", "jsno")
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("SETROWS_PROGRESS=\"jsno\""), "{err}");
    assert!(
        !r.dir.path().join("bad").exists(),
        "a work dir was made: {err}"
    );
}

#[test]
fn bar_mode_changes_no_result() {
    let r = generate();
    let out = r
        .cmd("bar")
        .env("SETROWS_PROGRESS", "bar")
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(r.first_bad("bar"), r.shas[BUG_AT].as_str(), "{err}");
    // Bars draw only on a terminal (this stderr is a pipe): no plain progress line instead.
    assert!(!err.contains("job 0:"), "{err}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains(&r.shas[BUG_AT][..10]), "{stdout}");
}
