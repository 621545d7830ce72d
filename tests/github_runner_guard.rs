//! scripts/runner-guard.sh, the self-hosted runner's job-started hook, run as the runner runs
//! it (`bash -e PATH`) with the variables and event payload GitHub gives a job: this
//! repository's scheduled and dispatched workflows on main are accepted, and every kind of job
//! a fork can cause (or a repository, workflow or ref nobody listed) is refused in one line,
//! as is everything when the allowlist or the payload cannot be trusted. The shipped example
//! allowlist is checked against .github/workflows, so it lists exactly the jobs that reach a
//! self-hosted runner.

mod tools;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

const REPO: &str = "acme/setrows-bisect";
const FORK: &str = "mallory/setrows-bisect";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn script() -> PathBuf {
    root().join("scripts/runner-guard.sh")
}

fn example() -> String {
    std::fs::read_to_string(root().join("scripts/runner-guard.allow.example")).unwrap()
}

fn wref(repo: &str, file: &str, git_ref: &str) -> String {
    format!("{repo}/.github/workflows/{file}@{git_ref}")
}

/// One job as the runner hands it to the hook.
struct Job<'a> {
    event: &'a str,
    repo: &'a str,
    wref: String,
    payload: Option<String>,
}

impl<'a> Job<'a> {
    fn new(event: &'a str, file: &str, payload: serde_json::Value) -> Self {
        Job {
            event,
            repo: REPO,
            wref: wref(REPO, file, "refs/heads/main"),
            payload: Some(payload.to_string()),
        }
    }
}

/// A scratch directory with an allowlist, plus how the guard is run there.
struct Runner {
    dir: tempfile::TempDir,
    allow: PathBuf,
    path: String,
}

impl Runner {
    /// The shipped example, installed as its header says (OWNER/REPO replaced).
    fn example() -> Self {
        Self::with_allowlist(Some(&example().replace("OWNER/REPO", REPO)))
    }

    fn with_allowlist(text: Option<&str>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let allow = dir.path().join("runner-allow");
        if let Some(t) = text {
            std::fs::write(&allow, t).unwrap();
        }
        Runner {
            dir,
            allow,
            path: std::env::var("PATH").unwrap_or_default(),
        }
    }

    fn allow(&self) -> String {
        self.allow.display().to_string()
    }

    /// The allowlist's 1-based line number of `needle` (for the accept line).
    fn line_of(&self, needle: &str) -> usize {
        let text = std::fs::read_to_string(&self.allow).unwrap();
        let words: Vec<&str> = needle.split_whitespace().collect();
        1 + text
            .lines()
            .position(|l| l.split_whitespace().collect::<Vec<_>>() == words)
            .unwrap_or_else(|| panic!("{needle:?} not in the allowlist"))
    }

