//! A small stateful stand-in for the GitHub issue-comments API on a loopback wiremock server:
//! comments live in memory, listing paginates with real `Link` headers, create and edit change
//! them. Tests drive the real octocrab client against it and inspect what was sent.
//!
//! GitHub's answers it gives as GitHub does: issue 1 of o/r exists (`GET` of it answers the
//! issue) and any other is 404; a
//! locked issue refuses comments and edits with GitHub's 403 message; `DELETE` of a comment;
//! bodies over 65,536 characters are 422; and `vanish_before_edit` deletes the comment an
//! edit targets just before the edit arrives (someone deleting it between our list and edit).
#![allow(dead_code)]

use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use wiremock::matchers::any;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

pub const TOKEN: &str = "ghp_TEST0SECRET0TOKEN0do0not0print0me";
pub const BOT: &str = "setrows-bot";
/// The state signing pair the tests post and resume with, made as docs/github.md says:
/// `openssl genpkey -algorithm ed25519 -outform DER | base64 -w0`, and its
/// `openssl pkey -inform DER -pubout -outform DER | base64 -w0`.
#[allow(dead_code)]
pub const STATE_KEY: &str = "MC4CAQAwBQYDK2VwBCIEIGe06br3CGnohBF7vnMN0lzfvnIGDEJD7HORph95yInf";
#[allow(dead_code)]
pub const STATE_PUBLIC_KEY: &str = "MCowBQYDK2VwAyEAx4/9nk49PMQaRGIK7olnCsN0wqQypZjb2KDrHaN/+qI=";

#[derive(Clone, Debug)]
pub struct Comment {
    pub id: u64,
    pub login: String,
    pub body: String,
}

#[derive(Default)]
pub struct State {
    pub comments: Vec<Comment>,
    pub next_id: u64,
    pub locked: bool,
    /// So many of the next edits find their comment deleted first (404).
    pub vanish_before_edit: u32,
}

/// GitHub's answer to a comment on a locked issue by someone without write access.
pub const LOCKED: &str = "Unable to create comment because issue is locked.";

#[derive(Clone)]
pub struct FakeGithub {
    pub state: Arc<Mutex<State>>,
    /// Comments per page regardless of `per_page` (GitHub caps it too), to force pagination.
    pub page_size: usize,
    pub base: String,
}

impl FakeGithub {
    pub fn comments(&self) -> Vec<Comment> {
        self.state.lock().unwrap().comments.clone()
    }

    pub fn add(&self, login: &str, body: &str) -> u64 {
        let mut s = self.state.lock().unwrap();
        s.next_id += 1;
        let id = 1000 + s.next_id;
        s.comments.push(Comment {
            id,
            login: login.into(),
            body: body.into(),
        });
        id
    }

    pub fn lock(&self) {
        self.state.lock().unwrap().locked = true;
    }

    pub fn vanish_before_edit(&self, times: u32) {
        self.state.lock().unwrap().vanish_before_edit = times;
    }

    fn json(c: &Comment, base: &str) -> Value {
        json!({"id": c.id, "body": c.body, "user": {"login": c.login, "type": "User"},
               "html_url": format!("{base}/o/r/issues/1#issuecomment-{}", c.id)})
    }
}

fn too_long() -> ResponseTemplate {
    ResponseTemplate::new(422).set_body_json(json!({
        "message": "Validation Failed",
        "errors": [{"resource": "IssueComment", "code": "custom", "field": "body",
                    "message": "body is too long (maximum is 65536 characters)"}]}))
}

fn locked() -> ResponseTemplate {
    ResponseTemplate::new(403).set_body_json(json!({"message": LOCKED,
        "documentation_url": "https://docs.github.com/rest/issues/comments#create-an-issue-comment"}))
}

fn query(req: &Request, name: &str) -> Option<String> {
    req.url
        .query_pairs()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.to_string())
}

