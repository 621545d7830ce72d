//! The probers a matrix cell runs with, and the toolchain facts they need from an image.
//! Separate from the cell loop because this is where a configuration becomes commands
//! (launcher sharing, the launcher's veto on verdicts, `hipconfig`), not where it is run.

use crate::core::outcome::Outcome;
use crate::probe::launch::{Cmd, Launcher, ShellJob};
use crate::probe::{Phase, ProbeReport, ProbeRequest, Prober};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// Shares one launcher (and its cached provenance) between the probers of many cells.
pub(super) struct Shared(pub(super) Arc<dyn Launcher>);

impl Launcher for Shared {
    fn identity(&self) -> String {
        self.0.identity()
    }
    fn command(&self, job: &ShellJob) -> Cmd {
        self.0.command(job)
    }
    fn cleanup(&self, job: &ShellJob) {
        self.0.cleanup(job)
    }
    fn provenance(&self) -> BTreeMap<String, String> {
        self.0.provenance()
    }
    fn infra_failure(&self, exit_code: Option<i32>, output: &str) -> Option<String> {
        self.0.infra_failure(exit_code, output)
    }
}

/// A prober whose launcher may veto its verdict: a step that "failed" because the engine did
/// (exit 125 with the engine's error, a full disk) is an `InfraError`, whatever the prober
/// concluded from the exit code alone.
pub struct InfraAware {
    pub(super) inner: Box<dyn Prober>,
    pub(super) launcher: Arc<dyn Launcher>,
    /// The configuration's environment: the script prober leaves its `env` out of its identity,
    /// but here it *is* the configuration (recipe arguments, launch settings, reproducer flags),
    /// so stored results of one configuration are never reused for another.
    pub(super) config_identity: String,
}

impl Prober for InfraAware {
    fn identity(&self) -> String {
        format!(
            "{}\nconfig:\n{}",
            self.inner.identity(),
            self.config_identity
        )
    }

    fn probe(&self, req: &ProbeRequest<'_>, phase: &dyn Fn(Phase)) -> ProbeReport {
        let mut report = self.inner.probe(req, phase);
        if !matches!(report.outcome, Outcome::InfraError | Outcome::Pass) {
            let why = self
                .launcher
                .infra_failure(report.exit_code, &report.output_tail)
                .or_else(|| {
                    crate::probe::container::disk_full(&report.output_tail)
                        .then(|| "disk full: no space left on device".to_string())
                });
            if let Some(why) = why {
                report.outcome = Outcome::InfraError;
                report.signature = Some(why);
            }
        }
        report
    }
}

/// A configuration whose prober could not be made (no image, engine unusable): every attempt
/// is an infrastructure error naming the cause, so the cell is retried and reported like any
/// other machinery failure instead of being special-cased.
pub(super) struct Unavailable(pub(super) String);

impl Prober for Unavailable {
    fn identity(&self) -> String {
        format!("unavailable: {}", self.0)
    }

    fn probe(&self, req: &ProbeRequest<'_>, _phase: &dyn Fn(Phase)) -> ProbeReport {
        ProbeReport::infra(self.0.clone(), req.log_path)
    }
}

/// `HIPCXX` and `HIP_PATH` as `hipconfig` reports them where `launcher` runs (an image or the
/// host): ROCm versions differ in where clang lives, and a recipe must not guess.
pub fn hipconfig_env(launcher: &dyn Launcher) -> Result<Vec<(String, String)>, String> {
    let key = launcher.identity();
    let dir = tempfile::tempdir().map_err(|e| format!("temp dir: {e}"))?;
    let job = ShellJob {
        script: "echo \"HIPCXX=$(hipconfig -l)/clang\"; echo \"HIP_PATH=$(hipconfig -R)\"".into(),
        src: dir.path().into(),
        work: dir.path().into(),
        cwd_is_work: true,
        env: Vec::new(),
        timeout: Some(Duration::from_secs(120)),
        name: format!("setrows-hipconfig-{}", std::process::id()),
    };
    let log = dir.path().join("hipconfig.log");
    let r = crate::probe::exec::run(&launcher.command(&job), job.timeout, &log, &|| {
        launcher.cleanup(&job)
    })
    .map_err(|e| format!("running hipconfig in {key}: {e}"))?;
    let env = parse_hip_env(&r.output);
    if !r.success() || env.len() != 2 {
        return Err(format!(
            "hipconfig in {key} did not give HIPCXX and HIP_PATH (is this a ROCm image?): {}",
            r.output.trim()
        ));
    }
    Ok(env)
}

/// `HIPCXX=/abs/clang` and `HIP_PATH=/abs` lines; anything else (an empty `hipconfig` answer
/// gives `HIPCXX=/clang`) is left out, so the caller sees fewer than two and reports it.
pub fn parse_hip_env(output: &str) -> Vec<(String, String)> {
    output
        .lines()
        .filter_map(|l| l.trim().split_once('='))
        .filter(|(k, v)| ["HIPCXX", "HIP_PATH"].contains(k) && v.len() > 1 && v.starts_with('/'))
        .filter(|(k, v)| *k != "HIPCXX" || *v != "/clang")
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::launch::HostLauncher;

    #[test]
    fn hipconfig_answer_or_a_clear_error() {
        match crate::probe::script::which("hipconfig") {
            Some(_) => {
                let env = hipconfig_env(&HostLauncher).expect("hipconfig on PATH answers");
                assert_eq!(env.len(), 2, "{env:?}");
            }
            None => {
                let err = hipconfig_env(&HostLauncher).unwrap_err();
                assert!(err.contains("did not give HIPCXX and HIP_PATH"), "{err}");
            }
        }
        assert_eq!(
            parse_hip_env("HIPCXX=/opt/rocm/llvm/bin/clang\nHIP_PATH=/opt/rocm\nnoise\n"),
            vec![
                ("HIPCXX".to_string(), "/opt/rocm/llvm/bin/clang".to_string()),
                ("HIP_PATH".to_string(), "/opt/rocm".to_string())
            ]
        );
        assert!(parse_hip_env("HIPCXX=/clang\nHIP_PATH=\n").is_empty());
    }
}
