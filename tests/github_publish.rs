//! The publisher against a loopback stand-in for the GitHub API, through the real octocrab
//! client: create, edit in place, pagination, fork tokens, rate limits, size limit, no leaks.

mod github_support;

use github_support::{count, requests, start, BOT, TOKEN};
use serde_json::json;
use setrows_bisect::github::{body, Document, GithubError, PostAction, Publisher, Token};
use std::time::Duration;
use wiremock::matchers::{method, path};
use wiremock::{Mock, ResponseTemplate};

const ISSUE_COMMENTS: &str = "/repos/o/r/issues/1/comments";

fn publisher(uri: &str) -> Publisher {
    let token = Token::new(TOKEN, "test").unwrap();
    let mut p = Publisher::new("o/r#1".parse().unwrap(), &token, uri).unwrap();
    p.max_retries = 2;
    p.max_wait = Duration::from_secs(30);
    p
}

fn assert_no_token(text: &str) {
    assert!(!text.contains(TOKEN), "token leaked into: {text}");
    assert!(
        !text.contains("SECRET"),
        "token fragment leaked into: {text}"
    );
}

#[tokio::test]
async fn first_post_creates_then_later_runs_edit_the_same_comment() {
    let (server, fake) = start(100).await;
    fake.add("someone", "unrelated discussion");
    let p = publisher(&server.uri());
    let state = json!({"probes": [{"sha": "abc", "outcome": "gpu_fault"}]});

    let first = p
        .post_or_update("matrix", &Document::markdown("run 1"), Some(&state), None)
        .await
        .unwrap();
    assert_eq!(first.action, PostAction::Created);
    let second = p
        .post_or_update("matrix", &Document::markdown("run 2"), Some(&state), None)
        .await
        .unwrap();
    assert_eq!(second.action, PostAction::Updated);
    assert_eq!(second.comment_id, first.comment_id);
    let third = p
        .post_or_update("matrix", &Document::markdown("run 2"), Some(&state), None)
        .await
        .unwrap();
    assert_eq!(third.action, PostAction::Unchanged);

    // A different key gets its own comment.
    let other = p
        .post_or_update("bisect:x1", &Document::markdown("verdict"), None, None)
        .await
        .unwrap();
    assert_eq!(other.action, PostAction::Created);
    assert_ne!(other.comment_id, first.comment_id);

    let comments = fake.comments();
    assert_eq!(comments.len(), 3, "{comments:?}");
    let ours = comments.iter().find(|c| c.id == first.comment_id).unwrap();
    assert!(
        ours.body
            .starts_with("<!-- setrows-bisect:matrix -->\nrun 2"),
        "{}",
        ours.body
    );
    assert_eq!(count(&server, "POST", ISSUE_COMMENTS).await, 2);
    let edit_path = format!("/repos/o/r/issues/comments/{}", first.comment_id);
    assert_eq!(count(&server, "PATCH", &edit_path).await, 1);
    assert_eq!(
        count(&server, "POST", &edit_path).await,
        0,
        "edits use PATCH, GitHub's documented verb"
    );
    assert_eq!(
        count(&server, "GET", "/user").await,
        1,
        "the login is looked up once"
    );

    assert_eq!(
        p.load_state("matrix").await.unwrap().map(|l| l.state),
        Some(state)
    );
    assert_eq!(p.load_state("bisect:x1").await.unwrap(), None);
    assert_eq!(p.load_state("bisect:nope").await.unwrap(), None);
}

