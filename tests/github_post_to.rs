//! `bisect --post-to`, `bisect --resume-from-issue` and `matrix --post-to` end to end: the real
//! binary on a small generated git repository, a shell-script probe, and the loopback fake
//! GitHub of `github_support`.

mod gitcommit;
mod github_support;

use assert_cmd::Command;
use gitcommit::commit_all;
use github_support::{bin, count, run, start, STATE_KEY, STATE_PUBLIC_KEY, TOKEN};
use serde_json::Value;
use std::path::{Path, PathBuf};
use wiremock::matchers::{method, path};
use wiremock::{Mock, ResponseTemplate};

/// `n` commits on one branch; `state` says `good` before commit `first_bad`, `bad` from it on.
fn history(dir: &Path, n: usize, first_bad: usize) -> Vec<String> {
    let repo = git2::Repository::init(dir).unwrap();
    // ggml-like enough for the matrix's script probe (it reads the CMake spelling of the tree).
    std::fs::create_dir_all(dir.join("src/ggml-hip")).unwrap();
    std::fs::write(dir.join("CMakeLists.txt"), "option(GGML_HIP \"\" OFF)\n").unwrap();
    std::fs::write(
        dir.join("src/ggml-hip/CMakeLists.txt"),
        "if (AMDGPU_TARGETS AND NOT CMAKE_HIP_ARCHITECTURES)\n",
    )
    .unwrap();
    let mut shas = Vec::new();
    for i in 0..n {
        let state = if i >= first_bad { "bad" } else { "good" };
        std::fs::write(dir.join("state"), format!("{state}\n")).unwrap();
        std::fs::write(dir.join("n"), format!("{i}\n")).unwrap();
        shas.push(commit_all(&repo, &format!("c{i}")));
    }
    shas
}

struct Bisect {
    dir: tempfile::TempDir,
    shas: Vec<String>,
    api: String,
}

impl Bisect {
    fn new(api: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let shas = history(&dir.path().join("repo"), 40, 23);
        Bisect {
            dir,
            shas,
            api: api.to_string(),
        }
    }
    fn p(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    /// One probe = one line in `invocations`.
    fn cmd(&self, extra: &[&str]) -> Command {
        self.cmd_to("o/r#1", extra)
    }
    fn cmd_to(&self, issue: &str, extra: &[&str]) -> Command {
        let script = format!(
            "echo \"$(cat \"$SRC/n\")\" >> '{}'; test \"$(cat \"$SRC/state\")\" = good",
            self.p("invocations").display()
        );
        let mut c = bin();
        c.arg("bisect")
            .args(["--good", &self.shas[0], "--bad", &self.shas[39]])
            .arg("--repo")
            .arg(self.p("repo"))
            .arg("--work-dir")
            .arg(self.p("work"))
            .arg("--json")
            .arg(self.p("result.json"))
            .args(["--script", &script])
            .args(["--api-url", &self.api])
            .args(extra)
            .env("GITHUB_TOKEN", TOKEN)
            .env("SETROWS_STATE_SIGNING_KEY", STATE_KEY)
            .env_remove("SETROWS_STATE_PUBLIC_KEY");
        if !issue.is_empty() {
            c.args(["--post-to", issue]);
        }
        c
    }
    fn result(&self) -> Value {
        serde_json::from_str(&std::fs::read_to_string(self.p("result.json")).unwrap()).unwrap()
    }
    fn probed(&self) -> Vec<String> {
        std::fs::read_to_string(self.p("invocations"))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }
}

#[tokio::test]
async fn bisect_posts_then_edits_one_comment_and_a_fresh_job_resumes_from_it() {
    let (server, fake) = start(100).await;
    let b = Bisect::new(&server.uri());
    let summary = b.p("step-summary.md");

    // Run 1: bisects and creates the comment; the step summary gets the same markdown.
    let (code, out, err) = run({
        let mut c = b.cmd(&[]);
        c.env("GITHUB_STEP_SUMMARY", &summary);
        c
    })
    .await;
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(err.contains("created results comment"), "{err}");
    let first = b.result();
    assert_eq!(first["first_bad"], b.shas[23].as_str());
    let comments = fake.comments();
    assert_eq!(comments.len(), 1);
    let key = comments[0].body.lines().next().unwrap().to_string();
    assert!(key.starts_with("<!-- setrows-bisect:bisect:"), "{key}");
    assert!(
        comments[0].body.contains(&b.shas[23][..10]),
        "{}",
        comments[0].body
    );
    let step = std::fs::read_to_string(&summary).unwrap();
    assert!(step.contains(&b.shas[23][..10]) && !step.contains("setrows-bisect-state"));
    let run1 = b.probed();
    assert!(run1.len() >= 4, "{run1:?}");

    // Run 2, same work dir: answered from the store, the same comment is edited.
    let (code, out, err) = run(b.cmd(&[])).await;
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        err.contains("updated results comment") || err.contains("unchanged results comment"),
        "{err}"
    );
    assert_eq!(fake.comments().len(), 1, "a second comment was created");
    assert_eq!(
        count(&server, "POST", "/repos/o/r/issues/1/comments").await,
        1
    );
    assert_eq!(b.probed(), run1, "the store answered everything");

