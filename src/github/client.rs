//! The octocrab-backed publisher: find our comment for a key (paginating), edit it or create it,
//! and read its state block back.
//!
//! Requests go through octocrab's raw `_get/_post/_patch` so that we see status and headers
//! ourselves: octocrab's typed calls hide the rate-limit headers and its built-in retry waits
//! without bound (a primary-limit reset can be an hour away). Our loop retries a bounded number
//! of times, never waits longer than `max_wait`, and retries a non-idempotent create only after
//! re-checking that the comment does not exist yet, so a 502 cannot produce two comments.

use super::body::{self, Document};
use super::{GithubError, IssueRef, Token};
use http::{HeaderMap, Method, StatusCode, Uri};
use octocrab::service::middleware::retry::RetryConfig;
use octocrab::Octocrab;
use serde::Deserialize;
use std::fmt;
use std::sync::OnceLock;
use std::time::Duration;

/// The login GitHub Actions' own token posts as. `GET /user` is refused to that token, so when
/// running inside Actions this is the fallback identity.
pub const ACTIONS_BOT: &str = "github-actions[bot]";

/// What a `--post` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PostAction {
    Created,
    Updated,
    /// The comment already said exactly this; nothing was sent.
    Unchanged,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostOutcome {
    pub action: PostAction,
    pub comment_id: u64,
    pub html_url: Option<String>,
}

/// How to reach GitHub; shared by `report`, `bisect --post-to` and `matrix --post-to`.
#[derive(Debug, Clone, clap::Args)]
pub struct GithubOptions {
    /// GitHub API base URL (GitHub Enterprise: https://HOST/api/v3).
    #[arg(long, env = "GITHUB_API_URL", default_value = "https://api.github.com")]
    pub api_url: String,
    /// Read the token from this file instead of the GITHUB_TOKEN environment variable.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<std::path::PathBuf>,
    /// Only comments by this login count as ours (default: the token's user; inside GitHub
    /// Actions, github-actions[bot] when the token cannot tell).
    #[arg(long, value_name = "LOGIN")]
    pub comment_author: Option<String>,
    /// Retries after rate limiting or server errors.
    #[arg(long, default_value_t = 4)]
    pub max_retries: u32,
    /// Longest single wait for a rate limit to reset, in seconds; longer waits fail instead.
    #[arg(long, default_value_t = 900)]
    pub max_wait_s: u64,
}

impl GithubOptions {
    /// A publisher for `issue`, reading the token now (so a missing token fails before work).
    pub fn publisher(&self, issue: &IssueRef) -> Result<Publisher, GithubError> {
        let token = Token::resolve(self.token_file.as_ref())?;
        let mut p = Publisher::new(issue.clone(), &token, &self.api_url)?;
        p.comment_author = self.comment_author.clone();
        p.in_actions = std::env::var("GITHUB_ACTIONS").is_ok_and(|v| v == "true");
        p.max_retries = self.max_retries;
        p.max_wait = Duration::from_secs(self.max_wait_s);
        Ok(p)
    }
}

/// Keeps one comment per key current on one issue.
pub struct Publisher {
    crab: Octocrab,
    base: Uri,
    issue: IssueRef,
    /// Only comments by this login are ours (anyone can paste our marker into a comment).
    pub comment_author: Option<String>,
    /// Inside GitHub Actions: fall back to [`ACTIONS_BOT`] when `GET /user` is refused.
    pub in_actions: bool,
    pub max_retries: u32,
    pub max_wait: Duration,
    login: OnceLock<String>,
}

impl fmt::Debug for Publisher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Publisher")
            .field("api", &self.base.to_string())
            .field("issue", &self.issue.to_string())
            .field("comment_author", &self.comment_author)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Deserialize)]
struct RawUser {
    login: String,
}

#[derive(Debug, Deserialize)]
struct RawComment {
    id: u64,
    #[serde(default)]
    body: Option<String>,
    #[serde(default)]
    user: Option<RawUser>,
    #[serde(default)]
    html_url: Option<String>,
}

