//! `setrows-bisect report`: render result files as markdown, and with `--post` keep one GitHub
//! comment per key current. Also the step summary and JUnit outputs for CI.
//!
//! The library entry points here ([`render_values`], [`post_values`]) are what `bisect --post-to`
//! and `matrix --post-to` use, so every path to GitHub renders the same way.

use crate::core::result::{self, AnyResult};
use crate::error::{CliError, Exit};
use crate::github::{
    self, GithubError, GithubOptions, IssueRef, Post, PostAction, PostOutcome, Token,
};
use crate::run::bisect::Resume;
use clap::Args;
use std::io::Write;
use std::path::PathBuf;

#[derive(Debug, Args)]
#[command(next_help_heading = "GitHub")]
pub struct ReportArgs {
    /// The issue that carries the results: OWNER/REPO#N (needed for --post and --load-state).
    #[arg(long, value_name = "OWNER/REPO#N")]
    pub issue: Option<String>,
    /// Create or edit the comment(s) on the issue. Without it the body is printed (dry run).
    #[arg(long)]
    pub post: bool,
    /// Result files written by `bisect --json FILE`, `matrix` or `bisect-config` (their
    /// `"schema"` says which; others are refused). Matrix files are merged into one comment
    /// (key `matrix`); each bisection gets its own (`bisect:<id>`, `bisect-config:<id>`).
    #[arg(value_parser = crate::cli::output::absolute, long, num_args = 1.., value_name = "FILE", help_heading = "Input")]
    pub results: Vec<PathBuf>,
    /// Use this comment key for all results instead of the derived ones.
    #[arg(long, value_name = "KEY")]
    pub key: Option<String>,
    /// Link commits and ranges to this repository (https://github.com/OWNER/REPO) instead of
    /// the one recorded in the results (detected from `git remote get-url origin` of --repo).
    #[arg(long, value_name = "URL", value_parser = repo_url, help_heading = "Output")]
    pub repo_url: Option<String>,
    /// Also write JUnit XML for CI test reporting (one test case per probe or cell; the
    /// expected new-behaviour probes of a bisection are not failures).
    #[arg(value_parser = crate::cli::output::absolute, long, value_name = "FILE", help_heading = "Output")]
    pub junit: Option<PathBuf>,
    /// Print the state block stored in the issue's comment for KEY (JSON; `null` if none) and
    /// exit: how a stateless scheduled job picks up where the last one stopped.
    #[arg(long, value_name = "KEY", conflicts_with_all = ["post", "results", "junit"])]
    pub load_state: Option<String>,
    /// The fan-out's plan (`matrix --list --format github`, as the workflow's plan job output
    /// it): every leg none of whose configurations is in a --results file gets infra_error rows
    /// ("no results: runner offline or lost"). With no fresh results at all, the comment says
    /// so and the command exits 3 after posting.
    #[arg(value_parser = crate::cli::output::absolute, long, value_name = "FILE", help_heading = "Input")]
    pub expect_legs: Option<PathBuf>,
    /// A fan-out record (`fan-out --json`): the matrix comment gets a section naming the
    /// bisects started, the ranges not bisected (over the cap) and those already bisected.
    #[arg(value_parser = crate::cli::output::absolute, long, value_name = "FILE", help_heading = "Input")]
    pub fanout: Option<PathBuf>,
    #[command(flatten)]
    pub github: GithubOptions,
}

/// One comment's worth: its key, body, and the results behind it (the state block).
pub struct Rendered {
    pub key: String,
    pub doc: github::Document,
    pub state: serde_json::Value,
    /// The key and configuration id of the comment an earlier version posted these results
    /// under (`github::Former`), where that key differs.
    pub former: Option<(String, String)>,
}