    // Run 3: a stateless job (no work dir) resumes from the comment alone.
    std::fs::remove_dir_all(b.p("work")).unwrap();
    // Its plan first: a dry run says it would seed the store and seeds nothing (no side
    // effects: no work dir, no request for the comment).
    let reads = count(&server, "GET", "/repos/o/r/issues/1/comments").await;
    let (code, out, err) = run(b.cmd(&["--resume-from-issue", "--dry-run"])).await;
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.contains("resume: a run first seeds the store")
            && out.contains("if its state is signed with this repository's key"),
        "{out}"
    );
    assert!(!b.p("work").exists(), "a dry run wrote the store:\n{err}");
    assert_eq!(
        count(&server, "GET", "/repos/o/r/issues/1/comments").await,
        reads,
        "a dry run read the issue"
    );
    let (code, out, err) = run(b.cmd(&["--resume-from-issue"])).await;
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(err.contains("seeded"), "{err}");
    assert_eq!(
        b.probed(),
        run1,
        "no probe of run 1 ran again after resuming:\n{err}"
    );
    let third = b.result();
    assert_eq!(third["first_bad"], first["first_bad"]);
    assert_eq!(third["executed"], 0, "{third:#}");
    assert_eq!(fake.comments().len(), 1);

    // Resuming from a named issue without --post-to reads the comment and posts nothing (a
    // job that may only read the issue).
    std::fs::remove_dir_all(b.p("work")).unwrap();
    let edits = count(
        &server,
        "PATCH",
        &format!("/repos/o/r/issues/comments/{}", fake.comments()[0].id),
    )
    .await;
    let (code, out, err) = run(b.cmd_to("", &["--resume-from-issue", "o/r#1"])).await;
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(b.probed(), run1, "{err}");
    assert!(!err.contains("results comment"), "{err}");
    assert_eq!(
        count(
            &server,
            "PATCH",
            &format!("/repos/o/r/issues/comments/{}", fake.comments()[0].id)
        )
        .await,
        edits
    );

    // Without --resume-from-issue the same fresh job would probe again: the seeding did it.
    std::fs::remove_dir_all(b.p("work")).unwrap();
    let (code, _, _) = run(b.cmd(&[])).await;
    assert_eq!(code, 0);
    assert!(b.probed().len() > run1.len());
}

#[tokio::test]
async fn bad_post_to_input_fails_before_anything_runs() {
    let (server, _fake) = start(100).await;
    let b = Bisect::new(&server.uri());
    // No token: a usage error naming both ways to give one; no probe, no request.
    let (code, _, err) = run({
        let mut c = b.cmd(&[]);
        c.env_remove("GITHUB_TOKEN");
        c
    })
    .await;
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("GITHUB_TOKEN") && err.contains("--token-file"),
        "{err}"
    );
    // A malformed issue.
    let (code, _, err) = run(b.cmd_to("not-an-issue", &[])).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("OWNER/REPO#NUMBER"), "{err}");
    // --resume-from-issue needs --post-to.
    let mut c = bin();
    c.args(["bisect", "--good", "a", "--bad", "b", "--resume-from-issue"]);
    let (code, _, err) = run(c).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--post-to"), "{err}");
    assert_eq!(b.probed().len(), 0, "a probe ran");
    assert!(github_support::requests(&server).await.is_empty());
}

