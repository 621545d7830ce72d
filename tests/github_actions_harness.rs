//! The workflow harness (tests/workflows) models GitHub where it matters to this project's
//! workflows: job order is not file order, a job reads only what its `needs` closure produced,
//! unknown keys fail, `$GITHUB_PATH`, composite `shell:`, `gh workflow run -f` against the
//! target's inputs, timeouts and `cancelled()`, `fail-fast`, and per-job tokens with the job's
//! permissions. Each rule is shown on a small workflow of its own (bash only; no podman).

mod workflows;

use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;
use workflows::{copy_tree, Harness};

/// A project with these workflows (name → text), and a harness over it.
fn harness(dir: &Path, files: &[(&str, &str)]) -> Harness {
    let project = dir.join("project");
    for (name, text) in files {
        let p = project.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    Harness::new(&project, Path::new("/bin/false"), &dir.join("actions"))
}

fn panics(f: impl FnOnce() + std::panic::UnwindSafe) -> String {
    let e = std::panic::catch_unwind(f).expect_err("the harness accepted it");
    e.downcast_ref::<String>()
        .cloned()
        .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

const FOUR: &str = r#"
on: workflow_dispatch
permissions: {}
jobs:
  a:
    runs-on: ubuntu-latest
    permissions: {}
    steps:
      - run: echo a >> "$RUNNER_TEMP/../../order"
  b:
    runs-on: ubuntu-latest
    permissions: {}
    steps:
      - run: echo b >> "$RUNNER_TEMP/../../order"
  c:
    runs-on: ubuntu-latest
    permissions: {}
    steps:
      - run: echo c >> "$RUNNER_TEMP/../../order"
  d:
    runs-on: ubuntu-latest
    permissions: {}
    steps:
      - run: echo d >> "$RUNNER_TEMP/../../order"
"#;

#[test]
fn ready_jobs_start_in_a_seeded_order_not_file_order() {
    let order = |seed: u64| {
        let d = tempfile::tempdir().unwrap();
        let mut h = harness(d.path(), &[(".github/workflows/w.yml", FOUR)]).with_seed(seed);
        assert_eq!(
            h.dispatch("w.yml", "workflow_dispatch", json!({})),
            "success"
        );
        std::fs::read_to_string(d.path().join("actions/order")).unwrap()
    };
    let orders: std::collections::BTreeSet<String> = (1..=12).map(order).collect();
    assert!(orders.len() > 1, "every seed ran one order: {orders:?}");
    assert_eq!(order(7), order(7), "a seed replays its order");
}

#[test]
fn an_artifact_from_outside_the_needs_closure_fails_in_either_order() {
    let wf = r#"
on: workflow_dispatch
permissions: {}
jobs:
  up:
    runs-on: ubuntu-latest
    permissions: {}
    steps:
      - run: mkdir -p out && echo x > out/x
      - uses: actions/upload-artifact@v4
        with:
          name: data
          path: out/
  down:
    runs-on: ubuntu-latest
    permissions: {}
    steps:
      - uses: actions/download-artifact@v4
        with:
          pattern: dat*
          path: in
"#;
    // Whichever of the two starts first, the harness names the race.
    for seed in 0..6 {
        let d = tempfile::tempdir().unwrap();
        let msg = panics(move || {
            let mut h = harness(d.path(), &[(".github/workflows/w.yml", wf)]).with_seed(seed);
            h.dispatch("w.yml", "workflow_dispatch", json!({}));
        });
        assert!(
            msg.contains("needs closure") || msg.contains("races this upload"),
            "seed {seed}: {msg}"
        );
    }
    // With `needs: up` it is fine.
    let d = tempfile::tempdir().unwrap();
    let fixed = wf.replace("  down:\n", "  down:\n    needs: up\n");
    let mut h = harness(d.path(), &[(".github/workflows/w.yml", &fixed)]);
    assert_eq!(
        h.dispatch("w.yml", "workflow_dispatch", json!({})),
        "success"
    );
}

#[test]
fn a_needs_reference_outside_the_direct_needs_fails() {
    let wf = r#"
on: workflow_dispatch
permissions: {}
jobs:
  a:
    runs-on: ubuntu-latest
    permissions: {}
    outputs:
      v: ${{ steps.s.outputs.v }}
    steps:
      - id: s
        run: echo v=1 >> "$GITHUB_OUTPUT"
  b:
    needs: a
    runs-on: ubuntu-latest
    permissions: {}
    steps:
      - run: "true"
  c:
    needs: b
    if: needs.a.outputs.v == '1'
    runs-on: ubuntu-latest
    permissions: {}
    steps:
      - run: "true"
"#;
    let d = tempfile::tempdir().unwrap();
    let msg = panics(move || {
        let mut h = harness(d.path(), &[(".github/workflows/w.yml", wf)]);
        h.dispatch("w.yml", "workflow_dispatch", json!({}));
    });
    assert!(msg.contains("reads `needs.a` but needs only"), "{msg}");
}

#[test]
fn unknown_keys_fail_instead_of_being_ignored() {
    for (at, extra) in [
        ("job", "    continue-on-error: true\n"),
        // `environment` is simulated (its secrets); keys of it the harness does not model are not.
        (
            "job",
            "    environment:\n      name: prod\n      deployment: false\n",
        ),
        ("job", "    defaults:\n      run:\n        shell: bash\n"),
    ] {
        let wf = format!(
            "on: workflow_dispatch\npermissions: {{}}\njobs:\n  a:\n    runs-on: ubuntu-latest\n    permissions: {{}}\n{extra}    steps:\n      - run: \"true\"\n"
        );
        let d = tempfile::tempdir().unwrap();
        let msg = panics(move || {
            let mut h = harness(d.path(), &[(".github/workflows/w.yml", &wf)]);
            h.dispatch("w.yml", "workflow_dispatch", json!({}));
        });
        assert!(msg.contains("is not simulated"), "{at}: {msg}");
    }
    let wf = "on: workflow_dispatch\npermissions: {}\njobs:\n  a:\n    runs-on: ubuntu-latest\n    permissions: {}\n    steps:\n      - run: \"true\"\n        working-directory: x\n";
    let d = tempfile::tempdir().unwrap();
    let msg = panics(move || {
        let mut h = harness(d.path(), &[(".github/workflows/w.yml", wf)]);
        h.dispatch("w.yml", "workflow_dispatch", json!({}));
    });
    assert!(
        msg.contains("`working-directory` is not simulated"),
        "{msg}"
    );
    // A self-hosted label no runner has would wait forever on GitHub.
    let wf = "on: workflow_dispatch\npermissions: {}\njobs:\n  a:\n    runs-on: [self-hosted, gfx9999]\n    permissions: {}\n    steps:\n      - run: \"true\"\n";
    let d = tempfile::tempdir().unwrap();
    let msg = panics(move || {
        let mut h = harness(d.path(), &[(".github/workflows/w.yml", wf)]);
        h.dispatch("w.yml", "workflow_dispatch", json!({}));
    });
    assert!(
        msg.contains("no self-hosted runner has label `gfx9999`"),
        "{msg}"
    );
}

#[test]
fn github_path_composite_shell_and_fail_fast() {
    let wf = r#"
on: workflow_dispatch
permissions: {}
jobs:
  path:
    runs-on: ubuntu-latest
    permissions: {}
    steps:
      - run: |
          mkdir -p "$RUNNER_TEMP/bin"
          printf '#!/bin/sh\necho from-github-path\n' > "$RUNNER_TEMP/bin/hello-tool"
          chmod +x "$RUNNER_TEMP/bin/hello-tool"
          echo "$RUNNER_TEMP/bin" >> "$GITHUB_PATH"
      - id: h
        run: echo "said=$(hello-tool)" >> "$GITHUB_OUTPUT"
      - if: steps.h.outputs.said != 'from-github-path'
        run: exit 1
  composite:
    runs-on: ubuntu-latest
    permissions: {}
    steps:
      - uses: ./.github/actions/noshell
  legs:
    runs-on: ubuntu-latest
    permissions: {}
    strategy:
      matrix:
        n: [1, 2, 3]
    steps:
      - run: test "$N" != 1
        env:
          N: ${{ matrix.n }}
"#;
    let action =
        "name: x\ndescription: x\nruns:\n  using: composite\n  steps:\n    - run: echo no shell\n";
    let d = tempfile::tempdir().unwrap();
    let mut h = harness(
        d.path(),
        &[
            (".github/workflows/w.yml", wf),
            (".github/actions/noshell/action.yml", action),
        ],
    );
    assert_eq!(
        h.dispatch("w.yml", "workflow_dispatch", json!({})),
        "failure"
    );
    let log = h.log.join("\n");
    assert_eq!(h.jobs["path"].result, "success", "{log}");
    assert_eq!(h.jobs["composite"].result, "failure", "{log}");
    assert!(
        log.contains("a composite action's run step needs `shell:`"),
        "{log}"
    );
    // fail-fast (the default): the legs after the failed one are cancelled.
    assert_eq!(h.jobs["legs[0]"].result, "failure", "{log}");
    assert_eq!(h.jobs["legs[1]"].result, "cancelled", "{log}");
    assert_eq!(h.jobs["legs[2]"].result, "cancelled", "{log}");
}

#[test]
fn a_job_past_its_timeout_is_cancelled_and_cancelled_is_true() {
    let wf = r#"
on: workflow_dispatch
permissions: {}
jobs:
  slow:
    runs-on: ubuntu-latest
    timeout-minutes: 2
    permissions: {}
    steps:
      - run: sleep 30
      - run: echo never >> "$RUNNER_TEMP/../../marks"
      - if: always()
        run: echo always >> "$RUNNER_TEMP/../../marks"
      - if: cancelled()
        run: echo cancelled >> "$RUNNER_TEMP/../../marks"
      - if: failure()
        run: echo failure >> "$RUNNER_TEMP/../../marks"
  step:
    runs-on: ubuntu-latest
    permissions: {}
    steps:
      - run: sleep 30
        timeout-minutes: 1
      - if: failure()
        run: echo step-failed >> "$RUNNER_TEMP/../../marks2"
  after:
    needs: [slow]
    if: always() && !contains(needs.*.result, 'cancelled')
    runs-on: ubuntu-latest
    permissions: {}
    steps:
      - run: "true"
"#;
    let d = tempfile::tempdir().unwrap();
    let mut h = harness(d.path(), &[(".github/workflows/w.yml", wf)]);
    h.minute = Duration::from_millis(250);
    // That the sleeps were cut shows in the results and marks below, not in a wall time.
    assert_eq!(
        h.dispatch("w.yml", "workflow_dispatch", json!({})),
        "failure"
    );
    let log = h.log.join("\n");
    assert_eq!(h.jobs["slow[0]"].result, "cancelled", "{log}");
    assert_eq!(
        std::fs::read_to_string(d.path().join("actions/marks")).unwrap(),
        "always\ncancelled\n",
        "{log}"
    );
    assert_eq!(h.jobs["step[0]"].result, "failure", "{log}");
    assert_eq!(
        std::fs::read_to_string(d.path().join("actions/marks2")).unwrap(),
        "step-failed\n"
    );
    assert_eq!(h.jobs["after"].result, "skipped", "{log}");
}

#[test]
fn gh_workflow_run_is_checked_against_the_targets_inputs() {
    let target = r#"
on:
  workflow_dispatch:
    inputs:
      config:
        required: true
        type: string
      regress:
        required: true
        default: error
        type: choice
        options: [error, crash]
permissions: {}
jobs:
  a:
    runs-on: ubuntu-latest
    permissions: {}
    steps:
      - run: "true"
"#;
    let caller = |args: &str| {
        format!(
            "on: workflow_dispatch\npermissions: {{}}\njobs:\n  d:\n    runs-on: ubuntu-latest\n    permissions:\n      actions: write\n    steps:\n      - run: gh workflow run t.yml --ref main {args}\n"
        )
    };
    for (args, ok, says) in [
        ("-f config=x", true, ""),
        ("-f config=x -f regress=crash", true, ""),
        (
            "-f config=x -f bogus=1",
            false,
            "Unexpected inputs provided: [\"bogus\"]",
        ),
        (
            "-f regress=crash",
            false,
            "Required input 'config' not provided",
        ),
        (
            "-f config=x -f regress=hang",
            false,
            "not in the list of allowed values",
        ),
    ] {
        let d = tempfile::tempdir().unwrap();
        let c = caller(args);
        let mut h = harness(
            d.path(),
            &[
                (".github/workflows/t.yml", target),
                (".github/workflows/c.yml", &c),
            ],
        );
        let r = h.dispatch("c.yml", "workflow_dispatch", json!({}));
        let log = h.log.join("\n");
        assert_eq!(r == "success", ok, "{args}: {log}");
        assert!(log.contains(says), "{args}: {log}");
        let recorded =
            std::fs::read_to_string(d.path().join("actions/dispatches")).unwrap_or_default();
        assert_eq!(recorded.is_empty(), !ok, "{args}: {recorded}");
    }
}

#[test]
fn each_job_gets_its_own_token_with_its_permissions_capped_by_the_caller() {
    let caller = r#"
on: workflow_dispatch
permissions: {}
jobs:
  call:
    uses: ./.github/workflows/called.yml
    permissions:
      contents: read
      issues: read
  own:
    runs-on: ubuntu-latest
    permissions:
      issues: write
    steps:
      - run: "true"
"#;
    let called = r#"
on: workflow_call
permissions: {}
jobs:
  inner:
    runs-on: ubuntu-latest
    permissions:
      contents: read
      issues: write
    steps:
      - run: "true"
"#;
    let d = tempfile::tempdir().unwrap();
    let mut h = harness(
        d.path(),
        &[
            (".github/workflows/c.yml", caller),
            (".github/workflows/called.yml", called),
        ],
    );
    assert_eq!(
        h.dispatch("c.yml", "workflow_dispatch", json!({})),
        "success"
    );
    let tokens: Value =
        serde_json::from_str(&std::fs::read_to_string(h.tokens_file()).unwrap()).unwrap();
    assert_eq!(h.minted.len(), 2);
    let perms: Vec<Value> = h
        .minted
        .iter()
        .map(|t| tokens[t]["permissions"].clone())
        .collect();
    assert!(perms.contains(&json!({"issues": "write"})), "{perms:?}");
    // The called job asked for issues: write; its caller has read only.
    assert!(
        perms.contains(&json!({"contents": "read", "issues": "read"})),
        "{perms:?}"
    );
    for t in &h.minted {
        assert_eq!(tokens[t]["kind"], "installation");
        assert_eq!(tokens[t]["repos"], json!(["harness/setrows-bisect"]));
    }
    assert_ne!(h.minted[0], h.minted[1]);
}

/// The project's own `setrows-bin` action, fetching a "binary" (a script) that another job of
/// the run replaced under the same artifact name: upload needs no permission, so a GPU job
/// running the code under test could do it. The action compares the download with the build
/// job's `sha256` output and runs nothing that differs; the untouched run passes.
#[test]
fn a_binary_replaced_by_another_job_is_refused_before_it_runs() {
    let wf = r#"
on: workflow_dispatch
permissions: {}
jobs:
  build:
    runs-on: ubuntu-24.04
    permissions: {}
    outputs:
      sha256: ${{ steps.digest.outputs.sha256 }}
    steps:
      - run: |
          mkdir -p target/release
          printf '#!/bin/sh\necho "setrows-bisect built"\n' > target/release/setrows-bisect
      - id: digest
        run: echo "sha256=$(sha256sum target/release/setrows-bisect | cut -d ' ' -f 1)" >> "$GITHUB_OUTPUT"
      - uses: actions/upload-artifact@v4
        with:
          name: setrows-bisect-bin
          path: target/release/setrows-bisect
          overwrite: true
  gpu:
    needs: build
    runs-on: ubuntu-24.04
    permissions: {}
    steps:
      - run: |
          mkdir -p evil
          printf '#!/bin/sh\necho "setrows-bisect REPLACED" > "$RUNNER_TEMP/../../ran"\n' > evil/setrows-bisect
      - uses: actions/upload-artifact@v4
        with:
          name: setrows-bisect-bin
          path: evil/setrows-bisect
          overwrite: true
  report:
    needs: [build, gpu]
    runs-on: ubuntu-24.04
    permissions: {}
    steps:
      - uses: ./.github/actions/setrows-bin
        with:
          sha256: ${{ needs.build.outputs.sha256 }}
      - run: ./target/release/setrows-bisect
"#;
    let action = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join(".github/actions/setrows-bin/action.yml"),
    )
    .unwrap();
    let run = |text: &str| {
        let d = tempfile::tempdir().unwrap();
        let mut h = harness(
            d.path(),
            &[
                (".github/workflows/w.yml", text),
                (".github/actions/setrows-bin/action.yml", &action),
            ],
        );
        let r = h.dispatch("w.yml", "workflow_dispatch", json!({}));
        let ran = std::fs::read_to_string(d.path().join("actions/ran")).ok();
        (r, h.jobs["report"].result.clone(), ran, h.log.join("\n"))
    };
    let (r, report, ran, log) = run(wf);
    assert_eq!(
        (r.as_str(), report.as_str()),
        ("failure", "failure"),
        "{log}"
    );
    assert_eq!(ran, None, "the replaced binary ran:\n{log}");
    // The same run without the replacement runs the build job's binary.
    let clean = wf.replace(
        "          name: setrows-bisect-bin\n          path: evil/",
        "          name: other\n          path: evil/",
    );
    let (r, report, _, log) = run(&clean);
    assert_eq!(
        (r.as_str(), report.as_str()),
        ("success", "success"),
        "{log}"
    );
}

const QUEUED: &str = r#"
on:
  workflow_dispatch:
    inputs:
      which:
        type: string
        required: true
permissions: {}
concurrency:
  group: compute-${{ inputs.which }}
  cancel-in-progress: false
jobs:
  work:
    runs-on: ubuntu-latest
    permissions: {}
    steps:
      - run: echo "$WHICH" >> "$RUNNER_TEMP/../../worked"
        env:
          WHICH: ${{ inputs.which }}
  post:
    needs: work
    runs-on: ubuntu-latest
    permissions: {}
    concurrency:
      group: comment
      cancel-in-progress: false
    steps:
      - run: echo "$WHICH" >> "$RUNNER_TEMP/../../posted"
        env:
          WHICH: ${{ inputs.which }}
"#;

/// GitHub's concurrency for runs queued together: per group one running and one pending, and
/// a newer pending run (or job) cancels the older. Three runs of one workflow group: the middle
/// one never runs; three runs of three groups whose jobs share one group: the middle one's job
/// is cancelled and its result never posted.
#[test]
fn queued_runs_follow_githubs_one_running_one_pending_rule() {
    let d = tempfile::tempdir().unwrap();
    let mut h = harness(d.path(), &[(".github/workflows/w.yml", QUEUED)]);
    let same = |w: &str| ("w.yml", "workflow_dispatch", json!({ "which": w }));
    let r = h.queue_together(&[same("x"), same("x"), same("x")]);
    assert_eq!(
        r,
        ["success", "cancelled", "success"],
        "{}",
        h.log.join("\n")
    );
    let worked = std::fs::read_to_string(d.path().join("actions/worked")).unwrap();
    assert_eq!(worked, "x\nx\n");
    std::fs::remove_file(d.path().join("actions/posted")).unwrap();
    let r = h.queue_together(&[same("a"), same("b"), same("c")]);
    assert_eq!(
        r,
        ["success", "cancelled", "success"],
        "{}",
        h.log.join("\n")
    );
    let posted = std::fs::read_to_string(d.path().join("actions/posted")).unwrap();
    assert_eq!(posted, "a\nc\n", "{}", h.log.join("\n"));
}

/// This repository's workflows, queued the ways that used to lose results, lose nothing:
/// matrix.yml's new-failure job dispatching three bisections of one range (one per newly failing
/// configuration); a dispatch that does not post queued between two that do; a matrix
/// dispatch with its own revisions between two nightlies; a bisect that posts, asks afresh
/// (`resume: false`) or to a confidence, queued between two runs of its question that differ
/// only there (issue 47: "no-post, post, no-post" posted nothing). The same queues against the
/// groups as they were (no configuration, a non-posting report in the comment's group, one
/// matrix group, the question alone) show the rule catching each loss.
#[test]
fn three_queued_runs_of_each_workflow_lose_nothing() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let d = tempfile::tempdir().unwrap();
    let mut h = Harness::new(root, Path::new("/bin/false"), &d.path().join("actions"));
    let bisect = |wf: &'static str, config: &str, post: bool| {
        let mut i = json!({"good": "1111111", "bad": "2222222", "config": config, "post": post});
        if wf == "bisect-distributed.yml" {
            i["slots"] = json!(4);
        }
        (wf, "workflow_dispatch", i)
    };
    let with = |(wf, ev, mut i): (&'static str, &'static str, Value), k: &str, v: Value| {
        i[k] = v;
        (wf, ev, i)
    };
    let nightly = ("matrix.yml", "schedule", json!({}));
    let own = |post: bool| {
        (
            "matrix.yml",
            "workflow_dispatch",
            json!({"revisions": "v1 v2", "post": post}),
        )
    };
    let queues = [
        vec![
            bisect("bisect.yml", "cpu-a", true),
            bisect("bisect.yml", "cpu-b", true),
            bisect("bisect.yml", "cpu-c", true),
        ],
        vec![
            bisect("bisect.yml", "cpu-a", true),
            bisect("bisect-distributed.yml", "cpu-b", true),
            bisect("bisect.yml", "cpu-c", true),
        ],
        vec![nightly.clone(), own(true), nightly.clone()],
        vec![nightly.clone(), own(true), own(false)],
        // A quiet dispatch (matrix.toml's revisions, `post: false`) queued behind a pending
        // nightly that posts: the nightly must still run.
        vec![
            nightly.clone(),
            nightly.clone(),
            ("matrix.yml", "workflow_dispatch", json!({"post": false})),
        ],
        // What changes a bisect's outcome, queued between runs that differ from it only there.
        vec![
            bisect("bisect.yml", "cpu-a", false),
            bisect("bisect.yml", "cpu-a", true),
            bisect("bisect.yml", "cpu-a", false),
        ],
        vec![
            bisect("bisect-distributed.yml", "cpu-a", false),
            bisect("bisect-distributed.yml", "cpu-a", true),
            bisect("bisect-distributed.yml", "cpu-a", false),
        ],
        vec![
            bisect("bisect.yml", "cpu-a", true),
            with(bisect("bisect.yml", "cpu-a", true), "resume", json!(false)),
            bisect("bisect.yml", "cpu-a", true),
        ],
        vec![
            bisect("bisect-distributed.yml", "cpu-a", true),
            with(
                bisect("bisect-distributed.yml", "cpu-a", true),
                "confidence",
                json!("0.95"),
            ),
            bisect("bisect-distributed.yml", "cpu-a", true),
        ],
    ];
    for q in &queues[..7] {
        assert_eq!(h.queue_plan(q), [], "{q:?}");
    }
    // Runs that all post one question's comment: every bisect runs (no whole run is
    // cancelled); what GitHub may still drop is a pending edit of that comment superseded by a
    // later run's edit of the same comment, which is the one answer the comment shows.
    for q in &queues[7..] {
        let plan = h.queue_plan(q);
        assert!(
            plan.iter().all(|(_, g)| g
                .as_deref()
                .is_some_and(|g| g.starts_with("results-comment-Luce-Org/lucebox#516-bisect-"))),
            "{q:?}: {plan:?}"
        );
    }
    // The same queues against the groups of before.
    let old = tempfile::tempdir().unwrap();
    let project = old.path().join("project");
    copy_tree(&root.join(".github"), &project.join(".github"));
    let undo = |file: &str, from: &str, to: &str| {
        let p = project.join(".github/workflows").join(file);
        let t = std::fs::read_to_string(&p).unwrap();
        assert!(t.contains(from), "{file}: {from}");
        std::fs::write(&p, t.replace(from, to)).unwrap();
    };
    let issue = "${{ vars.RESULTS_ISSUE || 'Luce-Org/lucebox#516' }}";
    for f in ["bisect.yml", "bisect-distributed.yml"] {
        undo(
            f,
            "results-comment-${{ inputs.post && (vars.RESULTS_ISSUE || 'Luce-Org/lucebox#516') || github.run_id }}-bisect-${{ inputs.config }}-",
            &format!("results-comment-{issue}-bisect-"),
        );
    }
    let matrix_group = "matrix-gfx1151-${{ inputs.revisions && github.run_id || 'default' }}-post-${{ github.event_name == 'schedule' || inputs.post }}-bisect-${{ inputs.bisect_new_failures || vars.BISECT_NEW_FAILURES == 'true' }}";
    undo("matrix.yml", matrix_group, "matrix-gfx1151");
    undo(
        "bisect.yml",
        "-post-${{ inputs.post }}-resume-${{ inputs.resume }}\n",
        "\n",
    );
    undo(
        "bisect-distributed.yml",
        "-post-${{ inputs.post }}-confidence-${{ inputs.confidence }}\n",
        "\n",
    );
    let mut h = Harness::new(
        &project,
        Path::new("/bin/false"),
        &old.path().join("actions"),
    );
    let lost: Vec<_> = queues.iter().map(|q| h.queue_plan(q)).collect();
    assert!(
        lost[0].contains(&(
            1,
            Some("results-comment-Luce-Org/lucebox#516-bisect-1111111-2222222-error-".to_string())
        )),
        "{lost:?}"
    );
    assert!(lost[1].iter().any(|(r, _)| *r == 1), "{lost:?}");
    assert!(lost[2].contains(&(1, None)), "{lost:?}");
    assert!(lost[3].contains(&(1, None)), "{lost:?}");
    assert!(lost[4].contains(&(1, None)), "{lost:?}");
    // The question's group alone: the middle run (the one that posts, or that asks afresh or
    // to a confidence) is replaced by the last.
    for l in &lost[5..9] {
        assert!(l.contains(&(1, None)), "{lost:?}");
    }
    // Only the non-posting report's own group differs from before in the last queue: with the
    // workflow groups as they are now, the old matrix report group still cancels run 1's.
    undo(
        "matrix.yml",
        "matrix-gfx1151\n",
        &format!("{matrix_group}\n"),
    );
    undo(
        "matrix.yml",
        "results-comment-${{ (github.event_name == 'schedule' || inputs.post) && (vars.RESULTS_ISSUE || 'Luce-Org/lucebox#516') || github.run_id }}-matrix-${{ inputs.revisions }}",
        &format!("results-comment-{issue}-matrix"),
    );
    let mut h = Harness::new(
        &project,
        Path::new("/bin/false"),
        &old.path().join("actions2"),
    );
    let plan = h.queue_plan(&queues[3]);
    assert_eq!(
        plan,
        [(
            1,
            Some("results-comment-Luce-Org/lucebox#516-matrix".to_string())
        )]
    );
}

