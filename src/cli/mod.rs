//! The command line, in one place: subcommands and where each one's flags live.
//! `setrows-bisect --good X --bad Y` (no subcommand) is `bisect`.

pub mod bisect;
pub mod choices;
pub mod demo;
pub mod documents;
pub mod fanout;
pub mod flags;
pub mod gc;
pub mod generate;
pub mod log;
pub mod matrix;
pub mod matrix_file;
pub mod output;
pub mod progress;
pub mod ranges;
pub mod report;
pub mod schema;
pub mod show;

use clap::{CommandFactory, Parser, Subcommand};

/// The line `-h` ends a bisect's help with: the sections only `--help` shows.
macro_rules! bisect_more_help {
    () => {
        "All options: --help. One command's: setrows-bisect help COMMAND. The book: docs/SUMMARY.md."
    };
}

#[derive(Debug, Parser)]
#[command(
    name = "setrows-bisect",
    version = concat!(env!("CARGO_PKG_VERSION"), " (", env!("SETROWS_BISECT_COMMIT"), ")"),
    about = "Find which ggml commit and which configuration makes a GPU kernel fail",
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true,
    arg_required_else_help = true,
    after_help = concat!(
        "Without a command, the flags are bisect's. New here? Try: setrows-bisect demo\n",
        bisect_more_help!()
    ),
    after_long_help = "Without a subcommand, the flags are `bisect`'s: `setrows-bisect --good REV --bad REV ...`.\n`setrows-bisect demo` bisects a generated repository with no setup."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub bisect: crate::cli::bisect::BisectArgs,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Find the first commit whose behaviour changed (the default command).
    #[command(after_help = bisect_more_help!(), after_long_help = "")]
    Bisect(crate::cli::bisect::BisectArgs),
    /// Bisect a generated repository in a temp dir: a tour with no setup.
    Demo(crate::cli::demo::DemoArgs),
    /// List or run the configuration matrix (matrix.toml).
    #[command(
        after_help = "All options (probes, containers, GitHub posting): --help. The book: docs/SUMMARY.md.",
        after_long_help = ""
    )]
    Matrix(crate::cli::matrix::MatrixArgs),
    /// Find the first failing value of one configuration axis at one commit.
    #[command(
        after_help = "All options (the commit bisect's, GitHub posting): --help. The book: docs/SUMMARY.md.",
        after_long_help = ""
    )]
    BisectConfig(crate::cli::matrix::BisectConfigArgs),
    /// Decide which bisects a matrix run's new failures start (CI).
    ///
    /// One bisect per first failing revision pair, at most --max-bisects, none already
    /// bisected; prints one line per bisect.
    FanOut(crate::cli::fanout::FanOutArgs),
    /// Render stored results; with --post, keep one GitHub comment current.
    Report(crate::cli::report::ReportArgs),
    /// Print the JSON Schema of a result document.
    Schema(crate::cli::schema::SchemaArgs),
    /// List the bisections in the work dir.
    Log(crate::cli::log::LogArgs),
    /// Print one bisection's report again (nothing is probed).
    Show(crate::cli::show::ShowArgs),
    /// Remove checkouts, build dirs and ccache unused for N days.
    Gc(crate::cli::gc::GcArgs),
    /// Print a shell completion script.
    Completions(crate::cli::generate::CompletionsArgs),
    /// Print the man page, or write one per command with --out-dir.
    Man(crate::cli::generate::ManArgs),
    /// The values a completion script offers for --config, --only and --op (one a line).
    #[command(hide = true)]
    Complete(crate::cli::generate::CompleteArgs),
}

