use clap::Parser;
use setrows_bisect::{cli, error};

fn main() {
    let parsed = cli::Cli::parse();
    let code = match cli::run(parsed) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("setrows-bisect: error: {err:#}");
            error::exit_code(&err)
        }
    };
    std::process::exit(code);
}
