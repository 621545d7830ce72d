//! How to reach GitHub (flags shared by `report`, `bisect --post-to` and `matrix --post-to`):
//! kept apart from the publisher so that the inputs a run checks before its first probe (the
//! API URL, the token) are read in one place.

use super::client::Publisher;
pub use super::http::api_base;
use super::signing::{self, Signer, Verifier};
use super::{GithubError, IssueRef, Token};
use std::time::Duration;

/// How to reach GitHub; shared by `report`, `bisect --post-to` and `matrix --post-to`. Rarely
/// needed (the defaults and GITHUB_TOKEN serve GitHub Actions), so `-h` leaves them out and
/// `--help` shows them.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "GitHub")]
pub struct GithubOptions {
    /// GitHub API base URL (GitHub Enterprise: https://HOST/api/v3).
    #[arg(
        long,
        env = "GITHUB_API_URL",
        default_value = "https://api.github.com",
        value_name = "URL",
        hide_short_help = true
    )]
    pub api_url: String,
    /// Read the token from this file instead of the GITHUB_TOKEN environment variable.
    #[arg(long, value_name = "FILE", hide_short_help = true)]
    pub token_file: Option<std::path::PathBuf>,
    /// Only comments by this login count as ours (default: the token's user; inside GitHub
    /// Actions, github-actions[bot] when the token cannot tell).
    #[arg(long, value_name = "LOGIN", hide_short_help = true)]
    pub comment_author: Option<String>,
    /// Retries after rate limiting or server errors.
    #[arg(
        long = "github-retries",
        default_value_t = 4,
        value_name = "N",
        hide_short_help = true
    )]
    pub max_retries: u32,
    /// Longest single wait for a rate limit to reset, in seconds; longer waits fail instead.
    #[arg(
        long = "github-max-wait",
        default_value_t = 900,
        value_name = "SECS",
        hide_short_help = true
    )]
    pub max_wait_s: u64,
}

impl GithubOptions {
    /// A publisher for `issue`, reading the token now (so a missing token fails before work).
    pub fn publisher(&self, issue: &IssueRef) -> Result<Publisher, GithubError> {
        let token = Token::resolve(self.token_file.as_ref())?;
        let mut p = Publisher::new(issue.clone(), &token, &self.api_url)?;
        p.comment_author = self.comment_author.clone();
        p.in_actions = std::env::var("GITHUB_ACTIONS").is_ok_and(|v| v == "true");
        if p.in_actions {
            p.home_repo = std::env::var("GITHUB_REPOSITORY")
                .ok()
                .filter(|r| !r.is_empty());
        }
        p.max_retries = self.max_retries;
        p.max_wait = Duration::from_secs(self.max_wait_s);
        (p.signer, p.verifier) = state_keys()?;
        Ok(p)
    }
}

/// The state keys from the environment: the report job's private key signs what it posts; the
/// public key (else the private key's own) checks what a job reads. A key that is set but
/// is not one is an error here, before any probe, not a resume that silently never verifies.
pub fn state_keys() -> Result<(Option<Signer>, Option<Verifier>), GithubError> {
    let set = |v: Option<String>| v.filter(|v| !v.trim().is_empty());
    let signer = set(crate::probe::secrets::get(signing::SIGNING_KEY_ENV))
        .map(|k| Signer::from_base64(&k))
        .transpose()
        .map_err(GithubError::StateKey)?;
    let verifier = match set(std::env::var(signing::PUBLIC_KEY_ENV).ok()) {
        Some(k) => Some(Verifier::from_base64(&k).map_err(GithubError::StateKey)?),
        None => signer.as_ref().map(Signer::verifier),
    };
    Ok((signer, verifier))
}
