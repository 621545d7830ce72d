//! `setrows-bisect completions SHELL` and `setrows-bisect man`: generated from the clap
//! definition, so they cannot drift from `--help`.

use clap::{Args, CommandFactory};
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum, value_name = "SHELL")]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write one page per command (setrows-bisect.1, setrows-bisect-log.1, ...) into DIR
    /// instead of printing the top-level page.
    #[arg(value_parser = crate::cli::output::absolute, long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
}

pub fn completions(args: CompletionsArgs) -> anyhow::Result<i32> {
    let mut cmd = crate::cli::Cli::command();
    clap_complete::generate(
        args.shell,
        &mut cmd,
        "setrows-bisect",
        &mut std::io::stdout(),
    );
    Ok(0)
}

pub fn man(args: ManArgs) -> anyhow::Result<i32> {
    let cmd = crate::cli::Cli::command();
    match args.out_dir {
        Some(dir) => {
            // The user's path: a bad one is exit 2 naming it, found before anything is written.
            crate::cli::output::check_dir_writable("--out-dir", &dir)?;
            let failed = |e: std::io::Error| {
                crate::error::CliError::infra(format!("--out-dir {}: {e}", dir.display()))
            };
            std::fs::create_dir_all(&dir).map_err(failed)?;
            clap_mangen::generate_to(cmd, &dir).map_err(failed)?;
            errln!("setrows-bisect: man pages written to {}", dir.display());
        }
        None => clap_mangen::Man::new(cmd).render(&mut std::io::stdout())?,
    }
    Ok(0)
}
