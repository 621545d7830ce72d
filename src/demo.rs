//! `setrows-bisect demo`. (Owned by the core work; being written.)
use clap::Args;

#[derive(Debug, Args)]
pub struct DemoArgs {}

pub fn run(_args: DemoArgs) -> anyhow::Result<i32> {
    Err(crate::error::CliError::infra("demo: not built yet"))
}
