//! `setrows-bisect report`: render result files as markdown, and with `--post` keep one GitHub
//! comment per key current. Also the step summary and JUnit outputs for CI.
//!
//! The library entry points here ([`render_values`], [`post_values`]) are what `bisect --post-to`
//! and `matrix --post-to` use, so every path to GitHub renders the same way.

use crate::error::CliError;
use crate::github::{self, GithubOptions, IssueRef, Post, PostAction, PostOutcome, Token};
use crate::summary::{self, ResultFile};
use clap::Args;
use std::io::Write;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The issue that carries the results: OWNER/REPO#N (needed for --post and --load-state).
    #[arg(long, value_name = "OWNER/REPO#N")]
    pub issue: Option<String>,
    /// Create or edit the comment(s) on the issue. Without it the body is printed (dry run).
    #[arg(long)]
    pub post: bool,
    /// Result files written by `bisect --json FILE` or `matrix --json FILE`. Matrix files are
    /// merged into one comment (key `matrix`); each bisect gets its own (`bisect:<id>`).
    #[arg(long, num_args = 1.., value_name = "FILE")]
    pub results: Vec<PathBuf>,
    /// Use this comment key for all results instead of the derived ones.
    #[arg(long, value_name = "KEY")]
    pub key: Option<String>,
    /// Also write JUnit XML for CI test reporting.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Print the state block stored in the issue's comment for KEY (JSON; `null` if none) and
    /// exit: how a stateless scheduled job picks up where the last one stopped.
    #[arg(long, value_name = "KEY", conflicts_with_all = ["post", "results", "junit"])]
    pub load_state: Option<String>,
    #[command(flatten)]
    pub github: GithubOptions,
}

/// One comment's worth: its key, body, and the parsed results behind it.
pub struct Rendered {
    pub key: String,
    pub doc: github::Document,
    pub state: serde_json::Value,
}

/// Groups results by comment key (first appearance order) and renders each group.
pub fn render_values(
    results: &[ResultFile],
    key: Option<&str>,
    run_url: Option<&str>,
) -> Vec<Rendered> {
    let mut groups: Vec<(String, Vec<&ResultFile>)> = Vec::new();
    for r in results {
        let k = key.map(str::to_string).unwrap_or_else(|| r.key());
        match groups.iter_mut().find(|(g, _)| *g == k) {
            Some((_, v)) => v.push(r),
            None => groups.push((k, vec![r])),
        }
    }
    groups
        .into_iter()
        .map(|(k, rs)| Rendered {
            doc: summary::render(&rs, run_url),
            state: summary::state(&k, &rs),
            key: k,
        })
        .collect()
}

/// Renders result JSON values and creates/edits one comment per key on `issue`. For
/// `bisect --post-to` / `matrix --post-to`: call with the JSON you would write with `--json`.
pub fn post_values(
    github: &GithubOptions,
    issue: &IssueRef,
    values: Vec<serde_json::Value>,
) -> anyhow::Result<Vec<PostOutcome>> {
    let results = values
        .into_iter()
        .enumerate()
        .map(|(i, v)| summary::parse(v, &format!("result {}", i + 1)))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| CliError::infra(e.to_string()))?;
    let run_url = github::run_url_from_env();
    let rendered = render_values(&results, None, run_url.as_deref());
    post_rendered(github, issue, &rendered, run_url.as_deref())
}

fn post_rendered(
    github: &GithubOptions,
    issue: &IssueRef,
    rendered: &[Rendered],
    run_url: Option<&str>,
) -> anyhow::Result<Vec<PostOutcome>> {
    let posts: Vec<Post<'_>> = rendered
        .iter()
        .map(|r| Post {
            key: &r.key,
            doc: &r.doc,
            state: Some(&r.state),
        })
        .collect();
    github::post_all_blocking(github, issue, &posts, run_url).map_err(|e| e.into_cli())
}