#[tokio::test]
async fn a_failed_post_keeps_the_result_and_exits_3() {
    let (server, fake) = start(100).await;
    Mock::given(method("POST"))
        .and(path("/repos/o/r/issues/1/comments"))
        .respond_with(ResponseTemplate::new(403).set_body_json(
            serde_json::json!({"message": "Resource not accessible by integration"}),
        ))
        .with_priority(1)
        .mount(&server)
        .await;
    let b = Bisect::new(&server.uri());
    let mut c = b.cmd(&[]);
    c.arg("--report").arg(b.p("report.md"));
    let (code, out, err) = run(c).await;
    assert_eq!(code, 3, "{out}\n{err}");
    assert!(
        err.contains("read-only") && err.contains("not lost"),
        "{err}"
    );
    // The hint names the file --json wrote, in the command that posts it again.
    assert!(
        err.contains(&format!(
            "the JSON is in {0}; post them again with `setrows-bisect report --post --issue 'o/r#1' --api-url {1} --results {0}`",
            b.p("result.json").display(),
            server.uri()
        )),
        "{err}"
    );
    assert_eq!(b.result()["first_bad"], b.shas[23].as_str());
    assert!(std::fs::read_to_string(b.p("report.md"))
        .unwrap()
        .contains(&b.shas[23][..10]));
    assert!(fake.comments().is_empty());
}

const MATRIX: &str = r#"
[probe]
kind = "script"
script = 'test "$(cat "$SRC/state")" = good'
[launch.plain]
[params.p]
args = []
[matrix]
backend = ["hip"]
gfx = ["gfx1151"]
wave_size = [32]
launch = ["plain"]
params = ["p"]
"#;

#[tokio::test]
async fn matrix_posts_one_comment_and_edits_it() {
    let (server, fake) = start(100).await;
    let d = tempfile::tempdir().unwrap();
    let shas = history(&d.path().join("repo"), 3, 2);
    std::fs::write(d.path().join("matrix.toml"), MATRIX).unwrap();
    let matrix = |rev: &str| {
        let mut c = bin();
        c.current_dir(d.path())
            .args(["matrix", "--engine", "none", "--rev", rev])
            .args(["--post-to", "o/r#1", "--api-url", &server.uri()])
            .env("SETROWS_WORK_DIR", d.path().join("work"))
            .env("GITHUB_TOKEN", TOKEN)
            .args(["--repo", "repo"]);
        c
    };
    let (code, out, err) = run(matrix(&shas[0])).await;
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(err.contains("created results comment"), "{err}");
    let (code, out, err) = run(matrix(&shas[2])).await;
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(err.contains("updated results comment"), "{err}");
    let comments = fake.comments();
    assert_eq!(comments.len(), 1);
    let body = &comments[0].body;
    assert!(body.starts_with("<!-- setrows-bisect:matrix -->"), "{body}");
    assert!(
        body.contains("wrong_result") || body.contains("wrong result"),
        "{body}"
    );
    // The posted state is the matrix-results.json the run wrote (minus log text).
    let written: Value = serde_json::from_str(
        &std::fs::read_to_string(d.path().join("matrix-results/matrix-results.json")).unwrap(),
    )
    .unwrap();
    let mut c = bin();
    c.args(["report", "--issue", "o/r#1", "--load-state", "matrix"])
        .args(["--api-url", &server.uri()])
        .env("GITHUB_TOKEN", TOKEN);
    let (code, out, err) = run(c).await;
    assert_eq!(code, 0, "{err}");
    let state: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        state["results"][0]["cells"][0]["outcome"],
        written["cells"][0]["outcome"]
    );
    assert_eq!(state["results"][0]["revisions"], written["revisions"]);
}

