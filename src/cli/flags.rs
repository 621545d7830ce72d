//! Flags that several commands take, declared once. Each group is `#[command(flatten)]`ed where
//! a command takes it, so a flag has one spelling, one default, one value parser and one
//! description in every command. A group sets no help heading of its own: the command that
//! flattens it does (`next_help_heading` at the flatten site), so each command's `--help` can
//! put the flag where its users look for it.

use crate::core::evidence::Policy;
use crate::core::outcome::{Predicate, Regress};
use crate::core::search::EndpointCheck;
use crate::error::CliError;
use crate::probe::container::EngineChoice;
use clap::Args;
use std::path::PathBuf;

/// Hides from `-h` every flag of a command but `shown`: one list per command decides what a
/// first run of it needs; `--help` keeps every flag in its section.
pub fn short_help_only(shown: &'static [&'static str]) -> impl FnMut(clap::Arg) -> clap::Arg {
    move |a| {
        let show = shown.contains(&a.get_id().as_str());
        // A shown flag's one line names its values itself; clap's list would wrap it to two.
        let values_in_text =
            show && a.get_action().takes_values() && !a.get_possible_values().is_empty();
        a.hide_short_help(!show)
            .hide_possible_values(values_in_text)
    }
}

/// `--repo`: bisect, matrix and bisect-config.
#[derive(Debug, Clone, Args)]
pub struct RepoFlag {
    /// The git repository to bisect (ggml, llama.cpp, lucebox, any)
    ///
    /// The git repository the revisions come from: a ggml, llama.cpp or lucebox tree for the
    /// bundled probes, any repository for a bisect's --script. Never modified: probes run in
    /// private checkouts.
    #[arg(value_parser = crate::cli::output::absolute, long, value_name = "DIR", default_value = ".")]
    pub repo: PathBuf,
}

/// `--timeout`: every command that probes (bisect, matrix, bisect-config).
#[derive(Debug, Clone, Default, Args)]
pub struct TimeoutFlag {
    /// Call a test that runs longer than SECS seconds a hang
    ///
    /// Kill a probe's test after SECS seconds and call it a hang (matrix and bisect-config: in
    /// place of the matrix's `[probe] timeout_s`).
    #[arg(long, value_name = "SECS", value_parser = crate::cli::ranges::secs, allow_negative_numbers = true)]
    pub timeout: Option<f64>,
}

/// `--apply`: patches applied to every probed tree before its build (bisect, matrix,
/// bisect-config), one parse for all three.
#[derive(Debug, Clone, Default, Args)]
pub struct ApplyFlag {
    /// Apply a change to every probed tree before its build (repeatable): REV:PATH or a patch
    ///
    /// Apply a change to every probed tree before its build (repeatable). REV:PATH is the
    /// change commit REV made to PATH (`git diff REV^ REV -- PATH`), e.g. the test case a fix
    /// added; anything else is a patch file. A tree it does not apply to is a skip, never a
    /// verdict; the applied patch is part of each result's key and named in the report.
    #[arg(long = "apply", value_name = "REV:PATH|PATCH")]
    pub apply: Vec<String>,
}

impl ApplyFlag {
    /// Each `--apply` read once from `repo` (the diff text every probe applies); a bad one is
    /// one line, exit 2, before anything is made.
    pub fn read(
        &self,
        repo: &std::path::Path,
    ) -> anyhow::Result<Vec<crate::core::applied::AppliedPatch>> {
        crate::run::apply::resolve(repo, &self.apply)
    }
}

/// `--op` and `--op-params`: what `--probe-kind backend-ops` runs (bisect, matrix,
/// bisect-config), one parse for all three.
#[derive(Debug, Clone, Default, Args)]
pub struct OpsFlag {
    /// An op test-backend-ops runs (`-o`), as ggml names it: `SET_ROWS`, `MUL_MAT`, `GELU`
    /// (repeatable; one run each). Needs --probe-kind backend-ops.
    #[arg(long = "op", value_name = "NAME")]
    pub ops: Vec<String>,
    /// test-backend-ops' own `-p` filter: a regex over each case's parameters, e.g.
    /// `type=f16`. Needs --probe-kind backend-ops.
    #[arg(long, value_name = "REGEX")]
    pub op_params: Option<String>,
    /// The tests `--probe-kind ctest` runs: ctest's own `-R` regex over the tree's test
    /// names, e.g. `test-backend-ops` or `^test-rope$`. Needs --probe-kind ctest.
    #[arg(long, value_name = "REGEX")]
    pub ctest: Option<String>,
}