/// What a request is for, to name it in errors.
struct Ctx<'a> {
    what: &'a str,
    target: &'a str,
}

enum Failure {
    /// Not worth retrying (or retries spent): the final error.
    Fatal(GithubError),
    /// The request may not have been processed (5xx, transport): retry if it is safe.
    Maybe(GithubError),
}

impl Publisher {
    /// Must be called inside a tokio runtime, and the publisher used only on that runtime:
    /// octocrab spawns its request buffer there. Synchronous code uses the `*_blocking`
    /// functions, which take care of that.
    pub fn new(issue: IssueRef, token: &Token, api_url: &str) -> Result<Publisher, GithubError> {
        let bad = || GithubError::InvalidApiUrl(api_url.to_string());
        let base: Uri = api_url.trim_end_matches('/').parse().map_err(|_| bad())?;
        if !matches!(base.scheme_str(), Some("http" | "https")) || base.authority().is_none() {
            return Err(bad());
        }
        let crab = Octocrab::builder()
            .personal_token(token.expose().to_string())
            .base_uri(base.clone())
            .map_err(|_| bad())?
            .add_retry_config(RetryConfig::None)
            .set_connect_timeout(Some(Duration::from_secs(15)))
            .set_read_timeout(Some(Duration::from_secs(60)))
            .build()
            .map_err(|e| GithubError::Transport {
                what: "set up the GitHub client".into(),
                message: e.to_string(),
            })?;
        Ok(Publisher {
            crab,
            base,
            issue,
            comment_author: None,
            in_actions: false,
            max_retries: 4,
            max_wait: Duration::from_secs(900),
            login: OnceLock::new(),
        })
    }

    pub fn issue(&self) -> &IssueRef {
        &self.issue
    }

    /// Creates the comment for `key` or edits it in place; `state` goes into the hidden state
    /// block. `artifact_url` is linked wherever logs had to be cut.
    pub async fn post_or_update(
        &self,
        key: &str,
        doc: &Document,
        state: Option<&serde_json::Value>,
        artifact_url: Option<&str>,
    ) -> Result<PostOutcome, GithubError> {
        let text = body::assemble(key, doc, state, artifact_url)?;
        let payload = serde_json::json!({ "body": text });
        let mut attempt = 0;
        loop {
            attempt += 1;
            let existing = self.find(key).await?;
            if let Some(c) = existing {
                if c.body.as_deref() == Some(text.as_str()) {
                    return Ok(PostOutcome {
                        action: PostAction::Unchanged,
                        comment_id: c.id,
                        html_url: c.html_url,
                    });
                }
                // GitHub documents PATCH for editing a comment. (octocrab 0.54's
                // `update_comment` sends POST, which GitHub has historically tolerated.)
                let route = format!(
                    "/repos/{}/{}/issues/comments/{}",
                    self.issue.owner, self.issue.repo, c.id
                );
                let what = format!("update comment {} on {}", c.id, self.issue);
                let ctx = Ctx {
                    what: &what,
                    target: &format!("comment {} on {}", c.id, self.issue),
                };
                let v = self
                    .send(Method::PATCH, &route, Some(&payload), true, &ctx)
                    .await?;
                return comment_outcome(PostAction::Updated, v.0, &what);
            }
            let route = format!(
                "/repos/{}/{}/issues/{}/comments",
                self.issue.owner, self.issue.repo, self.issue.number
            );
            let what = format!("create comment on {}", self.issue);
            let ctx = Ctx {
                what: &what,
                target: &format!("issue {}", self.issue),
            };
            match self
                .send_once(Method::POST, &route, Some(&payload), &ctx)
                .await
            {
                Ok(v) => return comment_outcome(PostAction::Created, v.0, &what),
                // Maybe created: look again before creating, so retries cannot duplicate it.
                Err(Failure::Maybe(e)) if attempt > self.max_retries => return Err(e),
                Err(Failure::Maybe(_)) => {
                    tokio::time::sleep(backoff(attempt)).await;
                }
                Err(Failure::Fatal(e)) => return Err(e),
            }
        }
    }