/// A state block broken by a hand edit does not fail every later resumed bisection: the job says
/// so in one line, starts from its local store (probing again), and its post writes a whole
/// block, so the run after it resumes again.
#[tokio::test]
async fn a_broken_state_block_starts_fresh_and_says_so() {
    let (server, fake) = start(100).await;
    let b = Bisect::new(&server.uri());
    let (code, out, err) = run(b.cmd(&[])).await;
    assert_eq!(code, 0, "{out}\n{err}");
    let run1 = b.probed();
    {
        let mut s = fake.state.lock().unwrap();
        let c = &mut s.comments[0];
        let at = c.body.find("<!-- setrows-bisect-state:v1 ").unwrap();
        c.body = format!(
            "{}<!-- setrows-bisect-state:v1 {{\"key\": oops -->",
            &c.body[..at]
        );
    }
    std::fs::remove_dir_all(b.p("work")).unwrap();
    let (code, out, err) = run(b.cmd(&["--resume-from-issue"])).await;
    assert_eq!(code, 0, "{out}\n{err}");
    let said: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("not valid JSON"))
        .collect();
    assert_eq!(said.len(), 1, "{err}");
    assert!(said[0].contains("starting from the local store"), "{err}");
    assert_eq!(b.result()["first_bad"], b.shas[23].as_str());
    assert!(b.probed().len() > run1.len(), "nothing was probed again");
    // The post repaired the block: a fresh job resumes from it.
    std::fs::remove_dir_all(b.p("work")).unwrap();
    let probed = b.probed();
    let (code, out, err) = run(b.cmd(&["--resume-from-issue"])).await;
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(err.contains("seeded"), "{err}");
    assert_eq!(b.probed(), probed, "{err}");
}

/// Anyone who may write to the issue's repository can edit our comment. A resumed job writes
/// the state's runs into its store as if it had probed them, so only a state signed with this
/// repository's key is resumed from; an edited one is shown, and the job probes again.
#[tokio::test]
async fn only_a_state_signed_with_our_key_is_resumed_from() {
    let (server, fake) = start(100).await;
    let b = Bisect::new(&server.uri());
    let (code, out, err) = run(b.cmd(&[])).await;
    assert_eq!(code, 0, "{out}\n{err}");
    let run1 = b.probed();
    let body = fake.comments()[0].body.clone();
    assert!(
        body.contains("<!-- setrows-bisect-signature:v1 ed25519 "),
        "{body}"
    );
    assert!(
        !body.contains(STATE_KEY),
        "the private key reached the comment"
    );

    // The job that resumes (the bisect job of the workflows) holds the public key only.
    let resume = |forged: bool| {
        let mut c = b.cmd_to("", &["--resume-from-issue", "o/r#1"]);
        c.env_remove("SETROWS_STATE_SIGNING_KEY");
        if !forged {
            c.env("SETROWS_STATE_PUBLIC_KEY", STATE_PUBLIC_KEY);
        }
        c
    };
    std::fs::remove_dir_all(b.p("work")).unwrap();
    let (code, out, err) = run(resume(false)).await;
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(err.contains("seeded"), "{err}");
    assert_eq!(
        b.probed(),
        run1,
        "a signed state was not resumed from:\n{err}"
    );

    // An upstream writer turns every stored failure into a pass: the answer would move.
    {
        let mut s = fake.state.lock().unwrap();
        let c = &mut s.comments[0];
        c.body = c
            .body
            .replace("\"outcome\":\"wrong_result\"", "\"outcome\":\"pass\"");
        assert!(c.body != body, "the state holds no failure to forge");
    }
    std::fs::remove_dir_all(b.p("work")).unwrap();
    let (code, out, err) = run(resume(false)).await;
    assert_eq!(code, 0, "{out}\n{err}");
    let said: Vec<&str> = err.lines().filter(|l| l.contains("not resuming")).collect();
    assert_eq!(said.len(), 1, "{err}");
    assert!(
        said[0].contains("changed after it was signed") && said[0].contains("local store"),
        "{err}"
    );
    assert!(!err.contains("seeded"), "{err}");
    assert_eq!(b.result()["first_bad"], b.shas[23].as_str(), "{err}");
    assert!(b.probed().len() > run1.len(), "nothing was probed again");

    // Without a public key no state can be checked: the plan says so, and the run's line
    // names the variable.
    let mut plan = resume(true);
    plan.arg("--dry-run");
    let (code, out, err) = run(plan).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("SETROWS_STATE_PUBLIC_KEY is not set, so no state can be checked"),
        "{out}"
    );
    std::fs::remove_dir_all(b.p("work")).unwrap();
    let (code, out, err) = run(resume(true)).await;
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        err.lines().any(
            |l| l.contains("not resuming") && l.contains("SETROWS_STATE_PUBLIC_KEY is not set")
        ),
        "{err}"
    );

    // A key that is no key is one line before the first probe.
    let probed = b.probed();
    let mut c = resume(false);
    c.env("SETROWS_STATE_PUBLIC_KEY", "not-a-key");
    let (code, _, err) = run(c).await;
    assert_eq!(code, 2, "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("SETROWS_STATE_PUBLIC_KEY is not base64"),
        "{err}"
    );
    assert_eq!(b.probed(), probed);
}

