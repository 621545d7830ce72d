//! Issue 12, "nothing leaks, nothing lies under faults": the real binary against hostile or
//! faulty probes. A probe cannot read the tool's credentials; a full disk is an infrastructure
//! error, never a stored skip; no process a probe started outlives its step or the tool; numeric
//! flags out of range are one-line usage errors.

mod gitcommit;

use gitcommit::commit_all;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

/// `n` commits; `state` is `good` before `first_bad`, `bad` from it on.
fn history(dir: &Path, n: usize, first_bad: usize) -> Vec<String> {
    let repo = git2::Repository::init(dir).unwrap();
    (0..n)
        .map(|i| {
            let state = if i >= first_bad { "bad" } else { "good" };
            std::fs::write(dir.join("state"), format!("{state}\n")).unwrap();
            std::fs::write(dir.join("n"), format!("{i}\n")).unwrap();
            commit_all(&repo, &format!("c{i}"))
        })
        .collect()
}

/// A value no other process on the machine carries.
fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{prefix}{}x{nanos}", std::process::id())
}

struct Fx {
    dir: tempfile::TempDir,
    shas: Vec<String>,
}

impl Fx {
    fn new(n: usize, first_bad: usize) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let shas = history(&dir.path().join("repo"), n, first_bad);
        Fx { dir, shas }
    }
    fn p(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    fn cmd(&self, script: &str, extra: &[&str]) -> std::process::Command {
        let mut c = std::process::Command::new(assert_cmd::cargo::cargo_bin("setrows-bisect"));
        for k in [
            "GITHUB_TOKEN",
            "GH_TOKEN",
            "GITHUB_PAT",
            "GITHUB_ACTIONS",
            "GITHUB_STEP_SUMMARY",
            "SETROWS_WORK_DIR",
            "SETROWS_MIN_FREE_MB",
        ] {
            c.env_remove(k);
        }
        c.arg("bisect")
            .args(["--good", &self.shas[0], "--bad", self.shas.last().unwrap()])
            .arg("--repo")
            .arg(self.p("repo"))
            .arg("--work-dir")
            .arg(self.p("work"))
            .arg("--json")
            .arg(self.p("result.json"))
            .arg("--report")
            .arg(self.p("report.md"))
            .args(["--script", script])
            .args(extra);
        c
    }
}

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        match e.file_type() {
            Ok(t) if t.is_dir() => files_under(&p, out),
            Ok(t) if t.is_file() => out.push(p),
            _ => {}
        }
    }
}

fn occurrences(hay: &[u8], needle: &str) -> usize {
    hay.windows(needle.len())
        .filter(|w| *w == needle.as_bytes())
        .count()
}

#[test]
fn a_hostile_probe_cannot_read_the_token_from_any_process() {
    let f = Fx::new(8, 5);
    let token = unique("ghp_leaktest");
    // Everything a same-uid probe can reach: every environ, the parent's explicitly, and the
    // same through /proc/<ancestor> walking up from itself.
    let script = r#"for e in /proc/[0-9]*/environ; do tr '\0' '\n' < "$e" 2>/dev/null; done
tr '\0' '\n' < /proc/$PPID/environ
p=$$; while [ "$p" -gt 1 ] 2>/dev/null; do cat /proc/$p/environ 2>/dev/null | tr '\0' '\n' >&2; p=$(awk '/^PPid:/{print $2}' /proc/$p/status); done
env | grep -i token
test "$(cat state)" = good"#;
    let out = f
        .cmd(script, &["--jobs", "2"])
        .env("GITHUB_TOKEN", &token)
        .env("GH_TOKEN", format!("{token}-gh"))
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let mut seen = occurrences(stdout.as_bytes(), &token) + occurrences(stderr.as_bytes(), &token);
    let mut leaked = Vec::new();
    let mut files = vec![f.p("result.json"), f.p("report.md")];
    files_under(&f.p("work"), &mut files);
    assert!(files.len() > 4, "{files:?}");
    let mut logs_read = 0;
    for p in &files {
        let bytes = std::fs::read(p).unwrap();
        if p.extension().is_some_and(|e| e == "log") {
            logs_read += 1;
        }
        let n = occurrences(&bytes, &token);
        if n > 0 {
            leaked.push(p.display().to_string());
        }
        seen += n;
    }
    assert!(logs_read > 0, "the probe logs were looked at: {files:?}");
    // Not hidden by the redaction either: the probe never saw the value at all.
    let redacted: usize = files
        .iter()
        .map(|p| occurrences(&std::fs::read(p).unwrap(), "[REDACTED]"))
        .sum();
    assert_eq!(
        redacted, 0,
        "the value reached the probe (and was only redacted)"
    );
    assert_eq!(seen, 0, "token leaked to stdout/stderr or {leaked:?}");
}

