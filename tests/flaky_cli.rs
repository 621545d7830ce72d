//! `--confidence` / `--max-runs` / `--validate` / `--plan-only` / `--probe` through the real
//! binary on a generated git repository whose test fails on bad commits only on some runs
//! (about one in three, decided by a hash of a run counter kept in a file, so the flakiness is
//! exactly reproducible).

mod gitcommit;

use gitcommit::commit_all;
use std::path::{Path, PathBuf};
use std::process::Command;

const COMMITS: usize = 40;
const BUG_AT: usize = 23;

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
        // One new file per commit, so any single commit reverts cleanly onto a later one.
        std::fs::create_dir_all(path.join("changes")).unwrap();
        std::fs::write(path.join("changes").join(i.to_string()), format!("{i}\n")).unwrap();
        if i == BUG_AT {
            std::fs::write(path.join("BUG"), "intermittent\n").unwrap();
        }
        shas.push(commit_all(&repo, &format!("change {i}")));
    }
    Repo { dir, shas }
}

impl Repo {
    fn path(&self) -> PathBuf {
        self.dir.path().join("repo")
    }
    /// A test that fails on a bad commit about one run in three: the bisection-wide run
    /// counter is hashed (cksum), so the pattern is deterministic but has no period a
    /// multisection wave could fall into (a plain `n % 3` would starve one slot forever).
    fn script(&self) -> String {
        let counter = self.dir.path().join("runs");
        format!(
            "n=$(cat '{c}' 2>/dev/null || echo 0); n=$((n+1)); echo $n > '{c}'; \
             h=$(echo \"run $n\" | cksum | cut -d' ' -f1); \
             if [ -f BUG ] && [ $((h % 3)) -eq 0 ]; then exit 1; fi; exit 0",
            c = counter.display()
        )
    }
    fn bisect(&self, work: &str, extra: &[&str]) -> (i32, serde_json::Value, String) {
        let json = self.dir.path().join(format!("{work}.json"));
        let out = Command::new(assert_cmd::cargo::cargo_bin("setrows-bisect"))
            .arg("--repo")
            .arg(self.path())
            .args(["--good", &self.shas[0], "--bad", &self.shas[COMMITS - 1]])
            .arg("--script")
            .arg(self.script())
            .arg("--work-dir")
            .arg(self.dir.path().join(work))
            .arg("--json")
            .arg(&json)
            .args(extra)
            .env_remove("SETROWS_WORK_DIR")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        let v = read(&json);
        (out.status.code().unwrap_or(-1), v, stderr)
    }
}

fn read(p: &Path) -> serde_json::Value {
    std::fs::read_to_string(p)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(serde_json::Value::Null)
}