/// Groups results by comment key (first appearance order) and renders each group with the one
/// renderer, plus a line saying where it was posted from.
pub fn render_values(
    results: &[AnyResult],
    key: Option<&str>,
    run_url: Option<&str>,
) -> Vec<Rendered> {
    let mut groups: Vec<(String, Vec<&AnyResult>)> = Vec::new();
    for r in results {
        let k = key
            .map(str::to_string)
            .unwrap_or_else(|| crate::report::key(r));
        match groups.iter_mut().find(|(g, _)| *g == k) {
            Some((_, v)) => v.push(r),
            None => groups.push((k, vec![r])),
        }
    }
    groups
        .into_iter()
        .map(|(k, rs)| {
            let mut doc = crate::report::render(&rs);
            doc.push_markdown(match run_url {
                Some(url) => format!("<sub>Posted by setrows-bisect from [this workflow run]({url}); logs and JSON are in its artifacts.</sub>"),
                None => "<sub>Posted by setrows-bisect.</sub>".into(),
            });
            let state = github::state::state(&k, &rs);
            let former = match (key, rs.first()) {
                (None, Some(r)) => crate::report::former_key(r).zip(
                    crate::report::configuration_id(r).map(str::to_string),
                ),
                _ => None,
            };
            Rendered {
                doc,
                state: serde_json::to_value(&state).unwrap_or_default(),
                key: k,
                former,
            }
        })
        .collect()
}

/// Renders results and creates/edits one comment per key on `issue` (what `bisect --post-to`
/// and `matrix --post-to` do with the results they wrote).
pub fn post_values(
    github: &GithubOptions,
    issue: &IssueRef,
    results: Vec<AnyResult>,
) -> anyhow::Result<Vec<PostOutcome>> {
    let rendered = render_values(&results, None, github::run_url_from_env().as_deref());
    post_rendered(
        github,
        issue,
        &rendered,
        github::run_url_from_env().as_deref(),
    )
    .map_err(|e| e.into_cli())
}

/// Appends the rendered markdown (without the hidden parts) to `$GITHUB_STEP_SUMMARY` when
/// that is set; a no-op elsewhere.
pub fn append_step_summary(rendered: &[Rendered], run_url: Option<&str>) -> anyhow::Result<()> {
    let Some(path) = std::env::var_os("GITHUB_STEP_SUMMARY").filter(|p| !p.is_empty()) else {
        return Ok(());
    };
    let shown = PathBuf::from(&path).display().to_string();
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(|e| CliError::infra(format!("GITHUB_STEP_SUMMARY {shown}: {e}")))?;
    for r in rendered {
        writeln!(f, "{}\n", r.doc.to_markdown(run_url).trim_end()).map_err(|e| {
            CliError::infra(format!("GITHUB_STEP_SUMMARY {shown}: cannot write: {e}"))
        })?;
    }
    Ok(())
}

fn post_rendered(
    github: &GithubOptions,
    issue: &IssueRef,
    rendered: &[Rendered],
    run_url: Option<&str>,
) -> Result<Vec<PostOutcome>, GithubError> {
    let posts: Vec<Post<'_>> = rendered
        .iter()
        .map(|r| Post {
            key: &r.key,
            doc: &r.doc,
            state: Some(&r.state),
            former: r
                .former
                .as_ref()
                .map(|(key, configuration)| github::Former { key, configuration }),
        })
        .collect();
    github::post_all_blocking(github, issue, &posts, run_url)
}

/// Why `PostToArgs::post` did not post: GitHub's answer, kept typed, or anything else.
#[derive(Debug)]
pub enum PostFailure {
    Github(GithubError),
    Other(anyhow::Error),
}

impl From<anyhow::Error> for PostFailure {
    fn from(e: anyhow::Error) -> Self {
        PostFailure::Other(e)
    }
}

impl PostFailure {
    fn into_anyhow(self) -> anyhow::Error {
        match self {
            PostFailure::Github(e) => e.into_cli(),
            PostFailure::Other(e) => e,
        }
    }
}