    /// The state block of our comment for `key`, if there is such a comment with a state block.
    pub async fn load_state(&self, key: &str) -> Result<Option<serde_json::Value>, GithubError> {
        body::validate_key(key)?;
        match self.find(key).await? {
            Some(c) => body::parse_state(c.body.as_deref().unwrap_or("")),
            None => Ok(None),
        }
    }

    /// The login whose comments count as ours.
    async fn our_login(&self) -> Result<String, GithubError> {
        if let Some(a) = &self.comment_author {
            return Ok(a.clone());
        }
        if let Some(l) = self.login.get() {
            return Ok(l.clone());
        }
        let ctx = Ctx {
            what: "identify the token's user (GET /user)",
            target: "the authenticated user",
        };
        let login = match self.send(Method::GET, "/user", None, true, &ctx).await {
            Ok((v, _)) => serde_json::from_value::<RawUser>(v)
                .map(|u| u.login)
                .map_err(|e| GithubError::BadResponse {
                    what: ctx.what.to_string(),
                    detail: e.to_string(),
                })?,
            Err(
                GithubError::ReadOnlyToken { .. }
                | GithubError::Forbidden { .. }
                | GithubError::NotFound { .. },
            ) if self.in_actions => ACTIONS_BOT.to_string(),
            Err(
                GithubError::ReadOnlyToken { .. }
                | GithubError::Forbidden { .. }
                | GithubError::NotFound { .. },
            ) => {
                return Err(GithubError::UnknownAuthor(
                    "this token may not read GET /user (an app or Actions token)".into(),
                ))
            }
            Err(e) => return Err(e),
        };
        let _ = self.login.set(login.clone());
        Ok(login)
    }

    /// Our comment for `key`: the oldest comment by our login carrying the key's marker.
    async fn find(&self, key: &str) -> Result<Option<RawComment>, GithubError> {
        let login = self.our_login().await?;
        let what = format!("list comments on {}", self.issue);
        let target = format!("issue {}", self.issue);
        let ctx = Ctx {
            what: &what,
            target: &target,
        };
        let mut route = Some(format!(
            "/repos/{}/{}/issues/{}/comments?per_page=100",
            self.issue.owner, self.issue.repo, self.issue.number
        ));
        let mut pages = 0;
        while let Some(r) = route.take() {
            pages += 1;
            if pages > 500 {
                return Err(GithubError::BadResponse {
                    what,
                    detail: "more than 500 pages of comments; refusing to go on".into(),
                });
            }
            let (v, headers) = self.send(Method::GET, &r, None, true, &ctx).await?;
            let comments: Vec<RawComment> =
                serde_json::from_value(v).map_err(|e| GithubError::BadResponse {
                    what: what.clone(),
                    detail: format!("comment list: {e}"),
                })?;
            let ours = comments.into_iter().find(|c| {
                c.user
                    .as_ref()
                    .is_some_and(|u| u.login.eq_ignore_ascii_case(&login))
                    && c.body.as_deref().is_some_and(|b| body::has_marker(b, key))
            });
            if ours.is_some() {
                return Ok(ours);
            }
            route = next_link(&headers, &self.base).map_err(|detail| GithubError::BadResponse {
                what: what.clone(),
                detail,
            })?;
        }
        Ok(None)
    }

