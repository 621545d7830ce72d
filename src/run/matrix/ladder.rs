//! `bisect-config`'s first level as a request: the first value along an ordered axis (the
//! ladder, one configuration per value) at one revision, with the same search as a commit
//! bisection. cli checks the inputs and builds the `Ladder`; this runs it and assembles the
//! result document; the commit level (`--good-rev`) is a `run::bisect` request of its own, in
//! the configuration of the first failing value (`commit_configuration`).

use super::request::Prepared;
use super::{Cell, RunError};
use crate::core::matrix::Config;
use crate::core::outcome::{Outcome, Predicate, Verdict};
use crate::core::progress::{Event, Sink};
use crate::core::result::{BisectConfigResult, ConfigDetails, ConfigProbe, Kind};
use crate::core::search::{Conclusion, EndpointCheck, Search, Step};
use crate::probe::container::EngineChoice;
use crate::run::bisect::{Chosen, Naming};

/// The question: which value of `axis` first makes `predicate` hold. `Prepared::configs` are
/// the ladder's configurations, in its order; `Prepared::revs` the one revision.
pub struct Ladder {
    pub axis: String,
    pub values: Vec<String>,
    pub predicate: Predicate,
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

/// Checks each distinct image once, then searches the ladder at the revision. The result's
/// `commit_bisect` is left for the commit level.
pub fn execute(
    p: &mut Prepared,
    ladder: &Ladder,
    events: &dyn Sink,
) -> Result<BisectConfigResult, LadderError> {
    let configs = &p.configs;
    if let Some(engine) = &p.runner.engine {
        let mut seen = Vec::new();
        for (c, value) in configs.iter().zip(&ladder.values) {
            let Some(image) = c.image.as_deref().filter(|i| !seen.contains(i)) else {
                continue;
            };
            seen.push(image);
            if let Err(e) = engine.image_digest(image) {
                return Err(LadderError::Image {
                    axis: ladder.axis.clone(),
                    value: value.clone(),
                    why: e.to_string(),
                });
            }
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
        exit_code: crate::run::bisect::exit_code(&conclusion),
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
/// question), named by its id, in its image unless `engine` is `--engine none`.
pub fn commit_configuration(p: &Prepared, index: usize, engine: EngineChoice) -> Chosen {
    let mut cfg = p.runner.resolved(&p.configs[index]);
    cfg.source = Some(p.matrix_file.clone());
    let args_from = format!("configuration {}", cfg.id.as_deref().unwrap_or("(unnamed)"));
    Chosen::new(
        cfg,
        Naming {
            engine: Some(engine),
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
