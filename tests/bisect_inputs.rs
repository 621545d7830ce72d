//! Every bad input gets one clear line and exit 2, never a panic.
mod common;
use assert_cmd::Command;
use common::*;

fn expect_usage_error(mut cmd: Command, needle: &str) {
    let out = cmd.assert().code(2);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(!stderr.contains("panicked"), "{stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one line expected: {stderr}");
    assert!(lines[0].starts_with("setrows-bisect: error: "), "{stderr}");
    assert!(lines[0].contains(needle), "{needle:?} not in {stderr}");
}

#[test]
fn bad_inputs_are_one_line_usage_errors() {
    let f = Fixture::new(&spec(12, 6));
    let (g, b) = (f.sha(0).to_string(), f.sha(11).to_string());
    let (repo, work) = (f.repo(), f.work());
    let raw = |repo: &std::path::Path, good: &str, bad: &str, work: &std::path::Path| {
        Command::from_std(f.bisect_raw(repo, good, bad, work))
    };

    expect_usage_error(raw(&repo, "no-such-rev", &b, &work), "no-such-rev");
    expect_usage_error(raw(&repo, &g, "HEAD~100", &work), "HEAD~100");
    expect_usage_error(raw(&repo, &b, &b, &work), "same commit");

    // Not ancestor/descendant: both commits are named.
    let out = raw(&repo, &b, &g, &work).assert().code(2);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(stderr.contains(&b) && stderr.contains(&g), "{stderr}");
    assert!(stderr.contains("not an ancestor"), "{stderr}");

    // A subtree that no commit in the range changes: nothing to bisect.
    let mut c = f.bisect(0, 11);
    c.args(["--path", "include"]);
    expect_usage_error(c, "empty range");

    let mut c = f.bisect(0, 11);
    c.args(["--path", "no/such/dir"]);
    expect_usage_error(c, "no/such/dir");

    let mut c = f.bisect(0, 11);
    c.args(["--match", "(unclosed"]);
    expect_usage_error(c, "--match");

    let empty = tempfile::tempdir().unwrap();
    expect_usage_error(raw(empty.path(), &g, &b, &work), "not a git repository");
    expect_usage_error(
        raw(&empty.path().join("missing"), &g, &b, &work),
        "does not exist",
    );

    // A work dir below a regular file cannot be created, even by root: refused naming the flag.
    let file = empty.path().join("plain-file");
    std::fs::write(&file, "x").unwrap();
    expect_usage_error(raw(&repo, &g, &b, &file.join("work")), "--work-dir");

    let mut c = f.bisect(0, 11);
    c.args(["--jobs", "0"]);
    expect_usage_error(c, "--jobs");

    let mut c = f.bisect(0, 11);
    c.arg("--timeout=0");
    expect_usage_error(c, "--timeout");
}

/// Two flags where one would silently drop or replace the other are refused, naming both
/// (issue 37 item 2), before anything is probed.
#[test]
fn contradicting_flags_are_refused_naming_both() {
    let f = Fixture::new(&spec(12, 6));
    let mut c = f.bisect(0, 11);
    c.args(["--first-parent", "--no-first-parent"]);
    let out = c.assert().code(2);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(
        stderr.contains("--first-parent") && stderr.contains("--no-first-parent"),
        "{stderr}"
    );
    let mut c = Command::cargo_bin("setrows-bisect").unwrap();
    c.env_remove("SETROWS_WORK_DIR")
        .arg("--repo")
        .arg(f.repo())
        .args(["--good", f.sha(0), "--bad", f.sha(11), "--work-dir"])
        .arg(f.work())
        .args(["--json", "-", "--report", "-"]);
    expect_usage_error(c, "--report - and --json -");
    assert!(!f.work().exists(), "nothing may run before the refusal");
}

#[test]
fn work_dir_is_the_only_place_written() {
    if !have_cmake() {
        return;
    }
    let f = Fixture::new(&spec(16, 9));
    let before = std::process::Command::new("git")
        .args(["status", "--porcelain", "--ignored"])
        .current_dir(f.repo())
        .output()
        .unwrap();
    f.bisect(0, 15).assert().code(0);
    let after = std::process::Command::new("git")
        .args(["status", "--porcelain", "--ignored"])
        .current_dir(f.repo())
        .output()
        .unwrap();
    assert_eq!(before.stdout, after.stdout);
    let head = std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(f.repo())
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&head.stdout).trim(), f.sha(15));
    assert!(!f.repo().join(".git/worktrees").exists());
}