/// `--post-to OWNER/REPO#N` plus the GitHub connection flags, for `bisect` and `matrix` to
/// `#[command(flatten)]`: check it before the run (so a missing token fails in seconds, not after
/// hours of probing), post after it.
#[derive(Debug, Clone, Args)]
pub struct PostToArgs {
    /// After the run, create or edit the results comment on this issue (see `report`).
    #[arg(
        long,
        value_name = "OWNER/REPO#N",
        help_heading = "GitHub",
        hide_short_help = true
    )]
    pub post_to: Option<String>,
    #[command(flatten)]
    pub github: GithubOptions,
}

impl PostToArgs {
    /// The issue to post to, validated, and the token checked present; `None` without
    /// `--post-to`.
    pub fn check(&self) -> anyhow::Result<Option<IssueRef>> {
        let Some(raw) = &self.post_to else {
            return Ok(None);
        };
        let issue: IssueRef = raw.parse().map_err(|e: github::GithubError| e.into_cli())?;
        Token::resolve(self.github.token_file.as_ref()).map_err(|e| e.into_cli())?;
        github::options::api_base(&self.github.api_url).map_err(|e| e.into_cli())?;
        Ok(Some(issue))
    }

    /// Posts the results when `--post-to` was given, after appending the same markdown to
    /// `$GITHUB_STEP_SUMMARY` (when set); says what it did on stderr.
    pub fn post(&self, results: Vec<AnyResult>) -> Result<(), PostFailure> {
        let Some(issue) = self.check()? else {
            return Ok(());
        };
        let run_url = github::run_url_from_env();
        let rendered = render_values(&results, None, run_url.as_deref());
        append_step_summary(&rendered, run_url.as_deref())?;
        let outcomes = post_rendered(&self.github, &issue, &rendered, run_url.as_deref())
            .map_err(PostFailure::Github)?;
        for (r, o) in rendered.iter().zip(outcomes) {
            errln!(
                "setrows-bisect: {} results comment {} ({}) on {issue}{}",
                match o.action {
                    PostAction::Created => "created",
                    PostAction::Updated => "updated",
                    PostAction::Unchanged => "unchanged",
                },
                o.comment_id,
                r.key,
                o.html_url.map(|u| format!(": {u}")).unwrap_or_default()
            );
        }
        Ok(())
    }

    /// `--post-to`'s token, checked with GitHub before the run (`verify_token`); call it once
    /// every offline input is known good and before anything is checked out, built or made,
    /// and only when the run will post (a dry run asks GitHub nothing).
    pub fn verify(&self) -> anyhow::Result<()> {
        let Some(issue) = self.check()? else {
            return Ok(());
        };
        let unverified = verify_token(&self.github, &issue, Need::Comment, "--post-to")?;
        if let Some(reason) = unverified {
            warn_unverified(&issue, &reason);
        }
        Ok(())
    }

    /// The end of a `bisect` / `matrix` run whose results are already written to disk: posts
    /// them, and on failure says so (with how to post again) instead of losing the result.
    /// `file` is the JSON the run wrote, which the retry command names: a hint ending in
    /// `--results FILE` would leave the user to find it. Returns the exit code: `code`
    /// unchanged, except that a successful run (0) whose post failed exits 3 (infrastructure),
    /// so CI notices the comment is stale; an inconclusive run keeps its own code, which
    /// already fails the job.
    pub fn publish(
        &self,
        results: Vec<AnyResult>,
        code: Exit,
        written: &str,
        file: Option<&std::path::Path>,
    ) -> Exit {
        let Some(raw) = &self.post_to else {
            return code;
        };
        match self.post(results) {
            Ok(()) => code,
            // The comment exists, as another login: posting again would add another. One
            // line, exit 2: the login is the user's to give.
            Err(PostFailure::Github(e @ GithubError::AuthorMismatch { .. })) => {
                errln!("setrows-bisect: error: {e}");
                Exit::Usage
            }
            Err(e) => {
                let e = e.into_anyhow();
                errln!(
                    "setrows-bisect: error: posting the results to {raw} failed: {e:#}\n\
                     setrows-bisect: the results are not lost: {written}; post them again with \
                     `{}`",
                    self.repost_command(raw, file)
                );
                code.then_failed(Exit::Infra)
            }
        }
    }

