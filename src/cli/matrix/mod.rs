//! `setrows-bisect matrix` (list or run the configurations of matrix.toml) and
//! `setrows-bisect bisect-config` (first failing value along one ordered axis at a fixed
//! commit, with the same search core as commit bisection).
mod config_bisect;
mod list;
pub use config_bisect::run_bisect_config;
pub use list::github_matrix;

use crate::cli::flags::{EngineFlag, GraphFlag, MatrixFlag, Question, RepoFlag, WorkDirFlag};
use crate::core::matrix::{self, Config, Matrix, Value};
use crate::core::outcome::{Outcome, Predicate};
use crate::core::result::{AnyResult, BisectResult, ConfigDetails};
use crate::error::{CliError, Exit};
use crate::probe::container::EngineChoice;
use clap::Args;
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
    /// `--matrix FILE`.
    #[command(flatten)]
    pub matrix: MatrixFlag,
    /// Configuration ids (`matrix --list`)
    ///
    /// Configuration ids (`matrix --list`), as `setrows-bisect --config ID`: for `matrix` the
    /// configurations to run (like --only), for `bisect-config` the one giving every other
    /// value. A FILE here (the old spelling of --matrix) still works, with a notice.
    #[arg(long, value_name = "ID", value_delimiter = ',')]
    pub config: Vec<String>,
    /// `--repo`.
    #[command(flatten)]
    pub repo: RepoFlag,
    /// `--work-dir`.
    #[command(flatten)]
    pub work_dir: WorkDirFlag,
    /// `--engine` (default here: auto).
    #[command(flatten)]
    pub engine: EngineFlag,
    /// `--timeout`.
    #[command(flatten)]
    pub timeout: crate::cli::flags::TimeoutFlag,
    /// The probe every configuration runs, in place of the file's `[probe] kind`: `replay`,
    /// `decode` or `backend-ops` (the tree's own test-backend-ops for `[probe] ops` or --op).
    #[arg(long, value_name = "KIND", value_parser = crate::cli::bisect::bundled_kind())]
    pub probe_kind: Option<crate::core::config::ProbeKind>,
    /// `--op`, `--op-params`: what `--probe-kind backend-ops` runs.
    #[command(flatten)]
    pub ops: crate::cli::flags::OpsFlag,
    /// `--apply`: patches applied to every probed tree before its build.
    #[command(flatten)]
    pub apply: crate::cli::flags::ApplyFlag,
    /// Further attempts after an infrastructure error (engine down, image missing, full disk).
    #[arg(long, allow_negative_numbers = true, default_value_t = 2, value_parser = |s: &str| crate::cli::ranges::int(s, 0, 100).map(|v| v as u32))]
    pub retries: u32,
    /// Run every cell again instead of answering from stored results (and store nothing).
    #[arg(long)]
    pub fresh: bool,
    /// Where the results (JSON + markdown) and logs go.
    #[arg(value_parser = crate::cli::output::absolute, long, default_value = "matrix-results")]
    pub out: PathBuf,
}

/// What `matrix -h` shows: a first run of the matrix.
pub const FIRST_MATRIX: &[&str] = &[
    "config",
    "repo",
    "list",
    "dry_run",
    "revs",
    "only",
    "build_only",
    "out",
];

