//! `--jobs auto` through the real binary: the K it chooses on this host (and says why), the
//! builds it measures into `<work>/build-use`, and `--jobs 2`'s builds overlapping while the
//! GPU tests take turns (`<work>/gpu.lock`).

mod common;
use assert_cmd::Command;
use common::*;

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// `setrows-bisect` over `f`'s candidates `good..bad` with this build and test.
fn bisect(f: &Fixture, bad: usize, build: &str, test: &str) -> Command {
    let mut c = Command::cargo_bin("setrows-bisect").unwrap();
    c.arg("--repo")
        .arg(f.repo())
        .args([
            "--good",
            f.sha(0),
            "--bad",
            f.sha(bad),
            "--build",
            build,
            "--script",
            test,
        ])
        .arg("--work-dir")
        .arg(f.work())
        .arg("--json")
        .arg(f.json_path())
        .env_remove("SETROWS_WORK_DIR");
    c
}

fn dry(f: &Fixture) -> String {
    let mut c = Command::from_std(f.bisect_std(0, 11));
    c.args(["--dry-run", "--jobs", "auto"]);
    String::from_utf8_lossy(&c.assert().code(0).get_output().stdout).to_string()
}

#[test]
fn auto_chooses_from_the_cores_and_the_measured_builds_and_says_why() {
    let f = Fixture::new(&spec(12, 7));
    let out = dry(&f);
    // Nothing measured yet: 1 on any host (on 2 cores for the cores' sake).
    assert!(out.contains("with 1 slot(s)"), "{out}");
    let why = if cores() <= 2 {
        format!("slots: --jobs auto: 1 on {} core(s)", cores())
    } else {
        format!(
            "slots: --jobs auto: 1 on {} cores until a build is measured",
            cores()
        )
    };
    assert!(out.contains(&why), "{out}");
    // Builds measured that keep one core busy: still 1 on 2 cores, cores (at most 4) above.
    std::fs::create_dir_all(f.work()).unwrap();
    std::fs::write(
        f.work().join("build-use"),
        r#"{"cpu_s":40.0,"wall_s":40.0,"builds":2}"#,
    )
    .unwrap();
    let out = dry(&f);
    let k = if cores() <= 2 { 1 } else { cores().min(4) };
    assert!(out.contains(&format!("with {k} slot(s)")), "{out}");
    if cores() > 2 {
        assert!(
            out.contains("a build keeps 1.00 busy (2 build(s) measured"),
            "{out}"
        );
    }
}

#[test]
fn bad_jobs_are_one_line_errors_before_any_probe() {
    let f = Fixture::new(&spec(12, 7));
    for bad in ["0", "abc", "-2"] {
        let mut c = Command::from_std(f.bisect_std(0, 11));
        let out = c
            .args(["--jobs", bad])
            .assert()
            .code(2)
            .get_output()
            .clone();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("--jobs"), "{bad}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{bad}: {err}");
        assert!(!f.work().join("checkouts").exists(), "{bad}: a probe ran");
    }
}

#[test]
fn a_run_measures_its_builds_and_the_journal_says_the_k() {
    if !have_cmake() {
        return;
    }
    let f = Fixture::new(&spec(12, 7));
    // A build shorter than a second did almost nothing and is not measured (run::jobs). The
    // demo's incremental builds are that short on an idle machine, and whether its first one
    // is decided the test by the host's speed: every build here takes over a second.
    let build = format!("sleep 1.1; {}", setrows_bisect::cli::demo::build_command());
    let test = setrows_bisect::cli::demo::TEST_COMMAND;
    let out = bisect(&f, 11, &build, test)
        .args(["--jobs", "auto"])
        .assert()
        .code(0)
        .get_output()
        .clone();
    assert_eq!(f.result()["first_bad"], f.sha(7));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--jobs auto: 1 on"), "{err}");
    // What was measured is recorded: CPU and wall seconds of the builds that ran, and how many.
    // How much of a core they used depends on the host's load, so no ratio is asserted
    // (figures go to BENCHMARKS.md).
    let u: serde_json::Value = read_json(&f.work().join("build-use"));
    let (cpu, wall) = (u["cpu_s"].as_f64().unwrap(), u["wall_s"].as_f64().unwrap());
    assert!(cpu.is_finite() && cpu > 0.0, "{u}");
    assert!(wall.is_finite() && wall > 0.0, "{u}");
    let executed = f.result()["executed"].as_u64().unwrap();
    let builds = u["builds"].as_u64().unwrap();
    assert!(
        builds >= 1 && builds <= executed,
        "{u}, {executed} probes ran"
    );
}

#[test]
fn two_slots_build_at_once_and_test_in_turns() {
    if !have_cmake() {
        return;
    }
    let f = Fixture::new(&spec(40, 23));
    let d = f.dir.path().join("marks");
    std::fs::create_dir_all(&d).unwrap();
    let d = d.display();
    // Each build marks itself for a second and counts the marks it sees; each test holds a
    // directory a concurrent test could not create.
    let build = format!(
        "touch \"{d}/b.$$\"; sleep 1; ls \"{d}\" | grep -c '^b\\.' >> \"{d}/seen\"; rm \"{d}/b.$$\"; {}",
        setrows_bisect::cli::demo::build_command()
    );
    let test = format!(
        "mkdir \"{d}/gpu\" || echo overlap >> \"{d}/overlap\"; sleep 0.5; {}; rc=$?; rmdir \"{d}/gpu\"; exit $rc",
        setrows_bisect::cli::demo::TEST_COMMAND
    );
    bisect(&f, 39, &build, &test)
        .args(["--jobs", "2"])
        .assert()
        .code(0);
    assert_eq!(f.result()["first_bad"], f.sha(23));
    let seen = std::fs::read_to_string(f.dir.path().join("marks/seen")).unwrap();
    assert!(
        seen.lines().any(|l| l.trim() == "2"),
        "builds never overlapped: {seen}"
    );
    assert!(
        !f.dir.path().join("marks/overlap").exists(),
        "two tests ran at once"
    );
}
