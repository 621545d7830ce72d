//! `matrix` as a request, the bisect's path: cli checks every input and builds a `Request`
//! (plain data), `prepare` makes what a run needs (the engine, the store, the revisions), and
//! `carry_out` gives back what the request asks for (`Done`): `execute` runs the cells and
//! assembles the one result document (`MatrixResults`); a dry run's cells are resolved
//! (`Plan`) and nothing runs.

use super::{ConfigRow, MatrixResults, Rev, RunError, Runner};
use crate::core::matrix::{Config, RawProbe};
use crate::core::progress::{Event, Sink};
use crate::core::result::Kind;
use crate::probe::container::{Engine, EngineChoice};
use std::path::PathBuf;

/// One `matrix` run, every input checked (cli): which configurations at which revisions.
#[derive(Debug, Clone)]
pub struct Request {
    pub repo: PathBuf,
    pub work_dir: PathBuf,
    pub engine: EngineChoice,
    /// The matrix's `[probe]`.
    pub probe: RawProbe,
    /// `--timeout` in seconds, in place of `[probe] timeout_s`.
    pub timeout: Option<f64>,
    pub retries: u32,
    /// Where each cell's log goes.
    pub log_dir: PathBuf,
    /// Answer nothing from the store and store nothing (`--fresh`).
    pub fresh: bool,
    pub build_only: bool,
    /// The matrix file the configurations come from (for the result).
    pub matrix_file: String,
    pub configs: Vec<Config>,
    /// Revisions as the user wrote them; `prepare` resolves them.
    pub revisions: Vec<String>,
    /// `--dry-run`: resolve every cell and make nothing (no store, no checkout, no run).
    pub dry_run: bool,
    /// `--apply`: patches applied to every cell's tree before its build (read once).
    pub applied: Vec<crate::core::applied::AppliedPatch>,
}

/// What `Prepared::on_cell` is handed: the document as it stands.
pub type OnCell = Box<dyn Fn(&MatrixResults)>;

/// A request made runnable: its runner (engine, store) and resolved revisions.
pub struct Prepared {
    pub runner: Runner,
    pub revs: Vec<Rev>,
    pub configs: Vec<Config>,
    pub(super) matrix_file: String,
    /// `--engine` as asked (the commit level of `bisect-config` runs under the same choice).
    pub(super) engine_choice: EngineChoice,
    dry_run: bool,
    /// Called with the document so far after every cell (and once before the first, with no
    /// cells): the command line writes it to --out, so a run killed mid-way (a job's timeout, a
    /// cancel) leaves every finished cell on disk and the plan for the rest.
    pub on_cell: Option<OnCell>,
    /// `matrix --time-limit`: no cell starts after this much of the run; the rest are recorded
    /// as `infra_error` saying so, so a job's own limit (which records nothing but "cut off")
    /// is not what ends a run whose cells hang one after another.
    pub time_limit: Option<std::time::Duration>,
}

/// What carrying out a prepared request gives back, for the command line to word, write and
/// publish (as `run::bisect::Done`).
pub enum Done {
    /// Every cell's result, the document written to `--out`.
    Results(Box<MatrixResults>),
    /// `--dry-run`: what a run would do.
    Planned(Plan),
}

/// A dry run's answer: every cell, revision by revision, as a run would resolve it.
pub struct Plan {
    pub revisions: usize,
    pub configurations: usize,
    /// `--build-only`: each cell would stop after its build.
    pub build_only: bool,
    /// What a run would lack here (`Runner::engine_lacking`); a run stops on it.
    pub lacking: Option<String>,
    pub cells: Vec<PlannedCell>,
}

/// One cell as a run would resolve it (`matrix --dry-run`): nothing is checked out or run.
pub struct PlannedCell {
    pub sha: String,
    /// The revision as the user wrote it.
    pub rev: String,
    pub id: String,
    pub label: String,
    pub image: Option<String>,
    /// What the configuration gives a script probe at this revision (CMake arguments, launch
    /// settings), spelled for the revision's own tree.
    pub env: Vec<(String, String)>,
}

/// The engine `choice` names, detected once (infrastructure when it is not usable).
pub fn engine(choice: EngineChoice) -> Result<Option<Engine>, RunError> {
    Engine::detect(choice).map_err(|e| RunError::Engine(e.to_string()))
}

/// What a run would lack when `choice` names no engine that answers, in one sentence (a run
/// says why in full when it stops on it).
fn would_lack(choice: EngineChoice) -> String {
    match choice {
        EngineChoice::Podman => "a run would need podman: it does not answer here".into(),
        EngineChoice::Docker => "a run would need docker: it does not answer here".into(),
        _ => "a run would need podman or docker: none answers here".into(),
    }
}

