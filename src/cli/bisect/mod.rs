//! `setrows-bisect [bisect]`: the command-line edge of a commit bisection. It validates the
//! flags, turns them into a `driver::Plan`, a prober and a policy, runs `driver::bisect_commits`
//! and prints the report. All errors leave here as `CliError` (exit 2 for input, 3 for
//! machinery); the verdict itself decides 0 (found) or 1 (inconclusive).

mod args;
mod config;
mod dry_run;
mod placement;
mod repro;

pub use args::{BisectArgs, ConfigFlags};
pub use config::{load_matrix, read_matrix};

use crate::core::config::{ProbeKind, Resolved};
use crate::core::evidence::{Deterministic, Fixed, Policy};
use crate::core::outcome::Predicate;
use crate::core::search::EndpointCheck;
use crate::error::CliError;
use crate::probe::container::ContainerLauncher;
use crate::probe::launch::HostLauncher;
use crate::probe::script::ScriptProber;
use crate::probe::Prober;
use crate::report::bisect as report;
use crate::run::driver::{bisect_commits, DriverError, Plan};
use crate::run::git::{self, GitError, RangeSpec};
use crate::run::progress::Progress;
use crate::run::store::{self, Store};
use std::time::Duration;

/// Maps git errors to exit 2 (the user's input) or 3 (the machinery).
pub fn git_error(e: GitError) -> anyhow::Error {
    if e.is_usage() {
        CliError::usage(e.to_string())
    } else {
        CliError::infra(e.to_string())
    }
}

fn driver_error(e: DriverError) -> anyhow::Error {
    match e {
        DriverError::Git(g) => git_error(g),
        other => CliError::infra(other.to_string()),
    }
}

/// `driver_error`, with a systematic untestable naming the configuration by its values too
/// (`--config ID` alone does not say what was asked; explicit flags have no id at all).
fn driver_error_in(e: DriverError, p: &Prepared) -> anyhow::Error {
    match e {
        DriverError::Systematic {
            sha,
            reason,
            configuration,
            log,
        } => {
            let settings = p
                .configuration
                .as_ref()
                .map(|c| c.settings.join(" "))
                .unwrap_or_else(|| format!("backend={}", p.backend.as_str()));
            let name = match configuration {
                Some(id) => format!("{id} ({settings})"),
                None => format!("({settings})"),
            };
            CliError::infra(
                DriverError::Systematic {
                    sha,
                    reason,
                    configuration: Some(name),
                    log,
                }
                .to_string(),
            )
        }
        other => driver_error(other),
    }
}

/// How candidates are decided: a per-candidate policy in the driver's search loop (one run,
/// `--repeat N`), or the `--confidence` Session, which plans every run itself.
pub enum Strategy {
    Runs(Box<dyn Policy>),
    Confidence {
        confidence: f64,
        max_runs: Option<u64>,
    },
}

/// Everything resolved from the flags, before any probe runs.
pub struct Prepared {
    pub plan: Plan,
    pub store: Store,
    pub prober: Box<dyn Prober>,
    pub strategy: Strategy,
    /// Shell snippet reproducing one probe (`{sha}` placeholder), when the prober can say.
    pub reproduce: Option<String>,
    /// What the report says about the configuration (`None`: no configuration flag).
    pub configuration: Option<crate::core::result::ConfigurationInfo>,
    /// The bundled reproducer and its arguments (`None`: a `--script` probe).
    pub reproducer: Option<crate::core::result::ReproducerInfo>,
    pub backend: crate::core::build::Backend,
    /// `--dry-run`: what was resolved without making anything (the launcher, the toolchain).
    pub planned: Option<dry_run::Planned>,
}

fn endpoints(args: &BisectArgs) -> EndpointCheck {
    if args.lazy_endpoints {
        EndpointCheck::Lazy
    } else {
        EndpointCheck::First
    }
}

