//! `bisect-config` as a request, the bisect's path: cli checks every input and builds a
//! [`Request`] (the ladder's cells as a matrix request, the question, and the commit level);
//! [`prepare`] makes what the ladder needs; [`carry_out`] searches the ladder
//! with the same search as a commit bisection and assembles the one result document, or for a
//! dry run resolves every value's cell and image ([`LadderPlan`]). The commit level
//! (`--good-rev`) is handed back as the `run::bisect` request it is, in the first failing
//! value's configuration ([`Done::Searched`]): cli carries it out as it carries out `bisect`
//! (reading `--resume-from-issue` first, posting after).

use super::request::{self, Prepared as Cells};
use super::{Cell, RunError};
use crate::core::matrix::Config;
use crate::core::outcome::{Outcome, Predicate, Verdict};
use crate::core::progress::{Event, Sink};
use crate::core::result::{BisectConfigResult, ConfigDetails, ConfigProbe, Kind};
use crate::core::search::{Conclusion, EndpointCheck, Search, Step};
use crate::probe::container::Engine;
use crate::run::bisect::{Chosen, Naming};
use crate::run::git::Oid;

/// The question: which value of `axis` first makes `predicate` hold. The cells' configurations
/// are the ladder's, in its order; their revision is the one fixed commit.
pub struct Ladder {
    pub axis: String,
    pub values: Vec<String>,
    pub predicate: Predicate,
}

/// One `bisect-config` run, every input checked (cli).
pub struct Request {
    /// The ladder's cells: one configuration per value, one revision.
    pub cells: request::Request,
    pub ladder: Ladder,
    pub commit: Option<CommitLevel>,
}

/// The commit level (`--good-rev`): the commit bisect `good..bad` as asked, made a request once
/// the ladder has named its configuration (the first failing value's).
pub struct CommitLevel {
    pub good: Oid,
    pub bad: Oid,
    pub request: Box<dyn FnOnce(Chosen) -> crate::run::bisect::Request>,
}

/// A request made runnable (the runner, the revision resolved).
pub struct Prepared {
    cells: Cells,
    ladder: Ladder,
    commit: Option<CommitLevel>,
    dry_run: bool,
}

/// What carrying out a prepared request gives back, for the command line to word, write and
/// publish.
pub enum Done {
    /// `--dry-run`: what a run would do.
    Planned(LadderPlan),
    /// The ladder searched; `commit`: the commit level to carry out next, in the configuration
    /// of the first failing value (none without `--good-rev`, or when no value failed).
    Searched {
        result: Box<BisectConfigResult>,
        commit: Option<Box<crate::run::bisect::Request>>,
    },
}

/// A dry run's answer: the revision, the search's bound, and every value's cell and image.
pub struct LadderPlan {
    pub sha: String,
    /// The revision as the user wrote it.
    pub rev: String,
    /// The most probes the search can take (a bisection of the ladder, one value at a time).
    pub expected_probes: usize,
    pub values: Vec<PlannedValue>,
    /// `--good-rev..--rev`, the commit level after the ladder.
    pub commit: Option<(String, String)>,
    /// What a run would lack here (`Runner::engine_lacking`); a run stops on it.
    pub lacking: Option<String>,
}

/// One ladder value as a run would take it.
pub struct PlannedValue {
    pub value: String,
    pub id: String,
    pub label: String,
    pub place: ImagePlace,
}

/// Where a value's cell would run.
pub enum ImagePlace {
    /// `--engine none`: on the host whatever the configuration names.
    HostByFlag,
    /// The configuration names no image.
    HostNoImage,
    /// In `image`, which the engine has (`missing`: it does not, and a run stops before its
    /// first probe).
    Image {
        image: String,
        engine: String,
        missing: Option<String>,
    },
    /// In `image`, but no engine answers here (a dry run's `LadderPlan::lacking` says which).
    NoEngine { image: String },
}

