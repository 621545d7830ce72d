//! `setrows-bisect log`: the bisections in the work dir, from their journals (like `git bisect
//! log`, for every bisection at once): id, range, configuration, state and answer.

use crate::error::{CliError, Exit};
use crate::run::workdir;
use clap::Args;

#[derive(Debug, Args)]
pub struct LogArgs {
    /// `--work-dir`.
    #[command(flatten)]
    pub work_dir: crate::cli::flags::WorkDirFlag,
    /// Print JSON lines (one object per bisection) instead of the table.
    #[arg(long)]
    pub json: bool,
}

use crate::core::range::short_sha as short;

pub fn run(args: LogArgs) -> anyhow::Result<Exit> {
    let dir = args.work_dir.dir();
    let all = workdir::list(&dir).map_err(|e| CliError::infra(e.to_string()))?;
    if args.json {
        for b in &all {
            let v = serde_json::json!({
                "id": b.id, "started": b.started, "good": b.good, "bad": b.bad,
                "candidates": b.candidates, "predicate": b.predicate,
                "configuration": b.configuration(), "state": b.state(),
                "answer": b.answer(), "probes": b.probes.len(),
                "earlier_runs": b.earlier_runs, "earlier_probes": b.earlier_probes,
                "first_bad": b.result.as_ref().and_then(|r| r.first_bad.clone()),
            });
            outln!("{v}");
        }
        return Ok(Exit::Ok);
    }
    if all.is_empty() {
        outln!("no bisections in {}", dir.display());
        return Ok(Exit::Ok);
    }
    outln!(
        "{:<16}  {:<20}  {:<23}  {:<24}  {:<10}  {:<28}  configuration",
        "id",
        "started",
        "range (good..bad)",
        "probes",
        "state",
        "answer"
    );
    for b in &all {
        outln!(
            "{:<16}  {:<20}  {:<23}  {:<24}  {:<10}  {:<28}  {}",
            b.id,
            b.started.chars().take(19).collect::<String>(),
            format!("{}..{}", short(&b.good), short(&b.bad)),
            probes(b),
            b.state(),
            b.answer(),
            b.configuration()
        );
    }
    outln!("\nsetrows-bisect show ID prints one's report (a unique prefix of ID will do)");
    Ok(Exit::Ok)
}

/// The last run's probes, as its report counts them; earlier runs of the same command are
/// named apart, since a re-run journals again every stored probe it replays.
fn probes(b: &workdir::Bisection) -> String {
    match b.earlier_runs {
        0 => b.probes.len().to_string(),
        runs => format!(
            "{} (+{} in {runs} earlier run{})",
            b.probes.len(),
            b.earlier_probes,
            if runs == 1 { "" } else { "s" }
        ),
    }
}
