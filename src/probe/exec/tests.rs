//! `exec::run` against real processes: exit codes, timeouts, trees, credentials.

use super::*;
use std::cell::Cell;

fn sh(script: &str, dir: &Path) -> Cmd {
    Cmd {
        argv: vec!["sh".into(), "-c".into(), script.into()],
        cwd: dir.to_path_buf(),
        env: vec![("PROBE_VAR".into(), "42".into())],
    }
}

#[test]
fn exit_codes_signals_and_output() {
    let d = tempfile::tempdir().unwrap();
    let log = d.path().join("logs/a.log");
    let r = run(
        &sh("echo out; echo err >&2; exit 3", d.path()),
        None,
        &log,
        &|| {},
    )
    .unwrap();
    assert_eq!((r.exit_code, r.signal, r.timed_out), (Some(3), None, false));
    assert!(
        r.output.contains("out\n") && r.output.contains("err\n"),
        "{}",
        r.output
    );
    let r = run(
        &sh("echo $PROBE_VAR; kill -SEGV $$", d.path()),
        None,
        &log,
        &|| {},
    )
    .unwrap();
    assert_eq!((r.exit_code, r.signal), (None, Some(libc::SIGSEGV)));
    assert_eq!(r.output.trim(), "42", "only this step's output");
    let whole = std::fs::read_to_string(&log).unwrap();
    assert!(
        whole.contains("out") && whole.contains("42"),
        "log keeps everything"
    );
}

#[test]
fn timeout_kills_the_whole_tree() {
    let d = tempfile::tempdir().unwrap();
    let marker = d.path().join("survivor");
    let script = format!("(sleep 3; touch {}) & sleep 30", marker.display());
    let called = Cell::new(false);
    let r = run(
        &sh(&script, d.path()),
        Some(Duration::from_millis(200)),
        &d.path().join("t.log"),
        &|| called.set(true),
    )
    .unwrap();
    assert!(r.timed_out && called.get());
    std::thread::sleep(Duration::from_millis(3500));
    assert!(!marker.exists(), "a grandchild survived the timeout");
}

#[test]
fn missing_program_is_an_error_not_a_result() {
    let d = tempfile::tempdir().unwrap();
    let cmd = Cmd {
        argv: vec!["/nonexistent/prog".into()],
        cwd: d.path().into(),
        env: vec![],
    };
    let err = run(&cmd, None, &d.path().join("x.log"), &|| {}).unwrap_err();
    assert!(err.to_string().contains("/nonexistent/prog"));
}

#[test]
fn tokens_never_reach_the_step() {
    let d = tempfile::tempdir().unwrap();
    let mut cmd = sh(
        "echo \"[${GITHUB_TOKEN:-unset}] [${GH_TOKEN:-unset}] [$PROBE_VAR]\"",
        d.path(),
    );
    // Even a caller that forwards them explicitly cannot leak them into the probe.
    cmd.env.push(("GH_TOKEN".into(), "ghp_explicit".into()));
    std::env::set_var("GITHUB_TOKEN", "ghp_inherited");
    let r = run(&cmd, None, &d.path().join("s.log"), &|| {}).unwrap();
    std::env::remove_var("GITHUB_TOKEN");
    assert_eq!(r.output.trim(), "[unset] [unset] [42]");
}

#[test]
fn credentials_in_step_output_are_redacted_in_the_output_and_the_log() {
    let d = tempfile::tempdir().unwrap();
    let secret = "ghp_redact_me_0123456789";
    crate::probe::secrets::register_redaction(secret);
    let mut cmd = sh("echo \"got $LEAKED here\"; echo \"$LEAKED\" >&2", d.path());
    cmd.env.push(("LEAKED".into(), secret.into()));
    let log = d.path().join("r.log");
    let r = run(&cmd, None, &log, &|| {}).unwrap();
    assert!(!r.output.contains(secret), "{}", r.output);
    assert!(r.output.contains("got [REDACTED] here"), "{}", r.output);
    let whole = std::fs::read_to_string(&log).unwrap();
    assert!(
        !whole.contains(secret) && whole.matches("[REDACTED]").count() == 2,
        "{whole}"
    );
}

#[test]
fn redaction_streams_across_chunk_boundaries() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("big.log");
    let secret = "tok_across_the_boundary".to_string();
    let mut body = b"header\n".to_vec();
    body.extend(std::iter::repeat_n(b'x', (1 << 20) - 10));
    body.extend_from_slice(secret.as_bytes());
    body.extend(std::iter::repeat_n(b'y', 5000));
    body.extend_from_slice(secret.as_bytes());
    std::fs::write(&path, &body).unwrap();
    let mut f = OpenOptions::new()
        .read(true)
        .append(true)
        .open(&path)
        .unwrap();
    redact_log(&mut f, &path, 7, std::slice::from_ref(&secret)).unwrap();
    let out = std::fs::read(&path).unwrap();
    assert_eq!(
        out.len(),
        body.len() - 2 * secret.len() + 2 * "[REDACTED]".len()
    );
    assert!(out.starts_with(b"header\n"));
    assert_eq!(out.windows(10).filter(|w| *w == b"[REDACTED]").count(), 2);
}

#[test]
fn timeout_kills_setsid_descendants_too() {
    let d = tempfile::tempdir().unwrap();
    let marker = d.path().join("escaped");
    // In its own session and group: the group kill alone misses it.
    let script = format!(
        "setsid sh -c 'sleep 2; touch {}' & sleep 30",
        marker.display()
    );
    let r = run(
        &sh(&script, d.path()),
        Some(Duration::from_millis(300)),
        &d.path().join("t.log"),
        &|| {},
    )
    .unwrap();
    assert!(r.timed_out);
    std::thread::sleep(Duration::from_millis(2500));
    assert!(
        !marker.exists(),
        "a setsid'd descendant survived the timeout"
    );
}

#[test]
fn disk_full_is_one_text_rule() {
    let r = |out: &str| RunResult {
        exit_code: Some(1),
        signal: None,
        timed_out: false,
        duration: Duration::ZERO,
        output: out.into(),
    };
    assert!(out_of_space(&r("dd: error writing 'x': No space left on device")).is_some());
    assert!(out_of_space(&r("error: boom")).is_none());
    assert!(disk_full("NO SPACE LEFT ON DEVICE"));
}

#[test]
fn a_watcher_sees_each_output_line_of_this_step_only() {
    let d = tempfile::tempdir().unwrap();
    let log = d.path().join("w.log");
    // An earlier step's output in the same log is not this step's.
    run(
        &sh("echo '[9/9] earlier step'", d.path()),
        None,
        &log,
        &|| {},
    )
    .unwrap();
    let seen = std::sync::Mutex::new(Vec::<String>::new());
    let watch = |l: &str| seen.lock().unwrap().push(l.to_string());
    let cmd = sh(
        "echo '[1/3] a'; sleep 0.4; printf '[2/3] b\\r[3/3] c\\nlast without newline'",
        d.path(),
    );
    let r = run_watched(&cmd, None, &log, &|| {}, Some(&watch)).unwrap();
    assert!(r.success());
    assert_eq!(
        seen.into_inner().unwrap(),
        ["[1/3] a", "[2/3] b", "[3/3] c", "last without newline"]
    );
}