#[derive(Debug, Args)]
#[command(mut_args(crate::cli::flags::short_help_only(FIRST_MATRIX)))]
pub struct MatrixArgs {
    #[command(flatten)]
    pub run: RunFlags,
    /// Print the expanded configurations and exit; nothing runs.
    #[arg(long)]
    pub list: bool,
    /// Print every cell and what it would run; check out, build and run nothing
    ///
    /// Resolve the revisions and print every cell (revision x configuration) with its image,
    /// store identity and the environment its steps get (CMake arguments, launch settings);
    /// nothing is checked out, built or run.
    #[arg(long, conflicts_with = "list")]
    pub dry_run: bool,
    /// With --list: how to print the configurations (text for people, json/github for
    /// scripts and workflow matrices) [default: text]. A run writes its JSON to --out.
    #[arg(long, value_enum)]
    pub format: Option<ListFormat>,
    /// Revisions to test (default: `revisions` in the matrix file).
    #[arg(long = "rev")]
    pub revs: Vec<String>,
    /// Only these configuration ids (repeat or comma-separate).
    #[arg(long = "only", value_delimiter = ',')]
    pub only: Vec<String>,
    /// `--graph`: only the configurations of one of the replay's graphs.
    #[command(flatten)]
    pub graph: GraphFlag,
    /// Compile-check only: build every cell, run no test (no GPU needed)
    ///
    /// Compile-check only: every cell stops after its build and reports `built` or
    /// `build_failed`; no test runs and no GPU is passed to the container, so this runs where
    /// no GPU exists (hosted CI runners). Results are stored apart from full runs. Exits 1
    /// when a build failed (after writing the results).
    #[arg(long, conflicts_with = "list")]
    pub build_only: bool,
    /// `--post-to OWNER/REPO#N`: after the run, keep the `matrix` comment current (docs/github.md).
    #[command(flatten)]
    pub post: crate::cli::report::PostToArgs,
    /// Nothing runs: complete --out's matrix-results.json after a run that did not finish (a
    /// cancelled or timed-out job, a tool that stopped early): every selected cell without a
    /// row becomes `infra_error` with REASON, so the report shows it instead of dropping it.
    /// Without a results file the cells are the selected configurations at the revisions asked.
    #[arg(long, value_name = "REASON", conflicts_with_all = ["list", "dry_run"])]
    pub cut_off: Option<String>,
    /// Start no cell after MIN minutes of the run: the cells left are `infra_error` ("not run:
    /// the run's time limit of MIN min was reached"). Set below a CI job's own limit, so hanging
    /// cells end the run here, in words, rather than by the job being killed.
    #[arg(long, value_name = "MIN", value_parser = minutes)]
    pub time_limit: Option<f64>,
}

fn minutes(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(m) if m.is_finite() && m > 0.0 => Ok(m),
        _ => Err(format!("{s:?} is not a positive number of minutes")),
    }
}

/// What `bisect-config -h` shows: a first search along one axis.
pub const FIRST_BISECT_CONFIG: &[&str] = &[
    "axis", "values", "config", "rev", "good_rev", "regress", "repo", "dry_run",
];

#[derive(Debug, Args)]
#[command(mut_args(crate::cli::flags::short_help_only(FIRST_BISECT_CONFIG)))]
pub struct BisectConfigArgs {
    #[command(flatten)]
    pub run: RunFlags,
    /// The ordered axis: a matrix axis (`rocm`, `wave_size`, ...) or `arg:--start-row`
    #[arg(long)]
    pub axis: String,
    /// The ladder, in order (default: the axis's values as written in the matrix file).
    #[arg(long, value_delimiter = ',')]
    pub values: Vec<String>,
    /// The old spelling of `--config ID` (the configuration giving every other value).
    #[arg(long, hide = true)]
    pub base: Option<String>,
    /// The fixed commit.
    #[arg(long, default_value = "HEAD")]
    pub rev: String,
    /// `--regress`, `--match`: what counts as the failing value (and, with --good-rev, the bad
    /// commit).
    #[command(flatten)]
    pub question: Question,
    /// Then bisect the commits --good-rev..--rev in the first failing configuration
    ///
    /// The two-level question: once the first failing value is found at `--rev`, bisect the
    /// commits `--good-rev..--rev` in that configuration for the first bad commit: the commit
    /// bisect of `setrows-bisect --config`, with the flags below.
    #[arg(long)]
    pub good_rev: Option<String>,
    /// Print the ladder and each value's configuration; build and run nothing
    ///
    /// Resolve the base configuration, the ladder, the revision(s) and each value's
    /// configuration and image, and print them; nothing is checked out, built or run.
    #[arg(long)]
    pub dry_run: bool,
    /// The commit bisect's own flags (`--first-parent`, `--path`, `--jobs`, `--confidence`,
    /// `--post-to`, `--resume-from-issue`, ...), as for `setrows-bisect`.
    #[command(flatten)]
    pub commit: config_bisect::CommitFlags,
}

