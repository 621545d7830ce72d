//! `setrows-bisect matrix` (list or run the configurations of matrix.toml) and
//! `setrows-bisect bisect-config` (first failing value along one ordered axis at a fixed
//! commit, with the same search core as commit bisection).
use crate::core::matrix::{self, Config, Matrix, Value};
use crate::core::outcome::{Outcome, Predicate, Regress, Verdict};
use crate::core::result::{
    AnyResult, BisectConfigResult, BisectResult, Conclusion, ConfigDetails, ConfigProbe, Kind,
};
use crate::core::search::{Answer, EndpointCheck, Search, Step};
use crate::error::CliError;
use crate::probe::container::{Engine, EngineChoice};
use crate::run::matrix::{Cell, ConfigRow, MatrixResults, Rev, Runner};
use clap::Args;
use serde_json::json;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ListFormat {
    /// `ID  label  image`, one configuration per line.
    Text,
    /// Every configuration with its values, image, CMake arguments and launch environment.
    Json,
    /// A GitHub Actions matrix (`{"include":[...]}`), one job per image (= per ROCm version),
    /// each with the comma-separated ids to pass to `matrix --only`.
    Github,
}

/// Flags shared by `matrix` and `bisect-config`.
#[derive(Debug, Args)]
pub struct RunFlags {
    /// The matrix file.
    #[arg(long, default_value = "matrix.toml")]
    pub config: PathBuf,
    /// The ggml (or llama.cpp) repository the revisions come from.
    #[arg(long, default_value = ".")]
    pub repo: PathBuf,
    /// Where checkouts, build and ccache directories live.
    #[arg(long, env = "SETROWS_WORK_DIR")]
    pub work_dir: Option<PathBuf>,
    /// Which container engine runs the probes (`none`: the host).
    #[arg(long, value_enum, default_value_t = EngineChoice::Auto)]
    pub engine: EngineChoice,
    /// Probe timeout in seconds (overrides [probe] timeout_s).
    #[arg(long, value_parser = crate::cli::ranges::whole_secs)]
    pub timeout: Option<u64>,
    /// Further attempts after an infrastructure error (engine down, image missing, full disk).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(0..=100))]
    pub retries: u32,
    /// Run every cell again instead of answering from stored results (and store nothing).
    #[arg(long)]
    pub fresh: bool,
    /// Where the results (JSON + markdown) and logs go.
    #[arg(long, default_value = "matrix-results")]
    pub out: PathBuf,
}

#[derive(Debug, Args)]
pub struct MatrixArgs {
    #[command(flatten)]
    pub run: RunFlags,
    /// Print the expanded configurations and exit; nothing runs.
    #[arg(long)]
    pub list: bool,
    #[arg(long, value_enum, default_value_t = ListFormat::Text)]
    pub format: ListFormat,
    /// Revisions to test (default: `revisions` in the matrix file).
    #[arg(long = "rev")]
    pub revs: Vec<String>,
    /// Only these configuration ids (repeat or comma-separate).
    #[arg(long = "only", value_delimiter = ',')]
    pub only: Vec<String>,
    /// `--post-to OWNER/REPO#N`: after the run, keep the `matrix` comment current (docs/github.md).
    #[command(flatten)]
    pub post: crate::cli::report::PostToArgs,
}

#[derive(Debug, Args)]
pub struct BisectConfigArgs {
    #[command(flatten)]
    pub run: RunFlags,
    /// The ordered axis: a matrix axis (`rocm`, `wave_size`, ...) or a reproducer flag
    /// (`arg:--start-row`).
    #[arg(long)]
    pub axis: String,
    /// The ladder, in order (default: the axis's values as written in the matrix file).
    #[arg(long, value_delimiter = ',')]
    pub values: Vec<String>,
    /// Configuration id giving every other value (default: the first configuration).
    #[arg(long)]
    pub base: Option<String>,
    /// The fixed commit.
    #[arg(long, default_value = "HEAD")]
    pub rev: String,
    #[arg(long, value_enum, default_value_t = Regress::Error)]
    pub regress: Regress,
    /// Count only failures whose output matches this regex.
    #[arg(long = "match")]
    pub signature: Option<String>,
    /// The two-level question: once the first failing value is found at `--rev`, bisect the
    /// commits `--good-rev..--rev` in that configuration for the first bad commit.
    #[arg(long)]
    pub good_rev: Option<String>,
}

