//! `setrows-bisect fan-out`: decide which bisects a matrix run's new failures start
//! (core::fanout), write the record, and print one dispatch line per bisect for the workflow.
//! The decision is the pure core's; this file only reads, writes and prints.

use crate::core::fanout;
use crate::core::result::AnyResult;
use crate::error::{CliError, Exit};
use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct FanOutArgs {
    /// Matrix result files (`matrix-results.json`) of this run; none: no new failure, and the
    /// record carries the previous one's entries on.
    #[arg(value_parser = crate::cli::output::absolute, long, num_args = 1.., value_name = "FILE")]
    pub results: Vec<PathBuf>,
    /// The previous fan-out record (`--json` of an earlier run): each configuration's last pass
    /// (tonight's failures pair with it), and the bisects it started.
    #[arg(value_parser = crate::cli::output::absolute, long, value_name = "FILE")]
    pub previous: Option<PathBuf>,
    /// Results of bisects that reported (`finished.json` of bisect.yml's `bisect-finished`
    /// artifact): only a range with a result counts as bisected; one started without a result
    /// is started again.
    #[arg(value_parser = crate::cli::output::absolute, long, num_args = 1.., value_name = "FILE")]
    pub finished: Vec<PathBuf>,
    /// Start at most N bisects (0 to 64); the other ranges are named "not bisected: over the cap".
    #[arg(long, value_name = "N", value_parser = max_bisects, allow_negative_numbers = true)]
    pub max_bisects: usize,
    /// Whether the bisects started post their verdicts (`true` or `false`): recorded, since a
    /// bisect that did not post does not count as done for a run that posts.
    #[arg(long, value_name = "BOOL", action = clap::ArgAction::Set)]
    pub bisect_post: bool,
    /// Write the fan-out record here (JSON; the next run's --previous).
    #[arg(value_parser = crate::cli::output::absolute, long, value_name = "FILE")]
    pub json: PathBuf,
}

fn max_bisects(s: &str) -> Result<usize, String> {
    crate::cli::ranges::int(s, 0, 64).map(|v| v as usize)
}

pub fn run(args: FanOutArgs) -> anyhow::Result<Exit> {
    crate::cli::output::check_writable("--json", &args.json)?;
    let previous = match &args.previous {
        Some(p) => Some(crate::cli::documents::read_record("--previous", p)?),
        None => None,
    };
    let finished = args
        .finished
        .iter()
        .map(|p| crate::cli::documents::read_finished("--finished", p))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let results = crate::cli::documents::read_results(&args.results)?;
    let mut matrices = Vec::new();
    for (r, p) in results.iter().zip(&args.results) {
        match r {
            AnyResult::Matrix(m) => matrices.push(m),
            _ => {
                return Err(CliError::usage(format!(
                    "--results {}: not a matrix result (matrix-results.json)",
                    p.display()
                )))
            }
        }
    }
    let record = fanout::plan(
        &matrices,
        previous.as_ref(),
        &finished,
        args.max_bisects,
        args.bisect_post,
    );
    crate::cli::output::write(
        "--json",
        &args.json,
        format!("{}\n", serde_json::to_string_pretty(&record)?).as_bytes(),
    )?;
    // One line per bisect: the configuration that runs it, good, bad, then the others that
    // share the range (comma-separated; `-` for none).
    for g in &record.started {
        let others = g.configs[1..].join(",");
        outln!(
            "{} {} {} {}",
            g.representative(),
            g.good,
            g.bad,
            if others.is_empty() { "-" } else { &others }
        );
    }
    if !record.compared {
        errln!("setrows-bisect: fan-out: {}", fanout::NO_EARLIER);
    }
    let n = |gs: &[fanout::Group]| gs.iter().map(|g| g.configs.len()).sum::<usize>();
    errln!(
        "setrows-bisect: fan-out: {} bisects started ({} configurations), {} ranges not bisected: over the cap ({} configurations), {} ranges already bisected ({} configurations), {} ranges started again: started, not finished ({} configurations)",
        record.started.len(),
        n(&record.started),
        record.over_cap.len(),
        n(&record.over_cap),
        record.already_bisected.len(),
        n(&record.already_bisected),
        record.unfinished.len(),
        n(&record.unfinished)
    );
    Ok(Exit::Ok)
}
