//! `setrows-bisect matrix` and `bisect-config`. (Owned by the matrix/container work; being written.)
use clap::Args;

#[derive(Debug, Args)]
pub struct MatrixArgs {}

#[derive(Debug, Args)]
pub struct BisectConfigArgs {}

pub fn run_matrix(_args: MatrixArgs) -> anyhow::Result<i32> {
    Err(crate::error::CliError::infra("matrix: not built yet"))
}

pub fn run_bisect_config(_args: BisectConfigArgs) -> anyhow::Result<i32> {
    Err(crate::error::CliError::infra("bisect-config: not built yet"))
}
