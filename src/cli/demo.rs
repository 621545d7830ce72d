//! `setrows-bisect demo`: a tour with no setup and no network. It writes a real git repository
//! (a C ring-buffer library with a CMake build and a test program, a few hundred commits, a
//! behaviour change planted at a commit picked by the seed, a range where the build is broken)
//! into a temp dir and bisects it with the real pipeline: CMake builds through `--build`, the
//! test's own exit code through `--script`. At the end it reveals where the change was planted,
//! so the answer can be checked rather than trusted.
//!
//! The generator is public (`history`) so integration tests and benchmarks build the same
//! repositories.

pub mod history;

use crate::core::config::{Flags, Resolved};
use crate::core::evidence::Policy;
use crate::core::outcome::{Predicate, Regress};
use crate::core::search::EndpointCheck;
use crate::error::{CliError, Exit};
use crate::probe::container::EngineChoice;
use crate::run::bisect::{Chosen, Mode, Naming, Request, Subtree};
use clap::Args;
use history::{HistorySpec, Layout};
use std::path::{Path, PathBuf};

/// The demo's history length unless --commits says otherwise (the repeat hint omits it then).
const DEFAULT_COMMITS: usize = 300;

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Picks where the change is planted (default: from the clock; printed so a run can be repeated).
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Number of commits in the generated history (40 to 100000).
    #[arg(long, allow_negative_numbers = true, value_name = "N", default_value_t = DEFAULT_COMMITS, value_parser = |s: &str| crate::cli::ranges::int(s, 40, 100_000).map(|v| v as usize))]
    pub commits: usize,
    /// Keep the repository (and the work dir) here instead of a temp dir.
    #[arg(value_parser = crate::cli::output::absolute, long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Only generate the repository (with --out), print its endpoints and stop.
    #[arg(long, requires = "out")]
    pub generate_only: bool,
    /// `--jobs`.
    #[command(flatten)]
    pub jobs: crate::cli::flags::JobsFlag,
}

/// The build command the demo (and its benchmarks) use: configure once, then incremental.
/// "Configured" is the generator's own file, written last: a run stopped during cmake's
/// configure leaves a CMakeCache.txt without it, and the next build must configure again.
pub fn build_command() -> String {
    let gen = if crate::probe::exec::which("ninja").is_some() {
        " -G Ninja"
    } else {
        ""
    };
    format!(
        "test -f build.ninja -o -f Makefile || cmake -S \"$SRC\" -B .{gen} -DCMAKE_BUILD_TYPE=Release >/dev/null; cmake --build . --target ringbuf_test"
    )
}

/// The test command: the test program's own exit code.
pub const TEST_COMMAND: &str = "\"$WORK/ringbuf_test\"";

/// The bisect of a generated repository, as a request: the demo's build and test commands on
/// the host, the first-parent chain of the whole tree, one run per commit.
pub fn request(
    repo: &Path,
    good: &str,
    bad: &str,
    work_dir: &Path,
    jobs: crate::core::jobs::Jobs,
) -> anyhow::Result<Request> {
    use crate::run::bisect::{check, git_error};
    let git = crate::run::git::open(repo).map_err(git_error)?;
    let (good, bad) = check::revisions(&git, (good, bad), ("--good", "--bad"))?;
    let mut cfg = Resolved::for_backend(crate::core::build::Backend::Cpu);
    let _ = cfg.apply(&Flags {
        // As `--build CMD --script CMD` give it.
        probe: crate::cli::flags::chosen_probe(
            Some(TEST_COMMAND),
            Some(&build_command()),
            None,
            &crate::cli::flags::OpsFlag::default(),
        )?,
        timeout_s: Some(60.0),
        ..Flags::default()
    });
    let chosen = Chosen::new(
        cfg,
        Naming {
            engine: Some(EngineChoice::None),
            image_flag: false,
            named: false,
            configured: false,
            overrides: Vec::new(),
            args_from: String::new(),
        },
    );
    Ok(Request {
        repo: repo.to_path_buf(),
        good,
        bad,
        first_parent: true,
        path: Subtree::Auto,
        predicate: Predicate::new(Regress::Error, None),
        runs: Policy::Repeat(1),
        jobs,
        endpoints: EndpointCheck::First,
        validate: 0,
        compare_good: false,
        work_dir: work_dir.to_path_buf(),
        chosen,
        mode: Mode::Run,
        resume: None,
    })
}

