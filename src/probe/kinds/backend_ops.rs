//! `--probe-kind backend-ops`: the probed tree's own `test-backend-ops` (issue 46), built
//! alone (its CMake target, with the tree's tests switch on) and run once per requested op
//! on the configuration's device; `core::kinds::backend_ops` reads what it printed.
//!
//! Nothing of this tool is compiled in: the program, its cases and its tolerances are the
//! tree's, so a result is what a ggml maintainer gets from the same line in the same tree,
//! and `BackendOpsRun::reproducer` is that line.

use crate::core::build::{Backend, Recipe, TreeFacts};
use crate::core::kinds::backend_ops::{self as ops, BackendOpsRun, MARKER, PROGRAM};
use crate::core::layout::Layout;
use crate::core::outcome::{Outcome, SkipScope};
use crate::core::shell;
use crate::probe::launch::Launcher;
use crate::probe::{Phase, ProbeReport, ProbeRequest, Prober, Reads};
use sha2::{Digest, Sha256};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// What one tree holds of the program: where its CMake project is, the switch that adds its
/// tests, the ops it knows, and how it names the HIP device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tree {
    /// The CMake project holding `tests/test-backend-ops.cpp` ("" is the checkout root).
    pub root: String,
    /// `GGML_BUILD_TESTS` (a ggml tree) or `LLAMA_BUILD_TESTS` (llama.cpp, lucebox's copy).
    pub tests_switch: &'static str,
    /// Op names `-o` takes (`core::kinds::backend_ops::op_names`); empty when `ggml.c` cannot be read.
    pub ops: Vec<String>,
    /// The text of the files defining `GGML_CUDA_NAME`.
    pub cuda_name_text: String,
}

/// Where `ggml.c` has been, relative to the ggml dir.
const GGML_C: [&str; 2] = ["src/ggml.c", "ggml.c"];
/// Where `GGML_CUDA_NAME` has been defined, relative to the ggml dir.
const CUDA_NAME: [&str; 3] = [
    "src/ggml-cuda/common.cuh",
    "src/ggml-cuda/vendors/hip.h",
    "src/ggml-cuda.cu",
];

/// The tree's program as `exists` and `read` (checkout-relative paths) see it: a checkout on
/// disk or a commit's tree in git, one rule for both. `Err`: why this tree has no
/// test-backend-ops to run.
pub fn tree(
    exists: impl Fn(&str) -> bool,
    read: impl Fn(&str) -> Option<String>,
) -> Result<Tree, String> {
    let layout = Layout::of(&exists);
    let (root, tests_switch) = match layout {
        Layout::Ggml => ("", "GGML_BUILD_TESTS"),
        Layout::LlamaCpp => ("", "LLAMA_BUILD_TESTS"),
        Layout::Lucebox => ("server/deps/llama.cpp", "LLAMA_BUILD_TESTS"),
    };
    let program = program_path(root);
    if !exists(&program) {
        return Err(format!(
            "no {program} in this tree (a {} layout): {PROGRAM} is not there to run",
            layout.name()
        ));
    }
    let mut ops = GGML_C
        .iter()
        .find_map(|p| read(&layout.path(p)))
        .map(|t| ops::op_names(&t))
        .unwrap_or_default();
    if !ops.is_empty() {
        // The program's own case names (`MUL_MAT_HADAMARD`) are `-o` names too.
        ops.extend(
            read(&program)
                .map(|t| ops::case_op_names(&t))
                .unwrap_or_default(),
        );
    }
    let cuda_name_text = CUDA_NAME
        .iter()
        .filter_map(|p| read(&layout.path(p)))
        .collect::<Vec<_>>()
        .join("\n");
    Ok(Tree {
        root: root.to_string(),
        tests_switch,
        ops,
        cuda_name_text,
    })
}

fn program_path(root: &str) -> String {
    match root {
        "" => format!("tests/{PROGRAM}.cpp"),
        r => format!("{r}/tests/{PROGRAM}.cpp"),
    }
}

/// The tree checked out at `checkout`.
pub fn tree_at(checkout: &Path) -> Result<Tree, String> {
    tree(
        |p| checkout.join(p).exists(),
        |p| std::fs::read_to_string(checkout.join(p)).ok(),
    )
}

/// Requested ops the tree has no name for: the refusal before any probe (the `--bad` tree)
/// and a commit's skip (an op added inside the range). `None` when all are known or the tree's
/// op list could not be read (the run itself then says whether the op ran).
pub fn unknown_ops(tree: &Tree, requested: &[String]) -> Option<String> {
    if tree.ops.is_empty() {
        return None;
    }
    // One short line: the closest op to what was typed, never the tree's two hundred names.
    let first = *ops::unknown_ops(requested, &tree.ops).first()?;
    let hint = match crate::core::spelling::closest(first, tree.ops.iter().map(String::as_str)) {
        Some(op) => format!("did you mean --op {op}?"),
        None => format!(
            "ops are spelled as ggml's GGML_OP_NAME table spells them ({} in this tree, e.g. SET_ROWS)",
            tree.ops.len()
        ),
    };
    Some(format!(
        "--op {first}: no such op in this tree's ggml; {hint}"
    ))
}

