//! The workflow harness (tests/workflows) models GitHub where it matters to this project's
//! workflows: job order is not file order, a job reads only what its `needs` closure produced,
//! unknown keys fail, `$GITHUB_PATH`, composite `shell:`, `gh workflow run -f` against the
//! target's inputs, timeouts and `cancelled()`, `fail-fast`, and per-job tokens with the job's
//! permissions. Each rule is shown on a small workflow of its own (bash only; no podman).

mod workflows;

use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;
use workflows::Harness;

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
        ("job", "    environment: prod\n"),
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
    let t = std::time::Instant::now();
    assert_eq!(
        h.dispatch("w.yml", "workflow_dispatch", json!({})),
        "failure"
    );
    assert!(
        t.elapsed() < Duration::from_secs(20),
        "the sleeps were not cut"
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
