//! The GitHub Actions workflows executed, not only linted: tests/workflows runs matrix.yml,
//! bisect.yml and bisect-distributed.yml (with its bisect-round.yml rounds and the
//! setrows-config composite action) step by step on this machine, on a generated repository
//! standing in for ggml, the CPU configuration of a test matrix.toml in the CPU build image
//! (podman), and the GitHub API stand-in (scripts/fault-injection/fake_github.py) on loopback.
//! Every `run:` script is the YAML's own; see tests/workflows/mod.rs for what replaces the
//! hosted parts (checkout, cargo, artifacts).

#[path = "container_common/mod.rs"]
mod container_common;
mod fake_github;
mod workflows;

use container_common::{image_a, make_repo, podman, BUILD, TEST};
use fake_github::FakeGithub;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use workflows::{copy_tree, Harness, Kill};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

struct World {
    d: tempfile::TempDir,
    h: Harness,
    shas: Vec<String>,
    api: FakeGithub,
}

/// The results token of the tests: a fine-grained personal token of `results-bot` that may
/// write issues of the results repository only (what docs/github.md tells people to create).
const RESULTS_TOKEN: &str = "github_pat_11HARNESS0results0token0only";
/// A state signing pair made as docs/github.md says (`openssl genpkey -algorithm ed25519
/// -outform DER | base64 -w0`, and `openssl pkey -inform DER -pubout -outform DER | base64 -w0`).
const STATE_KEY: &str = "MC4CAQAwBQYDK2VwBCIEIGe06br3CGnohBF7vnMN0lzfvnIGDEJD7HORph95yInf";
const STATE_PUBLIC_KEY: &str = "MCowBQYDK2VwAyEAx4/9nk49PMQaRGIK7olnCsN0wqQypZjb2KDrHaN/+qI=";

/// A generated "ggml" of `n` commits (the `high` configuration fails from `bad_from`), a
/// project checkout with the real .github/ and containers/ and a CPU-only matrix.toml, and a
/// harness whose runners reach the API stand-in and podman. Results go to harness/results#7,
/// another repository than the workflows' own, so they post with the RESULTS_TOKEN secret.
fn world(n: usize, bad_from: usize) -> Option<World> {
    world_with(n, bad_from, &[])
}

