//! `setrows-bisect [bisect]`: the command-line edge of a commit bisection. It validates the
//! flags, turns them into a `driver::Plan`, a prober and a policy, runs `driver::bisect_commits`
//! and prints the report. All errors leave here as `CliError` (exit 2 for input, 3 for
//! machinery); the verdict itself decides 0 (found) or 1 (inconclusive).

mod placement;
mod repro;

use crate::core::evidence::{Deterministic, Fixed, Policy};
use crate::core::outcome::{Predicate, Regress};
use crate::core::search::EndpointCheck;
use crate::error::CliError;
use crate::probe::container::{ContainerLauncher, EngineChoice, GpuAccess};
use crate::probe::launch::HostLauncher;
use crate::probe::script::ScriptProber;
use crate::probe::Prober;
use crate::report::bisect as report;
use crate::run::driver::{bisect_commits, DriverError, Plan};
use crate::run::git::{self, GitError, RangeSpec};
use crate::run::progress::Progress;
use crate::run::store::{self, Store};
use clap::Args;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Args)]
pub struct BisectArgs {
    /// A revision with the old behaviour.
    #[arg(long, required = true)]
    pub good: Option<String>,
    /// A revision with the new behaviour.
    #[arg(long, required = true)]
    pub bad: Option<String>,
    /// The git repository to bisect (never modified: probes run in private checkouts).
    #[arg(long, default_value = ".")]
    pub repo: PathBuf,
    /// Test command, run with `sh -c` in the checkout ($SRC; the build dir is $WORK), with git
    /// bisect run's exit codes: 0 good, 125 skip, 1-127 bad, signal/>=128 crash. Without it the
    /// probe is the bundled set_rows replay reproducer (see --backend, --repro-arg).
    #[arg(long, value_name = "CMD")]
    pub script: Option<String>,
    /// Build command, run with `sh -c` in the persistent build dir ($WORK) before the test;
    /// a failing build is a skip, never a verdict.
    #[arg(long, value_name = "CMD")]
    pub build: Option<String>,
    /// What counts as the new behaviour: error (any failure), success (find the fix), crash
    /// (signals, aborts and GPU faults only).
    #[arg(long, value_enum, default_value_t = Regress::Error)]
    pub regress: Regress,
    /// Only failures whose output matches REGEX count as the bug; other failures count as the
    /// old behaviour.
    #[arg(long = "match", value_name = "REGEX")]
    pub match_: Option<String>,
    /// Kill the test after SECS seconds and call it a hang.
    #[arg(long, value_name = "SECS", value_parser = crate::cli::ranges::secs, allow_negative_numbers = true)]
    pub timeout: Option<f64>,
    /// Follow only the first-parent chain from bad back to good (the default).
    #[arg(long, overrides_with = "no_first_parent")]
    pub first_parent: bool,
    /// Bisect the full ancestry path (descendants of good that are ancestors of bad), like git.
    #[arg(long)]
    pub no_first_parent: bool,
    /// Subtree whose content decides whether two commits are the same test (commits that do not
    /// touch it share one probe). Auto: `ggml` for a llama.cpp layout, else the whole tree;
    /// `--path .` forces the whole tree.
    #[arg(long, value_name = "DIR")]
    pub path: Option<String>,
    /// Probe K commits in parallel (K checkouts and build dirs; the search multisects).
    #[arg(long, short = 'j', default_value_t = 1, value_name = "K", value_parser = crate::cli::ranges::jobs)]
    pub jobs: usize,
    /// Run every probed commit N times; one new-behaviour run decides new.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub repeat: Option<u32>,
    /// For intermittent faults: a failure is bad at once, a pass is re-run until "good" is
    /// believable, so that the answer holds at confidence C (e.g. 0.95); the report states the
    /// confidence reached and the estimated reproduction rate.
    #[arg(long, value_name = "C", conflicts_with = "repeat", value_parser = crate::cli::ranges::confidence)]
    pub confidence: Option<f64>,
    /// With --confidence: stop after N runs in all; commits left undecided become skips, so
    /// the answer is "inconclusive" with the candidates that remain instead of a guess.
    #[arg(long, value_name = "N", requires = "confidence", value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub max_runs: Option<u64>,
    /// After a culprit is found, run it, its parent and the bad endpoint with the culprit
    /// reverted at least N times each (more when the fault is rare), and flag suspicious
    /// answers (0 = off). A doubtful answer exits 1.
    #[arg(long, value_name = "N", default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=10_000))]
    pub validate: u32,
    /// Print the next wave of probes for --jobs K slots as JSON, from the stored results
    /// only, and exit without probing (for fanning a round out over CI runners).
    #[arg(long)]
    pub plan_only: bool,
    /// Run one planned probe of SHA (from --plan-only) and store it, then exit: what one CI
    /// runner does in a distributed round.
    #[arg(long, value_name = "SHA", conflicts_with = "plan_only")]
    pub probe: Option<String>,
    /// With --probe: the run index the plan assigned (default: the next free one here).
    #[arg(long, value_name = "R", requires = "probe", value_parser = |s: &str| crate::cli::ranges::int(s, 0, 1_000_000).map(|v| v as usize))]
    pub run_index: Option<usize>,
    /// Test the endpoints only when the answer depends on them (fewer probes; a wrong endpoint
    /// is found late).
    #[arg(long)]
    pub lazy_endpoints: bool,
    /// Write the machine-readable result here.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Also write the markdown report here.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Checkouts, build dirs, logs and the result store [default: $XDG_CACHE_HOME/setrows-bisect].
    #[arg(long, value_name = "DIR", env = "SETROWS_WORK_DIR")]
    pub work_dir: Option<PathBuf>,
    /// Argument passed to the bundled reproducer (repeatable; used when --script is absent).
    #[arg(long = "repro-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub repro_args: Vec<String>,
    /// Backend the bundled reproducer targets (used when --script is absent).
    #[arg(long, value_parser = ["cpu", "cuda", "hip"])]
    pub backend: Option<String>,
    /// Run every build and test step in a container of --image: podman, docker, or auto
    /// (podman if it works, else docker). The default, none, runs them on the host.
    #[arg(long, value_enum, default_value_t = EngineChoice::None, value_name = "ENGINE")]
    pub engine: EngineChoice,
    /// The image the steps run in with --engine (present locally; never pulled), e.g. a
    /// build image from containers/. Needs --engine.
    #[arg(long, value_name = "IMAGE")]
    pub image: Option<String>,
    /// `--post-to OWNER/REPO#N` (+ connection flags) and `--resume-from-issue`: docs/github.md.
    #[command(flatten)]
    pub github: Box<crate::cli::report::BisectPostArgs>,
}

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