    /// One request with bounded retries: rate limits (any method: GitHub did not process the
    /// request) and, when `idempotent`, server and transport errors.
    async fn send(
        &self,
        method: Method,
        route: &str,
        payload: Option<&serde_json::Value>,
        idempotent: bool,
        ctx: &Ctx<'_>,
    ) -> Result<(serde_json::Value, HeaderMap), GithubError> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self.send_once(method.clone(), route, payload, ctx).await {
                Ok(v) => return Ok(v),
                Err(Failure::Maybe(e)) if idempotent && attempt <= self.max_retries => {
                    let _ = e;
                    tokio::time::sleep(backoff(attempt)).await;
                }
                Err(Failure::Maybe(e) | Failure::Fatal(e)) => return Err(e),
            }
        }
    }

    /// One request, retrying only rate limits (bounded; waits at most `max_wait` each).
    async fn send_once(
        &self,
        method: Method,
        route: &str,
        payload: Option<&serde_json::Value>,
        ctx: &Ctx<'_>,
    ) -> Result<(serde_json::Value, HeaderMap), Failure> {
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            let sent = match method {
                Method::GET => self.crab._get(route).await,
                Method::PATCH => self.crab._patch(route, payload).await,
                _ => self.crab._post(route, payload).await,
            };
            let resp = sent.map_err(|e| {
                Failure::Maybe(GithubError::Transport {
                    what: ctx.what.to_string(),
                    message: e.to_string(),
                })
            })?;
            let status = resp.status();
            let headers = resp.headers().clone();
            let text = self.crab.body_to_string(resp).await.map_err(|e| {
                Failure::Maybe(GithubError::Transport {
                    what: ctx.what.to_string(),
                    message: format!("reading the response: {e}"),
                })
            })?;
            if status.is_success() {
                let v = if text.trim().is_empty() {
                    serde_json::Value::Null
                } else {
                    serde_json::from_str(&text).map_err(|e| {
                        Failure::Fatal(GithubError::BadResponse {
                            what: ctx.what.to_string(),
                            detail: format!("not JSON ({e})"),
                        })
                    })?
                };
                return Ok((v, headers));
            }
            let message = error_message(&text);
            if let Some((kind, wait)) = rate_limit(status, &headers, &message) {
                let give_up = |why: String| {
                    Failure::Fatal(GithubError::RateLimited {
                        what: ctx.what.to_string(),
                        kind,
                        attempts,
                        wait: why,
                    })
                };
                if wait > self.max_wait {
                    return Err(give_up(format!(
                        " (GitHub asks to wait {} s, more than the {} s allowed by --max-wait-s)",
                        wait.as_secs(),
                        self.max_wait.as_secs()
                    )));
                }
                if attempts > self.max_retries {
                    return Err(give_up(String::new()));
                }
                tokio::time::sleep(wait).await;
                continue;
            }
            let err = classify(status, &message, &text, ctx);
            return Err(if status.is_server_error() {
                Failure::Maybe(err)
            } else {
                Failure::Fatal(err)
            });
        }
    }
}

fn backoff(attempt: u32) -> Duration {
    Duration::from_millis(500u64 << attempt.min(5))
}

fn comment_outcome(
    action: PostAction,
    v: serde_json::Value,
    what: &str,
) -> Result<PostOutcome, GithubError> {
    let c: RawComment = serde_json::from_value(v).map_err(|e| GithubError::BadResponse {
        what: what.to_string(),
        detail: format!("comment: {e}"),
    })?;
    Ok(PostOutcome {
        action,
        comment_id: c.id,
        html_url: c.html_url,
    })
}

/// GitHub's `message`, or the start of the body; one line, short, escaped of nothing sensitive
/// (responses never echo our Authorization header).
fn error_message(text: &str) -> String {
    let msg = serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .and_then(|v| {
            v.get("message")
                .and_then(|m| m.as_str())
                .map(str::to_string)
        })
        .unwrap_or_else(|| text.trim().to_string());
    let one_line: String = msg.split_whitespace().collect::<Vec<_>>().join(" ");
    one_line.chars().take(300).collect()
}

