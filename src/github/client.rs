//! The octocrab-backed publisher: find our comment for a key (paginating), edit it or create it,
//! and read its state block back.
//!
//! Requests go through octocrab's raw `_get/_post/_patch` so that we see status and headers
//! ourselves: octocrab's typed calls hide the rate-limit headers and its built-in retry waits
//! without bound (a primary-limit reset can be an hour away). Our loop retries a bounded number
//! of times, never waits longer than `max_wait`, and retries a non-idempotent create only after
//! re-checking that the comment does not exist yet, so a 502 cannot produce two comments.

use super::body;
use super::former::Former;
use super::http::{api_base, backoff, classify, error_message, next_link, rate_limit, Ctx};
use super::signing::{Signer, Trust, Verifier};
use super::{GithubError, IssueRef, Token};
use crate::report::document::Document;
use http::{HeaderMap, Method, Uri};
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

/// Keeps one comment per key current on one issue.
pub struct Publisher {
    crab: Octocrab,
    base: Uri,
    issue: IssueRef,
    /// Only comments by this login are ours (anyone can paste our marker into a comment).
    pub comment_author: Option<String>,
    /// Inside GitHub Actions: fall back to [`ACTIONS_BOT`] when `GET /user` is refused.
    pub in_actions: bool,
    /// Inside GitHub Actions: the repository the workflow runs in (`GITHUB_REPOSITORY`). Its
    /// GITHUB_TOKEN may write only there, so a refused write elsewhere names the fix.
    pub home_repo: Option<String>,
    pub max_retries: u32,
    pub max_wait: Duration,
    /// Signs the state block of every comment we write (the report job's key).
    pub signer: Option<Signer>,
    /// Checks the state blocks we read; without it none is [`Trust::Signed`].
    pub verifier: Option<Verifier>,
    login: OnceLock<String>,
}

