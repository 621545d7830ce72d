//! matrix.yml when a leg does not finish (issue 47 item 3), executed in the workflow harness
//! (tests/workflows) against the loopback GitHub API stand-in: a leg whose run step is cut off
//! by the job's timeout (a GPU run that never returns), a leg whose runner is lost before any
//! step of its run, and a run where no leg reports at all. In each, every configuration of the
//! version stays in the posted comment as an `infra_error` row with its reason; with nothing
//! fresh the comment says so and the report job fails.
//!
//! Standing in: `podman` (this test's, on the runners' PATH) answers `version`, `image exists`
//! and `image inspect` at once, and every `podman run` hangs, as a hang-type GPU fault does;
//! `sudo` (the hosted build check's room-making) deletes nothing. Real: matrix.yml's text, the
//! tool, the report's rendering and posting.

#[path = "container_common/mod.rs"]
mod container_common;
mod fake_github;
mod workflows;

use container_common::{make_repo, BUILD, TEST};
use fake_github::FakeGithub;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::Duration;
use workflows::{copy_tree, Harness, Kill};

const RESULTS_TOKEN: &str = "github_pat_11HARNESS0cutoff0token0only";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

struct World {
    _d: tempfile::TempDir,
    h: Harness,
    api: FakeGithub,
}

/// Two ROCm versions (two legs), two configurations each, two revisions; every GPU run hangs.
fn world() -> Option<World> {
    for tool in ["jq", "python3", "git"] {
        container_common::tools_require(tool)?;
    }
    let d = tempfile::tempdir().unwrap();
    let repo = d.path().join("ggml");
    let shas = make_repo(&repo, 3, 9);
    let project = d.path().join("project");
    for sub in [".github", "containers"] {
        copy_tree(&root().join(sub), &project.join(sub));
    }
    std::fs::write(
        project.join("matrix.toml"),
        format!(
            r#"revisions = ["{first}", "{last}"]
[probe]
kind = "script"
build = '{BUILD}'
script = '{TEST}'
timeout_s = 300
[images]
hip = "localhost/setrows-cutoff:{{rocm}}"
[matrix]
backend = ["hip"]
rocm = ["6.4.1", "6.4.3"]
gfx = ["gfx1151"]
wave_size = [32]
graphs = [false]
launch = ["default"]
params = ["low", "high"]
[launch.default]
[params.low]
args = ["--level", "1"]
[params.high]
args = ["--level", "10"]
"#,
            first = shas[0],
            last = shas[2],
        ),
    )
    .unwrap();
    let mut h = Harness::new(
        &project,
        &assert_cmd::cargo::cargo_bin("setrows-bisect"),
        &d.path().join("actions"),
    );
    let api = FakeGithub::start(d.path(), &h.tokens_file(), &[]);
    h.register_token(
        RESULTS_TOKEN,
        json!({"kind": "user", "login": "results-bot", "repos": ["harness/results"]}),
    );
    // Where docs/github.md puts it: the `results` environment, not the repository's secrets.
    let mut env = serde_json::Map::new();
    env.insert("RESULTS_TOKEN".into(), json!(RESULTS_TOKEN));
    h.environments.insert("results".into(), env);
    h.vars.insert("RESULTS_AUTHOR".into(), json!("results-bot"));
    h.vars
        .insert("RESULTS_ISSUE".into(), json!("harness/results#7"));
    h.repos.insert("ggml-org/ggml".into(), repo);
    h.runner_env
        .push(("GITHUB_API_URL".into(), api.url.clone()));
    // The GPU and compile jobs' long limits fire in seconds here; the rest keep real minutes.
    for job in ["run", "build-check"] {
        h.job_minute.insert(job.into(), Duration::from_millis(10));
    }
    h.stand_in(
        "podman",
        "#!/bin/sh\n# Cut-off fixture: every run hangs (a GPU fault that outlasts the job).\n\
         case \"$1\" in\n\
           version) echo 5.4.0 ;;\n\
           image) case \"$2\" in exists) echo \"podman stand-in: image exists $3\" >&2 ;; *) echo 'sha256:00 sha256:11' ;; esac ;;\n\
         esac\n\
         # The second version's runner is lost here (the test's kill hook fires on this line).\n\
         case \"$1 $2 $3\" in *'exists localhost/setrows-cutoff:6.4.3') echo 'podman stand-in: lost' >&2; exec sleep 120 ;; esac\n\
         case \"$1\" in\n\
           run) exec sleep 120 ;;\n\
         esac\n\
         exit 0\n",
    );
    h.stand_in(
        "sudo",
        "#!/bin/sh\n# Cut-off fixture: deletes nothing.\nexit 0\n",
    );
    Some(World { _d: d, h, api })
}

