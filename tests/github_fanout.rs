//! matrix.yml's bounded fan-out, end to end in the workflow harness (tests/workflows): the real
//! plan job expands the real matrix.toml (264 HIP configurations and a CPU one); the GPU
//! runner's work is stood in by copying each image's results for the night (written here: every
//! HIP configuration failing, or the shipped one-revision nightly of master), and the fan-out,
//! dispatch and report jobs run as the YAML says, against the gh stand-in, which checks every
//! `gh workflow run` against bisect.yml's inputs and keeps each run's artifacts for `gh run
//! download`. The bisects it dispatched run as bisect.yml says too (its GPU bisect stood in by a
//! verdict of the range asked), so a range counts as bisected the way it does on GitHub: once
//! bisect.yml reported it.

mod fake_github;
mod workflows;

use fake_github::FakeGithub;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use workflows::{copy_tree, Harness};

const REVS: usize = 9;

fn sha(i: usize) -> String {
    format!("{:06x}{:034x}", 0xabc0 + i, i)
}

/// The plan job's images: (name, ids) of `matrix --list --format github`.
fn images(project: &Path) -> Vec<(String, Vec<String>)> {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_setrows-bisect"))
        .args([
            "matrix",
            "--matrix",
            "matrix.toml",
            "--list",
            "--format",
            "github",
        ])
        .current_dir(project)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v["include"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["backend"] != "cuda")
        .map(|i| {
            (
                i["name"].as_str().unwrap().to_string(),
                i["ids"]
                    .as_str()
                    .unwrap()
                    .split(',')
                    .map(String::from)
                    .collect(),
            )
        })
        .collect()
}

/// This night's results of every image: CPU passes everywhere; the k-th HIP configuration (in
/// matrix order) passes up to revision `k % 8` and fails from the next one, so the 264 failing
/// configurations fall into 8 first failing revision pairs of 33 each.
fn write_night(scen: &Path, images: &[(String, Vec<String>)]) -> Vec<(String, usize)> {
    std::fs::create_dir_all(scen).unwrap();
    let mut failing = vec![];
    let mut k = 0;
    for (name, ids) in images {
        let hip = name.starts_with("hip");
        let mut cells = vec![];
        for id in ids {
            let first_bad = hip.then(|| 1 + k % 8);
            if hip {
                failing.push((id.clone(), first_bad.unwrap()));
                k += 1;
            }
            for r in 0..REVS {
                let outcome = match first_bad {
                    Some(b) if r >= b => "gpu_fault",
                    _ => "pass",
                };
                cells.push(json!({"config": id, "rev": format!("r{r}"), "sha": sha(r),
                    "outcome": outcome, "signature": null, "duration_s": 1.0, "build_s": 0.5,
                    "test_s": 0.5, "attempts": 1, "log": format!("logs/{id}-{r}.log")}));
            }
        }
        let doc = json!({
            "schema": setrows_bisect::core::result::Kind::Matrix.tag(),
            "matrix": "matrix.toml", "engine": "podman",
            "revisions": (0..REVS).map(|r| json!({"rev": format!("r{r}"), "sha": sha(r)})).collect::<Vec<_>>(),
            "configs": ids.iter().map(|id| json!({"id": id, "label": id,
                "backend": if hip { "hip" } else { "cpu" }, "image": null})).collect::<Vec<_>>(),
            "cells": cells,
        });
        std::fs::write(scen.join(format!("{name}.json")), doc.to_string()).unwrap();
    }
    failing
}

struct World {
    h: Harness,
    failing: Vec<(String, usize)>,
    api: FakeGithub,
    /// The plan job's images (name, ids).
    images: Vec<(String, Vec<String>)>,
    /// The night's results the GPU runner's stand-in copies.
    night: PathBuf,
    /// The repository standing in for ggml (a night's master is a commit of it).
    ggml: PathBuf,
    /// While this file exists, a GPU bisect ends in an infrastructure error (exit 3).
    bisect_fails: PathBuf,
    _d: tempfile::TempDir,
}

const RESULTS_TOKEN: &str = "github_pat_11HARNESS0fanout0results0token";

