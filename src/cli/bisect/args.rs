//! The flags of a commit bisection (`setrows-bisect [bisect]`), in one place.

use crate::cli::flags::{
    EngineFlag, Flaky, GraphFlag, JobsFlag, MatrixFlag, Question, RepoFlag, Walk, WorkDirFlag,
};
use clap::Args;
use std::path::PathBuf;

/// The help sections of a bisect, as a user thinks of one: what to bisect, how to probe, where
/// to run, what to publish; the rarely used GitHub and CI runner options last, in `--help` only
/// (`-h` is the summary).
pub mod heading {
    pub const WHAT: &str = "What to bisect";
    pub const PROBE: &str = "How to probe";
    pub const CONFIGURATION: &str = "How to probe (configuration)";
    pub const DECODE: &str = "How to probe (decode settings)";
    pub const FLAKY: &str = "How to probe (flaky faults)";
    pub const WHERE: &str = "Where to run";
    pub const PUBLISH: &str = "What to publish";
    pub const GITHUB: &str = "GitHub";
    pub const CI: &str = "CI runners";
    /// Every section, in the order `--help` shows them.
    pub const ALL: [&str; 9] = [
        WHAT,
        PROBE,
        CONFIGURATION,
        DECODE,
        FLAKY,
        WHERE,
        PUBLISH,
        GITHUB,
        CI,
    ];
    /// The sections `-h` leaves out (`--help` shows them).
    pub const LONG_ONLY: [&str; 2] = [GITHUB, CI];
}

use heading::*;

/// The flags `-h` shows: what a first bisect needs. The rest (configuration values, one probe
/// kind's options, flaky-fault tuning, containers, GitHub, CI runners) waits in `--help`, so a
/// newcomer's first screen is one page.
pub const FIRST_BISECT: &[&str] = &[
    "good",
    "bad",
    "repo",
    "regress",
    "script",
    "build",
    "probe_kind",
    "config",
    "timeout",
    "confidence",
    "jobs",
    "dry_run",
    "json",
    "report",
];