impl World {
    fn explain(&self) -> String {
        self.h.log.join("\n")
    }
    /// The legs as the plan job gave them: (name, configuration ids).
    fn legs(&self) -> Vec<(String, Vec<String>)> {
        let mut legs: Vec<(String, Vec<String>)> = self
            .h
            .jobs
            .iter()
            .filter(|(k, _)| k.starts_with("run["))
            .map(|(_, j)| {
                (
                    j.matrix["name"].as_str().unwrap().to_string(),
                    j.matrix["ids"]
                        .as_str()
                        .unwrap()
                        .split(',')
                        .map(str::to_string)
                        .collect(),
                )
            })
            .collect();
        legs.sort();
        legs
    }
}

/// The table row of configuration `id` in a comment body.
fn row<'a>(body: &'a str, id: &str) -> &'a str {
    body.lines()
        .find(|l| l.starts_with(&format!("| `{id}` |")))
        .unwrap_or_else(|| panic!("no row for {id} in:\n{body}"))
}

#[test]
fn a_cut_off_leg_and_a_lost_runner_keep_every_configuration_with_its_reason() {
    let Some(mut w) = world() else { return };
    // The second leg's runner dies before its run: no step of the matrix run, no upload.
    w.h.kill = Some(Kill {
        job: "run".into(),
        leg: 1,
        step: "Build the image if the runner lacks it".into(),
        once_logged: "podman stand-in: lost".into(),
    });
    let r =
        w.h.dispatch("matrix.yml", "workflow_dispatch", json!({"post": "true"}));
    let explain = w.explain();
    assert_eq!(r, "failure", "{explain}");
    assert_eq!(w.h.jobs["run[0]"].result, "cancelled", "{explain}");
    assert_eq!(w.h.jobs["run[1]"].result, "failure", "{explain}");
    // Some legs reported: the report posts and succeeds; the run legs are what is red.
    assert_eq!(w.h.jobs["report[0]"].result, "success", "{explain}");
    assert_eq!(
        w.h.jobs["report[0]"].environment.as_deref(),
        Some("results")
    );
    let legs = w.legs();
    assert_eq!(legs.len(), 2, "{explain}");
    let body = w.api.comment_bodies().pop().unwrap_or_default();
    assert!(!body.is_empty(), "nothing posted:\n{explain}");
    let (cut, lost) = (&legs[0], &legs[1]);
    let (cut, lost) = if w.h.jobs["run[0]"].matrix["name"] == json!(cut.0) {
        (cut, lost)
    } else {
        (lost, cut)
    };
    for id in &cut.1 {
        let r = row(&body, id);
        assert_eq!(
            r.matches("infra_error: cut off: job cancelled or timed out after 480 min")
                .count(),
            2,
            "{r}\n{body}"
        );
    }
    for id in &lost.1 {
        let r = row(&body, id);
        assert_eq!(
            r.matches("infra_error: no results: runner offline or lost")
                .count(),
            2,
            "{r}\n{body}"
        );
    }
    assert!(!body.contains("No fresh matrix results"), "{body}");
    eprintln!("--- posted comment ---\n{body}");
}

#[test]
fn a_run_with_no_results_says_so_and_its_report_fails() {
    let Some(mut w) = world() else { return };
    // Every GPU runner is offline: no leg runs a step, so none uploads anything.
    w.h.offline.insert("run".into());
    let r =
        w.h.dispatch("matrix.yml", "workflow_dispatch", json!({"post": "true"}));
    let explain = w.explain();
    assert_eq!(r, "failure", "{explain}");
    assert_eq!(w.h.jobs["report[0]"].result, "failure", "{explain}");
    let body = w.api.comment_bodies().pop().unwrap_or_default();
    assert!(
        body.contains("No fresh matrix results"),
        "{body}\n{explain}"
    );
    for (_, ids) in w.legs() {
        for id in ids {
            assert!(
                row(&body, &id).contains("no results: runner offline or lost"),
                "{body}"
            );
        }
    }
}

/// The minutes a cut-off cell's reason names are the run job's own limit.
#[test]
fn the_cut_off_reason_names_the_run_jobs_timeout() {
    let text = std::fs::read_to_string(root().join(".github/workflows/matrix.yml")).unwrap();
    let wf: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).unwrap();
    let run = &wf["jobs"]["run"];
    let minutes = run["timeout-minutes"].as_u64().unwrap();
    let steps = serde_yaml_ng::to_string(&run["steps"]).unwrap();
    assert!(
        steps.contains(&format!("timed out after {minutes} min")),
        "matrix.yml: the cut-off step's reason does not name timeout-minutes {minutes}"
    );
}

