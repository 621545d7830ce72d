//! The real binary's `report --post` against the GitHub API stand-in the workflow tests use
//! (scripts/fault-injection/fake_github.py), with the rules GitHub enforces for the calls it
//! makes: a workflow's token writes only to its own repository (403 elsewhere, GitHub's message)
//! and may not ask `GET /user`; comments page at most 100 at a time behind `Link` headers; and
//! the secondary rate limit on content creation answers 403 or 429 with `retry-after`.

mod github_support;
mod tools;

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;

struct Api {
    child: std::process::Child,
    log: PathBuf,
    url: String,
}

impl Drop for Api {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Api {
    fn start(dir: &Path, tokens: Value, args: &[&str]) -> Option<Api> {
        tools::require(
            which("python3"),
            "python3",
            "scripts/setup.d (the GitHub API stand-in is Python)",
        )?;
        let tf = dir.join("tokens.json");
        std::fs::write(&tf, tokens.to_string()).unwrap();
        let log = dir.join("api.log");
        let pf = dir.join("api.port");
        let child = std::process::Command::new("python3")
            .arg(
                Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("scripts/fault-injection/fake_github.py"),
            )
            .arg("--tokens")
            .arg(&tf)
            .arg("--log")
            .arg(&log)
            .arg("--port-file")
            .arg(&pf)
            .args(args)
            .spawn()
            .unwrap();
        let t = std::time::Instant::now();
        while !pf.exists() {
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "the stand-in did not start"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let url = format!(
            "http://127.0.0.1:{}",
            std::fs::read_to_string(&pf).unwrap().trim()
        );
        Some(Api { child, log, url })
    }
    /// (method, path, status) of every request.
    fn answers(&self) -> Vec<(String, String, u64)> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| {
                let v: Value = serde_json::from_str(l).unwrap();
                (
                    v["method"].as_str().unwrap().into(),
                    v["path"].as_str().unwrap().into(),
                    v["status"].as_u64().unwrap(),
                )
            })
            .collect()
    }
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// A bisect result file whose verdict names `first_bad` (same question, same comment key).
fn results(dir: &Path, first_bad: &str) -> PathBuf {
    let p = dir.join(format!("bisect-{first_bad}.json"));
    let r = github_support::bisect_result(first_bad, "1111111", "2222222", "regress=error");
    std::fs::write(&p, serde_json::to_string(&r).unwrap()).unwrap();
    p
}

/// `report --post` as a workflow step runs it; (exit code, stderr).
fn post(
    api: &Api,
    token: &str,
    issue: &str,
    file: &Path,
    actions_repo: Option<&str>,
) -> (i32, String) {
    let mut c = github_support::bin();
    c.args(["report", "--post", "--issue", issue, "--results"])
        .arg(file)
        .args(["--api-url", &api.url, "--github-retries", "3"])
        .env("GITHUB_TOKEN", token);
    if let Some(repo) = actions_repo {
        c.env("GITHUB_ACTIONS", "true")
            .env("GITHUB_REPOSITORY", repo);
    }
    let out = c.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!err.contains(token), "the token is printed");
    (out.status.code().unwrap_or(-1), err)
}

#[test]
fn a_workflow_token_writes_only_to_its_own_repository() {
    let d = tempfile::tempdir().unwrap();
    let tokens = json!({
        "ghs_writer": {"kind": "installation", "repos": ["me/tool"], "permissions": {"issues": "write"}},
        "ghs_reader": {"kind": "installation", "repos": ["me/tool"], "permissions": {"issues": "read"}},
        "github_pat_up": {"kind": "user", "login": "up-bot", "repos": ["up/stream"]},
    });
    let Some(api) = Api::start(d.path(), tokens, &[]) else {
        return;
    };
    let f = results(d.path(), "abcdef1234567890");
    // Another repository: refused, one line naming the secret and how to make the token.
    let (code, err) = post(&api, "ghs_writer", "up/stream#5", &f, Some("me/tool"));
    assert_eq!(code, 2, "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    for want in [
        "RESULTS_TOKEN",
        "up/stream",
        "me/tool",
        "Issues read and write",
        "public_repo",
    ] {
        assert!(err.contains(want), "no {want:?}: {err}");
    }
    let a = api.answers();
    assert!(a.contains(&("GET".into(), "/user".into(), 403)), "{a:?}");
    assert!(
        a.contains(&(
            "POST".into(),
            "/repos/up/stream/issues/5/comments".into(),
            403
        )),
        "{a:?}"
    );
    assert!(
        !a.iter().any(|x| x.2 == 201),
        "a refused write was made anyway: {a:?}"
    );
    // Its own repository: posts, as github-actions[bot] (the /user fallback inside Actions).
    let (code, err) = post(&api, "ghs_writer", "me/tool#1", &f, Some("me/tool"));
    assert_eq!(code, 0, "{err}");
    // Without issues: write it is the read-only token message, not the secret one.
    let (code, err) = post(&api, "ghs_reader", "me/tool#2", &f, Some("me/tool"));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("read-only") && !err.contains("RESULTS_TOKEN"),
        "{err}"
    );
    // A personal token scoped to the upstream repository posts there, as its user.
    let (code, err) = post(&api, "github_pat_up", "up/stream#5", &f, Some("me/tool"));
    assert_eq!(code, 0, "{err}");
    // An unknown token: 401.
    let (code, err) = post(&api, "ghp_unknown", "up/stream#5", &f, None);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("401"), "{err}");
}

