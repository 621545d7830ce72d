//! Where a shell step runs: on the host, or inside a container image. A launcher only turns a
//! `ShellJob` into an argv (and knows how to stop what it started); running the process,
//! timeouts and logs belong to `exec`. So the container path is the host path with a
//! different command line, and both are tested by the same code.
//!
//! Scripts never hard-code paths: they refer to the checkout as `$SRC` and to the persistent
//! build directory as `$WORK`. Each launcher sets both (the host to the real paths, a container
//! to its mount points), so one script runs unchanged in either place.

use std::path::PathBuf;
use std::time::Duration;

/// One shell step of a probe (a build or a test).
#[derive(Debug, Clone)]
pub struct ShellJob {
    /// Run through `sh -c`.
    pub script: String,
    /// The probed source checkout; mounted read-only in containers.
    pub src: PathBuf,
    /// Persistent, writable build directory (the step's working directory when `cwd_is_work`).
    pub work: PathBuf,
    /// Run in `work` instead of `src` (builds run in the build dir, `--script` in the checkout).
    pub cwd_is_work: bool,
    pub env: Vec<(String, String)>,
    pub timeout: Option<Duration>,
    /// Unique per run: container name, so a timeout can stop the container, not just the client.
    pub name: String,
}

/// A fully resolved process to start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cmd {
    pub argv: Vec<String>,
    pub cwd: PathBuf,
    pub env: Vec<(String, String)>,
}

pub trait Launcher: Send + Sync {
    /// Stable identity (e.g. `host`, `podman:setrows-rocm:6.4.1@sha256:...`) for the store key.
    fn identity(&self) -> String;
    /// The command that runs `job`.
    fn command(&self, job: &ShellJob) -> Cmd;
    /// `job.work` as the step sees it (its `$WORK`), for tools that take an absolute path from
    /// the environment rather than through the shell. No default: a container's answer differs.
    fn work_in_step(&self, job: &ShellJob) -> String;
    /// Called after a timeout or interruption killed the client process: stop what it started.
    fn cleanup(&self, _job: &ShellJob) {}
    /// Provenance facts for reports (image digest, compiler versions, GPU), best effort.
    fn provenance(&self) -> std::collections::BTreeMap<String, String> {
        Default::default()
    }
    /// After a step finished: `Some(reason)` when the launcher's own machinery failed (container
    /// engine error, full disk) rather than the step, so the prober reports `InfraError`, never
    /// a verdict. The host has no machinery of its own between us and the step.
    fn infra_failure(&self, _exit_code: Option<i32>, _output: &str) -> Option<String> {
        None
    }
}

/// Runs steps directly on this machine.
#[derive(Debug, Clone, Default)]
pub struct HostLauncher;

impl Launcher for HostLauncher {
    fn identity(&self) -> String {
        "host".into()
    }

    fn command(&self, job: &ShellJob) -> Cmd {
        Cmd {
            argv: vec!["sh".into(), "-c".into(), job.script.clone()],
            cwd: if job.cwd_is_work {
                job.work.clone()
            } else {
                job.src.clone()
            },
            env: with_dirs(
                &job.env,
                &job.src.to_string_lossy(),
                &job.work.to_string_lossy(),
            ),
        }
    }

    fn work_in_step(&self, job: &ShellJob) -> String {
        // Compilers run in subdirectories of the build: a relative path would point elsewhere.
        std::path::absolute(&job.work)
            .unwrap_or_else(|_| job.work.clone())
            .to_string_lossy()
            .into_owned()
    }
}

/// `env` plus `SRC` and `WORK` as seen by the step (launchers pass their own view of the paths).
pub fn with_dirs(env: &[(String, String)], src: &str, work: &str) -> Vec<(String, String)> {
    let mut out = env.to_vec();
    out.push(("SRC".into(), src.into()));
    out.push(("WORK".into(), work.into()));
    out
}