impl Respond for FakeGithub {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let auth = req
            .headers
            .get("authorization")
            .and_then(|v| v.to_str().ok());
        if auth != Some(&format!("Bearer {TOKEN}")) {
            return ResponseTemplate::new(401).set_body_json(json!({"message": "Bad credentials"}));
        }
        let path = req.url.path().to_string();
        let method = req.method.as_str().to_string();
        let mut s = self.state.lock().unwrap();
        match (method.as_str(), path.as_str()) {
            ("GET", "/user") => ResponseTemplate::new(200).set_body_json(json!({"login": BOT})),
            // The issue itself: what a posting command reads to check its token first.
            ("GET", "/repos/o/r/issues/1") => ResponseTemplate::new(200).set_body_json(json!({
                "number": 1, "title": "set_rows fault", "state": "open", "locked": s.locked,
                "html_url": format!("{}/o/r/issues/1", self.base)})),
            ("GET", "/repos/o/r/issues/1/comments")
            | ("GET", "/repositories/77/issues/1/comments") => {
                let page: usize = query(req, "page").and_then(|p| p.parse().ok()).unwrap_or(1);
                let pages = s.comments.len().div_ceil(self.page_size).max(1);
                let items: Vec<Value> = s
                    .comments
                    .iter()
                    .skip((page - 1) * self.page_size)
                    .take(self.page_size)
                    .map(|c| Self::json(c, &self.base))
                    .collect();
                let mut t = ResponseTemplate::new(200).set_body_json(Value::Array(items));
                if page < pages {
                    // Like GitHub: absolute links, by repository id.
                    let link = format!(
                        "<{b}/repositories/77/issues/1/comments?per_page=100&page={n}>; rel=\"next\", <{b}/repositories/77/issues/1/comments?per_page=100&page={pages}>; rel=\"last\"",
                        b = self.base,
                        n = page + 1
                    );
                    t = t.insert_header("link", link.as_str());
                }
                t
            }
            ("POST", "/repos/o/r/issues/1/comments") => {
                let v: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
                let Some(body) = v["body"].as_str() else {
                    return ResponseTemplate::new(422)
                        .set_body_json(json!({"message": "Validation Failed"}));
                };
                if body.chars().count() > 65_536 {
                    return too_long();
                }
                if s.locked {
                    return locked();
                }
                s.next_id += 1;
                let c = Comment {
                    id: 1000 + s.next_id,
                    login: BOT.into(),
                    body: body.into(),
                };
                s.comments.push(c.clone());
                ResponseTemplate::new(201).set_body_json(Self::json(&c, &self.base))
            }
            ("PATCH", p) if p.starts_with("/repos/o/r/issues/comments/") => {
                let id: u64 = p
                    .rsplit('/')
                    .next()
                    .and_then(|x| x.parse().ok())
                    .unwrap_or(0);
                let v: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
                let body = v["body"].as_str().unwrap_or("").to_string();
                if body.chars().count() > 65_536 {
                    return too_long();
                }
                if s.vanish_before_edit > 0 {
                    s.vanish_before_edit -= 1;
                    s.comments.retain(|c| c.id != id);
                }
                if s.locked && s.comments.iter().any(|c| c.id == id) {
                    return locked();
                }
                match s.comments.iter_mut().find(|c| c.id == id) {
                    Some(c) if c.login == BOT => {
                        c.body = body;
                        let c = c.clone();
                        ResponseTemplate::new(200).set_body_json(Self::json(&c, &self.base))
                    }
                    Some(_) => ResponseTemplate::new(403)
                        .set_body_json(json!({"message": "Must have admin rights to Repository."})),
                    None => {
                        ResponseTemplate::new(404).set_body_json(json!({"message": "Not Found"}))
                    }
                }
            }
            ("DELETE", p) if p.starts_with("/repos/o/r/issues/comments/") => {
                let id: u64 = p
                    .rsplit('/')
                    .next()
                    .and_then(|x| x.parse().ok())
                    .unwrap_or(0);
                let before = s.comments.len();
                s.comments.retain(|c| c.id != id);
                if s.comments.len() < before {
                    ResponseTemplate::new(204)
                } else {
                    ResponseTemplate::new(404).set_body_json(json!({"message": "Not Found"}))
                }
            }
            // Any other issue does not exist (GitHub says 404 for a missing and an invisible one).
            _ => ResponseTemplate::new(404).set_body_json(json!({"message": "Not Found",
                "documentation_url": "https://docs.github.com/rest/issues/comments"})),
        }
    }
}

/// Starts the server with the fake mounted at the lowest priority, so a test can put
/// scripted failures (`with_priority(1)`) in front of it.
pub async fn start(page_size: usize) -> (MockServer, FakeGithub) {
    let server = MockServer::start().await;
    let fake = FakeGithub {
        state: Arc::new(Mutex::new(State::default())),
        page_size,
        base: server.uri(),
    };
    Mock::given(any())
        .respond_with(fake.clone())
        .with_priority(10)
        .mount(&server)
        .await;
    (server, fake)
}