#[derive(Debug, Args)]
#[command(mut_args(crate::cli::flags::short_help_only(FIRST_BISECT)))]
pub struct BisectArgs {
    /// A revision with the old behaviour.
    #[arg(long, required = true, help_heading = WHAT)]
    pub good: Option<String>,
    /// A revision with the new behaviour.
    #[arg(long, required = true, help_heading = WHAT)]
    pub bad: Option<String>,
    /// `--repo`.
    #[command(flatten, next_help_heading = WHAT)]
    pub repo: RepoFlag,
    /// `--first-parent`, `--no-first-parent`, `--path`, `--lazy-endpoints`.
    #[command(flatten, next_help_heading = WHAT)]
    pub walk: Walk,
    /// `--regress`, `--match`.
    #[command(flatten, next_help_heading = WHAT)]
    pub question: Question,
    /// Your test, with git bisect run's exit codes [default: the bundled replay]
    ///
    /// Test command, run with `sh -c` in the checkout ($SRC; the build dir is $WORK), with git
    /// bisect run's exit codes: 0 good, 125 skip, 1-127 bad, signal/>=128 crash. Without it the
    /// probe is the bundled set_rows replay reproducer (see --backend, --repro-arg).
    #[arg(long, value_name = "CMD", help_heading = PROBE)]
    pub script: Option<String>,
    /// Your build, run in $WORK before the test (a failure is a skip)
    ///
    /// Build command, run with `sh -c` in the persistent build dir ($WORK) before the test;
    /// a failing build is a skip, never a verdict. With --regress build it is the whole probe
    /// (no --script) and its failure is the new behaviour.
    #[arg(long, value_name = "CMD", help_heading = PROBE)]
    pub build: Option<String>,
    /// `--timeout`.
    #[command(flatten, next_help_heading = PROBE)]
    pub timeout: crate::cli::flags::TimeoutFlag,
    /// A bundled probe instead of --script: replay, decode, backend-ops, ctest
    ///
    /// Which bundled probe runs when --script is absent: `replay` (the set_rows pattern through
    /// ggml; any ggml tree) or `decode` (llama.cpp's own decode on the tool's tiny model, its
    /// graph reuse proven and every token checked against a no-reuse decode and, on a GPU, the
    /// CPU; llama.cpp trees only). Default: the configuration's, else replay. `backend-ops`:
    /// the tree's own test-backend-ops for --op, each failing case its own signature. `ctest`:
    /// the tree's own test suite, `ctest -R` with --ctest's regex.
    #[arg(long, value_name = "KIND", value_parser = bundled_kind(), help_heading = PROBE)]
    pub probe_kind: Option<crate::core::config::ProbeKind>,
    /// `--op`, `--op-params`: what `--probe-kind backend-ops` runs.
    #[command(flatten, next_help_heading = PROBE)]
    pub ops: crate::cli::flags::OpsFlag,
    /// `--apply`: patches applied to every probed tree before its build.
    #[command(flatten, next_help_heading = PROBE)]
    pub apply: crate::cli::flags::ApplyFlag,
    /// The decode probe also compares every commit's logits with the --good commit's own,
    /// recorded by one probe of --good before the search: sees a change of model math that
    /// every path of a tree shares (a wrong attention mask, a hyperparameter no longer read),
    /// which its other references, the tree itself, cannot.
    #[arg(long, help_heading = PROBE)]
    pub compare_good: bool,
    /// The backend of a bundled probe: cpu, cuda or hip
    ///
    /// Backend the bundled reproducer targets (used when --script is absent).
    #[arg(long, value_enum, help_heading = PROBE)]
    pub backend: Option<crate::core::build::Backend>,
    /// `--graph`: the replay's graph.
    #[command(flatten, next_help_heading = PROBE)]
    pub graph: GraphFlag,
    /// Argument added to the bundled reproducer's own (repeatable; used when --script is
    /// absent): the defaults stay unless it names the same option (the plan says which it
    /// replaced); checked against the program's options before any build.
    #[arg(
        long = "repro-arg",
        value_name = "ARG",
        allow_hyphen_values = true,
        help_heading = PROBE
    )]
    pub repro_args: Vec<String>,
    /// `--config ID` and the configuration flags (`--gpu-target`, `--wave-size`, ...).
    #[command(flatten)]
    pub cfg: Box<ConfigFlags>,
    /// `--repeat`, `--confidence`, `--max-runs`, `--validate`.
    #[command(flatten, next_help_heading = FLAKY)]
    pub flaky: Flaky,
    /// `--engine`.
    #[command(flatten, next_help_heading = WHERE)]
    pub engine: EngineFlag,
    /// The image the steps run in with --engine (present locally; never pulled), e.g. a
    /// build image from containers/. Needs --engine.
    #[arg(long, value_name = "IMAGE", help_heading = WHERE)]
    pub image: Option<String>,
    /// `--work-dir`.
    #[command(flatten, next_help_heading = WHERE)]
    pub work_dir: WorkDirFlag,
    /// `--jobs`.
    #[command(flatten, next_help_heading = WHERE)]
    pub jobs: JobsFlag,
    /// Print the plan; check out, build and run nothing
    ///
    /// Resolve everything (range, candidates, configuration, prober identity, what the store
    /// already answers) and print it; nothing is checked out, built or run.
    #[arg(long, conflicts_with_all = ["plan_only", "probe"], help_heading = WHERE)]
    pub dry_run: bool,
    /// Write the machine-readable result here.
    #[arg(value_parser = crate::cli::output::absolute, long, value_name = "FILE", help_heading = PUBLISH)]
    pub json: Option<PathBuf>,
    /// Also write the markdown report here.
    #[arg(value_parser = crate::cli::output::absolute, long, value_name = "FILE", help_heading = PUBLISH)]
    pub report: Option<PathBuf>,
    /// `--post-to OWNER/REPO#N` (+ connection flags) and `--resume-from-issue`: docs/github.md.
    #[command(flatten, next_help_heading = GITHUB)]
    pub github: Box<crate::cli::report::BisectPostArgs>,
    /// Print the next wave of probes for --jobs N slots as JSON, from the stored results
    /// only, and exit without probing (for fanning a round out over CI runners).
    #[arg(long, help_heading = CI, hide_short_help = true)]
    pub plan_only: bool,
    /// Run one planned probe of SHA (from --plan-only) and store it, then exit: what one CI
    /// runner does in a distributed round.
    #[arg(
        long,
        value_name = "SHA",
        conflicts_with = "plan_only",
        help_heading = CI,
        hide_short_help = true
    )]
    pub probe: Option<String>,
    /// With --probe: the run index the plan assigned (default: the next free one here).
    #[arg(long, allow_negative_numbers = true, value_name = "R", requires = "probe", value_parser = |s: &str| crate::cli::ranges::int(s, 0, 1_000_000).map(|v| v as usize), help_heading = CI, hide_short_help = true)]
    pub run_index: Option<usize>,
}

