//! `setrows-bisect completions SHELL` and `setrows-bisect man`: generated from the clap
//! definition, so they cannot drift from `--help`. Both print through `out!`, so a reader that
//! quits early (`| head -1`) ends them with exit 0, as it ends `git log`.

use crate::error::Exit;
use clap::Args;
use std::path::{Path, PathBuf};

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

/// The values a completion script asks the binary for while the user presses TAB: they live
/// in files (the matrix, the tree's ggml.c), not in the clap definition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Candidates {
    /// Configuration ids of the matrix the command line reads (`--matrix`, else the default).
    Config,
    /// The ops of the ggml in the command line's `--repo` (default: the current directory).
    Op,
}

#[derive(Debug, Args)]
pub struct CompleteArgs {
    pub what: Candidates,
    /// The words of the command line being completed, as the shell has them.
    #[arg(last = true, allow_hyphen_values = true)]
    pub words: Vec<String>,
}

/// The flags whose values the bash script asks `complete` for, instead of file names.
const DYNAMIC: [(&str, Candidates); 3] = [
    ("--config", Candidates::Config),
    ("--only", Candidates::Config),
    ("--op", Candidates::Op),
];

/// `cmd` is the whole command line, handed down by the dispatcher that owns it.
pub fn completions(args: CompletionsArgs, mut cmd: clap::Command) -> anyhow::Result<Exit> {
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "setrows-bisect", &mut script);
    let mut script = String::from_utf8(script)?;
    if args.shell == clap_complete::Shell::Bash {
        script = bash(&script);
    }
    out!("{script}");
    Ok(Exit::Ok)
}

/// clap_complete's bash script for a hyphenated name labels its cases `setrows__subcmd__bisect_…`
/// but dispatches to `setrows__bisect_…`, so no subcommand ever completes: the labels are
/// renamed to what the dispatch sets. The flags in [`DYNAMIC`] ask the binary that is being
/// completed (`${COMP_WORDS[0]}`) for their values.
fn bash(script: &str) -> String {
    let mut s = script.replace("setrows__subcmd__bisect", "setrows__bisect");
    let files = "COMPREPLY=($(compgen -f \"${cur}\"))";
    for (flag, what) in DYNAMIC {
        // The helper's own spelling of `what`, as clap parses it back.
        let name = clap::ValueEnum::to_possible_value(&what)
            .map(|v| v.get_name().to_string())
            .unwrap_or_default();
        let ask = format!(
            "COMPREPLY=($(compgen -W \"$(\"${{COMP_WORDS[0]}}\" complete {name} -- \"${{COMP_WORDS[@]}}\" 2>/dev/null)\" -- \"${{cur}}\"))"
        );
        let case = format!("                {flag})\n                    ");
        s = s.replace(&format!("{case}{files}"), &format!("{case}{ask}"));
    }
    s
}

/// `setrows-bisect complete config|op -- WORDS`: one candidate a line. Whatever goes wrong
/// (no matrix, no ggml here) is no candidates, never an error on the user's prompt.
pub fn complete(args: CompleteArgs) -> anyhow::Result<Exit> {
    let after = |flag: &str| {
        args.words
            .iter()
            .position(|w| w == flag)
            .and_then(|i| args.words.get(i + 1))
            .map(PathBuf::from)
    };
    let names: Vec<String> = match args.what {
        Candidates::Config => crate::cli::matrix_file::load_matrix(after("--matrix").as_deref())
            .map(|m| m.configs.into_iter().map(|c| c.id).collect())
            .unwrap_or_default(),
        Candidates::Op => {
            let repo = after("--repo").unwrap_or_else(|| PathBuf::from("."));
            crate::probe::kinds::backend_ops::tree_at(&repo)
                .map(|t| t.ops)
                .unwrap_or_default()
        }
    };
    for n in names {
        outln!("{n}");
    }
    Ok(Exit::Ok)
}

