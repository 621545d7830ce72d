//! `--compare-good`: the decode probe compares each commit's logits with the `--good`
//! commit's own. Every other reference of the decode probe is the probed tree itself (graph
//! reuse off, another path), so a change of model math that all its paths share (a wrong
//! attention mask, a hyperparameter no longer read) is invisible to them; the good commit's
//! logits were computed by the code before the change.
//!
//! The logits are recorded by one probe of `--good` before the search, kept under the work
//! directory named by what produced them (repository, commit, the recording prober's identity),
//! so a resumed run or a second bisect with the same good end records nothing again. A good
//! end that does not pass the probe cannot be the reference: the run stops there, naming it.
//! The recording is also the `--good` end's run under the comparison (`answer_good_end`): the
//! good commit's logits compared with themselves are equal by construction, so the search never
//! builds and decodes the good end a second time.

use super::{Mode, Request};
use crate::core::progress::{Event, Sink};
use crate::core::range::Range;
use crate::core::result::ReproducerInfo;
use crate::error::CliError;
use crate::probe::decode::GoodLogits;
use crate::probe::{Phase, Prober};
use crate::run::probers::{prober_comparing, Place};
use crate::run::slots::{Noting, Probing, RunSpec, Slot};
use crate::run::store::{Store, StoreKey, StoredRun};
use sha2::{Digest, Sha256};
use std::path::Path;

/// The prober every probe of `req` runs and the reproducer line the report names. Under
/// `--compare-good` (not for a dry run, which makes nothing) the `--good` commit's logits are
/// recorded first (`recorded`), the prober compares with them, the report's reproducer line
/// names the comparison, and the recording answers the good end (`answer_good_end`); otherwise
/// the configuration's prober and reproducer as they are. `repo` and `work_dir` are the
/// canonical paths the plan keeps.
pub(super) fn comparing(
    req: &Request,
    place: &Place,
    (repo, work_dir): (&Path, &Path),
    range: &Range,
    store: &Store,
    events: &dyn Sink,
) -> anyhow::Result<(Box<dyn Prober>, Option<ReproducerInfo>)> {
    let chosen = &req.chosen;
    let good_logits = match req.compare_good && req.mode != Mode::DryRun {
        false => GoodLogits::Off,
        true => {
            let recorder = prober_comparing(&chosen.cfg, place, GoodLogits::Record);
            // `--probe` runs in the planned slot, a bisection's first probe in slot 0
            let slot = match req.mode {
                Mode::Probe { .. } => crate::run::distributed::PLANNED_SLOT,
                _ => "0",
            };
            recorded(repo, &range.good, work_dir, slot, &recorder, events)?
        }
    };
    // The report names what every probe ran, the comparison with the good logits included.
    let mut reproducer = chosen.reproducer.clone();
    if let (Some(r), GoodLogits::Compare { sha256, .. }) = (reproducer.as_mut(), &good_logits) {
        r.args.extend([
            "--logits-ref".to_string(),
            GoodLogits::compared_name(sha256),
        ]);
        r.source.push_str(&format!(
            "; --compare-good: logits recorded at --good {}",
            crate::core::range::short_sha(&range.good)
        ));
    }
    let prober: Box<dyn Prober> =
        Box::new(prober_comparing(&chosen.cfg, place, good_logits.clone()));
    if let Some(first) = range.candidates.first() {
        answer_good_end(
            store,
            &range.good,
            &first.tree,
            prober.as_ref(),
            &good_logits,
        )?;
    }
    Ok((prober, reproducer))
}

/// The recorded logits of `good` (recording them first when they are not kept yet), as the
/// comparison every probe of the bisect makes. `recorder` is the configuration's prober with
/// `GoodLogits::Record`; it records in `slot`, the one the first probe after it will use, so
/// that probe's build is incremental.
fn recorded(
    repo_path: &Path,
    good: &str,
    work_dir: &Path,
    slot: &str,
    recorder: &dyn Prober,
    events: &dyn Sink,
) -> anyhow::Result<GoodLogits> {
    let identity = recorder.identity();
    let canon = std::fs::canonicalize(repo_path).unwrap_or(repo_path.to_path_buf());
    let key = crate::run::store::bisect_id(&[&canon.to_string_lossy(), good, &identity]);
    let file = work_dir.join("good-logits").join(format!("{key}.bin"));
    if !file.exists() || !report_of(&file).exists() {
        record(repo_path, good, work_dir, slot, recorder, &file, events)?;
    }
    let bytes = std::fs::read(&file).map_err(|e| {
        CliError::infra(format!(
            "--compare-good: cannot read {}: {e}",
            file.display()
        ))
    })?;
    Ok(GoodLogits::Compare {
        sha256: hex::encode(Sha256::digest(&bytes)),
        file,
    })
}

/// Where the recording probe's report is kept, beside its logits.
fn report_of(file: &Path) -> std::path::PathBuf {
    file.with_extension("report.json")
}

