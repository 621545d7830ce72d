//! The GitHub Actions workflows executed, not only linted: tests/workflows runs matrix.yml,
//! bisect.yml and bisect-distributed.yml (with its bisect-round.yml rounds and the
//! setrows-config composite action) step by step on this machine, on a generated repository
//! standing in for ggml, the CPU configuration of a test matrix.toml in the CPU build image
//! (podman), and the GitHub API stand-in (scripts/fault-injection/fake_github.py) on loopback.
//! Every `run:` script is the YAML's own; see tests/workflows/mod.rs for what replaces the
//! hosted parts (checkout, cargo, artifacts).

#[path = "container_common/mod.rs"]
mod container_common;
mod workflows;

use container_common::{image_a, make_repo, podman, BUILD, TEST};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;
use workflows::{copy_tree, Harness, Kill};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The API stand-in, killed on drop.
struct FakeGithub {
    child: std::process::Child,
    log: PathBuf,
    url: String,
}

impl FakeGithub {
    fn start(dir: &Path) -> Self {
        let log = dir.join("api.log");
        let port_file = dir.join("api.port");
        let child = std::process::Command::new("python3")
            .arg(root().join("scripts/fault-injection/fake_github.py"))
            .arg("--log")
            .arg(&log)
            .arg("--port-file")
            .arg(&port_file)
            .spawn()
            .expect("python3 runs the GitHub API stand-in");
        let t = std::time::Instant::now();
        while !port_file.exists() {
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "fake GitHub did not start"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let port = std::fs::read_to_string(&port_file).unwrap();
        FakeGithub {
            child,
            log,
            url: format!("http://127.0.0.1:{}", port.trim()),
        }
    }
    /// (method, path) of every request.
    fn requests(&self) -> Vec<(String, String, String)> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| {
                let v: Value = serde_json::from_str(l).unwrap();
                (
                    v["method"].as_str().unwrap().to_string(),
                    v["path"].as_str().unwrap().to_string(),
                    v["body"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect()
    }
    fn creates(&self) -> usize {
        self.requests()
            .iter()
            .filter(|(m, p, _)| m == "POST" && p.contains("/issues/7/comments"))
            .count()
    }
    fn edits(&self) -> usize {
        self.requests()
            .iter()
            .filter(|(m, p, _)| m == "PATCH" && p.contains("/issues/comments/"))
            .count()
    }
}

impl Drop for FakeGithub {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct World {
    d: tempfile::TempDir,
    h: Harness,
    shas: Vec<String>,
    api: FakeGithub,
}

/// A generated "ggml" of `n` commits (the `high` configuration fails from `bad_from`), a
/// project checkout with the real .github/ and containers/ and a CPU-only matrix.toml, and a
/// harness whose runners reach the API stand-in and podman.
fn world(n: usize, bad_from: usize) -> Option<World> {
    podman()?;
    for tool in ["jq", "python3"] {
        container_common::tools_require(tool)?;
    }
    let d = tempfile::tempdir().unwrap();
    let repo = d.path().join("ggml");
    let shas = make_repo(&repo, n, bad_from);
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
cpu = "{image}"
cuda = "localhost/setrows-cuda:{{cuda}}"
[matrix]
backend = ["cpu"]
launch = ["default"]
params = ["low", "high"]
include = [
  {{ backend = "cuda", cuda = "12.8.1", cuda_arch = "90", graphs = true, launch = "default", params = "high" }},
]
[launch.default]
[params.low]
args = ["--level", "1"]
[params.high]
args = ["--level", "10"]
"#,
            first = shas[0],
            last = shas[n - 1],
            image = image_a(),
        ),
    )
    .unwrap();
    let api = FakeGithub::start(d.path());
    let mut h = Harness::new(
        &project,
        &assert_cmd::cargo::cargo_bin("setrows-bisect"),
        &d.path().join("actions"),
    );
    h.repos.insert("ggml-org/ggml".into(), repo);
    h.runner_env
        .push(("GITHUB_API_URL".into(), api.url.clone()));
    h.runner_env.push(("GGML_NO_BACKTRACE".into(), "1".into()));
    for k in ["CONTAINERS_CONF", "SETROWS_BASE_IMAGE"] {
        if let Ok(v) = std::env::var(k) {
            h.runner_env.push((k.into(), v));
        }
    }
    h.vars
        .insert("RESULTS_ISSUE".into(), json!("harness/results#7"));
    Some(World { d, h, shas, api })
}

impl World {
    fn artifact(&self, name: &str) -> PathBuf {
        self.h.base.join("artifacts").join(name)
    }
    fn tool(&self, args: &[&str], cwd: &Path) -> std::process::Output {
        std::process::Command::new(&self.h.bin)
            .args(args)
            .current_dir(cwd)
            .env_remove("SETROWS_WORK_DIR")
            .env_remove("GITHUB_TOKEN")
            .output()
            .unwrap()
    }
    fn config_id(&self, params: &str) -> String {
        let out = self.tool(
            &[
                "matrix",
                "--matrix",
                "matrix.toml",
                "--list",
                "--format",
                "json",
            ],
            &self.h.project,
        );
        assert!(out.status.success(), "{out:?}");
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        v.as_array()
            .unwrap()
            .iter()
            .find(|c| c["values"]["params"] == params && c["backend"] == "cpu")
            .unwrap()["id"]
            .as_str()
            .unwrap()
            .to_string()
    }
    fn explain(&self) -> String {
        self.h.log.join("\n")
    }
    /// Nothing any step or the API saw carries the token.
    fn assert_token_nowhere(&self) {
        let t = &self.h.token;
        for (_, _, body) in self.api.requests() {
            assert!(!body.contains(t.as_str()), "the token reached a comment");
        }
        let out = std::process::Command::new("grep")
            .args(["-rl", t.as_str()])
            .arg(&self.h.base)
            .output()
            .unwrap();
        assert!(
            out.stdout.is_empty(),
            "the token is in {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
}

/// (commit, run index) of every stored run under `dir` (a results/ tree of a work dir).
fn stored_runs(dir: &Path) -> Vec<(String, u32)> {
    let mut v = Vec::new();
    let Ok(keys) = std::fs::read_dir(dir) else {
        return v;
    };
    for key in keys {
        for run in std::fs::read_dir(key.unwrap().path()).unwrap() {
            let p = run.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            let Some(idx) = name
                .strip_prefix("run-")
                .and_then(|s| s.strip_suffix(".json"))
            else {
                continue;
            };
            let r: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
            v.push((
                r["commit"].as_str().unwrap().to_string(),
                idx.parse().unwrap(),
            ));
        }
    }
    v
}

#[test]
fn matrix_workflow_plans_runs_one_job_per_image_and_keeps_one_comment() {
    let Some(mut w) = world(6, 4) else { return };
    let revs = format!("{} {}", w.shas[0], w.shas[5]);
    let r = w.h.dispatch(
        "matrix.yml",
        "workflow_dispatch",
        json!({"revisions": revs, "post": "true"}),
    );
    assert_eq!(r, "success", "{}", w.explain());
    // The plan printed one job per image; the CUDA control was filtered out by the plan's jq.
    let legs: Vec<_> =
        w.h.jobs
            .iter()
            .filter(|(k, _)| k.starts_with("run["))
            .collect();
    assert_eq!(legs.len(), 1, "{}", w.explain());
    let leg = legs[0].1;
    assert_eq!(leg.matrix["name"], "cpu", "{:?}", leg.matrix);
    assert_eq!(leg.matrix["backend"], "cpu");
    let (low, high) = (w.config_id("low"), w.config_id("high"));
    assert_eq!(
        leg.matrix["ids"]
            .as_str()
            .unwrap()
            .split(',')
            .collect::<BTreeSet<_>>(),
        BTreeSet::from([low.as_str(), high.as_str()])
    );
    assert_eq!(w.h.jobs["report"].result, "success");
    assert_eq!(w.h.jobs["bisect-new-failures"].result, "skipped");
    // The run job's artifact reached the report job: every cell, with the planted change.
    let res: Value = serde_json::from_str(
        &std::fs::read_to_string(w.artifact("matrix-cpu").join("cpu/matrix-results.json")).unwrap(),
    )
    .unwrap();
    let cells = res["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 4, "{res:#}");
    let outcome = |id: &str, sha: &str| {
        cells
            .iter()
            .find(|c| c["config"] == id && c["sha"] == sha)
            .unwrap_or_else(|| panic!("no cell {id} {sha}: {res:#}"))["outcome"]
            .clone()
    };
    assert_eq!(outcome(&low, &w.shas[5]), "pass");
    assert_eq!(outcome(&high, &w.shas[0]), "pass");
    assert_ne!(outcome(&high, &w.shas[5]), "pass");
    assert!(w.artifact("matrix-junit").join("junit.xml").is_file());
    let summary = std::fs::read_to_string(w.h.base.join("step-summary.md")).unwrap();
    assert!(summary.contains(&high), "{summary}");
    assert_eq!(
        (w.api.creates(), w.api.edits()),
        (1, 0),
        "{:?}",
        w.api.requests()
    );

    assert!(!w.h.base.join("dispatches").exists());

    // The nightly (schedule: no inputs, matrix.toml's revisions, posting on) edits that comment,
    // and with BISECT_NEW_FAILURES starts one bisection: the configuration that passed at the
    // first revision and fails at the last, never the one that passes at both.
    w.h.vars.insert("BISECT_NEW_FAILURES".into(), json!("true"));
    let r = w.h.dispatch("matrix.yml", "schedule", json!({}));
    assert_eq!(r, "success", "{}", w.explain());
    assert_eq!(w.h.jobs["bisect-new-failures[0]"].result, "success");
    let dispatches = std::fs::read_to_string(w.h.base.join("dispatches")).unwrap();
    assert_eq!(
        dispatches.trim(),
        format!(
            "bisect.yml --ref main -f config={high} -f good={} -f bad={}",
            w.shas[0], w.shas[5]
        ),
        "{}",
        w.explain()
    );
    assert_eq!(
        (w.api.creates(), w.api.edits()),
        (1, 1),
        "{:?}",
        w.api.requests()
    );
    w.assert_token_nowhere();
    eprintln!("{}", w.explain());
}

#[test]
fn distributed_bisect_survives_a_killed_runner_and_matches_the_local_answer() {
    const N: usize = 20;
    const K: usize = 3;
    let Some(mut w) = world(N, 13) else { return };
    let id = w.config_id("high");
    let (good, bad) = (w.shas[0].clone(), w.shas[N - 1].clone());

    // The local answer, from the same checkout.
    let local_json = w.d.path().join("local.json");
    let out = w.tool(
        &[
            "bisect",
            "--repo",
            w.h.repos["ggml-org/ggml"].to_str().unwrap(),
            "--good",
            &good,
            "--bad",
            &bad,
            "--config",
            &id,
            "--work-dir",
            w.d.path().join("local-work").to_str().unwrap(),
            "--json",
            local_json.to_str().unwrap(),
        ],
        &w.h.project.clone(),
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let local: Value =
        serde_json::from_str(&std::fs::read_to_string(&local_json).unwrap()).unwrap();
    assert_eq!(local["first_bad"], w.shas[13], "{local:#}");

    // Round 2's first runner dies in the middle of its probe.
    w.h.kill = Some(Kill {
        job: "round2/probe".into(),
        leg: 0,
        step: "Probe".into(),
        // the runner's line as its probe's build starts (`setrows-bisect: probe <sha>: build`)
        once_logged: ": build\n".into(),
    });
    let inputs =
        json!({"good": good, "bad": bad, "config": id, "slots": K.to_string(), "post": "true"});
    let r = w.h.dispatch(
        "bisect-distributed.yml",
        "workflow_dispatch",
        inputs.clone(),
    );
    assert_eq!(r, "failure", "{}", w.explain());
    assert!(
        w.explain().contains("runner killed during 'Probe'"),
        "{}",
        w.explain()
    );
    assert_eq!(w.h.jobs["round2/probe[0]"].result, "failure");
    assert_eq!(w.h.jobs["verdict"].result, "skipped", "{}", w.explain());
    assert_eq!(w.h.jobs["report"].result, "skipped");
    let killed = w.h.jobs["round2/probe[0]"].matrix.clone();
    let survivors: Vec<String> =
        w.h.jobs
            .iter()
            .filter(|(k, j)| k.starts_with("round2/probe[") && j.result == "success")
            .map(|(k, _)| k.clone())
            .collect();
    assert!(!survivors.is_empty(), "{}", w.explain());

    // "Re-run failed jobs": only the dead runner's probe runs again, then the later rounds.
    let r =
        w.h.rerun_failed("bisect-distributed.yml", "workflow_dispatch", inputs);
    assert_eq!(r, "success", "{}", w.explain());
    assert_eq!(w.h.jobs["report"].result, "success");

    // Same answer as the local bisection.
    let dist: Value = serde_json::from_str(
        &std::fs::read_to_string(
            w.artifact(&format!("bisect-{}", w.h.run_id))
                .join("bisect.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(dist["first_bad"], local["first_bad"], "{dist:#}");

    // No probe was made twice: every stored run, over all rounds' artifacts, is distinct, and
    // no round planned a probe an earlier round had stored. The killed probe was made once.
    let mut by_round: BTreeMap<u32, Vec<(String, u32)>> = BTreeMap::new();
    for e in std::fs::read_dir(w.h.base.join("artifacts")).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        if let Some(rest) = name.strip_prefix("results-") {
            let round: u32 = rest.split('-').next().unwrap().parse().unwrap();
            by_round
                .entry(round)
                .or_default()
                .extend(stored_runs(&w.artifact(&name)));
        }
    }
    let all: Vec<_> = by_round.values().flatten().cloned().collect();
    let distinct: BTreeSet<_> = all.iter().cloned().collect();
    assert_eq!(
        all.len(),
        distinct.len(),
        "a probe was repeated: {by_round:?}"
    );
    let killed_probe = (
        killed["sha"].as_str().unwrap().to_string(),
        killed["run_index"].as_u64().unwrap() as u32,
    );
    assert_eq!(all.iter().filter(|p| **p == killed_probe).count(), 1);
    let mut rounds_probing = 0;
    for round in 1..=6u32 {
        let Some(plan) = w.h.jobs.get(&format!("round{round}/plan[0]")) else {
            continue;
        };
        if plan.result != "success" || plan.outputs["done"] == "true" {
            continue;
        }
        rounds_probing += 1;
        let planned: Vec<Value> =
            serde_json::from_str(plan.outputs["probes"].as_str().unwrap()).unwrap();
        assert!(planned.len() <= K, "round {round} planned {planned:?}");
        let earlier: BTreeSet<_> = by_round
            .range(..round)
            .flat_map(|(_, v)| v.iter().cloned())
            .collect();
        for p in &planned {
            let key = (
                p["sha"].as_str().unwrap().to_string(),
                p["run_index"].as_u64().unwrap() as u32,
            );
            assert!(!earlier.contains(&key), "round {round} repeats {key:?}");
        }
    }
    // ceil(log_{K+1} N) rounds for the interior, plus the round that checks the endpoints.
    let bound = ((N as f64).ln() / ((K + 1) as f64).ln()).ceil() as usize + 1;
    assert!(
        rounds_probing <= bound,
        "{rounds_probing} probing rounds for N={N}, K={K} (bound {bound})"
    );
    eprintln!(
        "distributed: {rounds_probing} probing rounds (N={N}, K={K}, bound {bound}), {} probes",
        all.len()
    );
    // The verdict job found every probe stored: it made none of its own.
    let verdict_dir = w.h.jobs["verdict[0]"].runner_dir.clone().unwrap();
    let verdict_runs = stored_runs(&verdict_dir.join("temp/setrows-work/results"));
    assert_eq!(
        verdict_runs.len(),
        all.len(),
        "the verdict job probed on its own"
    );
    assert_eq!(
        (w.api.creates(), w.api.edits()),
        (1, 0),
        "{:?}",
        w.api.requests()
    );

    // The same question through bisect.yml: it resumes from the comment's stored probes (the
    // comments' author is the token's user, as RESULTS_AUTHOR documents) and edits the one
    // comment instead of adding one.
    w.h.vars.insert("RESULTS_AUTHOR".into(), json!("fi-bot"));
    let r = w.h.dispatch(
        "bisect.yml",
        "workflow_dispatch",
        json!({"good": good, "bad": bad, "config": id, "post": "true"}),
    );
    assert_eq!(r, "success", "{}", w.explain());
    let single: Value = serde_json::from_str(
        &std::fs::read_to_string(
            w.artifact(&format!("bisect-{}", w.h.run_id))
                .join("bisect.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(single["first_bad"], local["first_bad"], "{single:#}");
    let probes = single["probes"].as_array().unwrap();
    assert!(
        !probes.is_empty() && probes.iter().all(|p| p["cached"] == true),
        "bisect.yml probed again what the comment stores: {single:#}"
    );
    assert_eq!(
        (w.api.creates(), w.api.edits()),
        (1, 1),
        "{:?}",
        w.api.requests()
    );
    w.assert_token_nowhere();
}

/// The harness refuses what it does not understand instead of guessing.
#[test]
#[should_panic(expected = "is not implemented by the harness")]
fn an_unknown_expression_function_fails_the_harness() {
    let c = BTreeMap::new();
    let ctx = workflows::expr::Ctx {
        contexts: &c,
        success: true,
        failure: false,
    };
    workflows::expr::eval("hashFiles('**/Cargo.lock')", &ctx);
}

#[test]
fn expressions_follow_githubs_rules() {
    let mut c = BTreeMap::new();
    c.insert("needs".to_string(), json!({"a": {"result": "success", "outputs": {"m": "{\"include\":[]}"}}, "b": {"result": "failure"}}));
    c.insert("vars".to_string(), json!({}));
    c.insert("inputs".to_string(), json!({"round": 2, "post": false}));
    let ctx = workflows::expr::Ctx {
        contexts: &c,
        success: false,
        failure: true,
    };
    let e = |s: &str| workflows::expr::eval(s, &ctx);
    assert_eq!(
        e("fromJSON(needs.a.outputs.m).include[0] != null"),
        json!(false)
    );
    assert_eq!(e("contains(needs.*.result, 'FAILURE')"), json!(true));
    assert_eq!(e("vars.X || 'default'"), json!("default"));
    assert_eq!(e("inputs.round > 1 && inputs.round == '2'"), json!(true));
    assert_eq!(e("!inputs.post"), json!(true));
    // Without a status function a condition means success() && (...).
    assert!(!workflows::expr::condition(Some("inputs.round > 1"), &ctx));
    assert!(workflows::expr::condition(
        Some("always() && inputs.round > 1"),
        &ctx
    ));
}
