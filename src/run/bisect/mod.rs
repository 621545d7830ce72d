//! A commit bisection as a request: `Request` is the question, checked and resolved (plain
//! data; the command line builds it from flags in one function, `demo` and `bisect-config`
//! build it directly). `prepare` turns it into the plan, store and prober; `execute` runs the
//! driver and assembles THE result document (`document`). What happens to the document after
//! (markdown, `--report`, `--json`, the GitHub comment) is the command line's.
//!
//! ```text
//! Request --prepare--> Prepared --execute--> BisectResult     (Mode::Run)
//!                               --plan_next / probe_one-->    (--plan-only, --probe: JSON)
//!                               --plan_document--> PlanFacts  (--dry-run: from .planned, nothing made)
//! ```

pub mod check;
mod document;
mod good;
mod place;
mod plan_document;
mod planned;
mod resume;

pub use place::facts_at;
pub use plan_document::PlanFacts;
pub use planned::{Planned, Where};
pub use resume::Resume;

use crate::core::config::Resolved;
use crate::core::evidence::{Deterministic, Fixed, Policy};
use crate::core::outcome::Predicate;
use crate::core::progress::{Event, Sink};
use crate::core::result::{BisectResult, ConfigurationInfo, ReproducerInfo};
use crate::core::search::EndpointCheck;
use crate::error::CliError;
use crate::probe::container::EngineChoice;
use crate::probe::launch::{HostLauncher, Launcher};
use crate::probe::script::ScriptProber;
use crate::probe::Prober;
use crate::run::driver::{DriverError, Plan};
use crate::run::git::{self, GitError, Oid, RangeSpec};
use crate::run::store::Store;
use std::path::PathBuf;

/// The configuration the probes run in, where they run (`--engine`), and what the report says
/// about it (`info`: `None` for a plain bisect with no configuration flag at all).
pub struct Chosen {
    pub cfg: Resolved,
    pub engine: EngineChoice,
    pub info: Option<ConfigurationInfo>,
    /// The bundled reproducer and its arguments (`None`: a `--script` probe).
    pub reproducer: Option<ReproducerInfo>,
}

/// How a configuration was chosen: what decides where its steps run and what the report
/// says about it.
pub struct Naming {
    /// `--engine` (`None`: not given).
    pub engine: Option<EngineChoice>,
    /// `--image` was given.
    pub image_flag: bool,
    /// By name: `--config ID`, or the configuration `bisect-config` found.
    pub named: bool,
    /// Any configuration flag at all (else the report has no configuration section).
    pub configured: bool,
    /// Flags that overrode the named configuration's values.
    pub overrides: Vec<String>,
    /// Where the reproducer's arguments come from, in words.
    pub args_from: String,
}

impl Chosen {
    /// A named configuration's image means a container (`--engine auto`) unless `--engine
    /// none` says the host, which the report lists as an override; without a name the steps
    /// run where `--engine` says, the host by default.
    pub fn new(mut cfg: Resolved, how: Naming) -> Chosen {
        let mut overrides = how.overrides;
        let engine = match (how.engine, how.named && cfg.image.is_some()) {
            (Some(EngineChoice::None), true) if !how.image_flag => {
                overrides.push(format!(
                    "--engine none (configuration: image {}; probes run on the host)",
                    cfg.image.as_deref().unwrap_or("")
                ));
                cfg.image = None;
                EngineChoice::None
            }
            (Some(e), _) => e,
            (None, true) => EngineChoice::Auto,
            (None, false) => EngineChoice::None,
        };
        let info = how
            .configured
            .then(|| cfg.info(if how.named { overrides } else { Vec::new() }));
        // The program and its argument lines from the kind's definition, as the probe runs
        // them: what every probe passes, the placement's own argument (`--memory unified`)
        // included, as `run::probers` starts the program; test-backend-ops once per op, on
        // the device as ggml names the backend's first (a tree may spell HIP's otherwise: each
        // probe reads its own, and its log says which ran).
        let def = cfg.probe.def();
        let device = crate::core::kinds::backend_ops::device_name(cfg.backend, "");
        let mut runs = def
            .runs(
                &cfg.probe,
                &cfg.recipe.reproducer_args(&cfg.reproducer_args()),
                &device,
            )
            .into_iter();
        let reproducer = def.program().map(|program| ReproducerInfo {
            program: program.to_string(),
            args: runs.next().unwrap_or_default(),
            more_runs: runs.collect(),
            source: how.args_from,
            env: cfg
                .launch_env
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect(),
            build_args: cfg.recipe.extra_cmake_args.clone(),
        });
        Chosen {
            cfg,
            engine,
            info,
            reproducer,
        }
    }
}