pub use crate::cli::matrix_file::read_matrix;

impl RunFlags {
    /// The matrix (`--matrix`, else ./matrix.toml, else the built-in copy, as everywhere) and
    /// the configuration ids given with `--config`. `--config FILE`, this command's spelling
    /// before one vocabulary, is read as `--matrix FILE` with a one-line notice.
    fn load(&self) -> anyhow::Result<(Matrix, Vec<String>)> {
        let mut file = self.matrix.matrix.clone();
        let mut ids = Vec::new();
        for v in &self.config {
            let p = Path::new(v);
            if !(v.ends_with(".toml") || p.is_file()) {
                ids.push(v.clone());
                continue;
            }
            if let Some(f) = file.as_ref().filter(|f| f.as_path() != p) {
                return Err(CliError::usage(format!(
                    "--config {v} is a matrix file and --matrix {} another: give the file once, as --matrix",
                    f.display()
                )));
            }
            errln!("note: `--config {v}` reads a matrix file; spell it `--matrix {v}` (--config takes a configuration id)");
            file = Some(p.to_path_buf());
        }
        let mut m = crate::cli::matrix_file::load_matrix(file.as_deref())?;
        self.probe_kind_of(&mut m)?;
        Ok((m, ids))
    }

    /// `--probe-kind` and `--op` over the file's `[probe]`: backend-ops takes `--op`, else the
    /// file's `ops` (the built-in matrix's: SET_ROWS, the upstream report's op).
    fn probe_kind_of(&self, m: &mut Matrix) -> anyhow::Result<()> {
        // The file's ops count only where the kind (the flag's, else the file's) takes ops:
        // `for_kind` reads them for that kind alone.
        let configured = (!m.probe.ops.is_empty())
            .then_some((m.probe.ops.as_slice(), m.probe.op_params.as_deref()));
        let kind = self.probe_kind.or(Some(m.probe.kind));
        if let Some((ops, op_params)) = self.ops.for_kind(kind, configured)? {
            m.probe.ops = ops;
            m.probe.op_params = op_params;
        }
        if let Some(k) = self.probe_kind {
            m.probe.kind = k;
            // What the file's table lacks for the kind the flag chose, as a file of that kind
            // is refused.
            if let Some((key, why)) = k.def().table_lacks(&m.probe.table()) {
                return Err(CliError::usage(format!(
                    "--probe-kind {}: {why} ({} has no `{key}`)",
                    k.name(),
                    m.file
                )));
            }
        }
        Ok(())
    }
}

impl RunFlags {
    /// `--engine`, auto unless given: the matrix's configurations name their images.
    fn engine_choice(&self) -> EngineChoice {
        self.engine.engine.unwrap_or(EngineChoice::Auto)
    }
}

