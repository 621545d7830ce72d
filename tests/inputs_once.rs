//! Every input of every subcommand is checked before anything is made (checkout, build,
//! container, directory): one line naming the flag and the fix, exit 2. And the outputs go
//! where they are asked to: `--json -` is standard output, a pipe is written in place.
mod common;
use assert_cmd::Command;
use common::*;
use std::path::Path;

fn bin() -> Command {
    let mut c = Command::cargo_bin("setrows-bisect").expect("binary");
    c.env_remove("SETROWS_WORK_DIR");
    c
}

/// Exit 2 and one line on stderr that contains every one of `needles`.
fn one_line_usage(mut c: Command, needles: &[&str]) -> String {
    let out = c.assert().code(2);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one line expected:\n{stderr}");
    for n in needles {
        assert!(lines[0].contains(n), "{n:?} not in {stderr}");
    }
    stderr
}

/// Flags that mean nothing for the chosen backend or probe, and a CUDA target that is not an
/// sm number, are refused before the work dir exists.
#[test]
fn flags_that_mean_nothing_are_refused() {
    let f = Fixture::new(&spec(8, 4));
    for (extra, needles) in [
        (
            &["--backend", "cpu", "--gpu-target", "banana"][..],
            &["--gpu-target banana", "--backend cpu"][..],
        ),
        (
            &["--backend", "cuda", "--wave-size", "64"],
            &["--wave-size 64", "--backend cuda"],
        ),
        (
            &["--backend", "cpu", "--graphs", "on"],
            &["--graphs on", "--backend cpu"],
        ),
        (&["--repro-arg", "--steps"], &["--repro-arg", "--script"]),
        (
            &["--backend", "cuda", "--gpu-target", "banana"],
            &["--gpu-target banana", "sm number"],
        ),
    ] {
        let mut c = f.bisect(0, 7);
        c.args(extra);
        one_line_usage(c, needles);
        assert!(!f.work().exists(), "{extra:?}: the work dir was made");
    }
    // A --config's own value is held to the same rule once a flag changed the backend: a HIP
    // configuration's graphs on the CPU would be keyed and never read.
    let mut c = f.bisect(0, 7);
    c.args(["--config", "df7a2619", "--backend", "cpu", "--dry-run"]);
    one_line_usage(c, &["--config df7a2619", "--graphs on", "--backend cpu"]);
    assert!(!f.work().exists(), "the work dir was made");
    // What does mean something still runs (a plan here).
    let mut c = f.bisect(0, 7);
    c.args(["--backend", "cuda", "--gpu-target", "90a", "--dry-run"]);
    c.assert().code(0);
}

/// One rule per number: clap's and the later check agree, and a negative number names its flag.
#[test]
fn numbers_follow_one_rule_and_negative_ones_name_their_flag() {
    let f = Fixture::new(&spec(8, 4));
    let mut c = f.bisect(0, 7);
    c.args(["--confidence", "0.3"]);
    one_line_usage(c, &["--confidence", "0.5"]);
    for (flag, v) in [("--jobs", "-1"), ("--repeat", "-2"), ("--validate", "-1")] {
        let mut c = f.bisect(0, 7);
        c.args([flag, v]);
        let e = one_line_usage(c, &[flag, "out of range"]);
        assert!(!e.contains("unexpected argument"), "{e}");
    }
    let mut c = bin();
    c.args(["matrix", "--retries", "-1", "--list"]);
    one_line_usage(c, &["--retries", "out of range"]);
    assert!(!f.work().exists());
}

/// A missing `--matrix FILE` says so (not `matrix.toml:0:0: key -`).
#[test]
fn a_missing_matrix_file_is_named() {
    let d = tempfile::tempdir().unwrap();
    let missing = d.path().join("nope.toml");
    let mut c = bin();
    c.args(["matrix", "--list", "--matrix"]).arg(&missing);
    let e = one_line_usage(c, &["--matrix", "no such file"]);
    assert!(!e.contains(":0:0"), "{e}");
}

