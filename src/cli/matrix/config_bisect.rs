//! `bisect-config`: the first failing value along one configuration axis at a fixed commit
//! (the outer level of the two-level question; the commit level is the ordinary bisect).

use super::*;
use crate::cli::flags::{Flaky, JobsFlag, Walk};
use crate::run::bisect::{Mode, Request as BisectRequest};
use crate::run::matrix::ladder::{
    CommitLevel, ImagePlace, Ladder, LadderError, LadderPlan, Request,
};
use clap::Args;

/// The configuration for ladder value `v` on `axis`.
fn at_value(m: &Matrix, base: &Config, axis: &str, v: &str) -> anyhow::Result<Config> {
    if let Some(flag) = axis.strip_prefix("arg:") {
        let mut c = base.clone();
        if let Some(i) = c.repro_args.iter().position(|a| a == flag) {
            c.repro_args.drain(i..(i + 2).min(c.repro_args.len()));
        }
        c.repro_args.extend([flag.to_string(), v.to_string()]);
        c.values.insert(axis.to_string(), Value::Str(v.into()));
        c.id = matrix::config_id(&c.values);
        return Ok(c);
    }
    m.with_value(base, axis, &matrix::typed(axis, v))
        .map_err(|e| CliError::usage(format!("--axis {axis} = {v}: {e}")))
}

/// `bisect-config`: every input checked here (the commit level's too, before the ladder runs),
/// then the request runs in `run::matrix::ladder`; its commit level, when the ladder names a
/// configuration, is carried out as `bisect` carries out its request.
pub fn run_bisect_config(args: BisectConfigArgs) -> anyhow::Result<Exit> {
    let (request, base) = request(&args)?;
    use crate::run::matrix::ladder::{carry_out, prepare, Done};
    let events: &dyn crate::core::progress::Sink = match args.dry_run {
        true => &crate::core::progress::Quiet,
        false => {
            crate::cli::output::check_dir_writable("--out", &args.run.out)?;
            crate::probe::exec::install_interrupt_handler();
            crate::cli::progress::stderr()?
        }
    };
    let prepared = prepare(request).map_err(run_error)?;
    match carry_out(prepared, events).map_err(ladder_error)? {
        Done::Planned(plan) => {
            out!("{}", dry_run(&args, &base, &plan));
            Ok(Exit::Ok)
        }
        Done::Searched { mut result, commit } => {
            if let Some(req) = commit {
                let (code, b) = bisect_commits_in(&args, *req)?;
                result.exit_code = code.code();
                result.commit_bisect = b.map(Box::new);
            }
            let md = crate::report::config::markdown(&result);
            write_results(&args.run.out, "bisect-config", &result, &md)?;
            out!("{md}");
            Ok(Exit::recorded(result.exit_code))
        }
    }
}

/// The run the flags ask for, every input checked, and the base configuration's `ID (label)`.
/// Which base, and why, is said on stderr once all is checked (a refusal stays one line; a dry
/// run's plan on stdout stays the plan).
fn request(args: &BisectConfigArgs) -> anyhow::Result<(Request, String)> {
    // --post-to / --resume-from-issue of the commit level: usage errors before anything runs.
    args.commit.github.check()?;
    if args.good_rev.is_none() && args.commit.github.post.check()?.is_some() {
        return Err(CliError::usage(
            "--post-to posts the commit bisect of --good-rev; without --good-rev there is none",
        ));
    }
    let (m, ids) = args.run.load()?;
    let (base, base_note) = base_of(args, &m, &ids)?;
    let values = ladder_of(args, &m)?;
    let predicate = args.question.predicate()?;
    let configs = values
        .iter()
        .map(|v| at_value(&m, base, &args.axis, v))
        .collect::<anyhow::Result<Vec<Config>>>()?;
    let build_only = args.question.regress.build_only();
    if build_only {
        build_only_probe(&m)?;
        if args.good_rev.is_some() && args.commit.flaky.reruns() {
            return Err(CliError::usage(
                "--regress build: a build is run once per commit (rebuilding the same tree gives the same answer); drop --confidence/--repeat",
            ));
        }
    }
    let applied = args.run.apply.read(&args.run.repo.repo)?;
    let commit = commit_level(args, &predicate, &applied)?;
    // The token checked with GitHub, last of the checks (a refused one is exit 2 now, not
    // after the ladder and the commit bisect); a dry run asks GitHub nothing.
    if !args.dry_run {
        args.commit.github.verify(true)?;
    }
    errln!("{base_note}");
    let cells = crate::run::matrix::request::Request {
        repo: args.run.repo.repo.clone(),
        work_dir: args.run.work_dir.dir(),
        engine: args.run.engine_choice(),
        probe: m.probe.clone(),
        timeout: args.run.timeout.timeout,
        retries: args.run.retries,
        log_dir: args.run.out.join("bisect-config-logs"),
        fresh: args.run.fresh,
        // The build question: each value's cell stops after its build (`Predicate` judges a
        // failed build new).
        build_only,
        matrix_file: m.file.clone(),
        configs,
        revisions: vec![args.rev.clone()],
        dry_run: args.dry_run,
        applied,
    };
    let base = format!("{} ({})", base.id, base.label());
    let ladder = Ladder {
        axis: args.axis.clone(),
        values,
        predicate,
    };
    Ok((
        Request {
            cells,
            ladder,
            commit,
        },
        base,
    ))
}