/// `--post-to OWNER/REPO#N` plus the GitHub connection flags, for `bisect` and `matrix` to
/// `#[command(flatten)]`: check it before the run (so a missing token fails in seconds, not after
/// hours of probing), post after it.
#[derive(Debug, Clone, Args)]
pub struct PostToArgs {
    /// After the run, create or edit the results comment on this issue (see `report`).
    #[arg(long, value_name = "OWNER/REPO#N")]
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
        Ok(Some(issue))
    }

    /// Posts the result JSON (what `--json` writes) when `--post-to` was given; says what it did
    /// on stderr.
    pub fn post(&self, values: Vec<serde_json::Value>) -> anyhow::Result<()> {
        let Some(issue) = self.check()? else {
            return Ok(());
        };
        for o in post_values(&self.github, &issue, values)? {
            eprintln!(
                "{} results comment {} on {issue}{}",
                match o.action {
                    PostAction::Created => "created",
                    PostAction::Updated => "updated",
                    PostAction::Unchanged => "unchanged",
                },
                o.comment_id,
                o.html_url.map(|u| format!(": {u}")).unwrap_or_default()
            );
        }
        Ok(())
    }
}

fn parse_issue(args: &ReportArgs, why: &str) -> anyhow::Result<IssueRef> {
    let raw = args
        .issue
        .as_deref()
        .ok_or_else(|| CliError::usage(format!("--issue OWNER/REPO#N is required {why}")))?;
    raw.parse().map_err(|e: github::GithubError| e.into_cli())
}

fn read_results(paths: &[PathBuf]) -> anyhow::Result<Vec<ResultFile>> {
    paths
        .iter()
        .map(|p| {
            let origin = p.display().to_string();
            let text = std::fs::read_to_string(p)
                .map_err(|e| CliError::usage(format!("--results {origin}: cannot read: {e}")))?;
            let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
                CliError::usage(format!(
                    "--results {origin}: not JSON at line {}, column {}: {e}",
                    e.line(),
                    e.column()
                ))
            })?;
            summary::parse(v, &origin).map_err(|e| CliError::usage(format!("--results {e}")))
        })
        .collect()
}

pub fn run(args: ReportArgs) -> anyhow::Result<i32> {
    if let Some(key) = &args.load_state {
        let issue = parse_issue(&args, "with --load-state")?;
        let state =
            github::load_state_blocking(&args.github, &issue, key).map_err(|e| e.into_cli())?;
        let text = serde_json::to_string_pretty(&state.unwrap_or(serde_json::Value::Null))?;
        println!("{text}");
        return Ok(crate::error::exit::FOUND);
    }
    if args.results.is_empty() {
        return Err(CliError::usage(
            "report: give at least one --results FILE (or --load-state KEY)",
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
    let results = read_results(&args.results)?;
    let run_url = github::run_url_from_env();
    let rendered = render_values(&results, args.key.as_deref(), run_url.as_deref());

    if let Some(path) = &args.junit {
        std::fs::write(path, crate::junit::render(&results)).map_err(|e| {
            CliError::infra(format!("--junit {}: cannot write: {e}", path.display()))
        })?;
    }
    if let Some(path) = std::env::var_os("GITHUB_STEP_SUMMARY").filter(|p| !p.is_empty()) {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| {
                CliError::infra(format!(
                    "GITHUB_STEP_SUMMARY {}: {e}",
                    PathBuf::from(&path).display()
                ))
            })?;
        for r in &rendered {
            writeln!(f, "{}\n", r.doc.to_markdown(run_url.as_deref()).trim_end())
                .map_err(|e| CliError::infra(format!("GITHUB_STEP_SUMMARY: cannot write: {e}")))?;
        }
    }

    let Some(issue) = issue else {
        let mut out = std::io::stdout().lock();
        for r in &rendered {
            let body = github::body::assemble(&r.key, &r.doc, Some(&r.state), run_url.as_deref())
                .map_err(|e| e.into_cli())?;
            writeln!(out, "{body}\n")?;
        }
        return Ok(crate::error::exit::FOUND);
    };
    let outcomes = post_rendered(&args.github, &issue, &rendered, run_url.as_deref())?;
    for (r, res) in rendered.iter().zip(outcomes) {
        let verb = match res.action {
            PostAction::Created => "created",
            PostAction::Updated => "updated",
            PostAction::Unchanged => "unchanged",
        };
        println!(
            "{verb} comment {} ({}) on {issue}{}",
            res.comment_id,
            r.key,
            res.html_url.map(|u| format!(": {u}")).unwrap_or_default()
        );
    }
    Ok(crate::error::exit::FOUND)
}