#[test]
fn infrastructure_failure_is_retried_then_exit_3_and_never_stored() {
    if !have_cmake() {
        return;
    }
    let f = Fixture::new(&spec(12, 6));
    // No `sh` on PATH: the step cannot even start. That is our machinery failing, not the code
    // under test, so it must never become a verdict or a stored result.
    let out = Command::from_std(f.bisect_std(0, 11))
        .env("PATH", "/nonexistent")
        .assert()
        .code(3);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(stderr.contains("infrastructure failure"), "{stderr}");
    assert!(stderr.contains("3 attempts"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    // With a working PATH every probe runs: nothing was stored by the failed attempts.
    f.bisect(0, 11).assert().code(0);
    let r = f.result();
    assert_eq!(r["first_bad"], f.sha(6));
    assert_eq!(r["executed"], r["probes"].as_array().unwrap().len());
}

/// Outputs and the GitHub target are checked before the first probe (issue 12, item 4): an
/// unwritable --report or --json, or a malformed --api-url, is exit 2 in the first second, with
/// nothing probed, not after hours of probing.
#[test]
fn outputs_and_api_url_are_checked_before_any_probe() {
    let f = Fixture::new(&spec(12, 6));
    let counter = f.dir.path().join("probes-run");
    // A script that leaves a trace: if any probe ran, the file exists.
    let script = format!("echo x >> {}; exit 0", counter.display());
    let base = || {
        let mut c = Command::from_std(f.bisect_script(0, 11, &script));
        c.env_remove("GITHUB_TOKEN");
        c
    };
    let mut c = base();
    c.args(["--report", "/nonexistent-dir/r.md"]);
    expect_usage_error(c, "--report /nonexistent-dir/r.md");
    let mut c = base();
    c.arg("--report").arg(f.dir.path());
    expect_usage_error(c, "is a directory");
    let mut c = base();
    c.args(["--post-to", "o/r#1", "--api-url", "ftp://nowhere"])
        .env("GITHUB_TOKEN", "ghp_0123456789abcdef0123456789abcdef0123");
    expect_usage_error(c, "--api-url");
    assert!(
        !counter.exists(),
        "a probe ran before the inputs were checked"
    );
    assert!(!f.work().join("results").exists());
}

/// `--dry-run` says what a bisection would do from the same resolution a real run uses, and
/// runs nothing.
#[test]
fn dry_run_resolves_everything_and_runs_nothing() {
    let f = Fixture::new(&spec(12, 6));
    let counter = f.dir.path().join("probes-run");
    let script = format!("echo x >> {}; exit 0", counter.display());
    let mut c = Command::from_std(f.bisect_script(0, 11, &script));
    c.args(["--dry-run", "--wave-size", "64", "--backend", "hip"]);
    let out = c.assert().code(0);
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    assert!(stdout.contains("candidates: 12"), "{stdout}");
    // 12 candidates, 10 between the endpoints: ceil(log2 11) = 4 midpoints; with one slot
    // --bad is not a fixed extra probe but one built only when the walk toward it pays, and
    // what a --bad that does not reproduce costs is said.
    assert!(
        stdout.contains("expected probes: up to 5 with 1 slot(s): 4 midpoint(s)")
            && stdout.contains("plus --bad once the walk toward it makes that worth a build"),
        "{stdout}"
    );
    assert!(
        stdout.contains("if --bad does not reproduce: reported after 4 probe(s) when builds cost alike, at most 5"),
        "{stdout}"
    );
    assert!(stdout.contains("already in the store: 0 of 12"), "{stdout}");
    assert!(
        stdout.contains("wave_size=64") && stdout.contains("gfx1151"),
        "{stdout}"
    );
    assert!(!counter.exists(), "--dry-run ran a probe");
    // --json FILE gets the plan, never a result (issue 37 item 4: it wrote nothing before).
    assert_eq!(
        read_json(&f.json_path())["schema"],
        "setrows-bisect/plan/1",
        "--dry-run wrote a result, or no plan"
    );
    // Readable lines: no internal structure's debug spelling reaches the user.
    assert!(
        stdout.contains("configuration: set by flags, on the host"),
        "{stdout}"
    );
    for debug in ["Some(", "None", " { ", "Expectations"] {
        assert!(!stdout.contains(debug), "{debug} in:\n{stdout}");
    }

    // Two slots: 10 midpoints in waves of 2 leave 4, 2, then 1 part (5 midpoints, 3 waves),
    // and the first wave holds midpoints, so one endpoint at most as with one slot (issue 45;
    // it was 7 with both endpoints in the first wave); --lazy-endpoints tests at most the one
    // next to the answer.
    let dry = |extra: &[&str]| {
        let mut c = Command::from_std(f.bisect_script(0, 11, &script));
        c.arg("--dry-run").args(extra);
        String::from_utf8_lossy(&c.assert().code(0).get_output().stdout).to_string()
    };
    let two = dry(&["--jobs", "2"]);
    assert!(
        two.contains("expected probes: up to 6 with 2 slot(s): 5 midpoint(s), 3 wave(s)")
            && two.contains("plus --bad once the walk toward it makes that worth a build"),
        "{two}"
    );
    let lazy = dry(&["--lazy-endpoints"]);
    assert!(
        lazy.contains("expected probes: up to 5 with 1 slot(s): 4 midpoint(s)")
            && lazy.contains("plus the endpoint next to the answer (--lazy-endpoints)"),
        "{lazy}"
    );
    assert!(!counter.exists(), "--dry-run ran a probe");
}