    /// (exit status, the whole output) of the guard for `job`. The environment is only what a
    /// runner gives a job (plus PATH and the allowlist's path), so nothing of the test's leaks in.
    fn run(&self, job: &Job) -> (i32, String) {
        // bash by its absolute path: PATH may be pruned (the jq-missing case).
        let bash = which("bash").expect("bash on PATH");
        let mut cmd = self.job_env(Command::new(bash), job);
        cmd.arg("-e").arg(script());
        let out = cmd.output().unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.code().unwrap_or(-1), text)
    }

    /// `cmd` with the job's environment and nothing else.
    fn job_env(&self, mut cmd: Command, job: &Job) -> Command {
        cmd.env_clear()
            .env("PATH", &self.path)
            .env("RUNNER_GUARD_ALLOW", &self.allow)
            .env("GITHUB_EVENT_NAME", job.event)
            .env("GITHUB_REPOSITORY", job.repo)
            .env("GITHUB_WORKFLOW_REF", &job.wref)
            .env("GITHUB_ACTIONS", "true")
            .current_dir(self.dir.path());
        if let Some(p) = &job.payload {
            let file = self.dir.path().join("event.json");
            std::fs::write(&file, p).unwrap();
            cmd.env("GITHUB_EVENT_PATH", file);
        }
        cmd
    }

    /// The job run by a stand-in for the runner's worker: a process named `Runner.Worker`,
    /// started with `argv` (the runner's is `spawnclient IN OUT`), that runs the hook as the
    /// runner does and then, whatever the hook said, an `if: always()` step, as the runner does
    /// (actions/runner#2811). Returns (the worker's exit code, None when a signal ended it; the
    /// hook's output; whether the always() step ran).
    fn under_worker(&self, job: &Job, argv: &[&str]) -> (Option<i32>, String, bool) {
        use std::os::unix::fs::PermissionsExt;
        let bin = self.dir.path().join("runner-bin");
        std::fs::create_dir_all(&bin).unwrap();
        let worker = bin.join("Runner.Worker");
        let (out, step) = (
            self.dir.path().join("hook.out"),
            self.dir.path().join("always-step-ran"),
        );
        let _ = std::fs::remove_file(&step);
        std::fs::write(
            &worker,
            format!(
                "#!{bash}
{bash} -e {hook} >{out} 2>&1 || true
touch {step}
",
                bash = which("bash").unwrap().display(),
                hook = script().display(),
                out = out.display(),
                step = step.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&worker, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut cmd = self.job_env(Command::new(&worker), job);
        let status = cmd.args(argv).status().unwrap();
        (
            status.code(),
            std::fs::read_to_string(&out).unwrap_or_default(),
            step.exists(),
        )
    }

    fn accepted(&self, job: &Job, line: usize) {
        let (rc, out) = self.run(job);
        let want = format!(
            "runner-guard: accepted {} job of {} ({}): allowlist {} line {line}\n",
            job.event,
            job.repo,
            job.wref,
            self.allow()
        );
        assert_eq!((rc, out.as_str()), (0, want.as_str()));
    }

    /// Refused, with exactly this reason, in exactly one annotation line.
    fn refused(&self, job: &Job, reason: &str) {
        let (rc, out) = self.run(job);
        let want = format!(
            "::error::runner-guard: refused {} job of {} ({}): {reason} (allowlist {})\n",
            job.event,
            job.repo,
            job.wref,
            self.allow()
        );
        assert_eq!((rc, out.as_str()), (1, want.as_str()));
    }
}

fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

fn repository(name: &str) -> serde_json::Value {
    serde_json::json!({ "full_name": name, "fork": name != REPO })
}

fn schedule_payload() -> serde_json::Value {
    serde_json::json!({
        "schedule": "17 2 * * *",
        "workflow": ".github/workflows/matrix.yml",
        "repository": repository(REPO),
    })
}

fn dispatch_payload(file: &str) -> serde_json::Value {
    serde_json::json!({
        "inputs": { "config": "rocm-7.1", "good": "v1", "bad": "v2" },
        "ref": "refs/heads/main",
        "workflow": format!(".github/workflows/{file}"),
        "repository": repository(REPO),
        "sender": { "login": "maintainer" },
    })
}

/// A pull request event's payload: base in this repository, head in `head`.
fn pull_request_payload(head: &str) -> serde_json::Value {
    serde_json::json!({
        "action": "synchronize",
        "number": 7,
        "pull_request": {
            "number": 7,
            "title": "runs-on: [self-hosted, linux, gfx1151] ; rm -rf ~",
            "head": { "ref": "main", "sha": "f00d", "repo": repository(head) },
            "base": { "ref": "main", "repo": repository(REPO) },
        },
        "repository": repository(REPO),
    })
}

#[test]
fn this_repositorys_scheduled_and_dispatched_workflows_on_main_are_accepted() {
    let r = Runner::example();
    let line = |ev: &str, file: &str| {
        r.line_of(
            &format!("{ev} OWNER/REPO .github/workflows/{file}@refs/heads/main")
                .replace("OWNER/REPO", REPO),
        )
    };
    r.accepted(
        &Job::new("schedule", "matrix.yml", schedule_payload()),
        line("schedule", "matrix.yml"),
    );
    // A schedule's payload has carried nothing but the cron line: no repository is no lie.
    r.accepted(
        &Job::new(
            "schedule",
            "matrix.yml",
            serde_json::json!({"schedule": "17 2 * * *"}),
        ),
        line("schedule", "matrix.yml"),
    );
    for file in ["matrix.yml", "bisect.yml", "bisect-distributed.yml"] {
        r.accepted(
            &Job::new("workflow_dispatch", file, dispatch_payload(file)),
            line("workflow_dispatch", file),
        );
    }
}

#[test]
fn events_a_fork_can_cause_are_refused() {
    let r = Runner::example();
    let not_listed = "no allowlist line names this event, repository and workflow ref";
    // A fork's pull request runs the fork's copy of a workflow (here matrix.yml rewritten to
    // `on: pull_request`) in this repository, at the merge ref.
    r.refused(
        &Job {
            wref: wref(REPO, "matrix.yml", "refs/pull/7/merge"),
            ..Job::new("pull_request", "matrix.yml", pull_request_payload(FORK))
        },
        not_listed,
    );
    // pull_request_target and issue_comment run main's own file: the ref alone proves nothing.
    r.refused(
        &Job::new(
            "pull_request_target",
            "matrix.yml",
            pull_request_payload(FORK),
        ),
        not_listed,
    );
    r.refused(
        &Job::new(
            "issue_comment",
            "bisect.yml",
            serde_json::json!({
                "action": "created",
                "issue": { "number": 7, "pull_request": { "url": "x" } },
                "comment": { "body": "/bisect" },
                "repository": repository(REPO),
            }),
        ),
        not_listed,
    );
    r.refused(
        &Job {
            wref: wref(REPO, "bisect.yml", "refs/pull/7/merge"),
            ..Job::new(
                "pull_request_review",
                "bisect.yml",
                pull_request_payload(FORK),
            )
        },
        not_listed,
    );
    r.refused(
        &Job::new(
            "workflow_run",
            "bisect-distributed.yml",
            serde_json::json!({
                "action": "completed",
                "workflow_run": {
                    "event": "pull_request",
                    "head_branch": "main",
                    "head_repository": repository(FORK),
                    "repository": repository(REPO),
                },
                "repository": repository(REPO),
            }),
        ),
        not_listed,
    );
    // Dispatching from another branch runs that branch's copy of the file.
    r.refused(
        &Job {
            wref: wref(REPO, "bisect.yml", "refs/heads/try-this"),
            ..Job::new(
                "workflow_dispatch",
                "bisect.yml",
                dispatch_payload("bisect.yml"),
            )
        },
        not_listed,
    );
    // A fork (or any other repository sharing the runner) scheduling the same workflow.
    r.refused(
        &Job {
            repo: FORK,
            wref: wref(FORK, "matrix.yml", "refs/heads/main"),
            payload: Some(
                serde_json::json!({"schedule": "17 2 * * *", "repository": repository(FORK)})
                    .to_string(),
            ),
            event: "schedule",
        },
        not_listed,
    );
    // A workflow of this repository that was never meant for the runner.
    r.refused(
        &Job::new("workflow_dispatch", "ci.yml", dispatch_payload("ci.yml")),
        not_listed,
    );
}

#[test]
fn a_job_whose_variables_or_payload_disagree_is_refused() {
    let r = Runner::example();
    // An allowed event and repository, but the workflow file of another repository.
    r.refused(
        &Job {
            wref: wref(FORK, "matrix.yml", "refs/heads/main"),
            ..Job::new("schedule", "matrix.yml", schedule_payload())
        },
        &format!("the workflow ref is not a workflow of {REPO} at a ref"),
    );
    // Everything allowed, but the payload is another repository's.
    let mut p = dispatch_payload("bisect.yml");
    p["repository"] = repository(FORK);
    r.refused(
        &Job::new("workflow_dispatch", "bisect.yml", p),
        &format!("the event payload is of repository {FORK}, not the job's"),
    );
    // A ref that is not `refs/...`, and variables that are missing.
    r.refused(
        &Job {
            wref: format!("{REPO}/.github/workflows/matrix.yml@main"),
            ..Job::new("schedule", "matrix.yml", schedule_payload())
        },
        &format!("the workflow ref is not a workflow of {REPO} at a ref"),
    );
    let (rc, out) = r.run(&Job {
        event: "",
        ..Job::new("schedule", "matrix.yml", schedule_payload())
    });
    assert_eq!(
        (rc, out),
        (
            1,
            format!(
                "::error::runner-guard: refused unknown job of {REPO} ({}): GITHUB_EVENT_NAME is not set (allowlist {})\n",
                wref(REPO, "matrix.yml", "refs/heads/main"),
                r.allow()
            )
        )
    );
    // A payload that is missing, or not JSON.
    r.refused(
        &Job {
            payload: None,
            ..Job::new("schedule", "matrix.yml", schedule_payload())
        },
        "the event payload (GITHUB_EVENT_PATH) is missing or unreadable",
    );
    r.refused(
        &Job {
            payload: Some("{\"schedule\": ".into()),
            ..Job::new("schedule", "matrix.yml", schedule_payload())
        },
        "the event payload is not a JSON object",
    );
}

#[test]
fn a_listed_pull_request_event_still_refuses_a_forks_head() {
    // An admin who lists pull request events (e.g. for a same-repository branch) still gets no
    // fork's code: the head repository comes from GitHub, not from the fork's author.
    let r = Runner::with_allowlist(Some(&format!(
        "pull_request {REPO} .github/workflows/*.yml@refs/pull/*/merge\n\
         pull_request_target {REPO} .github/workflows/*.yml@refs/heads/main\n\
         workflow_run {REPO} .github/workflows/*.yml@refs/heads/main\n"
    )));
    let pr = |head: &str| Job {
        wref: wref(REPO, "matrix.yml", "refs/pull/7/merge"),
        ..Job::new("pull_request", "matrix.yml", pull_request_payload(head))
    };
    r.refused(
        &pr(FORK),
        &format!("the pull request comes from {FORK}, a fork"),
    );
    r.accepted(&pr(REPO), 1);
    r.refused(
        &Job::new(
            "pull_request_target",
            "matrix.yml",
            pull_request_payload(FORK),
        ),
        &format!("the pull request comes from {FORK}, a fork"),
    );
    // A deleted fork's head repository is null; a payload without the key cannot skip the check.
    let mut gone = pull_request_payload(FORK);
    gone["pull_request"]["head"]["repo"] = serde_json::Value::Null;
    r.refused(
        &Job {
            wref: wref(REPO, "matrix.yml", "refs/pull/7/merge"),
            ..Job::new("pull_request", "matrix.yml", gone)
        },
        "the pull request's head repository is unknown (a deleted fork?)",
    );
    r.refused(
        &Job {
            wref: wref(REPO, "matrix.yml", "refs/pull/7/merge"),
            ..Job::new("pull_request", "matrix.yml", schedule_payload())
        },
        "the pull request's head repository is unknown (a deleted fork?)",
    );
    let run = |head: &str| {
        Job::new(
            "workflow_run",
            "bisect.yml",
            serde_json::json!({
                "workflow_run": { "event": "pull_request", "head_repository": repository(head) },
                "repository": repository(REPO),
            }),
        )
    };
    r.refused(
        &run(FORK),
        &format!("the triggering run ran code of {FORK}, a fork"),
    );
    r.accepted(&run(REPO), 3);
}

#[test]
fn an_allowlist_that_cannot_be_trusted_refuses_everything() {
    let job = Job::new("schedule", "matrix.yml", schedule_payload());
    let r = Runner::with_allowlist(None);
    r.refused(
        &job,
        "the allowlist is missing or unreadable, so every job is refused",
    );
    let r = Runner::with_allowlist(Some("# nothing yet\n\n"));
    r.refused(
        &job,
        "the allowlist has no entries, so every job is refused",
    );
    // The job's own line is fine; one bad line elsewhere voids the file.
    let good = example().replace("OWNER/REPO", REPO);
    let at = good.lines().count() + 1;
    for bad in [
        format!("workflow_dispatch {REPO}"),
        format!("* {REPO} .github/workflows/bisect.yml@refs/heads/main"),
        format!("workflow_dispatch {REPO} .github/workflows/bisect.yml@main"),
        format!("workflow_dispatch {REPO} bisect.yml@refs/heads/main"),
        "workflow_dispatch acme .github/workflows/bisect.yml@refs/heads/main".to_string(),
        format!("workflow_dispatch {REPO} .github/workflows/bisect.yml@refs/heads/main extra"),
    ] {
        let r = Runner::with_allowlist(Some(&format!("{good}{bad}\n")));
        r.refused(
            &job,
            &format!(
                "allowlist line {at} is malformed (want: EVENT OWNER/REPO .github/workflows/FILE@REF), so every job is refused"
            ),
        );
    }
    // Comments after the fields and CRLF line ends are not malformed.
    let r = Runner::with_allowlist(Some(&format!(
        "schedule {REPO} .github/workflows/matrix.yml@refs/heads/main  # nightly\r\n"
    )));
    r.accepted(&job, 1);
}

/// A refusal under the runner's worker ends the worker, so the `always()` step the runner would
/// still run never does; an accepted job runs on; a process of that name that the runner did not
/// start as a worker (no `spawnclient`) is never stopped.
#[test]
fn a_refused_job_runs_no_step_not_even_an_always_step() {
    let r = Runner::example();
    let fork = Job::new("pull_request", "matrix.yml", pull_request_payload(FORK));
    let (code, out, ran) = r.under_worker(&fork, &["spawnclient", "3", "4"]);
    assert_eq!(code, None, "the worker was not stopped: {out}");
    assert!(!ran, "the always() step ran after a refusal: {out}");
    assert_eq!(out.lines().count(), 1, "{out}");
    assert!(
        out.starts_with("::error::runner-guard: refused pull_request job of ")
            && out.contains("; stopping its Runner.Worker (")
            && out.ends_with("), so no later step runs\n"),
        "{out}"
    );

    let nightly = Job::new("schedule", "matrix.yml", schedule_payload());
    let (code, out, ran) = r.under_worker(&nightly, &["spawnclient", "3", "4"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        ran && out.starts_with("runner-guard: accepted schedule job"),
        "{out}"
    );

    let (code, out, ran) = r.under_worker(&fork, &["--version"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(ran && !out.contains("stopping"), "{out}");
}

#[test]
fn without_jq_the_payload_cannot_be_checked_so_the_job_is_refused() {
    let mut r = Runner::example();
    // A PATH with no jq on it: the guard uses only bash builtins besides jq.
    let empty = r.dir.path().join("empty-bin");
    std::fs::create_dir(&empty).unwrap();
    r.path = empty.display().to_string();
    r.refused(
        &Job::new("schedule", "matrix.yml", schedule_payload()),
        "jq is missing, so the event payload cannot be checked",
    );
}

#[test]
fn no_value_can_break_out_of_the_one_line() {
    // GITHUB_* values are GitHub's, but the line is an annotation: a newline or a `%0A` in one
    // must not end it or start a workflow command of its own.
    let r = Runner::example();
    let (rc, out) = r.run(&Job {
        wref: format!("{REPO}/.github/workflows/matrix.yml@refs/heads/x\n::warning::y%0A"),
        ..Job::new("schedule", "matrix.yml", schedule_payload())
    });
    assert_eq!(rc, 1);
    assert_eq!(out.lines().count(), 1, "{out}");
    assert!(out.starts_with("::error::runner-guard: refused "), "{out}");
    assert!(out.contains("refs/heads/x?::warning::y?0A"), "{out}");
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

/// (event, workflow file) of every job this repository sends to a self-hosted runner, as the
/// runner sees it: a called workflow's jobs carry their caller's event and workflow ref.
fn self_hosted_jobs() -> BTreeSet<(String, String)> {
    let dir = root().join(".github/workflows");
    let all: std::collections::BTreeMap<String, serde_yaml_ng::Value> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yml" || x == "yaml"))
        .map(|p| {
            let name = p.file_name().unwrap().to_str().unwrap().to_string();
            let text = std::fs::read_to_string(&p).unwrap();
            (name, serde_yaml_ng::from_str(&text).unwrap())
        })
        .collect();
    let labels = self_hosted_labels();
    fn reaches(
        all: &std::collections::BTreeMap<String, serde_yaml_ng::Value>,
        name: &str,
        labels: &[String],
    ) -> bool {
        all[name]["jobs"].as_mapping().unwrap().values().any(|j| {
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
                _ => return true,
            };
            on.iter()
                .any(|l| l.contains("${{") || labels.iter().any(|s| s == l))
        })
    }
    let mut jobs = BTreeSet::new();
    for (name, wf) in &all {
        if !reaches(&all, name, &labels) {
            continue;
        }
        let events: Vec<String> = match &wf["on"] {
            serde_yaml_ng::Value::String(s) => vec![s.clone()],
            serde_yaml_ng::Value::Sequence(s) => {
                s.iter().map(|e| e.as_str().unwrap().to_string()).collect()
            }
            serde_yaml_ng::Value::Mapping(m) => {
                m.keys().map(|k| k.as_str().unwrap().to_string()).collect()
            }
            o => panic!("{name}: on: {o:?}"),
        };
        for ev in events.into_iter().filter(|e| e != "workflow_call") {
            jobs.insert((ev, name.clone()));
        }
    }
    jobs
}

/// (event, workflow file) of every line of the shipped example, checked to be of main.
fn example_lines() -> BTreeSet<(String, String)> {
    example()
        .lines()
        .map(|l| l.split('#').next().unwrap())
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(f.len(), 3, "{l:?}");
            assert_eq!(f[1], "OWNER/REPO", "{l:?}");
            let file = f[2]
                .strip_prefix(".github/workflows/")
                .and_then(|r| r.strip_suffix("@refs/heads/main"))
                .unwrap_or_else(|| panic!("not a workflow of main: {l:?}"));
            (f[0].to_string(), file.to_string())
        })
        .collect()
}

#[test]
fn the_example_allowlist_is_exactly_the_jobs_the_workflows_send_to_the_runner() {
    let jobs = self_hosted_jobs();
    assert!(
        jobs.contains(&("schedule".into(), "matrix.yml".into()))
            && jobs.contains(&("workflow_dispatch".into(), "bisect-distributed.yml".into())),
        "the workflow reading missed the nightly or the distributed bisection: {jobs:?}"
    );
    assert!(
        !jobs
            .iter()
            .any(|(_, f)| f == "ci.yml" || f == "bisect-round.yml"),
        "{jobs:?}"
    );
    // No stale line and no missing one.
    assert_eq!(example_lines(), jobs);

    let r = Runner::example();
    for (ev, file) in &jobs {
        let payload = if ev == "schedule" {
            schedule_payload()
        } else {
            dispatch_payload(file)
        };
        let line = r.line_of(&format!(
            "{ev} {REPO} .github/workflows/{file}@refs/heads/main"
        ));
        r.accepted(&Job::new(ev, file, payload), line);
        // The same workflow under any event an outsider can cause, even from this repository.
        for bad in [
            "pull_request",
            "pull_request_target",
            "pull_request_review",
            "pull_request_review_comment",
            "issue_comment",
            "issues",
            "discussion_comment",
            "workflow_run",
            "push",
        ] {
            r.refused(
                &Job::new(bad, file, pull_request_payload(REPO)),
                "no allowlist line names this event, repository and workflow ref",
            );
        }
    }
}

#[test]
fn shellcheck_finds_nothing_in_the_guard() {
    let Some(sc) = tools::require(
        std::env::var_os("SHELLCHECK")
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
            .or_else(|| which("shellcheck")),
        "shellcheck (SHELLCHECK or PATH)",
        "scripts/setup.d/50-actionlint.sh",
    ) else {
        return;
    };
    let out = Command::new(&sc)
        .arg(script())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", sc.display()));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success() && text.is_empty(), "{text}");
}

#[test]
fn the_docs_say_how_to_install_it() {
    let docs = std::fs::read_to_string(root().join("docs/github.md")).unwrap();
    let section = docs
        .split("#### Runner guard")
        .nth(1)
        .expect("docs/github.md has a \"Runner guard\" subsection");
    for needle in [
        "scripts/runner-guard.sh",
        "scripts/runner-guard.allow.example",
        "ACTIONS_RUNNER_HOOK_JOB_STARTED=",
        ".env",
        "RUNNER_GUARD_ALLOW",
        "/etc/setrows-bisect/runner-allow",
        "any plan",
        // What a refusal does and does not do, and the settings it does not replace.
        "Runner.Worker",
        "if: always()",
        "actions/runner#2811",
        "ephemeral or just-in-time runners",
        "Require approval for all external contributors",
    ] {
        assert!(section.contains(needle), "Runner guard lacks {needle:?}");
    }
}