/// "Re-run failed jobs" repeats a job in the same run, whose artifacts stay: an upload it
/// repeats without `overwrite: true` fails as GitHub's 409 does; with it the re-run passes.
#[test]
fn a_rerun_repeats_uploads_only_with_overwrite() {
    let wf = |overwrite: &str| {
        format!(
            r#"
on: workflow_dispatch
permissions: {{}}
jobs:
  job:
    runs-on: ubuntu-latest
    permissions: {{}}
    steps:
      - run: mkdir -p out && echo x > out/x
      - uses: actions/upload-artifact@v4
        if: always()
        with:
          name: logs
          path: out/{overwrite}
      # The first attempt fails (a flaky runner), the re-run passes.
      - run: |
          if [ ! -e "$RUNNER_TEMP/../../attempted" ]; then touch "$RUNNER_TEMP/../../attempted"; exit 1; fi
"#
        )
    };
    for (overwrite, rerun) in [("", "failure"), ("\n          overwrite: true", "success")] {
        let d = tempfile::tempdir().unwrap();
        let text = wf(overwrite);
        let mut h = harness(d.path(), &[(".github/workflows/w.yml", &text)]);
        assert_eq!(
            h.dispatch("w.yml", "workflow_dispatch", json!({})),
            "failure"
        );
        let r = h.rerun_failed("w.yml", "workflow_dispatch", json!({}));
        assert_eq!(r, rerun, "{}", h.log.join("\n"));
    }
}

