//! `bisect-config`: the first failing value along one configuration axis at a fixed commit
//! (the outer level of the two-level question; the commit level is the ordinary bisect).

use super::*;

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
    let value = match (v.parse::<i64>(), v) {
        (Ok(i), _) if axis == "wave_size" => Value::Int(i),
        (_, "true") => Value::Bool(true),
        (_, "false") => Value::Bool(false),
        _ => Value::Str(v.into()),
    };
    m.with_value(base, axis, &value)
        .map_err(|e| CliError::usage(format!("--axis {axis} = {v}: {e}")))
}

pub fn run_bisect_config(args: BisectConfigArgs) -> anyhow::Result<i32> {
    let m = load(&args.run.config)?;
    let base = match &args.base {
        Some(id) => m.find(id).ok_or_else(|| {
            CliError::usage(format!("--base {id}: no such configuration in {}", m.file))
        })?,
        None => m
            .configs
            .first()
            .ok_or_else(|| CliError::usage(format!("{}: the matrix is empty", m.file)))?,
    };
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
    let signature = match &args.signature {
        Some(s) => {
            Some(regex::Regex::new(s).map_err(|e| CliError::usage(format!("--match {s}: {e}")))?)
        }
        None => None,
    };
    let predicate = Predicate::new(args.regress, signature);
    let configs = ladder
        .iter()
        .map(|v| at_value(&m, base, &args.axis, v))
        .collect::<anyhow::Result<Vec<Config>>>()?;
    crate::probe::exec::install_interrupt_handler();
    let runner = runner(&args.run, &m, "bisect-config-logs")?;
    let mut rev = resolve(&runner, std::slice::from_ref(&args.rev))?.remove(0);
    runner.checkout(&mut rev).map_err(run_error)?;
    let progress = crate::run::progress::Progress::for_stderr(1);
    let mut search = Search::new((0..ladder.len() as u64).collect(), EndpointCheck::First);
    let mut probed: Vec<(usize, Cell, Verdict)> = Vec::new();
    let answer = loop {
        match search.next(1) {
            Step::Probe(ix) => {
                let i = ix[0];
                let label = format!("{}={}", args.axis, ladder[i]);
                let cell = runner.run_cell(&configs[i], &rev, &|p| {
                    progress.phase(0, &rev.sha[..10], &label, p.as_str())
                });
                if cell.outcome == Outcome::InfraError {
                    return Err(CliError::infra(format!(
                        "{label}: infrastructure error after {} attempts: {}; log: {}",
                        cell.attempts,
                        cell.signature.unwrap_or_default(),
                        cell.log.display()
                    )));
                }
                let output = std::fs::read_to_string(&cell.log).unwrap_or_default();
                let verdict = predicate.judge(cell.outcome, &output);
                progress.line(&format!("{label}: {} -> {verdict:?}", cell.outcome));
                search.record(i, verdict);
                probed.push((i, cell, verdict));
            }
            Step::Done(a) => break Ok(a),
            Step::BadEndpoint { which, got } => break Err((which, got)),
        }
    };
    progress.finish();
    let conclusion = match answer {
        Ok(Answer::Found(i)) => Conclusion::Found { index: i },
        Ok(Answer::Ambiguous(indices)) => Conclusion::Ambiguous { indices },
        Err((which, got)) => Conclusion::BadEndpoint { which, got },
    };
    let found = match conclusion {
        Conclusion::Found { index } => Some(index),
        _ => None,
    };
    probed.sort_by_key(|(i, _, _)| *i);
    let mut result = BisectConfigResult {
        schema: Kind::BisectConfig.tag(),
        axis: args.axis.clone(),
        ladder: ladder.clone(),
        rev: rev.rev.clone(),
        sha: rev.sha.clone(),
        predicate: predicate.describe(),
        exit_code: crate::report::bisect::exit_code(&conclusion),
        conclusion,
        first_failing: found.map(|i| ladder[i].clone()),
        first_failing_config: found.map(|i| config_details(&configs[i])),
        probes: probed
            .into_iter()
            .map(|(i, cell, verdict)| ConfigProbe {
                value: ladder[i].clone(),
                config: configs[i].id.clone(),
                verdict,
                cell,
            })
            .collect(),
        commit_bisect: None,
    };
    if let (Some(good), Some(i)) = (&args.good_rev, found) {
        let b = bisect_commits_in(&args, &runner, &configs[i], &rev, good, &predicate)?;
        result.exit_code = b.exit_code;
        result.commit_bisect = Some(Box::new(b));
    }
    let md = crate::report::config::markdown(&result);
    write_results(&args.run.out, "bisect-config", &result, &md)?;
    out(&md)?;
    Ok(result.exit_code)
}

/// The second level: a commit bisection (the driver, store and report of `setrows-bisect`) with
/// the prober of the configuration found by the first level.
fn bisect_commits_in(
    args: &BisectConfigArgs,
    runner: &Runner,
    config: &Config,
    bad: &Rev,
    good: &str,
    predicate: &Predicate,
) -> anyhow::Result<BisectResult> {
    use crate::cli::bisect::git_error;
    use crate::run::git;
    let repo = git::open(&args.run.repo).map_err(git_error)?;
    let good_id = git::resolve(&repo, good, "--good-rev").map_err(git_error)?;
    let bad_id = git::resolve(&repo, &bad.sha, "--rev").map_err(git_error)?;
    let spec = git::RangeSpec {
        first_parent: true,
        path: None,
    };
    let range = git::plan_range(&repo, good_id, bad_id, &spec).map_err(git_error)?;
    let work_dir = work_dir(&args.run);
    let store =
        crate::run::store::Store::open(&work_dir).map_err(|e| CliError::usage(e.to_string()))?;
    let prober = runner.prober(config, bad).map_err(CliError::infra)?;
    let plan = crate::run::driver::Plan {
        repo_path: std::fs::canonicalize(&args.run.repo).unwrap_or(args.run.repo.clone()),
        range,
        predicate: predicate.clone(),
        endpoints: EndpointCheck::First,
        jobs: 1,
        work_dir,
    };
    let progress = crate::run::progress::Progress::for_stderr(1);
    let outcome = crate::run::driver::bisect_commits(
        &plan,
        &prober,
        &crate::core::evidence::Deterministic,
        &store,
        &progress,
    )
    .map_err(|e| match e {
        crate::run::driver::DriverError::Git(g) => git_error(g),
        other => CliError::infra(other.to_string()),
    })?;
    Ok(crate::report::bisect::result(
        &plan.range,
        predicate,
        &outcome,
        None,
    ))
}