#[tokio::test]
async fn marker_comment_on_page_three_is_found_and_forgeries_are_ignored() {
    let (server, fake) = start(2).await;
    // A comment by someone else carrying our marker and a planted state block.
    let forged = format!(
        "{}\nfake\n{}",
        body::marker("matrix"),
        body::state_block(&json!({"planted": true}))
    );
    fake.add("mallory", &forged);
    for i in 0..3 {
        fake.add("someone", &format!("comment {i}"));
    }
    let real_state = json!({"real": 1});
    let ours = fake.add(
        BOT,
        &body::assemble(
            "matrix",
            &Document::markdown("old"),
            Some(&real_state),
            None,
        )
        .unwrap(),
    );
    fake.add("someone", "after");

    let p = publisher(&server.uri());
    assert_eq!(
        p.load_state("matrix").await.unwrap().map(|l| l.state),
        Some(real_state)
    );
    let out = p
        .post_or_update("matrix", &Document::markdown("new"), None, None)
        .await
        .unwrap();
    assert_eq!(out.action, PostAction::Updated);
    assert_eq!(out.comment_id, ours);
    let all = fake.comments();
    assert_eq!(all.len(), 6);
    assert_eq!(
        all[0].body, forged,
        "someone else's comment is never edited"
    );

    let reqs = requests(&server).await;
    let pages: Vec<&String> = reqs
        .iter()
        .filter(|(m, _)| m == "GET")
        .map(|(_, p)| p)
        .filter(|p| p.contains("/comments"))
        .collect();
    // load_state and post_or_update each walk pages 1..=3; page 3 via the Link header.
    assert_eq!(pages.len(), 6, "{pages:?}");
    assert!(
        pages
            .iter()
            .any(|p| p.starts_with("/repositories/77/issues/1/comments") && p.contains("page=3")),
        "{pages:?}"
    );
    // Every request, including the ones that followed absolute Link URLs, was authenticated.
    for r in server.received_requests().await.unwrap() {
        let auth = r
            .headers
            .get("authorization")
            .map(|v| v.to_str().unwrap().to_string());
        assert_eq!(
            auth.as_deref(),
            Some(format!("Bearer {TOKEN}").as_str()),
            "{}",
            r.url
        );
    }
}