/// A token GitHub refuses, as a run now meets it: one line, exit 2, before the first probe.
const REFUSED: &str = "ghp_REFUSED0TOKEN0the0stand0in0does0not0know";

/// The one line a refused run printed, checked for what every refusal must be: exit 2, exactly
/// one stderr line that is an error, nothing on stdout, no token of either kind in it.
fn refusal(code: i32, out: &str, err: &str) -> String {
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(out.is_empty(), "stdout: {out}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("setrows-bisect: error: "), "{err}");
    assert!(!err.contains(REFUSED) && !err.contains(TOKEN), "{err}");
    err.trim_end().to_string()
}

/// Nothing of the run exists: no probe ran (the script leaves a line per run in
/// `invocations`), no work dir (no checkout, no store, no journal), no result file.
fn nothing_ran(b: &Bisect) {
    assert!(
        !b.p("invocations").exists(),
        "a probe ran: {:?}",
        b.probed()
    );
    assert!(!b.p("work").exists(), "the work dir was made");
    assert!(!b.p("result.json").exists(), "a result was written");
}

#[tokio::test]
async fn a_token_github_refuses_stops_bisect_before_the_first_probe() {
    let (server, fake) = start(100).await;
    let b = Bisect::new(&server.uri());
    let (code, out, err) = run({
        let mut c = b.cmd(&[]);
        c.env("GITHUB_TOKEN", REFUSED);
        c
    })
    .await;
    let line = refusal(code, &out, &err);
    assert!(
        line.contains("GitHub refused the token (401 Bad credentials) for o/r#1")
            && line.contains("set GITHUB_TOKEN to a token that can comment on o/r#1")
            && line.contains("drop --post-to"),
        "{line}"
    );
    nothing_ran(&b);
    // One question was asked: the issue, with the token.
    assert_eq!(
        github_support::requests(&server).await,
        vec![("GET".to_string(), "/repos/o/r/issues/1".to_string())]
    );
    assert!(fake.comments().is_empty());

    // The same token from --token-file: the line names the file to fix, not GITHUB_TOKEN.
    let token_file = b.p("token");
    std::fs::write(&token_file, format!("{REFUSED}\n")).unwrap();
    let (code, out, err) = run({
        let mut c = b.cmd(&[]);
        c.env_remove("GITHUB_TOKEN")
            .arg("--token-file")
            .arg(&token_file);
        c
    })
    .await;
    let line = refusal(code, &out, &err);
    assert!(
        line.contains("(401 Bad credentials)")
            && line.contains(&format!("in --token-file {}", token_file.display())),
        "{line}"
    );
    nothing_ran(&b);
}

#[tokio::test]
async fn an_issue_the_token_cannot_see_or_touch_stops_bisect_before_the_first_probe() {
    let (server, _fake) = start(100).await;
    let b = Bisect::new(&server.uri());
    // 404: no such issue, or a repository the token cannot see (GitHub says the same).
    let (code, out, err) = run(b.cmd_to("o/r#2", &[])).await;
    let line = refusal(code, &out, &err);
    assert!(
        line.contains("no issue o/r#2 (404 Not Found") && line.contains("drop --post-to"),
        "{line}"
    );
    nothing_ran(&b);
    // 403: a fine-grained token without access to this repository.
    Mock::given(method("GET"))
        .and(path("/repos/o/r/issues/1"))
        .respond_with(ResponseTemplate::new(403).set_body_json(
            serde_json::json!({"message": "Resource not accessible by personal access token"}),
        ))
        .with_priority(1)
        .mount(&server)
        .await;
    let (code, out, err) = run(b.cmd(&[])).await;
    let line = refusal(code, &out, &err);
    assert!(
        line.contains("(403 Resource not accessible by personal access token)")
            && line.contains("Issues read and write"),
        "{line}"
    );
    nothing_ran(&b);
    // --resume-from-issue alone needs only to read its issue, and says so.
    let (code, out, err) = run({
        let mut c = b.cmd_to("", &["--resume-from-issue", "o/r#1"]);
        c.env("GITHUB_TOKEN", REFUSED);
        c
    })
    .await;
    let line = refusal(code, &out, &err);
    assert!(
        line.contains("a token that can read o/r#1") && line.contains("drop --resume-from-issue"),
        "{line}"
    );
    nothing_ran(&b);
}

/// The check passes a token GitHub takes, first of all requests, and the run goes on to post.
#[tokio::test]
async fn a_token_github_takes_is_checked_first_and_the_run_goes_on() {
    let (server, fake) = start(100).await;
    let b = Bisect::new(&server.uri());
    let (code, out, err) = run(b.cmd(&[])).await;
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(!err.contains("not verified"), "{err}");
    assert!(b.probed().len() >= 4, "{err}");
    assert_eq!(b.result()["first_bad"], b.shas[23].as_str());
    let asked = github_support::requests(&server).await;
    assert_eq!(
        asked.first(),
        Some(&("GET".to_string(), "/repos/o/r/issues/1".to_string())),
        "{asked:?}"
    );
    assert_eq!(
        asked
            .iter()
            .filter(|(_, p)| p == "/repos/o/r/issues/1")
            .count(),
        1,
        "checked once: {asked:?}"
    );
    assert_eq!(fake.comments().len(), 1);
    // A dry run asks GitHub nothing, not even the check.
    let before = asked.len();
    let (code, out, err) = run(b.cmd(&["--dry-run"])).await;
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(github_support::requests(&server).await.len(), before);
}

/// A check that cannot be made (nothing listens at the API address) is no refusal: the run says
/// in one line that the token is not verified and goes on; its post then fails, and the hint
/// names the file the run kept and the whole command that posts it.
#[tokio::test]
async fn an_unreachable_github_is_said_and_the_run_keeps_its_result_to_post_later() {
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let b = Bisect::new(&closed);
    // `--json -`: the JSON goes to stdout, so the hint names the work dir's copy.
    let script = format!(
        "echo \"$(cat \"$SRC/n\")\" >> '{}'; test \"$(cat \"$SRC/state\")\" = good",
        b.p("invocations").display()
    );
    let mut c = bin();
    c.arg("bisect")
        .args(["--good", &b.shas[0], "--bad", &b.shas[39]])
        .arg("--repo")
        .arg(b.p("repo"))
        .arg("--work-dir")
        .arg(b.p("work"))
        .args(["--json", "-", "--script", &script])
        .args(["--api-url", &closed, "--github-retries", "0"])
        .args(["--post-to", "o/r#1"])
        .env("GITHUB_TOKEN", TOKEN);
    let (code, out, err) = run(c).await;
    assert_eq!(code, 3, "{out}\n{err}");
    let warned: Vec<&str> = err.lines().filter(|l| l.contains("not verified")).collect();
    assert_eq!(warned.len(), 1, "{err}");
    assert!(
        warned[0].starts_with("setrows-bisect: warning:")
            && warned[0].contains("o/r#1")
            && warned[0].contains("cannot reach GitHub"),
        "{err}"
    );
    assert!(b.probed().len() >= 4, "the run did not go on: {err}");
    let result: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(result["first_bad"], b.shas[23].as_str());
    let hint = err
        .lines()
        .find(|l| l.contains("post them again with"))
        .unwrap_or_else(|| panic!("{err}"));
    let journal = b.p("work").join("journal");
    let kept = std::fs::read_dir(&journal)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".result.json"))
        .unwrap();
    assert!(
        hint.contains(&format!(
            "`setrows-bisect report --post --issue 'o/r#1' --api-url {closed} --results {}`",
            kept.display()
        )),
        "{hint}"
    );
    let saved: Value = serde_json::from_str(&std::fs::read_to_string(&kept).unwrap()).unwrap();
    assert_eq!(saved["first_bad"], result["first_bad"]);
}

