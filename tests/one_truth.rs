//! One truth on screen: what the tool prints about a run agrees with itself, through the real
//! binary on real repositories built here. `log` counts the probes the report counts; the
//! progress never says "~0 steps left" before a step; a dry run plans whatever the host lacks
//! and names only what will run.

mod gitcommit;

use gitcommit::commit_all;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A build that does nothing, and a test that fails once `BUG` exists.
const BUILD: &str = "true";
const SCRIPT: &str = "test ! -f BUG";

struct Repo {
    dir: tempfile::TempDir,
    shas: Vec<String>,
}

/// `commits` commits; the one at `bug_at` adds `BUG`. With `ggml`, the tree is ggml-like
/// (`include/ggml.h`), so the bundled reproducer would be its default probe.
fn generate(commits: usize, bug_at: usize, ggml: bool) -> Repo {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("repo");
    let repo = git2::Repository::init(&path).unwrap();
    if ggml {
        std::fs::create_dir_all(path.join("include")).unwrap();
        std::fs::write(path.join("include/ggml.h"), "// ggml\n").unwrap();
        std::fs::write(path.join("CMakeLists.txt"), "project(ggml C)\n").unwrap();
    }
    let mut shas = Vec::new();
    for i in 0..commits {
        std::fs::write(path.join("n"), format!("{i}\n")).unwrap();
        if i == bug_at {
            std::fs::write(path.join("BUG"), "bug\n").unwrap();
        }
        shas.push(commit_all(&repo, &format!("change {i}")));
    }
    Repo { dir, shas }
}

impl Repo {
    fn repo(&self) -> PathBuf {
        self.dir.path().join("repo")
    }
    fn work(&self) -> PathBuf {
        self.dir.path().join("work")
    }
    fn result_path(&self) -> PathBuf {
        self.dir.path().join("result.json")
    }
    fn bin(&self) -> Command {
        let mut c = Command::new(assert_cmd::cargo::cargo_bin("setrows-bisect"));
        c.env_remove("SETROWS_WORK_DIR")
            .env_remove("SETROWS_PROGRESS")
            .env("GGML_NO_BACKTRACE", "1");
        c
    }
    /// The bisection of the whole range, with its own work dir and JSON result.
    fn bisect(&self) -> Command {
        let mut c = self.bin();
        c.arg("--repo")
            .arg(self.repo())
            .args(["--good", &self.shas[0]])
            .args(["--bad", self.shas.last().unwrap()])
            .args(["--build", BUILD, "--script", SCRIPT])
            .arg("--work-dir")
            .arg(self.work())
            .arg("--json")
            .arg(self.result_path());
        c
    }
    fn result(&self) -> Value {
        serde_json::from_str(&std::fs::read_to_string(self.result_path()).unwrap()).unwrap()
    }
}