/// Is this a rate limit, and how long does GitHub ask us to wait?
/// Primary: `x-ratelimit-remaining: 0` (wait until `x-ratelimit-reset`). Secondary:
/// `retry-after`, or a 403/429 whose message says so (GitHub: wait at least a minute).
pub(crate) fn rate_limit(
    status: StatusCode,
    headers: &HeaderMap,
    message: &str,
) -> Option<(&'static str, Duration)> {
    if status != StatusCode::FORBIDDEN && status != StatusCode::TOO_MANY_REQUESTS {
        return None;
    }
    let num = |name: &str| -> Option<i64> { headers.get(name)?.to_str().ok()?.trim().parse().ok() };
    if let Some(secs) = num("retry-after") {
        return Some((
            "secondary rate limit",
            Duration::from_secs(secs.max(0) as u64),
        ));
    }
    if num("x-ratelimit-remaining") == Some(0) {
        let now = chrono::Utc::now().timestamp();
        let wait = num("x-ratelimit-reset").map_or(60, |r| (r - now).clamp(1, i64::MAX));
        return Some(("primary rate limit", Duration::from_secs(wait as u64)));
    }
    if status == StatusCode::TOO_MANY_REQUESTS || message.to_lowercase().contains("rate limit") {
        return Some(("secondary rate limit", Duration::from_secs(60)));
    }
    None
}

fn classify(status: StatusCode, message: &str, text: &str, ctx: &Ctx<'_>) -> GithubError {
    let what = ctx.what.to_string();
    match status.as_u16() {
        401 => GithubError::Unauthorized {
            what,
            message: message.to_string(),
        },
        403 if message.contains("Resource not accessible by integration") => {
            GithubError::ReadOnlyToken { what }
        }
        403 => GithubError::Forbidden {
            what,
            message: message.to_string(),
        },
        404 => GithubError::NotFound {
            what,
            target: ctx.target.to_string(),
        },
        422 => {
            let details = serde_json::from_str::<serde_json::Value>(text)
                .ok()
                .and_then(|v| v.get("errors").cloned())
                .map(|e| {
                    let s: String = e.to_string().chars().take(300).collect();
                    format!("; {s}")
                })
                .unwrap_or_default();
            GithubError::Unprocessable {
                what,
                message: message.to_string(),
                details,
            }
        }
        s => GithubError::Http {
            what,
            status: s,
            message: message.to_string(),
        },
    }
}

/// The `rel="next"` link as a route relative to the API base. A link to any other origin is
/// refused: following it would either send the token elsewhere or silently drop it.
fn next_link(headers: &HeaderMap, base: &Uri) -> Result<Option<String>, String> {
    let Some(link) = headers.get("link").and_then(|v| v.to_str().ok()) else {
        return Ok(None);
    };
    for part in link.split(',') {
        let mut pieces = part.split(';');
        let url = pieces
            .next()
            .unwrap_or("")
            .trim()
            .trim_start_matches('<')
            .trim_end_matches('>');
        if !pieces.any(|p| p.trim() == "rel=\"next\"") {
            continue;
        }
        let uri: Uri = url
            .parse()
            .map_err(|_| format!("unparseable pagination link {url:?}"))?;
        if uri.authority() != base.authority() || uri.scheme() != base.scheme() {
            return Err(format!(
                "pagination link {url:?} leaves the API at {base}; not following it"
            ));
        }
        return Ok(uri.path_and_query().map(|pq| pq.as_str().to_string()));
    }
    Ok(None)
}

/// Async entry point for `bisect --post-to` / `matrix --post-to` / `report --post`.
pub async fn post_or_update(
    publisher: &Publisher,
    key: &str,
    doc: &Document,
    state: Option<&serde_json::Value>,
    artifact_url: Option<&str>,
) -> Result<PostOutcome, GithubError> {
    publisher
        .post_or_update(key, doc, state, artifact_url)
        .await
}

/// One comment to create or edit, for the blocking entry points.
#[derive(Debug, Clone, Copy)]
pub struct Post<'a> {
    pub key: &'a str,
    pub doc: &'a Document,
    pub state: Option<&'a serde_json::Value>,
}

fn runtime_error(e: std::io::Error) -> GithubError {
    GithubError::Transport {
        what: "start an async runtime".into(),
        message: e.to_string(),
    }
}