fn world_with(n: usize, bad_from: usize, api_args: &[&str]) -> Option<World> {
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
    let mut h = Harness::new(
        &project,
        &assert_cmd::cargo::cargo_bin("setrows-bisect"),
        &d.path().join("actions"),
    );
    let api = FakeGithub::start(d.path(), &h.tokens_file(), api_args);
    h.register_token(
        RESULTS_TOKEN,
        json!({"kind": "user", "login": "results-bot", "repos": ["harness/results"]}),
    );
    h.secrets
        .insert("RESULTS_TOKEN".into(), json!(RESULTS_TOKEN));
    // The state signing pair docs/github.md tells to make: the report jobs sign, a resuming
    // bisect checks with the public half.
    h.secrets
        .insert("RESULTS_SIGNING_KEY".into(), json!(STATE_KEY));
    h.vars
        .insert("RESULTS_PUBLIC_KEY".into(), json!(STATE_PUBLIC_KEY));
    // The comments' author for a job that reads them with its own GITHUB_TOKEN (resume).
    h.vars.insert("RESULTS_AUTHOR".into(), json!("results-bot"));
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
    /// No token (any job's GITHUB_TOKEN, the results secret) is in a comment or in any file
    /// the runs left, except the registry the API stand-in reads.
    fn assert_token_nowhere(&self) {
        assert!(!self.h.minted.is_empty());
        let mut all: Vec<String> = self.h.minted.clone();
        all.push(RESULTS_TOKEN.into());
        all.push(STATE_KEY.into());
        for t in &all {
            for (_, _, body) in self.api.requests() {
                assert!(!body.contains(t.as_str()), "a token reached a comment");
            }
            let out = std::process::Command::new("grep")
                .args(["-rl", "--exclude=tokens.json", t.as_str()])
                .arg(&self.h.base)
                .output()
                .unwrap();
            assert!(
                out.stdout.is_empty(),
                "a token is in {}",
                String::from_utf8_lossy(&out.stdout)
            );
        }
    }
    /// The tool was built once in this workflow run (builds counted from `before`), by a job
    /// on a hosted runner.
    fn assert_built_once_off_the_gpu(&self, before: usize) {
        let builds = self.h.cargo_builds();
        assert_eq!(
            builds.len() - before,
            1,
            "builds this run: {:?}\n{}",
            &builds[before..],
            self.explain()
        );
        let runner = &builds[before];
        let (job, run) = self
            .h
            .jobs
            .iter()
            .find(|(_, j)| &j.runner == runner)
            .unwrap_or_else(|| panic!("no job ran on {runner}"));
        assert_eq!(run.runs_on, ["ubuntu-24.04"], "{job} built the tool");
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
    // A manual run of matrix.toml's revisions (shas 0 and 5): the nightly's question. Its first
    // attempt lacks the results secret, so its report fails after uploading junit-matrix; with
    // the secret set, "Re-run failed jobs" repeats the report and that upload in the same run.
    let secret = w.h.secrets.remove("RESULTS_TOKEN").unwrap();
    let r =
        w.h.dispatch("matrix.yml", "workflow_dispatch", json!({"post": "true"}));
    assert_eq!(r, "failure", "{}", w.explain());
    assert_eq!(w.h.jobs["report"].result, "failure", "{}", w.explain());
    assert!(w.artifact("junit-matrix").join("junit.xml").is_file());
    w.h.secrets.insert("RESULTS_TOKEN".into(), secret);
    let r =
        w.h.rerun_failed("matrix.yml", "workflow_dispatch", json!({"post": "true"}));
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
    assert!(w.artifact("junit-matrix").join("junit.xml").is_file());
    let summary = std::fs::read_to_string(w.h.base.join("step-summary.md")).unwrap();
    assert!(summary.contains(&high), "{summary}");
    assert_eq!(
        (w.api.creates(), w.api.edits()),
        (1, 0),
        "{:?}",
        w.api.requests()
    );
    w.assert_built_once_off_the_gpu(0);
    // The comment was posted with the results secret (its user), not the job's GITHUB_TOKEN;
    // the tool asked GET /user with it, and no job token wrote anything (the first attempt's
    // was refused).
    assert!(
        w.api
            .answers()
            .iter()
            .all(|(m, _, status, login)| m == "GET" || login == "results-bot" || *status >= 400),
        "{:?}",
        w.api.answers()
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
            "bisect.yml --ref main -f config={high} -f good={} -f bad={} -f post=true -f shared_by=-",
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
    w.assert_built_once_off_the_gpu(1);

    // A dispatch with its own revisions asks another question: its own comment (key
    // matrix-revisions:<hash>, in its own concurrency groups), so no nightly table replaces it.
    w.h.vars.remove("BISECT_NEW_FAILURES");
    let revs = format!("{} {}", w.shas[1], w.shas[5]);
    let r = w.h.dispatch(
        "matrix.yml",
        "workflow_dispatch",
        json!({"revisions": revs, "post": "true"}),
    );
    assert_eq!(r, "success", "{}", w.explain());
    assert_eq!(
        (w.api.creates(), w.api.edits()),
        (2, 1),
        "{:?}",
        w.api.requests()
    );
    let report_group =
        w.h.concurrency
            .iter()
            .rev()
            .find(|(at, _, _)| at == "report");
    assert_eq!(
        report_group.map(|(_, g, _)| g.as_str()),
        Some(format!("results-comment-harness/results#7-matrix-{revs}").as_str())
    );
    w.assert_token_nowhere();
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

    // Identity, not counts. Over every round's artifacts no commit was probed twice, whatever
    // its run index (the script is deterministic: one run per commit decides it); the killed
    // probe was made once; and no round planned a commit an earlier round had stored.
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
    let all: Vec<(String, u32)> = by_round.values().flatten().cloned().collect();
    let commits: BTreeSet<&String> = all.iter().map(|(c, _)| c).collect();
    assert_eq!(
        commits.len(),
        all.len(),
        "a commit was probed twice: {by_round:?}"
    );
    let killed_sha = killed["sha"].as_str().unwrap().to_string();
    assert_eq!(all.iter().filter(|(c, _)| *c == killed_sha).count(), 1);
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
        let earlier: BTreeSet<&String> = by_round
            .range(..round)
            .flat_map(|(_, v)| v.iter().map(|(c, _)| c))
            .collect();
        for p in &planned {
            let sha = p["sha"].as_str().unwrap().to_string();
            assert!(!earlier.contains(&sha), "round {round} probes {sha} again");
        }
    }
    // A (K+1)-section over the N - 1 gaps between the candidates: each round cuts them to
    // about 1/(K+1), so the rounds that probe are at most ceil(log_{K+1} (N - 1)), one fewer
    // where the last part holds no more than K open candidates. The first round holds K
    // midpoints (issue 45: it held only the endpoints, one round more).
    let n = local["range"]["candidates"].as_u64().unwrap() as f64;
    let most = ((n - 1.0).ln() / ((K + 1) as f64).ln()).ceil() as usize;
    assert!(
        (most - 1..=most).contains(&rounds_probing),
        "probing rounds for N={n} candidates, K={K}: {rounds_probing}, {by_round:?}"
    );
    assert_eq!(
        by_round.values().next().map(Vec::len),
        Some(K),
        "{by_round:?}"
    );
    // The verdict probed nothing the rounds stored, nor anything else: its store is exactly the
    // rounds' runs, and every probe its result lists was read from that store.
    let verdict_dir = w.h.jobs["verdict[0]"].runner_dir.clone().unwrap();
    let verdict_runs: BTreeSet<(String, u32)> =
        stored_runs(&verdict_dir.join("temp/setrows-work/results"))
            .into_iter()
            .collect();
    assert_eq!(
        verdict_runs,
        all.iter().cloned().collect::<BTreeSet<_>>(),
        "the verdict job probed on its own"
    );
    let probes = dist["probes"].as_array().unwrap();
    assert!(
        !probes.is_empty() && probes.iter().all(|p| p["cached"] == true),
        "the verdict probed: {dist:#}"
    );
    // The rounds and the verdict fetched the tool the build job made; nothing else built it.
    w.assert_built_once_off_the_gpu(0);
    assert_eq!(
        (w.api.creates(), w.api.edits()),
        (1, 0),
        "{:?}",
        w.api.requests()
    );

    // The same question through bisect.yml: it resumes from the comment's stored probes (the
    // comments' author is the token's user, as RESULTS_AUTHOR documents) and edits the one
    // comment instead of adding one.
    let before = w.h.cargo_builds().len();
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
    w.assert_built_once_off_the_gpu(before);
    // Both workflows' report jobs held the one group of this results comment (evaluated as
    // GitHub would). The two bisections of the question hold groups of their own: each names
    // the question and what changes its outcome (issue 47 item 4: `resume` reads the comment's
    // stored probes, so a resuming run must never replace, or be replaced by, one that does not).
    let groups = |pick: &dyn Fn(&str) -> bool| -> BTreeSet<String> {
        w.h.concurrency
            .iter()
            .filter(|(at, _, _)| pick(at))
            .map(|(_, g, _)| g.clone())
            .collect()
    };
    let reports = groups(&|at| at == "report");
    assert_eq!(reports.len(), 1, "{reports:?}");
    let g = reports.iter().next().unwrap();
    assert!(
        g.starts_with("results-comment-harness/results#7-bisect-") && g.contains(&good),
        "{g}"
    );
    let runs = groups(&|at| at.starts_with("workflow bisect"));
    assert_eq!(runs.len(), 2, "{runs:?}");
    assert!(
        runs.iter()
            .all(|r| r.starts_with("bisect-") && r.contains(&good) && r.contains("-post-true-")),
        "{runs:?}"
    );
    assert!(
        runs.iter().any(|r| r.ends_with("-resume-true"))
            && runs.iter().any(|r| r.contains("-confidence-")),
        "{runs:?}"
    );
    assert_eq!(
        w.h.concurrency
            .iter()
            .filter(|(at, _, _)| at == "report")
            .count(),
        2,
        "{:?}",
        w.h.concurrency
    );
    w.assert_token_nowhere();
}

/// The default configuration: results go to Luce-Org/lucebox#516, another repository than the
/// workflow's own, posted with `secrets.RESULTS_TOKEN || github.token`. Without the secret the
/// job's GITHUB_TOKEN is refused there (403 "Resource not accessible by integration", as on
/// GitHub; its `GET /user` is refused too) and the report job fails in one line that names the
/// secret and how to create it, the results kept in the job summary and the run's artifact.
/// With a secret scoped to the upstream repository alone the same run posts.
#[test]
fn default_results_issue_posts_with_the_secret_and_fails_in_one_line_without_it() {
    const UPSTREAM: &str = "github_pat_11UPSTREAM0lucebox0only";
    let Some(mut w) = world(4, 2) else { return };
    w.h.vars.remove("RESULTS_ISSUE");
    w.h.vars.remove("RESULTS_AUTHOR");
    w.h.secrets.remove("RESULTS_TOKEN");
    let id = w.config_id("high");
    let inputs = json!({"good": w.shas[0], "bad": w.shas[3], "config": id, "post": "true"});
    let r =
        w.h.dispatch("bisect.yml", "workflow_dispatch", inputs.clone());
    assert_eq!(r, "failure", "{}", w.explain());
    assert_eq!(w.h.jobs["bisect[0]"].result, "success", "{}", w.explain());
    assert_eq!(w.h.jobs["report[0]"].result, "failure", "{}", w.explain());
    let entry =
        w.h.log
            .iter()
            .find(|l| l.starts_with("report[0]: exit Some(2); log:"))
            .unwrap_or_else(|| panic!("{}", w.explain()));
    let out = entry.split_once("log:\n").unwrap().1.trim_end();
    assert_eq!(out.lines().count(), 1, "not one line:\n{out}");
    for want in [
        "setrows-bisect: error:",
        "RESULTS_TOKEN",
        "Luce-Org/lucebox",
        "harness/setrows-bisect",
        "Issues read and write",
        "public_repo",
    ] {
        assert!(out.contains(want), "no {want:?} in: {out}");
    }
    let answers = w.api.answers();
    let answered = |method: &str, path: &str, status: u64| {
        answers
            .iter()
            .any(|(m, p, s, _)| m == method && p == path && *s == status)
    };
    assert!(answered("GET", "/user", 403), "{answers:?}");
    assert!(
        answered("POST", "/repos/Luce-Org/lucebox/issues/516/comments", 403),
        "{answers:?}"
    );
    assert!(!answers.iter().any(|a| a.2 == 201), "{answers:?}");
    // Nothing is lost: the job summary has the verdict, the run's artifact the JSON.
    let summary = std::fs::read_to_string(w.h.base.join("step-summary.md")).unwrap();
    assert!(summary.contains(&w.shas[2][..10]), "{summary}");
    let kept: Value = serde_json::from_str(
        &std::fs::read_to_string(
            w.artifact(&format!("bisect-{}", w.h.run_id))
                .join("bisect.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(kept["first_bad"], w.shas[2]);

    // With the secret (a fine-grained token with Issues read/write on Luce-Org/lucebox only).
    w.h.register_token(
        UPSTREAM,
        json!({"kind": "user", "login": "lucebox-results", "repos": ["Luce-Org/lucebox"]}),
    );
    w.h.secrets.insert("RESULTS_TOKEN".into(), json!(UPSTREAM));
    w.h.vars
        .insert("RESULTS_AUTHOR".into(), json!("lucebox-results"));
    // The one line's advice taken: set the secret, "Re-run failed jobs" (the same run, its
    // artifacts still there): only the report runs again, and posts the verdict.
    let r = w.h.rerun_failed("bisect.yml", "workflow_dispatch", inputs);
    assert_eq!(r, "success", "{}", w.explain());
    assert_eq!(w.h.jobs["bisect[0]"].result, "success");
    let created: Vec<_> = w.api.answers().into_iter().filter(|a| a.2 == 201).collect();
    assert_eq!(created.len(), 1, "{created:?}");
    assert_eq!(
        (created[0].1.as_str(), created[0].3.as_str()),
        (
            "/repos/Luce-Org/lucebox/issues/516/comments",
            "lucebox-results"
        )
    );
    w.assert_token_nowhere();
    let out = std::process::Command::new("grep")
        .args(["-rl", "--exclude=tokens.json", UPSTREAM])
        .arg(&w.h.base)
        .output()
        .unwrap();
    assert!(out.stdout.is_empty());
}

/// Removes the fixture's image tags (the CPU image stays).
struct Untag(String, Vec<String>);

impl Drop for Untag {
    fn drop(&mut self) {
        let _ = std::process::Command::new(&self.0)
            .arg("rmi")
            .args(&self.1)
            .output();
    }
}

/// matrix.yml on a HIP-shaped matrix.toml (two ROCm versions: an AMD image built from
/// containers/rocm.Dockerfile, and a Debian-package one from scripts/rocm-image.sh), so the
/// image-build `case` branches and the hosted build-check's room-making step run. Real: every
/// `run:` text as the YAML has it, its `case` branches, the tool, podman for everything but
/// `build` and `image exists`, and the CPU image the HIP cells' script probe runs in. Standing
/// in (this test's, on the runners' PATH): `podman build` checks that the Dockerfile and
/// context the text names exist, records the call and tags the CPU image under the
/// configuration's image name instead of building ROCm; `podman image exists` answers from the
/// images this runner built (a hosted runner starts without any); `sudo` records what the step
/// would delete and deletes nothing; the fixture's scripts/rocm-image.sh records its suite and
/// builds through the podman stand-in (the real one debootstraps Debian's ROCm packages).
#[test]
fn matrix_workflow_runs_the_hip_image_build_and_room_making_branches() {
    let Some(mut w) = world(4, 2) else { return };
    let real = std::env::split_paths(&std::env::var_os("PATH").unwrap())
        .map(|d| d.join("podman"))
        .find(|p| p.is_file())
        .expect("podman on PATH: world() ran it");
    let u = container_common::unique("hipfix");
    let base = w.h.base.clone();
    std::fs::write(
        w.h.project.join("matrix.toml"),
        format!(
            r#"revisions = ["{first}", "{last}"]
[probe]
kind = "script"
build = '{BUILD}'
script = '{TEST}'
timeout_s = 300
[images]
hip = "localhost/{u}:{{rocm}}"
[matrix]
backend = ["hip"]
rocm = ["6.4.1", "6.4.3-sid"]
gfx = ["gfx1151"]
wave_size = [32]
graphs = [false]
launch = ["default"]
params = ["low"]
[launch.default]
[params.low]
args = ["--level", "1"]
"#,
            first = w.shas[0],
            last = w.shas[3],
        ),
    )
    .unwrap();
    let _untag = Untag(
        real.display().to_string(),
        vec![
            format!("localhost/{u}:6.4.1"),
            format!("localhost/{u}:6.4.3-sid"),
        ],
    );
    w.h.stand_in(
        "podman",
        &format!(
            r#"#!/bin/sh
# HIP fixture: `podman build` and `podman image exists` stand in; the rest is the real podman.
mark="$RUNNER_TEMP/../hipfix-images"
if [ "$1 $2" = "image exists" ]; then grep -qxF "$3" "$mark" 2>/dev/null; exit $?; fi
if [ "$1" = build ]; then
  printf '%s\n' "$*" >> '{base}/podman-builds'
  shift; file=; tag=; ctx=
  while [ $# -gt 0 ]; do
    case "$1" in -f) file=$2; shift 2 ;; -t) tag=$2; shift 2 ;; --build-arg) shift 2 ;; *) ctx=$1; shift ;; esac
  done
  if [ ! -f "$file" ] || [ ! -d "$ctx" ]; then echo "podman stand-in: no $file or $ctx" >&2; exit 125; fi
  echo "$tag" >> "$mark"
  exec '{real}' tag '{cpu}' "$tag"
fi
exec '{real}' "$@"
"#,
            base = base.display(),
            real = real.display(),
            cpu = container_common::image_a(),
        ),
    );
    w.h.stand_in(
        "sudo",
        &format!(
            "#!/bin/sh\n# HIP fixture: records what would be deleted, deletes nothing.\n\
             printf '%s\\n' \"$*\" >> '{}/sudo-calls'\n[ \"$1 $2\" = \"rm -rf\" ]\n",
            base.display()
        ),
    );
    let script = w.h.project.join("scripts/rocm-image.sh");
    std::fs::create_dir_all(script.parent().unwrap()).unwrap();
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\n# HIP fixture stand-in for scripts/rocm-image.sh SUITE.\n\
             printf '%s\\n' \"$*\" >> '{}/rocm-image-calls'\n\
             case \"$1\" in sid) v=6.4.3-sid ;; trixie) v=5.7.1-trixie ;; *) exit 2 ;; esac\n\
             exec podman build -f containers/rocm-debian.Dockerfile -t \"localhost/{u}:$v\" containers/\n",
            base.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();

    let r =
        w.h.dispatch("matrix.yml", "workflow_dispatch", json!({"post": "false"}));
    let explain = w.explain();
    let read = |f: &str| std::fs::read_to_string(base.join(f)).unwrap_or_default();
    // Each runner that needed an image built it: the GPU run leg and the hosted build-check leg
    // of each version (a hosted runner starts empty), through the branch for its kind.
    let builds = read("podman-builds");
    let amd = format!(
        "build -f containers/rocm.Dockerfile --build-arg ROCM_VERSION=6.4.1 -t localhost/{u}:6.4.1 containers/"
    );
    let debian = format!(
        "build -f containers/rocm-debian.Dockerfile -t localhost/{u}:6.4.3-sid containers/"
    );
    assert_eq!(
        builds.lines().filter(|l| *l == amd).count(),
        2,
        "{builds}\n{explain}"
    );
    assert_eq!(
        builds.lines().filter(|l| *l == debian).count(),
        2,
        "{builds}\n{explain}"
    );
    assert_eq!(read("rocm-image-calls"), "sid\nsid\n", "{explain}");
    // Room was made on the hosted build-check legs only (both are HIP).
    assert_eq!(
        read("sudo-calls"),
        "rm -rf /usr/share/dotnet /usr/local/lib/android /opt/ghc /opt/hostedtoolcache/CodeQL\n"
            .repeat(2),
        "{explain}"
    );
    for (k, j) in
        w.h.jobs
            .iter()
            .filter(|(k, _)| k.starts_with("build-check["))
    {
        assert_eq!(j.result, "success", "{k}: {explain}");
        let name = j.matrix["name"].as_str().unwrap();
        let res: Value = serde_json::from_str(
            &std::fs::read_to_string(
                w.artifact(&format!("build-check-{name}"))
                    .join(name)
                    .join("matrix-results.json"),
            )
            .unwrap(),
        )
        .unwrap();
        let cells = res["cells"].as_array().unwrap();
        assert!(
            !cells.is_empty() && cells.iter().all(|c| c["outcome"] == "built"),
            "{res:#}"
        );
    }
    // The GPU legs ran the tool on their HIP cells, in the image each leg built. (The fixture's
    // probe is a `script`, which the tool runs without asking for an AMD GPU: the cells pass
    // as the script does at --level 1; the bundled reproducer would be refused here.)
    for (k, j) in w.h.jobs.iter().filter(|(k, _)| k.starts_with("run[")) {
        assert_eq!(j.result, "success", "{k}: {explain}");
        let name = j.matrix["name"].as_str().unwrap();
        let res: Value = serde_json::from_str(
            &std::fs::read_to_string(
                w.artifact(&format!("matrix-{name}"))
                    .join(name)
                    .join("matrix-results.json"),
            )
            .unwrap(),
        )
        .unwrap();
        let cells = res["cells"].as_array().unwrap();
        assert_eq!(cells.len(), 2, "{res:#}");
        for c in cells {
            assert_eq!(c["outcome"], "pass", "{res:#}");
            assert_eq!(c["provenance"]["image"], j.matrix["image"], "{res:#}");
        }
    }
    assert_eq!(r, "success", "{explain}");
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
        cancelled: false,
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
        cancelled: false,
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

/// The nightly finds three configurations newly failing over one range: its fan-out starts one
/// bisect.yml run for the range (the first configuration in matrix order runs it, `shared_by`
/// names the other two; issue 47 item 1). Three runs of that range, one per configuration (as
/// dispatched by hand), queued at once through the harness's model of GitHub's concurrency (one
/// running and one pending per group, a newer pending one cancels the older): none is
/// cancelled, three bisections, three report jobs, three comments, each with its own
/// configuration's verdict.
#[test]
fn three_newly_failing_configurations_give_three_visible_results() {
    let Some(mut w) = world(4, 2) else { return };
    let toml = w.h.project.join("matrix.toml");
    let text = std::fs::read_to_string(&toml).unwrap();
    let text = text.replace(
        r#"params = ["low", "high"]"#,
        r#"params = ["low", "mid", "top", "high"]"#,
    )
        + "[params.mid]\nargs = [\"--level\", \"7\"]\n[params.top]\nargs = [\"--level\", \"9\"]\n";
    std::fs::write(&toml, text).unwrap();
    w.h.vars.insert("BISECT_NEW_FAILURES".into(), json!("true"));
    let r = w.h.dispatch("matrix.yml", "schedule", json!({}));
    assert_eq!(r, "success", "{}", w.explain());
    let dispatched = std::fs::read_to_string(w.h.base.join("dispatches")).unwrap();
    let runs: Vec<Value> = dispatched
        .lines()
        .map(|l| {
            let mut inputs = serde_json::Map::new();
            let words: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(words[0], "bisect.yml", "{l}");
            for pair in words.windows(2).filter(|p| p[0] == "-f") {
                let (k, v) = pair[1].split_once('=').unwrap();
                inputs.insert(k.into(), json!(v));
            }
            Value::Object(inputs)
        })
        .collect();
    assert_eq!(runs.len(), 1, "{dispatched}");
    let mut ids: BTreeSet<String> = runs[0]["shared_by"]
        .as_str()
        .unwrap()
        .split(',')
        .map(String::from)
        .collect();
    ids.insert(runs[0]["config"].as_str().unwrap().to_string());
    let want: BTreeSet<String> = ["mid", "top", "high"]
        .iter()
        .map(|p| w.config_id(p))
        .collect();
    assert_eq!(ids, want, "{dispatched}");
    let runs: Vec<Value> = want
        .iter()
        .map(|id| {
            let mut i = runs[0].clone();
            i["config"] = json!(id);
            i["shared_by"] = json!("-");
            i
        })
        .collect();
    let creates = w.api.creates();
    let queued: Vec<(&str, &str, Value)> = runs
        .iter()
        .map(|i| ("bisect.yml", "workflow_dispatch", i.clone()))
        .collect();
    let results = w.h.queue_together(&queued);
    assert_eq!(results, ["success"; 3], "{}", w.explain());
    assert!(!w.explain().contains("GitHub cancels"), "{}", w.explain());
    assert_eq!(w.api.creates() - creates, 3, "{:?}", w.api.requests());
    let posted: Vec<String> = w
        .api
        .requests()
        .into_iter()
        .filter(|(m, p, _)| m == "POST" && p.ends_with("/issues/7/comments"))
        .map(|(_, _, body)| body)
        .collect();
    for id in &want {
        assert!(
            posted
                .iter()
                .any(|b| b.contains(id.as_str()) && b.contains(&w.shas[2][..10])),
            "no comment with {id}'s verdict: {posted:#?}"
        );
    }
    w.assert_token_nowhere();
}
