//! The probers of the kinds whose program is the probed tree's own (issue 57), one file per
//! kind as `core::kinds` defines it; the prober table (`run::probers`) makes each from a
//! configuration. The bundled reproducers' prober is `probe::repro`, a script's
//! `probe::script`.

pub mod backend_ops;
pub mod ctest;

use crate::core::ccache::Ccache;
use crate::core::outcome::Outcome;
use crate::probe::ccache::StatsLog;
use crate::probe::launch::{Launcher, ShellJob};
use crate::probe::{build_steps, exec, Phase, ProbeReport, ProbeRequest};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// A step of a kind that builds and runs the probed tree's own program: one shell job in the
/// build dir, named after the probe's run.
fn job(
    req: &ProbeRequest<'_>,
    script: String,
    env: Vec<(String, String)>,
    timeout: Option<Duration>,
    step: &str,
) -> ShellJob {
    ShellJob {
        script,
        src: req.checkout.to_path_buf(),
        work: req.build_dir.to_path_buf(),
        cwd_is_work: true,
        env,
        timeout,
        name: format!("{}-{step}", req.run_name),
        ccache: false,
        host_ccache_env: Vec::new(),
    }
}

/// Runs a step through the launcher, which cleans up after it (a container is removed).
fn run(
    launcher: &Arc<dyn Launcher>,
    job: &ShellJob,
    log: &Path,
    watch: Option<&dyn Fn(&str)>,
) -> std::io::Result<exec::RunResult> {
    let cmd = launcher.command(job);
    let (l, j) = (launcher.clone(), job.clone());
    exec::run_watched(&cmd, job.timeout, log, &move || l.cleanup(&j), watch)
}

/// The build step, one way for every kind that builds the tree: what a build that could not
/// run, failed, or was all the probe asked for (`--build-only`) says in the report is the same
/// whichever program the test step would run.
struct BuildStep<'a> {
    launcher: &'a Arc<dyn Launcher>,
    ccache: bool,
    build_only: bool,
}

impl BuildStep<'_> {
    /// Whether the test step comes next; if not, `report` is final.
    fn run(
        &self,
        req: &ProbeRequest<'_>,
        mut build: ShellJob,
        phase: &dyn Fn(Phase),
        report: &mut ProbeReport,
    ) -> bool {
        phase(Phase::Build);
        let stats = self
            .ccache
            .then(|| StatsLog::for_step(&**self.launcher, &mut build));
        let steps = build_steps(phase);
        let ran = run(self.launcher, &build, req.log_path, Some(&steps));
        report.ccache = Some(match stats {
            Some(log) => log.take().unwrap_or(Ccache::Used { hits: 0, misses: 0 }),
            None => Ccache::NotInstalled,
        });
        let r = match ran {
            Err(e) => {
                report.signature = Some(format!("build step could not run: {e}"));
                return false;
            }
            Ok(r) => r,
        };
        if let Some(why) = crate::probe::step_infra_failure(&**self.launcher, &r) {
            report.signature = Some(format!("build step: {why}"));
            return false;
        }
        report.build_s = r.duration.as_secs_f64();
        report.duration_s = report.build_s;
        if !r.success() {
            report.outcome = Outcome::BuildFailed;
            report.exit_code = r.exit_code;
            report.signal = r.signal;
            report.signature = crate::probe::script::portable_signature(&r.output, req.checkout);
            report.output_tail = crate::probe::script::tail(&r.output);
            return false;
        }
        if self.build_only {
            report.outcome = Outcome::Built;
            report.signature = None;
            report.output_tail = crate::probe::script::tail(&r.output);
            return false;
        }
        true
    }
}

/// Each kind's own section of a bisection's result, read back from its probes' logs (a
/// probe answered by the store has its log too): test-backend-ops' cases per probe.
pub fn add_sections(
    result: &mut crate::core::result::BisectResult,
    probe: &crate::core::kinds::ProbeSpec,
) {
    if let Some((ops, op_params)) = probe.backend_ops() {
        result.backend_ops = Some(backend_ops::section(result, ops, op_params));
    }
}
