//! The command line, in one place: subcommands and where each one's flags live.
//! `setrows-bisect --good X --bad Y` (no subcommand) is `bisect`.

pub mod bisect;
pub mod demo;
pub mod matrix;
pub mod report;
pub mod schema;

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
    pub bisect: crate::cli::bisect::BisectArgs,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Bisect history for the first commit whose behaviour changed (the default command).
    Bisect(crate::cli::bisect::BisectArgs),
    /// Build a small real repository in a temp dir and bisect it: a tour with no setup.
    Demo(crate::cli::demo::DemoArgs),
    /// Expand or run the configuration matrix (matrix.toml).
    Matrix(crate::cli::matrix::MatrixArgs),
    /// Find the first failing value along one configuration axis at a fixed commit.
    BisectConfig(crate::cli::matrix::BisectConfigArgs),
    /// Render stored results as markdown and (with --post) keep one GitHub issue comment current.
    Report(crate::cli::report::ReportArgs),
    /// Print the JSON Schema of a result document (bisect, matrix, bisect-config).
    Schema(crate::cli::schema::SchemaArgs),
}

/// Runs the parsed command; returns the process exit code.
pub fn run(cli: Cli) -> anyhow::Result<i32> {
    match cli.command {
        None => crate::cli::bisect::run(cli.bisect),
        Some(Command::Bisect(a)) => crate::cli::bisect::run(a),
        Some(Command::Demo(a)) => crate::cli::demo::run(a),
        Some(Command::Matrix(a)) => crate::cli::matrix::run_matrix(a),
        Some(Command::BisectConfig(a)) => crate::cli::matrix::run_bisect_config(a),
        Some(Command::Report(a)) => crate::cli::report::run(a),
        Some(Command::Schema(a)) => crate::cli::schema::run(a),
    }
}

/// `--regress` values. The vocabulary lives in the pure core, which does not know clap; the
/// command line spells it here, with the words the help shows.
impl clap::ValueEnum for crate::core::outcome::Regress {
    fn value_variants<'a>() -> &'a [Self] {
        use crate::core::outcome::Regress::*;
        &[Error, Success, Crash]
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        use crate::core::outcome::Regress::*;
        use clap::builder::PossibleValue;
        Some(match self {
            Error => PossibleValue::new("error").help(
                "New = any failure (wrong result, fault, crash, hang). Finds the first bad commit",
            ),
            Success => PossibleValue::new("success")
                .help("New = success; old = failing. Finds the commit that fixed it"),
            Crash => PossibleValue::new("crash").help(
                "New = a crash or GPU fault (signals/aborts) only; wrong results and hangs count as old",
            ),
        })
    }
}
