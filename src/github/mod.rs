//! Results on GitHub: one living comment per key on an issue, kept current by editing it, with a
//! hidden state block a stateless scheduled job can resume from.
//!
//! Escaping and the size-limited body (marker, state block) are rendering: `crate::report`.
//! - [`client`]: the octocrab-backed [`Publisher`] (find-or-create, update, read state back)
//!   with specific errors and bounded rate-limit retries; `http`: the pure status/rate-limit/
//!   pagination rules it follows.
//! - [`blocking`]: the same for synchronous callers.
//! - [`former`]: comments posted under an earlier layout of a key, found and taken over.
//! - [`signing`]: which state blocks a job may resume from (signed with this repository's
//!   key); the others are for display.
//! - [`state`]: what the state block carries (the typed results, compacted to fit); what
//!   `bisect --resume-from-issue` seeds a store from (`run::bisect::Resume`).
//!
//! The token lives in [`Token`], whose `Debug` is redacted and which has no `Display`, so it
//! cannot reach a log, an error or a report by accident.

pub mod blocking;
pub mod body;
pub mod client;
pub mod former;
mod http;
pub mod options;
pub mod signing;
pub mod state;

pub use crate::report::document::{Document, Section};
pub use blocking::{
    check_access_blocking, load_state_blocking, post_all_blocking, post_or_update_blocking, Post,
};
pub use body::MAX_BODY;
pub use client::{post_or_update, LoadedState, PostAction, PostOutcome, Publisher};
pub use former::Former;
pub use options::GithubOptions;

use std::fmt;
use std::path::{Path, PathBuf};

/// `OWNER/REPO#N`: the issue (or pull request) whose comments we keep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssueRef {
    pub owner: String,
    pub repo: String,
    pub number: u64,
}

impl std::str::FromStr for IssueRef {
    type Err = GithubError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || GithubError::InvalidIssue(s.to_string());
        let (repo_part, num) = s.trim().rsplit_once('#').ok_or_else(bad)?;
        let (owner, repo) = repo_part.split_once('/').ok_or_else(bad)?;
        let name_ok = |n: &str| {
            !n.is_empty()
                && n.len() <= 100
                && n.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
                && n != "."
                && n != ".."
        };
        if !name_ok(owner) || !name_ok(repo) {
            return Err(bad());
        }
        let number: u64 = num.parse().map_err(|_| bad())?;
        if number == 0 {
            return Err(bad());
        }
        Ok(IssueRef {
            owner: owner.to_string(),
            repo: repo.to_string(),
            number,
        })
    }
}

impl fmt::Display for IssueRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}#{}", self.owner, self.repo, self.number)
    }
}

/// A GitHub token. Deliberately no `Display`, no `Serialize`, and a `Debug` that prints
/// nothing of it: the only way out is [`Token::expose`], used where the request is built.
#[derive(Clone)]
pub struct Token(String);

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

impl Token {
    /// Refuses empty tokens and ones that could not be sent in a header (a newline in the middle
    /// usually means the wrong file was given); the message never contains the text itself.
    pub fn new(raw: &str, source: &str) -> Result<Token, GithubError> {
        let t = raw.trim();
        if t.is_empty() {
            return Err(GithubError::Token(format!("{source} is empty")));
        }
        if t.chars().any(|c| c.is_whitespace() || c.is_control()) || !t.is_ascii() {
            return Err(GithubError::Token(format!(
                "{source} does not look like a token (it contains whitespace or non-ASCII characters)"
            )));
        }
        Ok(Token(t.to_string()))
    }

    pub fn from_file(path: &Path) -> Result<Token, GithubError> {
        let raw = std::fs::read_to_string(path).map_err(|e| {
            GithubError::Token(format!("cannot read token file {}: {e}", path.display()))
        })?;
        let t = Token::new(&raw, &format!("token file {}", path.display()))?;
        // Probe output must never carry it either.
        crate::probe::secrets::register_redaction(&t.0);
        Ok(t)
    }

