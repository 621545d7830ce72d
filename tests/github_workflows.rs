//! The GitHub Actions workflows: actionlint (with shellcheck over every `run:` script) must
//! report nothing, and our own rules hold: actions pinned by full commit SHA, least-privilege
//! `permissions:` on every job, and no `${{ }}` expression spliced into a `run:` script
//! (inputs reach scripts through `env:` only).
//!
//! actionlint and shellcheck come from scripts/setup.d/50-actionlint.sh (ACTIONLINT=,
//! SHELLCHECK=). Without them the lint test fails under CI and is skipped (loudly) elsewhere.

mod tools;

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn workflows() -> Vec<PathBuf> {
    let dir = root().join(".github/workflows");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yml" || x == "yaml"))
        .collect();
    v.sort();
    assert!(
        v.len() >= 3,
        "expected ci, matrix and bisect workflows in {}",
        dir.display()
    );
    v
}

/// A tool from the setup script's variable, else from PATH.
fn tool(var: &str, name: &str) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(var).filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

fn require(var: &str, name: &str) -> Option<PathBuf> {
    tools::require(
        tool(var, name),
        &format!("{name} ({var} or PATH)"),
        "scripts/setup.d/50-actionlint.sh",
    )
}

fn actionlint(bin: &Path, shellcheck: &Path, files: &[PathBuf], cwd: &Path) -> (bool, String) {
    let out = Command::new(bin)
        .arg("-no-color")
        .arg(format!("-shellcheck={}", shellcheck.display()))
        .args(files)
        .current_dir(cwd)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", bin.display()));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn actionlint_and_shellcheck_find_nothing() {
    let (Some(al), Some(sc)) = (
        require("ACTIONLINT", "actionlint"),
        require("SHELLCHECK", "shellcheck"),
    ) else {
        return;
    };
    let (ok, text) = actionlint(&al, &sc, &workflows(), &root());
    assert!(ok && text.trim().is_empty(), "actionlint findings:\n{text}");

    // The linter is really looking: the same run over a workflow with the classic injection and
    // a shell bug must complain about both.
    let dir = tempfile::tempdir().unwrap();
    let wf = dir.path().join(".github/workflows");
    std::fs::create_dir_all(&wf).unwrap();
    let bad = wf.join("bad.yml");
    std::fs::write(
        &bad,
        "on: issues\npermissions: {}\njobs:\n  x:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo \"${{ github.event.issue.title }}\"\n      - run: cd $UNQUOTED_DIR\n",
    )
    .unwrap();
    let (ok, text) = actionlint(&al, &sc, &[bad], dir.path());
    assert!(!ok, "actionlint accepted a broken workflow:\n{text}");
    assert!(
        text.contains("github.event.issue.title"),
        "no injection finding:\n{text}"
    );
    assert!(
        text.contains("shellcheck"),
        "no shellcheck finding:\n{text}"
    );
}

/// (line number, text) of every line inside a `run:` script, block or inline.
fn run_script_lines(yaml: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut block: Option<usize> = None; // indentation of the `run:` key
    for (i, line) in yaml.lines().enumerate() {
        let indent = line.len() - line.trim_start().len();
        if let Some(k) = block {
            if line.trim().is_empty() || indent > k {
                out.push((i + 1, line.to_string()));
                continue;
            }
            block = None;
        }
        let t = line.trim_start().trim_start_matches("- ");
        if let Some(v) = t.strip_prefix("run:") {
            let key_indent = line.len() - t.len();
            let v = v.trim();
            if v.starts_with('|') || v.starts_with('>') {
                block = Some(key_indent);
            } else {
                out.push((i + 1, v.to_string()));
            }
        }
    }
    out
}

#[test]
fn no_expression_is_spliced_into_a_script() {
    for wf in workflows() {
        let text = std::fs::read_to_string(&wf).unwrap();
        let lines = run_script_lines(&text);
        assert!(
            !lines.is_empty(),
            "{}: no run: scripts found (parser broken?)",
            wf.display()
        );
        for (n, l) in lines {
            assert!(
                !l.contains("${{"),
                "{}:{n}: expression inside a run: script: {l}",
                wf.display()
            );
        }
    }
    // The checker itself catches one.
    let caught = run_script_lines("jobs:\n  a:\n    steps:\n      - run: |\n          echo ok\n          echo ${{ inputs.x }}\n      - name: y\n");
    assert!(caught.iter().any(|(_, l)| l.contains("${{")), "{caught:?}");
    assert!(
        !caught.iter().any(|(_, l)| l.contains("name: y")),
        "{caught:?}"
    );
}

#[test]
fn actions_are_pinned_by_full_commit_sha() {
    let mut seen = 0;
    for wf in workflows() {
        let text = std::fs::read_to_string(&wf).unwrap();
        for (n, line) in text.lines().enumerate() {
            let t = line.trim_start().trim_start_matches("- ");
            let Some(u) = t.strip_prefix("uses:") else {
                continue;
            };
            let u = u.split('#').next().unwrap().trim();
            if u.starts_with("./") {
                continue;
            }
            seen += 1;
            let sha = u.rsplit_once('@').map(|(_, r)| r).unwrap_or("");
            assert!(
                sha.len() == 40 && sha.chars().all(|c| c.is_ascii_hexdigit()),
                "{}:{}: `{u}` is not pinned to a full commit SHA",
                wf.display(),
                n + 1
            );
            assert!(
                line.contains("# v"),
                "{}:{}: say which release the SHA is",
                wf.display(),
                n + 1
            );
        }
    }
    assert!(
        seen >= 5,
        "expected checkout/upload/download actions, saw {seen}"
    );
}