    /// The `report --post` line that posts `file` where this run meant to, pasteable: the
    /// connection flags that differ from the defaults go with it (never the token itself).
    fn repost_command(&self, issue: &str, file: Option<&std::path::Path>) -> String {
        let mut argv: Vec<String> = ["setrows-bisect", "report", "--post", "--issue", issue]
            .map(String::from)
            .to_vec();
        if self.github.api_url.trim_end_matches('/') != "https://api.github.com" {
            argv.extend(["--api-url".into(), self.github.api_url.clone()]);
        }
        if let Some(p) = &self.github.token_file {
            argv.extend(["--token-file".into(), p.display().to_string()]);
        }
        argv.push("--results".into());
        argv.push(file.map_or("FILE".into(), |f| f.display().to_string()));
        crate::core::shell::line(&argv)
    }
}

/// What a token must be able to do on the issue, for the line that says what to change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// `--post-to`, `report --post`: read the comments and write ours.
    Comment,
    /// `--resume-from-issue` alone: read the state block.
    Read,
}

/// The token check of every command that talks to an issue, made before its work starts: a
/// token GitHub refuses used to be found after hours of probing (exit 3 at the post), although
/// it is the user's input like any flag. A refusal (401, 403, 404 or another 4xx) is exit 2 in
/// one line naming the issue, what GitHub said and what to change. A check that could not be
/// made (GitHub unreachable, a 5xx after retries, a rate limit, an answer that is not the
/// issue) is no refusal: it is returned as `Some(reason)`, for the caller to say, and the run
/// goes on, as an offline night still runs and keeps its results to post later; nothing calls
/// that token verified.
pub fn verify_token(
    github: &GithubOptions,
    issue: &IssueRef,
    need: Need,
    flag: &str,
) -> anyhow::Result<Option<String>> {
    let e = match github::check_access_blocking(github, issue) {
        Ok(()) => return Ok(None),
        Err(e) => e,
    };
    let redact = |s: String| {
        let one_line = s.split_whitespace().collect::<Vec<_>>().join(" ");
        crate::probe::secrets::redact(&one_line, &crate::probe::secrets::redactions())
    };
    if !e.is_refusal() {
        return match e.is_usage() {
            // The token or --api-url as given (checked offline before; here for a caller
            // that did not).
            true => Err(e.into_cli()),
            false => Ok(Some(redact(e.to_string()))),
        };
    }
    let holder = match &github.token_file {
        Some(p) => format!(
            "put a token that can {} in --token-file {}",
            need.verb(issue),
            p.display()
        ),
        None => format!("set GITHUB_TOKEN to a token that can {}", need.verb(issue)),
    };
    let line = match &e {
        GithubError::Unauthorized { message, .. } => {
            format!("GitHub refused the token (401 {message}) for {issue}: {holder}, or drop {flag}")
        }
        GithubError::NotFound { .. } => format!(
            "GitHub shows the token no issue {issue} (404 Not Found: it does not exist, or the token cannot see its repository): check the issue, or {holder}, or drop {flag}"
        ),
        GithubError::Forbidden { message, .. } => format!(
            "GitHub refused the token access to {issue} (403 {message}): {holder} (fine-grained: Issues {}; classic: public_repo, or repo for a private one), or drop {flag}",
            need.permission()
        ),
        GithubError::ReadOnlyToken { .. } => format!(
            "GitHub refused the token access to {issue} (403 Resource not accessible by integration): {holder} (a workflow's GITHUB_TOKEN reaches only its own repository), or drop {flag}"
        ),
        GithubError::Http {
            status, message, ..
        } => format!(
            "GitHub refused the token access to {issue} ({status} {message}): {holder}, or drop {flag}"
        ),
        other => format!("GitHub refused the token for {issue} ({other}): {holder}, or drop {flag}"),
    };
    Err(CliError::usage(redact(line)))
}

