use super::*;
use crate::probe::launch::HostLauncher;

#[test]
fn git_bisect_run_exit_mapping() {
    assert_eq!(classify(Some(0), None, false, ""), Outcome::Pass);
    assert_eq!(classify(Some(125), None, false, ""), Outcome::Untestable);
    assert_eq!(classify(Some(1), None, false, ""), Outcome::WrongResult);
    assert_eq!(classify(Some(127), None, false, ""), Outcome::WrongResult);
    assert_eq!(classify(Some(134), None, false, ""), Outcome::Crash);
    assert_eq!(classify(None, Some(11), false, ""), Outcome::Crash);
    assert_eq!(classify(None, Some(9), true, ""), Outcome::Hang);
    assert_eq!(
        classify(None, Some(6), false, "Memory access fault by GPU node-1"),
        Outcome::GpuFault
    );
}

#[test]
fn signature_prefers_the_cause() {
    let out = "x/src/ggml.c:3677: GGML_ASSERT(c->type == GGML_TYPE_I64) failed\nAborted\n";
    assert_eq!(
        signature(out).as_deref(),
        Some("x/src/ggml.c:3677: GGML_ASSERT(c->type == GGML_TYPE_I64) failed")
    );
    assert_eq!(
        portable_signature("/w/src/a.c:1: error: boom\n", Path::new("/w/src")).as_deref(),
        Some("a.c:1: error: boom")
    );
    assert_eq!(signature("one\ntwo\n").as_deref(), Some("two"));
    assert_eq!(signature(""), None);
}

#[test]
fn named_inputs_of_build_and_test() {
    let b = "cmake -S \"$SRC\" -B . && sh $SRC/scripts/gen.sh";
    assert_eq!(
        named_inputs(Some(b), "\"$WORK/t\" && exit 1 || exit 0"),
        Some(vec!["scripts/gen.sh".to_string()])
    );
    assert_eq!(
        named_inputs(None, "sh ./tests/run.sh data/in.bin; echo ok"),
        Some(vec!["tests/run.sh".to_string(), "data/in.bin".to_string()])
    );
    assert_eq!(named_inputs(None, "make test"), None);
    assert_eq!(named_inputs(None, "cat $SRC"), None);
    assert_eq!(named_inputs(None, "\"$WORK/t\" data/*.bin"), None);
}

#[test]
fn probe_runs_build_in_work_and_test_in_src() {
    let d = tempfile::tempdir().unwrap();
    let (src, work) = (d.path().join("src"), d.path().join("work"));
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("in.txt"), "7").unwrap();
    let p = ScriptProber::new(
        Some("cp \"$SRC/in.txt\" built.txt".into()),
        "test \"$(cat \"$WORK/built.txt\")\" = 7 && echo assert ok-ish && exit 3".into(),
        None,
        Box::new(HostLauncher),
    );
    let log = d.path().join("p.log");
    let req = ProbeRequest {
        commit: "abc",
        checkout: &src,
        build_dir: &work,
        log_path: &log,
        run_name: "t",
        artifacts: None,
    };
    let r = p.probe(&req, &|_| {});
    assert_eq!(r.outcome, Outcome::WrongResult);
    assert_eq!(r.exit_code, Some(3));
    assert_eq!(r.signature.as_deref(), Some("assert ok-ish"));
    let p = ScriptProber::new(
        Some("exit 2".into()),
        "true".into(),
        None,
        Box::new(HostLauncher),
    );
    assert_eq!(p.probe(&req, &|_| {}).outcome, Outcome::BuildFailed);
    // Build-only: the test (which would fail) never starts.
    let mut p = ScriptProber::new(
        Some("touch built.txt".into()),
        "touch \"$WORK/tested\"; exit 1".into(),
        None,
        Box::new(HostLauncher),
    );
    let full = p.identity();
    p.build_only = true;
    assert_ne!(p.identity(), full);
    let r = p.probe(&req, &|_| {});
    assert_eq!(r.outcome, Outcome::Built);
    assert!(work.join("built.txt").is_file() && !work.join("tested").exists());
}