#[tokio::test]
async fn fork_token_gets_a_specific_error_without_retries() {
    let (server, _fake) = start(100).await;
    Mock::given(method("POST"))
        .and(path(ISSUE_COMMENTS))
        .respond_with(ResponseTemplate::new(403).set_body_json(json!({
            "message": "Resource not accessible by integration",
            "documentation_url": "https://docs.github.com/rest/issues/comments#create-an-issue-comment"})))
        .with_priority(1)
        .mount(&server)
        .await;
    let p = publisher(&server.uri());
    let err = p
        .post_or_update("matrix", &Document::markdown("x"), None, None)
        .await
        .unwrap_err();
    assert!(matches!(err, GithubError::ReadOnlyToken { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.contains("Resource not accessible by integration") && msg.contains("fork"),
        "{msg}"
    );
    assert!(err.is_usage());
    assert_eq!(
        count(&server, "POST", ISSUE_COMMENTS).await,
        1,
        "a 403 without rate-limit headers is not retried"
    );
    assert_no_token(&msg);
    assert_no_token(&format!("{err:?}"));
}

#[tokio::test]
async fn secondary_rate_limit_is_waited_out_then_succeeds() {
    let (server, fake) = start(100).await;
    Mock::given(method("POST"))
        .and(path(ISSUE_COMMENTS))
        .respond_with(
            ResponseTemplate::new(403)
                .insert_header("retry-after", "1")
                .set_body_json(json!({"message": "You have exceeded a secondary rate limit."})),
        )
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    let p = publisher(&server.uri());
    let out = p
        .post_or_update("matrix", &Document::markdown("x"), None, None)
        .await
        .unwrap();
    assert_eq!(out.action, PostAction::Created);
    assert_eq!(count(&server, "POST", ISSUE_COMMENTS).await, 2);
    assert_eq!(
        fake.comments().len(),
        1,
        "the rate-limited attempt created nothing, the retry one comment"
    );
}

#[tokio::test]
async fn rate_limit_retries_are_bounded() {
    let (server, _fake) = start(100).await;
    Mock::given(method("GET"))
        .and(path(ISSUE_COMMENTS))
        .respond_with(
            ResponseTemplate::new(429)
                .insert_header("retry-after", "0")
                .set_body_json(json!({"message": "secondary rate limit"})),
        )
        .with_priority(1)
        .mount(&server)
        .await;
    let p = publisher(&server.uri()); // max_retries = 2
    let err = p.load_state("matrix").await.unwrap_err();
    assert!(
        matches!(err, GithubError::RateLimited { attempts: 3, .. }),
        "{err:?}"
    );
    assert_eq!(count(&server, "GET", ISSUE_COMMENTS).await, 3);
}

#[tokio::test]
async fn primary_rate_limit_reset_beyond_max_wait_fails_at_once() {
    let (server, _fake) = start(100).await;
    let reset = (chrono_now() + 3_600).to_string();
    Mock::given(method("GET"))
        .and(path(ISSUE_COMMENTS))
        .respond_with(
            ResponseTemplate::new(403)
                .insert_header("x-ratelimit-remaining", "0")
                .insert_header("x-ratelimit-reset", reset.as_str())
                .set_body_json(json!({"message": "API rate limit exceeded for user ID 1."})),
        )
        .with_priority(1)
        .mount(&server)
        .await;
    let p = publisher(&server.uri());
    let err = p.load_state("matrix").await.unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("primary rate limit") && msg.contains("--github-max-wait"),
        "{msg}"
    );
    assert_eq!(count(&server, "GET", ISSUE_COMMENTS).await, 1);
}

fn chrono_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

#[tokio::test]
async fn a_server_error_on_create_never_duplicates_the_comment() {
    let (server, fake) = start(100).await;
    // GitHub answers 502 but did create the comment: the retry must find it, not add another.
    let created_anyway = fake.clone();
    Mock::given(method("POST"))
        .and(path(ISSUE_COMMENTS))
        .respond_with(move |req: &wiremock::Request| {
            let v: serde_json::Value = serde_json::from_slice(&req.body).unwrap();
            created_anyway.add(BOT, v["body"].as_str().unwrap());
            ResponseTemplate::new(502).set_body_string("Bad Gateway")
        })
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    let p = publisher(&server.uri());
    let out = p
        .post_or_update("matrix", &Document::markdown("x"), None, None)
        .await
        .unwrap();
    assert_eq!(out.action, PostAction::Created);
    assert_eq!(fake.comments().len(), 1);
    assert_eq!(count(&server, "POST", ISSUE_COMMENTS).await, 1);
}

#[tokio::test]
async fn not_found_unauthorized_and_invalid_are_named() {
    let (server, _fake) = start(100).await;
    let token = Token::new(TOKEN, "test").unwrap();
    let p = Publisher::new("o/missing#1".parse().unwrap(), &token, &server.uri()).unwrap();
    let err = p.load_state("matrix").await.unwrap_err();
    assert!(matches!(err, GithubError::NotFound { .. }), "{err:?}");
    assert!(err.to_string().contains("issue o/missing#1"), "{err}");

    let wrong = Token::new("ghp_wrong_token_value", "test").unwrap();
    let p = Publisher::new("o/r#1".parse().unwrap(), &wrong, &server.uri()).unwrap();
    let err = p
        .post_or_update("matrix", &Document::markdown("x"), None, None)
        .await
        .unwrap_err();
    assert!(matches!(err, GithubError::Unauthorized { .. }), "{err:?}");
    assert!(err.to_string().contains("Bad credentials"));
    assert!(!err.to_string().contains("ghp_wrong"));

    Mock::given(method("POST"))
        .and(path(ISSUE_COMMENTS))
        .respond_with(ResponseTemplate::new(422).set_body_json(json!({
            "message": "Validation Failed", "errors": [{"field": "body", "code": "custom"}]})))
        .with_priority(1)
        .mount(&server)
        .await;
    let err = publisher(&server.uri())
        .post_or_update("matrix", &Document::markdown("x"), None, None)
        .await
        .unwrap_err();
    assert!(matches!(err, GithubError::Unprocessable { .. }), "{err:?}");
    assert!(
        err.to_string().contains("Validation Failed")
            && err.to_string().contains("\"field\":\"body\""),
        "{err}"
    );
}

#[tokio::test]
async fn oversize_reports_are_cut_under_the_limit_and_accepted() {
    let (server, fake) = start(100).await;
    let mut doc =
        Document::markdown("## Matrix\n\n| cfg | outcome |\n|---|---|\n| rocm-6.4 | gpu_fault |");
    for i in 0..3 {
        doc.push_log(
            format!("log {i}"),
            format!(
                "{}Memory access fault by GPU node-1\n",
                "noise line\n".repeat(30_000)
            ),
        );
    }
    let url = "https://github.com/o/r/actions/runs/123";
    let state = json!({"cells": 3});
    let p = publisher(&server.uri());
    p.post_or_update("matrix", &doc, Some(&state), Some(url))
        .await
        .unwrap();
    let posted = &fake.comments()[0].body;
    assert!(posted.len() <= body::MAX_BODY, "{}", posted.len());
    assert_eq!(
        posted.matches("Memory access fault by GPU node-1").count(),
        3,
        "the tail of every log survives"
    );
    assert!(posted
        .contains("full log in the [workflow artifacts](https://github.com/o/r/actions/runs/123)"));
    assert_eq!(
        p.load_state("matrix").await.unwrap().map(|l| l.state),
        Some(state)
    );
}

#[tokio::test]
async fn the_token_appears_nowhere_but_the_authorization_header() {
    let (server, fake) = start(100).await;
    let p = publisher(&server.uri());
    let dbg = format!("{p:?} {:?}", Token::new(TOKEN, "t").unwrap());
    assert_no_token(&dbg);
    // A log that happens to contain the token text is the caller's to redact; what we control
    // is that we never add it: bodies, paths and queries are free of it.
    p.post_or_update(
        "matrix",
        &Document::markdown("hello"),
        Some(&json!({"a": 1})),
        None,
    )
    .await
    .unwrap();
    for r in server.received_requests().await.unwrap() {
        assert_no_token(r.url.as_str());
        assert_no_token(&String::from_utf8_lossy(&r.body));
        for (name, v) in r.headers.iter() {
            if name.as_str() != "authorization" {
                assert_no_token(v.to_str().unwrap_or(""));
            }
        }
    }
    assert_eq!(fake.comments().len(), 1);
}

/// Why we send PATCH ourselves: octocrab 0.54's typed `update_comment` sends POST to the comment
/// URL (GitHub documents PATCH). If this starts failing, octocrab changed and the note in
/// `github::client` and docs/github.md should follow.
#[tokio::test]
async fn octocrab_typed_update_comment_sends_post() {
    let server = wiremock::MockServer::start().await;
    Mock::given(wiremock::matchers::any())
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "id": 5, "node_id": "x", "url": format!("{}/c/5", server.uri()),
            "html_url": format!("{}/c/5", server.uri()), "body": "b",
            "user": {"login": "u", "id": 1, "node_id": "n", "avatar_url": "https://a/x", "gravatar_id": "",
                     "url": "https://a/u", "html_url": "https://a/u", "followers_url": "https://a/f",
                     "following_url": "https://a/f", "gists_url": "https://a/g", "starred_url": "https://a/s",
                     "subscriptions_url": "https://a/s", "organizations_url": "https://a/o", "repos_url": "https://a/r",
                     "events_url": "https://a/e", "received_events_url": "https://a/r", "type": "User", "site_admin": false},
            "author_association": "NONE",
            "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z"})))
        .mount(&server)
        .await;
    let crab = octocrab::Octocrab::builder()
        .base_uri(server.uri())
        .unwrap()
        .build()
        .unwrap();
    let _ = crab.issues("o", "r").update_comment(5u64.into(), "b").await;
    let reqs = requests(&server).await;
    assert_eq!(
        reqs,
        vec![(
            "POST".to_string(),
            "/repos/o/r/issues/comments/5".to_string()
        )]
    );
}

