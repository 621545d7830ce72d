//! The command line, in one place: subcommands and where each one's flags live.
//! `setrows-bisect --good X --bad Y` (no subcommand) is `bisect`.

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "setrows-bisect",
    version,
    about = "Find which ggml commit and which configuration makes a GPU kernel fail",
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub bisect: crate::bisect::BisectArgs,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Bisect history for the first commit whose behaviour changed (the default command).
    Bisect(crate::bisect::BisectArgs),
    /// Build a small real repository in a temp dir and bisect it: a tour with no setup.
    Demo(crate::demo::DemoArgs),
    /// Expand or run the configuration matrix (matrix.toml).
    Matrix(crate::matrix_cmd::MatrixArgs),
    /// Find the first failing value along one configuration axis at a fixed commit.
    BisectConfig(crate::matrix_cmd::BisectConfigArgs),
    /// Render stored results as markdown and (with --post) keep one GitHub issue comment current.
    Report(crate::report_cmd::ReportArgs),
}

/// Runs the parsed command; returns the process exit code.
pub fn run(cli: Cli) -> anyhow::Result<i32> {
    match cli.command {
        None => crate::bisect::run(cli.bisect),
        Some(Command::Bisect(a)) => crate::bisect::run(a),
        Some(Command::Demo(a)) => crate::demo::run(a),
        Some(Command::Matrix(a)) => crate::matrix_cmd::run_matrix(a),
        Some(Command::BisectConfig(a)) => crate::matrix_cmd::run_bisect_config(a),
        Some(Command::Report(a)) => crate::report_cmd::run(a),
    }
}