#[test]
fn confidence_finds_the_intermittent_culprit_and_states_its_confidence() {
    let r = generate();
    let (code, v, stderr) = r.bisect("adaptive", &["--confidence", "0.95"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(v["first_bad"], r.shas[BUG_AT], "{stderr}");
    let conf = v["flaky"]["confidence"].as_f64().unwrap();
    assert!(conf >= 0.95, "{v}");
    let rate = v["flaky"]["rate"].as_f64().unwrap();
    assert!(rate > 0.1 && rate < 0.7, "rate {rate}");
    assert!(stderr.contains("confidence in this answer"), "{stderr}");
    // Good commits were run many times, not once.
    let probes = v["probes"].as_array().unwrap();
    assert!(probes.len() > 20, "{} runs", probes.len());
}

#[test]
fn max_runs_ends_inconclusive_not_with_a_guess() {
    let r = generate();
    let (code, v, stderr) = r.bisect("capped", &["--confidence", "0.95", "--max-runs", "8"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(v["first_bad"].is_null(), "{v}");
    assert!(v["probes"].as_array().unwrap().len() <= 8);
    // Said as a spent budget with where the culprit likely is, not as untestable commits.
    let budget = &v["budget"];
    assert_eq!(budget["max_runs"], 8, "{v}");
    let cands = budget["candidates"].as_array().unwrap();
    assert!(!cands.is_empty(), "{v}");
    let probs: Vec<f64> = cands
        .iter()
        .map(|c| c["probability"].as_f64().unwrap())
        .collect();
    assert!(
        probs.windows(2).all(|w| w[0] >= w[1]),
        "most likely first: {probs:?}"
    );
    assert!(probs.iter().all(|&p| p > 0.0 && p <= 1.0), "{probs:?}");
    assert!(budget["more_runs"].as_u64().unwrap() > 0, "{v}");
    let md = setrows_bisect::report::bisect::markdown(
        &serde_json::from_value(v.clone()).expect("a bisect result"),
    );
    assert!(md.contains("run budget was spent"), "{md}");
    assert!(!md.contains("could not be tested"), "{md}");
    assert!(md.contains("more runs would likely settle it"), "{md}");
}

#[test]
fn bad_flaky_flags_are_usage_errors() {
    let r = generate();
    for extra in [
        &["--confidence", "1.5"][..],
        &["--confidence", "0.2"][..],
        &["--max-runs", "5"][..],
        &["--confidence", "0.9", "--repeat", "3"][..],
    ] {
        let (code, _, stderr) = r.bisect("bad", extra);
        assert_eq!(code, 2, "{extra:?}: {stderr}");
    }
}

#[test]
fn validate_confirms_the_culprit_by_reverting_it() {
    let r = generate();
    let (code, v, stderr) = r.bisect("validated", &["--confidence", "0.95", "--validate", "3"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(v["first_bad"], r.shas[BUG_AT]);
    let val = &v["validation"];
    assert_eq!(val["confirmed"], true, "{val}");
    // A 1-in-3 fault: 3 passes would prove little, so parent and revert ran more than 3
    // times (all passing), and the culprit ran at least 3 times and failed.
    let obs = &val["observations"];
    let n = |e: &serde_json::Value, k: &str| e[k].as_u64().unwrap();
    assert!(n(&obs["parent"], "old") > 3, "{obs}");
    assert_eq!(n(&obs["parent"], "new"), 0, "{obs}");
    assert!(n(&obs["culprit"], "new") >= 1, "{obs}");
    assert!(
        n(&obs["culprit"], "old") + n(&obs["culprit"], "new") >= 3,
        "{obs}"
    );
    assert_eq!(
        n(&obs["reverted"], "old"),
        n(&obs["parent"], "old"),
        "{obs}"
    );
    assert_eq!(n(&obs["reverted"], "new"), 0, "{obs}");
    assert_eq!(obs["revert"]["kind"], "clean");
    assert_eq!(val["findings"][0]["kind"], "revert_fixes", "{val}");
    // Each validation run is reported as it happens.
    assert!(stderr.contains("validate reverted"), "{stderr}");
}

#[test]
fn validate_flags_a_culprit_that_only_touches_docs() {
    // A deterministic bug planted by a docs-only commit (the test reads docs/NOTE): the
    // answer is right for the test, but validation must call it suspicious and exit 1.
    let r = generate();
    let dir = r.path();
    let repo = git2::Repository::open(&dir).unwrap();
    std::fs::create_dir_all(dir.join("docs")).unwrap();
    std::fs::write(dir.join("docs/NOTE"), "x\n").unwrap();
    let id = commit_all(&repo, "docs: note");
    let json = r.dir.path().join("docs.json");
    let out = Command::new(assert_cmd::cargo::cargo_bin("setrows-bisect"))
        .arg("--repo")
        .arg(&dir)
        .args(["--good", &r.shas[COMMITS - 1], "--bad", &id.to_string()])
        .args(["--script", "test ! -f docs/NOTE", "--validate", "2"])
        .arg("--work-dir")
        .arg(r.dir.path().join("docs-work"))
        .arg("--json")
        .arg(&json)
        .env_remove("SETROWS_WORK_DIR")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let v = read(&json);
    assert_eq!(v["validation"]["confirmed"], false, "{v}");
    let kinds: Vec<&str> = v["validation"]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["kind"].as_str())
        .collect();
    assert!(kinds.contains(&"only_irrelevant_paths"), "{kinds:?}");
    assert!(kinds.contains(&"revert_fixes"), "{kinds:?}");
}

#[test]
fn plan_only_proposes_a_wave_and_replays_a_finished_store() {
    let r = generate();
    let run = |extra: &[&str]| {
        let out = Command::new(assert_cmd::cargo::cargo_bin("setrows-bisect"))
            .arg("--repo")
            .arg(r.path())
            .args(["--good", &r.shas[0], "--bad", &r.shas[COMMITS - 1]])
            .args(["--script", "test ! -f BUG"])
            .arg("--work-dir")
            .arg(r.dir.path().join("plan-work"))
            .args(extra)
            .env_remove("SETROWS_WORK_DIR")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        (out.status.code(), stdout, stderr)
    };
    let plan = |k: &str| {
        let (code, stdout, stderr) = run(&["--plan-only", "--jobs", k]);
        assert_eq!(code, Some(0), "{stderr}");
        serde_json::from_str::<serde_json::Value>(&stdout).unwrap()
    };
    // Empty store: two midpoints, each at run index 0 (issue 45: the first wave of K > 1
    // held only the endpoints; --bad now waits for the same rule as with one slot).
    let p = plan("2");
    assert_eq!(p["done"], false);
    let shas: Vec<&str> = p["probes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["sha"].as_str().unwrap())
        .collect();
    assert_eq!(shas.len(), 2);
    assert!(
        !shas.contains(&r.shas[0].as_str()) && !shas.contains(&r.shas[COMMITS - 1].as_str()),
        "{shas:?}"
    );
    assert_ne!(shas[0], shas[1]);
    assert!(p["probes"]
        .as_array()
        .unwrap()
        .iter()
        .all(|e| e["run_index"] == 0));
    // After a real bisection into the same store, planning replays it to the same answer and
    // asks for nothing more.
    let (code, _, stderr) = run(&["--jobs", "3"]);
    assert_eq!(code, Some(0), "{stderr}");
    let p = plan("3");
    assert_eq!(p["done"], true, "{p}");
    assert_eq!(p["first_bad"], r.shas[BUG_AT]);
}

/// Copies every stored result file under `from/results` into `into/results` (the merge step of
/// a distributed round: artifacts from several runners unpacked into one store).
fn merge_results(from: &Path, into: &Path) -> usize {
    let mut n = 0;
    let Ok(keys) = std::fs::read_dir(from.join("results")) else {
        return 0;
    };
    for k in keys.flatten() {
        let dst = into.join("results").join(k.file_name());
        std::fs::create_dir_all(&dst).unwrap();
        for f in std::fs::read_dir(k.path()).unwrap().flatten() {
            let target = dst.join(f.file_name());
            assert!(!target.exists(), "two runners wrote {}", target.display());
            std::fs::copy(f.path(), target).unwrap();
            n += 1;
        }
    }
    n
}

#[test]
fn distributed_rounds_plan_probe_merge_reach_the_answer() {
    let r = generate();
    let main_store = r.dir.path().join("merged");
    let cmd = |work: &Path, extra: &[&str]| {
        let out = Command::new(assert_cmd::cargo::cargo_bin("setrows-bisect"))
            .arg("--repo")
            .arg(r.path())
            .args(["--good", &r.shas[0], "--bad", &r.shas[COMMITS - 1]])
            .arg("--script")
            .arg(r.script())
            .args(["--confidence", "0.95", "--jobs", "3"])
            .arg("--work-dir")
            .arg(work)
            .args(extra)
            .env_remove("SETROWS_WORK_DIR")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        assert_eq!(out.status.code(), Some(0), "{extra:?}: {stderr}");
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let mut rounds = 0;
    let answer = loop {
        rounds += 1;
        assert!(rounds < 400, "no answer after {rounds} rounds");
        let plan = cmd(&main_store, &["--plan-only"]);
        if plan["done"] == true {
            break plan;
        }
        let probes = plan["probes"].as_array().unwrap();
        assert!(!probes.is_empty() && probes.len() <= 3, "{plan}");
        // One runner per entry, each with its own work dir, then merge.
        for (slot, e) in probes.iter().enumerate() {
            let runner = r.dir.path().join(format!("runner-{rounds}-{slot}"));
            let ri = e["run_index"].to_string();
            let got = cmd(
                &runner,
                &["--probe", e["sha"].as_str().unwrap(), "--run-index", &ri],
            );
            assert_eq!(got["run_index"], e["run_index"]);
            assert_eq!(merge_results(&runner, &main_store), 1);
        }
    };
    assert_eq!(answer["first_bad"], r.shas[BUG_AT], "{answer}");
    assert!(answer["conclusion"]["confidence"].as_f64().unwrap() >= 0.95);
    // Several runs went out per round: repeats of one commit run on several runners at once.
    assert!(
        answer["runs_stored"].as_u64().unwrap() > 2 * rounds as u64 - 2,
        "{answer}"
    );
}

/// With `--confidence`, every wave of `--jobs K` fills the K slots (spare slots re-run the
/// undecided candidates) instead of waiting on one candidate's repeated runs.
#[test]
fn confidence_with_jobs_fills_every_slot_of_a_wave() {
    let r = generate();
    let (code, v, stderr) = r.bisect("waves", &["--confidence", "0.95", "--jobs", "4"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(v["first_bad"], r.shas[BUG_AT], "{stderr}");
    assert!(v["flaky"]["confidence"].as_f64().unwrap() >= 0.95, "{v}");
    let runs = v["probes"].as_array().unwrap().len() as u64;
    let waves = v["steps"].as_u64().unwrap();
    assert!(runs <= 4 * waves, "{runs} runs in {waves} waves of 4");
    // Sequential rounds (one candidate's repeats at a time) would give about 1 run per round.
    assert!(runs >= 3 * waves, "{runs} runs in {waves} waves of 4");
}

fn count_lines(p: &Path) -> usize {
    std::fs::read_to_string(p)
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

/// SIGKILL in the middle of a `--confidence --jobs 2` bisection: the rerun reuses what was
/// stored, runs exactly what it reports as executed, and finds the culprit; a third run answers
/// from the store alone with the same answer.
#[test]
fn confidence_with_jobs_resumes_after_sigkill() {
    let r = generate();
    let calls = r.dir.path().join("calls");
    let script = format!(
        "echo run >> '{}'; sleep 0.3; {}",
        calls.display(),
        r.script()
    );
    let cmd = || {
        let mut c = Command::new(assert_cmd::cargo::cargo_bin("setrows-bisect"));
        c.arg("--repo")
            .arg(r.path())
            .args(["--good", &r.shas[0], "--bad", &r.shas[COMMITS - 1]])
            .arg("--script")
            .arg(&script)
            .arg("--work-dir")
            .arg(r.dir.path().join("killed"))
            .arg("--json")
            .arg(r.dir.path().join("killed.json"))
            .args(["--confidence", "0.95", "--jobs", "2"])
            .env_remove("SETROWS_WORK_DIR")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        c
    };
    let mut child = cmd().spawn().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while count_lines(&calls) < 7 {
        assert!(
            std::time::Instant::now() < deadline,
            "bisect never got going"
        );
        assert!(child.try_wait().unwrap().is_none(), "finished too early");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL: no handler runs
    child.wait().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(700)); // orphaned tests finish
    let before = count_lines(&calls);

    let out = cmd().output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v = read(&r.dir.path().join("killed.json"));
    assert_eq!(v["first_bad"], r.shas[BUG_AT], "{v}");
    let probes = v["probes"].as_array().unwrap();
    let cached = probes.iter().filter(|p| p["cached"] == true).count();
    let executed = v["executed"].as_u64().unwrap() as usize;
    assert!(
        cached >= 4,
        "runs finished before the kill are reused: {cached}"
    );
    assert_eq!(cached + executed, probes.len());
    assert_eq!(count_lines(&calls) - before, executed);

    let after = count_lines(&calls);
    let out = cmd().output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let again = read(&r.dir.path().join("killed.json"));
    assert_eq!(again["executed"], 0, "{again}");
    assert_eq!(count_lines(&calls), after);
    assert_eq!(again["first_bad"], v["first_bad"]);
    assert_eq!(again["probes"].as_array().unwrap().len(), probes.len());
}

/// `--confidence --jobs 2` keeps the driver's infrastructure contract: a step that cannot start
/// (no `sh` on PATH) is retried, exits 3, and nothing is stored as a verdict.
#[test]
fn confidence_with_jobs_infrastructure_failure_exits_3_and_stores_nothing() {
    let r = generate();
    let json = r.dir.path().join("infra.json");
    let out = Command::new(assert_cmd::cargo::cargo_bin("setrows-bisect"))
        .arg("--repo")
        .arg(r.path())
        .args(["--good", &r.shas[0], "--bad", &r.shas[COMMITS - 1]])
        .arg("--script")
        .arg(r.script())
        .arg("--work-dir")
        .arg(r.dir.path().join("infra"))
        .arg("--json")
        .arg(&json)
        .args(["--confidence", "0.95", "--jobs", "2"])
        .env_remove("SETROWS_WORK_DIR")
        .env("PATH", "/nonexistent")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("3 attempts"), "{stderr}");
    let results = r.dir.path().join("infra").join("results");
    let stored = std::fs::read_dir(&results).map(|d| d.count()).unwrap_or(0);
    assert_eq!(stored, 0, "nothing may be stored from failed attempts");
    // With a working PATH the same command runs every probe and finds the culprit.
    let (code, v, stderr) = r.bisect("infra", &["--confidence", "0.95", "--jobs", "2"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(v["first_bad"], r.shas[BUG_AT]);
    assert_eq!(v["executed"], v["probes"].as_array().unwrap().len());
}