/// What the checkout's own commands read besides the build: the files `tree` opens, in every
/// layout, and what the bundled probes read to find the tree's spellings (`own_reads`).
pub fn own_reads() -> Vec<String> {
    let mut reads = crate::probe::own_reads();
    for l in [Layout::Lucebox, Layout::LlamaCpp, Layout::Ggml] {
        reads.extend(GGML_C.iter().chain(CUDA_NAME.iter()).map(|r| l.path(r)));
    }
    reads.extend(["", "server/deps/llama.cpp"].map(program_path));
    reads.sort();
    reads.dedup();
    reads
}

/// The probe of one configuration (`run::probers` makes it, per tree spelled as the tree
/// spells its CMake options).
pub struct BackendOpsProber {
    pub launcher: Arc<dyn Launcher>,
    /// The configuration's recipe, ccache as where the steps run.
    pub recipe: Recipe,
    pub ops: Vec<String>,
    pub op_params: Option<String>,
    /// CMake spellings for a checkout whose CMake files cannot be read.
    pub fallback: TreeFacts,
    /// `HIPCXX` / `HIP_PATH` of the build (HIP).
    pub build_env: Vec<(String, String)>,
    /// The test's environment (launch settings; `GGML_NO_BACKTRACE=1` is added).
    pub run_env: Vec<(String, String)>,
    pub run_timeout: Option<Duration>,
    pub build_only: bool,
}

impl BackendOpsProber {
    fn build_dir_name(&self, cmake_args: &[String], tree: &Tree) -> String {
        let mut h = Sha256::new();
        h.update(tree.root.as_bytes());
        for a in cmake_args
            .iter()
            .chain(self.build_env.iter().map(|(k, _)| k))
        {
            h.update([0]);
            h.update(a.as_bytes());
        }
        format!("backend-ops-{}", crate::core::id::cut(&h.finalize(), 12))
    }

    /// The configure + build of the program alone; paths only through `$SRC` and `$WORK`.
    pub fn build_script(&self, tree: &Tree, cmake_args: &[String], bdir: &str) -> String {
        let src = match tree.root.as_str() {
            "" => "$SRC".to_string(),
            r => format!("$SRC/{r}"),
        };
        let mut args: Vec<String> = cmake_args.iter().map(|a| shell::word(a)).collect();
        args.push(format!("-D{}=ON", tree.tests_switch));
        // Examples, tools and the server are not the program: left unconfigured, their
        // CMake files are not read (so their commits fold) and cannot break the configure.
        if tree.tests_switch == "GGML_BUILD_TESTS" {
            args.push("-DGGML_BUILD_EXAMPLES=OFF".into());
        } else {
            args.extend(
                ["-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_SERVER=OFF"].map(String::from),
            );
        }
        if tree.tests_switch == "LLAMA_BUILD_TESTS" {
            // The tests need nothing fetched; a tree that still reads LLAMA_CURL would look
            // for libcurl, which a build image need not have.
            args.push("-DLLAMA_CURL=OFF".into());
        }
        format!(
            "set -e\n{preamble}\
             [ -z \"${{CCACHE_STATSLOG:-}}\" ] || : > \"$CCACHE_STATSLOG\"\n\
             gen=''\n\
             if command -v ninja >/dev/null 2>&1 && [ ! -f \"$WORK/{bdir}/Makefile\" ]; then gen='-G Ninja'; fi\n\
             cmake -S \"{src}\" -B \"$WORK/{bdir}\" $gen {args}\n\
             cmake --build \"$WORK/{bdir}\" --target {PROGRAM}\n",
            preamble = match self.recipe.env_preamble() {
                "" => String::new(),
                p if self.build_env.is_empty() => format!("{p}\n"),
                _ => String::new(),
            },
            args = args.join(" "),
        )
    }

    /// One run per op (the lines of `core::kinds::backend_ops::run_args`, which the report
    /// prints too), each followed by its `MARKER` line with the exit status.
    pub fn run_script(&self, device: &str, bdir: &str) -> String {
        let mut s = format!(
            "prog=$(find \"$WORK/{bdir}\" -name {PROGRAM} -type f -perm -u+x | head -n 1)\n\
             [ -n \"$prog\" ] || {{ echo \"{MARKER} no {PROGRAM} was built\"; exit 125; }}\n\
             echo \"{MARKER} begin device={device} ops={}\"\n",
            self.ops.join(",")
        );
        for op in &self.ops {
            let args =
                crate::core::kinds::backend_ops::run_args(op, self.op_params.as_deref(), device);
            s.push_str(&format!(
                "\"$prog\" {}\necho \"{MARKER} op={op} exit=$?\"\n",
                shell::line(&args)
            ));
        }
        s.push_str("exit 0\n");
        s
    }
}

