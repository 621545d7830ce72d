//! The flags of a commit bisection (`setrows-bisect [bisect]`), in one place.

use crate::core::outcome::Regress;
use crate::probe::container::EngineChoice;
use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct BisectArgs {
    /// A revision with the old behaviour.
    #[arg(long, required = true, help_heading = "Range")]
    pub good: Option<String>,
    /// A revision with the new behaviour.
    #[arg(long, required = true, help_heading = "Range")]
    pub bad: Option<String>,
    /// The git repository to bisect (never modified: probes run in private checkouts).
    #[arg(value_parser = crate::cli::output::absolute, long, default_value = ".", help_heading = "Range")]
    pub repo: PathBuf,
    /// Test command, run with `sh -c` in the checkout ($SRC; the build dir is $WORK), with git
    /// bisect run's exit codes: 0 good, 125 skip, 1-127 bad, signal/>=128 crash. Without it the
    /// probe is the bundled set_rows replay reproducer (see --backend, --repro-arg).
    #[arg(long, value_name = "CMD", help_heading = "Probe")]
    pub script: Option<String>,
    /// Build command, run with `sh -c` in the persistent build dir ($WORK) before the test;
    /// a failing build is a skip, never a verdict. With --regress build it is the whole probe
    /// (no --script) and its failure is the new behaviour.
    #[arg(long, value_name = "CMD", help_heading = "Probe")]
    pub build: Option<String>,
    /// What counts as the new behaviour: error (any failure), success (find the fix), crash
    /// (signals, aborts and GPU faults only), build (the build fails; no test runs).
    #[arg(long, value_enum, default_value_t = Regress::Error, help_heading = "Probe")]
    pub regress: Regress,
    /// Only failures whose output matches REGEX count as the bug; other failures count as the
    /// old behaviour.
    #[arg(long = "match", value_name = "REGEX", help_heading = "Probe")]
    pub match_: Option<String>,
    /// Kill the test after SECS seconds and call it a hang.
    #[arg(long, value_name = "SECS", value_parser = crate::cli::ranges::secs, allow_negative_numbers = true, help_heading = "Probe")]
    pub timeout: Option<f64>,
    /// Follow only the first-parent chain from bad back to good (the default).
    #[arg(long, conflicts_with = "no_first_parent", help_heading = "Range")]
    pub first_parent: bool,
    /// Bisect the full ancestry path (descendants of good that are ancestors of bad), like git.
    #[arg(long, help_heading = "Range")]
    pub no_first_parent: bool,
    /// Subtree whose content decides whether two commits are the same test (commits that do not
    /// touch it share one probe). Auto: `ggml` for a llama.cpp layout, else the whole tree;
    /// `--path .` forces the whole tree.
    #[arg(long, value_name = "DIR", help_heading = "Range")]
    pub path: Option<String>,
    /// Probe K commits in parallel (K checkouts and build dirs; the search multisects).
    #[arg(long, allow_negative_numbers = true, short = 'j', default_value_t = 1, value_name = "K", value_parser = crate::cli::ranges::jobs, help_heading = "Search")]
    pub jobs: usize,
    /// Run every probed commit N times; one new-behaviour run decides new.
    #[arg(long, allow_negative_numbers = true, value_name = "N", value_parser = |s: &str| crate::cli::ranges::int(s, 1, 10_000).map(|v| v as u32), help_heading = "Flaky")]
    pub repeat: Option<u32>,
    /// For intermittent faults: a failure is bad at once, a pass is re-run until "good" is
    /// believable, so that the answer holds at confidence C (e.g. 0.95); the report states the
    /// confidence reached and the estimated reproduction rate.
    #[arg(long, allow_negative_numbers = true, value_name = "C", conflicts_with = "repeat", value_parser = crate::cli::ranges::confidence, help_heading = "Flaky")]
    pub confidence: Option<f64>,
    /// With --confidence: stop after N runs in all. An answer that does not hold yet is not
    /// guessed: the report says the budget was spent, lists the likeliest commits with their
    /// probabilities and estimates the runs still needed (exit 1).
    #[arg(long, allow_negative_numbers = true, value_name = "N", requires = "confidence", value_parser = |s: &str| crate::cli::ranges::int(s, 1, 10_000_000).map(|v| v as u64), help_heading = "Flaky")]
    pub max_runs: Option<u64>,
    /// After a culprit is found, run it, its parent and the bad endpoint with the culprit
    /// reverted at least N times each (more when the fault is rare), and flag suspicious
    /// answers (0 = off). A doubtful answer exits 1.
    #[arg(long, allow_negative_numbers = true, value_name = "N", default_value_t = 0, value_parser = |s: &str| crate::cli::ranges::int(s, 0, 10_000).map(|v| v as u32), help_heading = "Flaky")]
    pub validate: u32,
    /// Print the next wave of probes for --jobs K slots as JSON, from the stored results
    /// only, and exit without probing (for fanning a round out over CI runners).
    #[arg(long, help_heading = "Search")]
    pub plan_only: bool,
    /// Run one planned probe of SHA (from --plan-only) and store it, then exit: what one CI
    /// runner does in a distributed round.
    #[arg(
        long,
        value_name = "SHA",
        conflicts_with = "plan_only",
        help_heading = "Search"
    )]
    pub probe: Option<String>,
    /// With --probe: the run index the plan assigned (default: the next free one here).
    #[arg(long, allow_negative_numbers = true, value_name = "R", requires = "probe", value_parser = |s: &str| crate::cli::ranges::int(s, 0, 1_000_000).map(|v| v as usize), help_heading = "Search")]
    pub run_index: Option<usize>,
    /// Resolve everything (range, candidates, configuration, prober identity, what the store
    /// already answers) and print it; nothing is checked out, built or run.
    #[arg(long, conflicts_with_all = ["plan_only", "probe"], help_heading = "Search")]
    pub dry_run: bool,
    /// Test the endpoints only when the answer depends on them (fewer probes; a wrong endpoint
    /// is found late).
    #[arg(long, help_heading = "Search")]
    pub lazy_endpoints: bool,
    /// Write the machine-readable result here.
    #[arg(value_parser = crate::cli::output::absolute, long, value_name = "FILE", help_heading = "Output")]
    pub json: Option<PathBuf>,
    /// Also write the markdown report here.
    #[arg(value_parser = crate::cli::output::absolute, long, value_name = "FILE", help_heading = "Output")]
    pub report: Option<PathBuf>,
    /// Checkouts, build dirs, logs and the result store [default: $XDG_CACHE_HOME/setrows-bisect].
    #[arg(
        value_parser = crate::cli::output::absolute,
        long,
        value_name = "DIR",
        env = "SETROWS_WORK_DIR",
        help_heading = "Output"
    )]
    pub work_dir: Option<PathBuf>,
    /// Argument added to the bundled reproducer's own (repeatable; used when --script is
    /// absent): the defaults stay unless it names the same option (the plan says which it
    /// replaced); checked against the program's options before any build.
    #[arg(
        long = "repro-arg",
        value_name = "ARG",
        allow_hyphen_values = true,
        help_heading = "Probe"
    )]
    pub repro_args: Vec<String>,
    /// The replay's graph: `decode-reuse` (the generic cached decode graph, the default) or
    /// `ds4` (the DeepSeek-V4-Flash decode attention of the report: lucebox deepseek4 at
    /// 53859c26, the built-in matrix's `params=decode-ds4`). Either runs 100,000 steps of a
    /// reused graph, checked every step; `--repro-arg` adds to it.
    #[arg(long, value_name = "GRAPH", value_parser = ["decode-reuse", "ds4"], help_heading = "Probe")]
    pub graph: Option<String>,
    /// Which bundled probe runs when --script is absent: `replay` (the set_rows pattern through
    /// ggml; any ggml tree) or `decode` (llama.cpp's own decode on the tool's tiny model, its
    /// graph reuse proven and every token checked against a no-reuse decode and, on a GPU, the
    /// CPU; llama.cpp trees only). Default: the configuration's, else replay.
    #[arg(long, value_name = "KIND", value_parser = bundled_kind(), help_heading = "Probe")]
    pub probe_kind: Option<crate::core::config::ProbeKind>,
    /// Backend the bundled reproducer targets (used when --script is absent).
    #[arg(long, value_parser = ["cpu", "cuda", "hip"], help_heading = "Probe")]
    pub backend: Option<String>,
    /// Run every build and test step in a container of --image: podman, docker, or auto
    /// (podman if it works, else docker). Default: none (the host), or auto with a --config
    /// whose configuration names an image.
    #[arg(long, value_name = "auto|podman|docker|none", value_parser = crate::cli::ranges::engine, help_heading = "Containers")]
    pub engine: Option<EngineChoice>,
    /// The image the steps run in with --engine (present locally; never pulled), e.g. a
    /// build image from containers/. Needs --engine.
    #[arg(long, value_name = "IMAGE", help_heading = "Containers")]
    pub image: Option<String>,
    /// `--config ID` and the configuration flags (`--gpu-target`, `--wave-size`, ...).
    #[command(flatten)]
    pub cfg: Box<ConfigFlags>,
    /// `--post-to OWNER/REPO#N` (+ connection flags) and `--resume-from-issue`: docs/github.md.
    #[command(flatten)]
    pub github: Box<crate::cli::report::BisectPostArgs>,
}