fn options(
    api: &str,
    token_file: Option<std::path::PathBuf>,
) -> setrows_bisect::github::GithubOptions {
    setrows_bisect::github::GithubOptions {
        api_url: api.to_string(),
        token_file,
        comment_author: None,
        max_retries: 1,
        max_wait_s: 5,
    }
}

/// What `bisect --post-to` / `matrix --post-to` get: check before the run, post after it.
#[tokio::test]
async fn post_to_flags_check_early_and_post_bisect_json() {
    use setrows_bisect::cli::report::PostToArgs;
    let (server, fake) = start(100).await;
    let dir = tempfile::tempdir().unwrap();
    let tf = dir.path().join("token");
    std::fs::write(&tf, TOKEN).unwrap();

    let none = PostToArgs {
        post_to: None,
        github: options(&server.uri(), None),
    };
    assert!(none.check().unwrap().is_none());
    let bad = PostToArgs {
        post_to: Some("nope".into()),
        github: options(&server.uri(), Some(tf.clone())),
    };
    assert_eq!(
        setrows_bisect::error::Exit::of_error(&bad.check().unwrap_err()),
        setrows_bisect::error::Exit::Usage
    );
    let missing = PostToArgs {
        post_to: Some("o/r#1".into()),
        github: options(&server.uri(), Some(dir.path().join("absent"))),
    };
    let err = missing.check().unwrap_err().to_string();
    assert!(
        err.contains("absent") && err.contains("token file"),
        "{err}"
    );

    let args = PostToArgs {
        post_to: Some("o/r#1".into()),
        github: options(&server.uri(), Some(tf)),
    };
    let bisect = github_support::bisect_result("abcdef1234567890", "a1", "b2", "regress=error");
    let bisect = setrows_bisect::core::result::AnyResult::Bisect(Box::new(bisect));
    tokio::task::spawn_blocking(move || args.post(vec![bisect]))
        .await
        .unwrap()
        .unwrap();
    let c = fake.comments();
    assert_eq!(c.len(), 1);
    assert!(
        c[0].body.starts_with("<!-- setrows-bisect:bisect:")
            && c[0].body.contains("`abcdef1234567890`"),
        "{}",
        c[0].body
    );
}

