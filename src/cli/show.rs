//! `setrows-bisect show ID`: one bisection's report, re-rendered from the work dir (its saved
//! result, else its journal); nothing is probed.

use crate::core::result::AnyResult;
use crate::error::{CliError, Exit};
use crate::run::workdir::{self, WorkDirError};
use clap::{Args, ValueEnum};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ShowFormat {
    /// The report as the terminal shows it (pictures as text).
    Markdown,
    /// The report as the GitHub comment shows it (mermaid pictures).
    Github,
    /// The saved result document (`setrows-bisect/bisect/1`).
    Json,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The bisection's id, or a unique prefix of it (`setrows-bisect log` lists them).
    #[arg(value_name = "ID")]
    pub id: String,
    /// `--work-dir`.
    #[command(flatten)]
    pub work_dir: crate::cli::flags::WorkDirFlag,
    /// What to print.
    #[arg(long, value_enum, default_value_t = ShowFormat::Markdown, value_name = "FORMAT")]
    pub format: ShowFormat,
}

pub fn run(args: ShowArgs) -> anyhow::Result<Exit> {
    let dir = args.work_dir.dir();
    let b = workdir::find(&dir, &args.id).map_err(|e| match e {
        WorkDirError::Io { .. } => CliError::infra(e.to_string()),
        _ => CliError::usage(e.to_string()),
    })?;
    let Some(result) = &b.result else {
        if args.format == ShowFormat::Json {
            return Err(CliError::usage(format!(
                "bisection {} has no saved result (it is unfinished, or was written by an older version); its journal is {}",
                b.id,
                b.journal.display()
            )));
        }
        out!("{}", from_journal(&b));
        return Ok(Exit::Ok);
    };
    match args.format {
        ShowFormat::Json => outln!("{}", serde_json::to_string_pretty(result)?),
        ShowFormat::Markdown => outln!("{}", crate::report::bisect::markdown(result)),
        ShowFormat::Github => {
            let any = AnyResult::Bisect(Box::new(result.clone()));
            outln!("{}", crate::report::render(&[&any]).to_markdown(None));
        }
    }
    Ok(Exit::Ok)
}

/// What the journal alone says: the range, every probe in order, and the state.
fn from_journal(b: &workdir::Bisection) -> String {
    let mut s = format!(
        "## setrows-bisect: bisection {} ({})\n\n- range: good {} .. bad {}, {} candidates\n- predicate: {}\n- answer: {}\n\n| # | commit | outcome | verdict |\n|---|---|---|---|\n",
        b.id,
        b.state(),
        b.good,
        b.bad,
        b.candidates,
        b.predicate,
        b.answer()
    );
    for (i, p) in b.probes.iter().enumerate() {
        s.push_str(&format!(
            "| {} | `{}` | {}{} | {} |\n",
            i + 1,
            &p.sha[..p.sha.len().min(10)],
            p.outcome
                .map(|o| o.to_string())
                .unwrap_or_else(|| "?".into()),
            if p.cached { " (stored)" } else { "" },
            p.verdict
                .map(|v| v.to_string())
                .unwrap_or_else(|| "?".into())
        ));
    }
    if b.earlier_runs > 0 {
        s.push_str(&format!(
            "\nThe probes of the last run; {} earlier run(s) of the same command journaled {} more.\n",
            b.earlier_runs, b.earlier_probes
        ));
    }
    if b.conclusion.is_none() {
        s.push_str("\nUnfinished: re-run the same bisect command to resume it (stored probes are replayed).\n");
    }
    s
}