/// Which subtree decides whether two commits are the same test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subtree {
    /// Where ggml sits in the `--bad` tree (`core::layout`): `ggml/` of a llama.cpp tree, the
    /// whole tree of ggml itself.
    Auto,
    /// `--path .`
    Whole,
    /// `--path DIR`, present in the `--bad` commit.
    Dir(String),
}

/// What the request asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// Bisect and return the result document.
    Run,
    /// Resolve everything and make nothing (`--dry-run`).
    DryRun,
    /// The next wave from the stored results, as JSON (`--plan-only`).
    PlanOnly,
    /// One planned run of one commit, stored (`--probe SHA --run-index R`).
    Probe {
        sha: String,
        run_index: Option<usize>,
    },
}

/// One commit bisection, every input checked: revisions resolved in `repo`, the predicate's
/// regex compiled, the configuration resolved and its flags found meaningful.
pub struct Request {
    pub repo: PathBuf,
    pub good: Oid,
    pub bad: Oid,
    pub first_parent: bool,
    pub path: Subtree,
    pub predicate: Predicate,
    pub runs: Policy,
    pub jobs: crate::core::jobs::Jobs,
    pub endpoints: EndpointCheck,
    /// `--validate N`: re-runs of the culprit, its parent and the revert (0 = off).
    pub validate: u32,
    /// `--compare-good`: the decode probe also compares with the `--good` commit's logits
    /// (`good`), recorded before the search.
    pub compare_good: bool,
    pub work_dir: PathBuf,
    pub chosen: Chosen,
    pub mode: Mode,
    /// `--resume-from-issue`: the comment's state block the store is seeded from (never for
    /// `--dry-run`, which reads no issue).
    pub resume: Option<Resume>,
}

/// Everything resolved from a request, before any probe runs.
pub struct Prepared {
    pub plan: Plan,
    pub store: Store,
    pub prober: Box<dyn Prober>,
    pub runs: Policy,
    pub validate: u32,
    /// The journal and result id: same question, same id (a resumed run appends).
    pub id: String,
    /// Shell snippet reproducing one probe (`{sha}` placeholder), when the prober can say.
    pub reproduce: Option<String>,
    pub configuration: Option<ConfigurationInfo>,
    pub reproducer: Option<ReproducerInfo>,
    /// What validation builds for (`None`: a `--script` whose backend no flag named).
    pub backend: Option<crate::core::build::Backend>,
    /// `Mode::DryRun`: what was learned without making anything.
    pub planned: Option<Planned>,
    /// What every probe ran, for its kind's own section of the result
    /// (`probe::kinds::add_sections`).
    pub probe: crate::core::kinds::ProbeSpec,
    /// `--apply`: the patches every probe applied, and where their copies are kept.
    pub applied: Vec<crate::core::applied::AppliedInfo>,
}

/// Maps git errors to exit 2 (the user's input) or 3 (the machinery).
pub fn git_error(e: GitError) -> anyhow::Error {
    if e.is_usage() {
        CliError::usage(e.to_string())
    } else {
        CliError::infra(e.to_string())
    }
}