/// Validates the flags and builds the plan (no probe runs here). `base`: a configuration
/// already resolved by the caller (`bisect-config --good-rev`) instead of `--config`.
pub fn prepare(args: &BisectArgs, base: Option<Resolved>) -> anyhow::Result<Prepared> {
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
    let timeout = args.timeout.map(Duration::from_secs_f64);
    let signature = match &args.match_ {
        Some(re) => Some(regex::Regex::new(re).map_err(|e| {
            let why = e.to_string();
            let why = why
                .lines()
                .last()
                .unwrap_or("")
                .trim_start_matches("error: ");
            CliError::usage(format!("--match {re:?} is not a valid regex: {why}"))
        })?),
        None => None,
    };
    let build_only = args.regress.build_only();
    build_question(args)?;
    let mut chosen = config::choose(args, base)?;
    chosen.cfg.build_only = build_only;
    if let (true, ProbeKind::Script { build: None, .. }) = (build_only, &chosen.cfg.probe) {
        return Err(CliError::usage(
            "--regress build: the configuration's probe is a script without a build command; pass --build CMD",
        ));
    }
    placement::check_flags(chosen.engine, chosen.cfg.image.as_deref())?;
    let repo = git::open(&args.repo).map_err(git_error)?;
    let good_id = git::resolve(&repo, good, "--good").map_err(git_error)?;
    let bad_id = git::resolve(&repo, bad, "--bad").map_err(git_error)?;
    let decode = chosen.cfg.probe == ProbeKind::Decode;
    if decode {
        let tree = repo
            .find_commit(bad_id)
            .and_then(|c| c.tree())
            .map_err(|e| CliError::infra(format!("reading bad commit {bad_id}: {e}")))?;
        if !crate::probe::decode::is_llama_tree(|p| tree.get_path(std::path::Path::new(p)).is_ok())
        {
            return Err(CliError::usage(format!(
                "--probe-kind decode: bad commit {bad_id} is not a llama.cpp tree (no include/llama.h beside CMakeLists.txt); the decode probe builds llama.cpp: use --probe-kind replay for a ggml tree"
            )));
        }
    }
    let path = match args.path.as_deref() {
        Some("." | "" | "/") => None,
        Some(p) => {
            let p = p.trim_matches('/').to_string();
            let tree = repo
                .find_commit(bad_id)
                .and_then(|c| c.tree())
                .map_err(|e| CliError::infra(format!("reading bad commit {bad_id}: {e}")))?;
            if tree.get_path(std::path::Path::new(&p)).is_err() {
                return Err(CliError::usage(format!(
                    "--path {p}: no such path in bad commit {bad_id}"
                )));
            }
            Some(p)
        }
        // The decode probe builds and runs all of llama.cpp, not only its ggml/.
        None if decode => None,
        None => {
            let layout = git::detect_layout(&repo, bad_id).map_err(git_error)?;
            layout.keyed_subtree().map(|dir| {
                eprintln!("setrows-bisect: {} layout detected: commits that do not change {dir}/ share one probe (--path . to test the whole tree)", layout.name());
                dir.to_string()
            })
        }
    };
    let spec = RangeSpec {
        first_parent: !args.no_first_parent,
        path,
    };
    let range = git::plan_range(&repo, good_id, bad_id, &spec).map_err(git_error)?;
    let work_dir = args
        .work_dir
        .clone()
        .unwrap_or_else(store::default_work_dir);
    let canon_repo = std::fs::canonicalize(&args.repo).unwrap_or(args.repo.clone());
    // A plan makes nothing: no work dir, no container, no ccache dir, no toolchain query; what
    // it could not learn without them is a line of the plan (`dry_run::Planned`).
    let dry = args.dry_run;
    let (work_dir, store) = if dry {
        (work_dir.clone(), Store::at(&work_dir))
    } else {
        // Creates the work dir (and proves it writable) so it can be made absolute.
        Store::open(&work_dir).map_err(|e| CliError::usage(e.to_string()))?;
        // Absolute from here on: steps run with their own working directory and see $SRC/$WORK.
        let work_dir = std::fs::canonicalize(&work_dir).unwrap_or(work_dir);
        let store = Store::open(&work_dir).map_err(|e| CliError::usage(e.to_string()))?;
        (work_dir, store)
    };
    let planned = dry.then(|| dry_run::Planned::new(&chosen, &work_dir));
    let container = match dry {
        true => None,
        false => placement::container(chosen.engine, &chosen.cfg, &work_dir)?,
    };
    let image = match (&container, &planned) {
        (Some(c), _) => Some(c.image().to_string()),
        (None, Some(p)) => p.image.clone(),
        (None, None) => None,
    };
    let place = repro::place(&chosen.cfg, &repo, bad_id, container, !dry)?;
    let planned = planned.map(|p| p.with_build(&chosen.cfg, &place));
    let prober = crate::run::probers::prober(&chosen.cfg, &place);
    let reproduce = match &chosen.cfg.probe {
        ProbeKind::Script { build, script } => {
            let p = ScriptProber {
                build: build.clone(),
                script: script.clone(),
                timeout,
                launcher: Box::new(HostLauncher),
                env: crate::run::probers::script_env(&chosen.cfg, &place, &place.fallback_facts)
                    .into_iter()
                    .filter(|(k, _)| !k.starts_with("CCACHE_"))
                    .collect(),
                build_only,
            };
            let mut hint = p.reproduce_hint(&canon_repo, "{sha}");
            if let Some(image) = &image {
                let engine = match &planned {
                    Some(p) => p.engine.clone(),
                    None => place.launcher.identity(),
                };
                hint = format!(
                    "# the bisect ran these steps in {image} ({engine}), $SRC mounted read-only\n{hint}"
                );
            }
            Some(hint)
        }
        ProbeKind::Replay | ProbeKind::Decode => None,
    };
    let prober: Box<dyn Prober> = Box::new(prober);
    let strategy = match (args.confidence, args.repeat) {
        (Some(confidence), _) => Strategy::Confidence {
            confidence,
            max_runs: args.max_runs,
        },
        (None, Some(n)) if n > 1 => Strategy::Runs(Box::new(Fixed(n))),
        _ => Strategy::Runs(Box::new(Deterministic)),
    };
    let predicate = Predicate::new(args.regress, signature);
    let plan = Plan {
        repo_path: canon_repo,
        range,
        predicate,
        endpoints: endpoints(args),
        jobs: args.jobs,
        work_dir,
    };
    Ok(Prepared {
        plan,
        store,
        prober,
        strategy,
        reproduce,
        planned,
        configuration: chosen.info,
        reproducer: chosen.reproducer,
        backend: chosen.cfg.backend,
    })
}