impl Need {
    fn verb(self, issue: &IssueRef) -> String {
        match self {
            Need::Comment => format!("comment on {issue}"),
            Need::Read => format!("read {issue}"),
        }
    }
    fn permission(self) -> &'static str {
        match self {
            Need::Comment => "read and write",
            Need::Read => "read",
        }
    }
}

/// One line: the run goes on with a token nobody checked, and what becomes of its results.
fn warn_unverified(issue: &IssueRef, reason: &str) {
    errln!(
        "setrows-bisect: warning: the GitHub token is not verified for {issue} ({reason}); the run goes on: its results are posted at the end, or kept to post later if that fails too"
    );
}

impl Default for PostToArgs {
    /// No `--post-to`, and the connection flags at their command-line defaults.
    fn default() -> Self {
        PostToArgs {
            post_to: None,
            github: GithubOptions {
                api_url: "https://api.github.com".into(),
                token_file: None,
                comment_author: None,
                max_retries: 4,
                max_wait_s: 900,
            },
        }
    }
}

/// `bisect`'s GitHub flags: `--post-to` and friends plus `--resume-from-issue`.
#[derive(Debug, Clone, Default, Args)]
pub struct BisectPostArgs {
    #[command(flatten)]
    pub post: PostToArgs,
    /// Before probing, seed the local result store from the state block of this bisection's
    /// comment, so a job with an empty work dir repeats no probe an earlier run posted. The
    /// issue is --post-to's, or the one given here (resume without posting: a job that may only
    /// read the issue).
    #[arg(
        long,
        value_name = "OWNER/REPO#N",
        help_heading = "GitHub",
        hide_short_help = true,
        num_args = 0..=1,
        default_missing_value = "",
    )]
    pub resume_from_issue: Option<String>,
}

impl BisectPostArgs {
    /// Validates --post-to and --resume-from-issue (issues, token) before anything runs.
    pub fn check(&self) -> anyhow::Result<()> {
        self.post.check()?;
        self.resume_issue()?;
        Ok(())
    }

    /// The token checked with GitHub (`verify_token`) on every issue this run will talk to:
    /// `--post-to`'s when `posts` (a run that ends in a result), and `--resume-from-issue`'s
    /// (read before the first probe). Call it after every offline check, before any work; never
    /// for a dry run.
    pub fn verify(&self, posts: bool) -> anyhow::Result<()> {
        let post = match posts {
            true => self.post.check()?,
            false => None,
        };
        if posts {
            self.post.verify()?;
        }
        match self.resume_issue()? {
            Some(issue) if post.as_ref() != Some(&issue) => {
                // Unreachable here is said by the read itself a moment later (`resume`).
                verify_token(&self.post.github, &issue, Need::Read, "--resume-from-issue")?;
                Ok(())
            }
            _ => Ok(()),
        }
    }

    fn resume_issue(&self) -> anyhow::Result<Option<IssueRef>> {
        match self.resume_from_issue.as_deref() {
            None => Ok(None),
            Some("") => match self.post.check()? {
                Some(issue) => Ok(Some(issue)),
                None => Err(CliError::usage(
                    "--resume-from-issue needs an issue: give it one (--resume-from-issue OWNER/REPO#N) or pass --post-to OWNER/REPO#N",
                )),
            },
            Some(raw) => {
                let issue: IssueRef = raw.parse().map_err(|e: github::GithubError| e.into_cli())?;
                Token::resolve(self.post.github.token_file.as_ref()).map_err(|e| e.into_cli())?;
                Ok(Some(issue))
            }
        }
    }

