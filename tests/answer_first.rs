//! The answer the moment it is known: when the walk has it and only the endpoint check it
//! rests on is left, the real binary says it at once, with its condition, then runs the check;
//! the result gives both times; a check that contradicts it takes it back as loudly.

mod common;
use common::*;
use std::path::Path;

/// A repository of `n` commits; commit i writes `v` = i.
fn history(dir: &Path, n: usize) -> Vec<String> {
    std::fs::create_dir_all(dir).unwrap();
    git(dir, &["init", "-q", "-b", "main"]);
    (0..n)
        .map(|i| {
            std::fs::write(dir.join("v"), format!("{i}\n")).unwrap();
            git(dir, &["add", "v"]);
            git(dir, &["commit", "-q", "-m", &format!("commit {i}")]);
            git(dir, &["rev-parse", "HEAD"])
        })
        .collect()
}

/// (exit code, stderr, the JSON result) of a bisect of 0..n-1 with `script`.
fn bisect(tmp: &Path, shas: &[String], script: &str) -> (i32, String, serde_json::Value) {
    let json = tmp.join("r.json");
    let out = std::process::Command::new(assert_cmd::cargo::cargo_bin("setrows-bisect"))
        .arg("--repo")
        .arg(tmp.join("repo"))
        .args(["--good", &shas[0], "--bad", &shas[shas.len() - 1]])
        .args(["--script", script])
        .arg("--work-dir")
        .arg(tmp.join("work"))
        .arg("--json")
        .arg(&json)
        .env_remove("SETROWS_WORK_DIR")
        .env_remove("SETROWS_PROGRESS")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let v = std::fs::read_to_string(&json)
        .map(|t| serde_json::from_str(&t).unwrap())
        .unwrap_or(serde_json::Value::Null);
    (out.status.code().unwrap_or(-1), err, v)
}

#[test]
fn the_answer_is_told_before_the_check_of_good_and_both_times_are_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let shas = history(&tmp.path().join("repo"), 16);
    // The culprit sits next to --good: the answer rests on --good, checked last.
    let (code, err, v) = bisect(tmp.path(), &shas, r#"test "$(cat v)" -lt 1"#);
    assert_eq!(code, 0, "{err}");
    assert_eq!(v["first_bad"].as_str(), Some(shas[1].as_str()), "{v}");
    let told = err
        .lines()
        .position(|l| {
            l.contains(&format!("ANSWER: first bad commit {}", &shas[1][..10]))
                && l.contains("if --good is good; checking --good now")
        })
        .unwrap_or_else(|| panic!("no answer line\n{err}"));
    let good_verdict = err
        .lines()
        .position(|l| l.contains(&shas[0][..10]) && l.contains("-> old"))
        .unwrap_or_else(|| panic!("no verdict of --good\n{err}"));
    assert!(
        told < good_verdict,
        "the answer came after the check\n{err}"
    );
    assert!(!err.contains("WITHDRAWN"), "{err}");
    let (answer, checked) = (
        v["answer_s"].as_f64().unwrap(),
        v["elapsed_s"].as_f64().unwrap(),
    );
    assert!(answer > 0.0 && answer <= checked, "{v}");
    // The journal keeps it too: a killed run has still said it.
    let journal = std::fs::read_dir(tmp.path().join("work/journal"))
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.unwrap().path()).ok())
        .collect::<String>();
    assert!(journal.contains(r#""event":"answer""#), "{journal}");
}

#[test]
fn a_check_that_contradicts_the_answer_takes_it_back() {
    let tmp = tempfile::tempdir().unwrap();
    let shas = history(&tmp.path().join("repo"), 16);
    // Every commit fails, --good too: the walk's answer (commit 1) rests on a --good that lies.
    let (code, err, v) = bisect(tmp.path(), &shas, "false");
    assert_ne!(code, 0, "{err}");
    let told = err
        .lines()
        .position(|l| l.contains("ANSWER: first bad commit"));
    let back = err
        .lines()
        .position(|l| l.contains("ANSWER WITHDRAWN: --good showed new"));
    assert!(
        matches!((told, back), (Some(a), Some(b)) if a < b),
        "told {told:?}, taken back {back:?}\n{err}"
    );
    assert_eq!(
        v["conclusion"]["kind"].as_str(),
        Some("bad_endpoint"),
        "{v}"
    );
}

#[test]
fn an_answer_whose_commit_and_parent_were_probed_waits_for_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let shas = history(&tmp.path().join("repo"), 16);
    let (code, err, v) = bisect(tmp.path(), &shas, r#"test "$(cat v)" -lt 6"#);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("ANSWER:"), "{err}");
    assert!(v.get("answer_s").is_none(), "{v}");
}