/// The range, store and prober of `req`. Nothing is made for a dry run (no work dir, container,
/// ccache dir or toolchain query); otherwise the work dir is created and made absolute (steps
/// run with their own working directory and see $SRC/$WORK), the container's engine and image
/// are asked for, a HIP build asks `hipconfig`, and the store is seeded from the issue's state
/// block (`--resume-from-issue`).
pub fn prepare(req: &Request, events: &dyn Sink) -> anyhow::Result<Prepared> {
    let repo = git::open(&req.repo).map_err(git_error)?;
    let path = match &req.path {
        Subtree::Whole => None,
        Subtree::Dir(p) => Some(p.clone()),
        // A kind that builds and runs the whole tree (the decode probe's llama.cpp,
        // test-backend-ops under llama.cpp's tests/): what it reads is learned, not assumed.
        Subtree::Auto if req.chosen.cfg.probe.def().whole_tree() => None,
        Subtree::Auto => {
            let layout = git::detect_layout(&repo, req.bad).map_err(git_error)?;
            layout.keyed_subtree().map(|dir| {
                events.emit(Event::Note {
                    text: format!("{} layout detected: commits that do not change {dir}/ share one probe (--path . to test the whole tree)", layout.name()),
                });
                dir.to_string()
            })
        }
    };
    // A patched file outside the keyed subtree is read too (once patched, commits that
    // differ there are different trees): the whole tree keys the candidates then.
    let touched = crate::run::apply::files(&req.chosen.cfg.applied);
    let path = match path {
        Some(dir) if touched.iter().any(|f| !f.starts_with(&format!("{dir}/"))) => {
            events.emit(Event::Note {
                text: format!(
                    "--apply touches files outside {dir}/: commits are keyed by their whole tree"
                ),
            });
            None
        }
        other => other,
    };
    let spec = RangeSpec {
        first_parent: req.first_parent,
        path,
    };
    let range = git::plan_range(&repo, req.good, req.bad, &spec).map_err(git_error)?;
    let canon_repo = std::fs::canonicalize(&req.repo).unwrap_or(req.repo.clone());
    let dry = req.mode == Mode::DryRun;
    let chosen = &req.chosen;
    let (work_dir, store) = if dry {
        (req.work_dir.clone(), Store::at(&req.work_dir))
    } else {
        Store::open(&req.work_dir).map_err(|e| CliError::usage(e.to_string()))?;
        let work_dir = std::fs::canonicalize(&req.work_dir).unwrap_or(req.work_dir.clone());
        let store = Store::open(&work_dir).map_err(|e| CliError::usage(e.to_string()))?;
        crate::run::apply::save(&work_dir, &req.chosen.cfg.applied).map_err(|e| {
            CliError::infra(format!(
                "saving the applied patches in {}: {e}",
                work_dir.display()
            ))
        })?;
        (work_dir, store)
    };
    let planned = dry.then(|| Planned::new(chosen, &work_dir));
    let jobs = crate::run::jobs::choose(req.jobs, &work_dir);
    let container = match dry {
        true => None,
        false => place::container(chosen.engine, &chosen.cfg, &work_dir)?,
    };
    // Where the steps run, as the reproduce hint names it.
    let ran_in = match (&container, &planned) {
        (Some(c), _) => Some((c.image().to_string(), c.identity())),
        (None, Some(p)) => p.image().map(|image| {
            let engine = match &p.place {
                Where::Image { engine, .. } => engine.to_string(),
                _ => "no engine".to_string(),
            };
            (image.to_string(), engine)
        }),
        (None, None) => None,
    };
    let place = place::place(&chosen.cfg, &repo, req.bad, container, !dry)?;
    let (prober, reproducer) = good::comparing(
        req,
        &place,
        (&canon_repo, &work_dir),
        &range,
        &store,
        events,
    )?;
    // The runs an earlier job posted, seeded before anything asks the store (`resume`).
    if let (Some(resume), false) = (&req.resume, dry) {
        resume.seed(&store, &prober.identity(), events)?;
    }
    let applied: Vec<crate::core::applied::AppliedInfo> = chosen
        .cfg
        .applied
        .iter()
        .map(|a| {
            let saved = crate::run::apply::saved_path(&work_dir, a);
            crate::core::applied::AppliedInfo::of(a, &saved.to_string_lossy())
        })
        .collect();
    let reproduce = reproduce_hint(&chosen.cfg, &place, &canon_repo, ran_in)
        .map(|hint| crate::core::applied::with_apply_lines(&hint, &applied));
    let planned = planned.map(|p| Planned {
        records_good: req.compare_good,
        ..p.with_build(&chosen.cfg, &place)
    });
    let id = crate::run::store::bisect_id(&[
        &canon_repo.to_string_lossy(),
        &range.good,
        &range.bad,
        &prober.identity(),
        &req.predicate.describe(),
        &format!("{:?}", range.spec),
    ]);
    // A --script's backend is unknown unless a configuration flag named it.
    let script = !chosen.cfg.probe.def().is_bundled();
    let backend = (!script || chosen.info.is_some()).then_some(chosen.cfg.backend);
    Ok(Prepared {
        plan: Plan {
            repo_path: canon_repo,
            range,
            predicate: req.predicate.clone(),
            endpoints: req.endpoints,
            jobs: jobs.k,
            jobs_why: jobs.why,
            work_dir,
        },
        store,
        prober,
        runs: req.runs,
        validate: req.validate,
        id,
        reproduce,
        configuration: chosen.info.clone(),
        reproducer,
        backend,
        planned,
        probe: chosen.cfg.probe.clone(),
        applied,
    })
}