    /// With `--resume-from-issue` (never for `--dry-run`: a plan reads no issue): the state of
    /// `req`'s comment (the key its result will be posted under), which `run::bisect::prepare`
    /// seeds the store from. A missing comment, or a block broken by a hand edit, is said here
    /// and is no error (first run; the next post writes a whole block).
    pub fn resume(&self, req: &crate::run::bisect::Request) -> anyhow::Result<Option<Resume>> {
        if req.mode == crate::run::bisect::Mode::DryRun {
            return Ok(None);
        }
        let Some(issue) = self.resume_issue()? else {
            return Ok(None);
        };
        let (good, bad) = (req.good.to_string(), req.bad.to_string());
        let predicate = req.predicate.describe();
        let configuration = req.chosen.info.as_ref().and_then(|c| c.id.as_deref());
        let key = crate::report::bisect_key(&good, &bad, &predicate, configuration);
        let former_key =
            configuration.map(|_| crate::report::bisect_key(&good, &bad, &predicate, None));
        let former = former_key
            .as_deref()
            .zip(configuration)
            .map(|(key, configuration)| github::Former { key, configuration });
        let state = match github::load_state_blocking(&self.post.github, &issue, &key, former) {
            // A state block broken by a hand edit must not fail every later resumed run: the
            // runs are probed again, and the next post writes a whole block.
            Err(e @ github::GithubError::StateCorrupt(_)) => {
                errln!("setrows-bisect: {key} comment on {issue}: {e}; starting from the local store (the next post replaces the block)");
                None
            }
            // GitHub unreachable, a 5xx, a rate limit: the resume is lost, not the bisection.
            // The local store still answers what it holds; a refusal stays the user's to fix.
            Err(e) if !e.is_refusal() => {
                errln!("setrows-bisect: warning: could not read the {key} comment on {issue} ({e}); starting from the local store");
                None
            }
            r => r.map_err(|e| e.into_cli())?,
        };
        let Some(loaded) = state else {
            errln!("setrows-bisect: no {key} comment with state on {issue} yet: starting from the local store");
            return Ok(None);
        };
        // Anyone who may write to the issue's repository can edit the comment: only a state
        // this repository's report job signed decides probes; any other is for display.
        if loaded.trust != github::signing::Trust::Signed {
            errln!(
                "setrows-bisect: warning: not resuming from the {key} comment on {issue}: {}; starting from the local store",
                loaded.trust.reason()
            );
            return Ok(None);
        }
        Ok(Some(Resume {
            state: loaded.state,
            from: format!("{key} on {issue}"),
        }))
    }
}

fn parse_issue(args: &ReportArgs, why: &str) -> anyhow::Result<IssueRef> {
    let raw = args
        .issue
        .as_deref()
        .ok_or_else(|| CliError::usage(format!("--issue OWNER/REPO#N is required {why}")))?;
    raw.parse().map_err(|e: github::GithubError| e.into_cli())
}

/// `--repo-url`: an https address of the form host/owner/repo.
fn repo_url(s: &str) -> Result<String, String> {
    crate::report::web_url(Some(s))
        .map(str::to_string)
        .ok_or_else(|| format!("{s:?} is not an https://HOST/OWNER/REPO address"))
}

fn set_repo_url(r: &mut AnyResult, url: &str) {
    match r {
        AnyResult::Bisect(b) => b.invocation.repo_url = Some(url.into()),
        AnyResult::Matrix(m) => m.invocation.repo_url = Some(url.into()),
        AnyResult::BisectConfig(c) => {
            if let Some(b) = &mut c.commit_bisect {
                b.invocation.repo_url = Some(url.into());
            }
        }
    }
}

