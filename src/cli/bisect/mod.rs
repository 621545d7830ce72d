//! `setrows-bisect [bisect]`: the command-line edge of a commit bisection. `request` turns the
//! flags into a `run::bisect::Request`, and every input is checked there (exit 2, one line
//! naming the flag and the fix) before anything is checked out, built, started or made.
//! `run::bisect` prepares and executes the request and assembles the result document; here it
//! is rendered, written (`--report`, `--json`) and published (`--post-to`). The verdict decides
//! 0 (found) or 1 (inconclusive); errors leave as `CliError` (2 input, 3 machinery).

mod args;
pub(crate) use args::bundled_kind;
mod config;
mod dry_run;
mod placement;
mod settings;

pub use args::{heading, BisectArgs, ConfigFlags};
pub use settings::SettingsFlags;

use crate::core::result::BisectResult;
use crate::error::{CliError, Exit};
use crate::report::bisect as report;
use crate::run::bisect::{check, git_error, Done, Mode, PlanFacts, Prepared, Request};
use crate::run::git;
use std::path::Path;

/// Where a bisection's result goes besides the document `run_request` returns.
pub struct Outputs<'a> {
    /// `--report FILE`: the markdown.
    pub report: Option<&'a Path>,
    /// `--json FILE` (`-`: standard output).
    pub json: Option<&'a Path>,
    /// The report goes to standard output too.
    pub print: bool,
    /// `--post-to` (and `--resume-from-issue`, which the request carries read: only a dry
    /// run's plan names it here).
    pub github: &'a crate::cli::report::BisectPostArgs,
}

pub fn run(args: BisectArgs) -> anyhow::Result<Exit> {
    crate::probe::exec::install_interrupt_handler();
    let req = request(&args)?;
    let outputs = Outputs {
        report: args.report.as_deref(),
        json: args.json.as_deref(),
        print: true,
        github: &args.github,
    };
    run_request(&req, &outputs).map(|(code, _)| code)
}

/// THE flags -> request function: every input of a bisect is checked here, in the order a user
/// reads the command line, before any checkout, build, container or directory exists.
pub fn request(args: &BisectArgs) -> anyhow::Result<Request> {
    // Issue and token (exit 2), not after hours of probing; output paths too: an unwritable
    // --json must not be found after the last probe.
    args.github.check()?;
    check_outputs(args.report.as_deref(), args.json.as_deref())?;
    let good = args
        .good
        .as_deref()
        .ok_or_else(|| CliError::usage("--good REV is required"))?;
    let bad = args
        .bad
        .as_deref()
        .ok_or_else(|| CliError::usage("--bad REV is required"))?;
    // Counts, --timeout and --confidence were checked by their flags' parsers
    // (`cli::ranges`): one rule each, for every command that takes them.
    let predicate = args.question.predicate()?;
    build_question(args)?;
    let mut chosen = config::choose(args)?;
    chosen.cfg.build_only = args.question.regress.build_only();
    if chosen.cfg.build_only && chosen.cfg.probe.def().nothing_to_build(&chosen.cfg.probe) {
        return Err(CliError::usage(
            "--regress build: the configuration's probe is a script without a build command; pass --build CMD",
        ));
    }
    placement::check_flags(chosen.engine, chosen.cfg.image.as_deref())?;
    if args.compare_good {
        if !chosen.cfg.probe.def().compares_logits() {
            return Err(CliError::usage(
                "--compare-good compares the decode probe's logits: add --probe-kind decode (llama.cpp trees), or drop --compare-good",
            ));
        }
        if chosen.cfg.build_only {
            return Err(CliError::usage(
                "--compare-good and --regress build: a build-only probe decodes nothing to compare; drop one",
            ));
        }
    }
    let work_dir = args.work_dir.dir();
    if !args.dry_run {
        crate::cli::output::check_dir_writable("--work-dir", &work_dir)?;
    }
    let repo = git::open(&args.repo.repo).map_err(git_error)?;
    let mode = match (&args.probe, args.plan_only, args.dry_run) {
        // Any revision git takes (HEAD, a tag, a short sha), resolved once here.
        (Some(rev), _, _) => Mode::Probe {
            sha: git::resolve(&repo, rev, "--probe")
                .map_err(git_error)?
                .to_string(),
            run_index: args.run_index,
        },
        (None, true, _) => Mode::PlanOnly,
        (None, false, true) => Mode::DryRun,
        (None, false, false) => Mode::Run,
    };
    // `--plan-only` and `--probe` print JSON and render no report and no verdict: what only a
    // bisection has would be dropped without a word.
    if matches!(mode, Mode::Probe { .. } | Mode::PlanOnly) {
        let which = if args.plan_only {
            "--plan-only"
        } else {
            "--probe"
        };
        if args.report.is_some() {
            return Err(CliError::usage(format!(
                "--report and {which}: {which} prints JSON and writes no report; drop --report (--json FILE takes the JSON)"
            )));
        }
        if args.flaky.validate > 0 {
            return Err(CliError::usage(format!(
                "--validate and {which}: validation follows a verdict, and {which} reaches none; drop --validate"
            )));
        }
    }
    // Last, the revisions in the repository (`run::bisect::check`), and the applied patches
    // read from it once (every probe applies the same bytes).
    let (good, bad) = check::revisions(&repo, (good, bad), ("--good", "--bad"))?;
    chosen.cfg.applied = args.apply.read(&args.repo.repo)?;
    let path = check::subtree(
        &repo,
        bad,
        args.walk.path.as_deref(),
        "--path",
        "bad commit",
    )?;
    // The tree the kind needs at the bad commit, as its definition says.
    use crate::core::kinds::Needs;
    match chosen.cfg.probe.def().needs() {
        Needs::Ggml => check::ggml_tree(&repo, bad)?,
        Needs::Llama => check::llama_tree(&repo, bad)?,
        Needs::TestBackendOps => {
            let ops = chosen.cfg.probe.backend_ops().map_or(&[][..], |(o, _)| o);
            check::backend_ops_tree(&repo, bad, ops)?
        }
        Needs::Nothing => {}
    }
    let mut req = Request {
        repo: args.repo.repo.clone(),
        good,
        bad,
        first_parent: !args.walk.no_first_parent,
        path,
        predicate,
        runs: args.flaky.runs(),
        jobs: args.jobs.jobs,
        endpoints: args.walk.endpoints(),
        validate: args.flaky.validate,
        compare_good: args.compare_good,
        work_dir,
        chosen,
        mode,
        resume: None,
    };
    // Last of all, GitHub: the token checked on the issues this run talks to (a refused one is
    // exit 2 now, not after the last probe), then the state block
    // (`--resume-from-issue`), an input like the repository, read once every flag is known
    // good; `prepare` seeds the store with it. A dry run asks GitHub nothing.
    if req.mode != Mode::DryRun {
        args.github.verify(req.mode == Mode::Run)?;
    }
    req.resume = args.github.resume(&req)?;
    Ok(req)
}