/// Is any process alive whose command line contains `marker`? (Zombies have an empty one.)
fn alive(marker: &str) -> Vec<i32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) {
            if occurrences(&cmd, marker) > 0 {
                out.push(pid);
            }
        }
    }
    out
}

fn kill_all(pids: &[i32]) {
    for &p in pids {
        let _ = std::process::Command::new("kill")
            .args(["-9", &p.to_string()])
            .status();
    }
}

#[test]
fn a_setsid_grandchild_does_not_survive_the_timeout() {
    let f = Fx::new(3, 2);
    // A unique sleep length is the marker: it names both the setsid shell and its sleep.
    let secs = format!("300.{}", std::process::id());
    let script = format!("setsid sh -c 'sleep {secs}; echo done' & sleep 60");
    let out = f.cmd(&script, &["--timeout", "1"]).output().unwrap();
    let (stdout, stderr) = text(&out);
    std::thread::sleep(Duration::from_millis(300));
    let left = alive(&secs);
    kill_all(&left);
    assert!(
        left.is_empty(),
        "{} process(es) escaped the timeout\n{stdout}\n{stderr}",
        left.len()
    );
}

#[test]
fn a_probe_dies_with_a_sigkilled_tool() {
    let f = Fx::new(3, 2);
    let secs = format!("301.{}", std::process::id());
    let started = f.p("started");
    // Not the shell's last command, so `sleep` is a grandchild of the tool, in the step's
    // process group; plus a setsid'd one in its own session.
    let script = format!(
        "setsid sh -c 'sleep {secs}; echo x' & touch '{}'; sleep {secs}; echo after",
        started.display()
    );
    let mut child = f
        .cmd(&script, &[])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !started.exists() {
        assert!(Instant::now() < deadline, "the probe never started");
        assert!(child.try_wait().unwrap().is_none(), "tool exited early");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    assert!(!alive(&secs).is_empty(), "the probe is running");
    child.kill().unwrap(); // SIGKILL: no handler runs
    child.wait().unwrap();
    // A liveness bound, not a timing: the loop ends as soon as the last one is gone.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut left = alive(&secs);
    while !left.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        left = alive(&secs);
    }
    kill_all(&left);
    assert!(
        left.is_empty(),
        "{} probe process(es) outlived the tool",
        left.len()
    );
}