/// `matrix`: every input checked here (before anything runs), then the request runs in
/// `run::matrix::request`; results written and posted before anything optional is printed.
pub fn run_matrix(args: MatrixArgs) -> anyhow::Result<Exit> {
    // Issue and token first: a usage error before anything runs.
    args.post.check()?;
    // `--format` chooses how `--list` prints; a run's results always go to --out as JSON and
    // markdown. Without --list it would have started every cell for a format it ignores.
    if let (Some(f), false) = (args.format, args.list) {
        let f = clap::ValueEnum::to_possible_value(&f).map(|v| v.get_name().to_string());
        return Err(CliError::usage(format!(
            "--format {} prints the configurations with --list; add --list (a run writes its JSON to --out)",
            f.unwrap_or_default()
        )));
    }
    if !args.list && !args.dry_run {
        crate::cli::output::check_dir_writable("--out", &args.run.out)?;
    }
    let (m, configs) = selected(&args)?;
    if args.list {
        return list(args.format.unwrap_or(ListFormat::Text), &configs);
    }
    if let Some(reason) = &args.cut_off {
        return cut_off(&args, &m, &configs, reason);
    }
    let request = request(&args, &m, &configs)?;
    // The token checked with GitHub, last of the checks and before anything is made: a refused
    // one is exit 2 now, not after every cell ran. A dry run asks GitHub nothing.
    if !args.dry_run {
        args.post.verify()?;
    }
    use crate::run::matrix::request::{carry_out, prepare, Done};
    // One preparation: a dry run makes nothing and says what a run would do.
    let mut prepared = prepare(request).map_err(run_error)?;
    prepared.time_limit = args
        .time_limit
        .map(|m| std::time::Duration::from_secs_f64(m * 60.0));
    if !args.dry_run {
        let out = args.run.out.clone();
        prepared.on_cell = Some(Box::new(move |so_far| {
            // A failed partial write loses only the early copy: the final write reports it.
            if let Err(e) = write_results(&out, "matrix-results", so_far, &so_far.markdown()) {
                errln!("setrows-bisect: warning: {e:#}");
            }
        }));
    }
    let events: &dyn crate::core::progress::Sink = match args.dry_run {
        true => &crate::core::progress::Quiet,
        false => {
            crate::probe::exec::install_interrupt_handler();
            crate::cli::progress::stderr()?
        }
    };
    match carry_out(prepared, events).map_err(run_error)? {
        Done::Results(results) => finish(&args, *results),
        Done::Planned(plan) => {
            out!("{}", dry_run(&plan));
            Ok(Exit::Ok)
        }
    }
}

/// The matrix and the configurations `--only`, `--config` and `--graph` select (all when none).
fn selected(args: &MatrixArgs) -> anyhow::Result<(Matrix, Vec<Config>)> {
    let (m, ids) = args.run.load()?;
    for (flag, id) in args
        .only
        .iter()
        .map(|i| ("--only", i))
        .chain(ids.iter().map(|i| ("--config", i)))
    {
        if m.find(id).is_none() {
            return Err(CliError::usage(format!(
                "{flag} {id}: no configuration with this id in {} (see `matrix --list`)",
                m.file
            )));
        }
    }
    let only: Vec<&String> = args.only.iter().chain(&ids).collect();
    let configs: Vec<Config> = m
        .configs
        .iter()
        .filter(|c| only.is_empty() || only.contains(&&c.id))
        .filter(|c| {
            args.graph.graph.is_none_or(|g| {
                c.values.get("params").map(|v| v.to_string()).as_deref() == Some(g.params())
            })
        })
        .cloned()
        .collect();
    if let (Some(g), true) = (&args.graph.graph, configs.is_empty()) {
        return Err(CliError::usage(format!(
            "--graph {g}: no configuration{} in {} has params={}",
            if only.is_empty() {
                ""
            } else {
                " of --only/--config"
            },
            m.file,
            g.params()
        )));
    }
    Ok((m, configs))
}

/// `matrix --list`: the selected configurations; nothing runs.
fn list(format: ListFormat, configs: &[Config]) -> anyhow::Result<Exit> {
    let text = match format {
        ListFormat::Text => configs
            .iter()
            .map(|c| {
                let image = c.image.as_deref().unwrap_or("host");
                format!("{}  {}  {image}\n", c.id, c.label())
            })
            .collect::<String>(),
        ListFormat::Json => {
            let all: Vec<_> = configs.iter().map(ConfigDetails::of).collect();
            serde_json::to_string_pretty(&all)? + "\n"
        }
        ListFormat::Github => {
            let refs: Vec<&Config> = configs.iter().collect();
            format!("{}\n", github_matrix(&refs))
        }
    };
    out!("{text}");
    Ok(Exit::Ok)
}