/// All requests the server saw, as (method, path?query).
pub async fn requests(server: &MockServer) -> Vec<(String, String)> {
    server
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .map(|r| {
            let q = r.url.query().map(|q| format!("?{q}")).unwrap_or_default();
            (r.method.to_string(), format!("{}{q}", r.url.path()))
        })
        .collect()
}

pub async fn count(server: &MockServer, method: &str, path: &str) -> usize {
    requests(server)
        .await
        .iter()
        .filter(|(m, p)| m == method && p.split('?').next() == Some(path))
        .count()
}

/// The real binary with no GitHub/Actions environment of the machine running the tests leaking in.
#[allow(dead_code)]
pub fn bin() -> assert_cmd::Command {
    let mut c = assert_cmd::Command::cargo_bin("setrows-bisect").unwrap();
    for k in [
        "GITHUB_TOKEN",
        "GITHUB_ACTIONS",
        "GITHUB_STEP_SUMMARY",
        "GITHUB_SERVER_URL",
        "GITHUB_REPOSITORY",
        "GITHUB_RUN_ID",
        "GITHUB_API_URL",
        "SETROWS_WORK_DIR",
    ] {
        c.env_remove(k);
    }
    c
}

/// Runs the binary off the async runtime (the fake server lives on it); the token must appear
/// in neither stream.
#[allow(dead_code)]
pub async fn run(mut c: assert_cmd::Command) -> (i32, String, String) {
    let out = tokio::task::spawn_blocking(move || c.output().unwrap())
        .await
        .unwrap();
    let (so, se) = (
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    );
    assert!(
        !so.contains(TOKEN) && !se.contains(TOKEN),
        "token leaked:\n{so}\n{se}"
    );
    (out.status.code().unwrap_or(-1), so, se)
}

/// A bisect result document as `bisect --json` writes it (schema 1), built from the typed
/// structs so the tests cannot drift from the writers.
pub fn bisect_result(
    first_bad: &str,
    good: &str,
    bad: &str,
    predicate: &str,
) -> setrows_bisect::core::result::BisectResult {
    use setrows_bisect::core::outcome::{Outcome, Verdict};
    use setrows_bisect::core::result::*;
    BisectResult {
        schema: Kind::Bisect.tag(),
        first_bad: Some(first_bad.into()),
        term: "first bad commit".into(),
        conclusion: Conclusion::Found { index: 1 },
        exit_code: 0,
        candidates: vec![first_bad.into()],
        candidate_classes: vec![],
        range: BisectRange {
            good: good.into(),
            bad: bad.into(),
            first_parent: true,
            path: None,
            commits: 12,
            candidates: 12,
        },
        steps: 4,
        executed: 1,
        probes: vec![BisectProbe {
            sha: first_bad.into(),
            outcome: Outcome::GpuFault,
            verdict: Verdict::New,
            duration_s: 3.0,
            log: "/tmp/x.log".into(),
            signature: Some("Memory access fault by GPU node-1 @oncall <script>".into()),
            cached: false,
            candidate: None,
            ccache: None,
            reused_from: None,
        }],
        predicate: predicate.into(),
        policy: "single run".into(),
        elapsed_s: 30.0,
        answer_s: None,
        commits: vec![],
        reproduce: None,
        flaky: None,
        validation: None,
        store_runs: None,
        configuration: None,
        budget: None,
        grouping: None,
        reproducer: None,
        endpoint: None,
        backend_ops: None,
        applied: Vec::new(),
        invocation: Default::default(),
    }
}

/// A matrix result document with one cell per `(config, outcome)`.
pub fn matrix_result(cells: &[(&str, &str)]) -> setrows_bisect::core::result::MatrixResults {
    use setrows_bisect::core::result::*;
    MatrixResults {
        schema: Kind::Matrix.tag(),
        matrix: "matrix.toml".into(),
        engine: "podman".into(),
        revisions: vec![],
        configs: vec![],
        cells: cells
            .iter()
            .map(|(config, outcome)| Cell {
                config: config.to_string(),
                rev: "master".into(),
                sha: "53859c2aaaaaaaaa".into(),
                outcome: serde_json::from_value(json!(outcome)).unwrap(),
                signature: (*outcome != "pass")
                    .then(|| "Memory access fault by GPU node-1 @oncall <script>".into()),
                duration_s: 41.5,
                build_s: 40.0,
                test_s: 1.5,
                attempts: 1,
                log: "logs/a.log".into(),
                provenance: [("gpu".to_string(), "gfx1151".to_string())].into(),
                cached: false,
                ccache: None,
            })
            .collect(),
        build_only: false,
        applied: Vec::new(),
        invocation: Default::default(),
    }
}