/// A comment's state block as read back, and whether a job may resume from it.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedState {
    pub state: serde_json::Value,
    pub trust: Trust,
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
pub(super) struct RawComment {
    id: u64,
    #[serde(default)]
    pub(super) body: Option<String>,
    #[serde(default)]
    user: Option<RawUser>,
    #[serde(default)]
    html_url: Option<String>,
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
        let base = api_base(api_url)?;
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
            home_repo: None,
            max_retries: 4,
            max_wait: Duration::from_secs(900),
            signer: None,
            verifier: None,
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
        self.post_or_update_former(key, None, doc, state, artifact_url)
            .await
    }

    /// [`Self::post_or_update`], also finding (and taking over) the comment an earlier version
    /// posted under `former`'s key.
    pub async fn post_or_update_former(
        &self,
        key: &str,
        former: Option<Former<'_>>,
        doc: &Document,
        state: Option<&serde_json::Value>,
        artifact_url: Option<&str>,
    ) -> Result<PostOutcome, GithubError> {
        self.write(key, former, doc, state, artifact_url)
            .await
            .map_err(|e| self.name_the_token(e))
    }

    /// An integration token refused a write to another repository than the workflow's own:
    /// that is a workflow's GITHUB_TOKEN (GitHub scopes it to its repository), and the fix is
    /// another token, not a permission.
    fn name_the_token(&self, e: GithubError) -> GithubError {
        match (e, &self.home_repo) {
            (GithubError::ReadOnlyToken { what }, Some(home))
                if !home
                    .eq_ignore_ascii_case(&format!("{}/{}", self.issue.owner, self.issue.repo)) =>
            {
                GithubError::ForeignRepository {
                    what,
                    home: home.clone(),
                    target: format!("{}/{}", self.issue.owner, self.issue.repo),
                }
            }
            (e, _) => e,
        }
    }

    async fn write(
        &self,
        key: &str,
        former: Option<Former<'_>>,
        doc: &Document,
        state: Option<&serde_json::Value>,
        artifact_url: Option<&str>,
    ) -> Result<PostOutcome, GithubError> {
        let text = body::assemble_signed(key, doc, state, artifact_url, self.signer.as_ref())?;
        let payload = serde_json::json!({ "body": text });
        let mut attempt = 0;
        // A create that failed in a way that may still have made the comment.
        let mut maybe_created = false;
        loop {
            attempt += 1;
            let existing = self.find_former(key, former).await?;
            if let Some(c) = existing {
                if c.body.as_deref() == Some(text.as_str()) {
                    // On a retry, an identical body is the one our failed-looking create made.
                    let action = if maybe_created {
                        PostAction::Created
                    } else {
                        PostAction::Unchanged
                    };
                    return Ok(PostOutcome {
                        action,
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
                match self
                    .send(Method::PATCH, &route, Some(&payload), true, &ctx)
                    .await
                {
                    Ok(v) => return comment_outcome(PostAction::Updated, v.0, &what),
                    // Deleted between our list and this edit: list again, which then finds
                    // another of ours or none (and creates it).
                    Err(GithubError::NotFound { .. }) if attempt <= self.max_retries => continue,
                    Err(GithubError::NotFound { .. }) => {
                        return Err(GithubError::CommentVanished {
                            what,
                            attempts: attempt,
                        })
                    }
                    Err(e) => return Err(e),
                }
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
                Ok(v) => {
                    let posted = comment_outcome(PostAction::Created, v.0.clone(), &what)?;
                    self.check_author(&v.0, &what).await?;
                    return Ok(posted);
                }
                // Maybe created: look again before creating, so retries cannot duplicate it.
                Err(Failure::Maybe(e)) if attempt > self.max_retries => return Err(e),
                Err(Failure::Maybe(_)) => {
                    maybe_created = true;
                    tokio::time::sleep(backoff(attempt)).await;
                }
                Err(Failure::Fatal(e)) => return Err(e),
            }
        }
    }

    /// Reads the issue itself (`GET /repos/OWNER/REPO/issues/N`) with the token, so that a run
    /// learns before its first probe, not after the last one, whether GitHub takes this token
    /// here. The issue rather than `GET /user`: it proves the token is valid *and* can see the
    /// issue posting needs, and it works for a workflow's GITHUB_TOKEN, which `GET /user`
    /// refuses. Reading cannot prove the right to comment (GitHub has no cheap question for
    /// that short of commenting); what it cannot see, it cannot comment on.
    pub async fn check_access(&self) -> Result<(), GithubError> {
        let i = &self.issue;
        let route = format!("/repos/{}/{}/issues/{}", i.owner, i.repo, i.number);
        let what = format!("check the token on {i} (GET {route})");
        let ctx = Ctx {
            what: &what,
            target: &format!("issue {i}"),
        };
        let (v, _) = self.send(Method::GET, &route, None, true, &ctx).await?;
        // An answer that is not this issue is not GitHub answering (a proxy's or portal's
        // page): the token was not checked.
        match v.get("number").and_then(serde_json::Value::as_u64) {
            Some(n) if n == i.number => Ok(()),
            _ => Err(GithubError::BadResponse {
                what,
                detail: "the answer is not the issue".into(),
            }),
        }
    }

    /// The state block of our comment for `key`, if there is such a comment with a state block.
    pub async fn load_state(&self, key: &str) -> Result<Option<LoadedState>, GithubError> {
        self.load_state_former(key, None).await
    }

    /// [`Self::load_state`], falling back to the comment an earlier version posted under
    /// `former`'s key.
    pub async fn load_state_former(
        &self,
        key: &str,
        former: Option<Former<'_>>,
    ) -> Result<Option<LoadedState>, GithubError> {
        body::validate_key(key)?;
        let Some(c) = self.find_former(key, former).await? else {
            return Ok(None);
        };
        let Some(read) = body::read_state(c.body.as_deref().unwrap_or(""))? else {
            return Ok(None);
        };
        // A block taken over from a former key was signed under that key.
        let signed_as = match former {
            Some(f) if !body::has_marker(c.body.as_deref().unwrap_or(""), key) => f.key,
            _ => key,
        };
        let trust = match &self.verifier {
            Some(v) => v.check(signed_as, &read.json, read.signature.as_deref()),
            None => Trust::NoKey,
        };
        Ok(Some(LoadedState {
            state: read.value,
            trust,
        }))
    }

    /// The comment GitHub just created (`created`) is by the login whose comments count as
    /// ours; else the next run would not find it and would create another, every run (a
    /// token whose login was guessed, e.g. an app's token inside Actions).
    async fn check_author(
        &self,
        created: &serde_json::Value,
        what: &str,
    ) -> Result<(), GithubError> {
        let Some(posted) = created
            .get("user")
            .and_then(|u| u.get("login"))
            .and_then(serde_json::Value::as_str)
        else {
            return Ok(());
        };
        let ours = self.our_login().await?;
        if posted.eq_ignore_ascii_case(&ours) {
            return Ok(());
        }
        Err(GithubError::AuthorMismatch {
            what: what.to_string(),
            posted: posted.to_string(),
            ours,
        })
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
    pub(super) async fn find(&self, key: &str) -> Result<Option<RawComment>, GithubError> {
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
                Err(Failure::Maybe(_)) if idempotent && attempt <= self.max_retries => {
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
                        " (GitHub asks to wait {} s, more than the {} s allowed by --github-max-wait)",
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
