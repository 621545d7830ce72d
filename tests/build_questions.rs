//! Build questions on real generated C/CMake histories: `--regress build` (the new behaviour is
//! "the build fails"; no test runs) and `matrix --build-only` (a compile check where no GPU
//! exists). The histories come from the demo's generator: a range where the build is broken (a
//! constant used before the header defining it lands) and a planted behaviour change the test
//! program would catch, so a test that ran would show.
//!
//! "No test ran" is proven, not assumed: the configuration's test script writes a marker file,
//! and the same configuration asked a test question writes it.
mod common;
mod gitcommit;
use common::*;
use gitcommit::commit_all;

use assert_cmd::Command;
use std::path::{Path, PathBuf};

/// A CPU configuration on the host whose probe is the demo's build and a test that leaves
/// `marker` behind before running the demo's test program; two launch settings, so a compile
/// check can show that configurations which build alike share one build.
fn matrix_toml(marker: &Path) -> String {
    format!(
        r#"
[probe]
kind = "script"
build = '{build}'
script = 'touch "{marker}"; "$WORK/ringbuf_test"'
[launch.plain]
[launch.blocking]
hip_launch_blocking = true
[params.p]
args = []
[matrix]
backend = ["cpu"]
launch = ["plain", "blocking"]
params = ["p"]
"#,
        build = setrows_bisect::cli::demo::build_command(),
        marker = marker.display()
    )
}

struct Setup {
    f: Fixture,
    conf: PathBuf,
    marker: PathBuf,
    ids: Vec<String>,
}

fn setup(spec: &HistorySpec) -> Setup {
    let f = Fixture::new(spec);
    let marker = f.dir.path().join("a-test-ran");
    let conf = f.dir.path().join("m.toml");
    let text = matrix_toml(&marker);
    std::fs::write(&conf, &text).unwrap();
    let m = setrows_bisect::core::matrix::parse("m.toml", &text).unwrap();
    let ids = m.configs.iter().map(|c| c.id.clone()).collect();
    Setup {
        f,
        conf,
        marker,
        ids,
    }
}

fn bin(s: &Setup) -> Command {
    let mut c = Command::cargo_bin("setrows-bisect").unwrap();
    c.current_dir(s.f.dir.path())
        .env("SETROWS_WORK_DIR", s.f.work())
        .env_remove("GITHUB_STEP_SUMMARY");
    c
}

/// `setrows-bisect --config ID` over `good..bad` of the fixture, JSON to the fixture's path.
fn bisect_config(s: &Setup, good: usize, bad: usize, regress: &str) -> Command {
    let mut c = bin(s);
    c.arg("--repo")
        .arg(s.f.repo())
        .args(["--good", s.f.sha(good), "--bad", s.f.sha(bad)])
        .args(["--config", &s.ids[0], "--matrix"])
        .arg(&s.conf)
        .args(["--regress", regress, "--json"])
        .arg(s.f.json_path());
    c
}

fn stdout(a: &assert_cmd::assert::Assert) -> String {
    String::from_utf8_lossy(&a.get_output().stdout).into_owned()
}

fn stderr(a: &assert_cmd::assert::Assert) -> String {
    String::from_utf8_lossy(&a.get_output().stderr).into_owned()
}

fn probes(r: &serde_json::Value) -> Vec<serde_json::Value> {
    r["probes"].as_array().unwrap().clone()
}

