//! `setrows-bisect report` end to end: the real binary, real files, a loopback fake GitHub.

mod github_support;

use github_support::{bin, count, run, start, STATE_KEY, TOKEN};
use serde_json::json;
use std::path::Path;
use wiremock::matchers::{method, path};
use wiremock::{Mock, ResponseTemplate};

fn write(dir: &Path, name: &str, v: serde_json::Value) -> String {
    let p = dir.join(name);
    std::fs::write(&p, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    p.display().to_string()
}

/// Two matrix files (one per fan-out job) and a bisection, as the writers build them.
fn results(dir: &Path) -> Vec<String> {
    let m1 = github_support::matrix_result(&[("rocm-6.4.1-wave32", "gpu_fault")]);
    let m2 = github_support::matrix_result(&[("rocm-7.0.2-wave32", "pass")]);
    let b = github_support::bisect_result(CULPRIT, "1111111", "2222222", "regress=crash");
    vec![
        write(dir, "m1.json", serde_json::to_value(m1).unwrap()),
        write(dir, "m2.json", serde_json::to_value(m2).unwrap()),
        write(dir, "b.json", serde_json::to_value(b).unwrap()),
    ]
}

const CULPRIT: &str = "0123456789abcdef0123456789abcdef01234567";

fn bisect_key() -> String {
    setrows_bisect::report::bisect_key("1111111", "2222222", "regress=crash", None)
}

#[tokio::test]
async fn report_posts_then_edits_and_writes_summary_and_junit() {
    let (server, fake) = start(100).await;
    let dir = tempfile::tempdir().unwrap();
    let files = results(dir.path());
    let summary = dir.path().join("step-summary.md");
    let junit = dir.path().join("junit.xml");
    let report = |extra: &[&str]| {
        let mut c = bin();
        c.args([
            "report",
            "--issue",
            "o/r#1",
            "--post",
            "--api-url",
            &server.uri(),
            "--junit",
        ])
        .arg(&junit)
        .arg("--results")
        .args(&files)
        .args(extra)
        .env("GITHUB_TOKEN", TOKEN)
        .env("GITHUB_STEP_SUMMARY", &summary)
        .env("GITHUB_SERVER_URL", "https://github.com")
        .env("GITHUB_REPOSITORY", "o/r")
        .env("GITHUB_RUN_ID", "4242");
        c
    };
    let (code, out, err) = run(report(&[])).await;
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(out.matches("created comment").count(), 2, "{out}");
    assert!(
        out.contains("(matrix)") && out.contains(&format!("({})", bisect_key())),
        "{out}"
    );
    let comments = fake.comments();
    assert_eq!(comments.len(), 2);
    let matrix = comments
        .iter()
        .find(|c| c.body.starts_with("<!-- setrows-bisect:matrix -->"))
        .unwrap();
    assert!(matrix.body.contains("**2 cell(s):**"), "{}", matrix.body);
    assert!(matrix
        .body
        .contains("[this workflow run](https://github.com/o/r/actions/runs/4242)"));
    let visible = setrows_bisect::report::escape::outside_code(&matrix.body);
    assert!(
        !visible.contains("@oncall") && !visible.contains('\u{200B}'),
        "mention must sit in code: {}",
        matrix.body
    );
    assert!(matrix.body.contains("<!-- setrows-bisect-state:v1 "));
    let bisect = comments
        .iter()
        .find(|c| c.body.contains(&format!("setrows-bisect:{}", bisect_key())))
        .unwrap();
    assert!(
        bisect
            .body
            .contains(&format!("**First bad commit:** `{}`", &CULPRIT[..12])),
        "{}",
        bisect.body
    );

    let step = std::fs::read_to_string(&summary).unwrap();
    assert!(step.contains("configuration matrix") && step.contains("First bad commit"));
    assert!(
        !step.contains("setrows-bisect-state"),
        "the step summary carries no hidden state"
    );
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(
        xml.contains(
            "<testsuite name=\"matrix\" tests=\"2\" skipped=\"0\" errors=\"0\" failures=\"1\""
        ),
        "{xml}"
    );
    // the expected new-behaviour probe of the found bisection is not a failure
    assert!(
        xml.contains(
            "<testsuites name=\"setrows-bisect\" tests=\"4\" skipped=\"0\" failures=\"1\""
        ),
        "{xml}"
    );

    // Second run: same results, same comments, nothing sent but the lookups.
    let (code, out, _) = run(report(&[])).await;
    assert_eq!(code, 0);
    assert_eq!(out.matches("unchanged comment").count(), 2, "{out}");
    assert_eq!(fake.comments().len(), 2);
    assert_eq!(
        count(&server, "POST", "/repos/o/r/issues/1/comments").await,
        2
    );

    // The state block reads back for a stateless job.
    let mut c = bin();
    c.args([
        "report",
        "--issue",
        "o/r#1",
        "--api-url",
        &server.uri(),
        "--load-state",
        &bisect_key(),
    ])
    .env("GITHUB_TOKEN", TOKEN);
    let (code, out, err) = run(c).await;
    assert_eq!(code, 0, "{err}");
    let state: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(state["results"][0]["probes"][0]["outcome"], "gpu_fault");
}

#[tokio::test]
async fn dry_run_prints_the_body_and_needs_no_token_or_server() {
    let dir = tempfile::tempdir().unwrap();
    let files = results(dir.path());
    let mut c = bin();
    c.args(["report", "--issue", "o/r#1", "--results"])
        .args(&files);
    let (code, out, err) = run(c).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("<!-- setrows-bisect:matrix -->"), "{out}");
    assert!(out.contains(&format!("<!-- setrows-bisect:{} -->", bisect_key())));
    let visible = setrows_bisect::report::escape::outside_code(&out);
    assert!(
        !visible.contains("<script>") && !visible.contains("@oncall"),
        "signatures sit in code spans:\n{out}"
    );
    assert!(
        out.contains("`Memory access fault by GPU node-1 @oncall <script>`"),
        "{out}"
    );
}