/// `matrix --format json` without `--list` starts nothing; an unwritable `--out` is found
/// before the first cell.
#[test]
fn matrix_run_inputs_are_checked_before_any_cell() {
    let d = tempfile::tempdir().unwrap();
    let work = d.path().join("work");
    let mut c = bin();
    c.current_dir(d.path())
        .args([
            "matrix",
            "--format",
            "json",
            "--engine",
            "none",
            "--work-dir",
        ])
        .arg(&work);
    one_line_usage(c, &["--format json", "--list"]);
    let file = d.path().join("plain");
    std::fs::write(&file, "x").unwrap();
    let mut c = bin();
    c.current_dir(d.path())
        .args(["matrix", "--rev", "HEAD", "--engine", "none", "--work-dir"])
        .arg(&work)
        .arg("--out")
        .arg(file.join("results"));
    one_line_usage(c, &["--out", "not a directory"]);
    assert!(!work.exists(), "the work dir was made");
}

/// `man --out-dir` names the path and is the user's input (exit 2).
#[test]
fn man_out_dir_errors_name_the_path() {
    let d = tempfile::tempdir().unwrap();
    let file = d.path().join("plain");
    std::fs::write(&file, "x").unwrap();
    let mut c = bin();
    c.args(["man", "--out-dir"]).arg(file.join("man1"));
    one_line_usage(c, &["--out-dir", &file.display().to_string()]);
}

/// `report --junit` into a directory that does not exist: exit 2 before anything is read or
/// posted.
#[test]
fn report_junit_is_checked_first() {
    let d = tempfile::tempdir().unwrap();
    let mut c = bin();
    c.args(["report", "--results"])
        .arg(d.path().join("missing.json"))
        .arg("--junit")
        .arg(d.path().join("no/dir/junit.xml"));
    one_line_usage(c, &["--junit", "does not exist"]);
}

/// bisect-config's commit-level flags are checked before the axis ladder runs: a bad
/// `--good-rev` or `--path` leaves no work dir behind.
#[test]
fn bisect_config_checks_its_commit_flags_first() {
    let f = Fixture::new(&spec(8, 4));
    let work = f.dir.path().join("cfg-work");
    let run = |extra: &[&str]| {
        let mut c = bin();
        c.current_dir(f.dir.path())
            .args([
                "bisect-config",
                "--axis",
                "wave_size",
                "--engine",
                "none",
                "--repo",
            ])
            .arg(f.repo())
            .arg("--work-dir")
            .arg(&work)
            .arg("--out")
            .arg(f.dir.path().join("out"))
            .args(extra);
        c
    };
    one_line_usage(run(&["--good-rev", "no-such-rev"]), &["no-such-rev"]);
    let good = f.sha(0).to_string();
    one_line_usage(
        run(&["--good-rev", &good, "--path", "no/such/dir"]),
        &["--path", "no/such/dir"],
    );
    assert!(
        !work.exists(),
        "the ladder started before the commit flags were checked"
    );
}

/// `--dry-run` makes nothing (no work dir, so no results/ or ccache/) and prints the plan in
/// words, not an internal structure's debug spelling.
#[test]
fn dry_run_makes_nothing_and_speaks_english() {
    let f = Fixture::new(&spec(8, 4));
    let mut c = f.bisect(0, 7);
    c.arg("--dry-run");
    let out = c.assert().code(0);
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    assert!(!f.work().exists(), "--dry-run made the work dir:\n{stdout}");
    assert!(stdout.contains("runs: on the host"), "{stdout}");
    assert!(stdout.contains("already in the store: 0 of 8"), "{stdout}");
    for debug in ["\"ccache\":", "Some(", "{\""] {
        assert!(!stdout.contains(debug), "{debug} in:\n{stdout}");
    }
}