#[test]
fn every_job_declares_least_privilege_permissions() {
    for wf in workflows() {
        let text = std::fs::read_to_string(&wf).unwrap();
        assert!(
            text.lines().any(|l| l == "permissions: {}"),
            "{}: no top-level `permissions: {{}}`",
            wf.display()
        );
        let lines: Vec<&str> = text.lines().collect();
        let jobs_at = lines.iter().position(|l| *l == "jobs:").expect("jobs:");
        // Job keys sit at two spaces under `jobs:`; each must have its own `permissions:`.
        let starts: Vec<usize> = (jobs_at + 1..lines.len())
            .filter(|&i| {
                let l = lines[i];
                l.starts_with("  ")
                    && !l.starts_with("   ")
                    && l.trim_end().ends_with(':')
                    && !l.trim_start().starts_with('#')
            })
            .collect();
        assert!(!starts.is_empty(), "{}: no jobs found", wf.display());
        for (k, &s) in starts.iter().enumerate() {
            let end = starts.get(k + 1).copied().unwrap_or(lines.len());
            let job = &lines[s..end];
            assert!(
                job.iter().any(|l| l.starts_with("    permissions:")),
                "{}: job {} has no permissions:",
                wf.display(),
                lines[s].trim()
            );
            // `actions: write` only to dispatch workflows (`gh workflow run`), in a job that
            // neither builds nor runs the code under test.
            let dispatcher = job.iter().any(|l| l.contains("gh workflow run"))
                && !job
                    .iter()
                    .any(|l| l.contains("cargo ") || l.contains("setrows-bisect"));
            assert!(
                !job.iter().any(|l| l.contains("write-all")
                    || l.contains(": write")
                        && !l.contains("issues: write")
                        && !(dispatcher && l.trim() == "actions: write")),
                "{}: job {} asks for more than issues: write",
                wf.display(),
                lines[s].trim()
            );
            let writes = job.iter().any(|l| l.contains("issues: write"));
            let posts = job.iter().any(|l| l.contains("--post"));
            assert_eq!(
                writes,
                posts,
                "{}: job {}: issues: write exactly where a comment is posted",
                wf.display(),
                lines[s].trim()
            );
        }
    }
}

fn list(format: &str) -> serde_json::Value {
    let out = assert_cmd::Command::cargo_bin("setrows-bisect")
        .unwrap()
        .args([
            "matrix",
            "--matrix",
            "matrix.toml",
            "--list",
            "--format",
            format,
        ])
        .current_dir(root())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "matrix --list --format {format}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("--format {format} is not JSON: {e}"))
}