#[test]
fn comments_page_at_100_and_our_comment_past_the_first_page_is_edited() {
    let d = tempfile::tempdir().unwrap();
    let tokens = json!({"github_pat_up": {"kind": "user", "login": "up-bot"}});
    let Some(api) = Api::start(d.path(), tokens, &["--filler", "150"]) else {
        return;
    };
    let (code, err) = post(
        &api,
        "github_pat_up",
        "up/stream#5",
        &results(d.path(), "aaaaaaa111"),
        None,
    );
    assert_eq!(code, 0, "{err}");
    // The comment is the 151st: the second post finds it on page 2 and edits it.
    let (code, err) = post(
        &api,
        "github_pat_up",
        "up/stream#5",
        &results(d.path(), "bbbbbbb222"),
        None,
    );
    assert_eq!(code, 0, "{err}");
    let a = api.answers();
    let created = a.iter().filter(|x| x.0 == "POST" && x.2 == 201).count();
    let edited = a.iter().filter(|x| x.0 == "PATCH" && x.2 == 200).count();
    assert_eq!((created, edited), (1, 1), "{a:?}");
    assert!(
        a.iter().any(|x| x.0 == "GET"
            && x.1.starts_with("/repositories/")
            && x.1.contains("per_page=100&page=2")),
        "the Link header's next page was not followed: {a:?}"
    );
}

#[test]
fn secondary_rate_limits_answer_403_or_429_with_retry_after_and_are_waited_out() {
    for status in ["403", "429"] {
        let d = tempfile::tempdir().unwrap();
        let tokens = json!({"github_pat_up": {"kind": "user", "login": "up-bot"}});
        let args = ["--content-limit", "1/5", "--content-limit-status", status];
        let Some(api) = Api::start(d.path(), tokens, &args) else {
            return;
        };
        let (code, err) = post(
            &api,
            "github_pat_up",
            "up/stream#5",
            &results(d.path(), "aaaaaaa111"),
            None,
        );
        assert_eq!(code, 0, "{err}");
        let (code, err) = post(
            &api,
            "github_pat_up",
            "up/stream#5",
            &results(d.path(), "bbbbbbb222"),
            None,
        );
        assert_eq!(code, 0, "{status}: {err}");
        let a = api.answers();
        let patches: Vec<u64> = a.iter().filter(|x| x.0 == "PATCH").map(|x| x.2).collect();
        assert_eq!(patches, [status.parse::<u64>().unwrap(), 200], "{a:?}");
    }
}

/// A token whose login was guessed wrong (an app's installation token inside Actions: `GET
/// /user` is refused, so comments by github-actions[bot] count as ours, but GitHub posts as the
/// app) stops after its first comment, in one line naming both logins and what to set, instead
/// of creating a new comment on every run. Told the right login, it edits that comment.
#[test]
fn a_comment_posted_as_another_login_than_ours_stops_with_one_line() {
    let d = tempfile::tempdir().unwrap();
    let tokens = json!({
        "ghs_app": {"kind": "installation", "posts_as": "results-app[bot]",
                    "permissions": {"issues": "write"}},
    });
    let Some(api) = Api::start(d.path(), tokens, &[]) else {
        return;
    };
    let f = results(d.path(), "abcdef1234567890");
    let (code, err) = post(&api, "ghs_app", "me/tool#1", &f, Some("me/tool"));
    assert_eq!(code, 2, "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    for want in [
        "results-app[bot]",
        "github-actions[bot]",
        "--comment-author results-app[bot]",
    ] {
        assert!(err.contains(want), "no {want:?}: {err}");
    }
    let creates = |a: &[(String, String, u64)]| a.iter().filter(|x| x.2 == 201).count();
    assert_eq!(creates(&api.answers()), 1, "{:?}", api.answers());
    // A second run cannot see the first comment as its own, so it creates one more, and
    // fails the same way: every such run fails the job, none passes quietly.
    let (code, err) = post(&api, "ghs_app", "me/tool#1", &f, Some("me/tool"));
    assert_eq!(code, 2, "{err}");
    assert_eq!(creates(&api.answers()), 2, "{:?}", api.answers());
    // With the login it posts as, the comment is found and edited: no new one.
    let mut c = github_support::bin();
    c.args(["report", "--post", "--issue", "me/tool#1", "--results"])
        .arg(results(d.path(), "bbbbbbb222"))
        .args([
            "--api-url",
            &api.url,
            "--comment-author",
            "results-app[bot]",
        ])
        .env("GITHUB_TOKEN", "ghs_app")
        .env("GITHUB_ACTIONS", "true")
        .env("GITHUB_REPOSITORY", "me/tool");
    let out = c.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let a = api.answers();
    assert_eq!(creates(&a), 2, "{a:?}");
    assert!(
        a.iter().any(|x| x.0 == "PATCH" && x.2 == 200),
        "the right login edits its comment: {a:?}"
    );
}
