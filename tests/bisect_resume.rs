//! Killing a bisect at any moment and re-running the same command resumes from the store and
//! gives the same answer, without re-running stored probes.
mod common;
use common::*;
use std::time::{Duration, Instant};

fn lines(p: &std::path::Path) -> usize {
    std::fs::read_to_string(p)
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

#[test]
fn sigkill_mid_run_then_rerun_resumes_without_repeating_probes() {
    if !have_cmake() {
        return;
    }
    let f = Fixture::new(&spec(120, 77));
    let count = f.dir.path().join("invocations");
    // Each test invocation leaves one line; the sleep keeps the run long enough to be killed.
    let script = format!(
        "echo probe >> {}; sleep 0.4; \"$WORK/ringbuf_test\"",
        count.display()
    );
    let mut child = f
        .bisect_script(0, 119, &script)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while lines(&count) < 4 {
        assert!(Instant::now() < deadline, "bisect never got going");
        assert!(
            child.try_wait().unwrap().is_none(),
            "finished before it could be killed"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL: no handler, no cleanup
    child.wait().unwrap();
    let before = lines(&count);
    std::thread::sleep(Duration::from_millis(800)); // let a killed probe's orphan finish writing
    let before = before.max(lines(&count));

    assert_cmd::Command::from_std(f.bisect_script(0, 119, &script))
        .assert()
        .code(0);
    let r = f.result();
    assert_eq!(r["first_bad"], f.sha(77));
    let probes = r["probes"].as_array().unwrap();
    let cached = probes.iter().filter(|p| p["cached"] == true).count();
    let executed = r["executed"].as_u64().unwrap() as usize;
    assert!(
        cached >= 3,
        "at least the probes finished before the kill are reused: {cached}"
    );
    assert_eq!(executed + cached, probes.len());
    assert_eq!(
        lines(&count) - before,
        executed,
        "the rerun ran exactly the probes it reports as executed"
    );

    // A third run of the same command answers entirely from the store.
    assert_cmd::Command::from_std(f.bisect_script(0, 119, &script))
        .assert()
        .code(0);
    let r = f.result();
    assert_eq!(r["first_bad"], f.sha(77));
    assert_eq!(r["executed"], 0);
}

#[test]
fn overlapping_second_bisect_reuses_results() {
    if !have_cmake() {
        return;
    }
    let f = Fixture::new(&spec(200, 130));
    f.bisect(0, 199).assert().code(0);
    let first: Vec<String> = f.result()["probes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["sha"].as_str().unwrap().to_string())
        .collect();
    // A narrower range inside the first one, different endpoints.
    f.bisect(40, 180).assert().code(0);
    let r = f.result();
    assert_eq!(r["first_bad"], f.sha(130));
    let probes = r["probes"].as_array().unwrap();
    let reused = probes.iter().filter(|p| p["cached"] == true).count();
    assert!(
        reused * 2 >= probes.len(),
        "{reused} of {} reused; first run probed {first:?}",
        probes.len()
    );
}

#[test]
fn sigint_is_handled_and_resume_gives_the_same_answer() {
    if !have_cmake() {
        return;
    }
    let f = Fixture::new(&spec(100, 33));
    let script = "sleep 0.3; \"$WORK/ringbuf_test\"";
    let child = f
        .bisect_script(0, 99, script)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    // SAFETY: signalling the child we spawned.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let out = child.wait_with_output().unwrap();
    if out.status.code() == Some(0) {
        eprintln!("finished before SIGINT arrived; resume still checked below");
    } else {
        assert_eq!(
            out.status.code(),
            Some(130),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stderr).contains("re-run the same command"));
    }
    assert_cmd::Command::from_std(f.bisect_script(0, 99, script))
        .assert()
        .code(0);
    assert_eq!(f.result()["first_bad"], f.sha(33));
}