/// Writes to stdout; a closed pipe (`matrix --list | head`) ends the output quietly.
fn out(text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

/// Reads and parses a matrix file (errors name file, line, column and key).
pub fn read_matrix(path: &Path) -> Result<Matrix, matrix::MatrixError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| matrix::MatrixError {
        file: file.clone(),
        line: 0,
        column: 0,
        key: "-".into(),
        message: format!("cannot read: {e}"),
    })?;
    matrix::parse(&file, &text)
}

fn load(path: &Path) -> anyhow::Result<Matrix> {
    read_matrix(path).map_err(|e| CliError::usage(e.to_string()))
}

fn engine(choice: EngineChoice) -> anyhow::Result<Option<Engine>> {
    Engine::detect(choice).map_err(|e| CliError::infra(e.to_string()))
}

fn work_dir(flags: &RunFlags) -> PathBuf {
    flags
        .work_dir
        .clone()
        .unwrap_or_else(crate::run::store::default_work_dir)
}

fn runner(flags: &RunFlags, m: &Matrix, logs: &str) -> anyhow::Result<Runner> {
    let mut probe = m.probe.clone();
    if let Some(t) = flags.timeout {
        probe.timeout_s = Some(t);
    }
    let mut runner = Runner::new(
        flags.repo.clone(),
        work_dir(flags),
        engine(flags.engine)?,
        probe,
        flags.retries,
        flags.out.join(logs),
    );
    if !flags.fresh {
        runner.store = Some(
            crate::run::store::Store::open(&runner.work_dir)
                .map_err(|e| CliError::usage(e.to_string()))?,
        );
    }
    Ok(runner)
}

fn config_details(c: &Config) -> ConfigDetails {
    ConfigDetails {
        id: c.id.clone(),
        label: c.label(),
        values: c.values.clone(),
        backend: c.backend,
        image: c.image.clone(),
        cmake_args: c.recipe.cmake_args(&Default::default()),
        launch_env: c
            .launch
            .env()
            .into_iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect(),
        repro_args: c.repro_args.clone(),
    }
}

/// One GitHub Actions job per image, in first-appearance order.
pub fn github_matrix(configs: &[&Config]) -> serde_json::Value {
    let mut groups: Vec<(String, Vec<&Config>)> = Vec::new();
    for c in configs {
        let image = c.image.clone().unwrap_or_else(|| "host".into());
        match groups.iter_mut().find(|(i, _)| *i == image) {
            Some((_, v)) => v.push(c),
            None => groups.push((image, vec![c])),
        }
    }
    let include: Vec<_> = groups
        .iter()
        .map(|(image, cs)| {
            let first = cs[0];
            let version = first
                .values
                .get("rocm")
                .or(first.values.get("cuda"))
                .map(|v| v.to_string())
                .unwrap_or_default();
            let name = match version.as_str() {
                "" => first.backend.as_str().to_string(),
                v => format!("{}-{v}", first.backend.as_str()),
            };
            json!({
                "name": name, "backend": first.backend, "version": version, "image": image,
                "ids": cs.iter().map(|c| c.id.as_str()).collect::<Vec<_>>().join(","),
            })
        })
        .collect();
    json!({ "include": include })
}