#[tokio::test]
async fn fork_token_and_missing_token_fail_with_usage_errors() {
    let (server, _fake) = start(100).await;
    Mock::given(method("POST"))
        .and(path("/repos/o/r/issues/1/comments"))
        .respond_with(
            ResponseTemplate::new(403)
                .set_body_json(json!({"message": "Resource not accessible by integration"})),
        )
        .with_priority(1)
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let files = results(dir.path());
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    let mut c = bin();
    c.args([
        "report",
        "--issue",
        "o/r#1",
        "--post",
        "--api-url",
        &server.uri(),
        "--token-file",
    ])
    .arg(&token_file)
    .arg("--results")
    .arg(&files[0]);
    let (code, out, err) = run(c).await;
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(
        err.contains("Resource not accessible by integration") && err.contains("fork"),
        "{err}"
    );

    let mut c = bin();
    c.args([
        "report",
        "--issue",
        "o/r#1",
        "--post",
        "--api-url",
        &server.uri(),
        "--results",
    ])
    .arg(&files[0]);
    let (code, _, err) = run(c).await;
    assert_eq!(code, 2);
    assert!(
        err.contains("GITHUB_TOKEN") && err.contains("--token-file"),
        "{err}"
    );

    let mut c = bin();
    c.args(["report", "--issue", "not-an-issue", "--post", "--results"])
        .arg(&files[0])
        .env("GITHUB_TOKEN", TOKEN);
    let (code, _, err) = run(c).await;
    assert_eq!(code, 2);
    assert!(err.contains("OWNER/REPO#NUMBER"), "{err}");

    let bad = write(dir.path(), "bad.json", json!({"unrelated": true}));
    let mut c = bin();
    c.args(["report", "--results", &bad]);
    let (code, _, err) = run(c).await;
    assert_eq!(code, 2);
    assert!(
        err.contains("bad.json") && err.contains("no \"schema\" field"),
        "{err}"
    );
}

