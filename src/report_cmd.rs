//! `setrows-bisect report`. (Owned by the GitHub work; being written.)
use clap::Args;

#[derive(Debug, Args)]
pub struct ReportArgs {}

pub fn run(_args: ReportArgs) -> anyhow::Result<i32> {
    Err(crate::error::CliError::infra("report: not built yet"))
}