pub fn run_matrix(args: MatrixArgs) -> anyhow::Result<i32> {
    // Issue and token first: a usage error before anything runs.
    args.post.check()?;
    let m = load(&args.run.config)?;
    for id in &args.only {
        if m.find(id).is_none() {
            return Err(CliError::usage(format!(
                "--only {id}: no configuration with this id in {} (see `matrix --list`)",
                m.file
            )));
        }
    }
    let configs: Vec<&Config> = m
        .configs
        .iter()
        .filter(|c| args.only.is_empty() || args.only.contains(&c.id))
        .collect();
    if args.list {
        let text = match args.format {
            ListFormat::Text => configs
                .iter()
                .map(|c| {
                    let image = c.image.as_deref().unwrap_or("host");
                    format!("{}  {}  {image}\n", c.id, c.label())
                })
                .collect::<String>(),
            ListFormat::Json => {
                let all: Vec<_> = configs.iter().map(|c| config_details(c)).collect();
                serde_json::to_string_pretty(&all)? + "\n"
            }
            ListFormat::Github => format!("{}\n", github_matrix(&configs)),
        };
        out(&text)?;
        return Ok(0);
    }
    let revs = if args.revs.is_empty() {
        m.revisions.clone()
    } else {
        args.revs.clone()
    };
    if revs.is_empty() {
        return Err(CliError::usage(format!(
            "no revisions to test: pass --rev or set `revisions` in {}",
            m.file
        )));
    }
    crate::probe::exec::install_interrupt_handler();
    let runner = runner(&args.run, &m, "logs")?;
    let mut revs = resolve(&runner, &revs)?;
    let progress = crate::run::progress::Progress::for_stderr(1);
    let total = configs.len() * revs.len();
    let mut cells: Vec<Cell> = Vec::new();
    for rev in revs.iter_mut() {
        runner.checkout(rev).map_err(run_error)?;
        let rev = &*rev;
        for c in &configs {
            let short = &rev.sha[..10];
            let label = c.label();
            let cell = runner.run_cell(c, rev, &|p| progress.phase(0, short, &label, p.as_str()));
            progress.line(&format!(
                "[{}/{total}] {} {label} @ {short}: {}{}{}",
                cells.len() + 1,
                c.id,
                cell.outcome,
                cell.signature
                    .as_deref()
                    .map(|s| format!(" ({s})"))
                    .unwrap_or_default(),
                if cell.cached { " [stored]" } else { "" }
            ));
            cells.push(cell);
        }
    }
    progress.finish();
    let results = MatrixResults {
        schema: Kind::Matrix.tag(),
        matrix: m.file.clone(),
        engine: runner
            .engine
            .as_ref()
            .map(|e| e.kind.as_str().to_string())
            .unwrap_or_else(|| "none".into()),
        revisions: revs,
        configs: configs
            .iter()
            .map(|c| ConfigRow {
                id: c.id.clone(),
                label: c.label(),
                backend: c.backend,
                image: c.image.clone(),
            })
            .collect(),
        cells,
    };
    let md = results.markdown();
    write_results(&args.run.out, "matrix-results", &results, &md)?;
    out(&md)?;
    let infra = results.infra_errors();
    let written = format!(
        "they are in {}",
        args.run.out.join("matrix-results.json").display()
    );
    // Posted even with infrastructure errors (their cells say so); exit 3 either way then.
    let code = args
        .post
        .publish(vec![AnyResult::Matrix(results)], 0, &written);
    match infra {
        0 => Ok(code),
        n => Err(CliError::infra(format!(
            "{n} of {total} cells hit infrastructure errors after retries (no verdict for them); see {}",
            args.run.out.join("matrix-results.md").display()
        ))),
    }
}

fn run_error(e: crate::run::matrix::RunError) -> anyhow::Error {
    match &e {
        crate::run::matrix::RunError::Git(g) if g.is_usage() => CliError::usage(e.to_string()),
        _ => CliError::infra(e.to_string()),
    }
}

fn resolve(runner: &Runner, revs: &[String]) -> anyhow::Result<Vec<Rev>> {
    revs.iter()
        .map(|r| runner.resolve(r).map_err(run_error))
        .collect()
}

fn write_results(
    dir: &Path,
    stem: &str,
    json: &impl serde::Serialize,
    md: &str,
) -> anyhow::Result<()> {
    let io =
        |p: &Path, e: std::io::Error| CliError::infra(format!("cannot write {}: {e}", p.display()));
    std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
    let j = dir.join(format!("{stem}.json"));
    std::fs::write(&j, serde_json::to_string_pretty(json)? + "\n").map_err(|e| io(&j, e))?;
    let p = dir.join(format!("{stem}.md"));
    std::fs::write(&p, md).map_err(|e| io(&p, e))?;
    Ok(())
}

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