fn ladder_error(e: LadderError) -> anyhow::Error {
    match e {
        LadderError::Run(e) => run_error(e),
        e => CliError::infra(e.to_string()),
    }
}

/// The configuration giving every value but the axis's (`--config ID`, else the file's first),
/// and the line that says which and why.
fn base_of<'m>(
    args: &BisectConfigArgs,
    m: &'m Matrix,
    ids: &[String],
) -> anyhow::Result<(&'m Config, String)> {
    let (flag, base) = match (ids, &args.base) {
        ([], None) => ("", None),
        ([id], None) => ("--config", Some(id)),
        ([], Some(id)) => {
            errln!("note: `--base {id}` is spelled `--config {id}` now");
            ("--config", Some(id))
        }
        _ => {
            return Err(CliError::usage(
                "bisect-config takes one base configuration: --config ID (--base ID is its old spelling)",
            ))
        }
    };
    let base = match base {
        Some(id) => m.find(id).ok_or_else(|| {
            CliError::usage(format!("{flag} {id}: no such configuration in {}", m.file))
        })?,
        None => m
            .configs
            .first()
            .ok_or_else(|| CliError::usage(format!("{}: the matrix is empty", m.file)))?,
    };
    // Every value but the axis's comes from the base: which one, and why, is said (stderr, so
    // a dry run's plan on stdout stays the plan), once the inputs are checked.
    let why = match base_flag_given(flag) {
        true => format!("--config {}", base.id),
        false => format!(
            "the first of {} configurations in {}; --config ID picks another (`matrix --list`)",
            m.configs.len(),
            m.file
        ),
    };
    let base_note = format!(
        "setrows-bisect: base configuration {} ({}): {why}",
        base.id,
        base.label()
    );
    Ok((base, base_note))
}

/// The ladder: `--values`, else the axis's values as the matrix file writes them (two at least).
fn ladder_of(args: &BisectConfigArgs, m: &Matrix) -> anyhow::Result<Vec<String>> {
    let is_arg = args.axis.starts_with("arg:");
    if !is_arg && !matrix::AXES.contains(&args.axis.as_str()) {
        return Err(CliError::usage(format!(
            "--axis {}: not a matrix axis ({}) nor a reproducer flag (arg:--flag)",
            args.axis,
            matrix::AXES.join(", ")
        )));
    }
    let ladder: Vec<String> = if !args.values.is_empty() {
        args.values.clone()
    } else {
        m.axis_values
            .get(&args.axis)
            .map(|vs| vs.iter().map(|v| v.to_string()).collect())
            .unwrap_or_default()
    };
    if ladder.len() < 2 {
        return Err(CliError::usage(format!(
            "--axis {}: needs at least two ordered values (from --values or the matrix), got {}",
            args.axis,
            ladder.len()
        )));
    }
    Ok(ladder)
}

fn base_flag_given(flag: &str) -> bool {
    !flag.is_empty()
}

/// `bisect-config --dry-run`: what the ladder would run, and the commit level after it, in words.
fn dry_run(args: &BisectConfigArgs, base: &str, plan: &LadderPlan) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let n = plan.values.len();
    if let Some(lacking) = &plan.lacking {
        let _ = writeln!(out, "{lacking}; it would stop before its first probe");
    }
    let _ = writeln!(out, "axis: {} ({n} values)", args.axis);
    let _ = writeln!(out, "base configuration: {base}");
    let _ = writeln!(out, "revision: {} ({})", plan.sha, plan.rev);
    let _ = writeln!(
        out,
        "expected probes: up to {} of {n} values (a bisection of the ladder, one value at a time)",
        plan.expected_probes
    );
    let _ = writeln!(
        out,
        "predicate: {}",
        Predicate::new(args.question.regress, None).describe()
    );
    for v in &plan.values {
        let image = match &v.place {
            ImagePlace::HostByFlag => "on the host (--engine none)".to_string(),
            ImagePlace::HostNoImage => "on the host (no image)".to_string(),
            ImagePlace::Image {
                image,
                engine,
                missing: None,
            } => format!("in image {image} ({engine})"),
            ImagePlace::Image { image, engine, .. } => format!(
                "in image {image} ({engine}): missing here, a run stops before its first probe"
            ),
            ImagePlace::NoEngine { image } => format!("in image {image}"),
        };
        let _ = writeln!(
            out,
            "  {}={}: {}  {}  {image}",
            args.axis, v.value, v.id, v.label
        );
    }
    match &plan.commit {
        Some((good, bad)) => {
            let _ = writeln!(
                out,
                "then: the commit bisect {good}..{bad} in the first failing value's configuration (`setrows-bisect --dry-run --config ID` shows its plan)"
            );
        }
        None => {
            let _ = writeln!(out, "then: nothing (no --good-rev)");
        }
    }
    let _ = writeln!(
        out,
        "results: {}",
        args.run.out.join("bisect-config.json").display()
    );
    out
}