#[tokio::test]
async fn a_token_github_refuses_stops_matrix_before_the_first_cell() {
    let (server, fake) = start(100).await;
    let d = tempfile::tempdir().unwrap();
    let shas = history(&d.path().join("repo"), 3, 2);
    let marker = d.path().join("ran");
    let matrix = MATRIX.replace(
        "script = 'test",
        &format!("script = 'touch {}; test", marker.display()),
    );
    std::fs::write(d.path().join("matrix.toml"), matrix).unwrap();
    let run_matrix = |token: &str| {
        let mut c = bin();
        c.current_dir(d.path())
            .args(["matrix", "--engine", "none", "--rev", &shas[0]])
            .args(["--post-to", "o/r#1", "--api-url", &server.uri()])
            .env("SETROWS_WORK_DIR", d.path().join("work"))
            .env("GITHUB_TOKEN", token)
            .args(["--repo", "repo"]);
        c
    };
    let (code, out, err) = run(run_matrix(REFUSED)).await;
    let line = refusal(code, &out, &err);
    assert!(
        line.contains("GitHub refused the token (401 Bad credentials) for o/r#1")
            && line.contains("drop --post-to"),
        "{line}"
    );
    assert!(!marker.exists(), "a cell ran");
    assert!(!d.path().join("work").exists(), "the work dir was made");
    assert!(
        !d.path().join("matrix-results").exists(),
        "results were written"
    );
    assert!(fake.comments().is_empty());
    // The token it takes: the same run goes on, its cell runs and is posted.
    let (code, out, err) = run(run_matrix(TOKEN)).await;
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(marker.exists(), "{err}");
    assert_eq!(fake.comments().len(), 1, "{err}");
}