#[test]
fn regress_build_finds_the_first_broken_build_runs_no_test_and_keeps_its_own_results() {
    if !have_cmake() {
        return;
    }
    // Builds break at 5 (a constant used before its header lands at 40); the test program
    // fails from 45 on.
    let mut spec = spec(64, 45);
    spec.broken = Some((5, 40));
    let s = setup(&spec);

    let a = bisect_config(&s, 0, 20, "build").assert().code(0);
    let out = stdout(&a);
    let r = s.f.result();
    assert_eq!(r["first_bad"], s.f.sha(5), "{out}");
    assert_eq!(r["term"], "first failing build");
    assert!(out.contains("first failing build found"), "{out}");
    assert!(out.contains("ringbuf: add tuning knob"), "{out}");
    assert!(out.contains("regress=build"), "{out}");
    assert!(!out.contains("one of these"), "{out}");
    assert!(
        out.contains("one build decided each commit (no test ran)"),
        "{out}"
    );
    let ps = probes(&r);
    for p in &ps {
        let want = match p["outcome"].as_str().unwrap() {
            "built" => "old",
            "build_failed" => "new",
            other => panic!("a build-only probe reported {other}: {p}"),
        };
        assert_eq!(p["verdict"], want, "{p}");
    }
    let culprit = ps.iter().rev().find(|p| p["sha"] == s.f.sha(5)).unwrap();
    assert_eq!(culprit["outcome"], "build_failed", "{culprit}");
    assert!(
        culprit["signature"]
            .as_str()
            .unwrap()
            .contains("RB_TUNING_DEFAULT"),
        "{culprit}"
    );
    assert!(
        !s.marker.exists(),
        "the configuration's test ran during a build question"
    );

    // The same configuration asked the test question: the test runs (the marker proves the
    // marker can appear), the broken builds are skips again, and nothing the build question
    // stored answers it (another prober identity).
    let a = bisect_config(&s, 0, 63, "error").assert().code(0);
    let r = s.f.result();
    assert_eq!(r["first_bad"], s.f.sha(45), "{}", stdout(&a));
    assert!(s.marker.exists(), "the test question ran no test");
    let ps = probes(&r);
    assert!(ps.iter().all(|p| p["cached"] == false), "{ps:?}");
    assert!(ps.iter().all(|p| p["outcome"] != "built"), "{ps:?}");
    assert!(
        ps.iter()
            .filter(|p| p["outcome"] == "build_failed")
            .all(|p| p["verdict"] == "skip"),
        "{ps:?}"
    );

    // Asked again, the build question is answered from its own stored results.
    std::fs::remove_file(&s.marker).unwrap();
    bisect_config(&s, 0, 20, "build").assert().code(0);
    let r = s.f.result();
    assert_eq!(r["first_bad"], s.f.sha(5));
    assert!(probes(&r).iter().all(|p| p["cached"] == true), "{r:#}");
    assert_eq!(r["executed"], 0);
    assert!(!s.marker.exists());
}

#[test]
fn a_build_failure_in_the_middle_is_the_answer_not_a_skip() {
    if !have_cmake() {
        return;
    }
    // The build breaks at 27 and is mended at 30; the test fails from 30 on. Asked about the
    // test, the broken builds next to the culprit hide it (tests/bisect_core.rs: "one of these
    // 4"); asked about the build, the failure in the middle of the range is the answer.
    let mut spec = spec(50, 30);
    spec.broken = Some((27, 30));
    let f = Fixture::new(&spec);
    let mut c = Command::cargo_bin("setrows-bisect").unwrap();
    let a = c
        .arg("--repo")
        .arg(f.repo())
        .args(["--good", f.sha(0), "--bad", f.sha(28)])
        .arg("--build")
        .arg(setrows_bisect::cli::demo::build_command())
        .args(["--regress", "build", "--validate", "1", "--work-dir"])
        .arg(f.work())
        .arg("--json")
        .arg(f.json_path())
        .env_remove("SETROWS_WORK_DIR")
        .assert()
        .code(0);
    let r = f.result();
    assert_eq!(r["first_bad"], f.sha(27), "{}", stdout(&a));
    // Validation asks the same question: the parent builds, the culprit does not, and the bad
    // endpoint with the culprit reverted builds again.
    assert_eq!(r["validation"]["confirmed"], true, "{:#}", r["validation"]);
    let ps = probes(&r);
    // The answer came from the search's own midpoints, not from the endpoint.
    assert!(
        ps.iter()
            .any(|p| p["sha"] == f.sha(27) && p["verdict"] == "new"),
        "{ps:?}"
    );
    assert!(ps.iter().all(|p| p["verdict"] != "skip"), "{ps:?}");
    // JUnit of a build question: expected new probes are not failures.
    let junit = f.dir.path().join("j.xml");
    Command::cargo_bin("setrows-bisect")
        .unwrap()
        .args(["report", "--results"])
        .arg(f.json_path())
        .arg("--junit")
        .arg(&junit)
        .assert()
        .success();
    let x = std::fs::read_to_string(&junit).unwrap();
    assert!(x.contains("failures=\"0\""), "{x}");
    assert!(x.contains("build_failed"), "{x}");
}