    /// `--token-file` if given, else `GITHUB_TOKEN` (as handed over at start by
    /// `secrets::protect_process`, which takes it out of the process environment).
    pub fn resolve(token_file: Option<&PathBuf>) -> Result<Token, GithubError> {
        match token_file {
            Some(p) => Token::from_file(p),
            None => match crate::probe::secrets::get("GITHUB_TOKEN") {
                Some(v) => Token::new(&v, "GITHUB_TOKEN"),
                None => Err(GithubError::Token(
                    "no token: set GITHUB_TOKEN or pass --token-file FILE".to_string(),
                )),
            },
        }
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

/// Every way talking to GitHub can fail, each with what the user can do about it. Built only
/// from status codes, GitHub's own messages and our own names: never from request headers.
#[derive(Debug, thiserror::Error)]
pub enum GithubError {
    #[error("invalid issue {0:?}: expected OWNER/REPO#NUMBER, e.g. Luce-Org/lucebox#516")]
    InvalidIssue(String),
    #[error(
        "invalid comment key {0:?}: use letters, digits and : _ . - / (e.g. matrix, bisect:abc123)"
    )]
    InvalidKey(String),
    #[error("invalid --api-url {0:?}: expected an http(s) URL such as https://github.example.com/api/v3")]
    InvalidApiUrl(String),
    #[error("GitHub token: {0}")]
    Token(String),
    /// A state key (`SETROWS_STATE_SIGNING_KEY`, `SETROWS_STATE_PUBLIC_KEY`) that is not one.
    #[error("{0} (docs/github.md: Signed state)")]
    StateKey(String),
    #[error("{what}: GitHub rejected the token (401: {message}); check GITHUB_TOKEN or --token-file, and that the token has not expired")]
    Unauthorized { what: String, message: String },
    #[error("{what}: the token is read-only here (403: Resource not accessible by integration). Workflows run from a fork get a read-only GITHUB_TOKEN: post from a workflow in the base repository (e.g. on workflow_run) or grant `permissions: issues: write`")]
    ReadOnlyToken { what: String },
    #[error("{what}: this workflow's GITHUB_TOKEN writes only to {home}, not to {target} (403: Resource not accessible by integration); set the secret RESULTS_TOKEN of the `results` environment to a token that may comment on {target}: a fine-grained token with Issues read and write on {target} if its user is a member of that owner, else a classic token with public_repo (docs/github.md: Workflows)")]
    ForeignRepository {
        what: String,
        home: String,
        target: String,
    },
    #[error("{what}: forbidden (403: {message}); the token needs write access to issues of this repository (fine-grained: Issues read/write; classic: public_repo or repo)")]
    Forbidden { what: String, message: String },
    #[error("{what}: the issue is locked (403: {message}); GitHub takes no new comments or edits on a locked issue from anyone without write access to its repository: ask its maintainers to unlock it, or post to another issue (--issue, --post-to; in the workflows vars.RESULTS_ISSUE)")]
    Locked { what: String, message: String },
    #[error("{what}: the comment was deleted while we edited it, {attempts} time(s) in a row (404); someone is deleting our comments: post again once that stops")]
    CommentVanished { what: String, attempts: u32 },
    #[error("{what}: not found (404). Check that {target} exists and that the token can see it (private repositories need a token with access)")]
    NotFound { what: String, target: String },
    #[error("{what}: {target} has moved ({status}){to}; post to the issue it moved to (--post-to, --issue, vars.RESULTS_ISSUE)")]
    Moved {
        what: String,
        target: String,
        status: u16,
        /// ` to <url>` when GitHub said where, else empty.
        to: String,
    },
    #[error("{what}: {target} was deleted (410); post to another issue (--post-to, --issue, vars.RESULTS_ISSUE)")]
    Gone { what: String, target: String },
    #[error("{what}: GitHub refused the request as invalid (422: {message}{details})")]
    Unprocessable {
        what: String,
        message: String,
        details: String,
    },
    #[error("{what}: rate limited by GitHub ({kind}) after {attempts} attempt(s){wait}; try again later")]
    RateLimited {
        what: String,
        kind: &'static str,
        attempts: u32,
        wait: String,
    },
    #[error("{what}: GitHub answered {status}: {message}")]
    Http {
        what: String,
        status: u16,
        message: String,
    },
    #[error("{what}: cannot reach GitHub: {message}")]
    Transport { what: String, message: String },
    #[error("{what}: unexpected response from GitHub: {detail}")]
    BadResponse { what: String, detail: String },
    #[error("comment for key {key:?}: the state block alone is {bytes} bytes, too large for a GitHub comment")]
    StateTooLarge { key: String, bytes: usize },
    #[error("the comment's state block has version {0:?}, which this setrows-bisect cannot read (it reads v1); upgrade setrows-bisect")]
    StateVersion(String),
    #[error("the comment's state block is not valid JSON ({0}); was the comment edited by hand?")]
    StateCorrupt(String),
    #[error("cannot tell whose comments are ours: {0}; pass --comment-author LOGIN")]
    UnknownAuthor(String),
    /// The comment just created is by another login than the one whose comments count as
    /// ours: the next run would not find it and would create another, every run.
    #[error("{what}: GitHub posted it as {posted}, but comments by {ours} count as ours, so the next run would not find it and would post another; pass --comment-author {posted}")]
    AuthorMismatch {
        what: String,
        posted: String,
        ours: String,
    },
}