/// `--regress build` asks whether the build fails, so nothing may run a test: `--script` is
/// refused (one line, exit 2) rather than ignored, since a user who gave one expects it to
/// run; `--build` alone is that question's own build. Re-running a build of one tree gives the
/// same answer (the build dir is reused), so the flaky policies are refused too. Without
/// `--regress build`, `--build` still needs `--script`.
fn build_question(args: &BisectArgs) -> anyhow::Result<()> {
    if !args.regress.build_only() {
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
    if args.confidence.is_some() || args.repeat.is_some_and(|n| n > 1) {
        return Err(CliError::usage(
            "--regress build: a build is run once per commit (rebuilding the same tree gives the same answer); drop --confidence/--repeat",
        ));
    }
    Ok(())
}

/// What `--plan-only` replays the store into: the policy of `--confidence`/`--repeat`.
fn session_mode(args: &BisectArgs) -> crate::core::flaky::session::Mode {
    use crate::core::flaky::session::Mode;
    match (args.confidence, args.repeat) {
        (Some(c), _) => Mode::Adaptive {
            confidence: c,
            prior: crate::core::flaky::Beta::UNIFORM,
        },
        (None, Some(n)) => Mode::Repeat(n.max(1)),
        (None, None) => Mode::Repeat(1),
    }
}

pub fn run(args: BisectArgs) -> anyhow::Result<i32> {
    run_with(&args, None, true).map(|(code, _)| code)
}

/// The whole command, in the configuration `base` when given (`bisect-config --good-rev`
/// passes the configuration it found; `--config` and the flags resolve it otherwise). `print`:
/// the report goes to stdout. Returns the exit code and, after a bisection, its result.
pub fn run_with(
    args: &BisectArgs,
    base: Option<Resolved>,
    print: bool,
) -> anyhow::Result<(i32, Option<crate::core::result::BisectResult>)> {
    crate::probe::exec::install_interrupt_handler();
    // Issue and token are checked before anything runs (exit 2), not after hours of probing.
    args.github.check()?;
    // Output paths too: an unwritable --json must not be found after the last probe.
    if let Some(path) = &args.report {
        crate::cli::output::check_writable("--report", path)?;
    }
    if let Some(path) = &args.json {
        crate::cli::output::check_writable("--json", path)?;
    }
    let p = prepare(args, base)?;
    let (range, pred) = (&p.plan.range, p.plan.predicate.describe());
    let key = crate::cli::report::bisect_key(&range.good, &range.bad, &pred);
    args.github.resume(&key, &p.store, &p.prober.identity())?;
    if args.dry_run {
        print!("{}", dry_run::dry_run(args, &p)?);
        return Ok((0, None));
    }
    if args.plan_only {
        let v = crate::run::distributed::plan_next(
            &p.plan,
            p.prober.as_ref(),
            &p.store,
            session_mode(args),
            args.max_runs,
        )?;
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
        return Ok((0, None));
    }
    if let Some(sha) = &args.probe {
        let v = crate::run::distributed::probe_one(
            &p.plan,
            p.prober.as_ref(),
            &p.store,
            sha,
            args.run_index,
        )?;
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
        return Ok((0, None));
    }
    let id = store::bisect_id(&[
        &p.plan.repo_path.to_string_lossy(),
        &p.plan.range.good,
        &p.plan.range.bad,
        &p.prober.identity(),
        &p.plan.predicate.describe(),
        &format!("{:?}", p.plan.range.spec),
    ]);
    let journal = p
        .store
        .open_journal(&id)
        .map_err(|e| CliError::infra(e.to_string()))?;
    let r = &p.plan.range;
    eprintln!(
        "setrows-bisect: {} commits, {} candidates; work dir {}; journal {}",
        r.commits,
        r.candidates.len(),
        p.plan.work_dir.display(),
        journal.display()
    );
    let progress = Progress::for_stderr(p.plan.jobs);
    let outcome = match &p.strategy {
        // Waves of --jobs runs: spare slots re-run undecided candidates (driver docs).
        Strategy::Confidence {
            confidence,
            max_runs,
        } => crate::run::driver::bisect_session(
            &p.plan,
            p.prober.as_ref(),
            *confidence,
            *max_runs,
            &p.store,
            &progress,
        ),
        Strategy::Runs(policy) => bisect_commits(
            &p.plan,
            p.prober.as_ref(),
            policy.as_ref(),
            &p.store,
            &progress,
        ),
    }
    .map_err(|e| driver_error_in(e, &p))?;
    let mut result = report::result(r, &p.plan.predicate, &outcome, p.reproduce.as_deref());
    result.flaky = args
        .confidence
        .and_then(|c| outcome.assess(r.candidates.len(), c));
    result.configuration = p.configuration.clone();
    result.reproducer = p.reproducer.clone();
    result.endpoint = report::endpoint_advice(&result);
    if let Some(a) = &result.flaky {
        eprintln!("setrows-bisect: {}", a.line());
    }
    // A --script's backend is unknown unless a configuration flag named it.
    let backend = (args.script.is_none() || p.configuration.is_some()).then(|| p.backend.as_str());
    result.validation = crate::run::validate::after_bisect(
        &p.plan,
        p.prober.as_ref(),
        &p.store,
        &outcome,
        args.validate,
        backend,
    )?;
    // The stored runs behind the probes: what --resume-from-issue seeds a fresh store from.
    let trees = outcome
        .probes
        .iter()
        .filter_map(|pr| r.candidates.get(pr.candidate).map(|c| c.tree.as_str()));
    let keep_text = p.plan.predicate.signature.is_some();
    result.store_runs = Some(
        crate::github::resume::store_runs(&p.store, trees, &p.prober.identity(), keep_text)
            .map_err(|e| CliError::infra(e.to_string()))?,
    );
    if result.validation.as_ref().is_some_and(|v| !v.confirmed) {
        result.exit_code = crate::error::exit::INCONCLUSIVE;
    }
    // argv, tool version, the repository's web URL, provenance; saved for `show` and `log`.
    crate::run::stamp::finish_bisect(&mut result, &p.store, &p.plan.repo_path, &id)
        .map_err(|e| CliError::infra(e.to_string()))?;
    let code = result.exit_code;
    let md = report::markdown(&result);
    // `--json -` makes standard output the JSON's alone: the report goes to stderr then.
    let json_on_stdout = args.json.as_deref() == Some(std::path::Path::new("-"));
    match (print, json_on_stdout) {
        (true, false) => println!("{md}"),
        (true, true) => eprintln!("{md}"),
        (false, _) => {}
    }
    // Every output is attempted even when one fails (a failed --report must not also cost the
    // JSON and the comment); the first failure decides the exit code afterwards.
    let mut failed: Option<anyhow::Error> = None;
    if let Some(path) = &args.report {
        if let Err(e) = crate::cli::output::write("--report", path, md.as_bytes()) {
            eprintln!("setrows-bisect: error: {e:#}");
            failed.get_or_insert(e);
        }
    }
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&result).unwrap_or_default() + "\n";
        if let Err(e) = crate::cli::output::write("--json", path, text.as_bytes()) {
            eprintln!("setrows-bisect: error: {e:#}");
            failed.get_or_insert(e);
        }
    }
    if let Some(line) = report::endpoint_message(&result) {
        eprintln!("setrows-bisect: {line}");
    }
    let written = match &args.json {
        Some(_) if json_on_stdout => "the JSON went to standard output".to_string(),
        Some(path) => format!("the JSON is in {}", path.display()),
        None => "the report is printed above".to_string(),
    };
    let results = vec![crate::core::result::AnyResult::Bisect(Box::new(
        result.clone(),
    ))];
    let code = args.github.post.publish(results, code, &written);
    if let Some(e) = failed {
        return Err(e);
    }
    Ok((code, Some(result)))
}