pub fn run(args: ReportArgs) -> anyhow::Result<Exit> {
    if let Some(key) = &args.load_state {
        let issue = parse_issue(&args, "with --load-state")?;
        let loaded = github::load_state_blocking(&args.github, &issue, key, None)
            .map_err(|e| e.into_cli())?;
        if let Some(l) = &loaded {
            errln!("setrows-bisect: {key} on {issue}: {}", l.trust.reason());
        }
        let state = loaded.map(|l| l.state).unwrap_or(serde_json::Value::Null);
        outln!("{}", serde_json::to_string_pretty(&state)?);
        return Ok(Exit::Ok);
    }
    if args.results.is_empty() && args.expect_legs.is_none() {
        return Err(CliError::usage(
            "report: give at least one --results FILE (or --expect-legs PLAN, or --load-state KEY)",
        ));
    }
    // Validate everything before any effect: issue, token, files, keys.
    let issue = if args.post {
        Some(parse_issue(&args, "with --post")?)
    } else {
        None
    };
    if issue.is_some() {
        Token::resolve(args.github.token_file.as_ref()).map_err(|e| e.into_cli())?;
    }
    if let Some(k) = &args.key {
        github::body::validate_key(k).map_err(|e| e.into_cli())?;
    }
    if let Some(path) = &args.junit {
        crate::cli::output::check_writable("--junit", path)?;
    }
    let mut results = crate::cli::documents::read_results(&args.results)?;
    if let Some(url) = &args.repo_url {
        for r in &mut results {
            set_repo_url(r, url);
        }
    }
    let fanout = match &args.fanout {
        Some(p) => Some(crate::cli::documents::read_record("--fanout", p)?),
        None => None,
    };
    let run_url = github::run_url_from_env();
    let lost = match &args.expect_legs {
        Some(plan) => lost_legs(plan, &mut results)?,
        None => Vec::new(),
    };
    // The token checked with GitHub once every file is read, before anything is written (the
    // JUnit file, the step summary): a refused one is exit 2 in one line. One that could not
    // be checked goes on unsaid: the post a moment later asks again and says what it found.
    if let Some(issue) = &issue {
        verify_token(&args.github, issue, Need::Comment, "--post")?;
    }
    let mut rendered = render_values(&results, args.key.as_deref(), run_url.as_deref());
    let stale = !lost.is_empty() && lost.len() == lost_total(&args)?;
    if stale {
        for r in &mut rendered {
            r.doc.push_markdown(format!(
                "⚠️ **No fresh matrix results**: no leg of {} wrote results ({}: runner offline or lost). Every row above says so. The last results that ran, where this comment had them, are folded below; every earlier run keeps its own in its artifacts.",
                run_url.as_deref().map(|u| format!("[this run]({u})")).unwrap_or_else(|| "this run".into()),
                lost.join(", ")
            ));
        }
    }
    if let (true, Some(issue)) = (stale, &issue) {
        for r in rendered.iter_mut().filter(|r| r.key.starts_with("matrix")) {
            keep_last_ran(&args.github, issue, r)?;
        }
    }
    if let Some(f) = &fanout {
        // The section goes with the matrix results, the comment whose failures it fanned out.
        for r in rendered.iter_mut().filter(|r| r.key.starts_with("matrix")) {
            r.doc.push_markdown(crate::core::fanout::markdown(f));
        }
    }

    if let Some(path) = &args.junit {
        let all: Vec<&AnyResult> = results.iter().collect();
        crate::cli::output::write(
            "--junit",
            path,
            crate::report::junit::render(&all).as_bytes(),
        )?;
    }
    append_step_summary(&rendered, run_url.as_deref())?;

    let Some(issue) = issue else {
        let mut out = std::io::stdout().lock();
        for r in &rendered {
            let body = github::body::assemble(&r.key, &r.doc, Some(&r.state), run_url.as_deref())
                .map_err(|e| e.into_cli())?;
            writeln!(out, "{body}\n")?;
        }
        return no_fresh(stale, &lost);
    };
    let outcomes = post_rendered(&args.github, &issue, &rendered, run_url.as_deref())
        .map_err(|e| e.into_cli())?;
    for (r, res) in rendered.iter().zip(outcomes) {
        let verb = match res.action {
            PostAction::Created => "created",
            PostAction::Updated => "updated",
            PostAction::Unchanged => "unchanged",
        };
        outln!(
            "{verb} comment {} ({}) on {issue}{}",
            res.comment_id,
            r.key,
            res.html_url.map(|u| format!(": {u}")).unwrap_or_default()
        );
    }
    no_fresh(stale, &lost)
}