/// Stores the recording as the run of the good end (`good_tree`, the range's first candidate)
/// under `prober`, the comparing one, unless a run of it is stored already.
fn answer_good_end(
    store: &Store,
    good: &str,
    good_tree: &str,
    prober: &dyn Prober,
    logits: &GoodLogits,
) -> anyhow::Result<()> {
    let GoodLogits::Compare { file, .. } = logits else {
        return Ok(());
    };
    let key = StoreKey::new(good_tree, &prober.identity());
    if store.has_run(&key, 0) {
        return Ok(());
    }
    let infra = |e: String| CliError::infra(format!("--compare-good: {e}"));
    let text = std::fs::read_to_string(report_of(file))
        .map_err(|e| infra(format!("{}: {e}", report_of(file).display())))?;
    let mut report: crate::probe::ProbeReport =
        serde_json::from_str(&text).map_err(|e| infra(e.to_string()))?;
    report.provenance.insert(
        "good_logits".into(),
        "the recording of the reference: these logits are what every probe is compared with".into(),
    );
    let run = StoredRun {
        tree: good_tree.to_string(),
        identity: prober.identity(),
        commit: good.to_string(),
        recorded_at: chrono::Utc::now().to_rfc3339(),
        report,
    };
    store
        .save(&key, 0, &run)
        .map_err(|e| infra(e.to_string()))?;
    Ok(())
}

/// One probe of `good` in `slot`; its logits are copied to `file` only when it passed.
fn record(
    repo_path: &Path,
    good: &str,
    work_dir: &Path,
    slot: &str,
    recorder: &dyn Prober,
    file: &Path,
    events: &dyn Sink,
) -> anyhow::Result<()> {
    let short = crate::core::range::short_sha(good);
    events.emit(Event::Note {
        text: format!("--compare-good: recording the logits of --good {short} (one probe before the search; every probe is compared with them)"),
    });
    let infra = |e: String| CliError::infra(format!("--compare-good: {e}"));
    // The build is the one the probes make (only the run differs): named by the slot identity.
    let dir = Slot::dir(work_dir, repo_path, &recorder.slot_identity(), slot);
    let slot = Slot::lock(dir).map_err(|e| infra(e.to_string()))?;
    let repo = crate::run::git::open(repo_path).map_err(|e| infra(e.to_string()))?;
    let log = work_dir
        .join("logs")
        .join(format!("good-logits-{short}.log"));
    if let Some(dir) = log.parent() {
        std::fs::create_dir_all(dir).map_err(|e| infra(format!("{}: {e}", dir.display())))?;
    }
    let run_name = format!("setrows-good-{short}-{}", std::process::id());
    let events_of = crate::run::events::Probe::new(events, 0, good, "--good (recording)");
    // THE slot loop (checkout of what the prober reads, infrastructure retries), storing
    // nothing: the recording is kept beside its logits, and stored as the good end's run
    // under the comparison (`answer_good_end`).
    let opened_nothing = Store::at(work_dir);
    let probing = Probing {
        store: None,
        ..Probing::new(recorder, &opened_nothing)
    };
    let run = RunSpec {
        repo: &repo,
        sha: good,
        tree: "",
        index: 0,
        name: &run_name,
        build: None,
        log: Some(&log),
    };
    let hooks = Noting::new(events, "--compare-good".into(), |p: Phase| {
        events_of.phase(p)
    });
    let report = probing
        .attempt_in(&slot, &run, &hooks.hooks())
        .map_err(|e| infra(e.to_string()))?
        .report;
    let build = slot.build();
    if report.outcome != crate::core::outcome::Outcome::Pass {
        let why = format!(
            "--good {short} does not pass the decode probe ({}{}), so its logits cannot be the reference; log: {}",
            report.outcome.as_str(),
            report
                .signature
                .as_deref()
                .map(|s| format!(": {s}"))
                .unwrap_or_default(),
            report.log_path.display()
        );
        // the machinery's failure, or a reason of this machine for every commit: exit 3
        return Err(match report.outcome {
            crate::core::outcome::Outcome::InfraError => infra(why),
            _ if report.is_systematic() => infra(why),
            _ => CliError::usage(format!("--compare-good: {why}")),
        });
    }
    let written = std::fs::read(build.join(GoodLogits::RECORDED))
        .map_err(|e| infra(format!("the recording probe wrote no logits ({e})")))?;
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir).map_err(|e| infra(format!("{}: {e}", dir.display())))?;
    }
    crate::run::store::write_atomic(file, &written)
        .map_err(|e| infra(format!("{}: {e}", file.display())))?;
    let kept = serde_json::to_vec_pretty(&report).unwrap_or_default();
    crate::run::store::write_atomic(&report_of(file), &kept)
        .map_err(|e| infra(format!("{}: {e}", report_of(file).display())))?;
    events.emit(Event::Note {
        text: format!(
            "--compare-good: recorded {} KiB of logits at --good {short} ({:.0} s)",
            written.len() / 1024,
            report.duration_s
        ),
    });
    Ok(())
}