pub fn run(args: DemoArgs) -> anyhow::Result<Exit> {
    if crate::probe::exec::which("cmake").is_none() {
        return Err(CliError::usage(
            "the demo builds a C library with CMake, and cmake is not on PATH; run ./scripts/demo.sh (it installs cmake) or install cmake",
        ));
    }
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs() % 100_000)
            .unwrap_or(1)
    });
    let tmp;
    let root = match &args.out {
        Some(d) => d.clone(),
        None => {
            tmp = tempfile::Builder::new()
                .prefix("setrows-demo-")
                .tempdir()
                .map_err(|e| CliError::infra(format!("cannot create a temp dir: {e}")))?;
            tmp.path().to_path_buf()
        }
    };
    let repo = root.join("ringbuf");
    if repo.exists() {
        return Err(CliError::usage(format!(
            "{} already exists; pass an empty --out DIR",
            repo.display()
        )));
    }
    let mut spec = HistorySpec::from_seed(seed, args.commits);
    spec.layout = Layout::Flat;
    let h = history::generate(&repo, &spec)
        .map_err(|e| CliError::infra(format!("generating the demo repository: {e}")))?;
    let (good, bad) = (&h.shas[0], &h.shas[h.shas.len() - 1]);
    errln!(
        "demo: generated {} commits of a C ring-buffer library in {} (seed {seed}; the planted change is revealed at the end)",
        h.shas.len(),
        repo.display()
    );
    if args.generate_only {
        // Shell-quoted KEY=VALUE lines: `eval "$(setrows-bisect demo --generate-only ...)"`.
        let q = crate::core::shell::word;
        outln!(
            "REPO={}\nGOOD={good}\nBAD={bad}\nBUILD={}\nTEST={}",
            q(&repo.to_string_lossy()),
            q(&build_command()),
            q(TEST_COMMAND)
        );
        return Ok(Exit::Ok);
    }
    errln!(
        "demo: setrows-bisect --repo {} --good {} --bad {} --build '{}' --script '{}'\n",
        repo.display(),
        crate::core::range::short_sha(good),
        crate::core::range::short_sha(bad),
        build_command(),
        TEST_COMMAND
    );
    let json = root.join("result.json");
    let req = request(&repo, good, bad, &root.join("work"), args.jobs.jobs)?;
    crate::probe::exec::install_interrupt_handler();
    let github = crate::cli::report::BisectPostArgs::default();
    let outputs = crate::cli::bisect::Outputs {
        report: None,
        json: Some(&json),
        print: true,
        github: &github,
    };
    let (code, _) = crate::cli::bisect::run_request(&req, &outputs)?;
    let result = std::fs::read_to_string(&json)
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok());
    let field = |k: &str| {
        result
            .as_ref()
            .and_then(|v| v[k].as_str().map(str::to_string))
    };
    let found = field("first_bad");
    let planted = &h.shas[spec.bug_at];
    let broken = spec
        .broken
        .map(|(a, b)| {
            format!(
                "; the build was broken for commits {a}..{} (skipped, never a verdict)",
                b - 1
            )
        })
        .unwrap_or_default();
    outln!(
        "demo: the change was planted at commit {} of {} ({}){broken}.",
        spec.bug_at,
        h.shas.len(),
        &planted[..12]
    );
    let found_it = found.as_deref() == Some(planted.as_str());
    if found_it {
        outln!("demo: the bisect found exactly that commit.");
    } else {
        outln!(
            "demo: the bisect did NOT find it (got {}); please report this.",
            found.as_deref().unwrap_or("no commit")
        );
    }
    outln!(
        "{}",
        where_it_went(&args, seed, &root, field("id").as_deref())
    );
    if !found_it {
        return Ok(Exit::Inconclusive);
    }
    Ok(code)
}

/// The last line: the report above ends with `show ID` for the default work dir, which is
/// not where the demo's run lives, and without --out the temp dir is deleted on return. So
/// the demo says what will actually work: `show` with the kept work dir, or the same run again
/// with --out. Commands name the binary that is running, so they work where `setrows-bisect`
/// is not on PATH (scripts/demo.sh runs it through `cargo run`).
fn where_it_went(args: &DemoArgs, seed: u64, root: &Path, id: Option<&str>) -> String {
    let q = crate::core::shell::word;
    // A bare name was found on PATH and works anywhere; a path (`cargo run` passes one relative
    // to the repository root demo.sh changes to) is made absolute so it works from any cwd.
    let me = match std::env::args_os().next() {
        Some(a) if !a.to_string_lossy().contains('/') => q(&a.to_string_lossy()),
        _ => std::env::current_exe()
            .map(|p| q(&p.to_string_lossy()))
            .unwrap_or_else(|_| "setrows-bisect".into()),
    };
    if args.out.is_some() {
        let again = id
            .map(|id| {
                format!(
                    "; its report again: {me} show {id} --work-dir {}",
                    q(&root.join("work").to_string_lossy())
                )
            })
            .unwrap_or_default();
        return format!(
            "demo: repository and work dir kept under {}{again}",
            root.display()
        );
    }
    let mut repeat = format!("{me} demo --seed {seed}");
    if args.commits != DEFAULT_COMMITS {
        repeat.push_str(&format!(" --commits {}", args.commits));
    }
    if args.jobs.jobs != crate::core::jobs::Jobs::Fixed(1) {
        repeat.push_str(&format!(" --jobs {}", args.jobs.jobs));
    }
    format!(
        "demo: the temp dir (repository, logs, result store) is removed now, and with it the log \
         and `show` above; the same run, kept: {repeat} --out DIR"
    )
}