/// Everything resolved from the flags, before any probe runs.
pub struct Prepared {
    pub plan: Plan,
    pub store: Store,
    pub prober: Box<dyn Prober>,
    pub policy: Box<dyn Policy>,
    /// Shell snippet reproducing one probe (`{sha}` placeholder), when the prober can say.
    pub reproduce: Option<String>,
}

/// Validates the flags and builds the plan (no probe runs here).
pub fn prepare(args: &BisectArgs) -> anyhow::Result<Prepared> {
    let good = args
        .good
        .as_deref()
        .ok_or_else(|| CliError::usage("--good REV is required"))?;
    let bad = args
        .bad
        .as_deref()
        .ok_or_else(|| CliError::usage("--bad REV is required"))?;
    if args.jobs == 0 {
        return Err(CliError::usage("--jobs must be at least 1"));
    }
    if args.repeat == Some(0) {
        return Err(CliError::usage("--repeat must be at least 1"));
    }
    let timeout = match args.timeout {
        Some(t) if !(t > 0.0 && t.is_finite()) => {
            return Err(CliError::usage(format!(
                "--timeout {t}: must be a positive number of seconds"
            )))
        }
        Some(t) => Some(Duration::from_secs_f64(t)),
        None => None,
    };
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
    if args.script.is_some() && (args.backend.is_some() || !args.repro_args.is_empty()) {
        return Err(CliError::usage(
            "--backend and --repro-arg configure the bundled reproducer, which runs only when --script is not given",
        ));
    }
    if args.script.is_none() && args.build.is_some() {
        return Err(CliError::usage(
            "--build needs --script (the bundled reproducer builds itself)",
        ));
    }
    placement::check_flags(args.engine, args.image.as_deref())?;
    let repo = git::open(&args.repo).map_err(git_error)?;
    let good_id = git::resolve(&repo, good, "--good").map_err(git_error)?;
    let bad_id = git::resolve(&repo, bad, "--bad").map_err(git_error)?;
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
        None => git::looks_like_llama_cpp(&repo, bad_id)
            .map_err(git_error)?
            .then(|| {
                eprintln!("setrows-bisect: llama.cpp layout detected: commits that do not change ggml/ share one probe (--path . to test the whole tree)");
                "ggml".to_string()
            }),
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
    // Creates the work dir (and proves it writable) so it can be made absolute.
    Store::open(&work_dir).map_err(|e| CliError::usage(e.to_string()))?;
    // Absolute from here on: steps run with their own working directory and see $SRC/$WORK.
    let work_dir = std::fs::canonicalize(&work_dir).unwrap_or(work_dir);
    let store = Store::open(&work_dir).map_err(|e| CliError::usage(e.to_string()))?;
    let canon_repo = std::fs::canonicalize(&args.repo).unwrap_or(args.repo.clone());
    let gpu = args
        .backend
        .as_deref()
        .and_then(crate::core::build::Backend::parse)
        .map_or(GpuAccess::None, GpuAccess::from);
    let container = placement::container(args.engine, args.image.as_deref(), gpu, &work_dir)?;
    let (prober, reproduce): (Box<dyn Prober>, Option<String>) = match &args.script {
        Some(script) => {
            let p = match container {
                None => ScriptProber::new(
                    args.build.clone(),
                    script.clone(),
                    timeout,
                    Box::new(HostLauncher),
                    &work_dir,
                ),
                // The image has ccache; the launcher mounts its cache and sets CCACHE_DIR.
                Some(c) => ScriptProber {
                    build: args.build.clone(),
                    script: script.clone(),
                    timeout,
                    launcher: Box::new(c),
                    env: vec![
                        ("CMAKE_C_COMPILER_LAUNCHER".into(), "ccache".into()),
                        ("CMAKE_CXX_COMPILER_LAUNCHER".into(), "ccache".into()),
                    ],
                },
            };
            let mut hint = p.reproduce_hint(&canon_repo, "{sha}");
            if let Some(image) = &args.image {
                hint = format!(
                    "# the bisect ran these steps in {image} ({}), $SRC mounted read-only\n{hint}",
                    p.launcher.identity()
                );
            }
            (Box::new(p), Some(hint))
        }
        None => (
            repro::repro_prober(args, &repo, bad_id, &work_dir, timeout, container)?,
            None,
        ),
    };
    let policy: Box<dyn Policy> = match (args.confidence, args.repeat) {
        (Some(c), _) if !(0.5..1.0).contains(&c) => {
            return Err(CliError::usage(format!(
                "--confidence {c}: must be at least 0.5 and below 1 (e.g. 0.95)"
            )))
        }
        (Some(_), _) if args.max_runs == Some(0) => {
            return Err(CliError::usage("--max-runs must be at least 1"))
        }
        // --confidence is driven by `core::flaky::session::Session` (`run()`), not by a
        // per-candidate policy; this one is never asked.
        (Some(_), _) => Box::new(Deterministic),
        (None, Some(n)) if n > 1 => Box::new(Fixed(n)),
        _ => Box::new(Deterministic),
    };
    let predicate = Predicate::new(args.regress, signature);
    let plan = Plan {
        repo_path: canon_repo,
        range,
        predicate,
        endpoints: if args.lazy_endpoints {
            EndpointCheck::Lazy
        } else {
            EndpointCheck::First
        },
        jobs: args.jobs,
        work_dir,
    };
    Ok(Prepared {
        plan,
        store,
        prober,
        policy,
        reproduce,
    })
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
    crate::probe::exec::install_interrupt_handler();
    // Issue and token are checked before anything runs (exit 2), not after hours of probing.
    args.github.check()?;
    let p = prepare(&args)?;
    let (range, pred) = (&p.plan.range, p.plan.predicate.describe());
    let key = crate::cli::report::bisect_key(&range.good, &range.bad, &pred);
    args.github.resume(&key, &p.store, &p.prober.identity())?;
    if args.plan_only {
        let v = crate::run::distributed::plan_next(
            &p.plan,
            p.prober.as_ref(),
            &p.store,
            session_mode(&args),
            args.max_runs,
        )?;
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
        return Ok(0);
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
        return Ok(0);
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
    let outcome = match args.confidence {
        // Waves of --jobs runs: spare slots re-run undecided candidates (driver docs).
        Some(c) => crate::run::driver::bisect_session(
            &p.plan,
            p.prober.as_ref(),
            c,
            args.max_runs,
            &p.store,
            &progress,
        ),
        None => bisect_commits(
            &p.plan,
            p.prober.as_ref(),
            p.policy.as_ref(),
            &p.store,
            &progress,
        ),
    }
    .map_err(driver_error)?;
    let mut result = report::result(r, &p.plan.predicate, &outcome, p.reproduce.as_deref());
    result.flaky = args
        .confidence
        .and_then(|c| outcome.assess(r.candidates.len(), c));
    if let Some(a) = &result.flaky {
        eprintln!("setrows-bisect: {}", a.line());
    }
    // The bundled reproducer without --backend tests the CPU; a --script's backend is unknown.
    let backend = args
        .backend
        .as_deref()
        .or(args.script.is_none().then_some("cpu"));
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
    let code = result.exit_code;
    let md = report::markdown(&result);
    println!("{md}");
    if let Some(path) = &args.report {
        std::fs::write(path, &md)
            .map_err(|e| CliError::usage(format!("--report {}: {e}", path.display())))?;
    }
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&result).unwrap_or_default();
        std::fs::write(path, text + "\n")
            .map_err(|e| CliError::usage(format!("--json {}: {e}", path.display())))?;
    }
    if let Some(line) = report::endpoint_message(&result) {
        eprintln!("setrows-bisect: {line}");
    }
    let written = match &args.json {
        Some(path) => format!("the JSON is in {}", path.display()),
        None => "the report is printed above".to_string(),
    };
    let results = vec![crate::core::result::AnyResult::Bisect(Box::new(result))];
    Ok(args.github.post.publish(results, code, &written))
}
