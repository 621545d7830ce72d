//! Entry points for synchronous callers (the command-line subcommands): one tokio runtime per
//! exchange, with the publisher built inside it, because octocrab's client is bound to the
//! runtime it was created on.

use super::options::GithubOptions;
use super::{Document, Former, GithubError, IssueRef, LoadedState, PostOutcome};

/// One comment to create or edit, for the blocking entry points.
#[derive(Debug, Clone, Copy)]
pub struct Post<'a> {
    pub key: &'a str,
    pub doc: &'a Document,
    pub state: Option<&'a serde_json::Value>,
    /// Where an earlier version posted the same results (see [`Former`]).
    pub former: Option<Former<'a>>,
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
                    .post_or_update_former(p.key, p.former, p.doc, p.state, artifact_url)
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
    former: Option<Former<'_>>,
) -> Result<Option<LoadedState>, GithubError> {
    block_on(async { opts.publisher(issue)?.load_state_former(key, former).await })
        .unwrap_or_else(|e| Err(runtime_error(e)))
}

/// [`Publisher::check_access`] for synchronous callers: the token check every posting command
/// makes before its first probe.
pub fn check_access_blocking(opts: &GithubOptions, issue: &IssueRef) -> Result<(), GithubError> {
    block_on(async { opts.publisher(issue)?.check_access().await })
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

    #[test]
    fn block_on_works_inside_a_runtime() {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let v = rt.block_on(async { block_on(async { 41 + 1 }).unwrap() });
        assert_eq!(v, 42);
    }
}
