//! A closed standard output never costs a result (issue 37 item 1): the real binary bisects a
//! generated history with its stdout read by `true` (closed before anything is printed) and by
//! `head -1` (closed after one line), as a user's shell pipes it. The answer must be in
//! `--json` and `--report`, the exit code must be the bisect's own (0: found), and nothing may
//! panic ("failed printing to stdout", exit 101).
mod common;
use common::*;
use setrows_bisect::core::shell::word as shell_quote;
use std::process::{Command, Stdio};

/// Runs `cmd | reader` through a real shell pipe; returns (the bisect's exit code, its stderr).
fn piped(cmd: std::process::Command, reader: &str, dir: &std::path::Path) -> (i32, String) {
    let mut line = String::new();
    line.push_str(&shell_quote(&cmd.get_program().to_string_lossy()));
    for a in cmd.get_args() {
        line.push(' ');
        line.push_str(&shell_quote(&a.to_string_lossy()));
    }
    let err = dir.join("stderr.txt");
    let script = format!(
        "{line} 2>{e} | {reader}; exit ${{PIPESTATUS[0]}}",
        e = shell_quote(&err.to_string_lossy())
    );
    let status = Command::new("bash")
        .args(["-c", &script])
        .env_remove("SETROWS_WORK_DIR")
        .stdout(Stdio::null())
        .status()
        .unwrap();
    (
        status.code().unwrap_or(-1),
        std::fs::read_to_string(err).unwrap_or_default(),
    )
}

#[test]
fn a_closed_stdout_keeps_the_json_and_the_report() {
    for reader in ["true", "head -1"] {
        let f = Fixture::new(&spec(12, 7));
        let report = f.dir.path().join("report.md");
        let mut cmd = f.bisect_std(0, 11);
        cmd.arg("--report").arg(&report);
        let (code, stderr) = piped(cmd, reader, f.dir.path());
        assert!(
            !stderr.contains("panicked") && !stderr.contains("failed printing"),
            "| {reader}: {stderr}"
        );
        assert_eq!(code, 0, "| {reader}: exit {code}\n{stderr}");
        let v = f.result();
        assert_eq!(
            v["first_bad"]["sha"].as_str().or(v["first_bad"].as_str()),
            Some(f.sha(7)),
            "| {reader}: {v}"
        );
        let md = std::fs::read_to_string(&report).expect("--report written");
        assert!(md.contains(&f.sha(7)[..10]), "| {reader}: {md}");
    }
}

/// `--json -` is standard output's alone; a reader that takes one line of it and leaves is the
/// user's choice, not a failure: the run ends as found, the report it asked for is written.
#[test]
fn json_on_a_closed_stdout_is_not_a_failure() {
    let f = Fixture::new(&spec(12, 7));
    let report = f.dir.path().join("report.md");
    let mut cmd = f.bisect_std(0, 11);
    let args: Vec<_> = cmd.get_args().map(|a| a.to_owned()).collect();
    let mut fresh = std::process::Command::new(cmd.get_program());
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        if a == "--json" {
            it.next();
            fresh.args(["--json", "-"]);
        } else {
            fresh.arg(a);
        }
    }
    cmd = fresh;
    cmd.arg("--report").arg(&report);
    let (code, stderr) = piped(cmd, "head -1", f.dir.path());
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(code, 0, "exit {code}\n{stderr}");
    assert!(std::fs::read_to_string(&report)
        .expect("--report written")
        .contains(&f.sha(7)[..10]));
}

/// `man` and `completions` print a page the reader may stop reading at any line: a closed pipe
/// ends them with exit 0 and nothing on stderr, as it ends `git log` (it was exit 3 and a
/// panic, 101).
#[test]
fn man_and_completions_into_a_closed_pipe_exit_0() {
    let dir = tempfile::tempdir().unwrap();
    for args in [&["man"][..], &["completions", "bash"][..]] {
        for reader in ["true", "head -1"] {
            let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("setrows-bisect"));
            cmd.args(args);
            let (code, err) = piped(cmd, reader, dir.path());
            assert_eq!((code, err.as_str()), (0, ""), "{args:?} | {reader}");
        }
    }
}
