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
    /// The build step, whose compiles go through this run's own ccache
    /// (`probe::ccache::StatsLog::for_step` sets it). No other step sees a cache.
    pub ccache: bool,
    /// That cache's environment for a build step on the host (set with `ccache`; a container
    /// launcher mounts its own instead).
    pub host_ccache_env: Vec<(String, String)>,
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

/// The environment facts upstream maintainers ask for first (kernel; ROCm, HIP runtime and
/// amdgpu driver; CUDA toolkit, NVIDIA driver and the CUDA version that driver supports;
/// compiler; GPU), printed by one shell script that runs the same on the host and inside an
/// image: one `@@key` header per section, and a tool that is absent prints nothing, so its
/// section is left out. `/sys/module/amdgpu/version` exists only for the DKMS driver; Debian's
/// ROCm has no `/opt/rocm/.info/version`, so its images record their ROCm in `/etc/setrows-rocm`.
pub const ENVIRONMENT_SCRIPT: &str = r#"echo @@kernel; uname -r
echo @@rocm; head -n 1 /opt/rocm/.info/version 2>/dev/null || sed -n 's/^rocm=//p' /etc/setrows-rocm 2>/dev/null
echo @@hip; hipconfig --version 2>/dev/null; echo
echo @@amdgpu_driver; cat /sys/module/amdgpu/version 2>/dev/null
echo @@nvcc; nvcc --version 2>/dev/null | grep -i release
echo @@cuda_driver; nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1
echo @@cuda_driver_api; nvidia-smi 2>/dev/null | grep -o 'CUDA Version: [0-9.]*' | head -n 1 | sed 's/CUDA Version: //'
echo @@compiler; (c++ --version || cc --version) 2>/dev/null | head -n 1
echo @@gpu; { rocminfo 2>/dev/null | awk '/^ *Name:/{n=$2} /Marketing Name:/{sub(/^ *Marketing Name: */,""); m=$0} /Device Type: *GPU/{print n " (" m ")"; exit}'; nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1; }
true"#;

/// Parses the `@@key` sections; empty sections (tool absent) are left out.
pub fn parse_provenance(output: &str) -> std::collections::BTreeMap<String, String> {
    let mut out = std::collections::BTreeMap::new();
    let mut key: Option<String> = None;
    let mut val: Vec<&str> = Vec::new();
    let mut flush = |key: &Option<String>, val: &mut Vec<&str>| {
        if let Some(k) = key {
            let v = val.join("; ").trim().to_string();
            if !v.is_empty() {
                out.insert(k.clone(), v);
            }
        }
        val.clear();
    };
    for line in output.lines() {
        if let Some(k) = line.strip_prefix("@@") {
            flush(&key, &mut val);
            key = Some(k.trim().to_string());
        } else if !line.trim().is_empty() {
            val.push(line.trim());
        }
    }
    flush(&key, &mut val);
    out
}

/// Runs steps directly on this machine.
#[derive(Debug, Clone, Default)]
pub struct HostLauncher;

impl Launcher for HostLauncher {
    fn identity(&self) -> String {
        "host".into()
    }

    fn command(&self, job: &ShellJob) -> Cmd {
        let mut env = with_dirs(
            &job.env,
            &job.src.to_string_lossy(),
            &job.work.to_string_lossy(),
        );
        env.extend(job.host_ccache_env.iter().cloned());
        Cmd {
            argv: vec!["sh".into(), "-c".into(), job.script.clone()],
            cwd: if job.cwd_is_work {
                job.work.clone()
            } else {
                job.src.clone()
            },
            env,
        }
    }

    /// The host's drivers and runtimes, read once per process (they do not change under a run).
    fn provenance(&self) -> std::collections::BTreeMap<String, String> {
        static FACTS: std::sync::OnceLock<std::collections::BTreeMap<String, String>> =
            std::sync::OnceLock::new();
        FACTS
            .get_or_init(|| {
                std::process::Command::new("sh")
                    .args(["-c", ENVIRONMENT_SCRIPT])
                    .stdin(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .output()
                    .map(|o| parse_provenance(&String::from_utf8_lossy(&o.stdout)))
                    .unwrap_or_default()
            })
            .clone()
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The script's real output on an H200 host (the evidence file says where it ran): the
    /// driver, the CUDA version it supports and the toolkit come out as their own facts.
    #[test]
    fn cuda_driver_and_runtime_are_read_from_a_real_host() {
        let text = include_str!("../../repro-kernels/evidence/h200-environment-facts.txt");
        let p = parse_provenance(text);
        assert_eq!(p["cuda_driver"], "580.159.04");
        assert_eq!(p["cuda_driver_api"], "13.0");
        assert!(p["nvcc"].contains("release 13.0"), "{p:?}");
        assert_eq!(p["gpu"], "NVIDIA H200");
        // Absent tools leave no empty facts behind.
        for k in ["rocm", "hip", "amdgpu_driver"] {
            assert!(!p.contains_key(k), "{p:?}");
        }
    }

    /// On this machine: the script runs, and the kernel is always there.
    #[test]
    fn the_host_reports_at_least_its_kernel() {
        let p = HostLauncher.provenance();
        assert!(p.get("kernel").is_some_and(|k| !k.is_empty()), "{p:?}");
    }
}