/// The tool's side of a cut-off: `matrix` has each finished cell on disk while a later cell
/// hangs, so killing it (what a job's timeout does) loses only the unfinished ones, and
/// `matrix --cut-off` then records those with the reason, keeping the finished cell as it was.
#[test]
fn a_killed_matrix_run_keeps_its_finished_cells_and_cut_off_completes_the_rest() {
    let d = tempfile::tempdir().unwrap();
    let repo = d.path().join("repo");
    let shas = make_repo(&repo, 2, 9);
    let conf = d.path().join("matrix.toml");
    std::fs::write(
        &conf,
        r#"[probe]
kind = "script"
build = 'true'
script = 'if grep -q "revision 1" "$SRC/t.c"; then sleep 120; fi'
[launch.plain]
[params.p]
args = []
[matrix]
backend = ["cpu"]
launch = ["plain"]
params = ["p"]
"#,
    )
    .unwrap();
    let out = d.path().join("out");
    let command = |extra: &[&str]| {
        let mut c = std::process::Command::new(assert_cmd::cargo::cargo_bin("setrows-bisect"));
        c.env("SETROWS_WORK_DIR", d.path().join("work"))
            .arg("matrix")
            .arg("--matrix")
            .arg(&conf)
            .arg("--repo")
            .arg(&repo)
            .arg("--out")
            .arg(&out)
            .args(["--engine", "none", "--rev", &shas[0], "--rev", &shas[1]])
            .args(extra)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        c
    };
    let read = || -> Option<Value> {
        serde_json::from_str(&std::fs::read_to_string(out.join("matrix-results.json")).ok()?).ok()
    };
    let mut child = command(&[]).spawn().unwrap();
    let t = std::time::Instant::now();
    let cells = |v: &Value| v["cells"].as_array().map_or(0, Vec::len);
    while read().is_none_or(|v| cells(&v) < 1) {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run ended before its hanging cell"
        );
        assert!(t.elapsed() < Duration::from_secs(60), "no cell written");
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let killed = read().unwrap();
    assert_eq!(cells(&killed), 1, "{killed:#}");
    assert_eq!(killed["cells"][0]["outcome"], "pass", "{killed:#}");
    assert_eq!(
        killed["revisions"].as_array().unwrap().len(),
        2,
        "{killed:#}"
    );

    let reason = "cut off: job cancelled or timed out after 480 min";
    let status = command(&["--cut-off", reason]).status().unwrap();
    assert!(status.success());
    let done = read().unwrap();
    assert_eq!(cells(&done), 2, "{done:#}");
    assert_eq!(done["cells"][0], killed["cells"][0], "{done:#}");
    assert_eq!(done["cells"][1]["outcome"], "infra_error", "{done:#}");
    assert_eq!(done["cells"][1]["signature"], reason, "{done:#}");
    assert_eq!(done["cells"][1]["sha"], json!(shas[1]), "{done:#}");
    let md = std::fs::read_to_string(out.join("matrix-results.md")).unwrap();
    assert!(md.contains(&format!("⚠️ infra_error: {reason}")), "{md}");
    // Run again on a complete file: nothing is added.
    assert!(command(&["--cut-off", reason]).status().unwrap().success());
    assert_eq!(read().unwrap(), done);
}

/// `matrix --time-limit`: once the limit has passed no cell starts, and the cells left say why.
#[test]
fn a_run_past_its_time_limit_starts_no_cell_and_says_so() {
    let d = tempfile::tempdir().unwrap();
    let repo = d.path().join("repo");
    let shas = make_repo(&repo, 2, 9);
    let conf = d.path().join("matrix.toml");
    std::fs::write(
        &conf,
        r#"[probe]
kind = "script"
build = 'true'
script = 'sleep 2'
[launch.plain]
[params.p]
args = []
[matrix]
backend = ["cpu"]
launch = ["plain"]
params = ["p"]
"#,
    )
    .unwrap();
    let out = d.path().join("out");
    // 0.01 min = 0.6 s: the first cell starts at once and takes 2 s; the second never starts.
    let status = std::process::Command::new(assert_cmd::cargo::cargo_bin("setrows-bisect"))
        .env("SETROWS_WORK_DIR", d.path().join("work"))
        .arg("matrix")
        .arg("--matrix")
        .arg(&conf)
        .arg("--repo")
        .arg(&repo)
        .arg("--out")
        .arg(&out)
        .args(["--engine", "none", "--time-limit", "0.01"])
        .args(["--rev", &shas[0], "--rev", &shas[1]])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    // Cells without a verdict: the infrastructure exit.
    assert_eq!(status.code(), Some(3));
    let r: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("matrix-results.json")).unwrap())
            .unwrap();
    let cells = r["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2, "{r:#}");
    assert_eq!(cells[0]["outcome"], "pass", "{r:#}");
    assert_eq!(cells[1]["outcome"], "infra_error", "{r:#}");
    assert_eq!(
        cells[1]["signature"], "not run: the run's time limit of 0.01 min was reached",
        "{r:#}"
    );
}