/// Runs the parsed command; returns how the process ends.
pub fn run(cli: Cli) -> anyhow::Result<crate::error::Exit> {
    match cli.command {
        None => crate::cli::bisect::run(cli.bisect),
        Some(Command::Bisect(a)) => crate::cli::bisect::run(a),
        Some(Command::Demo(a)) => crate::cli::demo::run(a),
        Some(Command::Matrix(a)) => crate::cli::matrix::run_matrix(a),
        Some(Command::BisectConfig(a)) => crate::cli::matrix::run_bisect_config(a),
        Some(Command::FanOut(a)) => crate::cli::fanout::run(a),
        Some(Command::Report(a)) => crate::cli::report::run(a),
        Some(Command::Schema(a)) => crate::cli::schema::run(a),
        Some(Command::Log(a)) => crate::cli::log::run(a),
        Some(Command::Show(a)) => crate::cli::show::run(a),
        Some(Command::Gc(a)) => crate::cli::gc::run(a),
        Some(Command::Completions(a)) => crate::cli::generate::completions(a, Cli::command()),
        Some(Command::Man(a)) => crate::cli::generate::man(a, Cli::command()),
        Some(Command::Complete(a)) => crate::cli::generate::complete(a),
    }
}

/// Prints a command-line parse error as the tool prints its own (`setrows-bisect: error: ...`,
/// one line) and returns how the process ends; `--help` and `--version` keep clap's output as is.
pub fn render_parse_error(e: clap::Error) -> crate::error::Exit {
    use clap::error::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        let _ = e.print();
    } else {
        errln!("setrows-bisect: error: {}", one_line_parse_error(&e));
    }
    crate::error::Exit::of_parse_error(&e)
}

/// clap's message up to its usage/tip part, on one line, without the `error: ` prefix.
pub fn one_line_parse_error(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let mut parts = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() {
            if parts.is_empty() {
                continue;
            }
            break;
        }
        if line.starts_with("Usage:") || line.starts_with("tip:") || line.starts_with("For more") {
            break;
        }
        parts.push(line.strip_prefix("error: ").unwrap_or(line).to_string());
    }
    let mut s = parts.join(" ");
    if s.is_empty() {
        s = "invalid command line".into();
    }
    // clap's "a similar argument exists" tip is on a line of its own, which the cut above drops;
    // a typo's answer is the one thing the user needs from this line.
    if let Some(near) = suggestion(e) {
        s.push_str(&format!("; did you mean '{near}'?"));
    }
    format!("{s} (see --help)")
}

/// The flag, value or command clap found close to what was typed.
fn suggestion(e: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ContextValue};
    [
        ContextKind::SuggestedArg,
        ContextKind::SuggestedValue,
        ContextKind::SuggestedSubcommand,
    ]
    .into_iter()
    .find_map(|k| match e.get(k)? {
        ContextValue::String(v) => Some(v.clone()),
        ContextValue::Strings(v) => Some(v.first()?.clone()),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_errors_are_one_line() {
        let e = Cli::try_parse_from([
            "setrows-bisect",
            "bisect",
            "--good",
            "a",
            "--bad",
            "b",
            "--timeout",
            "1e20",
        ])
        .unwrap_err();
        let line = one_line_parse_error(&e);
        assert!(
            !line.contains('\n') && line.contains("--timeout") && line.contains("out of range"),
            "{line}"
        );
        let e = Cli::try_parse_from(["setrows-bisect", "bisect", "--good", "a"]).unwrap_err();
        let line = one_line_parse_error(&e);
        assert!(!line.contains('\n') && line.contains("--bad"), "{line}");
        // A typo keeps clap's suggestion, on the same line.
        for (typed, meant) in [
            (
                &["--good", "a", "--bad", "b", "--dryrun"][..],
                "'--dry-run'",
            ),
            (
                &["--good", "a", "--bad", "b", "--scirpt", "x"][..],
                "'--script'",
            ),
            (
                &["--good", "a", "--bad", "b", "--regress", "crsh"][..],
                "'crash'",
            ),
            (&["matrix", "--lsit"][..], "'--list'"),
            (
                &["--good", "a", "--bad", "b", "--memory", "unifed"][..],
                "'unified'",
            ),
            (&["matrix", "--graph", "ds"][..], "'ds4'"),
        ] {
            let argv = std::iter::once("setrows-bisect").chain(typed.iter().copied());
            let line = one_line_parse_error(&Cli::try_parse_from(argv).unwrap_err());
            assert!(
                !line.contains('\n') && line.contains(&format!("did you mean {meant}?")),
                "{typed:?}: {line}"
            );
        }
    }
}