#[test]
fn build_questions_refuse_a_test_and_dry_run_says_no_test_runs() {
    let f = Fixture::new(&spec(12, 6));
    let base = |extra: &[&str]| {
        let mut c = Command::cargo_bin("setrows-bisect").unwrap();
        c.arg("--repo")
            .arg(f.repo())
            .args(["--good", f.sha(0), "--bad", f.sha(11), "--work-dir"])
            .arg(f.work())
            .args(extra)
            .env_remove("SETROWS_WORK_DIR");
        c
    };
    let one_line = |a: assert_cmd::assert::Assert, want: &str| {
        let err = stderr(&a);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains(want), "{err}");
    };
    one_line(
        base(&["--regress", "build", "--script", "true"])
            .assert()
            .code(2),
        "--regress build runs no test: drop --script",
    );
    one_line(
        base(&["--regress", "build", "--confidence", "0.9"])
            .assert()
            .code(2),
        "drop --confidence/--repeat",
    );
    one_line(
        base(&["--build", "true"]).assert().code(2),
        "--build needs --script",
    );
    // Refused before anything was checked out, built or stored.
    assert!(!f.work().exists());

    let build = setrows_bisect::cli::demo::build_command();
    let a = base(&["--regress", "build", "--build", &build, "--dry-run"])
        .assert()
        .code(0);
    let out = stdout(&a);
    assert!(out.contains("predicate: regress=build"), "{out}");
    assert!(
        out.contains("build only: each probe stops after the build, no test runs"),
        "{out}"
    );
    let hint = out.split("one probe, by hand:").nth(1).unwrap_or_default();
    assert!(hint.contains("build exit"), "{out}");
    assert!(!hint.contains("sh -c ''"), "{out}");
    // The full probe of the same build is another identity.
    let full = base(&[
        "--build",
        &build,
        "--script",
        setrows_bisect::cli::demo::TEST_COMMAND,
        "--dry-run",
    ])
    .assert()
    .code(0);
    let identity = |t: &str| {
        t.lines()
            .find(|l| l.starts_with("store key of these probes: "))
            .unwrap_or_default()
            .to_string()
    };
    assert_ne!(identity(&out), identity(&stdout(&full)));
    assert!(!identity(&out).is_empty());
}

#[test]
fn matrix_build_only_compile_checks_every_cell_without_a_test() {
    if !have_cmake() {
        return;
    }
    let mut spec = spec(64, 45);
    spec.broken = Some((5, 40));
    let s = setup(&spec);
    let out = s.f.dir.path().join("out");
    let matrix = |extra: &[&str]| {
        let mut c = bin(&s);
        c.arg("matrix")
            .arg("--config")
            .arg(&s.conf)
            .arg("--repo")
            .arg(s.f.repo())
            .arg("--out")
            .arg(&out)
            .args(["--engine", "none"])
            .args(extra);
        c
    };
    // Good tree, broken build, a tree whose test would fail.
    let revs = [s.f.sha(0), s.f.sha(10), s.f.sha(50)];
    let rev_args: Vec<&str> = revs.iter().flat_map(|r| ["--rev", *r]).collect();

    let dry = matrix(&[&["--build-only", "--dry-run"][..], &rev_args].concat())
        .assert()
        .success();
    assert!(
        stdout(&dry).contains("build only: each cell stops after its build"),
        "{}",
        stdout(&dry)
    );

    let a = matrix(&[&["--build-only"][..], &rev_args].concat())
        .assert()
        .code(1);
    assert!(
        stderr(&a).contains("2 of 6 cells failed to build"),
        "{}",
        stderr(&a)
    );
    let md = stdout(&a);
    let r = read_json(&out.join("matrix-results.json"));
    assert_eq!(r["build_only"], true);
    let cells = r["cells"].as_array().unwrap();
    let at = |sha: &str| -> Vec<&str> {
        cells
            .iter()
            .filter(|c| c["sha"] == sha)
            .map(|c| c["outcome"].as_str().unwrap())
            .collect()
    };
    assert_eq!(at(s.f.sha(0)), ["built", "built"], "{md}");
    assert_eq!(at(s.f.sha(10)), ["build_failed", "build_failed"], "{md}");
    assert_eq!(at(s.f.sha(50)), ["built", "built"], "{md}");
    assert!(cells.iter().all(|c| c["test_s"] == 0.0), "{cells:?}");
    // The launch settings change no build: the second configuration shares the first's.
    assert!(
        cells
            .iter()
            .filter(|c| c["config"] == s.ids[1].as_str())
            .all(|c| c["provenance"]["shared_with"] == s.ids[0].as_str()),
        "{cells:?}"
    );
    assert!(md.contains("(build only: no test ran)"), "{md}");
    assert!(md.contains("❌ build_failed"), "{md}");
    assert!(md.contains("(same build as `"), "{md}");
    assert!(!s.marker.exists(), "a compile check ran the test");

    // The same cell asked for its test: the test runs and fails (the planted change).
    let a = matrix(&["--rev", s.f.sha(50), "--only", &s.ids[0]])
        .assert()
        .success();
    let r = read_json(&out.join("matrix-results.json"));
    assert_eq!(r["cells"][0]["outcome"], "wrong_result", "{}", stdout(&a));
    assert!(r.get("build_only").is_none(), "{r:#}");
    assert!(s.marker.exists(), "the test question ran no test");
}