/// matrix.yml fans out over `matrix --list --format github`: every `matrix.X` it uses must be a
/// field of each job, and there must be HIP jobs left after dropping the CUDA controls.
#[test]
fn matrix_workflow_matches_the_fan_out_the_tool_prints() {
    let plan = list("github");
    let jobs = plan["include"].as_array().expect("include array");
    let wf = std::fs::read_to_string(root().join(".github/workflows/matrix.yml")).unwrap();
    let used: std::collections::BTreeSet<String> = wf
        .match_indices("matrix.")
        .filter_map(|(i, _)| {
            let rest = &wf[i + "matrix.".len()..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            (!name.is_empty() && name != "toml" && name != "yml").then_some(name)
        })
        .collect();
    assert!(used.contains("ids") && used.contains("name"), "{used:?}");
    for job in jobs {
        for field in &used {
            assert!(
                job.get(field).is_some(),
                "matrix.yml uses matrix.{field}, missing in {job}"
            );
        }
    }
    assert!(
        jobs.iter().any(|j| j["backend"] == "hip"),
        "no HIP job for the gfx1151 runners: {plan}"
    );
}

/// The jobs of a workflow: (name, text), split at the two-space-indented keys under `jobs:`.
fn jobs(text: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut in_jobs = false;
    for line in text.lines() {
        if line == "jobs:" {
            in_jobs = true;
            continue;
        }
        if !in_jobs {
            continue;
        }
        let is_key = line.starts_with("  ")
            && !line.starts_with("   ")
            && line.trim_end().ends_with(':')
            && !line.trim_start().starts_with('#');
        if is_key {
            out.push((line.trim().trim_end_matches(':').to_string(), String::new()));
        } else if let Some((_, body)) = out.last_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    out
}

/// Every job that takes a configuration id runs the bisect *in that configuration*: its
/// command lines pass `--config "$CONFIG"` (never a hand-copied `--backend` or `--repro-arg`),
/// and it checks the configuration and its image through the shared composite action, so the
/// probes run in the configuration's image on a runner that needs only the engine and the GPU.
#[test]
fn configuration_aware_jobs_pass_config_and_run_in_its_image() {
    let mut aware = 0;
    for wf in workflows() {
        let text = std::fs::read_to_string(&wf).unwrap();
        for (name, body) in jobs(&text) {
            if !body.contains("CONFIG: ${{ inputs.config }}") || !body.contains("setrows-bisect") {
                continue;
            }
            let lines = bisect_command_lines(&body);
            if lines.is_empty() {
                continue; // e.g. a report job that only renders stored results
            }
            aware += 1;
            let at = format!("{}: job {name}", wf.display());
            assert!(
                body.contains("uses: ./.github/actions/setrows-config"),
                "{at}: does not check the configuration and its image (setrows-config action)"
            );
            assert!(
                !body.contains("configs.json"),
                "{at}: repeats the configuration lookup"
            );
            for l in lines {
                assert!(
                    l.contains("--config \"$CONFIG\""),
                    "{at}: no --config in {l}"
                );
                for banned in ["--backend", "--repro-arg", "--image", "--engine none"] {
                    assert!(
                        !l.contains(banned),
                        "{at}: {banned} overrides the configuration: {l}"
                    );
                }
            }
        }
    }
    assert_eq!(aware, 4, "bisect, plan, probe and verdict jobs");
    let action =
        std::fs::read_to_string(root().join(".github/actions/setrows-config/action.yml")).unwrap();
    for want in ["--only \"$CONFIG\"", "image inspect", "using: composite"] {
        assert!(action.contains(want), "setrows-config action lacks {want}");
    }
    // The optional bisect of newly failing matrix cells starts bisect.yml with the cell's id.
    let m = std::fs::read_to_string(root().join(".github/workflows/matrix.yml")).unwrap();
    assert!(m.contains("vars.BISECT_NEW_FAILURES == 'true'") && m.contains("-f \"config=$id\""));
}

/// Every `--flag` the workflows hand to `setrows-bisect` (in `args=(...)` / `args+=(...)` and
/// on direct command lines) is one the subcommand accepts: the workflows only run on the GPU
/// runners, so a renamed flag would otherwise surface at night, on the runner.
#[test]
fn every_flag_a_workflow_passes_exists() {
    let span = regex::Regex::new(r"args\+?=\(([^)]*)\)").unwrap();
    let direct = regex::Regex::new(r"(?:setrows-bisect| -- )[ \t]*([a-z-]+)([^\n]*)").unwrap();
    let flag = regex::Regex::new(r#"(?:^|[\s("])(--[a-z][a-z0-9-]*)"#).unwrap();
    let mut used: Vec<(String, String, String)> = Vec::new(); // (workflow, subcommand, flag)
    for wf in workflows() {
        let text = std::fs::read_to_string(&wf).unwrap();
        let name = wf.file_name().unwrap().to_string_lossy().to_string();
        // Spans and direct command lines in file order; an `args+=(` continues the last one.
        let mut found: Vec<(usize, Option<String>, String)> = Vec::new();
        for c in span.captures_iter(&text) {
            let body = c[1].to_string();
            let sub = c[0]
                .starts_with("args=(")
                .then(|| body.split_whitespace().next().unwrap_or("").to_string());
            found.push((c.get(0).unwrap().start(), sub, body));
        }
        for c in direct.captures_iter(&text) {
            if c[1].starts_with('-') || c[2].contains("args[@]") {
                continue;
            }
            found.push((
                c.get(0).unwrap().start(),
                Some(c[1].to_string()),
                c[2].to_string(),
            ));
        }
        found.sort_by_key(|f| f.0);
        let mut current = String::new();
        for (_, sub, body) in found {
            if let Some(s) = sub {
                current = s;
            }
            for f in flag.captures_iter(&body) {
                used.push((name.clone(), current.clone(), f[1].to_string()));
            }
        }
    }
    assert!(
        ["--resume-from-issue", "--config"]
            .iter()
            .all(|want| used.iter().any(|(_, s, f)| s == "bisect" && f == want)),
        "the scan found the bisect flags: {used:?}"
    );
    let mut helps = std::collections::BTreeMap::new();
    for (wf, sub, f) in &used {
        assert!(
            ["bisect", "matrix", "report", "bisect-config", "fan-out"].contains(&sub.as_str()),
            "{wf}: {f} passed to unknown subcommand {sub:?}"
        );
        let help = helps.entry(sub.clone()).or_insert_with(|| {
            let out = assert_cmd::Command::cargo_bin("setrows-bisect")
                .unwrap()
                .args([sub.as_str(), "--help"])
                .output()
                .unwrap();
            String::from_utf8_lossy(&out.stdout).to_string()
        });
        let known = regex::Regex::new(&format!(r"(?m)^\s+(-\w, )?{}[\s=\[<]", regex::escape(f)))
            .unwrap()
            .is_match(help);
        assert!(known, "{wf}: `setrows-bisect {sub}` has no flag {f}");
    }
}

/// The `bisect` command lines of a workflow, one per invocation: the `args=(bisect ...)` span and
/// every `args+=(...)` after it, until the next `args=(`.
fn bisect_command_lines(text: &str) -> Vec<String> {
    let span = regex::Regex::new(r"args(\+?)=\(([^)]*)\)").unwrap();
    let mut out: Vec<String> = Vec::new();
    let mut in_bisect = false;
    for c in span.captures_iter(text) {
        let body = c[2].replace('\n', " ");
        if c[1].is_empty() {
            in_bisect = body.split_whitespace().next() == Some("bisect");
            if in_bisect {
                out.push(body);
            }
        } else if in_bisect {
            let last = out.last_mut().expect("args+= after args=(bisect");
            last.push(' ');
            last.push_str(&body);
        }
    }
    out
}

/// What decides a probe's result key (and so whether a runner's result counts in the merged
/// store): every token of a command line except the flags that only say which part of the
/// distributed bisection this invocation does.
fn identity_tokens(line: &str) -> Vec<String> {
    const MODE_WITH_VALUE: [&str; 5] = ["--jobs", "--probe", "--run-index", "--json", "--report"];
    let mut out = Vec::new();
    let mut tokens = line.split_whitespace();
    while let Some(t) = tokens.next() {
        if MODE_WITH_VALUE.contains(&t) {
            tokens.next();
        } else if t != "--plan-only" {
            out.push(t.to_string());
        }
    }
    out.sort();
    out
}

/// Distributed bisection: the plan job, every probe runner and the verdict job must pass the same
/// build/test flags, or the planner and the verdict would not see the runners' results (a
/// different prober identity is a different result key) and the rounds would start over.
#[test]
fn distributed_plan_probe_and_verdict_pass_the_same_flags() {
    let read = |f: &str| std::fs::read_to_string(root().join(".github/workflows").join(f)).unwrap();
    let round = read("bisect-round.yml");
    let dist = read("bisect-distributed.yml");
    let mut lines = bisect_command_lines(&round);
    lines.extend(bisect_command_lines(&dist));
    assert_eq!(
        lines.len(),
        3,
        "expected plan, probe and verdict: {lines:#?}"
    );
    let modes = ["--plan-only", "--probe", "--json"];
    for (line, mode) in lines.iter().zip(modes) {
        assert!(line.contains(mode), "expected {mode} in {line}");
    }
    let first = identity_tokens(&lines[0]);
    assert!(
        first.iter().any(|t| t.starts_with("--work-dir")) && first.contains(&"--config".into()),
        "{first:?}"
    );
    for l in &lines[1..] {
        assert_eq!(
            identity_tokens(l),
            first,
            "flags differ:\n{}\n{l}",
            lines[0]
        );
    }
    // The verdict replays the plan's waves only with the plan's K: with another --jobs the
    // driver picks other commits and probes them itself, on one runner.
    let jobs = |l: &str| {
        let t: Vec<&str> = l.split_whitespace().collect();
        t.windows(2)
            .find(|w| w[0] == "--jobs")
            .map(|w| w[1].to_string())
    };
    assert!(
        jobs(&lines[0]).is_some(),
        "plan without --jobs: {}",
        lines[0]
    );
    assert_eq!(
        jobs(&lines[2]),
        jobs(&lines[0]),
        "verdict --jobs differs from the plan's"
    );
    // The comparison notices a difference.
    let drifted = lines[1].replace("--regress", "--match");
    assert_ne!(identity_tokens(&drifted), first);
}

/// The fixed rounds form a chain: round N needs round N-1 and runs only while it was not done,
/// passes `round: N` (artifact names `results-<round>-<index>` stay unique), and the verdict job
/// waits for every round.
#[test]
fn distributed_rounds_are_a_chain() {
    let text =
        std::fs::read_to_string(root().join(".github/workflows/bisect-distributed.yml")).unwrap();
    let job = regex::Regex::new(r"(?m)^  (round(\d+)):\n((?:    .*\n|\n)*)").unwrap();
    let rounds: Vec<(String, usize, String)> = job
        .captures_iter(&text)
        .map(|c| (c[1].to_string(), c[2].parse().unwrap(), c[3].to_string()))
        .collect();
    assert!(rounds.len() >= 2, "no rounds found: {rounds:?}");
    for (k, (name, n, body)) in rounds.iter().enumerate() {
        assert_eq!(*n, k + 1, "{name}: rounds are numbered 1, 2, ...");
        assert!(
            body.contains("uses: ./.github/workflows/bisect-round.yml"),
            "{name}"
        );
        assert!(
            body.contains(&format!("round: {n}\n")),
            "{name}: round: {n}"
        );
        if *n > 1 {
            let prev = format!("round{}", n - 1);
            // The build job directly too: the round hands its binary digest on.
            assert!(
                body.contains(&format!("needs: [build, {prev}]\n")),
                "{name}"
            );
            assert!(
                body.contains(&format!("if: needs.{prev}.outputs.done != 'true'")),
                "{name}: must stop once {prev} is done"
            );
        }
    }
    let all: Vec<&str> = rounds.iter().map(|r| r.0.as_str()).collect();
    let verdict = format!("needs: [build, {}]", all.join(", "));
    assert!(text.contains(&verdict), "verdict job lacks `{verdict}`");
}

fn yaml(name: &str) -> serde_yaml_ng::Value {
    let p = root().join(".github/workflows").join(name);
    serde_yaml_ng::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap()
}

/// The text of a job's steps (run scripts and `uses:` lines).
fn steps_text(job: &serde_yaml_ng::Value) -> String {
    serde_yaml_ng::to_string(job.get("steps").unwrap_or(&serde_yaml_ng::Value::Null)).unwrap()
}

fn needs(job: &serde_yaml_ng::Value) -> Vec<String> {
    match job.get("needs") {
        None => vec![],
        Some(serde_yaml_ng::Value::String(s)) => vec![s.clone()],
        Some(v) => v
            .as_sequence()
            .unwrap()
            .iter()
            .map(|x| x.as_str().unwrap().to_string())
            .collect(),
    }
}

/// Every job of `wf` whose `needs` closure holds `target`, plus `target` itself.
fn closure_holds(wf: &serde_yaml_ng::Value, job: &str, target: &str) -> bool {
    job == target
        || needs(&wf["jobs"][job])
            .iter()
            .any(|n| closure_holds(wf, n, target))
}

/// The tool is built once per workflow run, by one job on a hosted runner that uploads it; every
/// job that runs it fetches that binary (`setrows-bin`, directly or through `setrows-config`)
/// and has the build job in its `needs` closure (a reusable round's jobs through their calling
/// job). No GPU runner compiles the tool.
#[test]
fn the_tool_is_built_once_per_run_and_never_on_a_gpu_runner() {
    let round = yaml("bisect-round.yml");
    assert!(
        !serde_yaml_ng::to_string(&round).unwrap().contains("cargo "),
        "bisect-round.yml builds the tool"
    );
    for (name, builder) in [
        ("matrix.yml", "plan"),
        ("bisect.yml", "build"),
        ("bisect-distributed.yml", "build"),
    ] {
        let wf = yaml(name);
        let jobs = wf["jobs"].as_mapping().unwrap();
        let building: Vec<&str> = jobs
            .iter()
            .filter(|(_, j)| steps_text(j).contains("cargo "))
            .map(|(k, _)| k.as_str().unwrap())
            .collect();
        assert_eq!(building, [builder], "{name}: jobs that run cargo");
        let b = &wf["jobs"][builder];
        // Pinned: the binary's glibc floor (docs/github.md) is the image's, and ubuntu-latest
        // moves to a newer one without notice.
        assert_eq!(b["runs-on"], "ubuntu-24.04", "{name}: {builder}");
        let text = steps_text(b);
        assert!(
            text.contains("cargo build --release --locked")
                && text.contains("name: setrows-bisect-bin"),
            "{name}: {builder} does not upload the binary"
        );
        for (k, j) in jobs {
            let k = k.as_str().unwrap();
            let t = steps_text(j);
            let calls_round = j
                .get("uses")
                .and_then(|u| u.as_str())
                .is_some_and(|u| u.ends_with("bisect-round.yml"));
            let fetches = t.contains("./.github/actions/setrows-bin")
                || t.contains("./.github/actions/setrows-config");
            if k == builder || !(fetches || calls_round || t.contains("target/release")) {
                continue;
            }
            assert!(
                closure_holds(&wf, k, builder),
                "{name}: job {k} runs the tool without needing {builder}"
            );
            assert!(
                fetches || calls_round,
                "{name}: job {k} uses a binary it never fetched"
            );
        }
    }
    let config =
        std::fs::read_to_string(root().join(".github/actions/setrows-config/action.yml")).unwrap();
    assert!(config.contains("uses: ./.github/actions/setrows-bin") && !config.contains("cargo "));
    let bin =
        std::fs::read_to_string(root().join(".github/actions/setrows-bin/action.yml")).unwrap();
    assert!(bin.contains("name: setrows-bisect-bin") && bin.contains("chmod +x"));
}

/// One concurrency group per results comment, on every job that edits one (`--post`), shared
/// across workflows: bisect.yml and bisect-distributed.yml edit the same `bisect:` comment for
/// the same question, so their report jobs share one group; matrix.yml's report has the
/// `matrix` comment's. The bisect comment's key hashes the configuration, so its group names it
/// (N configurations bisected over one range must not cancel each other's reports), and a
/// report that does not post takes its own run's group. The compute of one question has a
/// workflow-level group that also names what changes its outcome (post, resume, confidence). (tests/github_actions_harness.rs queues runs against them.)
#[test]
fn every_job_that_edits_a_results_comment_holds_that_comments_group() {
    let prefix = "results-comment-${{ ";
    let issue = "(vars.RESULTS_ISSUE || 'Luce-Org/lucebox#516') || github.run_id }}-";
    let mut groups = std::collections::BTreeMap::new();
    for name in [
        "matrix.yml",
        "bisect.yml",
        "bisect-distributed.yml",
        "bisect-round.yml",
    ] {
        let wf = yaml(name);
        for (k, j) in wf["jobs"].as_mapping().unwrap() {
            if !steps_text(j).contains("--post") {
                continue;
            }
            let g = j["concurrency"]["group"].as_str().unwrap_or_else(|| {
                panic!(
                    "{name}: job {} posts without a concurrency group",
                    k.as_str().unwrap()
                )
            });
            assert!(g.starts_with(prefix) && g.contains(issue), "{name}: {g}");
            assert_eq!(j["concurrency"]["cancel-in-progress"], false, "{name}");
            groups.insert(name, g.to_string());
        }
    }
    assert_eq!(groups.len(), 3, "{groups:?}");
    assert!(groups["matrix.yml"].ends_with(&format!("{issue}matrix-${{{{ inputs.revisions }}}}")));
    assert_eq!(groups["bisect.yml"], groups["bisect-distributed.yml"]);
    for input in ["config", "good", "bad", "regress", "match"] {
        assert!(
            groups["bisect.yml"].contains(&format!("${{{{ inputs.{input} }}}}")),
            "the bisect comment's key hashes {input}: {}",
            groups["bisect.yml"]
        );
    }
    // The compute's group: the question, then what changes the run's outcome, so a posting
    // run is never the pending one a non-posting run replaces.
    let question = "bisect-${{ inputs.config }}-${{ inputs.good }}-${{ inputs.bad }}-${{ inputs.regress }}-${{ inputs.match }}";
    for (name, outcome) in [
        ("bisect.yml", &["post", "resume"][..]),
        ("bisect-distributed.yml", &["post", "confidence"][..]),
    ] {
        let wf = yaml(name);
        let g = wf["concurrency"]["group"].as_str().unwrap();
        assert!(g.starts_with(question), "{name}: {g}");
        for input in outcome {
            assert!(
                g.contains(&format!("-{input}-${{{{ inputs.{input} }}}}")),
                "{name}'s group names {input}: {g}"
            );
        }
        assert_eq!(wf["concurrency"]["cancel-in-progress"], false, "{name}");
    }
    // The nightly's group names whether a run posts and whether it starts bisects, as the
    // jobs decide them, so a quiet dispatch never replaces a pending nightly that posts.
    let wf = yaml("matrix.yml");
    let g = wf["concurrency"]["group"].as_str().unwrap();
    for part in [
        "-post-${{ github.event_name == 'schedule' || inputs.post }}",
        "-bisect-${{ inputs.bisect_new_failures || vars.BISECT_NEW_FAILURES == 'true' }}",
    ] {
        assert!(g.contains(part), "matrix.yml's group lacks {part}: {g}");
    }
    let text = std::fs::read_to_string(root().join(".github/workflows/matrix.yml")).unwrap();
    assert!(
        text.contains("(github.event_name == 'schedule' || inputs.post)")
            && text.contains("(inputs.bisect_new_failures || vars.BISECT_NEW_FAILURES == 'true')"),
        "the jobs decide posting and bisecting with the same expressions as the group"
    );
}

/// Labels that only self-hosted runners carry: `self-hosted` and actionlint.yaml's.
fn self_hosted_labels() -> Vec<String> {
    let c: serde_yaml_ng::Value = serde_yaml_ng::from_str(
        &std::fs::read_to_string(root().join(".github/actionlint.yaml")).unwrap(),
    )
    .unwrap();
    let mut v = vec!["self-hosted".to_string()];
    for l in c["self-hosted-runner"]["labels"].as_sequence().unwrap() {
        v.push(l.as_str().unwrap().to_string());
    }
    v
}

/// The events a workflow runs on (`on:` as a string, a list or a mapping).
fn events(wf: &serde_yaml_ng::Value) -> Vec<String> {
    // YAML 1.1 reads a bare `on` key as `true`; serde_yaml_ng keeps it a string.
    match &wf["on"] {
        serde_yaml_ng::Value::String(s) => vec![s.clone()],
        serde_yaml_ng::Value::Sequence(s) => {
            s.iter().map(|e| e.as_str().unwrap().to_string()).collect()
        }
        serde_yaml_ng::Value::Mapping(m) => {
            m.keys().map(|k| k.as_str().unwrap().to_string()).collect()
        }
        o => panic!("on: {o:?}"),
    }
}

/// Why a workflow (file name → parsed text) lets an untrusted trigger reach a self-hosted
/// runner, one line per way; empty when it does not. Only `workflow_dispatch` and `schedule`
/// (people with write access, and main's own file) may start a job on a self-hosted label, or
/// call a reusable workflow that has one; a `runs-on:` built from an expression could be steered
/// there, so it counts as self-hosted.
fn untrusted_paths_to_self_hosted(
    all: &std::collections::BTreeMap<String, serde_yaml_ng::Value>,
    labels: &[String],
) -> Vec<String> {
    fn reaches(
        all: &std::collections::BTreeMap<String, serde_yaml_ng::Value>,
        name: &str,
        labels: &[String],
    ) -> bool {
        let wf = &all[name];
        wf["jobs"].as_mapping().unwrap().values().any(|j| {
            if let Some(u) = j.get("uses").and_then(|u| u.as_str()) {
                let called = u.trim_start_matches("./.github/workflows/");
                return all.contains_key(called) && reaches(all, called, labels);
            }
            let on: Vec<String> = match &j["runs-on"] {
                serde_yaml_ng::Value::String(s) => vec![s.clone()],
                serde_yaml_ng::Value::Sequence(s) => s
                    .iter()
                    .map(|l| l.as_str().unwrap_or("").to_string())
                    .collect(),
                // `group:`/`labels:` forms: treat as reaching (a runner group may be self-hosted).
                _ => return true,
            };
            on.iter()
                .any(|l| l.contains("${{") || labels.iter().any(|s| s == l))
        })
    }
    let trusted = ["workflow_dispatch", "schedule", "workflow_call"];
    let mut why = vec![];
    for (name, wf) in all {
        let ev = events(wf);
        let untrusted: Vec<&String> = ev
            .iter()
            .filter(|e| !trusted.contains(&e.as_str()))
            .collect();
        if !untrusted.is_empty() && reaches(all, name, labels) {
            why.push(format!(
                "{name}: {untrusted:?} reaches a self-hosted runner"
            ));
        }
    }
    why
}

/// No pull request (or any other event an outsider can cause) starts a job on the GPU runners
/// from this repository's own files. A fork's pull request runs the fork's copy of a
/// `pull_request` workflow, which no file here can stop: that part is GitHub's settings
/// (docs/github.md: Self-hosted runners), and this test keeps the files from opening the door.
#[test]
fn no_pull_request_triggered_job_reaches_a_self_hosted_runner() {
    let labels = self_hosted_labels();
    assert!(labels.iter().any(|l| l == "gfx1151"), "{labels:?}");
    let load = |files: &[(&str, &str)]| {
        files
            .iter()
            .map(|(n, t)| (n.to_string(), serde_yaml_ng::from_str(t).unwrap()))
            .collect::<std::collections::BTreeMap<String, serde_yaml_ng::Value>>()
    };
    // The rule itself, on workflows that break it in each way it knows.
    let bad = load(&[
        (
            "a.yml",
            "on: [pull_request]\njobs:\n  t:\n    runs-on: [self-hosted, linux, gfx1151]\n",
        ),
        (
            "b.yml",
            "on:\n  pull_request_target:\n  workflow_dispatch:\njobs:\n  t:\n    uses: ./.github/workflows/r.yml\n",
        ),
        ("r.yml", "on: workflow_call\njobs:\n  t:\n    runs-on: gfx1151\n"),
        (
            "c.yml",
            "on: issue_comment\njobs:\n  t:\n    runs-on: ${{ github.event.comment.body }}\n",
        ),
        (
            "d.yml",
            "on: pull_request\njobs:\n  t:\n    runs-on: ubuntu-24.04\n",
        ),
    ]);
    let found = untrusted_paths_to_self_hosted(&bad, &labels);
    assert_eq!(found.len(), 3, "{found:#?}");
    for n in ["a.yml", "b.yml", "c.yml"] {
        assert!(found.iter().any(|w| w.starts_with(n)), "{n}: {found:#?}");
    }
    // This repository's workflows.
    let ours: std::collections::BTreeMap<String, serde_yaml_ng::Value> = workflows()
        .iter()
        .map(|p| {
            let name = p.file_name().unwrap().to_str().unwrap().to_string();
            (name.clone(), yaml(&name))
        })
        .collect();
    let found = untrusted_paths_to_self_hosted(&ours, &labels);
    assert!(found.is_empty(), "{found:#?}");
    // The part no file can enforce is written down where the runners are set up.
    let docs = std::fs::read_to_string(root().join("docs/github.md")).unwrap();
    for needle in [
        "### Self-hosted runners",
        "Selected workflows",
        "Require approval for all external contributors",
        "ephemeral",
    ] {
        assert!(docs.contains(needle), "docs/github.md lacks {needle:?}");
    }
}

/// A token-holding job runs the binary the build job made, not whatever carries its artifact's
/// name: any job of the run (a GPU job running the code under test among them) may upload
/// `setrows-bisect-bin` again, but only the build job sets its outputs. So the build job gives
/// the binary's sha256 as an output, every step that fetches the binary is handed exactly that
/// output (through a reusable round's input where the jobs are called), and the action checks
/// it before anything runs.
#[test]
fn every_fetch_of_the_binary_is_checked_against_the_build_jobs_digest() {
    for (name, builder) in [
        ("matrix.yml", "plan"),
        ("bisect.yml", "build"),
        ("bisect-distributed.yml", "build"),
        ("bisect-round.yml", ""),
    ] {
        let wf = yaml(name);
        if !builder.is_empty() {
            let b = &wf["jobs"][builder];
            assert_eq!(
                b["outputs"]["sha256"], "${{ steps.digest.outputs.sha256 }}",
                "{name}: {builder}"
            );
            let digest = b["steps"]
                .as_sequence()
                .unwrap()
                .iter()
                .find(|s| s["id"] == "digest")
                .unwrap_or_else(|| panic!("{name}: {builder} has no digest step"));
            assert!(digest["run"]
                .as_str()
                .unwrap()
                .contains("sha256sum target/release/setrows-bisect"));
        }
        let expected = if builder.is_empty() {
            "${{ inputs.bin_sha256 }}".to_string()
        } else {
            format!("${{{{ needs.{builder}.outputs.sha256 }}}}")
        };
        let mut fetches = 0;
        for (k, j) in wf["jobs"].as_mapping().unwrap() {
            let k = k.as_str().unwrap();
            if let Some(u) = j.get("uses").and_then(|u| u.as_str()) {
                if u.ends_with("bisect-round.yml") {
                    assert_eq!(j["with"]["bin_sha256"], expected.as_str(), "{name}: {k}");
                    assert!(needs(j).iter().any(|n| n == builder), "{name}: {k}");
                    fetches += 1;
                }
                continue;
            }
            for s in j["steps"].as_sequence().unwrap() {
                let u = s["uses"].as_str().unwrap_or("");
                if u == "./.github/actions/setrows-bin" || u == "./.github/actions/setrows-config" {
                    assert_eq!(s["with"]["sha256"], expected.as_str(), "{name}: {k}");
                    assert!(
                        builder.is_empty() || needs(j).iter().any(|n| n == builder),
                        "{name}: {k} reads {builder}'s output without needing it directly"
                    );
                    fetches += 1;
                }
            }
        }
        assert!(fetches >= 2, "{name}: {fetches}");
    }
    let config: serde_yaml_ng::Value = serde_yaml_ng::from_str(
        &std::fs::read_to_string(root().join(".github/actions/setrows-config/action.yml")).unwrap(),
    )
    .unwrap();
    assert_eq!(config["inputs"]["sha256"]["required"], true);
    let passes = config["runs"]["steps"]
        .as_sequence()
        .unwrap()
        .iter()
        .any(|s| {
            s["uses"] == "./.github/actions/setrows-bin"
                && s["with"]["sha256"] == "${{ inputs.sha256 }}"
        });
    assert!(passes, "setrows-config does not hand the digest on");
}

/// "Re-run failed jobs" repeats jobs inside the same run, whose artifacts stay: an upload of a
/// name the run already has is refused (409) unless it overwrites, so every upload overwrites
/// or names itself per attempt (`github.run_attempt`). The binary outlives the 30 days in which
/// a run can be re-run. (tests/github_actions_harness.rs re-runs a failed job under the same
/// rule; tests/github_actions_run.rs re-runs the distributed bisection.)
#[test]
fn every_upload_survives_a_rerun_and_the_binary_outlives_it() {
    let mut uploads = 0;
    for name in [
        "matrix.yml",
        "bisect.yml",
        "bisect-distributed.yml",
        "bisect-round.yml",
    ] {
        let wf = yaml(name);
        for (k, j) in wf["jobs"].as_mapping().unwrap() {
            for s in j["steps"].as_sequence().into_iter().flatten() {
                if !s["uses"]
                    .as_str()
                    .is_some_and(|u| u.starts_with("actions/upload-artifact@"))
                {
                    continue;
                }
                uploads += 1;
                let w = &s["with"];
                let artifact = w["name"].as_str().unwrap();
                assert!(
                    w["overwrite"] == true || artifact.contains("github.run_attempt"),
                    "{name}: job {}: upload {artifact} fails with 409 when a re-run repeats it",
                    k.as_str().unwrap()
                );
                if artifact == "setrows-bisect-bin" {
                    let days = w["retention-days"].as_u64().unwrap();
                    assert!(days > 30, "{name}: the binary is kept {days} days");
                }
            }
        }
    }
    assert!(uploads >= 9, "{uploads}");
}

/// A job that can read `secrets.RESULTS_TOKEN` (or the key that signs the comments' state,
/// `secrets.RESULTS_SIGNING_KEY`) must declare the `results` environment: the token is kept there (docs/github.md: Results token), where the environment's protection
/// (required reviewers, or deployments from main only) decides which runs get it. A repository
/// secret would reach every job of every branch's workflow; a job that forgot the environment
/// would post with its own token, or not at all, without anyone noticing here.
#[test]
fn every_job_that_reads_the_results_token_declares_the_results_environment() {
    let mut readers = 0;
    for path in workflows() {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let wf = yaml(&name);
        let Some(jobs) = wf.get("jobs").and_then(|j| j.as_mapping()) else {
            continue;
        };
        for (id, job) in jobs {
            let id = id.as_str().unwrap_or("?");
            let text = serde_yaml_ng::to_string(job).unwrap();
            let reads: Vec<&str> = ["secrets.RESULTS_TOKEN", "secrets.RESULTS_SIGNING_KEY"]
                .into_iter()
                .filter(|s| text.contains(s))
                .collect();
            if reads.is_empty() {
                continue;
            }
            readers += 1;
            let env = job.get("environment").map(|e| match e {
                serde_yaml_ng::Value::String(s) => s.clone(),
                m => m
                    .get("name")
                    .and_then(|n| n.as_str())
                    .unwrap_or_default()
                    .to_string(),
            });
            assert_eq!(
                env.as_deref(),
                Some("results"),
                "{name}: job `{id}` reads {reads:?} without `environment: results`"
            );
        }
    }
    // matrix.yml, bisect.yml and bisect-distributed.yml post: a rule that checks no job proves
    // nothing.
    assert!(readers >= 3, "only {readers} job(s) read RESULTS_TOKEN");
}