/// The run the flags ask for, its revisions checked (`--rev`, else the file's `revisions`).
fn request(
    args: &MatrixArgs,
    m: &Matrix,
    configs: &[Config],
) -> anyhow::Result<crate::run::matrix::request::Request> {
    let revisions = if args.revs.is_empty() {
        m.revisions.clone()
    } else {
        args.revs.clone()
    };
    if revisions.is_empty() {
        return Err(CliError::usage(format!(
            "no revisions to test: pass --rev or set `revisions` in {}",
            m.file
        )));
    }
    if args.build_only {
        build_only_probe(m)?;
    }
    let applied = args.run.apply.read(&args.run.repo.repo)?;
    Ok(crate::run::matrix::request::Request {
        repo: args.run.repo.repo.clone(),
        work_dir: args.run.work_dir.dir(),
        engine: args.run.engine_choice(),
        probe: m.probe.clone(),
        timeout: args.run.timeout.timeout,
        retries: args.run.retries,
        log_dir: args.run.out.join("logs"),
        fresh: args.run.fresh,
        build_only: args.build_only,
        matrix_file: m.file.clone(),
        configs: configs.to_vec(),
        revisions,
        dry_run: args.dry_run,
        applied,
    })
}

/// Writes and posts the results, then prints them; the exit code (1: a build failed in a
/// compile check, 3: cells without a verdict).
fn finish(args: &MatrixArgs, results: crate::run::matrix::MatrixResults) -> anyhow::Result<Exit> {
    let total = results.cells.len();
    let md = results.markdown();
    // Written and posted before it is printed: a closed standard output cannot cost them.
    write_results(&args.run.out, "matrix-results", &results, &md)?;
    let infra = results.infra_errors();
    let file = args.run.out.join("matrix-results.json");
    let written = format!("they are in {}", file.display());
    // A compile check fails when a build does, so a nightly job shows red on its own.
    let failed_builds = results
        .cells
        .iter()
        .filter(|c| results.build_only && c.outcome == Outcome::BuildFailed)
        .count();
    let code = match failed_builds {
        0 => Exit::Ok,
        _ => Exit::BuildFailed,
    };
    // Posted even with infrastructure errors (their cells say so); exit 3 either way then.
    let code = args.post.publish(
        vec![AnyResult::Matrix(results)],
        code,
        &written,
        Some(&file),
    );
    out!("{md}");
    if failed_builds > 0 {
        errln!(
            "setrows-bisect: {failed_builds} of {total} cells failed to build (exit {}); see {}",
            code.code(),
            args.run.out.join("matrix-results.md").display()
        );
    }
    match infra {
        0 => Ok(code),
        n => Err(CliError::infra(format!(
            "{n} of {total} cells hit infrastructure errors after retries (no verdict for them); see {}",
            args.run.out.join("matrix-results.md").display()
        ))),
    }
}

/// A build-only probe needs a build to run: the bundled reproducer builds itself, a script
/// probe needs its `build` command (its `script`, the test, is never run). Checked before
/// anything runs (exit 2).
fn build_only_probe(m: &Matrix) -> anyhow::Result<()> {
    let spec = crate::core::config::spec_of(&m.probe);
    if spec.def().nothing_to_build(&spec) {
        return Err(CliError::usage(format!(
            "{}: [probe] is a script without `build`; a build-only run has nothing to build (add `build = \"...\"`)",
            m.file
        )));
    }
    Ok(())
}

fn run_error(e: crate::run::matrix::RunError) -> anyhow::Error {
    match &e {
        crate::run::matrix::RunError::Git(g) if g.is_usage() => CliError::usage(e.to_string()),
        crate::run::matrix::RunError::WorkDir(_) => CliError::usage(e.to_string()),
        _ => CliError::infra(e.to_string()),
    }
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
    // Written beside and renamed over: a job killed mid-write (its timeout, a cancel) leaves
    // the previous whole file, never a torn one the report would refuse.
    let atomic = |p: &Path, bytes: &[u8]| -> anyhow::Result<()> {
        let tmp = p.with_extension("tmp");
        std::fs::write(&tmp, bytes).map_err(|e| io(&tmp, e))?;
        std::fs::rename(&tmp, p).map_err(|e| io(p, e))
    };
    let j = dir.join(format!("{stem}.json"));
    atomic(&j, (serde_json::to_string_pretty(json)? + "\n").as_bytes())?;
    atomic(&dir.join(format!("{stem}.md")), md.as_bytes())?;
    Ok(())
}

