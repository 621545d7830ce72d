//! Issue 37 items 2, 3, 4 and 7 through the real binary: inputs that would be dropped or
//! replaced are refused naming both flags (or added, saying what they replaced); the report's
//! graph is `--graph ds4`; plans say the memory switches, the tool-written model, which
//! endpoints are tested, and are written as JSON; bisect-config has a dry run; relative paths
//! and any git revision work wherever a flag takes one.

mod common;
use common::{git, spec, Fixture};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn bin() -> Command {
    let mut c = Command::new(assert_cmd::cargo::cargo_bin("setrows-bisect"));
    c.env_remove("SETROWS_WORK_DIR");
    c
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Exit 2 and exactly one stderr line, containing every needle.
fn refused(o: &Output, needles: &[&str]) {
    let (_, err) = text(o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one line expected: {err}");
    assert!(lines[0].starts_with("setrows-bisect: error: "), "{err}");
    for n in needles {
        assert!(lines[0].contains(n), "{n:?} not in {err}");
    }
}

/// A two-commit llama.cpp-like tree with ggml under ggml/ (the replay and the decode probe
/// both accept it for a plan; a plan reads no more of it). The first commit is tagged `v1`.
struct Tree {
    dir: tempfile::TempDir,
    repo: PathBuf,
}

impl Tree {
    fn new() -> Tree {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("repo");
        for d in ["include", "ggml/include", "ggml/src"] {
            std::fs::create_dir_all(repo.join(d)).unwrap();
        }
        git(&repo, &["init", "-q", "-b", "main"]);
        std::fs::write(repo.join("CMakeLists.txt"), "project(llama)\n").unwrap();
        std::fs::write(repo.join("include/llama.h"), "//\n").unwrap();
        std::fs::write(repo.join("ggml/include/ggml.h"), "//\n").unwrap();
        std::fs::write(
            repo.join("ggml/CMakeLists.txt"),
            "option(GGML_HIP \"\" OFF)\n",
        )
        .unwrap();
        std::fs::write(repo.join("ggml/src/ggml.c"), "int a;\n").unwrap();
        git(&repo, &["add", "-A"]);
        git(&repo, &["commit", "-qm", "one"]);
        git(&repo, &["tag", "v1"]);
        std::fs::write(repo.join("ggml/src/ggml.c"), "int b;\n").unwrap();
        git(&repo, &["commit", "-qam", "two"]);
        Tree { dir, repo }
    }

    fn work(&self) -> PathBuf {
        self.dir.path().join("work")
    }

    /// A bisect v1..HEAD (revisions as git takes them) with `args`.
    fn bisect(&self, args: &[&str]) -> Output {
        bin()
            .arg("--repo")
            .arg(&self.repo)
            .args(["--good", "v1", "--bad", "HEAD"])
            .arg("--work-dir")
            .arg(self.work())
            .args(args)
            .output()
            .unwrap()
    }

    fn plan(&self, args: &[&str]) -> String {
        let mut all = vec!["--dry-run"];
        all.extend(args);
        let o = self.bisect(&all);
        let (out, err) = text(&o);
        assert!(o.status.success(), "{args:?}: {err}");
        out
    }
}

fn reproducer_line(plan: &str) -> &str {
    plan.lines()
        .find(|l| l.starts_with("reproducer: "))
        .unwrap_or_else(|| panic!("no reproducer line: {plan}"))
}

/// Item 2: a `--repro-arg` adds to the default run and replaces only the same option (the plan's
/// first line says which default), is checked against the program's own options before any
/// work, and every pair where one flag would drop the other is refused naming both.
#[test]
fn reproducer_arguments_add_to_the_default_and_contradictions_are_refused() {
    let t = Tree::new();
    let plan = t.plan(&["--repro-arg=--steps", "--repro-arg=5000"]);
    assert!(
        plan.starts_with("--repro-arg --steps 5000 replaces the default --steps 100000\n"),
        "{plan}"
    );
    let r = reproducer_line(&plan);
    for kept in [
        "--mode reuse",
        "--ring-rows 256",
        "--check-every 1",
        "--steps 5000",
    ] {
        assert!(r.contains(kept), "{kept}: {r}");
    }
    assert!(!r.contains("100000"), "{r}");
    // A new option adds and replaces nothing.
    let plan = t.plan(&["--repro-arg=--seed", "--repro-arg=7"]);
    assert!(plan.starts_with("range: "), "{plan}");
    assert!(
        reproducer_line(&plan).contains("--steps 100000 --ring-rows 256 --check-every 1 --seed 7"),
        "{plan}"
    );

    refused(
        &t.bisect(&["--repro-arg=--stpes", "--repro-arg=5"]),
        &[
            "--repro-arg --stpes",
            "setrows-replay",
            "did you mean --steps?",
        ],
    );
    refused(
        &t.bisect(&[
            "--probe-kind",
            "decode",
            "--repro-arg=--stepz",
            "--repro-arg=5",
        ]),
        &["--repro-arg --stepz", "decode-probe"],
    );
    refused(
        &t.bisect(&[
            "--backend",
            "hip",
            "--memory",
            "unified",
            "--repro-arg=--memory",
            "--repro-arg=host",
        ]),
        &["--repro-arg --memory host", "--memory device|unified|host"],
    );
    refused(
        &t.bisect(&["--repro-arg=--engine", "--repro-arg=ds4"]),
        &["--repro-arg --engine ds4", "--graph"],
    );
    refused(
        &t.bisect(&[
            "--probe-kind",
            "decode",
            "--repro-arg=--model",
            "--repro-arg=x.gguf",
        ]),
        &["--repro-arg --model", "written by the tool"],
    );
    refused(
        &t.bisect(&[
            "--probe-kind",
            "decode",
            "--flash-attn",
            "on",
            "--repro-arg=--flash-attn",
            "--repro-arg=off",
        ]),
        &["--repro-arg --flash-attn", "--flash-attn on"],
    );
    refused(
        &t.bisect(&["--script", "true", "--probe-kind", "decode"]),
        &["--script", "--probe-kind decode"],
    );
    refused(
        &t.bisect(&[
            "--regress",
            "build",
            "--build",
            "true",
            "--probe-kind",
            "replay",
        ]),
        &["--build", "--probe-kind replay"],
    );
    refused(
        &t.bisect(&["--graph", "ds4", "--probe-kind", "decode"]),
        &["--graph", "--probe-kind decode"],
    );
    refused(
        &t.bisect(&["--graph", "ds4", "--script", "true"]),
        &["--graph", "--script"],
    );
    assert!(!t.work().exists(), "nothing may be made before a refusal");
}

/// Item 2: the Rust list of the bundled programs' options is the C++ sources' list.
#[test]
fn the_option_tables_are_the_programs_own() {
    use setrows_bisect::core::config::options::{DECODE_OPTIONS, REPLAY_OPTIONS};
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("repro-kernels");
    for (file, var, table) in [
        ("setrows-replay/setrows-replay.cpp", "a", REPLAY_OPTIONS),
        ("decode-probe/decode-probe.cpp", "k", DECODE_OPTIONS),
    ] {
        let src = std::fs::read_to_string(root.join(file)).unwrap();
        let body = &src[src.find("parse_args(int argc").expect(file)..];
        let needle = format!("{var} == \"--");
        let mut in_cpp: Vec<String> = body
            .match_indices(&needle)
            .map(|(i, _)| {
                let rest = &body[i + needle.len() - 2..];
                rest[..rest.find('"').unwrap()].to_string()
            })
            .filter(|o| o != "--help")
            .collect();
        in_cpp.sort();
        in_cpp.dedup();
        let mut in_rust: Vec<String> = table.iter().map(|o| o.name.to_string()).collect();
        in_rust.sort();
        assert_eq!(in_rust, in_cpp, "{file}");
    }
}

/// Item 3: the report's graph is `--graph ds4` (the built-in matrix's decode-ds4), with the
/// default steps and checks; `--engine ds4` says where the graph is chosen; help and README
/// name it.
#[test]
fn the_reports_graph_is_a_first_class_choice() {
    let t = Tree::new();
    let plan = t.plan(&["--graph", "ds4"]);
    let r = reproducer_line(&plan);
    assert!(
        r.contains("setrows-replay --engine ds4 --mode reuse --steps 100000 --check-every 1"),
        "{plan}"
    );
    assert!(plan.contains("DeepSeek-V4"), "{plan}");
    // The user's steps replace the preset's and keep ds4.
    let plan = t.plan(&["--graph", "ds4", "--repro-arg=--steps", "--repro-arg=500"]);
    assert!(reproducer_line(&plan).contains("--engine ds4"), "{plan}");
    let plain = t.plan(&["--graph", "decode-reuse"]);
    assert!(
        reproducer_line(&plain).contains("--mode reuse --steps 100000 --ring-rows 256"),
        "{plain}"
    );
    refused(
        &t.bisect(&["--engine", "ds4"]),
        &["--engine", "--graph ds4"],
    );
    // A graph's name where a configuration id goes: the flag that names the graph.
    refused(
        &t.bisect(&["--config", "ds4"]),
        &["--config ds4", "--graph ds4"],
    );
    // The matrix names the same graph: its rows of the report's graph, and only those.
    let list = bin()
        .args(["matrix", "--list", "--graph", "ds4"])
        .output()
        .unwrap();
    let (rows, err) = text(&list);
    assert!(list.status.success(), "{err}");
    assert!(rows.lines().count() > 0, "no ds4 rows");
    assert!(
        rows.lines().all(|l| l.contains("params=decode-ds4")),
        "{rows}"
    );
    let help = bin().arg("--help").output().unwrap();
    assert!(text(&help).0.contains("--graph"), "--help");
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let quick = &readme[readme
        .find("## Quick start: the Strix Halo replay")
        .unwrap()..];
    let quick = &quick[..quick[3..].find("\n## ").unwrap()];
    assert!(quick.contains("--graph ds4"), "README's quick start");
}

/// Item 4: the plan says the placement's switches, the model the tool writes, which endpoints
/// are tested, and `--dry-run --json FILE` writes the plan.
#[test]
fn plans_tell_the_whole_truth_and_are_written_as_json() {
    let t = Tree::new();
    let plan = t.plan(&["--backend", "hip", "--memory", "unified"]);
    assert!(
        reproducer_line(&plan).contains("--memory unified"),
        "the reproducer's own argument: {plan}"
    );
    let memory = plan
        .lines()
        .find(|l| l.starts_with("memory: unified"))
        .unwrap_or_else(|| panic!("no memory line: {plan}"));
    assert!(
        memory.contains("GGML_CUDA_ENABLE_UNIFIED_MEMORY=1") && memory.contains("GGML_HIP_UMA"),
        "{memory}"
    );
    let decode = t.plan(&["--probe-kind", "decode"]);
    assert!(
        decode.contains("MODEL.gguf is written by the tool"),
        "{decode}"
    );
    assert!(plan.contains("\nendpoints: --bad when"), "{plan}");
    let lazy = t.plan(&["--lazy-endpoints"]);
    assert!(
        lazy.contains("endpoints: neither is tested up front"),
        "{lazy}"
    );

    let file = t.dir.path().join("plan.json");
    let o = t.bisect(&["--dry-run", "--json", file.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o).1);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).expect("the plan's JSON")).unwrap();
    assert_eq!(v["schema"], "setrows-bisect/plan/1");
    assert_eq!(v["range"]["candidates"], 2);
    assert!(v["reproducer"]["command"]
        .as_str()
        .unwrap()
        .starts_with("setrows-replay"));
    assert!(
        v["endpoints"].is_string() && v["expected_probes"].is_number(),
        "{v}"
    );
    assert!(!t.work().exists(), "a plan makes nothing");
}