/// A comment with no fresh results keeps the last results that ran: folded under the rows that
/// say why nothing is fresh, and as its state, so a second night offline keeps them too, and
/// the table people read at 2 a.m. is never replaced by nothing but "no results".
fn keep_last_ran(github: &GithubOptions, issue: &IssueRef, r: &mut Rendered) -> anyhow::Result<()> {
    let signing = github::options::state_keys()
        .map_err(|e| e.into_cli())?
        .0
        .is_some();
    // A state this job signs again must have been signed by it: else an edit of the comment
    // would come back signed, and trusted by the next resume.
    let previous = github::load_state_blocking(github, issue, &r.key, None)
        .map_err(|e| e.into_cli())?
        .filter(|l| !signing || l.trust == github::signing::Trust::Signed)
        .and_then(|l| serde_json::from_value::<github::state::State>(l.state).ok());
    let Some(previous) = previous.filter(|st| st.results.iter().any(ran)) else {
        return Ok(());
    };
    let last: Vec<&AnyResult> = previous.results.iter().collect();
    r.doc.push_markdown(
        "<details><summary>Last results that ran (kept from this comment before this run)</summary>\n",
    );
    r.doc.sections.extend(crate::report::render(&last).sections);
    r.doc.push_markdown("</details>");
    r.state = serde_json::to_value(github::state::state(&r.key, &last)).unwrap_or_default();
    Ok(())
}

/// Whether a result holds a cell that ran (a lost or cut-off leg's rows are all `infra_error`).
fn ran(r: &AnyResult) -> bool {
    match r {
        AnyResult::Matrix(m) => m
            .cells
            .iter()
            .any(|c| c.outcome != crate::core::outcome::Outcome::InfraError),
        _ => false,
    }
}

/// A report whose every planned leg is lost has said so in the comment; it still fails (exit 3),
/// so a nightly with its runner offline is red, not a green job with an old-looking table.
fn no_fresh(stale: bool, lost: &[String]) -> anyhow::Result<Exit> {
    match stale {
        false => Ok(Exit::Ok),
        true => Err(CliError::infra(format!(
            "no fresh matrix results: no leg wrote results ({}); the comment says so",
            lost.join(", ")
        ))),
    }
}

fn read_plan(path: &std::path::Path) -> anyhow::Result<serde_json::Value> {
    let shown = path.display();
    let text = std::fs::read_to_string(path)
        .map_err(|e| CliError::usage(format!("--expect-legs {shown}: cannot read: {e}")))?;
    serde_json::from_str(&text)
        .map_err(|e| CliError::usage(format!("--expect-legs {shown}: not JSON: {e}")))
}

fn lost_total(args: &ReportArgs) -> anyhow::Result<usize> {
    let Some(p) = &args.expect_legs else {
        return Ok(0);
    };
    Ok(read_plan(p)?
        .get("include")
        .and_then(|i| i.as_array())
        .map_or(0, Vec::len))
}

/// `--expect-legs`: the plan's legs that no result file covers become `infra_error` documents
/// of their own (`report::matrix::lost_legs`), added to `results`; their names are returned.
/// Labels come from ./matrix.toml (else the built-in matrix), where the plan's ids came from.
fn lost_legs(plan: &std::path::Path, results: &mut Vec<AnyResult>) -> anyhow::Result<Vec<String>> {
    let value = read_plan(plan)?;
    let m = crate::cli::matrix_file::load_matrix(None).ok();
    let labels = |id: &str| {
        m.as_ref()
            .and_then(|m| m.find(id))
            .map(result::ConfigRow::of)
    };
    let revisions = m.as_ref().map(|m| m.revisions.clone()).unwrap_or_default();
    let files: Vec<&result::MatrixResults> = results
        .iter()
        .filter_map(|r| match r {
            AnyResult::Matrix(m) => Some(m),
            _ => None,
        })
        .collect();
    let (legs, docs) = crate::report::matrix::lost_legs(&value, &files, &labels, &revisions)
        .map_err(|e| CliError::usage(format!("--expect-legs {}: {e}", plan.display())))?;
    results.extend(docs.into_iter().map(AnyResult::Matrix));
    Ok(legs.into_iter().map(|l| l.name).collect())
}