/// The bundled reproducer's build as the question: a history of a tiny ggml tree backed by the
/// installed libggml (as in tests/repro_prober.rs) whose third commit stops configuring. The
/// real binary bisects it with no `--script`; the replay is built at every probe and never run
/// (its run prints `SETROWS_RESULT`, which no probe log holds).
#[test]
fn regress_build_with_the_bundled_reproducer_builds_it_and_never_runs_it() {
    let Some(ggml) = common::tools::require(
        std::env::var_os("SETROWS_GGML_DIR").map(PathBuf::from),
        "libggml-python (SETROWS_GGML_DIR)",
        "scripts/setup.d/20-ggml.sh",
    ) else {
        return;
    };
    if !have_cmake() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let repo_dir = d.path().join("repo");
    std::fs::create_dir_all(repo_dir.join("include")).unwrap();
    let include = ggml
        .ancestors()
        .nth(3)
        .expect("<prefix>/lib64/cmake/ggml")
        .join("include");
    for e in std::fs::read_dir(&include).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), repo_dir.join("include").join(e.file_name())).unwrap();
    }
    let shim = "cmake_minimum_required(VERSION 3.14)\nproject(ggml_shim C CXX)\n\
                set(CMAKE_FIND_PACKAGE_TARGETS_GLOBAL ON)\nfind_package(ggml REQUIRED)\n\
                add_library(ggml INTERFACE)\ntarget_link_libraries(ggml INTERFACE ggml::ggml)\n";
    let repo = git2::Repository::init(&repo_dir).unwrap();
    let mut shas = Vec::new();
    for i in 0..6 {
        let cmake = if i >= 4 {
            format!("{shim}message(FATAL_ERROR \"gfx1151: this revision does not build\")\n")
        } else {
            shim.to_string()
        };
        std::fs::write(repo_dir.join("CMakeLists.txt"), cmake).unwrap();
        std::fs::write(repo_dir.join("n"), format!("{i}\n")).unwrap();
        shas.push(commit_all(&repo, &format!("c{i}")));
    }
    let json = d.path().join("r.json");
    let a = Command::cargo_bin("setrows-bisect")
        .unwrap()
        .arg("--repo")
        .arg(&repo_dir)
        .args(["--good", &shas[0], "--bad", &shas[5], "--regress", "build"])
        .arg(format!("--cmake-arg=-Dggml_DIR={}", ggml.display()))
        .arg("--work-dir")
        .arg(d.path().join("work"))
        .arg("--json")
        .arg(&json)
        .env_remove("SETROWS_WORK_DIR")
        .assert();
    let out = format!("{}{}", stdout(&a), stderr(&a));
    a.code(0);
    let r = read_json(&json);
    assert_eq!(r["first_bad"], shas[4].as_str(), "{out}");
    let ps = probes(&r);
    assert!(ps.iter().any(|p| p["outcome"] == "built"), "{ps:?}");
    for p in &ps {
        assert!(
            ["built", "build_failed"].contains(&p["outcome"].as_str().unwrap()),
            "{p}"
        );
        let log = std::fs::read_to_string(p["log"].as_str().unwrap()).unwrap();
        assert!(!log.contains("SETROWS_RESULT"), "the replay ran: {log}");
        if p["outcome"] == "built" {
            assert!(
                log.contains("setrows-replay"),
                "the replay was built: {log}"
            );
        }
    }
    // The control: asked about the test, the same build's replay runs and its log says so
    // (the range's --bad passes, so the bisection stops there: exit 1).
    Command::cargo_bin("setrows-bisect")
        .unwrap()
        .arg("--repo")
        .arg(&repo_dir)
        .args(["--good", &shas[0], "--bad", &shas[1]])
        .args(["--repro-arg=--steps", "--repro-arg=200"])
        .arg(format!("--cmake-arg=-Dggml_DIR={}", ggml.display()))
        .arg("--work-dir")
        .arg(d.path().join("work"))
        .arg("--json")
        .arg(&json)
        .env_remove("SETROWS_WORK_DIR")
        .assert()
        .code(1);
    let r = read_json(&json);
    let ran = &probes(&r)[0];
    assert_eq!(ran["outcome"], "pass", "{ran}");
    let log = std::fs::read_to_string(ran["log"].as_str().unwrap()).unwrap();
    assert!(log.contains("SETROWS_RESULT"), "{log}");
}