/// [`post_or_update`] for synchronous callers (`bisect --post-to`, `matrix --post-to`,
/// `report --post`): one runtime for the whole exchange, the publisher built inside it
/// (octocrab's client must live on the runtime that uses it).
pub fn post_all_blocking(
    opts: &GithubOptions,
    issue: &IssueRef,
    posts: &[Post<'_>],
    artifact_url: Option<&str>,
) -> Result<Vec<PostOutcome>, GithubError> {
    block_on(async {
        let publisher = opts.publisher(issue)?;
        let mut out = Vec::with_capacity(posts.len());
        for p in posts {
            out.push(
                publisher
                    .post_or_update(p.key, p.doc, p.state, artifact_url)
                    .await?,
            );
        }
        Ok(out)
    })
    .unwrap_or_else(|e| Err(runtime_error(e)))
}

/// One comment; see [`post_all_blocking`].
pub fn post_or_update_blocking(
    opts: &GithubOptions,
    issue: &IssueRef,
    post: Post<'_>,
    artifact_url: Option<&str>,
) -> Result<PostOutcome, GithubError> {
    post_all_blocking(opts, issue, &[post], artifact_url)?
        .pop()
        .ok_or_else(|| GithubError::BadResponse {
            what: format!("post to {issue}"),
            detail: "no result".into(),
        })
}

/// [`Publisher::load_state`] for synchronous callers (`--resume-from-issue`).
pub fn load_state_blocking(
    opts: &GithubOptions,
    issue: &IssueRef,
    key: &str,
) -> Result<Option<serde_json::Value>, GithubError> {
    block_on(async { opts.publisher(issue)?.load_state(key).await })
        .unwrap_or_else(|e| Err(runtime_error(e)))
}

/// Runs a future to completion from synchronous code, on a fresh current-thread runtime.
pub fn block_on<F: std::future::Future + Send>(fut: F) -> std::io::Result<F::Output>
where
    F::Output: Send,
{
    std::thread::scope(|s| {
        s.spawn(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map(|rt| rt.block_on(fut))
        })
        .join()
    })
    .unwrap_or_else(|p| std::panic::resume_unwind(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hm(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn rate_limit_kinds() {
        let f = StatusCode::FORBIDDEN;
        assert_eq!(
            rate_limit(f, &hm(&[("retry-after", "7")]), "").unwrap().1,
            Duration::from_secs(7)
        );
        let reset = (chrono::Utc::now().timestamp() + 120).to_string();
        let (kind, wait) = rate_limit(
            f,
            &hm(&[
                ("x-ratelimit-remaining", "0"),
                ("x-ratelimit-reset", &reset),
            ]),
            "API rate limit exceeded",
        )
        .unwrap();
        assert_eq!(kind, "primary rate limit");
        assert!(wait <= Duration::from_secs(120) && wait >= Duration::from_secs(100));
        assert!(rate_limit(f, &hm(&[("x-ratelimit-remaining", "12")]), "Forbidden").is_none());
        assert!(rate_limit(
            f,
            &HeaderMap::new(),
            "You have exceeded a secondary rate limit"
        )
        .is_some());
        assert!(rate_limit(StatusCode::NOT_FOUND, &hm(&[("retry-after", "1")]), "").is_none());
    }

    #[test]
    fn next_links_stay_on_the_api_origin() {
        let base: Uri = "http://127.0.0.1:8080".parse().unwrap();
        let h = hm(&[(
            "link",
            "<http://127.0.0.1:8080/repositories/9/issues/1/comments?per_page=100&page=3>; rel=\"next\", <http://127.0.0.1:8080/x?page=9>; rel=\"last\"",
        )]);
        assert_eq!(
            next_link(&h, &base).unwrap().as_deref(),
            Some("/repositories/9/issues/1/comments?per_page=100&page=3")
        );
        let h = hm(&[("link", "<https://evil.example/x?page=2>; rel=\"next\"")]);
        assert!(next_link(&h, &base).is_err());
        let h = hm(&[("link", "<http://127.0.0.1:8080/x?page=1>; rel=\"prev\"")]);
        assert_eq!(next_link(&h, &base).unwrap(), None);
    }

    #[test]
    fn block_on_works_inside_a_runtime() {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let v = rt.block_on(async { block_on(async { 41 + 1 }).unwrap() });
        assert_eq!(v, 42);
    }
}