/// The configuration a bisect's probes run in: a matrix configuration (`--config ID`), the
/// same values as flags, or both (flags win, and the report says which).
#[derive(Debug, Default, Args)]
#[command(mut_arg("matrix", |a| a.requires("config")))]
pub struct ConfigFlags {
    /// Probe in this matrix configuration (ids: `setrows-bisect matrix --list`)
    ///
    /// Bisect in this configuration of the matrix (ids: `setrows-bisect matrix --list`): its
    /// image, backend, GPU target, wave size, graphs, CMake options, launch environment,
    /// reproducer and timeout. Explicit flags win over its values.
    #[arg(long, value_name = "ID", help_heading = PROBE)]
    pub config: Option<String>,
    /// `--matrix FILE` (needs --config).
    #[command(flatten, next_help_heading = PROBE)]
    pub matrix: MatrixFlag,
    /// GPU target of the build (HIP `gfx1151`, CUDA `90`); --backend hip defaults to gfx1151.
    #[arg(long, value_name = "TARGET", help_heading = CONFIGURATION)]
    pub gpu_target: Option<String>,
    /// HIP wave size compiled in (`-DDFLASH_WAVE_SIZE=N`).
    #[arg(long, value_name = "N", value_enum, help_heading = CONFIGURATION)]
    pub wave_size: Option<crate::cli::choices::WaveSize>,
    /// HIP/CUDA graphs (`GGML_HIP_GRAPHS` / `GGML_CUDA_GRAPHS`).
    #[arg(long, value_name = "on|off", value_enum, help_heading = CONFIGURATION)]
    pub graphs: Option<crate::cli::choices::Switch>,
    /// Where the replay's buffers live: `device` (ggml's device memory), `unified` (ggml's own
    /// switch makes them managed: the env or CMake option each tree reads), `host` (the device's
    /// host buffer type, used in place by the GPU). Proven by the replay's pointer report; the
    /// decode probe takes device and unified (its KV cache and a weight proven the same way).
    #[arg(long, value_name = "device|unified|host", value_enum, help_heading = CONFIGURATION)]
    pub memory: Option<crate::core::build::Memory>,
    /// Environment of the test step, e.g. `HIP_LAUNCH_BLOCKING=1` (repeatable).
    #[arg(
        long = "launch-env",
        value_name = "K=V",
        help_heading = CONFIGURATION
    )]
    pub launch_env: Vec<String>,
    /// Extra CMake argument for the ggml build, e.g. `-DGGML_CUDA_FA=OFF` (repeatable).
    #[arg(
        long = "cmake-arg",
        value_name = "ARG",
        allow_hyphen_values = true,
        help_heading = CONFIGURATION
    )]
    pub cmake_args: Vec<String>,
    /// A sanitizer build (repeatable or comma-separated: `address,undefined`): the compile
    /// flags for every C/C++ file and the runtime options that make a report a failed run,
    /// spelled out in the report's reproducer (`--launch-env` of the same name wins).
    #[arg(
        long,
        value_name = "address|undefined|thread",
        value_delimiter = ',',
        value_parser = crate::core::build::sanitize::KINDS,
        help_heading = CONFIGURATION
    )]
    pub sanitize: Vec<String>,
    /// The decode probe's llama.cpp settings (`--flash-attn`, `--cache-type-k`, ...).
    #[command(flatten)]
    pub settings: super::settings::SettingsFlags,
}

/// `--probe-kind`'s values: the probes this tool builds (a script is chosen by `--script`).
pub fn bundled_kind() -> impl clap::builder::TypedValueParser<Value = crate::core::config::ProbeKind>
{
    use crate::core::config::ProbeKind;
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(
        ProbeKind::ALL
            .into_iter()
            .filter(|k| k.is_bundled())
            .map(ProbeKind::name),
    )
    .map(|s: String| ProbeKind::parse(&s).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::{heading, BisectArgs};
    use clap::Args;

    /// Every flag of the main command (with and without `bisect`: both are these) is in one of
    /// its sections, and `-h` shows exactly the first bisect's flags.
    #[test]
    fn every_flag_has_a_section_and_short_help_shows_the_first_bisect() {
        let bisect = BisectArgs::augment_args(clap::Command::new("bisect"));
        let mut n = 0;
        for a in bisect.get_arguments().filter(|a| !a.is_positional()) {
            let id = a.get_id().as_str();
            if id == "help" || id == "version" {
                continue;
            }
            n += 1;
            let h = a
                .get_help_heading()
                .unwrap_or_else(|| panic!("{id}: in no section"));
            assert!(heading::ALL.contains(&h), "{id}: {h}");
            assert_eq!(
                a.is_hide_short_help_set(),
                !super::FIRST_BISECT.contains(&id),
                "{id} ({h})"
            );
            if heading::LONG_ONLY.contains(&h) {
                assert!(a.is_hide_short_help_set(), "{id} ({h}) is for CI or GitHub");
            }
        }
        assert!(n > 40, "{n} flags");
    }
}