/// The section of a probe's log its test step wrote (after the last `begin` marker): what
/// `core::kinds::backend_ops::parse` reads, from a log on disk as from the step's output.
pub fn test_output(log: &str) -> Option<(&str, String)> {
    let begin = format!("{MARKER} begin device=");
    let at = log.rfind(&begin)?;
    let rest = &log[at + begin.len()..];
    let device = rest.split_whitespace().next()?.to_string();
    Some((rest, device))
}

/// What a stored probe's log says of its cases (the report's section); `None` when the log
/// holds no run of the program.
pub fn run_of_log(
    log: &str,
    ops_asked: &[String],
    op_params: Option<&str>,
) -> Option<BackendOpsRun> {
    let (text, device) = test_output(log)?;
    let runs = ops::parse(text);
    Some(
        ops::classify(
            &runs,
            ops_asked,
            &device,
            op_params,
            &crate::probe::repro::classify::is_gpu_fault,
        )
        .run,
    )
}

impl Prober for BackendOpsProber {
    fn identity(&self) -> String {
        let env = crate::probe::identity_env;
        let built = format!(
            "backend-ops:v1 recipe={} build_env=[{}] launcher={}",
            self.recipe.identity(),
            env(&self.build_env),
            self.launcher.identity()
        );
        if self.build_only {
            return format!("{built} build-only (no test runs)");
        }
        format!(
            "{built} ops={:?} op_params={:?} run_env=[{}] run_timeout_s={}",
            self.ops,
            self.op_params,
            env(&self.run_env),
            self.run_timeout.map(|t| t.as_secs()).unwrap_or(0)
        )
    }

    fn named_inputs(&self) -> Option<Vec<String>> {
        Some(own_reads())
    }

    fn reads(&self) -> Reads {
        Reads::Tree
    }

    fn probe(&self, req: &ProbeRequest<'_>, phase: &dyn Fn(Phase)) -> ProbeReport {
        let mut report = ProbeReport::infra("not run", req.log_path);
        report.provenance = self.launcher.provenance();
        let untestable = |mut r: ProbeReport, why: String| {
            r.outcome = Outcome::Untestable;
            r.skip_scope = SkipScope::Commit;
            r.signature = Some(why);
            r
        };
        let tree = match tree_at(req.checkout) {
            Ok(t) => t,
            Err(why) => return untestable(report, why),
        };
        if let Some(why) = unknown_ops(&tree, &self.ops) {
            return untestable(report, why);
        }
        if let Err(e) = std::fs::create_dir_all(req.build_dir) {
            report.signature = Some(format!("cannot create {}: {e}", req.build_dir.display()));
            return report;
        }
        let facts =
            crate::probe::tree_facts(req.checkout).unwrap_or_else(|_| self.fallback.clone());
        if let Some(why) = self.recipe.memory_unavailable(&facts) {
            return untestable(report, why);
        }
        let cmake_args = self.recipe.cmake_args(&facts);
        let bdir = self.build_dir_name(&cmake_args, &tree);
        let build = super::job(
            req,
            self.build_script(&tree, &cmake_args, &bdir),
            self.build_env.clone(),
            Some(Duration::from_secs(3600).max(self.run_timeout.unwrap_or_default())),
            "build",
        );
        let step = super::BuildStep {
            launcher: &self.launcher,
            ccache: self.recipe.ccache,
            build_only: self.build_only,
        };
        if !step.run(req, build, phase, &mut report) {
            return report;
        }
        let device = ops::device_name(self.recipe.backend, &tree.cuda_name_text);
        let mut env = self.run_env.clone();
        env.push(("GGML_NO_BACKTRACE".into(), "1".into()));
        phase(Phase::Test);
        let test = super::job(
            req,
            self.run_script(&device, &bdir),
            env,
            self.run_timeout,
            "test",
        );
        let Some(r) = crate::probe::test_step(
            &mut report,
            &*self.launcher,
            super::run(&self.launcher, &test, req.log_path, None),
        ) else {
            return report;
        };
        if r.exit_code == Some(125) {
            return untestable(report, format!("no {PROGRAM} was built"));
        }
        let text = test_output(&r.output).map_or(r.output.as_str(), |(t, _)| t);
        let c = ops::classify(
            &ops::parse(text),
            &self.ops,
            &device,
            self.op_params.as_deref(),
            &crate::probe::repro::classify::is_gpu_fault,
        );
        if r.timed_out {
            report.outcome = Outcome::Hang;
            report.signature = Some(format!(
                "timeout after {:.0}s ({} cases done)",
                self.run_timeout.map(|t| t.as_secs_f64()).unwrap_or(0.0),
                c.run.ops.iter().map(|o| o.passed + o.failed).sum::<u32>()
            ));
            report.output_tail = crate::probe::script::tail(&r.output);
            return report;
        }
        report.outcome = c.outcome;
        report.signature = c.signature;
        report.skip_scope = SkipScope::Commit;
        // What `--match` is asked of: the failing cases, one line each, so a regex naming one
        // case follows that case and not a passing line of another.
        report.output_tail = if c.match_text.is_empty() {
            crate::probe::script::tail(&r.output)
        } else {
            c.match_text
        };
        report
    }
}