/// `environment:` in both spellings gives a job that environment's secrets, and a job without it
/// sees none of them; a key GitHub does not have under `environment` is refused.
#[test]
fn an_environments_secrets_reach_only_the_jobs_that_declare_it() {
    let wf = r#"
on: workflow_dispatch
permissions: {}
jobs:
  named:
    runs-on: ubuntu-latest
    permissions: {}
    environment: results
    steps:
      - env:
          T: ${{ secrets.RESULTS_TOKEN }}
        run: echo "named=${#T}" >> "$RUNNER_TEMP/../../seen"
  mapped:
    runs-on: ubuntu-latest
    permissions: {}
    environment:
      name: results
      url: https://example.invalid/results
    steps:
      - env:
          T: ${{ secrets.RESULTS_TOKEN }}
        run: echo "mapped=${#T}" >> "$RUNNER_TEMP/../../seen"
  without:
    needs: [named, mapped]
    runs-on: ubuntu-latest
    permissions: {}
    steps:
      - env:
          T: ${{ secrets.RESULTS_TOKEN }}
        run: echo "without=${#T}" >> "$RUNNER_TEMP/../../seen"
"#;
    let d = tempfile::tempdir().unwrap();
    let mut h = harness(d.path(), &[(".github/workflows/w.yml", wf)]);
    let mut own = serde_json::Map::new();
    own.insert("RESULTS_TOKEN".into(), json!("0123456789"));
    h.environments.insert("results".into(), own);
    assert_eq!(
        h.dispatch("w.yml", "workflow_dispatch", json!({})),
        "success"
    );
    let mut seen: Vec<String> = std::fs::read_to_string(d.path().join("actions/seen"))
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    seen.sort();
    assert_eq!(seen, ["mapped=10", "named=10", "without=0"]);
    assert_eq!(h.jobs["named[0]"].environment.as_deref(), Some("results"));
    assert_eq!(h.jobs["without[0]"].environment, None);

    let bad = wf.replace(
        "      url: https://example.invalid/results\n",
        "      reviewers: [me]\n",
    );
    let d2 = tempfile::tempdir().unwrap();
    let e = panics(move || {
        let mut h = harness(d2.path(), &[(".github/workflows/w.yml", &bad)]);
        h.dispatch("w.yml", "workflow_dispatch", json!({}));
    });
    assert!(e.contains("`reviewers` is not simulated"), "{e}");
}