/// `--report` and `--json` can be written (nothing is made now), and not both to standard
/// output: markdown followed by JSON on one stream is neither, and a reader could parse none.
pub fn check_outputs(report: Option<&Path>, json: Option<&Path>) -> anyhow::Result<()> {
    let dash = Some(Path::new("-"));
    if report == dash && json == dash {
        return Err(CliError::usage(
            "--report - and --json - both name standard output: write one of them to a file",
        ));
    }
    if let Some(path) = report {
        crate::cli::output::check_writable("--report", path)?;
    }
    if let Some(path) = json {
        crate::cli::output::check_writable("--json", path)?;
    }
    Ok(())
}

/// `--regress build` asks whether the build fails, so nothing may run a test: `--script` is
/// refused (one line, exit 2) rather than ignored, since a user who gave one expects it to
/// run; `--build` alone is that question's own build. Re-running a build of one tree gives the
/// same answer (the build dir is reused), so the flaky policies are refused too. Without
/// `--regress build`, `--build` still needs `--script`.
fn build_question(args: &BisectArgs) -> anyhow::Result<()> {
    if !args.question.regress.build_only() {
        if args.script.is_none() && args.build.is_some() {
            return Err(CliError::usage(
                "--build needs --script (the bundled reproducer builds itself), or --regress build to ask only whether it builds",
            ));
        }
        return Ok(());
    }
    if args.script.is_some() {
        return Err(CliError::usage(
            "--regress build runs no test: drop --script (the build command is --build; without it the bundled reproducer's build is probed)",
        ));
    }
    if args.flaky.reruns() {
        return Err(CliError::usage(
            "--regress build: a build is run once per commit (rebuilding the same tree gives the same answer); drop --confidence/--repeat",
        ));
    }
    Ok(())
}

/// A checked request, carried out: prepared (the store seeded from the issue when the request
/// carries its state) and carried out by `run::bisect`; what it gives back is delivered here.
/// Returns the exit code and, after a bisection, its result.
pub fn run_request(req: &Request, out: &Outputs) -> anyhow::Result<(Exit, Option<BisectResult>)> {
    let events = crate::cli::progress::stderr()?;
    let p = crate::run::bisect::prepare(req, events)?;
    let done = crate::run::bisect::carry_out(&p, &req.mode, events)?;
    deliver(&p, done, out)
}