/// The configuration a bisect's probes run in: a matrix configuration (`--config ID`), the
/// same values as flags, or both (flags win, and the report says which).
#[derive(Debug, Default, Args)]
pub struct ConfigFlags {
    /// Bisect in this configuration of the matrix (ids: `setrows-bisect matrix --list`): its
    /// image, backend, GPU target, wave size, graphs, CMake options, launch environment,
    /// reproducer and timeout. Explicit flags win over its values.
    #[arg(long, value_name = "ID", help_heading = "Configuration")]
    pub config: Option<String>,
    /// The matrix file --config reads [default: ./matrix.toml, else the copy built into the
    /// binary].
    #[arg(
        value_parser = crate::cli::output::absolute,
        long,
        value_name = "FILE",
        requires = "config",
        help_heading = "Configuration"
    )]
    pub matrix: Option<PathBuf>,
    /// GPU target of the build (HIP `gfx1151`, CUDA `90`); --backend hip defaults to gfx1151.
    #[arg(long, value_name = "TARGET", help_heading = "Configuration")]
    pub gpu_target: Option<String>,
    /// HIP wave size compiled in (`-DDFLASH_WAVE_SIZE=N`).
    #[arg(long, value_name = "N", value_parser = ["32", "64"], help_heading = "Configuration")]
    pub wave_size: Option<String>,
    /// HIP/CUDA graphs (`GGML_HIP_GRAPHS` / `GGML_CUDA_GRAPHS`).
    #[arg(long, value_name = "on|off", value_parser = ["on", "off"], help_heading = "Configuration")]
    pub graphs: Option<String>,
    /// Where the replay's buffers live: `device` (ggml's device memory), `unified` (ggml's own
    /// switch makes them managed: the env or CMake option each tree reads), `host` (the device's
    /// host buffer type, used in place by the GPU). Proven by the replay's pointer report; the
    /// decode probe takes device and unified (its KV cache and a weight proven the same way).
    #[arg(long, value_name = "device|unified|host", value_parser = ["device", "unified", "host"], help_heading = "Configuration")]
    pub memory: Option<String>,
    /// Environment of the test step, e.g. `HIP_LAUNCH_BLOCKING=1` (repeatable).
    #[arg(
        long = "launch-env",
        value_name = "K=V",
        help_heading = "Configuration"
    )]
    pub launch_env: Vec<String>,
    /// Extra CMake argument for the ggml build, e.g. `-DGGML_CUDA_FA=OFF` (repeatable).
    #[arg(
        long = "cmake-arg",
        value_name = "ARG",
        allow_hyphen_values = true,
        help_heading = "Configuration"
    )]
    pub cmake_args: Vec<String>,
    /// The decode probe's llama.cpp settings (`--flash-attn`, `--cache-type-k`, ...).
    #[command(flatten)]
    pub settings: super::settings::SettingsFlags,
}

/// `--probe-kind`'s values: the bundled probes (a script is chosen by `--script`).
fn bundled_kind() -> impl clap::builder::TypedValueParser<Value = crate::core::config::ProbeKind> {
    use crate::core::config::ProbeKind;
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new([ProbeKind::Replay.name(), ProbeKind::Decode.name()])
        .map(|s: String| ProbeKind::parse(&s).unwrap_or_default())
}