#[tokio::test]
async fn server_errors_on_reads_are_retried_a_bounded_number_of_times() {
    let (server, _fake) = start(100).await;
    Mock::given(method("GET"))
        .and(path(ISSUE_COMMENTS))
        .respond_with(ResponseTemplate::new(503).set_body_string("upstream unavailable"))
        .with_priority(1)
        .mount(&server)
        .await;
    let mut p = publisher(&server.uri());
    p.max_retries = 1;
    let err = p.load_state("matrix").await.unwrap_err();
    assert!(
        matches!(err, GithubError::Http { status: 503, .. }),
        "{err:?}"
    );
    assert!(!err.is_usage());
    assert_eq!(count(&server, "GET", ISSUE_COMMENTS).await, 2);
}

/// The token check reads the issue: the issue GitHub shows passes; a refusal is a refusal
/// (401, 404, 403), which the command line turns into exit 2; a 5xx is retried and then no
/// refusal (the check could not be made); a 200 that is not the issue does not pass.
#[tokio::test]
async fn the_token_check_reads_the_issue_and_tells_refusals_from_failures() {
    let (server, _fake) = start(100).await;
    let p = publisher(&server.uri());
    p.check_access().await.unwrap();
    assert_eq!(
        requests(&server).await,
        vec![("GET".to_string(), "/repos/o/r/issues/1".to_string())]
    );

    let wrong = Token::new("ghp_wrong_token_value", "test").unwrap();
    let p = Publisher::new("o/r#1".parse().unwrap(), &wrong, &server.uri()).unwrap();
    let err = p.check_access().await.unwrap_err();
    assert!(matches!(err, GithubError::Unauthorized { .. }), "{err:?}");
    assert!(
        err.is_refusal() && !err.to_string().contains("ghp_wrong"),
        "{err}"
    );

    let token = Token::new(TOKEN, "test").unwrap();
    let p = Publisher::new("o/r#2".parse().unwrap(), &token, &server.uri()).unwrap();
    let err = p.check_access().await.unwrap_err();
    assert!(
        matches!(err, GithubError::NotFound { .. }) && err.is_refusal(),
        "{err:?}"
    );

    let server = wiremock::MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/repos/o/r/issues/1"))
        .respond_with(ResponseTemplate::new(502).set_body_json(json!({"message": "Bad Gateway"})))
        .mount(&server)
        .await;
    let mut p = publisher(&server.uri());
    p.max_retries = 1;
    let err = p.check_access().await.unwrap_err();
    assert!(!err.is_refusal(), "{err:?}");
    assert_eq!(requests(&server).await.len(), 2, "a 5xx is retried");

    let server = wiremock::MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/repos/o/r/issues/1"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"number": 7})))
        .mount(&server)
        .await;
    let err = publisher(&server.uri()).check_access().await.unwrap_err();
    assert!(matches!(err, GithubError::BadResponse { .. }), "{err:?}");
}
