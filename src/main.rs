use clap::Parser;
use setrows_bisect::{cli, error, probe};

fn main() {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args
        .get(1)
        .is_some_and(|a| a == probe::exec::SUPERVISOR_ARG)
    {
        probe::exec::supervise(&args[2..]);
    }
    // Before anything else (no thread exists yet): credentials leave the environment that
    // probes could read through /proc, and this process becomes non-dumpable.
    probe::secrets::protect_process();
    // Whatever a probe double-forks or setsids away re-parents below us, never to init; every
    // step runs under a supervisor that kills its whole tree on timeout or when we die.
    probe::exec::become_subreaper();
    probe::exec::use_supervisor("/proc/self/exe".into());
    let exit = match cli::Cli::try_parse() {
        Err(e) => cli::render_parse_error(e),
        Ok(parsed) => match cli::run(parsed) {
            Ok(exit) => exit,
            Err(err) => {
                setrows_bisect::errln!("setrows-bisect: error: {err:#}");
                error::Exit::of_error(&err)
            }
        },
    };
    // This run's own ccache dirs: no later run reads them.
    probe::ccache::remove_run_caches();
    std::process::exit(exit.code());
}