/// What a carried-out request gave back, at the edge: the plan said and written, the JSON of
/// `--plan-only`/`--probe` written to `--json FILE` (`-` or none: standard output), a
/// bisection's result published.
fn deliver(
    p: &Prepared,
    done: Done,
    out: &Outputs,
) -> anyhow::Result<(Exit, Option<BisectResult>)> {
    match done {
        Done::Result(result) => publish(p, &result, out).map(|code| (code, Some(*result))),
        Done::Planned(facts) => plan(p, &facts, out).map(|code| (code, None)),
        Done::Json(v) => {
            let text = serde_json::to_string_pretty(&v).unwrap_or_default();
            match out.json.filter(|p| *p != Path::new("-")) {
                Some(path) => crate::cli::output::write("--json", path, (text + "\n").as_bytes())?,
                None => outln!("{text}"),
            }
            Ok((Exit::Ok, None))
        }
    }
}

/// `--dry-run`: the plan's text printed, and written where `--report`/`--json` ask.
fn plan(p: &Prepared, facts: &PlanFacts, out: &Outputs) -> anyhow::Result<Exit> {
    let text = dry_run::dry_run(p, facts, out.github)?;
    // `--json FILE` gets the plan (`core::result::PlanDocument`), never nothing at all.
    if let Some(path) = out.json {
        let body = serde_json::to_string_pretty(&facts.document).unwrap_or_default() + "\n";
        crate::cli::output::write("--json", path, body.as_bytes())?;
        if path == Path::new("-") {
            errln!("{text}");
            return Ok(Exit::Ok);
        }
        errln!("setrows-bisect: the plan's JSON is in {}", path.display());
    }
    // `--report FILE` gets the plan's text: a dry run writes what it was asked to.
    if let Some(path) = out.report {
        crate::cli::output::write("--report", path, text.as_bytes())?;
        if path == Path::new("-") {
            return Ok(Exit::Ok);
        }
    }
    out!("{text}");
    Ok(Exit::Ok)
}

/// The result at the edge: written to `--report`/`--json`, posted, then printed. The named
/// outputs come first so that a closed standard output (`| head -1`) or a killed terminal
/// cannot cost them; printing is the optional part. Every output is attempted even when one
/// fails (a failed --report must not also cost the JSON and the comment); the first failure is
/// returned afterwards.
fn publish(p: &Prepared, result: &BisectResult, out: &Outputs) -> anyhow::Result<Exit> {
    let md = report::markdown(result);
    // `--json -` makes standard output the JSON's alone: the report goes to stderr then.
    let json_on_stdout = out.json == Some(Path::new("-"));
    let mut failed: Option<anyhow::Error> = None;
    if let Some(path) = out.report {
        if let Err(e) = crate::cli::output::write("--report", path, md.as_bytes()) {
            errln!("setrows-bisect: error: {e:#}");
            failed.get_or_insert(e);
        }
    }
    let mut json_file = None;
    if let Some(path) = out.json {
        let text = serde_json::to_string_pretty(result).unwrap_or_default() + "\n";
        match crate::cli::output::write("--json", path, text.as_bytes()) {
            Ok(()) => json_file = Some(path).filter(|_| !json_on_stdout),
            Err(e) => {
                errln!("setrows-bisect: error: {e:#}");
                failed.get_or_insert(e);
            }
        }
    }
    // The file a retry posts: --json's, else the copy the work dir keeps of every result
    // (`run::stamp::finish_bisect`), which is there even when --json went to standard output.
    let kept = p.store.result_path(&p.id);
    let (written, file) = match json_file {
        Some(path) => (format!("the JSON is in {}", path.display()), path),
        None => (
            format!("the result is kept in {}", kept.display()),
            kept.as_path(),
        ),
    };
    let results = vec![crate::core::result::AnyResult::Bisect(Box::new(
        result.clone(),
    ))];
    let code = out.github.post.publish(
        results,
        Exit::recorded(result.exit_code),
        &written,
        Some(file),
    );
    match (out.print, json_on_stdout) {
        (true, false) => outln!("{md}"),
        (true, true) => errln!("{md}"),
        (false, _) => {}
    }
    if let Some(line) = report::endpoint_message(result) {
        errln!("setrows-bisect: {line}");
    }
    match failed {
        Some(e) => Err(e),
        None => Ok(code),
    }
}