/// The commit level's request, its inputs checked before the ladder runs (its answer would be
/// dropped by a typo found after it): `--good-rev` and `--rev` are commits of `--repo`,
/// `--path` is in `--rev`, and the work dir can be written. `--confidence` and the counts are
/// clap's (the shared flags of `cli::flags`). It becomes a request once the ladder names the
/// configuration (`CommitLevel::request`). `None`: no `--good-rev`, no commit level.
fn commit_level(
    args: &BisectConfigArgs,
    predicate: &Predicate,
    applied: &[crate::core::applied::AppliedPatch],
) -> anyhow::Result<Option<CommitLevel>> {
    let Some(good) = &args.good_rev else {
        if args.commit.walk.path.is_some() {
            return Err(CliError::usage(
                "--path belongs to the commit bisect of --good-rev; add --good-rev REV or drop --path",
            ));
        }
        return Ok(None);
    };
    use crate::run::bisect::{check, git_error};
    let repo = crate::run::git::open(&args.run.repo.repo).map_err(git_error)?;
    let (good, bad) = check::revisions(&repo, (good, &args.rev), ("--good-rev", "--rev"))?;
    let path = check::subtree(
        &repo,
        bad,
        args.commit.walk.path.as_deref(),
        "--path",
        "--rev",
    )?;
    let work_dir = args.run.work_dir.dir();
    crate::cli::output::check_dir_writable("--work-dir", &work_dir)?;
    let c = &args.commit;
    let (repo, predicate) = (args.run.repo.repo.clone(), predicate.clone());
    let (first_parent, runs, jobs) = (!c.walk.no_first_parent, c.flaky.runs(), c.jobs.jobs);
    let (endpoints, validate) = (c.walk.endpoints(), c.flaky.validate);
    let applied = applied.to_vec();
    // The ladder's configuration, with the patches its cells had.
    let request = move |mut chosen: crate::run::bisect::Chosen| {
        chosen.cfg.applied = applied;
        BisectRequest {
            repo,
            good,
            bad,
            first_parent,
            path,
            predicate,
            runs,
            jobs,
            endpoints,
            validate,
            compare_good: false,
            work_dir,
            chosen,
            mode: Mode::Run,
            resume: None,
        }
    };
    Ok(Some(CommitLevel {
        good,
        bad,
        request: Box::new(request),
    }))
}

/// The flags of the commit-level bisect (`--good-rev`): the main command's, declared once
/// (`cli::flags`).
#[derive(Debug, Args)]
#[command(next_help_heading = "Commit bisect (with --good-rev)")]
pub struct CommitFlags {
    /// `--first-parent`, `--no-first-parent`, `--path`, `--lazy-endpoints`.
    #[command(flatten)]
    pub walk: Walk,
    /// `--jobs`.
    #[command(flatten)]
    pub jobs: JobsFlag,
    /// `--repeat`, `--confidence`, `--max-runs`, `--validate`.
    #[command(flatten)]
    pub flaky: Flaky,
    /// `--post-to OWNER/REPO#N` (+ connection flags) and `--resume-from-issue`: docs/github.md.
    #[command(flatten)]
    pub github: Box<crate::cli::report::BisectPostArgs>,
}

/// The second level: the commit bisect `setrows-bisect --good GOOD --bad REV` runs, in the
/// configuration the first level found (its image unless `--engine none`), resumed from the
/// issue where `--resume-from-issue` asks (the comment's key names that configuration).
fn bisect_commits_in(
    args: &BisectConfigArgs,
    mut req: BisectRequest,
) -> anyhow::Result<(Exit, Option<BisectResult>)> {
    req.resume = args.commit.github.resume(&req)?;
    let (json, report) = (
        args.run.out.join("bisect.json"),
        args.run.out.join("bisect.md"),
    );
    std::fs::create_dir_all(&args.run.out)
        .map_err(|e| CliError::infra(format!("{}: {e}", args.run.out.display())))?;
    let outputs = crate::cli::bisect::Outputs {
        report: Some(&report),
        json: Some(&json),
        print: false,
        github: &args.commit.github,
    };
    crate::cli::bisect::run_request(&req, &outputs)
}