fn world() -> World {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let d = tempfile::tempdir().unwrap();
    let project = d.path().join("project");
    for sub in [".github", "containers", "scripts"] {
        copy_tree(&root.join(sub), &project.join(sub));
    }
    std::fs::copy(root.join("matrix.toml"), project.join("matrix.toml")).unwrap();
    let imgs = images(&project);
    let scen = d.path().join("night");
    let failing = write_night(&scen, &imgs);
    // The GPU runner's `matrix ... --out results/NAME` copies the night's results of NAME; the
    // compile check's `--build-only` writes nothing; every other command is the tool itself.
    let bin = d.path().join("tool");
    let bisect_fails = d.path().join("bisect-fails");
    std::fs::write(
        &bin,
        format!(
            r#"#!/bin/sh
if [ "$1" = bisect ]; then
  # The GPU bisect: a verdict of the range asked (the golden result, its range replaced).
  prev=""; json=""; report=""; good=""; bad=""
  for a in "$@"; do
    case "$prev" in --json) json=$a ;; --report) report=$a ;; --good) good=$a ;; --bad) bad=$a ;; esac
    prev=$a
  done
  if [ -e '{fails}' ]; then echo "setrows-bisect: infrastructure: runner lost" >&2; exit 3; fi
  mkdir -p "$(dirname "$json")" "$(dirname "$report")"
  jq --arg g "$good" --arg b "$bad" '.range.good = $g | .range.bad = $b' '{golden}' > "$json" || exit 3
  echo "bisected $good..$bad" > "$report"
  exit 0
fi
if [ "$1" = matrix ]; then
  out=""; list=""; build=""; prev=""
  for a in "$@"; do
    if [ "$prev" = --out ]; then out=$a; fi
    case "$a" in --list) list=1 ;; --build-only) build=1 ;; esac
    prev=$a
  done
  if [ -z "$list" ] && [ -n "$out" ]; then
    mkdir -p "$out"
    if [ -z "$build" ]; then cp "{scen}/$(basename "$out").json" "$out/matrix-results.json"; fi
    exit 0
  fi
fi
exec '{real}' "$@"
"#,
            scen = scen.display(),
            fails = bisect_fails.display(),
            golden = root.join("tests/golden/bisect-result.json").display(),
            real = env!("CARGO_BIN_EXE_setrows-bisect"),
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let ggml = d.path().join("ggml");
    std::fs::create_dir_all(&ggml).unwrap();
    let git = |args: &[&str]| {
        let s = std::process::Command::new("git")
            .args(args)
            .current_dir(&ggml)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@t")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@t")
            .status()
            .unwrap();
        assert!(s.success());
    };
    git(&["init", "-q"]);
    git(&["commit", "-q", "--allow-empty", "-m", "r0"]);
    let mut h = Harness::new(&project, &bin, &d.path().join("actions"));
    h.repos.insert("ggml-org/ggml".into(), ggml.clone());
    // The runner has every image; the hosted runner's disk clean-up is not this test's.
    h.stand_in(
        "podman",
        "#!/bin/sh\ncase \"$1 $2\" in 'image exists'|'image inspect') exit 0 ;; esac\nexit 97\n",
    );
    h.stand_in("sudo", "#!/bin/sh\nexit 0\n");
    // A posting report reaches the API stand-in on loopback, with the results token.
    let api = FakeGithub::start(d.path(), &h.tokens_file(), &[]);
    h.register_token(
        RESULTS_TOKEN,
        json!({"kind": "user", "login": "results-bot", "repos": ["harness/results"]}),
    );
    h.secrets
        .insert("RESULTS_TOKEN".into(), json!(RESULTS_TOKEN));
    h.vars
        .insert("RESULTS_ISSUE".into(), json!("harness/results#7"));
    h.runner_env
        .push(("GITHUB_API_URL".into(), api.url.clone()));
    World {
        h,
        failing,
        api,
        images: imgs,
        night: scen,
        ggml,
        bisect_fails,
        _d: d,
    }
}

/// (config, good, bad, post, shared_by) of each dispatch the latest run made.
fn dispatches(h: &Harness, before: usize) -> Vec<Vec<(String, String)>> {
    std::fs::read_to_string(h.base.join("dispatches"))
        .unwrap_or_default()
        .lines()
        .skip(before)
        .map(|l| {
            assert!(l.starts_with("bisect.yml --ref main "), "{l}");
            l.split(" -f ")
                .skip(1)
                .map(|kv| {
                    let (k, v) = kv.split_once('=').unwrap();
                    (k.to_string(), v.to_string())
                })
                .collect()
        })
        .collect()
}