fn ok(o: &Output) -> String {
    assert_eq!(
        o.status.code(),
        Some(0),
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Item 1: a bisection run twice under one id. The report of the second run counts its own
/// probes (the first run's, replayed from the store); `log` says the same number and names the
/// earlier run's apart, instead of the sum.
#[test]
fn log_counts_the_probes_the_report_counts_and_names_earlier_runs_apart() {
    let r = generate(12, 7, false);
    ok(&r.bisect().output().unwrap());
    ok(&r.bisect().output().unwrap());
    let result = r.result();
    let counted = result["probes"].as_array().expect("probes").len();
    assert!(counted >= 2, "{result}");
    assert_eq!(result["first_bad"], r.shas[7].as_str());
    let report = ok(&r
        .bin()
        .arg("show")
        .arg("--work-dir")
        .arg(r.work())
        .arg(
            std::fs::read_dir(r.work().join("journal"))
                .unwrap()
                .flatten()
                .find_map(|e| {
                    e.file_name()
                        .to_str()?
                        .strip_suffix(".jsonl")
                        .map(str::to_string)
                })
                .unwrap(),
        )
        .output()
        .unwrap());
    assert!(
        report.contains(&format!("- {counted} probes in ")),
        "the report counts {counted}:\n{report}"
    );
    let log = ok(&r
        .bin()
        .arg("log")
        .arg("--work-dir")
        .arg(r.work())
        .output()
        .unwrap());
    let line = log.lines().nth(1).unwrap_or_else(|| panic!("{log}"));
    let cell = format!("  {counted} (+{counted} in 1 earlier run)  ");
    assert!(line.contains(&cell), "want {cell:?} in:\n{log}");
    let json = ok(&r
        .bin()
        .args(["log", "--json", "--work-dir"])
        .arg(r.work())
        .output()
        .unwrap());
    let v: Value = serde_json::from_str(json.lines().next().unwrap()).unwrap();
    assert_eq!(v["probes"], counted, "{v}");
    assert_eq!(v["earlier_runs"], 1, "{v}");
    assert_eq!(v["earlier_probes"], counted, "{v}");
}

/// Item 2: a range of two commits probes both endpoints. Every round's bound is at least the
/// verdicts that follow it, so none says 0 before a step, and no round follows the last verdict.
#[test]
fn a_two_probe_run_never_says_no_steps_left_before_a_step() {
    let r = generate(2, 1, false);
    let out = r.bisect().env("SETROWS_PROGRESS", "json").output().unwrap();
    ok(&out);
    assert_eq!(r.result()["first_bad"], r.shas[1].as_str());
    let err = String::from_utf8_lossy(&out.stderr);
    let events: Vec<Value> = err
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let verdicts = events.iter().filter(|e| e["event"] == "verdict").count();
    assert_eq!(verdicts, 2, "{err}");
    let mut rounds = 0;
    for (i, e) in events.iter().enumerate() {
        if e["event"] != "round" {
            continue;
        }
        rounds += 1;
        let after = events[i..]
            .iter()
            .filter(|e| e["event"] == "verdict")
            .count() as u64;
        let left = e["steps_left"].as_u64().unwrap();
        assert!(
            left >= after && left > 0,
            "round says {left}, {after} verdicts follow:\n{err}"
        );
    }
    assert!(rounds > 0, "{err}");
    let plain = r.bisect().output().unwrap();
    ok(&plain);
    let err = String::from_utf8_lossy(&plain.stderr);
    assert!(err.contains("steps left"), "{err}");
    assert!(
        !err.contains("~0 steps left") && !err.contains("no steps left"),
        "{err}"
    );
}

/// A directory holding only `git` and `sh` (and what a dry run may call), so neither podman
/// nor docker is on PATH.
fn bare_path(dir: &Path) -> PathBuf {
    let bin = dir.join("bare-bin");
    std::fs::create_dir_all(&bin).unwrap();
    for tool in ["git", "sh"] {
        let found = std::env::split_paths(&std::env::var_os("PATH").unwrap())
            .map(|d| d.join(tool))
            .find(|p| p.is_file())
            .unwrap_or_else(|| panic!("{tool} is not on PATH"));
        std::os::unix::fs::symlink(found, bin.join(tool)).unwrap();
    }
    bin
}

/// Item 4: with no container engine on PATH, `matrix --dry-run` and `bisect-config --dry-run`
/// print their plan and exit 0, saying what a run would lack; the run itself still stops.
#[test]
fn dry_runs_plan_without_an_engine_and_say_what_a_run_would_lack() {
    let r = generate(3, 2, true);
    let path = bare_path(r.dir.path());
    let bad = r.shas.last().unwrap();
    let lack = "a run would need podman or docker: none answers here";
    let mut matrix = r.bin();
    matrix
        .env("PATH", &path)
        .args(["matrix", "--dry-run", "--only", "e2c194a2", "--rev", bad])
        .arg("--repo")
        .arg(r.repo())
        .arg("--work-dir")
        .arg(r.work());
    let out = ok(&matrix.output().unwrap());
    assert!(
        out.starts_with("1 cells: 1 revision(s) x 1 configuration(s)"),
        "{out}"
    );
    assert!(out.contains(lack), "{out}");
    assert!(out.contains("image: localhost/setrows-rocm:"), "{out}");
    let mut ladder = r.bin();
    ladder
        .env("PATH", &path)
        .args(["bisect-config", "--dry-run", "--axis", "rocm", "--rev", bad])
        .arg("--repo")
        .arg(r.repo())
        .arg("--work-dir")
        .arg(r.work());
    let out = ok(&ladder.output().unwrap());
    assert!(out.contains(lack), "{out}");
    assert!(
        out.contains("axis: rocm") && out.contains("in image localhost/setrows-rocm:"),
        "{out}"
    );
    // The plan is not a promise the run breaks: without --dry-run the matrix still stops.
    let mut run = r.bin();
    run.env("PATH", &path)
        .args(["matrix", "--only", "e2c194a2", "--rev", bad])
        .arg("--repo")
        .arg(r.repo())
        .arg("--work-dir")
        .arg(r.work())
        .arg("--out")
        .arg(r.dir.path().join("out"));
    assert_eq!(run.output().unwrap().status.code(), Some(3));
    assert!(
        !r.work().join("matrix/src").exists(),
        "a dry run checked out"
    );
}

/// Item 5: a build question's plan names no reproducer and offers no `--confidence` (which a
/// build question refuses); the matrix's build-only plan hands no reproducer arguments.
#[test]
fn a_build_only_plan_names_only_what_runs() {
    let r = generate(4, 2, true);
    let mut c = r.bin();
    c.arg("--repo")
        .arg(r.repo())
        .args(["--good", &r.shas[0], "--bad", &r.shas[3]])
        .args(["--regress", "build", "--engine", "none", "--dry-run"])
        .arg("--work-dir")
        .arg(r.work());
    let plan = ok(&c.output().unwrap());
    assert!(
        plan.contains("build only: each probe stops after the build"),
        "{plan}"
    );
    assert!(plan.contains("if --bad builds:"), "{plan}");
    for absent in [
        "reproducer:",
        "setrows-replay",
        "--confidence",
        "arguments:",
    ] {
        assert!(
            !plan.contains(absent),
            "{absent:?} in a build-only plan:\n{plan}"
        );
    }
    // The same plan with a test names its reproducer and the advice.
    let mut t = r.bin();
    t.arg("--repo")
        .arg(r.repo())
        .args(["--good", &r.shas[0], "--bad", &r.shas[3]])
        .args(["--engine", "none", "--dry-run"])
        .arg("--work-dir")
        .arg(r.work());
    let tested = ok(&t.output().unwrap());
    assert!(
        tested.contains("reproducer: setrows-replay") && tested.contains("--confidence"),
        "{tested}"
    );
    let mut m = r.bin();
    m.args([
        "matrix",
        "--dry-run",
        "--build-only",
        "--engine",
        "none",
        "--only",
        "e2c194a2",
    ])
    .args(["--rev", &r.shas[3]])
    .arg("--repo")
    .arg(r.repo())
    .arg("--work-dir")
    .arg(r.work());
    let plan = ok(&m.output().unwrap());
    assert!(plan.contains("build only:"), "{plan}");
    for absent in ["SETROWS_REPRO_ARGS", "setrows-replay", "--confidence"] {
        assert!(
            !plan.contains(absent),
            "{absent:?} in a build-only plan:\n{plan}"
        );
    }
}

/// Item 6: the by-hand recipe of a configuration's script probe runs in a plain shell as the
/// probe ran: it defines `$SETROWS_CMAKE_ARGS` (the configuration's CMake line) itself.
#[test]
fn the_by_hand_recipe_defines_what_the_build_reads() {
    let r = generate(3, 2, true);
    let mut c = r.bin();
    c.arg("--repo")
        .arg(r.repo())
        .args(["--good", &r.shas[0], "--bad", &r.shas[2]])
        .args(["--config", "e2c194a2", "--engine", "none", "--dry-run"])
        .args([
            "--build",
            r#"echo "$SETROWS_CMAKE_ARGS" > args"#,
            "--script",
            "true",
        ])
        .arg("--work-dir")
        .arg(r.work());
    let plan = ok(&c.output().unwrap());
    let recipe: Vec<&str> = plan
        .split("one probe, by hand:\n")
        .nth(1)
        .unwrap_or_else(|| panic!("no recipe in:\n{plan}"))
        .lines()
        .map(str::trim)
        .collect();
    let here = r.dir.path().join("by-hand");
    let script = recipe
        .join("\n")
        .replace("SHA", &r.shas[2])
        .replace("/tmp/setrows-repro", &here.to_string_lossy());
    let out = Command::new("sh")
        .arg("-c")
        .arg(&script)
        .env_remove("SETROWS_CMAKE_ARGS")
        .output()
        .unwrap();
    let said = ok(&out);
    assert!(said.contains("exit 0"), "{script}\n{said}");
    let args = std::fs::read_to_string(here.join("build/args")).unwrap();
    assert!(
        args.contains("-DGGML_HIP=ON") && args.contains("-DGPU_TARGETS=gfx1151"),
        "the recipe's build saw {args:?}:\n{script}"
    );
}

/// Item 3: a clean tree's ggml version has no `-dirty`. ggml 0.9.x asks git in its source dir
/// and takes any failure as dirty; the tool's private checkout is no repository. The tree here
/// asks the same question ggml 0.9.3 asks, added through the reproducer's own `ggml-source.cmake`.
#[test]
fn a_private_checkout_of_a_clean_tree_is_not_dirty() {
    let Some(cmake) = common_cmake() else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let ggml = d.path().join("checkout");
    std::fs::create_dir_all(ggml.join("include")).unwrap();
    std::fs::write(ggml.join("include/ggml.h"), "").unwrap();
    std::fs::write(
        ggml.join("CMakeLists.txt"),
        "cmake_minimum_required(VERSION 3.14)\nproject(ggml NONE)\n\
         find_program(GIT_EXE NAMES git)\nset(V 0.9.3)\n\
         if(GIT_EXE)\n  execute_process(COMMAND ${GIT_EXE} diff-index --quiet HEAD -- . \
         WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR} RESULT_VARIABLE D ERROR_QUIET)\nendif()\n\
         if(D AND NOT D EQUAL 0)\n  set(V \"${V}-dirty\")\nendif()\n\
         message(STATUS \"ggml version: ${V}\")\n",
    )
    .unwrap();
    let outer = d.path().join("outer");
    std::fs::create_dir_all(&outer).unwrap();
    let rule = Path::new(env!("CARGO_MANIFEST_DIR")).join("repro-kernels/ggml-source.cmake");
    std::fs::write(
        outer.join("CMakeLists.txt"),
        format!(
            "cmake_minimum_required(VERSION 3.14)\nproject(outer NONE)\ninclude(\"{}\")\nsetrows_add_ggml(\"{}\")\n",
            rule.display(),
            ggml.display()
        ),
    )
    .unwrap();
    let out = Command::new(cmake)
        .arg("-S")
        .arg(&outer)
        .arg("-B")
        .arg(d.path().join("build"))
        .env("GIT_CEILING_DIRECTORIES", d.path())
        .output()
        .unwrap();
    let said = ok(&out);
    assert!(said.contains("ggml version: 0.9.3\n"), "{said}");
}

/// cmake, under the tests' one rule for outside tools (required under CI).
fn common_cmake() -> Option<PathBuf> {
    #[path = "tools/mod.rs"]
    mod tools;
    tools::require(
        setrows_bisect::probe::exec::which("cmake"),
        "cmake",
        "scripts/setup.d/00-base.sh",
    )
}
