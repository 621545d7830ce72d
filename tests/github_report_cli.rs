//! `setrows-bisect report` end to end: the real binary, real files, a loopback fake GitHub.

mod github_support;

use github_support::{bin, count, run, start, TOKEN};
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
    setrows_bisect::report::bisect_key("1111111", "2222222", "regress=crash")
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