/// Mounts a small tmpfs (root only); unmounted on drop.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Option<Self> {
        std::fs::create_dir_all(dir).unwrap();
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Tmpfs(dir.to_path_buf()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

fn store_text(work: &Path) -> String {
    let mut files = Vec::new();
    files_under(work, &mut files);
    files
        .iter()
        .filter(|p| !p.to_string_lossy().contains("/checkouts/"))
        .filter(|p| p.extension().is_none_or(|e| e != "log"))
        .map(|p| String::from_utf8_lossy(&std::fs::read(p).unwrap_or_default()).into_owned())
        .collect()
}

#[test]
fn a_full_disk_during_the_build_is_an_infra_error_not_a_stored_skip() {
    let f = Fx::new(8, 5);
    let Some(_fs) = Tmpfs::mount(&f.p("work"), "24m") else {
        eprintln!("skipped: cannot mount a tmpfs (not root?); the floor test covers the rule");
        return;
    };
    let full = f.p("disk-is-full");
    std::fs::write(&full, "").unwrap();
    // While the flag exists the build fills the disk (dd says "No space left on device"),
    // cleans up after itself and fails.
    let build = format!(
        "if [ -e '{}' ]; then dd if=/dev/zero of=fill bs=1M count=64; rc=$?; rm -f fill; exit $rc; fi",
        full.display()
    );
    let cmd = |f: &Fx| {
        let mut c = f.cmd("test \"$(cat state)\" = good", &["--build", &build]);
        c.env("SETROWS_MIN_FREE_MB", "0");
        c
    };
    let out = cmd(&f).output().unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(3), "{stdout}\n{stderr}");
    assert!(
        stderr.to_lowercase().contains("no space left on device"),
        "{stderr}"
    );
    assert!(!store_text(&f.p("work")).contains("build_failed"));
    // Space is back: the rerun probes for real and finds the culprit (nothing stale reused).
    std::fs::remove_file(&full).unwrap();
    let out = cmd(&f).output().unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(f.p("result.json")).unwrap()).unwrap();
    assert_eq!(r["first_bad"], f.shas[5]);
}

#[test]
fn free_space_below_the_floor_stops_before_the_step() {
    let f = Fx::new(4, 2);
    let ran = f.p("ran");
    let out = f
        .cmd(
            &format!("touch '{}'; test \"$(cat state)\" = good", ran.display()),
            &["--build", "true"],
        )
        .env("SETROWS_MIN_FREE_MB", "999999999999")
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(3), "{stdout}\n{stderr}");
    assert!(stderr.contains("free"), "{stderr}");
    assert!(!ran.exists(), "no step runs on a full disk");
    assert!(!store_text(&f.p("work")).contains("build_failed"));
}

fn bin() -> assert_cmd::Command {
    assert_cmd::Command::cargo_bin("setrows-bisect").unwrap()
}

/// A usage error: exit 2, one line, in the tool's own words.
fn one_line_usage_error(args: &[&str]) -> String {
    let out = bin().args(args).output().unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stdout}\n{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
    assert!(
        stderr.starts_with("setrows-bisect: error: "),
        "{args:?}: {stderr}"
    );
    stderr
}

#[test]
fn numeric_flags_out_of_range_are_one_line_usage_errors() {
    let g = ["--good", "a", "--bad", "b", "--script", "true"];
    let with = |extra: &[&'static str]| -> Vec<&'static str> {
        let mut v: Vec<&str> = vec!["bisect"];
        v.extend(g);
        v.extend(extra);
        v
    };
    for bad in [
        &["--timeout", "1e20"][..],
        &["--timeout", "-1"],
        &["--timeout", "NaN"],
        &["--timeout", "inf"],
        &["--jobs", "0"],
        &["--jobs", "100000"],
        &["--repeat", "0"],
        &["--confidence", "1"],
        &["--confidence", "0"],
        &["--confidence", "0.9", "--max-runs", "0"],
        &["--validate", "1000000"],
    ] {
        let err = one_line_usage_error(&with(bad));
        assert!(
            err.contains(bad[0]) || err.contains(bad[bad.len() - 2]),
            "{err}"
        );
    }
    one_line_usage_error(&["demo", "--commits", "0"]);
    one_line_usage_error(&["demo", "--commits", "100000000"]);
    one_line_usage_error(&["demo", "--jobs", "0"]);
    one_line_usage_error(&["matrix", "--timeout", "0"]);
    one_line_usage_error(&["matrix", "--timeout", "99999999999999"]);
    one_line_usage_error(&["matrix", "--retries", "1000"]);
    one_line_usage_error(&["--no-such-flag"]);
    one_line_usage_error(&["bisect", "--good", "a"]);
    // --help and --version are not errors and keep clap's own output.
    let out = bin().arg("--help").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("Usage:"));
    let out = bin().arg("--version").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("setrows-bisect "));
}
