//! `setrows-bisect [bisect]`: the driver. (Owned by the core work; being written.)
use clap::Args;

#[derive(Debug, Args)]
pub struct BisectArgs {
    /// A revision with the old behaviour.
    #[arg(long, required = true)]
    pub good: Option<String>,
    /// A revision with the new behaviour.
    #[arg(long, required = true)]
    pub bad: Option<String>,
}

pub fn run(_args: BisectArgs) -> anyhow::Result<i32> {
    Err(crate::error::CliError::infra("bisect: not built yet"))
}