impl OpsFlag {
    /// The ops and filter for `kind`: `None` for another kind; a one-line usage error when
    /// they are given without backend-ops, the filter is no regex, or an op is no op name.
    /// `configured`: the configuration's own ops, taken when no `--op` is given.
    pub fn for_kind(
        &self,
        kind: Option<crate::core::config::ProbeKind>,
        configured: Option<(&[String], Option<&str>)>,
    ) -> anyhow::Result<Option<(Vec<String>, Option<String>)>> {
        use crate::core::config::ProbeKind;
        match (&self.ctest, kind == Some(ProbeKind::Ctest)) {
            (Some(_), false) => {
                return Err(crate::error::CliError::usage(format!(
                    "--ctest is ctest's and the probe is {}: add --probe-kind ctest",
                    kind.map_or("replay (the default)", ProbeKind::name)
                )))
            }
            (None, true) => {
                return Err(crate::error::CliError::usage(
                    "--probe-kind ctest needs --ctest REGEX (the tests ctest -R runs, e.g. --ctest test-rope)",
                ))
            }
            _ => {}
        }
        let given = !self.ops.is_empty() || self.op_params.is_some();
        let backend_ops =
            kind == Some(ProbeKind::BackendOps) || (kind.is_none() && configured.is_some());
        if given && !backend_ops {
            let flag = if self.ops.is_empty() {
                "--op-params"
            } else {
                "--op"
            };
            return Err(crate::error::CliError::usage(format!(
                "{flag} is test-backend-ops' and the probe is {}: add --probe-kind backend-ops",
                kind.map_or("replay (the default)", ProbeKind::name)
            )));
        }
        if !backend_ops {
            return Ok(None);
        }
        if let Some(p) = &self.op_params {
            if let Err(e) = regex::Regex::new(p) {
                let why = e
                    .to_string()
                    .lines()
                    .last()
                    .unwrap_or("")
                    .trim()
                    .to_string();
                return Err(crate::error::CliError::usage(format!(
                    "--op-params {p:?}: not a regex ({why}); test-backend-ops -p takes one, e.g. 'type=f16'"
                )));
            }
        }
        if let Some(o) = self
            .ops
            .iter()
            .find(|o| o.is_empty() || !o.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        {
            return Err(crate::error::CliError::usage(format!(
                "--op {o:?}: an op is one name as ggml spells it (SET_ROWS, MUL_MAT); give --op once per op"
            )));
        }
        let (ops, params) = match configured {
            Some((ops, params)) if self.ops.is_empty() => (
                ops.to_vec(),
                self.op_params.clone().or(params.map(String::from)),
            ),
            _ => (self.ops.clone(), self.op_params.clone()),
        };
        if ops.is_empty() {
            return Err(crate::error::CliError::usage(
                "--probe-kind backend-ops needs --op NAME (the op test-backend-ops -o runs, e.g. --op SET_ROWS)",
            ));
        }
        Ok(Some((ops, params)))
    }
}

/// The probe a flag chose over the configuration's (`None`: the configuration's, which
/// `--probe-kind replay` keeps): `--script`/`--build`, `--probe-kind decode`, or
/// `--probe-kind backend-ops` with its `--op`s (checked first, whatever else is given).
pub fn chosen_probe(
    script: Option<&str>,
    build: Option<&str>,
    kind: Option<crate::core::config::ProbeKind>,
    ops_flag: &OpsFlag,
) -> anyhow::Result<Option<crate::core::config::ProbeSpec>> {
    use crate::core::config::{ProbeKind, ProbeSpec};
    let ops = ops_flag.for_kind(kind, None)?;
    if script.is_some() || build.is_some() {
        return Ok(Some(ProbeSpec::Script {
            build: build.map(str::to_string),
            script: script.unwrap_or_default().to_string(),
        }));
    }
    if kind == Some(ProbeKind::Decode) {
        return Ok(Some(ProbeSpec::Decode));
    }
    if let (Some(ProbeKind::Ctest), Some(regex)) = (kind, &ops_flag.ctest) {
        return Ok(Some(ProbeSpec::Ctest {
            regex: regex.clone(),
        }));
    }
    Ok(ops.map(|(ops, op_params)| ProbeSpec::BackendOps { ops, op_params }))
}

/// `--work-dir`: every command that probes, or reads what probes stored.
#[derive(Debug, Clone, Default, Args)]
pub struct WorkDirFlag {
    /// The work dir: checkouts, build dirs, ccache, logs and the result store
    /// [default: $XDG_CACHE_HOME/setrows-bisect].
    #[arg(value_parser = crate::cli::output::absolute, long, value_name = "DIR", env = "SETROWS_WORK_DIR")]
    pub work_dir: Option<PathBuf>,
}

impl WorkDirFlag {
    /// The work dir given, else the default one.
    pub fn dir(&self) -> PathBuf {
        self.work_dir
            .clone()
            .unwrap_or_else(crate::run::store::default_work_dir)
    }
}

/// `--matrix FILE`: the matrix file of `--config` (bisect), matrix and bisect-config.
#[derive(Debug, Clone, Default, Args)]
pub struct MatrixFlag {
    /// The matrix file the configuration ids (--config) come from [default: ./matrix.toml, else
    /// the copy built into the binary].
    #[arg(value_parser = crate::cli::output::absolute, long, value_name = "FILE")]
    pub matrix: Option<PathBuf>,
}

/// `--engine`: bisect, matrix and bisect-config.
#[derive(Debug, Clone, Default, Args)]
pub struct EngineFlag {
    /// Run every build and test step in a container: podman, docker, auto (podman if it works,
    /// else docker) or none (the host). The image is the configuration's, or a bisect's --image.
    /// Default: auto for `matrix`, `bisect-config` and a bisect whose --config names an image;
    /// else none.
    #[arg(long, value_name = "auto|podman|docker|none", value_parser = crate::cli::ranges::engine)]
    pub engine: Option<EngineChoice>,
}

/// `--graph`: the replay's graph (bisect), or the configurations of one graph (matrix).
#[derive(Debug, Clone, Default, Args)]
pub struct GraphFlag {
    /// The replay's graph: `decode-reuse` (the generic cached decode graph, a bisect's default)
    /// or `ds4` (the DeepSeek-V4-Flash decode attention of the report: lucebox deepseek4 at
    /// 53859c26, the built-in matrix's `params=decode-ds4`). Either runs 100,000 steps of a
    /// reused graph, checked every step; `--repro-arg` adds to it. `matrix --graph` runs only
    /// that graph's configurations.
    #[arg(long, value_name = "GRAPH", value_enum)]
    pub graph: Option<crate::cli::choices::Graph>,
}

/// `--jobs`: bisect, bisect-config's commit bisect and demo.
#[derive(Debug, Clone, Args)]
pub struct JobsFlag {
    /// Probe N commits in parallel
    ///
    /// Probe N commits in parallel (N checkouts and build dirs; the search multisects; GPU
    /// tests take turns). `auto`: N from this host's cores and the CPU use of the builds
    /// measured on the work dir (1 on 2 cores, and until a build is measured).
    #[arg(long, short = 'j', allow_negative_numbers = true, default_value = "1", value_name = "N|auto", value_parser = crate::cli::ranges::jobs)]
    pub jobs: crate::core::jobs::Jobs,
}

/// `--regress` and `--match`: what counts as the new behaviour (bisect, bisect-config).
#[derive(Debug, Clone, Args)]
pub struct Question {
    /// What is new: error, success (the fix), crash or build
    ///
    /// What counts as the new behaviour: error (any failure), success (old = failing: finds the
    /// fix, or the first value that works), crash (signals, aborts and GPU faults only), build
    /// (the build fails; no test runs).
    #[arg(long, value_enum, default_value_t = Regress::Error)]
    pub regress: Regress,
    /// Only failures whose output matches REGEX count as the bug; other failures count as the
    /// old behaviour.
    #[arg(long = "match", value_name = "REGEX")]
    pub match_: Option<String>,
}

impl Question {
    /// The predicate, its `--match` regex compiled (one line naming what is wrong).
    pub fn predicate(&self) -> anyhow::Result<Predicate> {
        Ok(Predicate::new(
            self.regress,
            signature(self.match_.as_deref())?,
        ))
    }
}

/// `--match REGEX`, compiled (the parser's last line names what is wrong).
pub fn signature(re: Option<&str>) -> anyhow::Result<Option<regex::Regex>> {
    let Some(re) = re else { return Ok(None) };
    regex::Regex::new(re).map(Some).map_err(|e| {
        let why = e.to_string();
        let why = why
            .lines()
            .last()
            .unwrap_or("")
            .trim_start_matches("error: ");
        CliError::usage(format!("--match {re:?} is not a valid regex: {why}"))
    })
}

/// Which commits a commit bisection walks: bisect, and bisect-config's commit bisect.
#[derive(Debug, Clone, Args)]
pub struct Walk {
    /// Follow only the first-parent chain from the bad revision back to the good one (the
    /// default).
    #[arg(long, conflicts_with = "no_first_parent")]
    pub first_parent: bool,
    /// Bisect the full ancestry path (descendants of good that are ancestors of bad), like git.
    #[arg(long)]
    pub no_first_parent: bool,
    /// Subtree whose content decides whether two commits are the same test (commits that do not
    /// touch it share one probe). Auto: `ggml` for a llama.cpp layout,
    /// `server/deps/llama.cpp/ggml` for lucebox, else the whole tree; `--path .` forces the
    /// whole tree.
    #[arg(long, value_name = "DIR")]
    pub path: Option<String>,
    /// Test the endpoints only when the answer depends on them (fewer probes; a wrong endpoint
    /// is found late).
    #[arg(long)]
    pub lazy_endpoints: bool,
}

impl Walk {
    pub fn endpoints(&self) -> EndpointCheck {
        if self.lazy_endpoints {
            EndpointCheck::Lazy
        } else {
            EndpointCheck::First
        }
    }
}

/// How often a commit is run, and whether the answer is checked: bisect, and bisect-config's
/// commit bisect.
#[derive(Debug, Clone, Args)]
pub struct Flaky {
    /// Run every probed commit N times; one new-behaviour run decides new.
    #[arg(long, allow_negative_numbers = true, value_name = "N", value_parser = |s: &str| crate::cli::ranges::int(s, 1, 10_000).map(|v| v as u32))]
    pub repeat: Option<u32>,
    /// For intermittent faults: re-run passes until the answer holds at C
    ///
    /// For intermittent faults: a failure is bad at once, a pass is re-run until "good" is
    /// believable, so that the answer holds at confidence C (e.g. 0.95); the report states the
    /// confidence reached and the estimated reproduction rate.
    #[arg(long, allow_negative_numbers = true, value_name = "C", conflicts_with = "repeat", value_parser = crate::cli::ranges::confidence)]
    pub confidence: Option<f64>,
    /// With --confidence: stop after N runs in all. An answer that does not hold yet is not
    /// guessed: the report says the budget was spent, lists the likeliest commits with their
    /// probabilities and estimates the runs still needed (exit 1).
    #[arg(long, allow_negative_numbers = true, value_name = "N", requires = "confidence", value_parser = |s: &str| crate::cli::ranges::int(s, 1, 10_000_000).map(|v| v as u64))]
    pub max_runs: Option<u64>,
    /// After a culprit is found, run it, its parent and the bad endpoint with the culprit
    /// reverted at least N times each (more when the fault is rare), and flag suspicious
    /// answers (0 = off). A doubtful answer exits 1.
    #[arg(long, allow_negative_numbers = true, value_name = "N", default_value_t = 0, value_parser = |s: &str| crate::cli::ranges::int(s, 0, 10_000).map(|v| v as u32))]
    pub validate: u32,
}

impl Flaky {
    /// Runs per commit: `--confidence` (+ `--max-runs`), else `--repeat` (default 1).
    pub fn runs(&self) -> Policy {
        match (self.confidence, self.repeat) {
            (Some(confidence), _) => Policy::Confidence {
                confidence,
                max_runs: self.max_runs,
            },
            (None, n) => Policy::Repeat(n.unwrap_or(1).max(1)),
        }
    }

    /// More than one run per commit was asked for (`--confidence`, or `--repeat` above 1).
    pub fn reruns(&self) -> bool {
        self.confidence.is_some() || self.repeat.is_some_and(|n| n > 1)
    }
}