/// A resume whose read fails for a reason that is not the user's (GitHub answers 502) loses
/// the resume, not the bisection: one warning, then the run goes on from the local store.
#[tokio::test]
async fn a_failed_resume_read_is_a_warning_and_the_bisection_goes_on() {
    let (server, _fake) = start(100).await;
    Mock::given(method("GET"))
        .and(path("/repos/o/r/issues/1/comments"))
        .respond_with(ResponseTemplate::new(502))
        .with_priority(1)
        .mount(&server)
        .await;
    let b = Bisect::new(&server.uri());
    let (code, out, err) = run(b.cmd_to(
        "",
        &["--resume-from-issue", "o/r#1", "--github-retries", "0"],
    ))
    .await;
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        err.contains("warning: could not read the bisect:")
            && err.contains("starting from the local store"),
        "{err}"
    );
    assert_eq!(b.result()["first_bad"], b.shas[23].as_str());
    assert!(!err.contains(TOKEN), "{err}");
}

/// A transferred (301) or deleted (410) issue is the user's to fix, not an infrastructure
/// error: one line, exit 2, before the first probe, saying where it went when GitHub says.
#[tokio::test]
async fn a_moved_or_deleted_issue_is_one_line_before_the_first_probe() {
    for (status, body, want) in [
        (
            301,
            serde_json::json!({"message": "Moved Permanently", "url": "https://api.github.com/repositories/42/issues/7"}),
            "has moved (301) to https://api.github.com/repositories/42/issues/7; post to the issue it moved to",
        ),
        (
            410,
            serde_json::json!({"message": "This issue was deleted"}),
            "was deleted (410); post to another issue",
        ),
    ] {
        let (server, _fake) = start(100).await;
        Mock::given(method("GET"))
            .and(path("/repos/o/r/issues/1"))
            .respond_with(ResponseTemplate::new(status).set_body_json(body))
            .with_priority(1)
            .mount(&server)
            .await;
        let b = Bisect::new(&server.uri());
        let (code, out, err) = run(b.cmd(&["--github-retries", "0"])).await;
        assert_eq!(code, 2, "{status}: {out}\n{err}");
        assert_eq!(err.trim().lines().count(), 1, "{status}: {err}");
        assert!(err.contains(want), "{status}: {err}");
        assert!(b.probed().is_empty(), "{status}: a probe ran: {err}");
    }
}

/// `--post-to` with a login that is not the one GitHub posts as: the comment is created once,
/// then the run stops in one error line naming both logins and `--comment-author`, exit 2,
/// without the "post them again" hint (posting again would add another comment).
#[tokio::test]
async fn a_comment_posted_as_another_login_stops_post_to_with_exit_2() {
    let (server, fake) = start(100).await;
    let b = Bisect::new(&server.uri());
    let (code, out, err) = run(b.cmd(&["--comment-author", "someone-else"])).await;
    assert_eq!(code, 2, "{out}\n{err}");
    let errors: Vec<&str> = err.lines().filter(|l| l.contains("error")).collect();
    assert_eq!(errors.len(), 1, "{err}");
    assert!(
        errors[0].contains(github_support::BOT)
            && errors[0].contains("someone-else")
            && errors[0].contains("--comment-author"),
        "{err}"
    );
    assert!(!err.contains("post them again"), "{err}");
    assert_eq!(fake.comments().len(), 1);
    assert_eq!(b.result()["first_bad"], b.shas[23].as_str());
}