/// Runs bisect.yml for each of these dispatches, as GitHub would; their results.
fn run_bisects(w: &mut World, ds: &[Vec<(String, String)>]) -> Vec<String> {
    ds.iter()
        .map(|d| {
            let inputs: serde_json::Map<String, Value> =
                d.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
            w.h.dispatch("bisect.yml", "workflow_dispatch", Value::Object(inputs))
        })
        .collect()
}

fn field<'a>(d: &'a [(String, String)], k: &str) -> &'a str {
    &d.iter().find(|(x, _)| x == k).unwrap().1
}

fn read(p: PathBuf) -> String {
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn two_hundred_sixty_four_failing_configurations_start_at_most_the_cap() {
    let mut w = world();
    assert_eq!(w.failing.len(), 264);
    let night = json!({"post": "false", "bisect_new_failures": "true", "max_bisects": "3"});
    let mut seen = std::collections::BTreeSet::new();
    let mut count = 0;
    for n in 0..4 {
        let r =
            w.h.dispatch("matrix.yml", "workflow_dispatch", night.clone());
        let log = w.h.log.join("\n");
        assert_eq!(r, "success", "{log}");
        assert_eq!(w.h.jobs["fan-out"].result, "success", "{log}");
        let ds = dispatches(&w.h, count);
        count += ds.len();
        // 8 ranges of 33: three a night, none twice, then nothing.
        assert_eq!(ds.len(), [3, 3, 2, 0][n], "night {n}: {ds:?}\n{log}");
        for d in &ds {
            // post: false reaches every bisect.
            assert_eq!(field(d, "post"), "false", "{d:?}");
            let (config, good, bad) = (field(d, "config"), field(d, "good"), field(d, "bad"));
            let shared: Vec<&str> = field(d, "shared_by").split(',').collect();
            // One bisect per range, run by its first configuration, naming the other 32.
            assert_eq!(shared.len(), 32, "{d:?}");
            let mut group: Vec<&str> = vec![config];
            group.extend(&shared);
            let at = w.failing.iter().find(|(c, _)| c == config).unwrap().1;
            assert_eq!((good, bad), (sha(at - 1).as_str(), sha(at).as_str()));
            let want: Vec<&str> = w
                .failing
                .iter()
                .filter(|(_, b)| *b == at)
                .map(|(c, _)| c.as_str())
                .collect();
            assert_eq!(group, want);
            assert!(seen.insert(at), "range {at} bisected twice");
        }
        let record: Value =
            serde_json::from_str(&read(w.h.base.join("artifacts/bisect-fanout/fanout.json")))
                .unwrap();
        assert_eq!(
            record["over_cap"].as_array().unwrap().len(),
            [5, 2, 0, 0][n]
        );
        // GitHub runs them; each reports, so its range is bisected from now on.
        let results = run_bisects(&mut w, &ds);
        assert!(results.iter().all(|r| r == "success"), "{results:?}");
        if n == 0 {
            // The report names the rest.
            let summary = read(w.h.base.join("step-summary.md"));
            assert!(
                summary.contains("not bisected: over the cap** (5 ranges, 165 configurations)"),
                "{summary}"
            );
            let over = record["over_cap"][0]["configs"][0].as_str().unwrap();
            assert!(summary.contains(&format!("`{over}`")), "{summary}");
            eprintln!("fan-out: 264 failing configurations -> {} bisects dispatched, {} ranges ({} configurations) not bisected: over the cap",
                ds.len(), record["over_cap"].as_array().unwrap().len(),
                record["over_cap"].as_array().unwrap().iter().map(|g| g["configs"].as_array().unwrap().len()).sum::<usize>());
        }
    }
    assert_eq!(seen.len(), 8);
}

/// `fan-out`'s flags: a bad value is one line naming the flag (exit 2), before anything is
/// written.
#[test]
fn fan_out_refuses_bad_input_in_one_line() {
    let d = tempfile::tempdir().unwrap();
    let p = |n: &str| d.path().join(n).display().to_string();
    std::fs::write(p("notjson"), "{").unwrap();
    std::fs::write(p("other.json"), r#"{"schema": "x/fanout/v0", "max_bisects": 1, "post": true, "started": [], "over_cap": [], "already_bisected": [], "bisected": []}"#).unwrap();
    let out = p("out.json");
    for (args, says) in [
        (vec!["--max-bisects", "-1"], "--max-bisects"),
        (vec!["--max-bisects", "65"], "out of range"),
        (
            vec!["--max-bisects", "3", "--previous", &p("missing")],
            "--previous",
        ),
        (
            vec!["--max-bisects", "3", "--previous", &p("notjson")],
            "not a fan-out record",
        ),
        (
            vec!["--max-bisects", "3", "--previous", &p("other.json")],
            "is not \"setrows-bisect/fanout/v1\"",
        ),
        (
            vec!["--max-bisects", "3", "--results", &p("notjson")],
            "--results",
        ),
        (
            vec!["--max-bisects", "3", "--finished", &p("notjson")],
            "not a finished bisect",
        ),
        (
            vec!["--max-bisects", "3", "--finished", &p("other.json")],
            "--finished",
        ),
    ] {
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_setrows-bisect"))
            .args(["fan-out", "--bisect-post", "false", "--json", &out])
            .args(&args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!Path::new(&out).exists(), "{args:?}");
    }
}

/// The nightly (schedule) posts, so its bisects post; bisects a `post: false` dispatch started
/// posted nothing, so they do not count as done for it; the comment it posts names the ranges
/// over the cap; once its bisects reported, the next night starts the next ranges.
#[test]
fn a_posting_nightly_restarts_what_a_non_posting_dispatch_bisected() {
    let mut w = world();
    w.h.vars.insert("BISECT_NEW_FAILURES".into(), json!("true"));
    w.h.vars.insert("MAX_BISECTS".into(), json!("3"));
    let ranges = |h: &Harness, before: usize, post: &str| {
        let ds = dispatches(h, before);
        assert!(ds.iter().all(|d| field(d, "post") == post), "{ds:?}");
        ds.iter()
            .map(|d| field(d, "bad").to_string())
            .collect::<Vec<_>>()
    };
    w.h.dispatch(
        "matrix.yml",
        "workflow_dispatch",
        json!({"post": "false", "bisect_new_failures": "true"}),
    );
    let dry = ranges(&w.h, 0, "false");
    assert_eq!(dry.len(), 3, "{}", w.h.log.join("\n"));
    let r = w.h.dispatch("matrix.yml", "schedule", json!({}));
    assert_eq!(r, "success", "{}", w.h.log.join("\n"));
    let bodies = w.api.comment_bodies();
    assert!(
        bodies
            .iter()
            .any(|b| b.contains("not bisected: over the cap** (5 ranges, 165 configurations)")),
        "{bodies:?}"
    );
    let posted = ranges(&w.h, 3, "true");
    assert_eq!(posted, dry);
    // GitHub runs the posting bisects; each reports, so the next night starts others.
    let ds = dispatches(&w.h, 3);
    assert_eq!(run_bisects(&mut w, &ds), ["success"; 3]);
    w.h.dispatch("matrix.yml", "schedule", json!({}));
    let next = ranges(&w.h, 6, "true");
    assert_eq!(next.len(), 3);
    assert!(
        next.iter().all(|b| !posted.contains(b)),
        "{next:?} {posted:?}"
    );
}

/// A night whose dispatches failed left no record as dispatched, so the next night starts the
/// same ranges instead of counting them as bisected.
#[test]
fn a_failed_dispatch_is_not_counted_as_bisected() {
    let mut w = world();
    let tools = w.h.base.join("tools");
    std::fs::copy(tools.join("gh"), tools.join("gh-harness")).unwrap();
    w.h.stand_in(
        "gh",
        &format!(
            "#!/bin/sh\nif [ \"$1 $2\" = 'workflow run' ]; then echo 'HTTP 500' >&2; exit 1; fi\nexec '{}' \"$@\"\n",
            tools.join("gh-harness").display()
        ),
    );
    let night = json!({"post": "false", "bisect_new_failures": "true", "max_bisects": "3"});
    w.h.dispatch("matrix.yml", "workflow_dispatch", night.clone());
    assert_eq!(
        w.h.jobs["bisect-new-failures"].result,
        "failure",
        "{}",
        w.h.log.join("\n")
    );
    let decided: Value =
        serde_json::from_str(&read(w.h.base.join("artifacts/bisect-fanout/fanout.json"))).unwrap();
    std::fs::copy(tools.join("gh-harness"), tools.join("gh")).unwrap();
    w.h.dispatch("matrix.yml", "workflow_dispatch", night);
    let ds = dispatches(&w.h, 0);
    let bads: Vec<&str> = ds.iter().map(|d| field(d, "bad")).collect();
    let want: Vec<&str> = decided["started"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["bad"].as_str().unwrap())
        .collect();
    assert_eq!(bads, want, "{}", w.h.log.join("\n"));
}

/// A new commit on the ggml stand-in's master: its sha.
fn commit(w: &World, msg: &str) -> String {
    let git = |args: &[&str]| {
        let o = std::process::Command::new("git")
            .args(args)
            .current_dir(&w.ggml)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@t")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@t")
            .output()
            .unwrap();
        assert!(o.status.success(), "{o:?}");
        String::from_utf8(o.stdout).unwrap().trim().to_string()
    };
    git(&["commit", "-q", "--allow-empty", "-m", msg]);
    git(&["rev-parse", "HEAD"])
}

/// One night of the shipped matrix.toml (`revisions = ["master"]`): every configuration of
/// every image tested once, at `master`; `broken` fails (a GPU fault), every other passes.
fn write_master_night(w: &World, master: &str, broken: &str) {
    for (name, ids) in &w.images {
        let hip = name.starts_with("hip");
        let doc = json!({
            "schema": setrows_bisect::core::result::Kind::Matrix.tag(),
            "matrix": "matrix.toml", "engine": "podman",
            "revisions": [{"rev": "master", "sha": master}],
            "configs": ids.iter().map(|id| json!({"id": id, "label": id,
                "backend": if hip { "hip" } else { "cpu" }, "image": null})).collect::<Vec<_>>(),
            "cells": ids.iter().map(|id| json!({"config": id, "rev": "master", "sha": master,
                "outcome": if id == broken { "gpu_fault" } else { "pass" }, "signature": null,
                "duration_s": 1.0, "build_s": 0.5, "test_s": 0.5, "attempts": 1,
                "log": format!("logs/{id}.log")})).collect::<Vec<_>>(),
        });
        std::fs::write(w.night.join(format!("{name}.json")), doc.to_string()).unwrap();
    }
}

/// A scheduled night of the shipped one-revision matrix at a new master: the dispatches it made
/// and the fan-out section of the results comment it posted.
fn master_night(
    w: &mut World,
    n: usize,
    broken: &str,
) -> (String, Vec<Vec<(String, String)>>, String) {
    let master = commit(w, &format!("night {n}"));
    write_master_night(w, &master, broken);
    let before = dispatches(&w.h, 0).len();
    let r = w.h.dispatch("matrix.yml", "schedule", json!({}));
    let log = w.h.log.join("\n");
    assert_eq!(r, "success", "night {n}: {log}");
    assert_eq!(w.h.jobs["fan-out"].result, "success", "night {n}: {log}");
    let body = w
        .api
        .comment_bodies()
        .into_iter()
        .rev()
        .find(|b| b.contains("### New failures: bisects"))
        .unwrap_or_else(|| panic!("night {n}: no fan-out section posted\n{log}"));
    let section = body[body.find("### New failures: bisects").unwrap()..].to_string();
    (master, dispatches(&w.h, before), section)
}

/// The nightly world of the shipped matrix.toml: bisecting new failures on, as its settings
/// say; the configuration that breaks is the first HIP one.
fn nightly() -> (World, String) {
    let mut w = world();
    let toml = std::fs::read_to_string(w.h.project.join("matrix.toml")).unwrap();
    assert!(
        toml.lines()
            .any(|l| l.trim() == r#"revisions = ["master"]"#),
        "the shipped matrix.toml no longer tests master only: this test is about that one"
    );
    w.h.vars.insert("BISECT_NEW_FAILURES".into(), json!("true"));
    let broken = w
        .images
        .iter()
        .find(|(name, _)| name.starts_with("hip"))
        .unwrap()
        .1[0]
        .clone();
    (w, broken)
}

/// Issue: with the shipped `revisions = ["master"]` a failure never had a passing revision in
/// the same run, so the nightly said "No newly failing configuration" whatever failed. Night 1
/// all pass (nothing to compare with yet, and the comment says so); night 2 a new commit breaks
/// one configuration: exactly one bisect, night 1's master good and night 2's bad; it runs and
/// reports; night 3 (master moved again, still failing) starts nothing and names it bisected.
#[test]
fn a_one_revision_nightly_bisects_what_broke_since_last_night_once() {
    let (mut w, broken) = nightly();
    let (a, ds, section) = master_night(&mut w, 1, "");
    assert!(ds.is_empty(), "{ds:?}");
    assert!(
        section.contains(
            "No earlier results to compare with: new failures start from the next night."
        ),
        "{section}"
    );
    assert!(!section.contains("No newly failing"), "{section}");

    let (b, ds, section) = master_night(&mut w, 2, &broken);
    assert_eq!(ds.len(), 1, "{ds:?}\n{section}");
    let d = &ds[0];
    assert_eq!(
        (field(d, "config"), field(d, "good"), field(d, "bad")),
        (broken.as_str(), a.as_str(), b.as_str())
    );
    assert_eq!((field(d, "post"), field(d, "shared_by")), ("true", "-"));
    assert!(
        section.contains(&format!("`{}..{}`: `{broken}`", &a[..12], &b[..12])),
        "{section}"
    );
    assert_eq!(
        run_bisects(&mut w, &ds),
        ["success"],
        "{}",
        w.h.log.join("\n")
    );
    let finished: Value = serde_json::from_str(&read(
        w.h.base.join("artifacts/bisect-finished/finished.json"),
    ))
    .unwrap();
    assert_eq!(finished["good"], json!(a));

    let (c, ds, section) = master_night(&mut w, 3, &broken);
    assert!(ds.is_empty(), "started again: {ds:?}\n{section}");
    assert!(
        section.contains("**already bisected** (1 ranges, 1 configurations)")
            && section.contains(&format!("`{}..{}`: `{broken}`", &a[..12], &c[..12])),
        "{section}"
    );
    assert!(!section.contains("not finished"), "{section}");
}

/// A fork's pull request can run its own copy of matrix.yml in this repository and leave a
/// `bisect-fanout` record that says nothing passed last night. The nightly reads only its own
/// runs' records (schedule or dispatch), so it still bisects what broke since night 1.
#[test]
fn a_pull_request_run_cannot_speak_for_last_night() {
    let (mut w, broken) = nightly();
    let (a, _, _) = master_night(&mut w, 1, "");
    let mut forged: Value =
        serde_json::from_str(&read(w.h.base.join("artifacts/bisect-fanout/fanout.json"))).unwrap();
    assert!(forged["last_pass"][&broken].is_string(), "{forged:#}");
    forged["last_pass"] = json!({});
    let dir = w.h.base.join("forged");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("fanout.json"), forged.to_string()).unwrap();
    w.h.plant_run("matrix.yml", "pull_request", &[("bisect-fanout", &dir)]);

    let (b, ds, section) = master_night(&mut w, 2, &broken);
    assert_eq!(ds.len(), 1, "{ds:?}\n{section}");
    let d = &ds[0];
    assert_eq!(
        (field(d, "config"), field(d, "good"), field(d, "bad")),
        (broken.as_str(), a.as_str(), b.as_str())
    );
}

/// A dispatched bisect is no answer: one that never ran (cancelled in the queue) or ended
/// without a verdict (runner lost) leaves no result, so the next night starts the same range
/// again (same good, same bad: the same question) and the comment names it "started, not
/// finished"; once one reports, the night after starts nothing.
#[test]
fn a_bisect_without_a_result_is_started_again_the_next_night() {
    let (mut w, broken) = nightly();
    let (a, _, _) = master_night(&mut w, 1, "");
    let (b, first, _) = master_night(&mut w, 2, &broken);
    assert_eq!(first.len(), 1, "{first:?}");
    // Night 2's bisect is cancelled in the queue: it never runs.
    let (_, again, section) = master_night(&mut w, 3, &broken);
    assert_eq!(again, first, "{section}");
    let unfinished = format!(
        "**started, not finished (an earlier run started it and no result came; started again)** (1 ranges, 1 configurations)\n\n- `{}..{}`: `{broken}`",
        &a[..12],
        &b[..12]
    );
    assert!(section.contains(&unfinished), "{section}");
    // Night 3's runs and loses its runner: still no result.
    std::fs::write(&w.bisect_fails, "").unwrap();
    assert_eq!(run_bisects(&mut w, &again), ["failure"]);
    let (_, again, section) = master_night(&mut w, 4, &broken);
    assert_eq!(again, first, "{section}");
    assert!(section.contains(&unfinished), "{section}");
    std::fs::remove_file(&w.bisect_fails).unwrap();
    assert_eq!(run_bisects(&mut w, &again), ["success"]);
    let (_, ds, section) = master_night(&mut w, 5, &broken);
    assert!(ds.is_empty(), "{ds:?}\n{section}");
    assert!(section.contains("**already bisected**"), "{section}");
}