/// A file of another schema kind, version or no schema at all is refused with one line and
/// exit 2, before anything renders (it used to render as "Inconclusive ... ?" and exit 0).
#[tokio::test]
async fn unknown_schemas_are_refused_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = serde_json::to_value(github_support::bisect_result(
        CULPRIT,
        "1",
        "2",
        "regress=error",
    ))
    .unwrap();
    for (name, schema) in [
        ("future.json", json!("setrows-bisect/bisect/2")),
        ("other.json", json!("setrows-bisect/coverage/1")),
        ("number.json", json!(1)),
    ] {
        b["schema"] = schema;
        let f = write(dir.path(), name, b.clone());
        let mut c = bin();
        c.args(["report", "--results", &f]);
        let (code, out, err) = run(c).await;
        assert_eq!(code, 2, "{name}: {out}{err}");
        assert!(out.is_empty(), "{name}: nothing renders: {out}");
        assert_eq!(err.trim().lines().count(), 1, "{name}: {err}");
        assert!(
            err.contains(name) && err.contains("is not one this setrows-bisect reads"),
            "{err}"
        );
    }
    // An old-style bisect-config file (no schema) is refused, not rendered as a bisection.
    let old = write(
        dir.path(),
        "bisect-config.json",
        json!({"axis": "rocm", "ladder": ["6.4", "7.0"], "first_failing": "7.0", "probes": []}),
    );
    let mut c = bin();
    c.args(["report", "--results", &old]);
    let (code, out, err) = run(c).await;
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("bisect-config.json") && err.contains("no \"schema\" field"),
        "{err}"
    );
}

/// `report --post` of these files to `issue` on the fake: (exit code, stdout, stderr).
async fn post(api: &str, issue: &str, files: &[String]) -> (i32, String, String) {
    let mut c = bin();
    c.args([
        "report",
        "--issue",
        issue,
        "--post",
        "--api-url",
        api,
        "--results",
    ])
    .args(files)
    .env("GITHUB_TOKEN", TOKEN);
    run(c).await
}

/// The one `error:` line of a failed run.
fn error_line(err: &str) -> String {
    let lines: Vec<&str> = err.lines().filter(|l| l.contains("error:")).collect();
    assert_eq!(lines.len(), 1, "{err}");
    lines[0].to_string()
}

/// A locked issue takes no comment from a token without write access there (GitHub's 403
/// "Unable to create comment because issue is locked."): no permission fixes that, so the
/// line says to unlock it or post elsewhere, not to grant Issues write.
#[tokio::test]
async fn a_locked_issue_says_unlock_or_post_elsewhere() {
    let (server, fake) = start(100).await;
    let dir = tempfile::tempdir().unwrap();
    let files = results(dir.path());
    fake.lock();
    let (code, _, err) = post(&server.uri(), "o/r#1", &files).await;
    assert_eq!(code, 2, "{err}");
    let line = error_line(&err);
    assert!(
        line.contains("locked") && line.contains("unlock") && line.contains("another issue"),
        "{line}"
    );
    assert!(!line.contains("needs write access"), "{line}");
    assert!(fake.comments().is_empty());
}