/// Resolves the revisions and opens the store. A dry run opens no store and reads each
/// revision's tree facts from its commit instead of a checkout, so nothing is made; its cells
/// are resolved from the same runner a run uses (`carry_out`).
pub fn prepare(req: Request) -> Result<Prepared, RunError> {
    let dry = req.dry_run;
    let engine_choice = req.engine;
    let (found, lacking) = match engine(req.engine) {
        Ok(e) => (e, None),
        // A dry run makes nothing: it plans the containers a run would use and says what the
        // run would lack, instead of stopping where the run would.
        Err(_) if dry => (None, Some(would_lack(req.engine))),
        Err(e) => return Err(e),
    };
    let mut runner = Runner::new(
        req.repo,
        req.work_dir,
        found,
        req.probe,
        req.retries,
        req.log_dir,
    );
    runner.engine_lacking = lacking;
    runner.build_only = req.build_only;
    runner.applied = req.applied.clone();
    if !dry && !req.applied.is_empty() {
        crate::run::apply::save(&runner.work_dir, &req.applied)
            .map_err(|e| RunError::WorkDir(format!("saving the applied patches: {e}")))?;
    }
    if let Some(t) = req.timeout {
        runner.timeout = Some(std::time::Duration::from_secs_f64(t));
    }
    if !req.fresh && !dry {
        runner.store = Some(
            crate::run::store::Store::open(&runner.work_dir)
                .map_err(|e| RunError::WorkDir(e.to_string()))?,
        );
    }
    let mut revs = req
        .revisions
        .iter()
        .map(|r| runner.resolve(r))
        .collect::<Result<Vec<_>, _>>()?;
    if dry {
        let repo = crate::run::git::open(&runner.repo)?;
        for rev in revs.iter_mut() {
            let id = crate::run::git::Oid::from_str(&rev.sha)
                .map_err(|e| RunError::Tree(format!("{}: {e}", rev.sha)))?;
            rev.facts = crate::run::bisect::facts_at(&repo, id)
                .map_err(|e| RunError::Tree(format!("{e:#}")))?
                .1;
        }
    }
    Ok(Prepared {
        runner,
        revs,
        configs: req.configs,
        matrix_file: req.matrix_file,
        engine_choice,
        dry_run: dry,
        on_cell: None,
        time_limit: None,
    })
}

/// Carries out what the request asks: every cell run (`execute`), or for a dry run the cells
/// as a run would resolve them (`planned`), nothing made.
pub fn carry_out(p: Prepared, events: &dyn Sink) -> Result<Done, RunError> {
    match p.dry_run {
        false => execute(p, events).map(|r| Done::Results(Box::new(r))),
        true => Ok(Done::Planned(planned(&p))),
    }
}

/// Every cell of a dry run, revision by revision, with each revision's own CMake and
/// unified-memory spellings read from its commit (as a run reads them from its checkout).
fn planned(p: &Prepared) -> Plan {
    let mut cells = Vec::with_capacity(p.revs.len() * p.configs.len());
    for rev in &p.revs {
        for c in &p.configs {
            cells.push(PlannedCell {
                sha: rev.sha.clone(),
                rev: rev.rev.clone(),
                id: c.id.clone(),
                label: c.label(),
                image: c.image.clone(),
                env: p.runner.env(c, rev),
            });
        }
    }
    Plan {
        revisions: p.revs.len(),
        configurations: p.configs.len(),
        build_only: p.runner.build_only,
        lacking: p.runner.engine_lacking.clone(),
        cells,
    }
}

/// Every cell, revision by revision (one checkout each), as events; then the result document.
pub fn execute(p: Prepared, events: &dyn Sink) -> Result<MatrixResults, RunError> {
    let Prepared {
        runner,
        mut revs,
        configs,
        matrix_file,
        on_cell,
        time_limit,
        ..
    } = p;
    let started = std::time::Instant::now();
    let total = configs.len() * revs.len();
    let mut doc = MatrixResults {
        schema: Kind::Matrix.tag(),
        matrix: matrix_file,
        engine: runner
            .engine
            .as_ref()
            .map(|e| e.kind.as_str().to_string())
            .unwrap_or_else(|| "none".into()),
        revisions: revs.clone(),
        configs: configs.iter().map(ConfigRow::of).collect(),
        cells: Vec::new(),
        build_only: runner.build_only,
        applied: runner
            .applied
            .iter()
            .map(|a| {
                let saved = crate::run::apply::saved_path(&runner.work_dir, a);
                crate::core::applied::AppliedInfo::of(a, &saved.to_string_lossy())
            })
            .collect(),
        invocation: crate::run::stamp::invocation(&runner.repo),
    };
    let written = |d: &MatrixResults| {
        if let Some(f) = &on_cell {
            f(d)
        }
    };
    written(&doc);
    'run: for (i, rev) in revs.iter_mut().enumerate() {
        if time_limit.is_some_and(|l| started.elapsed() >= l) {
            break 'run;
        }
        runner.checkout(rev)?;
        let rev = &*rev;
        for c in &configs {
            if time_limit.is_some_and(|l| started.elapsed() >= l) {
                break 'run;
            }
            let label = c.label();
            let probe = crate::run::events::Probe::new(events, 0, &rev.sha, &label);
            let cell = runner.run_cell(c, rev, &|p| probe.phase(p));
            events.emit(Event::Cell {
                position: Some((doc.cells.len() + 1, total)),
                id: Some(c.id.to_string()),
                label,
                sha: rev.sha.clone(),
                outcome: cell.outcome,
                verdict: None,
                signature: cell.signature.clone(),
                cached: cell.cached,
            });
            doc.cells.push(cell);
            // The checkout's tree facts are the runtime's own; the document keeps its revision.
            doc.revisions[i] = rev.clone();
            written(&doc);
        }
    }
    if let Some(l) = time_limit {
        let minutes = l.as_secs_f64() / 60.0;
        let minutes = match minutes.fract() == 0.0 {
            true => format!("{minutes:.0}"),
            false => format!("{minutes:.2}"),
        };
        if doc.cut_off(&format!(
            "not run: the run's time limit of {minutes} min was reached"
        )) > 0
        {
            written(&doc);
        }
    }
    events.emit(Event::Finished);
    doc.revisions = revs;
    Ok(doc)
}