impl GithubError {
    /// Errors the user fixes by changing input (token, issue, flags) rather than retrying.
    pub fn is_usage(&self) -> bool {
        self.names_the_token_or_issue()
            || matches!(
                self,
                GithubError::InvalidIssue(_)
                    | GithubError::InvalidKey(_)
                    | GithubError::InvalidApiUrl(_)
                    | GithubError::Token(_)
                    | GithubError::StateKey(_)
                    | GithubError::UnknownAuthor(_)
                    | GithubError::AuthorMismatch { .. }
            )
    }

    /// GitHub answered and said no (a 4xx that is no rate limit): the token or the issue is
    /// the user's to fix. Unreachable, a 5xx or a rate limit is a question not answered yet.
    pub fn is_refusal(&self) -> bool {
        match self {
            GithubError::Unprocessable { .. } => true,
            GithubError::Http { status, .. } => {
                (400..500).contains(status) && !matches!(status, 408 | 429)
            }
            e => e.names_the_token_or_issue(),
        }
    }

    /// GitHub's no that names what to change: the token (its rights) or the issue (gone,
    /// moved, locked, unseen). One list for both rules above.
    fn names_the_token_or_issue(&self) -> bool {
        matches!(
            self,
            GithubError::Unauthorized { .. }
                | GithubError::ReadOnlyToken { .. }
                | GithubError::ForeignRepository { .. }
                | GithubError::Forbidden { .. }
                | GithubError::Locked { .. }
                | GithubError::NotFound { .. }
                | GithubError::Moved { .. }
                | GithubError::Gone { .. }
        )
    }

    /// Maps to the command line's exit codes (2 = fix your input, 3 = infrastructure).
    pub fn into_cli(self) -> anyhow::Error {
        if self.is_usage() {
            crate::error::CliError::usage(self.to_string())
        } else {
            crate::error::CliError::infra(self.to_string())
        }
    }
}

/// The URL of the current GitHub Actions run (where the artifacts with full logs are), from
/// `GITHUB_SERVER_URL`, `GITHUB_REPOSITORY` and `GITHUB_RUN_ID`; `None` outside Actions or when
/// any of them looks wrong (it is put into markdown, so it must not carry markup).
pub fn run_url_from_env() -> Option<String> {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    run_url(
        &var("GITHUB_SERVER_URL")?,
        &var("GITHUB_REPOSITORY")?,
        &var("GITHUB_RUN_ID")?,
    )
}

fn run_url(server: &str, repo: &str, run_id: &str) -> Option<String> {
    let server = server.trim_end_matches('/');
    let server_ok = (server.starts_with("https://") || server.starts_with("http://"))
        && server
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, ':' | '/' | '.' | '-' | '_'));
    let repo_ok = format!("{repo}#1").parse::<IssueRef>().is_ok();
    let id_ok = !run_id.is_empty() && run_id.chars().all(|c| c.is_ascii_digit());
    (server_ok && repo_ok && id_ok).then(|| format!("{server}/{repo}/actions/runs/{run_id}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_urls_are_validated() {
        assert_eq!(
            run_url("https://github.com/", "o/r", "42").as_deref(),
            Some("https://github.com/o/r/actions/runs/42")
        );
        assert_eq!(run_url("https://x) [y](z", "o/r", "1"), None);
        assert_eq!(run_url("https://github.com", "o/r", "1a"), None);
        assert_eq!(run_url("javascript:alert(1)", "o/r", "1"), None);
    }

    #[test]
    fn issue_refs() {
        let r: IssueRef = "Luce-Org/lucebox#516".parse().unwrap();
        assert_eq!(
            (r.owner.as_str(), r.repo.as_str(), r.number),
            ("Luce-Org", "lucebox", 516)
        );
        assert_eq!(r.to_string(), "Luce-Org/lucebox#516");
        for bad in [
            "lucebox#5",
            "a/b",
            "a/b#x",
            "a/b#0",
            "a/b/c#1",
            "../b#1",
            "a b/c#1",
        ] {
            assert!(bad.parse::<IssueRef>().is_err(), "{bad}");
        }
    }

    #[test]
    fn token_is_redacted_and_validated() {
        let t = Token::new("  ghp_SECRET123\n", "test").unwrap();
        assert_eq!(t.expose(), "ghp_SECRET123");
        assert!(!format!("{t:?}").contains("SECRET"));
        let e = Token::new("line1\nline2", "token file x").unwrap_err();
        assert!(!e.to_string().contains("line1"));
        assert!(Token::new(" \n", "GITHUB_TOKEN").is_err());
    }
}