/// An issue that does not exist (or the token cannot see) is named in one line, by the token
/// check before anything is posted or written.
#[tokio::test]
async fn a_missing_issue_is_named_in_one_line() {
    let (server, _fake) = start(100).await;
    let dir = tempfile::tempdir().unwrap();
    let files = results(dir.path());
    let (code, _, err) = post(&server.uri(), "o/r#9", &files).await;
    assert_eq!(code, 2, "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    let line = error_line(&err);
    assert!(
        line.contains("404") && line.contains("no issue o/r#9") && line.contains("drop --post"),
        "{line}"
    );
    assert_eq!(
        github_support::requests(&server).await,
        vec![("GET".to_string(), "/repos/o/r/issues/9".to_string())]
    );
}

/// A token GitHub refuses is one line and exit 2 before anything is written: not the JUnit
/// file, not the step summary, no comment read or posted.
#[tokio::test]
async fn a_refused_token_writes_nothing_and_says_so_in_one_line() {
    let (server, fake) = start(100).await;
    let dir = tempfile::tempdir().unwrap();
    let files = results(dir.path());
    let (summary, junit) = (dir.path().join("summary.md"), dir.path().join("junit.xml"));
    let refused = "ghp_REFUSED0TOKEN0the0stand0in0does0not0know";
    let mut c = bin();
    c.args([
        "report",
        "--issue",
        "o/r#1",
        "--post",
        "--api-url",
        &server.uri(),
    ])
    .arg("--junit")
    .arg(&junit)
    .arg("--results")
    .args(&files)
    .env("GITHUB_TOKEN", refused)
    .env("GITHUB_STEP_SUMMARY", &summary);
    let (code, out, err) = run(c).await;
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(out.is_empty(), "{out}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(!err.contains(refused), "{err}");
    assert!(
        err.starts_with("setrows-bisect: error: GitHub refused the token (401 Bad credentials) for o/r#1: set GITHUB_TOKEN to a token that can comment on o/r#1, or drop --post"),
        "{err}"
    );
    assert!(!junit.exists() && !summary.exists());
    assert_eq!(
        github_support::requests(&server).await,
        vec![("GET".to_string(), "/repos/o/r/issues/1".to_string())]
    );
    assert!(fake.comments().is_empty());
}

/// A comment deleted between our list and our edit (the edit answers 404) is looked for again
/// and, being gone, created anew: the results are posted, not lost to a race.
#[tokio::test]
async fn a_comment_deleted_before_the_edit_is_listed_again_and_recreated() {
    let (server, fake) = start(100).await;
    let dir = tempfile::tempdir().unwrap();
    let files = results(dir.path());
    let (code, _, err) = post(&server.uri(), "o/r#1", &files).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(fake.comments().len(), 2);
    // New results, so both comments are edited; the first edit finds its comment deleted.
    let m = github_support::matrix_result(&[("rocm-6.4.1-wave32", "pass")]);
    let files2 = vec![
        write(dir.path(), "m3.json", serde_json::to_value(m).unwrap()),
        files[2].clone(),
    ];
    fake.vanish_before_edit(1);
    let (code, out, err) = post(&server.uri(), "o/r#1", &files2).await;
    assert_eq!(code, 0, "{out}\n{err}");
    let comments = fake.comments();
    assert_eq!(comments.len(), 2, "{comments:?}");
    let matrix = comments
        .iter()
        .find(|c| c.body.starts_with("<!-- setrows-bisect:matrix -->"))
        .expect("the matrix comment was posted again");
    assert!(!matrix.body.contains("gpu_fault"), "{}", matrix.body);
    // GitHub's DELETE, as a person would do it: the next post creates the comment again.
    let id = matrix.id;
    let addr = server.address().to_string();
    let status = tokio::task::spawn_blocking(move || {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(&addr).unwrap();
        write!(
            s,
            "DELETE /repos/o/r/issues/comments/{id} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut answer = String::new();
        s.read_to_string(&mut answer).unwrap();
        answer.lines().next().unwrap_or("").to_string()
    })
    .await
    .unwrap();
    assert!(status.starts_with("HTTP/1.1 204"), "{status}");
    assert_eq!(fake.comments().len(), 1);
}

/// A bisection result in configuration `id`.
fn in_configuration(id: &str) -> serde_json::Value {
    let mut b = github_support::bisect_result(CULPRIT, "1111111", "2222222", "regress=crash");
    b.configuration = Some(setrows_bisect::core::result::ConfigurationInfo {
        id: Some(id.into()),
        label: None,
        source: "matrix.toml".into(),
        image: None,
        settings: vec![],
        overrides: vec![],
    });
    serde_json::to_value(b).unwrap()
}

/// matrix.yml starts one bisection per newly failing configuration, all over the same range:
/// each is its own question, so each gets its own comment (the key hashes the configuration),
/// while a comment an earlier version posted under the old key (no configuration) is found and
/// taken over by its own configuration only.
#[tokio::test]
async fn each_configuration_of_one_range_keeps_its_own_comment() {
    let (server, fake) = start(100).await;
    let dir = tempfile::tempdir().unwrap();
    let old_key = bisect_key();
    // An earlier version's comment under the old key, holding configuration cpu-a's verdict.
    let old_state = json!({"key": old_key, "results": [in_configuration("cpu-a")]});
    let old_body = format!(
        "<!-- setrows-bisect:{old_key} -->\nold verdict\n<!-- setrows-bisect-state:v1 {old_state} -->"
    );
    let old_id = fake.add(github_support::BOT, &old_body);
    let ids = ["cpu-a", "cpu-b", "cpu-c"];
    for id in ids {
        let f = write(dir.path(), &format!("{id}.json"), in_configuration(id));
        let (code, out, err) = post(&server.uri(), "o/r#1", &[f]).await;
        assert_eq!(code, 0, "{out}\n{err}");
    }
    let comments = fake.comments();
    assert_eq!(
        comments.len(),
        3,
        "one comment per configuration: {comments:#?}"
    );
    let keys: std::collections::BTreeSet<String> = comments
        .iter()
        .map(|c| c.body.lines().next().unwrap().to_string())
        .collect();
    assert_eq!(keys.len(), 3, "{keys:?}");
    assert!(
        !keys.contains(&format!("<!-- setrows-bisect:{old_key} -->")),
        "{keys:?}"
    );
    // cpu-a's new comment is the old one, edited; each comment names its configuration.
    let a = comments.iter().find(|c| c.id == old_id).unwrap();
    assert!(
        a.body.contains("cpu-a") && !a.body.contains("old verdict"),
        "{}",
        a.body
    );
    for (c, id) in comments.iter().zip(ids) {
        assert!(c.body.contains(id), "{id}: {}", c.body);
    }
    // The key a resumed bisect computes before it runs is the one the post used.
    for id in ids {
        let key =
            setrows_bisect::report::bisect_key("1111111", "2222222", "regress=crash", Some(id));
        assert!(
            comments.iter().any(|c| c
                .body
                .starts_with(&format!("<!-- setrows-bisect:{key} -->"))),
            "{id}: {key}"
        );
    }
}

/// An old-key comment that holds another configuration's verdict is left alone: taking it
/// over would replace that configuration's result.
#[tokio::test]
async fn an_old_key_comment_of_another_configuration_is_not_taken_over() {
    let (server, fake) = start(100).await;
    let dir = tempfile::tempdir().unwrap();
    let old_key = bisect_key();
    let old_state = json!({"key": old_key, "results": [in_configuration("cpu-b")]});
    let old_body = format!(
        "<!-- setrows-bisect:{old_key} -->\nB's verdict\n<!-- setrows-bisect-state:v1 {old_state} -->"
    );
    fake.add(github_support::BOT, &old_body);
    let f = write(dir.path(), "a.json", in_configuration("cpu-a"));
    let (code, out, err) = post(&server.uri(), "o/r#1", &[f]).await;
    assert_eq!(code, 0, "{out}\n{err}");
    let comments = fake.comments();
    assert_eq!(comments.len(), 2, "{comments:#?}");
    assert_eq!(comments[0].body, old_body);
}

/// Only when our comment keeps vanishing between list and edit (someone deleting each one as
/// it is found) does the post give up, after the bounded retries, in one line saying so.
#[tokio::test]
async fn comments_that_keep_vanishing_give_up_in_one_line() {
    let (server, fake) = start(100).await;
    let dir = tempfile::tempdir().unwrap();
    let m = github_support::matrix_result(&[("rocm-6.4.1-wave32", "pass")]);
    let f = write(dir.path(), "m.json", serde_json::to_value(m).unwrap());
    for _ in 0..8 {
        fake.add(github_support::BOT, "<!-- setrows-bisect:matrix -->\nold");
    }
    fake.vanish_before_edit(8);
    let (code, _, err) = post(&server.uri(), "o/r#1", &[f]).await;
    assert_eq!(code, 3, "{err}");
    let line = error_line(&err);
    assert!(line.contains("deleted while we edited it"), "{line}");
}

/// A report that signs keeps the last results that ran only when they carry its signature:
/// else an upstream writer's edit of the comment would come back signed, and a later resume
/// would trust it.
#[tokio::test]
async fn a_signing_report_keeps_only_results_it_signed() {
    let (server, fake) = start(100).await;
    let dir = tempfile::tempdir().unwrap();
    let ran = github_support::matrix_result(&[("rocm-6.4.1-wave32", "gpu_fault")]);
    let ran = write(dir.path(), "ran.json", serde_json::to_value(ran).unwrap());
    let plan = write(
        dir.path(),
        "plan.json",
        json!({"include": [{"name": "hip-6.4.1", "ids": "rocm-6.4.1-wave32"}]}),
    );
    let report = |args: &[&str]| {
        let mut c = bin();
        c.current_dir(dir.path())
            .args(["report", "--issue", "o/r#1", "--post", "--api-url"])
            .arg(server.uri())
            .args(args)
            .env("GITHUB_TOKEN", TOKEN)
            .env("SETROWS_STATE_SIGNING_KEY", STATE_KEY);
        c
    };
    let (code, _, err) = run(report(&["--results", &ran])).await;
    assert_eq!(code, 0, "{err}");
    let signed = fake.comments()[0].body.clone();
    assert!(signed.contains("setrows-bisect-signature:v1"), "{signed}");

    // Its own signed results are kept on a night with nothing fresh.
    let (code, _, err) = run(report(&["--expect-legs", &plan])).await;
    assert_eq!(code, 3, "{err}");
    let body = fake.comments()[0].body.clone();
    assert!(body.contains("Last results that ran"), "{body}");

    // An edit of the state (the fault turned into a pass) is not kept, and not signed again.
    {
        let mut s = fake.state.lock().unwrap();
        let c = &mut s.comments[0];
        c.body = c.body.replace("\"gpu_fault\"", "\"pass\"");
    }
    let (code, _, err) = run(report(&["--expect-legs", &plan])).await;
    assert_eq!(code, 3, "{err}");
    let body = fake.comments()[0].body.clone();
    assert!(!body.contains("Last results that ran"), "{body}");
    assert!(
        !body.contains("\"pass\""),
        "the edit was signed again:\n{body}"
    );
}

/// A night with every leg lost (`--expect-legs`, no results) keeps the last results that ran:
/// folded under the rows that say nothing is fresh, and as the comment's state, so a second
/// night offline still shows them. The report fails (exit 3) both nights.
#[tokio::test]
async fn a_night_with_no_fresh_results_keeps_the_last_results_that_ran() {
    let (server, fake) = start(100).await;
    let dir = tempfile::tempdir().unwrap();
    let ran = github_support::matrix_result(&[("rocm-6.4.1-wave32", "gpu_fault")]);
    let ran = write(dir.path(), "ran.json", serde_json::to_value(ran).unwrap());
    let (code, _, err) = post(&server.uri(), "o/r#1", &[ran]).await;
    assert_eq!(code, 0, "{err}");
    let plan = write(
        dir.path(),
        "plan.json",
        json!({"include": [{"name": "hip-6.4.1", "ids": "rocm-6.4.1-wave32"}]}),
    );
    let offline = || {
        let mut c = bin();
        c.current_dir(dir.path())
            .args(["report", "--issue", "o/r#1", "--post", "--api-url"])
            .arg(server.uri())
            .args(["--expect-legs", &plan])
            .env("GITHUB_TOKEN", TOKEN);
        c
    };
    for night in 1..=2 {
        let (code, _, err) = run(offline()).await;
        assert_eq!(code, 3, "night {night}: {err}");
        let comments = fake.comments();
        assert_eq!(comments.len(), 1, "night {night}: one living comment");
        let body = &comments[0].body;
        let (fresh, kept) = body
            .split_once("Last results that ran")
            .unwrap_or_else(|| panic!("night {night}: nothing kept:\n{body}"));
        assert!(fresh.contains("No fresh matrix results"), "{body}");
        assert!(
            fresh.contains("no results: runner offline or lost"),
            "{body}"
        );
        assert!(!fresh.contains("gpu_fault"), "{body}");
        assert!(
            kept.contains("gpu_fault"),
            "night {night}: the last results are gone:\n{body}"
        );
        eprintln!("--- night {night} ---\n{body}");
    }
    let mut c = bin();
    c.args(["report", "--issue", "o/r#1", "--api-url"])
        .arg(server.uri())
        .args(["--load-state", "matrix"])
        .env("GITHUB_TOKEN", TOKEN);
    let (code, out, err) = run(c).await;
    assert_eq!(code, 0, "{err}");
    let state: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        state["results"][0]["cells"][0]["outcome"], "gpu_fault",
        "{state:#}"
    );
}