/// `--json -` is standard output (the report goes to stderr then), and a FIFO given as
/// `--json` is written in place, never replaced by a regular file.
#[test]
fn json_goes_to_stdout_or_into_a_pipe_in_place() {
    let f = Fixture::new(&spec(6, 3));
    let plain = |json: &Path| {
        let mut c = bin();
        c.arg("--repo")
            .arg(f.repo())
            .args(["--good", f.sha(0), "--bad", f.sha(5)])
            .args(["--script", "exit 0", "--work-dir"])
            .arg(f.work())
            .arg("--json")
            .arg(json);
        c
    };
    let out = plain(Path::new("-")).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not the JSON ({e}):\n{}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    assert!(v["schema"].as_str().unwrap_or("").contains("bisect"), "{v}");
    assert!(!f.repo().join("-").exists() && !Path::new("-").exists());

    let fifo = f.dir.path().join("result.fifo");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
    };
    let out = plain(&fifo).output().unwrap();
    // Had the run not opened the FIFO, the reader would wait forever: open it once ourselves
    // (non-blocking; it fails when the reader is already done) so it ends with what it got.
    use std::os::unix::fs::OpenOptionsExt;
    let _ = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&fifo);
    let text = reader.join().unwrap();
    assert!(
        serde_json::from_str::<serde_json::Value>(&text).is_ok(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    use std::os::unix::fs::FileTypeExt;
    assert!(
        std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo(),
        "the FIFO was replaced"
    );
}

/// A ggml-shaped repository of two commits (the bundled reproducer's probe accepts it; nothing
/// here is built).
fn ggml_like() -> (tempfile::TempDir, String, String) {
    let d = tempfile::tempdir().unwrap();
    let repo = d.path().join("ggml");
    std::fs::create_dir_all(repo.join("include")).unwrap();
    git(d.path(), &["init", "-q", "ggml"]);
    let mut shas = Vec::new();
    for i in 0..2 {
        std::fs::write(repo.join("include/ggml.h"), format!("// {i}\n")).unwrap();
        std::fs::write(repo.join("CMakeLists.txt"), "project(ggml)\n").unwrap();
        git(&repo, &["add", "-A"]);
        git(
            &repo,
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "commit",
                "-q",
                "-m",
                &format!("c{i}"),
            ],
        );
        shas.push(git(&repo, &["rev-parse", "HEAD"]).trim().to_string());
    }
    (d, shas[0].clone(), shas[1].clone())
}

/// `--backend hip` where no ROCm is installed: one line saying so (not hipconfig's raw
/// output); `--dry-run` asks no toolchain and says a run will. PATH holds only `sh`, so the
/// host has no hipconfig whatever this machine has installed.
#[test]
fn hip_without_rocm_is_one_line_and_a_plan_asks_nothing() {
    let (d, good, bad) = ggml_like();
    let bare = d.path().join("bin");
    std::fs::create_dir_all(&bare).unwrap();
    std::os::unix::fs::symlink("/bin/sh", bare.join("sh")).unwrap();
    let work = d.path().join("work");
    let run = |extra: &[&str]| {
        let mut c = bin();
        c.env("PATH", &bare)
            .arg("--repo")
            .arg(d.path().join("ggml"))
            .args([
                "--good",
                &good,
                "--bad",
                &bad,
                "--backend",
                "hip",
                "--work-dir",
            ])
            .arg(&work)
            .args(extra);
        c
    };
    let out = run(&[]).assert().code(3);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    let errors: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    let last = errors.last().copied().unwrap_or_default();
    assert!(
        last.contains("--backend hip needs a ROCm toolchain"),
        "{stderr}"
    );
    assert!(
        !errors.iter().any(|l| !l.starts_with("setrows-bisect")),
        "raw tool output reached the user:\n{stderr}"
    );
    std::fs::remove_dir_all(&work).ok();
    let out = run(&["--dry-run"]).assert().code(0);
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    assert!(
        stdout.contains("toolchain: a run asks hipconfig"),
        "{stdout}"
    );
    assert!(
        stdout.contains("already in the store: not counted"),
        "{stdout}"
    );
    assert!(!work.exists(), "--dry-run made the work dir");
}