const SCRIPT_MATRIX: &str = r#"
[probe]
kind = "script"
script = 'test -d "$WORK" && test -f "$SRC/state"'
[images]
hip = "localhost/setrows-nope:{rocm}"
[launch.plain]
[launch.blocking]
hip_launch_blocking = true
[matrix]
backend = ["hip"]
rocm = ["1.0"]
gfx = ["gfx1151"]
launch = ["plain", "blocking"]
"#;

/// A ggml tree that spells the HIP target the old way (AMDGPU_TARGETS).
fn old_ggml(dir: &Path) {
    std::fs::create_dir_all(dir.join("src/ggml-hip")).unwrap();
    git(dir, &["init", "-q", "-b", "main"]);
    std::fs::write(dir.join("CMakeLists.txt"), "option(GGML_HIP \"\" OFF)\n").unwrap();
    std::fs::write(
        dir.join("src/ggml-hip/CMakeLists.txt"),
        "if (AMDGPU_TARGETS AND NOT CMAKE_HIP_ARCHITECTURES)\n",
    )
    .unwrap();
    std::fs::write(dir.join("state"), "x\n").unwrap();
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-qm", "one"]);
    git(dir, &["commit", "-q", "--allow-empty", "-m", "two"]);
}

/// Items 4 and 7: `matrix --dry-run` spells each tree's build line as the tree does; a
/// relative work dir, repo and output work for `matrix`; `bisect-config --dry-run` says its
/// base configuration and makes nothing, and a missing image is one line before any retry.
#[test]
fn matrix_and_bisect_config_plans_and_relative_paths() {
    let d = tempfile::tempdir().unwrap();
    old_ggml(&d.path().join("repo"));
    std::fs::write(d.path().join("m.toml"), SCRIPT_MATRIX).unwrap();
    let run = |args: &[&str]| {
        bin()
            .current_dir(d.path())
            .args(args)
            .args([
                "--matrix",
                "m.toml",
                "--repo",
                "repo",
                "--work-dir",
                "w",
                "--out",
                "o",
            ])
            .output()
            .unwrap()
    };
    let o = run(&["matrix", "--dry-run", "--engine", "none", "--rev", "HEAD~1"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        out.contains("-DAMDGPU_TARGETS=gfx1151"),
        "the tree's spelling: {out}"
    );
    assert!(!out.contains("-DGPU_TARGETS"), "{out}");

    // Relative --work-dir: each cell's $WORK is a directory wherever its step runs.
    let o = run(&["matrix", "--engine", "none", "--rev", "HEAD"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}{err}");
    let r: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(d.path().join("o/matrix-results.json")).unwrap(),
    )
    .unwrap();
    let outcomes: Vec<&str> = r["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes, ["pass", "pass"], "{r:#}");

    let fresh = tempfile::tempdir().unwrap();
    let o = bin()
        .current_dir(d.path())
        .args([
            "bisect-config",
            "--dry-run",
            "--axis",
            "launch",
            "--rev",
            "HEAD",
            "--good-rev",
            "HEAD~1",
        ])
        .args([
            "--matrix", "m.toml", "--repo", "repo", "--engine", "none", "--out",
        ])
        .arg(fresh.path().join("o"))
        .arg("--work-dir")
        .arg(fresh.path().join("w"))
        .output()
        .unwrap();
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("base configuration") && err.contains("the first of 2 configurations"),
        "{err}"
    );
    assert!(
        out.contains("launch=plain") && out.contains("launch=blocking"),
        "{out}"
    );
    assert!(out.contains("then: the commit bisect"), "{out}");
    assert!(
        std::fs::read_dir(fresh.path()).unwrap().next().is_none(),
        "a plan made something"
    );

    // The image of a value is missing: one line, exit 3, before any cell ran.
    let in_podman = |extra: &[&str]| {
        bin()
            .current_dir(fresh.path())
            .args(["bisect-config", "--axis", "launch", "--rev", "HEAD"])
            .args(["--engine", "podman"])
            .args(extra)
            .arg("--matrix")
            .arg(d.path().join("m.toml"))
            .arg("--repo")
            .arg(d.path().join("repo"))
            .args(["--work-dir", "w", "--out", "o"])
            .output()
            .unwrap()
    };
    let o = in_podman(&[]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(3), "{err}");
    let lines: Vec<&str> = err.lines().filter(|l| l.contains("error")).collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].contains("localhost/setrows-nope:1.0"), "{err}");
    assert!(!err.contains("attempts"), "no retries: {err}");
    assert!(!fresh.path().join("o").exists(), "{err}");

    // Its dry run looks the image up (run's prepare, as the run would) and says what a run
    // would meet, exit 0, nothing made.
    let o = in_podman(&["--dry-run"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        out.contains("in image localhost/setrows-nope:1.0 (podman): missing here, a run stops before its first probe"),
        "{out}"
    );
    assert!(out.contains("then: nothing (no --good-rev)"), "{out}");
    assert!(!fresh.path().join("o").exists(), "a plan made --out");

    // The matrix too: every cell of the missing image says so, and none was attempted.
    let o = bin()
        .current_dir(fresh.path())
        .args(["matrix", "--rev", "HEAD", "--engine", "podman"])
        .arg("--matrix")
        .arg(d.path().join("m.toml"))
        .arg("--repo")
        .arg(d.path().join("repo"))
        .args(["--work-dir", "w2", "--out", "o2"])
        .output()
        .unwrap();
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(3), "{err}");
    let r: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(fresh.path().join("o2/matrix-results.json")).unwrap(),
    )
    .unwrap();
    let cells = r["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2, "{r:#}");
    for c in cells {
        assert_eq!(c["outcome"], "infra_error", "{c:#}");
        assert_eq!(c["attempts"], 0, "not retried: {c:#}");
        let sig = c["signature"].as_str().unwrap_or("");
        assert!(sig.contains("localhost/setrows-nope:1.0"), "{c:#}");
    }
}

/// Item 7: a bisect's relative --repo, --work-dir, --json and --report, and `--probe REV` with
/// what git takes (HEAD), as `--good`/`--bad` take it.
#[test]
fn a_bisect_takes_relative_paths_and_any_revision() {
    let f = Fixture::new(&spec(8, 4));
    let run = |args: &[&str]| {
        bin()
            .current_dir(f.dir.path())
            .args([
                "--repo",
                "repo",
                "--good",
                f.sha(0),
                "--bad",
                "HEAD",
                "--work-dir",
                "w",
            ])
            .args(["--script", "test -f \"$SRC/CMakeLists.txt\""])
            .args(args)
            .output()
            .unwrap()
    };
    let o = run(&["--probe", "HEAD"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(out.contains(f.sha(7)), "{out}");
    let o = run(&["--probe", &f.sha(7)[..10]]);
    assert!(o.status.success(), "{}", text(&o).1);
    // What a single probe has no use for is refused; its JSON goes where --json says.
    refused(
        &run(&["--probe", "HEAD", "--report", "r.md"]),
        &["--report", "--probe"],
    );
    refused(
        &run(&["--plan-only", "--validate", "3"]),
        &["--validate", "--plan-only"],
    );
    let o = run(&["--probe", "HEAD~1", "--json", "probe.json"]);
    assert!(o.status.success(), "{}", text(&o).1);
    let probe = std::fs::read_to_string(f.dir.path().join("probe.json")).expect("--json FILE");
    assert!(probe.contains(f.sha(6)), "{probe}");

    let o = run(&["--dry-run", "--json", "plan.json"]);
    assert!(o.status.success(), "{}", text(&o).1);
    assert!(f.dir.path().join("plan.json").is_file());
    let o = run(&["--json", "r.json", "--report", "r.md"]);
    assert!(o.status.code().is_some_and(|c| c < 2), "{}", text(&o).1);
    assert!(f.dir.path().join("r.json").is_file() && f.dir.path().join("r.md").is_file());
}

/// Item 4: the report says which endpoints were tested, and when neither was.
#[test]
fn the_report_says_when_neither_endpoint_was_tested() {
    let d = tempfile::tempdir().unwrap();
    let repo = d.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    for i in 0..16 {
        let state = if i < 9 { "good" } else { "bad" };
        std::fs::write(repo.join("state"), format!("{state} {i}\n")).unwrap();
        git(&repo, &["add", "-A"]);
        git(&repo, &["commit", "-qm", &format!("c{i}")]);
    }
    let o = bin()
        .current_dir(d.path())
        .args([
            "--repo",
            "repo",
            "--good",
            "HEAD~15",
            "--bad",
            "HEAD",
            "--work-dir",
            "w",
        ])
        .args([
            "--script",
            "grep -q good \"$SRC/state\"",
            "--report",
            "r.md",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o).1);
    let md = std::fs::read_to_string(d.path().join("r.md")).unwrap();
    assert!(md.contains("- endpoints: neither was tested"), "{md}");
}