/// `matrix --cut-off REASON`: the run's own file completed (`MatrixResults::cut_off`), or, when
/// the run wrote none (killed before its first cell), one made from the selection: revisions
/// resolved in --repo where it can, else kept as written.
fn cut_off(
    args: &MatrixArgs,
    m: &Matrix,
    configs: &[Config],
    reason: &str,
) -> anyhow::Result<Exit> {
    use crate::core::result::{ConfigRow, Kind, MatrixResults, Rev};
    let out = &args.run.out;
    let file = out.join("matrix-results.json");
    let mut doc = match std::fs::read_to_string(&file) {
        Ok(text) => {
            let v: serde_json::Value = serde_json::from_str(&text)
                .map_err(|e| CliError::infra(format!("{}: {e}", file.display())))?;
            match crate::core::result::read(v)
                .map_err(|e| CliError::infra(format!("{}: {e}", file.display())))?
            {
                AnyResult::Matrix(doc) => doc,
                _ => {
                    return Err(CliError::usage(format!(
                        "{}: not a matrix result",
                        file.display()
                    )))
                }
            }
        }
        Err(_) => {
            let asked = if args.revs.is_empty() {
                m.revisions.clone()
            } else {
                args.revs.clone()
            };
            let repo = crate::run::git::open(&args.run.repo.repo).ok();
            let revisions = asked
                .iter()
                .map(|r| {
                    let id = repo
                        .as_ref()
                        .and_then(|g| crate::run::git::resolve(g, r, "--rev").ok());
                    Rev {
                        rev: r.clone(),
                        sha: id.map(|i| i.to_string()).unwrap_or_else(|| r.clone()),
                        tree: String::new(),
                        checkout: PathBuf::new(),
                        facts: Default::default(),
                    }
                })
                .collect();
            MatrixResults {
                schema: Kind::Matrix.tag(),
                matrix: m.file.clone(),
                engine: String::new(),
                revisions,
                configs: configs.iter().map(ConfigRow::of).collect(),
                cells: Vec::new(),
                build_only: args.build_only,
                applied: Vec::new(),
                invocation: crate::run::stamp::invocation(&args.run.repo.repo),
            }
        }
    };
    let added = doc.cut_off(reason);
    write_results(out, "matrix-results", &doc, &doc.markdown())?;
    errln!(
        "setrows-bisect: {added} of {} cells had no result and are recorded as infra_error ({reason}); see {}",
        doc.cells.len(),
        file.display()
    );
    Ok(Exit::Ok)
}

/// `matrix --dry-run`: every cell as `carry_out` resolved it from the runner a run uses (each
/// revision's own CMake and unified-memory spellings read from its commit), in words.
fn dry_run(p: &crate::run::matrix::request::Plan) -> String {
    use std::fmt::Write;
    let (revs, configs) = (p.revisions, p.configurations);
    let mut out = format!(
        "{} cells: {revs} revision(s) x {configs} configuration(s)\n",
        revs * configs,
    );
    if let Some(lacking) = &p.lacking {
        let _ = writeln!(out, "{lacking}; it would stop before its first cell");
    }
    if p.build_only {
        out.push_str("build only: each cell stops after its build (built / build_failed); no test runs, no GPU is passed to the container\n");
    }
    for cell in &p.cells {
        let _ = writeln!(
            out,
            "\n{} ({})  {}  {}\n  image: {}",
            &cell.sha[..cell.sha.len().min(12)],
            cell.rev,
            cell.id,
            cell.label,
            cell.image.as_deref().unwrap_or("host")
        );
        for (k, v) in &cell.env {
            let _ = writeln!(out, "  {k}={v}");
        }
    }
    out
}