/// The result's `backend_ops` section: each probe's cases, read back from its log
/// (`run_of_log`): a probe
/// answered by the store has its log too. A log gone (pruned work dir) leaves that probe out.
pub fn section(
    result: &crate::core::result::BisectResult,
    ops: &[String],
    op_params: Option<&str>,
) -> crate::core::result::BackendOpsSection {
    let probes = result
        .probes
        .iter()
        .filter_map(|pr| {
            let log = std::fs::read_to_string(&pr.log).ok()?;
            let run = run_of_log(&log, ops, op_params)?;
            Some(crate::core::result::BackendOpsProbe {
                sha: pr.sha.clone(),
                run,
            })
        })
        .collect();
    crate::core::result::BackendOpsSection {
        ops: ops.to_vec(),
        op_params: op_params.map(String::from),
        probes,
    }
}

/// The device a configuration's backend names in a tree (for the plan and the report).
pub fn device_of(backend: Backend, tree: &Tree) -> String {
    ops::device_name(backend, &tree.cuda_name_text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_program_is_found_in_each_layout_and_its_absence_is_a_reason() {
        let files = |list: &'static [&'static str]| move |p: &str| list.contains(&p);
        let ggml = tree(
            files(&[
                "include/ggml.h",
                "CMakeLists.txt",
                "tests/test-backend-ops.cpp",
            ]),
            |_| None,
        )
        .unwrap();
        assert_eq!(
            (ggml.root.as_str(), ggml.tests_switch),
            ("", "GGML_BUILD_TESTS")
        );
        let llama = tree(
            files(&[
                "ggml/include",
                "ggml/include/ggml.h",
                "ggml/CMakeLists.txt",
                "include/llama.h",
                "CMakeLists.txt",
                "tests/test-backend-ops.cpp",
            ]),
            |p| {
                (p == "ggml/src/ggml.c")
                    .then(|| "GGML_OP_NAME[X] = {\n\"NONE\", \"SET_ROWS\",\n};".to_string())
            },
        )
        .unwrap();
        assert_eq!(llama.tests_switch, "LLAMA_BUILD_TESTS");
        assert_eq!(llama.ops, ["SET_ROWS"]);
        let why = unknown_ops(&llama, &["set_rows".to_string()]).unwrap();
        assert_eq!(
            why,
            "--op set_rows: no such op in this tree's ggml; did you mean --op SET_ROWS?"
        );
        let none = tree(files(&["include/ggml.h", "CMakeLists.txt"]), |_| None).unwrap_err();
        assert!(none.contains("no tests/test-backend-ops.cpp"), "{none}");
    }

    #[test]
    fn the_test_step_runs_each_op_and_marks_its_exit() {
        let p = BackendOpsProber {
            launcher: Arc::new(crate::probe::launch::HostLauncher),
            recipe: Recipe::new(Backend::Cuda),
            ops: vec!["SET_ROWS".into(), "GET_ROWS".into()],
            op_params: Some("type=f16".into()),
            fallback: TreeFacts::default(),
            build_env: Vec::new(),
            run_env: Vec::new(),
            run_timeout: None,
            build_only: false,
        };
        let s = p.run_script("CUDA0", "b");
        assert!(s.contains("\"$prog\" test -o SET_ROWS -p type=f16 -b CUDA0\necho \"setrows-backend-ops: op=SET_ROWS exit=$?\""), "{s}");
        assert!(s.contains("-o GET_ROWS"), "{s}");
        let log = format!("cmake noise\n  NOT_A(case): OK\n{s}\nsetrows-backend-ops: begin device=CUDA0 ops=SET_ROWS\nBackend 1/1: CUDA0\n  Device description: x\n  SET_ROWS(type=f16,ne=[1,1,1,1]): OK\nsetrows-backend-ops: op=SET_ROWS exit=0\n");
        let run = run_of_log(&log, &["SET_ROWS".to_string()], None).unwrap();
        assert_eq!(run.device, "CUDA0");
        assert_eq!(run.ops[0].passed, 1);
    }
}