/// `bisect-config --regress build`: the first ladder value whose build fails, with the test
/// never run. The build here fails when the configuration's CMake line turns HIP graphs on.
#[test]
fn bisect_config_regress_build_finds_the_first_value_that_does_not_build() {
    let d = tempfile::tempdir().unwrap();
    let repo_dir = d.path().join("repo");
    let repo = git2::Repository::init(&repo_dir).unwrap();
    std::fs::write(repo_dir.join("README"), "x\n").unwrap();
    commit_all(&repo, "one");
    let marker = d.path().join("a-test-ran");
    let conf = d.path().join("m.toml");
    std::fs::write(
        &conf,
        format!(
            r#"
[probe]
kind = "script"
build = 'echo "cmake $SETROWS_CMAKE_ARGS repro=${{SETROWS_REPRO_ARGS-unset}} launch=${{HIP_LAUNCH_BLOCKING-unset}}"; case "$SETROWS_CMAKE_ARGS" in *GGML_HIP_GRAPHS=ON*) echo "error: graphs on does not build" >&2; exit 1;; esac'
script = 'touch "{}"'
[launch.serialized]
hip_launch_blocking = true
[params.p]
args = ["--steps", "7"]
[matrix]
backend = ["hip"]
gfx = ["gfx1151"]
graphs = [false, true]
launch = ["serialized"]
params = ["p"]
"#,
            marker.display()
        ),
    )
    .unwrap();
    let out = d.path().join("out");
    let a = Command::cargo_bin("setrows-bisect")
        .unwrap()
        .env("SETROWS_WORK_DIR", d.path().join("work"))
        .args(["bisect-config", "--axis", "graphs", "--rev", "HEAD"])
        .args(["--regress", "build", "--engine", "none", "--config"])
        .arg(&conf)
        .arg("--repo")
        .arg(&repo_dir)
        .arg("--out")
        .arg(&out)
        .assert();
    let text = format!("{}{}", stdout(&a), stderr(&a));
    a.code(0);
    let r = read_json(&out.join("bisect-config.json"));
    assert_eq!(r["first_failing"], "true", "{text}");
    let outcomes: Vec<&str> = r["probes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["cell"]["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes, ["built", "build_failed"], "{text}");
    assert!(!marker.exists(), "a build question ran the test");
    // The build step saw the build's settings only: no test settings reach it.
    let log = std::fs::read_to_string(r["probes"][0]["cell"]["log"].as_str().unwrap()).unwrap();
    assert!(log.contains("repro=unset launch=unset"), "{log}");
    assert!(log.contains("GGML_HIP_GRAPHS=OFF"), "{log}");
}

/// A `--bad` that builds contradicts a build question: the bisection stops there and says
/// what it saw (exit 1), as for a test question.
#[test]
fn a_bad_endpoint_that_builds_is_named() {
    if !have_cmake() {
        return;
    }
    let f = Fixture::new(&spec(12, 6));
    let a = Command::cargo_bin("setrows-bisect")
        .unwrap()
        .arg("--repo")
        .arg(f.repo())
        .args(["--good", f.sha(0), "--bad", f.sha(11), "--regress", "build"])
        .arg("--build")
        .arg(setrows_bisect::cli::demo::build_command())
        .arg("--work-dir")
        .arg(f.work())
        .arg("--json")
        .arg(f.json_path())
        .env_remove("SETROWS_WORK_DIR")
        .assert()
        .code(1);
    let err = stderr(&a);
    // (The endpoint wording is the endpoint message's; what matters here: it names --bad and
    // that it built.)
    assert!(err.contains("--bad") && err.contains("built"), "{err}");
    assert!(f.result()["first_bad"].is_null());
}