/// The shell lines that reproduce one probe of a `--script` by hand (`{sha}` placeholder),
/// naming the image the bisect ran its steps in (`ran_in`: image, engine); none for the
/// bundled probes, whose report names their reproducer line instead.
fn reproduce_hint(
    cfg: &Resolved,
    place: &crate::run::probers::Place,
    repo: &std::path::Path,
    ran_in: Option<(String, String)>,
) -> Option<String> {
    let (build, script) = cfg.probe.script()?;
    let p = ScriptProber {
        build: build.map(str::to_string),
        script: script.to_string(),
        timeout: cfg.timeout_s.map(std::time::Duration::from_secs_f64),
        launcher: Box::new(HostLauncher),
        env: crate::run::probers::script_env(cfg, place, &place.fallback_facts)
            .into_iter()
            .filter(|(k, _)| !k.starts_with("CCACHE_"))
            .collect(),
        build_only: cfg.build_only,
    };
    let hint = p.reproduce_hint(repo, "{sha}");
    Some(match ran_in {
        Some((image, engine)) => format!(
            "# the bisect ran these steps in {image} ({engine}), $SRC mounted read-only\n{hint}"
        ),
        None => hint,
    })
}

/// What carrying out a prepared request gives back, for the command line to render, write
/// and publish (run writes and prints nothing of it).
pub enum Done {
    /// A bisection's result document (`Mode::Run`), stamped and saved for `show`.
    Result(Box<BisectResult>),
    /// `--plan-only`'s next wave, `--probe`'s stored run: JSON.
    Json(serde_json::Value),
    /// `--dry-run`: the plan, assembled from what `prepare` learned without making anything.
    Planned(Box<PlanFacts>),
}

/// Carries out what `mode` asks of a prepared request: bisect to the result document, plan
/// the next wave, probe one planned run, or (`Mode::DryRun`) assemble the plan, making nothing.
pub fn carry_out(p: &Prepared, mode: &Mode, events: &dyn Sink) -> anyhow::Result<Done> {
    match mode {
        Mode::Run => execute(p, events).map(|r| Done::Result(Box::new(r))),
        Mode::Probe { sha, run_index } => probe_one(p, sha, *run_index, events).map(Done::Json),
        Mode::PlanOnly => plan_next(p).map(Done::Json),
        Mode::DryRun => plan_document::facts(p).map(|f| Done::Planned(Box::new(f))),
    }
}

/// `--plan-only`: the next wave for `--jobs K` slots from the stored results alone (JSON).
pub fn plan_next(p: &Prepared) -> anyhow::Result<serde_json::Value> {
    crate::run::distributed::plan_next(&p.plan, p.prober.as_ref(), &p.store, p.runs)
}

/// `--probe SHA`: one planned run of one commit, stored (JSON).
pub fn probe_one(
    p: &Prepared,
    sha: &str,
    run_index: Option<usize>,
    events: &dyn Sink,
) -> anyhow::Result<serde_json::Value> {
    crate::run::distributed::probe_one(&p.plan, p.prober.as_ref(), &p.store, sha, run_index, events)
}

/// Runs the bisection to its conclusion and returns its result document (stamped and saved
/// for `show`). Errors: exit 2 for the user's input (a revision), 3 for the machinery.
pub fn execute(p: &Prepared, events: &dyn Sink) -> anyhow::Result<BisectResult> {
    let journal = p
        .store
        .open_journal(&p.id)
        .map_err(|e| CliError::infra(e.to_string()))?;
    let r = &p.plan.range;
    events.emit(Event::Started {
        commits: r.commits,
        candidates: r.candidates.len(),
        work_dir: p.plan.work_dir.display().to_string(),
        journal: journal.display().to_string(),
    });
    let prober = p.prober.as_ref();
    let outcome = match p.runs {
        // Waves of --jobs runs: spare slots re-run undecided candidates (driver docs).
        Policy::Confidence {
            confidence,
            max_runs,
        } => crate::run::driver::bisect_session(
            &p.plan, prober, confidence, max_runs, &p.store, events,
        ),
        Policy::Repeat(n) if n > 1 => {
            crate::run::driver::bisect_commits(&p.plan, prober, &Fixed(n), &p.store, events)
        }
        Policy::Repeat(_) => {
            crate::run::driver::bisect_commits(&p.plan, prober, &Deterministic, &p.store, events)
        }
    }
    .map_err(|e| driver_error(e, p))?;
    document::assemble(p, &outcome, events)
}

/// A driver error as the command reports it; a systematic untestable names the configuration
/// by its values too (`--config ID` alone does not say what was asked; explicit flags have no
/// id at all).
fn driver_error(e: DriverError, p: &Prepared) -> anyhow::Error {
    match e {
        DriverError::Git(g) => git_error(g),
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
                .unwrap_or_else(|| {
                    format!(
                        "backend={}",
                        p.backend
                            .unwrap_or(crate::core::build::Backend::Cpu)
                            .as_str()
                    )
                });
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
        other => CliError::infra(other.to_string()),
    }
}