#[derive(Debug, thiserror::Error)]
pub enum LadderError {
    #[error(transparent)]
    Run(#[from] RunError),
    /// A value's image is not usable: one line, before any retry.
    #[error("{axis}={value}: {why} (--engine none runs on the host)")]
    Image {
        axis: String,
        value: String,
        why: String,
    },
    /// A cell could not be tested after its retries: the search cannot go on without it.
    #[error("{label}: infrastructure error{}: {signature}{log}", attempts_note(*.attempts))]
    Infra {
        label: String,
        attempts: u32,
        signature: String,
        /// `; log: PATH` where one was written.
        log: String,
    },
}

/// Resolves the ladder's revision and opens the store (`run::matrix::request::prepare`).
pub fn prepare(req: Request) -> Result<Prepared, RunError> {
    let dry_run = req.cells.dry_run;
    Ok(Prepared {
        cells: request::prepare(req.cells)?,
        ladder: req.ladder,
        commit: req.commit,
        dry_run,
    })
}

/// Carries out what the request asks: the ladder searched and its document assembled, with the
/// commit level's request in the configuration found; or for a dry run the plan, nothing made.
pub fn carry_out(p: Prepared, events: &dyn Sink) -> Result<Done, LadderError> {
    if p.dry_run {
        return Ok(Done::Planned(planned(&p)));
    }
    let Prepared {
        mut cells,
        ladder,
        commit,
        ..
    } = p;
    let result = search(&mut cells, &ladder, events)?;
    let commit = match (commit, &result.conclusion) {
        (Some(level), Conclusion::Found { index }) => Some(Box::new((level.request)(
            commit_configuration(&cells, *index),
        ))),
        _ => None,
    };
    // `cells` (the ladder's checkout slot) is released here: the commit level checks out in
    // its own slots.
    Ok(Done::Searched {
        result: Box::new(result),
        commit,
    })
}

/// Every value's cell and image as a run would take them; nothing is checked out or run.
fn planned(p: &Prepared) -> LadderPlan {
    let n = p.ladder.values.len();
    let rev = &p.cells.revs[0];
    let runner = &p.cells.runner;
    LadderPlan {
        sha: rev.sha.clone(),
        rev: rev.rev.clone(),
        expected_probes: crate::core::search::simulate::worst_case(
            n,
            1,
            EndpointCheck::First,
            n - 1,
        )
        .total,
        values: p
            .ladder
            .values
            .iter()
            .zip(&p.cells.configs)
            .map(|(v, c)| PlannedValue {
                value: v.clone(),
                id: c.id.clone(),
                label: c.label(),
                place: match (&runner.engine_lacking, &c.image) {
                    (Some(_), Some(image)) => ImagePlace::NoEngine {
                        image: image.clone(),
                    },
                    (Some(_), None) => ImagePlace::HostNoImage,
                    (None, _) => image_place(runner.engine.as_ref(), c),
                },
            })
            .collect(),
        commit: p
            .commit
            .as_ref()
            .map(|c| (c.good.to_string(), c.bad.to_string())),
        lacking: runner.engine_lacking.clone(),
    }
}

/// Where `c`'s cell runs, its image looked up once (the same check a run makes first).
fn image_place(engine: Option<&Engine>, c: &Config) -> ImagePlace {
    match (engine, c.image.as_deref()) {
        (None, _) => ImagePlace::HostByFlag,
        (Some(_), None) => ImagePlace::HostNoImage,
        (Some(e), Some(i)) => ImagePlace::Image {
            image: i.to_string(),
            engine: e.kind.as_str().to_string(),
            missing: e.image_digest(i).err().map(|e| e.to_string()),
        },
    }
}

/// Checks each distinct image once, then searches the ladder at the revision. The result's
/// `commit_bisect` is left for the commit level.
fn search(
    p: &mut Cells,
    ladder: &Ladder,
    events: &dyn Sink,
) -> Result<BisectConfigResult, LadderError> {
    let configs = &p.configs;
    let engine = p.runner.engine.as_ref();
    let mut seen = Vec::new();
    for (c, value) in configs.iter().zip(&ladder.values) {
        let Some(image) = c.image.as_deref().filter(|i| !seen.contains(i)) else {
            continue;
        };
        seen.push(image);
        if let ImagePlace::Image {
            missing: Some(why), ..
        } = image_place(engine, c)
        {
            return Err(LadderError::Image {
                axis: ladder.axis.clone(),
                value: value.clone(),
                why,
            });
        }
    }
    let rev = &mut p.revs[0];
    p.runner.checkout(rev)?;
    let rev = &*rev;
    let mut search = Search::new((0..configs.len() as u64).collect(), EndpointCheck::First);
    let mut probed: Vec<(usize, Cell, Verdict)> = Vec::new();
    let conclusion = loop {
        let i = match search.next(1) {
            Step::Probe(ix) => ix[0],
            Step::Done(conclusion) => break conclusion,
        };
        let label = format!("{}={}", ladder.axis, ladder.values[i]);
        let probe = crate::run::events::Probe::new(events, 0, &rev.sha, &label);
        let cell = p.runner.run_cell(&configs[i], rev, &|ph| probe.phase(ph));
        if cell.outcome == Outcome::InfraError {
            let log = match cell.log.is_file() {
                true => format!("; log: {}", cell.log.display()),
                false => String::new(),
            };
            return Err(LadderError::Infra {
                label,
                attempts: cell.attempts,
                signature: cell.signature.unwrap_or_default(),
                log,
            });
        }
        let output = std::fs::read_to_string(&cell.log).unwrap_or_default();
        let verdict = ladder.predicate.judge(cell.outcome, &output);
        events.emit(Event::Cell {
            position: None,
            id: None,
            label,
            sha: rev.sha.clone(),
            outcome: cell.outcome,
            verdict: Some(verdict),
            signature: None,
            cached: cell.cached,
        });
        search.record(i, verdict);
        probed.push((i, cell, verdict));
    };
    events.emit(Event::Finished);
    Ok(document(ladder, configs, rev, conclusion, probed))
}

/// THE bisect-config document, from the search's end and its probes (in ladder order).
fn document(
    ladder: &Ladder,
    configs: &[Config],
    rev: &super::Rev,
    conclusion: Conclusion,
    mut probed: Vec<(usize, Cell, Verdict)>,
) -> BisectConfigResult {
    let found = match conclusion {
        Conclusion::Found { index } => Some(index),
        _ => None,
    };
    probed.sort_by_key(|(i, _, _)| *i);
    BisectConfigResult {
        schema: Kind::BisectConfig.tag(),
        axis: ladder.axis.clone(),
        ladder: ladder.values.clone(),
        rev: rev.rev.clone(),
        sha: rev.sha.clone(),
        predicate: ladder.predicate.describe(),
        exit_code: crate::error::Exit::of_search(matches!(conclusion, Conclusion::Found { .. }))
            .code(),
        conclusion,
        first_failing: found.map(|i| ladder.values[i].clone()),
        first_failing_config: found.map(|i| ConfigDetails::of(&configs[i])),
        probes: probed
            .into_iter()
            .map(|(i, cell, verdict)| ConfigProbe {
                value: ladder.values[i].clone(),
                config: configs[i].id.clone(),
                verdict,
                cell,
            })
            .collect(),
        commit_bisect: None,
    }
}

/// The configuration of the ladder's value `index` as the commit level (`--good-rev`) bisects
/// it: resolved as its cell was (`Runner::resolved`: the matrix's probe, `--timeout`, the build
/// question), named by its id, in its image unless the engine is `--engine none`.
fn commit_configuration(p: &Cells, index: usize) -> Chosen {
    let mut cfg = p.runner.resolved(&p.configs[index]);
    cfg.source = Some(p.matrix_file.clone());
    let args_from = format!("configuration {}", cfg.id.as_deref().unwrap_or("(unnamed)"));
    Chosen::new(
        cfg,
        Naming {
            engine: Some(p.engine_choice),
            image_flag: false,
            named: true,
            configured: true,
            overrides: Vec::new(),
            args_from,
        },
    )
}

/// " after N attempts" where any attempt ran (none when the cell could not start at all).
fn attempts_note(attempts: u32) -> String {
    match attempts {
        0 => String::new(),
        n => format!(" after {n} attempts"),
    }
}
