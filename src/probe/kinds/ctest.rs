//! `--probe-kind ctest` (issue 57): the probed tree configured with its tests switched on,
//! built, and `ctest -R REGEX --output-on-failure` run in its build tree on the
//! configuration's recipe; `core::kinds::ctest` reads what ctest printed. Nothing of this tool
//! is compiled in: the tests are the tree's, so a result is what its maintainers get from the
//! same line in the same tree.

use crate::core::build::{Recipe, TreeFacts};
use crate::core::kinds::ctest::{self, MARKER, PROGRAM};
use crate::core::layout::Layout;
use crate::core::outcome::{Outcome, SkipScope};
use crate::core::shell;
use crate::probe::launch::Launcher;
use crate::probe::{Phase, ProbeReport, ProbeRequest, Prober, Reads};
use sha2::{Digest, Sha256};
use std::sync::Arc;
use std::time::Duration;

/// The probe of one configuration (`run::probers` makes it).
pub struct CtestProber {
    pub launcher: Arc<dyn Launcher>,
    /// The configuration's recipe, ccache as where the steps run.
    pub recipe: Recipe,
    /// `-R`: the tests to run.
    pub regex: String,
    /// CMake spellings for a checkout whose CMake files cannot be read.
    pub fallback: TreeFacts,
    /// `HIPCXX` / `HIP_PATH` of the build (HIP).
    pub build_env: Vec<(String, String)>,
    /// The tests' environment (launch settings; `GGML_NO_BACKTRACE=1` is added).
    pub run_env: Vec<(String, String)>,
    pub run_timeout: Option<Duration>,
    pub build_only: bool,
}

/// The switch that adds a tree's tests: ggml's, or llama.cpp's (lucebox's copy included).
fn tests_switches(layout: Layout) -> &'static [&'static str] {
    match layout {
        Layout::Ggml => &["-DGGML_BUILD_TESTS=ON", "-DGGML_BUILD_EXAMPLES=OFF"],
        Layout::LlamaCpp | Layout::Lucebox => &[
            "-DLLAMA_BUILD_TESTS=ON",
            "-DLLAMA_BUILD_EXAMPLES=OFF",
            "-DLLAMA_BUILD_SERVER=OFF",
            // The tests need nothing fetched; a tree that still reads LLAMA_CURL would look
            // for libcurl, which a build image need not have.
            "-DLLAMA_CURL=OFF",
        ],
    }
}

impl CtestProber {
    fn build_dir_name(&self, cmake_args: &[String]) -> String {
        let mut h = Sha256::new();
        for a in cmake_args
            .iter()
            .chain(self.build_env.iter().map(|(k, _)| k))
        {
            h.update([0]);
            h.update(a.as_bytes());
        }
        format!("ctest-{}", crate::core::id::cut(&h.finalize(), 12))
    }

    /// The configure + build of the tree with its tests; paths only through `$SRC`, `$WORK`.
    pub fn build_script(&self, cmake_args: &[String], bdir: &str) -> String {
        let args: Vec<String> = cmake_args.iter().map(|a| shell::word(a)).collect();
        format!(
            "set -e\n{preamble}\
             [ -z \"${{CCACHE_STATSLOG:-}}\" ] || : > \"$CCACHE_STATSLOG\"\n\
             gen=''\n\
             if command -v ninja >/dev/null 2>&1 && [ ! -f \"$WORK/{bdir}/Makefile\" ]; then gen='-G Ninja'; fi\n\
             cmake -S \"$SRC\" -B \"$WORK/{bdir}\" $gen {args}\n\
             cmake --build \"$WORK/{bdir}\"\n",
            preamble = match self.recipe.env_preamble() {
                "" => String::new(),
                p if self.build_env.is_empty() => format!("{p}\n"),
                _ => String::new(),
            },
            args = args.join(" "),
        )
    }

    /// ctest in the build tree (`core::kinds::ctest::run_args`, the line the report prints
    /// too), then the `MARKER` line with its exit status.
    pub fn run_script(&self, bdir: &str) -> String {
        format!(
            "cd \"$WORK/{bdir}\"\n{PROGRAM} {}\necho \"{MARKER} exit=$?\"\nexit 0\n",
            shell::line(&ctest::run_args(&self.regex))
        )
    }
}

impl Prober for CtestProber {
    fn identity(&self) -> String {
        let env = crate::probe::identity_env;
        let built = format!(
            "ctest:v1 recipe={} build_env=[{}] launcher={}",
            self.recipe.identity(),
            env(&self.build_env),
            self.launcher.identity()
        );
        if self.build_only {
            return format!("{built} build-only (no test runs)");
        }
        format!(
            "{built} regex={:?} run_env=[{}] run_timeout_s={}",
            self.regex,
            env(&self.run_env),
            self.run_timeout.map(|t| t.as_secs()).unwrap_or(0)
        )
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
        if !req.checkout.join("CMakeLists.txt").exists() {
            return untestable(
                report,
                "no CMakeLists.txt in this tree: no ctest suite".into(),
            );
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
        let mut cmake_args = self.recipe.cmake_args(&facts);
        cmake_args.extend(
            tests_switches(crate::probe::layout(req.checkout))
                .iter()
                .map(|s| s.to_string()),
        );
        let bdir = self.build_dir_name(&cmake_args);
        let build = super::job(
            req,
            self.build_script(&cmake_args, &bdir),
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
        let mut env = self.run_env.clone();
        env.push(("GGML_NO_BACKTRACE".into(), "1".into()));
        phase(Phase::Test);
        let test = super::job(req, self.run_script(&bdir), env, self.run_timeout, "test");
        let Some(r) = crate::probe::test_step(
            &mut report,
            &*self.launcher,
            super::run(&self.launcher, &test, req.log_path, None),
        ) else {
            return report;
        };
        if r.output.contains(&format!("{MARKER} exit=127")) {
            report.signature = Some(format!("{PROGRAM} is not installed where the steps run"));
            return report;
        }
        if r.timed_out {
            report.outcome = Outcome::Hang;
            report.signature = Some(format!(
                "timeout after {:.0}s",
                self.run_timeout.map(|t| t.as_secs_f64()).unwrap_or(0.0)
            ));
            report.output_tail = crate::probe::script::tail(&r.output);
            return report;
        }
        let c = ctest::classify(&r.output, &self.regex);
        report.outcome = c.outcome;
        report.signature = c.signature;
        report.skip_scope = SkipScope::Commit;
        // What `--match` is asked of: the failing tests, one line each.
        report.output_tail = if c.match_text.is_empty() {
            crate::probe::script::tail(&r.output)
        } else {
            c.match_text
        };
        report
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_test_step_runs_ctest_in_the_build_tree_and_marks_its_exit() {
        let p = CtestProber {
            launcher: Arc::new(crate::probe::launch::HostLauncher),
            recipe: Recipe::new(crate::core::build::Backend::Cpu),
            regex: "^test-rope$".into(),
            fallback: TreeFacts::default(),
            build_env: Vec::new(),
            run_env: Vec::new(),
            run_timeout: None,
            build_only: false,
        };
        let s = p.run_script("b");
        assert_eq!(
            s,
            "cd \"$WORK/b\"\nctest -R '^test-rope$' --output-on-failure\necho \"setrows-ctest: exit=$?\"\nexit 0\n"
        );
        assert!(p.identity().contains("regex=\"^test-rope$\""));
    }
}