/// Examples for a page, by command name ("" is the top-level page): one line each, so a
/// test can parse every one with the real command line.
pub const EXAMPLES: &[(&str, &[(&str, &str)])] = &[
    (
        "",
        &[
            ("A tour with no setup: a generated repository, bisected on the CPU.", "setrows-bisect demo"),
            (
                "Your own build and test, in place of git bisect run.",
                "setrows-bisect --repo ~/src/ggml --good v0.9.4 --bad master --build 'cmake -S \"$SRC\" -B . && cmake --build . -j' --script './bin/test-backend-ops -o SET_ROWS'",
            ),
            (
                "The set_rows replay in a matrix configuration (ids: setrows-bisect matrix --list).",
                "setrows-bisect --repo ~/src/ggml --good v0.9.4 --bad master --config 2e65ffd7 --regress crash --json result.json",
            ),
            (
                "ggml's own test-backend-ops for one op, on CUDA.",
                "setrows-bisect --repo ~/src/llama.cpp --good b6301 --bad 81017865e^ --probe-kind backend-ops --op REPEAT --backend cuda --gpu-target 90",
            ),
            (
                "An intermittent fault: re-run passes until the answer holds at 95%.",
                "setrows-bisect --repo ~/src/ggml --good v0.9.4 --bad master --config 2e65ffd7 --confidence 0.95",
            ),
            ("What a run would do, without doing it.", "setrows-bisect --repo ~/src/ggml --good v0.9.4 --bad master --config 2e65ffd7 --dry-run"),
        ],
    ),
    (
        "matrix",
        &[
            ("The configurations: id, values, image.", "setrows-bisect matrix --list"),
            ("Run two configurations at master.", "setrows-bisect matrix --repo ~/src/ggml --rev master --only 2e65ffd7,14088324"),
            ("Compile-check every configuration where no GPU exists.", "setrows-bisect matrix --repo ~/src/ggml --build-only"),
        ],
    ),
    (
        "bisect-config",
        &[(
            "The first ROCm version that faults at master, then the commit bisect in it.",
            "setrows-bisect bisect-config --repo ~/src/ggml --axis rocm --rev master --good-rev v0.9.4",
        )],
    ),
    (
        "log",
        &[("The bisections in the work dir.", "setrows-bisect log")],
    ),
    (
        "gc",
        &[(
            "What two weeks of disuse would free, removing nothing.",
            "setrows-bisect gc --older-than 14 --dry-run",
        )],
    ),
    (
        "completions",
        &[(
            "Install bash completion for your user.",
            "setrows-bisect completions bash > ~/.local/share/bash-completion/completions/setrows-bisect",
        )],
    ),
];

/// One command's page: clap_mangen's, with an EXAMPLES section before VERSION.
fn page(cmd: clap::Command, examples: &[(&str, &str)]) -> std::io::Result<String> {
    let mut roff = Vec::new();
    clap_mangen::Man::new(cmd).render(&mut roff)?;
    let roff = String::from_utf8_lossy(&roff).into_owned();
    if examples.is_empty() {
        return Ok(roff);
    }
    let mut section = String::from(".SH EXAMPLES\n");
    for (what, line) in examples {
        section.push_str(&format!(
            ".PP\n{}\n.PP\n.RS 4\n.nf\n{}\n.fi\n.RE\n",
            roff_text(what),
            roff_text(line)
        ));
    }
    Ok(match roff.find(".SH VERSION") {
        Some(at) => format!("{}{section}{}", &roff[..at], &roff[at..]),
        None => roff + &section,
    })
}

/// Text as roff shows it literally: backslashes and hyphens escaped, no control line.
fn roff_text(s: &str) -> String {
    let s = s.replace('\\', "\\e").replace('-', "\\-");
    match s.starts_with(['.', '\'']) {
        true => format!("\\&{s}"),
        false => s,
    }
}

fn examples_of(name: &str) -> &'static [(&'static str, &'static str)] {
    EXAMPLES
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(&[][..], |(_, e)| e)
}

/// `cmd` is the whole command line, as for [`completions`].
pub fn man(args: ManArgs, cmd: clap::Command) -> anyhow::Result<Exit> {
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    match args.out_dir {
        Some(dir) => {
            // The user's path: a bad one is exit 2 naming it, found before anything is written.
            crate::cli::output::check_dir_writable("--out-dir", &dir)?;
            let failed = |e: std::io::Error| {
                crate::error::CliError::infra(format!("--out-dir {}: {e}", dir.display()))
            };
            std::fs::create_dir_all(&dir).map_err(failed)?;
            write_pages(&cmd, "", &dir).map_err(failed)?;
            errln!("setrows-bisect: man pages written to {}", dir.display());
        }
        None => out!("{}", page(cmd, examples_of(""))?),
    }
    Ok(Exit::Ok)
}

/// One page per visible command, named as clap_mangen names them (`setrows-bisect-log.1`).
fn write_pages(cmd: &clap::Command, name: &str, dir: &Path) -> std::io::Result<()> {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_pages(sub, sub.get_name(), dir)?;
    }
    let file = dir.join(clap_mangen::Man::new(cmd.clone()).get_filename());
    std::fs::write(file, page(cmd.clone(), examples_of(name))?)
}

#[cfg(test)]
mod tests;
